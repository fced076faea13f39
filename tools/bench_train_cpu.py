#!/usr/bin/env python3
"""CPU training-step time, ampc against PyTorch eager, side by side in one run (issue 27, item 6).

Models: the bundled CNN (`ampc-models cnn`, batch 64, Fashion-MNIST shaped) and the exports of
tools/export_train_models.py (ResNet-18, MobileNetV3-Small, ViT, BERT, DistilBERT, GPT-2: small
configs, legacy exporter by default; batch 16, images 3x32x32, sequences of 16 tokens). For each:

  ampc: `ampc MODEL -o M.DTYPE.train.onnx --train --dtype DTYPE --loss-op cross_entropy:logits`
        (GPT-2: `causal_lm:logits,ignore_index=-100`; the CNN: its graph loss, `--loss loss`),
        default optimizer AdamW (lr 1e-3 as timed, weight decay 0.01), then `ampc-bench-train
        M.DTYPE.train.onnx --threads T --warmup W --steps S`: W untimed steps, S timed ones on one
        random batch (median ms), and the process's CPU time over the timed steps' wall time.
  PyTorch: the same architecture in eager mode, torch.set_num_threads(T), AdamW(lr 1e-3,
        weight_decay 0.01), the same batch size and loss, FP32 and BF16 autocast (CPU); W
        untimed steps, then S timed ones (median and minimum ms), CPU time (time.process_time)
        over wall.
        Dropout is off on both sides (the exports are made in eval mode; PyTorch runs them in
        eval mode too). The exports fold BatchNormalization into the Convs (eval-mode export), so
        PyTorch's ResNet-18 and MobileNet are BN-folded too (torch.fx's fuse); the bundled CNN's
        BatchNormalization trains in both (batch statistics).

T defaults to the machine's core count. Writes (appends, under a heading naming --label) a
section to bench/results/train-cpu.md with the date, commit and exact command. The machine may
be shared: only ratios of times measured back to back in this run mean much.

  tools/bench-train-cpu [--models cnn,resnet18,...] [--dtypes fp32,fp16,bf16] [--threads T]
                        [--warmup W] [--steps S] [--exporter legacy|dynamo] [--label TEXT]
                        [--profile] [--repeat R] [--no-write] [--work DIR]

With --repeat R the whole set runs R times, models interleaved; the tables give each side's
median over the repetitions, and a last table each ratio taken within a repetition, its median
and range over the R (on a shared machine, one run moves a ratio by up to about 0.2).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import runpy
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALL_MODELS = ["cnn", "resnet18", "mobilenet", "vit", "bert", "distilbert", "gpt2"]
TEXT = {"bert", "distilbert", "gpt2"}
BATCH = {"cnn": 64}  # others 16
DEFAULT_BATCH = 16


def run(cmd: list[str]) -> str:
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"bench-train-cpu: {' '.join(map(str, cmd))} failed ({done.returncode}):\n"
                 f"{done.stderr[-2000:]}")
    return done.stdout


def exported(args, name: str) -> pathlib.Path:
    """The forward ONNX model of `name` (made once into --work)."""
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if name == "cnn":
        path = work / "cnn.onnx"
        if not path.exists():
            run([args.models_tool, "cnn", "-o", str(path)])
        return path
    path = work / f"{name}.{args.exporter}.onnx"
    if not path.exists():
        run([sys.executable, str(ROOT / "tools/export_train_models.py"), str(work), name])
    return path


def compiled(args, name: str, dtype: str) -> pathlib.Path:
    out = pathlib.Path(args.work) / f"{name}.{args.exporter}.{dtype}.train.onnx"
    if name == "cnn":
        loss = ["--loss", "loss"]
    elif name == "gpt2":
        loss = ["--loss-op", "causal_lm:logits,ignore_index=-100"]
    else:
        loss = ["--loss-op", "cross_entropy:logits"]
    run([args.ampc, str(exported(args, name)), "-o", str(out), "--train", "--dtype", dtype] + loss)
    return out


def ampc_step(args, name: str, dtype: str) -> dict:
    cmd = [args.bench_train, str(compiled(args, name, dtype)), "--batch",
           str(BATCH.get(name, DEFAULT_BATCH)), "--threads", str(args.threads), "--warmup",
           str(args.warmup), "--steps", str(args.steps), "--device", "cpu", "--classes",
           "2" if name in TEXT else "10", "--seq", "16", "--ones", "attention_mask"]
    if args.profile:
        cmd.append("--profile")
    line = [l for l in run(cmd).splitlines() if l.startswith("{")][-1]
    return json.loads(line)


# PyTorch side ------------------------------------------------------------------------------

def torch_models():
    """name -> (module, example args, kind) built as tools/export_train_models.py builds them."""
    import torch
    saved = sys.argv
    sys.argv = ["export_train_models.py", "/nonexistent", "__none__"]  # defines, exports nothing
    try:
        ns = runpy.run_path(str(ROOT / "tools/export_train_models.py"))
    finally:
        sys.argv = saved
    torch.manual_seed(0)
    return {name: (m, ins) for name, m, _, ins, _ in ns["models"]()}


def bundled_cnn():
    import torch.nn as nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def torch_step_fn(name: str, models: dict, bf16: bool):
    import torch
    import torch.nn.functional as F
    gen = torch.Generator().manual_seed(0)
    batch = BATCH.get(name, DEFAULT_BATCH)
    if name == "cnn":
        model = bundled_cnn().train()
        inputs = (torch.rand(batch, 1, 28, 28, generator=gen),)
    else:
        model = models[name][0].eval()  # eval: dropout off, as in the eval-mode export
        if name in ("resnet18", "mobilenet"):
            from torch.fx.experimental.optimization import fuse
            model = fuse(model)  # BatchNormalization folded into the Convs, as in the export
        if name in TEXT:
            ids = torch.randint(0, 2, (batch, 16), generator=gen)
            inputs = (ids, torch.ones(batch, 16, dtype=torch.int64))
        else:
            inputs = (torch.rand(batch, 3, 32, 32, generator=gen),)
    if name == "gpt2":
        labels = torch.randint(0, 2, (batch, 16), generator=gen)
    else:
        labels = torch.randint(0, 2 if name in TEXT else 10, (batch,), generator=gen)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    def forward():
        if name in TEXT:
            return model(input_ids=inputs[0], attention_mask=inputs[1]).logits
        out = model(*inputs)
        return out.logits if hasattr(out, "logits") else out

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = forward()
        logits = logits.float()
        if name == "gpt2":
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                   labels[:, 1:].reshape(-1), ignore_index=-100)
        else:
            loss = F.cross_entropy(logits, labels)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def torch_step(args, name: str, models: dict, bf16: bool) -> dict:
    step = torch_step_fn(name, models, bf16)
    for _ in range(args.warmup):
        step()
    ms = []
    cpu0 = time.process_time()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t0) * 1e3)
    cpu = (time.process_time() - cpu0) * 1e3
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "cpu_per_wall": cpu / sum(ms)}


# Report ------------------------------------------------------------------------------------

def fmt(r: dict | None) -> str:
    return "-" if r is None else f"{r['median_ms']:.1f} ({r['cpu_per_wall']:.2f})"


def ratio(a: dict | None, b: dict | None, key: str = "median_ms") -> str:
    return "-" if a is None or b is None else f"{a[key] / b[key]:.2f}"


def commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          stdout=subprocess.PIPE, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           stdout=subprocess.PIPE, text=True).stdout.strip()
    return done.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


RATIOS = [("fp32/torch fp32", "ampc fp32", "torch fp32"),
          ("bf16/torch bf16", "ampc bf16", "torch bf16"),
          ("fp16/torch bf16", "ampc fp16", "torch bf16"),
          ("ampc bf16/fp32", "ampc bf16", "ampc fp32"),
          ("ampc fp16/fp32", "ampc fp16", "ampc fp32")]


def merged(reps: list[dict]) -> dict:
    """One measurement per side from several repetitions: the median of their medians, the
    fastest step of all, the median CPU/wall; the first repetition's other fields."""
    out = {}
    for key in reps[0]:
        rs = [r[key] for r in reps]
        out[key] = dict(rs[0], median_ms=statistics.median(r["median_ms"] for r in rs),
                        min_ms=min(r["min_ms"] for r in rs),
                        cpu_per_wall=statistics.median(r["cpu_per_wall"] for r in rs))
    return out


