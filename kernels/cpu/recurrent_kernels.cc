// ONNX's recurrent layers RNN, GRU and LSTM (every version): forward, reverse
// or bidirectional, either layout, sequence_lens, initial states, peepholes,
// clip and the spec's activations. The input projections of all steps are one
// GEMM per direction, the recurrent ones one per step; FP16/BF16 compute in
// FP32 (FP64 in FP64) and each output is rounded once to its type.
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
#include "runtime/status_macros.h"

namespace ampc {
namespace {

using linalg::Acc;
using recurrent::Activation;

// Input positions, the same in all three ops (RNN and GRU stop at initial_h).
enum Input { kX, kW, kR, kB, kSequenceLens, kInitialH, kInitialC, kP, kInputCount };

enum class Cell { kRnn, kGru, kLstm };

// What distinguishes the three ops: gates per step (in ONNX's order: RNN's one;
// GRU's z, r, h; LSTM's i, o, f, c) and the default activations of one
// direction.
struct CellTraits {
  Cell cell;
  int gates;
  std::vector<std::string> activations;
};

const CellTraits &RnnTraits() {
  static const CellTraits traits{Cell::kRnn, 1, {"Tanh"}};
  return traits;
}
const CellTraits &GruTraits() {
  static const CellTraits traits{Cell::kGru, 3, {"Sigmoid", "Tanh"}};
  return traits;
}
const CellTraits &LstmTraits() {
  static const CellTraits traits{Cell::kLstm, 4, {"Sigmoid", "Tanh", "Tanh"}};
  return traits;
}

// The node's attributes, checked.
struct Options {
  const CellTraits *traits;
  int directions;
  bool reverse;      // a one-way node that runs from the last step
  bool batch_major;  // layout 1: X, Y, initial and final states lead with the
                     // batch
  double clip;       // bound on every activation's input; infinity when absent
  bool linear_before_reset, input_forget;
  std::vector<Activation> activations;  // traits->activations.size() per direction
};

absl::StatusOr<Options> ReadOptions(const KernelContext &context, const CellTraits &traits) {
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

// Sizes, and where the step s, direction d and batch row b of each layout lie.
struct Dims {
  int64_t seq, batch, input, hidden, directions, gates;
  bool batch_major;

  int64_t XRow(int64_t s, int64_t b) const { return batch_major ? b * seq + s : s * batch + b; }
  int64_t YOffset(int64_t s, int64_t d, int64_t b) const {
    return (batch_major ? (b * seq + s) * directions + d : (s * directions + d) * batch + b) *
           hidden;
  }
  int64_t StateOffset(int64_t d, int64_t b) const {
    return (batch_major ? b * directions + d : d * batch + b) * hidden;
  }
  Shape YShape() const {
    return batch_major ? Shape{batch, seq, directions, hidden}
                       : Shape{seq, directions, batch, hidden};
  }
  Shape StateShape() const {
    return batch_major ? Shape{batch, directions, hidden} : Shape{directions, batch, hidden};
  }
};

absl::Status ExpectShape(const KernelContext &context, int input, const char *name,
                         const Shape &expected) {
  const Tensor *t = context.input(input);
  if (t == nullptr || t->shape() == expected) return absl::OkStatus();
  return NodeError(context, absl::StrCat(name, " has shape [", absl::StrJoin(t->shape(), ","),
                                         "], expected [", absl::StrJoin(expected, ","), "]"));
}

absl::Status CheckTypes(const KernelContext &context) {
  if (context.input(kX) == nullptr || context.input(kW) == nullptr ||
      context.input(kR) == nullptr) {
    return NodeError(context, "X, W and R are required");
  }
  const DType x = context.in(kX).dtype();
  for (int i = kW; i < std::min<int>(context.num_inputs(), kInputCount); ++i) {
    const Tensor *t = context.input(i);
    const DType want = i == kSequenceLens ? DType::kInt32 : x;
    if (t != nullptr && t->dtype() != want) {
      return NodeError(context, absl::StrCat("input ", i, " is ", DTypeName(t->dtype()),
                                             ", expected ", DTypeName(want)));
    }
  }
  return absl::OkStatus();
}

// Sizes from X and R; every other input must agree with them.
absl::StatusOr<Dims> ReadDims(const KernelContext &context, const Options &o) {
  const Tensor &x = context.in(kX);
  const Tensor &r = context.in(kR);
  if (x.rank() != 3 || r.rank() != 3) {
    return NodeError(context,
                     absl::StrCat("X and R must be 3-D, got [", absl::StrJoin(x.shape(), ","),
                                  "] and [", absl::StrJoin(r.shape(), ","), "]"));
  }
  Dims d{x.dim(o.batch_major ? 1 : 0),
         x.dim(o.batch_major ? 0 : 1),
         x.dim(2),
         r.dim(2),
         o.directions,
         o.traits->gates,
         o.batch_major};
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

// Each batch row's number of steps: sequence_lens, each in [0, seq], or seq for
// every row.
absl::StatusOr<std::vector<int64_t>> ReadLengths(const KernelContext &context, const Dims &d) {
  std::vector<int64_t> lengths(static_cast<size_t>(d.batch), d.seq);
  const Tensor *t = context.input(kSequenceLens);
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

// The node's floating-point inputs in the accumulation type; null where
// omitted.
template <typename T>
class AccInputs {
 public:
  AccInputs(const KernelContext &context, ThreadPool &pool) {
    for (int i = 0; i < std::min<int>(context.num_inputs(), kInputCount); ++i) {
      const Tensor *t = context.input(i);
      if (t != nullptr && i != kSequenceLens) inputs_[i].emplace(t->data<T>(), t->size(), pool);
    }
  }
  const Acc<T> *operator[](int i) const { return inputs_[i] ? inputs_[i]->data() : nullptr; }

 private:
  std::optional<linalg::AccInput<T>> inputs_[kInputCount];
};

// Everything one direction's run reads and writes, in the accumulation type A.
template <typename A>
struct DirectionRun {
  const Options &o;
  const Dims &d;
  const std::vector<int64_t> &lengths;
  ThreadPool &pool;
  int64_t dir;
  const A *x;
  const A *w;              // [gates*hidden, input]
  const A *r;              // [gates*hidden, hidden]
  const A *bias;           // [2*gates*hidden]: W's then R's; null when absent
  const A *p;              // LSTM peepholes [3*hidden] (i, o, f); null when absent
  const Activation *act;   // this direction's functions
  std::vector<A> &y;       // the Y output, all directions
  std::vector<A> &h;       // [batch, hidden] state
  std::vector<A> &c;       // LSTM cell state [batch, hidden]
  std::vector<A> xw = {};  // input projections of every step, biases folded in
  std::vector<A> hr = {};  // [batch, gates*hidden] recurrent projections of one step
  std::vector<A> rh = {};  // GRU: (r * h) of one step

  int64_t gh() const { return d.gates * d.hidden; }
  A Clip(A v) const { return std::max<A>(-o.clip, std::min<A>(o.clip, v)); }
  A Peephole(int gate, int64_t j) const { return p == nullptr ? A{0} : p[gate * d.hidden + j]; }
  // The time index of step t for batch row b (reverse runs from the row's last
  // step).
  int64_t Time(int64_t t, int64_t b) const { return reversed() ? lengths[b] - 1 - t : t; }
  bool reversed() const { return o.reverse || dir == 1; }
};

// xw = X W^T + W's bias + R's bias, except R's bias of GRU's h gate under
// linear_before_reset (which the reset gate scales).
template <typename A>
void ProjectInputs(DirectionRun<A> &run) {
  const Dims &d = run.d;
  const int64_t rows = d.seq * d.batch, gh = run.gh();
  run.xw.assign(static_cast<size_t>(rows * gh), A{0});
  linalg::ParallelGemm<A>(run.pool, false, true, rows, gh, d.input, A{1}, run.x, d.input, run.w,
                          d.input, A{0}, run.xw.data(), gh);
  if (run.bias == nullptr) return;
  std::vector<A> bias(run.bias, run.bias + gh);
  const bool keep_h = run.o.traits->cell == Cell::kGru && run.o.linear_before_reset;
  for (int64_t k = 0; k < gh; ++k) {
    if (!keep_h || k < 2 * d.hidden) bias[k] += run.bias[gh + k];
  }
  run.pool.ParallelFor(rows, std::max<int64_t>(1, 16384 / gh), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t k = 0; k < gh; ++k) run.xw[i * gh + k] += bias[k];
    }
  });
}

// Calls fn(b, s) in parallel for each batch row b that takes step t, s its time
// index.
template <typename A, typename Fn>
void ForActiveRows(const DirectionRun<A> &run, int64_t t, Fn &&fn) {
  const int64_t grain = std::max<int64_t>(1, 4096 / run.gh());
  run.pool.ParallelFor(run.d.batch, grain, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      if (t < run.lengths[b]) fn(b, run.Time(t, b));
    }
  });
}

