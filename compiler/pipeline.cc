#include "compiler/pipeline.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ampc {
namespace {

constexpr char kVerifyInputReason[] = "the gate: nothing runs on a model that was not checked";
constexpr char kInferTypesReason[] = "the passes after it read every value's type";
constexpr char kUntieReason[] =
    "--train: exporter-merged parameters (split by --untie) before types and casts are decided";
constexpr char kLiftDropoutReason[] =
    "--train: a Dropout the exporter lowered to random ops is a Dropout again, before autocast";
constexpr char kSplitSequencesReason[] =
    "--train: SplitToSequence read at constant indices becomes Split, which has a gradient";
constexpr char kLossOpReason[] = "--loss-op: adds the loss to the forward graph";
constexpr char kRetypeReason[] = "types the loss loss-op added, before anything reads it";
constexpr char kStepReason[] =
    "--train: the step copies the mixed-precision forward, so after the cast passes";
constexpr char kDropoutModeReason[] =
    "--train: --dropout sets each Dropout's mode before the step differentiates it";
constexpr char kDropoutStepReason[] =
    "--train: the step's Dropout masks from the checkpointed counters; the graph without dropout";
constexpr char kVerifyReason[] = "the output gate: ONNX's checker and strict type inference, last";

std::string UpgradeReason(const PipelineOptions& options) {
  if (options.target_opset) return "--target-opset: converted before anything reads the types";
  if (options.train) return "--train: below opset 17 converted to 17 (the gradient functions')";
  return "converts only for --target-opset or --train (a no-op here)";
}

// verify-input, then what the model needs before the cast passes, the cast passes, the step, and
// the output gate.
std::vector<Placement> StandardPipeline(const PipelineOptions& options) {
  std::vector<Placement> pipeline = {{"verify-input", kVerifyInputReason},
                                     {"upgrade-opset", UpgradeReason(options)}};
  if (options.train) pipeline.push_back({"untie", kUntieReason});
  pipeline.push_back({"infer-types", kInferTypesReason});
  if (options.train) {
    pipeline.push_back({"lift-dropout", kLiftDropoutReason});
    pipeline.push_back({"split-sequences", kSplitSequencesReason});
  }
  if (options.train && options.loss_op) {
    pipeline.push_back({"loss-op", kLossOpReason});
    pipeline.push_back({"infer-types", kRetypeReason});
  }
  if (options.autocast) {
    pipeline.push_back({"autocast", "assigns every node FP16/BF16 or FP32 (the plan)"});
    pipeline.push_back({"insert-casts", "applies the plan: the casts and converted constants"});
    pipeline.push_back({"fold-casts", "removes the casts that change nothing, once all exist"});
  }
  if (options.train) {
    pipeline.push_back({"dropout-mode", kDropoutModeReason});
    pipeline.push_back({"training-step", kStepReason});
    pipeline.push_back({"dropout-step", kDropoutStepReason});
  }
  pipeline.push_back({"verify", kVerifyReason});
  return pipeline;
}

bool Has(const std::vector<Placement>& pipeline, const std::string& pass) {
  return std::any_of(pipeline.begin(), pipeline.end(),
                     [&](const Placement& placement) { return placement.pass == pass; });
}

std::vector<Placement>::iterator Find(std::vector<Placement>& pipeline, const std::string& pass) {
  return std::find_if(pipeline.begin(), pipeline.end(),
                      [&](const Placement& placement) { return placement.pass == pass; });
}

// --passes: verify-input, then the list as given; what --train and --target-opset cannot do
// without is added where the standard pipeline has it, unless the list names it.
std::vector<Placement> RequestedPipeline(const PipelineOptions& options) {
  std::vector<Placement> pipeline = {{"verify-input", kVerifyInputReason}};
  for (const std::string& pass : options.passes) {
    if (pass != "verify-input") pipeline.push_back({pass, "--passes"});
  }
  if (options.train && !Has(pipeline, "training-step")) {
    if (!Has(pipeline, "infer-types")) {
      pipeline.insert(pipeline.begin() + 1, {"infer-types", "--train: the step needs the types"});
    }
    if (!Has(pipeline, "upgrade-opset")) {
      pipeline.insert(Find(pipeline, "infer-types"), {"upgrade-opset", UpgradeReason(options)});
    }
    if (!Has(pipeline, "untie")) {
      pipeline.insert(Find(pipeline, "infer-types"), {"untie", kUntieReason});
    }
    auto step = pipeline.insert(Find(pipeline, "verify"), {"training-step", kStepReason});
    if (!Has(pipeline, "dropout-mode")) {
      step = pipeline.insert(step, {"dropout-mode", kDropoutModeReason}) + 1;
    }
    if (!Has(pipeline, "dropout-step"))
      pipeline.insert(step + 1, {"dropout-step", kDropoutStepReason});
    if (options.loss_op && !Has(pipeline, "loss-op")) {
      auto at = pipeline.insert(Find(pipeline, "infer-types") + 1, {"loss-op", kLossOpReason});
      pipeline.insert(at + 1, {"infer-types", kRetypeReason});
    }
    if (!Has(pipeline, "split-sequences")) {
      pipeline.insert(Find(pipeline, "infer-types") + 1,
                      {"split-sequences", kSplitSequencesReason});
    }
    if (!Has(pipeline, "lift-dropout")) {
      pipeline.insert(Find(pipeline, "infer-types") + 1, {"lift-dropout", kLiftDropoutReason});
    }
  }
  if (options.target_opset && !Has(pipeline, "upgrade-opset")) {
    pipeline.insert(pipeline.begin() + 1, {"upgrade-opset", UpgradeReason(options)});
  }
  return pipeline;
}

}  // namespace

std::vector<Placement> PipelineFor(const PipelineOptions& options) {
  return options.passes.empty() ? StandardPipeline(options) : RequestedPipeline(options);
}

std::string PipelineText(const std::vector<Placement>& pipeline) {
  size_t width = 0;
  for (const Placement& placement : pipeline) width = std::max(width, placement.pass.size());
  std::string text;
  for (const Placement& placement : pipeline) {
    absl::StrAppendFormat(&text, "%-*s  %s\n", static_cast<int>(width), placement.pass,
                          placement.reason);
  }
  return text;
}

absl::StatusOr<std::vector<std::unique_ptr<Pass>>> CreatePipeline(
    const std::vector<Placement>& pipeline, const PassOptions& options) {
  std::vector<std::unique_ptr<Pass>> passes;
  for (const Placement& placement : pipeline) {
    absl::StatusOr<std::unique_ptr<Pass>> pass = CreatePass(placement.pass, options);
    if (!pass.ok()) return pass.status();
    passes.push_back(*std::move(pass));
  }
  return passes;
}

absl::Status CompileWithDefaults(onnx::ModelProto& model, const std::string& file,
                                 const AutocastOptions& options) {
  PassOptions pass_options;
  pass_options.autocast = options;
  absl::StatusOr<std::vector<std::unique_ptr<Pass>>> passes =
      CreatePipeline(PipelineFor({}), pass_options);
  if (!passes.ok()) return passes.status();
  ModelContext context(model, file);
  for (const std::unique_ptr<Pass>& pass : *passes) {
    absl::StatusOr<PassResult> result = RunPass(*pass, context);
    if (!result.ok()) return result.status();
  }
  return absl::OkStatus();
}

}  // namespace ampc
