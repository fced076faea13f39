#include "compiler/driver.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "compiler/autocast_flags.h"
#include "compiler/cli_args.h"
#include "compiler/diagnostics.h"
#include "compiler/exit_codes.h"
#include "compiler/export_weights.h"
#include "compiler/extract_step.h"
#include "compiler/file_io.h"
#include "compiler/model_io.h"
#include "compiler/pipeline.h"
#include "compiler/printer.h"
#include "compiler/progress.h"
#include "compiler/report.h"
#include "compiler/run_command.h"
#include "compiler/tensor_walker.h"
#include "compiler/train_command.h"
#include "compiler/train_flags.h"
#include "passes/graph/deferred_data.h"
#include "passes/graph/status_macros.h"
#include "passes/registry.h"
#include "passes/upgrade_opset.h"
#include "runtime/device.h"

ABSL_FLAG(std::string, output, "", "Write the compiled model to this file (also -o).");
ABSL_FLAG(std::string, passes, "",
          "Comma-separated passes to run after verify-input, replacing the default pipeline.");
ABSL_FLAG(std::string, print_after, "",
          "Print the model's canonical text to stdout after this pass ('all': after each).");
ABSL_FLAG(std::string, report, "", "Write the per-node decisions and the summary as JSON here.");
ABSL_FLAG(std::string, external_data, "auto",
          "auto: external data when the input used it or the model is too large to inline; "
          "always; never.");
ABSL_FLAG(int, target_opset, 0,
          "Convert the model to this default-domain opset with ONNX's version converter.");
ABSL_FLAG(bool, print_pipeline, false,
          "Print the passes a compilation with these flags runs, and why, then exit.");
ABSL_FLAG(std::string, verify, "changes",
          "changes: check what the passes changed (linear time); full: check_model and strict "
          "type inference on the whole output.");
ABSL_FLAG(bool, time_passes, false,
          "Print the time of load, each pass and save to stderr, one line each.");

