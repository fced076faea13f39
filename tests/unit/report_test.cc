// What a compile reports: weight bytes and Cast counts, the FLOPs estimate, the stderr line, the
// explain table and the --report JSON, on hand-built plans and through the real binary.
#include "compiler/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "compiler/flops_estimate.h"
#include "compiler/model_io.h"
#include "models/mlp.h"
#include "models/model_builder.h"
#include "tests/support/subprocess.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using models::AddNode;
using models::AddTensorValue;
using nlohmann::json;
using onnx::TensorProto;
using ::testing::HasSubstr;
using ::testing::Not;

TensorProto* AddTensor(onnx::GraphProto* graph, const std::string& name, int type,
                       std::vector<int64_t> dims) {
  TensorProto* t = graph->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  return t;
}

TEST(WeightBytesTest, CountsEveryInitializerOfEveryGraph) {
  onnx::ModelProto model = models::NewModel("g");
  onnx::GraphProto* graph = model.mutable_graph();
  AddTensor(graph, "f32", TensorProto::FLOAT, {2, 3})->set_raw_data(std::string(24, '\0'));
  TensorProto* typed = AddTensor(graph, "f16", TensorProto::FLOAT16, {4});
  for (int i = 0; i < 4; ++i) typed->add_int32_data(0);   // 8 bytes
  AddTensor(graph, "external", TensorProto::FLOAT, {10})  // 40 bytes by dims
      ->set_data_location(TensorProto::EXTERNAL);
  TensorProto* strings = AddTensor(graph, "s", TensorProto::STRING, {2});  // 5 bytes
  strings->add_string_data("ab");
  strings->add_string_data("cde");
  onnx::SparseTensorProto* sparse = graph->add_sparse_initializer();
  sparse->mutable_values()->set_data_type(TensorProto::FLOAT);  // 8 bytes
  sparse->mutable_values()->add_dims(2);
  sparse->mutable_indices()->set_data_type(TensorProto::INT64);  // 16 bytes
  sparse->mutable_indices()->add_dims(2);
  onnx::NodeProto* node = AddNode(graph, "If", {"c"}, {"y"}, "if");
  onnx::AttributeProto* branch = node->add_attribute();
  branch->set_name("then_branch");
  branch->set_type(onnx::AttributeProto::GRAPH);
  AddTensor(branch->mutable_g(), "sub", TensorProto::INT32, {3});  // 12 bytes
  EXPECT_EQ(WeightBytes(model), 24 + 8 + 40 + 5 + 8 + 16 + 12);
}

TEST(CountCastsTest, CountsDefaultDomainCastsInSubgraphsToo) {
  onnx::ModelProto model = models::NewModel("g");
  onnx::GraphProto* graph = model.mutable_graph();
  AddNode(graph, "Cast", {"a"}, {"b"}, "c1");
  AddNode(graph, "Cast", {"b"}, {"c"}, "c2")->set_domain("ai.onnx");
  AddNode(graph, "Cast", {"c"}, {"d"}, "custom")->set_domain("com.example");
  AddNode(graph, "Relu", {"d"}, {"e"}, "relu");
  onnx::AttributeProto* body =
      AddNode(graph, "Loop", {"", "", "e"}, {"f"}, "loop")->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  AddNode(body->mutable_g(), "Cast", {"x"}, {"y"}, "inner");
  EXPECT_EQ(CountCasts(model), 3);
}

