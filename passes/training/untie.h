// untie (--train; docs/training.md, "Parameters the exporter merged"): torch's exporters merge
// equal initial tensors into one initializer that several distinct parameters read through
// Identity nodes (LayerNorm weights of ones and biases of zeros, a BatchNorm's weight and
// running_var). Trained as exported, those parameters would stay tied. An initializer is such a
// merged group when it is read through two or more Identity nodes, or directly and through one;
// one tensor read directly by several nodes (a tied embedding and LM head) is a truly shared
// weight and no group. Each group is a warning; with --untie each Identity output becomes an
// initializer of its own (a copy, named after that output), the Identity is removed, and the
// merged initializer goes when nothing else reads it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/graph/graph_index.h"
#include "passes/pass.h"

namespace ampc {

struct MergedParameters {
  std::string initializer;                         // the one tensor they were merged into
  std::vector<const onnx::NodeProto*> identities;  // the Identity nodes reading it
  bool read_directly = false;                      // also read by another node or a graph output
};

// The merged groups of `index`'s graph (float initializers only, not subgraphs), in initializer
// order.
std::vector<MergedParameters> FindMergedParameters(const GraphIndex& index);

class Untie : public Pass {
 public:
  // `untie`: --untie (split the groups); else the pass only warns.
  explicit Untie(bool untie) : untie_(untie) {}
  absl::string_view Name() const override { return "untie"; }
  absl::StatusOr<PassResult> Run(ModelContext& context) override;

 private:
  const bool untie_;
};

}  // namespace ampc
