// A compiled training model ready to train (docs/training-design.md, "The compiled file"): the
// initialization graph runs once at creation; the state (every `graph` initializer and every
// initialization output) lives on the backend as tensors by name; each Step runs the algorithm
// graph with the data inputs, the learning rate (as `ampc.lr.schedule` for a first LearningRate
// node where the state counts `ampc.step`, runtime/learning_rate.h; else as `ampc.lr`) and the
// state, then applies update_binding by moving the new tensors into the state (no copies). Evaluate
// runs the inference `graph` with the current parameters; Checkpoint gives a model that resumes
// exactly where this one stands.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "runtime/core/backend.h"
#include "runtime/core/graph_executor.h"
#include "runtime/core/kernel_registry.h"
#include "runtime/learning_rate.h"
#include "runtime/session.h"

namespace ampc {

// Inputs by name (host or backend tensors).
using NamedTensors = std::map<std::string, Tensor>;

// What one step did, read back to the host. Counters a model does not have read as 0 (the scale
// as 1).
struct StepResult {
  float loss = 0;       // the algorithm's loss output (unscaled)
  float lr = 0;         // the learning rate the step ran at
  bool applied = true;  // `ampc.applied` (true when the algorithm has no such output)
  float grad_norm = 0;  // `ampc.grad_norm` (0 when absent or skipped)
  float scale = 1;      // `ampc.scale` after the step
  int64_t step = 0;     // `ampc.step` after the step: optimizer steps applied
  int64_t skipped_steps = 0;
  int64_t consecutive_skips = 0;
  int64_t micro_step = 0;  // `ampc.micro_step` (--accumulate): micro-batches into the window
};

// The steps run since the last TakeSteps (TrainingSession::set_keep_losses).
struct TakenSteps {
  std::vector<float> losses;  // each step's loss, in order
  StepResult last;            // the last step's result, as LastStep gives it
};

// Where inf or NaN appear in one training step (TrainingSession::FindNonFinite).
struct NonFiniteReport {
  // The first value in the algorithm's node order that holds inf or NaN, and its producer;
  // empty when every value is finite.
  std::string first_value, first_node, first_op;
  std::vector<std::string> parameters;  // parameters whose gradient is non-finite, in order
};

class TrainingSession {
 public:
  // Validates training_info[0] (initialization, algorithm, update_binding: errors name what is
  // missing), runs the initialization graph, and builds the executors of the algorithm and of
  // the inference graph. Every op of all three graphs must have a kernel on `backend`.
  static absl::StatusOr<std::unique_ptr<TrainingSession>> Create(onnx::ModelProto model,
                                                                 const KernelRegistry& registry,
                                                                 Backend& backend);
  ~TrainingSession();

  // The algorithm's inputs other than `ampc.lr` (e.g. image, label), as declared.
  const std::vector<ValueSpec>& data_inputs() const { return data_inputs_; }
  // The inference graph's inputs and outputs, as declared.
  const std::vector<ValueSpec>& eval_inputs() const { return eval_inputs_; }
  const std::vector<ValueSpec>& eval_outputs() const { return eval_outputs_; }
  const std::string& loss_name() const { return loss_name_; }

  // One training step with learning rate `rate` (or the constant `lr`). `inputs` must hold every
  // data input; on error the state is unchanged. Step = Run + LastStep.
  absl::StatusOr<StepResult> Step(const NamedTensors& inputs, const ScheduledRate& rate);
  absl::StatusOr<StepResult> Step(const NamedTensors& inputs, float lr);
  // The step without reading anything back: on a device it only queues work (no wait for the
  // device, so the host prepares the next batch meanwhile). A schedule is evaluated on the
  // backend at the step counter it holds (a model without an int64 `ampc.step` state reads the
  // counter back first).
  absl::Status Run(const NamedTensors& inputs, const ScheduledRate& rate);
  absl::Status Run(const NamedTensors& inputs, float lr);
  // What the last step did (its loss, applied flag, norm) and the counters after it, copied to
  // the host with one wait; FailedPrecondition before any step.
  absl::StatusOr<StepResult> LastStep() const;

