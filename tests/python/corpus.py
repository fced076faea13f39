"""Shared helpers of the whole-corpus checks of compiled models (issue 3, items 4-6).

The corpus is ONNX's own test suite as Debian packages it (libonnx-testdata); each check
compiles its models with the `ampc` binary into a scratch folder of its own, in parallel.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import os
import pathlib
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator

CORPUS_ROOT = pathlib.Path("/usr/share/libonnx-testdata/data")
FOLDERS = ("node", "pytorch-converted", "pytorch-operator", "simple")
SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests


@dataclasses.dataclass(frozen=True)
class Mode:
    name: str
    flags: tuple[str, ...]


FP16 = Mode("fp16", ("--dtype=fp16",))
MODES = (
    FP16,
    Mode("fp16_low_io", ("--dtype=fp16", "--low-io")),
    Mode("bf16", ("--dtype=bf16",)),
    Mode("bf16_low_io", ("--dtype=bf16", "--low-io")),
)


@dataclasses.dataclass(frozen=True)
class Run:
    """One `ampc INPUT -o OUTPUT FLAGS...` process."""

    input: pathlib.Path
    output: pathlib.Path
    mode: Mode
    returncode: int
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def error(self) -> str:
        """ampc's error line, or the exit status when there is none."""
        lines = [line for line in self.stderr.splitlines() if "error:" in line]
        return lines[-1] if lines else f"exit status {self.returncode}: {self.stderr.strip()}"


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--ampc", required=True, type=pathlib.Path, help="the ampc binary")
    p.add_argument("--corpus", type=pathlib.Path, default=CORPUS_ROOT,
                   help=f"the test data root (default {CORPUS_ROOT})")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="processes at a time (default: one per CPU)")
    return p


def corpus_models(root: pathlib.Path) -> list[pathlib.Path]:
    """Every FOLDER/*/model.onnx under `root`, sorted; exits with SKIP when there is none."""
    models = sorted(m for folder in FOLDERS for m in (root / folder).glob("*/model.onnx"))
    if not models:
        print(f"SKIPPED: no models under {root} (tools/setup installs libonnx-testdata)")
        sys.exit(SKIP)
    return models


def short_name(model: pathlib.Path) -> str:
    """node/test_add for .../data/node/test_add/model.onnx."""
    return f"{model.parent.parent.name}/{model.parent.name}"


def folder_of(model: pathlib.Path) -> str:
    return model.parent.parent.name


def scratch_dir() -> tempfile.TemporaryDirectory:
    """A temporary folder, on tmpfs when there is one (ampc fsyncs every output)."""
    shm = pathlib.Path("/dev/shm")
    return tempfile.TemporaryDirectory(prefix="ampc-corpus-", dir=shm if shm.is_dir() else None)


def run_ampc(ampc: pathlib.Path, model: pathlib.Path, output: pathlib.Path, mode: Mode) -> Run:
    output.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([str(ampc), str(model), "-o", str(output), *mode.flags],
                          capture_output=True, text=True, errors="replace", check=False)
    return Run(model, output, mode, done.returncode, done.stderr)


def output_path(out_dir: pathlib.Path, model: pathlib.Path, mode: Mode) -> pathlib.Path:
    return out_dir / mode.name / f"{short_name(model).replace('/', '__')}.onnx"


def compile_all(ampc: pathlib.Path, jobs: Iterable[tuple[pathlib.Path, Mode]],
                out_dir: pathlib.Path, workers: int) -> Iterator[Run]:
    """Compiles every (model, mode) into out_dir/MODE/; yields the runs in the order given."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_ampc, ampc, model, output_path(out_dir, model, mode), mode)
                   for model, mode in jobs]
        for future in futures:
            yield future.result()


def check_ampc(ampc: pathlib.Path) -> None:
    if not ampc.is_file():
        sys.exit(f"error: {ampc}: no such file (build ampc first)")
