#!/usr/bin/env python3
"""FP16 compile of full-size real exports, ampc against onnxconverter-common (issue 22, target 2).

Models as tools/check_torch_exports.py builds them (random init, seed 0, default configs, nothing
downloaded): ResNet-50, BERT-base, GPT-2; each exported by torch's default (dynamo) exporter and
by the legacy one (opset 17). For each file, in one run, one after the other:

  ampc   `ampc MODEL -o OUT --dtype fp16 --time-passes`: the whole process's wall time, and the
         weight-conversion step (insert-casts, which converts the FP32 weights, chunk by chunk
         for external data) as FP32 bytes converted per second (the FP32 bytes are the model's
         float initializers that the output holds in FP16);
  peer   onnxconverter-common's onnx.load + float16.convert_float_to_float16(model,
         keep_io_types=True) + onnx.save (with external data when the export has it), in a
         child process of .venv's Python (the peer installed there when missing);
  floor  reading the input's data (as cached, as ampc reads it) and writing a file of the size
         of ampc's output with fsync: what any converter that saves its output needs on this
         machine, whose disk writes are slow and vary from run to run.

Median of --reps runs each. Targets: ampc's whole process faster than the peer's load + convert
+ save; the conversion step >= 1.5 GB/s of FP32. Writes bench/results/real-compile.md (date,
commit, command). A benchmark, not a test. Run it through tools/bench-real-compile.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import check_torch_exports as exports  # noqa: E402  (build_model, export)
from bench_compile import ensure_peer  # noqa: E402  (installs onnxconverter-common when missing)
from bench_llm import physical_limit  # noqa: E402  (read the input, write the output, fsync)

PEER = r"""
import json, sys, time, onnx
from onnxconverter_common import float16
src, dst, external = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
t = time.perf_counter()
model = onnx.load(src)
load = time.perf_counter() - t
out = float16.convert_float_to_float16(model, keep_io_types=True)
convert = time.perf_counter() - t - load
onnx.save(out, dst, save_as_external_data=external)
print(json.dumps({"load": load, "convert": convert, "total": time.perf_counter() - t}))
"""


def exported(work: pathlib.Path, name: str, exporter: str) -> pathlib.Path:
    import torch
    path = work / f"{name}.{exporter}.onnx"
    if not path.exists():
        model, inputs = exports.build_model(name)
        with torch.no_grad():
            exports.export(model, inputs, tuple(torch.from_numpy(v) for v in inputs.values()),
                           path, exporter)
    return path


def float_bytes(path: pathlib.Path) -> tuple[int, bool]:
    """FP32 initializer bytes of the model, and whether it has external data."""
    import onnx
    model = onnx.load(str(path), load_external_data=False)
    total, external = 0, False
    for t in model.graph.initializer:
        external = external or t.data_location == onnx.TensorProto.EXTERNAL
        if t.data_type == onnx.TensorProto.FLOAT:
            n = 1
            for d in t.dims:
                n *= d
            total += 4 * n
    return total, external


def time_ampc(ampc: str, model: pathlib.Path, out: pathlib.Path) -> dict:
    t = time.perf_counter()
    done = subprocess.run([ampc, str(model), "-o", str(out), "--dtype=fp16", "--time-passes"],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        sys.exit(f"bench-real-compile: ampc failed on {model}: {done.stderr.strip()[-500:]}")
    steps = {m[0]: float(m[1]) for m in re.findall(r"ampc: time: (\S+) ([0-9.]+) s", done.stderr)}
    return {"wall": wall, "steps": steps}


def time_peer(python: str, model: pathlib.Path, out: pathlib.Path, external: bool) -> dict:
    done = subprocess.run([python, "-c", PEER, str(model), str(out), "1" if external else "0"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ampc", default=str(ROOT / "build/compiler/ampc"))
    p.add_argument("--peer-python", default=str(ROOT / ".venv/bin/python"))
    p.add_argument("--models", default="resnet50,bert,gpt2")
    p.add_argument("--exporters", default="legacy,dynamo")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--work", default="/tmp/bench-real-compile")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--command", default="tools/bench-real-compile")
    args = p.parse_args()
    if not ensure_peer(args.peer_python, install=True):
        sys.exit("bench-real-compile: onnxconverter-common is not importable in --peer-python")
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        for exporter in args.exporters.split(","):
            try:
                model = exported(work, name, exporter)
            except Exception as e:  # noqa: BLE001  (an export torch cannot make: say so)
                rows.append({"model": name, "exporter": exporter,
                             "export_error": f"{type(e).__name__}: {str(e).splitlines()[0]}"})
                continue
            fp32, external = float_bytes(model)
            ampc = [time_ampc(args.ampc, model, work / "out.ampc.onnx") for _ in range(args.reps)]
            out_bytes = sum(f.stat().st_size for f in work.glob("out.ampc.onnx*"))
            source = model.with_name(model.name + ".data") if external else model
            limit = statistics.median(physical_limit(source, out_bytes, work, cold=False)
                                      for _ in range(args.reps))
            peer = [time_peer(args.peer_python, model, work / "out.peer.onnx", external)
                    for _ in range(args.reps)]
            for f in work.glob("out.*"):
                f.unlink()
            wall = statistics.median(r["wall"] for r in ampc)
            convert = statistics.median(r["steps"].get("insert-casts", 0.0) for r in ampc)
            peer_total = (statistics.median(r["total"] for r in peer)
                          if all("total" in r for r in peer) else None)
            rows.append({"model": name, "exporter": exporter, "external": external,
                         "fp32_mb": fp32 / 1e6, "ampc_s": wall, "limit_s": limit,
                         "convert_s": convert,
                         "gbps": fp32 / 1e9 / convert if convert > 0 else None,
                         "peer_s": peer_total, "peer": peer[0], "steps": ampc[0]["steps"]})
            print(json.dumps(rows[-1]), flush=True)
    text = report(args, rows)
    print(text)
    if not args.no_write:
        (ROOT / "bench/results/real-compile.md").write_text(text)
    return 0


def report(args, rows: list[dict]) -> str:
    head = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h"],
                          capture_output=True, text=True).stdout.strip()
    lines = [
        "# FP16 compile of real exports: ampc against onnxconverter-common (issue 22, target 2)",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; commit "
        f"{head}; machine: {platform.machine()}, {os.cpu_count()} CPUs",
        f"- command: `{args.command}`; median of {args.reps} runs each, back to back",
        "- ampc: `ampc MODEL -o OUT --dtype fp16 --time-passes`, the whole process; conversion: "
        "its insert-casts step over the model's FP32 initializer bytes",
        "- peer: onnxconverter-common `onnx.load` + `convert_float_to_float16(keep_io_types=True)`"
        " + `onnx.save`, in a child Python",
        "- read + write: reading the input's data file (as cached) and writing a file of the "
        "output's size with fsync, the least any converter that saves its output takes here; "
        "median of as many runs",
        "",
        "| model | exporter | FP32 weights MB | ampc s | peer s | ampc / peer (< 1) | "
        "read + write s | ampc / read + write | conversion s | conversion GB/s (>= 1.5) | "
        "ampc steps (s) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if "export_error" in r:
            lines.append(f"| {r['model']} | {r['exporter']} | export failed: {r['export_error']} "
                         "| | | | | | | | |")
            continue
        ratio = f"{r['ampc_s'] / r['peer_s']:.2f}" if r["peer_s"] else "-"
        peer = f"{r['peer_s']:.2f}" if r["peer_s"] else r["peer"].get("error", "-")
        steps = ", ".join(f"{k} {v:.2f}" for k, v in r["steps"].items() if v >= 0.01)
        gbps = f"{r['gbps']:.2f}" if r["gbps"] else "-"
        lines.append(f"| {r['model']} | {r['exporter']}{' (ext. data)' if r['external'] else ''}"
                     f" | {r['fp32_mb']:.0f} | {r['ampc_s']:.2f} | {peer} | {ratio} | "
                     f"{r['limit_s']:.2f} | {r['ampc_s'] / r['limit_s']:.2f} | "
                     f"{r['convert_s']:.2f} | {gbps} | {steps} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
