// Small helpers the model builders share: value infos, seeded initializers.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace ampc::models {

// Dims < 0 are symbolic ("N").
void AddTensorValue(onnx::ValueInfoProto* value, const std::string& name, int elem_type,
                    const std::vector<int64_t>& dims);

// A float initializer filled with U(-bound, bound) from `rng`, stored as raw_data (little endian).
void AddUniformInitializer(onnx::GraphProto* graph, const std::string& name,
                           const std::vector<int64_t>& dims, float bound, std::mt19937& rng);

onnx::NodeProto* AddNode(onnx::GraphProto* graph, const std::string& op,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::string& name);

// ModelProto with IR version 8, opset 17 and ampc as producer.
onnx::ModelProto NewModel(const std::string& graph_name);

}  // namespace ampc::models
