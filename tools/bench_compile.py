#!/usr/bin/env python3
"""Compile-time benchmark of ampc against onnxconverter-common (issue 3, item 7).

Generates synthetic FP32 models with the onnx package (MLP chains and transformer-encoder-like
blocks, 1,000 to 1,000,000 nodes, 8x8 weights), with and without blocked nodes, and times:

  ampc          `ampc IN -o OUT [--block-node REGEX]`: the whole process, median of several runs;
  ampc all-low  the same with a --policy file that makes every op LOWER (or --lower-node='.*'
                where --policy does not work): every node that is not blocked gets the low
                dtype, which is the peer's precision assignment, so Cast counts compare like
                with like;
  peer          onnxconverter-common's float16.convert_float_to_float16(model,
                keep_io_types=True, node_block_list=[...]) on the same model: the call itself
                (load and save are reported apart), in a child process, with a timeout.

Counts the Cast nodes of every output, checks the outputs with onnx's full checker, compares the
per-node dtypes of ampc all-low and the peer, breaks ampc's time down by pass at the largest
size, prints the tables and writes them (date, machine, command) to bench/results/compile.md.
A benchmark, not a test: nothing in tools/test runs it. Run it through tools/bench-compile.
"""

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import tempfile
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK_SUFFIX = "/fp32"          # blocked nodes are named '<name>/fp32'
BLOCK_REGEX = ".*" + BLOCK_SUFFIX  # for ampc --block-node (RE2, full match)
OPSET = 17
IR_VERSION = 8


# ---------------------------------------------------------------------------------------------
# Model generation

class Builder:
    """Appends nodes and initializers straight to a GraphProto (fast enough for 1M nodes)."""

    def __init__(self, name):
        import onnx
        self.onnx = onnx
        self.graph = onnx.GraphProto(name=name)
        self.count = 0

    def node(self, op, inputs, name, attrs=None):
        n = self.graph.node.add()
        n.op_type = op
        n.name = name
        n.input.extend(inputs)
        out = name + ":0"
        n.output.append(out)
        for key, value in (attrs or {}).items():
            a = n.attribute.add()
            a.name = key
            if isinstance(value, float):
                a.type = self.onnx.AttributeProto.FLOAT
                a.f = value
            elif isinstance(value, int):
                a.type = self.onnx.AttributeProto.INT
                a.i = value
            else:
                a.type = self.onnx.AttributeProto.INTS
                a.ints.extend(value)
        self.count += 1
        return out

    def tensor(self, name, array):
        import numpy as np
        t = self.graph.initializer.add()
        t.name = name
        t.data_type = (self.onnx.TensorProto.INT64 if array.dtype == np.int64
                       else self.onnx.TensorProto.FLOAT)
        t.dims.extend(array.shape)
        t.raw_data = array.tobytes()
        return name

    def io(self, field, name, shape):
        v = field.add()
        v.name = name
        tt = v.type.tensor_type
        tt.elem_type = self.onnx.TensorProto.FLOAT
        for d in shape:
            tt.shape.dim.add().dim_value = d


def weights(rng, shape, scale=0.3):
    import numpy as np
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def build_mlp(target_nodes, dim):
    """x -> [MatMul(W) -> Add(b) -> Relu] * L -> y; 3 nodes per layer."""
    import numpy as np
    rng = np.random.default_rng(0)
    b = Builder("mlp")
    b.io(b.graph.input, "x", [4, dim])
    x = "x"
    layers = max(1, round(target_nodes / 3))
    for i in range(layers):
        p = f"mlp{i}"
        w = b.tensor(p + ".w", weights(rng, (dim, dim), 1.0 / np.sqrt(dim)))
        bias = b.tensor(p + ".b", weights(rng, (dim,), 0.1))
        x = b.node("MatMul", [x, w], p + "/MatMul")
        x = b.node("Add", [x, bias], p + "/Add")
        x = b.node("Relu", [x], p + "/Relu")
    b.graph.node[-1].output[0] = "y"
    b.io(b.graph.output, "y", [4, dim])
    return b


