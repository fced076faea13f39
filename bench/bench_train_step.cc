// ampc-bench-train: training-step time of a compiled training model (`ampc --train`) on a
// device, for tools/bench-gpu and tools/device-check.
//
//   ampc-bench-train MODEL --batch N [--device cpu|cuda|auto] [--threads N] [--warmup W]
//                    [--steps S] [--classes C] [--seed K]
//
// Random data of the model's data inputs (floats in [0, 1), integer labels in [0, C)), one
// batch reused for every step so that data loading is not timed. W untimed steps, then S timed
// ones; each timed step is TrainingSession::Step, which ends when its loss is on the host, so a
// step's time is its whole device time. Prints one JSON line: median/min/max ms, steps, device,
// steps applied and skipped, first and last loss, and the host-to-device copies per step (the
// batch's inputs; anything more is a host round trip the step should not make).
// Exit 2 on a bad command line, 1 when the model cannot be loaded or trained.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "compiler/model_io.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/device.h"
#include "runtime/status_macros.h"
#include "runtime/training_session.h"

#ifdef AMPC_HAVE_CUDA
#include "runtime/cuda_backend.h"
#endif

namespace ampc {
namespace {

struct Options {
  std::string model;
  std::string device = "auto";
  int64_t batch = 0;
  int threads = 0;
  int warmup = 10;
  int steps = 50;
  int64_t classes = 10;
  uint32_t seed = 0;
};

absl::StatusOr<NamedTensors> RandomBatch(const TrainingSession& session, const Options& options) {
  std::mt19937 rng(options.seed);
  NamedTensors batch;
  for (const ValueSpec& spec : session.data_inputs()) {
    Shape shape;
    for (size_t d = 0; d < spec.dims.size(); ++d) {
      shape.push_back(d == 0 ? options.batch : spec.dims[d]);
      if (shape.back() < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input '", spec.name, "' has a symbolic dim after the batch; give a fixed shape"));
      }
    }
    Tensor t = Tensor::Host(spec.dtype, shape);
    if (spec.dtype == DType::kFloat) {
      std::uniform_real_distribution<float> dist(0, 1);
      for (float& v : t.span<float>()) v = dist(rng);
    } else if (spec.dtype == DType::kInt64) {
      std::uniform_int_distribution<int64_t> dist(0, options.classes - 1);
      for (int64_t& v : t.span<int64_t>()) v = dist(rng);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "' is ",
                                                     DTypeName(spec.dtype),
                                                     "; random data is float32 or int64"));
    }
    batch[spec.name] = std::move(t);
  }
  return batch;
}

uint64_t HostCopies(const Backend& backend) {
#ifdef AMPC_HAVE_CUDA
  if (backend.name() == "cuda") return static_cast<const CudaBackend&>(backend).host_copies();
#endif
  (void)backend;
  return 0;
}

absl::Status Bench(const Options& options) {
  AMPC_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(options.model));
  AMPC_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                        CreateBackend(options.device, options.threads));
  AMPC_ASSIGN_OR_RETURN(
      std::unique_ptr<TrainingSession> session,
      TrainingSession::Create(std::move(loaded.model), DefaultRegistry(), *backend));
  AMPC_ASSIGN_OR_RETURN(NamedTensors batch, RandomBatch(*session, options));
  std::vector<double> ms;
  int applied = 0;
  float first_loss = 0, last_loss = 0;
  uint64_t copies_before = 0;
  for (int i = 0; i < options.warmup + options.steps; ++i) {
    if (i == options.warmup) copies_before = HostCopies(*backend);
    const auto start = std::chrono::steady_clock::now();
    AMPC_ASSIGN_OR_RETURN(StepResult result, session->Step(batch, 1e-3f));
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    if (i == 0) first_loss = result.loss;
    last_loss = result.loss;
    if (i < options.warmup) continue;
    ms.push_back(took.count());
    applied += result.applied ? 1 : 0;
  }
  const double copies =
      static_cast<double>(HostCopies(*backend) - copies_before) / static_cast<double>(ms.size());
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  const double median = n % 2 == 1 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  std::cout << absl::StrFormat(
      "{\"median_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, \"steps\": %d, \"device\": "
      "\"%s\", \"applied\": %d, \"skipped\": %d, \"first_loss\": %.6g, \"last_loss\": %.6g, "
      "\"host_copies_per_step\": %.2f}\n",
      median, ms.front(), ms.back(), static_cast<int>(n), backend->name(), applied,
      static_cast<int>(n) - applied, first_loss, last_loss, copies);
  return absl::OkStatus();
}

bool ParseArgs(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    bool ok = true;
    if (arg == "--device" && has_value) {
      options.device = argv[++i];
    } else if (arg == "--batch" && has_value) {
      ok = absl::SimpleAtoi(argv[++i], &options.batch) && options.batch > 0;
    } else if (arg == "--threads" && has_value) {
      ok = absl::SimpleAtoi(argv[++i], &options.threads) && options.threads >= 0;
    } else if (arg == "--warmup" && has_value) {
      ok = absl::SimpleAtoi(argv[++i], &options.warmup) && options.warmup >= 1;
    } else if (arg == "--steps" && has_value) {
      ok = absl::SimpleAtoi(argv[++i], &options.steps) && options.steps >= 1;
    } else if (arg == "--classes" && has_value) {
      ok = absl::SimpleAtoi(argv[++i], &options.classes) && options.classes >= 1;
    } else if (arg == "--seed" && has_value) {
      ok = absl::SimpleAtoi(argv[++i], &options.seed);
    } else if (arg.starts_with("--") || !options.model.empty()) {
      ok = false;
    } else {
      options.model = arg;
    }
    if (!ok) return false;
  }
  return !options.model.empty() && options.batch > 0;
}

}  // namespace
}  // namespace ampc

int main(int argc, char** argv) {
  ampc::Options options;
  if (!ampc::ParseArgs(argc, argv, options)) {
    std::cerr << "usage: ampc-bench-train MODEL --batch N [--device cpu|cuda|auto] [--threads N] "
                 "[--warmup W] [--steps S] [--classes C] [--seed K]\n";
    return 2;
  }
  if (absl::Status status = ampc::Bench(options); !status.ok()) {
    std::cerr << "ampc-bench-train: error: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
