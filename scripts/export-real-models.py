#!/usr/bin/env python3
"""Exports real torchvision / transformers models to ONNX (opset 17) with random, seeded weights,
and stores seeded inputs and onnxruntime's outputs beside each model (issue 17, "real exports").

No hub downloads: every model is built from its code and config (`weights=None`,
`BertModel(BertConfig())`, `GPT2Model(GPT2Config())`).

Usage (the venv from scripts/install-torch.sh, or any Python with torch, torchvision,
transformers, onnx, onnxscript and onnxruntime):

    .torchenv/bin/python scripts/export-real-models.py [--out DIR] [--exporter torchscript|dynamo]
        [--only resnet18,bert,...] [--fp16]

Writes, per model NAME (DIR defaults to out/real-exports, git-ignored):

    DIR/NAME.onnx                       the model (weights inline; < 2 GB)
    DIR/NAME.<tag>.in.<input>.npy       seeded inputs (int64 token ids as <i8)
    DIR/NAME.<tag>.out.<output>.npy     onnxruntime's outputs for those inputs
    DIR/manifest.json                   models, inputs, tags, exporter, opset, node counts

The exporter: torch 2.9+ defaults to the dynamo exporter (`torch.onnx.export(..., dynamo=True)`),
which has no opset-17 implementations: it exports opset 18 and tries to convert down, and the
conversion fails on every model here (onnx's version converter asserts on `ReduceMean`'s axes
input: "No initializer or constant input to node found"), leaving the model at opset 18. So
`--exporter dynamo` (what a user gets by calling `torch.onnx.export` with no `dynamo=`) writes
opset-18 models, and `--exporter torchscript` (the default here; `dynamo=False`) writes the opset-17
graphs issue 17 names. BERT and GPT-2 get symbolic `batch` and `sequence` axes and two sequence
lengths (tags s7/s16 and s5/s12).
"""
import argparse
import json
import os
import time

import numpy as np
import onnx
import onnxruntime as ort
import torch


def calibrate_batchnorm(m, x):
    """Sets every BatchNorm's running statistics to those of one forward pass on `x` and gives
    it random affine parameters: with torchvision's initialization (running mean 0, variance 1)
    MobileNetV2's logits are ~1e-9, which any tolerance accepts; calibrated, activations are O(1)
    throughout, as in a trained model."""
    bns = [b for b in m.modules() if isinstance(b, torch.nn.BatchNorm2d)]
    g = torch.Generator().manual_seed(3)
    for b in bns:
        b.reset_running_stats()
        b.momentum = None  # cumulative average: one pass sets the batch statistics
        with torch.no_grad():
            b.weight.copy_(0.5 + torch.rand(b.weight.shape, generator=g))
            b.bias.copy_(0.1 * torch.randn(b.bias.shape, generator=g))
    m.train()
    with torch.no_grad():
        m(x)
    return m.eval()


def vision(builder, size=224):
    def make():
        x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1))
        m = builder(weights=None)
        # torchvision zero-initializes ViT's head and draws classifier weights with std 0.01:
        # every Linear gets torch's default initialization so the logits are O(1).
        for lin in m.modules():
            if isinstance(lin, torch.nn.Linear):
                lin.reset_parameters()
        m = calibrate_batchnorm(m, x)
        return m, {"input": x}
    return make


def resnet18():
    import torchvision
    return vision(torchvision.models.resnet18)()


def mobilenet_v2():
    import torchvision
    return vision(torchvision.models.mobilenet_v2)()


def mobilenet_v3_small():
    import torchvision
    return vision(torchvision.models.mobilenet_v3_small)()


def vit_b_16():
    import torchvision
    # nn.MultiheadAttention's inference fast path (`_native_multi_head_attention`) has no ONNX
    # export; the TorchScript exporter fails on it unless the fast path is off.
    torch.backends.mha.set_fastpath_enabled(False)
    return vision(torchvision.models.vit_b_16)()


