// The gradients of the training step (docs/training-design.md, "The step", 2., and "Gradient
// accumulation"): which parameters are trained, the backward seeded with the loss scale, the
// forward state the step's forward copy updates, and the accumulation window of --accumulate.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/name_allocator.h"
#include "passes/training/step_writer.h"
#include "passes/training/training_options.h"

namespace ampc {

// The trainable parameters of `forward` for options.loss and options.freeze (autodiff's
// TrainableParameters), less those the exporter folded from its constants (FoldedConstants, named
// in one warning); none is an error. Scalar ones are named in a warning.
absl::StatusOr<std::vector<std::string>> StepParameters(const GraphIndex& forward,
                                                        const TrainingOptions& options,
                                                        std::vector<std::string>& warnings);

// The step's MaxPoolGrad reads a MaxPool's indices: an ai.ampc.MaxPool states them in the model
// too, so the model and the step call its one model-local function with one arity.
void StateMaxPoolIndices(onnx::GraphProto& graph, NameAllocator& names);

// Appends the backward of options.loss to `step` (which starts with a copy of `forward`'s nodes),
// seeded with d(loss * scale / K)/d(loss) = scale / K, so that a window's sum of gradients is
// the gradient of its mean loss. Returns each parameter's gradient, of the scaled loss.
absl::StatusOr<std::vector<std::string>> EmitBackward(StepWriter& w, onnx::GraphProto& step,
                                                      const GraphIndex& forward,
                                                      const TrainingOptions& options,
                                                      const std::vector<std::string>& params);

// Initializers of the forward that the step's forward copy updates: the running statistics of a
// BatchNormalization the autodiff put in training mode (its outputs 1 and 2). Each new value is
// named `<state>.ampc.next`; the running variance as PyTorch updates it (with the batch's
// unbiased variance). Returns the initializers, in node order.
absl::StatusOr<std::vector<std::string>> ForwardStateUpdates(StepWriter& w, onnx::GraphProto& step,
                                                             const GraphIndex& forward);

// The names the check, the scale update and the unscale read in one step: with --accumulate
// K > 1 the window's sums, its loss flag and whether this micro-batch ends it.
struct Window {
  std::string end;  // empty when every step ends a window (K = 1)
  std::string loss_bad;
  std::vector<std::string> grads;
};

// Adds each gradient into its accumulator and counts the micro-batch; the accumulators, the
// count and the loss flag start again after the window's last micro-batch. With K = 1 the window
// is the step: `grads` and `loss_bad` as they are.
Window EmitAccumulation(StepWriter& w, int64_t accumulate, const std::vector<std::string>& params,
                        const std::vector<std::string>& grads, const std::string& loss_bad);

}  // namespace ampc
