//! Row playback of a let: the let's innermost free iter is the *row*; every point of its other
//! free iters is one row (parallel with rayon), and each expression node is evaluated for the
//! whole row at once — one tree walk per row instead of one per point.
//!
//! The semantics are the point evaluator's, value for value: every lane computes exactly the
//! operations, in the same order and with the same rounding, that the point evaluator computes at
//! that point. What changes is only how often the tree is walked:
//! - a value that does not depend on the row is computed once (`V::U`), else per lane (`V::R`);
//! - index expressions affine in the row iter (`Class::Linear`) are evaluated at the first and
//!   last active lane with checked arithmetic (so no lane in between saturates) and stepped, and
//!   a read's bounds are checked at those two lanes (monotone in between); anything else falls
//!   back to the point evaluator's own functions lane by lane;
//! - `select` and `where` evaluate each branch only on the lanes that take it (`Lanes`), so an
//!   untaken branch never reads, exactly as at a point. Comparisons of affine index expressions
//!   give a span of lanes (binary search on the monotone side), others a lane mask.
//!
//! TODO(issue 19): still 2–4× slower than the reference evaluator on convolutions (rows are one
//! output row, 14–56 lanes, and every reduce point re-walks the body): fuse the reduce loop
//! over rows into compiled per-read strides, or make a row span several iters.

use super::super::kind::Kind;
use super::super::BinaryFn;
use super::affine::axis_checked;
use super::ops::{binary, fold, unary};
use super::{
    advance, axis, first_error_in_order, pred, set_slots, CAxis, CExpr, CPred, Class, Cls, Ctx,
    EResult,
};
use crate::ir::dtype::DType;
use crate::ir::tiny::ReduceOp;
use crate::tensor::TensorData;
use rayon::prelude::*;
use std::cell::RefCell;

/// The active lanes of a row: a span `lo..hi` or a mask. Never evaluated when empty.
#[derive(Clone, Debug)]
enum Lanes {
    Span(usize, usize),
    Mask(Vec<bool>),
}

impl Lanes {
    /// A mask as lanes: a span when its active lanes are contiguous.
    fn from_mask(m: Vec<bool>) -> Lanes {
        let lo = m.iter().position(|b| *b).unwrap_or(0);
        let hi = m.iter().rposition(|b| *b).map_or(lo, |h| h + 1);
        if m[lo..hi].iter().all(|b| *b) {
            Lanes::Span(lo, hi)
        } else {
            Lanes::Mask(m)
        }
    }

    fn count(&self) -> usize {
        match self {
            Lanes::Span(lo, hi) => hi - lo,
            Lanes::Mask(m) => m.iter().filter(|b| **b).count(),
        }
    }

    fn has(&self, l: usize) -> bool {
        match self {
            Lanes::Span(lo, hi) => (*lo..*hi).contains(&l),
            Lanes::Mask(m) => m[l],
        }
    }

    /// The first active lane and one past the last (all lanes in between for a span).
    fn range(&self) -> (usize, usize) {
        match self {
            Lanes::Span(lo, hi) => (*lo, *hi),
            Lanes::Mask(m) => {
                let lo = m.iter().position(|b| *b).unwrap_or(0);
                (lo, m.iter().rposition(|b| *b).map_or(lo, |h| h + 1))
            }
        }
    }

    /// The active lanes, ascending.
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let (lo, hi) = self.range();
        (lo..hi).filter(move |l| self.has(*l))
    }

    /// The lanes of `self` for which `keep` holds.
    fn filter(&self, len: usize, mut keep: impl FnMut(usize) -> bool) -> Lanes {
        let mut m = vec![false; len];
        for l in self.iter() {
            m[l] = keep(l);
        }
        Lanes::from_mask(m)
    }
}

/// A row value: one value for every lane, or one per lane (`len` long; only active lanes hold
/// meaningful values).
enum V {
    U(f64),
    R(Vec<f64>),
}

impl V {
    fn at(&self, l: usize) -> f64 {
        match self {
            V::U(x) => *x,
            V::R(v) => v[l],
        }
    }
}

