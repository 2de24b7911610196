#!/usr/bin/env python3
"""GPU benchmark of dlc-egg against PyTorch (cuBLAS, cuDNN, SDPA) — issue 5.

For each case in bench/gpu/graphs/: generate seeded fp16 inputs, run
`dlc-egg run GRAPH --device cuda --repeat N`, check its output against an fp32
reference computed with PyTorch on the GPU, time the equivalent fp16 PyTorch op
with CUDA events, and print (and optionally write as Markdown) a table of
times, ratios (PyTorch ms / dlc-egg ms: >= 1 means dlc-egg is faster), the
issue's targets and correctness.

    python3 bench/gpu/run.py --results bench/results/gpu-$(date +%F).md
    python3 bench/gpu/run.py --dry-run        # no GPU, no torch: inputs + `dlc-egg optimize` only

Needs Python 3 and numpy; torch (with CUDA) except for --dry-run. See bench/gpu/README.md.
Exit status: 0 every case ran and matched; 1 a case failed (dlc-egg error, wrong
output, or in --dry-run a graph rejected); 2 a set-up problem (missing numpy,
torch, CUDA or binary; bad arguments).
"""

import argparse
import datetime
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

try:
    import numpy as np
except ImportError:
    sys.stderr.write(
        "run.py: numpy is required but not installed (pip install numpy); "
        "torch is also required except for --dry-run\n"
    )
    sys.exit(2)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GRAPHS = HERE / "graphs"
DEFAULT_DLC = REPO / "target" / "release" / "dlc-egg"

# graph-json's tolerance for fp16 outputs (spec § Numerics): |out - ref| <= atol + rtol * |ref|.
FP16_TOL = (1e-2, 1e-2)  # (rtol, atol)
FP32_TOL = (1e-3, 1e-3)  # graph-json's tolerance for fp32 outputs
ARCH = None  # --arch: the architecture dlc-egg compiles for (None: the GPU's own)
TORCH_WARMUP = 3  # PyTorch warm-up calls (cuDNN autotuning, cuBLAS heuristics, lazy loading)


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------


def uniform(rng, shape, lo=-1.0, hi=1.0, scale=1.0):
    """Seeded uniform [lo, hi) * scale, rounded to fp16, C-contiguous."""
    x = rng.random(shape, dtype=np.float32)
    x = (x * np.float32(hi - lo) + np.float32(lo)) * np.float32(scale)
    return np.ascontiguousarray(x.astype(np.float16))


class Case:
    """One benchmark case.

    inputs(rng) -> {signature input name: fp16 ndarray}
    reference(torch, t32) -> fp32 reference output on the GPU (t32: the inputs as fp32 CUDA tensors)
    baseline(torch, t16) -> a zero-argument callable running the fp16 PyTorch op (t16: fp16 CUDA tensors)
    """

    def __init__(self, name, graph, desc, inputs, reference, baseline, baseline_name,
                 target=None, target_vs=None, flops=None, bytes_moved=None, tol=FP16_TOL):
        self.name = name
        self.graph = GRAPHS / graph
        self.desc = desc
        self.inputs = inputs
        self.reference = reference
        self.baseline = baseline
        self.baseline_name = baseline_name
        self.target = target  # minimum ratio PyTorch ms / dlc-egg ms, or None (report only)
        self.target_vs = target_vs  # what the target is stated against, e.g. "cuBLAS"
        self.flops = flops
        self.bytes_moved = bytes_moved
        self.tol = tol


def _gemm_inputs(m, n, k):
    # B scaled by 1/sqrt(K): C[i,j] = sum of K products of variance 1/9 / K -> std ~ 1/3, far from
    # fp16 overflow and in the range where atol and rtol both mean something.
    return lambda rng: {"A": uniform(rng, (m, k)), "B": uniform(rng, (k, n), scale=1 / math.sqrt(k))}


def _gemm_case(name, graph, m, n, k, target, desc):
    return Case(
        name, graph, desc,
        inputs=_gemm_inputs(m, n, k),
        reference=lambda torch, t: t["A"] @ t["B"],
        baseline=lambda torch, t: (lambda: torch.matmul(t["A"], t["B"])),
        baseline_name="cuBLAS (torch.matmul)",
        target=target,
        target_vs="cuBLAS",
        flops=2 * m * n * k,
    )


def _gemm_bias_relu_inputs(m, n, k):
    def gen(rng):
        d = _gemm_inputs(m, n, k)(rng)
        d["bias"] = uniform(rng, (n,), -0.5, 0.5)
        return d
    return gen


