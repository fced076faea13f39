#include "compiler/train_flags.h"

#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "compiler/cli_args.h"
#include "compiler/exit_codes.h"
#include "compiler/train_config.h"
#include "passes/graph/status_macros.h"
#include "passes/training/loss_op.h"

ABSL_FLAG(bool, train, false, "Compile a training model: training_info with the training step.");
ABSL_FLAG(std::string, loss, "", "--train: the scalar loss value of the forward graph.");
ABSL_FLAG(std::string, loss_op, "",
          "--train: cross_entropy:LOGITS, causal_lm:LOGITS (with ,ignore_index=I and "
          ",label_smoothing=E) or mse:OUTPUT adds that loss (and a labels or target input) to a "
          "forward model without one; replaces --loss.");
ABSL_FLAG(bool, untie, false,
          "--train: give each parameter the exporter merged into one initializer (read through "
          "Identity nodes) its own copy, so that each trains separately.");
ABSL_FLAG(std::string, dropout, "off",
          "--train: off (every Dropout is the identity), graph (the Dropout nodes the model has "
          "drop in the step at their own ratio) or a ratio R in (0, 1) (those nodes drop at R); "
          "an export in eval mode has no Dropout nodes left (docs/training.md, \"Dropout\").");
ABSL_FLAG(std::string, optimizer, "adamw", "--train: sgd, momentum, adam or adamw.");
constexpr double kDefaultWeightDecay = -1.0;  // the optimizer's: AdamW 0.01, the others 0
ABSL_FLAG(double, weight_decay, kDefaultWeightDecay,
          "--train: weight decay (default: 0.01 for adamw, 0 for the others).");
ABSL_FLAG(double, momentum, 0.9, "--train: the momentum of --optimizer=momentum.");
ABSL_FLAG(bool, nesterov, false, "--train: Nesterov momentum (--optimizer=momentum).");
ABSL_FLAG(std::string, freeze, "", "--train: initializers whose names fully match stay fixed.");
ABSL_FLAG(std::string, loss_scale, "",
          "--train: dynamic, static:V or none (default: dynamic for fp16, none for bf16).");
ABSL_FLAG(double, clip_grad_norm, 0.0, "--train: clip the global gradient norm to this (0: off).");
ABSL_FLAG(int64_t, accumulate, 1,
          "--train: micro-batches per optimizer step (gradients summed, scaled by 1/K).");
// Shared with `ampc train` (compiler/train_command.cc): at compile time it is recorded as the
// model's metadata ampc.lr.
ABSL_DECLARE_FLAG(double, lr);

