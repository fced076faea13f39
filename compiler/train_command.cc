#include "compiler/train_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <system_error>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compiler/cli_args.h"
#include "compiler/diagnostics.h"
#include "compiler/exit_codes.h"
#include "compiler/file_io.h"
#include "compiler/lr_schedule.h"
#include "compiler/model_io.h"
#include "compiler/run_command.h"
#include "compiler/run_limits.h"
#include "compiler/train_flags.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/training/training_state.h"
#include "passes/verify_input.h"
#include "runtime/data_readers.h"
#include "runtime/device.h"
#include "runtime/status_macros.h"
#include "runtime/training_session.h"

ABSL_FLAG(std::string, data, "",
          "ampc train: fashion-mnist[:DIR], mnist:DIR, npy:DIR, pb:DIR or synthetic[:N].");
ABSL_FLAG(int64_t, batch, 64, "ampc train: samples per step.");
ABSL_FLAG(int64_t, epochs, 2, "ampc train: epochs in all, counting those the model has done.");
ABSL_FLAG(double, lr, 0.01,
          "the learning rate: recorded by --train; ampc train's base rate of the schedule "
          "(default: the model's recorded one).");
ABSL_FLAG(std::string, metrics, "",
          "ampc train: append step,loss,scale,grad_norm,skipped,lr here.");
ABSL_FLAG(std::string, save, "", "ampc train: save the model and its training state here.");
ABSL_FLAG(bool, resume, false, "ampc train: continue from the --save file when it exists.");
ABSL_FLAG(int64_t, log_every, 50, "ampc train: batches per progress line and metrics row.");
ABSL_FLAG(uint64_t, seed, 0, "ampc train: seed of the data order.");
constexpr int64_t kDefaultMaxConsecutiveSkips = 100;
ABSL_FLAG(int64_t, max_consecutive_skips, 0,
          "ampc train: stop with an error after this many skipped steps in a row (0: the model's "
          "metadata ampc.max_consecutive_skips, else 100).");
ABSL_FLAG(bool, capture, false,
          "ampc train: on a GPU, capture the step as a CUDA Graph after two steps and replay it "
          "(experimental: not yet run on a GPU).");
ABSL_DECLARE_FLAG(std::string, device);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(bool, tf32);

namespace ampc {
namespace {

// How the data feeds the model: the algorithm's float input takes images, its int64 input labels.
struct Feeding {
  std::string image_input, label_input;
  Shape sample_shape;       // one image as the model declares it
  int64_t fixed_batch = 0;  // the declared batch dim, 0 when symbolic
};

absl::StatusOr<Feeding> PlanFeeding(const TrainingSession& session, const Dataset& data) {
  Feeding feeding;
  for (const ValueSpec& spec : session.data_inputs()) {
    std::string& slot = spec.dtype == DType::kInt64 ? feeding.label_input : feeding.image_input;
    if ((spec.dtype != DType::kInt64 && spec.dtype != DType::kFloat) || !slot.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("algorithm input '", spec.name, "' (", DTypeName(spec.dtype),
                       "): ampc train feeds one float32 image input and one int64 label input"));
    }
    slot = spec.name;
    if (spec.dtype == DType::kInt64) continue;
    if (spec.dims.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "image input '", spec.name, spec.rank_known ? "' is a scalar" : "' declares no shape"));
    }
    feeding.fixed_batch = std::max<int64_t>(spec.dims[0], 0);
    feeding.sample_shape.assign(spec.dims.begin() + 1, spec.dims.end());
    const int64_t per_sample = data.images.size() / std::max<int64_t>(data.size(), 1);
    if (std::any_of(feeding.sample_shape.begin(), feeding.sample_shape.end(),
                    [](int64_t d) { return d < 0; })) {
      if (feeding.sample_shape.size() != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("image input '", spec.name, "' has symbolic sample dims; declare them"));
      }
      feeding.sample_shape = {per_sample};
    }
    if (ElementCount(feeding.sample_shape) != per_sample) {
      return absl::InvalidArgumentError(absl::StrCat(
          "image input '", spec.name, "' takes samples of ", ShapeString(feeding.sample_shape),
          "; the data has ", per_sample, " values per sample"));
    }
  }
  if (feeding.image_input.empty() || feeding.label_input.empty()) {
    return absl::InvalidArgumentError(
        "the algorithm needs a float32 image input and an int64 label input");
  }
  return feeding;
}

