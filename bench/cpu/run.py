#!/usr/bin/env python3
"""CPU benchmark of the dlc-egg native backend (`run --device cpu`) against onnxruntime (CPU
execution provider) and PyTorch CPU, same thread count — issue 16.

Every case is one ONNX model built here with the `onnx` helper API (fp32), so that all three
run the same graph: dlc-egg imports the .onnx file (`dlc-egg run model.onnx --device cpu
--threads T --repeat N --random 0`, mean ms per whole-program run from timing.json),
onnxruntime runs it with intra_op_num_threads=T (graph optimizations on, mean of N runs after a
warm-up), PyTorch runs the equivalent torch ops under torch.set_num_threads(T) and
torch.inference_mode(). dlc-egg's output is checked against onnxruntime's on the same inputs
(graph-json fp32 tolerance, |a-b| <= 1e-3 + 1e-3|b|).

    .benchenv/bin/python bench/cpu/run.py --threads 2 --results bench/results/cpu-2026-11-26.md
    .benchenv/bin/python bench/cpu/run.py --only gemm,softmax

Set-up (git-ignored venv): `ln -s /work/torchenv .benchenv` on the development machine (torch
2.15 CPU, onnx, onnxruntime), else python3 -m venv .benchenv && .benchenv/bin/pip install numpy
onnx onnxruntime torch. Without torch the PyTorch column says so. See bench/cpu/README.md.

    .benchenv/bin/python bench/cpu/run.py --scan-sweep    # cumsum 10^4 ... 10^7, linear time
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort

try:
    import torch
except Exception:  # noqa: BLE001 -- no torch, or a CUDA build without its libraries: "n/a"
    torch = None

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DLC = REPO / "target" / "release" / "dlc-egg"
F = TensorProto.FLOAT
rng = np.random.default_rng(16)


def w(shape, scale=0.05):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def model(nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def vi(name, shape):
    return helper.make_tensor_value_info(name, F, shape)


def erf_gelu(x, out, p):
    """x * 0.5 * (1 + erf(x / sqrt 2)), the torch exporter's form (dlc-egg imports it as gelu)."""
    return [
        helper.make_node("Div", [x, p + "sqrt2"], [p + "d"]),
        helper.make_node("Erf", [p + "d"], [p + "e"]),
        helper.make_node("Add", [p + "e", p + "one"], [p + "a"]),
        helper.make_node("Mul", [x, p + "a"], [p + "m"]),
        helper.make_node("Mul", [p + "m", p + "half"], [out]),
    ], {p + "sqrt2": np.array(math.sqrt(2), np.float32), p + "one": np.array(1, np.float32),
        p + "half": np.array(0.5, np.float32)}


def case_gemm():
    n = 1024
    m = model([helper.make_node("MatMul", ["A", "B"], ["Y"])], [vi("A", [n, n]), vi("B", [n, n])],
              [vi("Y", [n, n])], {})
    return m, {"A": w([n, n], 1), "B": w([n, n], 1)}, lambda t: t["A"] @ t["B"], 2 * n ** 3


def case_ffn():
    gl, gi = erf_gelu("H", "Y", "g")
    nodes = [helper.make_node("MatMul", ["X", "W"], ["P"]), helper.make_node("Add", ["P", "b"], ["H"])] + gl
    inits = {"W": w([768, 3072]), "b": w([3072])}
    inits.update(gi)
    m = model(nodes, [vi("X", [512, 768])], [vi("Y", [512, 3072])], inits)
    tw = {k: v for k, v in inits.items() if k in ("W", "b")}
    return m, {"X": w([512, 768], 1)}, lambda t: torch.nn.functional.gelu(t["X"] @ t["W"] + t["b"]), \
        2 * 512 * 768 * 3072, tw


def case_layernorm():
    nodes = [helper.make_node("LayerNormalization", ["X", "g", "b"], ["Y"], axis=-1, epsilon=1e-5)]
    inits = {"g": 1 + w([768]), "b": w([768])}
    m = model(nodes, [vi("X", [8192, 768])], [vi("Y", [8192, 768])], inits)
    return m, {"X": w([8192, 768], 1)}, lambda t: torch.nn.functional.layer_norm(
        t["X"], (768,), t["g"], t["b"], 1e-5), None, inits


