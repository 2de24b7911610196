//! Views: how a value addresses its storage. A [`View`] is a stack of affine [`Layer`]s; the top
//! layer maps an index of the value to either a storage address (one layer) or a row-major index
//! into the layer below. Each layer carries linear validity guards (`0 <= c·idx + k < size`) with
//! one fill value, which is how PAD is represented without copying.
//!
//! Every movement op composes into the top layer, except a RESHAPE whose merged/split groups are
//! not contiguous in some linear form (then a new layer is pushed) and a PAD whose fill differs
//! from the top layer's existing guards' fill (likewise). Invariant: every index of a layer's shape
//! whose guards hold maps inside the layer below (or the storage).

use crate::ir::tiny::AffineIndex;

/// Why a movement op cannot be applied with the bound sizes.
#[derive(Clone, Debug, PartialEq)]
pub enum ViewError {
    /// Index arithmetic overflows `i64`.
    Overflow,
    /// Sizes are inconsistent (reshape count, expand, shrink range).
    Shape(String),
    /// A VIEW maps outside its input.
    OutOfBounds(String),
}

/// A linear form `k + Σ c[a]·idx[a]` over a layer's index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lin {
    pub c: Vec<i64>,
    pub k: i64,
}

impl Lin {
    /// The zero form over `rank` axes plus a constant.
    pub fn constant(rank: usize, k: i64) -> Lin {
        Lin {
            c: vec![0; rank],
            k,
        }
    }

    /// `idx[axis] + k`.
    pub fn axis(rank: usize, axis: usize, coeff: i64, k: i64) -> Lin {
        let mut l = Lin::constant(rank, k);
        if let Some(c) = l.c.get_mut(axis) {
            *c = coeff;
        }
        l
    }

    /// Value at `idx` (wrapping: only used on indices known to be in range).
    #[inline]
    pub fn eval(&self, idx: &[i64]) -> i64 {
        self.c
            .iter()
            .zip(idx)
            .fold(self.k, |acc, (c, i)| acc.wrapping_add(c.wrapping_mul(*i)))
    }

    /// The form after substituting old axis `j` by `map[j]` (forms over the new axes).
    pub fn substitute(&self, map: &[Lin], new_rank: usize) -> Result<Lin, ViewError> {
        let mut out = Lin::constant(new_rank, self.k);
        for (cj, m) in self.c.iter().zip(map) {
            if *cj == 0 {
                continue;
            }
            out.k = checked_add(out.k, checked_mul(*cj, m.k)?)?;
            for (o, mc) in out.c.iter_mut().zip(&m.c) {
                *o = checked_add(*o, checked_mul(*cj, *mc)?)?;
            }
        }
        Ok(out)
    }
}

fn checked_add(a: i64, b: i64) -> Result<i64, ViewError> {
    a.checked_add(b).ok_or(ViewError::Overflow)
}

fn checked_mul(a: i64, b: i64) -> Result<i64, ViewError> {
    a.checked_mul(b).ok_or(ViewError::Overflow)
}

/// Validity guard `0 <= lin(idx) < size`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guard {
    pub lin: Lin,
    pub size: i64,
}

impl Guard {
    #[inline]
    pub fn holds(&self, idx: &[i64]) -> bool {
        let v = self.lin.eval(idx);
        v >= 0 && v < self.size
    }
}

/// One affine layer.
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    pub shape: Vec<usize>,
    /// Storage address (bottom layer) or row-major index into the layer below.
    pub addr: Lin,
    /// All must hold, else the element is `fill`.
    pub guards: Vec<Guard>,
    pub fill: f64,
}

/// Row-major strides of a shape.
pub fn row_major_strides(shape: &[usize]) -> Vec<i64> {
    let mut s = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for (st, d) in s.iter_mut().zip(shape).rev() {
        *st = acc;
        acc = acc.saturating_mul(*d as i64);
    }
    s
}