// Shapes from value_info, graph inputs and initializers; 2 x multiply-accumulates.
TEST(FlopsEstimateTest, SizesEachOpFromStaticShapes) {
  onnx::ModelProto model = models::NewModel("g");
  onnx::GraphProto* g = model.mutable_graph();
  AddTensorValue(g->add_input(), "a", TensorProto::FLOAT, {2, 3});
  AddTensor(g, "b", TensorProto::FLOAT, {3, 4});
  AddTensorValue(g->add_value_info(), "mm", TensorProto::FLOAT, {2, 4});
  AddTensorValue(g->add_value_info(), "gemm", TensorProto::FLOAT, {3, 4});
  AddTensorValue(g->add_value_info(), "x", TensorProto::FLOAT, {1, 2, 5, 5});
  AddTensor(g, "w", TensorProto::FLOAT, {4, 2, 3, 3});
  AddTensorValue(g->add_value_info(), "conv", TensorProto::FLOAT, {1, 4, 3, 3});
  AddTensor(g, "wt", TensorProto::FLOAT, {2, 4, 2, 2});
  AddTensorValue(g->add_value_info(), "n", TensorProto::FLOAT, {-1, 3});
  const StaticShapes shapes(model);
  EXPECT_EQ(NodeFlops(*AddNode(g, "MatMul", {"a", "b"}, {"mm"}, ""), shapes), 2 * 8 * 3);
  onnx::NodeProto* gemm = AddNode(g, "Gemm", {"a", "b"}, {"gemm"}, "");
  onnx::AttributeProto* trans_a = gemm->add_attribute();
  trans_a->set_name("transA");
  trans_a->set_i(1);
  EXPECT_EQ(NodeFlops(*gemm, shapes), 2 * 12 * 2);  // A is [K, M] = [2, 3]
  EXPECT_EQ(NodeFlops(*AddNode(g, "Conv", {"x", "w"}, {"conv"}, ""), shapes), 2 * 36 * 18);
  EXPECT_EQ(NodeFlops(*AddNode(g, "ConvTranspose", {"x", "wt"}, {"ct"}, ""), shapes), 2 * 50 * 16);
  onnx::NodeProto* einsum = AddNode(g, "Einsum", {"a", "b"}, {"es"}, "");
  onnx::AttributeProto* equation = einsum->add_attribute();
  equation->set_name("equation");
  equation->set_s("ij, jk -> ik");
  EXPECT_EQ(NodeFlops(*einsum, shapes), 2 * 2 * 3 * 4);
  EXPECT_EQ(NodeFlops(*AddNode(g, "MatMul", {"n", "b"}, {"mm2"}, ""), shapes), std::nullopt);
  EXPECT_EQ(NodeFlops(*AddNode(g, "Relu", {"a"}, {"r"}, ""), shapes), std::nullopt);
}

// A three-node model and the plan autocast and insert-casts would leave for it.
class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = models::NewModel("g");
    onnx::GraphProto* g = model_.mutable_graph();
    AddTensorValue(g->add_input(), "x", TensorProto::FLOAT, {2, 3});
    AddTensor(g, "w", TensorProto::FLOAT, {3, 4});
    AddTensorValue(g->add_value_info(), "y", TensorProto::FLOAT, {2, 4});
    Plan(AddNode(g, "MatMul", {"x", "w"}, {"y"}, "mm"), TensorProto::FLOAT16, Category::kLower,
         "rule for mm", 2);
    Plan(AddNode(g, "Softmax", {"y"}, {"z"}, "sm"), TensorProto::FLOAT, Category::kFp32,
         "rule for sm", 1);
    onnx::NodeProto* custom = AddNode(g, "MyOp", {"z"}, {"out"}, "");
    custom->set_domain("com.example");
    Plan(custom, 0, Category::kKeep, "rule for the custom op", 0);
    plan_.casts_added = 4;  // one of them casts a graph output back
    plan_.constants_converted = 1;
    plan_.values_clamped = 3;
    summary_ = {"in.onnx", "out.onnx", 48, 24, 1, 5, 0.25, &plan_, &model_, "", {}, {}, {}};
    summary_.diagnostics = {{Diagnostic::Severity::kWarning, "autocast", "g#2", "",
                             "node 'g#2' (MyOp): op not in the policy"}};
  }
  void Plan(const onnx::NodeProto* node, int dtype, Category category, std::string rule,
            int casts) {
    NodePlan& p = plan_.nodes[node];
    p.name = node->name().empty() ? "g#2" : node->name();
    p.op_type = node->op_type();
    p.dtype = dtype;
    p.category = category;
    p.rule = std::move(rule);
    p.casts_added = casts;
    plan_.order.push_back(node);
  }

  onnx::ModelProto model_;
  PrecisionPlan plan_;
  CompileSummary summary_;
};

