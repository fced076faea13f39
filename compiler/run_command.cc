#include "compiler/run_command.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compiler/diagnostics.h"
#include "compiler/exit_codes.h"
#include "compiler/file_io.h"
#include "compiler/model_io.h"
#include "compiler/run_limits.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/graph/status_macros.h"
#include "passes/verify_input.h"
#include "passes/verify_tensors.h"
#include "runtime/core/tensor_proto.h"
#include "runtime/device.h"
#include "runtime/nonfinite.h"
#include "runtime/npy.h"
#include "runtime/session.h"

ABSL_FLAG(std::vector<std::string>, input, {},
          "ampc run: NAME=FILE, a graph input from a .pb (TensorProto) or .npy file; repeat it "
          "for each input.");
ABSL_FLAG(std::string, output_dir, "",
          "ampc run: write each output as NAME.pb and NAME.npy in this folder (created if "
          "missing); without it a summary of each output is printed.");
ABSL_FLAG(std::string, device, "auto", "ampc run: cpu, cuda or auto (CUDA when usable).");
ABSL_FLAG(bool, tf32, false,
          "ampc run/train on a GPU: FP32 MatMul, Gemm and Conv may use TF32 tensor cores (inputs "
          "rounded to a 10-bit mantissa), as PyTorch's allow_tf32; off by default.");
ABSL_FLAG(int, threads, 0, "ampc run: CPU threads (0: one per core).");
ABSL_FLAG(bool, find_nonfinite, false,
          "ampc run: when an output holds inf or NaN, run again keeping every floating-point "
          "value and name the node where they first appear.");

namespace ampc {
namespace {

absl::StatusOr<Tensor> ReadInputFile(const std::string& path) {
  NoteInputFile(path);
  if (absl::EndsWith(path, ".npy")) return ReadNpy(path);
  if (!absl::EndsWith(path, ".pb")) {
    return UsageError(absl::StrCat("--input file ", path, ": expected a .pb or .npy file"));
  }
  return ReadTensorProtoFile(path);
}

// Inputs in the session's order, from NAME=FILE arguments.
absl::StatusOr<std::vector<Tensor>> ReadInputs(const Session& session, const std::string& model,
                                               const std::vector<std::string>& specs) {
  std::vector<Tensor> inputs(session.inputs().size());
  std::vector<bool> given(inputs.size(), false);
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) {
      return UsageError(absl::StrCat("--input ", spec, ": expected NAME=FILE"));
    }
    const std::string name = spec.substr(0, eq), path = spec.substr(eq + 1);
    size_t slot = 0;
    while (slot < inputs.size() && session.inputs()[slot].name != name) ++slot;
    if (slot == inputs.size()) {
      std::vector<std::string> names;
      for (const ValueSpec& s : session.inputs()) names.push_back(s.name);
      return UsageError(absl::StrCat(
          model, ": --input ", name,
          ": the model has no input of that name (its inputs: ", absl::StrJoin(names, ", "), ")"));
    }
    if (given[slot]) return UsageError(absl::StrCat(model, ": --input ", name, " is given twice"));
    given[slot] = true;
    AMPC_ASSIGN_OR_RETURN(inputs[slot], ReadInputFile(path));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueSpec& spec = session.inputs()[i];
    if (inputs[i].empty() && !spec.has_default) {
      return UsageError(absl::StrCat(model, ": missing --input ", spec.name, "=FILE (",
                                     DTypeName(spec.dtype), " input of the model)"));
    }
  }
  return inputs;
}

// NaN or infinite input data is run as given (a model may be meant to propagate it), but said.
void WarnAboutNonFiniteInputs(const Session& session, const std::vector<Tensor>& inputs,
                              const std::string& path) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) continue;
    const absl::StatusOr<NonFiniteCount> count = CountNonFinite(inputs[i]);
    if (!count.ok() || count->total() == 0) continue;
    PrintDiagnostic(absl::StrCat(path, ": warning: input '", session.inputs()[i].name, "' holds ",
                                 count->nan, " NaN and ", count->inf,
                                 " infinite values; running with them as given"));
  }
}

