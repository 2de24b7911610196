//! The rbssa phase end to end: soundness on random movement chains (proptest, every chain folded
//! into READs and compared bit for bit), and every example graph (saturates, outputs identical; the
//! GEMM's operands are each one READ of an INPUT). Per-rule tests live in `src/rules/rbssa_tests.rs`.

use dlc_egg::ir::axis::AccessMap;
use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::tiny::{Builder, NodeId, Program, TinyError, UOp};
use dlc_egg::ir::{frontend, lower};
use dlc_egg::rules::rbssa::fold_reads;
use dlc_egg::rules::testing::{check_sound, Compare};
use dlc_egg::rules::{all_phases, Budget};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A tiny deterministic generator for op parameters.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

const MAX_NUMEL: i64 = 2048;

fn ints(b: &Builder, x: NodeId) -> Vec<i64> {
    b.shape(x)
        .iter()
        .map(|d| d.as_int().expect("concrete"))
        .collect()
}

fn dims(v: &[i64]) -> Vec<Dim> {
    v.iter().map(|x| Dim::int(*x)).collect()
}

fn raw(b: &mut Builder, uop: UOp, x: NodeId, shape: Vec<i64>) -> Result<NodeId, TinyError> {
    let dt = b.dtype(x);
    b.push(uop, vec![x.into()], dt, dims(&shape))
}

fn prime_factors(mut n: i64) -> Vec<i64> {
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
fn apply(b: &mut Builder, x: NodeId, kind: u8, seed: u64) -> Result<NodeId, TinyError> {
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
fn chain(shape: &[i64], ops: &[(u8, u64)], mid: usize) -> Program {
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_movement_chains_fold_into_reads(
        shape in prop::collection::vec(1i64..=5, 1..=4),
        ops in prop::collection::vec((0u8..8, any::<u64>()), 1..8),
        mid in 0usize..8,
    ) {
        let p = chain(&shape, &ops, mid);
        let (q, stats) = fold_reads(&p, &Budget::default()).map_err(TestCaseError::fail)?;
        prop_assert!(stats.saturated(), "{:?}", stats);
        check_sound(&p, &q, &BTreeMap::new(), &[1, 2], Compare::BitExact)
            .map_err(TestCaseError::fail)?;
        // Concrete shapes always fold unless two PADs have different fills (then the outer PAD
        // and what follows it stay); every READ reads the INPUT or a CAST (a compute op).
        let fills: std::collections::BTreeSet<u64> = p
            .nodes
            .iter()
            .filter_map(|n| match n.uop {
                UOp::Pad { value, .. } => Some(value.to_bits()),
                _ => None,
            })
            .collect();
        for n in &q.nodes {
            let view = n.uop.is_movement() && !matches!(n.uop, UOp::Read { .. });
            prop_assert!(!view || fills.len() > 1, "{:#?}", q);
            if matches!(n.uop, UOp::Read { .. }) {
                let src = match n.src[0] {
                    dlc_egg::ir::tiny::Src::Node(s) => s,
                    _ => unreachable!(),
                };
                prop_assert!(!q.node(src).uop.is_movement(), "{:#?}", q);
            }
        }
    }
}

fn examples() -> Vec<(String, Program)> {
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

#[test]
fn rbssa_is_a_phase_after_movement() {
    let names: Vec<&str> = all_phases().iter().map(|(n, _)| *n).collect();
    let at = |n: &str| names.iter().position(|x| *x == n);
    assert!(
        at("movement").is_some() && at("rbssa") > at("movement"),
        "{names:?}"
    );
}

#[test]
fn examples_saturate_and_keep_outputs() {
    let budget = Budget::default();
    for (name, p) in examples() {
        let (q, stats) = fold_reads(&p, &budget).unwrap_or_else(|e| panic!("{name}: {e}"));
        let views = |p: &Program| {
            p.nodes
                .iter()
                .filter(|n| n.uop.is_movement() && !matches!(n.uop, UOp::Read { .. }))
                .count()
        };
        println!(
            "{name}: tiny {} -> {} nodes, views {} -> {}; e-graph {} -> {} e-nodes; {} iterations, {}; applied {:?}",
            p.nodes.len(),
            q.nodes.len(),
            views(&p),
            views(&q),
            stats.egraph_nodes_before,
            stats.egraph_nodes,
            stats.iterations,
            stats.stop_reason,
            stats.applied
        );
        assert!(stats.saturated(), "{name}: {stats:?}");
        let b = p.symbols.clone();
        check_sound(&p, &q, &b, &[7], Compare::BitExact).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn gemm_operands_are_one_read_each() {
    let (_, p) = examples()
        .into_iter()
        .find(|(n, _)| n == "gemm_bias_relu")
        .expect("gemm example");
    let (q, _) = fold_reads(&p, &Budget::default()).unwrap_or_else(|e| panic!("{e}"));
    let input_of = |name: &str| {
        q.inputs
            .iter()
            .find(|i| i.tensor == name)
            .map(|i| i.node)
            .expect("input")
    };
    let reads_of = |x: NodeId| -> Vec<AccessMap> {
        q.nodes
            .iter()
            .filter_map(|n| match (&n.uop, n.src.first()) {
                (UOp::Read { access }, Some(dlc_egg::ir::tiny::Src::Node(s))) if *s == x => {
                    Some(access.clone())
                }
                _ => None,
            })
            .collect()
    };
    let text = |a: &AccessMap| -> Vec<String> { a.index.iter().map(|e| e.to_string()).collect() };
    let (a, b) = (reads_of(input_of("A")), reads_of(input_of("B")));
    assert_eq!(a.len(), 1, "{q:#?}");
    assert_eq!(b.len(), 1, "{q:#?}");
    // out[m, n, k] = A[m, k] * B[k, n]: A is read at [i0, i2], B at [i2, i1]; no guards.
    assert_eq!(text(&a[0]), ["i0", "i2"]);
    assert_eq!(text(&b[0]), ["i2", "i1"]);
    assert!(a[0].guard.is_none() && b[0].guard.is_none());
    let views = q
        .nodes
        .iter()
        .filter(|n| n.uop.is_movement() && !matches!(n.uop, UOp::Read { .. }))
        .count();
    assert_eq!(views, 0, "{q:#?}");
}
