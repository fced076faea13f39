#!/usr/bin/env python3
"""Full-size models exported by today's PyTorch, through ampc (issue 20 acceptance).

For each model (random init, seed 0: torchvision with weights=None, transformers from their
Config objects with default sizes; nothing is downloaded) and exporter:

  1. export: `torch.onnx.export(model, args, path)` (the default: dynamo=True, default opset;
     external data, when written, stays next to the model) or, for --legacy, `dynamo=False,
     opset_version=17`; records IR version, opsets and the torch output (export sanity: torch
     vs onnxruntime);
  2. `ampc run` (CPU) on the FP32 export vs onnxruntime FP32 (CPU EP): max|err| / max|ref|,
     which should be <= 1e-4;
  3. `ampc MODEL -o OUT --dtype fp16|bf16`: wall time, Cast nodes, file size (with external
     data), `onnx.checker.check_model(OUT, full_check=True)`, and for fp16 whether onnxruntime
     loads and runs OUT (its error vs FP32 onnxruntime);
  4. `ampc run` on the fp16 and bf16 outputs (exact-rounding CPU runtime) vs FP32 onnxruntime;
  5. every failure with ampc's exact one-line error.

Each model runs in a child process of this script (one at a time, so memory is freed between
models); the child writes WORK/results/MODEL-EXPORTER.json after every stage, and the parent
writes bench/results/torch-exports.md from all the JSON files. Models are deleted after their
checks unless --keep. Run it through tools/check-torch-exports (the .venv-torch interpreter).

  tools/check-torch-exports [--models resnet50,bert] [--legacy] [--work /tmp/exports]
      [--run-timeout 600] [--keep] [--report-only]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import hashlib
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import time
import traceback

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent

# name -> (builder kind, description)
MODELS = {
    "resnet50": "torchvision resnet50",
    "mobilenet_v3_large": "torchvision mobilenet_v3_large",
    "efficientnet_b0": "torchvision efficientnet_b0",
    "convnext_tiny": "torchvision convnext_tiny",
    "vit_b_16": "torchvision vit_b_16",
    "swin_t": "torchvision swin_t",
    "bert": "transformers BertModel(BertConfig())",
    "gpt2": "transformers GPT2LMHeadModel(GPT2Config(use_cache=False))",
    "distilbert": "transformers DistilBertModel(DistilBertConfig())",
    "mobilenet_v3_large_bncal": "torchvision mobilenet_v3_large, BatchNorm statistics "
                                "calibrated on random images",
    "efficientnet_b0_bncal": "torchvision efficientnet_b0, BatchNorm statistics calibrated on "
                             "random images",
}
# torchvision's default init leaves these two with outputs of 1e-10 and 1e-14 (below FP16's
# smallest subnormal, 6e-8): the _bncal variants set each BatchNorm's running statistics from
# 4 batches of 8 random N(0,1) images in train mode (cumulative average), as a trained network
# has them, so that the activations are of unit scale.
CALIBRATE = {"mobilenet_v3_large_bncal": "mobilenet_v3_large",
             "efficientnet_b0_bncal": "efficientnet_b0"}
DEFAULT_MODELS = list(MODELS)
LEGACY_MODELS = ["bert", "resnet50"]
SEQ = 128
TOL_FP32 = 1e-4


# ----------------------------------------------------------------------------- helpers

def now() -> float:
    return time.monotonic()


def sanitize(name: str) -> str:
    """The file name `ampc run --output-dir` gives output NAME (docs/runtime.md)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:200]


def rel_err(out: np.ndarray, ref: np.ndarray) -> dict:
    """max|out - ref| / max|ref| (float64), with non-finite values counted."""
    if out.shape != ref.shape:
        return {"rel": None, "note": f"shape {list(out.shape)} vs reference {list(ref.shape)}"}
    o = out.astype(np.float64)
    r = ref.astype(np.float64)
    nonfinite = int(np.size(o) - np.count_nonzero(np.isfinite(o)))
    ref_nonfinite = int(np.size(r) - np.count_nonzero(np.isfinite(r)))
    both = np.isfinite(o) & np.isfinite(r)
    denom = float(np.max(np.abs(r[np.isfinite(r)]))) if np.any(np.isfinite(r)) else 0.0
    err = float(np.max(np.abs(o[both] - r[both]))) if np.any(both) else 0.0
    res = {"rel": err / denom if denom > 0 else err, "abs": err, "max_ref": denom}
    if nonfinite or ref_nonfinite:
        res["nonfinite"] = nonfinite
        res["ref_nonfinite"] = ref_nonfinite
        if nonfinite != ref_nonfinite:
            res["rel"] = float("inf")
    return res


