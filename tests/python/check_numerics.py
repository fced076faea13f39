"""FP16 numerics of compiled corpus models against their test data (issue 3, item 5).

Every corpus model ships test data (test_data_set_*/input_*.pb, output_*.pb). Each is compiled
with `ampc --dtype=fp16` (keep-io: graph inputs and outputs keep their types, so the test data
feeds it unchanged) and run by two runtimes on that data:

  onnxruntime  the CPU provider, graph optimizations off. It must load and run every compiled
               model. It has few FP16 kernels: for the other ops it computes in FP32 and drops
               the FP32->FP16->FP32 cast pairs around them (its own issue 19437; the optimized
               graph shows `InsertedPrecisionFreeCast_*`), so this run checks the model's
               structure and ORT's FP16 kernels, mostly not FP16 rounding;
  reference    onnx.reference.ReferenceEvaluator, which runs every op in its declared dtype
               with numpy, so FP16 rounding really happens and the tolerances below bite.

Outputs are compared with the expected ones:

  float outputs   |actual - expected| <= ATOL + RTOL * |expected| elementwise, NaN matching
                  NaN and infinities matching exactly;
  other outputs   (integers, bool, strings) exactly; shapes and dtypes always exactly.

RTOL = ATOL = 1e-2. FP16 keeps 11 significant bits (unit roundoff u = 2^-11 ~ 4.9e-4): rounding
the inputs and the result costs about 2u ~ 1e-3, each rounded op in a chain about u more, and a
dot product of K terms about sqrt(K) * u relative to the size of its terms (K <= ~200 in the
corpus: ~7e-3). ATOL covers results that cancel to near zero, whose error is relative to the
terms (the corpus draws its data from N(0, 1), so terms are O(1)). A lost or misplaced cast, a
wrong constant conversion or an overflow to inf misses by far more. Measured on the corpus the
worst model uses about 15% of this tolerance (node/test_matmul_4d under the reference runtime).

A model whose compiled run misses is judged against its FP32 baseline: when the same runtime
cannot run the original model either, or misses the reference with it too (random ops, ops the
runtime lacks, bfloat16 test data numpy cannot feed), the model is "not judged" for that
runtime, with the reason. Models that legitimately miss in FP16 (ill-conditioned in FP16, an
FP16 kernel onnxruntime lacks) are listed in tests/corpus/autocast_exclusions.txt as
`FOLDER/MODEL RUNTIME reason`, RUNTIME being onnxruntime, reference or all.

Fails (exit 1) when a compiled model cannot be loaded or run, or misses, and is not excluded;
when an excluded model now passes (remove its entry); on a malformed or stale exclusions file.
Exit 77 (skip) when the corpus is missing.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import functools
import multiprocessing
import pathlib
import sys
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
from onnx.reference import ReferenceEvaluator

import corpus

RTOL = 1e-2
ATOL = 1e-2
EXCLUSIONS = pathlib.Path(__file__).resolve().parents[1] / "corpus" / "autocast_exclusions.txt"


class NoVerdict(Exception):
    """The model cannot be judged (no usable test data or baseline); the message says why."""


def onnxruntime_session(path: pathlib.Path):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return lambda feeds: session.run(None, feeds)


def reference_session(path: pathlib.Path):
    evaluator = ReferenceEvaluator(str(path))
    return lambda feeds: evaluator.run(None, feeds)


RUNTIMES = {"onnxruntime": onnxruntime_session, "reference": reference_session}


def read_exclusions(path: pathlib.Path) -> dict[tuple[str, str], str]:
    """{(FOLDER/MODEL, runtime): reason} from lines `FOLDER/MODEL RUNTIME reason`; '#' comments."""
    exclusions = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        fields = line.split("#", 1)[0].split(maxsplit=2)
        if not fields:
            continue
        runtimes = list(RUNTIMES) if fields[1:2] == ["all"] else fields[1:2]
        if len(fields) < 3 or not set(runtimes) <= set(RUNTIMES):
            sys.exit(f"error: {path}:{number}: want 'FOLDER/MODEL RUNTIME reason', "
                     f"RUNTIME one of {', '.join(RUNTIMES)}, all")
        for runtime in runtimes:
            if (fields[0], runtime) in exclusions:
                sys.exit(f"error: {path}:{number}: {fields[0]} is listed twice for {runtime}")
            exclusions[fields[0], runtime] = fields[2]
    return exclusions


def read_value(path: pathlib.Path, type_proto: onnx.TypeProto):
    """The test value in `path` (a TensorProto, SequenceProto or OptionalProto) as numpy."""
    kind = type_proto.WhichOneof("value")
    readers = {
        "tensor_type": (onnx.TensorProto, onnx.numpy_helper.to_array),
        "sequence_type": (onnx.SequenceProto, onnx.numpy_helper.to_list),
        "optional_type": (onnx.OptionalProto, onnx.numpy_helper.to_optional),
    }
    if kind not in readers:
        raise NoVerdict(f"test data of type {kind} is not supported here")
    proto_type, convert = readers[kind]
    proto = proto_type()
    proto.ParseFromString(path.read_bytes())
    return convert(proto)


@dataclasses.dataclass
class TestCase:
    feeds: dict
    expected: list


def test_cases(model_path: pathlib.Path) -> list[TestCase]:
    """The model's test data sets; inputs map to the graph inputs that are not initializers."""
    model = onnx.load(str(model_path), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    cases = []
    for data in sorted(model_path.parent.glob("test_data_set_*")):
        feeds = {i.name: read_value(data / f"input_{k}.pb", i.type)
                 for k, i in enumerate(inputs) if (data / f"input_{k}.pb").exists()}
        expected = [read_value(data / f"output_{k}.pb", o.type)
                    for k, o in enumerate(model.graph.output)]
        cases.append(TestCase(feeds, expected))
    if not cases:
        raise NoVerdict("no test data")
    return cases


def one_line(error: Exception) -> str:
    return " ".join(str(error).split())[:400]


def describe(value) -> str:
    if value is None or isinstance(value, list):
        return "None" if value is None else f"a sequence of {len(value)}"
    value = np.asarray(value)
    return f"{value.dtype}{list(value.shape)}"


def mismatch(expected, actual, where: str, rtol: float = RTOL,
             atol: float = ATOL) -> str | None:
    """How `actual` misses `expected` (None if it does not), for values of read_value's kinds.
    Floats, ml_dtypes' (bfloat16, float8: numpy kind 'V') widened, compare within rtol/atol."""
    if isinstance(expected, list) or expected is None:
        if type(actual) is not type(expected) or (expected and len(actual) != len(expected)):
            return f"{where}: expected {describe(expected)}, got {describe(actual)}"
        pairs = enumerate(zip(expected or [], actual))
        problems = (mismatch(e, a, f"{where}[{k}]", rtol, atol) for k, (e, a) in pairs)
        return next((p for p in problems if p is not None), None)
    actual = np.asarray(actual)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"{where}: expected {describe(expected)}, got {describe(actual)}"
    if expected.dtype.kind == "V":
        expected, actual = expected.astype(np.float64), actual.astype(np.float64)
    if expected.dtype.kind not in "fc":
        return None if np.array_equal(actual, expected) else f"{where}: values differ (exact)"
    close = np.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    with np.errstate(all="ignore"):
        error = np.where(close, 0, np.nan_to_num(np.abs(actual - expected), nan=np.inf))
    worst = np.unravel_index(np.argmax(error), error.shape)
    return (f"{where}: {np.count_nonzero(~close)} of {close.size} values off, worst at "
            f"{tuple(int(i) for i in worst)}: {actual[worst]} vs {expected[worst]}")


def run_and_compare(runtime: str, path: pathlib.Path, cases: list[TestCase]) -> str | None:
    """Loads `path` in `runtime`, runs every case; the first problem, or None."""
    try:
        run = RUNTIMES[runtime](path)
    except Exception as error:  # each runtime raises its own types
        return f"cannot load: {one_line(error)}"
    for k, case in enumerate(cases):
        try:
            actual = run(case.feeds)
        except Exception as error:
            return f"run failed on set {k}: {one_line(error)}"
        for index, (e, a) in enumerate(zip(case.expected, actual)):
            if (problem := mismatch(e, a, f"set {k} output {index}")) is not None:
                return problem
    return None


def judge(runtime: str, run: corpus.Run, cases: list[TestCase]) -> tuple[str, str]:
    """(outcome, detail): ok, failed (the compiled model), or baseline (the original fails too)."""
    problem = run_and_compare(runtime, run.output, cases)
    if problem is None:
        return "ok", ""
    if (base := run_and_compare(runtime, run.input, cases)) is not None:
        return "baseline", f"the FP32 model fails too: {base}"
    return "failed", problem


RANDOM_OPS = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
              "RandomUniformLike"}


