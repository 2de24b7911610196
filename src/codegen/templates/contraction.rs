//! What the tiled contraction templates share: the GEMM view of a region (which let is the
//! accumulator, its operands, the `M`, `N`, batch and `K` axes with their sizes, as the cost
//! model's work analysis classified them), and the scalar code that loads one operand element
//! of a tile and applies the epilogue at one output element.
//!
//! A region runs on a tiled template when it has exactly one `reduce(sum, K, mul(a, b))` in
//! fp32 at the top level, no other reduction anywhere (the epilogue reduces nothing: softmax
//! and norm epilogues run on the row template), and every iter is an `M`, `N` or batch axis —
//! or, on the SIMT template, a second such sum over the same tile ([`View::second`]), or the
//! contraction inside a window reduction whose axes are the innermost `M` axes, which the
//! epilogue folds ([`View::pool`], `super::pooled`).
//! Operand prologues (guards of a padded conv, casts, producers inlined at the reads) are
//! computed while a tile is loaded, tails are predicated to 0, so any size works.

use super::super::cexpr;
use super::super::gpu::Stmt;
use super::super::scalar::Emitter;
use super::super::CodegenError;
use super::{bind_flat, store_yields, yield_output};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::verify::{children, first_reduce, reduces_in};
use crate::ir::region::{BinaryFn, Expr, Reduce, Region};
use crate::ir::tiny::ReduceOp;
use crate::plan::space::RASTER_GROUP;
use crate::plan::work::{KernelWork, Shape};

/// The `grid.y` and `grid.z` limit.
const GRID_YZ_LIMIT: i64 = 65535;

/// Named axes with their sizes.
#[derive(Clone, Debug)]
pub struct Axes {
    /// Axis names (region iters or reduce axes), outermost first.
    pub names: Vec<String>,
    /// Their extents, in the same order.
    pub sizes: Vec<Dim>,
}

impl Axes {
    /// The product of the sizes.
    pub fn extent(&self) -> Dim {
        Dim::product(&self.sizes)
    }

    /// The sizes as C.
    pub fn c_sizes(&self) -> Vec<String> {
        self.sizes.iter().map(cexpr::dim).collect()
    }
}

/// The GEMM view of a contraction region.
#[derive(Clone, Debug)]
pub struct View<'r> {
    /// The accumulator's let.
    pub acc: String,
    /// The contraction's reduce (sum over `K` of `a·b`).
    pub red: &'r Reduce,
    /// The operands: `a` reads `M` (and batch, `K`), `b` reads `N` (and batch, `K`).
    pub a: &'r Expr,
    /// The operand that reads `N` (and batch, `K`).
    pub b: &'r Expr,
    /// The output rows (`M` axes).
    pub m: Axes,
    /// The output columns (`N` axes).
    pub n: Axes,
    /// Batch axes (read by both operands and the output).
    pub batch: Axes,
    /// The reduced axes (`K`).
    pub k: Axes,
    /// A second contraction the tile sums in its own accumulators
    /// ([`crate::plan::work::Gemm::second`]; only the SIMT template runs it).
    pub second: Option<Part<'r>>,
    /// The window a pooled tile folds ([`crate::plan::work::Gemm::pool`]; only the SIMT
    /// template runs it): its axes are the innermost of [`View::m`], `acc` is its let.
    pub pool: Option<Pool<'r>>,
}

/// The window of a pooled [`View`]: the consumer reduction over the innermost `M` axes whose
/// body reads the contraction.
#[derive(Clone, Debug)]
pub struct Pool<'r> {
    /// The window reduction (its body reads the contraction, [`View::red`]).
    pub red: &'r Reduce,
    /// Window points.
    pub window: u64,
    /// The `M` axes outside the window: one flat index per window.
    pub outer: Axes,
}

/// A second contraction of a [`View`]: `Σ_k a·b` over the same `M`, `N` and batch axes.
#[derive(Clone, Debug)]
pub struct Part<'r> {
    /// Its let.
    pub acc: String,
    /// The operand that reads `M` (and batch, `K`).
    pub a: &'r Expr,
    /// The operand that reads `N` (and batch, `K`).
    pub b: &'r Expr,
    /// Its reduced axes.
    pub k: Axes,
}

