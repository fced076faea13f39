#include "compiler/autocast_flags.h"

#include <re2/re2.h>

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "compiler/exit_codes.h"
#include "compiler/policy_file.h"
#include "passes/graph/status_macros.h"
#include "passes/opset/training_ops.h"

ABSL_FLAG(std::string, dtype, "fp16",
          "The low dtype: fp16 or bf16; fp32 runs no autocast (the FP32 baseline).");
ABSL_FLAG(bool, low_io, false, "Float graph inputs and outputs become the low dtype too.");
ABSL_FLAG(std::vector<std::string>, block_op, {}, "Ops (comma-separated) forced to FP32.");
ABSL_FLAG(std::string, block_node, "", "Nodes whose name matches this RE2 regex stay FP32.");
ABSL_FLAG(std::string, lower_node, "", "Nodes whose name matches this RE2 regex go low.");
ABSL_FLAG(std::string, policy, "", "JSON file of per-op category changes.");
ABSL_FLAG(bool, clamp, false, "Clamp FP16 constants to +-65504 instead of keeping FP32.");
ABSL_FLAG(bool, standard_ops, false,
          "Emit only standard ONNX ops: no ai.ampc versions of ops whose schema lacks bf16.");

namespace ampc {
namespace {

absl::Status CheckRegex(const std::string& flag, const std::string& pattern) {
  if (pattern.empty()) return absl::OkStatus();
  RE2 regex(pattern, RE2::Quiet);
  if (regex.ok()) return absl::OkStatus();
  return UsageError(absl::StrCat("--", flag, "='", pattern, "': ", regex.error()));
}

}  // namespace

absl::StatusOr<AutocastOptions> AutocastOptionsFromFlags() {
  AutocastOptions options;
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype == "fp16") {
    options.low_dtype = onnx::TensorProto::FLOAT16;
  } else if (dtype == "bf16") {
    options.low_dtype = onnx::TensorProto::BFLOAT16;
  } else if (dtype == "fp32") {
    options.low_dtype = onnx::TensorProto::FLOAT;  // the pipeline has no cast passes
  } else {
    return UsageError(absl::StrCat("--dtype=", dtype, ": expected fp16, bf16 or fp32"));
  }
  options.policy = AutocastPolicy::Defaults(options.low_dtype);
  options.low_io = absl::GetFlag(FLAGS_low_io);
  options.clamp = absl::GetFlag(FLAGS_clamp);
  options.ampc_versions = !absl::GetFlag(FLAGS_standard_ops);
  options.block_node_regex = absl::GetFlag(FLAGS_block_node);
  options.lower_node_regex = absl::GetFlag(FLAGS_lower_node);
  AMPC_RETURN_IF_ERROR(CheckRegex("block-node", options.block_node_regex));
  AMPC_RETURN_IF_ERROR(CheckRegex("lower-node", options.lower_node_regex));
  const std::string policy = absl::GetFlag(FLAGS_policy);
  if (!policy.empty()) {
    AMPC_RETURN_IF_ERROR(ApplyPolicyFile(policy, options.policy));
  }
  RegisterAmpcSchemas();  // so that ai.ampc is a domain CheckOpKey knows
  for (const std::string& op : absl::GetFlag(FLAGS_block_op)) {
    if (absl::Status s = CheckOpKey(op); !s.ok()) {
      return UsageError(absl::StrCat("--block-op=", op, ": ", s.message()));
    }
    options.policy.Set(op, Category::kFp32, "--block-op");
  }
  return options;
}

bool Fp32Baseline() { return absl::GetFlag(FLAGS_dtype) == "fp32"; }

}  // namespace ampc
