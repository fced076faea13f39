#include "runtime/trainer.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/graph/status_macros.h"
#include "passes/training/training_state.h"
#include "runtime/device.h"
#include "runtime/learning_rate.h"
#include "runtime/synthetic_data.h"
#include "runtime/trainer_feeding.h"
#include "runtime/trainer_progress.h"
#include "runtime/training_session.h"

namespace ampc {
namespace {

constexpr char kOptionPayload[] = "ampc/trainer-option";

absl::Status OptionError(absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kOptionPayload, absl::Cord("1"));
  return status;
}

// `status` with its message after "PATH: " (and `more`); the code stays, payloads do not.
absl::Status InFile(const std::string& path, const absl::Status& status,
                    absl::string_view more = "") {
  return absl::Status(status.code(), absl::StrCat(path, ": ", more, status.message()));
}

// The batches a session has run: whole windows (applied or skipped) and the open one's.
int64_t BatchesRun(const StepResult& state, int64_t accumulate) {
  return (state.step + state.skipped_steps) * accumulate + state.micro_step;
}

// Metadata entry `key` as a positive integer; `fallback` without it.
absl::StatusOr<int64_t> PositiveMetadata(const onnx::ModelProto& model, const std::string& key,
                                         int64_t fallback) {
  const std::string* text = MetadataValue(model, key);
  if (text == nullptr) return fallback;
  int64_t value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata ", key, " = '", *text, "' is not a positive integer"));
  }
  return value;
}

// What the model's metadata and the options decide together.
struct RunSettings {
  ScheduledRate rate;
  int64_t accumulate;  // K of --accumulate: micro-batches per optimizer step
  int64_t max_skips;
};

absl::StatusOr<RunSettings> ReadRunSettings(const onnx::ModelProto& model,
                                            const TrainerOptions& options) {
  RunSettings settings;
  AMPC_ASSIGN_OR_RETURN(const float base, BaseRate(model, options.lr));
  settings.rate.base = base;
  AMPC_ASSIGN_OR_RETURN(settings.accumulate, PositiveMetadata(model, kAccumulateKey, 1));
  AMPC_ASSIGN_OR_RETURN(settings.rate.schedule, ModelSchedule(model, base));
  settings.max_skips = options.max_consecutive_skips;
  if (settings.max_skips <= 0) {
    AMPC_ASSIGN_OR_RETURN(settings.max_skips, PositiveMetadata(model, kMaxConsecutiveSkipsKey,
                                                               kDefaultMaxConsecutiveSkips));
  }
  return settings;
}

// The batch must fit the model's declared batch and the training set.
absl::Status CheckBatch(const Feeding& feeding, const Dataset& train, int64_t batch) {
  if (feeding.fixed_batch > 0 && feeding.fixed_batch != batch) {
    return OptionError(absl::StrCat("the model's input '", feeding.batch_input,
                                    "' has a fixed batch of ", feeding.fixed_batch,
                                    "; use --batch ", feeding.fixed_batch));
  }
  if (train.size() / batch == 0) {
    return OptionError(absl::StrCat("--batch ", batch, " is larger than the training set (",
                                    train.size(), " samples)"));
  }
  return absl::OkStatus();
}