  // While on, every step's loss stays on the backend (a copy where the step was a replay) until
  // TakeSteps copies them to the host, with the last step's result, in one wait: a trainer
  // reads back only when it logs. Off by default.
  void set_keep_losses(bool keep);
  absl::StatusOr<TakenSteps> TakeSteps();

  // Runs one step on `inputs` without changing the state, keeping every floating-point value,
  // and says where inf or NaN first appear (for the error after too many skipped steps).
  absl::StatusOr<NonFiniteReport> FindNonFinite(const NamedTensors& inputs, float lr);

  // The inference graph's outputs (in eval_outputs() order) with the current parameters.
  // `inputs` must hold every eval input; other names are ignored (so a batch of image and
  // label serves both Step and Evaluate).
  absl::StatusOr<std::vector<Tensor>> Evaluate(const NamedTensors& inputs) const;

  // Calls `profiler` around each node of the algorithm's main graph from the next Step on (null:
  // none; steps are not captured while one is set). Not owned.
  void set_profiler(NodeProfiler* profiler);

  // Step capture, on backends that can (CUDA Graphs; off by default until it has run on a GPU):
  // once two steps have run with the same input shapes, the next two are captured (one graph
  // per buffer set the state alternates between) and from then on every step with those shapes
  // is one replay: no host work per node and no wait for the device. Different shapes run as
  // before and start over. A step that cannot be captured (a kernel reads a device value on the
  // host) runs as before, and capture_off_reason() says why.
  void set_capture(bool on);
  // Why steps are not captured (empty while they are, or may yet be).
  const std::string& capture_off_reason() const { return capture_.off_reason; }
  // Steps run as a replay since creation.
  int64_t replayed_steps() const { return capture_.replayed_steps; }

  // A host copy of a state value (a parameter or a training_info state item).
  absl::StatusOr<Tensor> State(const std::string& name) const;
  // The counters of StepResult as they stand now (before any step: after initialization).
  absl::StatusOr<StepResult> Counters() const;

  // The model with the current parameters as `graph` initializers and an initialization graph
  // of Constant nodes holding the current state: a new TrainingSession of it continues
  // bit-identically. (Writing it atomically is compiler/model_io.h's SaveModel; the runtime
  // does not depend on the compiler.)
  absl::StatusOr<onnx::ModelProto> Checkpoint() const;

