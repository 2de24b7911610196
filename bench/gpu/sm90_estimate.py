#!/usr/bin/env python3
"""SM90 performance estimate without a GPU (issue 21): the cost model's predicted time of the
kernels dlc-egg emits for --arch sm90 (H100-SXM5-80GB), against reference numbers for cuBLAS and
cuDNN on the same GPU.

    python3 bench/gpu/sm90_estimate.py [--dlc target/release/dlc-egg]

For each case it runs `dlc-egg optimize GRAPH --arch sm90 -o DIR`, sums the manifest's
`predicted_us` over the launches, and prints the template and plan of each launch beside the
reference. These are ESTIMATES: the references are not measured here (no GPU in CI); they are
the vendor libraries' typical H100-SXM5 throughput, stated with their reasoning below. A lent
GPU measures the real ratios with bench/gpu/run.py (its gemm_4096, gemm_bias_relu_4096 and
conv3x3 cases run the sm90 kernels: `dlc-egg run` plans for sm90 by default).

References (H100-SXM5-80GB, 989 TFLOP/s dense fp16 peak, 3.35 TB/s HBM3):
- cuBLAS fp16 GEMM 4096^3, fp32 accumulation: about 660 TFLOP/s (67 % of peak, the range
  cuBLASLt's sm90 kernels reach at this size), i.e. 2·4096^3 / 660e12 s = 208 us.
- cuDNN conv 3x3, N=32, C=64->64, 56x56, stride 1, pad 1, fp16 NCHW (bench/gpu/graphs/conv3x3):
  2*32*64*56*56*64*9 = 7.40 GFLOP. cuDNN runs fp16 tensor-core convolutions on NHWC: an NCHW
  problem pays an input and an output transform (2 x 25.7 MB of traffic, about 17 us at ~3 TB/s),
  and the implicit GEMM itself (M = 100352, N = 64, K = 576: a narrow N) runs at about 450 TFLOP/s
  (16 us), i.e. about 33 us in all. (The earlier 197 us took the FLOPs as 59.2 G, 8x too many.)
  dlc-egg's conv runs on wgmma (sm90_gemm, the NCHW image gathered by the producer warpgroup,
  the filter by TMA) since 2026-11-26-2; the model prices its gather like any operand fill
  (memory-bound at 20.2 us), not the producer's issue rate (see the results file).
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

CASES = [
    # (name, graph, reference library, reference microseconds, FLOPs)
    ("gemm_4096", "gemm_4096.json", "cuBLAS", 208.0, 2 * 4096 ** 3),
    ("gemm_bias_relu_4096", "gemm_bias_relu_4096.json", "cuBLAS + epilogue", 208.0, 2 * 4096 ** 3),
    ("conv3x3", "conv3x3.json", "cuDNN", 33.0, 2 * 32 * 64 * 56 * 56 * 64 * 9),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dlc", default=str(REPO / "target" / "release" / "dlc-egg"))
    args = ap.parse_args()
    if not Path(args.dlc).exists():
        sys.stderr.write(f"sm90_estimate.py: no dlc-egg binary at {args.dlc} (cargo build --release)\n")
        return 2
    print("| case | templates (plan) | predicted µs | TFLOP/s | reference | ref µs | est. ratio (ref/dlc) |")
    print("| --- | --- | ---: | ---: | --- | ---: | ---: |")
    for name, graph, lib, ref_us, flops in CASES:
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([args.dlc, "optimize", str(HERE / "graphs" / graph), "--arch", "sm90",
                                "-o", d], capture_output=True, text=True)
            if r.returncode != 0:
                sys.stderr.write(f"{name}: dlc-egg optimize failed:\n{r.stderr}\n")
                return 1
            m = json.loads((Path(d) / "manifest.json").read_text())
        launches = [s["launch"] for s in m["steps"] if "launch" in s]
        us = sum(l["predicted_us"] for l in launches)
        plans = ", ".join(
            f"{l['template']} {l['plan']['tile']} {list(l['plan']['algo_choice'].values())}"
            for l in launches)
        print(f"| {name} | {plans} | {us:.1f} | {flops / us / 1e6:.0f} | {lib} (estimate) | "
              f"{ref_us:.0f} | {ref_us / us:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