def repeat_report(runs: dict) -> str:
    """With --repeat R > 1: each ratio taken within each repetition (both sides measured back to
    back), then its median and range over the R repetitions."""
    count = len(next(iter(runs.values())))
    if count < 2:
        return ""
    lines = ["", f"Ratios within each of the {count} repetitions (both sides back to back), "
             "median over the repetitions [lowest-highest]:", "",
             "| model | " + " | ".join(label for label, _, _ in RATIOS) + " |",
             "|---|" + "---:|" * len(RATIOS)]
    for name, reps in runs.items():
        cells = []
        for _, a, b in RATIOS:
            values = [r[a]["median_ms"] / r[b]["median_ms"] for r in reps if a in r and b in r]
            cells.append("-" if not values else f"{statistics.median(values):.2f} "
                         f"[{min(values):.2f}-{max(values):.2f}]")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def report(args, rows: dict, started: float) -> str:
    import torch
    now = datetime.datetime.now(datetime.timezone.utc)
    lines = [
        f"## {args.label}: {now:%Y-%m-%d %H:%M} UTC",
        "",
        f"- command: `{args.command}`",
        f"- commit: {commit()}; machine: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; "
        f"torch {torch.__version__}; threads {args.threads}; {args.warmup} warm-up steps, "
        f"{args.steps} timed; exporter {args.exporter}; run took {time.time() - started:.0f} s",
        "",
        "Median step ms (CPU time / wall time over the timed steps: the cores used). "
        "Ratios: ampc over PyTorch eager BF16 autocast (the issue's target: <= 1.0), FP32 over "
        "FP32, and ampc's low-precision steps over its own FP32 step (target <= 1.2).",
        "",
        "| model | batch | ampc fp32 | ampc fp16 | ampc bf16 | torch fp32 | torch bf16 | "
        "fp32/torch fp32 | bf16/torch bf16 | fp16/torch bf16 | ampc bf16/fp32 | ampc fp16/fp32 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        a32, a16, ab16 = r.get("ampc fp32"), r.get("ampc fp16"), r.get("ampc bf16")
        t32, tb16 = r.get("torch fp32"), r.get("torch bf16")
        lines.append(
            f"| {name} | {BATCH.get(name, DEFAULT_BATCH)} | {fmt(a32)} | {fmt(a16)} | {fmt(ab16)} | "
            f"{fmt(t32)} | {fmt(tb16)} | {ratio(a32, t32)} | {ratio(ab16, tb16)} | "
            f"{ratio(a16, tb16)} | {ratio(ab16, a32)} | {ratio(a16, a32)} |")
    lines += ["", "The same ratios from the fastest timed step of each (less sensitive to other "
              "processes on a shared machine than the median):", "",
              "| model | fp32/torch fp32 | bf16/torch bf16 | fp16/torch bf16 | ampc bf16/fp32 | "
              "ampc fp16/fp32 |", "|---|---:|---:|---:|---:|---:|"]
    for name, r in rows.items():
        a32, a16, ab16 = r.get("ampc fp32"), r.get("ampc fp16"), r.get("ampc bf16")
        t32, tb16 = r.get("torch fp32"), r.get("torch bf16")
        lines.append(f"| {name} | {ratio(a32, t32, 'min_ms')} | {ratio(ab16, tb16, 'min_ms')} | "
                     f"{ratio(a16, tb16, 'min_ms')} | {ratio(ab16, a32, 'min_ms')} | "
                     f"{ratio(a16, a32, 'min_ms')} |")
    skipped = [f"{n} {d}: {r[d]['skipped']} of {r[d]['steps']}" for n, r in rows.items()
               for d in r if d.startswith("ampc") and r[d].get("skipped")]
    if skipped:
        lines += ["", "Timed ampc steps skipped by the loss scaler (no optimizer update): " +
                  "; ".join(skipped) + "."]
    if args.profile:
        lines += ["", "ampc's time per op type (ms per step, the largest 8; `--profile`):", ""]
        for name, r in rows.items():
            for d, v in r.items():
                if d.startswith("ampc") and "profile" in v:
                    top = list(v["profile"].items())[:8]
                    lines.append(f"- {name} {d[5:]}: " +
                                 ", ".join(f"{op} {ms:.1f}" for op, ms in top))
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", default=",".join(ALL_MODELS))
    p.add_argument("--dtypes", default="fp32,fp16,bf16")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--exporter", default="legacy", choices=["legacy", "dynamo"])
    p.add_argument("--label", default="run")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--work", default="/tmp/bench-train-cpu")
    p.add_argument("--ampc", default=str(ROOT / "build/compiler/ampc"))
    p.add_argument("--bench-train", default=str(ROOT / "build/bench/ampc-bench-train"))
    p.add_argument("--models-tool", default=str(ROOT / "build/models/ampc-models"))
    p.add_argument("--command", default="tools/bench-train-cpu " + " ".join(sys.argv[1:]))
    args = p.parse_args()
    if args.repeat < 1:
        sys.exit(f"bench-train-cpu: --repeat {args.repeat}: expected 1 or more")
    import torch
    torch.set_num_threads(args.threads)
    started = time.time()
    names = args.models.split(",")
    for n in names:
        if n not in ALL_MODELS:
            sys.exit(f"bench-train-cpu: unknown model {n} (known: {', '.join(ALL_MODELS)})")
    models = torch_models() if any(n != "cnn" for n in names) else {}
    runs = {name: [] for name in names}
    for rep in range(args.repeat):  # models interleaved, so a noisy minute spoils one repetition
        for name in names:
            r = {}
            for dtype in args.dtypes.split(","):
                r[f"ampc {dtype}"] = ampc_step(args, name, dtype)
            for bf16 in (False, True):
                r["torch bf16" if bf16 else "torch fp32"] = torch_step(args, name, models, bf16)
            runs[name].append(r)
            print(name, rep + 1, {k: fmt(v) for k, v in r.items()}, file=sys.stderr, flush=True)
    rows = {name: merged(rs) for name, rs in runs.items()}
    text = report(args, rows, started) + repeat_report(runs)
    print(text)
    if not args.no_write:
        out = ROOT / "bench/results/train-cpu.md"
        head = "" if out.exists() else (
            "# CPU training step: ampc against PyTorch eager (issue 27, item 6)\n\n"
            "Written by `tools/bench-train-cpu` (tools/bench_train_cpu.py; the method is in its "
            "docstring). Each section is one run; ratios are of times measured back to back in "
            "that run (the machine is shared with other builds, so absolute times are noisy).\n\n")
        with open(out, "a") as f:
            f.write(head + text + "\n")


if __name__ == "__main__":
    main()