// hr[:, :n] = h R[:n]^T for the first n gate rows of R.
template <typename A>
void ProjectState(DirectionRun<A> &run, int64_t n) {
  linalg::ParallelGemm<A>(run.pool, false, true, run.d.batch, n, run.d.hidden, A{1}, run.h.data(),
                          run.d.hidden, run.r, run.d.hidden, A{0}, run.hr.data(), run.gh());
}

template <typename A>
const A *XwRow(const DirectionRun<A> &run, int64_t s, int64_t b) {
  return run.xw.data() + run.d.XRow(s, b) * run.gh();
}

template <typename A>
void WriteY(DirectionRun<A> &run, int64_t s, int64_t b) {
  const A *h = run.h.data() + b * run.d.hidden;
  std::copy(h, h + run.d.hidden, run.y.data() + run.d.YOffset(s, run.dir, b));
}

// RNN: h = f(x W^T + h R^T + biases).
template <typename A>
void RnnStep(DirectionRun<A> &run, int64_t t) {
  ProjectState(run, run.gh());
  const int64_t hidden = run.d.hidden;
  ForActiveRows(run, t, [&](int64_t b, int64_t s) {
    const A *xw = XwRow(run, s, b);
    const A *hr = run.hr.data() + b * hidden;
    A *h = run.h.data() + b * hidden;
    for (int64_t j = 0; j < hidden; ++j) h[j] = run.act[0](run.Clip(xw[j] + hr[j]));
    WriteY(run, s, b);
  });
}

