#include "runtime/kernel_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ampc {
namespace {

class FunctionKernel final : public OpKernel {
 public:
  explicit FunctionKernel(KernelFunction function) : function_(function) {}
  absl::Status Compute(KernelContext& context) override { return function_(context); }

 private:
  KernelFunction function_;
};

bool Accepts(const KernelDef& def, const KernelInfo& info) {
  for (const TypeConstraint& constraint : def.constraints) {
    if (constraint.input >= static_cast<int>(info.input_types.size())) continue;
    const DType type = info.input_types[constraint.input];
    if (type == DType::kUndefined) continue;
    bool found = false;
    for (DType allowed : constraint.types) found = found || allowed == type;
    if (!found) return false;
  }
  return true;
}

std::string TypeList(const std::vector<DType>& types) {
  return absl::StrJoin(types, ", ", [](std::string* out, DType type) {
    out->append(type == DType::kUndefined ? "-" : DTypeName(type));
  });
}

}  // namespace

void KernelRegistry::Register(KernelDef def) {
  auto key = std::make_tuple(def.domain, def.op, def.backend);
  defs_[key].push_back(std::move(def));
}

void KernelRegistry::Register(const std::string& backend, const std::string& op,
                              std::vector<DType> types, KernelFunction function) {
  Register(backend, "", op, {TypeConstraint{0, std::move(types)}}, function);
}

void KernelRegistry::Register(const std::string& backend, const std::string& domain,
                              const std::string& op, std::vector<TypeConstraint> constraints,
                              KernelFunction function, InputMemory memory) {
  Register(KernelDef{domain, op, backend, std::move(constraints),
                     [function](const KernelInfo&) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
                       return std::make_unique<FunctionKernel>(function);
                     },
                     std::move(memory)});
}

void KernelRegistry::Alias(const std::string& domain, const std::string& from_domain,
                           const std::string& op) {
  std::vector<KernelDef> copies;
  for (const auto& [key, defs] : defs_) {
    if (std::get<0>(key) != from_domain || std::get<1>(key) != op) continue;
    for (const KernelDef& def : defs) copies.push_back(def);
  }
  for (KernelDef& def : copies) {
    def.domain = domain;
    Register(std::move(def));
  }
}

absl::StatusOr<std::unique_ptr<OpKernel>> KernelRegistry::Create(const KernelInfo& info,
                                                                 InputMemory* memory) const {
  const std::string& domain = info.node.domain() == "ai.onnx" ? std::string() : info.node.domain();
  auto it = defs_.find(std::make_tuple(domain, info.node.op_type(), info.backend.name()));
  if (it == defs_.end()) {
    return absl::UnimplementedError(
        absl::StrCat(info.label(), ": op not supported on the ", info.backend.name(), " backend"));
  }
  for (const KernelDef& def : it->second) {
    if (!Accepts(def, info)) continue;
    absl::StatusOr<std::unique_ptr<OpKernel>> kernel = def.factory(info);
    if (!kernel.ok()) {
      return absl::Status(kernel.status().code(),
                          absl::StrCat(info.label(), ": ", kernel.status().message()));
    }
    if (memory != nullptr) *memory = def.memory;
    return kernel;
  }
  return absl::UnimplementedError(
      absl::StrCat(info.label(), ": no ", info.backend.name(), " kernel for input types (",
                   TypeList(info.input_types), ") -> (", TypeList(info.output_types), ")"));
}

bool KernelRegistry::Has(const std::string& domain, const std::string& op,
                         const std::string& backend) const {
  return defs_.contains(std::make_tuple(domain, op, backend));
}

bool KernelRegistry::Supports(const KernelInfo& info) const {
  const std::string& domain = info.node.domain() == "ai.onnx" ? std::string() : info.node.domain();
  auto it = defs_.find(std::make_tuple(domain, info.node.op_type(), info.backend.name()));
  if (it == defs_.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [&](const KernelDef& def) { return Accepts(def, info); });
}

}  // namespace ampc