/// The GEMM view of `r`, when a tiled template can run it (see the module doc); `work` is the
/// cost model's analysis of `r`.
pub fn view<'r>(r: &'r Region, work: &KernelWork, em: &Emitter) -> Option<View<'r>> {
    let Shape::Contraction(g) = &work.shape else {
        return None;
    };
    let total: usize = r.lets.iter().map(|l| reduces_in(&l.expr)).sum();
    if total != 1 + usize::from(g.second.is_some()) + usize::from(g.pool.is_some()) {
        return None;
    }
    let (acc, outer_red) = r.lets.iter().find_map(|l| match &l.expr {
        Expr::Reduce(red) if Some(&l.name) != g.second.as_ref() => {
            Some((l.name.clone(), red.as_ref()))
        }
        _ => None,
    })?;
    // A pooled tile: the contraction inside the window reduction's body.
    let (red, window_red) = match &g.pool {
        Some(p) if p.consumer == acc => (first_reduce(&outer_red.body)?, Some(outer_red)),
        Some(_) => return None,
        None => (outer_red, None),
    };
    let (a, b) = sum_of_products(red)?;
    let window_sizes = match window_red {
        Some(w) => crate::ir::region::verify::reduce_extents(r, w, &em.iter_sizes, &r.name).ok()?,
        None => Vec::new(),
    };
    let iter_axes = |names: &[String]| -> Option<Axes> {
        let mut sizes = Vec::new();
        for n in names {
            match r.iters.iter().position(|it| &it.name == n) {
                Some(i) => sizes.push(em.iter_sizes[i].clone()),
                None => {
                    let w = window_red?.axes.iter().position(|a| a == n)?;
                    sizes.push(window_sizes.get(w)?.clone());
                }
            }
        }
        Some(Axes {
            names: names.to_vec(),
            sizes,
        })
    };
    // An iter neither operand reads (a size-1 batch axis the reads index by the constant 0,
    // an axis only the epilogue reads) is a batch axis: every block along it computes the
    // same product and its own epilogue.
    let mut batch_names = g.axes.batch.clone();
    batch_names.extend(
        r.iters
            .iter()
            .map(|i| &i.name)
            .filter(|i| {
                ![&g.axes.m, &g.axes.n, &g.axes.batch, &g.axes.k]
                    .iter()
                    .any(|v| v.contains(i))
            })
            .cloned(),
    );
    let (m, n, batch) = (
        iter_axes(&g.axes.m)?,
        iter_axes(&g.axes.n)?,
        iter_axes(&batch_names)?,
    );
    // An empty `M` or `N` (a depthwise conv: every output channel is its own batch) has
    // extent 1.
    let window_axes = window_red.map_or(0, |w| w.axes.len());
    if m.names.len() + n.names.len() + batch.names.len() != r.iters.len() + window_axes {
        return None;
    }
    let pool = match (window_red, &g.pool) {
        (Some(w), Some(p)) => {
            let keep = m.names.len().checked_sub(window_axes)?;
            if m.names[keep..] != w.axes[..] {
                return None;
            }
            Some(Pool {
                red: w,
                window: p.window,
                outer: Axes {
                    names: m.names[..keep].to_vec(),
                    sizes: m.sizes[..keep].to_vec(),
                },
            })
        }
        _ => None,
    };
    let k_sizes =
        crate::ir::region::verify::reduce_extents(r, red, &em.iter_sizes, &r.name).ok()?;
    let second = match &g.second {
        Some(name) => {
            let Expr::Reduce(red2) = &r.lets.iter().find(|l| &l.name == name)?.expr else {
                return None;
            };
            let (a, b) = sum_of_products(red2)?;
            let sizes =
                crate::ir::region::verify::reduce_extents(r, red2, &em.iter_sizes, &r.name).ok()?;
            Some(Part {
                acc: name.clone(),
                a,
                b,
                k: Axes {
                    names: red2.axes.clone(),
                    sizes,
                },
            })
        }
        None => None,
    };
    Some(View {
        acc,
        red,
        a,
        b,
        m,
        n,
        batch,
        k: Axes {
            names: red.axes.clone(),
            sizes: k_sizes,
        },
        second,
        pool,
    })
}

/// The operands of an fp32 `Σ a·b`.
fn sum_of_products(red: &Reduce) -> Option<(&Expr, &Expr)> {
    match (&red.op, &red.body, red.dtype.unwrap_or(DType::F32)) {
        (ReduceOp::Sum, Expr::Binary(BinaryFn::Mul, a, b), DType::F32) => {
            Some((a.as_ref(), b.as_ref()))
        }
        _ => None,
    }
}

