#include "tests/support/model_text.h"

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <algorithm>

namespace ampc::testing {

onnx::ModelProto ParseModelText(const std::string& text) {
  onnx::ModelProto model;
  onnx::Common::Status status = onnx::OnnxParser::Parse(model, text.c_str());
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage() << "\n" << text;
  return model;
}

std::vector<std::filesystem::path> CorpusModels(const std::string& corpus_dir,
                                                const std::string& folder) {
  std::vector<std::filesystem::path> models;
  const std::filesystem::path root = std::filesystem::path(corpus_dir) / folder;
  if (!std::filesystem::exists(root)) return models;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (entry.path().filename() == "model.onnx") models.push_back(entry.path());
  }
  std::sort(models.begin(), models.end());
  return models;
}

}  // namespace ampc::testing
