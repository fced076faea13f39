"""ampc's CPU runtime against onnxruntime on the FP16 compilations of passing corpus cases.

For every corpus case that passes in FP32 on ampc's CPU runtime (the `folder/case` lines of
tests/conformance/expected_pass.txt, or of --cases FILE), `ampc --dtype=fp16` compiles its
model.onnx (keep-io: graph inputs and outputs keep their types, so the test data feeds it
unchanged) and the compiled model runs on test_data_set_0's inputs twice:

  ampc         `ampc run MODEL --input NAME=FILE ... --output-dir DIR --threads 1`;
  onnxruntime  PyPI's onnxruntime, CPU provider, graph optimizations off, one thread.

Input files map in order to the graph inputs that are not initializers, or to the input named
by the TensorProto when it has a name. The corpus stores bfloat16 data as uint16 (numpy has no
bfloat16): ampc gets a copy of the .pb retyped to BFLOAT16, onnxruntime an OrtValue made with
the bfloat16 ONNX type. bfloat16 outputs are compared widened to float32 (ampc's .npy holds
them so; onnxruntime's are read from its buffer, since it cannot convert them to numpy).

Every output is compared as check_numerics.py compares: float outputs within
|ampc - onnxruntime| <= ATOL + RTOL * |onnxruntime| elementwise with RTOL = ATOL = 1e-2 (the
FP16 tolerance of docs/testing.md), NaN matching NaN and infinities matching exactly; other
outputs exactly; shapes and dtypes always exactly. onnxruntime computes most FP16 ops in FP32
(docs/testing.md), so this bounds ampc's FP16 rounding and catches its kernel bugs.

A case is skipped, with the reason, when onnxruntime cannot load or run the compiled model or
its data is not tensors. A case that ampc cannot compile or run, or whose outputs miss, fails
unless tests/python/runtime_vs_onnxruntime_exclusions.txt lists it (`FOLDER/MODEL reason`).
Exit 1 on a failure, on an excluded case that now agrees (remove its line), on an exclusion
naming no corpus case, on a malformed list or a cases line naming no corpus case. Exit 77
(skip) when the corpus is missing.
"""

from __future__ import annotations

import collections
import concurrent.futures
import ctypes
import functools
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort

import corpus
from check_numerics import ATOL, RTOL, mismatch, one_line

ROOT = pathlib.Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "conformance" / "expected_pass.txt"
EXCLUSIONS = pathlib.Path(__file__).resolve().parent / "runtime_vs_onnxruntime_exclusions.txt"
TIMEOUT_S = 300  # per ampc process; the corpus models take milliseconds


class Skip(Exception):
    """The case cannot be compared; the message says why."""


class Failure(Exception):
    """ampc cannot compile or run the case; the message says how."""


def read_cases(path: pathlib.Path) -> list[str]:
    """The first word of each line that is not empty or a '#' comment."""
    words = (line.split("#", 1)[0].split() for line in path.read_text().splitlines())
    return [w[0] for w in words if w]


def read_exclusions(path: pathlib.Path) -> dict[str, str]:
    """{FOLDER/MODEL: reason} from lines `FOLDER/MODEL reason`; '#' comments."""
    exclusions = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        fields = line.split("#", 1)[0].split(maxsplit=1)
        if not fields:
            continue
        if len(fields) < 2:
            sys.exit(f"error: {path}:{number}: want 'FOLDER/MODEL reason'")
        if fields[0] in exclusions:
            sys.exit(f"error: {path}:{number}: {fields[0]} is listed twice")
        exclusions[fields[0]] = fields[1]
    return exclusions


def output_file_names(model: onnx.ModelProto) -> list[str]:
    """The file names `ampc run --output-dir` gives the outputs (OutputFileNames in
    run_command.cc): unsafe characters as '_', cut to 200 bytes, '_INDEX' until unique."""
    names, taken = [], set()
    for index, output in enumerate(model.graph.output):
        name = re.sub(r"[^A-Za-z0-9._-]", "_", output.name)
        name = ("_" + name if not name or name.startswith(".") else name)[:200]
        while name in taken:
            name += f"_{index}"
        taken.add(name)
        names.append(name)
    return names


