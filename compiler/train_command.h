// `ampc train MODEL --data SOURCE [--batch 64] [--epochs 2] [--lr 0.01] [--metrics FILE.csv]
// [--save OUT.onnx] [--resume] [--log-every 50] [--seed 0] [--device auto|cpu]`: trains a compiled
// training model (docs/training-design.md) with runtime/training_session.h.
//
// - Data: --data fashion-mnist[:DIR] | mnist:DIR | npy:DIR | synthetic[:N]
//   (runtime/data_readers.h). The algorithm's float input takes the images (shaped as it declares
//   them: [B, 784] or [B, 1, 28, 28]), its int64 input the labels.
// - Position: batches already run = ampc.step + ampc.skipped_steps of the model's state; the run
//   continues from there up to --epochs epochs in all (each epoch is the training set in the
//   seeded order of EpochOrder, cut into full batches; the last partial batch is dropped). So a
//   checkpoint given as MODEL, or found at --save with --resume, continues bit-identically.
// - Learning rate: the model's schedule (metadata ampc.lr_schedule, read by
//   compiler/lr_schedule.h; constant without it), evaluated on the backend at ampc.step (applied
//   steps; runtime/lr_schedule.h), so a skipped step does not advance it, from the base rate --lr,
//   or when --lr is left at its default (0.01) the model's metadata ampc.lr (the --lr given to ampc
//   --train).
// - Output: a progress bar on stderr when it is a terminal, plain lines every --log-every
//   batches otherwise; the metrics CSV (step,loss,scale,grad_norm,skipped,lr per logged step,
//   step counting batches run, loss the mean over the logged window, lr that of the logged step);
//   at each epoch end the test accuracy (argmax of the `logits` output of the inference graph, else
//   its first output) on stdout, and the model saved to --save (atomically) when given.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ampc {

// `args` are the positionals ("train", MODEL).
absl::Status TrainCommand(const std::vector<std::string>& args);

}  // namespace ampc
