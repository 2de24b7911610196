//! Fused kernels: a vectorized interpreter of an [`Expr`] over an index space, optionally reducing
//! some axes. Each interpreter step processes one row (a segment along the chosen iteration axis),
//! so per-instruction dispatch is amortized over the row.
//!
//! Output layout: the materialized buffer is stored with the iteration axis innermost (a permuted
//! dense layout, exposed through the value's view), so every work unit writes a contiguous run and
//! work units are split across threads with `par_chunks_mut`. Every output element is computed by
//! the same sequence of operations whatever the split, so results do not depend on thread count.
//! Reduction order is row-major over the reduced axes.

use super::ops::{self, Kind, Operand};
use super::plan::{Arg, Expr, Inst};
use super::value::{BadAddress, Loaded, Store, Value};
use super::view::{numel, View};
use crate::ir::dtype::DType;
use crate::ir::tiny::{NodeId, ReduceOp};
use crate::tensor::TensorData;
use rayon::prelude::*;
use std::sync::Arc;

/// Longest row one interpreter step processes.
const SEG: usize = 1024;
/// Register budget per task in `f64`s: long expressions get shorter rows.
const REG_BUDGET: usize = 1 << 18;
/// Below this many expression elements a kernel runs on the calling thread.
const PAR_MIN_WORK: usize = 1 << 15;

/// A reduction performed by a kernel.
#[derive(Clone, Debug)]
pub struct Reduction {
    pub op: ReduceOp,
    pub acc: DType,
    /// Reduced axes of the expression space, ascending.
    pub axes: Vec<usize>,
}

/// A fused kernel ready to run.
pub struct Kernel<'k, 'a> {
    pub expr: &'k Expr,
    /// Values of `expr.leaves`, in order.
    pub leaves: Vec<&'k Value<'a>>,
    /// Expression index space (the REDUCE input shape, or the node shape).
    pub space: Vec<usize>,
    pub reduce: Option<Reduction>,
    /// Result dtype.
    pub dtype: DType,
    /// Result must be stored row-major (signature outputs).
    pub row_major: bool,
}

/// Why a kernel failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelError {
    DivByZero(NodeId),
    BadAddress,
    Alloc(usize),
}

/// Loop structure derived from the kernel: iteration axis, output layout and work units.
struct Layout {
    /// Expression space, rank >= 1.
    space: Vec<usize>,
    ax: usize,
    /// `ax` is an output (non-reduced) axis.
    ax_is_out: bool,
    /// Output axes (expression numbering) except `ax`, outer to inner.
    outer: Vec<usize>,
    /// Reduced axes iterated by the odometer (all of them, or all but `ax`).
    red: Vec<usize>,
    /// Elements each work unit writes.
    row_len: usize,
}

