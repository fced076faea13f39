// runtime/core/memory_plan.h on its own (fake pointers: the planner never dereferences them) and
// through the CPU backend: which run records, where buffers go, what falls back, and that
// training with plans gives the bits it gives without them.
#include "runtime/core/memory_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compiler/model_io.h"
#include "kernels/cpu/cpu_kernels.h"
#include "models/cnn.h"
#include "models/mlp.h"
#include "models/transformer.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/training_session.h"
#include "tests/support/subprocess.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;

// A fake allocator for the planner's fallbacks: distinct addresses far from the arena.
class Requests {
 public:
  explicit Requests(MemoryPlanner& planner) : planner_(planner) {}
  // A request the way BufferCache makes it: the arena's place, else a fresh address.
  char* Take(size_t bytes) {
    if (void* place = planner_.Take(bytes)) return static_cast<char*>(place);
    char* fresh = reinterpret_cast<char*>(next_);
    next_ += 1 << 20;
    planner_.Served(fresh);
    return fresh;
  }
  void Release(char* data) { planner_.Release(data); }

 private:
  MemoryPlanner& planner_;
  uintptr_t next_ = uintptr_t{1} << 40;
};

// a (1 KiB) lives while b (2 KiB) is made from it; a goes; c (1 KiB) is made from b; b goes;
// c is the run's output and outlives it.
std::vector<char*> RunChain(MemoryPlanner& planner, Requests& requests) {
  planner.BeginRun(7);
  char* a = requests.Take(1024);
  char* b = requests.Take(2048);
  requests.Release(a);
  char* c = requests.Take(1024);
  requests.Release(b);
  planner.EndRun();
  return {a, b, c};
}

TEST(MemoryPlanTest, TheSecondRunIsRecordedAndTheThirdServedFromTheArena) {
  MemoryPlanner planner;
  Requests requests(planner);
  alignas(256) static char arena[1 << 16];
  RunChain(planner, requests);  // warm-up: nothing recorded
  EXPECT_EQ(planner.needed_bytes(7), 0u);
  RunChain(planner, requests);                // recorded
  EXPECT_EQ(planner.needed_bytes(7), 3072u);  // a and b together; c is an output, not planned
  planner.SetArena(arena, sizeof(arena));
  const std::vector<char*> got = RunChain(planner, requests);
  for (int i : {0, 1}) {
    EXPECT_GE(got[i], arena) << i;
    EXPECT_LT(got[i], arena + 3072) << i;
  }
  EXPECT_TRUE(got[1] + 2048 <= got[0] || got[0] + 1024 <= got[1]);  // alive together
  EXPECT_TRUE(got[2] < arena || got[2] >= arena + sizeof(arena));   // the output
}

TEST(MemoryPlanTest, APlaceStillHeldIsNotGivenOutAgain) {
  MemoryPlanner planner;
  Requests requests(planner);
  alignas(256) static char arena[1 << 16];
  // x (4 KiB) dies before y (4 KiB) is made: the plan puts y where x was.
  auto run = [&](bool keep_x) {
    planner.BeginRun(1);
    char* x = requests.Take(4096);
    if (!keep_x) requests.Release(x);
    char* y = requests.Take(4096);
    requests.Release(y);
    if (keep_x) requests.Release(x);
    planner.EndRun();
    return std::pair(x, y);
  };
  run(false);
  run(false);
  EXPECT_EQ(planner.needed_bytes(1), 4096u);
  planner.SetArena(arena, sizeof(arena));
  const auto [x, y] = run(false);
  EXPECT_EQ(x, y);  // one place, one after the other
  EXPECT_EQ(x, arena);
  // Held longer this time: y must not land on x.
  const auto [x2, y2] = run(true);
  EXPECT_EQ(x2, arena);
  EXPECT_NE(y2, x2);
  EXPECT_TRUE(y2 < arena || y2 >= arena + sizeof(arena));
}

// The chain run twice (a warm-up, then recorded) and an arena in place.
class PlannedChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RunChain(planner, requests);
    RunChain(planner, requests);
    planner.SetArena(arena, sizeof(arena));
  }
  MemoryPlanner planner;
  Requests requests{planner};
  alignas(256) char arena[1 << 16];
};

