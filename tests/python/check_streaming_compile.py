"""A compile of a model with large external data holds a chunk of its weights, not all of them
(issue 22, item 1; docs/architecture.md, "Large models").

Generates MatMul chains whose FP32 weights (--megabytes in all) lie in external data, in the two
layouts exporters write (one data file for every tensor; one file per tensor), with one weight
holding a value beyond FP16's range (autocast keeps it FP32 in FP16 mode) and one a NaN, and
beside them an int8 DequantizeLinear weight and com.microsoft.MatMulNBits' packed uint8 blocks,
which must come out byte for byte as they went in. Each is compiled to
FP16 and to BF16 while /proc/PID/status is polled: the peak RssAnon (anonymous memory: file pages
the kernel can drop do not count) must stay under --limit-mb, a fraction of the weights. Every
tensor of the output must equal numpy's conversion of the input's (round to nearest even:
ndarray.astype(float16) and ml_dtypes.bfloat16) bit for bit, and the output must pass onnx's
checker with its external data. Exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import tempfile
import time

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DIM = 2048  # 16 MiB of FP32 per weight


def make_model(path: pathlib.Path, layers: int, one_file: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    nodes, inits, weights = [], [], {}
    x = "x"
    for i in range(layers):
        w = (rng.standard_normal((DIM, DIM)) * 0.05).astype(np.float32)
        w[0, :4] = [3e-8, -1e-42, 70000.0 if i == 1 else 1.0, np.nan if i == 2 else 0.5]
        weights[f"w{i}"] = w
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Relu", [f"h{i}"], [f"r{i}"], name=f"relu{i}"))
        x = f"r{i}"
    # Quantized weights beside the chain, which stay as they are: an int8 DequantizeLinear input
    # and com.microsoft.MatMulNBits' packed 4-bit blocks with their FP32 scales.
    weights["wq"] = rng.integers(-128, 128, (DIM, DIM), dtype=np.int8)
    weights["sq"] = np.array(0.01, np.float32)
    weights["bq"] = rng.integers(0, 256, (DIM, DIM // 32, 16), dtype=np.uint8)
    weights["sb"] = (rng.random(DIM * DIM // 32) * 0.01).astype(np.float32)
    inits += [numpy_helper.from_array(weights[k], k) for k in ("wq", "sq", "bq", "sb")]
    nodes += [helper.make_node("DequantizeLinear", ["wq", "sq"], ["dq"], name="dq"),
              helper.make_node("MatMul", ["x", "dq"], ["mq"], name="mmq"),
              helper.make_node("MatMulNBits", ["x", "bq", "sb"], ["mb"], name="nbits",
                               domain="com.microsoft", K=DIM, N=DIM, bits=4, block_size=32)]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", DIM])],
        [helper.make_tensor_value_info(v, TensorProto.FLOAT, ["N", DIM]) for v in (x, "mq", "mb")],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=one_file,
              location=path.name + ".data" if one_file else None, size_threshold=1024)
    return weights


def peak_rss_anon_kb(command: list[str]) -> tuple[int, int, str]:
    """(exit code, peak RssAnon in KiB, stderr) of `command`, polled every 5 ms."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    peak = 0
    status = pathlib.Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("RssAnon:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.005)
    return proc.returncode, peak, proc.stderr.read()


def expected(weight: np.ndarray, dtype: str, out_dtype: np.dtype) -> np.ndarray:
    if out_dtype == np.float32 or weight.dtype != np.float32:
        return weight
    return weight.astype(np.float16 if dtype == "fp16" else ml_dtypes.bfloat16)


def check_output(path: pathlib.Path, weights: dict[str, np.ndarray], dtype: str) -> list[str]:
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path))
    errors, seen = [], set()
    for tensor in model.graph.initializer:
        base = tensor.name if tensor.name in weights else tensor.name.rsplit("_", 1)[0]
        got = numpy_helper.to_array(tensor)
        if got.dtype == np.uint16 or tensor.data_type == TensorProto.BFLOAT16:
            got = got.view(ml_dtypes.bfloat16)
        want = expected(weights[base], dtype, got.dtype)
        seen.add(base)
        if got.shape != want.shape or got.tobytes() != want.tobytes():
            errors.append(f"{path.name}: {tensor.name} ({got.dtype}) differs from numpy's")
    if seen != set(weights):
        errors.append(f"{path.name}: weights missing from the output: {set(weights) - seen}")
    kept = sorted(t.name for t in model.graph.initializer if t.data_type == TensorProto.FLOAT)
    # 70000 overflows FP16, not BF16; the quantizers' scales keep the types they were given
    if kept != sorted(["sb", "sq"] + (["w1"] if dtype == "fp16" else [])):
        errors.append(f"{path.name}: FP32 weights {kept}; only the scales sb and sq, and fp16's "
                      "w1, should stay FP32")
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ampc", required=True)
    parser.add_argument("--megabytes", type=int, default=512)
    parser.add_argument("--limit-mb", type=int, default=128)
    args = parser.parse_args()
    layers = max(args.megabytes // 16, 3)
    errors = []
    with tempfile.TemporaryDirectory(prefix="ampc-streaming-") as tmp:
        for one_file in (True, False):
            folder = pathlib.Path(tmp) / ("one_file" if one_file else "per_tensor")
            folder.mkdir()
            model = folder / "chain.onnx"
            weights = make_model(model, layers if one_file else 4, one_file)
            for dtype in ("fp16", "bf16"):
                out = folder / f"chain.{dtype}.onnx"
                code, peak_kb, stderr = peak_rss_anon_kb(
                    [args.ampc, str(model), "-o", str(out), f"--dtype={dtype}"])
                data_mb = sum(w.nbytes for w in weights.values() if w.dtype == np.float32) / 2**20
                print(f"{folder.name} {dtype}: exit {code}, {data_mb:.0f} MiB of FP32 weights, "
                      f"peak RssAnon {peak_kb / 1024:.1f} MiB")
                if code != 0:
                    errors.append(f"{out.name}: ampc exited {code}: {stderr.strip()}")
                    continue
                if one_file and peak_kb > args.limit_mb * 1024:
                    errors.append(f"{out.name}: peak RssAnon {peak_kb / 1024:.1f} MiB is over "
                                  f"--limit-mb {args.limit_mb} ({data_mb:.0f} MiB of weights)")
                errors += check_output(out, weights, dtype)
    for error in errors:
        print("FAILED:", error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
