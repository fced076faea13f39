// TrainingSession's step capture (set_capture) on a device whose work is deferred like a GPU
// stream's: its kernels queue closures, waiting (Synchronize, a copy to the host) runs the queue,
// a capture records the closures instead of queueing them, and a replay queues them again. So
// the session's side of capture runs without a GPU: the fixed input buffers refilled each step,
// the state alternating between two buffer sets (a state value passed through as a view
// included), the choice of graph by the state's buffers, the outputs read after a replay.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/kernel_registry.h"
#include "runtime/training_session.h"
#include "tests/support/tensors.h"
#include "tests/support/training_models.h"

namespace ampc {
namespace {

class FakeStream final : public Backend {
 public:
  ~FakeStream() override {
    Synchronize().IgnoreError();
    for (char* data : pool_) delete[] data;
  }
  const std::string& name() const override { return name_; }
  absl::StatusOr<std::shared_ptr<Buffer>> Allocate(size_t bytes) override {
    char* data = new char[bytes + 1];
    if (capturing_) pool_.insert(data);  // a graph may use it at every replay
    return std::make_shared<Buffer>(data, bytes, this);
  }
  absl::Status CopyFromHost(const void* host, Tensor& tensor) override {
    auto copy = std::make_shared<std::string>(static_cast<const char*>(host), tensor.bytes());
    void* to = tensor.raw();
    Queue([copy, to] { std::memcpy(to, copy->data(), copy->size()); });
    return absl::OkStatus();
  }
  absl::Status CopyToHost(const Tensor& tensor, void* host) override {
    AMPC_RETURN_IF_ERROR(Synchronize());
    std::memcpy(host, tensor.raw(), tensor.bytes());
    return absl::OkStatus();
  }
  absl::Status CopyAllToHost(std::span<const Tensor* const> tensors,
                             std::span<void* const> hosts) override {
    AMPC_RETURN_IF_ERROR(Synchronize());
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::memcpy(hosts[i], tensors[i]->raw(), tensors[i]->bytes());
    }
    return absl::OkStatus();
  }
  absl::Status Copy(const Tensor& from, Tensor& to) override {
    const void* source = from.raw();
    void* target = to.raw();
    const size_t bytes = from.bytes();
    Queue([source, target, bytes] { std::memmove(target, source, bytes); });
    return absl::OkStatus();
  }
  absl::Status Synchronize() override {
    if (capturing_) return absl::FailedPreconditionError("waits while capturing");
    ++waits;
    for (auto& work : queue_) work();
    queue_.clear();
    return absl::OkStatus();
  }
  bool CanCapture() const override { return true; }
  absl::Status BeginCapture() override {
    capturing_ = true;
    recorded_.clear();
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<CapturedWork>> EndCapture() override;
  void AbortCapture() override { capturing_ = false; }
  MemoryStats memory_stats() const override { return {}; }
  void ResetPeak() override {}

  void Queue(std::function<void()> work) {
    (capturing_ ? recorded_ : queue_).push_back(std::move(work));
  }
  int captures = 0;
  int waits = 0;

 protected:
  // Freed after the work queued so far (which may still use it), or never when a graph may.
  void Release(void* data, size_t) override {
    char* bytes = static_cast<char*>(data);
    if (capturing_) pool_.insert(bytes);
    if (pool_.contains(bytes)) return;
    queue_.push_back([bytes] { delete[] bytes; });
  }

 private:
  class Graph final : public CapturedWork {
   public:
    Graph(FakeStream& stream, std::vector<std::function<void()>> work)
        : stream_(stream), work_(std::move(work)) {}
    absl::Status Replay() override {
      for (const auto& work : work_) stream_.Queue(work);
      return absl::OkStatus();
    }

   private:
    FakeStream& stream_;
    std::vector<std::function<void()>> work_;
  };

  const std::string name_ = "fake";
  bool capturing_ = false;
  std::vector<std::function<void()>> queue_, recorded_;
  std::set<char*> pool_;
};

absl::StatusOr<std::unique_ptr<CapturedWork>> FakeStream::EndCapture() {
  capturing_ = false;
  ++captures;
  return std::unique_ptr<CapturedWork>(new Graph(*this, std::move(recorded_)));
}

FakeStream& StreamOf(KernelContext& context) { return static_cast<FakeStream&>(context.backend()); }

// y = a op b (b: same shape, or one element), queued.
template <typename Op, typename T>
absl::Status BinaryOf(KernelContext& context) {
  const Tensor &a = context.in(0), &b = context.in(1);
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, a.shape()));
  const T *pa = a.data<T>(), *pb = b.data<T>();
  T* py = y->data<T>();
  const int64_t n = a.size();
  const bool scalar = b.size() == 1;
  StreamOf(context).Queue([=] {
    for (int64_t i = 0; i < n; ++i) py[i] = Op()(pa[i], pb[scalar ? 0 : i]);
  });
  return absl::OkStatus();
}

