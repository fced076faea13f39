"""Validity of compiled models under a recent ONNX checker (issue 3, item 4).

Every corpus model that passes `onnx.checker.check_model(model, full_check=True)` of the onnx
package from PyPI (full check: strict type and shape inference) is compiled by ampc in FP16 and
BF16, with and without --low-io, and every output must pass the same check. Inputs that fail it
are counted and listed, not failed. Exit status 1 when any valid input gives a failed compile or
an invalid output; 77 (skip) when the corpus is missing.
"""

from __future__ import annotations

import collections
import pathlib
import sys

import onnx

import corpus


def checker_error(path: pathlib.Path) -> str | None:
    """The full check's complaint about the model at `path`, on one line; None if it passes."""
    try:
        onnx.checker.check_model(str(path), full_check=True)
    except Exception as error:  # the checker raises several types; all mean "invalid"
        return " ".join(str(error).split())
    return None


def check_outputs(args, valid: list[pathlib.Path]) -> tuple[collections.Counter, list[str]]:
    """Compiles `valid` in every mode; counts (folder, mode, passed|failed) and lists failures."""
    counts: collections.Counter = collections.Counter()
    failures = []
    jobs = [(model, mode) for mode in corpus.MODES for model in valid]
    with corpus.scratch_dir() as scratch:
        for run in corpus.compile_all(args.ampc, jobs, pathlib.Path(scratch), args.jobs):
            error = checker_error(run.output) if run.ok else run.error()
            outcome = "failed" if error else "passed"
            counts[corpus.folder_of(run.input), run.mode.name, outcome] += 1
            if error:
                failures.append(f"{run.input} [{run.mode.name}]: {error}")
            run.output.unlink(missing_ok=True)
    return counts, failures


def print_counts(models, invalid, counts) -> None:
    for folder in corpus.FOLDERS:
        total = sum(corpus.folder_of(m) == folder for m in models)
        bad_inputs = sum(corpus.folder_of(m) == folder for m in invalid)
        for mode in corpus.MODES:
            print(f"{folder} [{mode.name}]: checked {total}, "
                  f"passed {counts[folder, mode.name, 'passed']}, "
                  f"failed {counts[folder, mode.name, 'failed']}, input-invalid {bad_inputs}")


def main() -> int:
    args = corpus.parser(__doc__.splitlines()[0]).parse_args()
    corpus.check_ampc(args.ampc)
    models = corpus.corpus_models(args.corpus)
    print(f"onnx {onnx.__version__}: checker with full_check=True")
    invalid = {m: e for m in models if (e := checker_error(m)) is not None}
    counts, failures = check_outputs(args, [m for m in models if m not in invalid])
    print_counts(models, invalid, counts)
    for model, error in invalid.items():
        print(f"  input-invalid: {corpus.short_name(model)}: {error}")
    for failure in failures:
        print(f"FAILED: {failure}")
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