impl Kernel<'_, '_> {
    /// Runs the kernel; the result is a fresh buffer with a view of the node's shape.
    pub fn run(&self, out_shape: &[usize]) -> Result<Value<'static>, KernelError> {
        let lay = self.layout();
        let units = numel(&lay.outer.iter().map(|a| lay.space[*a]).collect::<Vec<_>>());
        let total = units.saturating_mul(lay.row_len);
        let work = numel(&lay.space);
        let view = self.out_view(&lay, out_shape);
        let data = match self.dtype {
            DType::I32 => TensorData::I32(self.fill_buffer::<i32>(&lay, units, total, work)?),
            DType::Bool => TensorData::Bool(self.fill_buffer::<bool>(&lay, units, total, work)?),
            _ => TensorData::F32(self.fill_buffer::<f32>(&lay, units, total, work)?),
        };
        Ok(Value {
            store: Store::Owned(Arc::new(data)),
            view,
            dtype: self.dtype,
        })
    }

    fn layout(&self) -> Layout {
        let space = if self.space.is_empty() {
            vec![1]
        } else {
            self.space.clone()
        };
        let raxes: Vec<usize> = self
            .reduce
            .as_ref()
            .map(|r| r.axes.clone())
            .unwrap_or_default();
        let out_axes: Vec<usize> = (0..space.len()).filter(|a| !raxes.contains(a)).collect();
        let mut cands: Vec<usize> = if self.row_major {
            out_axes.last().copied().into_iter().collect()
        } else {
            out_axes.clone()
        };
        cands.extend(raxes.last().copied());
        let ax = self.choose_axis(&space, &cands);
        let ax_is_out = !raxes.contains(&ax);
        let outer: Vec<usize> = out_axes.iter().copied().filter(|a| *a != ax).collect();
        let red: Vec<usize> = raxes.iter().copied().filter(|a| *a != ax).collect();
        let row_len = if ax_is_out { space[ax] } else { 1 };
        Layout {
            space,
            ax,
            ax_is_out,
            outer,
            red,
            row_len,
        }
    }

    /// The candidate axis along which most leaves have stride 0 or ±1 (ties: larger size);
    /// axes much shorter than the longest candidate are skipped.
    fn choose_axis(&self, space: &[usize], cands: &[usize]) -> usize {
        let longest = cands.iter().map(|a| space[*a]).max().unwrap_or(1);
        let min_len = longest.min(8);
        let score = |a: usize| {
            let good = self
                .leaves
                .iter()
                .filter(|v| matches!(v.view.top().addr.c.get(a).copied().unwrap_or(0), -1..=1))
                .count();
            (good, space[a])
        };
        cands
            .iter()
            .copied()
            .filter(|a| space[*a] >= min_len)
            .max_by_key(|a| score(*a))
            .unwrap_or(0)
    }

    /// Output view: dense, with `ax` innermost when it is an output axis.
    fn out_view(&self, lay: &Layout, out_shape: &[usize]) -> View {
        if self.space.is_empty() || !lay.ax_is_out {
            return View::contiguous(out_shape);
        }
        let out_pos = |a: usize| (0..a).filter(|b| !self.is_reduced(*b)).count();
        let mut order: Vec<usize> = lay.outer.iter().map(|a| out_pos(*a)).collect();
        order.push(out_pos(lay.ax));
        View::with_layout(out_shape, &order)
    }

    fn is_reduced(&self, a: usize) -> bool {
        self.reduce.as_ref().is_some_and(|r| r.axes.contains(&a))
    }

    /// Allocates the output and fills it, in parallel chunks of whole work units.
    fn fill_buffer<T: Elem>(
        &self,
        lay: &Layout,
        units: usize,
        total: usize,
        work: usize,
    ) -> Result<Vec<T>, KernelError> {
        let mut buf: Vec<T> = Vec::new();
        buf.try_reserve_exact(total)
            .map_err(|_| KernelError::Alloc(total))?;
        buf.resize(total, T::default());
        if total == 0 {
            return Ok(buf);
        }
        let tasks = if work < PAR_MIN_WORK {
            1
        } else {
            units.min(4 * rayon::current_num_threads()).max(1)
        };
        let per_task = units.div_ceil(tasks);
        let chunk = per_task * lay.row_len;
        let results: Vec<Result<(), KernelError>> = if tasks == 1 {
            vec![self.run_units(lay, 0, &mut buf)]
        } else {
            buf.par_chunks_mut(chunk)
                .enumerate()
                .map(|(i, c)| self.run_units(lay, i * per_task, c))
                .collect()
        };
        results.into_iter().collect::<Result<(), _>>()?;
        Ok(buf)
    }

    /// Computes the work units `first ..` whose outputs are `out` (whole units).
    fn run_units<T: Elem>(
        &self,
        lay: &Layout,
        first: usize,
        out: &mut [T],
    ) -> Result<(), KernelError> {
        let cap = (REG_BUDGET / self.expr.insts.len().max(1)).clamp(16, SEG);
        let seg = lay.space[lay.ax].clamp(1, cap);
        let mut st = Scratch::new(self.expr.insts.len(), seg, lay.space.len());
        for (u, dst) in out.chunks_mut(lay.row_len).enumerate() {
            set_outer(&mut st.idx, &lay.outer, &lay.space, first + u);
            match (&self.reduce, lay.ax_is_out) {
                (None, _) => self.unit_map(lay, &mut st, dst)?,
                (Some(r), true) => self.unit_reduce_rows(r, lay, &mut st, dst)?,
                (Some(r), false) => self.unit_reduce_along(r, lay, &mut st, dst)?,
            }
        }
        Ok(())
    }

    /// Elementwise unit: one row, segment by segment.
    fn unit_map<T: Elem>(
        &self,
        lay: &Layout,
        st: &mut Scratch,
        dst: &mut [T],
    ) -> Result<(), KernelError> {
        for (s, d) in dst.chunks_mut(st.seg).enumerate() {
            st.idx[lay.ax] = (s * st.seg) as i64;
            let res = self.eval(st, lay.ax, d.len())?;
            write_row(res, &st.regs, d);
        }
        Ok(())
    }

    /// Reduction with `ax` an output axis: an accumulator row, reduced tuples in row-major order.
    fn unit_reduce_rows<T: Elem>(
        &self,
        r: &Reduction,
        lay: &Layout,
        st: &mut Scratch,
        dst: &mut [T],
    ) -> Result<(), KernelError> {
        let ident = r.op.identity(r.acc);
        for (s, d) in dst.chunks_mut(st.seg).enumerate() {
            let len = d.len();
            let mut acc = std::mem::take(&mut st.acc);
            acc.clear();
            acc.resize(len, ident);
            let ok = start_tuple(&mut st.idx, &lay.red, &lay.space);
            let mut more = ok;
            while more {
                st.idx[lay.ax] = (s * st.seg) as i64;
                let res = self.eval(st, lay.ax, len)?;
                ops::accumulate_rows(r.op, r.acc, &mut acc, operand(res, &st.regs, len));
                more = next_tuple(&mut st.idx, &lay.red, &lay.space);
            }
            for (o, v) in d.iter_mut().zip(&acc) {
                *o = T::from_f64(*v);
            }
            st.acc = acc;
        }
        Ok(())
    }

    /// Reduction along `ax` (the last reduced axis): one scalar accumulator per unit.
    fn unit_reduce_along<T: Elem>(
        &self,
        r: &Reduction,
        lay: &Layout,
        st: &mut Scratch,
        dst: &mut [T],
    ) -> Result<(), KernelError> {
        let mut acc = r.op.identity(r.acc);
        let n = lay.space[lay.ax];
        let mut more = start_tuple(&mut st.idx, &lay.red, &lay.space) && n > 0;
        while more {
            for s in (0..n).step_by(st.seg) {
                let len = st.seg.min(n - s);
                st.idx[lay.ax] = s as i64;
                let res = self.eval(st, lay.ax, len)?;
                acc = ops::fold_row(r.op, r.acc, acc, operand(res, &st.regs, len), len);
            }
            more = next_tuple(&mut st.idx, &lay.red, &lay.space);
        }
        if let Some(o) = dst.first_mut() {
            *o = T::from_f64(acc);
        }
        Ok(())
    }

    /// Runs the register program on the row at `st.idx` along `ax`; returns the result's kind.
    fn eval(&self, st: &mut Scratch, ax: usize, len: usize) -> Result<Kind, KernelError> {
        let Scratch {
            regs,
            kinds,
            idx,
            scratch,
            ..
        } = st;
        for (i, inst) in self.expr.insts.iter().enumerate() {
            let (before, rest) = regs.split_at_mut(i);
            let out = &mut rest[0][..len];
            let get = |a: &Arg| match a {
                Arg::Imm(v) => Operand::S(*v),
                Arg::Reg(j) => match kinds[*j] {
                    Kind::Scalar(v) => Operand::S(v),
                    Kind::Row => Operand::R(&before[*j][..len]),
                },
            };
            let k = match inst {
                Inst::Load { leaf } => {
                    let v = self.leaves.get(*leaf).ok_or(KernelError::BadAddress)?;
                    match v.load_row(idx, ax, len, out, scratch) {
                        Ok(Loaded::Scalar(s)) => Kind::Scalar(s),
                        Ok(Loaded::Row) => Kind::Row,
                        Err(BadAddress) => return Err(KernelError::BadAddress),
                    }
                }
                Inst::Unary { op, dt, x } => ops::unary(*op, *dt, get(x), out),
                Inst::Binary {
                    op,
                    operand_dt,
                    out_dt,
                    a,
                    b,
                    node,
                } => ops::binary(*op, *operand_dt, *out_dt, get(a), get(b), out)
                    .map_err(|_| KernelError::DivByZero(*node))?,
                Inst::Where { dt, c, a, b } => ops::select(*dt, get(c), get(a), get(b), out),
                Inst::Cast { to, x } => ops::cast(*to, get(x), out),
            };
            kinds[i] = k;
        }
        Ok(kinds.last().copied().unwrap_or(Kind::Scalar(0.0)))
    }
}

