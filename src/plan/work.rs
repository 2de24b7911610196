//! What a kernel computes, read off its RB-SSA region: the template it runs on, the sizes the
//! template is parameterized by, its arithmetic split by execution unit, and its traffic.
//!
//! Templates (seed 001 §9, issue 5's list):
//! - **contraction**: one `reduce(sum, K, mul(a, b))` — the *main* contraction, the largest
//!   when there are several, and possibly a second one over the same `M`, `N` and batch axes
//!   that the tile sums in accumulators of its own ([`Gemm::second`]) — with a prologue (what
//!   its operands compute before the product: guards, casts, producers inlined at the reads)
//!   and an epilogue (every let that reads the accumulator). Axes are classified from the
//!   operands' index maps: `M` = iters only `a` reads, `N` = iters only `b` reads, batch = iters
//!   both read, `K` = the reduce axes. A conv is the same template (implicit GEMM): its input
//!   map mixes an output axis with a `K` axis.
//!   An epilogue reducing over `M` or `N` (a softmax or a norm of the product's rows) needs the
//!   whole row in one block, or one pass per dependent reduction ([`Gemm::row_passes`]).
//! - **reduction**: a row reduction (softmax, norms, pooling windows), rows × length.
//! - **compute_at**: a window reduction whose body embeds a producer reduction (Conv → Pool
//!   fused by compute-at, seed 003): consumer points × window × the producer's fold
//!   (`compute_at`). When the producer is a contraction of inputs, the same region is also a
//!   *pooled tile* ([`ComputeAtWork::tiled`], `pooled`): a contraction whose innermost `M`
//!   axes are the window's, the windows folded by the tile's epilogue; both are priced.
//! - **scan**: a region with a `scan` let (seed 004's cumulative ops): `lines` independent
//!   lines of `len` elements, each walked once by one block (`templates::scan`): O(n) work,
//!   bytes = inputs + outputs.
//! - **elementwise**: everything else, one thread per element group.
//!
//! A region whose main contraction reads another contraction in its operands (attention
//! spelled as one region: P·V whose P is QKᵀ's softmax) runs on no template: its prologue would
//! need a contraction per loaded tile. [`analyze`] says so ([`WorkError::NestedContraction`]);
//! the two-region form (§6.8.3) is what the attention template implements.
//!
//! Counting: a `reduce` let is computed once per point of its free iters (once per row), its
//! body once per point × its extents; every other let once per output element — templates map
//! threads to output elements and do not share a loop-invariant value between threads, so an
//! elementwise producer inlined under a broadcast is recomputed per use. Operand prologue lets
//! of a contraction are counted once per operand element; a tiled kernel recomputes them each
//! time a tile is loaded again, which the roofline adds per plan ([`Gemm::prologue`]).

mod compute_at;
mod contraction;
mod exprs;
mod fold_traffic;
mod footprint;
mod pooled;
#[cfg(test)]
mod pooled_tests;
mod refolds;
mod shapes;
mod strides;
#[cfg(test)]
mod summed_tests;
pub use compute_at::ComputeAtWork;
use exprs::*;
pub use fold_traffic::{FoldRead, FoldTraffic, Window, L1_WINDOW_BYTES};
pub use pooled::{whole_window_rows, PoolTile, MAX_WINDOW};
pub use refolds::{Refold, Refolds};
// the per-op cost table, for the CPU backend's own count (`crate::cpu::work`)
pub use exprs::node_cost;
pub use strides::LaneStrides;

/// The sizes a work analysis reads: the number of elements of a shape under the symbol values
/// the kernel is priced for (`crate::cost::CostModel`).
pub trait Sizes {
    /// Number of elements of `shape` (saturating).
    fn numel(&self, shape: &[Dim]) -> u64;
}