// The error that stops a run after max_consecutive_skips skipped steps, naming where inf or
// NaN first appear in the last batch and the parameters whose gradients they reach.
absl::Status TooManySkips(TrainingSession& session, const std::string& path, int64_t batches_run,
                          const StepResult& state, const NamedTensors& last_batch, float lr) {
  std::string where = "the step could not be rerun to find where";
  absl::StatusOr<NonFiniteReport> report = session.FindNonFinite(last_batch, lr);
  if (report.ok() && report->first_value.empty()) {
    where = "rerun, the last batch gave finite values";
  } else if (report.ok()) {
    where = absl::StrCat("in the last batch inf/NaN first appears in '", report->first_value,
                         "' (node '", report->first_node, "', ", report->first_op, ")");
    if (!report->parameters.empty()) {
      const size_t shown = std::min<size_t>(report->parameters.size(), 3);
      absl::StrAppend(
          &where, "; non-finite gradients: ",
          absl::StrJoin(report->parameters.begin(), report->parameters.begin() + shown, ", "));
      if (shown < report->parameters.size()) {
        absl::StrAppend(&where, " and ", report->parameters.size() - shown, " more");
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: %d steps in a row were skipped (non-finite gradients or loss) up to batch %d; the "
      "loss scale is %g; %s",
      path, state.consecutive_skips, batches_run, state.scale, where));
}

// The loop over epochs and batches of one session. Steps are queued without waiting; the losses
// and counters come back in one read when a line is due, at the end of each epoch, after
// kMaxQueued steps, and on the first step that could reach the skip limit (the count grows by at
// most one a step), so a run stops where it would with a read after every step.
class Trainer {
 public:
  Trainer(TrainingSession& session, const DataSplits& data, const Feeding& feeding,
          const RunSettings& settings, const TrainerOptions& options)
      : session_(session),
        data_(data),
        feeding_(feeding),
        settings_(settings),
        options_(options),
        per_epoch_(data.train.size() / options.batch),
        progress_(per_epoch_, options.log_every) {}

  absl::Status Run();

 private:
  static constexpr int64_t kMaxQueued = 1024;

  absl::Status RunEpoch(int64_t epoch);
  // Reads back the steps queued; the error of TooManySkips at the skip limit.
  absl::Status ReadBack(int64_t epoch, const NamedTensors& last_batch);
  // The test accuracy line, the metrics flushed, the checkpoint saved.
  absl::Status EndEpoch(int64_t epoch);

  TrainingSession& session_;
  const DataSplits& data_;
  const Feeding& feeding_;
  const RunSettings& settings_;
  const TrainerOptions& options_;
  const int64_t per_epoch_;
  TrainingProgress progress_;
  StepResult state_;  // the counters at the last read
  int64_t batches_run_ = 0;
};

absl::Status Trainer::Run() {
  AMPC_ASSIGN_OR_RETURN(state_, session_.Counters());
  batches_run_ = BatchesRun(state_, settings_.accumulate);
  std::cerr << "ampc: training " << options_.model_path << " on " << data_.description
            << "; from step " << batches_run_ << "\n";
  AMPC_RETURN_IF_ERROR(progress_.OpenMetrics(options_.metrics, batches_run_ > 0));
  session_.set_keep_losses(true);
  for (int64_t epoch = batches_run_ / per_epoch_; epoch < options_.epochs; ++epoch) {
    AMPC_RETURN_IF_ERROR(RunEpoch(epoch));
    AMPC_RETURN_IF_ERROR(EndEpoch(epoch));
  }
  return absl::OkStatus();
}

absl::Status Trainer::RunEpoch(int64_t epoch) {
  const int64_t batch = options_.batch;
  const std::vector<int64_t> order = EpochOrder(data_.train.size(), options_.seed, epoch);
  int64_t queued = 0;
  for (int64_t i = batches_run_ % per_epoch_; i < per_epoch_; ++i) {
    const std::span<const int64_t> indices(order.data() + i * batch, batch);
    AMPC_ASSIGN_OR_RETURN(const NamedTensors inputs, BatchInputs(data_.train, indices, feeding_));
    absl::Status run = session_.Run(inputs, settings_.rate);
    if (!run.ok()) {
      return InFile(options_.model_path, run, absl::StrCat("step ", batches_run_ + 1, ": "));
    }
    ++batches_run_;
    const int64_t until_limit = settings_.max_skips - state_.consecutive_skips;
    if (++queued < std::min(until_limit, kMaxQueued) && !progress_.LogDue(queued) &&
        i + 1 < per_epoch_) {
      progress_.Queued(batches_run_, epoch);
      continue;
    }
    queued = 0;
    AMPC_RETURN_IF_ERROR(ReadBack(epoch, inputs));
  }
  return absl::OkStatus();
}

absl::Status Trainer::ReadBack(int64_t epoch, const NamedTensors& last_batch) {
  absl::StatusOr<TakenSteps> taken = session_.TakeSteps();
  if (!taken.ok()) {
    return InFile(options_.model_path, taken.status(),
                  absl::StrCat("up to step ", batches_run_, ": "));
  }
  state_ = taken->last;
  progress_.Taken(batches_run_, epoch, options_.batch, *taken);
  if (state_.consecutive_skips >= settings_.max_skips) {
    return TooManySkips(session_, options_.model_path, batches_run_, state_, last_batch, state_.lr);
  }
  return absl::OkStatus();
}

absl::Status Trainer::EndEpoch(int64_t epoch) {
  AMPC_ASSIGN_OR_RETURN(const TestMetrics metrics,
                        Test(session_, data_.test, feeding_, options_.batch));
  std::string tested = "test accuracy n/a (no test samples)";
  if (data_.test.size() > 0) {
    std::vector<std::string> parts;
    if (metrics.accuracy) parts.push_back(absl::StrFormat("test accuracy %.4f", *metrics.accuracy));
    if (metrics.loss && (data_.test.by_name() || !metrics.accuracy)) {
      parts.push_back(absl::StrFormat("test loss %.4f", *metrics.loss));
    }
    tested = parts.empty() ? "test: no accuracy (no [B, C] logits with labels [B]) and no loss"
                           : absl::StrJoin(parts, ", ");
  }
  std::cout << absl::StrFormat("epoch %d: %s, %d steps applied, %d skipped, scale %g\n", epoch + 1,
                               tested, state_.step, state_.skipped_steps, state_.scale)
            << std::flush;
  AMPC_RETURN_IF_ERROR(progress_.MetricsWritten());
  if (!options_.save) return absl::OkStatus();
  AMPC_ASSIGN_OR_RETURN(const onnx::ModelProto checkpoint, session_.Checkpoint());
  return options_.save(checkpoint);
}

void Note(const TrainerOptions& options, const std::string& line) {
  if (options.note) options.note(line);
}

}  // namespace