namespace ampc {
namespace {

absl::Status ParseLossScale(const std::string& text, TrainingOptions& options) {
  if (text.empty()) return absl::OkStatus();
  if (text == "dynamic") {
    options.loss_scale = TrainingOptions::LossScale::kDynamic;
    return absl::OkStatus();
  }
  if (text == "none") {
    options.loss_scale = TrainingOptions::LossScale::kNone;
    return absl::OkStatus();
  }
  float value = 0;
  if (absl::StartsWith(text, "static:") && absl::SimpleAtof(text.substr(7), &value) &&
      std::isfinite(value) && value >= std::numeric_limits<float>::min()) {
    options.loss_scale = TrainingOptions::LossScale::kStatic;
    options.init_scale = value;
    return absl::OkStatus();
  }
  return UsageError(absl::StrCat(
      "--loss-scale=", text,
      ": expected dynamic, static:V (V a normal float, 1.17549435e-38 to 3.40282347e+38) or none"));
}

absl::Status ParseOptimizer(const std::string& text, TrainingOptions& options) {
  using Optimizer = TrainingOptions::Optimizer;
  if (text == "sgd") {
    options.optimizer = Optimizer::kSgd;
  } else if (text == "momentum") {
    options.optimizer = Optimizer::kMomentum;
  } else if (text == "adam") {
    options.optimizer = Optimizer::kAdam;
  } else if (text == "adamw") {
    options.optimizer = Optimizer::kAdamW;
  } else {
    return UsageError(
        absl::StrCat("--optimizer=", text, ": expected sgd, momentum, adam or adamw"));
  }
  return absl::OkStatus();
}

absl::Status ParseDropout(const std::string& text, TrainingOptions& options) {
  using Dropout = TrainingOptions::Dropout;
  if (text == "off") {
    options.dropout = Dropout::kOff;
    return absl::OkStatus();
  }
  if (text == "graph") {
    options.dropout = Dropout::kGraph;
    return absl::OkStatus();
  }
  float ratio = 0;
  if (absl::SimpleAtof(text, &ratio) && ratio > 0.0f && ratio < 1.0f) {
    options.dropout = Dropout::kRatio;
    options.dropout_ratio = ratio;
    return absl::OkStatus();
  }
  return UsageError(absl::StrCat("--dropout=", text,
                                 ": expected off, graph or a ratio R with 0 < R < 1 (e.g. 0.1)"));
}

// The first flag that only the training step reads and that differs from its default, or null.
const char* StepFlagGiven() {
  for (const char* flag : {"lr", "optimizer", "weight_decay", "momentum", "nesterov", "freeze",
                           "loss_scale", "clip_grad_norm", "accumulate", "dropout"}) {
    if (FlagGiven(flag)) return flag;
  }
  return nullptr;
}

// The flags' values as float; NaN and values beyond float's range are refused like the
// --train-config file's.
absl::Status CheckHyperParameters(const TrainingOptions& o) {
  if (!(std::isfinite(o.lr) && o.lr > 0)) return UsageError("--lr must be a finite number > 0");
  if (!(std::isfinite(o.momentum) && o.momentum >= 0)) {
    return UsageError("--momentum must be a finite number >= 0");
  }
  // Negative is the flag's "unset": the optimizer's default decay.
  if (FlagGiven("weight_decay") && !(std::isfinite(o.weight_decay) && o.weight_decay >= 0)) {
    return UsageError("--weight-decay must be a finite number >= 0");
  }
  if (!(o.clip_grad_norm >= 0)) return UsageError("--clip-grad-norm must be >= 0");
  if (o.nesterov && o.optimizer == TrainingOptions::Optimizer::kMomentum && o.momentum <= 0) {
    return UsageError("--nesterov needs --momentum > 0");
  }
  return absl::OkStatus();
}

// --momentum and --nesterov set the momentum optimizer's values (also the default of a
// --train-config group of that optimizer); given with none, they would be ignored.
absl::Status CheckMomentumFlagsApply(const TrainingOptions& o) {
  using Optimizer = TrainingOptions::Optimizer;
  const bool used = o.optimizer == Optimizer::kMomentum ||
                    std::any_of(o.groups.begin(), o.groups.end(), [](const auto& group) {
                      return group.optimizer == Optimizer::kMomentum;
                    });
  if (used) return absl::OkStatus();
  // --nesterov=false asks for nothing: only a true one needs the optimizer.
  const char* flag = FlagGiven("momentum") ? "momentum" : o.nesterov ? "nesterov" : nullptr;
  if (flag == nullptr) return absl::OkStatus();
  return UsageError(absl::StrCat(
      "--", flag,
      " applies to --optimizer=momentum (or a --train-config group of that optimizer) only"));
}

}  // namespace

absl::StatusOr<TrainingOptions> TrainingOptionsFromFlags() {
  TrainingOptions options;
  options.enabled = absl::GetFlag(FLAGS_train);
  options.loss = absl::GetFlag(FLAGS_loss);
  options.loss_op = absl::GetFlag(FLAGS_loss_op);
  if (!options.enabled) {
    if (!options.loss.empty()) return UsageError("--loss needs --train");
    if (!options.loss_op.empty()) return UsageError("--loss-op needs --train");
    if (absl::GetFlag(FLAGS_untie)) return UsageError("--untie needs --train");
    if (!TrainConfigPath().empty()) return UsageError("--train-config needs --train");
    if (const char* flag = StepFlagGiven(); flag != nullptr) {
      std::string spelled = absl::StrCat("--", flag);
      std::replace(spelled.begin(), spelled.end(), '_', '-');
      return UsageError(absl::StrCat(spelled, " needs --train"));
    }
    return options;
  }
  if (!options.loss_op.empty()) {
    if (!options.loss.empty()) {
      return UsageError(
          "--loss and --loss-op exclude each other: --loss-op names the loss it adds");
    }
    absl::StatusOr<LossOpSpec> spec = ParseLossOp(options.loss_op);
    if (!spec.ok()) return UsageError(spec.status().message());
  } else if (options.loss.empty()) {
    return UsageError(
        "--train needs --loss=NAME (the scalar loss value) or --loss-op=cross_entropy:LOGITS|"
        "causal_lm:LOGITS|mse:OUTPUT");
  }
  options.untie = absl::GetFlag(FLAGS_untie);
  AMPC_RETURN_IF_ERROR(ParseDropout(absl::GetFlag(FLAGS_dropout), options));
  AMPC_RETURN_IF_ERROR(ParseOptimizer(absl::GetFlag(FLAGS_optimizer), options));
  AMPC_RETURN_IF_ERROR(ParseLossScale(absl::GetFlag(FLAGS_loss_scale), options));
  options.freeze = absl::GetFlag(FLAGS_freeze);
  if (!options.freeze.empty()) {
    RE2 regex(options.freeze, RE2::Quiet);
    if (!regex.ok())
      return UsageError(absl::StrCat("--freeze='", options.freeze, "': ", regex.error()));
  }
  options.lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
  options.weight_decay = static_cast<float>(absl::GetFlag(FLAGS_weight_decay));
  options.momentum = static_cast<float>(absl::GetFlag(FLAGS_momentum));
  options.nesterov = absl::GetFlag(FLAGS_nesterov);
  options.clip_grad_norm = static_cast<float>(absl::GetFlag(FLAGS_clip_grad_norm));
  AMPC_RETURN_IF_ERROR(CheckHyperParameters(options));
  options.accumulate = absl::GetFlag(FLAGS_accumulate);
  if (options.accumulate < 1 || options.accumulate > (int64_t{1} << 24)) {
    return UsageError(absl::StrCat("--accumulate=", options.accumulate,
                                   ": expected a count of micro-batches from 1 to 16777216"));
  }
  if (!TrainConfigPath().empty()) {
    AMPC_RETURN_IF_ERROR(ApplyTrainConfig(TrainConfigPath(), options));
  }
  AMPC_RETURN_IF_ERROR(CheckMomentumFlagsApply(options));
  return options;
}

bool TrainFlagGiven() { return absl::GetFlag(FLAGS_train); }
bool LossOpFlagGiven() { return !absl::GetFlag(FLAGS_loss_op).empty(); }

}  // namespace ampc
