//! Target descriptions (`dlc-egg optimize --arch sm80|sm90`): the machine numbers the cost model
//! (`crate::cost`) and the plan space (`crate::plan`) read.
//!
//! Datasheet figures are quoted with their source. Figures no datasheet gives (the L2 bandwidth
//! of H100, the launch gap) are marked *assumed* and say what they are based on; `bench/gpu`
//! measures them when a GPU is lent.

use serde::{Deserialize, Serialize};

/// Global memory of the GPUs this compiler plans for (A100-SXM4-80GB, H100-SXM5-80GB: 80 GiB at
/// most), bytes.
pub const DEVICE_MEMORY_BYTES: u128 = 80 << 30;

/// A GPU architecture the compiler targets.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    /// Ampere, compute capability 8.0 (`cp.async`, `ldmatrix`, `mma.sync`).
    Sm80,
    /// Hopper, compute capability 9.0 (adds TMA, `mbarrier` transaction counts, `wgmma`).
    Sm90,
}

impl Arch {
    /// `"sm80"` / `"sm90"`.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm80 => "sm80",
            Arch::Sm90 => "sm90",
        }
    }

    /// The default target of this architecture.
    pub fn target(self) -> Target {
        match self {
            Arch::Sm80 => Target::a100_sxm4_80gb(),
            Arch::Sm90 => Target::h100_sxm5(),
        }
    }
}

impl std::str::FromStr for Arch {
    type Err = String;
    fn from_str(s: &str) -> Result<Arch, String> {
        match s {
            "sm80" => Ok(Arch::Sm80),
            "sm90" | "sm90a" => Ok(Arch::Sm90),
            _ => Err(format!("unknown arch `{s}` (expected sm80 or sm90)")),
        }
    }
}

/// One GPU: throughputs, memory system, per-SM resources and launch overhead.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Target {
    /// The architecture (`sm80`, `sm90`).
    pub arch: Arch,
    /// Product name.
    pub name: &'static str,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// Clock in GHz at which the per-clock figures below give the quoted peaks.
    pub clock_ghz: f64,
    /// Dense fp16/bf16 tensor-core peak with fp32 accumulation, FLOP/s.
    pub tensor_flops: f64,
    /// fp32 (CUDA-core) peak, FLOP/s (an FMA counts 2).
    pub fp32_flops: f64,
    /// Special-function unit results per clock per SM (`ex2`, `lg2`, `rsqrt`, `rcp`, …).
    pub sfu_per_clock_per_sm: u32,
    /// DRAM bandwidth, bytes/s.
    pub dram_bw: f64,
    /// L2 read bandwidth, bytes/s.
    pub l2_bw: f64,
    /// L2 capacity, bytes.
    pub l2_bytes: u64,
    /// Shared memory per SM, bytes.
    pub smem_per_sm: u32,
    /// Largest shared-memory allocation of one block (opt-in), bytes.
    pub smem_per_block: u32,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// Registers one thread may use.
    pub regs_per_thread: u32,
    /// Resident threads per SM.
    pub threads_per_sm: u32,
    /// Resident blocks per SM.
    pub blocks_per_sm: u32,
    /// Time from one kernel's end to the next dependent kernel's start, seconds.
    pub launch_s: f64,
}

impl Target {
    /// NVIDIA A100-SXM4-80GB. Sources: NVIDIA A100 datasheet (2021) for the peaks, bandwidth and
    /// memory; the NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020) for SMs, clock, L2,
    /// shared memory and the L2 bandwidth (5120 B/clk); CUDA C Programming Guide, "Compute
    /// Capabilities" table, for the per-SM limits of compute capability 8.0.
    pub fn a100_sxm4_80gb() -> Target {
        Target {
            arch: Arch::Sm80,
            name: "A100-SXM4-80GB",
            sms: 108,
            clock_ghz: 1.41,
            tensor_flops: 312e12,
            fp32_flops: 19.5e12,
            sfu_per_clock_per_sm: 16,
            dram_bw: 2039e9,
            l2_bw: 5120.0 * 1.41e9,
            l2_bytes: 40 * 1024 * 1024,
            smem_per_sm: 164 * 1024,
            smem_per_block: 163 * 1024,
            regs_per_sm: 65536,
            regs_per_thread: 255,
            threads_per_sm: 2048,
            blocks_per_sm: 32,
            launch_s: LAUNCH_S,
        }
    }