absl::Status Train(onnx::ModelProto model, const DataSplits& given, const TrainerOptions& options) {
  const std::string& path = options.model_path;
  const absl::flat_hash_map<std::string, int64_t> vocab =
      given.synthetic > 0 ? TokenVocabularies(model) : absl::flat_hash_map<std::string, int64_t>();
  absl::StatusOr<RunSettings> settings = ReadRunSettings(model, options);
  if (!settings.ok()) return InFile(path, settings.status());
  const std::optional<int64_t> ignored_label = IgnoredLabel(model);
  AMPC_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                        CreateBackend(options.device, options.threads, options.tf32));
  backend->set_limits(options.limits);
  absl::StatusOr<std::unique_ptr<TrainingSession>> created = CreateSession<TrainingSession>(
      std::move(model), DefaultRegistry(), options.device, options.threads, backend,
      [&](absl::string_view why) {
        Note(options, absl::StrCat("note: ", path, ": ", why, "; training on the CPU"));
      });
  if (!created.ok()) return InFile(path, created.status());
  TrainingSession& session = **created;
  session.set_capture(options.capture);
  DataSplits shaped;  // synthetic data shaped from the model, when it takes no 28x28 images
  if (given.synthetic > 0 && !TakesSyntheticImages(session)) {
    absl::StatusOr<DataSplits> made = SyntheticForModel(
        session, vocab, given.synthetic, std::max<int64_t>(given.synthetic / 4, 1), 1);
    if (!made.ok()) return InFile(path, made.status());
    shaped = *std::move(made);
  }
  const DataSplits& data = shaped.synthetic > 0 ? shaped : given;
  absl::StatusOr<Feeding> feeding = PlanFeeding(session, data.train);
  if (!feeding.ok()) {
    return InFile(path, feeding.status(), absl::StrCat("--data ", options.data, ": "));
  }
  AMPC_RETURN_IF_ERROR(CheckLabelsFit(session, data, ignored_label));
  AMPC_RETURN_IF_ERROR(CheckBatch(*feeding, data.train, options.batch));
  AMPC_RETURN_IF_ERROR(Trainer(session, data, *feeding, *settings, options).Run());
  if (options.capture) {
    Note(options, session.capture_off_reason().empty()
                      ? absl::StrCat(session.replayed_steps(), " steps ran as CUDA Graph replays")
                      : absl::StrCat("note: steps not captured: ", session.capture_off_reason()));
  }
  return absl::OkStatus();
}

bool IsOptionError(const absl::Status& status) {
  return status.GetPayload(kOptionPayload).has_value();
}

}  // namespace ampc