impl View<'_> {
    /// Whether `side`'s loads should walk `K` fastest: its first read indexes its input's last
    /// dimension with the innermost `K` axis (row-major `A[m, k]`); else the outer axis is
    /// fastest (`B[k, n]`), so consecutive threads read consecutive addresses either way.
    pub fn k_fastest(&self, side: Side) -> bool {
        k_fastest(pick(side, self.a, self.b), &self.k)
    }

    /// [`View::k_fastest`] of the [`View::second`] contraction's operand (the main one's
    /// without a second).
    pub fn second_k_fastest(&self, side: Side) -> bool {
        match &self.second {
            Some(p) => k_fastest(pick(side, p.a, p.b), &p.k),
            None => self.k_fastest(side),
        }
    }
}

/// `a` for [`Side::A`], `b` for [`Side::B`].
fn pick<'e>(side: Side, a: &'e Expr, b: &'e Expr) -> &'e Expr {
    match side {
        Side::A => a,
        Side::B => b,
    }
}

/// Whether loads of `operand` (reduced over `k`) should walk `K` fastest ([`View::k_fastest`]).
fn k_fastest(operand: &Expr, k: &Axes) -> bool {
    // Size-1 `K` axes and constant trailing indices (a 1×1 filter's taps) move nothing.
    let Some(k_last) = k
        .names
        .iter()
        .zip(&k.sizes)
        .rev()
        .find(|(_, s)| s.as_int() != Some(1))
        .map(|(n, _)| n)
        .or(k.names.last())
    else {
        return true;
    };
    let mut found: Option<bool> = None;
    first_read(operand, &mut |map| {
        if found.is_none() {
            found = map
                .iter()
                .rev()
                .find(|a| !matches!(a, crate::ir::axis::AxisExpr::Const(_)))
                .map(|a| a.mentions(&|n| n == k_last.as_str()));
        }
    });
    found.unwrap_or(true)
}

fn first_read(e: &Expr, f: &mut dyn FnMut(&[crate::ir::axis::AxisExpr])) {
    match e {
        Expr::Read { map, .. } | Expr::Gather { map, .. } => f(map),
        Expr::Reduce(r) => first_read(&r.body, f),
        _ => {}
    }
    for c in children(e) {
        first_read(c, f);
    }
}

/// Which operand a loader reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The left operand (`M × K`).
    A,
    /// The right operand (`K × N`).
    B,
}

