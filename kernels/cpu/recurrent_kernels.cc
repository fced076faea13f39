// ONNX's recurrent layers RNN, GRU and LSTM (every version): forward, reverse or bidirectional,
// either layout, sequence_lens, initial states, peepholes, clip and the spec's activations. The
// input projections of all steps are one GEMM per direction, the recurrent ones one per step;
// FP16/BF16 compute in FP32 (FP64 in FP64) and each output is rounded once to its type.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/linalg_gemm.h"
#include "kernels/cpu/recurrent_activation.h"
#include "kernels/cpu/recurrent_cell.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using linalg::Acc;
using recurrent::Cell;
using recurrent::CellTraits;
using recurrent::Dims;
using recurrent::DirectionRun;
using recurrent::Options;

// Input positions, the same in all three ops (RNN and GRU stop at initial_h).
enum Input { kX, kW, kR, kB, kSequenceLens, kInitialH, kInitialC, kP, kInputCount };

const CellTraits& RnnTraits() {
  static const CellTraits traits{Cell::kRnn, 1, {"Tanh"}};
  return traits;
}
const CellTraits& GruTraits() {
  static const CellTraits traits{Cell::kGru, 3, {"Sigmoid", "Tanh"}};
  return traits;
}
const CellTraits& LstmTraits() {
  static const CellTraits traits{Cell::kLstm, 4, {"Sigmoid", "Tanh", "Tanh"}};
  return traits;
}

// The node's attributes, checked.
absl::StatusOr<Options> ReadOptions(const KernelContext& context, const CellTraits& traits) {
  const Attributes attributes = context.attributes();
  Options o{&traits, 1, false, false, std::numeric_limits<double>::infinity(), false, false, {}};
  const std::string direction = attributes.String("direction", "forward");
  if (direction == "bidirectional") {
    o.directions = 2;
  } else if (direction == "reverse") {
    o.reverse = true;
  } else if (direction != "forward") {
    return NodeError(context, absl::StrCat("unknown direction '", direction, "'"));
  }
  const int64_t layout = attributes.Int("layout", 0);
  if (layout != 0 && layout != 1) {
    return NodeError(context, absl::StrCat("layout must be 0 or 1, got ", layout));
  }
  o.batch_major = layout == 1;
  if (attributes.Has("clip")) {
    o.clip = attributes.Float("clip", 0);
    if (!(o.clip > 0)) return NodeError(context, absl::StrCat("clip must be > 0, got ", o.clip));
  }
  o.linear_before_reset = attributes.Int("linear_before_reset", 0) != 0;
  o.input_forget = attributes.Int("input_forget", 0) != 0;
  AMPC_ASSIGN_OR_RETURN(o.activations,
                        recurrent::ReadActivations(context, traits.activations, o.directions));
  return o;
}

absl::Status ExpectShape(const KernelContext& context, int input, const char* name,
                         const Shape& expected) {
  const Tensor* t = context.input(input);
  if (t == nullptr || t->shape() == expected) return absl::OkStatus();
  return NodeError(context, absl::StrCat(name, " has shape [", absl::StrJoin(t->shape(), ","),
                                         "], expected [", absl::StrJoin(expected, ","), "]"));
}

absl::Status CheckTypes(const KernelContext& context) {
  if (context.input(kX) == nullptr || context.input(kW) == nullptr ||
      context.input(kR) == nullptr) {
    return NodeError(context, "X, W and R are required");
  }
  const DType x = context.in(kX).dtype();
  for (int i = kW; i < std::min<int>(context.num_inputs(), kInputCount); ++i) {
    const Tensor* t = context.input(i);
    const DType want = i == kSequenceLens ? DType::kInt32 : x;
    if (t != nullptr && t->dtype() != want) {
      return NodeError(context, absl::StrCat("input ", i, " is ", DTypeName(t->dtype()),
                                             ", expected ", DTypeName(want)));
    }
  }
  return absl::OkStatus();
}