use crate::ir::dim::Dim;
use crate::ir::region::verify::{children, reduce_extents, verify};
use crate::ir::region::{AxisExpr, Expr, Reduce, Region};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Arithmetic by execution unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Ops {
    /// fp16/bf16 multiply-accumulate work on tensor cores, FLOP (an FMA counts 2).
    pub tensor: f64,
    /// CUDA-core operations (adds, multiplies, compares, selects, conversions; an FMA counts 2).
    pub simt: f64,
    /// Special-function unit operations (`ex2`, `lg2`, `rsqrt`, `rcp`, …).
    pub sfu: f64,
}

impl Ops {
    /// Adds `times` evaluations of `o`.
    pub fn add(&mut self, o: Ops, times: f64) {
        self.tensor += o.tensor * times;
        self.simt += o.simt * times;
        self.sfu += o.sfu * times;
    }

    /// All operations.
    pub fn total(&self) -> f64 {
        self.tensor + self.simt + self.sfu
    }
}

/// The role of an input in a contraction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Read by the main contraction's first operand (`M × K`).
    A,
    /// Read by its second operand (`K × N`).
    B,
    /// Read elsewhere (bias, residual, a norm's weights), once per output tile.
    Other,
}

/// One input of the kernel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InputUse {
    /// The input's name (a region input tensor).
    pub name: String,
    /// Bytes of the part of the input the reads touch (what DRAM serves once): the whole
    /// input unless the reads cover only a box of it (a slice).
    pub bytes: f64,
    /// Element size, bytes.
    pub elem_bytes: u64,
    /// Which operand of the contraction reads it.
    pub role: Role,
    /// Whether every read walks the input's last dimension with the kernel's fastest axis (or
    /// does not move along it): coalesced. Else the template stages it through shared memory
    /// (the layout penalty).
    pub contiguous: bool,
    /// Of a contraction's input: the elements between its reads at consecutive indices of the
    /// innermost `K` and `N` axes (what a GEMV warp's sectors per request follow from).
    #[serde(skip)]
    pub strides: LaneStrides,
}

/// How a contraction is implemented.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// A plain matrix product (`M × K` by `K × N`).
    Matmul,
    /// A batched matrix product (batch axes read by both operands and the output).
    BatchedMatmul,
    /// Implicit GEMM: an operand's index map mixes an output axis and a `K` axis.
    Conv,
}

/// The GEMM view of a contraction kernel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gemm {
    /// The contraction's form.
    pub pattern: Pattern,
    /// Product of the batch extents (1 without batch axes).
    pub batch: f64,
    /// Product of the output row extents.
    pub m: f64,
    /// Product of the output column extents.
    pub n: f64,
    /// Product of the reduced extents: the main contraction's, plus the [`Gemm::second`]'s
    /// when there is one (the template walks both in one `K` loop of the same tile).
    pub k: f64,
    /// A second `Σ a·b` over the same output tile (a projection shortcut's 1×1 convolution
    /// beside a residual block's last convolution: `conv(h) + b + conv₁ₓ₁(x) + b'`): the let
    /// it defines. The SIMT template accumulates it in its own registers after the main
    /// contraction's `K` steps, so the epilogue sees both sums exactly as computed apart
    /// (`Cx::second_contraction`); it has no tensor-core or GEMV form.
    pub second: Option<String>,
    /// The [`Gemm::second`] contraction's reduced extent (its share of `k`; 0 without one).
    pub k_second: f64,
    /// Element bytes of the operands as multiplied (after prologue casts).
    pub a_elem: u64,
    /// Element bytes of `B` as multiplied.
    pub b_elem: u64,
    /// Both operands fp16 or both bf16: the product can run on tensor cores.
    pub tensor_cores: bool,
    /// Prologue work per element of `A` and of `B` (recomputed at every reload of a tile).
    pub prologue: [Ops; 2],
    /// The operand work a thread-per-output-point kernel (the pointwise template) does beyond
    /// the analysis's count, which prices the prologue once per operand element as a tiled
    /// kernel stages it: the operands' inline ops at every multiply-accumulate and the lets
    /// they read at every output point (`codegen::templates::applicability::as_emitted`); in
    /// `thread` the work of an operand that does not read the fastest output axis (shared by
    /// the lanes of a vectorized thread), in `lane` the rest.
    #[serde(skip)]
    pub pointwise_prologue: Refolds,
    /// 1 without a row epilogue; else 1 + the depth of the chain of reductions over `N` (or
    /// `M`) in the epilogue: the passes over the row a block makes when the row is not
    /// resident (each pass recomputes the product).
    pub row_passes: u32,
    /// The extent the row epilogue reduces over (`N` or `M`), when there is one.
    pub row_extent: Option<f64>,
    /// Names of the GEMM axes: which iters are `M`, `N`, batch, and the `K` axes.
    pub axes: GemmAxes,
    /// The epilogue's ops by name, in order (`add`, `relu`, …), for the plan.
    pub epilogue: Vec<String>,
    /// How the tensor-core template fills the `A` and `B` tiles (set from code generation's
    /// applicability, `codegen::templates::applicability::as_emitted`): what the plan space
    /// counts the held registers of.
    #[serde(skip)]
    pub fill: [Fill; 2],
    /// The tensor-core templates store the output staged through shared memory in 16-byte
    /// chunks (`codegen::templates::contraction::View::store_chunk`); `false`: element by
    /// element from the accumulator fragments (the output's contiguous run is not a multiple of
    /// 16 bytes). Set from code generation's applicability, like `fill`.
    #[serde(skip)]
    pub staged_store: bool,
    /// A pooling epilogue (the pooled tile, `pooled`): the kernel's output folds windows of the
    /// epilogue values over the innermost `M` axes, each tile holding whole windows.
    pub pool: Option<PoolTile>,
}

