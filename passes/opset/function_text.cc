#include "passes/opset/function_text.h"

#include <onnx/defs/parser.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/opset/training_ops.h"

namespace ampc {

absl::StatusOr<onnx::FunctionProto> ParseAmpcFunction(const std::string& op,
                                                      const FunctionText& body, int onnx_opset) {
  const std::string attributes =
      body.attributes.empty() ? "" : absl::StrCat("<", absl::StrJoin(body.attributes, ", "), ">");
  const std::string text =
      absl::StrCat("<domain: \"", kAmpcDomain, "\", opset_import: [\"\" : ", onnx_opset, ", \"",
                   kAmpcDomain, "\" : ", kAmpcOpsetVersion, "]>\n", op, " ", attributes, " (",
                   absl::StrJoin(body.inputs, ", "), ") => (", absl::StrJoin(body.outputs, ", "),
                   ") {\n", body.nodes, "}\n");
  onnx::FunctionProto function;
  const onnx::Common::Status status = onnx::OnnxParser::Parse(function, text.c_str());
  if (!status.IsOK()) {
    return absl::InternalError(
        absl::StrCat("body of ai.ampc.", op, " does not parse: ", status.ErrorMessage()));
  }
  return function;
}

}  // namespace ampc