 private:
  TrainingSession(Backend& backend) : backend_(backend) {}
  absl::Status Init(onnx::ModelProto model, const KernelRegistry& registry);
  absl::Status RunInitialization(const onnx::ModelProto& model, const ExecutorEnv& env);
  absl::Status BuildAlgorithm(const onnx::ModelProto& model, const ExecutorEnv& env);
  // bindings_ from update_binding; returns the bound algorithm outputs.
  absl::StatusOr<absl::flat_hash_set<std::string>> BindUpdates(const onnx::TrainingInfoProto& info);
  // Which algorithm outputs are the loss, ampc.applied, ampc.grad_norm and ampc.lr.
  absl::Status FindStepOutputs(const absl::flat_hash_set<std::string>& bound);
  absl::Status BuildEvaluation(const onnx::ModelProto& model, const ExecutorEnv& env);
  absl::StatusOr<std::vector<Tensor*>> OuterValues(const GraphExecutor& executor,
                                                   const std::string& graph_name);
  absl::StatusOr<Tensor> Feed(const ValueSpec& spec, const Tensor& tensor) const;
  // The counters, and with `with_last_step` the last step's outputs, in one copy to the host;
  // with them the first element of each of `losses`, appended to `loss_values`.
  absl::StatusOr<StepResult> ReadBack(bool with_last_step, std::span<const Tensor> losses,
                                      std::vector<float>* loss_values) const;
  // The algorithm's inputs in order: `inputs` and the learning rate input's `rate` (a host
  // tensor: a float, or kRateWords doubles where the backend computes the rate).
  absl::StatusOr<std::vector<Tensor>> AlgorithmFeeds(const NamedTensors& inputs,
                                                     const Tensor& rate) const;
  // `rate` as the algorithm's learning-rate input takes it.
  absl::StatusOr<Tensor> RateFeed(const ScheduledRate& rate) const;
  // Keeps the last step's loss for TakeSteps.
  absl::Status KeepLoss(bool replayed);
  // One captured step (training_capture.cc): the state buffers it reads and writes, and the outputs
  // it keeps (every algorithm output but the bound ones written into the spare state: each replay
  // writes them again).
  struct Captured {
    std::vector<const void*> state;  // StateAddresses() when captured
    std::vector<Tensor> outputs;
    std::unique_ptr<CapturedWork> work;
  };
  // Step capture (set_capture, training_capture.cc).
  struct CaptureState {
    bool on = false;
    std::string off_reason;
    std::vector<Shape> shapes;  // the algorithm inputs' shapes of the last steps
    int64_t steps_with_shapes = 0;
    std::vector<Tensor> feeds;  // the inputs captured graphs read, refilled each step
    std::vector<std::unique_ptr<Captured>> graphs;
    int64_t replayed_steps = 0;
  };
  // An algorithm output read back after each step: its index (-1: the algorithm has none) and
  // the last step's value (empty before a step).
  struct StepOutput {
    int index = -1;
    Tensor last;
  };
  absl::Status RunEager(std::span<const Tensor> feeds);
  // Runs the step as a replay when it can (capturing it first if needed): false when the step
  // must run eagerly instead.
  absl::StatusOr<bool> RunCaptured(std::span<const Tensor> feeds);
  absl::StatusOr<std::unique_ptr<Captured>> Capture();
  absl::Status OwnStateBuffers();
  absl::StatusOr<std::unique_ptr<Captured>> Record();
  absl::Status DropStateOutputs(Captured& captured) const;
  void CaptureOff(std::string reason);
  // Per algorithm output: the spare buffer a bound output may be written into, or null.
  std::vector<Tensor*> Destinations();
  std::vector<const void*> StateAddresses() const;
  // The step's outputs become the state; the state they replace becomes the spare.
  void Advance(std::vector<Tensor>& outputs);

  Backend& backend_;
  const KernelRegistry* registry_ = nullptr;
  std::map<std::string, int> opsets_;
  // The state, in file order: graph initializers, then initialization outputs.
  std::vector<std::string> state_names_;
  std::vector<Tensor> state_;
  absl::flat_hash_map<std::string, int> state_index_;
  int num_parameters_ = 0;  // the first state_ entries are `graph` initializers

  onnx::ModelProto saved_form_;  // the model without graph initializers and initialization body
  // The algorithm as the model has it (the NaN diagnosis reads it), and with the runtime's
  // fusions, which algorithm_ runs. Executors' kernels keep references to their graph's nodes.
  onnx::GraphProto algorithm_graph_;
  onnx::GraphProto executed_algorithm_;
  onnx::GraphProto inference_graph_;
  std::unique_ptr<GraphExecutor> algorithm_;
  std::vector<Tensor*> algorithm_outer_;
  std::vector<ValueSpec> algorithm_inputs_;
  std::vector<ValueSpec> data_inputs_;
  std::vector<std::pair<int, int>> bindings_;  // (state index, algorithm output index)
  // Per state entry, the buffer it held before the last step: where a step writes the new value
  // (so the state alternates between two buffer sets, which the captured graphs bake in).
  std::vector<Tensor> spare_;
  // The outputs read back after a step; the loss is the first algorithm output that is none of
  // the others and not bound.
  StepOutput loss_, applied_, norm_, lr_;
  bool keep_losses_ = false;
  std::vector<Tensor> kept_losses_;
  std::string loss_name_;

  bool profiling_ = false;
  CaptureState capture_;

  std::unique_ptr<GraphExecutor> inference_;
  std::vector<Tensor*> inference_outer_;
  std::vector<ValueSpec> eval_inputs_;
  std::vector<ValueSpec> eval_outputs_;
};

}  // namespace ampc
