// How `ampc train` feeds a training model its data (runtime/trainer.h): which algorithm input
// takes the images and which the labels, whether the labels fit the model's classes, and the
// test accuracy of the inference graph.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/data_readers.h"
#include "runtime/training_session.h"

namespace ampc {

// How the data feeds the model. Images and labels: the algorithm's float input takes the images,
// its int64 input the labels. By name: each data input takes the column of its name, converted
// to the input's dtype (integers to integers, floats to floats).
struct Feeding {
  bool by_name = false;
  std::string image_input, label_input;
  Shape sample_shape;             // one image as the model declares it
  int64_t fixed_batch = 0;        // the declared batch dim, 0 when symbolic
  std::string batch_input;        // the input whose declared batch is fixed_batch
  std::vector<ValueSpec> inputs;  // by name: the data inputs, each fed from its column
};

// The feeding of `data` into `session`'s data inputs; InvalidArgument when they do not fit.
absl::StatusOr<Feeding> PlanFeeding(const TrainingSession& session, const Dataset& data);

// The inputs of one step: the samples at `indices`, fed as `feeding` says.
absl::StatusOr<NamedTensors> BatchInputs(const Dataset& data, std::span<const int64_t> indices,
                                         const Feeding& feeding);

// The ignore_index of the training step's classification loss, when it has one.
std::optional<int64_t> IgnoredLabel(const onnx::ModelProto& model);

// Labels outside the classes of a logits output declared [N, C] are refused as the data loads,
// naming the file and sample, rather than at the step that meets them.
absl::Status CheckLabelsFit(const TrainingSession& session, const DataSplits& data,
                            std::optional<int64_t> ignored);

// What the test set says of the model, in batches of `batch` (the model's fixed batch where it
// has one): the accuracy (argmax of the logits, the inference output named "logits" else the
// first, against labels [N]) where the logits are [B, C] and the labels [B]; the mean of the
// inference graph's scalar float output `loss` over the batches where it has one.
struct TestMetrics {
  std::optional<double> accuracy;
  std::optional<double> loss;
};
absl::StatusOr<TestMetrics> Test(const TrainingSession& session, const Dataset& test,
                                 const Feeding& feeding, int64_t batch);

}  // namespace ampc