def build_encoder(target_nodes, dim):
    """Pre-LN transformer encoder blocks, 33 nodes each: LayerNormalization, Q/K/V MatMul+Add,
    Reshape/Transpose into 2 heads, scores MatMul, Div, Softmax, MatMul, Transpose/Reshape back,
    output projection, residual Add, LayerNormalization, FFN with the Gelu pattern
    (Div, Erf, Add, Mul, Mul), residual Add. Shape and scalar constants are shared by all blocks;
    weights are per block."""
    import numpy as np
    rng = np.random.default_rng(0)
    seq, heads = 4, 2
    hd = dim // heads
    b = Builder("encoder")
    b.io(b.graph.input, "x", [1, seq, dim])
    split = b.tensor("shape.heads", np.array([1, seq, heads, hd], np.int64))
    merge = b.tensor("shape.model", np.array([1, seq, dim], np.int64))
    scale = b.tensor("c.sqrt_hd", np.array(np.sqrt(hd), np.float32))
    sqrt2 = b.tensor("c.sqrt2", np.array(np.sqrt(2.0), np.float32))
    one = b.tensor("c.one", np.array(1.0, np.float32))
    half = b.tensor("c.half", np.array(0.5, np.float32))
    x = "x"
    blocks = max(1, round(target_nodes / 33))
    for i in range(blocks):
        p = f"enc{i}"

        def w(n):
            return b.tensor(f"{p}.{n}.w", weights(rng, (dim, dim), 1.0 / np.sqrt(dim)))

        def bias(n):
            return b.tensor(f"{p}.{n}.b", weights(rng, (dim,), 0.1))

        def ln(n, inp):
            g = b.tensor(f"{p}.{n}.g", (1.0 + weights(rng, (dim,), 0.1)).astype(np.float32))
            return b.node("LayerNormalization", [inp, g, bias(n)], f"{p}/{n}",
                          {"axis": -1, "epsilon": 1e-5})

        def linear(n, inp):
            y = b.node("MatMul", [inp, w(n)], f"{p}/{n}/MatMul")
            return b.node("Add", [y, bias(n)], f"{p}/{n}/Add")

        h = ln("ln1", x)
        q, k, v = (linear(n, h) for n in ("q", "k", "v"))
        q = b.node("Transpose", [b.node("Reshape", [q, split], f"{p}/q/Reshape")],
                   f"{p}/q/Transpose", {"perm": [0, 2, 1, 3]})
        k = b.node("Transpose", [b.node("Reshape", [k, split], f"{p}/k/Reshape")],
                   f"{p}/k/Transpose", {"perm": [0, 2, 3, 1]})
        v = b.node("Transpose", [b.node("Reshape", [v, split], f"{p}/v/Reshape")],
                   f"{p}/v/Transpose", {"perm": [0, 2, 1, 3]})
        s = b.node("MatMul", [q, k], f"{p}/attn/MatMul")
        s = b.node("Div", [s, scale], f"{p}/attn/Div")
        s = b.node("Softmax", [s], f"{p}/attn/Softmax", {"axis": -1})
        a = b.node("MatMul", [s, v], f"{p}/attn/MatMul_1")
        a = b.node("Transpose", [a], f"{p}/attn/Transpose", {"perm": [0, 2, 1, 3]})
        a = b.node("Reshape", [a, merge], f"{p}/attn/Reshape")
        a = linear("o", a)
        x = b.node("Add", [x, a], f"{p}/res1/Add")
        h = ln("ln2", x)
        u = linear("fc1", h)
        g = b.node("Div", [u, sqrt2], f"{p}/gelu/Div")
        g = b.node("Erf", [g], f"{p}/gelu/Erf")
        g = b.node("Add", [g, one], f"{p}/gelu/Add")
        g = b.node("Mul", [u, g], f"{p}/gelu/Mul")
        g = b.node("Mul", [g, half], f"{p}/gelu/Mul_1")
        f = linear("fc2", g)
        x = b.node("Add", [x, f], f"{p}/res2/Add")
    b.graph.node[-1].output[0] = "y"
    b.io(b.graph.output, "y", [1, seq, dim])
    return b


FAMILIES = {"mlp": build_mlp, "encoder": build_encoder}


def block_nodes(graph, count):
    """Renames `count` nodes, evenly spread over the graph, to '<name>/fp32'; returns the names."""
    n = len(graph.node)
    names = []
    for k in range(count):
        node = graph.node[(2 * k + 1) * n // (2 * count)]
        node.name += BLOCK_SUFFIX
        names.append(node.name)
    return names


def generate(family, target, blocked, dim, path):
    import onnx
    b = FAMILIES[family](target, dim)
    names = block_nodes(b.graph, blocked) if blocked else []
    model = onnx.helper.make_model(b.graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)],
                                   producer_name="ampc-bench")
    model.ir_version = IR_VERSION
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(model.SerializeToString())
    with open(path + ".blocked.json.tmp", "w") as f:
        json.dump(names, f)
    os.replace(path + ".blocked.json.tmp", path + ".blocked.json")
    os.replace(tmp, path)
    return len(b.graph.node)


# ---------------------------------------------------------------------------------------------
# Measuring