def _gemm_bias_relu_baseline(torch, t):
    # nn.Linear keeps its weight as [out_features, in_features] = [N, K] and computes x @ W^T + b;
    # the graph's B is [K, N], so PyTorch gets W = B^T, made contiguous once (outside the timing),
    # i.e. the layout a real nn.Linear would have.
    w = t["B"].t().contiguous()
    f = torch.nn.functional
    return lambda: torch.relu(f.linear(t["A"], w, t["bias"]))


def _attention_reference(causal):
    def reference(torch, t):
        q, k, v = t["Q"], t["K"], t["V"]
        b, h, s, d = q.shape
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).tril()  # keep n <= m (top-left)
        out = torch.empty_like(q)
        for i in range(b):  # one batch at a time: fp32 scores [H, S, S] = 256 MiB
            scores = (q[i] @ k[i].transpose(-1, -2)) * (1.0 / math.sqrt(d))
            if causal:
                scores = scores.masked_fill(~mask, float("-inf"))
            out[i] = torch.softmax(scores, dim=-1) @ v[i]
        return out
    return reference


def _attention_baseline(causal):
    def baseline(torch, t):
        f = torch.nn.functional
        # default scale = 1/sqrt(D), the graph's scale attribute (0.125 at D=64)
        return lambda: f.scaled_dot_product_attention(t["Q"], t["K"], t["V"], is_causal=causal)
    return baseline


def _attention_case(name, graph, d, causal=True, target=0.7):
    kind = "causal" if causal else "full (non-causal)"
    return Case(
        name, graph,
        f"{kind} attention B=8 H=16 S=2048 D={d}, fp16, scale 1/sqrt({d})",
        inputs=lambda rng: {n: uniform(rng, (8, 16, 2048, d)) for n in ("Q", "K", "V")},
        reference=_attention_reference(causal),
        baseline=_attention_baseline(causal),
        baseline_name=f"F.scaled_dot_product_attention(is_causal={causal})",
        target=target,
        target_vs="SDPA (FlashAttention-2)" if target else None,
        # QK^T and PV (over the causal half when causal: the usual FlashAttention count)
        flops=4 * 8 * 16 * 2048 * 2048 * d // (2 if causal else 1),
    )


def _conv_inputs(rng, n=32, hw=56):
    # W scaled by 1/sqrt(C*3*3) = 1/24: outputs std ~ 1/3
    return {"X": uniform(rng, (n, 64, hw, hw)), "W": uniform(rng, (64, 64, 3, 3), scale=1 / 24)}


def _conv_case(name, graph, n, hw, target):
    conv = lambda torch, t: torch.nn.functional.conv2d(t["X"], t["W"], stride=1, padding=1)
    return Case(
        name, graph,
        f"conv 3x3 N={n} C=64->64 {hw}x{hw} stride 1 pad 1, fp16 NCHW, no bias",
        inputs=lambda rng: _conv_inputs(rng, n, hw),
        reference=conv,
        baseline=lambda torch, t: (lambda: conv(torch, t)),
        baseline_name="cuDNN (F.conv2d, NCHW)",
        target=target,
        target_vs="cuDNN" if target else None,
        flops=2 * n * 64 * hw * hw * 64 * 9,
    )


def _conv_relu_pool_inputs(rng):
    # W scaled by 1/sqrt(C*3*3) = 1/12: conv outputs std ~ 1/3. The graph is fp32: fp32 arrays
    # (the fp16-rounded values, widened).
    arrays = {
        "X": uniform(rng, (32, 16, 64, 64)),
        "W": uniform(rng, (32, 16, 3, 3), scale=1 / 12),
        "bias": uniform(rng, (32,), -0.1, 0.1),
    }
    return {n: a.astype(np.float32) for n, a in arrays.items()}


def _conv_relu_pool_reference(torch, t):
    f = torch.nn.functional
    return f.max_pool2d(torch.relu(f.conv2d(t["X"], t["W"], t["bias"], padding=1)), 2)