impl View<'_> {
    /// The block's tile origin `m0`, `n0` and K-step count `kt_count` of a `[bm, bn, bk]` tile,
    /// then a new scope with the batch axes bound. The grid is [`View::grid`]: the tiles of one
    /// batch entry are linearized on `grid.x` in grouped order ([`RASTER_GROUP`] tile rows
    /// walked column by column, so the blocks resident at once share `A` rows and `B` columns
    /// in L2), the batch on `grid.y` when it provably fits, else folded into `grid.x` above
    /// the tiles.
    pub fn open_tile(&self, em: &mut Emitter, tile: [u64; 3]) {
        self.open_split_tile(em, tile, 1);
    }

    /// [`View::open_tile`] for one of `splits` CTAs sharing the tile (split-K, `splits > 1`):
    /// `grid.z` is the split, which walks `kt_count` of the `K` steps from step `kt0` — the
    /// `⌈steps / splits⌉` steps of its share, or fewer (none) at the end.
    pub fn open_split_tile(&self, em: &mut Emitter, [bm, bn, bk]: [u64; 3], splits: u64) {
        let bm = self.rows_per_tile(bm);
        let tiles_m = cexpr::dim(&self.m.extent().ceildiv(bm as i64));
        let tiles_n = cexpr::dim(&self.n.extent().ceildiv(bn as i64));
        let batch_on_y = self.batch_on_y();
        em.emit(Stmt::int("tiles_m", tiles_m));
        em.emit(Stmt::int("tiles_n", tiles_n));
        if batch_on_y {
            em.emit(Stmt::int("pid", "(int)blockIdx.x"));
        } else {
            em.emit(Stmt::int("pid", "(int)blockIdx.x % (tiles_m * tiles_n)"));
        }
        let g = RASTER_GROUP;
        em.emit(Stmt::int("group", format!("pid / ({g} * tiles_n)")));
        em.emit(Stmt::int("first_m", format!("group * {g}")));
        em.emit(Stmt::int(
            "group_m",
            format!("dlc_imin(tiles_m - first_m, {g})"),
        ));
        em.emit(Stmt::int("in_group", format!("pid % ({g} * tiles_n)")));
        em.emit(Stmt::int(
            "m0",
            format!("(first_m + in_group % group_m) * {bm}"),
        ));
        em.emit(Stmt::int("n0", format!("(in_group / group_m) * {bn}")));
        let steps = self.k_steps(bk);
        if splits > 1 {
            em.emit(Stmt::int("kt_total", steps));
            em.emit(Stmt::int(
                "kt_per",
                format!("(kt_total + {}) / {splits}", splits - 1),
            ));
            em.emit(Stmt::int("kt0", "(int)blockIdx.z * kt_per"));
            em.emit(Stmt::int(
                "kt_count",
                "dlc_imax(0, dlc_imin(kt_per, kt_total - kt0))",
            ));
        } else {
            em.emit(Stmt::int("kt_count", steps));
        }
        em.push_scope();
        if batch_on_y {
            self.bind_batch(em, "(int)blockIdx.y");
        } else {
            self.bind_batch(em, "(int)blockIdx.x / (tiles_m * tiles_n)");
        }
    }

    /// The `M` rows a `bm`-row tile advances by: `bm`, or a pooled tile's whole windows
    /// ([`View::pool`]).
    pub fn rows_per_tile(&self, bm: u64) -> u64 {
        match &self.pool {
            Some(p) => crate::plan::work::whole_window_rows(bm, p.window),
            None => bm,
        }
    }

    /// The number of `bk`-deep `K` steps (C): the main contraction's, then the
    /// [`View::second`]'s ([`View::main_steps`] of them first).
    pub fn k_steps(&self, bk: u64) -> String {
        let main = self.main_steps(bk);
        match &self.second {
            Some(p) => format!(
                "{main} + ({} + {}) / {bk}",
                cexpr::dim(&p.k.extent()),
                bk - 1
            ),
            None => main,
        }
    }

    /// The main contraction's `K` steps (C).
    pub fn main_steps(&self, bk: u64) -> String {
        format!("({} + {}) / {bk}", cexpr::dim(&self.k.extent()), bk - 1)
    }

    /// Whether the batch goes on `grid.y`: its extent is a known number within the 65535
    /// limit (a symbolic batch is folded into `grid.x`, whose limit is 2³¹ − 1).
    fn batch_on_y(&self) -> bool {
        self.batch
            .extent()
            .as_int()
            .is_some_and(|b| b <= GRID_YZ_LIMIT)
    }

    /// The launch grid of a `bm × bn` tile ([`View::open_tile`]'s block order): every tile on
    /// `x`, the batch on `y` or folded into `x`.
    pub fn grid(&self, bm: u64, bn: u64) -> [Dim; 3] {
        self.split_grid(bm, bn, 1)
    }

    /// [`View::grid`] with the `splits` CTAs of a split-K tile on `z`.
    pub fn split_grid(&self, bm: u64, bn: u64, splits: u64) -> [Dim; 3] {
        let bm = self.rows_per_tile(bm);
        let one = Dim::int(1);
        let tiles = self
            .m
            .extent()
            .ceildiv(bm as i64)
            .max_of(&one)
            .mul(&self.n.extent().ceildiv(bn as i64).max_of(&one));
        let batch = self.batch.extent().max_of(&one);
        let z = Dim::int(splits.max(1) as i64);
        if self.batch_on_y() {
            [tiles, batch, z]
        } else {
            [tiles.mul(&batch), one, z]
        }
    }

    /// Binds the batch axes from the flat batch index `flat` (C).
    pub fn bind_batch(&self, em: &mut Emitter, flat: &str) {
        if !self.batch.names.is_empty() {
            bind_flat(em, &self.batch.names, &self.batch.c_sizes(), flat, "b_");
        }
    }

    /// Emits `dst = side[outer][k]`: the operand element (fp32) at flat row `outer` (an `M`
    /// index for `A`, an `N` index for `B`) and flat `K` index `k`, or 0 outside the operand.
    pub fn load(
        &self,
        em: &mut Emitter,
        side: Side,
        outer: &str,
        k: &str,
        dst: &str,
    ) -> Result<(), CodegenError> {
        self.load_operand(
            em,
            (side, pick(side, self.a, self.b), &self.k),
            outer,
            k,
            dst,
        )
    }

    /// [`View::load`] of the [`View::second`] contraction's operand (`K` its own).
    pub fn load_second(
        &self,
        em: &mut Emitter,
        side: Side,
        outer: &str,
        k: &str,
        dst: &str,
    ) -> Result<(), CodegenError> {
        let Some(p) = &self.second else {
            return Err(CodegenError::Unsupported {
                kernel: em.region.name.clone(),
                why: "the region has no second contraction".into(),
            });
        };
        self.load_operand(em, (side, pick(side, p.a, p.b), &p.k), outer, k, dst)
    }

    /// `dst = operand[outer][k]` for `side`'s operand with reduced axes `k_axes`.
    fn load_operand(
        &self,
        em: &mut Emitter,
        (side, operand, k_axes): (Side, &Expr, &Axes),
        outer: &str,
        k: &str,
        dst: &str,
    ) -> Result<(), CodegenError> {
        let axes = match side {
            Side::A => &self.m,
            Side::B => &self.n,
        };
        let guard = format!(
            "{outer} < {} && {k} < {}",
            cexpr::dim(&axes.extent()),
            cexpr::dim(&k_axes.extent())
        );
        let then = em.assign_f32(dst, operand, |em| {
            bind_flat(em, &axes.names, &axes.c_sizes(), outer, "o_");
            bind_flat(em, &k_axes.names, &k_axes.c_sizes(), k, "k_");
        })?;
        em.emit(Stmt::If {
            cond: guard,
            div: super::super::gpu::Div::Thread,
            then,
            otherwise: vec![Stmt::Assign {
                place: dst.to_string(),
                value: "0.0f".into(),
            }],
        });
        Ok(())
    }

    /// Emits the epilogue and stores at output element (`m`, `n`) (flat C indices) whose
    /// accumulator is `acc` (C), predicated on the element being inside the output.
    pub fn epilogue(
        &self,
        em: &mut Emitter,
        m: &str,
        n: &str,
        acc: &str,
    ) -> Result<(), CodegenError> {
        self.epilogue_summed(em, m, n, acc, None)
    }

    /// [`View::epilogue`] with the [`View::second`] contraction's accumulator `acc2` (C), which
    /// a view with a second contraction needs.
    pub fn epilogue_summed(
        &self,
        em: &mut Emitter,
        m: &str,
        n: &str,
        acc: &str,
        acc2: Option<&str>,
    ) -> Result<(), CodegenError> {
        if let Some(p) = &self.second {
            let Some(acc2) = acc2 else {
                return Err(CodegenError::Unsupported {
                    kernel: em.region.name.clone(),
                    why: "the template does not sum the second contraction".into(),
                });
            };
            em.provide(&p.acc, acc2.to_string());
        }
        let guard = format!(
            "{m} < {} && {n} < {}",
            cexpr::dim(&self.m.extent()),
            cexpr::dim(&self.n.extent())
        );
        em.open();
        em.push_scope();
        bind_flat(em, &self.m.names, &self.m.c_sizes(), m, "m_");
        bind_flat(em, &self.n.names, &self.n.c_sizes(), n, "n_");
        em.provide(&self.acc, acc.to_string());
        let r = store_yields(em);
        em.pop_scope();
        let then = em.close();
        r?;
        em.emit(Stmt::If {
            cond: guard,
            div: super::super::gpu::Div::Thread,
            then,
            otherwise: vec![],
        });
        Ok(())
    }

    /// How a staged epilogue stores `r`'s output in 16-byte chunks, when it can: `r` yields
    /// exactly one output of at most 4-byte elements, and the region's innermost iter (the
    /// output's contiguous axis: outputs are row-major over the iters) is the innermost `N`
    /// axis (or the innermost `M` axis). The *run* is the product of the trailing iters that
    /// are, in order, the trailing `N` (`M`) axes: one contiguous stretch of the output (a
    /// conv's `OH·OW` plane, `28·28 = 98·8`). When the run is provably a multiple of the
    /// chunk's `16 / element` lanes, a chunk of consecutive flat `N` (`M`) indices starting at
    /// a multiple of the lanes is one aligned, contiguous run of the output; when it is
    /// symbolic and not provably so (`N` of a GEMM), [`StoreChunk::aligned`] is the run-time
    /// test, and the chunks of a misaligned launch are stored element by element.
    pub fn store_chunk(&self, r: &Region, em: &Emitter) -> Option<StoreChunk> {
        let [y] = r.yields.as_slice() else {
            return None;
        };
        let (out, dtype) = yield_output(r, y).ok()?;
        let elem = dtype.size_bytes();
        if elem == 0 || elem > 4 {
            return None;
        }
        let lanes = 16 / elem;
        let last = r.iters.last()?;
        let along_n = if self.n.names.last() == Some(&last.name) {
            true
        } else if self.m.names.last() == Some(&last.name) {
            false
        } else {
            return None;
        };
        let axes = if along_n {
            &self.n.names
        } else {
            &self.m.names
        };
        let run: Vec<&Dim> = r
            .iters
            .iter()
            .rev()
            .zip(em.iter_sizes.iter().rev())
            .zip(axes.iter().rev())
            .take_while(|((it, _), ax)| &it.name == *ax)
            .map(|((_, size), _)| size)
            .collect();
        let run = Dim::product(run);
        let aligned = match run.div_exact(&Dim::int(lanes as i64)) {
            Some(_) => None,
            None if run.as_int().is_none() => Some(format!("{} % {lanes} == 0", cexpr::dim(&run))),
            None => return None,
        };
        Some(StoreChunk {
            along_n,
            lanes,
            out,
            dtype,
            aligned,
        })
    }

    /// Emits the epilogue at output element (`m`, `n`) (flat C indices) whose accumulator is
    /// `acc` (C) and assigns its one yield, converted to the output type, to `place` (C),
    /// predicated on the element being inside the output (a staged epilogue, [`StoreChunk`]).
    pub fn epilogue_to(
        &self,
        em: &mut Emitter,
        [m, n, acc]: [&str; 3],
        place: &str,
    ) -> Result<(), CodegenError> {
        let r = em.region;
        let [y] = r.yields.as_slice() else {
            return Err(CodegenError::Unsupported {
                kernel: r.name.clone(),
                why: "a staged epilogue stores exactly one yield".into(),
            });
        };
        let (_, dt) = yield_output(r, y)?;
        em.open();
        em.push_scope();
        self.bind_point(em, m, n);
        em.provide(&self.acc, acc.to_string());
        let v = em.let_value(&y.from);
        if let Ok(v) = &v {
            em.emit(Stmt::Assign {
                place: place.to_string(),
                value: super::super::scalar::store_value(v, dt),
            });
        }
        em.pop_scope();
        let then = em.close();
        v?;
        em.emit(Stmt::If {
            cond: self.inside(m, n),
            div: super::super::gpu::Div::Thread,
            then,
            otherwise: vec![],
        });
        Ok(())
    }

    /// The output offset (C) of flat element (`m`, `n`), emitted in a new block and scope
    /// whose statements are returned with it.
    pub fn output_offset_at(&self, em: &mut Emitter, m: &str, n: &str) -> (Vec<Stmt>, String) {
        em.open();
        em.push_scope();
        self.bind_point(em, m, n);
        let off = em.output_offset();
        em.pop_scope();
        (em.close(), off)
    }

    /// Binds the `M` and `N` axes at flat element (`m`, `n`) (C) in the innermost scope.
    pub fn bind_point(&self, em: &mut Emitter, m: &str, n: &str) {
        bind_flat(em, &self.m.names, &self.m.c_sizes(), m, "m_");
        bind_flat(em, &self.n.names, &self.n.c_sizes(), n, "n_");
    }

    /// `m < M && n < N` (C).
    pub fn inside(&self, m: &str, n: &str) -> String {
        format!(
            "{m} < {} && {n} < {}",
            cexpr::dim(&self.m.extent()),
            cexpr::dim(&self.n.extent())
        )
    }
}

/// A staged epilogue's 16-byte output chunks ([`View::store_chunk`]).
#[derive(Clone, Debug)]
pub struct StoreChunk {
    /// The chunk runs along `N` (else along `M`).
    pub along_n: bool,
    /// Elements per chunk (`16 / element bytes`).
    pub lanes: u64,
    /// The output's index (`out{j}`).
    pub out: usize,
    /// The output's element type.
    pub dtype: DType,
    /// The run-time test (C) that the contiguous run is a multiple of the lanes, when it is
    /// symbolic and not provably so (`None`: proved); a launch failing it stores elements.
    pub aligned: Option<String>,
}