def read_inputs(model: onnx.ModelProto, data: pathlib.Path) -> dict[str, onnx.TensorProto]:
    """{graph input name: TensorProto} of the data set, bfloat16 data retyped from uint16."""
    initializers = {i.name for i in model.graph.initializer}
    declared = {i.name: i.type for i in model.graph.input}
    free = [i.name for i in model.graph.input if i.name not in initializers]
    protos = {}
    for k, path in enumerate(sorted(data.glob("input_*.pb"), key=lambda p: int(p.stem[6:]))):
        proto = onnx.TensorProto()
        proto.ParseFromString(path.read_bytes())
        name = proto.name if proto.name in declared else free[k] if k < len(free) else None
        if name is None:
            raise Skip(f"{path.name} matches no graph input")
        if declared[name].WhichOneof("value") != "tensor_type":
            raise Skip(f"input {name} is a {declared[name].WhichOneof('value')}, not a tensor")
        elem = declared[name].tensor_type.elem_type
        if proto.data_type == onnx.TensorProto.UINT16 and elem == onnx.TensorProto.BFLOAT16:
            proto.data_type = onnx.TensorProto.BFLOAT16
        protos[name] = proto
    return protos


def widen_bfloat16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def to_ort_value(proto: onnx.TensorProto):
    if proto.data_type == onnx.TensorProto.BFLOAT16:
        proto = onnx.TensorProto.FromString(proto.SerializeToString())
        proto.data_type = onnx.TensorProto.UINT16  # the bits, for numpy
        bits = onnx.numpy_helper.to_array(proto)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, onnx.TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(onnx.numpy_helper.to_array(proto))


def from_ort_value(value) -> np.ndarray:
    if not value.is_tensor():
        raise Skip("onnxruntime returned a non-tensor output")
    if value.data_type() != "tensor(bfloat16)":
        return value.numpy()
    shape = value.shape()
    count = int(np.prod(shape, dtype=np.int64))
    # No numpy conversion for bfloat16: copy the bits out of onnxruntime's CPU buffer.
    bits = (np.ctypeslib.as_array((ctypes.c_uint16 * count).from_address(value.data_ptr())).copy()
            if count else np.zeros(0, np.uint16))
    return widen_bfloat16(bits.reshape(shape))


def run_onnxruntime(model: pathlib.Path, inputs: dict[str, onnx.TensorProto]) -> list:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own types
        raise Skip(f"onnxruntime cannot load the FP16 model: {one_line(error)}") from error
    try:
        feeds = {name: to_ort_value(proto) for name, proto in inputs.items()}
        outputs = session.run_with_ort_values(None, feeds)
    except Exception as error:
        raise Skip(f"onnxruntime cannot run the FP16 model: {one_line(error)}") from error
    return [from_ort_value(value) for value in outputs]


def run_process(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors="replace",
                              timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise Failure(f"{what}: timed out after {TIMEOUT_S} s") from error
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if "error" in line.lower()]
        detail = lines[-1] if lines else done.stderr.strip()[-400:]
        raise Failure(f"{what}: exit status {done.returncode}: {one_line(Exception(detail))}")


def run_ampc(ampc: pathlib.Path, model: onnx.ModelProto, compiled: pathlib.Path,
             inputs: dict[str, onnx.TensorProto], work: pathlib.Path) -> list[np.ndarray]:
    specs = []
    for k, (name, proto) in enumerate(inputs.items()):
        path = work / f"input_{k}.pb"
        path.write_bytes(proto.SerializeToString())
        specs += ["--input", f"{name}={path}"]
    out_dir = work / "outputs"
    run_process([str(ampc), "run", str(compiled), *specs, "--output-dir", str(out_dir),
                 "--threads", "1"], "ampc run")
    return [np.load(out_dir / f"{name}.npy") for name in output_file_names(model)]


def tolerance_used(expected: np.ndarray, actual: np.ndarray) -> float:
    """max |actual - expected| / (ATOL + RTOL * |expected|) over the finite float values."""
    if expected.dtype.kind != "f" or expected.size == 0:
        return 0.0
    e, a = expected.astype(np.float64), actual.astype(np.float64)
    finite = np.isfinite(e) & np.isfinite(a)
    return float(np.max(np.abs(a - e)[finite] / (ATOL + RTOL * np.abs(e[finite])), initial=0))