def vit_s_16_6():
    """The ViT-S/16 of issue 23's tinygrad table, 6 layers (torchvision has no ViT-S: its
    `VisionTransformer` with ViT-S's sizes)."""
    import torchvision
    torch.backends.mha.set_fastpath_enabled(False)

    def build(weights=None):
        return torchvision.models.VisionTransformer(
            image_size=224, patch_size=16, num_layers=6, num_heads=6, hidden_dim=384,
            mlp_dim=1536)
    return vision(build)()


def token_inputs(seq, vocab, mask=True, seed=2):
    g = torch.Generator().manual_seed(seed + seq)
    ids = torch.randint(0, vocab, (1, seq), generator=g, dtype=torch.int64)
    out = {"input_ids": ids}
    if mask:
        m = torch.ones(1, seq, dtype=torch.int64)
        m[0, seq - 2:] = 0  # two padding positions: the mask arithmetic matters
        out["attention_mask"] = m
    return out


def bert():
    from transformers import BertConfig, BertModel
    cfg = BertConfig()
    m = BertModel(cfg, add_pooling_layer=True).eval()
    return m, token_inputs(7, cfg.vocab_size)


def bert_4l():
    """BERT-base with 4 layers (issue 23's tinygrad table)."""
    from transformers import BertConfig, BertModel
    cfg = BertConfig(num_hidden_layers=4)
    m = BertModel(cfg, add_pooling_layer=True).eval()
    return m, token_inputs(7, cfg.vocab_size)


def gpt2_2l():
    """GPT-2 with 2 layers (issue 23's tinygrad table)."""
    return gpt2(n_layer=2)


def gpt2(**config):
    from transformers import GPT2Config, GPT2Model
    cfg = GPT2Config(use_cache=False, **config)
    m = GPT2Model(cfg).eval()
    # With an attention mask (as a user batching prompts passes it); without one transformers
    # looks for packed sequences with `torch.diff`, which the TorchScript exporter cannot export.
    return m, token_inputs(5, cfg.vocab_size)


# name -> (builder, dynamic axes per input, extra sequence lengths run besides the export's)
MODELS = {
    "resnet18": (resnet18, None, []),
    "mobilenet_v2": (mobilenet_v2, None, []),
    "mobilenet_v3_small": (mobilenet_v3_small, None, []),
    "vit_b_16": (vit_b_16, None, []),
    "bert": (bert, {"input_ids": {0: "batch", 1: "sequence"},
                    "attention_mask": {0: "batch", 1: "sequence"}}, [16]),
    "gpt2": (gpt2, {"input_ids": {0: "batch", 1: "sequence"},
                    "attention_mask": {0: "batch", 1: "sequence"}}, [12]),
    # the sizes of issue 23's tinygrad table
    "vit_s_16_6": (vit_s_16_6, None, []),
    "bert_4l": (bert_4l, {"input_ids": {0: "batch", 1: "sequence"},
                          "attention_mask": {0: "batch", 1: "sequence"}}, []),
    "gpt2_2l": (gpt2_2l, {"input_ids": {0: "batch", 1: "sequence"},
                          "attention_mask": {0: "batch", 1: "sequence"}}, []),
}


class Wrap(torch.nn.Module):
    """Calls the model with keyword inputs and returns its first output tensor (transformers
    models return a ModelOutput; the vision models a tensor)."""

    def __init__(self, m, names):
        super().__init__()
        self.m = m
        self.names = names

    def forward(self, *args):
        if self.names == ["input"]:
            out = self.m(*args)
        else:
            out = self.m(**dict(zip(self.names, args)))
        if isinstance(out, torch.Tensor):
            return out
        return out[0]