def run_timed(cmd):
    """Runs cmd to its end; returns (wall s, exit code, stderr, user+sys CPU s, peak RSS KiB)."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - start
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode(errors="replace")
    return wall, p.returncode, text, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def count_casts(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    return sum(1 for n in m.graph.node if n.op_type == "Cast")


def check_and_types(path):
    """(passes onnx's full checker?, {node name: (op type, elem type of its first output)}) of a
    converted model. Types come from ONNX's shape inference; Cast nodes are left out (each tool
    names its own)."""
    import onnx
    m = onnx.load(path, load_external_data=False)
    try:
        onnx.checker.check_model(m, full_check=True)
        valid = True
    except Exception:  # noqa: BLE001 - any checker or inference error means invalid
        valid = False
    m = onnx.shape_inference.infer_shapes(m)
    types = {v.name: v.type.tensor_type.elem_type
             for v in list(m.graph.value_info) + list(m.graph.output) + list(m.graph.input)}
    return valid, {n.name: (n.op_type, types.get(n.output[0], 0))
                   for n in m.graph.node if n.op_type != "Cast"}


# Ops whose result is exact in any precision (the spec's list for cast motion): a dtype
# difference there changes no value.
EXACT_OPS = {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Gather",
             "Split", "Concat", "Identity", "Relu", "Max", "Min", "MaxPool"}
DTYPE = {1: "fp32", 10: "fp16", 16: "bf16", 0: "?"}


# How ampc is told to lower every node that is not blocked (the peer's assignment): a policy
# file that makes every op of the generated models LOWER when --policy works, else
# --lower-node='.*' (--block-node wins over both). Set by choose_all_low().
ALL_LOW_FLAGS = ["--lower-node=.*"]
ALL_OPS = ["MatMul", "Add", "Relu", "LayerNormalization", "Reshape", "Transpose", "Div",
           "Softmax", "Erf", "Mul"]


def choose_all_low(ampc, work, probe_model):
    """Uses --policy with every op LOWER if this ampc accepts it; returns a description."""
    global ALL_LOW_FLAGS
    policy = os.path.join(work, "all-low-policy.json")
    with open(policy, "w") as f:
        json.dump({"version": 1, "comment": "bench-compile: the peer's assignment",
                   "ops": {op: "LOWER" for op in ALL_OPS}}, f, indent=1)
    wall, rc, err, _, _ = run_timed([ampc, probe_model, "-o", os.path.join(work, "probe.onnx"),
                                     "--policy=" + policy])
    if rc == 0:
        ALL_LOW_FLAGS = ["--policy=" + policy]
        return (f"`--policy` with a file that makes every op of these models LOWER "
                f"({', '.join(ALL_OPS)})")
    return (f"`--lower-node='.*'` (`--policy` failed on this build: `{last_line(err)}`)")


def ampc_cmd(ampc, model, out, blocked, all_low, extra=()):
    cmd = [ampc, model, "-o", out]
    if blocked:
        cmd.append("--block-node=" + BLOCK_REGEX)
    if all_low:
        cmd += ALL_LOW_FLAGS
    return cmd + list(extra)


def time_ampc(ampc, model, out, blocked, all_low, reps, long_s):
    """Median wall and CPU time of `reps` whole-process runs (one run when the first takes more
    than long_s), the last run's summary line, and the Cast nodes of the output."""
    cmd = ampc_cmd(ampc, model, out, blocked, all_low)
    walls, cpus, rss, summary = [], [], 0, ""
    for _ in range(reps):
        wall, rc, err, cpu, peak = run_timed(cmd)
        if rc != 0:
            return {"error": f"exit {rc}: {last_line(err)}", "cmd": cmd}
        walls.append(wall)
        cpus.append(cpu)
        rss = max(rss, peak)
        summary = last_line(err)
        if wall > long_s:
            break
    return {"seconds": statistics.median(walls), "cpu": statistics.median(cpus), "runs": walls,
            "rss_kib": rss, "summary": summary, "casts": count_casts(out), "cmd": cmd}


# The peer, in a child process: load, convert (under an alarm), count casts, optionally save.
PEER_CHILD = r"""
import json, signal, sys, time
import onnx
from onnxconverter_common import float16
model_path, out_path, block_path, limit, save = sys.argv[1:6]
names = json.load(open(block_path))
t = time.perf_counter(); model = onnx.load(model_path); load_s = time.perf_counter() - t
def on_alarm(*_): raise TimeoutError()
signal.signal(signal.SIGALRM, on_alarm)
signal.alarm(int(limit))
try:
    t = time.perf_counter(); c = time.process_time()
    out = float16.convert_float_to_float16(model, keep_io_types=True, node_block_list=names)
    convert_s = time.perf_counter() - t; cpu_s = time.process_time() - c
except TimeoutError:
    print(json.dumps({"timeout": True, "load_s": load_s})); sys.exit(0)
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"[:300], "load_s": load_s})); sys.exit(0)
signal.alarm(0)
casts = sum(1 for n in out.graph.node if n.op_type == "Cast")
save_s = None
if save == "1":
    t = time.perf_counter(); onnx.save(out, out_path); save_s = time.perf_counter() - t
print(json.dumps({"convert_s": convert_s, "cpu_s": cpu_s, "load_s": load_s, "save_s": save_s,
                  "casts": casts}))
"""


def time_peer(python, model, out, block_path, reps, limit, long_s):
    """Median of the conversion call over `reps` child runs (one when it takes over long_s)."""
    runs, cpus, first = [], [], None
    for i in range(reps):
        try:
            p = subprocess.run([python, "-c", PEER_CHILD, model, out, block_path, str(limit),
                                "1" if i == 0 else "0"],
                               capture_output=True, text=True, timeout=limit + 600)
        except subprocess.TimeoutExpired:
            return {"timeout": True, "limit": limit}
        lines = p.stdout.strip().splitlines()
        if p.returncode != 0 or not lines:
            return {"error": last_line(p.stderr)[:300] or f"exit {p.returncode}"}
        r = json.loads(lines[-1])
        if "timeout" in r or "error" in r:
            r["limit"] = limit
            return r
        first = first or r
        runs.append(r["convert_s"])
        cpus.append(r["cpu_s"])
        if r["convert_s"] > long_s:
            break
    return {"seconds": statistics.median(runs), "cpu": statistics.median(cpus), "runs": runs,
            "load_s": first["load_s"], "save_s": first["save_s"], "casts": first["casts"]}


