// The training loop of `ampc train` (docs/training.md; docs/training-design.md, "The trainer"):
// a compiled training model trained on a data set with runtime/training_session.h, given plain
// options (compiler/train_command.cc reads them from the command line).
//
// - Data: the algorithm's float input takes the images (shaped as it declares them: [B, 784] or
//   [B, 1, 28, 28]), its int64 input the labels (runtime/trainer_feeding.h).
// - Position: batches already run = ampc.step + ampc.skipped_steps of the model's state (times K
//   plus ampc.micro_step with --accumulate K); the run continues from there up to `epochs` epochs
//   in all (each epoch is the training set in the seeded order of EpochOrder, cut into full
//   batches; the last partial batch is dropped). So a checkpoint given as the model continues
//   bit-identically.
// - Learning rate: runtime/learning_rate.h (the base rate `lr`, else the model's; the model's
//   schedule, evaluated on the backend at ampc.step, so a skipped step does not advance it).
// - Output: runtime/trainer_progress.h on stderr and in the metrics CSV; at each epoch's end the
//   test accuracy on stdout, and the checkpoint written by `save`.
// - Stops with an error after max_consecutive_skips skipped steps in a row, naming where inf/NaN
//   first appear in the last batch (TrainingSession::FindNonFinite).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "runtime/core/backend.h"
#include "runtime/data_readers.h"

namespace ampc {

// The skip limit when neither the options nor the model set one.
inline constexpr int64_t kDefaultMaxConsecutiveSkips = 100;

struct TrainerOptions {
  std::string model_path;    // the model's file, which messages name
  std::string data;          // the data source as given (--data), which messages name
  int64_t batch = 64;        // samples per step
  int64_t epochs = 2;        // in all, counting those the model has done
  std::optional<double> lr;  // the base learning rate; unset: the model's (learning_rate.h)
  int64_t max_consecutive_skips = 0;  // 0: the model's metadata, else 100
  int64_t log_every = 50;             // batches per progress line and metrics row
  uint64_t seed = 0;                  // of the data order
  std::string metrics;                // the CSV (empty: none), appended to when resuming
  bool capture = false;               // CUDA Graph capture of the step (TrainingSession)
  // The backend: "cpu", "cuda" or "auto" (runtime/device.h), its threads, TF32 and limits.
  std::string device = "cpu";
  int threads = 0;
  bool tf32 = false;
  RunLimits limits;
  // Writes the checkpoint (TrainingSession::Checkpoint) at each epoch's end; unset: none.
  std::function<absl::Status(const onnx::ModelProto&)> save;
  // Says one line (a note: the CPU fallback, capture) the way the caller prints diagnostics.
  std::function<void(const std::string&)> note;
};

// Trains `model` (it has training_info) on `data` as `options` say. Errors about the options
// (the batch against the data and the model) are IsOptionError.
absl::Status Train(onnx::ModelProto model, const DataSplits& data, const TrainerOptions& options);

// Whether Train's error is about its options (ampc train reports it as a usage error).
bool IsOptionError(const absl::Status& status);

}  // namespace ampc
