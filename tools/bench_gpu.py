#!/usr/bin/env python3
"""Training-step time of ampc against PyTorch eager, FP32 / FP16-AMP / BF16-AMP (issue 6).

    python3 tools/bench_gpu.py --bin DIR --out DIR [--budget-seconds S] [--device cuda|cpu]
                               [--quick] [--models mlp,cnn,...] [--warmup W] [--steps S]

DIR (--bin) holds ampc, ampc-models and ampc-bench-train. Needs the standard library, plus
torch for the PyTorch column (without torch that column says so and the ampc runs go on).

Models (the same architecture and batch on both sides), run in this order:

  mlp          `ampc-models mlp`, batch 256
  cnn          `ampc-models cnn`, batch 256
  transformer  `ampc-models transformer` at its default size, batch 64
  resnet       ResNet-18-style CNN written here as ONNX (stdlib protobuf writer): stem Conv 3x3
               3->64, 4 stages of 2 basic blocks (Conv-BN-Relu-Conv-BN + skip, Add, Relu) with
               64-128-256-512 channels, stages 2-4 halving the resolution with a 1x1 Conv-BN
               projection on the skip, GlobalAveragePool, Flatten, Gemm to 10 classes; 3x32x32
               input, batch 128 (tools/bench_runtime.py's builder at CIFAR ResNet-18 widths).
               Conv weights repeat a short seeded pool of He-normal draws (timing only).
  bert         `ampc-models transformer --layers 12 --hidden 768 --heads 12 --seq 128
               --ffn 3072 --vocab 30522` (BERT-base-like encoder stack), batch 32

--quick shrinks every batch, bert to 2 layers of width 128 and resnet to 16-32-64-128 channels
on 16x16 images, and takes 3 warm-up and 10 timed steps: a test of the script on a CPU.

ampc, per model and dtype: `ampc MODEL --train --loss loss (resnet: --loss-op
cross_entropy:logits) --dtype D --optimizer adam --lr 0.001`, then `ampc-bench-train --device
DEV --batch B --warmup W --steps S --profile`: one random batch reused, W untimed steps, the
median of S steps, each timed on the host clock around TrainingSession::Step, which returns when
the loss is on the host (so a step is its whole device time plus that one copy). From the third
step on, steps are CUDA Graph replays (TrainingSession::set_capture). Then S steps queued with
nothing read back until the last (ms per step, and the host's waits for the GPU among them), and
S more the same way with capture off; then 10 steps with each node timed (CUDA events, eager),
reported per op type under each table. Its JSON line is kept whole.

PyTorch eager, per model and dtype: the architecture rebuilt from models/*.cc, train mode
(BatchNormalization uses batch statistics and updates its running statistics, as ampc's step
does), torch.optim.Adam(lr=1e-3) with PyTorch's default implementation, FP32 weights; fp16:
torch.autocast(float16) + torch.amp.GradScaler; bf16: torch.autocast(bfloat16), no scaler.
TF32 off for FP32 (ampc uses TF32 only when asked), cudnn.benchmark on (ampc picks a
convolution algorithm once per shape). One random batch reused (images U[0, 1), tokens and
labels in [0, 10), as ampc-bench-train draws them). Each step (zero_grad, forward, backward,
optimizer) is timed between two CUDA events, synchronised after the step outside the timed
region; the median of S steps after W warm-up steps. The host wall clock of each step is kept
in the JSON too (on the CPU it is the only clock).

Known differences, kept on purpose: attention in torch is the exported graph's MatMul / Div /
Softmax / MatMul (not scaled_dot_product_attention); ONNX opset 17 gives Conv no bfloat16, so
ampc's bf16 CNNs keep their convolutions FP32 (each table's "nodes per dtype" line shows it)
while torch's autocast runs them in BF16; ampc's time includes copying the loss to the host,
torch's event time does not (its wall_median_ms in gpu.jsonl does, plus the launch overhead).

Every run is independent: an error (a model ampc cannot compile, an op without a CUDA kernel)
is recorded as its one-line message and the next run starts. An ampc-bench-train run that fails
(a crash included) is run once more with --no-capture, --no-memory-plans and
AMPC_CUDNN_LAYOUT=nchw, the newest GPU paths off (the device-side learning rate stays): its numbers are marked "(fallback)" and a note under the table gives the first error.
Memory: ampc's backend memory in use at most during the timed steps and held after them;
torch.cuda's max_memory_allocated and memory_reserved. Past --budget-seconds the remaining
runs are recorded as "skipped: budget"; each subprocess is also capped by --run-timeout.
Writes OUT/gpu.md (card, date, command, one table per model) and OUT/gpu.jsonl (one JSON line
per run), both rewritten after every run so an interrupted call still leaves results.
"""

