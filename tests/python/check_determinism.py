"""Determinism and idempotence of ampc across processes (issue 3, item 6; spec "Casts").

For the bundled MLP in every mode, and for a sample of the corpus (every Nth model, the modes
taken in turn): two `ampc` runs with the same input and flags write byte-identical files, and
`ampc` on its own output writes that output again, byte for byte. Separate processes matter:
hash tables seeded per process (absl's are) can change iteration order between runs.
tests/unit/autocast_corpus_test.cc checks idempotence on the whole corpus in one process.
Exit status 1 on any difference or when ampc rejects its own output; 77 (skip) when the corpus
is missing.
"""

from __future__ import annotations

import concurrent.futures
import pathlib
import subprocess
import sys

import onnx

import corpus


def first_difference(a: pathlib.Path, b: pathlib.Path) -> str:
    """Where two model files differ, as a short phrase."""
    left, right = onnx.load(str(a)), onnx.load(str(b))
    for field in ("node", "initializer", "value_info", "input", "output"):
        xs, ys = getattr(left.graph, field), getattr(right.graph, field)
        for k, (x, y) in enumerate(zip(xs, ys)):
            if x != y:
                return f"graph.{field}[{k}] ('{x.name}') differs"
        if len(xs) != len(ys):
            return f"graph.{field} has {len(xs)} vs {len(ys)} entries"
    return "the protos are equal, their bytes are not" if left == right else "model fields differ"


def label(model: pathlib.Path) -> str:
    """node/test_add for a corpus model, the file's stem (mlp) otherwise."""
    return corpus.short_name(model) if model.name == "model.onnx" else model.stem


def check(ampc: pathlib.Path, model: pathlib.Path, mode: corpus.Mode, scratch: pathlib.Path):
    """(outcome, detail): passed, not-compiled (ampc refuses the input, consistently) or failed."""
    out = scratch / mode.name / label(model).replace("/", "__")
    first = corpus.run_ampc(ampc, model, out.with_suffix(".first.onnx"), mode)
    again = corpus.run_ampc(ampc, model, out.with_suffix(".again.onnx"), mode)
    if not first.ok or not again.ok:
        if first.returncode == again.returncode and first.error() == again.error():
            return "not-compiled", first.error()
        return "failed", f"two runs disagree: {first.error()} / {again.error()}"
    if first.output.read_bytes() != again.output.read_bytes():
        return "failed", f"two runs differ: {first_difference(first.output, again.output)}"
    second = corpus.run_ampc(ampc, first.output, out.with_suffix(".second.onnx"), mode)
    if not second.ok:
        return "failed", f"ampc rejects its own output: {second.error()}"
    if second.output.read_bytes() != first.output.read_bytes():
        where = first_difference(first.output, second.output)
        return "failed", f"ampc changes its own output: {where}"
    return "passed", ""


def jobs(args, mlp: pathlib.Path) -> list[tuple[pathlib.Path, corpus.Mode]]:
    sample = corpus.corpus_models(args.corpus)[::args.every]
    return ([(mlp, mode) for mode in corpus.MODES] +
            [(model, corpus.MODES[k % len(corpus.MODES)]) for k, model in enumerate(sample)])


def main() -> int:
    p = corpus.parser(__doc__.splitlines()[0])
    p.add_argument("--models-tool", required=True, type=pathlib.Path, help="ampc-models")
    p.add_argument("--every", type=int, default=8, help="check every Nth corpus model")
    args = p.parse_args()
    corpus.check_ampc(args.ampc)
    with corpus.scratch_dir() as tmp:
        scratch = pathlib.Path(tmp)
        mlp = scratch / "mlp.onnx"
        subprocess.run([str(args.models_tool), "mlp", "-o", str(mlp)], check=True)
        todo = jobs(args, mlp)
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(lambda job: check(args.ampc, *job, scratch), todo))
    counts = {"passed": 0, "not-compiled": 0, "failed": 0}
    for (model, mode), (outcome, detail) in zip(todo, results):
        counts[outcome] += 1
        if outcome != "passed":
            prefix = "FAILED" if outcome == "failed" else "  not compiled"
            print(f"{prefix}: {label(model)} [{mode.name}]: {detail}")
    print(f"determinism and idempotence: checked {len(todo)} (the MLP in {len(corpus.MODES)} "
          f"modes, every {args.every}th corpus model), passed {counts['passed']}, "
          f"failed {counts['failed']}, not compiled {counts['not-compiled']}")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