/// Element count (saturating; callers bound sizes before building views).
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().fold(1usize, |a, d| a.saturating_mul(*d))
}

impl Layer {
    /// The row-major layer over `shape`.
    pub fn contiguous(shape: &[usize]) -> Layer {
        Layer {
            shape: shape.to_vec(),
            addr: Lin {
                c: row_major_strides(shape),
                k: 0,
            },
            guards: Vec::new(),
            fill: 0.0,
        }
    }

    /// Composes an affine re-indexing `old axis j = map[j](new idx)` into this layer.
    fn compose(&mut self, new_shape: Vec<usize>, map: &[Lin]) -> Result<(), ViewError> {
        let r = new_shape.len();
        self.addr = self.addr.substitute(map, r)?;
        for g in &mut self.guards {
            g.lin = g.lin.substitute(map, r)?;
        }
        self.shape = new_shape;
        Ok(())
    }
}

/// A value's addressing: `layers[0]` is the bottom (addresses storage), the last is the top.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    pub layers: Vec<Layer>,
}

impl View {
    /// The dense row-major view of `shape`.
    pub fn contiguous(shape: &[usize]) -> View {
        View {
            layers: vec![Layer::contiguous(shape)],
        }
    }

    /// A dense view stored with axis order `order` (storage axis `i` is value axis `order[i]`).
    pub fn with_layout(shape: &[usize], order: &[usize]) -> View {
        let stored: Vec<usize> = order.iter().map(|a| shape[*a]).collect();
        let st = row_major_strides(&stored);
        let mut c = vec![0i64; shape.len()];
        for (i, a) in order.iter().enumerate() {
            c[*a] = st[i];
        }
        View {
            layers: vec![Layer {
                shape: shape.to_vec(),
                addr: Lin { c, k: 0 },
                guards: Vec::new(),
                fill: 0.0,
            }],
        }
    }

    /// The top layer (the one indexed by the value's own index).
    pub fn top(&self) -> &Layer {
        // A view always has at least one layer (constructors guarantee it).
        &self.layers[self.layers.len() - 1]
    }

    fn top_mut(&mut self) -> &mut Layer {
        let n = self.layers.len() - 1;
        &mut self.layers[n]
    }

    /// The value's shape.
    pub fn shape(&self) -> &[usize] {
        &self.top().shape
    }

    /// True when the view is exactly the row-major layout of its shape over storage of `len`.
    pub fn is_dense_row_major(&self, len: usize) -> bool {
        let l = self.top();
        self.layers.len() == 1
            && l.guards.is_empty()
            && l.addr.k == 0
            && numel(&l.shape) == len
            && l.addr
                .c
                .iter()
                .zip(row_major_strides(&l.shape))
                .zip(&l.shape)
                .all(|((c, s), d)| *d == 1 || *c == s)
    }

    /// A new top layer addressing the current top's row-major index, with shape `shape`.
    fn push_row_major(&mut self, shape: &[usize]) {
        self.layers.push(Layer::contiguous(shape));
    }

    /// PERMUTE: new axis `a` is old axis `perm[a]`.
    pub fn permute(&mut self, perm: &[usize]) -> Result<(), ViewError> {
        let old = self.shape().to_vec();
        let r = old.len();
        if perm.len() != r {
            return Err(ViewError::Shape(format!("bad permutation {perm:?}")));
        }
        let mut map = vec![Lin::constant(r, 0); r];
        let mut new_shape = vec![0; r];
        for (a, p) in perm.iter().enumerate() {
            let (m, d) = map
                .get_mut(*p)
                .zip(old.get(*p))
                .ok_or_else(|| ViewError::Shape(format!("bad permutation {perm:?}")))?;
            *m = Lin::axis(r, a, 1, 0);
            new_shape[a] = *d;
        }
        self.top_mut().compose(new_shape, &map)
    }

