"""BF16 outputs with ai.ampc versions run in onnxruntime as in ampc (docs/autocast.md).

ONNX has no bfloat16 Conv, MaxPool, AveragePool or GlobalAveragePool before opset 22, so
`ampc --dtype=bf16` compiles them to their ai.ampc versions and carries one model-local function
per op (Cast to float32, the standard op, Cast to bfloat16). For each model below (opset 17, built
here with onnx.helper):

  - every such node of the output is in domain ai.ampc, and the output holds a function for it;
  - the checker of a recent onnx (PyPI) accepts the output with full type inference, knowing
    ai.ampc only through those functions;
  - onnxruntime (CPU), which inlines the functions, runs it; so does `ampc run` (ampc's CPU
    kernels in BF16), on the same seeded inputs;
  - the two agree to AGREE_RTOL per element: both compute each op's float32 result and round it
    to bfloat16 once, so they differ only where their float32 sums (in different orders)
    straddle a rounding boundary, by one bfloat16 ulp (2^-8 relative), which a following
    average can carry into a second rounding: 2^-6 covers that and nothing coarser;
  - MaxPool indices agree exactly where the pool reads a model input (forced low with
    --lower-node; a lone MaxPool would follow its FP32 input), rounded once the same way;
  - both are within FP32_ATOL * max|y| of the float32 model run by onnxruntime: a few bfloat16
    roundings (2^-9 relative each) of O(1) values.
A small CNN (Conv with a bias, BatchNormalization, Relu, MaxPool, grouped Conv without one,
AveragePool, GlobalAveragePool, Gemm, SoftmaxCrossEntropyLoss) is also compiled with
`--train --dtype=bf16`: its forward's Conv and pools are ai.ampc versions (the Conv without a
bias gets a zero one), the training step written by `ampc extract-step` passes the full check
too, so the gradient ops' bodies (ConvGrad, MaxPoolGrad, AveragePoolGrad) are valid on BF16
tensors, and ampc on that output changes no byte. (onnxruntime's CPU provider has no BF16
BatchNormalization, so the step is not run here.)
Exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

AGREE_RTOL = 2.0**-6
FP32_ATOL = 2e-2
VERSIONS = {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool"}


def model(name: str, inputs, outputs, nodes) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def models() -> dict[str, onnx.ModelProto]:
    f = TensorProto.FLOAT
    return {
        "conv_bias_maxpool": model(
            "conv_bias_maxpool", [("x", [2, 3, 9, 8]), ("w", [4, 3, 3, 3]), ("b", [4])],
            [("y", f, [2, 4, 5, 4])],
            [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1])]),
        "grouped_conv_avgpool_gap": model(
            "grouped_conv_avgpool_gap", [("x", [2, 4, 8, 8]), ("w", [4, 2, 3, 3])],
            [("y", f, [2, 4, 1, 1])],
            [helper.make_node("Conv", ["x", "w"], ["c"], group=2, strides=[2, 2]),
             helper.make_node("AveragePool", ["c"], ["p"], kernel_shape=[2, 2],
                              pads=[1, 1, 1, 1], count_include_pad=1),
             helper.make_node("GlobalAveragePool", ["p"], ["y"])]),
        # The second Conv has no bias: it gets a zero bias, so both call one 3-input function.
        "conv_bias_then_conv_without": model(
            "conv_bias_then_conv_without",
            [("x", [2, 3, 6, 6]), ("w1", [4, 3, 3, 3]), ("b1", [4]), ("w2", [2, 4, 1, 1])],
            [("y", f, [2, 2, 6, 6])],
            [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["c", "w2"], ["y"])]),
        # An explicit empty bias is no bias: a two-input ai.ampc.Conv, not FP32.
        "conv_empty_bias": model(
            "conv_empty_bias", [("x", [1, 2, 5, 5]), ("w", [3, 2, 3, 3])],
            [("y", f, [1, 3, 3, 3])],
            [helper.make_node("Conv", ["x", "w", ""], ["y"])]),
        "maxpool_indices": model(
            "maxpool_indices", [("x", [2, 3, 6, 6])],
            [("y", f, [2, 3, 3, 3]), ("i", TensorProto.INT64, [2, 3, 3, 3])],
            [helper.make_node("MaxPool", ["x"], ["y", "i"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2])]),
    }


def ampc_run(ampc: str, path: pathlib.Path, feeds: dict, out: pathlib.Path) -> dict:
    args = [ampc, "run", str(path), "--device", "cpu", "--output-dir", str(out)]
    for name, value in feeds.items():
        np.save(out / f"in_{name}.npy", value)
        args += ["--input", f"{name}={out / f'in_{name}.npy'}"]
    subprocess.run(args, check=True, capture_output=True)
    return {p.stem: np.load(p) for p in out.glob("*.npy") if not p.stem.startswith("in_")}


def check(name: str, fp32: onnx.ModelProto, ampc: str, tmp: pathlib.Path) -> list[str]:
    errors = []
    src, low = tmp / f"{name}.onnx", tmp / f"{name}.bf16.onnx"
    onnx.save(fp32, src)
    # The lone MaxPool would follow its FP32 graph input: forced low, it reads x rounded once.
    subprocess.run([ampc, str(src), "-o", str(low), "--dtype=bf16", "--lower-node=pool"],
                   check=True, capture_output=True)
    compiled = onnx.load(low)
    functions = {(f.domain, f.name) for f in compiled.functions}
    for node in compiled.graph.node:
        if node.op_type in VERSIONS:
            if node.domain != "ai.ampc":
                errors.append(f"{name}: {node.op_type} stayed in domain '{node.domain}'")
            elif ("ai.ampc", node.op_type) not in functions:
                errors.append(f"{name}: no model-local function for ai.ampc.{node.op_type}")
    onnx.checker.check_model(compiled, full_check=True)

    rng = np.random.default_rng(len(name))
    feeds = {i.name: rng.uniform(-2, 2, [d.dim_value for d in i.type.tensor_type.shape.dim])
             .astype(np.float32) for i in fp32.graph.input}
    reference = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, feeds)
    inlined = ort.InferenceSession(str(low), providers=["CPUExecutionProvider"]).run(None, feeds)
    out = tmp / name
    out.mkdir()
    ours = ampc_run(ampc, low, feeds, out)
    for k, output in enumerate(fp32.graph.output):
        want, theirs, mine = reference[k], inlined[k], ours[output.name]
        if want.dtype == np.int64:
            if not np.array_equal(theirs, mine):
                errors.append(f"{name}/{output.name}: indices differ (ort vs ampc)")
            continue
        agree = np.abs(theirs - mine) <= AGREE_RTOL * np.abs(mine)
        if not agree.all():
            errors.append(f"{name}/{output.name}: ort and ampc differ at {(~agree).sum()} of "
                          f"{agree.size} elements (max |d| {np.abs(theirs - mine).max():.3g})")
        scale = float(np.abs(want).max())
        for who, got in (("ort", theirs), ("ampc", mine)):
            worst = float(np.abs(got - want).max())
            if worst > FP32_ATOL * scale:
                errors.append(f"{name}/{output.name}: {who} BF16 is {worst:.3g} from FP32 "
                              f"(allowed {FP32_ATOL * scale:.3g})")
        print(f"{name}/{output.name}: ort == ampc at {int((theirs == mine).sum())} of "
              f"{mine.size} elements; max |bf16 - fp32| {np.abs(mine - want).max():.3g} "
              f"of max |y| {scale:.3g}")
    return errors


def training_model() -> onnx.ModelProto:
    rng = np.random.default_rng(3)

    def weight(name, *shape):
        return helper.make_tensor(name, TensorProto.FLOAT, shape,
                                  rng.uniform(-0.5, 0.5, shape).astype(np.float32).ravel())

    inits = [weight("w1", 4, 3, 3, 3), weight("b1", 4),
             helper.make_tensor("scale", TensorProto.FLOAT, [4], [1.0] * 4),
             helper.make_tensor("shift", TensorProto.FLOAT, [4], [0.0] * 4),
             helper.make_tensor("mean", TensorProto.FLOAT, [4], [0.0] * 4),
             helper.make_tensor("var", TensorProto.FLOAT, [4], [1.0] * 4),
             weight("w2", 4, 2, 3, 3), weight("fc", 4, 5), weight("fc_b", 5)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "scale", "shift", "mean", "var"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], group=2, pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["c2"], ["p2"], kernel_shape=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["p2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fc_b"], ["logits"]),
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "label"], ["loss"]),
    ]
    graph = helper.make_graph(
        nodes, "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8]),
         helper.make_tensor_value_info("label", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def check_training(ampc: str, tmp: pathlib.Path) -> list[str]:
    src, train, step = tmp / "cnn.onnx", tmp / "cnn.bf16.train.onnx", tmp / "cnn.step.onnx"
    onnx.save(training_model(), src)
    subprocess.run([ampc, str(src), "-o", str(train), "--train", "--loss", "loss",
                    "--dtype=bf16"], check=True, capture_output=True)
    subprocess.run([ampc, "extract-step", str(train), "-o", str(step), "--with-state"],
                   check=True, capture_output=True)
    errors = []
    versions = [n.op_type for n in onnx.load(train).graph.node if n.domain == "ai.ampc"]
    if sorted(versions) != ["AveragePool", "Conv", "Conv", "GlobalAveragePool", "MaxPool"]:
        errors.append(f"cnn --train: ai.ampc versions {versions}")
    try:
        onnx.checker.check_model(onnx.load(step), full_check=True)
    except Exception as error:  # noqa: BLE001 (the checker raises several types)
        errors.append(f"cnn --train: the extracted BF16 step fails the full check: "
                      f"{str(error).splitlines()[0][:300]}")
    again = tmp / "cnn.bf16.train.again.onnx"
    subprocess.run([ampc, str(train), "-o", str(again), "--dtype=bf16"], check=True,
                   capture_output=True)
    if again.read_bytes() != train.read_bytes():
        errors.append("cnn --train: ampc on its own training output changed it")
    print(f"cnn --train --dtype=bf16: {len(versions)} ai.ampc versions; step checked; "
          f"recompiled byte-identical: {again.read_bytes() == train.read_bytes()}")
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ampc", required=True)
    args = parser.parse_args()
    errors = []
    with tempfile.TemporaryDirectory(prefix="ampc-versions-") as tmp:
        for name, m in models().items():
            errors += check(name, m, args.ampc, pathlib.Path(tmp))
        errors += check_training(args.ampc, pathlib.Path(tmp))
    for error in errors:
        print("FAIL", error)
    print(f"{len(models())} models, onnxruntime {ort.__version__}, onnx {onnx.__version__}: "
          f"{'FAILED' if errors else 'ok'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
