"""The pinned onnx package's own node tests, compiled and run by ampc (issue 20, item 7).

`onnx.backend.test.case.node.collect_testcases(None)` builds every node test of the ONNX release
ampc builds against (about 1,880, opsets 1 to 28; Debian's libonnx-testdata is 1.12's 932).
Each case's model and first data set are written in ONNX's layout under a scratch folder, then:

  compile  every case whose model passes the pinned checker (full_check) is compiled by ampc in
           the four modes of corpus.MODES (fp16, bf16, each with and without --low-io); every
           output ampc writes must pass full_check. A case ampc refuses is listed with ampc's
           line; refusing is not an invalid output.
  run      every case whose inputs and outputs are tensors runs in FP32 with
           `ampc run MODEL --input ... --output-dir DIR` and is compared with the case's
           expected outputs within the case's own rtol and atol (NaN matching NaN, integers,
           bools and strings exactly, shapes and dtypes exactly).

Counts are printed per part, and every run failure is listed by its reason (the op or type the
runtime lacks, or how the values miss). Exit 1 when a compiled output is invalid, or when fewer
cases pass the run than --min-run-pass; exit 77 (skip) when the onnx package lacks the
generators.
"""

from __future__ import annotations

import collections
import concurrent.futures
import pathlib
import re
import sys
import warnings

import numpy as np
import onnx
import onnx.checker
import onnx.numpy_helper

import corpus
from check_numerics import mismatch
from check_runtime_vs_onnxruntime import Failure, output_file_names, run_process


def collect_cases() -> list:
    try:
        from onnx.backend.test.case.node import collect_testcases
    except ImportError:
        print(f"SKIPPED: onnx {onnx.__version__} has no node test generators")
        sys.exit(corpus.SKIP)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators' own overflow warnings
        return sorted(collect_testcases(None), key=lambda c: c.name)


def is_tensor(value) -> bool:
    """An array, a NumPy scalar (a 0-d tensor) or a TensorProto (the types NumPy lacks: bfloat16,
    the 8-, 6- and 4-bit floats and ints); not a sequence, map or optional."""
    return isinstance(value, (np.ndarray, np.generic, onnx.TensorProto))


def is_tensor_case(case) -> bool:
    return bool(case.data_sets) and all(
        is_tensor(v) for inputs, outputs in case.data_sets[:1] for v in list(inputs) + list(outputs))


def tensor_proto(value, name: str) -> onnx.TensorProto:
    if isinstance(value, onnx.TensorProto):
        proto = onnx.TensorProto()
        proto.CopyFrom(value)
        proto.name = name
        return proto
    return onnx.numpy_helper.from_array(np.asarray(value), name)


def as_array(value) -> np.ndarray:
    return onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else \
        np.asarray(value)


def valid(model: onnx.ModelProto) -> str | None:
    """None if the pinned checker accepts the model with full_check, else its first line."""
    try:
        onnx.checker.check_model(model, full_check=True)
        return None
    except Exception as error:  # the checker raises several types
        return str(error).strip().splitlines()[0][:300] if str(error).strip() else repr(error)


def write_case(case, root: pathlib.Path) -> pathlib.Path:
    folder = root / case.name
    folder.mkdir(parents=True)
    model = folder / "model.onnx"
    onnx.save(case.model, model)
    return model


def graph_inputs(model: onnx.ModelProto) -> list[str]:
    initializers = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def run_case(ampc: pathlib.Path, case, model_path: pathlib.Path) -> str | None:
    """None when `ampc run` reproduces the case's first data set, else why not."""
    inputs, outputs = case.data_sets[0]
    names = graph_inputs(case.model)
    work = model_path.parent
    specs = []
    for k, (name, value) in enumerate(zip(names, inputs)):
        path = work / f"input_{k}.pb"
        path.write_bytes(tensor_proto(value, name).SerializeToString())
        specs += ["--input", f"{name}={path}"]
    out_dir = work / "outputs"
    try:
        run_process([str(ampc), "run", str(model_path), *specs, "--output-dir", str(out_dir),
                     "--threads", "1"], "ampc run")
    except Failure as failure:
        return str(failure)
    for name, expected in zip(output_file_names(case.model), outputs):
        proto = onnx.TensorProto()
        proto.ParseFromString((out_dir / f"{name}.pb").read_bytes())
        problem = mismatch(as_array(expected), onnx.numpy_helper.to_array(proto), f"output {name}",
                           case.rtol, case.atol)
        if problem:
            return problem
    return None