def worst(errs: dict) -> dict | None:
    """The output with the largest relative error: {'output', 'rel', ...}."""
    best = None
    for name, e in errs.items():
        if e.get("rel") is None:
            return {"output": name, **e}
        if best is None or e["rel"] > best["rel"]:
            best = {"output": name, **e}
    return best


def files_size(model_path: pathlib.Path) -> int:
    import onnx
    total = model_path.stat().st_size
    m = onnx.load(str(model_path), load_external_data=False)
    locs = set()
    for t in all_tensors(m):
        if t.data_location == onnx.TensorProto.EXTERNAL:
            for kv in t.external_data:
                if kv.key == "location":
                    locs.add(kv.value)
    for loc in locs:
        p = model_path.parent / loc
        if p.exists():
            total += p.stat().st_size
    return total


def all_tensors(m):
    def graph_tensors(g):
        yield from g.initializer
        for n in g.node:
            for a in n.attribute:
                if a.HasField("t"):
                    yield a.t
                if a.HasField("g"):
                    yield from graph_tensors(a.g)
                for sg in a.graphs:
                    yield from graph_tensors(sg)
    yield from graph_tensors(m.graph)


def all_nodes(m):
    def graph_nodes(g):
        for n in g.node:
            yield n
            for a in n.attribute:
                if a.HasField("g"):
                    yield from graph_nodes(a.g)
                for sg in a.graphs:
                    yield from graph_nodes(sg)
    yield from graph_nodes(m.graph)
    for f in m.functions:
        yield from f.node


def model_info(path: pathlib.Path) -> dict:
    import onnx
    m = onnx.load(str(path), load_external_data=False)
    ops: dict[str, int] = {}
    casts = 0
    for n in all_nodes(m):
        key = (n.domain + "::" if n.domain not in ("", "ai.onnx") else "") + n.op_type
        ops[key] = ops.get(key, 0) + 1
        if n.op_type == "Cast" and n.domain in ("", "ai.onnx"):
            casts += 1
    external = any(t.data_location == onnx.TensorProto.EXTERNAL for t in all_tensors(m))
    return {
        "ir_version": m.ir_version,
        "opsets": {(o.domain or "ai.onnx"): o.version for o in m.opset_import},
        "nodes": len(m.graph.node),
        "functions": len(m.functions),
        "ops": dict(sorted(ops.items())),
        "casts": casts,
        "external_data": external,
        "size": files_size(path),
        "inputs": [i.name for i in m.graph.input
                   if i.name not in {t.name for t in m.graph.initializer}],
        "outputs": [o.name for o in m.graph.output],
    }


def error_lines(stderr: str) -> list[str]:
    return [l for l in stderr.splitlines() if l.startswith("ampc: error:")]


def first_error(stderr: str, rc: int) -> str:
    errs = error_lines(stderr)
    if errs:
        return errs[0]
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    tail = lines[-1] if lines else "(no stderr)"
    return f"exit {rc}: {tail}"