def _layernorm_case(name, graph, rows, cols, target):
    def inputs(rng):
        # a non-zero mean (X in [-1.5, 2.5)) so the mean subtraction matters
        return {
            "X": uniform(rng, (rows, cols), -1.5, 2.5),
            "gamma": uniform(rng, (cols,), 0.5, 1.5),
            "beta": uniform(rng, (cols,), -0.5, 0.5),
        }

    def reference(torch, t):
        return torch.nn.functional.layer_norm(t["X"], (cols,), t["gamma"], t["beta"], eps=1e-5)

    return Case(
        name, graph,
        f"LayerNorm over the last dim of [{rows}, {cols}], fp16, eps 1e-5, gamma/beta",
        inputs=inputs,
        reference=reference,
        baseline=lambda torch, t: (lambda: reference(torch, t)),
        baseline_name="F.layer_norm",
        target=target,
        target_vs="PyTorch F.layer_norm" if target else None,
        bytes_moved=2 * (2 * rows * cols + 2 * cols),
    )


CASES = [
    _gemm_case("gemm_4096", "gemm_4096.json", 4096, 4096, 4096, 0.8,
               "fp16 GEMM C = A·B, M=N=K=4096, fp32 accumulation"),
    _gemm_case("gemm_tail_96x80x72", "gemm_tail_96x80x72.json", 96, 80, 72, None,
               "fp16 GEMM M=96 N=80 K=72 (no dimension a multiple of the tiles; launch-bound)"),
    Case(
        "gemm_bias_relu_4096", "gemm_bias_relu_4096.json",
        "relu(A·B + bias), fp16, M=N=K=4096",
        inputs=_gemm_bias_relu_inputs(4096, 4096, 4096),
        reference=lambda torch, t: torch.relu(t["A"] @ t["B"] + t["bias"]),
        baseline=_gemm_bias_relu_baseline,
        baseline_name="torch.relu(F.linear(x, W, b))",
        target=1.0,
        target_vs="PyTorch relu(linear(x))",
        flops=2 * 4096 ** 3,
    ),
    _attention_case("attention_causal", "attention_causal.json", 64),
    _attention_case("attention_causal_hd128", "attention_causal_hd128.json", 128),
    _conv_case("conv3x3", "conv3x3.json", 32, 56, 0.7),
    Case(
        "conv_relu_maxpool", "conv_relu_maxpool.json",
        "maxpool2x2(relu(conv3x3 + bias)), fp32 N=32 C=16->32 64x64: a compute-at candidate "
        "(the optimizer's cover; --explain prices the fused nest against the split)",
        inputs=_conv_relu_pool_inputs,
        reference=_conv_relu_pool_reference,
        baseline=lambda torch, t: (lambda: _conv_relu_pool_reference(torch, t)),
        baseline_name="cuDNN conv2d + relu + max_pool2d (PyTorch, 3 kernels)",
        target=None,
        flops=2 * 32 * 32 * 64 * 64 * 16 * 9,
        tol=FP32_TOL,
    ),
    _layernorm_case("layernorm", "layernorm.json", 16384, 1024, None),
    _layernorm_case("layernorm_8192x768", "layernorm_8192x768.json", 8192, 768, 1.0),
]
# `--extended`: the rest of issue 15's realistic shapes (head dims, non-causal attention, a
# symbolic GEMM bound by its inputs' shapes, conv at N=1 and at N=256 224² where the M tiles
# exceed grid.y's 65535).
EXTENDED = [
    _gemm_case("gemm_symbolic_4096", "gemm_symbolic.json", 4096, 4096, 4096, 0.8,
               "fp16 GEMM with symbolic M, K, N (bound to 4096 by the inputs' shapes)"),
    _attention_case("attention_full", "attention_full.json", 64, causal=False),
    _attention_case("attention_causal_hd32", "attention_causal_hd32.json", 32),
    _attention_case("attention_causal_hd80", "attention_causal_hd80.json", 80),
    _attention_case("attention_causal_hd96", "attention_causal_hd96.json", 96),
    _conv_case("conv3x3_n1", "conv3x3_n1.json", 1, 56, None),
    _conv_case("conv3x3_n256_224", "conv3x3_n256_224.json", 256, 224, 0.7),
]
for _c in EXTENDED:
    _c.symbolic = _c.name == "gemm_symbolic_4096"
CASE_BY_NAME = {c.name: c for c in CASES + EXTENDED}


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def log(msg=""):
    print(msg, flush=True)


def fmt_ms(x):
    return "—" if x is None else f"{x:.4f}"


def fmt_ratio(x):
    return "—" if x is None else f"{x:.3f}×"


def fmt_err(x):
    return "—" if x is None else f"{x:.3g}"


