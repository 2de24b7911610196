#!/usr/bin/env python3
"""Turn `run.py` reports measured on a GPU into the calibration points `tests/gpu_measured.rs` checks.

    python3 bench/gpu/calibration.py --dlc target/release/dlc-egg --device "NVIDIA H100 80GB HBM3" \
        bench/results/gpu-h100-2026-11-26/call4-gpu-native.md:sm90 ... > tests/data/measured/gpu_h100.json

Each report's "Kernels of `CASE` (mean ms): `k` 0.3076, …" lines give the measured time of every kernel;
`dlc-egg optimize GRAPH --arch ARCH --explain` (run with the binary that was measured) gives the plan each
kernel implements and the model's target. One JSON entry per kernel: graph, arch, kernel, plan, measured_us,
source. `tests/gpu_measured.rs` compares the model's prediction with `measured_us` for the entries whose plan
the optimizer still chooses. Needs only Python 3.
"""

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GRAPHS = Path(__file__).resolve().parent / "graphs"
KERNELS = re.compile(r"^Kernels of `([^`]+)` \(mean ms\): (.*)$")
ONE = re.compile(r"`([^`]+)` ([0-9.]+)")


def run_cases():
    """case name -> graph file name, from run.py's case list (without importing numpy)."""
    text = (Path(__file__).resolve().parent / "run.py").read_text()
    return dict(re.findall(r'"([a-z0-9_]+)", "([a-z0-9_]+\.json)"', text))


def plans(dlc, graph, arch):
    out = subprocess.run([dlc, "optimize", str(graph), "--arch", arch, "--explain"],
                         capture_output=True, text=True, check=True).stdout
    found, kernel = {}, None
    for line in out.splitlines():
        m = re.match(r"^kernel (\S+):", line)
        if m:
            kernel = m.group(1)
        m = re.match(r"^  plan: (.*)$", line)
        if m and kernel:
            found[kernel] = m.group(1).strip()
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dlc", default=str(REPO / "target" / "release" / "dlc-egg"))
    ap.add_argument("--device", required=True, help="the GPU the reports were measured on")
    ap.add_argument("reports", nargs="+", help="REPORT.md:ARCH (the arch dlc-egg compiled for)")
    args = ap.parse_args()
    cases = run_cases()
    entries = []
    for spec in args.reports:
        report, arch = spec.rsplit(":", 1)
        source = str(Path(report).resolve().relative_to(REPO))
        for line in Path(report).read_text().splitlines():
            m = KERNELS.match(line)
            if not m or m.group(1) not in cases:
                continue
            graph = GRAPHS / cases[m.group(1)]
            doc = json.loads(graph.read_text())
            if any(isinstance(d, str) for t in doc["tensors"].values() for d in t["shape"]):
                # symbolic: the run compiled the plan of its binding's shape cluster, which
                # `optimize` without a binding does not show
                continue
            planned = plans(args.dlc, graph, arch)
            for kernel, ms in ONE.findall(m.group(2)):
                if kernel not in planned:
                    sys.exit(f"{source}: {m.group(1)}: `{kernel}` is not a kernel of today's plan")
                entries.append({
                    "graph": str(graph.relative_to(REPO)),
                    "arch": arch,
                    "device": args.device,
                    "kernel": kernel,
                    "plan": planned[kernel],
                    "measured_us": round(float(ms) * 1000.0, 2),
                    "source": source,
                })
    json.dump(entries, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
