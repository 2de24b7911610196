#!/usr/bin/env python3
"""Writes the realistic-shape graphs of tests/static_perf.rs into tests/data/realistic/ (issue 15).

Usage: python3 scripts/gen-realistic-graphs.py   (rewrites every file; commit the outputs)

A graph whose symbols are left out of `symbols` stays symbolic; tests/static_perf.rs evaluates
its launch grids at S=2048 and M=N=K=4096.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from graph_json import data, graph, param  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "realistic")


def gemm(dtype, m, k, n, bias_relu, symbols=None):
    inputs = [data("A"), data("B")]
    tensors = {"A": (dtype, [m, k]), "B": (dtype, [k, n])}
    nodes = [{"op": "GEMM", "name": "gemm", "inputs": ["A", "B"], "outputs": ["C"],
              "attrs": {"acc_dtype": "fp32"}}]
    out = "C"
    if bias_relu:
        inputs.append(param("bias"))
        tensors["bias"] = (dtype, [n])
        nodes += [
            {"op": "Elementwise", "name": "bias_add", "inputs": ["C", "bias"], "outputs": ["C1"],
             "attrs": {"fn": "add"}},
            {"op": "Elementwise", "name": "relu", "inputs": ["C1"], "outputs": ["Y"],
             "attrs": {"fn": "relu"}},
        ]
        out = "Y"
    tensors[out] = (dtype, [m, n])
    return graph(inputs, [out], symbols or {}, tensors, nodes)


def conv(n, c, hw, bias_relu, pool):
    inputs = [data("X"), param("W")]
    tensors = {"X": ("fp16", [n, c, hw, hw]), "W": ("fp16", [c, c, 3, 3])}
    conv_inputs = ["X", "W"]
    if bias_relu:
        inputs.append(param("bias"))
        tensors["bias"] = ("fp16", [c])
        conv_inputs.append("bias")
    nodes = [{"op": "Conv", "name": "conv", "inputs": conv_inputs, "outputs": ["C"],
              "attrs": {"stride": 1, "pad": 1}}]
    out = "C"
    if bias_relu:
        nodes.append({"op": "Elementwise", "name": "relu", "inputs": ["C"], "outputs": ["R"],
                      "attrs": {"fn": "relu"}})
        out = "R"
    if pool:
        nodes.append({"op": "Pool", "name": "pool", "inputs": [out], "outputs": ["Y"],
                      "attrs": {"mode": "max", "kernel": 2, "stride": 2}})
        tensors["Y"] = ("fp16", [n, c, hw // 2, hw // 2])
        out = "Y"
    else:
        tensors[out] = ("fp16", [n, c, hw, hw])
    return graph(inputs, [out], {}, tensors, nodes)


def attention(causal, hd, s):
    shape = [8, 16, s, hd]
    return graph(
        [data("Q"), data("K"), data("V")], ["O"], {},
        {t: ("fp16", shape) for t in ("Q", "K", "V", "O")},
        [{"op": "Attention", "name": "attn", "inputs": ["Q", "K", "V"], "outputs": ["O"],
          "attrs": {"causal": causal, "acc_dtype": "fp32"}}])


def norm(op, rows, cols):
    inputs = [data("X"), param("gamma")]
    tensors = {"X": ("fp16", [rows, cols]), "gamma": ("fp16", [cols])}
    node_inputs = ["X", "gamma"]
    attrs = {"axis": -1, "eps": 1e-5 if op == "LayerNorm" else 1e-6}
    if op == "LayerNorm":
        inputs.append(param("beta"))
        tensors["beta"] = ("fp16", [cols])
        node_inputs.append("beta")
    tensors["Y"] = ("fp16", [rows, cols])
    return graph(inputs, ["Y"], {}, tensors,
                 [{"op": op, "name": op.lower(), "inputs": node_inputs, "outputs": ["Y"],
                   "attrs": attrs}])


def softmax(rows, cols):
    return graph([data("X")], ["Y"], {}, {"X": ("fp16", [rows, cols]), "Y": ("fp16", [rows, cols])},
                 [{"op": "Softmax", "name": "softmax", "inputs": ["X"], "outputs": ["Y"],
                   "attrs": {"axis": -1}}])


def bias_gelu_residual(rows, cols):
    return graph(
        [data("X"), param("bias"), data("R")], ["Y"], {},
        {"X": ("fp16", [rows, cols]), "bias": ("fp16", [cols]), "R": ("fp16", [rows, cols]),
         "Y": ("fp16", [rows, cols])},
        [{"op": "Elementwise", "name": "add_bias", "inputs": ["X", "bias"], "outputs": ["H"],
          "attrs": {"fn": "add"}},
         {"op": "Elementwise", "name": "gelu", "inputs": ["H"], "outputs": ["G"],
          "attrs": {"fn": "gelu"}},
         {"op": "Elementwise", "name": "residual", "inputs": ["G", "R"], "outputs": ["Y"],
          "attrs": {"fn": "add"}}])


def reduce(dtype, xs, ys, fn, axes, keepdim, symbols=None):
    return graph([data("X")], ["Y"], symbols or {}, {"X": (dtype, xs), "Y": (dtype, ys)},
                 [{"op": "Reduce", "name": "red", "inputs": ["X"], "outputs": ["Y"],
                   "attrs": {"fn": fn, "axes": axes, "keepdim": keepdim, "acc_dtype": "fp32"}}])


def graphs():
    yield "gemm_fp16_4096", gemm("fp16", 4096, 4096, 4096, False)
    yield "gemm_fp16_symbolic_bias_relu", gemm("fp16", "M", "K", "N", True)
    # Symbolic M and N priced at their defaults (a tile the 4096 binding does not choose).
    yield "gemm_fp16_symbolic_mn_defaults", gemm("fp16", "M", 4096, "N", False, {"M": 1000, "N": 3000})
    yield "gemm_bf16_4096", gemm("bf16", 4096, 4096, 4096, False)
    yield "conv3x3_n32_c64_56", conv(32, 64, 56, False, False)
    yield "conv3x3_n256_c64_224_bias_relu", conv(256, 64, 224, True, False)
    yield "conv_relu_pool_n1", conv(1, 64, 56, True, True)
    yield "conv_relu_pool_n8", conv(8, 64, 56, True, True)
    for causal in (True, False):
        kind = "causal" if causal else "full"
        for hd in (32, 64, 80, 96, 128, 256):
            yield f"attention_{kind}_hd{hd}", attention(causal, hd, 2048)
    yield "attention_causal_hd64_symbolic_s", attention(True, 64, "S")
    yield "attention_causal_hd128_symbolic_s", attention(True, 128, "S")
    yield "layernorm_8192x768", norm("LayerNorm", 8192, 768)
    yield "rmsnorm_8192x4096", norm("RMSNorm", 8192, 4096)
    yield "softmax_8192x1024", softmax(8192, 1024)
    yield "bias_gelu_residual_4096x3072", bias_gelu_residual(4096, 3072)
    # Plain reductions (issue 15): rows, a keepdim mean, columns, a middle axis, everything.
    yield "reduce_sum_rows", reduce("fp16", [1024, 4096], [1024], "sum", [-1], False)
    yield "reduce_mean_rows", reduce("fp16", [8192, 768], [8192, 1], "mean", [-1], True)
    yield "reduce_max_cols", reduce("fp16", [4096, 1024], [1024], "max", [0], False)
    yield "reduce_sum_mid", reduce("fp16", [64, 512, 256], [64, 256], "sum", [1], False)
    yield "reduce_sum_all", reduce("fp16", [4194304], [], "sum", [0], False)
    yield "reduce_max_rows_bf16_1000x777", reduce("bf16", [1000, 777], [1000], "max", [1], False)
    yield "reduce_min_rows_fp32_4099x13", reduce("fp32", [4099, 13], [4099, 1], "min", [-1], True)
    yield "reduce_sum_rows_fp16_symbolic", reduce("fp16", ["N", 4096], ["N"], "sum", [1], False,
                                                  {"N": 1000})


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, g in graphs():
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(g, f, indent=1)
            f.write("\n")
        print(name)


if __name__ == "__main__":
    main()