def fmt_throughput(case, ms):
    if ms is None or ms <= 0:
        return "—"
    if case.flops:
        return f"{case.flops / (ms * 1e-3) / 1e12:.3g} TFLOP/s"
    if case.bytes_moved:
        return f"{case.bytes_moved / (ms * 1e-3) / 1e9:.4g} GB/s"
    return "—"


def load_graph(case):
    with open(case.graph) as f:
        return json.load(f)


def check_inputs_against_graph(case, graph, arrays):
    """The generated arrays must be exactly the graph's signature inputs, in their declared dtype
    (fp16 or fp32) and shape."""
    problems = []
    sig = [i["tensor"] for i in graph["signature"]["inputs"]]
    if sorted(sig) != sorted(arrays):
        problems.append(f"signature inputs {sig} but generated {sorted(arrays)}")
    for name, arr in arrays.items():
        decl = graph["tensors"].get(name)
        if decl is None:
            continue
        want = {"fp16": np.float16, "fp32": np.float32}.get(decl["dtype"])
        if want is None or arr.dtype != want:
            problems.append(f"{name}: declared {decl['dtype']}, generated {arr.dtype}")
        if getattr(case, "symbolic", False):
            if len(decl["shape"]) != arr.ndim:
                problems.append(f"{name}: declared rank {len(decl['shape'])}, generated {arr.ndim}")
        elif not all(isinstance(d, int) for d in decl["shape"]):
            problems.append(f"{name}: symbolic shape {decl['shape']} (the cases use concrete sizes)")
        elif list(arr.shape) != decl["shape"]:
            problems.append(f"{name}: declared shape {decl['shape']}, generated {list(arr.shape)}")
    return problems


def output_of(graph):
    outs = [o["tensor"] for o in graph["signature"]["outputs"]]
    if len(outs) != 1:
        raise ValueError(f"expected one output, got {outs}")
    return outs[0], graph["tensors"][outs[0]]


def npy_name(tensor):
    # dlc-egg writes DIR/<tensor>.npy with characters outside [A-Za-z0-9_.-] replaced by '_'
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", tensor) + ".npy"


def write_inputs(arrays, in_dir):
    in_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, arr in arrays.items():
        p = in_dir / npy_name(name)
        np.save(p, arr)  # fp16 -> '<f2'
        paths[name] = p
    return paths


def case_rng(seed, name):
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def run_cmd(dlc, case, paths, out_dir, repeat):
    cmd = [str(dlc), "run", str(case.graph), "--device", "cuda"]
    if ARCH:
        cmd += ["--arch", ARCH]
    for name, p in paths.items():
        cmd += ["--input", f"{name}={p}"]
    # the inputs of the largest cases (1.6 GB at N=256 224²) are over the default 1 GiB file budget
    cmd += ["--out-dir", str(out_dir), "--repeat", str(repeat), "--max-file-bytes", "8G"]
    return cmd