// The base learning rate: --lr when it differs from its default, else the model's metadata
// ampc.lr (the --lr given at compile time), else the default.
absl::StatusOr<float> BaseLearningRate(const onnx::ModelProto& model) {
  const double flag = absl::GetFlag(FLAGS_lr);
  if (FlagGiven("lr")) return static_cast<float>(flag);
  for (const onnx::StringStringEntryProto& entry : model.metadata_props()) {
    if (entry.key() != "ampc.lr") continue;
    float lr = 0;
    if (!absl::SimpleAtof(entry.value(), &lr) || !(lr > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata ampc.lr = '", entry.value(), "' is not a positive number"));
    }
    return lr;
  }
  return static_cast<float>(flag);
}

// The batches a session has run: whole windows (applied or skipped) and the open one's.
int64_t BatchesRun(const StepResult& state, int64_t accumulate) {
  return (state.step + state.skipped_steps) * accumulate + state.micro_step;
}

// The value of metadata entry `key`, or nullptr.
const std::string* Metadata(const onnx::ModelProto& model, const std::string& key) {
  for (const onnx::StringStringEntryProto& entry : model.metadata_props()) {
    if (entry.key() == key) return &entry.value();
  }
  return nullptr;
}

// The model's schedule (metadata ampc.lr_schedule; constant without it).
absl::StatusOr<LrSchedule> Schedule(const onnx::ModelProto& model, float base) {
  const std::string* text = Metadata(model, "ampc.lr_schedule");
  if (text == nullptr) return LrSchedule{};
  Json json;
  try {
    json = Json::parse(*text);
  } catch (const Json::exception&) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata ampc.lr_schedule = '", *text, "' is not JSON"));
  }
  absl::StatusOr<LrSchedule> schedule = LrScheduleFromJson(json, "metadata ampc.lr_schedule");
  if (schedule.ok() && static_cast<float>(schedule->min_lr) > base) {  // as the step computes
    return UsageError(absl::StrCat("--lr ", base, " is below the schedule's min_lr ",
                                   schedule->min_lr, " (metadata ampc.lr_schedule)"));
  }
  return schedule;
}

// Metadata entry `key` as a positive integer; `fallback` without it.
absl::StatusOr<int64_t> PositiveMetadata(const onnx::ModelProto& model, const std::string& key,
                                         int64_t fallback) {
  const std::string* text = Metadata(model, key);
  if (text == nullptr) return fallback;
  int64_t value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata ", key, " = '", *text, "' is not a positive integer"));
  }
  return value;
}

// K of --accumulate: micro-batches per optimizer step (metadata ampc.accumulate; 1 without it).
absl::StatusOr<int64_t> MicroBatchesPerStep(const onnx::ModelProto& model) {
  return PositiveMetadata(model, kAccumulateKey, 1);
}

// --max-consecutive-skips when given (> 0), else the model's metadata, else 100.
absl::StatusOr<int64_t> MaxConsecutiveSkips(const onnx::ModelProto& model) {
  if (absl::GetFlag(FLAGS_max_consecutive_skips) > 0) {
    return absl::GetFlag(FLAGS_max_consecutive_skips);
  }
  return PositiveMetadata(model, "ampc.max_consecutive_skips", kDefaultMaxConsecutiveSkips);
}

// The inference output accuracy reads: the one named "logits", else the first.
int LogitsOutput(const TrainingSession& session) {
  for (size_t i = 0; i < session.eval_outputs().size(); ++i) {
    if (session.eval_outputs()[i].name == "logits") return static_cast<int>(i);
  }
  return 0;
}