    /// EXPAND: size-1 axes broadcast to `new_shape`.
    pub fn expand(&mut self, new_shape: &[usize]) -> Result<(), ViewError> {
        let old = self.shape().to_vec();
        if old.len() != new_shape.len() {
            return Err(ViewError::Shape(format!(
                "EXPAND from {old:?} to {new_shape:?} changes the rank"
            )));
        }
        let r = old.len();
        let mut map = Vec::with_capacity(r);
        for (j, (o, n)) in old.iter().zip(new_shape).enumerate() {
            if o == n {
                map.push(Lin::axis(r, j, 1, 0));
            } else if *o == 1 {
                map.push(Lin::constant(r, 0));
            } else {
                return Err(ViewError::Shape(format!(
                    "EXPAND from {old:?} to {new_shape:?}: axis {j} is neither equal nor 1"
                )));
            }
        }
        self.top_mut().compose(new_shape.to_vec(), &map)
    }

    /// PAD every axis by `(lo, hi)` with `fill` outside.
    pub fn pad(&mut self, pads: &[(i64, i64)], fill: f64) -> Result<(), ViewError> {
        let old = self.shape().to_vec();
        if pads.len() != old.len() || pads.iter().any(|(l, h)| *l < 0 || *h < 0) {
            return Err(ViewError::Shape(format!("bad PAD {pads:?} for {old:?}")));
        }
        let top = self.top();
        if !top.guards.is_empty() && top.fill.to_bits() != fill.to_bits() {
            self.push_row_major(&old);
        }
        let r = old.len();
        let mut map = Vec::with_capacity(r);
        let mut new_shape = Vec::with_capacity(r);
        let mut guards = Vec::new();
        for (j, (d, (lo, hi))) in old.iter().zip(pads).enumerate() {
            map.push(Lin::axis(r, j, 1, -lo));
            let n = (*d as i64)
                .checked_add(lo + hi)
                .ok_or(ViewError::Overflow)?;
            new_shape.push(n as usize);
            if *lo != 0 || *hi != 0 {
                guards.push(Guard {
                    lin: Lin::axis(r, j, 1, -lo),
                    size: *d as i64,
                });
            }
        }
        let top = self.top_mut();
        top.compose(new_shape, &map)?;
        if !guards.is_empty() {
            top.guards.extend(guards);
            top.fill = fill;
        }
        Ok(())
    }

    /// SHRINK: keep `lo <= i < hi` with `step` on every axis.
    pub fn shrink(&mut self, lo: &[i64], hi: &[i64], step: &[i64]) -> Result<(), ViewError> {
        let old = self.shape().to_vec();
        let r = old.len();
        if lo.len() != r || hi.len() != r || step.len() != r {
            return Err(ViewError::Shape(
                "SHRINK needs one lo/hi/step per axis".into(),
            ));
        }
        let mut map = Vec::with_capacity(r);
        let mut new_shape = Vec::with_capacity(r);
        for j in 0..r {
            let (l, h, s, d) = (lo[j], hi[j], step[j], old[j] as i64);
            if !(0 <= l && l <= h && h <= d && s >= 1) {
                return Err(ViewError::Shape(format!(
                    "SHRINK axis {j}: need 0 <= {l} <= {h} <= {d} and step {s} >= 1"
                )));
            }
            map.push(Lin::axis(r, j, s, l));
            new_shape.push(((h - l + s - 1) / s) as usize);
        }
        self.top_mut().compose(new_shape, &map)
    }

    /// FLIP the given axes.
    pub fn flip(&mut self, axes: &[usize]) -> Result<(), ViewError> {
        let old = self.shape().to_vec();
        let r = old.len();
        let mut map: Vec<Lin> = (0..r).map(|j| Lin::axis(r, j, 1, 0)).collect();
        for a in axes {
            let d = old
                .get(*a)
                .ok_or_else(|| ViewError::Shape(format!("FLIP axis {a} out of range")))?;
            map[*a] = Lin::axis(r, *a, -1, *d as i64 - 1);
        }
        self.top_mut().compose(old, &map)
    }

