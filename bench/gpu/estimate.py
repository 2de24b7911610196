#!/usr/bin/env python3
"""Static performance estimate of the CUDA dlc-egg emits, without a GPU (issue 15).

    python3 bench/gpu/estimate.py [--dlc target/release/dlc-egg] [--cases a,b] [--archs sm80,sm90]
                                  [--markdown FILE] [--verbose]

For each case (the issue's four acceptance targets) and arch (A100-SXM4 = sm_80, H100-SXM5 = sm_90a)
it runs `dlc-egg optimize GRAPH --arch ARCH -o DIR`, compiles the emitted `kernels.cu` with NVRTC
(the repository's `.cuda/` wheels, the flags of `src/cuda/nvrtc.rs`: a real target so ptxas runs,
`-Xptxas=-v`), reads ptxas's registers / shared memory / spills and `cuobjdump -sass`, and builds a
bottleneck model from the emitted instruction stream:

* **occupancy**: resident CTAs per SM from registers (allocated per warp in units of 256), static +
  dynamic shared memory (+1 KiB reserved per CTA), threads and the 32-block limit;
* **main loop** (the SASS loop with the most HMMA; the longest for kernels without tensor cores):
  per iteration its HMMA, LDSM / LDS / STS / LDGSTS bytes, and every other instruction classed by
  pipe (integer, fp32, MUFU, load/store, control);
* **per-iteration time** of one round (every resident warp runs one iteration) =
  max( resident warps per scheduler x (HMMA x tensor-pipe cycles per HMMA, issue slots,
  integer / fp32 / MUFU pipe cycles), shared-memory bytes of the SM's warps / 128 B per clock,
  one warp's dependency-bound time (an in-order scoreboard simulation of the loop body with the
  latencies below, barrier included), the cp.async load latency / the pipeline's prefetch
  distance read off `DEPBAR.LE SB0, N` );
* **work**: each CTA's iteration count from the problem (GEMM/conv: K steps; causal attention:
  its query block's unmasked key tiles, the key-tile width derived from the loop's HMMA count),
  scheduled greedily over SMs x resident CTAs in launch order (wave quantization and the causal
  imbalance included), plus a per-CTA fill (one load latency) and the instructions outside the
  loop;
* **memory bounds**: compulsory DRAM bytes / (90 % of the datasheet bandwidth) and the loop's
  global-load bytes / the L2 bandwidth; a streaming kernel without tensor cores (LayerNorm) is
  priced by Little's law from the bytes each thread has in flight (read off the SASS: 16-byte
  loads issued before the first use of one) and its instruction issue.

The result is an ESTIMATE (no GPU measured it); changing the emitted instruction mix (fewer
instructions per k-step, another pipeline depth, other registers and hence occupancy) moves it.
The vendor references below are public figures, not measured here; each says where it comes from.
`bench/gpu/run.py` measures the real ratios when a GPU is lent.
"""

import argparse
import ctypes
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GRAPHS = HERE / "graphs"

# --------------------------------------------------------------------------------------------
# Machines. Peaks from the datasheets (as src/target.rs quotes them); the per-clock figures
# below follow from them.

ARCHS = {
    "sm80": {
        "name": "A100-SXM4-80GB",
        "gpu_arch": "sm_80",
        "sms": 108,
        "clock_ghz": 1.41,
        # 312 TFLOP/s dense fp16 / (108 SMs x 1.41 GHz) = 2048 FLOP/clk/SM = 1024 FMA/clk/SM,
        # 256 per scheduler: one HMMA.16816 (2048 FMA) every 8 cycles per scheduler.
        "mma_fma_per_clk": 256.0,
        "wgmma_fma_per_clk": 256.0,
        # fp32: 16 lanes per scheduler on GA100 (19.5 TFLOP/s); int32: 16 lanes.
        "fp_cycles": 2.0,
        "int_cycles": 2.0,
        # MUFU: 16 results/clk/SM = 4 per scheduler (src/target.rs sfu_per_clock_per_sm).
        "mufu_cycles": 8.0,
        "smem_bytes_per_clk": 128.0,
        "smem_per_sm": 164 * 1024,
        "regs_per_sm": 65536,
        "threads_per_sm": 2048,
        "blocks_per_sm": 32,
        "dram_bw": 2039e9,
        "l2_bw": 5120.0 * 1.41e9,
        # Global-load latency under a full kernel's load (L2 hit with queueing ~ 500-700
        # cycles; src/cost/roofline.rs LOAD_LATENCY_CYCLES = 700); DRAM-going streaming loads.
        "load_latency": 700.0,
        "dram_latency_ns": 650.0,
    },
    "sm90": {
        "name": "H100-SXM5-80GB",
        "gpu_arch": "sm_90a",
        "sms": 132,
        "clock_ghz": 1.83,
        # 989 TFLOP/s dense = 512 FMA/clk per scheduler with wgmma; mma.sync reaches about 0.62
        # of it (src/cost/roofline.rs algo_efficiency: CUTLASS's SM80 kernels on H100 measure
        # 60-65 %): 2048 / (512 x 0.62) = 6.45 cycles per HMMA.16816 per scheduler. wgmma at
        # the same module's 0.9 of the peak.
        "mma_fma_per_clk": 512.0 * 0.62,
        "wgmma_fma_per_clk": 512.0 * 0.9,
        # fp32: 32 lanes per scheduler (66.9 TFLOP/s); int32: 16 lanes.
        "fp_cycles": 1.0,
        "int_cycles": 2.0,
        "mufu_cycles": 8.0,
        "smem_bytes_per_clk": 128.0,
        "smem_per_sm": 228 * 1024,
        "regs_per_sm": 65536,
        "threads_per_sm": 2048,
        "blocks_per_sm": 32,
        "dram_bw": 3.35e12,
        "l2_bw": 5120.0 * 1.83e9,
        "load_latency": 700.0,
        "dram_latency_ns": 600.0,
    },
}