// The ignore_index of the training step's classification loss, when it has one.
std::optional<int64_t> IgnoredLabel(const onnx::ModelProto& model) {
  if (model.training_info_size() == 0) return std::nullopt;
  for (const onnx::NodeProto& node : model.training_info(0).algorithm().node()) {
    if (node.op_type() != "SoftmaxCrossEntropyLoss" &&
        node.op_type() != "NegativeLogLikelihoodLoss") {
      continue;
    }
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.name() == "ignore_index") return attribute.i();
    }
  }
  return std::nullopt;
}

// Labels outside the classes of a logits output declared [N, C] are refused as the data loads,
// naming the file and sample, rather than at the step that meets them.
absl::Status CheckLabelsFit(const TrainingSession& session, const DataSplits& data,
                            std::optional<int64_t> ignored) {
  if (session.eval_outputs().empty()) return absl::OkStatus();
  const ValueSpec& logits = session.eval_outputs()[LogitsOutput(session)];
  if (logits.dims.size() != 2 || logits.dims[1] <= 0) return absl::OkStatus();
  const Dataset* splits[] = {&data.train, &data.test};
  for (int i = 0; i < 2; ++i) {
    const std::string file =
        data.files.size() == 4 ? data.files[2 * i + 1] : absl::StrCat("--data ", data.description);
    AMPC_RETURN_IF_ERROR(CheckLabels(*splits[i], logits.dims[1], file, ignored));
  }
  return absl::OkStatus();
}

// Accuracy on the test set: argmax of the logits against the labels.
absl::StatusOr<double> TestAccuracy(const TrainingSession& session, const Dataset& test,
                                    const Feeding& feeding, int64_t batch) {
  const int logits = LogitsOutput(session);
  if (feeding.fixed_batch > 0) batch = feeding.fixed_batch;
  int64_t correct = 0, seen = 0;
  std::vector<int64_t> indices;
  for (int64_t start = 0; start < test.size(); start += batch) {
    const int64_t count = std::min(batch, test.size() - start);
    if (feeding.fixed_batch > 0 && count < feeding.fixed_batch) break;
    indices.resize(count);
    for (int64_t i = 0; i < count; ++i) indices[i] = start + i;
    AMPC_ASSIGN_OR_RETURN(Batch b, MakeBatch(test, indices, feeding.sample_shape));
    AMPC_ASSIGN_OR_RETURN(
        std::vector<Tensor> outputs,
        session.Evaluate({{feeding.image_input, b.images}, {feeding.label_input, b.labels}}));
    AMPC_ASSIGN_OR_RETURN(Tensor scores, ToHost(outputs[logits]));
    if (scores.rank() != 2 || scores.dim(0) != count || scores.dtype() != DType::kFloat) {
      return absl::InvalidArgumentError(
          absl::StrCat("inference output '", session.eval_outputs()[logits].name, "' is ",
                       scores.TypeString(), "; accuracy needs float32 [", count, ", classes]"));
    }
    const int64_t classes = scores.dim(1);
    for (int64_t n = 0; n < count; ++n) {
      const float* row = scores.data<float>() + n * classes;
      const int64_t best = std::max_element(row, row + classes) - row;
      correct += best == b.labels.data<int64_t>()[n];
    }
    seen += count;
  }
  return seen == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(seen);
}

// Progress: a bar redrawn on a terminal, plain lines otherwise; and the metrics CSV.
class Progress {
 public:
  Progress(int64_t per_epoch, int64_t log_every)
      : per_epoch_(per_epoch), log_every_(std::max<int64_t>(log_every, 1)), tty_(isatty(2)) {}

  absl::Status OpenMetrics(const std::string& path, bool append) {
    if (path.empty()) return absl::OkStatus();
    AMPC_RETURN_IF_ERROR(CheckNotInput(path));
    const bool header = !append || !Exists(path);
    metrics_path_ = path;
    metrics_.open(path, append ? std::ios::app : std::ios::trunc);
    if (header) metrics_ << "step,loss,scale,grad_norm,skipped,lr\n";
    return MetricsWritten();
  }