from __future__ import annotations

import argparse
import array
import datetime
import gc
import json
import math
import os
import pathlib
import platform
import random
import re
import shlex
import statistics
import struct
import subprocess
import sys
import tempfile
import time

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:  # the ampc side still runs
    torch = None

DTYPES = ("fp32", "fp16", "bf16")
CLASSES = 10
LR = 0.001


# ---------------------------------------------------------------------------------------------
# Model sizes

TRANSFORMER = dict(vocab=1000, seq=32, hidden=64, heads=4, layers=2, ffn=256)
BERT = dict(vocab=30522, seq=128, hidden=768, heads=12, layers=12, ffn=3072)
BERT_QUICK = dict(vocab=1000, seq=32, hidden=128, heads=4, layers=2, ffn=512)
RESNET = dict(widths=(64, 128, 256, 512), image=32)
RESNET_QUICK = dict(widths=(16, 32, 64, 128), image=16)


def model_table(quick: bool) -> dict[str, dict]:
    """name -> kind, sizes, batch."""
    return {
        "mlp": dict(kind="mlp", batch=32 if quick else 256),
        "cnn": dict(kind="cnn", batch=16 if quick else 256),
        "transformer": dict(kind="transformer", size=TRANSFORMER, batch=8 if quick else 64),
        "resnet": dict(kind="resnet", size=RESNET_QUICK if quick else RESNET,
                       batch=4 if quick else 128),
        "bert": dict(kind="transformer", size=BERT_QUICK if quick else BERT,
                     batch=4 if quick else 32),
    }


def describe(name: str, spec: dict) -> str:
    if spec["kind"] == "transformer":
        s = spec["size"]
        return (f"{name}: transformer {s['layers']} layers, hidden {s['hidden']}, {s['heads']} "
                f"heads, seq {s['seq']}, ffn {s['ffn']}, vocab {s['vocab']}; batch {spec['batch']}")
    if spec["kind"] == "resnet":
        s = spec["size"]
        return (f"{name}: ResNet-18-style, widths {'-'.join(map(str, s['widths']))}, input "
                f"3x{s['image']}x{s['image']}; batch {spec['batch']}")
    return f"{name}: bundled `ampc-models {name}`; batch {spec['batch']}"


# ---------------------------------------------------------------------------------------------
# A minimal ONNX writer (protobuf wire format; field numbers from onnx.proto)

def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _int(field: int, n: int) -> bytes:
    return _varint(field << 3) + _varint(n)


