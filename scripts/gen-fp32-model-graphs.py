#!/usr/bin/env python3
"""Writes small fp32 graphs shaped like the layers of the real ONNX exports (issue 15) into
tests/data/realistic/ beside the fp16/bf16 ones of scripts/gen-realistic-graphs.py, so that
tests/static_perf.rs checks the fp32 SIMT contraction, the pointwise folds and the row kernels
those exports run on:

- `fp32_bert_ffn_gelu`: BERT-base's feed-forward (`[batch·sequence, 768] · [768, 3072]`, bias,
  exact-erf GELU), the dynamic axes `batch` and `sequence` left symbolic as `dlc-egg import` leaves
  them (static_perf binds them), and a position-id cumulative sum (the scan template);
- `fp32_bert_attention`: one BERT-base attention core, batch 8, 12 heads, sequence 128, head dim 64;
- `fp32_mobilenet_stem_clip`: MobileNetV2's stem (3×3 stride 2, 3 → 32 channels at 224², bias,
  ReLU6 as max/min with constants) and a 1×1 fold over the sum of three residual branches;
- `fp32_resnet_stem`: ResNet-18's stem (7×7 stride 2, 3 → 64 channels at 224², bias, ReLU).

Usage: python3 scripts/gen-fp32-model-graphs.py   (rewrites these files; commit the outputs)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from graph_json import data, ew, graph, param  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "realistic")


def bert_ffn_gelu():
    tokens = ["batch", "sequence"]
    return graph(
        [data("X"), param("W"), param("b"), data("ids")], ["Y", "pos"], {},
        {"X": ("fp32", tokens + [768]), "W": ("fp32", [768, 3072]), "b": ("fp32", [3072]),
         "Y": ("fp32", tokens + [3072]), "ids": ("i32", ["batch", "sequence"]),
         "pos": ("i32", ["batch", "sequence"])},
        [{"op": "MatMul", "name": "fc1", "inputs": ["X", "W"], "outputs": ["H0"],
          "attrs": {"acc_dtype": "fp32"}},
         ew("bias", "add", ["H0", "b"], "H1"),
         ew("gelu", "gelu", ["H1"], "Y"),
         {"op": "Cumulative", "name": "positions", "inputs": ["ids"], "outputs": ["pos"],
          "attrs": {"fn": "sum", "axis": 1, "exclusive": True, "reverse": False}}])


def bert_attention():
    shape = [8, 12, 128, 64]
    return graph(
        [data("Q"), data("K"), data("V")], ["O"], {},
        {t: ("fp32", shape) for t in ("Q", "K", "V", "O")},
        [{"op": "Attention", "name": "attn", "inputs": ["Q", "K", "V"], "outputs": ["O"],
          "attrs": {"causal": False, "acc_dtype": "fp32"}}])


def conv_node(name, ins, out, stride, pad):
    return {"op": "Conv", "name": name, "inputs": ins, "outputs": [out],
            "attrs": {"stride": stride, "pad": pad}}


def mobilenet_stem_clip():
    tensors = {"X": ("fp32", [1, 3, 224, 224]), "W": ("fp32", [32, 3, 3, 3]),
               "b": ("fp32", [32]), "Y": ("fp32", [1, 32, 112, 112]),
               "W1": ("fp32", [960, 160, 1, 1]), "b1": ("fp32", [960]),
               "Z": ("fp32", [1, 960, 7, 7])}
    inputs = [data("X"), param("W"), param("b"), param("W1"), param("b1")]
    nodes = [conv_node("stem", ["X", "W", "b"], "C", 2, 1),
             ew("relu6_lo", "max", ["C", 0.0], "C1"),
             ew("relu6_hi", "min", ["C1", 6.0], "Y")]
    # Three residual branches (each a projection's output plus its bias), summed into a 1×1
    # convolution: the fold's image is seven reads per channel.
    branches = []
    for i in range(3):
        tensors[f"R{i}"] = ("fp32", [1, 160, 7, 7])
        tensors[f"rb{i}"] = ("fp32", [1, 160, 1, 1])
        inputs += [data(f"R{i}"), param(f"rb{i}")]
        nodes.append(ew(f"branch{i}", "add", [f"R{i}", f"rb{i}"], f"B{i}"))
        branches.append(f"B{i}")
    nodes += [ew("sum01", "add", branches[:2], "S01"),
              ew("sum012", "add", ["S01", branches[2]], "S"),
              conv_node("expand", ["S", "W1", "b1"], "E", 1, 0),
              ew("expand_lo", "max", ["E", 0.0], "E1"),
              ew("expand_hi", "min", ["E1", 6.0], "Z")]
    return graph(inputs, ["Y", "Z"], {}, tensors, nodes)


def resnet_stem():
    return graph(
        [data("X"), param("W"), param("b")], ["Y"], {},
        {"X": ("fp32", [1, 3, 224, 224]), "W": ("fp32", [64, 3, 7, 7]), "b": ("fp32", [64]),
         "Y": ("fp32", [1, 64, 112, 112])},
        [conv_node("stem", ["X", "W", "b"], "C", 2, 3), ew("relu", "relu", ["C"], "Y")])


def graphs():
    yield "fp32_bert_ffn_gelu", bert_ffn_gelu()
    yield "fp32_bert_attention", bert_attention()
    yield "fp32_mobilenet_stem_clip", mobilenet_stem_clip()
    yield "fp32_resnet_stem", resnet_stem()


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, g in graphs():
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(g, f, indent=1)
            f.write("\n")
        print(name)


if __name__ == "__main__":
    main()
