#include "passes/pass.h"

namespace ampc {

void ModelContext::Warn(std::string message, std::string node, std::string value) {
  diagnostics.push_back(
      {Diagnostic::Severity::kWarning, "", std::move(node), std::move(value), std::move(message)});
}

absl::StatusOr<std::shared_ptr<const GraphIndex>> ModelContext::Index() {
  if (index_ != nullptr && &index_->graph() == &model.graph()) return index_;
  absl::StatusOr<std::unique_ptr<GraphIndex>> built = GraphIndex::Build(model.graph());
  if (!built.ok()) return built.status();
  index_ = *std::move(built);
  return index_;
}

absl::StatusOr<PassResult> RunPass(Pass& pass, ModelContext& context) {
  const size_t before = context.diagnostics.size();
  absl::StatusOr<PassResult> result = pass.Run(context);
  for (size_t i = before; i < context.diagnostics.size(); ++i) {
    context.diagnostics[i].pass = std::string(pass.Name());
  }
  if (!result.ok() || result->index_stale) context.DropIndex();
  return result;
}

}  // namespace ampc
