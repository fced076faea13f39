// Kernels by (domain, op, backend) and the element types each accepts. Session creation asks the
// registry for every node, so an unsupported op or element type fails before the first step.
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/kernel.h"

namespace ampc {

using KernelFactory = std::function<absl::StatusOr<std::unique_ptr<OpKernel>>(const KernelInfo&)>;

// Which element types a kernel accepts: for each listed input index the allowed types (an input
// not listed, or omitted by the node, accepts anything).
struct TypeConstraint {
  int input;
  std::vector<DType> types;
};

struct KernelDef {
  std::string domain;  // "" is ai.onnx
  std::string op;
  std::string backend;
  std::vector<TypeConstraint> constraints;
  KernelFactory factory;
  // Inputs the kernel reads on the host (shapes, axes): a device backend's executor hands it host
  // copies of these and device tensors for every other input.
  std::vector<int> host_inputs = {};
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
                std::vector<int> host_inputs = {});

  // The kernel for the node, or Unimplemented naming node, op, backend and element types.
  // `host_inputs`, when given, receives the chosen definition's host inputs.
  absl::StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info,
                                                   std::vector<int>* host_inputs = nullptr) const;

  bool Has(const std::string& domain, const std::string& op, const std::string& backend) const;

 private:
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<KernelDef>> defs_;
};

}  // namespace ampc