/// A let played back row by row.
pub(super) struct RowLet<'a> {
    /// The let's free iters, ascending; `row` is the last.
    pub free: &'a [usize],
    /// Every iter's size.
    pub sizes: &'a [usize],
    /// The row iter's slot.
    pub row: usize,
    /// Env slots (iters and reduce axes).
    pub nslots: usize,
}

impl RowLet<'_> {
    /// The let's values, row-major over its free iters.
    pub fn run(&self, cx: &Ctx, code: &CExpr) -> EResult<Vec<f64>> {
        let len = self.sizes[self.row];
        let outer = &self.free[..self.free.len() - 1];
        let osizes: Vec<usize> = outer.iter().map(|i| self.sizes[*i]).collect();
        let n: usize = osizes.iter().product::<usize>() * len;
        let mut vals = vec![0.0; n];
        let init = || Rows {
            cx,
            row: self.row,
            len,
            env: RefCell::new(vec![0i64; self.nslots]),
            pool: RefCell::new(Vec::new()),
        };
        let row = |rows: &mut Rows, (flat, out): (usize, &mut [f64])| -> EResult<()> {
            set_slots(&mut rows.env.borrow_mut(), outer, &osizes, flat);
            match rows.eval(code, &Lanes::Span(0, len))? {
                V::U(x) => out.fill(x),
                V::R(v) => {
                    out.copy_from_slice(&v[..len]);
                    rows.give(v);
                }
            }
            Ok(())
        };
        let par = vals
            .par_chunks_mut(len)
            .enumerate()
            .try_for_each_init(init, row);
        first_error_in_order(par, || {
            let mut rows = init();
            vals.chunks_mut(len)
                .enumerate()
                .try_for_each(|chunk| row(&mut rows, chunk))
        })?;
        Ok(vals)
    }
}

/// One worker's state: the env of the current row (the row slot is set per lane where read) and
/// a pool of lane buffers.
struct Rows<'a> {
    cx: &'a Ctx<'a>,
    row: usize,
    len: usize,
    env: RefCell<Vec<i64>>,
    pool: RefCell<Vec<Vec<f64>>>,
}