  // Whether every metrics row so far reached the file (a full disk is an error, not a gap).
  absl::Status MetricsWritten() {
    if (metrics_path_.empty() || metrics_.flush()) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(metrics_path_, ": cannot write the metrics"));
  }

  // Called after every step queued: on a terminal the bar shows the count, with the numbers
  // of the last read.
  void Queued(int64_t batches_run, int64_t epoch) {
    if (tty_) Draw(batches_run, epoch);
  }

  // Whether a line is due after `queued` more steps.
  bool LogDue(int64_t queued) const { return window_ + queued >= log_every_; }

  // Called after each read of the steps queued since the previous one: lines and CSV rows every
  // log_every steps and at the end of an epoch.
  void Taken(int64_t batches_run, int64_t epoch, int64_t batch_size, const TakenSteps& taken) {
    for (float loss : taken.losses) {
      if (!std::isfinite(loss)) continue;
      loss_sum_ += loss;
      ++losses_;
    }
    window_ += static_cast<int64_t>(taken.losses.size());
    last_ = taken.last;
    const int64_t done = (batches_run - 1) % per_epoch_ + 1;
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - start_).count();
    rate_ = seconds > 0 ? static_cast<double>(window_ * batch_size) / seconds : 0;
    shown_loss_ = Loss();
    read_ = true;
    if (tty_) Draw(batches_run, epoch);
    if (window_ < log_every_ && done != per_epoch_) return;
    const StepResult& r = taken.last;
    if (metrics_.is_open()) {
      metrics_ << absl::StrFormat("%d,%.6g,%.6g,%.6g,%d,%.9g\n", batches_run, Loss(), r.scale,
                                  r.grad_norm, r.skipped_steps, r.lr)
               << std::flush;
    }
    if (!tty_) {
      std::fprintf(stderr, "epoch %lld step %lld loss %.4f scale %g skipped %lld samples/s %.0f\n",
                   static_cast<long long>(epoch + 1), static_cast<long long>(batches_run), Loss(),
                   r.scale, static_cast<long long>(r.skipped_steps), rate_);
    }
    window_ = losses_ = 0;
    loss_sum_ = 0;
    start_ = now;
  }

 private:
  // The window's mean finite loss (NaN when it has none).
  double Loss() const { return losses_ > 0 ? loss_sum_ / static_cast<double>(losses_) : NAN; }

  void Draw(int64_t batches_run, int64_t epoch) const {
    const int64_t done = (batches_run - 1) % per_epoch_ + 1;
    const int filled = static_cast<int>(30 * done / per_epoch_);
    std::fprintf(stderr, "\repoch %lld [%s%s] %lld/%lld", static_cast<long long>(epoch + 1),
                 std::string(filled, '=').c_str(), std::string(30 - filled, ' ').c_str(),
                 static_cast<long long>(done), static_cast<long long>(per_epoch_));
    if (read_) {  // before the first read there are no numbers yet
      std::fprintf(stderr, " loss %.4f scale %g skipped %lld %.0f samples/s", shown_loss_,
                   last_.scale, static_cast<long long>(last_.skipped_steps), rate_);
    }
    std::fprintf(stderr, "\033[K");
    if (done == per_epoch_) std::fprintf(stderr, "\n");
  }

  int64_t per_epoch_, log_every_;
  bool tty_;
  std::string metrics_path_;
  std::ofstream metrics_;
  int64_t window_ = 0, losses_ = 0;
  double loss_sum_ = 0, rate_ = 0;
  double shown_loss_ = NAN;  // the bar's: the window's mean at the last read
  bool read_ = false;        // whether any step has been read back
  StepResult last_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

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

absl::Status Save(const TrainingSession& session, const std::string& path,
                  const std::vector<std::string>& input_data) {
  if (path.empty()) return absl::OkStatus();
  AMPC_ASSIGN_OR_RETURN(onnx::ModelProto model, session.Checkpoint());
  SaveOptions options;
  options.keep = input_data;
  return SaveModel(model, path, options);
}

