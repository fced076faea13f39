// Element types as the CUDA launchers see them: ONNX's TensorProto codes (the runtime's DType
// values), without the ONNX headers, so the .cu files stay free of host-only includes.
#ifndef AMPC_KERNELS_CUDA_ELEM_TYPE_H_
#define AMPC_KERNELS_CUDA_ELEM_TYPE_H_

#include <cstddef>
#include <cstdint>

namespace ampc::cuda {

enum class ElemType : int32_t {
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kBFloat16 = 16,
};

constexpr size_t ElemSize(ElemType type) {
  switch (type) {
    case ElemType::kUint8:
    case ElemType::kInt8:
    case ElemType::kBool:
      return 1;
    case ElemType::kFloat16:
    case ElemType::kBFloat16:
      return 2;
    case ElemType::kFloat:
    case ElemType::kInt32:
      return 4;
    case ElemType::kInt64:
    case ElemType::kDouble:
      return 8;
  }
  return 0;
}

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_ELEM_TYPE_H_