namespace ampc {
namespace {

// Tensors with this much external data or more stay in their files during a compile.
constexpr uint64_t kDeferMinBytes = uint64_t{1} << 20;

// The deferred tensors of `model` and their bytes: what the progress line counts to.
DeferredProgress DeferredTotals(onnx::ModelProto& model) {
  DeferredProgress totals;
  VisitTensors(model, [&](onnx::TensorProto& tensor, const TensorSite&) {
    if (IsDeferred(tensor)) totals = {totals.tensors + 1, totals.bytes + SpanOf(tensor).length};
    return absl::OkStatus();
  }).IgnoreError();
  return totals;
}

constexpr char kUsage[] = R"(ampc: ahead-of-time mixed precision for ONNX models

Usage:
  ampc MODEL -o OUT [flags]     compile MODEL for mixed precision and save it
  ampc explain MODEL [flags]    print each node's dtype and the rule that decided it
  ampc print MODEL              print MODEL's canonical text to stdout
  ampc run MODEL --input NAME=FILE ... [--output-dir DIR] [--device cpu|cuda|auto]
                                run MODEL on the runtime (inputs: .pb or .npy files); print a
                                summary of each output, or write NAME.pb and NAME.npy to DIR
  ampc train MODEL --data fashion-mnist[:DIR]|mnist:DIR|npy:DIR|pb:DIR|synthetic[:N]
       [--batch 64] [--epochs 2] [--lr 0.01] [--metrics FILE.csv] [--save OUT.onnx]
       [--resume] [--log-every 50] [--seed 0] [--max-consecutive-skips N] [--capture]
       [--device auto|cpu|cuda] [--threads N] [--tf32]
                                train a compiled training model (ampc MODEL --train); print
                                the test accuracy after each epoch (--epochs: in all, counting
                                those done; --resume: start from the --save file if it exists)
  ampc extract-step MODEL -o STEP [--with-state]
                                write the training step of a compiled training model as a
                                standalone ONNX model: state in as graph inputs, the loss,
                                ampc.applied, ampc.grad_norm and each STATE.ampc.next out
  ampc export-weights MODEL -o WEIGHTS.npz|WEIGHTS.safetensors
                                write the FP32 trained parameters and BatchNormalization
                                statistics of a training model under the names of the PyTorch
                                export, for load_state_dict (docs/training.md)
  ampc --version | --help

Flags:
  -o, --output=FILE      where to write the result (never the input file itself)
  --dtype=fp16|bf16|fp32 the low dtype (default fp16); fp32: no autocast (an FP32 baseline)
  --low-io               float graph inputs and outputs become the low dtype too
                         (default: they keep their declared types; casts sit at the boundary)
  --block-op=OP[,OP]     ops forced to FP32
  --block-node=REGEX     nodes whose name fully matches REGEX (RE2) stay FP32
  --lower-node=REGEX     nodes whose name fully matches REGEX go to the low dtype
  --policy=FILE          JSON file of per-op category changes (docs/autocast.md)
  --clamp                clamp FP16 constants to +-65504 instead of keeping their nodes FP32
  --standard-ops         BF16: keep nodes whose schema has no bfloat16 (Conv, MaxPool,
                         AveragePool, GlobalAveragePool up to opset 17) FP32 instead of running
                         them as their ai.ampc versions (docs/autocast.md)
  --report=FILE          write every node's decision and the summary as JSON
  --target-opset=N       upgrade the default-domain opset to N with ONNX's version converter
                         first (the IR version rises with it; BF16 Conv and pools are standard
                         ops from opset 22)
  --passes=a,b,c         passes to run after verify-input (default: the standard pipeline)
  --print-pipeline       print the passes these flags run, in order, each with the reason for
                         its place, and exit (no model is read)
  --print-after=PASS     print the canonical text after PASS ('all': after every pass)
  --external-data=MODE   auto (default): tensor data goes to OUT.data when the input used
                         external data or the model exceeds 1 GiB; always; never
  --time-passes          print `ampc: time: STEP SECONDS s` to stderr for load, each pass and save
  --verify=changes|full  the output check: changes (default) checks what the passes changed as
                         ONNX's checker and strict type inference would, in linear time; full runs
                         both on the whole output (as before; models with subgraphs, functions or
                         --train always get it)
  --train --loss=NAME    compile a training model (training_info: the training step) whose loss
                         is the scalar FP32 value NAME (or --loss-op=cross_entropy:LOGITS|
                         causal_lm:LOGITS|mse:OUTPUT, which adds that loss; the cross entropies
                         take ,ignore_index=I and ,label_smoothing=E); with
                         --optimizer=sgd|momentum|adam|adamw
                         (default adamw), --weight-decay, --momentum, --nesterov, --freeze=REGEX,
                         --loss-scale=dynamic|static:V|none, --clip-grad-norm=N,
                         --accumulate=K (micro-batches per optimizer step), --lr (recorded),
                         --train-config=FILE.json (parameter groups, LR schedule, scaler;
                         docs/training.md); the step's forward and backward run in the dtypes
                         autocast chose (--dtype)

Flags of ampc extract-step:
  --with-state           give every state input its current value as an initializer (an
                         input with a default), so one step needs only the data and ampc.lr

Flags of ampc run:
  --input=NAME=FILE      a graph input from a .pb (TensorProto) or .npy file; repeat per input
  --output-dir=DIR       write each output as DIR/NAME.pb and DIR/NAME.npy
  --device=cpu|cuda|auto where to run (default auto: CUDA when usable, else the CPU)
  --tf32                 on a GPU, FP32 MatMul, Gemm and Conv may use TF32 tensor cores
                         (inputs rounded to 10 mantissa bits; also ampc train); default off
  --threads=N            CPU threads (default 0: one per core; at most 1024)
  --max-tensor-bytes=SIZE  limits of ampc run and train (docs/errors.md): one tensor (default
  --max-memory=SIZE      16G), tensor memory in use (auto: the machine's), one Loop node's
  --max-loop-iterations=N  iterations (16777216); SIZE as 4096, 512M or 16G
  --find-nonfinite       when an output holds inf or NaN, run again keeping every float value
                         and name the node where they first appear (and the flag that helps)

Passes: %s

Exit codes:
  0  success
  1  the input model is missing, unreadable or invalid, or compilation failed
  2  usage error (bad flags or arguments)
  3  the output could not be written
Diagnostics go to stderr, one line each: FILE: what is wrong, and at which node or value.
A flag the command does not read is a usage error.
)";

std::string VersionText() {
  const auto& opsets = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  return absl::StrCat("ampc ", AMPC_VERSION, " (ONNX ", AMPC_ONNX_VERSION, ", IR version ",
                      int{onnx::IR_VERSION}, ", default-domain opsets up to ", opsets.at("").second,
                      ", ai.onnx.ml up to ", opsets.at("ai.onnx.ml").second, ")\n", DescribeBuild(),
                      "\n");
}

// --passes as a list, verify-input first.
std::vector<std::string> RequestedPasses() {
  std::vector<std::string> names;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_passes), ',', absl::SkipWhitespace())) {
    names.emplace_back(name);
  }
  return names;
}

