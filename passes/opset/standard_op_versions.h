// ai.ampc versions of the standard ops that have no bfloat16 up to opset 17 (ONNX 1.12) but that
// BF16 training needs: Conv, MaxPool, AveragePool and GlobalAveragePool (ONNX adds bfloat16 to
// them at opset 22). Each has the standard op's inputs, outputs, attributes and shape inference,
// with its float type variable T restricted to tensor(bfloat16). docs/autocast.md, "Schema
// legality": the autocast pass runs such a node as its ai.ampc version instead of in FP32. ampc's
// kernels run it in BF16 (FP32 accumulation); its model-local function casts to FP32, runs the
// standard op and rounds the result to BF16, so any runtime that inlines functions runs it too.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "passes/opset/function_text.h"

namespace ampc {

// The ops that have one.
const std::vector<std::string>& AmpcVersionOps();

// Whether `node` (default domain) has an ai.ampc version for elem type `dtype`.
bool HasAmpcVersion(const onnx::NodeProto& node, int dtype);
// Whether `node` is one of the ai.ampc versions.
bool IsAmpcVersion(const onnx::NodeProto& node);

// The default-domain opset whose op each version is (their schemas are copies of these).
inline constexpr int kAmpcVersionStandardOpset = 17;

// Drops the node's trailing empty inputs (an explicit "" bias is no bias) and states the
// attributes it leaves at their defaults: the schema's defaults (group, auto_pad,
// ceil_mode, ...), and where the number of spatial dims is known (from Conv's weight `weight`, a
// pool's kernel_shape or the input `input`; either type null or without a shape when unknown)
// strides and dilations as ones and pads as zeros (unless auto_pad pads). Conv's kernel_shape,
// which must equal the weight's dims, is left out. Nodes of one op then state the same
// attributes, as one model-local function needs.
void NormalizeAmpcVersion(onnx::NodeProto& node, const onnx::TypeProto* input,
                          const onnx::TypeProto* weight);

// What the node's model-local function depends on besides the op: its arity and the names of the
// attributes it states (the body references exactly those; libonnx 1.12 expands a reference to a
// missing attribute as an empty one). Nodes of one op share one function, so they must agree.
// In a training model every MaxPool states its indices (the step's MaxPoolGrad reads them).
std::string AmpcVersionSignature(const onnx::NodeProto& node, bool training);

// Registers the schemas (called by RegisterAmpcSchemas).
void RegisterAmpcVersionSchemas();

// The body of ai.ampc version `node`; NotFound for any other node.
absl::StatusOr<FunctionText> AmpcVersionBody(const onnx::NodeProto& node);

// Gives the model the ai.ampc opset import (and IR version 8, the first with functions) and one
// model-local function per op of the ai.ampc versions its nodes (subgraphs included) use, over
// its default-domain opset (13 or later), rebuilding in place any function of that name the
// model had. InvalidArgument naming the node when two nodes of one op differ in signature.
absl::Status AddAmpcVersionFunctions(onnx::ModelProto& model);

}  // namespace ampc
