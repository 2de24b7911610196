//! Random chains of movement ops over one input (`chain`), shared by the movement and rbssa
//! phase tests, and the lowered example graphs.

use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::tiny::{Builder, NodeId, Program, TinyError, UOp};
use dlc_egg::{ir::frontend, lower};
use std::path::PathBuf;

/// A tiny deterministic generator for op parameters.
pub struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

pub const MAX_NUMEL: i64 = 2048;

pub fn ints(b: &Builder, x: NodeId) -> Vec<i64> {
    b.shape(x)
        .iter()
        .map(|d| d.as_int().expect("concrete"))
        .collect()
}

pub fn dims(v: &[i64]) -> Vec<Dim> {
    v.iter().map(|x| Dim::int(*x)).collect()
}

pub fn raw(b: &mut Builder, uop: UOp, x: NodeId, shape: Vec<i64>) -> Result<NodeId, TinyError> {
    let dt = b.dtype(x);
    b.push(uop, vec![x.into()], dt, dims(&shape))
}

pub fn prime_factors(mut n: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut p = 2;
    while n > 1 {
        while n % p == 0 {
            out.push(p);
            n /= p;
        }
        p += 1;
    }
    out
}

/// Applies movement op `kind` with parameters drawn from `seed`. Identity views are pushed as
/// nodes (not skipped as [`Builder`]'s shortcuts do) so the identity rules get exercised.
pub fn apply(b: &mut Builder, x: NodeId, kind: u8, seed: u64) -> Result<NodeId, TinyError> {
    let mut r = Lcg(seed);
    let s = ints(b, x);
    let rank = s.len();
    let numel: i64 = s.iter().product();
    match kind {
        0 => {
            let mut perm: Vec<usize> = (0..rank).collect();
            for i in (1..rank).rev() {
                perm.swap(i, r.below(i as u64 + 1) as usize);
            }
            raw(b, UOp::Permute { perm }, x, vec![])
        }
        1 => {
            let new_rank = 1 + r.below(4) as usize;
            let mut out = vec![1i64; new_rank];
            for p in prime_factors(numel) {
                out[r.below(new_rank as u64) as usize] *= p;
            }
            raw(b, UOp::Reshape, x, out)
        }
        2 => {
            let out: Vec<i64> = s
                .iter()
                .map(|d| if *d == 1 { 1 + r.below(3) as i64 } else { *d })
                .collect();
            if out.iter().product::<i64>() > MAX_NUMEL {
                return Ok(x);
            }
            raw(b, UOp::Expand, x, out)
        }
        3 => {
            let axes = (0..rank).filter(|_| r.below(2) == 1).collect();
            raw(b, UOp::Flip { axes }, x, vec![])
        }
        4 => {
            let full = r.below(4) == 0;
            let (mut lo, mut hi, mut step) = (vec![], vec![], vec![]);
            for d in &s {
                let l = if full { 0 } else { r.below(*d as u64) as i64 };
                let h = if full {
                    *d
                } else {
                    l + 1 + r.below((d - l) as u64) as i64
                };
                lo.push(Dim::int(l));
                hi.push(Dim::int(h));
                step.push(if full { 1 } else { 1 + r.below(2) as i64 });
            }
            raw(b, UOp::Shrink { lo, hi, step }, x, vec![])
        }
        5 => {
            let pad: Vec<(i64, i64)> = s
                .iter()
                .map(|_| (r.below(2) as i64, r.below(2) as i64))
                .collect();
            let grown: i64 = s.iter().zip(&pad).map(|(d, (l, h))| d + l + h).product();
            if grown > MAX_NUMEL {
                return Ok(x);
            }
            let value = r.below(2) as f64;
            raw(b, UOp::Pad { pad, value }, x, vec![])
        }
        _ => {
            let to = [DType::F32, DType::F16, DType::BF16][r.below(3) as usize];
            b.push(UOp::Cast, vec![x.into()], to, dims(&s))
        }
    }
}

/// `y` = the chain applied to input `x`; `z` = an intermediate node (shared with `y`'s chain).
pub fn chain(shape: &[i64], ops: &[(u8, u64)], mid: usize) -> Program {
    let mut b = Builder::new();
    let x = b.input("x", DType::F32, dims(shape)).expect("input");
    let mut cur = x;
    let mut prev_kind = 0;
    let mut z = x;
    for (i, (kind, seed)) in ops.iter().enumerate() {
        // Kind 7 repeats the previous kind, so same-op chains (pad-pad, flip-flip, …) are common.
        let k = if *kind == 7 { prev_kind } else { *kind };
        prev_kind = k;
        cur = apply(&mut b, cur, k, *seed).expect("generated ops are well-typed");
        if i == mid % ops.len() {
            z = cur;
        }
    }
    b.output("y", cur);
    b.output("z", z);
    b.finish()
}

/// Every example graph, lowered, by file stem (sorted).
pub fn examples() -> Vec<(String, Program)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty());
    paths
        .into_iter()
        .map(|path| {
            let g = frontend::load_file(&path).unwrap_or_else(|d| panic!("{d}"));
            let p = lower::lower(&g).unwrap_or_else(|d| panic!("{d}"));
            let name = path.file_stem().map(|s| s.to_string_lossy().into_owned());
            (name.unwrap_or_default(), p)
        })
        .collect()
}