impl Gemm {
    /// The `M` rows a `bm`-row tile computes: `bm`, or with a [`Gemm::pool`] the rows of the
    /// whole windows it holds.
    pub fn rows_per_tile(&self, bm: u64) -> u64 {
        self.pool
            .as_ref()
            .map_or(bm, |p| whole_window_rows(bm, p.window))
    }

    /// The share of each 32-byte sector the tensor-core epilogue's stores fill: 1 when staged
    /// ([`Gemm::staged_store`]); from the fragments, 8 consecutive rows (or 4 lanes × 2
    /// columns) of `elem`-byte values per sector run: `8·elem / 32`.
    pub fn store_efficiency(&self, elem: u64) -> f64 {
        if self.staged_store {
            1.0
        } else {
            (8.0 * elem as f64 / 32.0).min(1.0)
        }
    }
}

/// How the tensor-core contraction template fills one operand tile (its registers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fill {
    /// `cp.async` 16-byte copies: no registers held.
    #[default]
    CpAsync,
    /// Loaded through registers one tile ahead (held up to `plan::space::REG_HELD_MAX`).
    Registers,
    /// A convolution's im2col gather: the whole thread's share of the tile held in registers,
    /// with the row bases hoisted out of the `K` loop.
    Gather,
    /// `cp.async` copies aligned only under a run-time test, beside the element-by-element
    /// path of the launches that fail it (both in the kernel's registers).
    CpAsyncChecked,
}

/// Which region axes form `M`, `N`, the batch and `K`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GemmAxes {
    /// The output row axes.
    pub m: Vec<String>,
    /// The output column axes.
    pub n: Vec<String>,
    /// The batch axes.
    pub batch: Vec<String>,
    /// The reduced axes.
    pub k: Vec<String>,
}