// Sizes from X and R; every other input must agree with them.
absl::StatusOr<Dims> ReadDims(const KernelContext& context, const Options& o) {
  const Tensor& x = context.in(kX);
  const Tensor& r = context.in(kR);
  if (x.rank() != 3 || r.rank() != 3) {
    return NodeError(context,
                     absl::StrCat("X and R must be 3-D, got [", absl::StrJoin(x.shape(), ","),
                                  "] and [", absl::StrJoin(r.shape(), ","), "]"));
  }
  const Dims d{.seq = x.dim(o.batch_major ? 1 : 0),
               .batch = x.dim(o.batch_major ? 0 : 1),
               .input = x.dim(2),
               .hidden = r.dim(2),
               .directions = o.directions,
               .gates = o.traits->gates,
               .batch_major = o.batch_major};
  const int64_t gh = d.gates * d.hidden;
  const int64_t hidden_size = context.attributes().Int("hidden_size", d.hidden);
  if (hidden_size != d.hidden) {
    return NodeError(context, absl::StrCat("hidden_size is ", hidden_size, " but R is [",
                                           absl::StrJoin(r.shape(), ","), "]"));
  }
  AMPC_RETURN_IF_ERROR(ExpectShape(context, kW, "W", {d.directions, gh, d.input}));
  AMPC_RETURN_IF_ERROR(ExpectShape(context, kR, "R", {d.directions, gh, d.hidden}));
  AMPC_RETURN_IF_ERROR(ExpectShape(context, kB, "B", {d.directions, 2 * gh}));
  AMPC_RETURN_IF_ERROR(ExpectShape(context, kSequenceLens, "sequence_lens", {d.batch}));
  AMPC_RETURN_IF_ERROR(ExpectShape(context, kInitialH, "initial_h", d.StateShape()));
  if (o.traits->cell == Cell::kLstm) {
    AMPC_RETURN_IF_ERROR(ExpectShape(context, kInitialC, "initial_c", d.StateShape()));
    AMPC_RETURN_IF_ERROR(ExpectShape(context, kP, "P", {d.directions, 3 * d.hidden}));
  }
  if (!linalg::FitsBlas({d.seq * d.batch, gh, d.input, d.hidden})) {
    return NodeError(context, "a matrix dimension exceeds 2^31-1");
  }
  return d;
}

// Each batch row's number of steps: sequence_lens, each in [0, seq], or seq for every row.
absl::StatusOr<std::vector<int64_t>> ReadLengths(const KernelContext& context, const Dims& d) {
  std::vector<int64_t> lengths(static_cast<size_t>(d.batch), d.seq);
  const Tensor* t = context.input(kSequenceLens);
  if (t == nullptr) return lengths;
  for (int64_t b = 0; b < d.batch; ++b) {
    lengths[b] = t->data<int32_t>()[b];
    if (lengths[b] < 0 || lengths[b] > d.seq) {
      return NodeError(context, absl::StrCat("sequence_lens[", b, "] is ", lengths[b],
                                             ", outside [0, ", d.seq, "]"));
    }
  }
  return lengths;
}

// The node's floating-point inputs in the accumulation type; null where omitted.
template <typename T>
class AccInputs {
 public:
  AccInputs(const KernelContext& context, ThreadPool& pool) {
    for (int i = 0; i < std::min<int>(context.num_inputs(), kInputCount); ++i) {
      const Tensor* t = context.input(i);
      if (t != nullptr && i != kSequenceLens) inputs_[i].emplace(t->data<T>(), t->size(), pool);
    }
  }
  const Acc<T>* operator[](int i) const { return inputs_[i] ? inputs_[i]->data() : nullptr; }

 private:
  std::optional<linalg::AccInput<T>> inputs_[kInputCount];
};