    /// VIEW: old axis `j` index is `map[j]` over the new axes of `new_shape`; every new index must
    /// land inside the old shape.
    pub fn affine(&mut self, map: &[AffineIndex], new_shape: &[usize]) -> Result<(), ViewError> {
        let old = self.shape().to_vec();
        if map.len() != old.len() {
            return Err(ViewError::Shape(
                "VIEW map rank differs from its input".into(),
            ));
        }
        let r = new_shape.len();
        let mut lins = Vec::with_capacity(map.len());
        let empty = new_shape.contains(&0);
        for (j, e) in map.iter().enumerate() {
            let mut l = Lin::constant(r, e.offset);
            let (mut lo, mut hi) = (e.offset, e.offset);
            for (a, c) in &e.terms {
                let slot =
                    l.c.get_mut(*a)
                        .ok_or_else(|| ViewError::Shape(format!("VIEW axis {a} out of range")))?;
                *slot = checked_add(*slot, *c)?;
                let span = checked_mul(*c, (new_shape[*a] as i64 - 1).max(0))?;
                if span < 0 {
                    lo = checked_add(lo, span)?;
                } else {
                    hi = checked_add(hi, span)?;
                }
            }
            if !empty && (lo < 0 || hi >= old[j] as i64) {
                return Err(ViewError::OutOfBounds(format!(
                    "VIEW input axis {j} index `{e}` spans [{lo}, {hi}] outside [0, {})",
                    old[j]
                )));
            }
            lins.push(l);
        }
        self.top_mut().compose(new_shape.to_vec(), &lins)
    }

    /// RESHAPE (row-major): composes when possible, else pushes a new layer.
    pub fn reshape(&mut self, new_shape: &[usize]) -> Result<(), ViewError> {
        let old = self.shape().to_vec();
        let n = numel(&old);
        if n != numel(new_shape) {
            return Err(ViewError::Shape(format!(
                "RESHAPE from {old:?} to {new_shape:?} changes the element count"
            )));
        }
        if n == 0 {
            // Nothing is ever read from an empty value.
            *self = View::contiguous(new_shape);
            return Ok(());
        }
        match merge_reshape(self.top(), new_shape) {
            Some(layer) => *self.top_mut() = layer,
            None => self.push_row_major(new_shape),
        }
        Ok(())
    }

    /// Storage address of `idx`, or `Err(fill)` when a guard fails. `scratch` is reused.
    pub fn locate(&self, idx: &[i64], scratch: &mut Vec<i64>) -> Result<i64, f64> {
        let mut level = self.layers.len();
        scratch.clear();
        scratch.extend_from_slice(idx);
        loop {
            level -= 1;
            let l = &self.layers[level];
            if !l.guards.iter().all(|g| g.holds(scratch)) {
                return Err(l.fill);
            }
            let a = l.addr.eval(scratch);
            if level == 0 {
                return Ok(a);
            }
            unravel(a, &self.layers[level - 1].shape, scratch);
        }
    }

    /// Storage address of row-major index `flat` of layer `level` (used by multi-layer loads).
    pub fn locate_flat(&self, level: usize, flat: i64, scratch: &mut Vec<i64>) -> Result<i64, f64> {
        let mut level = level + 1;
        let mut a = flat;
        loop {
            level -= 1;
            let l = &self.layers[level];
            unravel(a, &l.shape, scratch);
            if !l.guards.iter().all(|g| g.holds(scratch)) {
                return Err(l.fill);
            }
            a = l.addr.eval(scratch);
            if level == 0 {
                return Ok(a);
            }
        }
    }
}

/// Row-major multi-index of `flat` in `shape`, into `out`.
fn unravel(mut flat: i64, shape: &[usize], out: &mut Vec<i64>) {
    out.clear();
    out.resize(shape.len(), 0);
    for (o, d) in out.iter_mut().zip(shape).rev() {
        let d = (*d as i64).max(1);
        *o = flat % d;
        flat /= d;
    }
}