/// The template a kernel runs on, with its sizes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "template", rename_all = "snake_case")]
pub enum Shape {
    /// A tiled contraction (matrix product or implicit GEMM), with an epilogue.
    Contraction(Box<Gemm>),
    /// A cooperative row reduction (softmax, norms, sums along an axis).
    Reduction {
        /// Independent rows.
        rows: f64,
        /// Elements folded per row (all reduce axes).
        len: f64,
        /// 1 + the depth of the chain of dependent reductions (layer norm: mean, then the
        /// variance, then the normalization: 3): passes over the row when it is not resident.
        passes: u32,
        /// Only window reductions (pooling: every reduce axis also indexes with an iter).
        window: bool,
        /// The widest vector, bytes, the row template loads a row's elements with: 16 from
        /// the analysis, cut by code generation's applicability to the lanes the template
        /// keeps at the priced sizes (`codegen::templates::row::lanes`, and the vector walk the
        /// template runs under a run-time test on a symbolic row length,
        /// `codegen::templates::row::vector_guard`, where the priced length takes it).
        #[serde(skip)]
        vec_cap: u64,
        /// Emitted by the plain-reduction template (`codegen::templates::reduce`: the reduced
        /// axes are no iters, one output per row, no output pass), not the row template.
        #[serde(skip)]
        plain: bool,
    },
    /// One thread per output element, no reduction.
    Elementwise {
        /// Output elements.
        elems: f64,
    },
    /// A window reduction embedding a producer reduction at every window point (compute-at
    /// fusion, seed 003; `compute_at`).
    ComputeAt(Box<ComputeAtWork>),
    /// A prefix scan: `lines` independent lines of `len` elements (the scanned iter's extent).
    Scan {
        /// Independent lines.
        lines: f64,
        /// Elements per line (the scanned iter's extent).
        len: f64,
    },
}

impl Shape {
    /// `contraction`, `reduction` (the row template), `reduce` (the plain-reduction
    /// template), `elementwise`, `compute_at`, `scan`.
    pub fn template(&self) -> &'static str {
        match self {
            Shape::Contraction(_) => "contraction",
            Shape::Reduction { plain: true, .. } => "reduce",
            Shape::Reduction { .. } => "reduction",
            Shape::Elementwise { .. } => "elementwise",
            Shape::ComputeAt(_) => "compute_at",
            Shape::Scan { .. } => "scan",
        }
    }
}

/// What one kernel computes and moves.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelWork {
    /// The template and its sizes.
    pub shape: Shape,
    /// All arithmetic, every let counted once per point of its free iters (prologues once per
    /// operand element).
    pub ops: Ops,
    /// Every input, with its bytes and role.
    pub inputs: Vec<InputUse>,
    /// Bytes written.
    pub out_bytes: f64,
    /// Element size of the output, bytes.
    pub out_elem_bytes: u64,
    /// Output elements.
    pub out_elems: f64,
    /// Extent of the fastest (last) output axis, for vector widths.
    pub inner_extent: f64,
    /// What the pointwise template adds when a contraction runs on it
    /// (`codegen::templates::applicability::as_emitted`): every reduce let other than the main
    /// contraction (a normalization's row sums, the mean's `Σ_n Σ_k a·w`) folded again at each
    /// output point instead of once per point of its free iters. Zero for other shapes.
    pub pointwise_refolds: Refolds,
    /// The reads inside the region's folds, for what the pointwise template loads through L2
    /// when every output point folds every reduce let ([`FoldTraffic`]).
    pub fold_traffic: FoldTraffic,
}

impl KernelWork {
    /// Bytes read from global memory, each input once.
    pub fn in_bytes(&self) -> f64 {
        self.inputs.iter().map(|i| i.bytes).sum()
    }
}

/// Why a region runs on no template.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum WorkError {
    #[error("the region does not verify: {0}")]
    /// The region does not verify (always a compiler bug).
    Invalid(String),
    #[error(
        "the main contraction's operands contain another contraction (no template recomputes a \
         contraction per loaded tile; the two-region form is the attention template's)"
    )]
    /// A contraction inside another contraction's operands.
    NestedContraction,
}

