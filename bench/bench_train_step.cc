// ampc-bench-train: training-step time of a compiled training model (`ampc --train`) on a
// device, for tools/bench-gpu and tools/device-check.
//
//   ampc-bench-train MODEL --batch N [--device cpu|cuda|auto] [--threads N] [--warmup W]
//                    [--steps S] [--classes C] [--seed K] [--profile] [--tf32] [--no-capture]
//                    [--no-memory-plans] [--seq L] [--ones NAME]
//
// Random data of the model's data inputs (floats in [0, 1), integer labels in [0, C)), one
// batch reused for every step so that data loading is not timed. W untimed steps, then S timed
// ones (--seq L: symbolic dims after the batch, such as a sequence, take L; --ones NAME: input
// NAME, such as an attention mask, is all ones); each timed step is TrainingSession::Step, which
// ends when its loss is on the host, so a step's time is its whole device time. Prints one JSON
// line: median/min/max ms, steps, device, cpu_per_wall (the process's CPU time over the timed
// steps' wall time: the cores they used), steps applied and skipped, first and last loss, and the
// host-to-device copies per step (the batch's inputs; anything more is a host round trip the step
// should not make), and unsynced_ms_per_step: S more steps queued with nothing read back until the
// last, over S, and the host's waits for the device among them (syncs_per_step). Steps are captured
// and replayed (TrainingSession::set_capture; --no-capture: never): "replayed_steps" counts them,
// and "capture_off" says why none were where the backend could not; eager_unsynced_ms_per_step is
// unsynced_ms_per_step with capture off, in the same process. "peak_mib": the most backend memory
// in use during the timed steps (parameters, optimizer state and the step's values); "held_mib":
// what the backend holds after them, in use or kept for reuse (--no-memory-plans: the backend's
// buffer cache alone, runtime/core/memory_plan.h).
// --profile runs 10 more steps with each node of the step graph timed (CUDA events on the
// backend's stream; the host clock on the CPU) and adds "profile": milliseconds per step by op
// type, every one, largest first, and "profiled_ms", their sum.
// Exit 2 on a bad command line, 1 when the model cannot be loaded or trained.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <map>
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
#include "passes/graph/status_macros.h"
#include "runtime/core/node_profiler.h"
#include "runtime/device.h"
#include "runtime/training_session.h"

#ifdef AMPC_HAVE_CUDA
#include "runtime/core/cuda_backend.h"
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
  int64_t seq = 0;  // 0: symbolic dims after the batch are an error
  std::vector<std::string> ones;
  uint32_t seed = 0;
  bool profile = false;
  bool tf32 = false;
  bool capture = true;
  bool memory_plans = true;
};

// Time per op type over the profiled steps (NodeProfiler: runtime/core/node_profiler.h).
class OpProfiler final : public NodeProfiler {
 public:
  explicit OpProfiler(Backend& backend) : backend_(backend) {}
  ~OpProfiler() override {
#ifdef AMPC_HAVE_CUDA
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
#endif
  }
  void Begin(const KernelInfo& node) override {
    spans_.push_back({node.node.op_type(), Mark(), 0});
  }
  void End(const KernelInfo&) override { spans_.back().end = Mark(); }

  // Milliseconds per op type, summed over every span so far.
  absl::StatusOr<std::map<std::string, double>> Totals() {
    AMPC_RETURN_IF_ERROR(backend_.Synchronize());
    std::map<std::string, double> totals;
    for (const Span& span : spans_) totals[span.op] += Elapsed(span.begin, span.end);
    return totals;
  }

 private:
  struct Span {
    std::string op;
    size_t begin, end;
  };
#ifdef AMPC_HAVE_CUDA
  bool OnDevice() const { return backend_.name() == "cuda"; }
#else
  bool OnDevice() const { return false; }
#endif
  size_t Mark() {
#ifdef AMPC_HAVE_CUDA
    if (OnDevice()) {
      cudaEvent_t event = nullptr;
      cudaEventCreate(&event);
      cudaEventRecord(event, static_cast<CudaBackend&>(backend_).stream());
      events_.push_back(event);
      return events_.size() - 1;
    }
#endif
    clock_.push_back(std::chrono::steady_clock::now());
    return clock_.size() - 1;
  }
  double Elapsed(size_t begin, size_t end) const {
#ifdef AMPC_HAVE_CUDA
    if (OnDevice()) {
      float ms = 0;
      cudaEventElapsedTime(&ms, events_[begin], events_[end]);
      return ms;
    }
#endif
    return std::chrono::duration<double, std::milli>(clock_[end] - clock_[begin]).count();
  }