def optimize(dlc, case, timeout):
    """`dlc-egg optimize GRAPH --explain` -> (ok, kernel lines, kernel count, predicted µs, text)."""
    try:
        p = subprocess.run([str(dlc), "optimize", str(case.graph), "--explain"]
                           + (["--arch", ARCH] if ARCH else []),
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, [], None, None, f"timed out after {timeout} s"
    if p.returncode != 0:
        return False, [], None, None, p.stderr
    lines = p.stdout.splitlines()
    head = lines[0] if lines else ""
    m = re.match(r"(\d+) kernel\(s\)", head)
    count = int(m.group(1)) if m else None
    m = re.search(r"predicted ([0-9.]+) µs", head)
    predicted = float(m.group(1)) if m else None
    kernels = [l for l in lines if l.startswith("kernel ")]
    return True, kernels, count, predicted, p.stdout


def tail(text, limit=20000):
    return text if len(text) <= limit else "[… " + str(len(text) - limit) + " chars cut …]\n" + text[-limit:]


# ---------------------------------------------------------------------------------------------
# Dry run (no GPU, no torch)
# ---------------------------------------------------------------------------------------------


def dry_run(args, cases, dlc, work):
    log(f"dry run: {len(cases)} case(s), dlc-egg = {dlc}, work dir = {work}")
    failed = []
    for case in cases:
        log(f"\n== {case.name}: {case.desc}")
        graph = load_graph(case)
        arrays = case.inputs(case_rng(args.seed, case.name))
        problems = check_inputs_against_graph(case, graph, arrays)
        out_name, out_decl = output_of(graph)
        paths = write_inputs(arrays, work / case.name / "in")
        for name, arr in arrays.items():
            a = arr.astype(np.float32)
            log(f"  input {name}: {arr.dtype.str} {list(arr.shape)} "
                f"range [{a.min():.4g}, {a.max():.4g}] -> {paths[name]}")
        log(f"  output {out_name}: {out_decl['dtype']} {out_decl['shape']}")
        ok, kernels, count, predicted, text = optimize(dlc, case, args.timeout)
        if ok:
            log(f"  optimize: accepted, {count} kernel(s), predicted {predicted} µs")
            for k in kernels:
                log(f"    {k}")
        else:
            problems.append("dlc-egg optimize rejected the graph:\n" + tail(text))
        cmd = run_cmd(dlc, case, paths, work / case.name / "out", args.repeat)
        log("  would run: " + shlex.join(cmd))
        log(f"  then PyTorch: {case.baseline_name}, {TORCH_WARMUP} warm-up + {args.repeat} timed "
            f"calls (CUDA events); target: "
            + (f"ratio >= {case.target}" if case.target else "none (report only)"))
        for p in problems:
            log(f"  PROBLEM: {p}")
        if problems:
            failed.append(case.name)
        if not args.work_dir:
            shutil.rmtree(work / case.name, ignore_errors=True)
    log("")
    if failed:
        log(f"dry run FAILED: {', '.join(failed)}")
        return 1
    log(f"dry run OK: {len(cases)} graph(s) accepted, inputs match the signatures")
    return 0


# ---------------------------------------------------------------------------------------------
# GPU run
# ---------------------------------------------------------------------------------------------


def import_torch():
    try:
        import torch
    except ImportError:
        sys.stderr.write("run.py: torch is required for the GPU run but is not installed "
                         "(only --dry-run works without it)\n")
        sys.exit(2)
    if not torch.cuda.is_available():
        sys.stderr.write("run.py: torch.cuda.is_available() is False: no usable CUDA GPU "
                         f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})\n")
        sys.exit(2)
    # The fp32 references must be true fp32 (these flags do not affect the fp16 baselines).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # cuDNN picks its fastest algorithm for the shape during the warm-up (fair to the baseline).
    torch.backends.cudnn.benchmark = True
    return torch