/// Reads the work of `region`, sizing symbols with `sizes`.
pub fn analyze(region: &Region, sizes: &dyn Sizes) -> Result<KernelWork, WorkError> {
    let mut work = analyze_as(region, sizes, false)?
        .ok_or_else(|| WorkError::Invalid("the analysis of a region found no shape".into()))?;
    if let Shape::ComputeAt(ca) = &mut work.shape {
        // A region whose tile the analysis cannot size (an operand it cannot classify) is the
        // nest's only: the nest was analyzed above.
        ca.tiled = analyze_as(region, sizes, true).ok().flatten().map(Box::new);
    }
    Ok(work)
}

/// [`analyze`], or with `pooled` the region's pooled tile (`pooled`; `None`: it has none).
fn analyze_as(
    region: &Region,
    sizes: &dyn Sizes,
    pooled: bool,
) -> Result<Option<KernelWork>, WorkError> {
    let checked = verify(region).map_err(|e| WorkError::Invalid(e.to_string()))?;
    let size = |d: &Dim| sizes.numel(std::slice::from_ref(d)) as f64;
    let iters: Vec<(String, f64)> = region
        .iters
        .iter()
        .zip(&checked.iter_sizes)
        .map(|(i, d)| (i.name.clone(), size(d)))
        .collect();
    let mut cx = Cx {
        r: region,
        iter_sizes: &checked.iter_sizes,
        sizes,
        lets: BTreeMap::new(),
        window: Vec::new(),
    };
    for (l, free) in region.lets.iter().zip(&checked.let_free) {
        let free_names: BTreeSet<String> = free.iter().map(|i| iters[*i].0.clone()).collect();
        let evals: f64 = free.iter().map(|i| iters[*i].1).product();
        cx.lets.insert(
            l.name.clone(),
            LetInfo {
                expr: &l.expr,
                free: free_names,
                evals,
            },
        );
    }
    // Arithmetic of every let: a reduction once per point of its free iters (per row), any
    // other let once per output element (a thread computes its element's lets; templates do
    // not share loop-invariant values between threads). The contraction template corrects its
    // prologue lets below.
    let out_elems: f64 = iters.iter().map(|(_, s)| *s).product();
    let mut ops = Ops::default();
    for l in &region.lets {
        ops.add(
            cx.expr_ops(&l.expr, &l.name, None)?,
            cx.evals(&l.name, out_elems),
        );
    }
    let out_elem_bytes = region
        .outputs
        .iter()
        .map(|o| o.dtype.size_bytes())
        .max()
        .unwrap_or(4);
    let out_bytes: f64 = region
        .outputs
        .iter()
        .map(|o| out_elems * o.dtype.size_bytes() as f64)
        .sum();
    let fast_axis = iters.last().map(|(n, _)| n.clone());
    let inner_extent = iters.last().map(|(_, s)| *s).unwrap_or(1.0);

    let pooled = match pooled {
        true => match cx.pooled_contraction()? {
            Some(p) => Some(p),
            None => return Ok(None),
        },
        false => None,
    };
    // A pooled tile's `M` rows include the window axes, innermost.
    let mut gemm_iters = iters.clone();
    if let Some(p) = &pooled {
        gemm_iters.extend(p.extents.iter().cloned());
        cx.window = p.pool.axes.clone();
    }
    // A contraction whose operand embeds another (a depthwise convolution over an expanding
    // 1×1 convolution recomputed at each of its taps, compute-at) has no tile to stage: it is
    // the compute-at nest's, when there is one.
    let (main, compute_at) = match &pooled {
        Some(p) => (Some(p.mc.clone()), None),
        None => match cx.main_contraction() {
            Ok(Some(mc)) => (Some(mc), None),
            Ok(None) => (None, cx.compute_at_shape()?),
            Err(WorkError::NestedContraction) => match cx.compute_at_shape()? {
                Some(ca) => (None, Some(ca)),
                None => return Err(WorkError::NestedContraction),
            },
            Err(e) => return Err(e),
        },
    };
    let mut roles: BTreeMap<String, Role> = BTreeMap::new();
    let mut summed: Vec<String> = Vec::new();
    let shape = match &main {
        Some(mc) => {
            let second = match pooled {
                Some(_) => None,
                None => cx.second_contraction(mc)?,
            };
            let mut g = cx.gemm(mc, second.as_ref(), &gemm_iters, &mut ops)?;
            if let Some(p) = &pooled {
                // The window axes must be the innermost rows (each window a run of rows).
                if !g.axes.m.ends_with(&p.pool.axes) {
                    return Ok(None);
                }
                g.pool = Some(p.pool.clone());
                g.tensor_cores = false;
                g.staged_store = false;
            }
            let parts = std::iter::once(mc).chain(second.as_ref().filter(|_| g.second.is_some()));
            for part in parts {
                summed.push(part.name.clone());
                for (side, role) in [(&part.a, Role::A), (&part.b, Role::B)] {
                    let mut names = BTreeSet::new();
                    cx.inputs_read(side, &mut names, &mut BTreeSet::new());
                    for n in names {
                        roles.entry(n).or_insert(role);
                    }
                }
            }
            Shape::Contraction(Box::new(g))
        }
        None => match compute_at {
            Some(ca) => Shape::ComputeAt(Box::new(ca)),
            None => cx.scan_shape(&iters, out_elems).unwrap_or_else(|| {
                cx.reduction_shape()
                    .unwrap_or(Shape::Elementwise { elems: out_elems })
            }),
        },
    };
    let pointwise_refolds = if summed.is_empty() || pooled.is_some() {
        Refolds::default()
    } else {
        cx.refolds(&summed, out_elems, fast_axis.as_deref())?
    };
    let lanes = match (&shape, &main) {
        (Shape::Contraction(g), Some(mc)) => {
            let size_of = |n: &str| {
                gemm_iters
                    .iter()
                    .find(|(i, _)| i == n)
                    .map_or(1.0, |(_, s)| *s)
            };
            cx.lane_axes(g, &cx.extents(mc.red, &mc.name)?, &size_of)
        }
        _ => [None, None],
    };
    let inputs = cx.input_uses(&shape, fast_axis, &lanes, &roles);
    Ok(Some(KernelWork {
        shape,
        ops,
        inputs,
        out_bytes,
        out_elem_bytes,
        out_elems,
        inner_extent,
        pointwise_refolds,
        fold_traffic: cx.fold_traffic()?,
    }))
}

