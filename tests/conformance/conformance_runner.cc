// ampc-conformance: runs ONNX test-suite models (model.onnx + test_data_set_*/input_*.pb) on the
// CPU backend and compares with output_*.pb at ONNX's backend-test tolerances (rtol 1e-3,
// atol 1e-7, NaNs equal). Prints one line per case that does not pass, and the counts.
//
//   ampc-conformance [--filter REGEX] [--verbose] [--expected FILE] [--write-passing FILE]
//                    [--dtype fp16|bf16 --exclusions FILE] DIR...
//
// DIR is a folder of cases (e.g. .../data/node) or one case. With --expected, every case named
// in FILE (one "folder/case" per line, '#' comments) must pass, else the exit status is 1.
//
// With --dtype, each case that passes in FP32 is compiled by ampc's default pipeline for that
// dtype (graph I/O kept, so the test data feeds it unchanged), run, and compared at the mixed-
// precision tolerances of docs/testing.md. A miss fails the run unless FILE lists the case
// ("folder/case  reason"); a listed case that passes fails it too (the line is stale).
#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/model_io.h"
#include "compiler/pipeline.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/tensor_proto.h"
#include "runtime/session.h"
#include "tests/conformance/compare.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;

enum class Outcome { kPass, kFail, kUnsupported, kNotJudged };

// FP16 keeps 11 significant bits, BF16 8: docs/testing.md derives 1e-2 for FP16; BF16's unit
// roundoff is 8x larger.
constexpr Tolerance kFp16Tolerance{1e-2, 1e-2};
constexpr Tolerance kBf16Tolerance{8e-2, 8e-2};

struct Result {
  Outcome outcome;
  std::string message;
};

absl::StatusOr<onnx::TensorProto> ReadTensor(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  onnx::TensorProto tensor;
  if (!tensor.ParseFromString(bytes) || (tensor.dims_size() == 0 && tensor.data_type() == 0)) {
    return absl::UnimplementedError(
        absl::StrCat(path.filename().string(), " is not a tensor (sequence/optional/map)"));
  }
  return tensor;
}

std::vector<fs::path> Numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    fs::path file = dir / absl::StrCat(prefix, i, ".pb");
    if (!fs::exists(file)) break;
    files.push_back(file);
  }
  return files;
}

// The test suite stores bfloat16 data as uint16 (numpy has no bfloat16); read it as declared.
void FixBFloat16(onnx::TensorProto& proto, DType declared) {
  if (proto.data_type() == onnx::TensorProto::UINT16 && declared == DType::kBFloat16) {
    proto.set_data_type(onnx::TensorProto::BFLOAT16);
  }
}

absl::Status RunDataSet(const Session& session, const fs::path& dir, const Tolerance& tolerance) {
  std::vector<Tensor> inputs(session.inputs().size());
  std::vector<size_t> free_slots;
  for (size_t i = 0; i < session.inputs().size(); ++i) {
    if (!session.inputs()[i].has_default) free_slots.push_back(i);
  }
  std::vector<fs::path> input_files = Numbered(dir, "input_");
  if (input_files.size() > session.inputs().size()) {
    return absl::InvalidArgumentError("more input files than graph inputs");
  }
  for (size_t k = 0; k < input_files.size(); ++k) {
    AMPC_ASSIGN_OR_RETURN(onnx::TensorProto proto, ReadTensor(input_files[k]));
    size_t slot = k < free_slots.size() ? free_slots[k] : k;
    for (size_t i = 0; i < session.inputs().size(); ++i) {
      if (!proto.name().empty() && session.inputs()[i].name == proto.name()) slot = i;
    }
    FixBFloat16(proto, session.inputs()[slot].dtype);
    AMPC_ASSIGN_OR_RETURN(inputs[slot], TensorFromProto(proto));
  }
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, session.Run(inputs));
  std::vector<fs::path> output_files = Numbered(dir, "output_");
  if (output_files.size() != outputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(output_files.size(), " expected outputs, ", outputs.size(), " produced"));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    AMPC_ASSIGN_OR_RETURN(onnx::TensorProto proto, ReadTensor(output_files[k]));
    FixBFloat16(proto, outputs[k].dtype());
    AMPC_ASSIGN_OR_RETURN(Tensor expected, TensorFromProto(proto));
    AMPC_ASSIGN_OR_RETURN(Tensor actual, ToHost(outputs[k]));
    if (absl::Status status = Compare(expected, actual, tolerance); !status.ok()) {
      return absl::Status(status.code(), absl::StrCat("output '", session.outputs()[k].name,
                                                      "': ", status.message()));
    }
  }
  return absl::OkStatus();
}

