// Gradient checks: a small model `loss = ReduceSum(op(inputs) * r)` differentiated by the autodiff
// pass and run on the CPU runtime, against central finite differences of the forward model.
// Header-only: the unit tests that use it link the passes and the runtime.
#pragma once

#include <onnx/onnx_pb.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/autodiff/autodiff.h"
#include "passes/graph/status_macros.h"
#include "passes/infer_types.h"
#include "passes/opset/training_ops.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/dtype.h"
#include "runtime/session.h"
#include "tests/support/model_text.h"

namespace ampc::testing {

struct Operand {
  Operand(std::string name, Shape shape, bool param = true)
      : name(std::move(name)), shape(std::move(shape)), param(param) {}
  // A param with values in [0.5, 2] (Log, Sqrt, divisors).
  static Operand Positive(std::string name, Shape shape) {
    Operand o(std::move(name), std::move(shape));
    o.lo = 0.5;
    o.hi = 2.0;
    return o;
  }
  // A fixed input of `type` ("int64" or "bool") holding `values`.
  static Operand Fixed(std::string name, Shape shape, std::string type,
                       std::vector<double> values) {
    Operand o(std::move(name), std::move(shape), false);
    o.type = std::move(type);
    o.values = std::move(values);
    return o;
  }

  std::string name;
  Shape shape;
  bool param = true;  // differentiated and checked
  std::string type;   // "" = the case's float type; else "int64" or "bool" (values required)
  std::vector<double> values;  // default: a deterministic pattern in [lo, hi], away from 0
  double lo = -1.0;
  double hi = 1.0;
  // The dims the model declares, when not `shape` (e.g. "N,3" or "?,3": a symbolic or unknown
  // batch, as exports with dynamic axes declare it); values are still fed with `shape`.
  std::string declared;
  Operand&& Declared(std::string dims) && {
    declared = std::move(dims);
    return std::move(*this);
  }
};

struct GradientCase {
  GradientCase(std::string name, std::vector<Operand> operands, std::string body, Shape y)
      : name(std::move(name)),
        operands(std::move(operands)),
        body(std::move(body)),
        y(std::move(y)) {}

  std::string name;
  std::vector<Operand> operands;
  std::string body;  // ONNX text nodes computing `y` from the operands
  Shape y;
  std::string type = "double";
  int opset = 17;
  double h = 1e-6;          // the finite-difference step
  double tolerance = 1e-6;  // absolute and relative
  std::string y_declared;   // y's (and r's) declared dims when not `y` (see Operand::declared)
};

struct GradientComparison {
  std::string parameter;
  std::vector<double> analytic;
  std::vector<double> numeric;
};

inline std::string GradientCaseText(const GradientCase& c) {
  std::vector<std::string> decls;
  auto decl = [](const std::string& type, const Shape& shape, const std::string& name,
                 const std::string& declared = "") {
    if (!declared.empty()) return absl::StrCat(type, "[", declared, "] ", name);
    if (shape.empty()) return absl::StrCat(type, " ", name);
    return absl::StrCat(type, "[", absl::StrJoin(shape, ","), "] ", name);
  };
  for (const Operand& o : c.operands)
    decls.push_back(decl(o.type.empty() ? c.type : o.type, o.shape, o.name, o.declared));
  decls.push_back(decl(c.type, c.y, "r", c.y_declared));
  return absl::StrCat("<ir_version: 8, opset_import: [\"\" : ", c.opset, "]>\ng (",
                      absl::StrJoin(decls, ", "), ") => (", c.type, " loss) <",
                      decl(c.type, c.y, "y", c.y_declared), "> {\n", c.body,
                      "\n  prod = Mul(y, r)\n  loss = ReduceSum <keepdims = 0> (prod)\n}\n");
}

// Values of an operand: its own, or a pattern in [lo, hi] that keeps |v| >= 0.1 (off kinks).
inline std::vector<double> OperandValues(const Operand& o, int seed) {
  if (!o.values.empty()) return o.values;
  int64_t n = 1;
  for (int64_t d : o.shape) n *= d;
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    const double t = std::fmod(0.618034 * static_cast<double>(i + 1) + 0.37 * seed, 1.0);
    double x = o.lo + (o.hi - o.lo) * t;
    if (std::abs(x) < 0.1) x += x < 0 ? -0.1 : 0.1;
    v[i] = x;
  }
  return v;
}

inline Tensor ToTensor(DType dtype, const Shape& shape, const std::vector<double>& values) {
  Tensor t = Tensor::Host(dtype, shape);
  Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES, DType::kBool>(dtype, [&]<typename T>() {
    for (size_t i = 0; i < values.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        t.data<T>()[i] = values[i] != 0;
      } else {
        t.data<T>()[i] = Compute<T>::Store(static_cast<typename Compute<T>::type>(values[i]));
      }
    }
  });
  return t;
}