struct LetInfo<'a> {
    expr: &'a Expr,
    free: BTreeSet<String>,
    evals: f64,
}

/// The main contraction: the let it defines and its two operands.
#[derive(Clone)]
struct MainContraction<'a> {
    name: String,
    red: &'a Reduce,
    a: &'a Expr,
    b: &'a Expr,
}

struct Cx<'a> {
    r: &'a Region,
    iter_sizes: &'a [Dim],
    sizes: &'a dyn Sizes,
    lets: BTreeMap<String, LetInfo<'a>>,
    /// The window axes of a pooled tile (`pooled`), which the GEMM view counts as axes.
    window: Vec<String>,
}

impl<'a> Cx<'a> {
    /// How often the let `name` is computed: a reduction once per point of its free iters,
    /// anything else once per output element.
    fn evals(&self, name: &str, out_elems: f64) -> f64 {
        match self.lets[name].expr {
            Expr::Reduce(_) => self.lets[name].evals,
            _ => out_elems,
        }
    }

    fn size(&self, d: &Dim) -> f64 {
        self.sizes.numel(std::slice::from_ref(d)) as f64
    }

    fn extents(&self, red: &Reduce, at: &str) -> Result<Vec<f64>, WorkError> {
        let ext = reduce_extents(self.r, red, self.iter_sizes, at)
            .map_err(|e| WorkError::Invalid(e.to_string()))?;
        Ok(ext.iter().map(|d| self.size(d)).collect())
    }

