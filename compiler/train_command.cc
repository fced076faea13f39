#include "compiler/train_command.h"

#include <cmath>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "compiler/cli_args.h"
#include "compiler/diagnostics.h"
#include "compiler/exit_codes.h"
#include "compiler/file_io.h"
#include "compiler/model_io.h"
#include "compiler/run_command.h"
#include "compiler/run_limits.h"
#include "passes/graph/status_macros.h"
#include "passes/verify_input.h"
#include "runtime/data_readers.h"
#include "runtime/learning_rate.h"
#include "runtime/trainer.h"

ABSL_FLAG(std::string, data, "",
          "ampc train: fashion-mnist[:DIR], mnist:DIR, npy:DIR, pb:DIR or synthetic[:N].");
ABSL_FLAG(int64_t, batch, 64, "ampc train: samples per step.");
ABSL_FLAG(int64_t, epochs, 2, "ampc train: epochs in all, counting those the model has done.");
ABSL_FLAG(double, lr, ampc::kDefaultBaseRate,
          "the learning rate: recorded by --train; ampc train's base rate of the schedule "
          "(default: the model's recorded one).");
ABSL_FLAG(std::string, metrics, "",
          "ampc train: append step,loss,scale,grad_norm,skipped,lr here.");
ABSL_FLAG(std::string, save, "", "ampc train: save the model and its training state here.");
ABSL_FLAG(bool, resume, false, "ampc train: continue from the --save file when it exists.");
ABSL_FLAG(int64_t, log_every, 50, "ampc train: batches per progress line and metrics row.");
ABSL_FLAG(uint64_t, seed, 0, "ampc train: seed of the data order.");
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

// A standard Dropout node of the training step with a training_mode input (constant or not):
// one ampc --train did not compile (its --dropout makes such nodes ai.ampc.Dropout, whose masks
// follow the checkpointed counters), whose kernel counts its runs from the session's start.
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

// The options of the trainer, from the flags; `path` is the model trained.
TrainerOptions TrainerOptionsFromFlags(const std::string& path, const RunLimits& limits) {
  TrainerOptions options;
  options.model_path = path;
  options.data = absl::GetFlag(FLAGS_data);
  options.batch = absl::GetFlag(FLAGS_batch);
  options.epochs = absl::GetFlag(FLAGS_epochs);
  if (FlagGiven("lr")) options.lr = absl::GetFlag(FLAGS_lr);
  options.max_consecutive_skips = absl::GetFlag(FLAGS_max_consecutive_skips);
  options.log_every = absl::GetFlag(FLAGS_log_every);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.metrics = absl::GetFlag(FLAGS_metrics);
  options.capture = absl::GetFlag(FLAGS_capture);
  options.device = absl::GetFlag(FLAGS_device);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.tf32 = absl::GetFlag(FLAGS_tf32);
  options.limits = limits;
  options.note = [](const std::string& line) { PrintDiagnostic(line); };
  return options;
}

// Records the files of this run (nothing it reads may be replaced; the metrics are its own) and
// says which data files a save must keep: the model's, unless it resumes the --save file, which
// every epoch replaces.
absl::StatusOr<std::vector<std::string>> NoteRunFiles(const std::string& path,
                                                      const std::string& model_arg,
                                                      const LoadedModel& loaded, bool resumed) {
  const std::string save = absl::GetFlag(FLAGS_save);
  const std::string metrics = absl::GetFlag(FLAGS_metrics);
  std::vector<std::string> input_data;
  if (resumed) {
    NoteInputFile(model_arg);
    for (const std::string& data : loaded.data_files) NoteInputFile(data);
  } else {
    NoteInputs(path, loaded);
    input_data = loaded.data_files;
  }
  for (const auto& [flag, file] : {std::pair{"--save", save}, {"--metrics", metrics}}) {
    AMPC_RETURN_IF_ERROR(CheckNotInput(file, flag));
  }
  NoteOutputFile(metrics);
  // The resumed checkpoint's data files are the ones this run's saves replace.
  if (resumed) {
    for (const std::string& data : loaded.data_files) ForgetInputFile(data);
    // The model given may read the checkpoint's data too (a copy of it): that data stays.
    for (const std::string& data : DataFilesItReads(model_arg, save)) NoteInputFile(data);
  }
  AMPC_RETURN_IF_ERROR(CheckNotInput(metrics));
  return input_data;
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
  const std::string save = absl::GetFlag(FLAGS_save);
  const bool resumed = !save.empty() && SameFile(path, save);
  if (resumed && HasTrainingModeDropout(loaded.model)) {
    PrintDiagnostic(absl::StrCat(
        "note: ", path,
        ": a standard Dropout of the step has a training_mode input; its masks restart with "
        "the session, so the resumed run draws other masks than an uninterrupted one (compile "
        "the forward model with ampc --train --dropout=graph for masks that resume)"));
  }
  AMPC_ASSIGN_OR_RETURN(const std::vector<std::string> input_data,
                        NoteRunFiles(path, args[1], loaded, resumed));
  TrainerOptions options = TrainerOptionsFromFlags(path, limits);
  if (!save.empty()) {
    options.save = [save, input_data](const onnx::ModelProto& model) {
      SaveOptions keep;
      keep.keep = input_data;
      return SaveModel(model, save, keep);
    };
  }
  absl::Status trained = Train(std::move(loaded.model), data, options);
  return IsOptionError(trained) ? UsageError(trained.message()) : trained;
}

}  // namespace ampc