Result RunModel(onnx::ModelProto model, const fs::path& dir, Backend& backend,
                const Tolerance& tolerance) {
  absl::StatusOr<std::unique_ptr<Session>> session =
      Session::Create(std::move(model), DefaultRegistry(), backend);
  if (!session.ok()) {
    return {session.status().code() == absl::StatusCode::kUnimplemented ? Outcome::kUnsupported
                                                                        : Outcome::kFail,
            std::string(session.status().message())};
  }
  int sets = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_directory() || entry.path().filename().string().rfind("test_data_set_", 0) != 0) {
      continue;
    }
    ++sets;
    absl::Status status = RunDataSet(**session, entry.path(), tolerance);
    if (!status.ok()) {
      const Outcome outcome = status.code() == absl::StatusCode::kUnimplemented
                                  ? Outcome::kUnsupported
                                  : Outcome::kFail;
      return {outcome, absl::StrCat(entry.path().filename().string(), ": ", status.message())};
    }
  }
  if (sets == 0) return {Outcome::kUnsupported, "no test data sets"};
  return {Outcome::kPass, ""};
}

// `low_dtype` 0: the model as it is; else compiled by ampc for that dtype.
Result RunCase(const fs::path& dir, Backend& backend, int low_dtype) {
  absl::StatusOr<LoadedModel> loaded = LoadModel((dir / "model.onnx").string());
  if (!loaded.ok()) return {Outcome::kUnsupported, std::string(loaded.status().message())};
  if (low_dtype == 0)
    return RunModel(std::move(loaded->model), dir, backend, kOnnxBackendTolerance);
  onnx::ModelProto compiled = loaded->model;
  const Result fp32 = RunModel(std::move(loaded->model), dir, backend, kOnnxBackendTolerance);
  if (fp32.outcome != Outcome::kPass)
    return {Outcome::kNotJudged, "fails in FP32: " + fp32.message};
  AutocastOptions options;
  options.low_dtype = low_dtype;
  options.policy = AutocastPolicy::Defaults(low_dtype);
  if (absl::Status s = CompileWithDefaults(compiled, (dir / "model.onnx").string(), options);
      !s.ok()) {
    return {Outcome::kFail, absl::StrCat("ampc: ", s.message())};
  }
  Result result =
      RunModel(std::move(compiled), dir, backend,
               low_dtype == onnx::TensorProto::FLOAT16 ? kFp16Tolerance : kBf16Tolerance);
  // The FP32 model ran, so anything the compiled one cannot run is a miss, not "unsupported".
  if (result.outcome == Outcome::kUnsupported) result.outcome = Outcome::kFail;
  return result;
}

std::vector<fs::path> Cases(const fs::path& dir) {
  if (fs::exists(dir / "model.onnx")) return {dir};
  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (fs::exists(entry.path() / "model.onnx")) cases.push_back(entry.path());
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

// The first word of each line that is not empty or a '#' comment.
std::set<std::string> ReadList(const std::string& path) {
  std::set<std::string> names;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line.substr(0, line.find_first_of(" \t")));
  }
  return names;
}

