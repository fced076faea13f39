"""LLM-scale compile benchmark (issue 22, item 7): ampc converting LLaMA-like decoders in external
data to FP16 and BF16, against the physical limit measured in the same run. Not a test.

For each size (1b, 3b, 7b: LLaMA's shapes; 7b is 32 layers, hidden 4096, FFN 11008, 32 heads,
vocab 32000, about 6.7 B parameters, 27 GB) it writes a decoder export: embedding Gather,
RMSNorm as ops (Pow, ReduceMean, Add, Sqrt, Div, Mul), rotary embedding as ops (Slice, Neg,
Concat, Mul, Add), attention (MatMul, Softmax), a SiLU-gated FFN and the LM head, every weight
in one external data file at 4 KiB-aligned offsets, filled with N(0, 0.02) FP32 values generated
chunk by chunk (the model is never in memory). It checks free disk first (input + output + 1 GB),
and deletes each model after use. Per size and dtype it records ampc's wall time, peak RssAnon
(polled from /proc every 10 ms: file pages the kernel can drop do not count) and the bytes it
read and wrote (/proc/PID/io rchar and wchar), then the physical limit: reading the input's data
once (after posix_fadvise(DONTNEED) drops it from the page cache; a file larger than RAM is not
cached anyway) plus writing a file of the output data's size with fsync. A sample of converted
tensors is checked bit-exact against numpy's rounding (astype(float16), ml_dtypes.bfloat16).
Appends one section to bench/results/llm.md (or --out).
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper

SIZES = {  # layers, hidden, ffn, heads, vocab
    "1b": (16, 2048, 5504, 16, 32000),
    "3b": (26, 3200, 8640, 32, 32000),
    "7b": (32, 4096, 11008, 32, 32000),
}
ALIGN = 4096
CHUNK = 1 << 22  # values generated at a time


class DataWriter:
    """Appends FP32 tensors of random values to one file; returns TensorProtos pointing there."""

    def __init__(self, path: pathlib.Path):
        self.path, self.file, self.end = path, open(path, "wb"), 0
        self.rng = np.random.default_rng(0)

    def tensor(self, name: str, shape: tuple[int, ...], ones: bool = False) -> TensorProto:
        offset = (self.end + ALIGN - 1) // ALIGN * ALIGN
        self.file.write(b"\0" * (offset - self.end))
        count = int(np.prod(shape))
        for start in range(0, count, CHUNK):
            n = min(CHUNK, count - start)
            values = (np.ones(n, np.float32) if ones else
                      self.rng.standard_normal(n, dtype=np.float32) * np.float32(0.02))
            self.file.write(values.tobytes())
        self.end = offset + 4 * count
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape,
                        data_location=TensorProto.EXTERNAL)
        for key, value in (("location", self.path.name), ("offset", offset), ("length", 4 * count)):
            t.external_data.add(key=key, value=str(value))
        return t

    def close(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()


def make_decoder(path: pathlib.Path, size: str) -> int:
    """Writes the decoder at `path` (data in PATH.data); returns the parameter count."""
    layers, hidden, ffn, heads, vocab = SIZES[size]
    head = hidden // heads
    data = DataWriter(path.with_name(path.name + ".data"))
    nodes, inits, params = [], [], 0

    def weight(name, shape, ones=False):
        nonlocal params
        inits.append(data.tensor(name, shape, ones))
        params += int(np.prod(shape))
        return name

    def const(name, values, dtype=np.int64):
        array = np.array(values, dtype=dtype)
        inits.append(onnx.numpy_helper.from_array(array, name))
        return name

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def rms_norm(x, prefix):
        sq = node("Pow", [x, "two"], f"{prefix}/pow")
        mean = node("ReduceMean", [sq, "last_axis"], f"{prefix}/mean", keepdims=1)
        root = node("Sqrt", [node("Add", [mean, "eps"], f"{prefix}/add")], f"{prefix}/sqrt")
        normed = node("Div", [x, root], f"{prefix}/div")
        return node("Mul", [normed, weight(f"{prefix}.weight", (hidden,), ones=True)], prefix)

    def rotary(x, prefix):  # x: [B, H, T, D]
        first = node("Slice", [x, "zero", "half", "last_axis"], f"{prefix}/x1")
        second = node("Slice", [x, "half", "big", "last_axis"], f"{prefix}/x2")
        rotated = node("Concat", [node("Neg", [second], f"{prefix}/neg"), first],
                       f"{prefix}/rot", axis=-1)
        return node("Add", [node("Mul", [x, "cos"], f"{prefix}/xcos"),
                            node("Mul", [rotated, "sin"], f"{prefix}/xsin")], prefix)

    const("two", [2.0], np.float32)
    const("eps", [1e-6], np.float32)
    const("last_axis", [-1])
    const("zero", [0])
    const("half", [head // 2])
    const("big", [1 << 30])
    const("heads_shape", [0, 0, heads, head])
    const("merge_shape", [0, 0, hidden])
    const("scale", [1.0 / np.sqrt(head)], np.float32)
    x = node("Gather", [weight("embed_tokens.weight", (vocab, hidden)), "input_ids"], "embed")
    for i in range(layers):
        p = f"layers.{i}"
        h = rms_norm(x, f"{p}.input_layernorm")
        qkv = []
        for proj in "qkv":
            y = node("MatMul", [h, weight(f"{p}.self_attn.{proj}_proj.weight", (hidden, hidden))],
                     f"{p}/{proj}")
            y = node("Transpose", [node("Reshape", [y, "heads_shape"], f"{p}/{proj}_heads")],
                     f"{p}/{proj}_t", perm=[0, 2, 1, 3])
            qkv.append(rotary(y, f"{p}/{proj}_rope") if proj != "v" else y)
        kt = node("Transpose", [qkv[1]], f"{p}/kt", perm=[0, 1, 3, 2])
        scores = node("Mul", [node("MatMul", [qkv[0], kt], f"{p}/qk"), "scale"], f"{p}/scores")
        attn = node("MatMul", [node("Softmax", [scores], f"{p}/softmax", axis=-1), qkv[2]],
                    f"{p}/attn")
        merged = node("Reshape", [node("Transpose", [attn], f"{p}/attn_t", perm=[0, 2, 1, 3]),
                                  "merge_shape"], f"{p}/merged")
        out = node("MatMul", [merged, weight(f"{p}.self_attn.o_proj.weight", (hidden, hidden))],
                   f"{p}/o")
        x = node("Add", [x, out], f"{p}/residual1")
        h = rms_norm(x, f"{p}.post_attention_layernorm")
        gate = node("MatMul", [h, weight(f"{p}.mlp.gate_proj.weight", (hidden, ffn))], f"{p}/gate")
        silu = node("Mul", [gate, node("Sigmoid", [gate], f"{p}/sigmoid")], f"{p}/silu")
        up = node("MatMul", [h, weight(f"{p}.mlp.up_proj.weight", (hidden, ffn))], f"{p}/up")
        down = node("MatMul", [node("Mul", [silu, up], f"{p}/gated"),
                               weight(f"{p}.mlp.down_proj.weight", (ffn, hidden))], f"{p}/down")
        x = node("Add", [x, down], f"{p}/residual2")
    x = rms_norm(x, "norm")
    node("MatMul", [x, weight("lm_head.weight", (hidden, vocab))], "logits")
    data.close()
    graph = helper.make_graph(
        nodes, f"llama-{size}",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("cos", TensorProto.FLOAT, ["seq", head]),
         helper.make_tensor_value_info("sin", TensorProto.FLOAT, ["seq", head])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return params


def run_polled(command: list[str]) -> dict:
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak, io = 0, {}
    status, io_path = f"/proc/{proc.pid}/status", f"/proc/{proc.pid}/io"
    while proc.poll() is None:
        try:
            for line in open(status):
                if line.startswith("RssAnon:"):
                    peak = max(peak, int(line.split()[1]))
            io = dict(line.split(": ") for line in open(io_path).read().splitlines())
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    return {"code": proc.returncode, "seconds": time.monotonic() - start, "rss_kb": peak,
            "read": int(io.get("rchar", 0)), "written": int(io.get("wchar", 0)),
            "stderr": proc.stderr.read().strip()}


def drop_cache(path: pathlib.Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def physical_limit(data: pathlib.Path, out_bytes: int, folder: pathlib.Path,
                   cold: bool = True) -> float:
    """Seconds to read `data` once (from disk when `cold`, else as cached) and write `out_bytes`
    with fsync."""
    if cold:
        drop_cache(data)
    start = time.monotonic()
    with open(data, "rb", buffering=0) as f:
        while f.read(8 << 20):
            pass
    scratch = folder / "limit.bin"
    block = b"\0" * (8 << 20)
    with open(scratch, "wb", buffering=0) as f:
        for _ in range(out_bytes // len(block)):
            f.write(block)
        f.write(block[: out_bytes % len(block)])
        os.fsync(f.fileno())
    seconds = time.monotonic() - start
    scratch.unlink()
    return seconds


def check_sample(source: pathlib.Path, output: pathlib.Path, dtype: str) -> str:
    """Checks three converted weights (first, middle, last) against numpy's rounding."""
    src = {t.name: t for t in onnx.load(str(source), load_external_data=False).graph.initializer}
    out = onnx.load(str(output), load_external_data=False).graph.initializer
    converted = [t for t in out if t.data_type in (TensorProto.FLOAT16, TensorProto.BFLOAT16)
                 and t.data_location == TensorProto.EXTERNAL]
    want_type = np.float16 if dtype == "fp16" else ml_dtypes.bfloat16
    checked = 0
    for t in [converted[0], converted[len(converted) // 2], converted[-1]]:
        base = t.name if t.name in src else t.name.rsplit("_", 1)[0]
        entries = lambda x: {e.key: e.value for e in x.external_data}  # noqa: E731
        s, o = entries(src[base]), entries(t)
        n = int(np.prod(t.dims))
        a = np.fromfile(source.parent / s["location"], np.float32, n, offset=int(s["offset"]))
        b = np.fromfile(output.parent / o["location"], np.uint16, n, offset=int(o["offset"]))
        if a.astype(want_type).view(np.uint16).tobytes() != b.tobytes():
            return f"{t.name} differs from numpy's rounding"
        checked += n
    return f"3 tensors, {checked / 1e6:.0f} M values bit-exact"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ampc", required=True)
    parser.add_argument("--sizes", default="1b,3b,7b")
    parser.add_argument("--dtypes", default="fp16,bf16")
    parser.add_argument("--dir", default=None, help="where models go (default: a temp dir)")
    parser.add_argument("--out", default="bench/results/llm.md")
    parser.add_argument("--command", default="tools/bench-llm")
    args = parser.parse_args()
    base = pathlib.Path(args.dir or tempfile.mkdtemp(prefix="ampc-bench-llm-"))
    base.mkdir(parents=True, exist_ok=True)
    rows = []
    started = time.monotonic()
    for size in args.sizes.split(","):
        layers, hidden, ffn, heads, vocab = SIZES[size]
        params = layers * (4 * hidden * hidden + 3 * hidden * ffn + 2 * hidden) + \
            2 * vocab * hidden + hidden
        need = int(params * 4 * 1.5) + (1 << 30)
        free = shutil.disk_usage(base).free
        if free < need:
            rows.append(f"| {size} | | | skipped: {free / 1e9:.0f} GB free, "
                        f"{need / 1e9:.0f} GB needed | | | | | |")
            continue
        folder = base / size
        folder.mkdir(exist_ok=True)
        model = folder / "model.onnx"
        t0 = time.monotonic()
        params = make_decoder(model, size)
        made = time.monotonic() - t0
        data = model.with_name(model.name + ".data")
        print(f"{size}: {params / 1e9:.2f} B parameters, {data.stat().st_size / 1e9:.1f} GB, "
              f"written in {made:.0f} s", flush=True)
        for dtype in args.dtypes.split(","):
            out = folder / f"model.{dtype}.onnx"
            drop_cache(data)
            r = run_polled([args.ampc, str(model), "-o", str(out), f"--dtype={dtype}"])
            if r["code"] != 0:
                rows.append(f"| {size} | {dtype} | | ampc exited {r['code']}: {r['stderr']} |"
                            " | | | | |")
                continue
            out_data = out.with_name(out.name + ".data")
            out_bytes = out_data.stat().st_size
            sample = check_sample(model, out, dtype)
            limit = physical_limit(data, out_bytes, folder)
            rows.append(
                f"| {size} ({params / 1e9:.2f} B) | {dtype} | {r['seconds']:.1f} | {limit:.1f} | "
                f"{r['seconds'] / limit:.2f} | {r['rss_kb'] / 1024:.0f} | {r['read'] / 1e9:.1f} | "
                f"{r['written'] / 1e9:.1f} | {sample} |")
            print(rows[-1], flush=True)
            for f in (out, out_data):
                f.unlink()
        shutil.rmtree(folder)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    section = [
        f"## {now}", "",
        f"- command: `{args.command}`",
        f"- commit: {commit}; machine: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB; "
        f"run took {time.monotonic() - started:.0f} s", "",
        "| model | dtype | ampc s | read+write limit s | ampc / limit (target <= 1.5) | "
        "peak RssAnon MiB (7b target <= 2048) | GB read | GB written | sample check |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|", *rows, ""]
    out_path = pathlib.Path(args.out)
    if not out_path.exists():
        out_path.write_text(
            "# LLM-scale compile: ampc against the read-plus-write limit (issue 22, item 7)\n\n"
            "Written by `tools/bench-llm` (tools/bench_llm.py; the method is in its "
            "docstring). One section per run.\n\n")
    with open(out_path, "a") as f:
        f.write("\n".join(section) + "\n")
    print("\n".join(section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