# Producer-to-consumer latencies (cycles) of the scoreboard simulation: Ampere/Hopper
# microbenchmarks (Jia et al. 2018/2019 for the fixed-latency pipes; Abdelkhalik et al. 2022,
# "Demystifying the Nvidia Ampere Architecture through Microbenchmarking", for mma.sync ~ 32
# cycles and shared memory / ldmatrix ~ 30 cycles).
LATENCY = {"hmma": 32, "smem": 30, "shfl": 28, "mufu": 20, "fp": 5, "int": 5, "gmem": 500,
           "ctrl": 1, "other": 5}
BARRIER_CYCLES = 20  # a CTA-wide barrier's round trip once every warp arrived
LAUNCH_US = 2.0  # back-to-back launch overhead seen by CUDA-event timing (both sides pay it)

# --------------------------------------------------------------------------------------------
# The cases and their vendor references (public figures, not measured here).

CASES = {
    "gemm_4096": {
        "graph": "gemm_4096.json",
        "work": ("gemm", 4096, 4096, 4096),
        "flops": 2 * 4096 ** 3,
        "target": 0.8,
        "ref": {
            # cuBLAS HGEMM (fp32 accumulation) at 4096^3 on A100-SXM4: its sm80 tensor-op kernels
            # (CUTLASS-class 256x128 / 128x256 tiles, 3-5 stages) reach about 85-88 % of the
            # 312 TFLOP/s peak at this size (NVIDIA "Matrix Multiplication Background" guide,
            # A100 large-GEMM curves; public torch.matmul benchmarks ~ 260-280 TFLOP/s):
            # 270 TFLOP/s.
            "sm80": ("cuBLAS", 270e12),
            # H100-SXM5: cuBLASLt's wgmma kernels ~ 660 TFLOP/s at 4096^3 (67 % of peak; public
            # measurements 600-750), as bench/gpu/sm90_estimate.py states. The mma.sync kernel
            # cannot reach 0.8x of a wgmma kernel (mma.sync tops out at ~ 0.62 of the peak).
            "sm90": ("cuBLAS (wgmma)", 660e12),
        },
    },
    # The acceptance's "on mma.sync" on H100: the sm80 kernel (cp.async + ldmatrix + mma.sync,
    # the plan `--arch sm80` chooses) compiled for sm_90a and run on H100; `--arch sm90` itself
    # plans the wgmma kernel above.
    "gemm_4096_mma_sync": {
        "graph": "gemm_4096.json",
        "work": ("gemm", 4096, 4096, 4096),
        "flops": 2 * 4096 ** 3,
        "target": 0.8,
        "archs": ["sm90"],
        "emit_arch": "sm80",
        "ref": {"sm90": ("cuBLAS (wgmma)", 660e12)},
    },
    "attention_causal": {
        "graph": "attention_causal.json",
        "work": ("attention", 8, 16, 2048, 64, True),
        # Causal attention FLOPs as FlashAttention reports them: 4 B H S^2 D / 2.
        "flops": 4 * 8 * 16 * 2048 ** 2 * 64 // 2,
        "target": 0.7,
        "ref": {
            # FlashAttention-2 paper (Dao 2023, arXiv:2307.08691), Fig. 4, A100-SXM4-80GB,
            # forward, causal, head dim 64, seqlen 2k, batch x seqlen = 16k: about 150 TFLOP/s
            # (read off the figure; PyTorch SDPA's flash backend is that kernel on sm80).
            "sm80": ("SDPA / FA2", 150e12),
            # FlashAttention-3 paper (Shah et al. 2024, arXiv:2407.08608), Fig. 5, H100-SXM5,
            # FlashAttention-2 forward, causal, head dim 64, seqlen 2k: about 200 TFLOP/s
            # (read off the figure; SDPA's flash backend on sm90 is FA2).
            "sm90": ("SDPA / FA2", 200e12),
        },
    },
    "attention_causal_hd128": {
        "graph": "attention_causal_hd128.json",
        "work": ("attention", 8, 16, 2048, 128, True),
        "flops": 4 * 8 * 16 * 2048 ** 2 * 128 // 2,
        "target": 0.7,
        "ref": {
            # FA2 paper Fig. 4, A100, causal, head dim 128, seqlen 2k: about 175 TFLOP/s.
            "sm80": ("SDPA / FA2", 175e12),
            # FA3 paper Fig. 5, H100, FA2 causal, head dim 128, seqlen 2k: about 270 TFLOP/s.
            "sm90": ("SDPA / FA2", 270e12),
        },
    },
    "conv3x3": {
        "graph": "conv3x3.json",
        "work": ("conv", 32, 64, 64, 56, 56, 3, 3),
        "flops": 2 * 32 * 64 * 56 * 56 * 64 * 9,
        "target": 0.7,
        "ref": {
            # cuDNN fp16 NCHW 3x3, N=32, 64->64, 56^2 on A100: tensor-core convolutions run
            # NHWC, so an NCHW problem pays an input and an output transform (2 x 25.7 MB at
            # ~1.6 TB/s: ~32 us) plus the implicit GEMM (M=100352, N=64, K=576: a narrow N) at
            # ~200 TFLOP/s (~37 us): about 69 us.
            "sm80": ("cuDNN", 7.40e9 / 69e-6),
            # H100: the transforms at ~3 TB/s (~17 us) + the GEMM at ~450 TFLOP/s (~16 us):
            # about 33 us (bench/gpu/sm90_estimate.py's reasoning).
            "sm90": ("cuDNN", 7.40e9 / 33e-6),
        },
    },
    "layernorm_8192x768": {
        "graph": "layernorm_8192x768.json",
        "work": ("rows", 8192, 768, 2),
        "bytes": 8192 * 768 * 2 * 2,
        "target": 1.0,
        "ref": {
            # PyTorch vectorized_layer_norm_kernel (fp16, 768 columns: one block per row,
            # 8-byte vectors, a Welford combine through shared memory): public LayerNorm
            # benchmarks at hidden 768-1024 put it at ~1.35 TB/s effective on A100 (66 % of
            # 2.04 TB/s): 25.2 MB / 1.35 TB/s = 18.6 us.
            "sm80": ("PyTorch", 1.35e12),
            # H100: ~2.2 TB/s effective (bench/results/gpu-estimates-2026-11-26.md: 2.0-2.5).
            "sm90": ("PyTorch", 2.2e12),
        },
    },
}

