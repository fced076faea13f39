// The GEMM under MatMul, Gemm and Conv: FP32 through OpenBLAS sgemm, FP64 through dgemm, FP16 and
// BF16 widened to FP32 (exactly) and multiplied with FP32 accumulation (BF16 with the CPU's BF16
// dot products where it has them, gemm_bf16.h; FP16 MatMul and Gemm packed straight from FP16
// where the CPU has AVX-512, gemm_half.h), integers in a plain loop.
// Results stay in the accumulation type until the kernel rounds them once to the output type.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/elementwise_convert.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_half.h"
#include "kernels/cpu/linalg_shapes.h"
#include "kernels/cpu/scratch_arena.h"
#include "kernels/numerics/half.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/dtype.h"
#include "runtime/core/kernel.h"

namespace ampc::linalg {

inline constexpr int64_t kCopyGrain = 16384;
// ParallelGemm splits a product over the pool only when m*n*k is above this (below it the split
// costs more than it saves).
inline constexpr int64_t kParallelGemmWork = 32 * 32 * 32;

inline absl::Status UnsupportedType(KernelContext& context) {
  return NodeError(context, absl::StrCat("element type ", DTypeName(context.in(0).dtype()),
                                         " is not supported"));
}

// Checks that every input has input 0's type, then returns fn.template operator()<T>() for T
// the storage type of that type among Ds..., or an error naming an unsupported type.
template <DType... Ds, typename Fn>
absl::Status DispatchKernel(KernelContext& context, Fn&& fn) {
  AMPC_RETURN_IF_ERROR(CheckSameTypes(context));
  absl::Status status;
  const bool handled = Dispatch<Ds...>(context.in(0).dtype(),
                                       [&]<typename T>() { status = fn.template operator()<T>(); });
  return handled ? status : UnsupportedType(context);
}

// Accumulation type of storage type T: float for FP16/BF16/FP32, double for FP64, T for integers.
template <typename T>
using Acc = typename Compute<T>::type;

// OpenBLAS on the calling thread only, once per process: the GEMMs are split over ampc's pool
// (ParallelGemm, or one product per task), as OpenBLAS's own threads would spin and yield
// against the pool's on the same cores.
inline void SingleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// Whether BLAS (32-bit int dimensions) can take these sizes.
inline bool FitsBlas(std::initializer_list<int64_t> sizes) {
  for (int64_t s : sizes) {
    if (s > std::numeric_limits<int>::max()) return false;
  }
  return true;
}

// n values of T widened to the accumulation type, and back rounded once (elementwise_convert.h).
using ampc::NarrowFromAcc;
using ampc::WidenToAcc;

// A tensor's values in the accumulation type: the tensor itself when the types agree, else a
// widened copy (exact for FP16/BF16 to float) in the thread's scratch arena.
template <typename T>
class AccInput {
 public:
  AccInput(const T* data, int64_t n, ThreadPool& pool) {
    if constexpr (std::is_same_v<T, Acc<T>>) {
      data_ = data;
    } else {
      Acc<T>* copy = copy_.Get(n);
      pool.ParallelFor(n, kCopyGrain, [&](int64_t begin, int64_t end) {
        WidenToAcc(data + begin, end - begin, copy + begin);
      });
      data_ = copy;
    }
  }
  const Acc<T>* data() const { return data_; }

 private:
  ScratchBuffer<Acc<T>> copy_;
  const Acc<T>* data_ = nullptr;
};

// Where results accumulate: the output itself when its type is the accumulation type, else a
// buffer that Finish() rounds once into the output. Uninitialised either way: callers write every
// value (a GEMM with beta 0) or clear it first.
template <typename T>
class AccOutput {
 public:
  AccOutput(T* out, int64_t n) : out_(out), n_(n) {
    if constexpr (std::is_same_v<T, Acc<T>>) {
      data_ = out;
    } else {
      data_ = buffer_.Get(n);
    }
  }
  Acc<T>* data() { return data_; }
  void Finish(ThreadPool& pool) {
    if constexpr (!std::is_same_v<T, Acc<T>>) {
      pool.ParallelFor(n_, kCopyGrain, [&](int64_t begin, int64_t end) {
        NarrowFromAcc(data_ + begin, end - begin, out_ + begin);
      });
    }
  }

 private:
  T* out_;
  int64_t n_;
  ScratchBuffer<Acc<T>> buffer_;
  Acc<T>* data_ = nullptr;
};

// c[m,n] = alpha * op(a)[m,k] * op(b)[k,n] + beta * c, row-major; beta == 0 ignores c's contents.
// Callers check FitsBlas.
template <typename A>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, A alpha, const A* a,
          int64_t lda, const A* b, int64_t ldb, A beta, A* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: BLAS would reject the leading dimensions
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == A{0} ? A{0} : beta * c[i * ldc + j];
    }
    return;
  }
  if constexpr (std::is_same_v<A, float>) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                beta, c, static_cast<int>(ldc));
  } else if constexpr (std::is_same_v<A, double>) {
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                beta, c, static_cast<int>(ldc));
  } else {
    // Integers wrap around (as numpy's do): arithmetic in the unsigned type of the same width.
    using U = std::make_unsigned_t<A>;
    std::vector<U> row(static_cast<size_t>(n));
    for (int64_t i = 0; i < m; ++i) {
      std::fill(row.begin(), row.end(), U{0});
      for (int64_t p = 0; p < k; ++p) {
        const U av = static_cast<U>(trans_a ? a[p * lda + i] : a[i * lda + p]);
        for (int64_t j = 0; j < n; ++j) {
          row[j] += av * static_cast<U>(trans_b ? b[j * ldb + p] : b[p * ldb + j]);
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        U v = static_cast<U>(alpha) * row[j];
        if (beta != A{0}) v += static_cast<U>(beta) * static_cast<U>(c[i * ldc + j]);
        c[i * ldc + j] = static_cast<A>(v);
      }
    }
  }
}