def run_ampc(ampc: str, args: list[str], timeout: float, log: pathlib.Path) -> dict:
    """Runs ampc, retrying when the binary is being replaced (exec failures)."""
    for attempt in range(6):
        t0 = now()
        try:
            p = subprocess.run([ampc, *args], capture_output=True, text=True, timeout=timeout,
                               env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        except subprocess.TimeoutExpired as e:
            wall = now() - t0
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            log.write_text(f"$ ampc {' '.join(args)}\n(timed out after {wall:.0f} s)\n{err}")
            return {"rc": None, "timeout": True, "wall_s": wall, "stderr": err,
                    "error": f"timed out after {timeout:.0f} s (not finished)"}
        except OSError as e:  # ETXTBSY / ENOENT while a rebuild replaces the binary
            time.sleep(30)
            continue
        wall = now() - t0
        if p.returncode in (126, 127):
            time.sleep(30)
            continue
        log.write_text(f"$ ampc {' '.join(args)}\nrc {p.returncode}, {wall:.2f} s\n"
                       f"--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}")
        res = {"rc": p.returncode, "wall_s": wall, "stderr": p.stderr, "stdout": p.stdout}
        if p.returncode != 0:
            res["error"] = first_error(p.stderr, p.returncode)
        return res
    return {"rc": None, "wall_s": 0.0, "stderr": "", "error": "could not execute ampc"}


def summary_line(stderr: str) -> str | None:
    for l in stderr.splitlines():
        if " -> " in l and "nodes:" in l and l.startswith("ampc: "):
            return l
    return None


def run_note(stderr: str) -> list[str]:
    lines = [l for l in stderr.splitlines()
             if l.startswith("ampc:") and "error" not in l and not l.startswith("ampc: wrote ")]
    warnings = [l for l in lines if "warning:" in l]
    notes = [l for l in lines if "warning:" not in l][:5]
    if warnings:
        notes.append(f"({len(warnings)} warning lines, the first: {warnings[0]})")
    return notes


# ----------------------------------------------------------------------------- models

def build_model(name: str):
    import torch
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    if name in CALIBRATE:
        model, inputs = build_model(CALIBRATE[name])
        crng = np.random.default_rng(1)
        for mod in model.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                mod.reset_running_stats()
                mod.momentum = None
        model.train()
        with torch.no_grad():
            for _ in range(4):
                model(torch.from_numpy(crng.standard_normal((8, 3, 224, 224),
                                                            dtype=np.float32)))
        return model.eval(), inputs
    if name in ("resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny",
                "vit_b_16", "swin_t"):
        import torchvision
        model = getattr(torchvision.models, name)(weights=None)
        if name == "vit_b_16":
            # torchvision initialises ViT's head to zeros: every logit would be 0
            torch.nn.init.normal_(model.heads.head.weight, std=0.02)
        x = rng.standard_normal((1, 3, 224, 224), dtype=np.float32)
        return model.eval(), {"x": x}
    import transformers
    if name == "bert":
        model = transformers.BertModel(transformers.BertConfig())
        vocab = model.config.vocab_size
    elif name == "gpt2":
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(use_cache=False))
        vocab = model.config.vocab_size
    elif name == "distilbert":
        model = transformers.DistilBertModel(transformers.DistilBertConfig())
        vocab = model.config.vocab_size
    else:
        raise SystemExit(f"unknown model {name}")
    ids = rng.integers(0, vocab, size=(1, SEQ), dtype=np.int64)
    inputs = {"input_ids": ids}
    if name in ("bert", "distilbert"):
        mask = np.ones((1, SEQ), dtype=np.int64)
        mask[0, SEQ - 16:] = 0  # 16 padding positions, as a padded batch has
        inputs["attention_mask"] = mask
    return model.eval(), inputs


def KwargsWrapper(model, names):
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            return self.model(**dict(zip(names, args)), return_dict=False)

    return Wrapper().eval()


def torch_outputs(out) -> list[np.ndarray]:
    import torch
    if isinstance(out, torch.Tensor):
        return [out.detach().numpy()]
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    res = []
    for o in out:
        res.extend(torch_outputs(o))
    return res


def export(model, inputs: dict, tin: tuple, path: pathlib.Path, exporter: str) -> dict:
    """Exports `model` called on `tin` (the tensors of `inputs`) to `path` with `exporter`
    (dynamo: the default call; legacy: opset 17). Returns export_call (and export_note)."""
    import torch
    if exporter == "dynamo":
        torch.onnx.export(model, tin, str(path))
        return {"export_call": "torch.onnx.export(model, args, path)"}
    call = "torch.onnx.export(model, args, path, dynamo=False, opset_version=17)"
    try:
        torch.onnx.export(model, tin, str(path), dynamo=False, opset_version=17)
        return {"export_call": call}
    except TypeError as e:
        if not hasattr(model, "config"):
            raise
        # transformers 5's forward wrappers and the legacy tracer's positional arguments clash
        # ("got multiple values for argument 'use_cache'"): export a module that calls the model
        # with keyword arguments instead
        torch.onnx.export(KwargsWrapper(model, list(inputs)), tin, str(path), dynamo=False,
                          opset_version=17, input_names=list(inputs))
        return {"export_call": call + " on KwargsWrapper(model)",
                "export_note": (f"plain call failed ({type(e).__name__}: {e}); exported "
                                "KwargsWrapper(model), which calls model(**inputs, "
                                "return_dict=False)")}


