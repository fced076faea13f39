"""Small models exported by today's PyTorch, compiled, run and trained by ampc (issue 20, item 8).

tests/fixtures/torch/ holds a CNN, a ViT, a BERT-like and a GPT-like model, each exported by
torch 2.15's dynamo exporter (its default opset, 20; IR 10) and its legacy one (opset 17), with
one input set and manifest.json (made by make_fixtures.py there, in .venv-torch; this check
needs no torch). For every fixture of the manifest:

  compile  `ampc` in the four modes of corpus.MODES (fp16, bf16, each with and without
           --low-io); every output must pass the pinned onnx checker with full_check.
  run      `ampc run` of the exported FP32 model, and of its fp16 and bf16 (keep-io)
           compilations, against onnxruntime (CPU provider, optimizations off) on the exported
           model: max |ampc - ort| <= tolerance * max |ort| for every output.

and for the classifiers (cnn, vit, bert: MODEL.labels.npy), per exporter:

  train    `ampc MODEL --train --loss-op cross_entropy:logits --dtype fp16|bf16` (AdamW, lr LR,
           FP16's first loss scale INIT_SCALE) and `ampc extract-step --with-state`; one step of
           it under `ampc run` on the fixture's inputs and labels must be applied, with a loss
           within the dtype's tolerance of the cross entropy of onnxruntime's FP32 logits, and
           must change every trained parameter;
  ampc train  one FP16 step of `ampc train --data npy:DIR` on the same batch: the logged loss
           finite, every parameter of the saved model changed.

Tolerances, relative to the largest |reference| of each output: FP32 1e-4 (both runtimes compute
in FP32 and differ in summation order and in exp/erf/tanh: measured at most 9e-7, vit); FP16
1e-2 and BF16 5e-2 (unit roundoffs 2^-11 and 2^-8 through two layers of a few dozen rounded ops
each: measured at most 1.1e-3 and 1.3e-2, both vit.dynamo, 11% and 26% of the tolerance). A
lost cast, an overflow or a wrong kernel misses by far more. The loss of a training step is held
to the same FP16/BF16 tolerance relative to the FP32 cross entropy.

What ampc cannot do yet is listed in EXPECTED_FAILURES, each gap with the error it gives; such a
check must keep failing with one of its errors. Exit 1 on any other failure and on a listed
check that passes (update the table); exit 77 (skip) when the fixtures folder or its manifest is
missing.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort

import corpus
from check_node_cases import valid
from check_numerics import one_line, onnxruntime_session
from check_runtime_vs_onnxruntime import Failure, run_ampc, run_process

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "torch"
FP32_TOL = 1e-4
TOL = {"fp16": 1e-2, "bf16": 5e-2}
LR = 1e-3
# FP16's first loss scale: the default 65536 overflows the ViT's first gradients (up to ~5 in
# its patch embedding), a step that dynamic scaling rightly skips; one step must be applied.
INIT_SCALE = 1024
# The dynamo exporter stores folded constants as initializers named val_N (the ViT's attention
# mask fill, a scalar 0.0 read by Where): not parameters, so frozen as a user would.
EXPORTER_CONSTANTS = "val_[0-9]+"
NEXT = ".ampc.next"
MOMENT = ".ampc.m" + NEXT  # AdamW's first moment: one per trained parameter

# What ampc lacks, each as (feature, a part of ampc's error line). Training a fixture hits them
# in this order; each was found by working around the ones before it in a scratch copy.
TOKEN_DATA = ("ampc train: int64 token inputs (it feeds one float32 image input)",
              "images must be uint8 or float32, not int64")
TRAIN_CHECKS = ("train fp16 step", "train bf16 step", "ampc train")
# (fixture file, check) -> the gaps it may fail on. A listed check must fail with one of their
# errors; passing, or failing otherwise, fails the test (then update this table).
EXPECTED_FAILURES: dict = {}
for exporter in ("dynamo", "legacy"):  # and then ampc train cannot feed BERT's tokens
    key = ("bert." + exporter + ".onnx", "ampc train")
    EXPECTED_FAILURES[key] = EXPECTED_FAILURES.get(key, ()) + (TOKEN_DATA,)


def expected_failure(file: str, check: str, problem: str) -> str | None:
    """The missing feature when the check is listed and fails with its error, else None."""
    reasons = EXPECTED_FAILURES.get((file, check), ())
    return next((feature for feature, error in reasons if problem and error in problem), None)


def load_inputs(entry: dict) -> dict[str, onnx.TensorProto]:
    return {i["name"]: onnx.numpy_helper.from_array(np.load(entry["dir"] / i["file"]), i["name"])
            for i in entry["inputs"]}


def relative_error(actual: np.ndarray, reference: np.ndarray) -> float:
    """max |actual - reference| / max |reference|; inf when a value is not finite."""
    a, r = actual.astype(np.float64), reference.astype(np.float64)
    if a.shape != r.shape:
        return float("inf")
    if not (np.isfinite(a).all() and np.isfinite(r).all()):
        return float("inf")
    return float(np.abs(a - r).max(initial=0) / max(np.abs(r).max(initial=0), 1e-30))


class Report:
    def __init__(self):
        self.results: list[tuple[str, str, str]] = []  # (file, check, problem or "")
        self.worst: dict[str, tuple[float, str]] = {}

    def add(self, file: str, check: str, problem: str | None, detail: str = "") -> None:
        self.results.append((file, check, problem or ""))
        if feature := expected_failure(file, check, problem):
            print(f"  expected failure {file} {check} (missing: {feature}): {problem}")
        elif problem:
            print(f"  FAILED {file} {check}: {problem}")
        elif (file, check) in EXPECTED_FAILURES:
            print(f"  FAILED {file} {check}: passes now; remove it from EXPECTED_FAILURES")
        else:
            print(f"  ok {file} {check}{': ' + detail if detail else ''}")

    def measured(self, mode: str, file: str, error: float, limit: float) -> None:
        self.worst[mode] = max(self.worst.get(mode, (0.0, "")), (error / limit, file))

    def print(self) -> int:
        failed = passed = expected = 0
        for file, check, problem in self.results:
            if expected_failure(file, check, problem):
                expected += 1
            elif problem or (file, check) in EXPECTED_FAILURES:
                failed += 1
            else:
                passed += 1
        for mode, (used, file) in sorted(self.worst.items()):
            print(f"worst {mode}: {file}, {used:.0%} of the tolerance")
        print(f"torch fixtures: {len(self.results)} checks, {passed} passed, {failed} failed, "
              f"{expected} expected failures")
        return 1 if failed else 0


def check_compile(args, entry: dict, scratch: pathlib.Path, report: Report) -> dict:
    """Compiles the fixture in every mode; {mode name: compiled path} of the valid outputs."""
    model = entry["dir"] / entry["file"]
    compiled = {}
    for mode in corpus.MODES:
        run = corpus.run_ampc(args.ampc, model, scratch / f"{mode.name}.onnx", mode)
        problem = run.error() if not run.ok else valid(onnx.load(run.output))
        if problem is None:
            compiled[mode.name] = run.output
        report.add(entry["file"], f"compile {mode.name}", problem and one_line(Exception(problem)))
    return compiled


def compare_outputs(entry: dict, actual: list, reference: list,
                    tol: float) -> tuple[str | None, float]:
    worst = 0.0
    for output, a, r in zip(entry["outputs"], actual, reference):
        error = relative_error(a, r)
        worst = max(worst, error)
        if not error <= tol:
            return (f"output {output['name']}: max error / max |ref| = {error:.3g} > {tol:g}"
                    if np.isfinite(error) else
                    f"output {output['name']}: {np.asarray(a).dtype}{list(np.shape(a))}, "
                    "not finite or of another shape than the reference"), worst
    return None, worst


def check_runs(args, entry: dict, compiled: dict, scratch: pathlib.Path, report: Report) -> list:
    """The FP32 run and the fp16/bf16 runs against onnxruntime; onnxruntime's FP32 outputs."""
    model_path = entry["dir"] / entry["file"]
    model = onnx.load(str(model_path))
    inputs = load_inputs(entry)
    feeds = {name: onnx.numpy_helper.to_array(p) for name, p in inputs.items()}
    try:
        reference = onnxruntime_session(model_path)(feeds)
    except Exception as error:  # onnxruntime raises its own types
        report.add(entry["file"], "onnxruntime fp32", f"onnxruntime: {one_line(error)}")
        return []
    runs = [("fp32", model_path, FP32_TOL)] + [
        (name, compiled.get(name), tol) for name, tol in TOL.items()]
    for name, path, tol in runs:
        if path is None:
            report.add(entry["file"], f"run {name}", "not compiled (see its compile check)")
            continue
        work = scratch / f"run.{name}"
        work.mkdir()
        try:
            actual = run_ampc(args.ampc, model, path, inputs, work)
        except Failure as failure:
            report.add(entry["file"], f"run {name}", str(failure))
            continue
        problem, error = compare_outputs(entry, actual, reference, tol)
        if problem is None:
            report.measured(name, entry["file"], error, tol)
        report.add(entry["file"], f"run {name}", problem, f"max error / max |ref| {error:.2e}")
    return reference


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> float:
    z = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-log_p[np.arange(len(labels)), labels].mean())