// What the model's metadata and the flags decide together.
struct RunSettings {
  float base_lr;
  int64_t accumulate;
  LrSchedule schedule;
  int64_t max_skips;
};

absl::StatusOr<RunSettings> ReadRunSettings(const onnx::ModelProto& model) {
  RunSettings settings;
  AMPC_ASSIGN_OR_RETURN(settings.base_lr, BaseLearningRate(model));
  AMPC_ASSIGN_OR_RETURN(settings.accumulate, MicroBatchesPerStep(model));
  AMPC_ASSIGN_OR_RETURN(settings.schedule, Schedule(model, settings.base_lr));
  AMPC_ASSIGN_OR_RETURN(settings.max_skips, MaxConsecutiveSkips(model));
  return settings;
}

absl::StatusOr<std::string> CheckFlags(const std::vector<std::string>& args) {
  if (args.size() != 2) {
    return UsageError("usage: ampc train MODEL --data SOURCE [--batch N] [--epochs N] ...");
  }
  const std::string device = absl::GetFlag(FLAGS_device);
  if (device != "cpu" && device != "cuda" && device != "auto") {
    return UsageError(absl::StrCat("--device=", device, ": expected cpu, cuda or auto"));
  }
  if (absl::GetFlag(FLAGS_data).empty()) return UsageError("ampc train needs --data SOURCE");
  if (absl::Status s = CheckDataSpec(absl::GetFlag(FLAGS_data)); !s.ok()) {
    return UsageError(s.message());
  }
  if (absl::GetFlag(FLAGS_batch) < 1) return UsageError("--batch must be at least 1");
  if (absl::GetFlag(FLAGS_epochs) < 1) {
    return UsageError("--epochs must be at least 1 (epochs in all, counting those done)");
  }
  if (absl::GetFlag(FLAGS_log_every) < 1) return UsageError("--log-every must be at least 1");
  AMPC_RETURN_IF_ERROR(CheckThreadsFlag());
  const float lr = static_cast<float>(absl::GetFlag(FLAGS_lr));  // the step computes in float
  if (!(std::isfinite(lr) && lr > 0)) return UsageError("--lr must be a finite number > 0");
  if (absl::GetFlag(FLAGS_max_consecutive_skips) < 0) {
    return UsageError("--max-consecutive-skips must be >= 1 (or 0: the model's, else 100)");
  }
  const std::string save = absl::GetFlag(FLAGS_save);
  if (absl::GetFlag(FLAGS_resume) && save.empty()) {
    return UsageError("--resume continues from the --save file; give --save");
  }
  if (!save.empty() && SameFile(save, args[1])) {
    return UsageError("--save must not overwrite the input model");
  }
  const std::string metrics = absl::GetFlag(FLAGS_metrics);
  for (const auto& [other, role] : {std::pair{args[1], "the input model"}, {save, "--save"}}) {
    if (!metrics.empty() && !other.empty() && SameFile(metrics, other)) {
      return UsageError(absl::StrCat("--metrics=", metrics, " is ", role, " ", other,
                                     "; the metrics need a file of their own"));
    }
  }
  if (!save.empty()) AMPC_RETURN_IF_ERROR(CheckSaveDestination(save));
  // Refused before any work; a pipe or device is written to (--metrics /dev/stdout).
  if (std::error_code error; !metrics.empty() && std::filesystem::is_directory(metrics, error)) {
    return absl::UnavailableError(
        absl::StrCat("--metrics=", metrics, ": cannot write: a directory"));
  }
  const bool resume = absl::GetFlag(FLAGS_resume) && Exists(save);
  return resume ? save : args[1];
}

// A Dropout node of the training step with a training_mode input (constant or not).
bool HasTrainingModeDropout(const onnx::ModelProto& model) {
  if (model.training_info_size() == 0) return false;
  for (const onnx::NodeProto& node : model.training_info(0).algorithm().node()) {
    if (node.op_type() == "Dropout" && node.domain().empty() && node.input_size() > 2 &&
        !node.input(2).empty()) {
      return true;
    }
  }
  return false;
}

}  // namespace

