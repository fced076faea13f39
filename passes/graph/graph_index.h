// Producer/consumer index over one graph (and, recursively, its subgraphs), shared by every pass.
// Rebuild after a mutation: the index holds pointers into the GraphProto.
#pragma once

#include <onnx/onnx_pb.h>

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ampc {

// How diagnostics name a node: `node 'NAME' (OpType)`, or `node #INDEX (OpType)` when unnamed.
std::string DescribeNode(const onnx::NodeProto& node, int index);

// A node reading a value. `slot` is the input position, or kImplicitSlot when the value is
// read from inside one of the node's subgraphs (an outer-scope reference).
struct ValueUse {
  static constexpr int kImplicitSlot = -1;
  const onnx::NodeProto* node = nullptr;
  int slot = 0;
};

// Where a value comes from.
struct ValueSource {
  enum class Kind { kNode, kGraphInput, kInitializer, kOuterScope };
  Kind kind = Kind::kNode;
  const onnx::NodeProto* node = nullptr;  // kNode only
  int slot = 0;                           // output position, kNode only
};

class GraphIndex {
 public:
  // Indexes `graph`. `outer` (may be null) is the index of the enclosing graph; names it defines
  // are visible here as kOuterScope. Fails on a value produced twice or a dangling input, naming
  // the node and the value.
  static absl::StatusOr<std::unique_ptr<GraphIndex>> Build(const onnx::GraphProto& graph,
                                                           const GraphIndex* outer = nullptr);
  // Fails where Build would, with the same message, but indexes no declared types and keeps
  // nothing: for a caller that needs only the verdict (a third less work at 1M values).
  static absl::Status Check(const onnx::GraphProto& graph);
  // Subgraph indexes point at their enclosing index, so an index stays where it was built.
  GraphIndex(const GraphIndex&) = delete;
  GraphIndex& operator=(const GraphIndex&) = delete;

  const onnx::GraphProto& graph() const { return *graph_; }
  // The enclosing graph's index; null at the top level.
  const GraphIndex* outer() const { return outer_; }

  // Null when the value is unknown in this scope and every enclosing one. A value defined by an
  // enclosing graph (and not shadowed here) has kind kOuterScope; ask outer() for its producer.
  // A graph input that is also an initializer is kGraphInput.
  const ValueSource* Source(std::string_view value) const;
  // The nodes of this graph reading `value`, in node order and, within a node, slot order; an
  // implicit read (from the node's subgraphs) appears once per node, after its explicit slots.
  absl::Span<const ValueUse> Consumers(std::string_view value) const;
  // Declared type from graph inputs, outputs, value_info or initializers (searched outward); null
  // if none is known.
  const onnx::TypeProto* Type(std::string_view value) const;
  // The initializer named `value`, here or (unless shadowed here) in an enclosing graph.
  const onnx::TensorProto* Initializer(std::string_view value) const;
  // Whether `value` is an output of this graph (not of an enclosing one).
  bool IsGraphOutput(std::string_view value) const;

  // Values read by this graph or its nested subgraphs but defined in an enclosing scope, in
  // first-use order.
  const std::vector<std::string>& OuterScopeRefs() const { return outer_refs_; }
  // Indexes of the graph attributes of `node` (a node of this graph), in attribute order.
  std::vector<const GraphIndex*> Subgraphs(const onnx::NodeProto& node) const;
  // Position of `node` in graph().node(); -1 if it is not a node of this graph.
  int NodeIndex(const onnx::NodeProto& node) const;
  // DescribeNode for a node of this graph.
  std::string Describe(const onnx::NodeProto& node) const;

 private:
  GraphIndex() = default;
  std::string DescribeSource(const ValueSource& source) const;
  absl::Status ProducedTwice(std::string_view value, const ValueSource& first,
                             const ValueSource& second) const;
  absl::Status AddSource(std::string_view value, ValueSource source);
  // `tensor` is null for a sparse initializer.
  absl::Status AddInitializer(std::string_view value, const onnx::TensorProto* tensor);
  absl::Status IndexSources();
  void IndexTypes();
  absl::Status IndexUses();
  absl::Status AddSubgraphs(int node_index);
  // Records that this graph reads `value`; false if nothing in scope defines it.
  bool AddRead(std::string_view value);
  bool DefinesLocally(std::string_view value) const;

  // Everything the index knows about one name of this graph: one hash lookup per query, and
  // one entry per value (at 1M values, separate maps per property cost a third of a pass).
  struct Value {
    ValueSource source;
    bool defined = false;            // a graph input, initializer or node output of this graph
    bool input_initializer = false;  // a graph input that also has an initializer
    bool graph_output = false;
    const onnx::TypeProto* type = nullptr;
    const onnx::TensorProto* initializer = nullptr;
    absl::InlinedVector<ValueUse, 2> consumers;  // most values have one or two readers
  };
  const Value* Find(std::string_view value) const;

  const onnx::GraphProto* graph_ = nullptr;
  const GraphIndex* outer_ = nullptr;
  std::vector<std::string> outer_refs_;
  absl::flat_hash_set<std::string_view> outer_ref_set_;
  absl::flat_hash_map<std::string_view, Value> values_;
  std::deque<onnx::TypeProto> initializer_types_;  // deque: pointers stay valid as it grows
  // Built on first use: most passes ask for few node positions.
  mutable absl::flat_hash_map<const onnx::NodeProto*, int> node_index_;
  bool has_subgraphs_ = false;
  std::vector<std::vector<std::unique_ptr<GraphIndex>>> subgraphs_;  // by node index
};

}  // namespace ampc