def _len(field: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _attribute(name: str, value) -> bytes:
    if isinstance(value, float):  # AttributeProto.f, type FLOAT
        return _len(1, name) + _varint(2 << 3 | 5) + struct.pack("<f", value) + _int(20, 1)
    if isinstance(value, int):  # .i, type INT
        return _len(1, name) + _int(3, value) + _int(20, 2)
    return _len(1, name) + b"".join(_int(8, v) for v in value) + _int(20, 7)  # .ints, INTS


def _node(op: str, inputs: list[str], outputs: list[str], name: str, **attrs) -> bytes:
    return (b"".join(_len(1, i) for i in inputs) + b"".join(_len(2, o) for o in outputs) +
            _len(3, name) + _len(4, op) + b"".join(_len(5, _attribute(k, v))
                                                   for k, v in attrs.items()))


def _value_info(name: str, elem_type: int, dims: list) -> bytes:
    shape = b"".join(_len(1, _len(2, d) if isinstance(d, str) else _int(1, d)) for d in dims)
    return _len(1, name) + _len(2, _len(1, _int(1, elem_type) + _len(2, shape)))


def _model(name: str, nodes: list[bytes], initializers: list[bytes], inputs: list[bytes],
           outputs: list[bytes]) -> bytes:
    graph = (b"".join(_len(1, n) for n in nodes) + _len(2, name) +
             b"".join(_len(5, t) for t in initializers) + b"".join(_len(11, i) for i in inputs) +
             b"".join(_len(12, o) for o in outputs))
    opset = _len(1, "") + _int(2, 17)
    return _int(1, 8) + _len(2, "tools/bench_gpu.py") + _len(7, graph) + _len(8, opset)


# ---------------------------------------------------------------------------------------------
# The ResNet-style CNN as ONNX

class _Weights:
    """Seeded float32 tensors; a tensor repeats a pool of POOL draws (cheap for 11M values)."""
    POOL = 4099

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.pools: dict[tuple, bytes] = {}

    def _pool(self, kind: str, scale: float) -> bytes:
        if (kind, scale) not in self.pools:
            draw = (lambda: self.rng.gauss(0, scale)) if kind == "normal" else (
                lambda: self.rng.uniform(-scale, scale))
            values = array.array("f", [draw() for _ in range(self.POOL)])
            if sys.byteorder != "little":
                values.byteswap()
            self.pools[(kind, scale)] = values.tobytes()
        return self.pools[(kind, scale)]

    def tensor(self, name: str, dims: list[int], kind: str, scale: float) -> bytes:
        count = math.prod(dims)
        if kind == "fill":
            raw = struct.pack("<f", scale) * count
        else:
            pool = self._pool(kind, scale)
            raw = (pool * (count // self.POOL + 1))[:4 * count]
        return b"".join(_int(1, d) for d in dims) + _int(2, 1) + _len(8, name) + _len(9, raw)


class _ResNetOnnx:
    def __init__(self, seed: int = 0):
        self.weights = _Weights(seed)
        self.nodes: list[bytes] = []
        self.inits: list[bytes] = []

    def conv_bn(self, x: str, name: str, cin: int, cout: int, kernel: int, stride: int) -> str:
        """Conv (no bias, He-normal) then BatchNormalization as PyTorch initialises it."""
        std = math.sqrt(2.0 / (cin * kernel * kernel))
        self.inits.append(self.weights.tensor(f"{name}.conv.weight", [cout, cin, kernel, kernel],
                                              "normal", std))
        self.nodes.append(_node("Conv", [x, f"{name}.conv.weight"], [f"{name}/conv"],
                                f"/{name}/Conv", kernel_shape=[kernel] * 2, strides=[stride] * 2,
                                pads=[kernel // 2] * 4))
        params = [f"{name}.bn.{p}" for p in ("weight", "bias", "running_mean", "running_var")]
        for param, value in zip(params, (1.0, 0.0, 0.0, 1.0)):
            self.inits.append(self.weights.tensor(param, [cout], "fill", value))
        self.nodes.append(_node("BatchNormalization", [f"{name}/conv", *params], [f"{name}/bn"],
                                f"/{name}/BatchNormalization", epsilon=1e-5, momentum=0.9))
        return f"{name}/bn"

    def relu(self, x: str, name: str) -> str:
        self.nodes.append(_node("Relu", [x], [f"{name}/relu"], f"/{name}/Relu"))
        return f"{name}/relu"

    def block(self, x: str, name: str, cin: int, cout: int, stride: int) -> str:
        y = self.relu(self.conv_bn(x, f"{name}.conv1", cin, cout, 3, stride), f"{name}.1")
        y = self.conv_bn(y, f"{name}.conv2", cout, cout, 3, 1)
        skip = x if stride == 1 and cin == cout else self.conv_bn(
            x, f"{name}.downsample", cin, cout, 1, stride)
        self.nodes.append(_node("Add", [y, skip], [f"{name}/add"], f"/{name}/Add"))
        return self.relu(f"{name}/add", name)

    def build(self, widths: tuple[int, ...], image: int) -> bytes:
        x = self.relu(self.conv_bn("image", "stem", 3, widths[0], 3, 1), "stem")
        cin = widths[0]
        for stage, cout in enumerate(widths):
            for k in range(2):
                x = self.block(x, f"layer{stage}.{k}", cin, cout, 2 if stage and not k else 1)
                cin = cout
        self.nodes.append(_node("GlobalAveragePool", [x], ["pool"], "/GlobalAveragePool"))
        self.nodes.append(_node("Flatten", ["pool"], ["flat"], "/Flatten", axis=1))
        bound = 1 / math.sqrt(cin)
        self.inits.append(self.weights.tensor("fc.weight", [CLASSES, cin], "uniform", bound))
        self.inits.append(self.weights.tensor("fc.bias", [CLASSES], "uniform", bound))
        self.nodes.append(_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], "/fc/Gemm",
                                transB=1))
        return _model("resnet", self.nodes, self.inits,
                      [_value_info("image", 1, ["N", 3, image, image])],
                      [_value_info("logits", 1, ["N", CLASSES])])


# ---------------------------------------------------------------------------------------------
# The same architectures in PyTorch (models/*.cc)

if torch is not None:
    class Mlp(nn.Module):
        """models/mlp.cc: 784-256-128-10, Relu."""

        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                                     nn.ReLU(), nn.Linear(128, CLASSES))

        def forward(self, image):
            return self.net(image)

    class Cnn(nn.Module):
        """models/cnn.cc: 2x [Conv 3x3 pad 1 - BN - Relu - MaxPool 2] (1-16-32), 1568-128-10."""

        def __init__(self):
            super().__init__()
            layers = []
            for cin, cout in ((1, 16), (16, 32)):
                layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                           nn.MaxPool2d(2)]
            self.net = nn.Sequential(*layers, nn.Flatten(), nn.Linear(32 * 7 * 7, 128),
                                     nn.ReLU(), nn.Linear(128, CLASSES))

        def forward(self, image):
            return self.net(image)

    class EncoderLayer(nn.Module):
        """models/transformer.cc: pre-LN; attention as the exported MatMul/Div/Softmax/MatMul;
        exact-erf GELU."""

        def __init__(self, hidden: int, heads: int, ffn: int):
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.q, self.k, self.v, self.out = (nn.Linear(hidden, hidden) for _ in range(4))
            self.fc1, self.fc2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

        def attention(self, x):
            n, s, h = x.shape
            hd = h // self.heads
            q = self.q(x).reshape(n, s, self.heads, hd).transpose(1, 2)
            k = self.k(x).reshape(n, s, self.heads, hd).permute(0, 2, 3, 1)
            v = self.v(x).reshape(n, s, self.heads, hd).transpose(1, 2)
            probs = torch.softmax(torch.matmul(q, k) / math.sqrt(hd), dim=-1)
            context = torch.matmul(probs, v).transpose(1, 2).reshape(n, s, h)
            return self.out(context)

        def forward(self, x):
            x = x + self.attention(self.norm1(x))
            return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))

    class Transformer(nn.Module):
        """models/transformer.cc: token + learned position embeddings, pre-LN layers, final LN,
        mean over the sequence, linear head."""

        def __init__(self, vocab, seq, hidden, heads, layers, ffn):
            super().__init__()
            self.tokens = nn.Embedding(vocab, hidden)
            self.positions = nn.Parameter(torch.randn(seq, hidden))
            self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ffn) for _ in range(layers))
            self.final_norm = nn.LayerNorm(hidden)
            self.head = nn.Linear(hidden, CLASSES)

        def forward(self, tokens):
            x = self.tokens(tokens) + self.positions
            for layer in self.layers:
                x = layer(x)
            return self.head(self.final_norm(x).mean(dim=1))

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
            return F.relu(y + self.downsample(x))

    class ResNet(nn.Module):
        """_ResNetOnnx's graph."""

        def __init__(self, widths, image):
            super().__init__()
            del image  # any size: GlobalAveragePool
            blocks, cin = [], widths[0]
            for stage, cout in enumerate(widths):
                for k in range(2):
                    blocks.append(BasicBlock(cin, cout, 2 if stage and not k else 1))
                    cin = cout
            self.net = nn.Sequential(
                nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]),
                nn.ReLU(), *blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                nn.Linear(cin, CLASSES))

        def forward(self, image):
            return self.net(image)


