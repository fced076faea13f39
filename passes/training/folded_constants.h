// Initializers torch's dynamo exporter folded from constants (docs/training.md, "Constants the
// exporter folded"). The exporter's optimizer folds constant subgraphs into initializers and
// records what each was folded from as value_info metadata, key `...folded_from` (in full
// `pkg.onnxscript.optimizer.folded_from`), value a Python list of names: "['val_93', 'val_94']".
// An initializer folded only from the exporter's own constants (names `val_N`) is a constant (an
// attention scale); one folded from anything else (a parameter such as a transposed Linear
// weight, a buffer, a traced value) may hold parameters and is trained.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "absl/container/flat_hash_set.h"

namespace ampc {

// The initializers of `graph` (not its subgraphs) whose value_info says they were folded, from a
// non-empty list of names that are all `val_N`.
absl::flat_hash_set<std::string> FoldedConstants(const onnx::GraphProto& graph);

}  // namespace ampc
