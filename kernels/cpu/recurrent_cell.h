// One direction of ONNX's RNN, GRU and LSTM over a whole sequence, in the accumulation type A:
// the node's options and sizes as recurrent_kernels.cc reads them, one step of each cell, and the
// run over every step that writes Y and the final states.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/linalg_gemm.h"
#include "kernels/cpu/recurrent_activation.h"
#include "runtime/core/thread_pool.h"

namespace ampc::recurrent {

enum class Cell { kRnn, kGru, kLstm };

// What distinguishes the three ops: gates per step (in ONNX's order: RNN's one; GRU's z, r, h;
// LSTM's i, o, f, c) and the default activations of one direction.
struct CellTraits {
  Cell cell;
  int gates;
  std::vector<std::string> activations;
};

// A node's attributes (recurrent_kernels.cc reads and checks them).
struct Options {
  const CellTraits* traits;
  int directions;
  bool reverse;      // a one-way node that runs from the last step
  bool batch_major;  // layout 1: X, Y, initial and final states lead with the batch
  double clip;       // bound on every activation's input; infinity when absent
  bool linear_before_reset, input_forget;
  std::vector<Activation> activations;  // traits->activations.size() per direction
};

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

// Everything one direction's run reads and writes, in the accumulation type A.
template <typename A>
struct DirectionRun {
  const Options& o;
  const Dims& d;
  const std::vector<int64_t>& lengths;
  ThreadPool& pool;
  int64_t dir;
  const A* x;
  const A* w;              // [gates*hidden, input]
  const A* r;              // [gates*hidden, hidden]
  const A* bias;           // [2*gates*hidden]: W's then R's; null when absent
  const A* p;              // LSTM peepholes [3*hidden] (i, o, f); null when absent
  const Activation* act;   // this direction's functions
  std::vector<A>& y;       // the Y output, all directions
  std::vector<A>& h;       // [batch, hidden] state
  std::vector<A>& c;       // LSTM cell state [batch, hidden]
  std::vector<A> xw = {};  // input projections of every step, biases folded in
  std::vector<A> hr = {};  // [batch, gates*hidden] recurrent projections of one step
  std::vector<A> rh = {};  // GRU: (r * h) of one step

  int64_t gh() const { return d.gates * d.hidden; }
  A Clip(A v) const { return std::max<A>(-o.clip, std::min<A>(o.clip, v)); }
  A Peephole(int gate, int64_t j) const { return p == nullptr ? A{0} : p[gate * d.hidden + j]; }
  // The time index of step t for batch row b (reverse runs from the row's last step).
  int64_t Time(int64_t t, int64_t b) const { return reversed() ? lengths[b] - 1 - t : t; }
  bool reversed() const { return o.reverse || dir == 1; }
};

// xw = X W^T + W's bias + R's bias, except R's bias of GRU's h gate under linear_before_reset
// (which the reset gate scales).
template <typename A>
void ProjectInputs(DirectionRun<A>& run) {
  const Dims& d = run.d;
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

// Calls fn(b, s) in parallel for each batch row b that takes step t, s its time index.
template <typename A, typename Fn>
void ForActiveRows(const DirectionRun<A>& run, int64_t t, Fn&& fn) {
  const int64_t grain = std::max<int64_t>(1, 4096 / run.gh());
  run.pool.ParallelFor(run.d.batch, grain, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      if (t < run.lengths[b]) fn(b, run.Time(t, b));
    }
  });
}

// hr[:, :n] = h R[:n]^T for the first n gate rows of R.
template <typename A>
void ProjectState(DirectionRun<A>& run, int64_t n) {
  linalg::ParallelGemm<A>(run.pool, false, true, run.d.batch, n, run.d.hidden, A{1}, run.h.data(),
                          run.d.hidden, run.r, run.d.hidden, A{0}, run.hr.data(), run.gh());
}

template <typename A>
const A* XwRow(const DirectionRun<A>& run, int64_t s, int64_t b) {
  return run.xw.data() + run.d.XRow(s, b) * run.gh();
}

