#!/usr/bin/env python3
"""Counts the kernels tinygrad's scheduler runs for one inference of each exported ONNX model
(issue 23's comparison with dlc-egg's `optimize` cover).

Each model from scripts/export-real-models.py is loaded with tinygrad's ONNX frontend
(`tinygrad.nn.onnx.OnnxRunner`, tinygrad 0.14) and run on the CPU device without TinyJit, on the
inputs stored beside it (the same shapes dlc-egg optimizes for: the first tag of each model).
The first call realizes the weights (file reads, copies); the counters are reset and the model
is called a second time: that warm call's kernels are what is counted. A kernel is a compiled
program (`Ops.PROGRAM`); copies (`Ops.COPY`, buffer transfers) are counted separately and not
included, as in issue 23's table. The output is checked against onnxruntime's (stored .npy).

Usage (a venv with `pip install tinygrad==0.14.0 onnx numpy`, e.g. .tinyenv/):
    DEV=CPU .tinyenv/bin/python bench/covers/tinygrad_kernels.py [DIR] [--only resnet18,bert]
Without clang (tinygrad's CPU device compiles with it), use tinygrad's own x86 backend and gcc for
the device's helper programs: DEV=CPU:X86 CC=bench/covers/gcc_as_clang.py (the counts are the
scheduler's and do not depend on the backend).
DIR defaults to out/real-exports. Prints one JSON line per model.
"""
import argparse
import json
import os
import time

import numpy as np

os.environ.setdefault("DEV", "CPU")
from tinygrad import Device, GlobalCounters, Tensor  # noqa: E402
from tinygrad.engine import realize  # noqa: E402
from tinygrad.nn.onnx import OnnxRunner  # noqa: E402
from tinygrad.uop.ops import Ops  # noqa: E402

COUNTS = {"program": 0, "copy": 0, "other": 0}
_track = realize.track_stats


def track_stats(ctx, call, st, ets):
    """Classifies each executed call before tinygrad's own accounting."""
    if ctx.update_stats:
        op = call.src[0].op
        kind = "program" if op is Ops.PROGRAM else "copy" if op is Ops.COPY else "other"
        COUNTS[kind] += len(realize.get_call_kernels(call))
    return _track(ctx, call, st, ets)


realize.track_stats = track_stats


def run(path, feeds):
    runner = OnnxRunner(path)
    inputs = {k: Tensor(v) for k, v in feeds.items()}
    for k in COUNTS:
        COUNTS[k] = 0
    t = time.time()
    out = runner(inputs)
    for v in out.values():
        v.realize()
    cold = dict(COUNTS, s=round(time.time() - t, 2))
    GlobalCounters.reset()
    for k in COUNTS:
        COUNTS[k] = 0
    inputs = {k: Tensor(v) for k, v in feeds.items()}
    t = time.time()
    out = runner(inputs)
    for v in out.values():
        v.realize()
    warm = dict(COUNTS, s=round(time.time() - t, 2), kernel_count=GlobalCounters.kernel_count)
    return out, cold, warm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?",
                    default=os.path.join(os.path.dirname(__file__), "..", "..", "out", "real-exports"))
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    d, only = a.dir, [m for m in a.only.split(",") if m]
    manifest = json.load(open(os.path.join(d, "manifest.json")))
    for name, info in sorted(manifest.items()):
        if "error" in info or (only and name not in only):
            continue
        tag = info["runs"][0]["tag"]
        feeds = {i: np.load(os.path.join(d, f"{name}.{tag}.in.{i}.npy")) for i in info["inputs"]}
        want = np.load(os.path.join(d, f"{name}.{tag}.out.output.npy"))
        try:
            out, cold, warm = run(os.path.join(d, info["file"]), feeds)
            got = out["output"].numpy()
            err = float(np.abs(got.astype(np.float64) - want).max())
            print(json.dumps({"model": name, "tag": tag, "device": Device.DEFAULT,
                              "kernels_warm": warm["program"], "copies_warm": warm["copy"],
                              "other_warm": warm["other"], "kernels_first_call": cold["program"],
                              "copies_first_call": cold["copy"], "max_abs_err_vs_ort": err,
                              "warm_s": warm["s"]}), flush=True)
        except Exception as e:  # report and go on
            print(json.dumps({"model": name, "error": f"{type(e).__name__}: {e}"[:500]}), flush=True)


if __name__ == "__main__":
    main()