std::vector<Placement> PipelineFromFlags() {
  PipelineOptions options;
  options.autocast = !Fp32Baseline();
  options.train = TrainFlagGiven();
  options.loss_op = LossOpFlagGiven();
  options.target_opset = absl::GetFlag(FLAGS_target_opset) != 0;
  options.passes = RequestedPasses();
  return PipelineFor(options);
}

absl::StatusOr<std::vector<std::unique_ptr<Pass>>> BuildPipeline(const PassOptions& options) {
  absl::StatusOr<std::vector<std::unique_ptr<Pass>>> pipeline =
      CreatePipeline(PipelineFromFlags(), options);
  if (!pipeline.ok()) return UsageError(pipeline.status().message());
  const std::string print_after = absl::GetFlag(FLAGS_print_after);
  bool found = print_after.empty() || print_after == "all";
  for (const auto& pass : *pipeline) found = found || pass->Name() == print_after;
  if (!found) {
    return UsageError(
        absl::StrCat("--print-after=", print_after, ": no such pass in the pipeline"));
  }
  return pipeline;
}

// --time-passes: one stderr line per step, as `ampc: time: STEP 1.23 s`.
class StepTimer {
 public:
  StepTimer() : start_(std::chrono::steady_clock::now()) {}
  void Report(absl::string_view step) {
    const auto now = std::chrono::steady_clock::now();
    if (absl::GetFlag(FLAGS_time_passes)) {
      std::cerr << absl::StrFormat("ampc: time: %s %.2f s\n", step,
                                   std::chrono::duration<double>(now - start_).count());
    }
    start_ = now;
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Runs the passes in order, printing each diagnostic as it comes.
absl::Status RunPipeline(ModelContext& context, std::vector<std::unique_ptr<Pass>>& pipeline) {
  const std::string print_after = absl::GetFlag(FLAGS_print_after);
  for (auto& pass : pipeline) {
    const size_t reported = context.diagnostics.size();
    StepTimer timer;
    absl::StatusOr<PassResult> result = RunPass(*pass, context);
    timer.Report(pass->Name());
    for (size_t i = reported; i < context.diagnostics.size(); ++i) {
      PrintDiagnostic(DiagnosticLine(context.file, context.diagnostics[i]));
    }
    if (!result.ok()) return result.status();
    if (print_after == "all" || print_after == pass->Name()) {
      if (print_after == "all") std::cout << "# after " << pass->Name() << "\n";
      std::cout << PrintModel(context.model) << std::flush;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SaveOptions::ExternalData> ExternalDataMode() {
  const std::string mode = absl::GetFlag(FLAGS_external_data);
  if (mode == "auto") return SaveOptions::ExternalData::kAuto;
  if (mode == "always") return SaveOptions::ExternalData::kAlways;
  if (mode == "never") return SaveOptions::ExternalData::kNever;
  return UsageError(absl::StrCat("--external-data=", mode, ": expected auto, always or never"));
}

// --target-opset: 0 (the model's own) or an opset ONNX's version converter can reach.
absl::StatusOr<int> TargetOpsetFromFlag() {
  const int opset = absl::GetFlag(FLAGS_target_opset);
  const int newest = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second;
  if (opset == 0 || (opset >= kOldestConvertedOpset && opset <= newest)) return opset;
  return UsageError(absl::StrCat("--target-opset=", opset, ": expected an opset from ",
                                 kOldestConvertedOpset, " to ", newest, " (this ampc's ONNX ",
                                 AMPC_ONNX_VERSION, ")"));
}

// --verify: full, or changes (the default).
absl::StatusOr<bool> VerifyFullFromFlag() {
  const std::string mode = absl::GetFlag(FLAGS_verify);
  if (mode == "full") return true;
  if (mode == "changes") return false;
  return UsageError(absl::StrCat("--verify=", mode, ": expected changes or full"));
}

// The options of every pass, read from the flags once (--policy and --train-config files too).
absl::StatusOr<PassOptions> PassOptionsFromFlags() {
  PassOptions options;
  AMPC_ASSIGN_OR_RETURN(options.autocast, AutocastOptionsFromFlags());
  AMPC_ASSIGN_OR_RETURN(options.training, TrainingOptionsFromFlags());
  AMPC_ASSIGN_OR_RETURN(options.target_opset, TargetOpsetFromFlag());
  AMPC_ASSIGN_OR_RETURN(options.verify_full, VerifyFullFromFlag());
  return options;
}

// The passes of this compilation, constructed with their options.
absl::StatusOr<std::vector<std::unique_ptr<Pass>>> PipelineOfFlags(PassOptions& options) {
  AMPC_ASSIGN_OR_RETURN(options, PassOptionsFromFlags());
  return BuildPipeline(options);
}

// Runs the pipeline on `model` in place, filling `summary` (but output and time).
absl::StatusOr<std::shared_ptr<PrecisionPlan>> CompileModel(
    const std::string& input, onnx::ModelProto& model, const PassOptions& options,
    std::vector<std::unique_ptr<Pass>>& pipeline, CompileSummary& summary) {
  summary.input = input;
  summary.weight_bytes_before = WeightBytes(model);
  summary.casts_before = CountCasts(model);
  ModelContext context(model, input);
  summary.versions_before = VersionsOf(model);
  absl::Status status = RunPipeline(context, pipeline);
  summary.diagnostics = std::move(context.diagnostics);
  if (!status.ok()) return status;
  summary.weight_bytes_after = WeightBytes(model);
  summary.casts_after = CountCasts(model);
  summary.versions_after = VersionsOf(model);
  summary.plan = context.plan.get();
  summary.no_autocast_because = Fp32Baseline() ? "--dtype=fp32" : "--passes";
  summary.model = &model;
  return context.plan;
}

// Freeing a large model and its plan takes seconds (2.3 to 3.4 s at 1,000,000 nodes) just before
// the process exits, which returns the memory anyway; so both are leaked on purpose, once the
// output is written. RunCli runs once per process (main.cc), so nothing accumulates. The pointers
// stay in statics (volatile: never read, but the stores must stay), so LeakSanitizer sees the
// memory reachable rather than lost.
void LeakUntilExit(absl::StatusOr<LoadedModel>& loaded,
                   absl::StatusOr<std::shared_ptr<PrecisionPlan>>& plan) {
  [[maybe_unused]] static LoadedModel* volatile kept_model = nullptr;
  [[maybe_unused]] static std::shared_ptr<PrecisionPlan>* volatile kept_plan = nullptr;
  if (loaded.ok()) kept_model = new LoadedModel(*std::move(loaded));  // a move swaps: O(1)
  if (plan.ok()) kept_plan = new std::shared_ptr<PrecisionPlan>(*std::move(plan));
}

std::string ReportPath() { return absl::GetFlag(FLAGS_report); }

// The --report file's temporary file, created before anything is saved: a report that cannot be
// written fails the run with nothing written. It may not be any of `models` (the files the run
// reads or writes). Without --report, `file` stays empty.
absl::Status StageReport(const std::vector<std::string>& models, std::optional<TempFile>& file) {
  const std::string path = ReportPath();
  if (path.empty()) return absl::OkStatus();
  for (const std::string& model : models) {
    if (!model.empty() && SameFile(path, model)) {
      return UsageError(
          absl::StrCat("--report=", path, ": the report needs a file of its own, not ", model));
    }
  }
  NoteOutputFile(path);
  return file.emplace(path).Create();
}

absl::Status WriteReport(const CompileSummary& summary, std::optional<TempFile>& file) {
  if (!file) return absl::OkStatus();
  const std::string json = ReportJson(summary);
  AMPC_RETURN_IF_ERROR(file->Write(json.data(), json.size()));
  AMPC_RETURN_IF_ERROR(file->Close());
  return file->Commit();
}

// What went to stdout must have arrived: `ampc print m.onnx > /dev/full` is a failed run.
absl::Status StdoutWritten() {
  std::cout.flush();
  if (!std::cout.fail() && std::fflush(stdout) == 0 && !std::ferror(stdout)) {
    return absl::OkStatus();
  }
  return absl::UnavailableError("cannot write to standard output");
}

absl::Status Explain(const std::vector<std::string>& args) {
  if (args.size() != 2) return UsageError("usage: ampc explain MODEL [flags]");
  const auto start = std::chrono::steady_clock::now();
  PassOptions options;
  absl::StatusOr<std::vector<std::unique_ptr<Pass>>> pipeline = PipelineOfFlags(options);
  if (!pipeline.ok()) return pipeline.status();
  std::optional<TempFile> report;
  AMPC_RETURN_IF_ERROR(StageReport({args[1]}, report));
  absl::StatusOr<LoadedModel> loaded = LoadModel(args[1]);
  if (!loaded.ok()) return loaded.status();
  NoteInputs(args[1], *loaded);
  CompileSummary summary;
  absl::StatusOr<std::shared_ptr<PrecisionPlan>> plan =
      CompileModel(args[1], loaded->model, options, *pipeline, summary);
  if (!plan.ok()) return plan.status();
  AMPC_RETURN_IF_ERROR(CheckNotInput(ReportPath(), "--report"));
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << ExplainTable(summary) << std::flush;
  std::cerr << SummaryLine(summary) << "\n";
  absl::Status status = StdoutWritten();  // a table that did not arrive fails the run
  if (status.ok()) status = WriteReport(summary, report);
  LeakUntilExit(loaded, plan);
  return status;
}

absl::Status Compile(const std::string& input) {
  const auto start = std::chrono::steady_clock::now();
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output.empty() && absl::GetFlag(FLAGS_print_after).empty()) {
    return UsageError("missing -o OUT (where to write the compiled model)");
  }
  if (!output.empty() && SameFile(input, output)) {
    return UsageError(
        absl::StrCat("-o ", output, " is the input file; ampc never overwrites its input"));
  }
  if (!output.empty()) {  // a directory or device is refused before the work, not after
    AMPC_RETURN_IF_ERROR(CheckSaveDestination(output));
  }
  absl::StatusOr<SaveOptions::ExternalData> mode = ExternalDataMode();
  if (!mode.ok()) return mode.status();
  PassOptions options;
  absl::StatusOr<std::vector<std::unique_ptr<Pass>>> pipeline = PipelineOfFlags(options);
  if (!pipeline.ok()) return pipeline.status();
  std::optional<TempFile> report;
  std::vector<std::string> files = {input};
  if (!output.empty()) files = FilesASaveMayWrite(output, {input});
  AMPC_RETURN_IF_ERROR(StageReport(files, report));
  StepTimer timer;
  // A compile that saves leaves large weights in the input's data files (docs/architecture.md,
  // "Large models"); --train reads and rewrites every weight, so it loads them.
  const bool defer =
      !output.empty() && *mode != SaveOptions::ExternalData::kNever && !options.training.enabled;
  absl::StatusOr<LoadedModel> loaded = LoadModel(input, {defer ? kDeferMinBytes : uint64_t{0}});
  if (!loaded.ok()) return loaded.status();
  timer.Report("load");
  NoteInputs(input, *loaded);
  SaveOptions save;
  save.external_data = *mode;
  save.input_used_external_data = loaded->used_external_data;
  save.keep = loaded->data_files;
  std::unique_ptr<ExternalDataWriter> data;
  if (defer && loaded->used_external_data) {
    AMPC_ASSIGN_OR_RETURN(data, OpenOutputData(output, save));
    save.data = data.get();
  }
  const DeferredSinkScope sink(data.get());
  const DeferredProgress totals = DeferredTotals(loaded->model);
  std::optional<ProgressLine> progress;
  progress.emplace(totals.tensors, totals.bytes);
  CompileSummary summary;
  absl::StatusOr<std::shared_ptr<PrecisionPlan>> plan =
      CompileModel(input, loaded->model, options, *pipeline, summary);
  if (!plan.ok()) return plan.status();
  // After loading (the options read --policy and --train-config): every input is known.
  for (const auto& [flag, path] : {std::pair{"-o", output}, {"--report", ReportPath()}}) {
    AMPC_RETURN_IF_ERROR(CheckNotInput(path, flag));
  }
  summary.output = output;
  if (!output.empty()) {
    timer = StepTimer();
    AMPC_RETURN_IF_ERROR(SaveModel(loaded->model, output, save));
    timer.Report("save");
  }
  progress.reset();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  absl::Status status = WriteReport(summary, report);
  if (status.ok()) std::cerr << SummaryLine(summary) << "\n";
  LeakUntilExit(loaded, plan);
  return status;
}

absl::Status Print(const std::vector<std::string>& args) {
  if (args.size() != 2) return UsageError("usage: ampc print MODEL");
  absl::StatusOr<LoadedModel> loaded = LoadModel(args[1]);
  if (!loaded.ok()) return loaded.status();
  std::cout << PrintModel(loaded->model) << std::flush;
  return absl::OkStatus();
}

// The flags each command reads. Another flag given to it is a usage error: silently ignored,
// `ampc run m.onnx --dtype=bf16` would look like it did something.
const std::vector<std::string>& FlagsOf(const std::string& command) {
  static const auto* const kFlags = [] {
    const std::vector<std::string> autocast = {"dtype",      "low_io", "block_op", "block_node",
                                               "lower_node", "policy", "clamp",    "standard_ops"};
    const std::vector<std::string> training = {
        "train",      "loss",     "loss_op",      "optimizer",  "weight_decay",
        "momentum",   "nesterov", "freeze",       "loss_scale", "clip_grad_norm",
        "accumulate", "lr",       "train_config", "untie",      "dropout"};
    const std::vector<std::string> pipeline = {"passes",      "print_after", "print_pipeline",
                                               "time_passes", "report",      "target_opset",
                                               "verify"};
    std::vector<std::string> explain = autocast;
    explain.insert(explain.end(), training.begin(), training.end());
    explain.insert(explain.end(), pipeline.begin(), pipeline.end());
    std::vector<std::string> compile = explain;
    compile.insert(compile.end(), {"output", "external_data"});
    return new std::map<std::string, std::vector<std::string>>{
        {"", compile},
        {"explain", explain},
        {"print", {}},
        {"run",
         {"input", "output_dir", "device", "threads", "tf32", "find_nonfinite", "max_tensor_bytes",
          "max_memory", "max_loop_iterations"}},
        {"train",
         {"data", "batch", "epochs", "lr", "metrics", "save", "resume", "log_every", "seed",
          "max_consecutive_skips", "capture", "device", "threads", "tf32", "max_tensor_bytes",
          "max_memory", "max_loop_iterations"}},
        {"extract-step", {"output", "with_state"}},
        {"export-weights", {"output"}}};
  }();
  auto it = kFlags->find(command);
  return it == kFlags->end() ? kFlags->at("") : it->second;
}

bool IsCommand(const std::string& word) { return &FlagsOf(word) != &FlagsOf(""); }

absl::Status CheckFlagsApply(const CommandLine& line) {
  const std::string command = line.positionals.empty() ? "" : line.positionals[0];
  const std::vector<std::string>& accepted = FlagsOf(command);
  for (const std::string& flag : line.given) {
    if (std::find(accepted.begin(), accepted.end(), flag) != accepted.end()) continue;
    std::string spelled = flag == "output" ? "-o" : "--" + flag;
    std::replace(spelled.begin(), spelled.end(), '_', '-');
    return UsageError(absl::StrCat(spelled, " does not apply to ",
                                   IsCommand(command) ? "ampc " + command : "compiling",
                                   " (see ampc --help)"));
  }
  return absl::OkStatus();
}

// --print-pipeline: the order a compilation with these flags runs, and why; reads no model.
absl::Status PrintPipeline(const std::vector<std::string>& args) {
  const bool fits = args.size() == 2 ? args[0] == "explain" : args.empty() || !IsCommand(args[0]);
  if (!fits) return UsageError("usage: ampc [explain] [MODEL] --print-pipeline [flags]");
  if (absl::StatusOr<std::vector<std::unique_ptr<Pass>>> pipeline = BuildPipeline({});
      !pipeline.ok()) {
    return pipeline.status();
  }
  std::cout << PipelineText(PipelineFromFlags());
  return absl::OkStatus();
}

absl::Status Dispatch(const CommandLine& line) {
  const std::vector<std::string>& args = line.positionals;
  if (absl::GetFlag(FLAGS_print_pipeline)) {
    AMPC_RETURN_IF_ERROR(CheckFlagsApply(line));
    return PrintPipeline(args);
  }
  if (args.empty()) return UsageError("no input model (see ampc --help)");
  // A word that names no file is a mistyped command rather than a missing model.
  if (!IsCommand(args[0]) && args[0].find_first_of("./") == std::string::npos && !Exists(args[0])) {
    return UsageError(
        absl::StrCat("'", args[0],
                     "' is neither a command (explain, print, run, train, extract-step, "
                     "export-weights) nor a "
                     "model file"));
  }
  AMPC_RETURN_IF_ERROR(CheckFlagsApply(line));
  if (args[0] == "print") return Print(args);
  if (args[0] == "explain") return Explain(args);
  if (args[0] == "train") return TrainCommand(args);
  if (args[0] == "extract-step") return ExtractStepCommand(args);
  if (args[0] == "export-weights") return ExportWeightsCommand(args);
  if (args[0] == "run")
    return RunModelCommand(args, line.repeated.count("input") ? line.repeated.at("input")
                                                              : std::vector<std::string>{});
  if (args.size() > 1) {
    return UsageError(
        absl::StrCat("unexpected argument '", args[1], "' (one input model per run)"));
  }
  return Compile(args[0]);
}

// The model file a command line names ("" when none), for messages that have no other context.
std::string ModelArgument(const CommandLine& line) {
  const std::vector<std::string>& args = line.positionals;
  if (args.empty()) return "";
  if (IsCommand(args[0])) return args.size() > 1 ? args[1] : "";
  return args[0];
}

std::string OutOfMemoryMessage(const std::string& model) {
  return absl::StrCat(model.empty() ? "" : model + ": ",
                      "out of memory: the model needs more memory than the process may use "
                      "(see `ulimit -v` and the free memory); no output was written");
}

// When an allocation fails, ampc prints one line and exits at once rather than throw
// std::bad_alloc: Abseil's containers are not safe to unwind from a failed allocation (a
// flat_hash_map's destructor then crashes), and noexcept code would abort. The output is only
// ever renamed into place once complete, so exiting here never leaves a partial file. The text
// is formatted in advance: after an allocation failed, formatting it could fail too.
void InstallOutOfMemoryHandler(const std::string& model) {
  static std::string* const text = new std::string;
  *text = absl::StrCat("ampc: error: ", OutOfMemoryMessage(model), "\n");
  std::set_new_handler([] {
    std::fputs(text->c_str(), stderr);
    std::_Exit(kExitInvalidModel);
  });
}

absl::Status DispatchCatchingOutOfMemory(const CommandLine& line) {
  const std::string model = ModelArgument(line);
  InstallOutOfMemoryHandler(model);
  try {
    return Dispatch(line);
  } catch (const std::bad_alloc&) {  // new[] of a size too large to represent
    return absl::ResourceExhaustedError(OutOfMemoryMessage(model));
  } catch (const std::exception& e) {  // a library's; never an abort with a core dump
    return absl::InternalError(absl::StrCat(model.empty() ? "" : model + ": ",
                                            "ampc bug: uncaught exception: ", e.what(),
                                            " (please report it with the command line)"));
  }
}

}  // namespace

int RunCli(int argc, char** argv) {
  // A closed stdout (`ampc print m.onnx | head -1`) is a write error (exit 3), not SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<CommandLine> line = ScanCommandLine(argc, argv);
  absl::Status status = line.status();
  if (line.ok() && line->help) {
    std::cout << absl::StrFormat(kUsage, absl::StrJoin(PassNames(), ", "));
  } else if (line.ok() && line->version) {
    std::cout << VersionText();
  } else if (line.ok()) {
    status = DispatchCatchingOutOfMemory(*line);
  }
  if (status.ok()) status = StdoutWritten();
  if (status.ok()) return kExitOk;
  PrintDiagnostic(absl::StrCat("error: ", status.message()));
  return ExitCodeFor(status);
}

}  // namespace ampc
