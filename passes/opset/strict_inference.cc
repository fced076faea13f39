#include "passes/opset/strict_inference.h"

#include <onnx/shape_inference/implementation.h>

#include "absl/strings/str_cat.h"
#include "passes/graph/onnx_status.h"
#include "passes/opset/training_ops.h"

namespace ampc {

absl::Status InferTypesStrict(onnx::ModelProto& model, const std::string& file) {
  RegisterAmpcSchemas();  // ai.ampc versions of standard ops appear in ampc's own outputs
  const onnx::ShapeInferenceOptions options(/*check_type_val=*/true, /*strict_mode_val=*/1);
  return CatchOnnx(absl::StrCat(file, ": type inference"), [&] {
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  });
}

}  // namespace ampc
