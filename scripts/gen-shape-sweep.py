#!/usr/bin/env python3
"""Writes a seeded random sweep of realistic-shape graphs for tests/static_perf.rs (issue 15).

The fixed set in tests/data/realistic/ (scripts/gen-realistic-graphs.py) is what CI checks; this
sweep looks for the shapes it does not cover — odd and prime sizes, transposed and batched GEMMs,
bias as GEMM's C, strided / dilated / grouped / depthwise / 1×1 / 7×7 convolutions, attention with
masks, cross-attention lengths, every head dim, row kernels of awkward widths, symbolic sizes.

    python3 scripts/gen-shape-sweep.py --seed 1 --count 80 --out /tmp/sweep
    STATIC_PERF_DIR=/tmp/sweep cargo test --release --test static_perf -- --nocapture

Every failure of a sweep graph is reported as unexpected (their stems are not in KNOWN_FAILURES).
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from graph_json import data, ew, graph, param  # noqa: E402

DTYPES = ["fp16", "bf16"]


def gemm(r):
    dt = r.choice(DTYPES)
    m = r.choice([1, 7, 64, 100, 128, 255, 384, 768, 1000, 2048, 4096])
    k = r.choice([8, 64, 72, 100, 256, 768, 1024, 3072, 4096])
    n = r.choice([8, 40, 64, 96, 200, 768, 1000, 2304, 4096])
    ta, tb = r.random() < 0.3, r.random() < 0.4
    symbolic = r.random() < 0.2
    mm = "M" if symbolic else m
    a_shape = [k, mm] if ta else [mm, k]
    b_shape = [n, k] if tb else [k, n]
    inputs, tensors = [data("A"), param("B")], {"A": (dt, a_shape), "B": (dt, b_shape)}
    gins = ["A", "B"]
    if r.random() < 0.4:
        inputs.append(param("C"))
        tensors["C"] = (dt, [n])
        gins.append("C")
    nodes = [{"op": "GEMM", "name": "gemm", "inputs": gins, "outputs": ["G"],
              "attrs": {"trans_a": ta, "trans_b": tb, "acc_dtype": "fp32"}}]
    out = "G"
    act = r.choice([None, "relu", "gelu", "silu"])
    if act:
        nodes.append(ew("act", act, ["G"], "Y"))
        tensors["G"] = (dt, [mm, n])
        out = "Y"
    tensors[out] = (dt, [mm, n])
    name = f"gemm_{dt}_{'M' if symbolic else m}x{k}x{n}_t{int(ta)}{int(tb)}_c{len(gins) - 2}_{act}"
    return name, graph(inputs, [out], {}, tensors, nodes)


def matmul(r):
    dt = r.choice(DTYPES)
    b = r.choice([2, 3, 12, 16])
    m, k, n = r.choice([16, 77, 128, 512]), r.choice([32, 64, 100, 768]), r.choice([24, 64, 128, 768])
    shared = r.random() < 0.5
    b_shape = [k, n] if shared else [b, k, n]
    nodes = [{"op": "MatMul", "name": "mm", "inputs": ["A", "B"], "outputs": ["Y"],
              "attrs": {"acc_dtype": "fp32"}}]
    tensors = {"A": (dt, [b, m, k]), "B": (dt, b_shape), "Y": (dt, [b, m, n])}
    name = f"matmul_{dt}_b{b}_{m}x{k}x{n}_{'shared' if shared else 'batched'}"
    return name, graph([data("A"), data("B")], ["Y"], {}, tensors, nodes)


def conv(r):
    dt = r.choice(DTYPES)
    n = r.choice([1, 2, 8, 32])
    c = r.choice([3, 16, 32, 64, 96, 128, 256])
    kk = r.choice([1, 1, 3, 3, 3, 5, 7])
    stride = r.choice([1, 1, 2])
    dil = 1 if kk == 1 or r.random() < 0.8 else 2
    hw = r.choice([7, 14, 28, 56, 112]) if c > 3 else 224
    groups = 1
    if c > 3 and r.random() < 0.25:
        groups = r.choice([2, c])
    co = c if groups == c else r.choice([16, 32, 64, 128, 256])
    if co % groups:
        co = groups * max(1, co // groups)
    p = (kk // 2) * dil if r.random() < 0.8 else 0
    out_hw = (hw + 2 * p - dil * (kk - 1) - 1) // stride + 1
    ins = ["X", "W"]
    inputs = [data("X"), param("W")]
    tensors = {"X": (dt, [n, c, hw, hw]), "W": (dt, [co, c // groups, kk, kk])}
    if r.random() < 0.6:
        ins.append("bias")
        inputs.append(param("bias"))
        tensors["bias"] = (dt, [co])
    nodes = [{"op": "Conv", "name": "conv", "inputs": ins, "outputs": ["C"],
              "attrs": {"stride": stride, "pad": [[p, p], [p, p]], "dilation": dil,
                        "groups": groups, "acc_dtype": "fp32"}}]
    out = "C"
    if r.random() < 0.5:
        nodes.append(ew("relu", "relu", ["C"], "R"))
        tensors["C"] = (dt, [n, co, out_hw, out_hw])
        out = "R"
    tensors[out] = (dt, [n, co, out_hw, out_hw])
    name = f"conv_{dt}_n{n}_c{c}to{co}_{hw}_k{kk}s{stride}d{dil}g{groups}p{p}"
    return name, graph(inputs, [out], {}, tensors, nodes)


def attention(r):
    dt = r.choice(DTYPES)
    b, h = r.choice([1, 2, 4]), r.choice([1, 8, 12, 16])
    d = r.choice([32, 64, 80, 96, 128, 256])
    m = r.choice([1, 77, 128, 200, 512, 1024])
    n = m if r.random() < 0.7 else r.choice([77, 300, 1024])
    causal = r.random() < 0.5
    sym = r.random() < 0.2 and m == n
    ms, ns = ("S", "S") if sym else (m, n)
    tensors = {"Q": (dt, [b, h, ms, d]), "K": (dt, [b, h, ns, d]), "V": (dt, [b, h, ns, d]),
               "O": (dt, [b, h, ms, d])}
    ins, inputs = ["Q", "K", "V"], [data("Q"), data("K"), data("V")]
    mask = r.choice([None, None, "bool", "float"])
    if mask and not sym:
        tensors["mask"] = ("bool" if mask == "bool" else dt, [b, 1, 1, n])
        ins.append("mask")
        inputs.append(data("mask"))
    else:
        mask = None
    attrs = {"causal": causal, "acc_dtype": "fp32"}
    if r.random() < 0.3:
        attrs["scale"] = 0.125
    nodes = [{"op": "Attention", "name": "attn", "inputs": ins, "outputs": ["O"], "attrs": attrs}]
    name = f"attn_{dt}_b{b}h{h}_{ms}x{ns}_d{d}_{'causal' if causal else 'full'}_{mask}"
    return name, graph(inputs, ["O"], {}, tensors, nodes)


def rows(r):
    dt = r.choice(DTYPES)
    op = r.choice(["LayerNorm", "RMSNorm", "Softmax"])
    nr = r.choice([1, 7, 128, 1000, 8192])
    nc = r.choice([33, 100, 768, 1000, 1024, 4096, 5120, 50257])
    tensors = {"X": (dt, [nr, nc]), "Y": (dt, [nr, nc])}
    inputs, ins = [data("X")], ["X"]
    attrs = {"axis": -1}
    if op != "Softmax":
        inputs.append(param("gamma"))
        tensors["gamma"] = (dt, [nc])
        ins.append("gamma")
        attrs["eps"] = 1e-5
        if op == "LayerNorm":
            inputs.append(param("beta"))
            tensors["beta"] = (dt, [nc])
            ins.append("beta")
    nodes = [{"op": op, "name": op.lower(), "inputs": ins, "outputs": ["Y"], "attrs": attrs}]
    return f"{op.lower()}_{dt}_{nr}x{nc}", graph(inputs, ["Y"], {}, tensors, nodes)


KINDS = [gemm, gemm, matmul, conv, conv, attention, attention, rows]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    r = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    seen = set()
    while len(seen) < args.count:
        name, g = r.choice(KINDS)(r)
        name = "sw_" + name.replace("None", "none")
        if name in seen:
            continue
        seen.add(name)
        with open(os.path.join(args.out, name + ".json"), "w") as f:
            json.dump(g, f, indent=1)
            f.write("\n")
        print(name)


if __name__ == "__main__":
    main()