std::string SafeFileName(const std::string& name) {
  std::string out;
  for (char c : name)
    out.push_back(
        std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_');
  return out.empty() || out[0] == '.' ? "_" + out : out;
}

std::string Summary(const std::string& name, const Tensor& t) {
  double sum = 0, min = INFINITY, max = -INFINITY, first = 0;
  int64_t nonfinite = 0;
  const bool numeric = Dispatch<AMPC_ALL_TYPES>(t.dtype(), [&]<typename T>() {
    const T* values = t.data<T>();
    for (int64_t i = 0; i < t.size(); ++i) {
      const double x = static_cast<double>(Compute<T>::Load(values[i]));
      if (i == 0) first = x;
      if (!std::isfinite(x)) {
        ++nonfinite;
        continue;
      }
      sum += x;
      min = std::min(min, x);
      max = std::max(max, x);
    }
  });
  std::string line = absl::StrCat(name, ": ", t.TypeString());
  if (numeric && t.size() == 1) {
    absl::StrAppend(&line, absl::StrFormat(" = %.6g", first));
    return line;
  }
  if (numeric && t.size() > nonfinite) {
    absl::StrAppend(&line, absl::StrFormat(" min %.6g max %.6g mean %.6g", min, max,
                                           sum / static_cast<double>(t.size() - nonfinite)));
  }
  if (nonfinite > 0) absl::StrAppend(&line, " non-finite ", nonfinite);
  return line;
}

// One file name (without extension) per output: SafeFileName, cut to a length every file system
// takes, and unique: an output whose name maps to a taken one gets `_<its index>` appended.
std::vector<std::string> OutputFileNames(const Session& session) {
  constexpr size_t kMaxBase = 200;  // with ".npy" and a temporary suffix, under NAME_MAX (255)
  absl::flat_hash_set<std::string> taken;
  std::vector<std::string> names;
  for (size_t i = 0; i < session.outputs().size(); ++i) {
    std::string name = SafeFileName(session.outputs()[i].name).substr(0, kMaxBase);
    while (!taken.insert(name).second) absl::StrAppend(&name, "_", i);
    names.push_back(std::move(name));
  }
  return names;
}

// Writes every file before renaming any into place, so a failure leaves none of them.
absl::Status WriteOutputs(const Session& session, const std::vector<Tensor>& outputs,
                          const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::UnavailableError(absl::StrCat(dir, ": cannot create: ", error.message()));
  const std::vector<std::string> names = OutputFileNames(session);
  std::vector<std::unique_ptr<TempFile>> files;
  std::vector<std::string> lines;
  auto stage = [&](const std::string& path, const std::string& bytes) {
    files.push_back(std::make_unique<TempFile>(path));
    TempFile& file = *files.back();
    AMPC_RETURN_IF_ERROR(file.Create());
    AMPC_RETURN_IF_ERROR(file.Write(bytes.data(), bytes.size()));
    return file.Close();
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string base = (std::filesystem::path(dir) / names[i]).string();
    AMPC_ASSIGN_OR_RETURN(Tensor host, ToHost(outputs[i]));
    AMPC_RETURN_IF_ERROR(
        stage(base + ".pb", TensorToProto(host, session.outputs()[i].name).SerializeAsString()));
    AMPC_RETURN_IF_ERROR(stage(base + ".npy", EncodeNpy(host)));
    lines.push_back(absl::StrCat(
        "ampc: wrote ", base, ".pb and .npy (", host.TypeString(),
        host.dtype() == DType::kBFloat16 ? "; the .npy holds it widened to float32" : "", ")\n"));
  }
  for (const auto& file : files) AMPC_RETURN_IF_ERROR(file->Commit());
  for (const std::string& line : lines) std::cerr << line;
  return absl::OkStatus();
}

// `name` as an RE2 pattern that matches it alone (metacharacters escaped, '/' kept readable).
std::string QuoteRegex(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c != '\0' && std::strchr(".^$|?*+()[]{}\\", c) != nullptr) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// The note on where inf/NaN first appear, with the compile flag that keeps that node FP32 when it
// ran in a low dtype.
std::string DescribeFirstNonFinite(const FirstNonFinite& first) {
  if (first.value.empty()) {
    return "no node output holds inf or NaN in the rerun: they come from an input or an "
           "initializer";
  }
  const std::string node = first.node.empty() ? "an unnamed node" : "node '" + first.node + "'";
  std::string note = absl::StrCat(
      "inf/NaN first appear in '", EscapeForDiagnostic(first.value), "' (", DTypeName(first.dtype),
      ", ", first.count.inf, " inf and ", first.count.nan, " NaN of ", first.size,
      " elements), the output of ", EscapeForDiagnostic(node), " (", first.op, ")");
  if (first.dtype == DType::kFloat16 && first.count.inf > 0) {
    absl::StrAppend(&note, "; float16's largest finite value is 65504");
  }
  if (first.dtype != DType::kFloat16 && first.dtype != DType::kBFloat16) return note;
  // A Cast into the low dtype overflows for its readers, which are what to keep FP32.
  std::vector<std::string> nodes = first.op == "Cast" ? first.readers : std::vector{first.node};
  std::erase(nodes, "");
  // Only names that paste into a shell and an RE2 pattern as printed get a ready-made flag.
  const bool pasteable = std::all_of(nodes.begin(), nodes.end(), [](const std::string& name) {
    return std::all_of(name.begin(), name.end(),
                       [](char c) { return c >= 0x20 && c < 0x7f && c != '\''; });
  });
  if (nodes.empty() || !pasteable) return note;
  for (std::string& name : nodes) name = QuoteRegex(name);
  absl::StrAppend(&note, "; compiling with --block-node='", absl::StrJoin(nodes, "|"), "' keeps ",
                  first.op == "Cast" ? "the nodes that read it" : "that node", " in FP32");
  return note;
}

// What identifies the file at `path` now: device, inode, size and modification time.
using Stamp = std::tuple<dev_t, ino_t, off_t, int64_t, int64_t>;
Stamp FileStamp(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return {st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
}

// When an output holds inf or NaN: with --find-nonfinite, where they first appear (a rerun of
// the model at `path`, read again: no copy is held for a run that may not need one); without
// it, a note that says how to find out.
absl::Status ExplainNonFiniteOutputs(const Session& session, const std::vector<Tensor>& outputs,
                                     const std::vector<Tensor>& inputs, const std::string& path,
                                     const Stamp& loaded) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    AMPC_ASSIGN_OR_RETURN(NonFiniteCount count, CountNonFinite(outputs[i]));
    if (count.total() == 0) continue;
    const std::string output = EscapeForDiagnostic(session.outputs()[i].name);
    if (!absl::GetFlag(FLAGS_find_nonfinite)) {
      PrintDiagnostic(absl::StrCat("note: ", path, ": output '", output,
                                   "' holds inf or NaN; --find-nonfinite names the node where "
                                   "they first appear"));
      return absl::OkStatus();
    }
    for (const Tensor& input : inputs) {
      absl::StatusOr<NonFiniteCount> in = CountNonFinite(input);
      if (in.ok() && in->total() > 0) {
        PrintDiagnostic(absl::StrCat("note: ", path, ": output '", output,
                                     "' holds inf or NaN, and so do the inputs (see the warning "
                                     "above); --find-nonfinite looks for finite values turning "
                                     "into inf or NaN, so it did not rerun"));
        return absl::OkStatus();
      }
    }
    if (FileStamp(path) != loaded) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, ": --find-nonfinite: the model file changed during the run; run again"));
    }
    AMPC_ASSIGN_OR_RETURN(LoadedModel model, LoadModel(path));
    absl::StatusOr<FirstNonFinite> first =
        FindFirstNonFinite(std::move(model.model), inputs, DefaultRegistry(), session.backend());
    if (!first.ok()) {
      return absl::Status(first.status().code(),
                          absl::StrCat(path, ": --find-nonfinite: ", first.status().message()));
    }
    PrintDiagnostic(absl::StrCat("note: ", path, ": ", DescribeFirstNonFinite(*first)));
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckThreadsFlag() {
  const int threads = absl::GetFlag(FLAGS_threads);
  if (threads >= 0 && threads <= kMaxThreads) return absl::OkStatus();
  return UsageError(
      absl::StrCat("--threads must be 0 (one per core) to ", kMaxThreads, ", not ", threads));
}

