//! The exact oracle: the naive interpreter's index arithmetic, reductions and scans.

use super::super::unravel;
use dlc_egg::ir::dtype::DType;

pub fn ravel(i: &[usize], shape: &[usize]) -> usize {
    i.iter().zip(shape).fold(0, |acc, (a, d)| acc * d + a)
}

/// Values of every index of `shape`, row-major.
pub fn tabulate(shape: &[usize], f: impl Fn(&[usize]) -> f64) -> Vec<f64> {
    let n: usize = shape.iter().product();
    (0..n).map(|k| f(&unravel(k, shape))).collect()
}

/// `max` as graph-json's reductions and PyTorch define it: NaN propagates.
pub fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a >= b {
        a
    } else {
        b
    }
}

pub fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a <= b {
        a
    } else {
        b
    }
}

/// The combining function of a reduction or a scan.
#[derive(Clone, Copy, PartialEq)]
pub enum Comb {
    Max,
    Min,
    Sum,
    Prod,
}

impl Comb {
    /// `fn` of Reduce (`mean` sums) or Cumulative.
    pub fn parse(f: &str) -> Comb {
        match f {
            "max" => Comb::Max,
            "min" => Comb::Min,
            "prod" => Comb::Prod,
            _ => Comb::Sum,
        }
    }

    pub fn identity(self, dt: DType) -> f64 {
        match self {
            Comb::Max => dt.lowest(),
            Comb::Min => dt.highest(),
            Comb::Sum => 0.0,
            Comb::Prod => 1.0,
        }
    }

    /// In f64, or with wrapping i32 arithmetic for `i32`.
    pub fn apply(self, a: f64, b: f64, dt: DType) -> f64 {
        let int = dt == DType::I32;
        match self {
            Comb::Max => nan_max(a, b),
            Comb::Min => nan_min(a, b),
            Comb::Sum if int => f64::from((a as i32).wrapping_add(b as i32)),
            Comb::Prod if int => f64::from((a as i32).wrapping_mul(b as i32)),
            Comb::Sum => a + b,
            Comb::Prod => a * b,
        }
    }
}

pub fn ref_reduce(shape: &[usize], v: &[f64], axes: &[usize], comb: Comb, dt: DType) -> Vec<f64> {
    let out: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(a, d)| if axes.contains(&a) { 1 } else { *d })
        .collect();
    let mut acc = vec![comb.identity(dt); out.iter().product()];
    for (k, x) in v.iter().enumerate() {
        let mut i = unravel(k, shape);
        for a in axes {
            i[*a] = 0;
        }
        let o = ravel(&i, &out);
        acc[o] = comb.apply(acc[o], *x, dt);
    }
    acc
}

pub fn ref_scan(
    shape: &[usize],
    v: &[f64],
    axis: usize,
    comb: Comb,
    reverse: bool,
    exclusive: bool,
    dt: DType,
) -> Vec<f64> {
    let n = shape[axis];
    tabulate(shape, |o| {
        let mut acc = comb.identity(dt);
        let mut j = o.to_vec();
        for k in 0..n {
            let take = match (reverse, exclusive) {
                (false, false) => k <= o[axis],
                (false, true) => k < o[axis],
                (true, false) => k >= o[axis],
                (true, true) => k > o[axis],
            };
            if take {
                j[axis] = k;
                acc = comb.apply(acc, v[ravel(&j, shape)], dt);
            }
        }
        acc
    })
}