// Output i rounded once from its accumulated values; nothing when the node omits it.
template <typename T>
absl::Status WriteOutput(KernelContext& context, int i, Shape shape,
                         const std::vector<Acc<T>>& values) {
  const onnx::NodeProto& node = context.info().node;
  if (i >= node.output_size() || node.output(i).empty()) return absl::OkStatus();
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(i, std::move(shape), context.in(kX).dtype()));
  linalg::NarrowFromAcc(values.data(), out->size(), out->data<T>());
  return absl::OkStatus();
}

template <typename T>
absl::Status RecurrentTyped(KernelContext& context, const Options& o, const Dims& d,
                            const std::vector<int64_t>& lengths) {
  using A = Acc<T>;
  ThreadPool& pool = CpuOf(context.backend()).pool();
  linalg::SingleThreadedBlas();
  const AccInputs<T> in(context, pool);
  const int64_t gh = d.gates * d.hidden, per_direction = o.traits->activations.size();
  std::vector<A> y(static_cast<size_t>(d.seq * d.directions * d.batch * d.hidden), A{0});
  std::vector<A> y_h(static_cast<size_t>(d.directions * d.batch * d.hidden));
  std::vector<A> y_c(y_h.size());
  std::vector<A> h(static_cast<size_t>(d.batch * d.hidden)), c(h.size());
  for (int64_t dir = 0; dir < d.directions; ++dir) {
    const A* bias = in[kB] == nullptr ? nullptr : in[kB] + dir * 2 * gh;
    const A* peepholes = in[kP] == nullptr ? nullptr : in[kP] + dir * 3 * d.hidden;
    DirectionRun<A> run{.o = o,
                        .d = d,
                        .lengths = lengths,
                        .pool = pool,
                        .dir = dir,
                        .x = in[kX],
                        .w = in[kW] + dir * gh * d.input,
                        .r = in[kR] + dir * gh * d.hidden,
                        .bias = bias,
                        .p = peepholes,
                        .act = o.activations.data() + dir * per_direction,
                        .y = y,
                        .h = h,
                        .c = c};
    recurrent::RunDirection(run, in[kInitialH], in[kInitialC], y_h, y_c);
  }
  AMPC_RETURN_IF_ERROR(WriteOutput<T>(context, 0, d.YShape(), y));
  AMPC_RETURN_IF_ERROR(WriteOutput<T>(context, 1, d.StateShape(), y_h));
  if (o.traits->cell == Cell::kLstm) {
    AMPC_RETURN_IF_ERROR(WriteOutput<T>(context, 2, d.StateShape(), y_c));
  }
  return absl::OkStatus();
}

absl::Status RunRecurrent(KernelContext& context, const CellTraits& traits) {
  AMPC_RETURN_IF_ERROR(CheckTypes(context));
  AMPC_ASSIGN_OR_RETURN(const Options o, ReadOptions(context, traits));
  AMPC_ASSIGN_OR_RETURN(const Dims d, ReadDims(context, o));
  AMPC_ASSIGN_OR_RETURN(const std::vector<int64_t> lengths, ReadLengths(context, d));
  absl::Status status;
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(context.in(kX).dtype(), [&]<typename T>() {
    status = RecurrentTyped<T>(context, o, d, lengths);
  });
  return handled ? status : linalg::UnsupportedType(context);
}

absl::Status Rnn(KernelContext& context) { return RunRecurrent(context, RnnTraits()); }
absl::Status Gru(KernelContext& context) { return RunRecurrent(context, GruTraits()); }
absl::Status Lstm(KernelContext& context) { return RunRecurrent(context, LstmTraits()); }

}  // namespace

void RegisterRecurrentKernels(KernelRegistry& r) {
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  const std::vector<TypeConstraint> constraints = {{kX, floats}, {kSequenceLens, {DType::kInt32}}};
  r.Register("cpu", "", "RNN", constraints, Rnn);
  r.Register("cpu", "", "GRU", constraints, Gru);
  r.Register("cpu", "", "LSTM", constraints, Lstm);
}

}  // namespace ampc