def case_softmax():
    m = model([helper.make_node("Softmax", ["X"], ["Y"], axis=-1)], [vi("X", [8192, 1024])], [vi("Y", [8192, 1024])], {})
    return m, {"X": w([8192, 1024], 1)}, lambda t: torch.softmax(t["X"], -1), None


def case_bias_gelu_residual():
    gl, gi = erf_gelu("H", "G", "g")
    nodes = [helper.make_node("Add", ["X", "b"], ["H"])] + gl + [helper.make_node("Add", ["G", "R"], ["Y"])]
    inits = {"b": w([3072])}
    inits.update(gi)
    m = model(nodes, [vi("X", [4096, 3072]), vi("R", [4096, 3072])], [vi("Y", [4096, 3072])], inits)
    return m, {"X": w([4096, 3072], 1), "R": w([4096, 3072], 1)}, \
        lambda t: torch.nn.functional.gelu(t["X"] + t["b"]) + t["R"], None, {"b": inits["b"]}


def case_conv():
    nodes = [helper.make_node("Conv", ["X", "W", "b"], ["C"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["C"], ["Y"])]
    inits = {"W": w([64, 64, 3, 3]), "b": w([64])}
    m = model(nodes, [vi("X", [1, 64, 56, 56])], [vi("Y", [1, 64, 56, 56])], inits)
    return m, {"X": w([1, 64, 56, 56], 1)}, lambda t: torch.relu(torch.nn.functional.conv2d(
        t["X"], t["W"], t["b"], padding=1)), 2 * 64 * 64 * 9 * 56 * 56, inits


def case_cumsum(n=1 << 20):
    nodes = [helper.make_node("CumSum", ["X", "axis"], ["Y"])]
    m = model(nodes, [vi("X", [n])], [vi("Y", [n])], {"axis": np.array(0, np.int64)})
    return m, {"X": w([n], 1)}, lambda t: torch.cumsum(t["X"], 0), None


def case_bert_layer():
    """One BERT-base encoder layer, sequence 128 (post-LN, erf-GELU), as the torch exporter writes it."""
    S, D, H, DH, FF = 128, 768, 12, 64, 3072
    nodes, inits = [], {}

    def lin(x, out, din, dout, p):
        inits[p + "W"], inits[p + "b"] = w([din, dout]), w([dout])
        nodes.extend([helper.make_node("MatMul", [x, p + "W"], [p + "mm"]),
                      helper.make_node("Add", [p + "mm", p + "b"], [out])])

    def ln(x, out, p):
        inits[p + "g"], inits[p + "b"] = 1 + w([D]), w([D])
        nodes.append(helper.make_node("LayerNormalization", [x, p + "g", p + "b"], [out], axis=-1, epsilon=1e-12))

    inits["shp"] = np.array([1, S, H, DH], np.int64)
    inits["shp2"] = np.array([1, S, D], np.int64)
    inits["scale"] = np.array(1 / math.sqrt(DH), np.float32)
    for t in "qkv":
        lin("X", t, D, D, t)
        nodes.append(helper.make_node("Reshape", [t, "shp"], [t + "r"]))
    nodes += [helper.make_node("Transpose", ["qr"], ["qt"], perm=[0, 2, 1, 3]),
              helper.make_node("Transpose", ["kr"], ["kt"], perm=[0, 2, 3, 1]),
              helper.make_node("Transpose", ["vr"], ["vt"], perm=[0, 2, 1, 3]),
              helper.make_node("MatMul", ["qt", "kt"], ["s"]),
              helper.make_node("Mul", ["s", "scale"], ["ss"]),
              helper.make_node("Softmax", ["ss"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "vt"], ["c"]),
              helper.make_node("Transpose", ["c"], ["ct"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ct", "shp2"], ["cr"])]
    lin("cr", "ao", D, D, "o")
    nodes.append(helper.make_node("Add", ["ao", "X"], ["r1"]))
    ln("r1", "h1", "ln1")
    lin("h1", "f1", D, FF, "f1")
    gl, gi = erf_gelu("f1", "g1", "g")
    nodes += gl
    inits.update(gi)
    lin("g1", "f2", FF, D, "f2")
    nodes.append(helper.make_node("Add", ["f2", "h1"], ["r2"]))
    ln("r2", "Y", "ln2")
    m = model(nodes, [vi("X", [1, S, D])], [vi("Y", [1, S, D])], inits)
    return m, {"X": w([1, S, D], 1)}, None, None


def case_resnet_blocks():
    """ResNet-18 stage 1: two basic blocks (conv3x3+bias+relu, conv3x3+bias, +identity, relu), 64ch 56^2."""
    nodes, inits, x = [], {}, "X"
    for b in range(2):
        p = f"b{b}"
        for c in range(2):
            inits[f"{p}W{c}"], inits[f"{p}B{c}"] = w([64, 64, 3, 3]), w([64])
        nodes += [helper.make_node("Conv", [x, p + "W0", p + "B0"], [p + "c0"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
                  helper.make_node("Relu", [p + "c0"], [p + "r0"]),
                  helper.make_node("Conv", [p + "r0", p + "W1", p + "B1"], [p + "c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
                  helper.make_node("Add", [p + "c1", x], [p + "s"]),
                  helper.make_node("Relu", [p + "s"], [p + "y" if b == 0 else "Y"])]
        x = p + "y"
    m = model(nodes, [vi("X", [1, 64, 56, 56])], [vi("Y", [1, 64, 56, 56])], inits)
    return m, {"X": w([1, 64, 56, 56], 1)}, None, 4 * 2 * 64 * 64 * 9 * 56 * 56


def torch_exported(stem):
    """The PyTorch module scripts/export-real-models.py exported as STEM.onnx, built afresh with
    random weights (the time does not depend on them), as a case's torch function; None when
    unknown or torchvision / transformers are missing."""
    if torch is None:
        return None
    try:
        if stem in ("resnet18", "mobilenet_v2", "vit_b_16"):
            import torchvision
            m = getattr(torchvision.models, stem)().eval()
            return lambda t: m(t["input"])
        if stem == "bert":
            from transformers import BertConfig, BertModel
            m = BertModel(BertConfig(), add_pooling_layer=True).eval()
            return lambda t: m(input_ids=t["input_ids"], attention_mask=t["attention_mask"])
    except ImportError:
        return None
    return None


def case_exported(path, seq=None):
    """An exported model and the first set of stored inputs beside it (NAME.<tag>.in.<input>.npy);
    with `seq`, token inputs of that sequence length instead (random ids, a mask of ones)."""
    m = onnx.load(str(path))
    stored = sorted(path.parent.glob(f"{path.stem}.*.in.*.npy"))
    if not stored:
        sys.exit(f"{path}: no stored inputs {path.stem}.<tag>.in.<input>.npy beside it")
    tag = stored[0].name.split(".")[1]
    feeds = {p.name.split(".in.")[1][:-4]: np.load(p) for p in stored if p.name.split(".")[1] == tag}
    if seq is not None:
        rng = np.random.default_rng(5)
        feeds = {k: (rng.integers(0, 30522, size=(v.shape[0], seq)).astype(v.dtype) if k == "input_ids"
                     else np.ones((v.shape[0], seq), dtype=v.dtype)) for k, v in feeds.items()}
    return m, feeds, torch_exported(path.stem), None


CASES = {
    "gemm": ("fp32 GEMM 1024^3", case_gemm, 0.8),
    "ffn": ("BERT FFN GEMM+bias+gelu [512,768]x[768,3072]", case_ffn, 0.8),
    "layernorm": ("LayerNorm [8192,768]", case_layernorm, 1.0),
    "softmax": ("softmax [8192,1024]", case_softmax, 1.0),
    "bias_gelu_residual": ("bias+gelu+residual [4096,3072]", case_bias_gelu_residual, 1.0),
    "conv": ("conv 3x3 N=1 64->64 56^2 +bias+relu", case_conv, 0.8),
    "cumsum": ("cumsum 2^20", case_cumsum, 1.0),
    "bert_layer": ("BERT-base encoder layer, seq 128", case_bert_layer, None),
    "resnet_blocks": ("ResNet-18 basic-block stack (2 blocks, 64ch 56^2)", case_resnet_blocks, None),
}


ORT_SPIN = True
DEVICE = "cpu"  # --device: where dlc-egg runs (cuda: on a GPU, checked against onnxruntime on the CPU)


def time_ort(m, feeds, threads, repeat):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if not ORT_SPIN:
        # onnxruntime's intra-op threads spin between ops by default; dlc-egg's wait passively
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    out = s.run(None, feeds)
    t0 = time.perf_counter()
    for _ in range(repeat):
        s.run(None, feeds)
    return (time.perf_counter() - t0) / repeat * 1e3, out[0]


def time_torch(fn, feeds, inits, threads, repeat):
    if torch is None or fn is None:
        return None
    torch.set_num_threads(threads)
    t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in list(feeds.items()) + list((inits or {}).items())}
    with torch.inference_mode():
        fn(t)
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn(t)
        return (time.perf_counter() - t0) / repeat * 1e3


def run_dlc(model_path, feeds, threads, repeat, work, timeout, binary=None):
    """Runs `binary` (default: --dlc) on the model; `work` is its own scratch (out, cache)."""
    work.mkdir(parents=True, exist_ok=True)
    args = [str(binary or DLC), "run", str(model_path), "--device", DEVICE, "--repeat", str(repeat),
            "--out-dir", str(work / "out"), "--plan-cache", str(work / "cache")]
    if DEVICE == "cpu":
        args += ["--threads", str(threads)]
    for k, v in feeds.items():
        p = work / f"in_{k}.npy"
        np.save(p, v)
        args += ["--input", f"{k}={p}"]
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {timeout} s")
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip()[-2000:])
    timing = json.loads((work / "out" / "timing.json").read_text())
    outs = sorted((work / "out").glob("*.npy"))
    return timing, np.load(outs[0]) if outs else None


def scan_sweep(a):
    """Cumsum over one line of 10^4 ... 10^7 elements: dlc-egg, onnxruntime CumSum and torch.cumsum,
    ns per element (flat when the time is linear in n)."""
    lines = [f"threads {a.threads}, mean of {a.repeat} runs after a warm-up; ns/elem = time / n", "",
             "| n | dlc-egg ms | ns/elem | onnxruntime ms | ns/elem | PyTorch ms | ns/elem | ort/dlc | output |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for e in range(4, 8):
        n = 10 ** e
        m, feeds, tfn, _ = case_cumsum(n)
        with tempfile.TemporaryDirectory() as d:
            work = Path(d)
            mp = work / "model.onnx"
            onnx.save(m, str(mp))
            ort_ms, ref = time_ort(m, feeds, a.threads, a.repeat)
            torch_ms = time_torch(tfn, feeds, {}, a.threads, a.repeat)
            timing, got = run_dlc(mp, feeds, a.threads, a.repeat, work, a.case_timeout)
        dlc = timing["total_ms"]
        # fp32 sums of 10^7 terms: compare relative to the running magnitude
        ok = bool(np.all(np.abs(got.astype(np.float64) - ref) <= 1e-3 + 1e-3 * np.abs(ref) + 1e-6 * np.abs(ref).max()))
        per = lambda ms: None if ms is None else ms * 1e6 / n
        lines.append(f"| 10^{e} | {fmt(dlc)} | {fmt(per(dlc), '.2f')} | {fmt(ort_ms)} | {fmt(per(ort_ms), '.2f')} | "
                     f"{fmt(torch_ms)} | {fmt(per(torch_ms), '.2f')} | {fmt(ort_ms / dlc, '.2f')} | {'ok' if ok else 'mismatch'} |")
        print(lines[-1], flush=True)
    table = "\n".join(lines)
    print("\n" + table)
    if a.results:
        a.results.write_text(table + "\n")


def main():
    global DLC
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--only", default="")
    ap.add_argument("--dlc", type=Path, default=DLC,
                    help="the dlc-egg binary (default: this checkout's target/release/dlc-egg)")
    ap.add_argument("--dlc-base", type=Path, default=None,
                    help="a second (baseline) dlc-egg binary, timed in every round beside --dlc "
                         "(before/after side by side: columns base ms and base/dlc)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating rounds of (onnxruntime, PyTorch, dlc-egg) per case; medians reported")
    ap.add_argument("--results", type=Path)
    ap.add_argument("--case-timeout", type=float, default=300,
                    help="seconds one dlc-egg run may take (cumsum is O(n^2) until Cumulative is a scan)")
    ap.add_argument("--scan-sweep", action="store_true",
                    help="instead of the cases: cumsum over 10^4 ... 10^7 elements (linear time), vs onnxruntime")
    ap.add_argument("--ort-no-spin", action="store_true",
                    help="onnxruntime threads wait passively too (session.intra_op.allow_spinning=0)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where dlc-egg runs: cpu (default) or cuda (the same fp32 graphs on a GPU, checked "
                         "against onnxruntime on the CPU; onnxruntime's CPU time is then only context)")
    ap.add_argument("--model", type=Path, action="append", default=[],
                    help="also run an exported model NAME.onnx (repeatable), its inputs read from the first "
                         "NAME.<tag>.in.<input>.npy set beside it (what scripts/export-real-models.py writes)")
    ap.add_argument("--seq", type=int, action="append", default=[],
                    help="also run each exported token model (bert, gpt2) at this sequence length "
                         "(repeatable; random ids, its symbolic sequence axis bound by the inputs)")
    a = ap.parse_args()
    global ORT_SPIN, DEVICE
    DEVICE = a.device
    ORT_SPIN = not a.ort_no_spin
    DLC = a.dlc
    if not DLC.exists():
        sys.exit(f"build dlc-egg first: cargo build --release ({DLC} missing)")
    if a.scan_sweep:
        return scan_sweep(a)
    names = [n for n in CASES if not a.only or n in a.only.split(",")]
    cases = {n: CASES[n] for n in names}
    for path in a.model:
        cases[path.stem] = (f"{path.stem} (exported model)", lambda p=path: case_exported(p), None)
        for n in a.seq if path.stem in ("bert", "gpt2") else []:
            cases[f"{path.stem}@{n}"] = (f"{path.stem} (exported model), sequence {n}",
                                         lambda p=path, n=n: case_exported(p, n), None)
    rows = []
    for name, (desc, make, target) in cases.items():
        made = make()
        m, feeds, tfn, flops = made[:4]
        inits = made[4] if len(made) > 4 else {}
        with tempfile.TemporaryDirectory() as d:
            work = Path(d)
            mp = work / "model.onnx"
            onnx.save(m, str(mp))
            dlcs, orts, torches, ok, err = [], [], [], True, None
            bases = []
            # Rounds alternate the three, so that a slow spell of the (shared, noisy) machine
            # hits all of them; the medians and the spread of the per-round ratios are reported.
            for _ in range(a.rounds):
                ort_ms, ref = time_ort(m, feeds, a.threads, a.repeat)
                orts.append(ort_ms)
                # on the GPU only correctness and dlc-egg's time mean something: no CPU PyTorch time
                torches.append(time_torch(tfn if DEVICE == "cpu" else None, feeds, inits, a.threads, a.repeat))
                try:
                    timing, got = run_dlc(mp, feeds, a.threads, a.repeat, work, a.case_timeout)
                    dlcs.append(timing["total_ms"])
                    ok = ok and got is not None and got.shape == ref.shape and bool(
                        np.all(np.abs(got.astype(np.float64) - ref) <= 1e-3 + 1e-3 * np.abs(ref)))
                except RuntimeError as e:
                    ok, err = False, str(e)
                    break
                if a.dlc_base:
                    try:
                        btiming, _ = run_dlc(mp, feeds, a.threads, a.repeat, work / "base", a.case_timeout,
                                             binary=a.dlc_base)
                        bases.append(btiming["total_ms"])
                    except RuntimeError as e:
                        print(f"base binary failed: {e}", flush=True)
            dlc_ms = median(dlcs) if dlcs and err is None else None
            ort_ms = median(orts)
            torch_ms = median(torches) if all(t is not None for t in torches) else None
            spread = [o / t for o, t in zip(orts, dlcs)] if dlc_ms else []
            tspread = [o / t for o, t in zip(torches, dlcs)] if (dlc_ms and torch_ms) else []
            bspread = [b / t for b, t in zip(bases, dlcs)] if (dlc_ms and bases) else []
        row = dict(base=median(bases) if bases else None, bspread=bspread, name=name, desc=desc, dlc=dlc_ms, ort=ort_ms, torch=torch_ms, ok=ok, target=target,
                   flops=flops, err=err, load=os.getloadavg()[0], spread=spread, tspread=tspread)
        rows.append(row)
        print_row(row)
    table = render(rows, a)
    print("\n" + table)
    if a.results:
        a.results.write_text(table + "\n")


def fmt(x, spec=".3f"):
    return "n/a" if x is None else format(x, spec)


def print_row(r):
    ratio = median(r["spread"]) if r.get("spread") else None
    base = f"  base {fmt(r['base'])} ms" if r.get("base") else ""
    print(f"{r['name']:>20}: dlc-egg {fmt(r['dlc'])} ms{base}  ort {fmt(r['ort'])} ms  torch {fmt(r['torch'])} ms"
          f"  ort/dlc {fmt(ratio, '.2f')}  {'ok' if r['ok'] else 'MISMATCH ' + (r['err'] or '')}", flush=True)


def render(rows, a):
    lines = [f"dlc-egg on {DEVICE}; threads {a.threads}, median over {a.rounds} alternating rounds of the mean of {a.repeat} runs after a "
             "warm-up; ratio = the median over the rounds of other time / dlc-egg time "
             "(>= 1: dlc-egg faster); load: the 1-minute load average after the case; onnxruntime threads "
             + ("spin (its default)" if ORT_SPIN else "do not spin (allow_spinning=0)"), "",
             "| case | dlc-egg ms | onnxruntime ms | PyTorch ms | ort/dlc | ort/dlc per round | torch/dlc | target (ort/dlc) | dlc GFLOP/s | output | load |",
             "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: |"]
    for r in rows:
        # the median of the per-round ratios (each round's three timings are side by side)
        ro = median(r["spread"]) if r.get("spread") else None
        rt = median(r["tspread"]) if r.get("tspread") else None
        gf = r["flops"] / r["dlc"] / 1e6 if (r["flops"] and r["dlc"]) else None
        out = "ok" if r["ok"] else ("error" if r["err"] else "mismatch")
        per = ", ".join(f"{x:.2f}" for x in r.get("spread", []))
        lines.append(f"| {r['desc']} | {fmt(r['dlc'])} | {fmt(r['ort'])} | {fmt(r['torch'])} | {fmt(ro, '.2f')} | {per} | "
                     f"{fmt(rt, '.2f')} | {'>= ' + str(r['target']) if r['target'] else 'report'} | {fmt(gf, '.1f')} | {out} | "
                     f"{r['load']:.1f} |")
    if any(r.get("base") for r in rows):
        lines += ["", f"Baseline binary {a.dlc_base} timed in the same rounds (base/dlc >= 1: --dlc faster):", "",
                  "| case | base ms | dlc-egg ms | base/dlc | base/dlc per round |", "| --- | ---: | ---: | ---: | --- |"]
        for r in rows:
            rb = median(r["bspread"]) if r.get("bspread") else None
            per = ", ".join(f"{x:.2f}" for x in r.get("bspread", []))
            lines.append(f"| {r['desc']} | {fmt(r.get('base'))} | {fmt(r['dlc'])} | {fmt(rb, '.2f')} | {per} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
