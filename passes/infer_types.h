// infer-types: ONNX shape and type inference, strict; records the inferred types as value_info.
#pragma once

#include "passes/opset/strict_inference.h"
#include "passes/pass.h"

namespace ampc {

class InferTypes : public Pass {
 public:
  absl::string_view Name() const override { return "infer-types"; }
  absl::StatusOr<PassResult> Run(ModelContext& context) override;
};

// InferTypesStrict, keeping the declared graph inputs and outputs as they were and leaving no
// inference-generated dim names (unk__N) behind, so inferring twice changes nothing.
absl::Status InferTypesKeepingIo(onnx::ModelProto& model, const std::string& file);

}  // namespace ampc