# ----------------------------------------------------------------------------- child

def child(args) -> int:
    import onnx
    import onnxruntime as ort
    import torch
    torch.set_num_threads(2)
    key = f"{args.model}-{args.exporter}"
    work = pathlib.Path(args.work) / key
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    result_path = pathlib.Path(args.work) / "results" / f"{key}.json"
    result_path.parent.mkdir(parents=True, exist_ok=True)
    R: dict = {"model": args.model, "exporter": args.exporter, "what": MODELS[args.model],
               "failures": [], "started": datetime.datetime.now().isoformat(timespec="seconds")}

    def save():
        result_path.write_text(json.dumps(R, indent=1, default=str))

    def fail(stage, msg):
        R["failures"].append({"stage": stage, "error": msg})
        save()

    ampc = args.ampc
    # 1. export
    model, inputs = build_model(args.model)
    tin = tuple(torch.from_numpy(v) for v in inputs.values())
    with torch.no_grad():
        ref_torch = torch_outputs(model(*tin))
    path = work / "model.onnx"
    t0 = now()
    try:
        with torch.no_grad():
            R.update(export(model, inputs, tin, path, args.exporter))
    except Exception as e:  # noqa: BLE001
        R["export_s"] = now() - t0
        msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        (work / "export-traceback.txt").write_text(traceback.format_exc())
        fail("export", msg)
        return 0
    R["export_s"] = now() - t0
    del model
    gc.collect()
    info = model_info(path)
    R["export"] = info
    R["files"] = sorted(p.name for p in work.iterdir())
    save()
    try:
        onnx.checker.check_model(str(path), full_check=True)
        R["export_full_check"] = True
    except Exception as e:  # noqa: BLE001
        R["export_full_check"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"

    # inputs as .npy, by graph input name (positionally when names differ)
    names = info["inputs"]
    feed = {}
    for i, (k, v) in enumerate(inputs.items()):
        n = k if k in names else (names[i] if i < len(names) else k)
        feed[n] = v
    feed = {k: v for k, v in feed.items() if k in names}
    R["feed"] = {k: [str(v.dtype), list(v.shape)] for k, v in feed.items()}
    indir = work / "inputs"
    indir.mkdir()
    input_args = []
    for k, v in feed.items():
        f = indir / f"{sanitize(k)}.npy"
        np.save(f, v)
        input_args += ["--input", f"{k}={f}"]

    # onnxruntime FP32 reference
    def ort_run(p: pathlib.Path):
        so = ort.SessionOptions()
        so.intra_op_num_threads = 2
        sess = ort.InferenceSession(str(p), so, providers=["CPUExecutionProvider"])
        outs = sess.run(None, feed)
        return {o.name: v for o, v in zip(sess.get_outputs(), outs)}

    t0 = now()
    try:
        ref = ort_run(path)
    except Exception as e:  # noqa: BLE001
        fail("ort-fp32", f"{type(e).__name__}: {str(e).strip().splitlines()[0]}")
        ref = None
    R["ort_fp32_s"] = now() - t0
    if ref is not None:
        refs = list(ref.values())
        if len(refs) == len(ref_torch):
            R["torch_vs_ort"] = worst({n: rel_err(refs[i], ref_torch[i])
                                       for i, n in enumerate(ref)})
        else:
            R["torch_vs_ort"] = {"note": f"{len(ref_torch)} torch outputs, {len(refs)} onnx"}
    save()

    def ampc_run(stage: str, p: pathlib.Path):
        out = work / f"out-{stage}"
        r = run_ampc(ampc, ["run", str(p), *input_args, "--output-dir", str(out),
                            "--device", "cpu"], args.run_timeout, work / f"{stage}.log")
        rec = {"wall_s": r["wall_s"], "notes": run_note(r["stderr"])}
        if r.get("error"):
            rec["error"] = r["error"]
            fail(stage, r["error"])
        elif ref is not None:
            errs = {}
            for n, v in ref.items():
                f = out / f"{sanitize(n)}.npy"
                if not f.exists():
                    errs[n] = {"rel": None, "note": f"no {f.name} written"}
                    continue
                errs[n] = rel_err(np.load(f), v)
            rec["errs"] = errs
            rec["worst"] = worst(errs)
        if out.exists():
            shutil.rmtree(out)
        R[stage] = rec
        save()

    # 2. ampc run FP32
    ampc_run("ampc-fp32", path)

    # 3./4. compile, check, run
    for dtype in ("fp16", "bf16"):
        outp = work / f"model.{dtype}.onnx"
        r = run_ampc(ampc, [str(path), "-o", str(outp), "--dtype", dtype,
                            "--report", str(work / f"report.{dtype}.json")],
                     args.run_timeout, work / f"compile-{dtype}.log")
        rec = {"wall_s": r["wall_s"], "summary": summary_line(r["stderr"]),
               "warnings": [l for l in r["stderr"].splitlines() if "warning:" in l]}
        R[f"compile-{dtype}"] = rec
        try:
            rep = json.loads((work / f"report.{dtype}.json").read_text())
            rec["warnings"] += rep.get("warnings", [])[:5]
            rec["nodes_by_dtype"] = rep["summary"]["nodes_by_dtype"]
        except (OSError, ValueError, KeyError):
            pass
        if r.get("error"):
            rec["error"] = r["error"]
            fail(f"compile-{dtype}", r["error"])
            continue
        oi = model_info(outp)
        rec.update({"casts": oi["casts"], "size": oi["size"], "ir_version": oi["ir_version"],
                    "opsets": oi["opsets"], "external_data": oi["external_data"],
                    "files": sorted(p.name for p in work.iterdir()
                                    if p.name.startswith(f"model.{dtype}"))})
        try:
            onnx.checker.check_model(str(outp), full_check=True)
            rec["full_check"] = True
        except Exception as e:  # noqa: BLE001
            rec["full_check"] = False
            msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"
            rec["full_check_error"] = msg
            fail(f"full_check-{dtype}", msg)
        save()
        if dtype == "fp16" and ref is not None:
            t0 = now()
            try:
                o16 = ort_run(outp)
                rec["ort_loads"] = True
                errs = {n: rel_err(o16[n], v) for n, v in ref.items() if n in o16}
                rec["ort_errs"] = errs
                rec["ort_worst"] = worst(errs)
            except Exception as e:  # noqa: BLE001
                rec["ort_loads"] = False
                msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"
                rec["ort_error"] = msg
                fail("ort-fp16", msg)
            rec["ort_s"] = now() - t0
            save()
        ampc_run(f"ampc-{dtype}", outp)
        if not args.keep:
            for p in work.glob(f"model.{dtype}.onnx*"):
                p.unlink()

    R["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    save()
    if not args.keep:
        for p in work.glob("model.onnx*"):
            p.unlink()
        shutil.rmtree(indir, ignore_errors=True)
    return 0


# ----------------------------------------------------------------------------- report

def fmt_rel(rec: dict | None, key="worst") -> str:
    if not rec:
        return "—"
    if rec.get("error"):
        return "**fails**"
    w = rec.get(key)
    if not w:
        return "—"
    if w.get("rel") is None:
        return f"? ({w.get('note')})"
    s = f"{w['rel']:.2e}"
    if w.get("nonfinite"):
        s += f" ({w['nonfinite']} non-finite)"
    return s


def fmt_mb(n) -> str:
    return f"{n / 1e6:.1f}" if isinstance(n, (int, float)) else "—"


def versions() -> dict:
    v = {"python": platform.python_version()}
    for mod in ("torch", "torchvision", "transformers", "onnxscript", "onnx", "onnxruntime",
                "numpy"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            v[mod] = "not installed"
    return v


def write_report(args, meta: dict) -> pathlib.Path:
    res_dir = pathlib.Path(args.work) / "results"
    rows = []
    for key in meta["runs"]:
        f = res_dir / f"{key}.json"
        if f.exists():
            rows.append(json.loads(f.read_text()))
    L = []
    L.append("# Full-size PyTorch exports through ampc (issue 20)\n")
    L.append(f"Run {meta['date']} on {meta['machine']}.\n")
    L.append(f"Command: `{meta['command']}` (each model in its own child process, one at a "
             f"time; `ampc run` and compile limited to {args.run_timeout:.0f} s each).\n")
    L.append("Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".\n")
    L.append(f"ampc: `{meta['ampc_version']}`; binary {meta['ampc_binary']} "
             f"(built {meta['ampc_mtime']}, sha256 {meta['ampc_sha256'][:16]}…, snapshot copied "
             f"before the run), repository HEAD {meta['head']}.\n")
    L.append(
        "Models are randomly initialised with `torch.manual_seed(0)` (torchvision "
        "`weights=None`; transformers from `BertConfig()`, `GPT2Config(use_cache=False)`, "
        "`DistilBertConfig()`, default sizes; nothing downloaded), in eval mode. Inputs "
        "(numpy seed 0): images N(0,1) float32[1,3,224,224]; token ids uniform int64[1,128]; "
        "BERT and DistilBERT also get `attention_mask` int64[1,128] with the last 16 positions "
        "0 (padding). Export: `torch.onnx.export(model, args, path)` (dynamo, default opset, "
        "default `external_data`) or, for `legacy`, `dynamo=False, opset_version=17`.\n")
    L.append(
        "Errors are max|out − ref| / max|ref| over the worst output, against onnxruntime's "
        "FP32 run of the export on the CPU EP (default graph optimizations, 2 threads). "
        "`ampc FP32` is `ampc run --device cpu` on the export (target ≤ 1e-4); `ampc fp16`/"
        "`ampc bf16` are `ampc run` on `ampc MODEL -o OUT --dtype fp16|bf16` (inputs and "
        "outputs stay FP32); `ort fp16` is onnxruntime on the fp16 output. `torch vs ort` is "
        "the export's own fidelity (onnxruntime's CPU EP runs FP16 nodes it has no FP16 kernel for in "
        "FP32, behind casts it inserts, so `ort fp16` is not FP16 arithmetic throughout; "
        "`ampc fp16` is). Casts: Cast nodes in the output (the export's own in "
        "parentheses). Sizes in MB including external data. Times: wall seconds of the "
        "compile and of each `ampc run` (FP32/fp16/bf16).\n")
    hdr = ["model", "exporter", "IR/opset", "fp16 compile (low/fp32 nodes)", "bf16 compile",
           "full_check fp16/bf16", "ort loads fp16", "torch vs ort", "ampc FP32 vs ort",
           "ampc fp16", "ampc bf16", "ort fp16", "casts fp16/bf16 (export)",
           "size MB fp32/fp16/bf16", "compile s fp16/bf16", "ampc run s fp32/fp16/bf16"]
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|" + "---|" * len(hdr))
    for R in rows:
        ex = R.get("export") or {}
        c16 = R.get("compile-fp16") or {}
        c8 = R.get("compile-bf16") or {}

        def ok(c):
            if not c:
                return "—"
            if c.get("error"):
                return "**fails**"
            n = c.get("nodes_by_dtype") or {}
            low = sum(v for k, v in n.items() if k in ("fp16", "bf16"))
            return f"ok ({low}/{n.get('fp32', '?')})" if n else "ok"

        def fc(c):
            if not c or c.get("error"):
                return "—"
            return "ok" if c.get("full_check") is True else "**fails**"

        if not ex:
            irop = "export fails"
        else:
            ops = ex["opsets"]
            extra = ",".join(f"{d} {v}" for d, v in ops.items() if d != "ai.onnx")
            irop = f"{ex['ir_version']}/{ops.get('ai.onnx', '?')}" + (f" (+{extra})" if extra else "")
            if ex.get("external_data"):
                irop += ", ext. data"
        tvo = R.get("torch_vs_ort") or {}
        tvo_s = f"{tvo['rel']:.1e}" if isinstance(tvo.get("rel"), float) else "—"
        ort16 = "—"
        if c16 and not c16.get("error") and "ort_loads" in c16:
            ort16 = "yes" if c16["ort_loads"] else "**no**"
        runs = "/".join(
            (f"{R[s]['wall_s']:.1f}" + ("*" if R[s].get("error") else "")) if s in R else "—"
            for s in ("ampc-fp32", "ampc-fp16", "ampc-bf16"))
        row = [
            R["model"], R["exporter"], irop, ok(c16), ok(c8), f"{fc(c16)}/{fc(c8)}", ort16,
            tvo_s, fmt_rel(R.get("ampc-fp32")), fmt_rel(R.get("ampc-fp16")),
            fmt_rel(R.get("ampc-bf16")),
            fmt_rel(c16, "ort_worst") if c16 and c16.get("ort_loads") else "—",
            f"{c16.get('casts', '—')}/{c8.get('casts', '—')} ({ex.get('casts', '—')})",
            f"{fmt_mb(ex.get('size'))}/{fmt_mb(c16.get('size'))}/{fmt_mb(c8.get('size'))}",
            "/".join((f"{c['wall_s']:.1f}" if c and "wall_s" in c else "—") for c in (c16, c8)),
            runs,
        ]
        L.append("| " + " | ".join(str(x) for x in row) + " |")
    L.append("\n`*` after a time: that run failed (its error is below).\n")

    L.append("## Failures (exact ampc lines)\n")
    any_fail = False
    for R in rows:
        for f in R.get("failures", []):
            any_fail = True
            L.append(f"- {R['model']} ({R['exporter']}), {f['stage']}: `{f['error']}`")
        if R.get("export_full_check") not in (None, True):
            L.append(f"- {R['model']} ({R['exporter']}), export full_check: "
                     f"`{R['export_full_check']}`")
        if not R.get("finished") and R.get("export"):
            L.append(f"- {R['model']} ({R['exporter']}): did not finish (stopped after "
                     f"{', '.join(k for k in R if k.startswith(('ampc-', 'compile-')))})")
    if not any_fail:
        L.append("None.")
    L.append("")

    L.append("## Details\n")
    for R in rows:
        ex = R.get("export") or {}
        L.append(f"### {R['model']} ({R['exporter']})\n")
        L.append(f"- model: {R['what']}; export call `{R.get('export_call', '?')}`, "
                 f"{R.get('export_s', 0):.1f} s")
        if R.get("export_note"):
            L.append(f"- export note: {R['export_note']}")
        if ex:
            L.append(f"- export: IR {ex['ir_version']}, opsets {ex['opsets']}, {ex['nodes']} "
                     f"nodes, {ex['functions']} functions, external data {ex['external_data']}, "
                     f"files {R.get('files')}, inputs {R.get('feed')}, outputs {ex['outputs']}")
            L.append(f"- ops: " + ", ".join(f"{k} {v}" for k, v in ex["ops"].items()))
        for d in ("fp16", "bf16"):
            c = R.get(f"compile-{d}")
            if c:
                L.append(f"- compile {d}: " + (c.get("summary") or c.get("error") or "?")
                         + (f"; output IR {c.get('ir_version')} opsets {c.get('opsets')}"
                            if c.get("opsets") else ""))
                ws = []
                for w in c.get("warnings", []):
                    w = re.sub(r"^ampc: [^ ]*: warning: ", "", w)
                    if w not in ws:
                        ws.append(w)
                for w in ws[:3]:
                    L.append(f"  - warning: `{w}`")
                if len(ws) > 3:
                    L.append(f"  - ({len(ws)} distinct warnings recorded; the summary line has the count)")
        for s in ("ampc-fp32", "ampc-fp16", "ampc-bf16"):
            r = R.get(s)
            if r and r.get("errs"):
                L.append(f"- {s} per output: " + ", ".join(
                    f"{n} {e['rel']:.2e}" if isinstance(e.get("rel"), float) else f"{n} ?"
                    for n, e in r["errs"].items()))
            if r and r.get("notes"):
                for n in r["notes"]:
                    if "warning:" in n and not n.startswith("("):
                        continue  # runs of the first version kept warnings here
                    L.append(f"  - `{n}`")
        L.append("")
    notes = pathlib.Path(args.work) / "notes.md"
    if notes.exists():  # findings written by hand after a run
        L.append(notes.read_text())
    out = ROOT / "bench" / "results" / "torch-exports.md"
    if args.report:
        out = pathlib.Path(args.report)
    out.write_text("\n".join(L) + "\n")
    return out


# ----------------------------------------------------------------------------- parent

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help="comma-separated: " + ",".join(MODELS))
    ap.add_argument("--legacy", action="store_true",
                    help="also the legacy exporter (dynamo=False, opset 17) for bert, resnet50")
    ap.add_argument("--legacy-models", default=",".join(LEGACY_MODELS))
    ap.add_argument("--no-dynamo", action="store_true", help="skip the default exporter")
    ap.add_argument("--work", default="/tmp/exports")
    ap.add_argument("--ampc", default=str(ROOT / "build" / "compiler" / "ampc"),
                    help="the ampc binary (snapshot-copied to WORK before the run)")
    ap.add_argument("--run-timeout", type=float, default=600.0)
    ap.add_argument("--model-timeout", type=float, default=3600.0)
    ap.add_argument("--keep", action="store_true", help="keep the exported and compiled models")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the report from WORK/results/*.json and WORK/meta.json")
    ap.add_argument("--report", default=None, help="report path (default bench/results/torch-exports.md)")
    ap.add_argument("--command-line", default=None)
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "EXPORTER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)

    if args.child:
        args.model, args.exporter = args.child
        return child(args)

    meta_path = work / "meta.json"
    if args.report_only:
        meta = json.loads(meta_path.read_text())
        print(write_report(args, meta))
        return 0

    runs = []
    if not args.no_dynamo:
        runs += [(m, "dynamo") for m in args.models.split(",") if m]
    if args.legacy:
        runs += [(m, "legacy") for m in args.legacy_models.split(",") if m]
    for m, _ in runs:
        if m not in MODELS:
            ap.error(f"unknown model {m}")

    # a snapshot of the binary, so a concurrent rebuild cannot change it mid-run
    snap = work / "ampc"
    for attempt in range(10):
        try:
            shutil.copy2(args.ampc, snap)
            v = subprocess.run([str(snap), "--version"], capture_output=True, text=True,
                               timeout=60)
            if v.returncode == 0:
                break
        except (OSError, subprocess.SubprocessError):
            pass
        time.sleep(30)
    else:
        raise SystemExit(f"cannot run {args.ampc}")
    head = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %cI %s"],
                          capture_output=True, text=True).stdout.strip()
    meta = {
        "date": subprocess.run(["date"], capture_output=True, text=True).stdout.strip(),
        "machine": f"{platform.node()} ({os.cpu_count()} cores, {platform.machine()})",
        "command": args.command_line or "tools/check-torch-exports " + " ".join(sys.argv[1:]),
        "versions": versions(),
        "ampc_version": v.stdout.strip().splitlines()[0],
        "ampc_binary": args.ampc,
        "ampc_mtime": datetime.datetime.fromtimestamp(
            os.stat(args.ampc).st_mtime).isoformat(timespec="seconds"),
        "ampc_sha256": hashlib.sha256(snap.read_bytes()).hexdigest(),
        "head": head,
        "runs": [f"{m}-{e}" for m, e in runs],
    }
    if meta_path.exists():  # keep earlier runs' rows when re-running a subset
        old = json.loads(meta_path.read_text())
        meta["runs"] = old.get("runs", []) + [r for r in meta["runs"]
                                              if r not in old.get("runs", [])]
    meta_path.write_text(json.dumps(meta, indent=1))
    args.ampc = str(snap)
    for m, e in runs:
        t0 = now()
        print(f"== {m} ({e})", flush=True)
        cmd = [sys.executable, __file__, "--child", m, e, "--work", str(work), "--ampc",
               str(snap), "--run-timeout", str(args.run_timeout)] + (["--keep"] if args.keep else [])
        with open(work / f"{m}-{e}.child.log", "w") as log:
            try:
                p = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                                   timeout=args.model_timeout)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        f = work / "results" / f"{m}-{e}.json"
        if rc != 0:
            R = json.loads(f.read_text()) if f.exists() else {
                "model": m, "exporter": e, "what": MODELS[m], "failures": []}
            R["failures"].append({"stage": "child", "error": f"child process ended with {rc} "
                                  f"(see {work}/{m}-{e}.child.log)"})
            f.write_text(json.dumps(R, indent=1, default=str))
        R = json.loads(f.read_text())
        print(f"   {now() - t0:.0f} s; failures: {len(R['failures'])}", flush=True)
        for fl in R["failures"]:
            print(f"   {fl['stage']}: {fl['error']}", flush=True)
        if not args.keep:
            d = work / f"{m}-{e}"
            for p in list(d.glob("*.onnx*")):
                p.unlink()
        write_report(args, meta)
    print(write_report(args, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
