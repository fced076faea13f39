// Test inputs: models from ONNX text, and the models of ONNX's test data.
#pragma once

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <string>
#include <vector>

namespace ampc::testing {

// Parses ONNX text (libonnx 1.12's parser); a parse error fails the calling test.
onnx::ModelProto ParseModelText(const std::string& text);

// Every model.onnx under `corpus_dir`/`folder`, sorted; empty when the folder is missing.
std::vector<std::filesystem::path> CorpusModels(const std::string& corpus_dir,
                                                const std::string& folder);

}  // namespace ampc::testing
