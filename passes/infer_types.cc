#include "passes/infer_types.h"

#include <onnx/shape_inference/implementation.h>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "passes/onnx_status.h"

namespace ampc {

absl::Status InferTypesStrict(onnx::ModelProto& model, const std::string& file) {
  const onnx::ShapeInferenceOptions options(/*check_type_val=*/true, /*strict_mode_val=*/1);
  return CatchOnnx(absl::StrCat(file, ": type inference"), [&] {
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  });
}

absl::StatusOr<bool> InferTypes::Run(ModelContext& context) {
  const onnx::GraphProto before = context.model.graph();
  if (absl::Status s = InferTypesStrict(context.model, context.file); !s.ok()) return s;
  // Inference may rename unknown dims of graph outputs (unk__0); the declared I/O is the user's.
  onnx::GraphProto& graph = *context.model.mutable_graph();
  *graph.mutable_input() = before.input();
  *graph.mutable_output() = before.output();
  return !google::protobuf::util::MessageDifferencer::Equals(before, context.model.graph());
}

}  // namespace ampc
