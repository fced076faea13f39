// The value of a tensor in the canonical text: its elements, a content digest, or where its
// external data lies.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

namespace ampc {

// `{1.0, 2.0}` with at most `max_inline_elements` elements, else `crc32:xxxxxxxx` over the
// canonical bytes (docs/text-format.md); `external("w.bin", 4096, 4000)` for external data.
std::string TensorValueText(const onnx::TensorProto& tensor, int64_t max_inline_elements);

}  // namespace ampc
