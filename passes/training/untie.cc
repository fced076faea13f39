#include "passes/training/untie.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/graph/remove_if.h"
#include "passes/graph/tensor_data.h"

namespace ampc {
namespace {

std::string MergedWarning(const MergedParameters& group) {
  std::vector<std::string> copies;
  for (const onnx::NodeProto* identity : group.identities) copies.push_back(identity->output(0));
  const size_t count = copies.size() + (group.read_directly ? 1 : 0);
  return absl::StrCat("initializer '", group.initializer, "' is read as ", count, " parameters (",
                      group.read_directly ? "itself and, " : "", "through Identity, ",
                      absl::StrJoin(copies, ", "),
                      "): the exporter merged equal tensors into one, which trains them tied; "
                      "--untie gives each its own copy");
}

// Each Identity output of `groups` becomes a copy of its initializer; the Identities go, and so
// does an initializer nothing else reads (with its value_info).
void Split(onnx::GraphProto& graph, const GraphIndex& index,
           const std::vector<MergedParameters>& groups) {
  absl::flat_hash_set<int> identities;
  absl::flat_hash_set<std::string> unread;
  for (const MergedParameters& group : groups) {
    const onnx::TensorProto& tensor = *index.Initializer(group.initializer);
    for (const onnx::NodeProto* identity : group.identities) {
      identities.insert(index.NodeIndex(*identity));
      onnx::TensorProto& copy = *graph.add_initializer();
      copy = tensor;
      copy.set_name(identity->output(0));
    }
    if (!group.read_directly) unread.insert(group.initializer);
  }
  RemoveIf(*graph.mutable_node(), [&](int i) { return identities.contains(i); });
  RemoveIf(*graph.mutable_initializer(),
           [&](int i) { return unread.contains(graph.initializer(i).name()); });
  RemoveIf(*graph.mutable_value_info(),
           [&](int i) { return unread.contains(graph.value_info(i).name()); });
}

}  // namespace

std::vector<MergedParameters> FindMergedParameters(const GraphIndex& index) {
  std::vector<MergedParameters> groups;
  for (const onnx::TensorProto& initializer : index.graph().initializer()) {
    const ValueSource* source = index.Source(initializer.name());
    if (!IsFloatElementType(initializer.data_type()) || source == nullptr ||
        source->kind != ValueSource::Kind::kInitializer) {
      continue;  // an input with a default is the caller's to feed, not a merged constant
    }
    MergedParameters group{initializer.name(), {}, index.IsGraphOutput(initializer.name())};
    for (const ValueUse& use : index.Consumers(initializer.name())) {
      if (use.slot == 0 && use.node->op_type() == "Identity" && use.node->domain().empty()) {
        group.identities.push_back(use.node);
      } else {
        group.read_directly = true;
      }
    }
    const size_t reads = group.identities.size() + (group.read_directly ? 1 : 0);
    if (!group.identities.empty() && reads >= 2) groups.push_back(std::move(group));
  }
  return groups;
}

absl::StatusOr<PassResult> Untie::Run(ModelContext& context) {
  absl::StatusOr<std::shared_ptr<const GraphIndex>> index = context.Index();
  if (!index.ok()) return index.status();
  const std::vector<MergedParameters> groups = FindMergedParameters(**index);
  if (groups.empty()) return false;
  if (!untie_) {
    for (const MergedParameters& group : groups) {
      context.Warn(MergedWarning(group), "", group.initializer);
    }
    return false;
  }
  Split(*context.model.mutable_graph(), **index, groups);
  return true;
}

}  // namespace ampc
