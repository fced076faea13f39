#include "runtime/session.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <exception>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ampc {
namespace {

ValueSpec SpecOf(const onnx::ValueInfoProto& value) {
  ValueSpec spec{value.name(), DType::kUndefined, {}};
  if (!value.type().has_tensor_type()) return spec;
  const auto& tensor_type = value.type().tensor_type();
  spec.dtype = static_cast<DType>(tensor_type.elem_type());
  for (const auto& dim : tensor_type.shape().dim()) {
    spec.dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
  }
  return spec;
}

}  // namespace

Session::Session(onnx::ModelProto model, Backend& backend)
    : model_(std::move(model)), backend_(backend) {}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(onnx::ModelProto model,
                                                         const KernelRegistry& registry,
                                                         Backend& backend) {
  std::unique_ptr<Session> session(new Session(std::move(model), backend));
  onnx::ModelProto& m = session->model_;
  try {
    onnx::ShapeInferenceOptions options{/*check_type=*/false, /*error_mode=*/0,
                                        /*enable_data_propagation=*/false};
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("shape inference failed: ", e.what()));
  }
  ExecutorEnv env{registry, backend, {}};
  for (const onnx::OperatorSetIdProto& opset : m.opset_import()) {
    env.opsets[opset.domain() == "ai.onnx" ? "" : opset.domain()] =
        static_cast<int>(opset.version());
  }
  absl::StatusOr<std::unique_ptr<GraphExecutor>> executor =
      GraphExecutor::Create(m.graph(), env, TypeMap());
  if (!executor.ok()) return executor.status();
  session->executor_ = *std::move(executor);
  if (!session->executor_->free_variables().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "value '", session->executor_->free_variables()[0], "' is used but never defined"));
  }
  absl::flat_hash_set<std::string> initializers;
  for (const auto& init : m.graph().initializer()) initializers.insert(init.name());
  for (const auto& input : m.graph().input()) {
    session->inputs_.push_back(SpecOf(input));
    session->inputs_.back().has_default = initializers.contains(input.name());
  }
  for (const auto& output : m.graph().output()) session->outputs_.push_back(SpecOf(output));
  return session;
}

absl::Status Session::CheckInput(const ValueSpec& spec, const Tensor& tensor) const {
  if (tensor.dtype() != spec.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': expected ",
                                                   DTypeName(spec.dtype), ", got ",
                                                   DTypeName(tensor.dtype())));
  }
  bool fits = spec.dims.size() == tensor.shape().size();
  for (size_t i = 0; fits && i < spec.dims.size(); ++i) {
    fits = spec.dims[i] < 0 || spec.dims[i] == tensor.shape()[i];
  }
  if (!fits) {
    std::string declared = absl::StrCat(
        "[",
        absl::StrJoin(spec.dims, ",",
                      [](std::string* out, int64_t d) {
                        absl::StrAppend(out, d < 0 ? std::string("?") : absl::StrCat(d));
                      }),
        "]");
    return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': expected shape ",
                                                   declared, ", got ",
                                                   ShapeString(tensor.shape())));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> Session::Run(std::span<const Tensor> inputs) const {
  if (inputs.size() != inputs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", inputs_.size(), " inputs, got ", inputs.size()));
  }
  std::vector<Tensor> feeds;
  feeds.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& tensor = inputs[i];
    if (tensor.empty()) {
      if (!inputs_[i].has_default) {
        return absl::InvalidArgumentError(absl::StrCat("input '", inputs_[i].name, "' is missing"));
      }
      feeds.emplace_back();
      continue;
    }
    if (absl::Status status = CheckInput(inputs_[i], tensor); !status.ok()) return status;
    const bool on_backend =
        tensor.backend() == &backend_ || (tensor.backend() == nullptr && backend_.name() == "cpu");
    if (on_backend) {
      feeds.push_back(tensor);
      continue;
    }
    absl::StatusOr<Tensor> copy = backend_.NewTensor(tensor.dtype(), tensor.shape());
    if (!copy.ok()) return copy.status();
    if (absl::Status s = backend_.CopyFromHost(tensor.raw(), *copy); !s.ok()) return s;
    feeds.push_back(*std::move(copy));
  }
  return executor_->Run(feeds, {});
}

}  // namespace ampc