def unseeded_random_op(model: pathlib.Path) -> str | None:
    """The first random op without a seed: its outputs are fresh draws on every run, so a compiled
    run that misses the reference says nothing (and the FP32 baseline may match by chance)."""
    for node in onnx.load(str(model), load_external_data=False).graph.node:
        if node.op_type in RANDOM_OPS and not any(a.name == "seed" for a in node.attribute):
            return node.op_type
    return None


def check_model(ampc: pathlib.Path, scratch: pathlib.Path, model: pathlib.Path):
    """[(runtime, outcome, detail)] for one corpus model; runs in a worker process."""
    warnings.filterwarnings("ignore")  # the reference runtime warns on FP16 overflow and the like
    run = corpus.run_ampc(ampc, model, corpus.output_path(scratch, model, corpus.FP16), corpus.FP16)
    if not run.ok:
        return [(runtime, "not-compiled", run.error()) for runtime in RUNTIMES]
    try:
        cases = test_cases(model)
    except NoVerdict as reason:
        return [(runtime, "baseline", str(reason)) for runtime in RUNTIMES]
    if (op := unseeded_random_op(model)) is not None:
        run.output.unlink()
        return [(runtime, "baseline", f"{op} without a seed draws anew on every run")
                for runtime in RUNTIMES]
    results = [(runtime, *judge(runtime, run, cases)) for runtime in RUNTIMES]
    run.output.unlink()
    return results