impl Rows<'_> {
    fn buf(&self) -> Vec<f64> {
        self.pool
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| vec![0.0; self.len])
    }

    fn give(&self, v: Vec<f64>) {
        self.pool.borrow_mut().push(v);
    }

    /// `v` as a per-lane buffer (a uniform value broadcast).
    fn lanes_of(&self, v: V) -> Vec<f64> {
        match v {
            V::R(b) => b,
            V::U(x) => {
                let mut b = self.buf();
                b.fill(x);
                b
            }
        }
    }

    /// `f` applied to every lane of `lanes` in `v`.
    fn map(&self, v: V, lanes: &Lanes, f: impl Fn(f64) -> f64) -> V {
        match v {
            V::U(x) => V::U(f(x)),
            V::R(mut b) => {
                let (lo, hi) = lanes.range();
                for x in &mut b[lo..hi] {
                    *x = f(*x);
                }
                V::R(b)
            }
        }
    }

    /// `e` at the first and last lanes of `lo..hi` when it is uniform or affine there without
    /// overflow: `(value at lo, slope)`.
    fn linear(&self, e: &CAxis, c: &Cls, lo: usize, hi: usize) -> Option<(i64, i64)> {
        let mut env = self.env.borrow_mut();
        if let Some(a) = &c.aff {
            // Exact over the domain: the value at `lo` and the row's coefficient.
            let (mut v, mut s) = (i128::from(a.c), 0i128);
            for (slot, k) in &a.terms {
                if *slot == self.row {
                    s += i128::from(*k);
                } else {
                    v += i128::from(*k) * i128::from(env[*slot]);
                }
            }
            return Some(((v + s * lo as i128) as i64, s as i64));
        }
        match c.class {
            Class::Uniform => Some((axis(e, &env), 0)),
            Class::Linear(s) => {
                env[self.row] = lo as i64;
                let a = axis_checked(e, &env)?;
                env[self.row] = (hi - 1) as i64;
                axis_checked(e, &env)?;
                Some((a, s))
            }
            Class::General => None,
        }
    }

    /// `e` at lane `l`, exactly as the point evaluator computes it.
    fn axis_at(&self, e: &CAxis, l: usize) -> i64 {
        let mut env = self.env.borrow_mut();
        env[self.row] = l as i64;
        axis(e, &env)
    }

    /// The lanes of `lanes` where `p` holds.
    fn restrict(&self, p: &CPred, lanes: Lanes) -> Lanes {
        match p {
            CPred::And(ps) => {
                let mut l = lanes;
                for q in ps {
                    if l.count() == 0 {
                        break;
                    }
                    l = self.restrict(q, l);
                }
                l
            }
            CPred::Or(ps) => {
                let parts: Vec<Lanes> =
                    ps.iter().map(|q| self.restrict(q, lanes.clone())).collect();
                lanes.filter(self.len, |l| parts.iter().any(|p| p.has(l)))
            }
            CPred::Cmp(op, a, b, ca, cb) => {
                if let Lanes::Span(lo, hi) = lanes {
                    if let (Some((a0, sa)), Some((b0, sb))) =
                        (self.linear(a, ca, lo, hi), self.linear(b, cb, lo, hi))
                    {
                        return cmp_span(
                            *op,
                            a0 as i128 - b0 as i128,
                            sa as i128 - sb as i128,
                            lo,
                            hi,
                        );
                    }
                }
                lanes.filter(self.len, |l| {
                    let mut env = self.env.borrow_mut();
                    env[self.row] = l as i64;
                    pred(p, &env)
                })
            }
        }
    }

    fn eval(&self, e: &CExpr, lanes: &Lanes) -> EResult<V> {
        Ok(match e {
            CExpr::Const(c) => V::U(*c),
            CExpr::Let(li, addr) => self.let_row(*li, addr, lanes),
            CExpr::Read {
                input,
                map,
                cls,
                shape,
            } => self.read(*input, map, cls, shape, lanes)?,
            CExpr::Gather {
                input,
                map,
                shape,
                axis: g,
                index,
            } => {
                let idx = self.eval(index, lanes)?;
                let mut b = self.buf();
                for l in lanes.iter() {
                    let mut env = self.env.borrow_mut();
                    env[self.row] = l as i64;
                    // A non-finite or huge index saturates, then fails the bounds check.
                    let v = idx.at(l).trunc() as i64;
                    b[l] = self.cx.load(*input, map, &env, shape, Some((*g, v)))?;
                }
                self.recycle(idx);
                V::R(b)
            }
            CExpr::Unary(f, k, x) => {
                let x = self.eval(x, lanes)?;
                self.map(x, lanes, |v| k.round(unary(*f, v)))
            }
            CExpr::Binary(f, k, a, b) => {
                let a = self.eval(a, lanes)?;
                let b = self.eval(b, lanes)?;
                self.binary_row(*f, *k, a, b, lanes)
            }
            CExpr::Select(p, t, f) => {
                let taken = self.restrict(p, lanes.clone());
                self.branches(lanes, taken, t, f)?
            }
            CExpr::Where(c, a, b) => match self.eval(c, lanes)? {
                V::U(x) => self.eval(if x != 0.0 { a } else { b }, lanes)?,
                V::R(cv) => {
                    let taken = lanes.filter(self.len, |l| cv[l] != 0.0);
                    self.give(cv);
                    self.branches(lanes, taken, a, b)?
                }
            },
            CExpr::Reduce {
                op,
                slots,
                extents,
                init,
                dtype,
                body,
            } => self.reduce(lanes, (*op, *dtype, *init), slots, extents, body)?,
            CExpr::Index(m, c) => self.index_row(m, c, lanes),
            CExpr::Cast(to, x) => {
                let x = self.eval(x, lanes)?;
                self.map(x, lanes, |v| to.round(v))
            }
        })
    }

    /// Index expression `m` (class `c`) at the row's lanes: stepped where it is affine.
    fn index_row(&self, m: &CAxis, c: &Cls, lanes: &Lanes) -> V {
        let (lo, hi) = lanes.range();
        match self.linear(m, c, lo, hi) {
            Some((a, 0)) if c.class == Class::Uniform => V::U(a as f64),
            Some((a, s)) => {
                let mut b = self.buf();
                for (l, x) in b.iter_mut().enumerate().take(hi).skip(lo) {
                    *x = (a + s * (l - lo) as i64) as f64;
                }
                V::R(b)
            }
            None => {
                let mut b = self.buf();
                for l in lanes.iter() {
                    b[l] = self.axis_at(m, l) as f64;
                }
                V::R(b)
            }
        }
    }

    /// Let `li`'s array at the row's lanes (`addr`: `(env slot, stride)` pairs; the row's slot
    /// steps along the lanes).
    fn let_row(&self, li: usize, addr: &[(usize, usize)], lanes: &Lanes) -> V {
        let env = self.env.borrow();
        let (mut base, mut step) = (0usize, 0usize);
        for (s, st) in addr {
            if *s == self.row {
                step += st;
            } else {
                base += env[*s] as usize * st;
            }
        }
        let src = self.cx.lets.get(li).map_or(&[][..], |v| &v[..]);
        let get = |i: usize| src.get(i).copied().unwrap_or(f64::NAN);
        if step == 0 {
            V::U(get(base))
        } else {
            let mut b = self.buf();
            let (lo, hi) = lanes.range();
            for (l, x) in b.iter_mut().enumerate().take(hi).skip(lo) {
                *x = get(base + l * step);
            }
            V::R(b)
        }
    }

    /// `f` in kind `k` over two row values, lane by lane where either varies.
    fn binary_row(&self, f: BinaryFn, k: Kind, a: V, b: V, lanes: &Lanes) -> V {
        let (lo, hi) = lanes.range();
        match (a, b) {
            (V::U(x), V::U(y)) => V::U(binary(f, k, x, y)),
            (V::R(mut v), V::U(y)) => {
                for x in &mut v[lo..hi] {
                    *x = binary(f, k, *x, y);
                }
                V::R(v)
            }
            (V::U(x), V::R(mut v)) => {
                for y in &mut v[lo..hi] {
                    *y = binary(f, k, x, *y);
                }
                V::R(v)
            }
            (V::R(mut v), V::R(w)) => {
                for (x, y) in v[lo..hi].iter_mut().zip(&w[lo..hi]) {
                    *x = binary(f, k, *x, *y);
                }
                self.give(w);
                V::R(v)
            }
        }
    }

    fn recycle(&self, v: V) {
        if let V::R(b) = v {
            self.give(b);
        }
    }

    /// `then` on the lanes `taken` of `lanes`, `otherwise` on the rest; each branch evaluated
    /// only where it is taken.
    fn branches(&self, lanes: &Lanes, taken: Lanes, then: &CExpr, otherwise: &CExpr) -> EResult<V> {
        let n = taken.count();
        if n == lanes.count() {
            return self.eval(then, lanes);
        }
        if n == 0 {
            return self.eval(otherwise, lanes);
        }
        let rest = lanes.filter(self.len, |l| !taken.has(l));
        let t = self.eval(then, &taken)?;
        let f = self.eval(otherwise, &rest)?;
        let mut b = self.lanes_of(t);
        for l in rest.iter() {
            b[l] = f.at(l);
        }
        self.recycle(f);
        Ok(V::R(b))
    }

    fn reduce(
        &self,
        lanes: &Lanes,
        (op, dtype, init): (ReduceOp, DType, f64),
        slots: &[usize],
        extents: &[i64],
        body: &CExpr,
    ) -> EResult<V> {
        let mut acc = V::U(init);
        if !extents.iter().all(|e| *e > 0) {
            return Ok(acc);
        }
        for s in slots {
            self.env.borrow_mut()[*s] = 0;
        }
        let (lo, hi) = lanes.range();
        let step = |a: f64, v: f64| round(dtype, fold(op, dtype, a, round(dtype, v)));
        loop {
            let v = self.eval(body, lanes)?;
            acc = match (acc, v) {
                (V::U(a), V::U(v)) => V::U(step(a, v)),
                (V::U(a), V::R(mut v)) => {
                    for x in &mut v[lo..hi] {
                        *x = step(a, *x);
                    }
                    V::R(v)
                }
                (V::R(mut a), V::U(v)) => {
                    for x in &mut a[lo..hi] {
                        *x = step(*x, v);
                    }
                    V::R(a)
                }
                (V::R(mut a), V::R(v)) => {
                    for (x, y) in a[lo..hi].iter_mut().zip(&v[lo..hi]) {
                        *x = step(*x, *y);
                    }
                    self.give(v);
                    V::R(a)
                }
            };
            if !advance(&mut self.env.borrow_mut(), slots, extents) {
                break;
            }
        }
        Ok(acc)
    }

    /// Reads input `input` at `map` on `lanes`: stepped with bounds checked at the ends when
    /// every map entry is uniform or affine, else the point evaluator's load lane by lane.
    fn read(
        &self,
        input: usize,
        map: &[CAxis],
        cls: &[Cls],
        shape: &[usize],
        lanes: &Lanes,
    ) -> EResult<V> {
        let (lo, hi) = lanes.range();
        let (mut base, mut step) = (0i64, 0i64);
        let mut fast = true;
        for ((m, c), s) in map.iter().zip(cls).zip(shape) {
            let Some((a, sl)) = self.linear(m, c, lo, hi) else {
                fast = false;
                break;
            };
            let z = a + sl * (hi - 1 - lo) as i64;
            let s = *s as i64;
            if a < 0 || a >= s || z < 0 || z >= s {
                // Some active lane is out of bounds: the lane-by-lane load reports it.
                fast = false;
                break;
            }
            base = base * s + a;
            step = step * s + sl;
        }
        let t = self.cx.inputs[input];
        if !fast {
            let mut b = self.buf();
            for l in lanes.iter() {
                let mut env = self.env.borrow_mut();
                env[self.row] = l as i64;
                b[l] = self.cx.load(input, map, &env, shape, None)?;
            }
            return Ok(V::R(b));
        }
        if step == 0 && cls.iter().all(|c| c.class == Class::Uniform) {
            return Ok(V::U(t.get_f64(base as usize)));
        }
        let mut b = self.buf();
        let at = |l: usize| (base + step * (l - lo) as i64) as usize;
        match &t.data {
            TensorData::F32(v) => {
                for (l, x) in b.iter_mut().enumerate().take(hi).skip(lo) {
                    *x = v[at(l)] as f64;
                }
            }
            TensorData::I32(v) => {
                for (l, x) in b.iter_mut().enumerate().take(hi).skip(lo) {
                    *x = v[at(l)] as f64;
                }
            }
            TensorData::Bool(v) => {
                for (l, x) in b.iter_mut().enumerate().take(hi).skip(lo) {
                    *x = if v[at(l)] { 1.0 } else { 0.0 };
                }
            }
        }
        Ok(V::R(b))
    }
}