absl::Status RunModelCommand(const std::vector<std::string>& args,
                             const std::vector<std::string>& input_specs) {
  if (args.size() != 2)
    return UsageError("usage: ampc run MODEL --input NAME=FILE ... [--output-dir DIR]");
  AMPC_RETURN_IF_ERROR(CheckThreadsFlag());
  AMPC_ASSIGN_OR_RETURN(const RunLimits limits, RunLimitsFromFlags());
  const std::string device = absl::GetFlag(FLAGS_device);
  absl::StatusOr<std::unique_ptr<Backend>> chosen =
      CreateBackend(device, absl::GetFlag(FLAGS_threads), absl::GetFlag(FLAGS_tf32));
  if (absl::IsInvalidArgument(chosen.status())) return UsageError(chosen.status().message());
  if (!chosen.ok()) return chosen.status();
  std::unique_ptr<Backend> backend_owner = *std::move(chosen);
  backend_owner->set_limits(limits);
  const std::string& path = args[1];
  const auto stamp = FileStamp(path);  // before the read: a later change is seen
  AMPC_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(path));
  AMPC_RETURN_IF_ERROR(CheckVersions(loaded.model, path));
  AMPC_RETURN_IF_ERROR(CheckHasOutputs(loaded.model, path));
  NoteInputs(path, loaded);
  // The same tensor checks as compiling: data that fills its dims, NaN weights said out loud.
  std::vector<std::string> warnings;
  if (absl::Status s = VerifyTensors(loaded.model, warnings); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  for (const std::string& warning : warnings) {
    PrintDiagnostic(absl::StrCat(path, ": warning: ", warning));
  }
  absl::StatusOr<std::unique_ptr<Session>> session = CreateSession<Session>(
      std::move(loaded.model), DefaultRegistry(), device, absl::GetFlag(FLAGS_threads),
      backend_owner, [&](absl::string_view why) {
        PrintDiagnostic(absl::StrCat("note: ", path, ": ", why, "; running on the CPU"));
      });
  Backend& backend = *backend_owner;
  if (!session.ok()) {
    return absl::Status(session.status().code(),
                        absl::StrCat(path, ": ", session.status().message()));
  }
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, ReadInputs(**session, path, input_specs));
  WarnAboutNonFiniteInputs(**session, inputs, path);
  backend.ResetPeak();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<Tensor>> outputs = (*session)->Run(inputs);
  if (!outputs.ok()) {
    return absl::Status(outputs.status().code(),
                        absl::StrCat(path, ": ", outputs.status().message()));
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cerr << absl::StrFormat("ampc: %s: ran on %s in %.2f ms; peak tensor memory %.1f kB\n", path,
                               backend.name(), ms,
                               static_cast<double>(backend.memory_stats().peak_bytes) / 1e3);
  const std::string dir = absl::GetFlag(FLAGS_output_dir);
  if (!dir.empty()) {
    AMPC_RETURN_IF_ERROR(WriteOutputs(**session, *outputs, dir));
  } else {
    for (size_t i = 0; i < outputs->size(); ++i) {
      AMPC_ASSIGN_OR_RETURN(Tensor host, ToHost((*outputs)[i]));
      std::cout << Summary(EscapeForDiagnostic((*session)->outputs()[i].name), host) << "\n";
    }
  }
  return ExplainNonFiniteOutputs(**session, *outputs, inputs, path, stamp);
}

}  // namespace ampc
