// `ampc export-weights MODEL -o WEIGHTS.npz|WEIGHTS.safetensors`: the trained weights of a
// compiled training model (ampc MODEL --train, or a model saved by ampc train --save) under the
// names the PyTorch export gave them, for `model.load_state_dict(..., strict=False)`
// (docs/training.md, "Weights back to PyTorch").
//
// Written, all FP32, in the order of `graph`'s initializers:
// - every update_binding key that is an initializer of `graph`: the parameters the step trains
//   (their FP32 master values, never a low-precision copy) and the BatchNormalization running
//   statistics it updates;
// - every other FP32 initializer of `graph` that a BatchNormalization node of `graph` reads as
//   its mean or variance (input 3 or 4): running statistics PyTorch keeps in its state_dict.
// Not written: the initialization's outputs (optimizer moments, accumulators, the loss scale and
// the counters), frozen parameters (--freeze: unchanged, so PyTorch has them already) and other
// constants.
// Names: the initializer's own, except a dynamo export's folded Linear weight. The dynamo
// exporter folds Transpose(W) of a Linear into a constant `val_N` whose value_info has a
// metadata key ending in "folded_from" that lists the values folded; when it lists exactly one,
// which is no initializer of the model, the tensor is 2-D and every reader in `graph` (through
// Cast nodes) is a MatMul's second input, the tensor is written transposed back under that name.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/tensor.h"

namespace ampc {

struct ExportedWeight {
  std::string name;         // the name written (the PyTorch name)
  std::string initializer;  // the initializer of `graph` it comes from
  bool transposed = false;  // a folded Linear weight, transposed back
  Tensor value;             // FP32, in host memory
};

// The weights of `model` to write, as the header describes; errors are InvalidArgument, one line
// naming the value at fault (a model that is no training model, a weight that is not FP32).
absl::StatusOr<std::vector<ExportedWeight>> WeightsToExport(const onnx::ModelProto& model);

// The bytes of an uncompressed .npz (a ZIP archive of stored NAME.npy entries) and of a
// .safetensors file holding `weights`. Errors are InvalidArgument: a .npz over the 4 GiB or
// 65535 entries of ZIP without ZIP64, a name that safetensors reserves.
absl::StatusOr<std::string> EncodeNpz(const std::vector<ExportedWeight>& weights);
absl::StatusOr<std::string> EncodeSafetensors(const std::vector<ExportedWeight>& weights);

// `args` are the positionals ("export-weights", MODEL); reads -o, whose extension picks the
// format (.npz or .safetensors; another is a usage error). The file is written atomically.
absl::Status ExportWeightsCommand(const std::vector<std::string>& args);

}  // namespace ampc