/// [`DType::round`], with fp32 (the usual accumulator) inline.
#[inline(always)]
fn round(dt: DType, x: f64) -> f64 {
    match dt {
        DType::F32 => x as f32 as f64,
        _ => dt.round(x),
    }
}

/// The lanes of `lo..hi` where `d0 + slope·(l − lo) op 0` holds (`d` is monotone in `l`).
fn cmp_span(op: super::CmpOp, d0: i128, slope: i128, lo: usize, hi: usize) -> Lanes {
    let holds = |l: usize| {
        let d = d0 + slope * (l - lo) as i128;
        match op {
            super::CmpOp::Ge => d >= 0,
            super::CmpOp::Gt => d > 0,
            super::CmpOp::Le => d <= 0,
            super::CmpOp::Lt => d < 0,
            super::CmpOp::Eq => d == 0,
        }
    };
    let (first, last) = (holds(lo), holds(hi - 1));
    if op == super::CmpOp::Eq && slope != 0 {
        // At most one lane.
        let at = (-d0).checked_div(slope).filter(|_| (-d0) % slope == 0);
        return match at.and_then(|t| usize::try_from(t).ok()) {
            Some(t) if t < hi - lo => Lanes::Span(lo + t, lo + t + 1),
            _ => Lanes::Span(lo, lo),
        };
    }
    if first == last {
        // Monotone: every lane agrees with both ends.
        return if first {
            Lanes::Span(lo, hi)
        } else {
            Lanes::Span(lo, lo)
        };
    }
    // The first lane where the truth value changes.
    let (mut a, mut b) = (lo, hi - 1);
    while b - a > 1 {
        let m = a + (b - a) / 2;
        if holds(m) == first {
            a = m;
        } else {
            b = m;
        }
    }
    if first {
        Lanes::Span(lo, b)
    } else {
        Lanes::Span(b, hi)
    }
}