def ensure_peer(python, install):
    def importable():
        return subprocess.run([python, "-c", "import onnxconverter_common"],
                              capture_output=True).returncode == 0
    if importable() or not install:
        return importable()
    print("bench-compile: installing onnxconverter-common into the venv (the optional peer)",
          file=sys.stderr)
    pip = os.path.join(os.path.dirname(python), "pip")
    subprocess.run([pip, "install", "-q", "--disable-pip-version-check", "onnxconverter-common"])
    return importable()


def git_head():
    r = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h %s"], capture_output=True,
                       text=True)
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no",
                            "--", "passes", "compiler", "kernels", "runtime", "CMakeLists.txt"],
                           capture_output=True, text=True).stdout.strip()
    return (f"`{r.stdout.strip()}`" + (" plus uncommitted changes to ampc" if dirty else "")) \
        if r.returncode == 0 else "?"


def peer_version(python):
    r = subprocess.run([python, "-c", "import onnxconverter_common as c, onnx; "
                        "print(c.__version__, onnx.__version__)"], capture_output=True, text=True)
    return r.stdout.split() if r.returncode == 0 else ["?", "?"]


def default_passes(ampc):
    """The pass names from `ampc --help` ('Passes: a, b, c'), in the order listed."""
    text = subprocess.run([ampc, "--help"], capture_output=True, text=True).stdout
    m = re.search(r"^Passes:\s*(.+)$", text, re.M)
    return [p.strip() for p in m.group(1).split(",")] if m else ["verify-input"]


def phase_times(ampc, model, out, blocked, passes, reps):
    """Median wall and CPU seconds of `ampc --passes=` prefixes of the pipeline."""
    rows = []
    for i in range(1, len(passes) + 1):
        cmd = ampc_cmd(ampc, model, out, blocked, False, ["--passes=" + ",".join(passes[:i])])
        runs = [run_timed(cmd) for _ in range(reps)]
        if any(r[1] != 0 for r in runs):
            rows.append((passes[i - 1], None))
            continue
        rows.append((passes[i - 1], (statistics.median(r[0] for r in runs),
                                     statistics.median(r[3] for r in runs))))
    return rows


# ---------------------------------------------------------------------------------------------
# Reporting

def fmt_s(x):
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def ok(d):
    return d is not None and "seconds" in d


def peer_cell(p):
    if p is None:
        return "not run"
    if "timeout" in p:
        return f"timeout (> {p['limit']} s)"
    if "skipped" in p:
        return p["skipped"]
    if "error" in p:
        return "error"
    return fmt_s(p["seconds"])


def ratio_cell(a, p):
    if ok(a) and ok(p):
        return f"{p['seconds'] / a['seconds']:.0f}x"
    if ok(a) and p is not None and "timeout" in p:
        return f"> {p['limit'] / a['seconds']:.0f}x"
    return "-"


HEAD = ["model", "nodes", "blocked", "ampc s", "peer s", "ratio", "ampc CPU s", "peer CPU s",
        "CPU ratio", "casts(ampc)", "casts(peer)", "ampc all-low s", "casts(ampc all-low)",
        "same dtypes", "checker"]


def table_row(r):
    a, low, p = r["ampc"], r["ampc_low"], r["peer"]
    cells = [r["family"], f"{r['nodes']:,}", f"{r['blocked']:,}",
             fmt_s(a["seconds"]) if ok(a) else "error", peer_cell(p), ratio_cell(a, p),
             fmt_s(a.get("cpu")), fmt_s(p["cpu"]) if ok(p) else "-",
             f"{p['cpu'] / a['cpu']:.0f}x" if ok(a) and ok(p) else "-",
             str(a.get("casts", "-")), str(p["casts"]) if ok(p) else "-",
             fmt_s(low["seconds"]) if ok(low) else ("error" if low else "-"),
             str(low["casts"]) if ok(low) else "-",
             r.get("same", "-"), r.get("valid", "-")]
    return "| " + " | ".join(cells) + " |"


