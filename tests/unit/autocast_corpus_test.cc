// ampc over ONNX's own test suite (libonnx-testdata), in FP16 and BF16, with and without --low-io:
//  - issue 3 item 4: every model that passes the checker with full type inference still passes
//    it after ampc's default pipeline, keeps its opsets, and in keep-io mode its graph I/O dtypes;
//    inputs that fail the check are counted and listed, not failed;
//  - item 6: compiling twice gives the same bytes, and compiling the output changes nothing.
// The pipeline runs in process, as compiler/driver.cc runs it; a crash names the model it hit.
// docs/testing.md describes these checks and their Python companions in tests/python/.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/model_io.h"
#include "compiler/pipeline.h"
#include "google/protobuf/util/message_differencer.h"
#include "passes/graph/onnx_status.h"
#include "passes/infer_types.h"
#include "tests/support/model_text.h"
#include "tests/support/subprocess.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;

struct Mode {
  const char* name;
  int low_dtype;
  bool low_io;
};

constexpr Mode kModes[] = {
    {"fp16", onnx::TensorProto::FLOAT16, false},
    {"fp16_low_io", onnx::TensorProto::FLOAT16, true},
    {"bf16", onnx::TensorProto::BFLOAT16, false},
    {"bf16_low_io", onnx::TensorProto::BFLOAT16, true},
};

void PrintTo(const Mode& mode, std::ostream* os) { *os << mode.name; }

const std::vector<std::string> kFolders = {"node", "pytorch-converted", "pytorch-operator",
                                           "simple"};

// What a fatal signal prints before the process dies: the model and mode being compiled.
char crash_note[4096];

