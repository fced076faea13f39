#include "runtime/core/kernel_registry.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <set>
#include <utility>

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

// The since-version of the op's schema at `opset`; 0 for an op without a schema (the runtime's
// own domains), which every range accepts.
int OpVersion(const std::string& op, int opset, const std::string& domain) {
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(op, opset, domain);
  return schema == nullptr ? 0 : schema->since_version();
}

bool Covers(const KernelDef& def, int version) {
  return version == 0 || def.versions.Contains(version);
}

// "versions 9 to 28" or "versions 1 to 10 and 13 to 28", of every def.
std::string Coverage(const std::vector<KernelDef>& defs) {
  std::set<std::pair<int, int>> ranges;
  for (const KernelDef& def : defs) ranges.emplace(def.versions.first, def.versions.last);
  return absl::StrCat(
      ranges.size() == 1 && ranges.begin()->first == ranges.begin()->second ? "version "
                                                                            : "versions ",
      absl::StrJoin(ranges, " and ", [](std::string* out, const std::pair<int, int>& range) {
        absl::StrAppend(out, range.first);
        if (range.second != range.first) absl::StrAppend(out, " to ", range.second);
      }));
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
  const int version = OpVersion(info.node.op_type(), info.opset, domain);
  bool version_found = false;
  for (const KernelDef& def : it->second) {
    if (!Covers(def, version)) continue;
    version_found = true;
    if (!Accepts(def, info)) continue;
    absl::StatusOr<std::unique_ptr<OpKernel>> kernel = def.factory(info);
    if (!kernel.ok()) {
      return absl::Status(kernel.status().code(),
                          absl::StrCat(info.label(), ": ", kernel.status().message()));
    }
    if (memory != nullptr) *memory = def.memory;
    return kernel;
  }
  if (!version_found) {
    return absl::UnimplementedError(absl::StrCat(
        info.label(), ": no ", info.backend.name(), " kernel for ", info.node.op_type(), "-",
        version, " (opset ", info.opset, "); its kernels implement ", Coverage(it->second)));
  }
  return absl::UnimplementedError(
      absl::StrCat(info.label(), ": no ", info.backend.name(), " kernel for input types (",
                   TypeList(info.input_types), ") -> (", TypeList(info.output_types), ")"));
}

void KernelRegistry::Restrict(const std::string& domain, const std::string& op,
                              VersionRange range) {
  for (auto& [key, defs] : defs_) {
    if (std::get<0>(key) != domain || std::get<1>(key) != op) continue;
    for (KernelDef& def : defs) def.versions = range;
  }
}

bool KernelRegistry::Has(const std::string& domain, const std::string& op,
                         const std::string& backend, int opset) const {
  auto it = defs_.find(std::make_tuple(domain, op, backend));
  if (it == defs_.end()) return false;
  const int version = OpVersion(op, opset, domain);
  return std::any_of(it->second.begin(), it->second.end(),
                     [&](const KernelDef& def) { return Covers(def, version); });
}

bool KernelRegistry::Supports(const KernelInfo& info) const {
  const std::string& domain = info.node.domain() == "ai.onnx" ? std::string() : info.node.domain();
  auto it = defs_.find(std::make_tuple(domain, info.node.op_type(), info.backend.name()));
  if (it == defs_.end()) return false;
  const int version = OpVersion(info.node.op_type(), info.opset, domain);
  return std::any_of(it->second.begin(), it->second.end(), [&](const KernelDef& def) {
    return Covers(def, version) && Accepts(def, info);
  });
}

}  // namespace ampc
