#!/usr/bin/env python3
"""Generates the small real-architecture ONNX models of tests/data/onnx/ with the `onnx` helper
API (torch is too heavy for CI), mimicking the torch exporter's opset-17 graphs: shape subgraphs
(Shape -> Gather -> Unsqueeze -> Concat -> Reshape), erf-GELU, int64 token ids, a symbolic
sequence axis. Stores onnxruntime's outputs beside each model as .npy (two sequence lengths).

Usage: PYTHONPATH=.onnx:.onnxpy python3 scripts/gen-onnx-models.py
  (.onnx from scripts/install-onnx-tests.sh; .onnxpy: pip install --target .onnxpy numpy
  onnxruntime protobuf ml_dtypes typing_extensions). Deterministic (seeded).
"""
import os
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "onnx")
rng = np.random.default_rng(17)
nodes, inits = [], []
counter = [0]


def name(base):
    counter[0] += 1
    return f"/{base}_{counter[0]}"


def init(base, arr):
    n = f"{base}"
    inits.append(numpy_helper.from_array(arr, n))
    return n


def const(arr):
    out = name("Constant") + "_output_0"
    nodes.append(helper.make_node("Constant", [], [out], value=numpy_helper.from_array(np.asarray(arr))))
    return out


def op(kind, ins, **attrs):
    out = name(kind) + "_output_0"
    nodes.append(helper.make_node(kind, ins, [out], name=out[:-9], **attrs))
    return out


def w(*shape):
    return (rng.standard_normal(shape) * 0.2).astype(np.float32)


def linear(x, i, o, pfx):
    return op("Add", [op("MatMul", [x, init(pfx + ".weight", w(i, o))]), init(pfx + ".bias", w(o))])


def layernorm(x, h, pfx):
    g = init(pfx + ".weight", (1 + w(h)).astype(np.float32))
    b = init(pfx + ".bias", w(h))
    return op("LayerNormalization", [x, g, b], axis=-1, epsilon=1e-12)


def dim(x, i):
    """Shape(x)[i] as a 1-element int64 (the exporter's Shape/Gather/Unsqueeze chain)."""
    s = op("Shape", [x])
    g = op("Gather", [s, const(np.int64(i))], axis=0)
    return op("Unsqueeze", [g, const(np.array([0], np.int64))])


def gelu(x):
    d = op("Div", [x, const(np.float32(1.4142135381698608))])
    e = op("Erf", [d])
    a = op("Add", [e, const(np.float32(1.0))])
    m = op("Mul", [x, a])
    return op("Mul", [m, const(np.float32(0.5))])


def bert_layer(x, mask_add, h, heads, ff, pfx, causal=False):
    hd = h // heads
    def split(t):
        shp = op("Concat", [dim(t, 0), dim(t, 1), const(np.array([heads], np.int64)), const(np.array([hd], np.int64))], axis=0)
        return op("Transpose", [op("Reshape", [t, shp])], perm=[0, 2, 1, 3])
    q = split(linear(x, h, h, pfx + ".q"))
    k = split(linear(x, h, h, pfx + ".k"))
    v = split(linear(x, h, h, pfx + ".v"))
    s = op("Div", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])]), const(np.float32(np.sqrt(hd)))])
    if mask_add is not None:
        s = op("Add", [s, mask_add])
    p = op("Softmax", [s], axis=-1)
    c = op("Transpose", [op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    shp = op("Concat", [dim(x, 0), dim(x, 1), const(np.array([h], np.int64))], axis=0)
    c = op("Reshape", [c, shp])
    a = layernorm(op("Add", [linear(c, h, h, pfx + ".o"), x]), h, pfx + ".ln1")
    f = linear(gelu(linear(a, h, ff, pfx + ".ff1")), ff, h, pfx + ".ff2")
    return layernorm(op("Add", [f, a]), h, pfx + ".ln2")


def save(model_name, graph_inputs, out, out_shape, feeds_for):
    graph = helper.make_graph(nodes, model_name, graph_inputs,
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)], inits)
    graph.output[0].name = out
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    d = os.path.join(OUT, model_name)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    sess = ort.InferenceSession(os.path.join(d, "model.onnx"), providers=["CPUExecutionProvider"])
    for tag, feeds in feeds_for.items():
        res = sess.run(None, feeds)[0]
        for k, v in feeds.items():
            np.save(os.path.join(d, f"{tag}.in.{k}.npy"), v)
        np.save(os.path.join(d, f"{tag}.out.npy"), res.astype(np.float32))
    print("wrote", d, len(nodes), "nodes")


