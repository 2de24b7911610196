//! What the cost model decides about a kernel, as data: its predicted [`Time`], the roofline
//! [`Estimate`] of a plan, the [`Priced`] plans and the [`PlanChoice`] (the fastest plan and
//! what it beat). `crate::cost` computes these; code generation, the manifest, `--explain` and
//! the plan cache read them, so they live here, below both (a plan is chosen once and carried
//! forward, never re-derived by its readers).

use super::work::KernelWork;
use super::Plan;
use serde::Serialize;

/// A predicted time in picoseconds: a newtype whose sums saturate (like Cranelift's e-graph
/// `Cost`) at [`Time::MAX_FINITE`] while both terms are finite, and only an unrealizable term
/// makes [`Time::INFINITY`]: a huge but legal size is priced as very slow, never as
/// unrealizable (issue 19). Ordered by value; a tie between kernels is broken by the caller's secondary
/// keys (`KernelCost`'s bytes, then launches, roundings, flops and ops).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Time(pub u64);

impl Time {
    /// Unrealizable.
    pub const INFINITY: Time = Time(u64::MAX);
    /// The largest finite time (sums of finite times stop here).
    pub const MAX_FINITE: Time = Time(u64::MAX - 1);
    /// Zero time (an empty kernel, or a node that costs nothing).
    pub const ZERO: Time = Time(0);

    /// From seconds (rounded to the picosecond; negative and NaN are 0, huge finite values
    /// saturate at [`Time::MAX_FINITE`], `+∞` is [`Time::INFINITY`]).
    pub fn from_secs(s: f64) -> Time {
        if s.is_nan() || s <= 0.0 {
            return Time::ZERO;
        }
        if s.is_infinite() {
            return Time::INFINITY;
        }
        let ps = s * 1e12;
        if ps >= Time::MAX_FINITE.0 as f64 {
            Time::MAX_FINITE
        } else {
            Time(ps.round() as u64)
        }
    }

    /// Whether this is [`Time::INFINITY`] (unrealizable).
    pub fn is_infinite(self) -> bool {
        self == Time::INFINITY
    }

    /// Saturating sum: [`Time::INFINITY`] when a term is, at most [`Time::MAX_FINITE`]
    /// otherwise.
    pub fn plus(self, o: Time) -> Time {
        if self.is_infinite() || o.is_infinite() {
            return Time::INFINITY;
        }
        Time(self.0.saturating_add(o.0).min(Time::MAX_FINITE.0))
    }

    /// Microseconds (`+∞` for [`Time::INFINITY`]).
    pub fn micros(self) -> f64 {
        if self.is_infinite() {
            f64::INFINITY
        } else {
            self.0 as f64 / 1e6
        }
    }
}

impl std::fmt::Display for Time {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_infinite() {
            write!(f, "∞")
        } else {
            write!(f, "{:.3} µs", self.micros())
        }
    }
}

/// A plan that was priced.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Priced {
    /// The schedule plan (seed 001 §8.1 form).
    pub plan: Plan,
    /// The roofline estimate under the plan, with its parts.
    pub estimate: Estimate,
    /// The estimate's time, in [`Time`] units (launch included).
    pub time: Time,
    /// Threads, registers and shared memory a block of the plan uses.
    pub resources: super::space::Resources,
    /// The knobs the plan was built from (what code generation instantiates).
    pub knobs: super::space::Knobs,
}

/// A plan that lost: to a STOP condition, or to a faster plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rejected {
    /// The plan, in its one-line `--explain` form.
    pub plan: String,
    /// Why it lost (the STOP condition, or the time it was beaten by).
    pub reason: String,
}

/// The chosen plan of a kernel and what it beat.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanChoice {
    /// What the kernel computes and moves (the plan-independent part of the price).
    pub work: KernelWork,
    /// The fastest plan.
    pub best: Priced,
    /// Priced plans in order of time (the best first), at most [`KEEP_PRICED`].
    pub runners_up: Vec<Priced>,
    /// Points of the space and how many a STOP condition rejected, by condition.
    pub space: usize,
    /// STOP conditions by name, with how many points of the space each rejected.
    pub stopped: Vec<(String, usize)>,
    /// One example of each STOP condition that fired.
    pub stop_examples: Vec<Rejected>,
}

/// Runners-up kept for `--explain`.
pub const KEEP_PRICED: usize = 3;

/// Which roof bounds a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// The arithmetic time dominates.
    Compute,
    /// The DRAM time dominates.
    Memory,
}

/// The predicted time of a kernel under a plan, and its parts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Estimate {
    /// Seconds, launch included.
    pub time_s: f64,
    /// Seconds of arithmetic at the units' peaks, divided by `occ · eff`.
    pub compute_s: f64,
    /// Seconds of DRAM (and L2) traffic, divided by `occ`.
    pub memory_s: f64,
    /// Seconds writing the output (`T_epilogue`).
    pub epilogue_s: f64,
    /// Seconds saved by overlapping the epilogue with the next loads (`overlap_gain`; 0 without
    /// `async.epilogue_overlap`).
    pub overlap_gain_s: f64,
    /// The launch overhead, seconds ([`crate::target::Target::launch_s`]).
    pub launch_s: f64,
    /// Operations as executed (tail waste, passes and prologue recomputation included).
    pub flops: f64,
    /// DRAM bytes.
    pub bytes: f64,
    /// L2 → SM bytes (tile loads).
    pub l2_bytes: f64,
    /// Which roof bounds the time.
    pub bound: Bound,
    /// `occ` of the formula, and its parts.
    pub occupancy: f64,
    /// Waves of blocks over the SMs (`⌈ctas / resident slots⌉`).
    pub waves: f64,
    /// Pipeline efficiency (`eff`).
    pub efficiency: f64,
    /// Blocks (CTAs) in the grid.
    pub ctas: f64,
}

/// One kernel of a planned program: the step it launches at and the plan it implements,
/// chosen once ([`plan_program`](crate::cost::program::plan_program)); `--explain`, `--report`, `--dump plan`, the manifest and code
/// generation all read this value.
#[derive(Clone, Debug)]
pub struct PlannedKernel {
    /// The program step the kernel launches at.
    pub step: usize,
    /// For the fused attention kernel of a pair, the pair's first step (which launches
    /// nothing); `None` for a kernel of one region.
    pub fused_first: Option<usize>,
    /// The kernel's name (the region's; `first_second` for an attention pair).
    pub name: String,
    /// Its plan, or why the cost model has none (code generation then fails; the region
    /// evaluator does not need plans).
    pub choice: Result<PlanChoice, String>,
}