# --------------------------------------------------------------------------------------------
# NVRTC and cuobjdump (the repository's wheels, as src/cuda/nvrtc.rs and src/cuda/sass.rs).


def cuda_dir():
    d = Path(os.environ.get("DLC_CUDA_WHEELS", REPO / ".cuda" / "nvidia" / "cu13")).resolve()
    if not (d / "lib" / "libnvrtc.so.13").exists():
        raise SystemExit(f"estimate.py: no NVRTC under {d} (run scripts/install-cuda-wheels.sh)")
    return d


def nvrtc_compile(source, header, gpu_arch):
    """Compiles with the flags of src/cuda/nvrtc.rs; returns (cubin bytes, log)."""
    cu = cuda_dir()
    lib = ctypes.CDLL(str(cu / "lib" / "libnvrtc.so.13"))
    prog = ctypes.c_void_p()
    names = (ctypes.c_char_p * 1)(b"dlc_kernel.cuh")
    texts = (ctypes.c_char_p * 1)(header.encode())
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernels.cu", 1, texts, names)
    if rc != 0:
        raise RuntimeError(f"nvrtcCreateProgram: {rc}")
    opts = [f"--gpu-architecture={gpu_arch}", "-std=c++17", f"-I{cu / 'include'}", "-Xptxas=-v"]
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, buf)
    log = buf.value.decode(errors="replace")
    if rc != 0:
        raise RuntimeError(f"NVRTC failed:\n{log}")
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    cubin = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetCUBIN(prog, cubin)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return cubin.raw, log


def ptxas_resources(log):
    """Per kernel: registers, spill bytes, static shared memory (ptxas -v lines)."""
    out, cur = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            cur = out.setdefault(m.group(1), {"regs": 0, "spill": 0, "smem": 0})
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            cur["spill"] = int(m.group(1)) + int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            cur["regs"] = int(m.group(1))
        m = re.search(r"(\d+) bytes smem", line)
        if m:
            cur["smem"] = int(m.group(1))
    return out


def sass_text(cubin):
    cu = cuda_dir()
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        env = dict(os.environ, NVDISASM_PATH=str(cu / "bin"))
        r = subprocess.run([str(cu / "bin" / "cuobjdump"), "-sass", f.name], capture_output=True,
                           text=True, env=env)
    finally:
        os.unlink(f.name)
    if r.returncode != 0:
        raise RuntimeError(f"cuobjdump failed: {r.stderr}")
    return r.stdout


# --------------------------------------------------------------------------------------------
# SASS parsing and instruction classes.

LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


class Inst:
    """One SASS instruction: opcode, guard, destination and source registers."""

    def __init__(self, addr, text):
        self.addr = addr
        self.text = text
        words = text.split(None, 1)
        self.guard = None
        if words and words[0].startswith("@"):
            self.guard = words[0].lstrip("@!").strip()
            words = words[1].split(None, 1) if len(words) > 1 else [""]
        self.opcode = words[0]
        self.base = self.opcode.split(".")[0]
        ops = words[1] if len(words) > 1 else ""
        self.operands = [o.strip() for o in ops.split(",")] if ops else []
        self.target = None
        if self.base == "BRA":
            m = re.search(r"0x([0-9a-f]+)", ops)
            if m:
                self.target = int(m.group(1), 16)
        self.cls = classify(self.base, self.opcode)
        self.dst, self.src = registers(self)

    def width_bytes(self):
        """Bytes per thread of a memory access (LDG/STG/LDS/STS/LDGSTS)."""
        for m in self.opcode.split(".")[1:]:
            if m == "128":
                return 16
            if m == "64":
                return 8
            if m in ("U16", "S16"):
                return 2
            if m in ("U8", "S8"):
                return 1
        return 4


INT_OPS = {"IMAD", "IADD3", "LOP3", "SHF", "LEA", "ISETP", "SEL", "PRMT", "MOV", "IABS", "IMNMX",
           "FLO", "POPC", "BMSK", "SGXT", "IADD", "SHL", "SHR", "LOP", "PLOP3", "P2R", "R2P",
           "I2IP", "VIADD", "IMUL", "UIADD3", "UMOV", "ULDC", "ULOP3", "USHF", "UIMAD", "ULEA",
           "UISETP", "USEL", "UPRMT", "S2UR", "CS2R", "S2R", "R2UR", "VOTEU", "VOTE", "UPOPC",
           "UFLO", "UBMSK", "USGXT", "UP2UR", "UPLOP3", "IDP", "IDP4A", "ISCADD"}
FP_OPS = {"FFMA", "FADD", "FMUL", "FMNMX", "FSETP", "FSEL", "HFMA2", "HADD2", "HMUL2", "HMNMX2",
          "HSETP2", "F2F", "F2FP", "I2F", "F2I", "FCHK", "FRND", "FSET", "DADD", "DFMA", "DMUL"}


def classify(base, opcode):
    if base in ("HMMA", "HGMMA", "IMMA"):
        return "hmma"
    if base in ("LDSM", "LDS", "STS", "ATOMS"):
        return "smem"
    if base == "SHFL":
        return "shfl"
    if base in ("LDG", "STG", "LDGSTS", "LDL", "STL", "RED", "ATOMG", "LD", "ST", "UTMALDG"):
        return "gmem"
    if base == "MUFU":
        return "mufu"
    if base in FP_OPS:
        return "fp"
    if base in INT_OPS:
        return "int"
    if base in ("BRA", "BAR", "DEPBAR", "LDGDEPBAR", "EXIT", "CALL", "RET", "NOP", "BSSY",
                "BSYNC", "WARPSYNC", "YIELD", "MEMBAR", "ERRBAR", "CCTL", "SYNCS", "BPT"):
        return "ctrl"
    return "other"


REG = re.compile(r"\bU?R(\d+)\b(?:\.64)?|\bU?P(\d)\b")