  Backend& backend_;
  std::vector<Span> spans_;
  std::vector<std::chrono::steady_clock::time_point> clock_;
#ifdef AMPC_HAVE_CUDA
  std::vector<cudaEvent_t> events_;
#endif
};

// `"profile": {...}, "profiled_ms": T` for the JSON line: per step, every op type, largest first.
absl::StatusOr<std::string> Profile(TrainingSession& session, Backend& backend,
                                    const NamedTensors& batch) {
  constexpr int kSteps = 10;
  OpProfiler profiler(backend);
  session.set_profiler(&profiler);
  for (int i = 0; i < kSteps; ++i) {
    absl::StatusOr<StepResult> result = session.Step(batch, 1e-3f);
    if (!result.ok()) {
      session.set_profiler(nullptr);
      return result.status();
    }
  }
  session.set_profiler(nullptr);
  AMPC_ASSIGN_OR_RETURN(const auto totals, profiler.Totals());
  std::vector<std::pair<double, std::string>> ranked;
  double sum = 0;
  for (const auto& [op, ms] : totals) {
    ranked.emplace_back(ms / kSteps, op);
    sum += ms / kSteps;
  }
  std::sort(ranked.rbegin(), ranked.rend());
  std::string out = ", \"profile\": {";
  for (size_t i = 0; i < ranked.size(); ++i) {
    absl::StrAppendFormat(&out, "%s\"%s\": %.4f", i == 0 ? "" : ", ", ranked[i].second,
                          ranked[i].first);
  }
  absl::StrAppendFormat(&out, "}, \"profiled_ms\": %.4f", sum);
  return out;
}

absl::StatusOr<NamedTensors> RandomBatch(const TrainingSession& session, const Options& options) {
  std::mt19937 rng(options.seed);
  NamedTensors batch;
  for (const ValueSpec& spec : session.data_inputs()) {
    Shape shape;
    for (size_t d = 0; d < spec.dims.size(); ++d) {
      shape.push_back(d == 0 ? options.batch : spec.dims[d]);
      if (shape.back() < 0 && options.seq > 0) shape.back() = options.seq;
      if (shape.back() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("input '", spec.name,
                         "' has a symbolic dim after the batch; give a fixed shape or --seq"));
      }
    }
    Tensor t = Tensor::Host(spec.dtype, shape);
    const bool ones =
        std::find(options.ones.begin(), options.ones.end(), spec.name) != options.ones.end();
    if (ones && spec.dtype == DType::kInt64) {
      for (int64_t& v : t.span<int64_t>()) v = 1;
    } else if (ones && spec.dtype == DType::kFloat) {
      for (float& v : t.span<float>()) v = 1;
    } else if (spec.dtype == DType::kFloat) {
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

uint64_t Synchronisations(const Backend& backend) {
#ifdef AMPC_HAVE_CUDA
  if (backend.name() == "cuda") {
    return static_cast<const CudaBackend&>(backend).synchronisations();
  }
#endif
  (void)backend;
  return 0;
}

// S steps queued back to back (TrainingSession::Run, nothing read back), then one LastStep: the
// step time when the host waits for the device once per S steps; and the waits per step before
// that LastStep.
absl::Status QueuedSteps(TrainingSession& session, const Backend& backend,
                         const NamedTensors& batch, int steps, double& ms_per_step,
                         double& syncs_per_step) {
  const uint64_t syncs = Synchronisations(backend);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) AMPC_RETURN_IF_ERROR(session.Run(batch, 1e-3f));
  syncs_per_step = static_cast<double>(Synchronisations(backend) - syncs) / steps;
  AMPC_RETURN_IF_ERROR(session.LastStep().status());
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
  ms_per_step = took.count() / steps;
  return absl::OkStatus();
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
  }
  return out + "\"";
}

// The process's CPU time (all its threads), in milliseconds.
double CpuMs() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

