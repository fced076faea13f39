// Small helpers the model builders share: value infos, seeded initializers, attributes, layers.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace ampc::models {

// Dims < 0 are symbolic ("N").
void AddTensorValue(onnx::ValueInfoProto* value, const std::string& name, int elem_type,
                    const std::vector<int64_t>& dims);

// A float initializer filled with U(-bound, bound) from `rng`, stored as raw_data (little endian).
void AddUniformInitializer(onnx::GraphProto* graph, const std::string& name,
                           const std::vector<int64_t>& dims, float bound, std::mt19937& rng);

// A float initializer with every element `value` (dims {} is a scalar).
void AddFilledInitializer(onnx::GraphProto* graph, const std::string& name,
                          const std::vector<int64_t>& dims, float value);

// A Constant node (a float tensor of rank 0) writing the scalar `name`: a literal of the forward
// code, as PyTorch exports one, not an initializer (training would take that for a parameter).
void AddScalarConstant(onnx::GraphProto* graph, const std::string& name, float value);

// A 1-D int64 initializer, e.g. the shape input of a Reshape.
void AddInt64Initializer(onnx::GraphProto* graph, const std::string& name,
                         const std::vector<int64_t>& values);

onnx::NodeProto* AddNode(onnx::GraphProto* graph, const std::string& op,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::string& name);

void AddIntAttribute(onnx::NodeProto* node, const std::string& name, int64_t value);
void AddIntsAttribute(onnx::NodeProto* node, const std::string& name,
                      const std::vector<int64_t>& values);
void AddFloatAttribute(onnx::NodeProto* node, const std::string& name, float value);

// nn.Linear as PyTorch exports it for a 2-D input: `name.weight` [out, in] and `name.bias` [out],
// both U(-1/sqrt(in), 1/sqrt(in)), and the node `/name/Gemm` (transB=1) writing `y`.
void AddLinearGemm(onnx::GraphProto* graph, const std::string& name, const std::string& x,
                   const std::string& y, int64_t in, int64_t out, std::mt19937& rng);

// `loss` = the mean SoftmaxCrossEntropyLoss of `logits` against `label` (node `/loss`).
void AddCrossEntropyLoss(onnx::GraphProto* graph, const std::string& logits,
                         const std::string& label, const std::string& loss);

// ModelProto with IR version 8, opset 17 and ampc as producer.
onnx::ModelProto NewModel(const std::string& graph_name);

}  // namespace ampc::models
