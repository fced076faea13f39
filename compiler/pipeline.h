// The pass order of every compilation: PipelineFor is the one function that decides it, and
// `ampc --print-pipeline` prints what it decided (docs/architecture.md, "The pipeline").
#pragma once

#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/pass.h"
#include "passes/precision_plan.h"
#include "passes/registry.h"

namespace ampc {

// What the order depends on, from the parsed options.
struct PipelineOptions {
  bool autocast = true;             // false with --dtype=fp32: the model keeps its precision
  bool train = false;               // --train
  bool loss_op = false;             // --train --loss-op
  bool target_opset = false;        // --target-opset N was given
  std::vector<std::string> passes;  // --passes, in order; empty: the standard pipeline
};

// One pass in the order, and why it sits there, in one line.
struct Placement {
  std::string pass;
  std::string reason;
};

// The passes to run, in order. Names are not checked here (CreatePipeline does).
std::vector<Placement> PipelineFor(const PipelineOptions& options);

// The placements as `ampc --print-pipeline` prints them: one line each, `NAME  REASON`.
std::string PipelineText(const std::vector<Placement>& pipeline);

// The passes of `pipeline`, each constructed with its part of `options`; an unknown name is
// NotFound naming it and the known passes.
absl::StatusOr<std::vector<std::unique_ptr<Pass>>> CreatePipeline(
    const std::vector<Placement>& pipeline, const PassOptions& options);

// Runs the standard pipeline on `model` with `options` (what `ampc --dtype ... [--low-io]` does,
// minus loading and saving); `file` names the model in errors.
absl::Status CompileWithDefaults(onnx::ModelProto& model, const std::string& file,
                                 const AutocastOptions& options);

}  // namespace ampc