/// Per-task interpreter state.
struct Scratch {
    regs: Vec<Vec<f64>>,
    kinds: Vec<Kind>,
    idx: Vec<i64>,
    scratch: Vec<i64>,
    acc: Vec<f64>,
    seg: usize,
}

impl Scratch {
    fn new(n_regs: usize, seg: usize, rank: usize) -> Scratch {
        Scratch {
            regs: vec![vec![0.0; seg]; n_regs],
            kinds: vec![Kind::Scalar(0.0); n_regs],
            idx: vec![0; rank],
            scratch: Vec::with_capacity(rank),
            acc: Vec::with_capacity(seg),
            seg,
        }
    }
}

/// The result register as an operand.
fn operand<'r>(k: Kind, regs: &'r [Vec<f64>], len: usize) -> Operand<'r> {
    match k {
        Kind::Scalar(v) => Operand::S(v),
        Kind::Row => regs
            .last()
            .map(|r| Operand::R(&r[..len]))
            .unwrap_or(Operand::S(0.0)),
    }
}

fn write_row<T: Elem>(k: Kind, regs: &[Vec<f64>], dst: &mut [T]) {
    match operand(k, regs, dst.len()) {
        Operand::S(v) => dst.fill(T::from_f64(v)),
        Operand::R(row) => {
            for (o, v) in dst.iter_mut().zip(row) {
                *o = T::from_f64(*v);
            }
        }
    }
}