def bert(V=50, H=32, HEADS=4, FF=64, LAYERS=2, model_name="bert_tiny", run=True):
    nodes.clear(); inits.clear()
    ids, mask = "input_ids", "attention_mask"
    emb = op("Gather", [init("word_embeddings.weight", w(V, H)), ids], axis=0)
    seq = op("Gather", [op("Shape", [ids]), const(np.int64(1))], axis=0)
    pos_ids = op("Unsqueeze", [op("Range", [const(np.int64(0)), seq, const(np.int64(1))]), const(np.array([0], np.int64))])
    pos = op("Gather", [init("position_embeddings.weight", w(64, H)), pos_ids], axis=0)
    x = layernorm(op("Add", [emb, pos]), H, "embeddings.ln")
    m = op("Unsqueeze", [op("Cast", [mask], to=TensorProto.FLOAT), const(np.array([1, 2], np.int64))])
    madd = op("Mul", [op("Sub", [const(np.float32(1.0)), m]), const(np.float32(-3.4028234663852886e38))])
    y = x
    for i in range(LAYERS):
        y = bert_layer(y, madd, H, HEADS, FF, f"layer.{i}")
    ins = [helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "sequence"]),
           helper.make_tensor_value_info(mask, TensorProto.INT64, ["batch", "sequence"])]
    feeds = {}
    for tag, s in [("s7", 7), ("s12", 12)]:
        mk = np.ones((2, s), np.int64); mk[1, s - 2:] = 0
        feeds[tag] = {ids: rng.integers(0, V, (2, s)).astype(np.int64), mask: mk}
    save(model_name, ins, y, ["batch", "sequence", H], feeds if run else {})


def resnet_block():
    nodes.clear(); inits.clear()
    C = 8
    x = "input"
    def conv_bn(t, cin, cout, stride, pfx):
        c = op("Conv", [t, init(pfx + ".weight", w(cout, cin, 3, 3))], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride])
        return op("BatchNormalization", [c, init(pfx + ".bn.weight", (1 + w(cout)).astype(np.float32)), init(pfx + ".bn.bias", w(cout)),
                                        init(pfx + ".bn.mean", w(cout)), init(pfx + ".bn.var", (1 + np.abs(w(cout))).astype(np.float32))], epsilon=1e-5)
    h = op("Relu", [conv_bn(x, 3, C, 1, "stem")])
    h = op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    r = op("Relu", [conv_bn(h, C, C, 1, "b1.c1")])
    r = conv_bn(r, C, C, 1, "b1.c2")
    h = op("Relu", [op("Add", [r, h])])
    p = op("Flatten", [op("GlobalAveragePool", [h])], axis=1)
    y = op("Gemm", [p, init("fc.weight", w(10, C)), init("fc.bias", w(10))], transB=1)
    ins = [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 3, 16, 16])]
    save("resnet_block", ins, y, [2, 10], {"b2": {x: rng.standard_normal((2, 3, 16, 16)).astype(np.float32)}})


def conv1d(x, i, o, pfx):
    """transformers' GPT-2 Conv1D: addmm(bias, x.view(-1, x.size(-1)), weight).view(x.size()[:-1] + (o,))."""
    last = op("Slice", [op("Shape", [x]), const(np.array([-1], np.int64)), const(np.array([2**63 - 1], np.int64))])
    flat = op("Reshape", [x, op("Concat", [const(np.array([-1], np.int64)), last], axis=0)])
    g = op("Gemm", [flat, init(pfx + ".weight", w(i, o)), init(pfx + ".bias", w(o))], alpha=1.0, beta=1.0)
    lead = op("Slice", [op("Shape", [x]), const(np.array([0], np.int64)), const(np.array([-1], np.int64))])
    return op("Reshape", [g, op("Concat", [lead, const(np.array([o], np.int64))], axis=0)])