/// The top layer re-indexed by `new_shape` when every group of merged/split axes is contiguous
/// in the address and in every guard; `None` otherwise.
fn merge_reshape(layer: &Layer, new_shape: &[usize]) -> Option<Layer> {
    let old = &layer.shape;
    let old_nz: Vec<usize> = (0..old.len()).filter(|i| old[*i] != 1).collect();
    let new_nz: Vec<usize> = (0..new_shape.len())
        .filter(|i| new_shape[*i] != 1)
        .collect();
    let forms: Vec<&Lin> = std::iter::once(&layer.addr)
        .chain(layer.guards.iter().map(|g| &g.lin))
        .collect();
    let mut new_c = vec![vec![0i64; new_shape.len()]; forms.len()];
    let (mut i, mut j) = (0, 0);
    while i < old_nz.len() {
        let mut gi = vec![old_nz[i]];
        let mut po = old[old_nz[i]];
        i += 1;
        let mut gj = vec![*new_nz.get(j)?];
        let mut pn = new_shape[gj[0]];
        j += 1;
        while po != pn {
            if po < pn {
                let a = *old_nz.get(i)?;
                gi.push(a);
                po = po.checked_mul(old[a])?;
                i += 1;
            } else {
                let b = *new_nz.get(j)?;
                gj.push(b);
                pn = pn.checked_mul(new_shape[b])?;
                j += 1;
            }
        }
        for (f, nc) in forms.iter().zip(new_c.iter_mut()) {
            for w in gi.windows(2) {
                if f.c[w[0]] != f.c[w[1]].checked_mul(old[w[1]] as i64)? {
                    return None;
                }
            }
            let mut running = f.c[*gi.last()?];
            for b in gj.iter().rev() {
                nc[*b] = running;
                running = running.checked_mul(new_shape[*b] as i64)?;
            }
        }
    }
    if j != new_nz.len() {
        return None;
    }
    let mut out = layer.clone();
    out.shape = new_shape.to_vec();
    let mut it = new_c.into_iter();
    out.addr.c = it.next()?;
    for (g, c) in out.guards.iter_mut().zip(it) {
        g.lin.c = c;
    }
    Some(out)
}

/// The `t` in `[0, len)` with `0 <= g0 + gc·t < size`, as a half-open interval (empty: `lo == hi`).
#[inline]
pub fn guard_interval(g0: i64, gc: i64, size: i64, len: usize) -> (usize, usize) {
    let n = len as i64;
    if gc == 0 {
        return if 0 <= g0 && g0 < size {
            (0, len)
        } else {
            (0, 0)
        };
    }
    let small = |v: i64| v.unsigned_abs() < (1u64 << 40);
    let (lo, hi) = if small(g0) && small(gc) && small(size) && small(n) {
        if gc > 0 {
            (-g0.div_euclid(gc), (size - 1 - g0).div_euclid(gc) + 1)
        } else {
            ((g0 - size).div_euclid(-gc) + 1, g0.div_euclid(-gc) + 1)
        }
    } else {
        guard_interval_wide(g0 as i128, gc as i128, size as i128)
    };
    let lo = lo.clamp(0, n);
    let hi = hi.clamp(lo, n);
    (lo as usize, hi as usize)
}

/// [`guard_interval`] bounds for operands that could overflow `i64`, saturated into `i64`.
fn guard_interval_wide(g0: i128, gc: i128, size: i128) -> (i64, i64) {
    let (lo, hi) = if gc > 0 {
        (ceil_div(-g0, gc), (size - 1 - g0).div_euclid(gc) + 1)
    } else {
        ((g0 - size).div_euclid(-gc) + 1, g0.div_euclid(-gc) + 1)
    };
    let sat = |v: i128| v.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    (sat(lo), sat(hi))
}

fn ceil_div(a: i128, b: i128) -> i128 {
    -((-a).div_euclid(b))
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
