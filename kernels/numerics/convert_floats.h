// Bulk conversion of float data between FP32, FP16 and BF16 with the counts a compile-time weight
// conversion reports: the span core of passes/graph/convert_constant.h, for whole tensors and for
// chunks streamed from a file. Bit for bit the scalar functions of float16.h; AVX-512 or
// AVX2 + F16C where the CPU has them (chosen at run time, the build targets baseline x86-64).
#ifndef AMPC_KERNELS_NUMERICS_CONVERT_FLOATS_H_
#define AMPC_KERNELS_NUMERICS_CONVERT_FLOATS_H_

#include <cstddef>
#include <cstdint>

namespace ampc {

// ONNX TensorProto data types (onnx.proto's numbers; numerics includes no ONNX).
inline constexpr int kOnnxFloat = 1;
inline constexpr int kOnnxFloat16 = 10;
inline constexpr int kOnnxBFloat16 = 16;

struct ConversionStats {
  int64_t clamped = 0;          // finite values beyond ±65504 clamped (FP16 with clamp)
  int64_t overflowed = 0;       // finite values that became ±inf
  int64_t flushed_to_zero = 0;  // non-zero values that became zero
};

// Which code converts: the portable scalar one, or a vector one the CPU may lack.
enum class FloatPath { kScalar, kAvx2F16c, kAvx512 };
bool FloatPathAvailable(FloatPath path);
const char* FloatPathName(FloatPath path);

// `n` elements of ONNX type `from` at `src` as type `to` at `dst` (FLOAT, FLOAT16 or BFLOAT16,
// little-endian, no alignment needed, not overlapping). Narrowing rounds to nearest even; with
// `clamp`, finite values beyond ±65504 become ±65504 when narrowing to FP16; 0, NaN (sign and
// leading payload bits kept, quieted) and ±inf are kept. Widening is exact. FP16 <-> BF16 goes
// through FP32. Adds to `stats`; false (nothing written) for any other type.
[[nodiscard]] bool ConvertFloats(const void* src, int from, void* dst, int to, size_t n, bool clamp,
                                 ConversionStats& stats);
// The same with the given path, which must be available (tests and benchmarks compare them).
[[nodiscard]] bool ConvertFloats(FloatPath path, const void* src, int from, void* dst, int to,
                                 size_t n, bool clamp, ConversionStats& stats);
// ConvertFloats split over up to `threads` threads (this one included); the output and the counts
// do not depend on the split.
[[nodiscard]] bool ConvertFloatsParallel(const void* src, int from, void* dst, int to, size_t n,
                                         bool clamp, ConversionStats& stats, int threads);

}  // namespace ampc

#endif  // AMPC_KERNELS_NUMERICS_CONVERT_FLOATS_H_
