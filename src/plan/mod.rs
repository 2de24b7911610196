//! Schedule Plans (seed 001 §8): how one kernel runs — tile, pipeline stages, axis binding,
//! warp tile, caching, vector width, tail predication, epilogue, architecture, layout hints,
//! algorithm, local edges, asynchrony and barrier model — as the serde type `--dump plan`
//! prints, field for field the seed's §8.1 dump.
//!
//! [`space`] enumerates the candidate plans of a kernel template and applies the STOP
//! conditions of §11; `crate::cost` prices the survivors and keeps the fastest. [`work`] says
//! what a kernel computes (template, sizes, arithmetic, traffic), which both read.

pub mod priced;
pub mod regs;
pub mod space;
pub mod work;

use crate::target::Arch;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One kernel's schedule (seed 001 §8.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The template (`contraction`, `reduction`, `elementwise`): an addition to the seed's
    /// fields, saying which of the GPU IR skeletons the plan parameterizes.
    pub template: String,
    /// CTA tile: `[BM, BN, BK]` for a contraction, `[rows per block, threads per row]` for a
    /// reduction, `[elements per block]` for an elementwise kernel.
    pub tile: Vec<u64>,
    /// Shared-memory pipeline depth (1: no shared-memory staging).
    pub stages: u32,
    /// Loop axis → hardware index (`m.o → block.y`).
    pub bind: BTreeMap<String, String>,
    /// Per-warp tile (`"32x32"`; a GEMV warp's lanes, `"8x4k"`: 8 columns × 4 `K` indices), or
    /// `"-"` when the template has no warp tile.
    pub warp_tile: String,
    /// Tensors staged in shared memory.
    pub cache: Vec<Cache>,
    /// Vector width of global loads, and of the stores unless `layout_hints.C_store` is
    /// `"fragments"`.
    pub vectorize: Vectorize,
    /// Axes whose tails are predicated.
    pub predicate_tail: Vec<String>,
    /// Ops applied to the accumulator in registers.
    pub epilogue: Vec<String>,
    /// The architecture the plan is for.
    pub arch: Arch,
    /// Swizzles and output strides (`A_swizzle`, `B_swizzle`: `"xor_128b"` or `"none"`, see
    /// [`space::swizzle_hint`]; `C_stride`; `C_store: "fragments"` when a tensor-core epilogue
    /// stores element by element instead of staged 16-byte chunks).
    pub layout_hints: BTreeMap<String, serde_json::Value>,
    /// Implementation per pattern (`{"matmul": "mma_sync"}`).
    pub algo_choice: BTreeMap<String, String>,
    /// Values passed between stages without global memory.
    pub local_edges: Vec<LocalEdge>,
    #[serde(rename = "async")]
    /// Asynchronous copies and their pipelining.
    pub async_: AsyncPlan,
    /// `cp_async_group` (SM80), `mbarrier` (SM90) or `syncthreads` (synchronous loads).
    pub barrier_model: String,
    /// CTAs that share one contraction tile, each over its own share of the `K` steps
    /// (split-K; 1, the default, omitted from the dump: none). Their partial tiles meet in a
    /// global workspace and the last CTA of a tile sums them in split order (deterministic)
    /// before the epilogue.
    #[serde(default = "one_split", skip_serializing_if = "is_one_split")]
    pub split_k: u32,
}

fn one_split() -> u32 {
    1
}

fn is_one_split(s: &u32) -> bool {
    *s == 1
}

/// `{"tensor", "where", "at", "pingpong"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cache {
    /// The staged tensor (`A`, `B`, `Q`, …).
    pub tensor: String,
    #[serde(rename = "where")]
    /// Where it is staged: `smem` (shared memory) or `reg` (registers).
    pub where_: String,
    /// The loop level it is loaded at (`k.i`: every k-iteration; `n.o`: every key tile).
    pub at: String,
    /// Double-buffered (one tile loads while the other is used).
    pub pingpong: bool,
}

/// `{"axis", "width"}`: width in elements.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vectorize {
    /// The axis whose elements are loaded together (the fastest axis).
    pub axis: String,
    /// Elements per access.
    pub width: u32,
}

/// `{"from", "to", "buffer", "depth"?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalEdge {
    /// The producing stage (`sum_k`, `producer`).
    pub from: String,
    /// The consuming stage (the first epilogue op, the consumer).
    pub to: String,
    /// Where the value lives: `reg` or `smem`.
    pub buffer: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Tiles in flight, when the edge is pipelined.
    pub depth: Option<u32>,
}

/// `{"enable", "prefetch_depth", "epilogue_overlap"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AsyncPlan {
    /// Loads are asynchronous (`cp.async` / TMA).
    pub enable: bool,
    /// Tiles loaded ahead of use (`stages − 1`).
    pub prefetch_depth: u32,
    /// The epilogue overlaps the next tile's loads.
    pub epilogue_overlap: bool,
}

impl AsyncPlan {
    /// Synchronous loads: no prefetch, no epilogue overlap (the row, reduce, elementwise and
    /// scan templates).
    pub fn synchronous() -> AsyncPlan {
        AsyncPlan {
            enable: false,
            prefetch_depth: 0,
            epilogue_overlap: false,
        }
    }
}

impl Plan {
    /// One line: `contraction mma_sync [64,64,32] stages=2 warp=32x32 vec=8 async`.
    pub fn summary(&self) -> String {
        let algo: Vec<&str> = self.algo_choice.values().map(|s| s.as_str()).collect();
        let tile: Vec<String> = self.tile.iter().map(|t| t.to_string()).collect();
        format!(
            "{} {} [{}] stages={} warp={} vec={}{}{}",
            self.template,
            algo.join("+"),
            tile.join(","),
            self.stages,
            self.warp_tile,
            self.vectorize.width,
            if self.async_.enable { " async" } else { "" },
            if self.split_k > 1 {
                format!(" split_k={}", self.split_k)
            } else {
                String::new()
            }
        )
    }
}