inline std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> v;
  Dispatch<AMPC_FLOAT_TYPES>(t.dtype(), [&]<typename T>() {
    for (const T& x : t.span<const T>()) v.push_back(static_cast<double>(Compute<T>::Load(x)));
  });
  return v;
}

inline absl::StatusOr<onnx::ModelProto> GradientModel(const GradientCase& c) {
  onnx::ModelProto forward = ParseModelText(GradientCaseText(c));
  AMPC_RETURN_IF_ERROR(InferTypesStrict(forward, c.name));
  AMPC_ASSIGN_OR_RETURN(std::unique_ptr<GraphIndex> index, GraphIndex::Build(forward.graph()));
  onnx::ModelProto model = forward;
  onnx::GraphProto& graph = *model.mutable_graph();
  onnx::ValueInfoProto& seed = *graph.add_input();
  seed.set_name("seed");
  seed.mutable_type()->mutable_tensor_type()->set_elem_type(
      graph.output(0).type().tensor_type().elem_type());
  seed.mutable_type()->mutable_tensor_type()->mutable_shape();
  GradientRequest request{"loss", "seed", {}};
  for (const Operand& o : c.operands) {
    if (o.param) request.parameters.push_back(o.name);
  }
  NameAllocator names(model);
  AMPC_ASSIGN_OR_RETURN(std::vector<std::string> grads,
                        AppendGradients(graph, *index, request, names));
  // Rules of the softmax/norm/conv/pool family emit ai.ampc gradient ops.
  onnx::OperatorSetIdProto& ampc = *model.add_opset_import();
  ampc.set_domain(kAmpcDomain);
  ampc.set_version(kAmpcOpsetVersion);
  RegisterAmpcSchemas();
  graph.clear_output();
  for (size_t i = 0; i < grads.size(); ++i) {
    onnx::ValueInfoProto& out = *graph.add_output();
    out.set_name(grads[i]);
    *out.mutable_type() = index->Type(request.parameters[i])->tensor_type().elem_type() != 0
                              ? *index->Type(request.parameters[i])
                              : onnx::TypeProto();
  }
  return model;
}

inline absl::StatusOr<std::vector<GradientComparison>> CheckGradients(const GradientCase& c,
                                                                      double h) {
  static CpuBackend backend(1);
  AMPC_ASSIGN_OR_RETURN(onnx::ModelProto grad_model, GradientModel(c));
  const DType dtype = c.type == "double" ? DType::kDouble : DType::kFloat;
  std::map<std::string, Tensor> values;
  std::map<std::string, std::vector<double>> raw;
  int seed = 0;
  for (const Operand& o : c.operands) {
    raw[o.name] = OperandValues(o, ++seed);
    const DType t = o.type.empty() ? dtype : o.type == "int64" ? DType::kInt64 : DType::kBool;
    values[o.name] = ToTensor(t, o.shape, raw[o.name]);
  }
  values["r"] = ToTensor(dtype, c.y, OperandValues(Operand("r", c.y), 99));
  values["seed"] = ToTensor(dtype, {}, {1.0});
  auto run = [&](const Session& session) -> absl::StatusOr<std::vector<Tensor>> {
    std::vector<Tensor> inputs;
    for (const ValueSpec& spec : session.inputs()) inputs.push_back(values.at(spec.name));
    return session.Run(inputs);
  };
  AMPC_ASSIGN_OR_RETURN(auto grad_session, Session::Create(grad_model, DefaultRegistry(), backend));
  AMPC_ASSIGN_OR_RETURN(auto forward_session, Session::Create(ParseModelText(GradientCaseText(c)),
                                                              DefaultRegistry(), backend));
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> grads, run(*grad_session));
  std::vector<GradientComparison> comparisons;
  size_t k = 0;
  for (const Operand& o : c.operands) {
    if (!o.param) continue;
    GradientComparison cmp{o.name, ToDoubles(grads[k++]), {}};
    for (size_t j = 0; j < raw[o.name].size(); ++j) {
      double loss[2];
      for (int side = 0; side < 2; ++side) {
        std::vector<double> moved = raw[o.name];
        moved[j] += side == 0 ? h : -h;
        values[o.name] = ToTensor(dtype, o.shape, moved);
        AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> out, run(*forward_session));
        loss[side] = ToDoubles(out[0])[0];
      }
      values[o.name] = ToTensor(dtype, o.shape, raw[o.name]);
      cmp.numeric.push_back((loss[0] - loss[1]) / (2 * h));
    }
    comparisons.push_back(std::move(cmp));
  }
  return comparisons;
}

}  // namespace ampc::testing