TEST_F(PlannedChainTest, ARequestOfAnotherSizeEndsThePlanForTheRun) {
  planner.BeginRun(7);
  char* a = requests.Take(1024);
  char* odd = requests.Take(512);  // the recording had 2048 here
  char* c = requests.Take(1024);   // would be planned, but the order no longer matches
  EXPECT_EQ(a, arena + 2048);
  EXPECT_TRUE(odd < arena || odd >= arena + sizeof(arena));
  EXPECT_TRUE(c < arena || c >= arena + sizeof(arena));
  for (char* p : {a, odd, c}) requests.Release(p);
  planner.EndRun();
  // The next run follows the plan again.
  char* b = RunChain(planner, requests)[1];
  EXPECT_TRUE(b >= arena && b < arena + sizeof(arena));
}

// Requests that changed for good (two replays in a row leave the plan) are recorded again.
TEST_F(PlannedChainTest, APlaceLeftTwiceInARowIsRecordedAgain) {
  auto run = [&] {  // one request of 8 KiB, freed within the run
    planner.BeginRun(7);
    char* p = requests.Take(8192);
    requests.Release(p);
    planner.EndRun();
    return p;
  };
  run();  // leaves the plan: 8192, not 1024
  EXPECT_EQ(planner.needed_bytes(7), 3072u);
  run();  // again: the plan goes
  EXPECT_EQ(planner.needed_bytes(7), 0u);
  run();  // recorded
  EXPECT_EQ(planner.needed_bytes(7), 8192u);
  planner.SetArena(arena, sizeof(arena));
  EXPECT_EQ(run(), arena);
}

TEST_F(PlannedChainTest, AnArenaBufferHeldPastItsRunKeepsTheNextRunOffTheArena) {
  planner.BeginRun(7);
  char* a = requests.Take(1024);  // kept by the caller beyond the run
  char* b = requests.Take(2048);
  char* c = requests.Take(1024);
  requests.Release(b);
  planner.EndRun();
  EXPECT_FALSE(planner.arena_free());
  const std::vector<char*> next = RunChain(planner, requests);
  for (char* p : next) EXPECT_TRUE(p < arena || p >= arena + sizeof(arena));
  requests.Release(a);
  requests.Release(c);
  EXPECT_TRUE(planner.arena_free());
}

TEST(MemoryPlanTest, OtherKeysAndNestedRunsHaveTheirOwnPlans) {
  MemoryPlanner planner;
  Requests requests(planner);
  RunChain(planner, requests);
  planner.BeginRun(9);  // another graph or shapes: its first run, not recorded
  planner.BeginRun(7);  // nested: part of run 9, not run 7's second
  requests.Release(requests.Take(1 << 20));
  planner.EndRun();
  planner.EndRun();
  EXPECT_EQ(planner.needed_bytes(7), 0u);
  EXPECT_EQ(planner.needed_bytes(9), 0u);
  RunChain(planner, requests);  // run 7's second
  EXPECT_EQ(planner.needed_bytes(7), 3072u);
  EXPECT_EQ(planner.needed_bytes(9), 0u);
}

// Through the CPU backend: the counters come back to where they were after each run, the arena
// is allocated for the run that needs it (the cached buffers it replaces are freed), and
// nothing is planned with plans off.
TEST(MemoryPlanTest, TheCpuBackendsCountersFollowThePlans) {
  CpuBackend cpu(1);
  auto run = [&](uint64_t key) {
    cpu.BeginRun(key);
    {
      auto a = cpu.Allocate(1000);
      auto b = cpu.Allocate(5000);
      a = nullptr;
      auto c = cpu.Allocate(3000);
    }
    cpu.EndRun();
  };
  for (int i = 0; i < 4; ++i) run(3);
  MemoryStats stats = cpu.memory_stats();
  EXPECT_EQ(stats.live_bytes, 0u);
  EXPECT_EQ(stats.planned, 6u);  // runs 3 and 4, three requests each
  const uint64_t held = stats.cached_bytes;
  EXPECT_LE(held, BufferCache::Capacity(5000) + BufferCache::Capacity(3000) + 512);
  run(3);
  EXPECT_EQ(cpu.memory_stats().cached_bytes, held);  // nothing more allocated
  EXPECT_EQ(cpu.memory_stats().planned, 9u);
  cpu.set_memory_plans(false);
  run(3);
  EXPECT_EQ(cpu.memory_stats().planned, 9u);  // none more
  EXPECT_EQ(cpu.memory_stats().live_bytes, 0u);
}

