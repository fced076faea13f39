"""The extracted training step runs in onnxruntime as ampc runs it (issue 5, "Portability").

For the bundled MLP and CNN (`ampc-models`) and `convpool` (built here: a grouped, strided,
unevenly padded Conv and padded AveragePools, so ai.ampc.ConvGrad's and AveragePoolGrad's bodies
run in onnxruntime in the cases the CNN does not reach), each compiled with `--train --loss loss` (AdamW, the
default optimizer) in FP32 (`--passes=verify`: no autocast) and with `--dtype=fp16`:

  - `ampc extract-step TRAIN -o STEP --with-state` writes the step; onnx.checker (full check)
    accepts it;
  - onnxruntime (CPU) runs ONE step of it on seeded data (images in [0, 1), labels) with LR;
  - ampc runs the same step twice, independently of onnxruntime:
      1. `ampc run STEP` (ampc's CPU runtime on the extracted model), batch BATCH;
      2. `ampc train TRAIN --data npy:DIR --batch 1 --epochs 1 --save OUT` on a one-sample
         training set (one step of ampc's own trainer on the training model, which never sees
         the extracted file; one sample, so the data order cannot differ), against
         onnxruntime on that one sample; the saved state is read back by running OUT's
         initialization graph and taking OUT's initializers.
    Every updated state item (`<state>.ampc.next`: parameters, AdamW's m and v, BatchNorm
    running statistics, scale and counters), the loss, ampc.applied and ampc.grad_norm must
    agree.

Tolerances. FP32: |ampc - ort| <= RTOL_FP32 * |ort| + ATOL_FP32 * max|ort of the tensor| per
element: both runtimes compute in FP32 and differ in summation order only; a gradient element
summed over a batch and positions (up to ~6,000 terms here) can cancel, leaving an absolute error
of about eps * sqrt(n) * |terms| ~ 1e-5 of the tensor's scale. FP16: see check_fp16 (onnxruntime
is compared with ampc's FP32 step of the same model; it rounds some ops to FP16 and most not): each
tensor must agree in norm, ||ort - ampc|| <= RTOL_FP16_NORM * ||ampc||.
Parameters: AdamW's first update is lr * m / (sqrt(v) + eps) = lr * g / (|g| + eps), nearly
lr * sign(g), which amplifies a gradient element within rounding of zero to +-lr. So a parameter
is compared by its update (new - old) on the elements whose gradient the precision resolves
(|m| > RESOLVED * max|m| of the tensor; 1e-4 in FP32, 1e-2 in FP16); the gradients themselves
are pinned by the moments m = (1 - beta1) g and v = (1 - beta2) g^2, compared in full. A
parameter whose gradient is zero in exact arithmetic (a conv bias under training-mode
BatchNormalization: BatchNormalization subtracts any per-channel shift) gets rounding noise in
both runtimes: both must be below ZERO_GRADIENT (1e-5; 1e-3 when one side ran FP16 ops) of the
model's largest moment, and its update and moments (noise) are not compared. Integer and bool outputs must be equal.
Exit 1 on any failure.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

import corpus

MODELS = ("mlp", "cnn", "convpool")
CONFIGS = (("fp32", ("--passes=verify",)), ("fp16", ("--dtype=fp16",)))
BATCH = 8
CLASSES = 10
LR = np.array(0.003, dtype=np.float32)
RTOL_FP32, ATOL_FP32 = 1e-5, 1e-5
RTOL_FP16_NORM = 2e-2
ZERO_GRADIENT, ZERO_GRADIENT_FP16 = 1e-5, 1e-3
RESOLVED_FP32, RESOLVED_FP16 = 1e-4, 1e-2
NEXT = ".ampc.next"


def convpool_model() -> onnx.ModelProto:
    """A model for the layers the bundled CNN lacks: a grouped Conv with stride 2 and uneven
    pads (after a 1x1 Conv, so its dx is computed too), an AveragePool with pads and
    count_include_pad, another without padding."""
    rng = np.random.default_rng(5)
    h = onnx.helper
    weights = {"conv0.weight": rng.normal(0, 0.5, [2, 2, 1, 1]), "conv.weight": rng.normal(0, 0.3, [4, 1, 3, 3]), "conv.bias": rng.normal(0, 0.1, [4]),
               "fc.weight": rng.normal(0, 0.2, [CLASSES, 4 * 3 * 3]),
               "fc.bias": rng.normal(0, 0.1, [CLASSES])}
    nodes = [
        h.make_node("Conv", ["image", "conv0.weight"], ["conv0.out"], "conv0"),
        h.make_node("Conv", ["conv0.out", "conv.weight", "conv.bias"], ["conv.out"], "conv",
                    group=2, strides=[2, 2], pads=[1, 0, 2, 1], kernel_shape=[3, 3]),
        h.make_node("Relu", ["conv.out"], ["relu"], "relu"),
        h.make_node("AveragePool", ["relu"], ["pool1"], "pool1", kernel_shape=[3, 3],
                    strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
        h.make_node("AveragePool", ["pool1"], ["pool2"], "pool2", kernel_shape=[2, 2]),
        h.make_node("Flatten", ["pool2"], ["flat"], "flatten"),
        h.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], "fc", transB=1),
        h.make_node("SoftmaxCrossEntropyLoss", ["logits", "label"], ["loss"], "loss"),
    ]
    graph = h.make_graph(
        nodes, "convpool",
        [h.make_tensor_value_info("image", onnx.TensorProto.FLOAT, ["N", 2, 15, 14]),
         h.make_tensor_value_info("label", onnx.TensorProto.INT64, ["N"])],
        [h.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["N", CLASSES]),
         h.make_tensor_value_info("loss", onnx.TensorProto.FLOAT, [])],
        [onnx.numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def ampc(args, *argv: str) -> None:
    result = subprocess.run([str(args.ampc), *argv], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"ampc {' '.join(argv)} exited {result.returncode}: "
                           f"{result.stderr.strip()}")


def data(model: onnx.ModelProto, batch: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    image = next(i for i in model.graph.input if i.name == "image")
    shape = [batch] + [d.dim_value for d in image.type.tensor_type.shape.dim[1:]]
    return {"image": rng.random(shape, dtype=np.float32),
            "label": rng.integers(0, CLASSES, size=[batch], dtype=np.int64)}


def quiet() -> ort.SessionOptions:
    """Without a warning per state input that is also an initializer (an input with a default)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return options