def export(name, exporter, out_dir, fp16):
    build, dyn, extra = MODELS[name]
    torch.manual_seed(0)
    model, inputs = build()
    if fp16:
        model = model.half()
        inputs = {k: (v.half() if v.is_floating_point() else v) for k, v in inputs.items()}
    names = list(inputs)
    wrapped = Wrap(model, names).eval()
    tag_name = name + ("_fp16" if fp16 else "")
    path = os.path.join(out_dir, f"{tag_name}.onnx")
    kwargs = dict(input_names=names, output_names=["output"], opset_version=17)
    if dyn:
        kwargs["dynamic_axes"] = dyn
    t = time.time()
    with torch.no_grad():
        if exporter == "torchscript":
            torch.onnx.export(wrapped, tuple(inputs[n] for n in names), path, dynamo=False, **kwargs)
        else:
            torch.onnx.export(wrapped, tuple(inputs[n] for n in names), path, dynamo=True,
                              external_data=False, **kwargs)
    took = time.time() - t
    m = onnx.load(path)
    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    seqs = [next(iter(inputs.values())).shape[1]] + extra if dyn else [None]
    runs = []
    for seq in seqs:
        feed = inputs if seq is None or seq == seqs[0] else \
            token_inputs(seq, int(model.config.vocab_size), mask="attention_mask" in names)
        tag = "x" if seq is None else f"s{seq}"
        feed_np = {k: v.numpy() for k, v in feed.items()}
        for k, v in feed_np.items():
            np.save(os.path.join(out_dir, f"{tag_name}.{tag}.in.{k}.npy"), v)
        (res,) = sess.run(["output"], feed_np)
        np.save(os.path.join(out_dir, f"{tag_name}.{tag}.out.output.npy"), res)
        if seq == seqs[0] or seq is None:
            with torch.no_grad():
                ref = wrapped(*[feed[n] for n in names]).float().numpy()
            torch_err = float(np.abs(ref - res.astype(np.float32)).max())
        runs.append({"tag": tag, "shape": list(res.shape), "max_abs": float(np.abs(res).max())})
    info = {"file": os.path.basename(path), "exporter": exporter, "opset": opset,
            "nodes": len(m.graph.node), "inputs": names, "runs": runs,
            "export_s": round(took, 1), "ort_vs_torch_max_abs": torch_err,
            "bytes": os.path.getsize(path)}
    print(json.dumps({tag_name: info}), flush=True)
    return tag_name, info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "out", "real-exports"))
    ap.add_argument("--exporter", choices=["torchscript", "dynamo"], default="torchscript")
    ap.add_argument("--only", default=",".join(MODELS))
    ap.add_argument("--fp16", action="store_true", help="also export half-precision variants")
    ap.add_argument("--idioms", metavar="DIR",
                    help="only write the small mask-idioms model (tests/data/real_exports)")
    a = ap.parse_args()
    if a.idioms:
        return write_idioms(a.idioms)
    os.makedirs(a.out, exist_ok=True)
    man_path = os.path.join(a.out, "manifest.json")
    manifest = json.load(open(man_path)) if os.path.exists(man_path) else {}
    for name in a.only.split(","):
        for fp16 in [False, True] if a.fp16 else [False]:
            try:
                key, info = export(name, a.exporter, a.out, fp16)
                manifest[key] = info
            except Exception as e:  # report and go on with the next model
                print(json.dumps({name + ("_fp16" if fp16 else ""): {"error": f"{type(e).__name__}: {e}"[:2000]}}), flush=True)
    with open(man_path, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)



