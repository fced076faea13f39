// The ai.ampc loss-scaling ops and optimizers on the CUDA backend against the CPU backend
// (tests/support/cuda_parity.h), exactly (tolerance 0) except where the gradient norm's summation
// order shows: finite and overflowing FP16 gradients, every UpdateScale flag combination, skipped
// and applied SGD/Adam steps for each optimizer configuration.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/support/cuda_parity.h"
#include "tests/support/model_text.h"

namespace ampc {
namespace {

using testing::ExpectCudaMatchesCpu;
using testing::ParityCase;
using testing::ValueRange;

constexpr char kHeader[] = R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>)";

// The first seed from `from` on whose random inputs the bool input `input` is `value` (the harness
// draws all inputs from the seed), so both a skipped and an applied step are always tested.
uint32_t SeedWhere(const ParityCase& parity, int input, bool value, uint32_t from) {
  const onnx::ModelProto model = testing::ParseModelText(parity.model);
  for (uint32_t seed = from;; ++seed) {
    if (testing::RandomInputs(model, parity.ranges, seed)[input].data<bool>()[0] == value) {
      return seed;
    }
  }
}

// ---- CheckFinite ----

constexpr char kCheckFinite[] =
    " g (float16[1000] h, bfloat16[37] b, float[20000] f, float16[1] last) => (bool found)"
    " { found = ai.ampc.CheckFinite(h, b, f, last) }";

TEST(CudaScalerParityTest, CheckFiniteOnFiniteAndOverflowingGradients) {
  AMPC_SKIP_WITHOUT_GPU();
  ParityCase parity;
  parity.model = std::string(kHeader) + kCheckFinite;
  parity.tolerance = 0;
  ExpectCudaMatchesCpu(parity);                    // all finite
  parity.ranges = {{"h", ValueRange{-7e4, 7e4}}};  // beyond 65504: many infinities
  ExpectCudaMatchesCpu(parity);
  parity.ranges = {{"last", ValueRange{65520, 70000}}};  // only the last element overflows
  ExpectCudaMatchesCpu(parity);
}

// ---- UpdateScale ----

TEST(CudaScalerParityTest, UpdateScaleForEveryFlagAndConfiguration) {
  AMPC_SKIP_WITHOUT_GPU();
  const std::string configs[] = {
      "growth_interval = 3, hysteresis = 1",
      "growth_interval = 2, hysteresis = 2, min_scale = 4.0, max_scale = 70000.0",
      "growth_factor = 3.0, backoff_factor = 0.25, growth_interval = 1", "dynamic = 0"};
  for (const std::string& config : configs) {
    ParityCase parity;
    parity.model = std::string(kHeader) +
                   " g (float s, int64 t, int64 h, bool f, bool l) => (float s2, int64 t2, int64 "
                   "h2) { s2, t2, h2 = ai.ampc.UpdateScale<" +
                   config + ">(s, t, h, f, l) }";
    parity.ranges = {{"s", {1, 1e5}}, {"t", {0, 4}}, {"h", {1, 3}}};
    parity.tolerance = 0;
    for (uint32_t seed = 1; seed <= 16; ++seed) {  // the four (found, loss_bad) pairs, likely all
      parity.seed = seed;
      SCOPED_TRACE(config + ", seed " + std::to_string(seed));
      ExpectCudaMatchesCpu(parity);
    }
  }
}

// ---- UnscaleClip ----

std::string UnscaleClipModel(const std::string& max_norm, bool with_norm) {
  return std::string(kHeader) +
         " g (float s, float16[1000] a, bfloat16[77] b, float[20000] c) => (float[1000] ua, "
         "float[77] ub, float[20000] uc" +
         (with_norm ? ", float n" : "") +
         ") { ua, ub, uc, n = ai.ampc.UnscaleClip<max_norm = " + max_norm + ">(s, a, b, c) }";
}

TEST(CudaScalerParityTest, UnscaleExactlyAndClipByTheGlobalNorm) {
  AMPC_SKIP_WITHOUT_GPU();
  ParityCase parity;
  parity.ranges = {{"s", {0.5, 4096}}};
  parity.model = UnscaleClipModel("0.0", false);  // the unscaled gradients alone: bitwise
  parity.tolerance = 0;
  ExpectCudaMatchesCpu(parity);
  parity.model = UnscaleClipModel("0.0", true);  // the norm's summation order differs
  parity.tolerance = 1e-6;
  ExpectCudaMatchesCpu(parity);
  parity.model = UnscaleClipModel("0.01", true);
  ExpectCudaMatchesCpu(parity);
  parity.ranges["a"] = {-7e4, 7e4};  // an infinite norm: coefficient 0, NaN where the infs were
  parity.model = UnscaleClipModel("0.01", true);
  parity.tolerance = 0;
  ExpectCudaMatchesCpu(parity);
}

// The runtime's CheckUnscaleClip (runtime/optimizer_fusion.h): CheckFinite and UnscaleClip in one
// pass, against the CPU's two kernels.
std::string CheckUnscaleClipModel(const std::string& max_norm) {
  return R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1, "ai.ampc.runtime" : 1]>)"
         " g (float s, float16[1000] a, bfloat16[77] b, float[20000] c) => (bool found, "
         "float[1000] ua, float[77] ub, float[20000] uc, float n) { found, ua, ub, uc, n = "
         "ai.ampc.runtime.CheckUnscaleClip<max_norm = " +
         max_norm + ">(s, a, b, c) }";
}

