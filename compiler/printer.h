// Canonical, deterministic text for a model: ONNX's text syntax (readable by libonnx's parser),
// extended where ONNX 1.12's printer loses information. The format: docs/text-format.md.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

namespace ampc {

struct PrintOptions {
  // Initializers and tensor attributes with more elements than this print as dtype, shape and a
  // content digest; at most this many print their values. Negative: every tensor as a digest.
  int64_t max_inline_elements = 16;
};

std::string PrintModel(const onnx::ModelProto& model, const PrintOptions& options = {});

}  // namespace ampc