def table(rows):
    return "\n".join(["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)] +
                     [table_row(r) for r in rows])


def phase_table(phases):
    if not phases:
        return ""
    names = [p for p, _ in phases[0][1]]
    lines = ["| model | " + " | ".join(("" if i == 0 else "+") + p
                                       for i, p in enumerate(names)) + " |",
             "|---|" + "---|" * len(names)]
    for stem, ph in phases:
        cells, prev = [], (0.0, 0.0)
        for _, t in ph:
            if t is None:
                cells.append("error")
                continue
            cells.append(f"{t[0]:.2f} / {t[1]:.2f} (+{t[1] - prev[1]:.2f})")
            prev = t
        lines.append(f"| {stem} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def details(rows):
    out = []
    for r in rows:
        name = f"{r['family']} {r['nodes']:,} nodes, {r['blocked']:,} blocked"
        a, low, p = r["ampc"], r["ampc_low"], r["peer"]
        if ok(a):
            out.append(f"- {name}: ampc runs {', '.join(fmt_s(t) for t in a['runs'])} s wall, "
                       f"peak RSS {a['rss_kib'] / 1024:.0f} MiB; its summary line: "
                       f"`{a['summary']}`")
        else:
            out.append(f"- {name}: ampc failed: `{a['error']}`")
        if low and not ok(low):
            out.append(f"  - ampc all-low failed: `{low['error']}`")
        if ok(p):
            out.append(f"  - peer: convert_float_to_float16 {', '.join(fmt_s(t) for t in p['runs'])}"
                       f" s wall ({fmt_s(p['cpu'])} s CPU); onnx.load {fmt_s(p['load_s'])} s, "
                       f"onnx.save {fmt_s(p['save_s'])} s (not in the peer's time)")
        elif p and "error" in p:
            out.append(f"  - peer failed: `{p['error']}`")
        elif p and "timeout" in p:
            out.append(f"  - peer: the conversion call did not finish in {p['limit']} s "
                       f"(onnx.load took {fmt_s(p.get('load_s'))} s)")
        if r.get("same_detail"):
            out.append(f"  - dtypes that differ (ampc all-low vs peer): {r['same_detail']}")
    return "\n".join(out)


def per_node_us(rows):
    """Microseconds of ampc wall time per node, by family and blocked variant, per size."""
    sizes = sorted({r["size"] for r in rows})
    keys = []
    for r in rows:
        k = (r["family"], r["blocked"] > 0)
        if k not in keys:
            keys.append(k)
    lines = ["| model | " + " | ".join(f"~{s:,} nodes" for s in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    for fam, blk in keys:
        cells = []
        for s in sizes:
            r = next((r for r in rows if r["family"] == fam and (r["blocked"] > 0) == blk
                      and r["size"] == s), None)
            n = r["nodes"] if r else 1
            cells.append(f"{1e6 * r['ampc']['seconds'] / n:.1f} ({1e6 * r['ampc']['cpu'] / n:.1f})"
                         if r and ok(r["ampc"]) else "-")
        lines.append(f"| {fam}{' blocked' if blk else ''} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(rows):
    out = []
    big = [r for r in rows if r["nodes"] >= 100000 and ok(r["ampc"])]
    for r in big:
        twelve = [q for q in rows if q["family"] == r["family"] and (q["blocked"] > 0) ==
                  (r["blocked"] > 0) and 10000 <= q["nodes"] <= 14000 and ok(q["ampc"])]
        if twelve and r["nodes"] > twelve[0]["nodes"]:
            q = twelve[0]
            wall = (r["ampc"]["seconds"] / r["nodes"]) / (q["ampc"]["seconds"] / q["nodes"])
            cpu = (r["ampc"]["cpu"] / r["nodes"]) / (q["ampc"]["cpu"] / q["nodes"])
            out.append(f"- Linear time: {r['family']}{' blocked' if r['blocked'] else ''}, "
                       f"{q['nodes']:,} -> {r['nodes']:,} nodes: CPU time per node x{cpu:.1f}, "
                       f"wall time per node x{wall:.1f}; "
                       + ("met" if cpu <= 1.5 else "not met (linear is x1; judged on CPU time, "
                          "which other work on the machine disturbs less)"))
    for r in rows:
        if 10000 <= r["nodes"] <= 14000 and r["blocked"] and ok(r["ampc"]):
            p = r["peer"]
            if ok(p):
                x = p["seconds"] / r["ampc"]["seconds"]
                xc = p["cpu"] / r["ampc"]["cpu"]
                out.append(f"- 100x at {r['nodes']:,} nodes with {r['blocked']} blocked "
                           f"({r['family']}): {x:.0f}x wall ({fmt_s(p['seconds'])} s vs "
                           f"{fmt_s(r['ampc']['seconds'])} s), {xc:.0f}x CPU "
                           f"({fmt_s(p['cpu'])} s vs {fmt_s(r['ampc']['cpu'])} s); "
                           + ("met" if min(x, xc) >= 100 else
                              f"not met: ampc would need {p['seconds'] / 100:.3f} s wall"))
    for r in rows:
        if r["size"] >= 1000000 and ok(r["ampc"]):
            s = r["ampc"]["seconds"]
            out.append(f"- 1,000,000 nodes under 10 s ({r['family']}"
                       f"{', ' + format(r['blocked'], ',') + ' blocked' if r['blocked'] else ''}): "
                       f"{fmt_s(s)} s wall, {fmt_s(r['ampc']['cpu'])} s CPU; "
                       + ("met" if s < 10 else "not met"))
    for r in rows:
        low, p = r["ampc_low"], r["peer"]
        if ok(low) and ok(p):
            same = r.get("same") == "yes"
            verdict = ("met" if low["casts"] <= p["casts"] else "NOT met") if same else \
                (("met" if low["casts"] <= p["casts"] else "NOT met") +
                 f" with a caveat: the assignments differ at {r['same'][4:-1]}, ops exact in "
                 "any precision (ampc's fold-casts moved casts across them)") \
                if r.get("same_exact") else "assignments differ, see 'same dtypes'"
            invalid = " (the peer's output fails the checker)" if r.get("valid", "").endswith(
                "NO") else ""
            out.append(f"- Casts, same assignment ({r['family']} {r['nodes']:,}, "
                       f"{r['blocked']} blocked): ampc all-low {low['casts']}, peer "
                       f"{p['casts']}{invalid}: {verdict}; ampc with its default policy: "
                       f"{r['ampc']['casts']}")
    return "\n".join(out)


FAIRNESS = """\
How the comparison is made fair:

- Same model file, same blocked nodes: the blocked variant renames every 30th node (evenly spread,
  whatever its op) to `<name>/fp32`; ampc gets `--block-node='.*/fp32'`, the peer gets those
  names as `node_block_list`. Both keep the graph's I/O types (ampc's default, the peer's
  `keep_io_types=True`); the peer's other arguments are its defaults (including its own shape
  inference and `DEFAULT_OP_BLOCK_LIST`, which no op of these models is in).
- Times: ampc is timed as a whole process (load, verify, passes, checker on the output, save),
  the median of 5 runs below 100,000 nodes and of 3 from there (a single run when one takes more
  than 30 s); ampc all-low runs only where the peer has a result to compare with. The peer is
  timed on the `convert_float_to_float16` call alone (onnx.load and onnx.save are reported apart
  in the details), median of up to 3 calls, each in a fresh child process, with a timeout; after
  a timeout at one size, the same blocked/unblocked variant is not run again at that size or
  above, for either family. So the ratio favours the peer.
- Precision assignment: the two tools do not assign the same dtypes by default. The peer lowers
  every node that is not blocked. ampc's default policy keeps Softmax in FP32, and its FOLLOW ops
  (Add, LayerNormalization, Gelu's elementwise ops, ...) take the widest dtype of their non-constant
  inputs, so in the encoder the residual stream, which starts at the FP32 graph input, stays FP32
  and each block casts in and out of it; and a blocked node's FP32 flows on through FOLLOW ops
  until the next MatMul. Its "casts(ampc)" therefore answers a different question. The columns
  "ampc all-low" run ampc with every op LOWER (a `--policy` file, or `--lower-node='.*'` where
  `--policy` does not work; `--block-node` wins over both), which is the peer's assignment;
  "same dtypes" checks that node by node (the element type of each original node's first
  output after ONNX's shape inference, Casts left out), and only then is the Cast count a
  like-for-like comparison. One difference remains by design of ampc's fold-casts pass: it moves
  casts across ops that are exact in any precision (Relu, Reshape, Transpose, ...), blocked ones
  included, so a blocked Relu can end up computing in FP16 with the same values; where the
  assignments differ only at such ops, the Cast comparison is reported with that caveat.
- "checker": whether ampc's output, ampc all-low's output and the peer's output pass
  `onnx.checker.check_model(full_check=True)` with onnx from PyPI."""

NOTES_MARK = "<!-- Notes below this line are kept when tools/bench-compile rewrites the file. -->"


# ---------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(
        prog="tools/bench-compile", description=__doc__.split("\n\n")[0],
        epilog="tools/bench-compile also takes --no-build (time the ampc already in "
        "build-bench/) and honours AMPC=/path/to/ampc.")
    ap.add_argument("--ampc", required=True, help="the ampc binary to time")
    ap.add_argument("--work", default=os.path.join(ROOT, "build-bench", "bench-models"),
                    help="where generated models and outputs go (models are kept and reused)")
    ap.add_argument("--sizes", default="1000,12000,100000,1000000",
                    help="target node counts (default %(default)s)")
    ap.add_argument("--max-nodes", type=int, default=None, help="drop sizes above N")
    ap.add_argument("--quick", action="store_true",
                    help="sizes up to 12,000 only, 3 runs each, no per-pass breakdown")
    ap.add_argument("--families", default="mlp,encoder", help="mlp, encoder or both")
    ap.add_argument("--block-every", type=int, default=30,
                    help="the blocked variant blocks nodes/N nodes (default 30: 400 at 12,000)")
    ap.add_argument("--dim", type=int, default=8, help="hidden size; weights are DIMxDIM")
    ap.add_argument("--reps-small", type=int, default=5, help="ampc runs below 100,000 nodes")
    ap.add_argument("--reps-large", type=int, default=3, help="ampc runs from 100,000 nodes")
    ap.add_argument("--long", type=float, default=30,
                    help="one run only when a run takes more than this many seconds")
    ap.add_argument("--peer-reps", type=int, default=3, help="peer conversions per model")
    ap.add_argument("--peer-timeout", type=int, default=300, help="seconds per peer conversion")
    ap.add_argument("--peer-max-nodes", type=int, default=None, help="no peer above N nodes")
    ap.add_argument("--peer-no-skip", action="store_true",
                    help="run the peer at larger sizes even after it timed out at a smaller one")
    ap.add_argument("--no-peer", action="store_true", help="do not run onnxconverter-common")
    ap.add_argument("--no-install", action="store_true",
                    help="do not pip-install onnxconverter-common when it is missing")
    ap.add_argument("--all-low-max-nodes", type=int, default=100000,
                    help="run ampc all-low (the peer's assignment) where the peer has a "
                    "result (or there is no peer), up to N nodes")
    ap.add_argument("--check-max-nodes", type=int, default=100000,
                    help="checker and per-node dtype comparison up to N nodes")
    ap.add_argument("--no-phases", action="store_true",
                    help="skip the per-pass breakdown (at 12,000 nodes and the largest size)")
    ap.add_argument("--phase-families", default="encoder",
                    help="families broken down by pass, blocked variant (default %(default)s)")
    ap.add_argument("--regen", action="store_true", help="regenerate models even if present")
    ap.add_argument("--write", default=os.path.join(ROOT, "bench", "results", "compile.md"),
                    help="the results file (default %(default)s)")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--command", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--render-only", action="store_true",
                    help="rewrite the results file from the last run's WORK/results.json")
    args = ap.parse_args()
    if args.render_only:
        with open(os.path.join(args.work, "results.json")) as f:
            saved = json.load(f)
        args.command = saved["command"] or args.command
        render(args, saved)
        return

    sizes = sorted(int(s) for s in args.sizes.split(",") if s)
    if args.quick:
        sizes = [s for s in sizes if s <= 12000] or [1000, 12000]
        args.reps_small = args.reps_large = 3
        args.no_phases = True
    if args.max_nodes:
        sizes = [s for s in sizes if s <= args.max_nodes]
    families = [f for f in args.families.split(",") if f]
    for f in families:
        if f not in FAMILIES:
            ap.error(f"unknown family {f}; known: {', '.join(FAMILIES)}")
    os.makedirs(args.work, exist_ok=True)
    python = sys.executable
    peer = False if args.no_peer else ensure_peer(python, not args.no_install)
    if not args.no_peer and not peer:
        print("bench-compile: onnxconverter-common is not available; no peer columns",
              file=sys.stderr)
    load_before = os.getloadavg()
    total_start = time.perf_counter()
    import onnx

    probe = os.path.join(args.work, "probe-encoder.onnx")
    generate("encoder", 100, 3, args.dim, probe)
    all_low_how = choose_all_low(args.ampc, args.work, probe)
    print(f"bench-compile: all-low = {all_low_how}", file=sys.stderr)
    rows, timed_out = [], {}
    print("| " + " | ".join(HEAD) + " |", file=sys.stderr, flush=True)
    for size in sizes:
        for with_block in (False, True):
            for family in families:
                blocked = size // args.block_every if with_block else 0
                stem = f"{family}-{size}-d{args.dim}" + (f"-b{blocked}" if blocked else "")
                model = os.path.join(args.work, stem + ".onnx")
                if args.regen or not os.path.exists(model) or \
                        not os.path.exists(model + ".blocked.json"):
                    t = time.perf_counter()
                    generate(family, size, blocked, args.dim, model)
                    print(f"bench-compile: generated {stem} in {time.perf_counter() - t:.1f} s",
                          file=sys.stderr, flush=True)
                nodes = len(onnx.load(model, load_external_data=False).graph.node)
                reps = args.reps_small if size < 100000 else args.reps_large
                row = {"family": family, "size": size, "nodes": nodes, "blocked": blocked}
                out = os.path.join(args.work, stem + ".ampc.onnx")
                low_out = os.path.join(args.work, stem + ".ampc-low.onnx")
                peer_out = os.path.join(args.work, stem + ".peer.onnx")
                for stale in (out, low_out, peer_out):
                    if os.path.exists(stale):
                        os.remove(stale)
                row["ampc"] = time_ampc(args.ampc, model, out, blocked, False, reps, args.long)
                if not peer:
                    row["peer"] = None
                elif args.peer_max_nodes and nodes > args.peer_max_nodes:
                    row["peer"] = {"skipped": f"not run (> {args.peer_max_nodes:,} nodes)"}
                elif with_block in timed_out and not args.peer_no_skip:
                    row["peer"] = {"skipped": f"not run (timed out: {timed_out[with_block]})"}
                else:
                    row["peer"] = time_peer(python, model, peer_out, model + ".blocked.json",
                                            args.peer_reps, args.peer_timeout, args.long)
                    if "timeout" in row["peer"]:
                        timed_out[with_block] = f"{family}, {nodes:,} nodes"
                # ampc with the peer's assignment: where there is a peer result to compare with
                # (or no peer at all), up to --all-low-max-nodes.
                row["ampc_low"] = time_ampc(args.ampc, model, low_out, blocked, True, reps,
                                            args.long) \
                    if nodes <= args.all_low_max_nodes and (not peer or ok(row["peer"])) else None
                if nodes <= args.check_max_nodes:
                    checked = {}
                    for tag, path in (("ampc", out), ("low", low_out), ("peer", peer_out)):
                        if os.path.exists(path):
                            checked[tag] = check_and_types(path)
                    row["valid"] = "/".join(("yes" if checked[t][0] else "NO") if t in checked
                                            else "-" for t in ("ampc", "low", "peer"))
                    if "low" in checked and "peer" in checked and ok(row["peer"]):
                        a, b = checked["low"][1], checked["peer"][1]
                        diff = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
                        ops = sorted({(a.get(n) or b.get(n))[0] for n in diff})
                        row["same"] = "yes" if not diff else f"no ({len(diff)} {', '.join(ops)})"
                        row["same_exact"] = bool(diff) and set(ops) <= EXACT_OPS
                        row["same_detail"] = ", ".join(
                            f"{n}: ampc {DTYPE.get(a.get(n, ('', 0))[1], '?')}, peer "
                            f"{DTYPE.get(b.get(n, ('', 0))[1], '?')}" for n in diff[:4]) + (
                            f", ... ({len(diff)} in all)" if len(diff) > 4 else "")
                print(table_row(row), file=sys.stderr, flush=True)
                rows.append(row)

    phases = []
    if not args.no_phases and sizes:
        passes = default_passes(args.ampc)
        for size in sorted({s for s in sizes if s == 12000} | {max(sizes)}):
            for family in [f for f in args.phase_families.split(",") if f in families]:
                blocked = size // args.block_every
                stem = f"{family}-{size}-d{args.dim}-b{blocked}"
                print(f"bench-compile: per-pass breakdown on {stem}", file=sys.stderr, flush=True)
                phases.append((stem, phase_times(
                    args.ampc, os.path.join(args.work, stem + ".onnx"),
                    os.path.join(args.work, stem + ".phase.onnx"), blocked, passes,
                    args.reps_small if size < 100000 else 1)))
    total_s = time.perf_counter() - total_start
    load_after = os.getloadavg()
    saved = {"rows": rows, "phases": phases, "total_s": total_s, "peer": peer,
             "loads": [load_before, load_after], "all_low_how": all_low_how,
             "command": args.command, "argv": sys.argv[1:],
             "date": subprocess.run(["date"], capture_output=True, text=True).stdout.strip(),
             "git": git_head(),
             "version": (subprocess.run([args.ampc, "--version"], capture_output=True,
                                        text=True).stdout.strip().splitlines() or ["?"])[0]}
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump(saved, f, indent=1)
    render(args, saved)


def render(args, saved):
    rows, phases, peer = saved["rows"], saved["phases"], saved["peer"]
    total_s, (load_before, load_after) = saved["total_s"], saved["loads"]
    all_low_how = saved["all_low_how"]
    python = sys.executable

    text = table(rows)
    print(text)
    ptext = phase_table(phases)
    if ptext:
        print("\nampc --passes= prefixes: wall / CPU seconds (+CPU over the previous column)\n"
              + ptext)
    ttext = targets(rows)
    print("\n" + ttext)
    print(f"\nbench-compile: total {total_s / 60:.1f} min; load average {load_before[0]:.1f} "
          f"before, {load_after[0]:.1f} after", file=sys.stderr)
    if not args.no_write:
        write_results(args, rows, text, ptext, ttext, peer, python, total_s,
                      (load_before, load_after), all_low_how, saved["date"], saved["version"],
                      saved.get("git") or git_head())


def write_results(args, rows, text, ptext, ttext, peer, python, total_s, loads, all_low_how,
                  date, version, git):
    debian = open("/etc/debian_version").read().strip() \
        if os.path.exists("/etc/debian_version") else platform.platform()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    cmd = args.command or "tools/bench-compile " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    pv = peer_version(python) if peer else None
    body = [
        "# Compile time: ampc vs onnxconverter-common",
        "",
        f"- Date: {date}",
        f"- Machine: {os.cpu_count()} cores, {mem:.0f} GiB, Debian {debian}; load average "
        f"{loads[0][0]:.1f} at the start, {loads[1][0]:.1f} at the end (other work on the "
        "machine slows wall times; CPU times are given too)",
        f"- ampc: `{version or '?'}` at commit {git}, Release build without CUDA",
        f"- Peer: onnxconverter-common {pv[0]} (onnx {pv[1]}), from PyPI" if pv else
        "- Peer: not run (--no-peer)" if args.no_peer else
        "- Peer: onnxconverter-common not installed",
        f"- Command: `{cmd}` ({total_s / 60:.1f} min in all)",
        f"- Models: generated by tools/bench_compile.py with onnx (opset {OPSET}, "
        f"{args.dim}x{args.dim} weights, inline data): `mlp` = MatMul, Add, Relu per layer; "
        "`encoder` = 33-node pre-LN transformer blocks (LayerNormalization, Q/K/V MatMul+Add, "
        "Reshape/Transpose to 2 heads, MatMul, Div, Softmax, MatMul, Transpose/Reshape, "
        "output MatMul+Add, residual Add, LayerNormalization, MatMul+Add, Gelu as Div, Erf, Add, "
        "Mul, Mul, MatMul+Add, residual Add) with shape and scalar constants shared by all blocks",
        "",
        "Seconds are wall-clock medians (ampc: the whole process; peer: the conversion call); "
        "ratio = peer / ampc; CPU = user + system seconds of the same runs. \"checker\": "
        "whether the outputs of ampc / ampc all-low / the peer pass onnx's full checker.",
        "",
        text,
        "",
        "ampc wall (CPU) microseconds per node:",
        "",
        per_node_us(rows),
    ]
    if ptext:
        body += ["", "Where ampc's time goes: `ampc --passes=` prefixes of the pipeline (median "
                 "of 5 runs at 12,000 nodes, one run at the largest size), wall / CPU seconds, "
                 "in brackets the CPU seconds over the previous column, i.e. that pass's share "
                 "(the first column is load, verify-input, save and process start and exit):",
                 "", ptext]
    body += ["", "## Against the targets", "", ttext, "", FAIRNESS,
             "", f"ampc all-low was run with {all_low_how}.", "", "## Details", "",
             details(rows), ""]
    kept = ""
    if os.path.exists(args.write):
        old = open(args.write).read()
        if NOTES_MARK in old:
            kept = old[old.index(NOTES_MARK) + len(NOTES_MARK):]
    body += [NOTES_MARK + kept.rstrip("\n"), ""]
    os.makedirs(os.path.dirname(os.path.abspath(args.write)), exist_ok=True)
    with open(args.write + ".tmp", "w") as f:
        f.write("\n".join(body))
    os.replace(args.write + ".tmp", args.write)
    print(f"bench-compile: wrote {args.write}", file=sys.stderr)


if __name__ == "__main__":
    main()