TEST_F(ReportTest, JsonHasEveryNodeDecision) {
  const json report = json::parse(ReportJson(summary_));
  EXPECT_EQ(report["input"], summary_.input);
  EXPECT_EQ(report["output"], summary_.output);
  EXPECT_EQ(report["dtype"], DtypeName(plan_.low_dtype));
  EXPECT_EQ(report["low_io"], plan_.low_io);
  ASSERT_EQ(report["nodes"].size(), plan_.order.size());
  for (size_t i = 0; i < plan_.order.size(); ++i) {
    const NodePlan& p = plan_.nodes.at(plan_.order[i]);
    const json& node = report["nodes"][i];
    EXPECT_EQ(node["name"], p.name);
    EXPECT_EQ(node["dtype"], DtypeName(p.dtype));
    EXPECT_EQ(node["category"], std::string(CategoryName(p.category)));
    EXPECT_EQ(node["rule"], p.rule);
    EXPECT_EQ(node["casts_added"], p.casts_added);
  }
  EXPECT_EQ(report["nodes"][0]["op"], "MatMul");
  EXPECT_EQ(report["nodes"][2]["op"], "com.example.MyOp");  // as a policy file names it
}

TEST_F(ReportTest, JsonSummaryAddsUp) {
  const json s = json::parse(ReportJson(summary_))["summary"];
  EXPECT_EQ(s["nodes"], 3);
  EXPECT_EQ(s["nodes_by_dtype"], json({{"fp16", 1}, {"fp32", 1}, {"kept", 1}}));
  EXPECT_EQ(s["casts"]["before"], summary_.casts_before);
  EXPECT_EQ(s["casts"]["after"], summary_.casts_after);
  EXPECT_EQ(s["casts"]["added"], plan_.casts_added);
  EXPECT_EQ(s["casts"]["removed"], 0);
  EXPECT_EQ(s["casts"]["added_at_graph_outputs"], 1);
  EXPECT_EQ(s["weight_bytes"]["before"], summary_.weight_bytes_before);
  EXPECT_EQ(s["weight_bytes"]["after"], summary_.weight_bytes_after);
  EXPECT_EQ(s["values_clamped"], plan_.values_clamped);
  EXPECT_EQ(s["seconds"], summary_.seconds);
  EXPECT_EQ(s["flops"]["total"], 2 * 8 * 3);  // the MatMul, in fp16
  EXPECT_EQ(s["flops"]["low_share"], 1.0);
}

TEST_F(ReportTest, CastsRemovedMakeTheCountsAddUp) {
  summary_.casts_after = 2;  // 1 + 4 - 3
  json casts = json::parse(ReportJson(summary_))["summary"]["casts"];
  EXPECT_EQ(casts["added"], 4);
  EXPECT_EQ(casts["removed"], 3);
  summary_.casts_after = 9;  // casts the plan does not know of count as added
  casts = json::parse(ReportJson(summary_))["summary"]["casts"];
  EXPECT_EQ(casts["added"], 8);
  EXPECT_EQ(casts["removed"], 0);
}

TEST_F(ReportTest, JsonWarningsNameUnknownOpsAndClampedValues) {
  const json warnings = json::parse(ReportJson(summary_))["warnings"];
  ASSERT_EQ(warnings.size(), 2);
  EXPECT_EQ(warnings[0], summary_.diagnostics[0].message);
  EXPECT_THAT(warnings[1].get<std::string>(), HasSubstr("3 constant values clamped"));
}

TEST_F(ReportTest, JsonDiagnosticsKeepTheirFields) {
  summary_.diagnostics.push_back(
      {Diagnostic::Severity::kWarning, "insert-casts", "", "c", "constant 'c': 2 values overflow"});
  const json diagnostics = json::parse(ReportJson(summary_))["diagnostics"];
  ASSERT_EQ(diagnostics.size(), 2);
  EXPECT_EQ(diagnostics[0], json({{"severity", "warning"},
                                  {"pass", "autocast"},
                                  {"node", "g#2"},
                                  {"value", nullptr},
                                  {"message", "node 'g#2' (MyOp): op not in the policy"}}));
  EXPECT_EQ(diagnostics[1]["node"], nullptr);
  EXPECT_EQ(diagnostics[1]["value"], "c");
  EXPECT_EQ(diagnostics[1]["pass"], "insert-casts");
}

TEST_F(ReportTest, JsonIsDeterministic) { EXPECT_EQ(ReportJson(summary_), ReportJson(summary_)); }

