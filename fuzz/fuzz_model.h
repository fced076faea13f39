// What every fuzz target starts with: libFuzzer's bytes loaded as `ampc` loads a model file.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ampc {

// Inputs above this size are skipped (tools/fuzz also passes -max_len): the project's own limits
// (docs/errors.md) bound what a model may declare, and a fuzzer's time is better spent on many
// small models than on a few large ones.
inline constexpr size_t kMaxFuzzInputBytes = 1 << 20;

// Writes `data` to the file `name` in a directory private to this process (removed at exit)
// and returns its path.
std::string WriteFuzzFile(const std::string& name, const uint8_t* data, size_t size);

// Writes `data` to a file in a directory private to this process and loads it with LoadModel, so
// the file checks, the parse, the nesting scan and external data (relative to that directory) all
// run. Empty when the input is too large or LoadModel refuses it.
std::optional<onnx::ModelProto> LoadFuzzModel(const uint8_t* data, size_t size);

}  // namespace ampc