def run_ort(step: pathlib.Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(str(step), quiet(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, {**feeds, "ampc.lr": LR})))


def run_ampc(args, step: pathlib.Path, feeds: dict[str, np.ndarray],
             scratch: pathlib.Path) -> dict[str, np.ndarray]:
    inputs = []
    for name, value in {**feeds, "ampc.lr": LR}.items():
        np.save(scratch / f"in.{name}.npy", value)
        inputs.append(f"--input={name}={scratch / f'in.{name}.npy'}")
    out = scratch / "ampc_run"
    ampc(args, "run", str(step), "--device=cpu", f"--output-dir={out}", *inputs)
    model = onnx.load(str(step), load_external_data=False)
    return {o.name: np.load(out / f"{o.name}.npy") for o in model.graph.output}


def train_one_sample(args, train: pathlib.Path, feeds: dict[str, np.ndarray],
                     scratch: pathlib.Path) -> dict[str, np.ndarray]:
    """One step of `ampc train` on a one-sample set; the state it saves, by state name."""
    folder = scratch / "one_sample"
    folder.mkdir(exist_ok=True)
    for split in ("train", "test"):
        np.save(folder / f"{split}-images.npy", feeds["image"])
        np.save(folder / f"{split}-labels.npy", feeds["label"])
    saved = scratch / "trained.onnx"
    ampc(args, "train", str(train), f"--data=npy:{folder}", "--batch=1", "--epochs=1",
         f"--lr={float(LR)}", "--device=cpu", f"--save={saved}")
    model = onnx.load(str(saved))
    state = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    info = model.training_info[0]
    init = onnx.helper.make_model(info.initialization, opset_imports=model.opset_import,
                                  ir_version=model.ir_version, functions=model.functions)
    names = [o.name for o in info.initialization.output]
    if names:
        session = ort.InferenceSession(init.SerializeToString(), quiet(),
                                       providers=["CPUExecutionProvider"])
        state.update(zip(names, session.run(names, {})))
    return state


