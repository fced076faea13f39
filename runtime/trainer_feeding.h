// How `ampc train` feeds a training model its data (runtime/trainer.h): which algorithm input
// takes the images and which the labels, whether the labels fit the model's classes, and the
// test accuracy of the inference graph.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/data_readers.h"
#include "runtime/training_session.h"

namespace ampc {

// How the data feeds the model: the algorithm's float input takes images, its int64 input labels.
struct Feeding {
  std::string image_input, label_input;
  Shape sample_shape;       // one image as the model declares it
  int64_t fixed_batch = 0;  // the declared batch dim, 0 when symbolic
};

// The feeding of `data` into `session`'s data inputs; InvalidArgument when they do not fit.
absl::StatusOr<Feeding> PlanFeeding(const TrainingSession& session, const Dataset& data);

// The ignore_index of the training step's classification loss, when it has one.
std::optional<int64_t> IgnoredLabel(const onnx::ModelProto& model);

// Labels outside the classes of a logits output declared [N, C] are refused as the data loads,
// naming the file and sample, rather than at the step that meets them.
absl::Status CheckLabelsFit(const TrainingSession& session, const DataSplits& data,
                            std::optional<int64_t> ignored);

// Accuracy on the test set: argmax of the logits (the inference output named "logits", else the
// first) against the labels, in batches of `batch` (the model's fixed batch where it has one).
absl::StatusOr<double> TestAccuracy(const TrainingSession& session, const Dataset& test,
                                    const Feeding& feeding, int64_t batch);

}  // namespace ampc