// LSTM, gates i, o, f, c at columns 0, H, 2H, 3H; peepholes i and f see the old
// cell state, o the new one; input_forget couples f = 1 - i.
template <typename A>
void LstmStep(DirectionRun<A> &run, int64_t t) {
  ProjectState(run, run.gh());
  const int64_t hidden = run.d.hidden;
  const Activation &f = run.act[0], &g = run.act[1], &h_act = run.act[2];
  ForActiveRows(run, t, [&](int64_t b, int64_t s) {
    const A *xw = XwRow(run, s, b);
    const A *hr = run.hr.data() + b * run.gh();
    A *h = run.h.data() + b * hidden;
    A *c = run.c.data() + b * hidden;
    for (int64_t j = 0; j < hidden; ++j) {
      const auto gate = [&](int k) { return xw[k * hidden + j] + hr[k * hidden + j]; };
      const A i = f(run.Clip(gate(0) + run.Peephole(0, j) * c[j]));
      const A forget =
          run.o.input_forget ? A{1} - i : f(run.Clip(gate(2) + run.Peephole(2, j) * c[j]));
      const A cell = forget * c[j] + i * g(run.Clip(gate(3)));
      const A out = f(run.Clip(gate(1) + run.Peephole(1, j) * cell));
      c[j] = cell;
      h[j] = out * h_act(cell);
    }
    WriteY(run, s, b);
  });
}

// GRU, gates z, r, h at columns 0, H, 2H. First z and r, leaving z in hr's z
// columns and the recurrent part of the h gate in hr's h columns: r * (h Rh^T +
// Rbh) under linear_before_reset, else (r * h) Rh^T. Then h = (1 - z) * g(x
// Wh^T + that + biases) + z * h.
template <typename A>
void GruStep(DirectionRun<A> &run, int64_t t) {
  const int64_t hidden = run.d.hidden, gh = run.gh();
  const bool linear = run.o.linear_before_reset;
  ProjectState(run, linear ? gh : 2 * hidden);
  const A *rbh = run.bias == nullptr ? nullptr : run.bias + gh + 2 * hidden;
  const Activation &f = run.act[0], &g = run.act[1];
  ForActiveRows(run, t, [&](int64_t b, int64_t s) {
    const A *xw = XwRow(run, s, b);
    A *hr = run.hr.data() + b * gh;
    const A *h = run.h.data() + b * hidden;
    for (int64_t j = 0; j < hidden; ++j) {
      hr[j] = f(run.Clip(xw[j] + hr[j]));
      const A reset = f(run.Clip(xw[hidden + j] + hr[hidden + j]));
      if (linear) {
        hr[2 * hidden + j] = reset * (hr[2 * hidden + j] + (rbh == nullptr ? A{0} : rbh[j]));
      } else {
        run.rh[b * hidden + j] = reset * h[j];
      }
    }
  });
  if (!linear) {
    linalg::ParallelGemm<A>(run.pool, false, true, run.d.batch, hidden, hidden, A{1}, run.rh.data(),
                            hidden, run.r + 2 * hidden * hidden, hidden, A{0},
                            run.hr.data() + 2 * hidden, gh);
  }
  ForActiveRows(run, t, [&](int64_t b, int64_t s) {
    const A *xw = XwRow(run, s, b);
    const A *hr = run.hr.data() + b * gh;
    A *h = run.h.data() + b * hidden;
    for (int64_t j = 0; j < hidden; ++j) {
      const A candidate = g(run.Clip(xw[2 * hidden + j] + hr[2 * hidden + j]));
      h[j] = (A{1} - hr[j]) * candidate + hr[j] * h[j];
    }
    WriteY(run, s, b);
  });
}