TEST_F(ReportTest, ExplainHasOneRowPerNodeWithItsRule) {
  plan_.nodes[plan_.order[0]].name = "head_" + std::string(200, 'n') + "_tail";
  std::istringstream table(ExplainTable(summary_));
  std::vector<std::string> rows;
  for (std::string line; std::getline(table, line);) {
    if (line.find("rule for") != std::string::npos) rows.push_back(line);
  }
  ASSERT_EQ(rows.size(), plan_.order.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const NodePlan& p = plan_.nodes.at(plan_.order[i]);
    EXPECT_THAT(rows[i], HasSubstr(DtypeName(p.dtype) + " "));
    EXPECT_TRUE(rows[i].ends_with(p.rule)) << rows[i];  // rules are never cut
  }
  EXPECT_TRUE(rows[0].starts_with("head_")) << rows[0];  // a long name keeps both ends
  EXPECT_THAT(rows[0], HasSubstr("..."));
  EXPECT_THAT(rows[0], HasSubstr("_tail "));
  EXPECT_LT(rows[0].find("rule for"), 120u);
  EXPECT_THAT(rows[1], HasSubstr("sm"));
  EXPECT_THAT(rows[2], HasSubstr("com.example.MyOp"));
}

TEST_F(ReportTest, ExplainSummaryShowsFlopsWeightsAndWarnings) {
  const std::string table = ExplainTable(summary_);
  EXPECT_THAT(table, HasSubstr("100.0% in fp16"));
  EXPECT_THAT(table, HasSubstr("48 -> 24 bytes"));
  EXPECT_THAT(table, HasSubstr(summary_.diagnostics[0].message));
  summary_.model = nullptr;
  EXPECT_THAT(ExplainTable(summary_), HasSubstr("n/a"));
}

TEST_F(ReportTest, VersionChangesAreNamedInTheSummaryLineExplainAndJson) {
  EXPECT_EQ(VersionChanges(summary_), "");
  EXPECT_THAT(SummaryLine(summary_), Not(HasSubstr("IR")));
  summary_.versions_before = {8, {{"", 17}}};
  summary_.versions_after = {10, {{"", 22}, {"ai.ampc", 1}}};
  EXPECT_EQ(VersionChanges(summary_), "IR 8 -> 10, opset 17 -> 22, ai.ampc 1 added");
  EXPECT_THAT(SummaryLine(summary_), HasSubstr("; IR 8 -> 10, opset 17 -> 22, ai.ampc 1 added;"));
  EXPECT_THAT(ExplainTable(summary_), HasSubstr("versions   IR 8 -> 10"));
  const json versions = json::parse(ReportJson(summary_))["summary"]["versions"];
  EXPECT_EQ(versions["before"]["ir_version"], 8);
  EXPECT_EQ(versions["after"]["opsets"][""], 22);
  EXPECT_EQ(versions["after"]["opsets"]["ai.ampc"], 1);
}

TEST_F(ReportTest, ExplainHintsAtTargetOpset22ForAmpcVersions) {
  EXPECT_THAT(ExplainTable(summary_), Not(HasSubstr("--target-opset")));
  plan_.nodes[plan_.order[0]].ampc_version = true;
  EXPECT_THAT(ExplainTable(summary_),
              HasSubstr("1 node runs as its ai.ampc version (its schema gains bfloat16 at opset "
                        "22); --target-opset 22 runs it as a standard op"));
}

// A node a later pass removed from the model is reported from the plan alone.
TEST_F(ReportTest, NodesNoLongerInTheModelAreNotRead) {
  onnx::NodeProto removed;
  removed.set_op_type("MatMul");
  removed.set_domain("com.example");
  Plan(&removed, TensorProto::FLOAT16, Category::kLower, "rule for removed", 0);
  const json report = json::parse(ReportJson(summary_));
  EXPECT_EQ(report["nodes"][3]["op"], "MatMul");  // op_type from the plan, no domain
  EXPECT_EQ(report["summary"]["flops"]["nodes_estimated"], 1);
  summary_.model = nullptr;
  EXPECT_EQ(json::parse(ReportJson(summary_))["nodes"][2]["op"], "MyOp");
  EXPECT_TRUE(json::parse(ReportJson(summary_))["summary"]["flops"].is_null());
}

