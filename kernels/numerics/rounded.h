// IEEE-exact float and double arithmetic: one rounding to nearest even per operation on the host
// and on the device alike, whatever nvcc's -prec-div/-fmad flags say (a multiply and an add never
// contract into one FMA). The CUDA kernels and the formulas they share with the CPU kernels
// (scaler_math.h, lr_schedule.h) compute with these. Plain C++17, AMPC_HD.
#ifndef AMPC_KERNELS_NUMERICS_ROUNDED_H_
#define AMPC_KERNELS_NUMERICS_ROUNDED_H_

#include "kernels/numerics/host_device.h"

namespace ampc::rounded {

AMPC_HD inline float Divide(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
AMPC_HD inline double Divide(double a, double b) {
#ifdef __CUDA_ARCH__
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
AMPC_HD inline float Add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
AMPC_HD inline double Add(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
AMPC_HD inline float Subtract(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
AMPC_HD inline double Subtract(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
AMPC_HD inline float Multiply(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
AMPC_HD inline double Multiply(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

}  // namespace ampc::rounded

#endif  // AMPC_KERNELS_NUMERICS_ROUNDED_H_
