#!/usr/bin/env python3
"""Inference benchmark of ampc's CPU runtime against onnxruntime (issue 4).

Models: the bundled mlp, cnn and transformer (`ampc-models NAME`, docs/models.md; their inputs
include `label` and their outputs `loss`, so a run computes the logits and the loss) and a
ResNet-style CNN generated here (stem Conv 3x3 to 16 channels, 4 stages of 2 basic residual
blocks, Conv-BN-Relu-Conv-BN + skip, Add, Relu, with 16-32-64-128 channels, the last three
stages halving the resolution with a 1x1 Conv-BN projection on the skip, GlobalAveragePool,
Flatten, Gemm to 10 classes; input 3x64x64; opset 17). Each runs as FP32 and compiled by
`ampc --dtype fp16` and `--dtype bf16` (keep-io: the same inputs feed all three).

Timed in the same run, on the same random inputs (seeded: images U[0, 1), tokens and labels
uniform integers):

  ampc         `ampc-bench`: one Session, WARMUP untimed runs, then timed runs (Session::Run
               and the outputs copied to the host) until RUNS or SECONDS; the median;
  onnxruntime  PyPI's onnxruntime, CPU provider, default graph optimizations (ORT_ENABLE_ALL, as
               users run it), intra-op threads = ampc's threads, sequential execution; the FP32
               model only, timed the same way around InferenceSession.run.

Prints the table and writes it (date, machine, commit, command) to
bench/results/runtime-cpu.md. Not a test; run it through tools/bench-runtime.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "runtime-cpu.md"
CLASSES = 10
BATCH = {"mlp": 64, "cnn": 64, "transformer": 16, "resnet": 8}
DTYPES = ("fp32", "fp16", "bf16")
TARGET = 2.0  # FP32 within 2x of onnxruntime on the MLP and the CNNs


# ---------------------------------------------------------------------------------------------
# The ResNet-style CNN

class ResNetBuilder:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def weight(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def conv_bn(self, x: str, name: str, cin: int, cout: int, kernel: int, stride: int) -> str:
        """Conv (no bias, He-initialised) then BatchNormalization in inference form."""
        std = np.sqrt(2.0 / (cin * kernel * kernel))
        w = self.weight(f"{name}.conv.weight",
                        self.rng.normal(0, std, (cout, cin, kernel, kernel)))
        pad = kernel // 2
        self.nodes.append(helper.make_node(
            "Conv", [x, w], [f"{name}/conv"], name=f"/{name}/Conv", kernel_shape=[kernel] * 2,
            strides=[stride] * 2, pads=[pad] * 4))
        bn = [self.weight(f"{name}.bn.{p}", v) for p, v in (
            ("weight", self.rng.uniform(0.5, 1.5, cout)), ("bias", self.rng.normal(0, 0.1, cout)),
            ("running_mean", self.rng.normal(0, 0.1, cout)),
            ("running_var", self.rng.uniform(0.5, 1.5, cout)))]
        self.nodes.append(helper.make_node("BatchNormalization", [f"{name}/conv", *bn],
                                           [f"{name}/bn"], name=f"/{name}/BatchNormalization",
                                           epsilon=1e-5))
        return f"{name}/bn"

    def relu(self, x: str, name: str) -> str:
        self.nodes.append(helper.make_node("Relu", [x], [f"{name}/relu"], name=f"/{name}/Relu"))
        return f"{name}/relu"

    def block(self, x: str, name: str, cin: int, cout: int, stride: int) -> str:
        y = self.relu(self.conv_bn(x, f"{name}.conv1", cin, cout, 3, stride), f"{name}.1")
        y = self.conv_bn(y, f"{name}.conv2", cout, cout, 3, 1)
        skip = x if stride == 1 and cin == cout else self.conv_bn(
            x, f"{name}.downsample", cin, cout, 1, stride)
        self.nodes.append(helper.make_node("Add", [y, skip], [f"{name}/add"],
                                           name=f"/{name}/Add"))
        return self.relu(f"{name}/add", name)


def resnet_model(seed: int = 0, image: int = 64) -> onnx.ModelProto:
    b = ResNetBuilder(seed)
    x = b.relu(b.conv_bn("image", "stem", 3, 16, 3, 1), "stem")
    cin = 16
    for stage, cout in enumerate((16, 32, 64, 128)):
        for k in range(2):
            stride = 2 if stage > 0 and k == 0 else 1
            x = b.block(x, f"layer{stage}.{k}", cin, cout, stride)
            cin = cout
    b.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool"], name="/GlobalAveragePool"))
    b.nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="/Flatten", axis=1))
    bound = 1 / np.sqrt(cin)
    fc_w = b.weight("fc.weight", b.rng.uniform(-bound, bound, (CLASSES, cin)))
    fc_b = b.weight("fc.bias", b.rng.uniform(-bound, bound, CLASSES))
    b.nodes.append(helper.make_node("Gemm", ["flat", fc_w, fc_b], ["logits"], name="/fc/Gemm",
                                    transB=1))
    graph = helper.make_graph(
        b.nodes, "resnet",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, image, image])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", CLASSES])],
        b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="tools/bench_runtime.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


# ---------------------------------------------------------------------------------------------
# Inputs and timing

def random_inputs(model: onnx.ModelProto, batch: int, rng: np.random.Generator) -> dict:
    """Images U[0, 1), tokens below the embedding table's size, labels below CLASSES."""
    vocab = next((i.dims[0] for i in model.graph.initializer if i.name == "embed.tokens.weight"),
                 None)
    initializers = {i.name for i in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        shape = [batch] + [d.dim_value for d in value.type.tensor_type.shape.dim[1:]]
        if value.name == "label":
            feeds[value.name] = rng.integers(0, CLASSES, size=shape, dtype=np.int64)
        elif value.name == "tokens":
            feeds[value.name] = rng.integers(0, vocab, size=shape, dtype=np.int64)
        else:
            feeds[value.name] = rng.random(shape, dtype=np.float32)
    return feeds


def time_ampc(bench: pathlib.Path, model: pathlib.Path, inputs: dict[str, pathlib.Path],
              args) -> float:
    specs = [a for name, path in inputs.items() for a in ("--input", f"{name}={path}")]
    command = [str(bench), str(model), *specs, "--threads", str(args.threads), "--warmup", str(args.warmup), "--runs",
               str(args.runs), "--seconds", str(args.seconds)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
    return json.loads(done.stdout)["median_ms"]


def time_onnxruntime(model: pathlib.Path, feeds: dict, args) -> float:
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    for _ in range(args.warmup):
        session.run(None, feeds)
    times = []
    while len(times) < args.runs and (len(times) < 3 or sum(times) < args.seconds * 1000):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


# ---------------------------------------------------------------------------------------------
# Report

def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", load average %.1f at the start" % os.getloadavg()[0] if hasattr(os, "getloadavg") \
        else ""
    return f"{cpu}, {os.cpu_count()} CPUs{load}; {platform.system()} {platform.release()}"


def commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked=no"],
                           capture_output=True, text=True, check=False).stdout.strip()
    return done.stdout.strip() + (" (with uncommitted changes in the tree)" if dirty else "")


def table(rows: list[dict]) -> list[str]:
    lines = ["| model | batch | dtype | ampc median ms | ampc samples/s | onnxruntime FP32 ms "
             "| onnxruntime samples/s | ratio ampc/ort |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        ampc = f"{r['ampc_ms']:.2f}" if r["ampc_ms"] else f"failed: {r['error']}"
        throughput = f"{r['batch'] / r['ampc_ms'] * 1000:,.0f}" if r["ampc_ms"] else "-"
        ratio = f"{r['ampc_ms'] / r['ort_ms']:.2f}" if r["ampc_ms"] else "-"
        lines.append(f"| {r['model']} | {r['batch']} | {r['dtype']} | {ampc} | {throughput} | "
                     f"{r['ort_ms']:.2f} | {r['batch'] / r['ort_ms'] * 1000:,.0f} | {ratio} |")
    return lines


def verdict(rows: list[dict]) -> list[str]:
    lines = []
    for model in ("mlp", "cnn", "resnet"):
        r = next((r for r in rows if r["model"] == model and r["dtype"] == "fp32"), None)
        if r is None:
            continue
        if not r["ampc_ms"]:
            lines.append(f"- {model}: ampc failed, no verdict")
            continue
        ratio = r["ampc_ms"] / r["ort_ms"]
        met = "meets" if ratio <= TARGET else "MISSES"
        lines.append(f"- {model} FP32: ampc/onnxruntime = {ratio:.2f}: {met} the {TARGET:g}x target")
    return lines


def write_results(rows: list[dict], args, notes: list[str]) -> None:
    text = [
        "# CPU runtime inference: ampc vs onnxruntime",
        "",
        "Written by `tools/bench-runtime` (tools/bench_runtime.py; the method is in its "
        "docstring); rerun it rather than editing the tables.",
        "",
        f"- date: {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}",
        f"- machine: {machine()}",
        f"- commit: {commit()}",
        f"- command: `{args.command}`",
        f"- onnxruntime {ort.__version__} (CPU provider, ORT_ENABLE_ALL, intra-op threads "
        f"{args.threads}, sequential), numpy {np.__version__}",
        f"- ampc: `ampc-bench --threads {args.threads}`; FP16/BF16 are `ampc --dtype fp16|bf16` "
        f"of the FP32 model (graph I/O kept FP32)",
        f"- timing: {args.warmup} warm-up runs, then up to {args.runs} timed runs or "
        f"{args.seconds:g} s (at least 3); the median. The ratio divides ampc's time at each "
        f"dtype by onnxruntime's FP32 time for the same model and batch.",
        "",
        *table(rows),
        "",
        f"## Target: FP32 within {TARGET:g}x of onnxruntime on the MLP and the CNNs",
        "",
        *verdict(rows),
        "",
        *notes,
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(text) + "\n")


NOTES = [
    "## Notes",
    "",
    "- FP16 and BF16 are expected to be slower than FP32 on this backend, not faster: the CPU "
    "kernels compute FP16/BF16 by widening to FP32 (the GEMMs and convolutions convert their "
    "operands and call the same FP32 OpenBLAS GEMM), so a low-precision run does the FP32 work "
    "plus the conversions and the Cast nodes ampc inserts at the FP32 boundaries. Their value "
    "on the CPU is checking numerics, not speed.",
    "- FP16 costs more than BF16: the GEMMs and convolutions widen and round whole tensors with "
    "F16C where the CPU has it (kernels/numerics/half.cc, chosen at run time), but the other "
    "kernels and Cast convert one element at a time in software, bit by bit (kernels/numerics/half.h), "
    "while widening BF16 is a 16-bit shift and narrowing it one rounding add.",
    "- The machine is shared (2 cores, other builds running): timings vary by tens of percent "
    "between runs; the load average at the start is in the machine line. ampc and onnxruntime "
    "are timed back to back for each model, so their ratio is steadier than either time.",
]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", required=True, type=pathlib.Path, help="the ampc-bench binary")
    p.add_argument("--ampc", required=True, type=pathlib.Path, help="the ampc binary")
    p.add_argument("--models-tool", required=True, type=pathlib.Path, help="ampc-models")
    p.add_argument("--threads", type=int, default=2, help="threads of both runtimes (default 2)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs (default 3)")
    p.add_argument("--runs", type=int, default=100, help="at most this many timed runs (100)")
    p.add_argument("--seconds", type=float, default=5,
                   help="stop timing after this long, with 3 runs at least (default 5)")
    p.add_argument("--models", default="mlp,cnn,transformer,resnet",
                   help="comma-separated subset of mlp,cnn,transformer,resnet")
    p.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS}")
    p.add_argument("--command", default="tools/bench_runtime.py", help=argparse.SUPPRESS)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ampc-bench-") as scratch:
        work = pathlib.Path(scratch)
        for name in args.models.split(","):
            fp32 = work / f"{name}.onnx"
            if name == "resnet":
                onnx.save(resnet_model(), str(fp32))
            else:
                subprocess.run([str(args.models_tool), name, "-o", str(fp32)], check=True,
                               capture_output=True)
            model = onnx.load(str(fp32))
            feeds = random_inputs(model, BATCH[name], rng)
            files = {}
            for input_name, array in feeds.items():
                files[input_name] = work / f"{name}.{input_name}.npy"
                np.save(files[input_name], array)
            ort_ms = time_onnxruntime(fp32, feeds, args)
            for dtype in DTYPES:
                path = fp32 if dtype == "fp32" else work / f"{name}.{dtype}.onnx"
                if dtype != "fp32":
                    subprocess.run([str(args.ampc), str(fp32), "-o", str(path), "--dtype", dtype],
                                   check=True, capture_output=True)
                row = {"model": name, "batch": BATCH[name], "dtype": dtype, "ort_ms": ort_ms,
                       "ampc_ms": None, "error": ""}
                try:
                    row["ampc_ms"] = time_ampc(args.bench, path, files, args)
                except RuntimeError as error:
                    row["error"] = " ".join(str(error).split())[-200:]
                rows.append(row)
                print(table(rows)[-1], flush=True)
    print("\n".join(table(rows)))
    print("\n".join(verdict(rows)))
    if not args.no_write:
        write_results(rows, args, NOTES)
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