def compare_case(ampc: pathlib.Path, corpus_root: pathlib.Path, scratch: pathlib.Path,
                 name: str) -> tuple[str, str, float]:
    """(outcome, detail, share of the tolerance used) of one case: agree, disagree, failed
    (ampc) or skipped."""
    model_path = corpus_root / name / "model.onnx"
    with tempfile.TemporaryDirectory(dir=scratch) as work_dir:
        work = pathlib.Path(work_dir)
        try:
            model = onnx.load(str(model_path), load_external_data=False)
            if any(o.type.WhichOneof("value") != "tensor_type" for o in model.graph.output):
                raise Skip("an output is not a tensor")
            inputs = read_inputs(model, model_path.parent / "test_data_set_0")
            compiled = work / "model.fp16.onnx"
            run = corpus.run_ampc(ampc, model_path, compiled, corpus.FP16)
            if not run.ok:
                raise Failure(f"ampc --dtype=fp16: {run.error()}")
            expected = run_onnxruntime(compiled, inputs)
            actual = run_ampc(ampc, model, compiled, inputs, work)
        except Skip as reason:
            return "skipped", str(reason), 0.0
        except Failure as problem:
            return "failed", str(problem), 0.0
    for output, e, a in zip(model.graph.output, expected, actual):
        if (problem := mismatch(e, a, f"output {output.name}")) is not None:
            return "disagree", problem, 0.0
    return "agree", "", max(tolerance_used(e, a) for e, a in zip(expected, actual))


class Report:
    def __init__(self, exclusions: dict[str, str]):
        self.exclusions = exclusions
        self.counts: collections.Counter = collections.Counter()
        self.lines: list[str] = []
        self.failures: list[str] = []
        self.worst = (0.0, "")

    def add(self, name: str, outcome: str, detail: str, used: float) -> None:
        reason = self.exclusions.get(name)
        self.counts[outcome] += 1
        self.worst = max(self.worst, (used, name))
        if outcome == "skipped":
            self.lines.append(f"  skipped: {name}: {detail}")
        elif outcome == "agree" and reason:
            self.failures.append(f"{name}: agrees now; remove it from {EXCLUSIONS}")
        elif outcome != "agree" and reason:
            self.counts["excluded"] += 1
            self.lines.append(f"  excluded: {name}: {reason} [{detail}]")
        elif outcome != "agree":
            self.failures.append(f"{name}: {outcome}: {detail}")

    def print(self, cases: int) -> int:
        for line in sorted(self.lines):
            print(line)
        for failure in self.failures:
            print(f"FAILED: {failure}")
        c = self.counts
        compared = c["agree"] + c["disagree"] + c["failed"]
        print(f"fp16 (keep-io, rtol {RTOL}, atol {ATOL}), ampc CPU runtime vs onnxruntime: "
              f"{cases} cases, compared {compared}, agree {c['agree']}, disagree "
              f"{c['disagree']}, ampc failed {c['failed']} (of these excluded {c['excluded']}); "
              f"skipped {c['skipped']}")
        if self.worst[1]:
            print(f"worst agreeing case: {self.worst[1]}, {self.worst[0]:.0%} of the tolerance")
        print(f"{len(self.failures)} failures")
        return 1 if self.failures else 0


def main() -> int:
    p = corpus.parser(__doc__.splitlines()[0])
    p.add_argument("--cases", type=pathlib.Path, default=CASES,
                   help=f"the cases that pass in FP32, one folder/case a line (default {CASES})")
    args = p.parse_args()
    corpus.check_ampc(args.ampc)
    corpus.corpus_models(args.corpus)  # exits 77 without the corpus
    cases = read_cases(args.cases)
    exclusions = read_exclusions(EXCLUSIONS)
    missing = [c for c in cases if not (args.corpus / c / "model.onnx").is_file()]
    if missing:
        sys.exit(f"error: {args.cases}: no such corpus cases: {', '.join(missing)}")
    unknown = sorted(n for n in exclusions if not (args.corpus / n / "model.onnx").is_file())
    if unknown:
        sys.exit(f"error: {EXCLUSIONS}: no such corpus cases: {', '.join(unknown)}")
    if unused := sorted(set(exclusions) - set(cases)):
        print(f"note: {len(unused)} excluded cases are not in {args.cases}: {', '.join(unused)}")
    print(f"onnxruntime {ort.__version__} (CPU provider, optimizations off, 1 thread); "
          f"{len(cases)} cases from {args.cases}")
    report = Report(exclusions)
    # Threads: the work is in ampc processes and in onnxruntime, which releases the GIL.
    with corpus.scratch_dir() as scratch, concurrent.futures.ThreadPoolExecutor(
            max_workers=args.jobs) as pool:
        check = functools.partial(compare_case, args.ampc, args.corpus, pathlib.Path(scratch))
        for name, result in zip(cases, pool.map(check, cases)):
            report.add(name, *result)
    return report.print(len(cases))


if __name__ == "__main__":
    sys.exit(main())