    /// NVIDIA H100-SXM5-80GB. Sources: NVIDIA H100 datasheet (2023) for the dense peaks (989.4
    /// TFLOP/s fp16 tensor, 66.9 TFLOP/s fp32) and 3.35 TB/s; the NVIDIA H100 Tensor Core GPU
    /// Architecture whitepaper (2022) for 132 SMs, 50 MB L2 and 228 KB shared memory per SM; CUDA
    /// C Programming Guide for the compute capability 9.0 limits. The clock is the one at which
    /// 132 SMs × 4096 dense fp16 FLOP/clk give the datasheet peak. *Assumed*: the L2 bandwidth,
    /// A100's 5120 B/clk at this clock (no datasheet figure).
    pub fn h100_sxm5() -> Target {
        Target {
            arch: Arch::Sm90,
            name: "H100-SXM5-80GB",
            sms: 132,
            clock_ghz: 1.83,
            tensor_flops: 989.4e12,
            fp32_flops: 66.9e12,
            sfu_per_clock_per_sm: 16,
            dram_bw: 3.35e12,
            l2_bw: 5120.0 * 1.83e9,
            l2_bytes: 50 * 1024 * 1024,
            smem_per_sm: 228 * 1024,
            smem_per_block: 227 * 1024,
            regs_per_sm: 65536,
            regs_per_thread: 255,
            threads_per_sm: 2048,
            blocks_per_sm: 32,
            launch_s: LAUNCH_S,
        }
    }

    /// Special-function results per second on the whole GPU.
    pub fn sfu_ops(&self) -> f64 {
        self.sfu_per_clock_per_sm as f64 * self.sms as f64 * self.clock_ghz * 1e9
    }
}

/// *Assumed* gap between dependent kernels, 1.5 µs: kernels replayed from a CUDA graph (seed 001
/// §12 captures one per shape cluster) start about 1–2 µs apart on A100 and H100 in published
/// Nsight Systems traces; no datasheet gives it. It is what a fusion that removes a kernel saves
/// besides bytes.
pub const LAUNCH_S: f64 = 1.5e-6;

/// Issue cost of one global load (an L1 hit) in CUDA-core operation slots: an SM issues 128
/// fp32 lanes per cycle but serves 32 load lanes (A100 and H100: four sub-partitions of 32
/// FP32 lanes; L1 returns 128 B per cycle). *Assumed* from the architecture whitepapers.
pub const LOAD_ISSUE: f64 = 4.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_clock_figures_match_the_quoted_peaks() {
        // H100: 4096 dense fp16 FLOP per clock per SM (512 FMA per tensor core × 4, ×2).
        let h = Target::h100_sxm5();
        let per_clock = h.tensor_flops / (h.sms as f64 * h.clock_ghz * 1e9);
        assert!((per_clock - 4096.0).abs() < 4.0, "{per_clock}");
        // A100: 2048 dense fp16 FLOP per clock per SM (256 FMA per tensor core × 4, ×2).
        let a = Target::a100_sxm4_80gb();
        let per_clock = a.tensor_flops / (a.sms as f64 * a.clock_ghz * 1e9);
        assert!((per_clock - 2048.0).abs() < 4.0, "{per_clock}");
    }

    #[test]
    fn arch_names_round_trip() {
        for a in [Arch::Sm80, Arch::Sm90] {
            assert_eq!(a.name().parse::<Arch>(), Ok(a));
            assert_eq!(a.target().arch, a);
        }
        assert!("sm70".parse::<Arch>().is_err());
    }
}