/// Sets the `outer` axes of `idx` to the row-major decomposition of unit `u`.
fn set_outer(idx: &mut [i64], outer: &[usize], space: &[usize], mut u: usize) {
    for a in outer.iter().rev() {
        let d = space[*a].max(1);
        idx[*a] = (u % d) as i64;
        u /= d;
    }
}

/// Zeroes the odometer axes; false when the tuple space is empty.
fn start_tuple(idx: &mut [i64], axes: &[usize], space: &[usize]) -> bool {
    for a in axes {
        idx[*a] = 0;
    }
    axes.iter().all(|a| space[*a] > 0)
}

/// Advances the odometer (last axis fastest); false after the last tuple.
fn next_tuple(idx: &mut [i64], axes: &[usize], space: &[usize]) -> bool {
    for a in axes.iter().rev() {
        idx[*a] += 1;
        if (idx[*a] as usize) < space[*a] {
            return true;
        }
        idx[*a] = 0;
    }
    false
}

/// A storage element type.
pub trait Elem: Copy + Default + Send + Sync {
    /// From an already-rounded value.
    fn from_f64(v: f64) -> Self;
}

impl Elem for f32 {
    #[inline(always)]
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
}

impl Elem for i32 {
    #[inline(always)]
    fn from_f64(v: f64) -> i32 {
        v as i32
    }
}

impl Elem for bool {
    #[inline(always)]
    fn from_f64(v: f64) -> bool {
        v != 0.0
    }
}
