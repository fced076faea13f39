// Kernels by (domain, op, backend), the op versions and the element types each accepts. Session
// creation asks the registry for every node, so an unsupported op or element type fails before the
// first step.
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/core/kernel.h"

namespace ampc {

// The domain of the ops only the runtime's own rewrites create (FusedConv, MultiSGD, ...); no model
// declares it.
inline constexpr char kRuntimeDomain[] = "ai.ampc.runtime";

using KernelFactory = std::function<absl::StatusOr<std::unique_ptr<OpKernel>>(const KernelInfo&)>;

// Which element types a kernel accepts: for each listed input index the allowed types (an input
// not listed, or omitted by the node, accepts anything).
struct TypeConstraint {
  int input;
  std::vector<DType> types;
};

// Where a kernel reads its inputs on a backend whose memory is not host memory: on the device,
// except `host` inputs (shapes, axes), `anywhere` inputs it never reads (a view's data, Shape's
// input), which stay where they are, and `either` inputs it reads in host or device memory,
// whichever holds them, a constant's host mirror first (indices: checked on the host when there).
struct InputMemory {
  std::vector<int> host = {};
  std::vector<int> anywhere = {};
  std::vector<int> either = {};
};

// The newest default-domain opset whose op versions the kernels are checked against (ONNX
// 1.23's node tests, tests/python/check_node_cases.py). A version introduced after it has no
// kernel until one is registered for it, so an op that changes meaning in a newer ONNX is refused
// by name instead of run with the old meaning.
inline constexpr int kKernelsCheckedThroughOpset = 28;

// The versions of an op a kernel implements, as since-versions of the op's schema (Resize-13
// covers opsets 13 to 17; Resize-18 starts at 18), both ends included.
struct VersionRange {
  int first = 1;
  int last = kKernelsCheckedThroughOpset;
  bool Contains(int version) const { return version >= first && version <= last; }
};

struct KernelDef {
  std::string domain;  // "" is ai.onnx
  std::string op;
  std::string backend;
  std::vector<TypeConstraint> constraints;
  KernelFactory factory;
  InputMemory memory = {};
  VersionRange versions = {};
};

class KernelRegistry {
 public:
  void Register(KernelDef def);

  // Shorthands: a function kernel for `op` in the default domain with input 0 typed as `types`;
  // and one with explicit constraints.
  void Register(const std::string& backend, const std::string& op, std::vector<DType> types,
                KernelFunction function);
  void Register(const std::string& backend, const std::string& domain, const std::string& op,
                std::vector<TypeConstraint> constraints, KernelFunction function,
                InputMemory memory = {});

  // Only versions `range` of every backend's kernels of (domain, op). Call after registering them.
  void Restrict(const std::string& domain, const std::string& op, VersionRange range);

  // The kernel for the node's op version (its schema's since-version at the node's opset), or
  // Unimplemented naming node, op version, backend and element types.
  // `memory`, when given, receives where the chosen definition reads its inputs.
  absl::StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info,
                                                   InputMemory* memory = nullptr) const;

  // Every backend's kernels of (from_domain, op) also serve (domain, op): the same op in another
  // domain (the ai.ampc versions of passes/opset/standard_op_versions.h). Call after registering
  // them.
  void Alias(const std::string& domain, const std::string& from_domain, const std::string& op);

  // A kernel of (domain, op) on `backend` implements the op's version at `opset` of `domain`.
  bool Has(const std::string& domain, const std::string& op, const std::string& backend,
           int opset) const;
  // A kernel of info.backend accepts the node's element types (no kernel is created).
  bool Supports(const KernelInfo& info) const;

 private:
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<KernelDef>> defs_;
};

}  // namespace ampc
