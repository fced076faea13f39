"""Writes transformer_block.onnx: one pre-norm transformer encoder block, small enough to read.

x [1, 8, 16] -> LayerNorm -> 2-head self-attention -> + x -> LayerNorm -> MLP with the exact GELU
written out (Div, Erf, Add, Mul, as PyTorch exports it before opset 20) -> + residual -> y.
Opset 17, IR version 8 (what ampc's ONNX 1.12 reads). Weights are seeded: the file is the same on
every run. Usage: python make_transformer_block.py [OUT.onnx]
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEQ, DIM, HEADS, FF = 8, 16, 2, 32
HEAD_DIM = DIM // HEADS


def build():
    rng = np.random.RandomState(0)
    inits, nodes = [], []

    def weight(name, *shape, scale=None):
        scale = scale or 1.0 / np.sqrt(shape[0])
        inits.append(numpy_helper.from_array(
            rng.uniform(-scale, scale, shape).astype(np.float32), name))
        return name

    def const(name, values, dtype=np.float32):
        inits.append(numpy_helper.from_array(np.array(values, dtype=dtype), name))
        return name

    def node(op, inputs, name, **attrs):
        out = name + "_out"
        nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def layer_norm(x, prefix):
        scale = const(prefix + ".weight", np.ones(DIM))
        bias = const(prefix + ".bias", np.zeros(DIM))
        return node("LayerNormalization", [x, scale, bias], f"/{prefix}/LayerNorm", axis=-1,
                    epsilon=1e-5)

    def linear(x, prefix, fan_in, fan_out):
        y = node("MatMul", [x, weight(prefix + ".weight", fan_in, fan_out)], f"/{prefix}/MatMul")
        return node("Add", [y, weight(prefix + ".bias", fan_out)], f"/{prefix}/Add")

    heads_shape = const("heads_shape", [1, SEQ, HEADS, HEAD_DIM], np.int64)

    def split_heads(x, prefix, perm):
        x = node("Reshape", [x, heads_shape], f"/attn/{prefix}/Reshape")
        return node("Transpose", [x], f"/attn/{prefix}/Transpose", perm=perm)

    h = layer_norm("x", "ln1")
    q = split_heads(linear(h, "attn/q_proj", DIM, DIM), "q", [0, 2, 1, 3])
    k = split_heads(linear(h, "attn/k_proj", DIM, DIM), "k", [0, 2, 3, 1])
    v = split_heads(linear(h, "attn/v_proj", DIM, DIM), "v", [0, 2, 1, 3])
    scores = node("MatMul", [q, k], "/attn/scores/MatMul")
    scores = node("Div", [scores, const("sqrt_head_dim", np.sqrt(HEAD_DIM))], "/attn/scores/Div")
    probs = node("Softmax", [scores], "/attn/Softmax", axis=-1)
    ctx = node("MatMul", [probs, v], "/attn/context/MatMul")
    ctx = node("Transpose", [ctx], "/attn/context/Transpose", perm=[0, 2, 1, 3])
    ctx = node("Reshape", [ctx, const("model_shape", [1, SEQ, DIM], np.int64)],
               "/attn/context/Reshape")
    x1 = node("Add", ["x", linear(ctx, "attn/out_proj", DIM, DIM)], "/attn/residual/Add")

    u = linear(layer_norm(x1, "ln2"), "mlp/fc1", DIM, FF)
    g = node("Div", [u, const("sqrt_two", np.sqrt(2.0))], "/mlp/gelu/Div")
    g = node("Erf", [g], "/mlp/gelu/Erf")
    g = node("Add", [g, const("one", 1.0)], "/mlp/gelu/Add")
    g = node("Mul", [u, g], "/mlp/gelu/Mul")
    g = node("Mul", [g, const("half", 0.5)], "/mlp/gelu/Mul_1")
    m = linear(g, "mlp/fc2", FF, DIM)
    nodes.append(helper.make_node("Add", [x1, m], ["y"], name="/mlp/residual/Add"))

    graph = helper.make_graph(
        nodes, "transformer_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, DIM])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, SEQ, DIM])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="make_transformer_block.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


if __name__ == "__main__":
    onnx.save(build(), sys.argv[1] if len(sys.argv) > 1 else "transformer_block.onnx")