// Binary for float or int64 operands.
template <template <typename> typename Op>
absl::Status Binary(KernelContext& context) {
  return context.in(0).dtype() == DType::kInt64 ? BinaryOf<Op<int64_t>, int64_t>(context)
                                                : BinaryOf<Op<float>, float>(context);
}

absl::Status ReduceSum(KernelContext& context) {
  const Tensor& a = context.in(0);
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, {}));
  const float* pa = a.data<float>();
  float* py = y->data<float>();
  const int64_t n = a.size();
  StreamOf(context).Queue([=] {
    float sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += pa[i];
    *py = sum;
  });
  return absl::OkStatus();
}

absl::Status FakeLearningRate(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(Tensor * rate, context.Output(0, {}));
  const double* words = context.in(0).data<double>();
  const int64_t* step = context.in(1).data<int64_t>();
  float* out = rate->data<float>();
  StreamOf(context).Queue([=] { *out = DecodedLearningRate(words, *step); });
  return absl::OkStatus();
}

absl::Status Identity(KernelContext& context) {
  context.SetOutput(0, context.in(0));  // a view: no work
  return absl::OkStatus();
}

KernelRegistry StreamRegistry() {
  KernelRegistry r;
  r.Register("fake", "", "Add", {}, Binary<std::plus>);
  r.Register("fake", "", "Mul", {}, Binary<std::multiplies>);
  r.Register("fake", "ai.ampc.runtime", "LearningRate", {}, FakeLearningRate);
  r.Register("fake", "", "ReduceSum", {}, ReduceSum);
  r.Register("fake", "", "Identity", {}, Identity, {.anywhere = {0}});
  return r;
}

// w += lr * x each step; loss = sum(w); k is passed through unchanged (a view of the state).
// With `counting`, the state also counts the steps in ampc.step, so the session computes the
// learning rate on the device from the schedule and the counter.
onnx::ModelProto Model(bool counting = false) {
  constexpr char kHeader[] = R"(<ir_version: 8, opset_import: ["" : 17]>)";
  return testing::AssembleTrainingModel(
      absl::StrCat(kHeader, R"(
inference (float[3] x) => (float[3] y)
<float[3] w = {1, 2, 3}>
{
  y = Add(x, w)
}
)"),
      absl::StrCat(kHeader, "init () => (float k", counting ? ", int64 ampc__step" : "", R"() {
  k = Constant <value_float = 7.0> ()
)",
                   counting ? "  ampc__step = Constant <value_int = 0> ()\n" : "", "}\n"),
      absl::StrCat(kHeader, R"(
step (float[3] x, float ampc__lr) => (float loss, float[3] w__ampc__next, float k__ampc__next)",
                   counting ? ", int64 ampc__step__ampc__next" : "", R"() {
  d = Mul(x, ampc__lr)
  w__ampc__next = Add(w, d)
  loss = ReduceSum <keepdims = 0> (w__ampc__next)
  k__ampc__next = Identity(k)
)",
                   counting ? R"(  one = Constant <value_int = 1> ()
  ampc__step__ampc__next = Add(ampc__step, one)
)"
                            : "",
                   "}\n"));
}