def time_cuda(torch, fn, repeat, warmup=TORCH_WARMUP):
    """Mean ms per call over `repeat` back-to-back calls, measured with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeat


def compare(torch, out, ref, tol):
    """(max abs error, max rel error, pass, detail) of out against the fp32 reference.

    rel error = |out - ref| / max(|ref|, atol) (elementwise; atol keeps near-zero entries from
    dominating); pass = every element finite and |out - ref| <= atol + rtol * |ref|; detail says,
    on a failure, how many elements are off and where the worst one is.
    """
    rtol, atol = tol
    out = out.float()
    d = (out - ref).abs()
    max_abs = d.max().item()
    max_rel = (d / ref.abs().clamp_min(atol)).max().item()
    # excess > 1: outside the tolerance; NaN/inf (in out or ref) count as +inf
    excess = torch.nan_to_num(d / (atol + rtol * ref.abs()), nan=math.inf)
    bad = int((excess > 1).sum().item())
    if bad == 0:
        return max_abs, max_rel, True, ""
    flat = int(excess.reshape(-1).argmax().item())
    idx, rest = [], flat
    for size in reversed(out.shape):
        idx.append(rest % size)
        rest //= size
    idx = tuple(reversed(idx))
    detail = (f"{bad} of {out.numel()} elements outside the tolerance; worst at {list(idx)}: "
              f"got {out[idx].item():.6g}, reference {ref[idx].item():.6g}")
    return max_abs, max_rel, False, detail


class Result:
    def __init__(self, case):
        self.case = case
        self.kernels_expected = None
        self.predicted_us = None
        self.dlc_ms = None
        self.dlc_kernels = []
        self.torch_ms = None
        self.max_abs = None
        self.max_rel = None
        self.torch_max_abs = None
        self.torch_max_rel = None
        self.torch_ok = None
        self.correct = False
        self.error = None  # why the case failed, if it did
        self.stderr = None

    @property
    def ratio(self):
        if self.dlc_ms and self.torch_ms:
            return self.torch_ms / self.dlc_ms
        return None

    @property
    def target_met(self):
        if self.case.target is None or self.ratio is None:
            return None
        return self.ratio >= self.case.target


def torch_side(args, torch, case, arrays, out, res):
    """fp32 reference, PyTorch's fp16 output and time, and the check of dlc-egg's output `out`."""
    with torch.no_grad():
        t16 = {n: torch.from_numpy(a).cuda() for n, a in arrays.items()}
        t32 = {n: t.float() for n, t in t16.items()}
        ref = case.reference(torch, t32)
        del t32
        fn = case.baseline(torch, t16)
        base_out = fn()
        res.torch_max_abs, res.torch_max_rel, res.torch_ok, _ = compare(
            torch, base_out, ref, case.tol)
        del base_out
        res.torch_ms = time_cuda(torch, fn, args.repeat)
        if out is not None:
            o = torch.from_numpy(out).cuda()
            res.max_abs, res.max_rel, res.correct, detail = compare(torch, o, ref, case.tol)
            if not res.correct:
                res.error = "output mismatch: " + detail


def run_case(args, torch, case, dlc, work):
    res = Result(case)
    graph = load_graph(case)
    out_name, out_decl = output_of(graph)
    arrays = case.inputs(case_rng(args.seed, case.name))
    problems = check_inputs_against_graph(case, graph, arrays)
    if problems:
        res.error = "inputs do not match the graph: " + "; ".join(problems)
        return res
    paths = write_inputs(arrays, work / case.name / "in")
    out_dir = work / case.name / "out"
    out_dir.mkdir(parents=True, exist_ok=True)

    ok, _, count, predicted, text = optimize(dlc, case, args.timeout)
    if ok:
        res.kernels_expected, res.predicted_us = count, predicted

    # --- dlc-egg ---------------------------------------------------------------------------
    cmd = run_cmd(dlc, case, paths, out_dir, args.repeat)
    log("  $ " + shlex.join(cmd))
    torch.cuda.synchronize()
    out = None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        if p.returncode != 0:
            res.error = f"dlc-egg run exited {p.returncode}"
            res.stderr = p.stderr
        else:
            out_path = out_dir / npy_name(out_name)
            timing_path = out_dir / "timing.json"
            if not out_path.exists():
                res.error = f"dlc-egg run wrote no {out_path.name}"
            elif not timing_path.exists():
                res.error = "dlc-egg run wrote no timing.json"
            else:
                timing = json.loads(timing_path.read_text())
                res.dlc_ms = float(timing["total_ms"])
                res.dlc_kernels = [(k["name"], float(k["ms"])) for k in timing.get("kernels", [])]
                if timing.get("repeat") != args.repeat:
                    log(f"  note: timing.json says repeat={timing.get('repeat')}, asked {args.repeat}")
                out = np.load(out_path)
                want_dtype = {"fp16": np.float16, "fp32": np.float32}.get(out_decl["dtype"])
                shape_ok = out.ndim == len(out_decl["shape"]) and all(
                    not isinstance(d, int) or d == n for d, n in zip(out_decl["shape"], out.shape))
                if not shape_ok or out.dtype != want_dtype:
                    res.error = (f"output {out_path.name} is {out.dtype.str} {list(out.shape)}, "
                                 f"expected {out_decl['dtype']} {out_decl['shape']}")
                    out = None
            if res.error:
                res.stderr = p.stderr
    except subprocess.TimeoutExpired as e:
        res.error = f"dlc-egg run timed out after {args.timeout} s"
        res.stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr
    except (ValueError, KeyError, TypeError, OSError) as e:
        res.error = f"could not read dlc-egg's results: {e!r}"
    if res.error:
        log(f"  dlc-egg FAILED: {res.error}")
        if res.stderr:
            log("  --- dlc-egg stderr ---")
            log(tail(res.stderr.rstrip()))
            log("  ----------------------")

    # --- PyTorch: reference, baseline output and time -----------------------------------------
    try:
        torch_side(args, torch, case, arrays, out, res)
    except Exception as e:  # e.g. out of memory: report, go on with the next case
        res.correct = False
        res.error = (res.error + "; " if res.error else "") + f"PyTorch side failed: {e!r}"
        log(f"  PyTorch FAILED: {e!r}")
    finally:
        torch.cuda.empty_cache()  # the tensors died with torch_side's frame
    if res.torch_ok is False:
        log(f"  warning: PyTorch's own fp16 output is outside the tolerance too "
            f"(max abs {res.torch_max_abs:.3g}): check the reference and the tolerance")
    return res


def environment(torch, dlc):
    env = {}
    env["device"] = torch.cuda.get_device_name()
    cap = torch.cuda.get_device_capability()
    env["capability"] = f"sm_{cap[0]}{cap[1]}"
    env["dlc-egg arch"] = ARCH or "the GPU's own"
    env["torch"] = torch.__version__
    env["cuda"] = torch.version.cuda
    try:
        env["cudnn"] = str(torch.backends.cudnn.version())
    except Exception:  # informational only
        env["cudnn"] = "?"
    try:
        env["dlc"] = subprocess.run([str(dlc), "--version"], capture_output=True, text=True,
                                    timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        env["dlc"] = "?"
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
        env["commit"] = (rev or "?") + (" (dirty)" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        env["commit"] = "?"
    return env


HEADER = ["case", "dlc-egg ms", "PyTorch ms", "ratio PyTorch/dlc-egg (≥1: dlc-egg faster)",
          "target", "met", "max abs err", "max rel err", "correct"]


def table_rows(results):
    rows = []
    for r in results:
        c = r.case
        target = f"≥ {c.target}× {c.target_vs}" if c.target else "— (report)"
        if r.target_met is None:
            met = "—"
        elif not r.correct:
            met = "— (wrong output)"
        else:
            met = "yes" if r.target_met else "NO"
        correct = "pass" if r.correct else ("FAIL" if r.error else "—")
        rows.append([c.name, fmt_ms(r.dlc_ms), fmt_ms(r.torch_ms), fmt_ratio(r.ratio), target, met,
                     fmt_err(r.max_abs), fmt_err(r.max_rel), correct])
    return rows


def print_table(results):
    rows = [HEADER] + table_rows(results)
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    for j, row in enumerate(rows):
        log("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))
        if j == 0:
            log("  ".join("-" * w for w in widths))


def markdown(results, env, args, command):
    md = []
    md.append(f"# dlc-egg GPU benchmark — {datetime.date.today().isoformat()}")
    md.append("")
    md.append(f"- device: {env['device']} ({env['capability']})")
    md.append(f"- torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}")
    md.append(f"- dlc-egg: `{env['dlc']}`, commit {env['commit']}, compiled for {env['dlc-egg arch']}")
    md.append(f"- command: `{command}`")
    md.append(f"- times: mean ms per run over {args.repeat} run(s) (dlc-egg: `timing.json` of "
              f"`dlc-egg run --repeat {args.repeat}`, after one warm-up; PyTorch: CUDA events around "
              f"{args.repeat} back-to-back calls after {TORCH_WARMUP} warm-ups)")
    md.append("- **ratio = PyTorch ms / dlc-egg ms: ≥ 1 means dlc-egg is faster**; targets from "
              "issue 5")
    md.append("- correctness: dlc-egg's fp16 output against an fp32 PyTorch reference on the same "
              "inputs (TF32 off); pass = every element finite and |out − ref| ≤ atol + rtol·|ref| "
              "with rtol = atol = 1e-2 (graph-json's fp16 tolerance); rel err = |out − ref| / "
              "max(|ref|, atol)")
    md.append("")
    md.append("| " + " | ".join(HEADER) + " |")
    md.append("| " + " | ".join(["---"] + ["---:"] * 3 + ["---"] * 2 + ["---:"] * 2 + ["---"]) + " |")
    for row in table_rows(results):
        md.append("| " + " | ".join(row) + " |")
    md.append("")
    md.append("## Details")
    md.append("")
    md.append("| case | what | PyTorch baseline | dlc-egg throughput | PyTorch throughput | "
              "kernels (optimize) | predicted µs | PyTorch fp16 max abs / rel err |")
    md.append("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        c = r.case
        md.append(f"| {c.name} | {c.desc} | `{c.baseline_name}` | {fmt_throughput(c, r.dlc_ms)} | "
                  f"{fmt_throughput(c, r.torch_ms)} | "
                  f"{'—' if r.kernels_expected is None else r.kernels_expected} | "
                  f"{'—' if r.predicted_us is None else f'{r.predicted_us:.1f}'} | "
                  f"{fmt_err(r.torch_max_abs)} / {fmt_err(r.torch_max_rel)} |")
    md.append("")
    for r in results:
        if r.dlc_kernels:
            md.append(f"Kernels of `{r.case.name}` (mean ms): " + ", ".join(
                f"`{n}` {ms:.4f}" for n, ms in r.dlc_kernels))
            md.append("")
    failures = [r for r in results if r.error]
    if failures:
        md.append("## Failures")
        md.append("")
        for r in failures:
            md.append(f"### {r.case.name}: {r.error}")
            md.append("")
            if r.stderr:
                md.append("```")
                md.append(tail(r.stderr.rstrip(), 8000))
                md.append("```")
                md.append("")
    return "\n".join(md) + "\n"


def gpu_run(args, cases, dlc, work, command):
    torch = import_torch()
    env = environment(torch, dlc)
    log(f"device: {env['device']} ({env['capability']}), torch {env['torch']}, CUDA {env['cuda']}, "
        f"cuDNN {env['cudnn']}; {env['dlc']} at {dlc} (commit {env['commit']})")
    log(f"repeat {args.repeat}; ratio = PyTorch ms / dlc-egg ms (>= 1: dlc-egg faster)")
    results = []
    for case in cases:
        log(f"\n== {case.name}: {case.desc}")
        res = run_case(args, torch, case, dlc, work)
        results.append(res)
        log(f"  dlc-egg {fmt_ms(res.dlc_ms)} ms, PyTorch {fmt_ms(res.torch_ms)} ms, ratio "
            f"{fmt_ratio(res.ratio)}, max abs {fmt_err(res.max_abs)}, max rel {fmt_err(res.max_rel)}"
            f" -> {'pass' if res.correct else 'FAIL'}" + (f" ({res.error})" if res.error else ""))
        if not args.work_dir:
            shutil.rmtree(work / case.name, ignore_errors=True)
    log("")
    print_table(results)
    if args.results:
        path = Path(args.results)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(markdown(results, env, args, command))
        log(f"\nwrote {path}")
    failed = [r.case.name for r in results if not r.correct]
    if failed:
        log(f"\nFAILED: {', '.join(failed)}")
        return 1
    return 0


# ---------------------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Benchmark dlc-egg's CUDA kernels against PyTorch (ratio = PyTorch ms / "
                    "dlc-egg ms; >= 1 means dlc-egg is faster).")
    ap.add_argument("--dlc", default=os.environ.get("DLC_EGG", str(DEFAULT_DLC)),
                    help="the dlc-egg binary (default $DLC_EGG or target/release/dlc-egg in the repo)")
    ap.add_argument("--repeat", type=int, default=50, help="timed runs per case (default 50)")
    ap.add_argument("--cases", default=None,
                    help="comma-separated subset of: " + ",".join(CASE_BY_NAME))
    ap.add_argument("--results", default=None,
                    help="write the table as Markdown here (e.g. bench/results/gpu-$(date +%%F).md)")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU or torch: generate the inputs, check every graph with "
                         "`dlc-egg optimize`, print the commands")
    ap.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    ap.add_argument("--timeout", type=int, default=1800,
                    help="seconds allowed per dlc-egg invocation (default 1800)")
    ap.add_argument("--work-dir", default=None,
                    help="keep inputs and outputs here (default: a temporary directory, removed)")
    ap.add_argument("--extended", action="store_true",
                    help="also run the extended cases: " + ",".join(c.name for c in EXTENDED))
    ap.add_argument("--arch", choices=["sm80", "sm90"], default=None,
                    help="the architecture dlc-egg compiles for (default: the GPU's own; sm80 on "
                         "an H100 runs the mma.sync kernels as PTX the driver compiles)")
    args = ap.parse_args(argv)
    global ARCH
    ARCH = args.arch

    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    if args.cases:
        names = [n.strip() for n in args.cases.split(",") if n.strip()]
        unknown = [n for n in names if n not in CASE_BY_NAME]
        if unknown:
            ap.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASE_BY_NAME)}")
        cases = [CASE_BY_NAME[n] for n in names]
    else:
        cases = CASES + (EXTENDED if args.extended else [])

    dlc = Path(args.dlc)
    if not dlc.is_file() or not os.access(dlc, os.X_OK):
        sys.stderr.write(f"run.py: dlc-egg binary not found or not executable: {dlc}\n"
                         "  build it with `cargo build --release` or pass --dlc PATH\n")
        return 2
    dlc = dlc.resolve()

    command = shlex.join(["python3"] + [sys.argv[0]] + (sys.argv[1:] if argv is None else argv))
    if args.work_dir:
        work = Path(args.work_dir).resolve()
        work.mkdir(parents=True, exist_ok=True)
        cleanup = None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="dlc-egg-bench-")
        work = Path(cleanup.name)
    try:
        if args.dry_run:
            return dry_run(args, cases, dlc, work)
        return gpu_run(args, cases, dlc, work, command)
    finally:
        if cleanup is not None:
            cleanup.cleanup()


if __name__ == "__main__":
    sys.exit(main())
