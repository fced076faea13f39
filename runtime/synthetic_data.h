// `ampc train --data synthetic[:N]` for any model (docs/training.md, "Data"): samples shaped and
// typed from the training model's own data inputs, of a learnable task.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/data_readers.h"
#include "runtime/training_session.h"

namespace ampc {

// The vocabulary of each graph input that indexes an embedding: the input is the indices of a
// Gather on axis 0 whose table's first dim is static. Read from `model` before a session owns it.
absl::flat_hash_map<std::string, int64_t> TokenVocabularies(const onnx::ModelProto& model);

// Whether `session` takes what the 784-pixel SyntheticDataset feeds: one float input of 784
// values per sample (any layout, e.g. [N, 784] or [N, 1, 28, 28]) and one int64 label input.
bool TakesSyntheticImages(const TrainingSession& session);

// `train` + `test` samples by name for every data input of `session`, each sample of a class k
// (C classes: the last dim of the inference output "logits", else of the first output):
//   float inputs   k's fixed pattern (uniform [0, 1) per element) plus uniform noise of width 0.6;
//   token inputs   (in `vocab`) a counting run s, s + 1, ... mod V whose start s is uniform in
//                  the k-th band of V / C ids (so the first token tells the class, and each
//                  token the next);
//   labels         inputs named "labels" or "label": [N] holds k; [N, T] the tokens themselves
//                  (mod C when C differs from the vocabulary), which causal_lm shifts;
//   other int64    ones (attention masks).
// Symbolic per-sample dims of token inputs are 16; of float inputs they are an error naming the
// input (export with a static image size). Deterministic in `seed`.
absl::StatusOr<DataSplits> SyntheticForModel(const TrainingSession& session,
                                             const absl::flat_hash_map<std::string, int64_t>& vocab,
                                             int64_t train, int64_t test, uint64_t seed);

}  // namespace ampc