def torch_model_and_batch(spec: dict, device) -> tuple:
    """The module and one batch (inputs, labels) like ampc-bench-train's."""
    g = torch.Generator().manual_seed(0)
    b = spec["batch"]
    if spec["kind"] == "mlp":
        model, x = Mlp(), torch.rand(b, 784, generator=g)
    elif spec["kind"] == "cnn":
        model, x = Cnn(), torch.rand(b, 1, 28, 28, generator=g)
    elif spec["kind"] == "transformer":
        model = Transformer(**spec["size"])
        x = torch.randint(0, CLASSES, (b, spec["size"]["seq"]), generator=g)
    else:
        size = spec["size"]["image"]
        model, x = ResNet(**spec["size"]), torch.rand(b, 3, size, size, generator=g)
    labels = torch.randint(0, CLASSES, (b,), generator=g)
    return model.to(device).train(), x.to(device), labels.to(device)


# ---------------------------------------------------------------------------------------------
# Budget

class Budget:
    def __init__(self, seconds: float, run_timeout: float):
        self.deadline = time.monotonic() + seconds
        self.run_timeout = run_timeout

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def timeout(self) -> float:
        return max(1.0, min(self.left(), self.run_timeout))


class BudgetSpent(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# ampc

def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def run_tool(command: list[str], budget: Budget, what: str,
             env: dict | None = None) -> subprocess.CompletedProcess:
    """A tool that must succeed; RuntimeError with its one-line error otherwise. `env`: variables
    to set for it."""
    if budget.left() <= 0:
        raise BudgetSpent("skipped: budget")
    limit = budget.timeout()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit, check=False,
                              env={**os.environ, **env} if env else None)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what}: timed out after {limit:.0f} s") from None
    except OSError as error:
        raise RuntimeError(f"{what}: {error}") from None
    if done.returncode < 0:
        raise RuntimeError(f"{what}: killed by signal {-done.returncode}; "
                           f"{last_line(done.stderr or done.stdout)}")
    if done.returncode != 0:
        raise RuntimeError(last_line(done.stderr or done.stdout))
    return done