    /// Ops of one evaluation of `e` (reductions: their whole fold). With `folds` (the axes of
    /// the reductions around `e`, `Some(&[])` at a refolded let's root) as the pointwise
    /// template folds it at an output point: the lets a fold recomputes at every step
    /// ([`Self::refolded_let`]) with their own ops; without, a let read costs nothing here.
    fn expr_ops(&self, e: &Expr, at: &str, folds: Option<&[String]>) -> Result<Ops, WorkError> {
        let mut o = Ops::default();
        match e {
            Expr::Reduce(red) => {
                let n: f64 = self.extents(red, at)?.iter().product();
                let inner = folds.map(|f| [f, &red.axes].concat());
                let mut body = self.expr_ops(&red.body, at, inner.as_deref())?;
                if let Some((x, y)) = product_operands(red) {
                    if half_pair(self, x, y) {
                        body.simt -= 1.0; // the multiply
                        body.tensor += 2.0; // multiply and add on a tensor core
                        o.add(body, n);
                        return Ok(o);
                    }
                }
                body.simt += 1.0; // the accumulation
                o.add(body, n);
                return Ok(o);
            }
            _ => {
                if let Some((name, l)) = self.refolded_let(e, folds) {
                    return self.expr_ops(l.expr, name, folds);
                }
                let (simt, sfu) = node_cost(e);
                o.simt += simt;
                o.sfu += sfu;
            }
        }
        for c in children(e) {
            o.add(self.expr_ops(c, at, folds)?, 1.0);
        }
        Ok(o)
    }

    fn reads_input(&self, e: &Expr) -> bool {
        let mut names = BTreeSet::new();
        self.inputs_read(e, &mut names, &mut BTreeSet::new());
        !names.is_empty()
    }

    /// Inputs `e` reads, through lets.
    fn inputs_read(&self, e: &Expr, out: &mut BTreeSet<String>, seen: &mut BTreeSet<String>) {
        match e {
            Expr::Read { tensor, .. } | Expr::Gather { tensor, .. } => {
                out.insert(tensor.clone());
            }
            Expr::Let(n) if seen.insert(n.clone()) => {
                if let Some(l) = self.lets.get(n) {
                    self.inputs_read(l.expr, out, seen);
                }
            }
            _ => {}
        }
        if let Expr::Reduce(red) = e {
            self.inputs_read(&red.body, out, seen);
        }
        for c in children(e) {
            self.inputs_read(c, out, seen);
        }
    }

    fn contains_contraction(&self, e: &Expr, seen: &mut BTreeSet<String>) -> bool {
        match e {
            Expr::Reduce(red) => {
                if let Some((a, b)) = product_operands(red) {
                    if self.reads_input(a) && self.reads_input(b) {
                        return true;
                    }
                }
                self.contains_contraction(&red.body, seen)
            }
            Expr::Let(n) => {
                seen.insert(n.clone())
                    && self
                        .lets
                        .get(n)
                        .is_some_and(|l| self.contains_contraction(l.expr, seen))
            }
            _ => children(e)
                .into_iter()
                .any(|c| self.contains_contraction(c, seen)),
        }
    }

    /// Region axes (iters and `extra`) `e` depends on, through lets.
    fn axes_of(&self, e: &Expr, extra: &[String], out: &mut BTreeSet<String>) {
        let is_axis = |n: &str| {
            self.r.iters.iter().any(|i| i.name == n)
                || extra.iter().any(|k| k == n)
                || self.window.iter().any(|k| k == n)
        };
        let names = |a: &AxisExpr, out: &mut BTreeSet<String>| {
            a.for_each_name(&mut |n| {
                if is_axis(n) {
                    out.insert(n.to_string());
                }
            })
        };
        match e {
            Expr::Read { map, .. } | Expr::Gather { map, .. } => {
                map.iter().for_each(|a| names(a, out));
            }
            Expr::Index(a) => names(a, out),
            Expr::Select { pred, .. } => pred_axes(pred, &mut |a| names(a, out)),
            Expr::Let(n) => {
                if let Some(l) = self.lets.get(n) {
                    out.extend(l.free.iter().cloned());
                }
            }
            Expr::Reduce(red) => {
                let mut inner = BTreeSet::new();
                self.axes_of(&red.body, extra, &mut inner);
                out.extend(inner.into_iter().filter(|a| !red.axes.contains(a)));
                return;
            }
            _ => {}
        }
        for c in children(e) {
            self.axes_of(c, extra, out);
        }
    }

