// --dropout (--train; docs/training.md, "Dropout"): what the training step's Dropout nodes do.
// Exports made in eval mode have none left (both torch exporters remove them), so only a model
// that kept its Dropout nodes (torch.onnx.export(..., training=TrainingMode.TRAINING)) can train
// with dropout. Two passes around training-step:
//
// - dropout-mode (before it): off, every Dropout of the graph becomes an Identity (a Dropout
//   without training_mode where its mask is read), in the graph and so in the step: a model with
//   Dropout trains as one without; graph or a ratio R, every Dropout gets training_mode = true (a
//   Constant) and a ratio (its own, ONNX's 0.5 when it has none, or R), so the autodiff's rule
//   builds the masked backward. graph or R on a model without Dropout is an error that says how
//   to export with them; a random op lift-dropout did not turn back into a Dropout is an error
//   in every mode. Constants and initializers only the changed Dropouts read go.
// - dropout-step (after it): with graph or R, each training-mode Dropout of the step becomes
//   ai.ampc.Dropout with a fourth input, the call = (ampc.step + ampc.skipped_steps) * K +
//   ampc.micro_step (the batches run before this one, all in the checkpoint) and a `seed` (the
//   node's own, else one derived from its position), so its masks are a function of (seed, call)
//   and a resumed run draws the masks an uninterrupted one would; the graph's Dropout nodes become
//   Identity again: the inference model evaluates without dropout, as PyTorch's eval().
#pragma once

#include "absl/status/statusor.h"
#include "passes/pass.h"
#include "passes/training/training_options.h"

namespace ampc {

class DropoutMode : public Pass {
 public:
  DropoutMode(TrainingOptions::Dropout mode, float ratio) : mode_(mode), ratio_(ratio) {}
  absl::string_view Name() const override { return "dropout-mode"; }
  absl::StatusOr<PassResult> Run(ModelContext& context) override;

 private:
  const TrainingOptions::Dropout mode_;
  const float ratio_;
};

class DropoutStep : public Pass {
 public:
  explicit DropoutStep(TrainingOptions::Dropout mode) : mode_(mode) {}
  absl::string_view Name() const override { return "dropout-step"; }
  absl::StatusOr<PassResult> Run(ModelContext& context) override;

 private:
  const TrainingOptions::Dropout mode_;
};

}  // namespace ampc