def reg_width(inst, pos, token):
    """How many consecutive registers an operand names."""
    if inst.base == "HMMA":
        # D, A, B, C of HMMA.16816.F32: 4, 4, 2, 4 registers.
        return [4, 4, 2, 4][pos] if pos < 4 else 1
    if inst.base == "LDSM" and pos == 0:
        n = inst.opcode.split(".")[-1]
        return int(n) if n.isdigit() else 1
    if inst.base in ("LDG", "LDS", "LDL", "LD") and pos == 0:
        return max(1, inst.width_bytes() // 4)
    if inst.base in ("STG", "STS", "STL", "ST") and pos == 1:
        return max(1, inst.width_bytes() // 4)
    if ".64" in token or inst.opcode.startswith("IMAD.WIDE") and pos == 0:
        return 2
    return 1


def regs_of(inst, pos, token):
    names = []
    for m in re.finditer(r"\b(U?R)(\d+)\b(\.64)?", token):
        if m.group(2) is None:
            continue
        w = 2 if m.group(3) else reg_width(inst, pos, token)
        names += [f"{m.group(1)}{int(m.group(2)) + i}" for i in range(w)]
    names += re.findall(r"\bU?P[0-6]\b", token)
    return names


def registers(inst):
    """(written, read) register names (RZ/PT excluded)."""
    stores = ("STG", "STS", "STL", "ST", "LDGSTS", "RED", "BAR", "BRA", "DEPBAR", "LDGDEPBAR",
              "EXIT", "CALL", "UTMALDG", "SYNCS")
    dst, src = [], []
    for pos, tok in enumerate(inst.operands):
        names = regs_of(inst, pos, tok)
        first_writes = pos == 0 and inst.base not in stores
        # ISETP P6, PT, ...: the first two predicate operands are written.
        writes_pred = inst.base in ("ISETP", "FSETP", "HSETP2", "UISETP", "PLOP3", "LOP3") and \
            pos <= 1 and re.fullmatch(r"!?U?P[0-6T]", tok or "")
        if first_writes or writes_pred:
            dst += names
        else:
            src += names
    if inst.guard:
        src.append(inst.guard)
    return dst, src


def parse_sass(text):
    """{kernel name: [Inst]}."""
    out, cur = {}, None
    for line in text.splitlines():
        if "Function : " in line:
            cur = out.setdefault(line.split("Function : ", 1)[1].strip(), [])
            continue
        m = LINE.match(line)
        if m and cur is not None:
            i = Inst(int(m.group(1), 16), m.group(2))
            if i.base != "NOP":
                cur.append(i)
    return out


def loops(insts):
    """(start, end) address pairs of the backward branches."""
    return sorted({(i.target, i.addr) for i in insts if i.target is not None and i.target < i.addr})


def main_loop(insts):
    """The loop with the most HMMA (innermost on ties), else the longest loop; its body."""
    ls = loops(insts)
    if not ls:
        return None, []
    body = {l: [i for i in insts if l[0] <= i.addr <= l[1]] for l in ls}
    mma = {l: sum(i.cls == "hmma" for i in b) for l, b in body.items()}
    if max(mma.values()) > 0:
        best = max(ls, key=lambda l: (mma[l], -len(body[l])))
    else:
        best = max(ls, key=lambda l: len(body[l]))
    return best, body[best]


# --------------------------------------------------------------------------------------------
# The model.


def mma_fma(inst):
    """Multiply-adds one warp's tensor-core instruction performs: HMMA.16816 2048, HMMA.1688
    1024; HGMMA.64xNxK (a warpgroup's op, issued by each of its 4 warps) 16 N K per warp."""
    m = re.match(r"HGMMA\.64x(\d+)x(\d+)", inst.opcode)
    if m:
        return 16 * int(m.group(1)) * int(m.group(2))
    if inst.opcode.startswith("HMMA.1688"):
        return 1024
    return 2048


def mma_cycles(inst, arch):
    """Tensor-pipe cycles of one warp's tensor-core instruction on its scheduler."""
    a = ARCHS[arch]
    rate = a["wgmma_fma_per_clk"] if inst.base == "HGMMA" else a["mma_fma_per_clk"]
    return mma_fma(inst) / rate


def mix(body, arch):
    """Instruction mix of a loop body."""
    m = {"n": len(body), "hmma": 0, "mma_fma": 0, "mma_cycles": 0.0, "ldsm": 0, "ldgsts": 0, "lds_sts": 0, "ldg": 0, "stg": 0,
         "bar": 0, "int": 0, "fp": 0, "mufu": 0, "shfl": 0, "smem_bytes": 0, "gload_bytes": 0,
         "other": 0, "depbar": None}
    for i in body:
        b = i.base
        if i.cls == "hmma":
            m["hmma"] += 1
            m["mma_fma"] += mma_fma(i)
            m["mma_cycles"] += mma_cycles(i, arch)
        elif b == "LDSM":
            m["ldsm"] += 1
            n = i.opcode.split(".")[-1]
            m["smem_bytes"] += 128 * (int(n) if n.isdigit() else 1)
        elif b in ("LDS", "STS"):
            m["lds_sts"] += 1
            m["smem_bytes"] += 32 * i.width_bytes()
        elif b == "LDGSTS":
            m["ldgsts"] += 1
            m["smem_bytes"] += 32 * i.width_bytes()
            m["gload_bytes"] += 32 * i.width_bytes()
        elif b == "LDG":
            m["ldg"] += 1
            m["gload_bytes"] += 32 * i.width_bytes()
        elif b == "STG":
            m["stg"] += 1
        elif b == "BAR":
            m["bar"] += 1
        elif b == "DEPBAR":
            mm = re.search(r"SB0,\s*0x([0-9a-f]+)", i.text)
            if mm:
                m["depbar"] = int(mm.group(1), 16)
        elif i.cls in ("int", "fp", "mufu", "shfl"):
            m[i.cls] += 1
        else:
            m["other"] += 1
    return m


def chain_cycles(body, arch):
    """One warp alone: in-order issue with register scoreboards, two passes over the loop body
    (the second, in steady state, is returned). A tensor-core op also waits for the warp's own
    previous one to leave the pipe; an integer / fp32 op for the pipe's issue interval."""
    a = ARCHS[arch]
    ready = {}
    pipe_free = {"hmma": 0.0, "int": 0.0, "fp": 0.0, "mufu": 0.0}
    pipe_cost = {"int": a["int_cycles"], "fp": a["fp_cycles"], "mufu": a["mufu_cycles"]}
    t = 0.0
    start2 = 0.0
    for it in range(2):
        if it == 1:
            start2 = t
        for i in body:
            issue = t + 1
            for r in i.src:
                issue = max(issue, ready.get(r, 0.0))
            if i.cls in pipe_free:
                issue = max(issue, pipe_free[i.cls])
                cost = mma_cycles(i, arch) if i.cls == "hmma" else pipe_cost[i.cls]
                pipe_free[i.cls] = issue + cost
            if i.base == "BAR":
                issue += BARRIER_CYCLES
            lat = LATENCY.get(i.cls, 5)
            if i.base == "LDGSTS":
                lat = 0
            for r in i.dst:
                ready[r] = issue + lat
            t = issue
    return t - start2


def occupancy(arch, regs, smem_static, dyn_smem, threads):
    a = ARCHS[arch]
    warps = math.ceil(threads / 32)
    regs_per_warp = math.ceil(max(regs, 1) * 32 / 256) * 256
    by_regs = a["regs_per_sm"] // (regs_per_warp * warps)
    smem = smem_static + dyn_smem
    by_smem = a["smem_per_sm"] // (smem + 1024) if smem > 0 else a["blocks_per_sm"]
    by_threads = a["threads_per_sm"] // (warps * 32)
    return max(0, min(by_regs, by_smem, by_threads, a["blocks_per_sm"]))


def schedule(costs, slots):
    """Greedy list schedule in launch order over `slots` (a CTA starts on the first free slot)."""
    import heapq
    heap = [0.0] * min(slots, len(costs))
    heapq.heapify(heap)
    for c in costs:
        t = heapq.heappop(heap)
        heapq.heappush(heap, t + c)
    return max(heap) if heap else 0.0


def cta_iterations(work, launch, m, loop_warps):
    """Per CTA (launch order), the main-loop iterations it runs."""
    p = launch["plan"]
    grid = launch["grid"][0] * launch["grid"][1] * launch["grid"][2]
    kind = work[0]
    if kind in ("gemm", "conv"):
        if kind == "gemm":
            _, mm, nn, kk = work
        else:
            _, n, ci, co, h, w, kh, kw = work
            mm, nn, kk = n * h * w, co, ci * kh * kw
        bm, bn, bk = p["tile"]
        # The K depth one iteration of one warp covers: its multiply-adds over its share of
        # the CTA tile.
        k_per_iter = m["mma_fma"] * loop_warps / (bm * bn)
        iters = math.ceil(math.ceil(kk / bk) * bk / k_per_iter)
        return [iters] * grid, {"k_per_iter": k_per_iter}
    if kind == "attention":
        _, b, h, s, d, causal = work
        br = launch["block"][0] // 32 * 16
        # QK^T (Bc/8 x d/16) + P.V (d/8 x Bc/16) HMMA per warp per key tile: Bc d / 64.
        bc = m["mma_fma"] // 2048 * 64 // d
        qblocks = math.ceil(s / br)
        per_q = []
        for qb in range(qblocks):
            keys = min(s, (qb + 1) * br) if causal else s
            per_q.append(math.ceil(keys / bc))
        # heaviest query blocks first (the template's order), every (batch, head)
        order = sorted(per_q, reverse=True) if causal else per_q
        costs = [c for c in order for _ in range(b * h)]
        return costs[:grid], {"key_tile": bc}
    raise ValueError(kind)


def model_tensor_kernel(arch, launch, res, insts, work, verbose):
    a = ARCHS[arch]
    threads = launch["block"][0] * launch["block"][1] * launch["block"][2]
    warps = threads // 32
    occ = occupancy(arch, res["regs"], res["smem"], launch["dyn_smem_bytes"], threads)
    loop, body = main_loop(insts)
    m = mix(body, arch)
    # The warps that run the main loop: all, but a warp-specialized wgmma kernel's producer
    # warpgroup (its first 128 threads) only issues TMA loads.
    loop_warps = warps - 4 if any(i.base == "HGMMA" for i in body) and warps > 4 else warps
    w_sched = occ * loop_warps / 4.0
    # Throughput of one round: every resident warp runs one iteration.
    tensor = w_sched * m["mma_cycles"]
    issue = w_sched * m["n"]
    intp = w_sched * m["int"] * a["int_cycles"]
    fpp = w_sched * m["fp"] * a["fp_cycles"]
    mufu = w_sched * m["mufu"] * a["mufu_cycles"]
    smem = occ * loop_warps * m["smem_bytes"] / a["smem_bytes_per_clk"]
    chain = chain_cycles(body, arch)
    dist = (m["depbar"] + 1) if m["depbar"] is not None else 1
    latency = a["load_latency"] / dist if m["ldgsts"] or m["ldg"] else 0.0
    parts = {"tensor": tensor, "issue": issue, "int pipe": intp, "fp32 pipe": fpp,
             "mufu": mufu, "smem": smem, "warp chain": chain, "load latency": latency}
    bound = max(parts, key=parts.get)
    round_cycles = parts[bound]
    iters, extra = cta_iterations(work, launch, m, loop_warps)
    outside = len(insts) - len(body)
    fixed = a["load_latency"] + outside * w_sched
    # A CTA's time at full residency: its iterations at the round's pace.
    costs = [n * round_cycles + fixed for n in iters]
    cycles = schedule(costs, a["sms"] * max(occ, 1))
    t_sched = cycles / (a["clock_ghz"] * 1e9)
    gload = sum(iters) * loop_warps * m["gload_bytes"]
    t_l2 = gload / a["l2_bw"]
    info = {"occ": occ, "regs": res["regs"], "spill": res["spill"], "mix": m,
            "parts": parts, "bound": bound, "round": round_cycles, "ctas": len(iters),
            "iters": (min(iters), max(iters)), "t_sched": t_sched, "t_l2": t_l2, **extra}
    return max(t_sched, t_l2), info


def in_flight_bytes(insts):
    """The most bytes of global loads one thread issues before it uses one of their results."""
    best, pending, bytes_ = 0, set(), 0
    for i in insts:
        if pending and any(r in pending for r in i.src):
            best = max(best, bytes_)
            pending, bytes_ = set(), 0
        if i.base == "LDG":
            pending |= set(i.dst)
            bytes_ += i.width_bytes()
    return max(best, bytes_)


def model_stream_kernel(arch, launch, res, insts, work, dram_bytes):
    a = ARCHS[arch]
    threads = launch["block"][0] * launch["block"][1] * launch["block"][2]
    grid = launch["grid"][0] * launch["grid"][1] * launch["grid"][2]
    occ = occupancy(arch, res["regs"], res["smem"], launch["dyn_smem_bytes"], threads)
    per_cta = in_flight_bytes(insts) * threads
    slots = a["sms"] * max(occ, 1)
    # Wave by wave: a wave of `c` resident CTAs has c x per_cta bytes in flight, so Little's law
    # gives its bandwidth (at most 92 % of the datasheet's); a partial last wave is slower.
    t_mem, left, flight = 0.0, grid, per_cta * min(grid, slots)
    while left > 0:
        c = min(left, slots)
        bw = min(0.92 * a["dram_bw"], c * per_cta / (a["dram_latency_ns"] * 1e-9))
        t_mem += dram_bytes * c / grid / bw
        left -= c
    # Issue: every warp runs the kernel's instructions once (the row kernels here have no loops
    # left, or short ones), one instruction per clock per scheduler.
    warps_total = grid * threads / 32
    t_issue = warps_total * len(insts) / (a["sms"] * 4) / (a["clock_ghz"] * 1e9)
    t = max(t_mem, t_issue) + a["dram_latency_ns"] * 1e-9
    bw = dram_bytes / t_mem
    bound = "dram" if t_mem >= t_issue else "issue"
    info = {"occ": occ, "regs": res["regs"], "spill": res["spill"], "in_flight_B": flight,
            "bw_TBps": bw / 1e12, "t_mem": t_mem, "t_issue": t_issue, "bound": bound,
            "ldg128": sum(1 for i in insts if i.opcode.startswith("LDG") and i.width_bytes() == 16),
            "bar": sum(1 for i in insts if i.base == "BAR"), "n": len(insts)}
    return t, info


def estimate_case(dlc, name, arch, verbose=False):
    case = CASES[name]
    with tempfile.TemporaryDirectory() as d:
        emit_arch = case.get("emit_arch", arch)
        r = subprocess.run([dlc, "optimize", str(GRAPHS / case["graph"]), "--arch", emit_arch, "-o", d],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{name} {arch}: dlc-egg optimize failed:\n{r.stderr}")
        manifest = json.loads((Path(d) / "manifest.json").read_text())
        source = (Path(d) / "kernels.cu").read_text()
        header = (Path(d) / "dlc_kernel.cuh").read_text()
    cubin, log = nvrtc_compile(source, header, ARCHS[arch]["gpu_arch"])
    res = ptxas_resources(log)
    sass = parse_sass(sass_text(cubin))
    launches = [s["launch"] for s in manifest["steps"] if "launch" in s]
    total, rows = 0.0, []
    for l in launches:
        k = l["kernel"]
        insts = sass[k]
        if any(i.cls == "hmma" for i in insts):
            t, info = model_tensor_kernel(arch, l, res[k], insts, case["work"], verbose)
        else:
            t, info = model_stream_kernel(arch, l, res[k], insts, case["work"], case["bytes"])
        info["template"] = l["template"]
        info["plan"] = f"{l['plan']['tile']} st{l['plan'].get('stages')} " \
                       f"{list(l['plan']['algo_choice'].values())[0]}"
        info["predicted_us"] = l["predicted_us"]
        total += t
        rows.append((k, t, info))
    total += LAUNCH_US * 1e-6 * len(launches)
    lib, rate = case["ref"][arch]
    ref_s = case["flops"] / rate if "flops" in case else case["bytes"] / rate
    return {"case": name, "arch": arch, "est_s": total, "ref_lib": lib, "ref_s": ref_s,
            "ratio": ref_s / total, "target": case["target"], "kernels": rows,
            "flops": case.get("flops"), "bytes": case.get("bytes")}


def describe(r):
    lines = []
    for k, t, info in r["kernels"]:
        if "mix" in info:
            m = info["mix"]
            p = info["parts"]
            lines.append(
                f"  {k} [{info['template']} {info['plan']}]: {info['regs']} regs, "
                f"{info['spill']} B spill, {info['occ']} CTA/SM, {info['ctas']} CTAs, "
                f"iters/CTA {info['iters'][0]}..{info['iters'][1]}")
            lines.append(
                f"    loop: {m['n']} instr, HMMA {m['hmma']}, LDSM {m['ldsm']}, LDGSTS "
                f"{m['ldgsts']}, LDS/STS {m['lds_sts']}, LDG {m['ldg']}, BAR {m['bar']}, int "
                f"{m['int']}, fp32 {m['fp']}, MUFU {m['mufu']}, SHFL {m['shfl']}, "
                f"wait_group {m['depbar']}")
            lines.append("    round cycles: " + ", ".join(
                f"{n} {v:.0f}" for n, v in p.items()) + f" -> {info['bound']}")
        else:
            lines.append(
                f"  {k} [{info['template']} {info['plan']}]: {info['regs']} regs, "
                f"{info['spill']} B spill, {info['occ']} CTA/SM, {info['n']} instr, LDG.128 "
                f"{info['ldg128']}, BAR {info['bar']}, {info['in_flight_B'] / 1e6:.2f} MB in "
                f"flight -> {info['bw_TBps']:.2f} TB/s, mem {info['t_mem'] * 1e6:.1f} us, issue "
                f"{info['t_issue'] * 1e6:.1f} us -> {info['bound']}")
    return "\n".join(lines)


def table(results):
    out = ["| case | arch | dlc-egg kernel(s): plan, regs, CTA/SM, bound | est. µs | TFLOP/s or TB/s "
           "| reference | ref µs | est. ratio | target |",
           "| --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: |"]
    for r in results:
        ks = "; ".join(f"{info['plan']}, {info['regs']} regs, {info['occ']}/SM, {info['bound']}"
                       for _, _, info in r["kernels"])
        rate = f"{r['flops'] / r['est_s'] / 1e12:.0f} TF" if r["flops"] else \
            f"{r['bytes'] / r['est_s'] / 1e12:.2f} TB/s"
        ok = "meets" if r["ratio"] >= r["target"] else "misses"
        out.append(f"| {r['case']} | {ARCHS[r['arch']]['name']} | {ks} | {r['est_s'] * 1e6:.1f} | "
                   f"{rate} | {r['ref_lib']} (public figure) | {r['ref_s'] * 1e6:.1f} | "
                   f"{r['ratio']:.2f}x | {r['target']}x ({ok}) |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dlc", default=os.environ.get("DLC_EGG",
                                                    str(REPO / "target" / "release" / "dlc-egg")))
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--archs", default="sm80,sm90")
    ap.add_argument("--markdown", help="also write the table and the details to FILE")
    ap.add_argument("--verbose", action="store_true", help="print each kernel's model inputs")
    ap.add_argument("--json", action="store_true",
                    help="print one JSON object per (case, arch) instead of the table")
    args = ap.parse_args()
    if not Path(args.dlc).exists():
        sys.stderr.write(f"estimate.py: no dlc-egg binary at {args.dlc} (cargo build --release)\n")
        return 2
    results = []
    for name in args.cases.split(","):
        for arch in args.archs.split(","):
            if arch not in CASES[name].get("archs", ARCHS):
                continue
            r = estimate_case(args.dlc, name, arch, args.verbose)
            results.append(r)
            if args.verbose:
                print(f"{name} {arch}: est {r['est_s'] * 1e6:.1f} us, ref {r['ref_s'] * 1e6:.1f} us"
                      f" -> {r['ratio']:.2f}x\n{describe(r)}")
    if args.json:
        for r in results:
            print(json.dumps({
                "case": r["case"], "arch": r["arch"], "est_us": r["est_s"] * 1e6,
                "ref_us": r["ref_s"] * 1e6, "ratio": r["ratio"], "target": r["target"],
                "kernels": [{"kernel": k, "us": t * 1e6, "bound": i["bound"], "regs": i["regs"],
                             "occupancy": i["occ"],
                             "loop": {kk: v for kk, v in i.get("mix", {}).items()}}
                            for k, t, i in r["kernels"]]}))
        return 0
    t = table(results)
    print(t)
    if args.markdown:
        details = "\n\n".join(f"{r['case']} {r['arch']}:\n{describe(r)}" for r in results)
        Path(args.markdown).write_text(t + "\n\n```\n" + details + "\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