double Mib(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

absl::Status Bench(const Options& options) {
  AMPC_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(options.model));
  AMPC_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                        CreateBackend(options.device, options.threads, options.tf32));
  AMPC_ASSIGN_OR_RETURN(
      std::unique_ptr<TrainingSession> session,
      TrainingSession::Create(std::move(loaded.model), DefaultRegistry(), *backend));
  session->set_capture(options.capture);
  backend->set_memory_plans(options.memory_plans);
  AMPC_ASSIGN_OR_RETURN(NamedTensors batch, RandomBatch(*session, options));
  std::vector<double> ms;
  int applied = 0;
  float first_loss = 0, last_loss = 0;
  uint64_t copies_before = 0;
  double cpu_before = 0;
  for (int i = 0; i < options.warmup + options.steps; ++i) {
    if (i == options.warmup) {
      copies_before = HostCopies(*backend);
      backend->ResetPeak();
      cpu_before = CpuMs();
    }
    const auto start = std::chrono::steady_clock::now();
    AMPC_ASSIGN_OR_RETURN(StepResult result, session->Step(batch, 1e-3f));
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    if (i == 0) first_loss = result.loss;
    last_loss = result.loss;
    if (i < options.warmup) continue;
    ms.push_back(took.count());
    applied += result.applied ? 1 : 0;
  }
  const double cpu_ms = CpuMs() - cpu_before;
  double wall_ms = 0;
  for (double t : ms) wall_ms += t;
  const double copies =
      static_cast<double>(HostCopies(*backend) - copies_before) / static_cast<double>(ms.size());
  const MemoryStats memory = backend->memory_stats();
  double unsynced = 0, syncs = 0, eager_unsynced = 0, eager_syncs = 0;
  AMPC_RETURN_IF_ERROR(QueuedSteps(*session, *backend, batch, options.steps, unsynced, syncs));
  const int64_t replayed = session->replayed_steps();
  const std::string capture_off = session->capture_off_reason();
  session->set_capture(false);
  AMPC_RETURN_IF_ERROR(
      QueuedSteps(*session, *backend, batch, options.steps, eager_unsynced, eager_syncs));
  std::string profile;
  if (options.profile) {
    AMPC_ASSIGN_OR_RETURN(profile, Profile(*session, *backend, batch));
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  const double median = n % 2 == 1 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  std::cout << absl::StrFormat(
      "{\"median_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, \"steps\": %d, \"device\": "
      "\"%s\", \"cpu_per_wall\": %.3f, \"applied\": %d, \"skipped\": %d, \"first_loss\": %.6g, "
      "\"last_loss\": %.6g, "
      "\"host_copies_per_step\": %.2f, \"unsynced_ms_per_step\": %.4f, \"syncs_per_step\": "
      "%.2f, \"eager_unsynced_ms_per_step\": %.4f, \"eager_syncs_per_step\": %.2f, "
      "\"replayed_steps\": %d, \"capture_off\": %s, \"peak_mib\": %.1f, \"held_mib\": %.1f%s}\n",
      median, ms.front(), ms.back(), static_cast<int>(n), backend->name(), cpu_ms / wall_ms,
      applied, static_cast<int>(n) - applied, first_loss, last_loss, copies, unsynced, syncs,
      eager_unsynced, eager_syncs, replayed, JsonString(capture_off), Mib(memory.peak_bytes),
      Mib(memory.live_bytes + memory.cached_bytes), profile);
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
    } else if (arg == "--seq" && has_value) {
      ok = absl::SimpleAtoi(argv[++i], &options.seq) && options.seq >= 1;
    } else if (arg == "--ones" && has_value) {
      options.ones.push_back(argv[++i]);
    } else if (arg == "--seed" && has_value) {
      ok = absl::SimpleAtoi(argv[++i], &options.seed);
    } else if (arg == "--profile") {
      options.profile = true;
    } else if (arg == "--tf32") {
      options.tf32 = true;
    } else if (arg == "--no-memory-plans") {
      options.memory_plans = false;
    } else if (arg == "--no-capture") {
      options.capture = false;
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
                 "[--warmup W] [--steps S] [--classes C] [--seed K] [--profile] [--tf32] "
                 "[--no-capture] [--no-memory-plans] [--seq L] [--ones NAME]\n";
    return 2;
  }
  if (absl::Status status = ampc::Bench(options); !status.ok()) {
    std::cerr << "ampc-bench-train: error: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
