// The interface every pass implements, and the context a pipeline threads through them.
#pragma once

#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "passes/graph_index.h"
#include "passes/precision_plan.h"
#include "passes/training_options.h"

namespace ampc {

// What a pass works on. `file` is the model's path as the user gave it; every diagnostic names it.
struct ModelContext {
  ModelContext(onnx::ModelProto& model, std::string file) : model(model), file(std::move(file)) {}

  onnx::ModelProto& model;
  std::string file;
  std::vector<std::string> warnings;  // one line each, printed by the driver
  AutocastOptions autocast;
  TrainingOptions training;  // --train; read by the training-step pass
  int target_opset = 0;      // --target-opset (0: the model's own); read by upgrade-opset
  std::shared_ptr<PrecisionPlan> plan;  // set by autocast, applied by insert-casts
  // An index of the model as the pass that set it left it (autocast, which changes nothing), so
  // the next pass need not build it again; the driver drops it after that next pass.
  std::shared_ptr<const GraphIndex> index;

  void Warn(std::string message) { warnings.push_back(std::move(message)); }
};

class Pass {
 public:
  virtual ~Pass() = default;
  // Kebab-case, as used by --passes and --print-after.
  virtual absl::string_view Name() const = 0;
  // Returns whether the model changed. Stateless between runs.
  virtual absl::StatusOr<bool> Run(ModelContext& context) = 0;
};

}  // namespace ampc
