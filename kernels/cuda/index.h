// Gather, ScatterND and the same-shape variadic Sum on the GPU. Indices the host holds arrive
// checked and normalised by the caller (kernels/cuda/index_ops.cc), so those kernels never meet
// an index out of range; the *DeviceIndex variants read indices the GPU holds (a captured step's
// token ids) and cannot report one. Plain C++ header: includable without nvcc.
#ifndef AMPC_KERNELS_CUDA_INDEX_H_
#define AMPC_KERNELS_CUDA_INDEX_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/elem_type.h"

namespace ampc::cuda {

// y[o, j, :] = x[o, index[j], :] for o < outer, j < count, rows of `row_bytes` bytes; x has `dim`
// rows per o. `d_index` is a device array of `count` indices in [0, dim).
cudaError_t Gather(const void* d_x, void* d_y, const int64_t* d_index, int64_t outer, int64_t dim,
                   int64_t count, size_t row_bytes, cudaStream_t stream);

// Gather with `count` indices in device memory (int64, or int32 when !index64), negative ones
// counted from the end: an index outside [-dim, dim) gives a row of zeros.
cudaError_t GatherDeviceIndex(const void* d_x, void* d_y, const void* d_index, bool index64,
                              int64_t outer, int64_t dim, int64_t count, size_t row_bytes,
                              cudaStream_t stream);

enum class ScatterReduction { kNone, kAdd, kMul, kMax, kMin };

// ScatterND's index tuples in device memory, at most this many components.
inline constexpr int kMaxScatterDims = 8;
struct ScatterDims {
  int64_t dim[kMaxScatterDims];  // data's first k dims
  int k;
};

// Device scratch ScatterSlicesDeviceIndex needs for `tuples` index tuples into `rows` slices.
size_t ScatterScratchBytes(int64_t tuples, int64_t rows);

// ScatterND after out = data, with `tuples` index tuples of dims.k int64 components in device
// memory (negative ones counted from the end; a tuple out of range is ignored): the tuples are
// sorted by destination, stably (a radix sort), so each destination combines its updates in
// ONNX's order, each step rounded, as ScatterSlices and the CPU loop. `rows` is the product of
// dims; d_scratch holds ScatterScratchBytes(tuples, rows) bytes, 16-byte aligned.
cudaError_t ScatterSlicesDeviceIndex(ElemType type, ScatterReduction reduction, void* d_out,
                                     const void* d_updates, const int64_t* d_indices,
                                     int64_t tuples, const ScatterDims& dims, int64_t rows,
                                     int64_t slice, void* d_scratch, size_t scratch_bytes,
                                     cudaStream_t stream);

// ScatterND after out = data: for each destination u < `destinations`, the updates
// d_order[d_start[u] .. d_start[u + 1]) (update slice numbers, in the order ONNX applies them)
// are combined into out[d_dest[u] .. + slice) one after the other, each step rounded to the
// element type, so the result equals the sequential CPU loop bit for bit.
cudaError_t ScatterSlices(ElemType type, ScatterReduction reduction, void* d_out,
                          const void* d_updates, const int64_t* d_dest, const int64_t* d_start,
                          const int64_t* d_order, int64_t destinations, int64_t slice,
                          cudaStream_t stream);

// y = x[0] + ... + x[count - 1], all of n elements, accumulated in the compute type (float for
// FP16/BF16) and rounded once, as the CPU's variadic Sum. At most kMaxSumInputs inputs.
// The pointers travel as one kernel parameter: 2 KiB of the 4 KiB every CUDA version allows. A
// gradient accumulates one input per use of its value (a constant every layer reads: one per
// layer).
inline constexpr int kMaxSumInputs = 256;
cudaError_t SumSameShape(ElemType type, const void* const* inputs, int count, void* d_y, int64_t n,
                         cudaStream_t stream);

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_INDEX_H_
