//! Values: a storage buffer (borrowed input or shared owned buffer) seen through a [`View`], and
//! the row loads the interpreter performs on them.

use super::view::{guard_interval, View};
use crate::ir::dtype::DType;
use crate::tensor::TensorData;
use std::sync::Arc;

/// Element storage of a value: a caller's input tensor (never copied) or an owned buffer.
#[derive(Clone, Debug)]
pub enum Store<'a> {
    Borrowed(&'a TensorData),
    Owned(Arc<TensorData>),
}

impl Store<'_> {
    /// The buffer.
    pub fn data(&self) -> &TensorData {
        match self {
            Store::Borrowed(d) => d,
            Store::Owned(d) => d,
        }
    }
}

/// Number of elements of a buffer.
pub fn data_len(d: &TensorData) -> usize {
    match d {
        TensorData::F32(v) => v.len(),
        TensorData::I32(v) => v.len(),
        TensorData::Bool(v) => v.len(),
    }
}

/// Element `i` widened to `f64`, `None` when out of range.
#[inline]
pub fn read(d: &TensorData, i: i64) -> Option<f64> {
    let i = usize::try_from(i).ok()?;
    match d {
        TensorData::F32(v) => v.get(i).map(|x| *x as f64),
        TensorData::I32(v) => v.get(i).map(|x| *x as f64),
        TensorData::Bool(v) => v.get(i).map(|x| if *x { 1.0 } else { 0.0 }),
    }
}

/// A node's value: storage seen through a view.
#[derive(Clone, Debug)]
pub struct Value<'a> {
    pub store: Store<'a>,
    pub view: View,
    pub dtype: DType,
}

/// What a row load produced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Loaded {
    /// Every element of the row is this value (`out` untouched).
    Scalar(f64),
    /// `out[..len]` holds the row.
    Row,
}

/// An address outside the storage (an evaluator bug; reported, never a panic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadAddress;

impl Value<'_> {
    /// Element at `idx` (one index per axis of the value).
    pub fn at(&self, idx: &[i64], scratch: &mut Vec<i64>) -> Result<f64, BadAddress> {
        match self.view.locate(idx, scratch) {
            Ok(a) => read(self.store.data(), a).ok_or(BadAddress),
            Err(fill) => Ok(fill),
        }
    }

    /// Loads the row `idx[ax] = t0 .. t0 + len` (`idx[ax]` holds `t0`, other axes fixed).
    pub fn load_row(
        &self,
        idx: &[i64],
        ax: usize,
        len: usize,
        out: &mut [f64],
        scratch: &mut Vec<i64>,
    ) -> Result<Loaded, BadAddress> {
        let top = self.view.top();
        let base = top.addr.eval(idx);
        let st = top.addr.c.get(ax).copied().unwrap_or(0);
        let (mut lo, mut hi) = (0usize, len);
        for g in &top.guards {
            let gc = g.lin.c.get(ax).copied().unwrap_or(0);
            let (a, b) = guard_interval(g.lin.eval(idx), gc, g.size, len);
            lo = lo.max(a);
            hi = hi.min(b);
        }
        if lo >= hi {
            return Ok(Loaded::Scalar(top.fill));
        }
        let data = self.store.data();
        if self.view.layers.len() > 1 {
            self.load_layered(base, st, (lo, hi), len, out, scratch)?;
            return Ok(Loaded::Row);
        }
        if st == 0 && lo == 0 && hi == len {
            return read(data, base).map(Loaded::Scalar).ok_or(BadAddress);
        }
        let out = out.get_mut(..len).ok_or(BadAddress)?;
        out[..lo].fill(top.fill);
        out[hi..].fill(top.fill);
        let first = base.wrapping_add(st.wrapping_mul(lo as i64));
        gather(data, first, st, &mut out[lo..hi])?;
        Ok(Loaded::Row)
    }

    /// Row load through several layers: the top layer gives row-major indices of the one below.
    fn load_layered(
        &self,
        base: i64,
        st: i64,
        (lo, hi): (usize, usize),
        len: usize,
        out: &mut [f64],
        scratch: &mut Vec<i64>,
    ) -> Result<(), BadAddress> {
        let top = self.view.top();
        let out = out.get_mut(..len).ok_or(BadAddress)?;
        out[..lo].fill(top.fill);
        out[hi..].fill(top.fill);
        let below = self.view.layers.len() - 2;
        let data = self.store.data();
        for (t, o) in out.iter_mut().enumerate().take(hi).skip(lo) {
            let flat = base.wrapping_add(st.wrapping_mul(t as i64));
            *o = match self.view.locate_flat(below, flat, scratch) {
                Ok(a) => read(data, a).ok_or(BadAddress)?,
                Err(fill) => fill,
            };
        }
        Ok(())
    }
}

/// `out[t] = data[first + t·st]`, after checking both ends lie inside the storage.
fn gather(data: &TensorData, first: i64, st: i64, out: &mut [f64]) -> Result<(), BadAddress> {
    let n = out.len();
    if n == 0 {
        return Ok(());
    }
    let last = first.wrapping_add(st.wrapping_mul(n as i64 - 1));
    let len = super::value::data_len(data) as i64;
    if first < 0 || first >= len || last < 0 || last >= len {
        return Err(BadAddress);
    }
    let first = first as usize;
    match data {
        TensorData::F32(v) => gather_typed(v, first, st, out, |x| *x as f64),
        TensorData::I32(v) => gather_typed(v, first, st, out, |x| *x as f64),
        TensorData::Bool(v) => gather_typed(v, first, st, out, |x| if *x { 1.0 } else { 0.0 }),
    }
    Ok(())
}

#[inline]
fn gather_typed<T>(v: &[T], first: usize, st: i64, out: &mut [f64], f: impl Fn(&T) -> f64) {
    let n = out.len();
    if st == 1 {
        for (o, x) in out.iter_mut().zip(&v[first..first + n]) {
            *o = f(x);
        }
    } else if st == 0 {
        out.fill(f(&v[first]));
    } else {
        let mut a = first as i64;
        for o in out.iter_mut() {
            *o = f(&v[a as usize]);
            a += st;
        }
    }
}
