"""ampc's gradients against torch.autograd on small graphs of the ops real exports contain (issue
27, item 2).

Each case is one op (or a few) with trained parameters and loss = ReduceSum(op(params) * r), r a
fixed data input. It is compiled with `ampc --train --loss=loss --optimizer=sgd --lr=1
--dtype=fp32 --loss-scale=none`, its step extracted with `ampc extract-step --with-state` and run
once by `ampc run` (ampc.lr = 1): each parameter's update P.ampc.next - P is then -dloss/dP. The
same function written in torch (float64) gives dloss/dP by autograd; they must agree to 1e-5 of the
largest |gradient| of each parameter (the step runs in FP32: rounding is ~1e-7 relative). A case
with state (BatchNormalization's running mean and variance) also compares the step's new state,
S.ampc.next, with what torch's training-mode forward leaves in its buffers, to the same 1e-5.

Exit 0 when all agree, 1 on a failure, 77 (skip) when torch is not importable.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIPPED: torch is not installed in this Python")
    sys.exit(77)

import onnx
from onnx import TensorProto, helper, numpy_helper

RTOL = 1e-5
NEXT = ".ampc.next"


def ints(values):
    return helper.make_tensor("v", TensorProto.INT64, [len(values)], values)


class Case:
    """params: trained initializers; nodes: ONNX nodes from them (and Constants) to `y`; torch_fn:
    the same function of the params as torch tensors. state: initializers the step updates but
    does not train (BatchNormalization's running statistics), passed to torch_fn by name as
    float64 tensors that it updates in place."""

    def __init__(self, name, params, nodes, y_shape, torch_fn, opset=17, state=None):
        self.name, self.params, self.nodes = name, params, nodes
        self.y_shape, self.torch_fn, self.opset = y_shape, torch_fn, opset
        self.state = state or {}

    def model(self) -> onnx.ModelProto:
        nodes = self.nodes + [helper.make_node("Mul", ["y", "r"], ["prod"]),
                              helper.make_node("ReduceSum", ["prod"], ["loss"], keepdims=0)]
        graph = helper.make_graph(
            nodes, self.name,
            [helper.make_tensor_value_info("r", TensorProto.FLOAT, self.y_shape)],
            [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
            [numpy_helper.from_array(v, k) for k, v in {**self.params, **self.state}.items()])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                 ir_version=11 if self.opset >= 23 else 8)


def const(name, values, dtype=np.int64):
    array = np.asarray(values, dtype=dtype)
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array, name))


def rand(*shape, seed=[0]):
    seed[0] += 1
    return np.random.default_rng(seed[0]).uniform(-1, 1, shape).astype(np.float32)


def rms_norm(x, s, eps=1e-5):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * s


def rotate(x, cos, sin, pos):
    c, s = cos[pos].unsqueeze(1), sin[pos].unsqueeze(1)  # [B, 1, S, D/2]
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([c * x1 - s * x2, s * x1 + c * x2], -1)


def batch_norm(x, g, b, mean, var):
    # torch's momentum is ONNX's 1 - momentum (0.9 there).
    return F.batch_norm(x, mean, var, g, b, training=True, momentum=0.1, eps=1e-5)


def cases() -> list[Case]:
    pos = [[0, 2, 1]]
    ge_idx = [[0, 3], [1, 1], [2, -1]]
    nd_idx = [[[2], [0]], [[1], [1]]]
    return [
        Case("gather_axis1", {"w": rand(3, 4, 5)},
             [const("i", [2, 0, 2]), helper.make_node("Gather", ["w", "i"], ["y"], axis=1)],
             [3, 3, 5], lambda w: w[:, [2, 0, 2]]),
        Case("slice_steps", {"w": rand(4, 6)},
             [const("s", [3, 0]), const("e", [0, 6]), const("a", [0, 1]), const("t", [-2, 2]),
              helper.make_node("Slice", ["w", "s", "e", "a", "t"], ["y"])],
             [2, 3], lambda w: w[[3, 1]][:, 0:6:2]),
        Case("layer_norm", {"x": rand(2, 3, 4), "g": rand(4), "b": rand(4)},
             [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], epsilon=1e-5)],
             [2, 3, 4], lambda x, g, b: F.layer_norm(x, (4,), g, b, 1e-5)),
        Case("softmax_axis1", {"w": rand(2, 3, 4)},
             [helper.make_node("Softmax", ["w"], ["y"], axis=1)],
             [2, 3, 4], lambda w: torch.softmax(w, 1)),
        Case("gather_elements_axis1", {"w": rand(3, 4)},
             [const("i", ge_idx), helper.make_node("GatherElements", ["w", "i"], ["y"], axis=1)],
             [3, 2], lambda w: torch.gather(w, 1, torch.tensor(ge_idx) % 4)),
        Case("gather_nd_batch_dims1", {"w": rand(2, 3, 4)},
             [const("i", nd_idx), helper.make_node("GatherND", ["w", "i"], ["y"], batch_dims=1)],
             [2, 2, 4], lambda w: torch.stack([w[b, [i[0] for i in nd_idx[b]]] for b in (0, 1)])),
        Case("einsum", {"a": rand(2, 3, 4), "b": rand(4, 5)},
             [helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,jk->bik")],
             [2, 3, 5], lambda a, b: torch.einsum("bij,jk->bik", a, b)),
        Case("einsum_ellipsis_summed_label", {"a": rand(2, 1, 3, 4), "b": rand(1, 2, 3, 4)},
             [helper.make_node("Einsum", ["a", "b"], ["y"], equation="...ij,...ij->...i")],
             [2, 2, 3], lambda a, b: torch.einsum("...ij,...ij->...i", a, b)),
        Case("matmul_broadcast_batch", {"q": rand(1, 2, 3, 4), "k": rand(2, 2, 4, 3)},
             [helper.make_node("MatMul", ["q", "k"], ["y"])],
             [2, 2, 3, 3], torch.matmul),
        Case("matmul_vector", {"v": rand(4), "w": rand(2, 4, 3)},
             [helper.make_node("MatMul", ["v", "w"], ["y"])],
             [2, 3], torch.matmul),
        Case("rms_normalization", {"x": rand(2, 3, 4), "s": rand(4)},
             [helper.make_node("RMSNormalization", ["x", "s"], ["y"], epsilon=1e-5)],
             [2, 3, 4], rms_norm, opset=23),
        Case("rotary_embedding", {"x": rand(1, 2, 3, 4), "c": rand(3, 2), "n": rand(3, 2)},
             [const("p", pos), helper.make_node("RotaryEmbedding", ["x", "c", "n", "p"], ["y"])],
             [1, 2, 3, 4], lambda x, c, n: rotate(x, c, n, torch.tensor(pos)), opset=23),
        Case("attention_causal", {"q": rand(1, 2, 3, 4), "k": rand(1, 2, 3, 4),
                                  "v": rand(1, 2, 3, 4)},
             [helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1)],
             [1, 2, 3, 4],
             lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), opset=23),
        Case("batch_norm_training", {"x": rand(4, 3, 2, 2), "g": rand(3), "b": rand(3)},
             [helper.make_node("BatchNormalization", ["x", "g", "b", "mean", "var"], ["y"],
                               epsilon=1e-5, momentum=0.9)],
             [4, 3, 2, 2], batch_norm,
             state={"mean": rand(3), "var": np.abs(rand(3)) + 0.5}),
        # As the legacy exporter writes it in training mode: the running statistics are outputs.
        Case("batch_norm_training_mode_outputs", {"x": rand(2, 3, 5), "g": rand(3), "b": rand(3)},
             [helper.make_node("BatchNormalization", ["x", "g", "b", "mean", "var"],
                               ["y", "mean_out", "var_out"], epsilon=1e-5, momentum=0.9,
                               training_mode=1)],
             [2, 3, 5], batch_norm, opset=15,
             state={"mean": rand(3), "var": np.abs(rand(3)) + 0.5}),
    ]


def run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:2])}: {done.stderr.strip().splitlines()[-1:]}")


def ampc_updates(ampc: str, case: Case, r: np.ndarray, work: pathlib.Path) -> dict:
    model, train, step = work / "model.onnx", work / "train.onnx", work / "step.onnx"
    onnx.save(case.model(), str(model))
    run([ampc, str(model), "-o", str(train), "--train", "--loss=loss", "--optimizer=sgd",
         "--lr=1", "--dtype=fp32", "--loss-scale=none"])
    run([ampc, "extract-step", str(train), "-o", str(step), "--with-state"])
    np.save(work / "r.npy", r)
    np.save(work / "lr.npy", np.array(1.0, np.float32))
    out = work / "out"
    run([ampc, "run", str(step), "--device=cpu", "--threads=1", f"--output-dir={out}",
         f"--input=r={work / 'r.npy'}", f"--input=ampc.lr={work / 'lr.npy'}"])
    updates = {p: np.load(out / f"{p}{NEXT}.npy").astype(np.float64) - v for p, v in
               case.params.items()}
    return updates, {s: np.load(out / f"{s}{NEXT}.npy").astype(np.float64) for s in case.state}


def torch_grads(case: Case, r: np.ndarray) -> tuple[dict, dict]:
    tensors = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
               for k, v in case.params.items()}
    state = {k: torch.tensor(v, dtype=torch.float64) for k, v in case.state.items()}
    y = case.torch_fn(*tensors.values(), **state)
    loss = (y * torch.tensor(r, dtype=torch.float64)).sum()
    loss.backward()
    return {k: t.grad.numpy() for k, t in tensors.items()}, {k: t.numpy() for k, t in state.items()}


def relative_gap(actual: np.ndarray, expected: np.ndarray) -> float:
    scale = max(float(np.max(np.abs(expected))), 1e-12)
    return float(np.max(np.abs(actual - expected))) / scale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ampc", required=True)
    args = parser.parse_args()
    failures = 0
    for case in cases():
        r = rand(*case.y_shape)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                updates, state = ampc_updates(args.ampc, case, r, pathlib.Path(tmp))
            except RuntimeError as error:
                print(f"FAIL {case.name}: {error}")
                failures += 1
                continue
        grads, torch_state = torch_grads(case, r)
        worst = max(relative_gap(-updates[p], grad) for p, grad in grads.items())
        ok = worst <= RTOL
        line = f"{case.name}: max |update + grad| / max |grad| = {worst:.2e}"
        for s, expected in torch_state.items():
            gap = relative_gap(state[s], expected)
            ok = ok and gap <= RTOL
            line += f"; {s} {gap:.2e}"
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {line}")
    print(f"{len(cases()) - failures} of {len(cases())} cases agree with torch.autograd")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
