// Compiles the headers meant for nvcc (C++17) with the host compiler as C++17, so that a C++20
// construct in them fails every build, not only those with nvcc. Nothing here is linked.
#include <cstdint>

#include "kernels/numerics/cast_math.h"
#include "kernels/numerics/float16.h"
#include "kernels/numerics/host_device.h"
#include "kernels/numerics/integer_pow.h"
#include "kernels/numerics/lr_schedule.h"
#include "kernels/numerics/num.h"
#include "kernels/numerics/rounded.h"
#include "kernels/numerics/scaler_math.h"

static_assert(__cplusplus == 201703L, "compile this file as C++17");

namespace ampc {

// One instance of each template kind, so that their bodies are compiled too.
float PlainCxx17Instances(double d, int64_t i, Half h) {
  const BFloat16 b = ConvertElement<double, BFloat16>(d);
  const uint16_t u = ConvertElement<Half, uint16_t>(h);
  const float f = cuda::Num<cuda::BF16>::Load(b) + ConvertElement<int64_t, float>(i);
  const scaler_math::ScaleState s =
      scaler_math::UpdateScale({f, i, i}, u != 0, false, scaler_math::ScaleAttrs{});
  return s.scale + static_cast<float>(integer_pow::Pow(i, i));
}

}  // namespace ampc