def generate(name: str, spec: dict, bindir: pathlib.Path, path: pathlib.Path,
             budget: Budget) -> None:
    if spec["kind"] == "resnet":
        path.write_bytes(_ResNetOnnx().build(spec["size"]["widths"], spec["size"]["image"]))
        return
    flags = [f for k, v in spec.get("size", {}).items() for f in (f"--{k}", str(v))]
    run_tool([str(bindir / "ampc-models"), spec["kind"], "-o", str(path), *flags], budget,
             f"ampc-models {name}")


def time_ampc(spec: dict, dtype: str, model: pathlib.Path, args, budget: Budget) -> dict:
    train = model.with_suffix(f".{dtype}.train.onnx")
    loss = ["--loss-op", "cross_entropy:logits"] if spec["kind"] == "resnet" else ["--loss",
                                                                                  "loss"]
    compiled = run_tool([str(args.bin / "ampc"), str(model), "-o", str(train), "--train", *loss,
                         "--dtype", dtype, "--optimizer", "adam", "--lr", str(LR)], budget,
                        "ampc --train")
    summary = last_line(compiled.stderr)
    bench = [str(args.bin / "ampc-bench-train"), str(train), "--device", args.device, "--batch",
             str(spec["batch"]), "--warmup", str(args.warmup), "--steps", str(args.steps),
             "--profile"]
    fallback = None
    try:
        try:
            out = run_tool(bench, budget, "ampc-bench-train")
        except RuntimeError as error:
            # The newest GPU paths (capture, memory plans, NHWC) are the likeliest to fail:
            # numbers without them still count, marked as such.
            fallback = " ".join(str(error).split())
            out = run_tool(bench + ["--no-capture", "--no-memory-plans"], budget,
                           "ampc-bench-train (fallback)", env={"AMPC_CUDNN_LAYOUT": "nchw"})
    except RuntimeError as error:
        return {"error": " ".join(str(error).split()), "compile": summary,
                **({"fallback": fallback} if fallback else {})}
    finally:
        train.unlink(missing_ok=True)
    raw = last_line(out.stdout)
    return {**json.loads(raw), "raw": raw, "compile": summary,
            **({"fallback": fallback} if fallback else {})}


# ---------------------------------------------------------------------------------------------
# PyTorch eager

def torch_step(model, x, labels, optimizer, dtype: str, scaler, device_type: str):
    optimizer.zero_grad(set_to_none=True)
    amp = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(dtype)
    with torch.autocast(device_type, dtype=amp or torch.float32, enabled=amp is not None):
        loss = F.cross_entropy(model(x), labels)
    if scaler is None:
        loss.backward()
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return loss.detach()