class Report:
    def __init__(self, exclusions: dict[tuple[str, str], str]):
        self.exclusions = exclusions
        self.counts: collections.Counter = collections.Counter()
        self.lines: list[str] = []
        self.failures: list[str] = []

    def add(self, name: str, runtime: str, outcome: str, detail: str) -> None:
        reason = self.exclusions.get((name, runtime))
        if outcome in ("baseline", "not-compiled"):
            self.counts[runtime, outcome] += 1
            self.lines.append(f"  {runtime}: not judged ({outcome}): {name}: {detail}")
            return
        self.counts[runtime, "compared"] += 1
        if outcome == "ok" and reason:
            self.failures.append(f"{name} [{runtime}]: passes now; remove it from {EXCLUSIONS}")
        elif outcome == "ok":
            self.counts[runtime, "passed"] += 1
        elif reason:
            self.counts[runtime, "excluded"] += 1
            self.lines.append(f"  {runtime}: excluded: {name}: {reason} [{detail}]")
        else:
            self.failures.append(f"{name} [{runtime}]: {detail}")

    def print(self) -> int:
        print("\n".join(sorted(self.lines)))
        for failure in self.failures:
            print(f"FAILED: {failure}")
        for runtime in RUNTIMES:
            c = {key[1]: n for key, n in self.counts.items() if key[0] == runtime}
            print(f"{runtime} (fp16, keep-io, rtol {RTOL}, atol {ATOL}): compared "
                  f"{c.get('compared', 0)}, passed {c.get('passed', 0)}, excluded "
                  f"{c.get('excluded', 0)}; not judged: baseline {c.get('baseline', 0)}, "
                  f"not compiled {c.get('not-compiled', 0)}")
        print(f"{len(self.failures)} failures")
        return 1 if self.failures else 0


def check_exclusions(exclusions, models) -> None:
    unknown = sorted({name for name, _ in exclusions} - {corpus.short_name(m) for m in models})
    if unknown:
        sys.exit(f"error: {EXCLUSIONS}: no such corpus models: {', '.join(unknown)}")


def main() -> int:
    args = corpus.parser(__doc__.splitlines()[0]).parse_args()
    corpus.check_ampc(args.ampc)
    models = corpus.corpus_models(args.corpus)
    exclusions = read_exclusions(EXCLUSIONS)
    check_exclusions(exclusions, models)
    print(f"onnxruntime {ort.__version__} (CPU provider, optimizations off), "
          f"onnx {onnx.__version__} (reference runtime)")
    report = Report(exclusions)
    # Worker processes: both runtimes are CPU-bound and the reference one is pure Python.
    context = multiprocessing.get_context("spawn")
    with corpus.scratch_dir() as scratch, concurrent.futures.ProcessPoolExecutor(
            max_workers=args.jobs, mp_context=context) as pool:
        check = functools.partial(check_model, args.ampc, pathlib.Path(scratch))
        for model, results in zip(models, pool.map(check, models, chunksize=4)):
            for result in results:
                report.add(corpus.short_name(model), *result)
    return report.print()


if __name__ == "__main__":
    sys.exit(main())