    /// Lets `e` reads, transitively.
    fn let_deps(&self, e: &Expr, out: &mut BTreeSet<String>) {
        if let Expr::Let(n) = e {
            if out.insert(n.clone()) {
                if let Some(l) = self.lets.get(n) {
                    self.let_deps(l.expr, out);
                }
            }
        }
        if let Expr::Reduce(red) = e {
            self.let_deps(&red.body, out);
        }
        for c in children(e) {
            self.let_deps(c, out);
        }
    }

    /// Every input's use: its bytes, role, lane strides and whether the kernel's reads of it
    /// coalesce under `shape` (`fast_axis`: the fastest output axis).
    fn input_uses(
        &self,
        shape: &Shape,
        fast_axis: Option<String>,
        lanes: &[Option<String>; 2],
        roles: &BTreeMap<String, Role>,
    ) -> Vec<InputUse> {
        // Axes a read may walk its input's last dimension with and stay coalesced: the fastest
        // output axis; a reduction's fastest reduce axis; a contraction stages its operands
        // through shared memory, so the fastest axis of each of M, N, K and the batch.
        let mut fine: Vec<String> = fast_axis.into_iter().collect();
        match shape {
            Shape::Reduction { .. } => fine.extend(self.last_reduce_axis()),
            Shape::Contraction(g) => {
                for group in [&g.axes.m, &g.axes.n, &g.axes.k, &g.axes.batch] {
                    fine.extend(group.last().cloned());
                }
            }
            Shape::Elementwise { .. } | Shape::ComputeAt(_) | Shape::Scan { .. } => {}
        }
        self.r
            .inputs
            .iter()
            .map(|i| {
                let shape: Vec<Dim> = i.memref.shape.iter().map(|s| s.0.clone()).collect();
                let mut contiguous = true;
                for l in &self.r.lets {
                    self.check_contiguous(&l.expr, &i.name, &fine, &mut contiguous);
                }
                InputUse {
                    strides: self.lane_strides(&i.name, &shape, lanes),
                    name: i.name.clone(),
                    // a sliced read (a shrink absorbed into the kernel) loads the part it reads
                    bytes: self.footprint(&i.name, &shape) * i.dtype.size_bytes() as f64,
                    elem_bytes: i.dtype.size_bytes(),
                    role: roles.get(&i.name).copied().unwrap_or(Role::Other),
                    contiguous,
                }
            })
            .collect()
    }

    /// Clears `ok` when a read of `input` indexes its last dimension with region axes none of
    /// which is in `fine` (a constant index is fine).
    fn check_contiguous(&self, e: &Expr, input: &str, fine: &[String], ok: &mut bool) {
        if let Expr::Read { tensor, map } | Expr::Gather { tensor, map, .. } = e {
            if tensor == input {
                if let Some(last) = map.last() {
                    let mut names = Vec::new();
                    last.for_each_name(&mut |n| {
                        if self.r.iters.iter().any(|i| i.name == n) || self.is_reduce_axis(n) {
                            names.push(n.to_string())
                        }
                    });
                    if !names.is_empty() && !names.iter().any(|n| fine.contains(n)) {
                        *ok = false;
                    }
                }
            }
        }
        if let Expr::Reduce(red) = e {
            self.check_contiguous(&red.body, input, fine, ok);
        }
        for c in children(e) {
            self.check_contiguous(c, input, fine, ok);
        }
    }

    fn is_reduce_axis(&self, n: &str) -> bool {
        self.r.lets.iter().any(|l| has_reduce_axis(&l.expr, n))
    }
}