TEST(CudaScalerParityTest, CheckUnscaleClipInOnePass) {
  AMPC_SKIP_WITHOUT_GPU();
  ParityCase parity;
  parity.ranges = {{"s", {0.5, 4096}}};
  parity.tolerance = 1e-6;  // the norm's summation order differs; the rest is exact
  for (const std::string max_norm : {"0.0", "0.01"}) {
    parity.model = CheckUnscaleClipModel(max_norm);
    ExpectCudaMatchesCpu(parity);
  }
  parity.ranges["a"] = {-7e4, 7e4};  // overflowing FP16 gradients: found, an infinite norm
  parity.model = CheckUnscaleClipModel("0.01");
  parity.tolerance = 0;
  ExpectCudaMatchesCpu(parity);
}

// ---- SGD and Adam ----

const std::map<std::string, ValueRange> kOptimizerRanges = {{"lr", {1e-3, 0.1}},
                                                            {"step", {1, 1000}}};

// One applied and one skipped step (input 0 is the skip flag).
void ExpectBothSteps(ParityCase parity) {
  for (bool skip : {false, true}) {
    parity.seed = SeedWhere(parity, 0, skip, parity.seed);
    SCOPED_TRACE(parity.model + (skip ? " skipped" : " applied"));
    ExpectCudaMatchesCpu(parity);
  }
}

TEST(CudaScalerParityTest, SgdForEveryConfiguration) {
  AMPC_SKIP_WITHOUT_GPU();
  const std::string configs[] = {"momentum = 0.0",
                                 "momentum = 0.0, weight_decay = 0.01",
                                 "momentum = 0.9",
                                 "momentum = 0.9, dampening = 0.1, weight_decay = 0.0005",
                                 "momentum = 0.9, nesterov = 1",
                                 "momentum = 0.8, nesterov = 1, weight_decay = 0.001"};
  const std::string t = "float[3000]";
  for (const std::string& config : configs) {
    const bool momentum = config.find("momentum = 0.0") == std::string::npos;
    for (bool first : {true, false}) {
      ParityCase parity;
      // `first` as an input would be random: a constant instead, for both values.
      parity.model = std::string(kHeader) + " g (bool skip, float lr, " + t + " p, " + t + " u" +
                     (momentum ? ", " + t + " buf) => (" + t + " p2, " + t + " buf2)"
                               : ") => (" + t + " p2)") +
                     " { first = Constant<value = bool {" + (first ? "1" : "0") + "}>() p2" +
                     (momentum ? ", buf2" : "") + " = ai.ampc.SGD<" + config +
                     ">(skip, lr, first, p, u" + (momentum ? ", buf" : "") + ") }";
      parity.ranges = kOptimizerRanges;
      parity.tolerance = 0;
      ExpectBothSteps(parity);
    }
  }
}

TEST(CudaScalerParityTest, AdamAndAdamWForEveryConfiguration) {
  AMPC_SKIP_WITHOUT_GPU();
  const std::string configs[] = {
      "beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8",
      "beta1 = 0.9, beta2 = 0.99, weight_decay = 0.01", "weight_decay = 0.01, decoupled = 1",
      "beta1 = 0.3, epsilon = 1e-6, weight_decay = 0.1, decoupled = 1"};  // lerp's other formula
  const std::string t = "float[3000]";
  for (const std::string& config : configs) {
    ParityCase parity;
    parity.model = std::string(kHeader) + " g (bool skip, float lr, int64 step, " + t + " p, " + t +
                   " u, " + t + " m, " + t + " v) => (" + t + " p2, " + t + " m2, " + t +
                   " v2) { p2, m2, v2 = ai.ampc.Adam<" + config + ">(skip, lr, step, p, u, m, v) }";
    parity.ranges = kOptimizerRanges;
    parity.ranges["v"] = {0, 0.01};  // a second moment is never negative
    parity.tolerance = 0;
    ExpectBothSteps(parity);
  }
}

// ---- LearningRate (runtime/learning_rate.h) ----

// Base rate 0.1 and each schedule (kernels/numerics/lr_schedule.h's words) at random applied steps around
// the warm-up's end and beyond the cosine's: CUDA's cos may differ from glibc's in the last bit
// of the double, which the float rate almost never shows; one float ulp is allowed for it.
TEST(CudaScalerParityTest, LearningRateOfEverySchedule) {
  AMPC_SKIP_WITHOUT_GPU();
  const std::string schedules[] = {"0.1, 0, 0, 0, 0", "0.1, 1, 100, 0, 0",
                                   "0.1, 2, 100, 1000, 0.00001", "0.1, 2, 0, 1000, 0"};
  for (const std::string& words : schedules) {
    ParityCase parity;
    parity.model = R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc.runtime" : 1]>)"
                   " g (int64 step) => (float rate) <double[5] w = {" +
                   words + "}> { rate = ai.ampc.runtime.LearningRate(w, step) }";
    parity.ranges = {{"step", {0, 1200}}};
    parity.tolerance = 1.2e-7;  // at most one float ulp (relative 2^-23)
    for (uint32_t seed = 1; seed <= 8; ++seed) {
      parity.seed = seed;
      SCOPED_TRACE(words + ", seed " + std::to_string(seed));
      ExpectCudaMatchesCpu(parity);
    }
  }
}

}  // namespace
}  // namespace ampc