def reason_key(problem: str) -> str:
    """A failure's reason without the case's file and value names, to group like failures."""
    if "op not supported" in problem or "no kernel" in problem:
        return problem.split(": ")[-1] if ": " in problem else problem
    if "values off" in problem:
        return "values outside the case's tolerance"
    if "values differ" in problem:
        return "values differ (exact)"
    if "expected" in problem and "got" in problem:
        return "wrong output dtype or shape"
    return problem.split(": ")[-1][:160]


def main() -> int:
    p = corpus.parser(__doc__.splitlines()[0])
    p.add_argument("--min-run-pass", type=int, default=0,
                   help="fail when fewer FP32 cases pass `ampc run`")
    p.add_argument("--only", default="", help="only the cases whose name matches this regex")
    p.add_argument("--details", action="store_true", help="print each run failure in full")
    args = p.parse_args()
    corpus.check_ampc(args.ampc)
    cases = [c for c in collect_cases() if re.search(args.only, c.name)]
    with corpus.scratch_dir() as scratch_name:
        scratch = pathlib.Path(scratch_name)
        paths = {c.name: write_case(c, scratch / "cases") for c in cases}
        checks = {c.name: valid(c.model) for c in cases}
        valid_cases = [c for c in cases if checks[c.name] is None]
        print(f"onnx {onnx.__version__}: {len(cases)} node cases, {len(valid_cases)} pass "
              f"full_check, {sum(map(is_tensor_case, cases))} with tensor data")
        invalid = compile_part(args, valid_cases, paths, scratch)
        passed = run_part(args, [c for c in cases if is_tensor_case(c)], paths)
    status = 0
    if invalid:
        print(f"FAILED: {invalid} compiled outputs are invalid")
        status = 1
    if passed < args.min_run_pass:
        print(f"FAILED: {passed} cases pass `ampc run`, fewer than --min-run-pass "
              f"{args.min_run_pass}")
        status = 1
    return status


def compile_part(args, cases, paths, scratch: pathlib.Path) -> int:
    jobs = [(paths[c.name], mode) for c in cases for mode in corpus.MODES]
    written = collections.Counter()
    refused = collections.defaultdict(list)
    invalid = 0
    for run in corpus.compile_all(args.ampc, jobs, scratch / "compiled", args.jobs):
        name = run.input.parent.name
        if not run.ok:
            refused[run.mode.name].append(f"{name}: {run.error()}")
            continue
        problem = valid(onnx.load(run.output))
        if problem:
            invalid += 1
            print(f"INVALID {run.mode.name} {name}: {problem}")
        else:
            written[run.mode.name] += 1
    for mode in corpus.MODES:
        print(f"compile {mode.name}: {len(cases)} valid inputs, {written[mode.name]} valid "
              f"outputs, {len(refused[mode.name])} refused")
        for line in refused[mode.name]:
            print(f"  refused {mode.name} {line}")
    return invalid


def run_part(args, cases, paths) -> int:
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        problems = list(pool.map(lambda c: run_case(args.ampc, c, paths[c.name]), cases))
    by_reason = collections.defaultdict(list)
    for case, problem in zip(cases, problems):
        if problem:
            by_reason[reason_key(problem)].append(case.name)
            if args.details:
                print(f"  FAIL {case.name}: {problem}")
    passed = sum(p is None for p in problems)
    print(f"run fp32: {len(cases)} tensor cases, {passed} pass, {len(cases) - passed} fail")
    for reason, names in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(names):4d}  {reason}: {' '.join(names)}")
    return passed


if __name__ == "__main__":
    sys.exit(main())
