#!/usr/bin/env python3
"""Convergence benchmark (issue 5): the bundled MLP and CNN trained by ampc on Fashion-MNIST.

For each model and each of FP32, FP16-AMP and BF16-AMP, with the same seed (so the same
initial weights and the same data order):

  ampc-models MODEL -o MODEL.onnx
  ampc MODEL.onnx -o MODEL.DTYPE.train.onnx --train --loss loss --dtype DTYPE
       --optimizer adam --lr LR
  ampc train MODEL.DTYPE.train.onnx --data fashion-mnist --batch B --epochs E --seed 0
       --metrics MODEL.DTYPE.csv

and reads the test accuracy that `ampc train` prints after each epoch (the inference graph on
the 10,000 test images). Targets (docs/training.md): MLP >= 0.88 and CNN >= 0.91 in every dtype,
and each AMP run within 0.5 points of the FP32 run. Writes bench/results/convergence.md and one
SVG per model with the loss curves (the metrics CSV) and the accuracy per epoch. Not a test; run
it through tools/bench-convergence.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import pathlib
import platform
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
TARGETS = {"mlp": 0.88, "cnn": 0.91}
DTYPES = ["fp32", "fp16", "bf16"]
COLORS = {"fp32": "#1f77b4", "fp16": "#d62728", "bf16": "#2ca02c"}
EPOCH_LINE = re.compile(
    r"epoch (\d+): test accuracy ([0-9.]+), (\d+) steps applied, (\d+) skipped, scale (\S+)")


def run(cmd: list[str], log: pathlib.Path) -> str:
    with open(log, "w") as err:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    if done.returncode != 0:
        sys.exit(f"bench-convergence: {' '.join(cmd)} failed ({done.returncode}); see {log}")
    return done.stdout


def train(args, model: str, dtype: str, work: pathlib.Path) -> dict:
    forward = work / f"{model}.onnx"
    if not forward.exists():
        run([args.models_tool, model, "-o", str(forward)], work / f"{model}.models.log")
    compiled = work / f"{model}.{dtype}.train.onnx"
    run([args.ampc, str(forward), "-o", str(compiled), "--train", "--loss", "loss", "--dtype",
         dtype, "--optimizer", "adam", "--lr", str(args.lr)], work / f"{model}.{dtype}.compile.log")
    metrics = work / f"{model}.{dtype}.csv"
    epochs = args.epochs_mlp if model == "mlp" else args.epochs_cnn
    start = time.monotonic()
    out = run([args.ampc, "train", str(compiled), "--data", args.data, "--batch",
               str(args.batch), "--epochs", str(epochs), "--seed", "0", "--log-every", "50",
               "--threads", str(args.threads), "--metrics", str(metrics), "--device", "cpu"],
              work / f"{model}.{dtype}.train.log")
    seconds = time.monotonic() - start
    epochs_seen = [m.groups() for m in EPOCH_LINE.finditer(out)]
    if len(epochs_seen) != epochs:
        sys.exit(f"bench-convergence: expected {epochs} epoch lines from ampc train, got:\n{out}")
    with open(metrics) as f:
        rows = [(int(r["step"]), float(r["loss"])) for r in csv.DictReader(f)]
    last = epochs_seen[-1]
    return {"accuracy": [float(e[1]) for e in epochs_seen], "applied": int(last[2]),
            "skipped": int(last[3]), "scale": last[4], "seconds": seconds, "loss": rows,
            "epochs": epochs}


def svg(model: str, results: dict) -> str:
    """Two panels: training loss per logged step, test accuracy per epoch."""
    w, h, pad = 420, 260, 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w}" height="{h + 30}" '
             'font-family="sans-serif" font-size="11">']

    def panel(x0, title, series, ylabel):
        xs = [x for pts in series.values() for x, _ in pts]
        ys = [y for pts in series.values() for _, y in pts]
        if not xs:
            return
        x_lo, x_hi, y_lo, y_hi = min(xs), max(xs), min(ys), max(ys)
        x_hi = x_hi if x_hi > x_lo else x_lo + 1
        y_hi = y_hi if y_hi > y_lo else y_lo + 1
        sx = lambda x: x0 + pad + (x - x_lo) / (x_hi - x_lo) * (w - 2 * pad)
        sy = lambda y: h - pad + 10 - (y - y_lo) / (y_hi - y_lo) * (h - 2 * pad)
        parts.append(f'<text x="{x0 + w / 2}" y="15" text-anchor="middle">{title}</text>')
        parts.append(f'<rect x="{x0 + pad}" y="{pad - 10}" width="{w - 2 * pad}" '
                     f'height="{h - 2 * pad + 20}" fill="none" stroke="#999"/>')
        for v, anchor in ((y_lo, h - pad + 10), (y_hi, pad - 10 + 10)):
            parts.append(f'<text x="{x0 + pad - 4}" y="{anchor}" text-anchor="end">{v:.3g}</text>')
        parts.append(f'<text x="{x0 + pad}" y="{h + 5}">{x_lo:g}</text>')
        parts.append(f'<text x="{x0 + w - pad}" y="{h + 5}" text-anchor="end">{x_hi:g} '
                     f'({ylabel})</text>')
        for i, (dtype, pts) in enumerate(series.items()):
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{COLORS[dtype]}" '
                         'stroke-width="1.2"/>')
            parts.append(f'<text x="{x0 + w - pad - 5}" y="{pad + 12 * i}" text-anchor="end" '
                         f'fill="{COLORS[dtype]}">{dtype}</text>')

    panel(0, f"{model}: training loss (mean over 50 batches)",
          {d: r["loss"] for d, r in results.items()}, "batches")
    panel(w, f"{model}: test accuracy",
          {d: list(enumerate(r["accuracy"], 1)) for d, r in results.items()}, "epochs")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def report(args, all_results: dict, commit: str) -> str:
    load = os.getloadavg()[0]
    lines = [
        "# Convergence on Fashion-MNIST: FP32, FP16-AMP and BF16-AMP",
        "",
        "Written by `tools/bench-convergence` (tools/bench_convergence.py; the method is in its "
        "docstring); rerun it rather than editing the tables.",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load "
        f"average {load:.1f} at the end; ampc's CPU backend (`--device cpu`, {args.threads} "
        "threads)",
        f"- commit: {commit} (at the start; the binaries are `--ampc` and `--models-tool`)",
        f"- command: `{args.command}`",
        f"- training: Adam, lr {args.lr}, batch {args.batch}, seed 0 (same initial weights and "
        "data order in every dtype); FP16 with dynamic loss scaling (init 65536), BF16 and FP32 "
        "without; test accuracy on the 10,000 test images after each epoch",
        "",
        "| model | dtype | epochs | test accuracy (last) | best | target | vs FP32 (points) | "
        "steps applied | skipped | final scale | train time s |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    verdicts = []
    for model, results in all_results.items():
        base = results.get("fp32", {}).get("accuracy", [None])[-1]
        for dtype, r in results.items():
            acc = r["accuracy"][-1]
            diff = "" if base is None or dtype == "fp32" else f"{100 * (acc - base):+.2f}"
            target = TARGETS[model]
            lines.append(
                f"| {model} | {dtype} | {r['epochs']} | {acc:.4f} | {max(r['accuracy']):.4f} | "
                f">= {target} {'met' if acc >= target else 'MISSED'} | {diff} | {r['applied']} | "
                f"{r['skipped']} | {r['scale']} | {r['seconds']:.0f} |")
            verdicts.append(f"- {model} {dtype}: {acc:.4f} "
                            f"{'meets' if acc >= target else 'MISSES'} >= {target}" +
                            ("" if not diff else
                             f"; {diff} points vs FP32 "
                             f"({'within' if abs(acc - base) <= 0.005 else 'NOT within'} 0.5)"))
    lines += ["", "## Targets", ""] + verdicts + ["", "## Curves", ""]
    for model in all_results:
        lines.append(f"![{model}](convergence-{model}.svg)")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ampc", required=True)
    p.add_argument("--models-tool", required=True)
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--dtypes", default=",".join(DTYPES))
    p.add_argument("--epochs-mlp", type=int, default=10)
    p.add_argument("--epochs-cnn", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--data", default="fashion-mnist")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--command", default="tools/bench-convergence")
    args = p.parse_args()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="ampc-convergence-") as tmp:
        work = pathlib.Path(tmp)
        for model in args.models.split(","):
            results[model] = {}
            for dtype in args.dtypes.split(","):
                r = train(args, model, dtype, work)
                results[model][dtype] = r
                print(f"{model} {dtype}: accuracy per epoch "
                      f"{', '.join(f'{a:.4f}' for a in r['accuracy'])}; skipped {r['skipped']}, "
                      f"scale {r['scale']}, {r['seconds']:.0f} s", flush=True)
    text = report(args, results, commit)
    print(text)
    if not args.no_write:
        out = ROOT / "bench" / "results"
        (out / "convergence.md").write_text(text)
        for model, model_results in results.items():
            (out / f"convergence-{model}.svg").write_text(svg(model, model_results))


if __name__ == "__main__":
    main()
