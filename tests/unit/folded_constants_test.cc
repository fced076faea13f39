// Initializers torch's dynamo exporter folded (passes/training/folded_constants.h): folded from
// its constants only (val_N), they are kept fixed and named once; folded from a parameter (a
// transposed Linear weight), they are trained; scalars without the metadata keep the warning.
// The ONNX text parser has no syntax for value_info metadata: the tests add it here.
#include "passes/training/folded_constants.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/model_text.h"
#include "tests/support/train_compile.h"

namespace ampc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// As a dynamo export has it: scale (val_1) folded from constants, wt folded from the parameter
// m.w (a transpose), shift a scalar with no metadata, w a parameter.
onnx::ModelProto Exported() {
  onnx::ModelProto model = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 2] x) => (float loss)
<float[2, 2] wt = {1, 2, 3, 4}, float val_1 = {0.5}, float shift = {3}, float[2] w = {1, 1}>
{
  h = MatMul (x, wt)
  s = Mul (h, val_1)
  t = Add (s, shift)
  u = Mul (t, w)
  loss = ReduceSum <keepdims = 0> (u)
}
)");
  auto mark = [&](const std::string& name, const std::string& key, const std::string& value) {
    onnx::ValueInfoProto& info = *model.mutable_graph()->add_value_info();
    info.set_name(name);
    onnx::TypeProto_Tensor& type = *info.mutable_type()->mutable_tensor_type();
    type.set_elem_type(onnx::TensorProto::FLOAT);
    for (const onnx::TensorProto& t : model.graph().initializer()) {
      if (t.name() != name) continue;
      type.mutable_shape();  // a scalar's shape is there, with no dims
      for (int64_t dim : t.dims()) type.mutable_shape()->add_dim()->set_dim_value(dim);
    }
    onnx::StringStringEntryProto& entry = *info.add_metadata_props();
    entry.set_key(key);
    entry.set_value(value);
  };
  mark("val_1", "pkg.onnxscript.optimizer.folded_from", "['val_93', 'val_94']");
  mark("wt", "pkg.onnxscript.optimizer.folded_from", "['m.w']");
  mark("w", "pkg.torch.export.graph_signature.InputSpec.kind", "PARAMETER");
  return model;
}

std::vector<std::string> Trained(const onnx::ModelProto& model) {
  std::vector<std::string> trained;
  for (const auto& binding : model.training_info(0).update_binding()) {
    if (binding.key().rfind("ampc.", 0) != 0) trained.push_back(binding.key());
  }
  return trained;
}

TEST(FoldedConstants, OnlyFoldsFromExporterConstantsCount) {
  EXPECT_THAT(FoldedConstants(Exported().graph()), UnorderedElementsAre("val_1"));
}

TEST(FoldedConstants, AFoldFromAnyOtherNameOrAnUnreadableListIsNot) {
  onnx::ModelProto model = Exported();
  for (const char* sources : {"['val_2', 'add_3']", "[]", "val_2", "['val_2x']"}) {
    model.mutable_graph()->mutable_value_info(0)->mutable_metadata_props(0)->set_value(sources);
    EXPECT_THAT(FoldedConstants(model.graph()), ::testing::IsEmpty()) << sources;
  }
  model.mutable_graph()->mutable_value_info(0)->mutable_metadata_props(0)->set_value(
      "[\"val_2\",'val_3' ]");
  EXPECT_THAT(FoldedConstants(model.graph()), UnorderedElementsAre("val_1"));
}

TEST(FoldedConstants, FoldedFromConstantsAreKeptFixedAndNamedOnce) {
  onnx::ModelProto model = Exported();
  TrainingOptions options;
  options.loss = "loss";
  options.optimizer = TrainingOptions::Optimizer::kSgd;
  absl::StatusOr<std::vector<std::string>> warnings =
      testing::CompileForTraining(model, {"infer-types", "training-step"}, options);
  ASSERT_TRUE(warnings.ok()) << warnings.status();
  // wt was folded from a parameter: trained. shift has no metadata: trained, with the warning.
  EXPECT_THAT(Trained(model), ElementsAre("wt", "shift", "w"));
  EXPECT_THAT(*warnings,
              ElementsAre("1 initializer the exporter folded from constants is kept fixed: val_1",
                          HasSubstr("training 1 scalar initializer as parameter (shift)")));
}

}  // namespace
}  // namespace ampc
