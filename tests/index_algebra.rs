//! Property test of the index algebra (issue 20): every `floor(e / d)` the one simplifier
//! (`dlc_egg::index::simplify`) answers preserves the value at every point of its range facts'
//! box, for random bindings of the size symbols. Fed with the answers the consumers produce on
//! the examples (IndexBook, the rbssa rules' access normal form, Poly-View / Poly Core and the
//! affine engine, collected through `index::trace`) plus random expressions with symbolic
//! coefficients, divisors and box sizes.

mod common;

use dlc_egg::dump::DumpLayer;
use dlc_egg::index::trace::{self, Sample};
use dlc_egg::index::{simplify, Atom, Coeff, Facts, Quasi};
use dlc_egg::ir::dim::Dim;
use dlc_egg::{
    ir::{frontend, indexbook},
    lower,
};
use std::collections::{BTreeMap, BTreeSet};

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

/// Coefficients the checker can evaluate under a symbol binding.
trait Value: Coeff {
    fn value(&self, env: &BTreeMap<String, i64>) -> Option<i64>;
    fn symbols(&self, out: &mut BTreeSet<String>);
}

impl Value for i64 {
    fn value(&self, _: &BTreeMap<String, i64>) -> Option<i64> {
        Some(*self)
    }
    fn symbols(&self, _: &mut BTreeSet<String>) {}
}

impl Value for Dim {
    fn value(&self, env: &BTreeMap<String, i64>) -> Option<i64> {
        self.eval_with(env).ok()
    }
    fn symbols(&self, out: &mut BTreeSet<String>) {
        out.extend(Dim::symbols(self));
    }
}

fn quasi_symbols<C: Value>(q: &Quasi<C, usize>, out: &mut BTreeSet<String>) {
    q.konst.symbols(out);
    for (a, c) in &q.terms {
        c.symbols(out);
        match a {
            Atom::Floor(e, d) => {
                d.symbols(out);
                quasi_symbols(e, out);
            }
            Atom::Min(x, y) | Atom::Max(x, y) => {
                quasi_symbols(x, out);
                quasi_symbols(y, out);
            }
            Atom::Var(_) | Atom::Opaque(_) => {}
        }
    }
}

fn value<C: Value>(q: &Quasi<C, usize>, point: &[i64], env: &BTreeMap<String, i64>) -> Option<i64> {
    q.eval::<Fail>(&|v| point.get(*v).copied().ok_or(Fail), &|c| {
        c.value(env).ok_or(Fail)
    })
    .ok()
}

struct Fail;

impl From<dlc_egg::index::IndexError> for Fail {
    fn from(_: dlc_egg::index::IndexError) -> Fail {
        Fail
    }
}

/// Checks one sample under a few symbol bindings; returns the number of points checked.
fn check<C: Value>(s: &Sample<C>, rng: &mut Rng) -> usize {
    let mut syms = BTreeSet::new();
    quasi_symbols(&s.input, &mut syms);
    quasi_symbols(&s.output, &mut syms);
    s.divisor.symbols(&mut syms);
    for (lo, hi) in s.ranges.iter().flatten() {
        lo.symbols(&mut syms);
        hi.symbols(&mut syms);
    }
    let mut checked = 0;
    for _ in 0..if syms.is_empty() { 1 } else { 4 } {
        let env: BTreeMap<String, i64> =
            syms.iter().map(|n| (n.clone(), rng.range(0, 9))).collect();
        let Some(d) = s.divisor.value(&env).filter(|d| *d > 0) else {
            continue;
        };
        // The box of the facts (unbounded variables over a window around 0).
        let mut bounds = Vec::new();
        for r in &s.ranges {
            bounds.push(match r {
                Some((lo, hi)) => match (lo.value(&env), hi.value(&env)) {
                    (Some(l), Some(h)) => (l, h),
                    _ => (-7, 7),
                },
                None => (-7, 7),
            });
        }
        if bounds.iter().any(|(l, h)| l > h) {
            continue; // an empty box: nothing to check
        }
        let total: i64 = bounds
            .iter()
            .map(|(l, h)| (h - l + 1).min(1 << 20))
            .product();
        let points = total.min(512);
        for p in 0..points {
            let point: Vec<i64> = if total <= 512 {
                let mut rest = p;
                bounds
                    .iter()
                    .map(|(l, h)| {
                        let n = h - l + 1;
                        let x = l + rest % n;
                        rest /= n;
                        x
                    })
                    .collect()
            } else {
                bounds
                    .iter()
                    .map(|(l, h)| rng.range(*l, (*h).min(l + 4096)))
                    .collect()
            };
            let (Some(x), Some(y)) = (
                value(&s.input, &point, &env),
                value(&s.output, &point, &env),
            ) else {
                continue; // opaque atoms have no value
            };
            assert_eq!(
                x.div_euclid(d),
                y,
                "floor(({:?}) / {:?}) simplified to {:?} at {point:?}, symbols {env:?}, ranges {:?}",
                s.input,
                s.divisor,
                s.output,
                s.ranges
            );
            checked += 1;
        }
    }
    checked
}