def write_idioms(out_dir):
    """A small model (onnx helper API) with the idioms the real exports need beyond the helper
    copies of tests/onnx_models.rs, in the TorchScript exporter's forms: a constant buffer sliced
    to the symbolic sequence length, torch's `expand(-1)` idiom `Where(Equal(shape, -1), 1,
    shape)`, transformers' padding-mask lookup `Gather(Flatten(mask), batch_idx * seq + kv_idx)`
    (a symbolic size used as data), `And`, `IsNaN` after a fully masked softmax row. Inputs and
    onnxruntime outputs at sequence lengths 5 and 9 are stored beside it (tests/real_exports.rs
    runs it in CI)."""
    from onnx import TensorProto, helper, numpy_helper
    os.makedirs(out_dir, exist_ok=True)
    nodes, k = [], [0]

    def c(v, dtype=np.int64):
        k[0] += 1
        name = f"/c_{k[0]}"
        nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(v, dtype=dtype))))
        return name

    def op(kind, ins, **attrs):
        k[0] += 1
        name = f"/{kind}_{k[0]}_output_0"
        nodes.append(helper.make_node(kind, ins, [name], name=f"/{kind}_{k[0]}", **attrs))
        return name

    buf = numpy_helper.from_array(np.arange(32, dtype=np.int64)[None, :], "position_ids")
    emb = numpy_helper.from_array((np.random.default_rng(5).standard_normal((32, 4)) * 0.5).astype(np.float32), "pos_emb")
    shape = op("Shape", ["input_ids"])
    batch = op("Gather", [shape, c(0)], axis=0)
    seq = op("Gather", [shape, c(1)], axis=0)
    seq1 = op("Unsqueeze", [seq, c([0])])
    pos = op("Slice", ["position_ids", c([0]), seq1, c([1]), c([1])])            # [1, S]
    target = op("Concat", [op("Unsqueeze", [batch, c([0])]), seq1], axis=0)     # [B, S]
    minus = op("Mul", [op("ConstantOfShape", [op("Shape", [target])], value=numpy_helper.from_array(np.array([1], np.int64))), c(-1)])
    target = op("Where", [op("Equal", [target, minus]), op("ConstantOfShape", [op("Shape", [target])], value=numpy_helper.from_array(np.array([1], np.int64))), target])
    pos = op("Expand", [pos, target])                                           # [B, S]
    h = op("Gather", ["pos_emb", pos], axis=0)                                  # [B, S, 4]
    # transformers' sdpa mask: batch_idx * S + kv_idx into the flattened padding mask
    b_idx = op("Unsqueeze", [op("Range", [c(0), batch, c(1)]), c([1, 2, 3])])   # [B,1,1,1]
    kv = op("Unsqueeze", [op("Range", [c(0), seq, c(1)]), c([0, 1, 2])])        # [1,1,1,S]
    q = op("Unsqueeze", [op("Range", [c(0), seq, c(1)]), c([0, 1, 3])])         # [1,1,S,1]
    flat = op("Flatten", [op("Cast", ["attention_mask"], to=TensorProto.BOOL)], axis=2)
    pad = op("Reshape", [op("Gather", [flat, op("Add", [kv, op("Mul", [b_idx, seq])])], axis=0), op("Shape", [op("Add", [kv, op("Mul", [b_idx, seq])])])])
    causal = op("LessOrEqual", [kv, q])                                         # [1,1,S,S]
    allowed = op("And", [causal, op("Cast", [pad], to=TensorProto.BOOL)])      # [B,1,S,S]
    scores = op("MatMul", [op("Unsqueeze", [h, c([1])]), op("Transpose", [op("Unsqueeze", [h, c([1])])], perm=[0, 1, 3, 2])])
    bias = op("Where", [allowed, c(0.0, np.float32), c(-np.inf, np.float32)])
    p = op("Softmax", [op("Add", [scores, bias])], axis=-1)
    p = op("Where", [op("IsNaN", [p]), c(0.0, np.float32), p])                  # fully masked rows
    out = op("MatMul", [p, op("Unsqueeze", [h, c([1])])])
    nodes[-1].output[0] = "output"
    graph = helper.make_graph(
        nodes, "mask_idioms",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 1, "sequence", 4])], [buf, emb])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = os.path.join(out_dir, "mask_idioms.onnx")
    onnx.save(model, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for seq_len in (5, 9):
        ids = np.random.default_rng(seq_len).integers(0, 100, (2, seq_len)).astype(np.int64)
        mask = np.ones((2, seq_len), np.int64)
        mask[1, :2] = 0  # left padding: row 0 of batch 1 sees no key (a NaN softmax row)
        (res,) = sess.run(["output"], {"input_ids": ids, "attention_mask": mask})
        tag = f"s{seq_len}"
        np.save(os.path.join(out_dir, f"{tag}.in.input_ids.npy"), ids)
        np.save(os.path.join(out_dir, f"{tag}.in.attention_mask.npy"), mask)
        np.save(os.path.join(out_dir, f"{tag}.out.npy"), res)
        print(tag, res.shape, float(np.abs(res).max()))


if __name__ == "__main__":
    main()
