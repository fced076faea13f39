// kernels/cuda/scaler.h on the GPU against scaler_math.h evaluated on the host (which
// cuda_scaler_math_test checks against the CPU kernels): outputs bit for bit, the norm within
// one float ulp of a sequential double sum (the GPU sums in another fixed order) and bitwise
// equal from run to run. Skips where the CUDA backend is not built or no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/numerics/half.h"
#include "kernels/numerics/scaler_math.h"
#include "tests/support/tensors.h"

#ifdef AMPC_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda/scaler.h"
#include "runtime/core/cuda_device.h"
#endif

namespace ampc {
namespace {

#ifdef AMPC_HAVE_CUDA
namespace math = scaler_math;
using cuda::ElemType;
using testing::PseudoFloats;

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

// Device memory holding a copy of `bytes`; Download() reads it back.
class DeviceBytes {
 public:
  explicit DeviceBytes(size_t n) : size_(n) {
    EXPECT_EQ(cudaMalloc(&data_, n == 0 ? 1 : n), cudaSuccess);
  }
  template <typename T>
  explicit DeviceBytes(const std::vector<T>& values) : DeviceBytes(values.size() * sizeof(T)) {
    if (!values.empty()) {
      EXPECT_EQ(cudaMemcpy(data_, values.data(), size_, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  ~DeviceBytes() { cudaFree(data_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  template <typename T>
  std::vector<T> Download() const {
    std::vector<T> values(size_ / sizeof(T));
    EXPECT_EQ(cudaMemcpy(values.data(), data_, values.size() * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return values;
  }

 private:
  void* data_ = nullptr;
  size_t size_;
};

// A gradient on the host in its storage type, with the kernels' view of each element.
struct HostGradient {
  ElemType type;
  std::vector<uint8_t> bytes;
  int64_t count;

  float Widened(int64_t i) const {
    switch (type) {
      case ElemType::kFloat16:
        return HalfToFloat(Get<uint16_t>(i));
      case ElemType::kBFloat16:
        return BFloat16ToFloat(Get<uint16_t>(i));
      case ElemType::kDouble:
        return math::ToFloat(Get<double>(i));
      default:
        return Get<float>(i);
    }
  }
  void Set(int64_t i, float value) {
    switch (type) {
      case ElemType::kFloat16:
        return Put(i, FloatToHalf(value));
      case ElemType::kBFloat16:
        return Put(i, FloatToBFloat16(value));
      case ElemType::kDouble:
        return Put(i, static_cast<double>(value));
      default:
        return Put(i, value);
    }
  }
  template <typename T>
  T Get(int64_t i) const {
    T x;
    std::memcpy(&x, &bytes[i * sizeof(T)], sizeof(T));
    return x;
  }
  template <typename T>
  void Put(int64_t i, T x) {
    std::memcpy(&bytes[i * sizeof(T)], &x, sizeof(T));
  }
};

HostGradient MakeGradient(ElemType type, int64_t count, uint32_t seed) {
  HostGradient g{type, std::vector<uint8_t>(count * cuda::ElemSize(type)), count};
  for (int64_t i = 0; i < count; ++i) {
    seed = seed * 1664525u + 1013904223u;
    g.Set(i, -2.0f + 4.0f * static_cast<float>(seed >> 8) / static_cast<float>(1u << 24));
  }
  return g;
}

void ExpectBits(const std::vector<float>& got, const std::vector<float>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(Bits(got[i]), Bits(want[i]))
        << what << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

class CudaScalerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU found";
  }
};

// ---- CheckUnscaleClip ----

// 150 gradients (two launch tables) of every type, sizes around the 8192-element chunk.
std::vector<HostGradient> ManyGradients() {
  const ElemType types[] = {ElemType::kFloat16, ElemType::kBFloat16, ElemType::kFloat,
                            ElemType::kDouble};
  const int64_t sizes[] = {0, 1, 7, 8191, 8192, 8193, 20000};
  std::vector<HostGradient> grads;
  for (uint32_t i = 0; i < 150; ++i) grads.push_back(MakeGradient(types[i % 4], sizes[i % 7], i));
  return grads;
}

struct GpuUnscale {
  std::vector<std::vector<float>> u;
  float norm = 0;
  bool found = false;
};

GpuUnscale RunCheckUnscaleClip(const std::vector<HostGradient>& grads, float scale,
                               float max_norm) {
  std::vector<std::unique_ptr<DeviceBytes>> in, out;
  std::vector<cuda::GradientRef> refs;
  std::vector<float*> outs;
  for (const HostGradient& g : grads) {
    in.push_back(std::make_unique<DeviceBytes>(g.bytes));
    out.push_back(std::make_unique<DeviceBytes>(g.count * sizeof(float)));
    refs.push_back({in.back()->as<void>(), g.count, g.type});
    outs.push_back(out.back()->as<float>());
  }
  DeviceBytes d_scale(std::vector<float>{scale}), d_norm(sizeof(float)), d_found(1);
  DeviceBytes scratch(cuda::UnscaleScratchBytes(refs));
  EXPECT_EQ(cuda::CheckUnscaleClip(refs, outs, d_scale.as<float>(), max_norm, d_found.as<bool>(),
                                   d_norm.as<float>(), scratch.as<void>(),
                                   cuda::UnscaleScratchBytes(refs), nullptr),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  GpuUnscale r;
  for (const auto& o : out) r.u.push_back(o->Download<float>());
  for (size_t i = 0; i < grads.size(); ++i) r.u[i].resize(grads[i].count);
  r.norm = d_norm.Download<float>()[0];
  r.found = d_found.Download<uint8_t>()[0] != 0;
  return r;
}

TEST_F(CudaScalerTest, UnscaleMatchesScalerMathAndTheNormIsDeterministic) {
  const std::vector<HostGradient> grads = ManyGradients();
  const float scale = 3.0f, inv = math::InverseScale(scale);
  const GpuUnscale r = RunCheckUnscaleClip(grads, scale, 0.0f);
  double sum = 0.0;
  for (size_t t = 0; t < grads.size(); ++t) {
    std::vector<float> want(grads[t].count);
    for (int64_t i = 0; i < grads[t].count; ++i) {
      want[i] = math::Unscale(grads[t].Widened(i), inv);
      sum += math::Square(want[i]);
    }
    ExpectBits(r.u[t], want, "gradient " + std::to_string(t));
  }
  EXPECT_FALSE(r.found);
  const float want_norm = math::NormOf(sum);
  EXPECT_LE(std::abs(r.norm - want_norm), std::ldexp(want_norm, -23)) << r.norm << " " << want_norm;
  EXPECT_EQ(Bits(RunCheckUnscaleClip(grads, scale, 0.0f).norm), Bits(r.norm));
}

TEST_F(CudaScalerTest, ClipMultipliesByTheCoefficientOfTheGpuNorm) {
  const std::vector<HostGradient> grads = ManyGradients();
  const float scale = 1024.0f, inv = math::InverseScale(scale), max_norm = 0.01f;
  const GpuUnscale r = RunCheckUnscaleClip(grads, scale, max_norm);
  const float coef = math::ClipCoefficient(r.norm, max_norm);
  ASSERT_LT(coef, 1.0f);
  for (size_t t = 0; t < grads.size(); ++t) {
    std::vector<float> want(grads[t].count);
    for (int64_t i = 0; i < grads[t].count; ++i) {
      want[i] = rounded::Multiply(math::Unscale(grads[t].Widened(i), inv), coef);
    }
    ExpectBits(r.u[t], want, "gradient " + std::to_string(t));
  }
}

TEST_F(CudaScalerTest, OneNonFiniteElementAnywhereIsFound) {
  std::vector<HostGradient> grads = ManyGradients();
  for (size_t t : {size_t{3}, size_t{76}, size_t{148}}) {  // both tables; an FP64 one
    for (int64_t position : {int64_t{0}, grads[t].count - 1}) {
      for (float bad : {INFINITY, -INFINITY, NAN}) {
        grads[t].Set(position, bad);
        EXPECT_TRUE(RunCheckUnscaleClip(grads, 1.0f, 0.0f).found)
            << "gradient " << t << " position " << position << " value " << bad;
        grads[t].Set(position, 0.5f);
      }
    }
  }
  EXPECT_FALSE(RunCheckUnscaleClip(grads, 1.0f, 0.0f).found);
}

TEST_F(CudaScalerTest, CheckOnlyWritesNoGradients) {
  std::vector<HostGradient> grads = ManyGradients();
  grads[10].Set(5, INFINITY);
  std::vector<std::unique_ptr<DeviceBytes>> in;
  std::vector<cuda::GradientRef> refs;
  for (const HostGradient& g : grads) {
    in.push_back(std::make_unique<DeviceBytes>(g.bytes));
    refs.push_back({in.back()->as<void>(), g.count, g.type});
  }
  DeviceBytes d_found(1), scratch(cuda::UnscaleScratchBytes(refs));
  ASSERT_EQ(cuda::CheckUnscaleClip(refs, {}, nullptr, 0.0f, d_found.as<bool>(), nullptr,
                                   scratch.as<void>(), cuda::UnscaleScratchBytes(refs), nullptr),
            cudaSuccess);
  EXPECT_EQ(d_found.Download<uint8_t>()[0], 1);
  // Clipping needs outputs; too little scratch is refused before anything runs.
  EXPECT_EQ(cuda::CheckUnscaleClip(refs, {}, nullptr, 1.0f, d_found.as<bool>(), nullptr,
                                   scratch.as<void>(), cuda::UnscaleScratchBytes(refs), nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::CheckUnscaleClip(refs, {}, nullptr, 0.0f, d_found.as<bool>(), nullptr,
                                   scratch.as<void>(), 16, nullptr),
            cudaErrorInvalidValue);
}

// ---- UpdateScale ----

TEST_F(CudaScalerTest, UpdateScaleMatchesScalerMath) {
  std::vector<math::ScaleAttrs> configs(4);
  configs[1].growth_interval = 3;
  configs[1].max_scale = 3000.0f;
  configs[2].hysteresis = 3;
  configs[2].min_scale = 1.0f;
  configs[3].dynamic = false;
  const math::ScaleState states[] = {{1024.0f, 2, 1},
                                     {2048.0f, 1999, 1},
                                     {std::ldexp(1.0f, 127), 2, 1},
                                     {1.17549435e-38f, 0, 1},
                                     {1.5f, 0, 2}};
  for (const math::ScaleAttrs& c : configs) {
    for (const math::ScaleState& s : states) {
      for (int flags = 0; flags < 4; ++flags) {
        const bool found = flags & 1, loss_bad = flags & 2;
        DeviceBytes scale(std::vector<float>{s.scale});
        DeviceBytes tracker(std::vector<int64_t>{s.tracker});
        DeviceBytes hysteresis(std::vector<int64_t>{s.hysteresis_left});
        DeviceBytes d_found(std::vector<uint8_t>{found}), d_bad(std::vector<uint8_t>{loss_bad});
        // In place, as a training step updates its state.
        ASSERT_EQ(
            cuda::UpdateScale(scale.as<float>(), tracker.as<int64_t>(), hysteresis.as<int64_t>(),
                              d_found.as<bool>(), d_bad.as<bool>(), c, scale.as<float>(),
                              tracker.as<int64_t>(), hysteresis.as<int64_t>(), nullptr),
            cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const math::ScaleState want = math::UpdateScale(s, found, loss_bad, c);
        EXPECT_EQ(Bits(scale.Download<float>()[0]), Bits(want.scale));
        EXPECT_EQ(tracker.Download<int64_t>()[0], want.tracker);
        EXPECT_EQ(hysteresis.Download<int64_t>()[0], want.hysteresis_left);
      }
    }
  }
}

// ---- SGD and Adam ----

// Parameters of several sizes (one tensor more than a launch table holds), gradients of every
// optimizer type.
constexpr int kOptimizerTensors = 65;
int64_t ParamSize(int i) { return (i * 4099) % 20011 + 1; }
ElemType GradType(int i) {
  const ElemType types[] = {ElemType::kFloat, ElemType::kFloat16, ElemType::kBFloat16};
  return types[i % 3];
}

TEST_F(CudaScalerTest, SgdMatchesScalerMathSkipsAndUpdatesInPlace) {
  math::SgdAttrs attrs;
  attrs.momentum = 0.9f;
  attrs.dampening = 0.1f;
  attrs.weight_decay = 5e-4f;
  attrs.nesterov = true;
  for (bool skip : {false, true}) {
    for (bool first : {false, true}) {
      std::vector<std::vector<float>> p, buf;
      std::vector<HostGradient> g;
      std::vector<std::unique_ptr<DeviceBytes>> memory;
      std::vector<cuda::SgdTensor> tensors;
      for (int i = 0; i < kOptimizerTensors; ++i) {
        p.push_back(PseudoFloats(ParamSize(i), 10 + i, -1.0f, 1.0f));
        buf.push_back(PseudoFloats(ParamSize(i), 20 + i, -0.5f, 0.5f));
        g.push_back(MakeGradient(GradType(i), ParamSize(i), 30 + i));
        DeviceBytes* dp = memory.emplace_back(std::make_unique<DeviceBytes>(p.back())).get();
        DeviceBytes* dbuf = memory.emplace_back(std::make_unique<DeviceBytes>(buf.back())).get();
        DeviceBytes* dg = memory.emplace_back(std::make_unique<DeviceBytes>(g.back().bytes)).get();
        tensors.push_back({dp->as<float>(), dg->as<void>(), GradType(i), dbuf->as<float>(),
                           dp->as<float>(), dbuf->as<float>(), ParamSize(i)});
      }
      const float lr = 0.03f;
      DeviceBytes d_skip(std::vector<uint8_t>{skip}), d_first(std::vector<uint8_t>{first});
      DeviceBytes d_lr(std::vector<float>{lr});
      ASSERT_EQ(cuda::MultiTensorSgd(tensors, attrs, d_skip.as<bool>(), d_lr.as<float>(),
                                     d_first.as<bool>(), nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const math::SgdScalars s = math::SgdScalarsFor(attrs, lr, first);
      for (int i = 0; i < kOptimizerTensors; ++i) {
        std::vector<float> want_p = p[i], want_buf = buf[i];
        if (!skip) {
          for (int64_t k = 0; k < ParamSize(i); ++k) {
            want_p[k] = math::SgdElement(s, p[i][k], g[i].Widened(k), buf[i][k], &want_buf[k]);
          }
        }
        const std::string what = "tensor " + std::to_string(i) + " skip " + std::to_string(skip) +
                                 " first " + std::to_string(first);
        ExpectBits(memory[3 * i]->Download<float>(), want_p, what + " param");
        ExpectBits(memory[3 * i + 1]->Download<float>(), want_buf, what + " buf");
      }
    }
  }
}

TEST_F(CudaScalerTest, AdamMatchesScalerMathAndSkipsBitwise) {
  math::AdamAttrs attrs;
  attrs.weight_decay = 0.01f;
  attrs.decoupled = true;
  for (int64_t step : {int64_t{1}, int64_t{1000}, int64_t{0}}) {  // 0: refused, a skip
    for (bool skip : {false, true}) {
      std::vector<std::vector<float>> p, m, v;
      std::vector<HostGradient> g;
      std::vector<std::unique_ptr<DeviceBytes>> memory;  // p, m, v, g, p_out, m_out, v_out
      std::vector<cuda::AdamTensor> tensors;
      for (int i = 0; i < kOptimizerTensors; ++i) {
        p.push_back(PseudoFloats(ParamSize(i), 40 + i, -1.0f, 1.0f));
        m.push_back(PseudoFloats(ParamSize(i), 50 + i, -0.1f, 0.1f));
        v.push_back(PseudoFloats(ParamSize(i), 60 + i, 0.0f, 0.01f));
        g.push_back(MakeGradient(GradType(i), ParamSize(i), 70 + i));
        for (const auto* x : {&p.back(), &m.back(), &v.back()}) {
          memory.push_back(std::make_unique<DeviceBytes>(*x));
        }
        memory.push_back(std::make_unique<DeviceBytes>(g.back().bytes));
        for (int k = 0; k < 3; ++k) {
          memory.push_back(std::make_unique<DeviceBytes>(ParamSize(i) * sizeof(float)));
        }
        const auto* d = &memory[memory.size() - 7];
        tensors.push_back({d[0]->as<float>(), d[3]->as<void>(), GradType(i), d[1]->as<float>(),
                           d[2]->as<float>(), d[4]->as<float>(), d[5]->as<float>(),
                           d[6]->as<float>(), ParamSize(i)});
      }
      const float lr = 1e-3f;
      DeviceBytes d_skip(std::vector<uint8_t>{skip}), d_step(std::vector<int64_t>{step});
      DeviceBytes d_lr(std::vector<float>{lr});
      ASSERT_EQ(cuda::MultiTensorAdam(tensors, attrs, d_skip.as<bool>(), d_lr.as<float>(),
                                      d_step.as<int64_t>(), nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const bool applied = !skip && step >= 1;
      const math::AdamScalars s = math::AdamScalarsFor(attrs, lr, applied ? step : 1);
      for (int i = 0; i < kOptimizerTensors; ++i) {
        std::vector<float> want_p = p[i], want_m = m[i], want_v = v[i];
        if (applied) {
          for (int64_t k = 0; k < ParamSize(i); ++k) {
            const math::AdamElementResult r =
                math::AdamElement(s, p[i][k], g[i].Widened(k), m[i][k], v[i][k]);
            want_p[k] = r.p;
            want_m[k] = r.m;
            want_v[k] = r.v;
          }
        }
        const std::string what = "tensor " + std::to_string(i) + " step " + std::to_string(step) +
                                 " skip " + std::to_string(skip);
        ExpectBits(memory[7 * i + 4]->Download<float>(), want_p, what + " param");
        ExpectBits(memory[7 * i + 5]->Download<float>(), want_m, what + " exp_avg");
        ExpectBits(memory[7 * i + 6]->Download<float>(), want_v, what + " exp_avg_sq");
      }
    }
  }
}

#else
TEST(CudaScalerTest, NotBuilt) { GTEST_SKIP() << "CUDA backend not built"; }
#endif

}  // namespace
}  // namespace ampc