def compile_train(args, entry: dict, dtype: str, scratch: pathlib.Path) -> pathlib.Path:
    """`ampc MODEL --train` with a cross-entropy loss on the logits (AdamW, lr LR), once."""
    train, config = scratch / f"train.{dtype}.onnx", scratch / "train.json"
    if not train.is_file():
        config.write_text(json.dumps({"scaler": {"init_scale": INIT_SCALE}}))
        run_process([str(args.ampc), str(entry["dir"] / entry["file"]), "-o", str(train), "--train",
                     "--loss-op", "cross_entropy:logits", f"--dtype={dtype}", f"--lr={LR}",
                     f"--train-config={config}", f"--freeze={EXPORTER_CONSTANTS}"],
                    "ampc --train")
    return train


def train_step(args, entry: dict, dtype: str, logits: np.ndarray,
               scratch: pathlib.Path) -> tuple[str | None, str]:
    """One AdamW step of the --train compilation under `ampc run`: (problem, detail)."""
    step = scratch / f"step.{dtype}.onnx"
    try:
        train = compile_train(args, entry, dtype, scratch)
        run_process([str(args.ampc), "extract-step", str(train), "-o", str(step), "--with-state"],
                    "ampc extract-step")
        step_model = onnx.load(str(step))
        labels = np.load(entry["dir"] / entry["labels"])
        inputs = {**load_inputs(entry),
                  "labels": onnx.numpy_helper.from_array(labels, "labels"),
                  "ampc.lr": onnx.numpy_helper.from_array(np.array(LR, np.float32), "ampc.lr")}
        work = scratch / f"step.{dtype}"
        work.mkdir()
        outputs = dict(zip((o.name for o in step_model.graph.output),
                           run_ampc(args.ampc, step_model, step, inputs, work)))
    except Failure as failure:
        return str(failure), ""
    loss, expected = float(outputs["loss"]), cross_entropy(logits, labels)
    if not np.isfinite(loss):
        return f"the loss is {loss}", ""
    if not bool(outputs["ampc.applied"]):
        return "the step was skipped (non-finite gradients)", ""
    if abs(loss - expected) > TOL[dtype] * abs(expected):
        return (f"loss {loss:.6g}, but the cross entropy of onnxruntime's FP32 logits is "
                f"{expected:.6g}"), ""
    initial = {t.name: onnx.numpy_helper.to_array(t) for t in step_model.graph.initializer}
    params = [name[:-len(MOMENT)] for name in outputs if name.endswith(MOMENT)]
    unchanged = [p for p in params if np.array_equal(outputs[p + NEXT], initial[p])]
    if not params or unchanged:
        return f"{len(unchanged)} of {len(params)} parameters unchanged: {unchanged[:5]}", ""
    return None, (f"loss {loss:.4f} (FP32 cross entropy {expected:.4f}), "
                  f"{len(params)} parameters changed")