// One direction: states from initial_h/initial_c (or zeros), every step, then
// the final states into y_h and y_c. Rows past their length keep their state,
// and their Y stays zero.
template <typename A>
void RunDirection(DirectionRun<A> &run, const A *h0, const A *c0, std::vector<A> &y_h,
                  std::vector<A> &y_c) {
  const Dims &d = run.d;
  for (int64_t b = 0; b < d.batch; ++b) {
    const int64_t at = d.StateOffset(run.dir, b);
    for (int64_t j = 0; j < d.hidden; ++j) {
      run.h[b * d.hidden + j] = h0 == nullptr ? A{0} : h0[at + j];
      run.c[b * d.hidden + j] = c0 == nullptr ? A{0} : c0[at + j];
    }
  }
  ProjectInputs(run);
  run.hr.assign(static_cast<size_t>(d.batch * run.gh()), A{0});
  run.rh.assign(static_cast<size_t>(d.batch * d.hidden), A{0});
  const int64_t steps =
      run.lengths.empty() ? 0 : *std::max_element(run.lengths.begin(), run.lengths.end());
  for (int64_t t = 0; t < steps; ++t) {
    switch (run.o.traits->cell) {
      case Cell::kRnn:
        RnnStep(run, t);
        break;
      case Cell::kGru:
        GruStep(run, t);
        break;
      case Cell::kLstm:
        LstmStep(run, t);
        break;
    }
  }
  for (int64_t b = 0; b < d.batch; ++b) {
    const int64_t at = d.StateOffset(run.dir, b);
    std::copy_n(run.h.data() + b * d.hidden, d.hidden, y_h.data() + at);
    std::copy_n(run.c.data() + b * d.hidden, d.hidden, y_c.data() + at);
  }
}

// Output i rounded once from its accumulated values; nothing when the node
// omits it.
template <typename T>
absl::Status WriteOutput(KernelContext &context, int i, Shape shape,
                         const std::vector<Acc<T>> &values) {
  const onnx::NodeProto &node = context.info().node;
  if (i >= node.output_size() || node.output(i).empty()) return absl::OkStatus();
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(i, std::move(shape), context.in(kX).dtype()));
  linalg::NarrowFromAcc(values.data(), out->size(), out->data<T>());
  return absl::OkStatus();
}

template <typename T>
absl::Status RecurrentTyped(KernelContext &context, const Options &o, const Dims &d,
                            const std::vector<int64_t> &lengths) {
  using A = Acc<T>;
  ThreadPool &pool = CpuOf(context.backend()).pool();
  linalg::SingleThreadedBlas();
  const AccInputs<T> in(context, pool);
  const int64_t gh = d.gates * d.hidden, per_direction = o.traits->activations.size();
  std::vector<A> y(static_cast<size_t>(d.seq * d.directions * d.batch * d.hidden), A{0});
  std::vector<A> y_h(static_cast<size_t>(d.directions * d.batch * d.hidden));
  std::vector<A> y_c(y_h.size());
  std::vector<A> h(static_cast<size_t>(d.batch * d.hidden)), c(h.size());
  for (int64_t dir = 0; dir < d.directions; ++dir) {
    DirectionRun<A> run{o,
                        d,
                        lengths,
                        pool,
                        dir,
                        in[kX],
                        in[kW] + dir * gh * d.input,
                        in[kR] + dir * gh * d.hidden,
                        in[kB] == nullptr ? nullptr : in[kB] + dir * 2 * gh,
                        in[kP] == nullptr ? nullptr : in[kP] + dir * 3 * d.hidden,
                        o.activations.data() + dir * per_direction,
                        y,
                        h,
                        c};
    RunDirection(run, in[kInitialH], in[kInitialC], y_h, y_c);
  }
  AMPC_RETURN_IF_ERROR(WriteOutput<T>(context, 0, d.YShape(), y));
  AMPC_RETURN_IF_ERROR(WriteOutput<T>(context, 1, d.StateShape(), y_h));
  if (o.traits->cell == Cell::kLstm) {
    AMPC_RETURN_IF_ERROR(WriteOutput<T>(context, 2, d.StateShape(), y_c));
  }
  return absl::OkStatus();
}

absl::Status RunRecurrent(KernelContext &context, const CellTraits &traits) {
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

absl::Status Rnn(KernelContext &context) { return RunRecurrent(context, RnnTraits()); }
absl::Status Gru(KernelContext &context) { return RunRecurrent(context, GruTraits()); }
absl::Status Lstm(KernelContext &context) { return RunRecurrent(context, LstmTraits()); }

}  // namespace

void RegisterRecurrentKernels(KernelRegistry &r) {
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  const std::vector<TypeConstraint> constraints = {{kX, floats}, {kSequenceLens, {DType::kInt32}}};
  r.Register("cpu", "", "RNN", constraints, Rnn);
  r.Register("cpu", "", "GRU", constraints, Gru);
  r.Register("cpu", "", "LSTM", constraints, Lstm);
}

}  // namespace ampc