def compare(what: str, got: np.ndarray, want: np.ndarray, fp16: bool,
            mask: np.ndarray | None = None) -> str | None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{what}: {got.dtype}{list(got.shape)} vs onnxruntime's {want.dtype}{list(want.shape)}"
    if not np.issubdtype(want.dtype, np.floating):
        return None if np.array_equal(got, want) else f"{what}: {got} vs onnxruntime's {want}"
    if not (np.isfinite(got).all() and np.isfinite(want).all()):
        return f"{what}: not finite"
    a, b = got.astype(np.float64), want.astype(np.float64)
    if mask is not None:
        a, b = a[mask], b[mask]
    if fp16:
        error, scale = np.linalg.norm(a - b), np.linalg.norm(b)
        if error > RTOL_FP16_NORM * scale:
            return f"{what}: relative norm error {error / max(scale, 1e-300):.3g}"
        return None
    limit = RTOL_FP32 * np.abs(b) + ATOL_FP32 * np.abs(b).max(initial=0)
    worst = np.argmax(np.abs(a - b) - limit) if b.size else 0
    if b.size and np.abs(a - b).flat[worst] > limit.flat[worst]:
        return (f"{what}: element {worst} is {a.flat[worst]!r}, onnxruntime "
                f"{b.flat[worst]!r}")
    return None


def compare_all(what: str, got: dict[str, np.ndarray], want: dict[str, np.ndarray],
                fp16: bool, initial: dict[str, np.ndarray]) -> list[str]:
    """Every output of `want` in `got`; parameters by their update, see the module's doc."""
    missing = [name for name in want if name not in got]
    if missing:
        return [f"{what}: no {name}" for name in missing]
    moments = {name[:-len(".ampc.m" + NEXT)]: name for name in want
               if name.endswith(".ampc.m" + NEXT)}
    largest = max((np.abs(want[m]).max() for m in moments.values()), default=0.0)
    problems, skipped = [], set()
    for param, m in moments.items():
        scale = np.abs(want[m]).max()
        zero = (ZERO_GRADIENT_FP16 if fp16 else ZERO_GRADIENT) * largest
        if scale < zero:  # zero in exact arithmetic: rounding noise only
            if np.abs(got[m]).max() >= zero:
                problems.append(f"{what}: {m}: onnxruntime's gradient of {param} is zero "
                                f"(rounding noise), ampc's is not: {np.abs(got[m]).max():.3g}")
            skipped |= {param + NEXT, m, param + ".ampc.v" + NEXT}
            continue
        resolved = np.abs(want[m]) > (RESOLVED_FP16 if fp16 else RESOLVED_FP32) * scale
        problem = compare(f"{what}: {param}{NEXT} (update)", got[param + NEXT] - initial[param],
                          want[param + NEXT] - initial[param], fp16, resolved)
        problems += [problem] if problem else []
        skipped.add(param + NEXT)
    for name, value in want.items():
        if name not in skipped:
            problem = compare(f"{what}: {name}", got[name], value, fp16)
            problems += [problem] if problem else []
    return problems


def check(args, name: str, dtype: str, flags: tuple[str, ...],
          scratch: pathlib.Path) -> list[str]:
    what = f"{name} {dtype}"
    scratch = scratch / f"{name}.{dtype}"
    scratch.mkdir()
    forward, train, step = (scratch / f"{name}.onnx", scratch / "train.onnx",
                            scratch / "step.onnx")
    if name == "convpool":
        onnx.save(convpool_model(), str(forward))
    else:
        subprocess.run([str(args.models_tool), name, "-o", str(forward)], check=True)
    ampc(args, str(forward), "-o", str(train), "--train", "--loss=loss", *flags)
    ampc(args, "extract-step", str(train), "-o", str(step), "--with-state")
    step_model = onnx.load(str(step))
    onnx.checker.check_model(step_model, full_check=True)
    initial = {t.name: onnx.numpy_helper.to_array(t) for t in step_model.graph.initializer}
    fp16 = dtype == "fp16"

    feeds = data(step_model, BATCH, seed=1)
    one = data(step_model, 1, seed=2)
    if fp16:
        return check_fp16(args, what, forward, train, step, step_model, feeds, one, scratch)
    reference = run_ort(step, feeds)
    if not reference["ampc.applied"]:
        return [f"{what}: onnxruntime skipped the step (non-finite gradients)"]
    problems = compare_all(f"{what} ampc run, batch {BATCH}",
                           run_ampc(args, step, feeds, scratch), reference, fp16, initial)

    reference = run_ort(step, one)
    trained = train_one_sample(args, train, one, scratch)
    problems += compare_all(f"{what} ampc train, one sample", saved_state(trained, step_model),
                            {k: v for k, v in reference.items() if k.endswith(NEXT)},
                            fp16, initial)
    if not problems:
        print(f"{what}: ok (loss {float(reference['loss']):.4f}; "
              f"{len(reference)} outputs agree with ampc run and ampc train)")
    return problems


