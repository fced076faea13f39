// ampc-bench: inference latency of a model on the CPU runtime, for tools/bench-runtime.
//
//   ampc-bench MODEL --input NAME=FILE(.pb|.npy) ... [--threads N] [--warmup W] [--runs R]
//              [--seconds S]
//
// Loads MODEL and creates one Session (shape inference and kernel choice are not timed), runs
// it W times untimed, then R times timed (each run is Session::Run plus copying the outputs to
// the host), stopping early once the timed runs took S seconds and at least 3 were made; prints
// one JSON line: {"median_ms", "min_ms", "max_ms", "runs", "threads"}.
// Exit 2 on a bad command line, 1 when the model cannot be loaded or run.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "compiler/model_io.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/tensor_proto.h"
#include "runtime/npy.h"
#include "runtime/session.h"

namespace ampc {
namespace {

struct Options {
  std::string model;
  std::vector<std::pair<std::string, std::string>> inputs;  // NAME, FILE
  int threads = 0;
  int warmup = 3;
  int runs = 20;
  double seconds = 0;  // 0: no limit
};

absl::StatusOr<Tensor> ReadInput(const std::string& path) {
  if (absl::EndsWith(path, ".npy")) return ReadNpy(path);
  std::ifstream in(path, std::ios::binary);
  onnx::TensorProto proto;
  if (!in || !proto.ParseFromIstream(&in)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a readable TensorProto"));
  }
  return TensorFromProto(proto);
}

absl::StatusOr<std::vector<Tensor>> ReadInputs(const Session& session, const Options& options) {
  std::vector<Tensor> inputs(session.inputs().size());
  for (const auto& [name, path] : options.inputs) {
    size_t slot = 0;
    while (slot < inputs.size() && session.inputs()[slot].name != name) ++slot;
    if (slot == inputs.size())
      return absl::InvalidArgumentError(absl::StrCat("the model has no input ", name));
    AMPC_ASSIGN_OR_RETURN(inputs[slot], ReadInput(path));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty() && !session.inputs()[i].has_default)
      return absl::InvalidArgumentError(absl::StrCat("missing --input ", session.inputs()[i].name));
  }
  return inputs;
}

absl::Status Bench(const Options& options) {
  AMPC_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(options.model));
  CpuBackend backend(options.threads);
  AMPC_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                        Session::Create(std::move(loaded.model), DefaultRegistry(), backend));
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, ReadInputs(*session, options));
  std::vector<double> ms;
  double total_ms = 0;
  for (int i = 0; i < options.warmup + options.runs; ++i) {
    if (options.seconds > 0 && ms.size() >= 3 && total_ms >= options.seconds * 1000) break;
    const auto start = std::chrono::steady_clock::now();
    AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, session->Run(inputs));
    for (const Tensor& output : outputs) AMPC_RETURN_IF_ERROR(ToHost(output).status());
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    if (i < options.warmup) continue;
    ms.push_back(took.count());
    total_ms += took.count();
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  const double median = n % 2 == 1 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  std::cout << absl::StrFormat(
      "{\"median_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, \"runs\": %d, \"threads\": %d}\n",
      median, ms.front(), ms.back(), static_cast<int>(n), backend.pool().threads());
  return absl::OkStatus();
}

bool ParseArgs(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--input" && has_value) {
      const std::string spec = argv[++i];
      const size_t eq = spec.find('=');
      if (eq == std::string::npos) return false;
      options.inputs.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
    } else if (arg == "--threads" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &options.threads) || options.threads < 0) return false;
    } else if (arg == "--warmup" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &options.warmup) || options.warmup < 0) return false;
    } else if (arg == "--runs" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &options.runs) || options.runs < 1) return false;
    } else if (arg == "--seconds" && has_value) {
      if (!absl::SimpleAtod(argv[++i], &options.seconds) || options.seconds < 0) return false;
    } else if (absl::StartsWith(arg, "--") || !options.model.empty()) {
      return false;
    } else {
      options.model = arg;
    }
  }
  return !options.model.empty();
}

}  // namespace
}  // namespace ampc

int main(int argc, char** argv) {
  ampc::Options options;
  if (!ampc::ParseArgs(argc, argv, options)) {
    std::cerr << "usage: ampc-bench MODEL --input NAME=FILE(.pb|.npy) ... [--threads N] "
                 "[--warmup W] [--runs R] [--seconds S]\n";
    return 2;
  }
  if (absl::Status status = ampc::Bench(options); !status.ok()) {
    std::cerr << "ampc-bench: error: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
