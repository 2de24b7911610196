#!/usr/bin/env python3
"""A/B of two dlc-egg binaries on one exported model: alternating rounds, per-kernel min of means.

Usage: bench/cpu/ab.py OLD_BIN NEW_BIN MODEL.onnx NAME=INPUT.npy... ROUNDS
(`run --device cpu --threads 2 --repeat 5` per binary and round, each with its own plan cache
under $AB_DIR, default /tmp/dlc-ab; prints each round's total, then a per-kernel table of the
minimum over rounds of each kernel's mean, kernels matched by region name).
"""
import json, subprocess, sys, os
from pathlib import Path
bins = {"old": sys.argv[1], "new": sys.argv[2]}
model, inp, rounds = sys.argv[3], sys.argv[4:-1], int(sys.argv[-1])
root = Path(os.environ.get("AB_DIR", "/tmp/dlc-ab"))
stem = Path(model).stem
res = {b: [] for b in bins}
for r in range(rounds):
    for b, path in bins.items():
        wd = root / f"{stem}-{b}"
        args = [path, "run", model, "--device", "cpu", "--threads", "2", "--repeat", "5",
                "--out-dir", str(wd / "out"), "--plan-cache", str(wd / "cache")]
        for i in inp: args += ["--input", i]
        subprocess.run(args, check=True, capture_output=True)
        t = json.loads((wd / "out" / "timing.json").read_text())
        res[b].append(t)
        print(f"round {r} {b}: {t['total_ms']:.2f} ms load {os.getloadavg()[0]:.2f}", flush=True)
for b in bins:
    tot = [t["total_ms"] for t in res[b]]
    print(b, "total min", min(tot), "all", [round(x, 2) for x in tot])
names = [k["name"] for k in res["old"][0]["kernels"]]
newnames = [k["name"] for k in res["new"][0]["kernels"]]
def kmin(b, n):
    return min(next(k["ms"] for k in t["kernels"] if k["name"] == n) for t in res[b])
print("| kernel | old ms | new ms | new/old |")
for n in names:
    if n in newnames:
        o, w = kmin("old", n), kmin("new", n)
        print(f"| {n} | {o:.3f} | {w:.3f} | {w/o:.2f} |")
    else:
        print(f"| {n} | {kmin('old', n):.3f} | (not in new) | |")
for n in newnames:
    if n not in names:
        print(f"| {n} | (not in old) | {kmin('new', n):.3f} | |")