def ampc_train(args, entry: dict, scratch: pathlib.Path) -> tuple[str | None, str]:
    """One step of `ampc train` (FP16) on the fixture's inputs as a one-batch training set: the
    loss it logs must be finite and every parameter it saves must have changed."""
    data, saved = scratch / "data", scratch / "trained.onnx"
    try:
        train = compile_train(args, entry, "fp16", scratch)
    except Failure as failure:
        return str(failure), ""
    data.mkdir()
    labels = np.load(entry["dir"] / entry["labels"])
    for split in ("train", "test"):
        np.save(data / f"{split}-images.npy", np.load(entry["dir"] / entry["inputs"][0]["file"]))
        np.save(data / f"{split}-labels.npy", labels)
    metrics = scratch / "metrics.csv"
    try:
        run_process([str(args.ampc), "train", str(train), f"--data=npy:{data}",
                     f"--batch={len(labels)}", "--epochs=1", "--log-every=1", "--device=cpu",
                     f"--metrics={metrics}", f"--save={saved}"], "ampc train")
    except Failure as failure:
        return str(failure), ""
    rows = metrics.read_text().splitlines()
    loss = float(rows[-1].split(",")[rows[0].split(",").index("loss")])
    if not np.isfinite(loss):
        return f"the logged loss is {loss}", ""
    trained = onnx.load(str(saved))
    before, after = ({t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
                     for m in (onnx.load(str(train)), trained))
    moments = (o.name for o in trained.training_info[0].initialization.output)
    params = [m[:-len(".ampc.m")] for m in moments if m.endswith(".ampc.m")]
    unchanged = [n for n in params if np.array_equal(before[n], after[n])]
    if not params or unchanged:
        return f"{len(unchanged)} of {len(params)} parameters unchanged: {unchanged[:5]}", ""
    return None, f"loss {loss:.4f}, {len(params)} parameters changed"


def check_fixture(args, entry: dict, scratch: pathlib.Path, report: Report) -> None:
    scratch.mkdir()
    compiled = check_compile(args, entry, scratch, report)
    reference = check_runs(args, entry, compiled, scratch, report)
    if "labels" not in entry or not reference:
        return
    for dtype in TOL:
        problem, detail = train_step(args, entry, dtype, reference[0], scratch)
        report.add(entry["file"], f"train {dtype} step", problem, detail)
    report.add(entry["file"], "ampc train", *ampc_train(args, entry, scratch))


def main() -> int:
    p = corpus.parser(__doc__.splitlines()[0])
    p.add_argument("--fixtures", type=pathlib.Path, default=FIXTURES,
                   help=f"the fixtures folder (default {FIXTURES})")
    args = p.parse_args()
    corpus.check_ampc(args.ampc)
    manifest_path = args.fixtures / "manifest.json"
    if not manifest_path.is_file():
        print(f"SKIPPED: no {manifest_path} (tests/fixtures/torch/make_fixtures.py makes it)")
        return corpus.SKIP
    manifest = json.loads(manifest_path.read_text())
    print(f"{len(manifest['fixtures'])} fixtures of torch {manifest['torch']}, transformers "
          f"{manifest['transformers']}; onnx {onnx.__version__}, onnxruntime {ort.__version__}")
    report = Report()
    with corpus.scratch_dir() as scratch:
        for entry in manifest["fixtures"]:
            entry["dir"] = args.fixtures
            if entry["model"] in manifest.get("labels", {}):
                entry["labels"] = manifest["labels"][entry["model"]]
            print(f"{entry['file']}: {entry['exporter']} exporter, opset {entry['opset']}, "
                  f"IR {entry['ir_version']}")
            check_fixture(args, entry, pathlib.Path(scratch) / entry["file"], report)
    return report.print()


if __name__ == "__main__":
    sys.exit(main())