template <typename A>
void WriteY(DirectionRun<A>& run, int64_t s, int64_t b) {
  const A* h = run.h.data() + b * run.d.hidden;
  std::copy(h, h + run.d.hidden, run.y.data() + run.d.YOffset(s, run.dir, b));
}

// RNN: h = f(x W^T + h R^T + biases).
template <typename A>
void RnnStep(DirectionRun<A>& run, int64_t t) {
  ProjectState(run, run.gh());
  const int64_t hidden = run.d.hidden;
  ForActiveRows(run, t, [&](int64_t b, int64_t s) {
    const A* xw = XwRow(run, s, b);
    const A* hr = run.hr.data() + b * hidden;
    A* h = run.h.data() + b * hidden;
    for (int64_t j = 0; j < hidden; ++j) h[j] = run.act[0](run.Clip(xw[j] + hr[j]));
    WriteY(run, s, b);
  });
}

// LSTM, gates i, o, f, c at columns 0, H, 2H, 3H; peepholes i and f see the old cell state, o the
// new one; input_forget couples f = 1 - i.
template <typename A>
void LstmStep(DirectionRun<A>& run, int64_t t) {
  ProjectState(run, run.gh());
  const int64_t hidden = run.d.hidden;
  const Activation &f = run.act[0], &g = run.act[1], &h_act = run.act[2];
  ForActiveRows(run, t, [&](int64_t b, int64_t s) {
    const A* xw = XwRow(run, s, b);
    const A* hr = run.hr.data() + b * run.gh();
    A* h = run.h.data() + b * hidden;
    A* c = run.c.data() + b * hidden;
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

// GRU, gates z, r, h at columns 0, H, 2H. First z and r, leaving z in hr's z columns and the
// recurrent part of the h gate in hr's h columns: r * (h Rh^T + Rbh) under linear_before_reset,
// else (r * h) Rh^T. Then h = (1 - z) * g(x Wh^T + that + biases) + z * h.
template <typename A>
void GruStep(DirectionRun<A>& run, int64_t t) {
  const int64_t hidden = run.d.hidden, gh = run.gh();
  const bool linear = run.o.linear_before_reset;
  ProjectState(run, linear ? gh : 2 * hidden);
  const A* rbh = run.bias == nullptr ? nullptr : run.bias + gh + 2 * hidden;
  const Activation &f = run.act[0], &g = run.act[1];
  ForActiveRows(run, t, [&](int64_t b, int64_t s) {
    const A* xw = XwRow(run, s, b);
    A* hr = run.hr.data() + b * gh;
    const A* h = run.h.data() + b * hidden;
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
    const A* xw = XwRow(run, s, b);
    const A* hr = run.hr.data() + b * gh;
    A* h = run.h.data() + b * hidden;
    for (int64_t j = 0; j < hidden; ++j) {
      const A candidate = g(run.Clip(xw[2 * hidden + j] + hr[2 * hidden + j]));
      h[j] = (A{1} - hr[j]) * candidate + hr[j] * h[j];
    }
    WriteY(run, s, b);
  });
}

// One direction: states from initial_h/initial_c (or zeros), every step, then the final states into
// y_h and y_c. Rows past their length keep their state, and their Y stays zero.
template <typename A>
void RunDirection(DirectionRun<A>& run, const A* h0, const A* c0, std::vector<A>& y_h,
                  std::vector<A>& y_c) {
  const Dims& d = run.d;
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
    if (run.lengths[b] == 0) {  // no step: zero final states, as in onnxruntime
      std::fill_n(y_h.data() + at, d.hidden, A{0});
      std::fill_n(y_c.data() + at, d.hidden, A{0});
      continue;
    }
    std::copy_n(run.h.data() + b * d.hidden, d.hidden, y_h.data() + at);
    std::copy_n(run.c.data() + b * d.hidden, d.hidden, y_c.data() + at);
  }
}

}  // namespace ampc::recurrent