TEST_F(ReportTest, SummaryLineIsOneLineWithCountsCastsAndWeights) {
  const std::string line = SummaryLine(summary_);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_THAT(line, HasSubstr("in.onnx -> out.onnx"));
  EXPECT_THAT(line, HasSubstr("3 nodes: 1 fp16, 1 fp32, 1 kept"));
  EXPECT_THAT(line, HasSubstr("casts +4 -0 (1 -> 5)"));
  EXPECT_THAT(line, HasSubstr("weights 48 B -> 24 B"));
  EXPECT_THAT(line, HasSubstr("2 warnings"));
}

TEST_F(ReportTest, WithoutAutocastSaysSo) {
  summary_.plan = nullptr;
  summary_.casts_after = summary_.casts_before;
  EXPECT_THAT(SummaryLine(summary_), HasSubstr("autocast did not run"));
  EXPECT_THAT(ExplainTable(summary_), Not(HasSubstr("rule for")));
  const json report = json::parse(ReportJson(summary_));
  EXPECT_TRUE(report["nodes"].empty());
  EXPECT_TRUE(report["dtype"].is_null());
  EXPECT_EQ(report["summary"]["casts"]["added"], 0);
}

// Through the real binary: the report agrees with the model ampc wrote.
TEST(ReportEndToEndTest, ReportMatchesTheOutputModel) {
  char pattern[] = "/tmp/ampc-report-XXXXXX";
  const fs::path dir = mkdtemp(pattern);
  const onnx::ModelProto mlp = models::BuildMlp();
  const std::string in = (dir / "mlp.onnx").string(), out = (dir / "out.onnx").string();
  const std::string report_path = (dir / "r.json").string();
  std::ofstream(in, std::ios::binary) << mlp.SerializeAsString();
  auto r = testing::RunProcess({AMPC_BINARY, in, "-o", out, "--report", report_path}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("ampc: " + in + " -> " + out + ": "));
  const json report = json::parse(testing::ReadFileOrEmpty(report_path));
  absl::StatusOr<LoadedModel> compiled = LoadModel(out);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(report["nodes"].size(), mlp.graph().node_size());
  EXPECT_EQ(report["summary"]["casts"]["after"], CountCasts(compiled->model));
  EXPECT_EQ(report["summary"]["weight_bytes"]["before"], WeightBytes(mlp));
  EXPECT_EQ(report["summary"]["weight_bytes"]["after"], WeightBytes(compiled->model));
  EXPECT_EQ(report["nodes"].back()["dtype"], "fp32");  // the loss
  r = testing::RunProcess({AMPC_BINARY, "explain", in}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const onnx::NodeProto& node : mlp.graph().node()) {
    EXPECT_THAT(r.out, HasSubstr(node.name() + " ")) << r.out;
  }
  r = testing::RunProcess({AMPC_BINARY, "explain", in, "--dtype=fp32"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("autocast did not run (--dtype=fp32)"));
  r = testing::RunProcess({AMPC_BINARY, "explain", in, "--passes=infer-types"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("autocast did not run (--passes)"));
  fs::remove_all(dir);
}

// A warning from a pass other than autocast (here verify-input sorting the nodes) is counted on
// the summary line and listed in the report, like autocast's own.
TEST(ReportEndToEndTest, EveryPrintedWarningIsCountedAndReported) {
  char pattern[] = "/tmp/ampc-report-XXXXXX";
  const fs::path dir = mkdtemp(pattern);
  onnx::ModelProto mlp = models::BuildMlp();
  auto& nodes = *mlp.mutable_graph()->mutable_node();
  std::reverse(nodes.begin(), nodes.end());
  const std::string in = (dir / "mlp.onnx").string(), report_path = (dir / "r.json").string();
  std::ofstream(in, std::ios::binary) << mlp.SerializeAsString();
  auto r = testing::RunProcess(
      {AMPC_BINARY, in, "-o", (dir / "out.onnx").string(), "--report", report_path}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr(in + ": warning: nodes were not in topological order"));
  EXPECT_THAT(r.err, HasSubstr("; 1 warning; "));
  const json report = json::parse(testing::ReadFileOrEmpty(report_path));
  EXPECT_EQ(report["warnings"], json::array({"nodes were not in topological order; sorted them"}));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ampc