// `model` compiled by ampc --train in `dtype` with Adam.
onnx::ModelProto Compiled(const onnx::ModelProto& model, const std::string& dtype) {
  const fs::path dir = fs::path(::testing::TempDir()) / "memory_plan_test";
  fs::create_directories(dir);
  const std::string in = (dir / "m.onnx").string(), out = (dir / "m.train.onnx").string();
  std::ofstream(in, std::ios::binary) << model.SerializeAsString();
  auto r = testing::RunProcess({AMPC_BINARY, in, "-o", out, "--train", "--loss", "loss", "--dtype",
                                dtype, "--optimizer", "adam", "--lr", "0.001"},
                               dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<LoadedModel> loaded = LoadModel(out);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? loaded->model : onnx::ModelProto();
}

// A batch of `n` for the session's data inputs from `seed`: floats in [0, 1), ints in [0, 10).
NamedTensors Batch(const TrainingSession& session, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  NamedTensors batch;
  for (const ValueSpec& spec : session.data_inputs()) {
    Shape shape = {n};
    for (size_t d = 1; d < spec.dims.size(); ++d) shape.push_back(spec.dims[d]);
    Tensor t = Tensor::Host(spec.dtype, shape);
    for (int64_t i = 0; i < t.size(); ++i) {
      if (spec.dtype == DType::kInt64) {
        t.data<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
      } else {
        t.data<float>()[i] = std::uniform_real_distribution<float>(0, 1)(rng);
      }
    }
    batch[spec.name] = std::move(t);
  }
  return batch;
}

// Training steps with memory plans give the bits they give without: the bundled MLP, CNN and
// transformer in FP16 with Adam, five steps each on the same batches, every loss and parameter
// compared; with plans on, at least 90% of the requests from the third step on (93-99% when
// written) are served from the arena.
TEST(MemoryPlanTest, TrainingWithPlansIsBitIdenticalAndUsesTheArena) {
  const std::map<std::string, onnx::ModelProto> models = {
      {"mlp", models::BuildMlp({})},
      {"cnn", *models::BuildCnn({})},
      {"transformer", *models::BuildTransformer({})}};
  for (const auto& [name, forward] : models) {
    SCOPED_TRACE(name);
    const onnx::ModelProto model = Compiled(forward, "fp16");
    std::map<bool, std::vector<float>> losses;
    std::map<bool, std::string> parameters;
    for (const bool plans : {false, true}) {
      CpuBackend cpu(2);
      cpu.set_memory_plans(plans);
      auto session = TrainingSession::Create(model, DefaultRegistry(), cpu);
      ASSERT_TRUE(session.ok()) << session.status();
      MemoryStats before;
      for (uint32_t step = 0; step < 5; ++step) {
        if (step == 2) before = cpu.memory_stats();  // from the first planned step on
        auto result = (*session)->Step(Batch(**session, 8, step), 0.001f);
        ASSERT_TRUE(result.ok()) << result.status();
        losses[plans].push_back(result->loss);
      }
      const MemoryStats after = cpu.memory_stats();
      const double served = static_cast<double>(after.planned - before.planned) /
                            static_cast<double>(after.allocations - before.allocations);
      // All but the few requests that outlive a step (its outputs) or vary with the data.
      if (plans) {
        EXPECT_GE(served, 0.9);
      } else {
        EXPECT_EQ(served, 0.0);
      }
      auto checkpoint = (*session)->Checkpoint();
      ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
      parameters[plans] = checkpoint->graph().SerializeAsString();
    }
    EXPECT_EQ(losses[true], losses[false]);
    EXPECT_TRUE(parameters[true] == parameters[false]);
  }
}

}  // namespace
}  // namespace ampc