absl::Status TrainCommand(const std::vector<std::string>& args) {
  AMPC_ASSIGN_OR_RETURN(const std::string path, CheckFlags(args));
  AMPC_ASSIGN_OR_RETURN(const RunLimits limits, RunLimitsFromFlags());
  AMPC_ASSIGN_OR_RETURN(DataSplits data, LoadData(absl::GetFlag(FLAGS_data)));
  for (const std::string& file : data.files) NoteInputFile(file);  // no save may replace them
  AMPC_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(path));
  AMPC_RETURN_IF_ERROR(CheckVersions(loaded.model, path));
  if (absl::Status s = CheckTrainingInfo(loaded.model); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  // Resuming reads the --save file, which every epoch replaces: its data files are inputs
  // (nothing else may write them) but not ones the save must keep.
  const std::string save = absl::GetFlag(FLAGS_save);
  const bool resumed = !save.empty() && SameFile(path, save);
  std::vector<std::string> input_data;
  if (resumed) {
    if (HasTrainingModeDropout(loaded.model)) {
      PrintDiagnostic(absl::StrCat(
          "note: ", path,
          ": a Dropout has a training_mode input; in training mode its generator is not in "
          "the checkpoint, and the resumed run draws other masks than an uninterrupted one"));
    }
    NoteInputFile(args[1]);
    for (const std::string& data : loaded.data_files) NoteInputFile(data);
  } else {
    NoteInputs(path, loaded);
    input_data = loaded.data_files;
  }
  for (const auto& [flag, file] :
       {std::pair{"--save", save}, {"--metrics", absl::GetFlag(FLAGS_metrics)}}) {
    AMPC_RETURN_IF_ERROR(CheckNotInput(file, flag));
  }
  NoteOutputFile(absl::GetFlag(FLAGS_metrics));
  // The resumed checkpoint's data files are the ones this run's saves replace.
  if (resumed) {
    for (const std::string& data : loaded.data_files) ForgetInputFile(data);
    // The model given may read the checkpoint's data too (a copy of it): that data stays.
    for (const std::string& data : DataFilesItReads(args[1], save)) NoteInputFile(data);
  }
  absl::StatusOr<RunSettings> settings = ReadRunSettings(loaded.model);
  if (!settings.ok()) {
    return absl::Status(settings.status().code(),
                        absl::StrCat(path, ": ", settings.status().message()));
  }
  const auto [base_lr, accumulate, schedule, max_skips] = *std::move(settings);
  const std::optional<int64_t> ignored_label = IgnoredLabel(loaded.model);
  const std::string device = absl::GetFlag(FLAGS_device);
  AMPC_ASSIGN_OR_RETURN(
      std::unique_ptr<Backend> backend,
      CreateBackend(device, absl::GetFlag(FLAGS_threads), absl::GetFlag(FLAGS_tf32)));
  backend->set_limits(limits);
  absl::StatusOr<std::unique_ptr<TrainingSession>> created = CreateSession<TrainingSession>(
      std::move(loaded.model), DefaultRegistry(), device, absl::GetFlag(FLAGS_threads), backend,
      [&](absl::string_view why) {
        PrintDiagnostic(absl::StrCat("note: ", path, ": ", why, "; training on the CPU"));
      });
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat(path, ": ", created.status().message()));
  }
  TrainingSession& session = **created;
  session.set_capture(absl::GetFlag(FLAGS_capture));
  absl::StatusOr<Feeding> planned = PlanFeeding(session, data.train);
  if (!planned.ok()) {
    return absl::Status(planned.status().code(),
                        absl::StrCat(path, ": --data ", absl::GetFlag(FLAGS_data), ": ",
                                     planned.status().message()));
  }
  const Feeding feeding = *std::move(planned);
  AMPC_RETURN_IF_ERROR(CheckLabelsFit(session, data, ignored_label));
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  if (feeding.fixed_batch > 0 && feeding.fixed_batch != batch) {
    return UsageError(absl::StrCat("the model's input '", feeding.image_input,
                                   "' has a fixed batch of ", feeding.fixed_batch, "; use --batch ",
                                   feeding.fixed_batch));
  }
  const int64_t per_epoch = data.train.size() / batch;
  if (per_epoch == 0) {
    return UsageError(absl::StrCat("--batch ", batch, " is larger than the training set (",
                                   data.train.size(), " samples)"));
  }
  AMPC_ASSIGN_OR_RETURN(StepResult state, session.Counters());
  int64_t batches_run = BatchesRun(state, accumulate);
  std::cerr << "ampc: training " << path << " on " << data.description << "; from step "
            << batches_run << "\n";
  Progress progress(per_epoch, absl::GetFlag(FLAGS_log_every));
  AMPC_RETURN_IF_ERROR(progress.OpenMetrics(absl::GetFlag(FLAGS_metrics), batches_run > 0));
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  // Steps are queued without waiting; the losses and counters come back in one read when a line
  // is due, at the end of each epoch, after kMaxQueued steps, and on the first step that could
  // reach the skip limit (the count grows by at most one a step), so a run stops where it would
  // with a read after every step.
  constexpr int64_t kMaxQueued = 1024;
  session.set_keep_losses(true);
  const LearningRate rate{base_lr, schedule};
  for (int64_t epoch = batches_run / per_epoch; epoch < absl::GetFlag(FLAGS_epochs); ++epoch) {
    const std::vector<int64_t> order = EpochOrder(data.train.size(), seed, epoch);
    int64_t queued = 0;
    for (int64_t i = batches_run % per_epoch; i < per_epoch; ++i) {
      const std::span<const int64_t> indices(order.data() + i * batch, batch);
      AMPC_ASSIGN_OR_RETURN(Batch b, MakeBatch(data.train, indices, feeding.sample_shape));
      const NamedTensors inputs = {{feeding.image_input, b.images},
                                   {feeding.label_input, b.labels}};
      absl::Status run = session.Run(inputs, rate);
      if (!run.ok()) {
        return absl::Status(run.code(),
                            absl::StrCat(path, ": step ", batches_run + 1, ": ", run.message()));
      }
      ++batches_run;
      const int64_t until_limit = max_skips - state.consecutive_skips;
      if (++queued < std::min(until_limit, kMaxQueued) && !progress.LogDue(queued) &&
          i + 1 < per_epoch) {
        progress.Queued(batches_run, epoch);
        continue;
      }
      queued = 0;
      absl::StatusOr<TakenSteps> taken = session.TakeSteps();
      if (!taken.ok()) {
        return absl::Status(taken.status().code(), absl::StrCat(path, ": up to step ", batches_run,
                                                                ": ", taken.status().message()));
      }
      state = taken->last;
      progress.Taken(batches_run, epoch, batch, *taken);
      if (state.consecutive_skips >= max_skips) {
        return TooManySkips(session, path, batches_run, state, inputs, state.lr);
      }
    }
    AMPC_ASSIGN_OR_RETURN(double accuracy, TestAccuracy(session, data.test, feeding, batch));
    std::cout << absl::StrFormat(
                     "epoch %d: test accuracy %s, %d steps applied, %d skipped, scale %g\n",
                     epoch + 1,
                     data.test.size() > 0 ? absl::StrFormat("%.4f", accuracy)
                                          : std::string("n/a (no test samples)"),
                     state.step, state.skipped_steps, state.scale)
              << std::flush;
    AMPC_RETURN_IF_ERROR(progress.MetricsWritten());
    AMPC_RETURN_IF_ERROR(Save(session, absl::GetFlag(FLAGS_save), input_data));
  }
  if (absl::GetFlag(FLAGS_capture)) {
    PrintDiagnostic(session.capture_off_reason().empty()
                        ? absl::StrCat(session.replayed_steps(), " steps ran as CUDA Graph replays")
                        : absl::StrCat("note: steps not captured: ", session.capture_off_reason()));
  }
  return absl::OkStatus();
}

}  // namespace ampc