/// Variable `j` in `0..sizes[j]`.
struct BoxFacts<C>(Vec<C>);

impl<C: Coeff> Facts<C, usize> for BoxFacts<C> {
    fn range(&self, v: &usize) -> Option<(C, C)> {
        let s = self.0.get(*v)?;
        Some((C::int(0), s.checked_add(&C::int(-1))?))
    }
}

fn random_dim(rng: &mut Rng, symbolic: bool) -> Dim {
    let k = Dim::int(rng.range(-6, 9));
    if symbolic && rng.range(0, 2) == 0 {
        let s = Dim::sym(["N", "M"][rng.range(0, 1) as usize]);
        k.add(&s.mul_int(rng.range(-2, 3)))
    } else {
        k
    }
}

fn random_quasi(rng: &mut Rng, vars: usize, depth: u32) -> Quasi<Dim, usize> {
    let mut q = Quasi::constant(random_dim(rng, true));
    for _ in 0..rng.range(1, 3) {
        let atom = if depth > 0 && rng.range(0, 3) == 0 {
            let inner = random_quasi(rng, vars, depth - 1);
            let d = rng.range(2, 6);
            match simplify::floordiv(&inner, &Dim::int(d), &simplify::NoFacts) {
                Ok(f) => f,
                Err(_) => continue,
            }
        } else {
            Quasi::var(rng.range(0, vars as i64 - 1) as usize)
        };
        let symbolic = rng.range(0, 3) == 0;
        let c = random_dim(rng, symbolic);
        q = q.try_add(&atom.try_scale(&c).expect("dims")).expect("dims");
    }
    q
}

fn consumer_samples() -> Vec<Box<dyn std::any::Any + Send>> {
    trace::start();
    for ex in common::example_paths() {
        let g = frontend::load_file(&ex).expect("loads");
        let p = lower::lower(&g).expect("lowers");
        indexbook::index_book(&p).expect("IndexBook");
    }
    // The rbssa rules, Poly-View and Poly Core on the examples with strided and padded accesses.
    for name in ["conv3x3_s2_p1_silu", "conv_relu_pool", "matmul_1d_2d"] {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}.json"));
        common::optimized_dump(&path, DumpLayer::PolyCore);
    }
    trace::take()
}

#[test]
fn simplification_preserves_values_on_boxes() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut from_consumers, mut points) = (0, 0);
    for s in consumer_samples() {
        if let Some(s) = s.downcast_ref::<Sample<i64>>() {
            points += check(s, &mut rng);
        } else if let Some(s) = s.downcast_ref::<Sample<Dim>>() {
            points += check(s, &mut rng);
        } else {
            panic!("a sample of an unknown coefficient type");
        }
        from_consumers += 1;
    }
    assert!(
        from_consumers > 50,
        "only {from_consumers} samples from the consumers"
    );
    // Random expressions with symbolic coefficients over boxes with symbolic sizes.
    trace::start();
    for _ in 0..400 {
        let vars = rng.range(1, 3) as usize;
        let sizes: Vec<Dim> = (0..vars)
            .map(|_| match rng.range(0, 2) {
                0 => Dim::sym("N"),
                1 => Dim::sym("M").add_int(rng.range(0, 2)),
                _ => Dim::int(rng.range(1, 12)),
            })
            .collect();
        let e = random_quasi(&mut rng, vars, 2);
        let d = if rng.range(0, 4) == 0 {
            sizes[0].clone()
        } else {
            Dim::int(rng.range(1, 8))
        };
        // Non-positive or unprovable divisors are refused, never mis-simplified.
        let _ = simplify::floordiv(&e, &d, &BoxFacts(sizes));
        let i = Quasi::<i64, usize>::var(0usize)
            .scale(rng.range(-9, 9))
            .add(&Quasi::int(rng.range(-20, 20)));
        let _ = simplify::floordiv(&i, &rng.range(1, 9), &BoxFacts(vec![rng.range(1, 30)]));
    }
    let random = trace::take();
    assert!(random.len() >= 400);
    for s in random {
        if let Some(s) = s.downcast_ref::<Sample<i64>>() {
            points += check(s, &mut rng);
        } else if let Some(s) = s.downcast_ref::<Sample<Dim>>() {
            points += check(s, &mut rng);
        }
    }
    assert!(points > 10_000, "only {points} points checked");
}
