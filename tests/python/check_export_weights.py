"""`ampc export-weights` read back by NumPy (docs/training.md, "Weights back to PyTorch").

The bundled CNN (`ampc-models cnn`: two Conv-BatchNormalization blocks and two Linear layers)
is compiled with `--train --loss loss --dtype=fp16`, trained for one epoch on synthetic data
(`ampc train --save`), and its weights exported to .npz: `numpy.load` must read the file, and it
must hold exactly the saved model's FP32 initializers (the parameters and the running
statistics) under their names, with their shapes and values bit for bit. Exit 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper


def run(*args: str) -> None:
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(args)} exited {result.returncode}: {result.stderr.strip()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ampc", required=True)
    parser.add_argument("--models-tool", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ampc-export-weights-") as tmp:
        d = pathlib.Path(tmp)
        run(args.models_tool, "cnn", "-o", str(d / "cnn.onnx"))
        run(args.ampc, str(d / "cnn.onnx"), "-o", str(d / "cnn.train.onnx"), "--train",
            "--loss", "loss", "--dtype=fp16")
        run(args.ampc, "train", str(d / "cnn.train.onnx"), "--data", "synthetic:64", "--batch",
            "16", "--epochs", "1", "--save", str(d / "trained.onnx"))
        run(args.ampc, "export-weights", str(d / "trained.onnx"), "-o", str(d / "w.npz"))
        model = onnx.load(str(d / "trained.onnx"))
        want = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer
                if t.data_type == onnx.TensorProto.FLOAT}
        with np.load(d / "w.npz") as npz:
            got = {name: npz[name] for name in npz.files}
    failures = []
    if sorted(got) != sorted(want):
        failures.append(f"names {sorted(got)} != the model's FP32 initializers {sorted(want)}")
    for name in sorted(set(got) & set(want)):
        if got[name].dtype != np.float32 or got[name].shape != want[name].shape:
            failures.append(f"{name}: {got[name].dtype}{list(got[name].shape)}, "
                            f"want float32{list(want[name].shape)}")
        elif not np.array_equal(got[name], want[name]):
            failures.append(f"{name}: values differ from the saved model's")
    for failure in failures:
        print(f"FAILED: {failure}")
    print(f"export-weights: {len(got)} weights read by numpy.load, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