TEST(TrainingCaptureTest, ReplaysFollowTheStepsOnADeferredStream) {
  const KernelRegistry registry = StreamRegistry();
  FakeStream stream;
  auto session = TrainingSession::Create(Model(), registry, stream);
  ASSERT_TRUE(session.ok()) << session.status();
  (*session)->set_capture(true);
  std::vector<float> w = {1, 2, 3};
  for (int step = 0; step < 9; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const float lr = 0.5f * static_cast<float>(step + 1);
    const std::vector<float> x = {static_cast<float>(step), -1.0f, 0.25f};
    ASSERT_TRUE((*session)->Run({{"x", testing::Floats({3}, x)}}, lr).ok());
    for (int i = 0; i < 3; ++i) w[i] += x[i] * lr;
    if (step % 3 == 1) continue;  // two steps queued before a read now and then
    auto result = (*session)->LastStep();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->loss, w[0] + w[1] + w[2]);
    auto state = (*session)->State("w");
    ASSERT_TRUE(state.ok()) << state.status();
    EXPECT_EQ(testing::Values<float>(*state), w);
    auto k = (*session)->State("k");
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(testing::Values<float>(*k), std::vector<float>{7});
  }
  EXPECT_EQ((*session)->capture_off_reason(), "");
  EXPECT_EQ((*session)->replayed_steps(), 7);  // two eager steps, then replays
  EXPECT_EQ(stream.captures, 2);               // one graph per buffer set
}

// A trainer that keeps the losses and reads back once at the end: nine steps of a warm-up
// schedule, captured after two, never wait for the device; the one read gives every step's loss
// and the rate of the last, each as the host computes them.
TEST(TrainingCaptureTest, ScheduledStepsKeepTheirLossesWithoutWaiting) {
  const KernelRegistry registry = StreamRegistry();
  FakeStream stream;
  auto session = TrainingSession::Create(Model(/*counting=*/true), registry, stream);
  ASSERT_TRUE(session.ok()) << session.status();
  (*session)->set_capture(true);
  (*session)->set_keep_losses(true);
  ScheduledRate rate{0.8, {}};
  rate.schedule.type = LrSchedule::Type::kLinearWarmup;
  rate.schedule.warmup_steps = 4;
  std::vector<float> w = {1, 2, 3}, losses;
  float lr = 0;
  const int waits = stream.waits;
  for (int step = 0; step < 9; ++step) {
    const std::vector<float> x = {static_cast<float>(step), -1.0f, 0.25f};
    ASSERT_TRUE((*session)->Run({{"x", testing::Floats({3}, x)}}, rate).ok()) << "step " << step;
    lr = static_cast<float>(ScheduledLearningRate(rate.schedule, rate.base, step));
    for (int i = 0; i < 3; ++i) w[i] += x[i] * lr;
    losses.push_back(w[0] + w[1] + w[2]);
  }
  EXPECT_EQ(stream.waits, waits);
  auto taken = (*session)->TakeSteps();
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(stream.waits, waits + 1);
  EXPECT_EQ(taken->losses, losses);
  EXPECT_EQ(taken->last.loss, losses.back());
  EXPECT_EQ(taken->last.lr, lr);
  EXPECT_EQ(lr, 0.8f);
  EXPECT_EQ(taken->last.step, 9);
  EXPECT_EQ((*session)->replayed_steps(), 7);
  taken = (*session)->TakeSteps();  // nothing kept since
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_TRUE(taken->losses.empty());
  EXPECT_EQ(taken->last.step, 9);
}

}  // namespace
}  // namespace ampc