extern "C" void PrintCrashNote(int signal_number) {
  const ssize_t ignored = write(STDERR_FILENO, crash_note, std::strlen(crash_note));
  (void)ignored;
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

void NoteCurrentModel(const std::string& file, const Mode& mode) {
  static const bool installed = [] {
    for (int s : {SIGSEGV, SIGABRT, SIGFPE, SIGBUS, SIGILL}) std::signal(s, PrintCrashNote);
    return true;
  }();
  (void)installed;
  std::snprintf(crash_note, sizeof(crash_note), "\nampc crashed on %s [%s]\n", file.c_str(),
                mode.name);
}

std::vector<fs::path> CorpusModels(const std::string& folder) {
  return ampc::testing::CorpusModels(AMPC_CORPUS_DIR, folder);
}

// "Passes the checker with full type inference", as onnx.checker.check_model(full_check=True).
absl::Status CheckWithFullTypeInference(const onnx::ModelProto& model, const std::string& what) {
  absl::Status status =
      CatchOnnx(absl::StrCat(what, ": ONNX checker"), [&] { onnx::checker::check_model(model); });
  if (!status.ok()) return status;
  onnx::ModelProto copy = model;
  return InferTypesStrict(copy, what);
}

// The default pipeline with the options `ampc --dtype ... [--low-io]` gives.
absl::Status Compile(onnx::ModelProto& model, const std::string& file, const Mode& mode) {
  AutocastOptions options;
  options.low_dtype = mode.low_dtype;
  options.low_io = mode.low_io;
  options.policy = AutocastPolicy::Defaults(mode.low_dtype);
  return CompileWithDefaults(model, file, options);
}

// Spec "Output guarantees": the model's opsets are unchanged (an ai.ampc import may be added).
absl::Status CheckOpsets(const onnx::ModelProto& before, const onnx::ModelProto& after) {
  for (const onnx::OperatorSetIdProto& opset : before.opset_import()) {
    const auto& imports = after.opset_import();
    if (std::none_of(imports.begin(), imports.end(), [&](const onnx::OperatorSetIdProto& o) {
          return o.domain() == opset.domain() && o.version() == opset.version();
        })) {
      return absl::InternalError(absl::StrCat("opset ", opset.version(), " of domain '",
                                              opset.domain(), "' is no longer imported"));
    }
  }
  return absl::OkStatus();
}

// Spec rule 6: in keep-io mode graph inputs and outputs keep their names and dtypes.
absl::Status CheckSameIo(const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& before,
                         const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& after,
                         const char* what) {
  if (before.size() != after.size()) {
    return absl::InternalError(
        absl::StrCat("keep-io: ", before.size(), " graph ", what, "s became ", after.size()));
  }
  for (int i = 0; i < before.size(); ++i) {
    const onnx::TypeProto& old_type = before[i].type();  // shapes included: declared I/O is kept
    const onnx::TypeProto& new_type = after[i].type();
    if (before[i].name() != after[i].name() ||
        !google::protobuf::util::MessageDifferencer::Equals(old_type, new_type)) {
      return absl::InternalError(absl::StrCat("keep-io: graph ", what, " ", i, " '",
                                              before[i].name(), "' {", old_type.ShortDebugString(),
                                              "} became '", after[i].name(), "' {",
                                              new_type.ShortDebugString(), "}"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckContract(const onnx::ModelProto& before, const onnx::ModelProto& after,
                           const Mode& mode) {
  if (absl::Status s = CheckOpsets(before, after); !s.ok() || mode.low_io) return s;
  if (absl::Status s = CheckSameIo(before.graph().input(), after.graph().input(), "input");
      !s.ok()) {
    return s;
  }
  return CheckSameIo(before.graph().output(), after.graph().output(), "output");
}

enum class Outcome { kPassed, kInputInvalid, kNotCompiled, kFailed };

struct Result {
  Outcome outcome;
  std::string message;
};

Result Failed(const absl::Status& status) {
  return {Outcome::kFailed, std::string(status.message())};
}

// Loads `path` and applies the input check; kPassed means the model is a valid input.
Result LoadValidInput(const fs::path& path, onnx::ModelProto& model) {
  absl::StatusOr<LoadedModel> loaded = LoadModel(path.string());
  if (!loaded.ok()) return Failed(loaded.status());
  model = std::move(loaded->model);
  if (absl::Status s = CheckWithFullTypeInference(model, path.string()); !s.ok()) {
    return {Outcome::kInputInvalid, std::string(s.message())};
  }
  return {Outcome::kPassed, ""};
}

absl::Status CompileNotingCrashes(onnx::ModelProto& model, const std::string& file,
                                  const Mode& mode) {
  NoteCurrentModel(file, mode);
  absl::Status status = Compile(model, file, mode);
  crash_note[0] = '\0';
  return status;
}

Result CheckValidity(const fs::path& path, const Mode& mode) {
  onnx::ModelProto model;
  if (Result input = LoadValidInput(path, model); input.outcome != Outcome::kPassed) return input;
  const onnx::ModelProto original = model;
  absl::Status status = CompileNotingCrashes(model, path.string(), mode);
  if (status.ok()) status = CheckWithFullTypeInference(model, path.string() + " (ampc output)");
  if (status.ok()) status = CheckContract(original, model, mode);
  if (!status.ok()) return Failed(status);
  return {Outcome::kPassed, ""};
}

// Compiles the file `input` and saves the result to `output`, as `ampc IN -o OUT` does.
absl::Status CompileFile(const std::string& input, const std::string& output, const Mode& mode) {
  absl::StatusOr<LoadedModel> loaded = LoadModel(input);
  if (!loaded.ok()) return loaded.status();
  if (absl::Status s = CompileNotingCrashes(loaded->model, input, mode); !s.ok()) return s;
  SaveOptions options;
  options.input_used_external_data = loaded->used_external_data;
  return SaveModel(loaded->model, output, options);
}

// The first difference between two model files, for the failure message.
std::string FirstDifference(const std::string& a, const std::string& b) {
  absl::StatusOr<LoadedModel> first = LoadModel(a), second = LoadModel(b);
  if (!first.ok() || !second.ok()) return "(cannot reload the outputs)";
  std::string difference;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&difference);
  if (differencer.Compare(first->model, second->model)) return "protos equal, bytes differ";
  return difference.substr(0, difference.find('\n'));
}

// Spec "Casts": the same input and flags give byte-identical output (here within one process;
// tests/python/check_determinism.py compares separate runs), and ampc on its own output changes
// nothing.
Result CheckIdempotence(const fs::path& path, const Mode& mode, const fs::path& dir) {
  onnx::ModelProto model;
  if (Result input = LoadValidInput(path, model); input.outcome != Outcome::kPassed) return input;
  const std::string first = (dir / "first.onnx").string(), again = (dir / "again.onnx").string(),
                    second = (dir / "second.onnx").string();
  if (absl::Status s = CompileFile(path.string(), first, mode); !s.ok()) {
    return {Outcome::kNotCompiled, std::string(s.message())};  // ValidInputGivesValidOutput fails
  }
  if (absl::Status s = CompileFile(path.string(), again, mode); !s.ok()) return Failed(s);
  const std::string first_bytes = testing::ReadFileOrEmpty(first);
  if (testing::ReadFileOrEmpty(again) != first_bytes) {
    return {Outcome::kFailed, "two compilations differ: " + FirstDifference(first, again)};
  }
  if (absl::Status s = CompileFile(first, second, mode); !s.ok()) {
    return {Outcome::kFailed, absl::StrCat("ampc rejects its own output: ", s.message())};
  }
  if (testing::ReadFileOrEmpty(second) != first_bytes) {
    return {Outcome::kFailed,
            "compiling the output again changed it: " + FirstDifference(first, second)};
  }
  return {Outcome::kPassed, ""};
}

struct Tally {
  int passed = 0, failed = 0, not_compiled = 0;
  std::vector<std::string> invalid_inputs;

  void Add(const fs::path& path, const char* mode, const Result& result) {
    switch (result.outcome) {
      case Outcome::kPassed:
        ++passed;
        break;
      case Outcome::kInputInvalid:
        invalid_inputs.push_back(result.message);
        break;
      case Outcome::kNotCompiled:
        ++not_compiled;
        break;
      case Outcome::kFailed:
        ++failed;
        ADD_FAILURE() << path.string() << " [" << mode << "]: " << result.message;
        break;
    }
  }
};

class AutocastCorpus : public ::testing::TestWithParam<std::tuple<std::string, Mode>> {
 protected:
  void SetUp() override {
    folder_ = std::get<0>(GetParam());
    mode_ = std::get<1>(GetParam());
    models_ = CorpusModels(folder_);
    if (models_.empty()) GTEST_SKIP() << "libonnx-testdata is missing (tools/setup installs it)";
  }
  void Print(const Tally& tally, bool list_invalid) const {
    std::cout << folder_ << " [" << mode_.name << "]: checked " << models_.size() << ", passed "
              << tally.passed << ", failed " << tally.failed << ", input-invalid "
              << tally.invalid_inputs.size();
    if (tally.not_compiled > 0) std::cout << ", not compiled " << tally.not_compiled;
    std::cout << "\n";
    if (!list_invalid) return;
    for (const std::string& reason : tally.invalid_inputs) {
      std::cout << "  input-invalid: " << reason << "\n";
    }
  }

  std::string folder_;
  Mode mode_{};
  std::vector<fs::path> models_;
};

TEST_P(AutocastCorpus, ValidInputGivesValidOutput) {
  Tally tally;
  for (const fs::path& path : models_) tally.Add(path, mode_.name, CheckValidity(path, mode_));
  Print(tally, /*list_invalid=*/true);
  EXPECT_EQ(tally.failed, 0);
}

TEST_P(AutocastCorpus, RecompilingTheOutputChangesNothing) {
  // Each save is fsynced; on tmpfs that costs nothing.
  std::string pattern = fs::is_directory("/dev/shm") ? "/dev/shm" : fs::temp_directory_path();
  pattern += "/ampc-idempotence-XXXXXX";
  ASSERT_NE(mkdtemp(pattern.data()), nullptr) << pattern << ": " << std::strerror(errno);
  const fs::path dir = pattern;
  Tally tally;
  for (const fs::path& path : models_) {
    tally.Add(path, mode_.name, CheckIdempotence(path, mode_, dir));
  }
  fs::remove_all(dir);
  Print(tally, /*list_invalid=*/false);
  EXPECT_EQ(tally.failed, 0);
}

INSTANTIATE_TEST_SUITE_P(OnnxTestData, AutocastCorpus,
                         ::testing::Combine(::testing::ValuesIn(kFolders),
                                            ::testing::ValuesIn(kModes)),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + "_" + std::get<1>(info.param).name;
                         });

}  // namespace
}  // namespace ampc