int Main(int argc, char** argv) {
  std::string filter = ".*", expected_file, write_file, exclusions_file;
  int low_dtype = 0;
  bool verbose = false;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--filter" && i + 1 < argc) {
      filter = argv[++i];
    } else if (arg == "--expected" && i + 1 < argc) {
      expected_file = argv[++i];
    } else if (arg == "--write-passing" && i + 1 < argc) {
      write_file = argv[++i];
    } else if (arg == "--dtype" && i + 1 < argc) {
      const std::string dtype = argv[++i];
      low_dtype = dtype == "fp16"   ? onnx::TensorProto::FLOAT16
                  : dtype == "bf16" ? onnx::TensorProto::BFLOAT16
                                    : -1;
      if (low_dtype < 0) {
        std::cerr << "ampc-conformance: --dtype " << dtype << ": expected fp16 or bf16\n";
        return 2;
      }
    } else if (arg == "--exclusions" && i + 1 < argc) {
      exclusions_file = argv[++i];
    } else if (arg == "--verbose") {
      verbose = true;
    } else if (arg.rfind("--", 0) == 0) {
      std::cerr << "ampc-conformance: unknown flag " << arg << "\n";
      return 2;
    } else {
      dirs.push_back(arg);
    }
  }
  if (dirs.empty()) {
    std::cerr << "usage: ampc-conformance [--filter REGEX] [--verbose] [--expected FILE] "
                 "[--write-passing FILE] DIR...\n";
    return 2;
  }
  const RE2 pattern(filter);
  CpuBackend backend;
  std::map<std::string, std::array<int, 4>> counts;  // folder -> count per Outcome
  std::set<std::string> passing, failing;
  const std::set<std::string> excluded =
      exclusions_file.empty() ? std::set<std::string>() : ReadList(exclusions_file);
  for (const std::string& dir : dirs) {
    for (const fs::path& case_dir : Cases(dir)) {
      const std::string name = absl::StrCat(case_dir.parent_path().filename().string(), "/",
                                            case_dir.filename().string());
      if (!RE2::PartialMatch(name, pattern)) continue;
      const Result result = RunCase(case_dir, backend, low_dtype);
      counts[case_dir.parent_path().filename().string()][static_cast<int>(result.outcome)]++;
      if (result.outcome == Outcome::kPass) passing.insert(name);
      if (result.outcome == Outcome::kFail) failing.insert(name);
      if (result.outcome == Outcome::kPass ? verbose
                                           : (verbose || result.outcome == Outcome::kFail)) {
        static const char* kWords[] = {"pass", "FAIL", "unsupported", "not-judged"};
        std::cout << kWords[static_cast<int>(result.outcome)] << " " << name
                  << (result.message.empty() ? "" : ": ") << result.message << "\n";
      }
    }
  }
  std::array<int, 4> total = {0, 0, 0, 0};
  auto print = [&](const std::string& label, const std::array<int, 4>& c) {
    std::cout << label << ": " << c[0] << " pass, " << c[1] << " fail, " << c[2] << " unsupported";
    if (low_dtype != 0) std::cout << ", " << c[3] << " not judged (fail or unsupported in FP32)";
    std::cout << "\n";
  };
  for (const auto& [folder, c] : counts) {
    print(folder, c);
    for (int k = 0; k < 4; ++k) total[k] += c[k];
  }
  print("total", total);
  if (!write_file.empty()) {
    std::ofstream out(write_file);
    out << "# Conformance cases that pass on the CPU backend (tools: ampc-conformance "
           "--write-passing).\n";
    for (const std::string& name : passing) out << name << "\n";
  }
  int bad = 0;
  for (const std::string& name : failing) {
    if (low_dtype == 0 || excluded.contains(name)) continue;
    std::cout << "MISS " << name << " passes in FP32 but not compiled (not in --exclusions)\n";
    ++bad;
  }
  for (const std::string& name : excluded) {
    if (!passing.contains(name)) continue;
    std::cout << "STALE " << name << " passes now; remove it from " << exclusions_file << "\n";
    ++bad;
  }
  if (bad > 0) return 1;
  if (!expected_file.empty()) {
    int regressions = 0;
    for (const std::string& name : ReadList(expected_file)) {
      if (!RE2::PartialMatch(name, pattern) || passing.contains(name)) continue;
      std::cout << "REGRESSION " << name << " is listed in " << expected_file
                << " but does not pass\n";
      ++regressions;
    }
    if (regressions > 0) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ampc

int main(int argc, char** argv) { return ampc::Main(argc, argv); }