def saved_state(trained: dict[str, np.ndarray], step_model: onnx.ModelProto) -> dict:
    """`ampc train`'s saved state under the step's output names (`<state>.ampc.next`)."""
    states = (o.name[:-len(NEXT)] for o in step_model.graph.output if o.name.endswith(NEXT))
    return {f"{state}{NEXT}": trained[state] for state in states if state in trained}


def check_fp16(args, what, forward, train, step, step_model, feeds, one, scratch) -> list[str]:
    """The FP16 step: onnxruntime against ampc's FP32 step, ampc's run against ampc's train.

    onnxruntime's CPU provider does not round the FP16 step's intermediate values to FP16 (its
    FP16 MatMul/Gemm/Conv run in FP32 behind Casts it then removes in pairs: on the MLP its FP16
    step's moments equal its FP32 step's bit for bit), so it cannot reproduce what FP16 rounding
    does to a step (a ReLU mask flips where a pre-activation lies within FP16 rounding of zero:
    5-7% of a layer's gradient at batch 8; a numpy emulation of the FP16 forward gives ampc's
    masks). So onnxruntime's run of the FP16 file is checked against ampc's FP32 step of the same
    model (same initial weights, data and dynamic scale): it must compute the same step at FP32
    precision (RTOL_FP16_NORM). ampc's own FP16 step, run on the extracted file, must equal one
    step of `ampc train` on the training model (same runtime: FP32 tolerances)."""
    twin_train, twin_step = scratch / "twin.train.onnx", scratch / "twin.step.onnx"
    ampc(args, str(forward), "-o", str(twin_train), "--train", "--loss=loss", "--passes=verify",
         "--loss-scale=dynamic")
    ampc(args, "extract-step", str(twin_train), "-o", str(twin_step), "--with-state")
    initial = {t.name: onnx.numpy_helper.to_array(t) for t in step_model.graph.initializer}
    ort16 = run_ort(step, feeds)
    if not ort16["ampc.applied"]:
        return [f"{what}: onnxruntime skipped the step (non-finite gradients)"]
    problems = compare_all(f"{what} onnxruntime vs ampc's FP32 step, batch {BATCH}", ort16,
                           run_ampc(args, twin_step, feeds, scratch), True, initial)
    reference = run_ampc(args, step, one, scratch)
    trained = train_one_sample(args, train, one, scratch)
    problems += compare_all(f"{what} ampc train vs ampc run, one sample",
                            saved_state(trained, step_model),
                            {k: v for k, v in reference.items() if k.endswith(NEXT)}, False,
                            initial)
    if not problems:
        print(f"{what}: ok (loss {float(ort16['loss']):.4f}; onnxruntime's FP16 step agrees with "
              "ampc's FP32 step, ampc run with ampc train)")
    return problems


def main() -> int:
    p = corpus.parser(__doc__.splitlines()[0])
    p.add_argument("--models-tool", required=True, type=pathlib.Path, help="ampc-models")
    args = p.parse_args()
    corpus.check_ampc(args.ampc)
    problems = []
    with corpus.scratch_dir() as tmp:
        for name in MODELS:
            for dtype, flags in CONFIGS:
                try:
                    problems += check(args, name, dtype, flags, pathlib.Path(tmp))
                except Exception as e:  # a failed tool or runtime: report it, check the rest
                    problems.append(f"{name} {dtype}: {e}")
    for line in problems:
        print(f"FAILED: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