def gelu_new(x):
    """GPT-2's tanh GELU: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    p = op("Pow", [x, const(np.float32(3.0))])
    b = op("Add", [x, op("Mul", [const(np.float32(0.044715)), p])])
    t = op("Tanh", [op("Mul", [const(np.float32(np.sqrt(2.0 / np.pi))), b])])
    return op("Mul", [op("Mul", [const(np.float32(0.5)), x]), op("Add", [const(np.float32(1.0)), t])])


def gpt2(V=64, H=32, HEADS=4, LAYERS=2, NPOS=32):
    """GPT-2 (transformers' eager attention): token + position embeddings, a causal mask built
    from Range comparisons, Conv1D projections as Reshape/Gemm/Reshape, Split of the fused qkv,
    the tanh GELU with Pow, a tied lm_head; symbolic batch and sequence."""
    nodes.clear(); inits.clear()
    ids = "input_ids"
    hd = H // HEADS
    wte = w(V, H)
    emb = op("Gather", [init("transformer.wte.weight", wte), ids], axis=0)
    seq = op("Gather", [op("Shape", [ids]), const(np.int64(1))], axis=0)
    r = op("Range", [const(np.int64(0)), seq, const(np.int64(1))])
    pos = op("Gather", [init("transformer.wpe.weight", w(NPOS, H)), op("Unsqueeze", [r, const(np.array([0], np.int64))])], axis=0)
    causal = op("LessOrEqual", [op("Unsqueeze", [r, const(np.array([0], np.int64))]), op("Unsqueeze", [r, const(np.array([1], np.int64))])])
    x = op("Add", [emb, pos])
    for i in range(LAYERS):
        pfx = f"transformer.h.{i}"
        a = layernorm(x, H, pfx + ".ln_1")
        qkv = conv1d(a, H, 3 * H, pfx + ".attn.c_attn")
        outs = [f"{pfx}.split_{j}" for j in range(3)]
        nodes.append(helper.make_node("Split", [qkv, const(np.array([H, H, H], np.int64))], outs, axis=2, name=name("Split")))
        def heads(t):
            shp = op("Concat", [op("Slice", [op("Shape", [t]), const(np.array([0], np.int64)), const(np.array([-1], np.int64))]),
                                const(np.array([HEADS, hd], np.int64))], axis=0)
            return op("Transpose", [op("Reshape", [t, shp])], perm=[0, 2, 1, 3])
        q, k, v = (heads(t) for t in outs)
        s = op("Div", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])]), const(np.float32(np.sqrt(hd)))])
        s = op("Where", [causal, s, const(np.float32(np.finfo(np.float32).min))])
        c = op("Transpose", [op("MatMul", [op("Softmax", [s], axis=-1), v])], perm=[0, 2, 1, 3])
        shp = op("Concat", [op("Slice", [op("Shape", [c]), const(np.array([0], np.int64)), const(np.array([-2], np.int64))]),
                            const(np.array([H], np.int64))], axis=0)
        c = op("Reshape", [c, shp])
        x = op("Add", [conv1d(c, H, H, pfx + ".attn.c_proj"), x])
        m = conv1d(gelu_new(conv1d(layernorm(x, H, pfx + ".ln_2"), H, 4 * H, pfx + ".mlp.c_fc")), 4 * H, H, pfx + ".mlp.c_proj")
        x = op("Add", [m, x])
    x = layernorm(x, H, "transformer.ln_f")
    y = op("MatMul", [x, init("lm_head.weight", np.ascontiguousarray(wte.T))])
    ins = [helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "sequence"])]
    feeds = {tag: {ids: rng.integers(0, V, (2, s)).astype(np.int64)} for tag, s in [("s5", 5), ("s9", 9)]}
    save("gpt2_tiny", ins, y, ["batch", "sequence", V], feeds)


def mobilenet_v2():
    """torchvision's MobileNetV2 as exported in eval mode: BatchNorm folded into Conv biases,
    ReLU6 as Clip(0, 6), inverted residual blocks (1x1 expand, 3x3 depthwise, 1x1 project, skip
    when the shape is kept), global average pooling, Flatten, Gemm classifier."""
    nodes.clear(); inits.clear()
    x = "input"
    def conv(t, cin, cout, k, stride, groups, pfx, relu6=True):
        c = op("Conv", [t, init(pfx + ".weight", w(cout, cin // groups, k, k)), init(pfx + ".bias", w(cout))],
               kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride], group=groups, dilations=[1, 1])
        return op("Clip", [c, const(np.float32(0.0)), const(np.float32(6.0))]) if relu6 else c
    h = conv(x, 3, 8, 3, 2, 1, "features.0")
    # (expand ratio, out channels, stride) per inverted residual block
    cin = 8
    for i, (t, cout, s) in enumerate([(1, 8, 1), (4, 12, 2), (4, 12, 1), (4, 16, 2)]):
        pfx = f"features.{i + 1}.conv"
        hid = cin * t
        y = h if t == 1 else conv(h, cin, hid, 1, 1, 1, pfx + ".0")
        y = conv(y, hid, hid, 3, s, hid, pfx + ".1")
        y = conv(y, hid, cout, 1, 1, 1, pfx + ".2", relu6=False)
        h = op("Add", [h, y]) if s == 1 and cin == cout else y
        cin = cout
    h = conv(h, cin, 32, 1, 1, 1, "features.last")
    p = op("Flatten", [op("GlobalAveragePool", [h])], axis=1)
    y = op("Gemm", [p, init("classifier.1.weight", w(10, 32)), init("classifier.1.bias", w(10))], alpha=1.0, beta=1.0, transB=1)
    ins = [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 3, 32, 32])]
    save("mobilenet_v2_tiny", ins, y, [2, 10], {"b2": {x: rng.standard_normal((2, 3, 32, 32)).astype(np.float32)}})


def vit(H=32, HEADS=4, FF=64, LAYERS=2, P=8, IMG=32, B=2):
    """torchvision's ViT (static shapes): Conv patch embedding, flatten + transpose, class token
    Expand + Concat, position embedding, pre-LN encoder blocks (fused in_proj + Split, q scaled
    before the product, erf-GELU MLP), the class token taken with Gather, a Gemm head."""
    nodes.clear(); inits.clear()
    x = "input"
    n = (IMG // P) ** 2
    hd = H // HEADS
    c = op("Conv", [x, init("conv_proj.weight", w(H, 3, P, P)), init("conv_proj.bias", w(H))],
           kernel_shape=[P, P], strides=[P, P])
    t = op("Transpose", [op("Reshape", [c, const(np.array([B, H, n], np.int64))])], perm=[0, 2, 1])
    cls = op("Expand", [init("class_token", w(1, 1, H)), const(np.array([B, 1, 1], np.int64))])
    h = op("Add", [op("Concat", [cls, t], axis=1), init("encoder.pos_embedding", w(1, n + 1, H))])
    S = n + 1
    for i in range(LAYERS):
        pfx = f"encoder.layers.encoder_layer_{i}"
        a = layernorm(h, H, pfx + ".ln_1")
        qkv = linear(a, H, 3 * H, pfx + ".self_attention.in_proj")
        outs = [f"{pfx}.qkv_{j}" for j in range(3)]
        nodes.append(helper.make_node("Split", [qkv, const(np.array([H, H, H], np.int64))], outs, axis=-1, name=name("Split")))
        def heads(t):
            return op("Transpose", [op("Reshape", [t, const(np.array([B, S, HEADS, hd], np.int64))])], perm=[0, 2, 1, 3])
        q = op("Mul", [heads(outs[0]), const(np.float32(1.0 / np.sqrt(hd)))])
        k, v = heads(outs[1]), heads(outs[2])
        p = op("Softmax", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])])], axis=-1)
        o = op("Reshape", [op("Transpose", [op("MatMul", [p, v])], perm=[0, 2, 1, 3]), const(np.array([B, S, H], np.int64))])
        h = op("Add", [linear(o, H, H, pfx + ".self_attention.out_proj"), h])
        m = linear(gelu(linear(layernorm(h, H, pfx + ".ln_2"), H, FF, pfx + ".mlp.0")), FF, H, pfx + ".mlp.3")
        h = op("Add", [m, h])
    h = layernorm(h, H, "encoder.ln")
    first = op("Gather", [h, const(np.int64(0))], axis=1)
    y = op("Gemm", [first, init("heads.head.weight", w(10, H)), init("heads.head.bias", w(10))], alpha=1.0, beta=1.0, transB=1)
    ins = [helper.make_tensor_value_info(x, TensorProto.FLOAT, [B, 3, IMG, IMG])]
    save("vit_tiny", ins, y, [B, 10], {"b2": {x: rng.standard_normal((B, 3, IMG, IMG)).astype(np.float32)}})


def einsum_erf_resize():
    """The ops dlc-egg imports as subgraphs: Einsum in its usual forms (batched matmul, a
    transpose, contraction with a vector, an outer product, a batched row-wise dot product, a
    reduction), a standalone Erf, and nearest Resize by integer factors (torch's
    Upsample(scale_factor=2): asymmetric + floor; ONNX's defaults half_pixel + round_prefer_floor)."""
    nodes.clear(); inits.clear()
    x, y = "x", "y"
    a = op("Einsum", [x, y], equation="bij,bjk->bik")                       # [2,3,5]
    e = op("Erf", [op("Mul", [a, const(np.float32(0.5))])])
    t = op("Einsum", [e], equation="bik->kbi")                               # [5,2,3]
    v = op("Einsum", [t, init("v", w(5))], equation="kbi,k->bi")             # [2,3]
    o = op("Einsum", [v, init("u", w(4))], equation="bi,j->bij")             # [2,3,4]
    d = op("Einsum", [o, x], equation="bij,bij->bi")                         # [2,3]
    r = op("Einsum", [o], equation="bij->bj")                                # [2,4]
    s = op("Add", [op("Unsqueeze", [d, const(np.array([2], np.int64))]),
                   op("Unsqueeze", [r, const(np.array([1], np.int64))])])     # [2,3,4]
    s4 = op("Unsqueeze", [s, const(np.array([0], np.int64))])                 # [1,2,3,4]
    up = op("Resize", [s4, "", const(np.array([1, 1, 2, 2], np.float32))], mode="nearest",
            coordinate_transformation_mode="asymmetric", nearest_mode="floor")   # [1,2,6,8]
    up = op("Resize", [up, "", "", const(np.array([1, 2, 18, 8], np.int64))], mode="nearest")  # [1,2,18,8]
    ins = [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 3, 4]),
           helper.make_tensor_value_info(y, TensorProto.FLOAT, [2, 4, 5])]
    feeds = {"b2": {x: rng.standard_normal((2, 3, 4)).astype(np.float32),
                    y: rng.standard_normal((2, 4, 5)).astype(np.float32)}}
    save("einsum_erf_resize", ins, up, [1, 2, 18, 8], feeds)


if __name__ == "__main__":
    import sys
    if len(sys.argv) > 1 and sys.argv[1] == "--bert-base":
        # A 12-layer BERT-base-sized graph (110M parameters) for timing `dlc-egg import`; written to
        # the folder given (not kept in the repository).
        OUT = sys.argv[2]
        bert(V=30522, H=768, HEADS=12, FF=3072, LAYERS=12, model_name="bert_base", run=False)
    else:
        bert()
        resnet_block()
        gpt2()
        mobilenet_v2()
        vit()
        einsum_erf_resize()
