"""The bundled models run in onnxruntime, and so do their FP16 compilations (issue 4, item 7).

For each model `ampc-models` builds (mlp, cnn, transformer; docs/models.md):

  - two `ampc-models` processes write byte-identical files;
  - onnxruntime (CPU) runs it on seeded random inputs of batch BATCH: `logits` is float32
    [BATCH, 10], `loss` a finite float32 scalar equal to a numpy softmax cross-entropy of the
    returned logits and labels (to float32 rounding: LOSS_RTOL);
  - `ampc MODEL -o OUT --dtype=fp16` compiles it, and OUT runs with the same inputs, in
    onnxruntime and in onnx.reference.ReferenceEvaluator (which, unlike onnxruntime's CPU
    provider, really rounds to FP16 between ops; see check_numerics.py): its logits are within
    ATOL + RTOL * |fp32 logits| of the FP32 ones and its loss again matches numpy.

RTOL = ATOL = 5e-2 is loose on purpose: the logits here are O(1) sums of a few hundred FP16
products (about 1e-2 worst case); a lost cast or a wrong weight conversion misses by far more.
Exit 1 on any failure.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx.reference import ReferenceEvaluator

import corpus

MODELS = ("mlp", "cnn", "transformer")
BATCH = 3
CLASSES = 10
RTOL = ATOL = 5e-2
LOSS_RTOL = 1e-5


def build(tool: pathlib.Path, name: str, path: pathlib.Path) -> bytes:
    subprocess.run([str(tool), name, "-o", str(path)], check=True)
    return path.read_bytes()


def random_feeds(model: onnx.ModelProto, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Batch-BATCH inputs: images in [0, 1), tokens below the embedding table's size, labels."""
    vocab = next((i.dims[0] for i in model.graph.initializer if i.name == "embed.tokens.weight"),
                 None)
    feeds = {}
    for value in model.graph.input:
        shape = [BATCH] + [d.dim_value for d in value.type.tensor_type.shape.dim[1:]]
        if value.name == "label":
            feeds[value.name] = rng.integers(0, CLASSES, size=shape, dtype=np.int64)
        elif value.name == "tokens":
            feeds[value.name] = rng.integers(0, vocab, size=shape, dtype=np.int64)
        else:
            feeds[value.name] = rng.random(shape, dtype=np.float32)
    return feeds


def cross_entropy(logits: np.ndarray, label: np.ndarray) -> float:
    """Mean softmax cross-entropy, in float64."""
    x = logits.astype(np.float64)
    x = x - x.max(axis=1, keepdims=True)
    log_softmax = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
    return float(-log_softmax[np.arange(len(label)), label].mean())


def run(path: pathlib.Path, feeds: dict[str, np.ndarray],
        runtime: str = "onnxruntime") -> tuple[np.ndarray, np.ndarray]:
    if runtime == "reference":
        session = ReferenceEvaluator(str(path))
    else:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    logits, loss = session.run(["logits", "loss"], feeds)
    return np.asarray(logits), np.asarray(loss)


def check_outputs(what: str, logits: np.ndarray, loss: np.ndarray,
                  label: np.ndarray) -> list[str]:
    problems = []
    if logits.shape != (BATCH, CLASSES) or logits.dtype != np.float32:
        problems.append(f"{what}: logits are {logits.dtype}{list(logits.shape)}, "
                        f"not float32[{BATCH}, {CLASSES}]")
    if loss.shape != () or loss.dtype != np.float32 or not np.isfinite(loss):
        problems.append(f"{what}: loss is {loss.dtype}{list(loss.shape)} = {loss}, "
                        f"not a finite float32 scalar")
    elif not problems:
        expected = cross_entropy(logits, label)
        if abs(float(loss) - expected) > LOSS_RTOL * abs(expected):
            problems.append(f"{what}: loss {float(loss)} but numpy computes {expected}")
    return problems


def check(args, name: str, scratch: pathlib.Path) -> list[str]:
    path = scratch / f"{name}.onnx"
    if build(args.models_tool, name, path) != build(args.models_tool, name,
                                                    scratch / f"{name}.again.onnx"):
        return [f"{name}: two ampc-models runs write different files"]
    feeds = random_feeds(onnx.load(str(path)), np.random.default_rng(0))
    logits, loss = run(path, feeds)
    problems = check_outputs(f"{name} fp32", logits, loss, feeds["label"])
    compiled = corpus.run_ampc(args.ampc, path, scratch / f"{name}.fp16.onnx", corpus.FP16)
    if not compiled.ok:
        return problems + [f"{name}: ampc --dtype=fp16 fails: {compiled.error()}"]
    worst = {}
    for runtime in ("onnxruntime", "reference"):
        what = f"{name} fp16 ({runtime})"
        fp16_logits, fp16_loss = run(compiled.output, feeds, runtime)
        found = check_outputs(what, fp16_logits, fp16_loss, feeds["label"])
        worst[runtime] = float(np.abs(fp16_logits - logits).max()) if not found else np.nan
        if not found and not np.allclose(fp16_logits, logits, rtol=RTOL, atol=ATOL):
            found.append(f"{what}: logits differ from fp32 by up to {worst[runtime]:.3g}")
        problems += found
    if not problems:
        within = ", ".join(f"{runtime} {w:.2g}" for runtime, w in worst.items())
        print(f"{name}: ok (loss {float(loss):.4f}; fp16 logits within {within} of fp32)")
    return problems


def main() -> int:
    p = corpus.parser(__doc__.splitlines()[0])
    p.add_argument("--models-tool", required=True, type=pathlib.Path, help="ampc-models")
    args = p.parse_args()
    corpus.check_ampc(args.ampc)
    with corpus.scratch_dir() as tmp:
        problems = [line for name in MODELS for line in check(args, name, pathlib.Path(tmp))]
    for line in problems:
        print(f"FAILED: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