def timed_steps(step, count: int, cuda: bool, budget: Budget) -> tuple[list, list, list]:
    """Runs `step` count times; (event ms, wall ms, losses) of each."""
    events, walls, losses = [], [], []
    for _ in range(count):
        if budget.left() <= 0:
            raise BudgetSpent("skipped: budget (during the PyTorch run)")
        start = time.perf_counter()
        if cuda:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            losses.append(step())
            end.record()
            end.synchronize()
            events.append(begin.elapsed_time(end))
        else:
            losses.append(step())
        walls.append((time.perf_counter() - start) * 1000)
    return events, walls, losses


def measure_torch(spec: dict, dtype: str, args, budget: Budget, device) -> dict:
    cuda = device.type == "cuda"
    torch.manual_seed(0)
    model, x, labels = torch_model_and_batch(spec, device)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    scaler = torch.amp.GradScaler(device.type) if dtype == "fp16" else None

    def step():
        return torch_step(model, x, labels, optimizer, dtype, scaler, device.type)

    warm_losses = timed_steps(step, args.warmup, cuda, budget)[2]
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    events, walls, losses = timed_steps(step, args.steps, cuda, budget)
    times = events if cuda else walls
    result = {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
              "wall_median_ms": statistics.median(walls), "steps": len(times),
              "clock": "cuda events" if cuda else "host",
              "first_loss": (warm_losses or losses)[0].item(), "last_loss": losses[-1].item()}
    if scaler is not None:
        result["scale"] = scaler.get_scale()
    if cuda:  # allocated tensors at most, and what the caching allocator holds
        result["peak_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
        result["held_mib"] = torch.cuda.memory_reserved(device) / 2**20
    return result


def time_torch(spec: dict, dtype: str, args, budget: Budget) -> dict:
    if torch is None:
        raise RuntimeError("torch is not installed")
    if budget.left() <= 0:
        raise BudgetSpent("skipped: budget")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False")
    free_memory(device)  # an earlier run's error may have held its tensors until now
    try:
        return measure_torch(spec, dtype, args, budget, device)
    finally:
        free_memory(device)


def free_memory(device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def configure_torch() -> None:
    if torch is None:
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True


# ---------------------------------------------------------------------------------------------
# Report

def card(device: str) -> str:
    if device == "cuda" and torch is not None and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"CPU: {line.split(':', 1)[1].strip()}"
    except OSError:
        pass
    return f"CPU: {platform.processor() or platform.machine()}"


def versions() -> str:
    if torch is None:
        return "torch: not installed"
    text = f"torch {torch.__version__}"
    if torch.version.cuda:
        text += f" (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()})"
    return text


def ms(run: dict | None) -> float | None:
    return run.get("median_ms") if run and "error" not in run else None


def cell(run: dict | None) -> str:
    if run is None:
        return "-"
    if "error" in run:
        return run["error"].replace("|", "\\|")[:200]
    if "fallback" in run:  # the run with capture and timed layouts failed (fallbacks_md)
        return f"{run['median_ms']:.3f} (fallback)"
    return f"{run['median_ms']:.3f}"


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def memory(run) -> str:
    """'peak / held' MiB of a run that measured them, else '-'."""
    if not ms(run) or "peak_mib" not in run:
        return "-"
    return f"{run['peak_mib']:.0f} / {run['held_mib']:.0f}"


def model_table_md(name: str, runs: dict) -> list[str]:
    lines = ["| dtype | ampc median ms | torch eager median ms | ampc/torch | AMP speedup over "
             "FP32 (ampc, torch) | host copies per step | applied/skipped | ampc ms per step "
             "queued, captured / eager | host waits per queued step | replayed steps | memory "
             "MiB peak / held (ampc; torch) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    base_a, base_t = ms(runs.get((name, "fp32", "ampc"))), ms(runs.get((name, "fp32", "torch")))
    for dtype in DTYPES:
        a, t = runs.get((name, dtype, "ampc")), runs.get((name, dtype, "torch"))
        if a is None and t is None:
            continue
        speedup = "baseline" if dtype == "fp32" else \
            f"{ratio(base_a, ms(a))}, {ratio(base_t, ms(t))}"
        copies = f"{a['host_copies_per_step']:.2f}" if ms(a) else "-"
        applied = f"{a['applied']}/{a['skipped']}" if ms(a) else "-"
        queued = waits = replayed = "-"
        if ms(a) and "eager_unsynced_ms_per_step" in a:
            queued = f"{a['unsynced_ms_per_step']:.3f} / {a['eager_unsynced_ms_per_step']:.3f}"
            waits = f"{a['syncs_per_step']:.2f}"
            replayed = str(a["replayed_steps"]) + (f" ({a['capture_off']})" if a["capture_off"]
                                                   else "")
        lines.append(f"| {dtype} | {cell(a)} | {cell(t)} | {ratio(ms(a), ms(t))} | {speedup} | "
                     f"{copies} | {applied} | {queued} | {waits} | {replayed} | "
                     f"{memory(a)}; {memory(t)} |")
    notes = [f"- ampc {dtype} failed with step capture, memory plans and timed convolution "
             f"layouts ({a['fallback'][:300]}); its numbers are from a rerun with --no-capture, "
             "--no-memory-plans and AMPC_CUDNN_LAYOUT=nchw." for dtype in DTYPES
             if (a := runs.get((name, dtype, "ampc"))) and "fallback" in a]
    return lines + ([""] + notes if notes else [])


# The loss-scaling stage's ops (issue 6: under 2% of the step); the optimizers are not part of it.
SCALER_OPS = ("CheckFinite", "UnscaleClip", "CheckUnscaleClip", "UpdateScale")


def profile_md(name: str, runs: dict) -> list[str]:
    """Where ampc's step goes: --profile's milliseconds per step of the largest op types."""
    lines = []
    for dtype in DTYPES:
        run = runs.get((name, dtype, "ampc")) or {}
        if "profile" not in run:
            continue
        top = sorted(run["profile"].items(), key=lambda kv: -kv[1])[:6]
        shown = ", ".join(f"{op} {ms:.2f}" for op, ms in top)
        scaler = sum(run["profile"].get(op, 0) for op in SCALER_OPS)
        lines.append(f"- ampc {dtype}, ms per step by op (of {run['profiled_ms']:.2f} in "
                     f"nodes): {shown}; loss scaling ({', '.join(SCALER_OPS)}) {scaler:.3f} = "
                     f"{100 * scaler / run['profiled_ms']:.2f}%")
    return lines + [""] if lines else []


def precision_md(name: str, runs: dict) -> list[str]:
    """What ampc's autocast made of each dtype: its compile summary's node counts."""
    found = []
    for dtype in DTYPES:
        match = re.search(r"\d+ nodes: [^;]*", (runs.get((name, dtype, "ampc")) or {}).get(
            "compile", ""))
        if match:
            found.append(f"{dtype}: {match.group(0)}")
    return [f"ampc's nodes per dtype ({'; '.join(found)})", ""] if found else []


def targets_md(runs: dict, names: list[str]) -> list[str]:
    """Issue 6's targets, where the runs exist."""
    lines = []
    for name, article in (("resnet", 1.62), ("bert", 1.81)):
        if name not in names:
            continue
        for side in ("ampc", "torch"):
            fp32, fp16 = ms(runs.get((name, "fp32", side))), ms(runs.get((name, "fp16", side)))
            got = f"{fp32 / fp16:.2f}x" if fp32 and fp16 else "not measured"
            lines.append(f"- {name}, {side}: FP16-AMP over FP32 {got} (articles: {article}x)")
    for name in names:
        for dtype in ("fp16", "bf16"):
            a, t = ms(runs.get((name, dtype, "ampc"))), ms(runs.get((name, dtype, "torch")))
            if a and t:
                lines.append(f"- {name} {dtype}: ampc/torch eager AMP = {a / t:.2f} "
                             "(target <= 1, goal 0.8)")
    return lines


def write_report(out: pathlib.Path, args, specs: dict, runs: dict, started: str) -> None:
    text = ["# GPU training step: ampc vs PyTorch eager", "",
            f"- card: {card(args.device)}", f"- date: {started}",
            f"- command: `{args.command}`", f"- {versions()}",
            f"- steps: {args.warmup} warm-up, median of {args.steps}; Adam lr {LR}; "
            f"budget {args.budget_seconds:g} s",
            "- ampc: host clock around each TrainingSession::Step (ends with the loss on the "
            "host); torch: CUDA events around zero_grad + forward + backward + optimizer "
            "(host clock on the CPU); method in tools/bench_gpu.py's docstring", ""]
    for name, spec in specs.items():
        text += [f"## {describe(name, spec)}", "", *model_table_md(name, runs), "",
                 *precision_md(name, runs), *profile_md(name, runs)]
    text += ["## Targets (issue 6)", "", *targets_md(runs, list(specs)), ""]
    (out / "gpu.md").write_text("\n".join(text))


# ---------------------------------------------------------------------------------------------

def record(out: pathlib.Path, runs: dict, key: tuple, result: dict, batch: int) -> None:
    runs[key] = result
    line = {"model": key[0], "dtype": key[1], "side": key[2], "batch": batch, **result}
    with open(out / "gpu.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")
    shown = cell(result) + ("" if "error" in result else " ms")
    print(f"{key[0]:12} {key[1]:5} {key[2]:6} {shown}", flush=True)


def attempt(fn, *fn_args) -> dict:
    try:
        return fn(*fn_args)
    except (BudgetSpent, RuntimeError) as error:  # ours: already one line
        return {"error": " ".join(str(error).split())}
    except Exception as error:  # noqa: BLE001 - every run is independent (torch's errors)
        return {"error": " ".join(f"{type(error).__name__}: {error}".split())}


def bench_model(name: str, spec: dict, args, budget: Budget, work: pathlib.Path, runs: dict,
                report) -> None:
    model = work / f"{name}.onnx"
    generated = attempt(lambda: generate(name, spec, args.bin, model, budget) or {})
    for dtype in DTYPES:
        for side in ("ampc", "torch"):
            if side == "ampc" and "error" in generated:
                result = generated
            elif side == "ampc":
                result = attempt(time_ampc, spec, dtype, model, args, budget)
            else:
                result = attempt(time_torch, spec, dtype, args, budget)
            record(args.out, runs, (name, dtype, side), result, spec["batch"])
            report()
    model.unlink(missing_ok=True)


def parse_args(argv: list[str]):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True, type=pathlib.Path,
                   help="folder with ampc, ampc-models and ampc-bench-train")
    p.add_argument("--out", required=True, type=pathlib.Path, help="where gpu.md/gpu.jsonl go")
    p.add_argument("--budget-seconds", type=float, default=420)
    p.add_argument("--run-timeout", type=float, default=120,
                   help="cap on one subprocess (default 120 s)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--quick", action="store_true", help="small sizes, few steps (CPU test)")
    p.add_argument("--models", default=",".join(model_table(False)),
                   help="comma-separated, run in this order (default: all, the largest last)")
    p.add_argument("--warmup", type=int, help="untimed steps (default 10, --quick 3)")
    p.add_argument("--steps", type=int, help="timed steps (default 50, --quick 10)")
    p.add_argument("--work", type=pathlib.Path, help="scratch folder (default: a temporary one)")
    args = p.parse_args(argv)
    args.warmup = args.warmup or (3 if args.quick else 10)
    args.steps = args.steps or (10 if args.quick else 50)
    args.command = "python3 " + " ".join(shlex.quote(a) for a in [sys.argv[0], *argv])
    specs = model_table(args.quick)
    unknown = [m for m in args.models.split(",") if m not in specs]
    if unknown:
        p.error(f"unknown model(s) {','.join(unknown)}; choose from {','.join(specs)}")
    args.specs = {m: specs[m] for m in args.models.split(",")}
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    args.bin = args.bin.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu.jsonl").write_text("")
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    budget = Budget(args.budget_seconds, args.run_timeout)
    configure_torch()
    runs: dict = {}

    def report():
        write_report(args.out, args, args.specs, runs, started)

    with tempfile.TemporaryDirectory(prefix="ampc-bench-gpu-", dir=args.work) as scratch:
        for name, spec in args.specs.items():
            bench_model(name, spec, args, budget, pathlib.Path(scratch), runs, report)
    report()
    print((args.out / "gpu.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
