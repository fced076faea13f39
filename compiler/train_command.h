// `ampc train MODEL --data SOURCE [--batch 64] [--epochs 2] [--lr 0.01] [--metrics FILE.csv]
// [--save OUT.onnx] [--resume] [--log-every 50] [--seed 0] [--device auto|cpu]`: trains a compiled
// training model (docs/training-design.md, "The trainer"). This file reads and checks the flags,
// loads the data (--data fashion-mnist[:DIR] | mnist:DIR | npy:DIR | pb:DIR | synthetic[:N],
// runtime/data_readers.h) and the model (the --save file instead with --resume, when it exists),
// records the run's files (nothing it reads is replaced), and calls runtime/trainer.h's Train,
// which runs the loop, prints the progress and accuracies, and hands each epoch's checkpoint to
// SaveModel (atomic).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ampc {

// `args` are the positionals ("train", MODEL).
absl::Status TrainCommand(const std::vector<std::string>& args);

}  // namespace ampc
