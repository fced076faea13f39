// TrainingSession's step capture (training_session.h, set_capture): the state's buffers, the
// capture of a step as a backend's CapturedWork and its replays.
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "passes/graph/status_macros.h"
#include "runtime/training_session.h"

namespace ampc {

// What a captured graph bakes in: where it reads the state and writes the next one.
std::vector<const void*> TrainingSession::StateAddresses() const {
  std::vector<const void*> addresses;
  for (const Tensor* value : algorithm_outer_) addresses.push_back(value->raw());
  for (const auto& [state, output] : bindings_) {
    addresses.push_back(spare_[state].empty() ? nullptr : spare_[state].raw());
  }
  return addresses;
}

void TrainingSession::set_capture(bool on) {
  capture_.on = on;
  capture_.off_reason.clear();
  capture_.graphs.clear();
  capture_.feeds.clear();
  capture_.shapes.clear();
}

void TrainingSession::CaptureOff(std::string reason) {
  capture_.on = false;
  capture_.off_reason = std::move(reason);
  capture_.graphs.clear();
}

absl::StatusOr<bool> TrainingSession::RunCaptured(std::span<const Tensor> feeds) {
  // Warm-up: kernels choose their algorithms and workspaces, and the state reaches its two
  // buffer sets, in eager steps with these shapes.
  constexpr int64_t kEagerSteps = 2;
  if (!backend_.CanCapture()) {
    CaptureOff(absl::StrCat("the ", backend_.name(), " backend cannot capture work"));
    return false;
  }
  std::vector<Shape> shapes;
  for (const Tensor& feed : feeds) shapes.push_back(feed.shape());
  if (shapes != capture_.shapes) {
    capture_.graphs.clear();
    capture_.feeds.clear();
    capture_.shapes = std::move(shapes);
    capture_.steps_with_shapes = 0;
  }
  if (++capture_.steps_with_shapes <= kEagerSteps) return false;
  if (capture_.feeds.empty()) {
    for (const Tensor& feed : feeds) {
      AMPC_ASSIGN_OR_RETURN(Tensor buffer, backend_.NewTensor(feed.dtype(), feed.shape()));
      capture_.feeds.push_back(std::move(buffer));
    }
  }
  const std::vector<const void*> state = StateAddresses();
  Captured* graph = nullptr;
  for (const auto& c : capture_.graphs) {
    if (c->state == state) graph = c.get();
  }
  if (graph == nullptr) {
    absl::StatusOr<std::unique_ptr<Captured>> captured = Capture();
    if (!captured.ok()) {
      CaptureOff(std::string(captured.status().message()));
      return false;
    }
    capture_.graphs.push_back(*std::move(captured));
    graph = capture_.graphs.back().get();
  }
  for (size_t i = 0; i < feeds.size(); ++i) {
    AMPC_RETURN_IF_ERROR(InHostMemory(feeds[i])
                             ? backend_.CopyFromHost(feeds[i].raw(), capture_.feeds[i])
                             : backend_.Copy(feeds[i], capture_.feeds[i]));
  }
  AMPC_RETURN_IF_ERROR(graph->work->Replay());
  std::vector<Tensor> outputs = graph->outputs;
  for (auto& [state, output] : bindings_) outputs[output] = spare_[state];
  Advance(outputs);
  ++capture_.replayed_steps;
  return true;
}

// Every bound state value and its spare get a buffer of their own, so that the state alternates
// between two buffer sets: a value that shares one (a counter a step passes through as a view,
// initial values of one constant) is copied out first; graphs of the old buffers are dropped.
absl::Status TrainingSession::OwnStateBuffers() {
  auto exclusive = [](const Tensor& t) { return !t.empty() && t.buffer().use_count() == 1; };
  for (const auto& [state, output] : bindings_) {
    Tensor& value = state_[state];
    if (InHostMemory(value)) {
      return absl::UnimplementedError(absl::StrCat("state value '", state_names_[state],
                                                   "' is computed on the host, not the device"));
    }
    if (!exclusive(value)) {
      capture_.graphs.clear();
      AMPC_ASSIGN_OR_RETURN(Tensor copy, backend_.NewTensor(value.dtype(), value.shape()));
      AMPC_RETURN_IF_ERROR(backend_.Copy(value, copy));
      value = std::move(copy);
    }
    if (!exclusive(spare_[state])) {
      capture_.graphs.clear();
      AMPC_ASSIGN_OR_RETURN(spare_[state], backend_.NewTensor(value.dtype(), value.shape()));
    }
  }
  return absl::OkStatus();
}

// The step's work between BeginCapture and EndCapture; a bound output that does not land in its
// spare (a view) is copied there.
absl::StatusOr<std::unique_ptr<TrainingSession::Captured>> TrainingSession::Record() {
  std::vector<Tensor*> destinations = Destinations();
  auto captured = std::make_unique<Captured>();
  captured->state = StateAddresses();
  AMPC_RETURN_IF_ERROR(backend_.BeginCapture());
  absl::StatusOr<std::vector<Tensor>> outputs =
      algorithm_->Run(capture_.feeds, algorithm_outer_, destinations);
  absl::Status status = outputs.status();
  for (const auto& [state, output] : bindings_) {
    if (!status.ok()) break;
    Tensor& value = (*outputs)[output];
    if (value.raw() != spare_[state].raw()) status = backend_.Copy(value, spare_[state]);
  }
  if (!status.ok()) {
    outputs = std::vector<Tensor>();  // the capture's buffers go back before it ends
    backend_.AbortCapture();
    return status;
  }
  captured->outputs = *std::move(outputs);
  AMPC_ASSIGN_OR_RETURN(captured->work, backend_.EndCapture());
  return captured;
}

// Outputs in the state's buffers (written into a spare, or views of the state) are not kept:
// each replay writes them there again, and the state's buffers stay its own.
absl::Status TrainingSession::DropStateOutputs(Captured& captured) const {
  absl::flat_hash_set<const Buffer*> state_buffers;
  for (const auto& [state, output] : bindings_) {
    state_buffers.insert(state_[state].buffer().get());
    state_buffers.insert(spare_[state].buffer().get());
  }
  for (Tensor& output : captured.outputs) {
    if (!output.empty() && state_buffers.contains(output.buffer().get())) output = Tensor();
  }
  for (int kept : {loss_.index, applied_.index, norm_.index, lr_.index}) {
    if (kept >= 0 && captured.outputs[kept].empty()) {
      return absl::UnimplementedError(absl::StrCat(
          "the step's output '", algorithm_->output_names()[kept], "' is a view of its state"));
    }
  }
  return absl::OkStatus();
}

// An error says why the step cannot be captured.
absl::StatusOr<std::unique_ptr<TrainingSession::Captured>> TrainingSession::Capture() {
  AMPC_RETURN_IF_ERROR(OwnStateBuffers());
  if (capture_.graphs.size() >= 2) {
    return absl::InternalError("the state left its two buffer sets (an ampc bug)");
  }
  AMPC_ASSIGN_OR_RETURN(std::unique_ptr<Captured> captured, Record());
  AMPC_RETURN_IF_ERROR(DropStateOutputs(*captured));
  return captured;
}

}  // namespace ampc