// Below this much work (m*n*k) packing the operands for the BF16 dot products costs more than the
// faster products save (measured on AVX512-BF16: 10x128x64 runs at half sgemm's speed).
inline constexpr int64_t kBFloat16DotWork = int64_t{1} << 18;

// Whether Gemm<float> on the values of storage type T is better done by GemmBFloat16Values.
template <typename T>
bool UseBFloat16Dot(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return alpha == 1.0f && (beta == 0.0f || beta == 1.0f) && m * n * k >= kBFloat16DotWork &&
           BFloat16DotTakes(trans_a, trans_b, m, n, k, a, lda, b, ldb);
  } else {
    return false;
  }
}

// Gemm<A> where the operands hold values of storage type T, through GemmBFloat16Values when
// `bf16_dot` (UseBFloat16Dot said so).
template <typename A>
void GemmOf(bool bf16_dot, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, A alpha,
            const A* a, int64_t lda, const A* b, int64_t ldb, A beta, A* c, int64_t ldc) {
  if constexpr (std::is_same_v<A, float>) {
    if (bf16_dot) {
      GemmBFloat16Values(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta != 0.0f, c, ldc);
      return;
    }
  }
  Gemm<A>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// C's blocks for ParallelGemm along an extent of C (rows or columns): at most kGemmBlocks, each a
// multiple of 16 (the width of the GEMM kernels' register tiles) and at least 32 long.
inline constexpr int64_t kGemmBlocks = 8;
inline int64_t GemmBlock(int64_t extent) {
  return std::max<int64_t>(32, ((extent + kGemmBlocks - 1) / kGemmBlocks + 15) / 16 * 16);
}

// Calls fn(i0, rows, j0, cols) for blocks of C [m, n] in row blocks (or column blocks, when it is
// wider than tall) that the pool's threads compute at once; once, inline, when the product is
// small. The blocks depend on the shape alone, never on the thread count.
template <typename Fn>
void ForGemmBlocks(ThreadPool& pool, int64_t m, int64_t n, int64_t k, Fn&& fn) {
  if (m * n * k <= kParallelGemmWork) {
    fn(int64_t{0}, m, int64_t{0}, n);
    return;
  }
  const bool by_rows = m >= n;
  const int64_t extent = by_rows ? m : n;
  const int64_t block = GemmBlock(extent);
  const int64_t blocks = (extent + block - 1) / block;
  pool.ParallelFor(blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      const int64_t begin = t * block, size = std::min(block, extent - begin);
      by_rows ? fn(begin, size, int64_t{0}, n) : fn(int64_t{0}, m, begin, size);
    }
  });
}

// Gemm with C split by ForGemmBlocks, each block with single-threaded BLAS; BLAS computes each
// block the same way whichever thread runs it, so the product has the same bits at any thread
// count (BLAS's sum order within a product depends on the block it is given). T is the storage
// type the operands were widened from (BF16 may take the BF16 dot products, whose sums do not
// depend on the blocks).
template <typename A, typename T = A>
void ParallelGemm(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                  A alpha, const A* a, int64_t lda, const A* b, int64_t ldb, A beta, A* c,
                  int64_t ldc) {
  bool bf16_dot = false;
  if constexpr (std::is_same_v<A, float>) {
    bf16_dot = UseBFloat16Dot<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta);
  }
  ForGemmBlocks(pool, m, n, k, [&](int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
    GemmOf<A>(bf16_dot, trans_a, trans_b, rows, cols, k, alpha, a + (trans_a ? i0 : i0 * lda), lda,
              b + (trans_b ? j0 * ldb : j0), ldb, beta, c + i0 * ldc + j0, ldc);
  });
}

// Whether a product of FP16 tensors with these alpha and beta goes to ParallelGemmHalf (FP16
// operands as stored) rather than to ParallelGemm on widened copies.
inline bool TakesHalfGemm(float alpha, float beta) {
  return HasHalfGemm() && alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
}

// c = op(a) * op(b) (or c + op(a) * op(b) when accumulate) on FP16 operands as stored, C split by
// ForGemmBlocks (GemmHalfValues' sums do not depend on the blocks). Needs HasHalfGemm().
inline void ParallelGemmHalf(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n,
                             int64_t k, const Half* a, int64_t lda, const Half* b, int64_t ldb,
                             bool accumulate, float* c, int64_t ldc) {
  const uint16_t* a_bits = reinterpret_cast<const uint16_t*>(a);
  const uint16_t* b_bits = reinterpret_cast<const uint16_t*>(b);
  ForGemmBlocks(pool, m, n, k, [&](int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
    GemmHalfValues(trans_a, trans_b, rows, cols, k, a_bits + (trans_a ? i0 : i0 * lda), lda,
                   b_bits + (trans_b ? j0 * ldb : j0), ldb, accumulate, c + i0 * ldc + j0, ldc);
  });
}

}  // namespace ampc::linalg
