//! The rule author's test kit (verification ladder rung 2: every rewrite sound), used by every
//! built-in rule file's tests and meant for library users' rules too.
//!
//! - [`optimize`] adds a Tiny program to an e-graph, runs a rule set with [`run_phase`],
//!   extracts the smallest program (`egg::AstSize`, so a rule whose right-hand side is smaller
//!   wins) and rebuilds a verified Tiny program; [`check_work`] extracts by work instead
//!   ([`WorkCost`]) for rules whose right-hand side is larger but cheaper.
//! - [`check_sound`] evaluates original and rewritten programs with the reference evaluator on
//!   seeded random inputs ([`random_inputs`]) and compares the outputs ([`Compare`]).
//! - [`check`] does both and panics with a readable message, for tests; [`assert_fired`] /
//!   [`assert_not_fired`] check a rule's positive and negative cases; [`proves`] checks that a
//!   rule set proves two programs equal.
//! - [`check_optimized`] compares a whole [`crate::optimize::Optimized`] program with the
//!   reference evaluator under the numerics contract of fusion ([`Compare::Fused`],
//!   `docs/numerics.md`); [`graph_json_tolerance`] is graph-json's tolerance per dtype.
//!
//! ```
//! use dlc_egg::rules::testing::{assert_fired, check, Compare};
//! use dlc_egg::rules::Rule;
//! # let json = r#"{"signature": {"inputs": [{"tensor": "x"}], "outputs": [{"tensor": "y"}]},
//! #   "tensors": {"x": {"dtype": "fp32", "shape": [8]}, "y": {"dtype": "fp32", "shape": [8]}},
//! #   "graph": [{"op": "Elementwise", "name": "a", "inputs": ["x"], "outputs": ["h"],
//! #              "attrs": {"fn": "relu"}},
//! #             {"op": "Elementwise", "name": "b", "inputs": ["h"], "outputs": ["y"],
//! #              "attrs": {"fn": "relu"}}]}"#;
//! # let graph = dlc_egg::ir::frontend::load_str(json, "doc.json").unwrap();
//! # let prog = dlc_egg::run::lower_and_verify(&graph).unwrap();
//! // `prog` computes relu(relu(x)).
//! let rule: Rule = egg::rewrite!("relu-idem"; "(relu (relu ?x))" => "(relu ?x)");
//! let outcome = check(&prog, &[rule], &Default::default(), Compare::BitExact);
//! assert_fired(&outcome.stats, "relu-idem");
//! assert!(outcome.rewritten.nodes.len() < outcome.original.nodes.len());
//! ```

use super::{run_phase, Budget, PhaseStats, Rule};
use crate::eval::evaluate;
use crate::ir::egraph::{add_program, extract_program, TensorGraph};
use crate::ir::region::program::RegionProgram;
use crate::ir::tiny::Program;
use crate::tensor::Tensor;
use egg::{AstSize, Extractor};
use std::collections::BTreeMap;

/// A program before and after a phase.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The program given.
    pub original: Program,
    /// The program extracted after the phase.
    pub rewritten: Program,
    /// What the phase did.
    pub stats: PhaseStats,
}

/// How outputs must agree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Compare {
    /// Same dtype, shape and bit pattern of every element (movement rules: views never compute).
    BitExact,
    /// `|a - b| <= atol + rtol·|b|` elementwise (rules that reassociate arithmetic).
    Close {
        /// Relative tolerance.
        rtol: f64,
        /// Absolute tolerance.
        atol: f64,
    },
    /// graph-json's tolerance of the output dtype ([`graph_json_tolerance`]): `|a - b| <= t +
    /// t·|b|`, exact for `i32` and `bool`.
    GraphJson,
    /// The numerics contract of fusion (`docs/numerics.md`): graph-json's tolerance plus
    /// [`FUSED_KAPPA`]` · u · max|b|`, `u` the unit roundoff of the output dtype
    /// ([`unit_roundoff`]) and `max|b|` the largest finite magnitude of the reference output.
    /// A fused kernel keeps intermediates in fp32 where the reference rounds each one to its
    /// dtype; the term bounds what those skipped roundings add up to.
    Fused,
}

/// graph-json's tolerance of an output dtype (`graph-json.md`, numerics): `1e-3` for fp32,
/// `1e-2` for fp16 and bf16, `None` (exact) for i32 and bool.
pub fn graph_json_tolerance(dt: crate::ir::dtype::DType) -> Option<f64> {
    use crate::ir::dtype::DType;
    match dt {
        DType::F32 => Some(1e-3),
        DType::F16 | DType::BF16 => Some(1e-2),
        _ => None,
    }
}

/// The unit roundoff of a float dtype (half its machine epsilon): `2^-11` for fp16, `2^-8` for
/// bf16, `2^-24` for fp32; `0` for i32 and bool.
pub fn unit_roundoff(dt: crate::ir::dtype::DType) -> f64 {
    use crate::ir::dtype::DType;
    match dt {
        DType::F16 => 2f64.powi(-11),
        DType::BF16 => 2f64.powi(-8),
        DType::F32 => 2f64.powi(-24),
        _ => 0.0,
    }
}

/// κ of [`Compare::Fused`]: the roundings a fused kernel skips change an output by at most
/// `u·Σ_k|t_k||w_k|` (a contraction of length `K` over the kernel's fp32 intermediates `t`);
/// for operands uniform in [-1, 1) that sum is at most `0.433·√K` times the output's largest
/// magnitude (`docs/numerics.md`), so `κ = 32` covers every `K ≤ 5461`. Measured on
/// `examples/*.json` (seeds 0–2): at most 0.44 is needed (`mlp_gelu`, `K = 3072`).
pub const FUSED_KAPPA: f64 = 32.0;

/// Adds `prog` to a fresh e-graph, runs `rules` as phase `name`, and extracts the smallest program.
pub fn optimize(
    prog: &Program,
    name: &str,
    rules: &[Rule],
    budget: &Budget,
) -> Result<(Program, PhaseStats), String> {
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, prog);
    let (eg, stats) = run_phase(eg, name, rules, budget);
    let ex = Extractor::new(&eg, AstSize);
    let q = extract_program(&eg, prog, &class, &|c| ex.find_best_node(c).clone())
        .map_err(|e| format!("extraction after phase `{name}`: {e}"))?;
    Ok((q, stats))
}

/// Deterministic values in [-1, 1) from a 64-bit LCG: the test inputs of the rule harness and of
/// the integration tests (`tests/common::data`).
pub fn lcg(seed: u64, n: usize) -> Vec<f64> {
    let step = |s: u64| {
        s.wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407)
    };
    let mut s = step(seed);
    (0..n)
        .map(|_| {
            s = step(s);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

/// Seeded random values for every signature input, with sizes from `bindings` falling back to the
/// program's default symbol values.
pub fn random_inputs(
    prog: &Program,
    bindings: &BTreeMap<String, i64>,
    seed: u64,
) -> Result<BTreeMap<String, Tensor>, String> {
    let mut syms = prog.symbols.clone();
    syms.extend(bindings.iter().map(|(k, v)| (k.clone(), *v)));
    let mut out = BTreeMap::new();
    for (i, inp) in prog.inputs.iter().enumerate() {
        let n = prog.node(inp.node);
        let shape = n
            .shape
            .iter()
            .map(|d| {
                let v = d
                    .eval_with(&syms)
                    .map_err(|e| format!("{}: {e}", inp.tensor))?;
                usize::try_from(v).map_err(|_| format!("{}: negative size {v}", inp.tensor))
            })
            .collect::<Result<Vec<usize>, String>>()?;
        let count = shape.iter().product();
        let vals = lcg(seed.wrapping_mul(1000).wrapping_add(i as u64), count);
        out.insert(inp.tensor.clone(), Tensor::from_f64(n.dtype, shape, &vals));
    }
    Ok(out)
}

/// Compares one output with its reference (`want`): same dtype and shape, values as `how` says
/// (NaN matches NaN; an infinity must match exactly).
pub fn compare_tensor(name: &str, got: &Tensor, want: &Tensor, how: Compare) -> Result<(), String> {
    if got.dtype != want.dtype || got.shape != want.shape {
        return Err(format!(
            "output `{name}`: {} {:?} instead of {} {:?}",
            got.dtype, got.shape, want.dtype, want.shape
        ));
    }
    let tol = graph_json_tolerance(want.dtype);
    let scale = (0..want.numel())
        .map(|i| want.get_f64(i))
        .filter(|v| v.is_finite())
        .fold(0f64, |m, v| m.max(v.abs()));
    let loose = |a: f64, b: f64, extra: f64| match tol {
        Some(t) if b.is_finite() => (a - b).abs() <= t + t * b.abs() + extra,
        _ => a == b || (a.is_nan() && b.is_nan()),
    };
    for i in 0..want.numel() {
        let (a, b) = (got.get_f64(i), want.get_f64(i));
        let ok = match how {
            Compare::BitExact => a.to_bits() == b.to_bits(),
            Compare::Close { rtol, atol } => {
                a.to_bits() == b.to_bits() || (a - b).abs() <= atol + rtol * b.abs()
            }
            Compare::GraphJson => a.to_bits() == b.to_bits() || loose(a, b, 0.0),
            Compare::Fused => {
                a.to_bits() == b.to_bits()
                    || loose(a, b, FUSED_KAPPA * unit_roundoff(want.dtype) * scale)
            }
        };
        if !ok {
            return Err(format!("output `{name}` element {i}: {a} instead of {b}"));
        }
    }
    Ok(())
}

/// Evaluates both programs on inputs from every seed and compares every signature output.
pub fn check_sound(
    original: &Program,
    rewritten: &Program,
    bindings: &BTreeMap<String, i64>,
    seeds: &[u64],
    how: Compare,
) -> Result<(), String> {
    for seed in seeds {
        let inputs = random_inputs(original, bindings, *seed)?;
        let want = evaluate(original, bindings, &inputs).map_err(|d| format!("original: {d}"))?;
        let got = evaluate(rewritten, bindings, &inputs).map_err(|d| format!("rewritten: {d}"))?;
        if got.len() != want.len() {
            return Err(format!("{} outputs instead of {}", got.len(), want.len()));
        }
        for (name, w) in &want {
            let g = got
                .get(name)
                .ok_or_else(|| format!("output `{name}` missing"))?;
            compare_tensor(name, g, w, how).map_err(|e| format!("seed {seed}: {e}"))?;
        }
    }
    Ok(())
}

/// Optimizes `prog` with `rules` under the default budget and checks soundness on three seeds;
/// panics with the programs on any failure.
pub fn check(
    prog: &Program,
    rules: &[Rule],
    bindings: &BTreeMap<String, i64>,
    how: Compare,
) -> Outcome {
    let (rewritten, stats) = optimize(prog, "test", rules, &Budget::default())
        .unwrap_or_else(|e| panic!("{e}\nprogram: {prog:#?}"));
    if let Err(e) = check_sound(prog, &rewritten, bindings, &[1, 2, 3], how) {
        panic!("unsound rewrite: {e}\nstats: {stats:?}\noriginal: {prog:#?}\nrewritten: {rewritten:#?}");
    }
    Outcome {
        original: prog.clone(),
        rewritten,
        stats,
    }
}

/// Panics unless `rule` applied at least once.
pub fn assert_fired(stats: &PhaseStats, rule: &str) {
    assert!(
        stats.fired(rule),
        "rule `{rule}` did not fire; applied: {:?}",
        stats.applied
    );
}

/// Panics if `rule` applied.
pub fn assert_not_fired(stats: &PhaseStats, rule: &str) {
    assert!(
        !stats.fired(rule),
        "rule `{rule}` fired on a near-miss; applied: {:?}",
        stats.applied
    );
}

/// A test cost for rules whose right-hand side is not smaller: the elementwise work of a term
/// (elements computed, summed over compute nodes; a REDUCE pays for the elements it reads and
/// the accumulators it writes), with
/// `narrow_weight`× the work for arithmetic in fp16/bf16 (the epilogue prefers fp32 arithmetic),
/// plus one per node so that ties go to the smaller term. Movement ops, inputs and attributes
/// cost one. Sizes are evaluated with `bindings`; an unbound size counts as 64.
pub struct WorkCost<'a> {
    /// The e-graph extracted from.
    pub egraph: &'a TensorGraph,
    /// Sizes of symbols.
    pub bindings: BTreeMap<String, i64>,
    /// Cost factor of fp16/bf16 arithmetic.
    pub narrow_weight: f64,
}

impl egg::CostFunction<crate::ir::egraph::TensorLang> for WorkCost<'_> {
    type Cost = f64;

    fn cost<C>(&mut self, enode: &crate::ir::egraph::TensorLang, mut costs: C) -> f64
    where
        C: FnMut(egg::Id) -> f64,
    {
        use crate::ir::dtype::DType;
        use crate::ir::egraph::TensorLang as T;
        let numel = |id: egg::Id| -> f64 {
            self.egraph[id].data.tensor().map_or(1.0, |f| {
                f.shape
                    .iter()
                    .map(|d| d.eval_with(&self.bindings).unwrap_or(64) as f64)
                    .product()
            })
        };
        let children: f64 = egg::Language::children(enode)
            .iter()
            .map(|c| costs(*c))
            .sum();
        let own = match enode {
            T::Attr(_) | T::Input(_) | T::Const(_) | T::Range(_) => 0.0,
            T::Reshape(_)
            | T::Permute(_)
            | T::Expand(_)
            | T::Pad(_)
            | T::Shrink(_)
            | T::Flip(_)
            | T::View(_)
            | T::Read(_) => 0.0,
            T::Reduce([_, _, _, x]) => {
                numel(*x) + self.egraph.lookup(enode.clone()).map_or(0.0, numel)
            }
            other => match self.egraph.lookup(other.clone()) {
                Some(id) => {
                    let w = match (other, self.egraph[id].data.tensor()) {
                        (T::Cast(_), _) => 1.0,
                        (_, Some(f)) if matches!(f.dtype, DType::F16 | DType::BF16) => {
                            self.narrow_weight
                        }
                        _ => 1.0,
                    };
                    w * numel(id)
                }
                None => 0.0,
            },
        };
        1.0 + own + children
    }
}

/// Like [`check`], but extracts with [`WorkCost`] (for rule sets whose rewritten forms are larger
/// but do less work) and checks soundness on three seeds.
pub fn check_work(
    prog: &Program,
    rules: &[Rule],
    bindings: &BTreeMap<String, i64>,
    how: Compare,
    narrow_weight: f64,
) -> Outcome {
    let mut eg = TensorGraph::default();
    let class = crate::ir::egraph::add_program(&mut eg, prog);
    let (eg, stats) = run_phase(eg, "test", rules, &Budget::default());
    let mut syms = prog.symbols.clone();
    syms.extend(bindings.iter().map(|(k, v)| (k.clone(), *v)));
    let cost = WorkCost {
        egraph: &eg,
        bindings: syms,
        narrow_weight,
    };
    let ex = Extractor::new(&eg, cost);
    let rewritten = extract_program(&eg, prog, &class, &|c| ex.find_best_node(c).clone())
        .unwrap_or_else(|e| panic!("extraction: {e}\nprogram: {prog:#?}"));
    if let Err(e) = check_sound(prog, &rewritten, bindings, &[1, 2, 3], how) {
        panic!("unsound rewrite: {e}\nstats: {stats:?}\noriginal: {prog:#?}\nrewritten: {rewritten:#?}");
    }
    Outcome {
        original: prog.clone(),
        rewritten,
        stats,
    }
}

/// Runs `rules` on `prog`, then adds `expected` (same signature) to the same e-graph: true when
/// every output of `expected` landed in the e-class of the same output of `prog`, i.e. the rules
/// proved `expected` equal to `prog`. Soundness of `expected` itself is [`check_sound`]'s job.
pub fn proves(prog: &Program, expected: &Program, rules: &[Rule]) -> bool {
    let mut eg = TensorGraph::default();
    let class = crate::ir::egraph::add_program(&mut eg, prog);
    let (mut eg, _) = run_phase(eg, "test", rules, &Budget::default());
    let exp = crate::ir::egraph::add_program(&mut eg, expected);
    eg.rebuild();
    prog.outputs.iter().all(|o| {
        expected
            .outputs
            .iter()
            .find(|e| e.tensor == o.tensor)
            .is_some_and(|e| eg.find(class[o.node.index()]) == eg.find(exp[e.node.index()]))
    })
}

/// Plays `optimized`'s region program (an optimizer result, `crate::optimize::Optimized`, or
/// the region program itself) back on inputs from every seed ([`random_inputs`]) and
/// compares every output with the reference evaluator's value of `prog` under the numerics
/// contract of fusion ([`Compare::Fused`]).
///
/// ```
/// use dlc_egg::optimize::{optimize, OptimizeOptions};
/// use dlc_egg::rules::testing::check_optimized;
/// # let json = r#"{"signature": {"inputs": [{"tensor": "x"}], "outputs": [{"tensor": "y"}]},
/// #   "tensors": {"x": {"dtype": "fp16", "shape": [32]}, "y": {"dtype": "fp16", "shape": [32]}},
/// #   "graph": [{"op": "Elementwise", "name": "g", "inputs": ["x"], "outputs": ["y"],
/// #              "attrs": {"fn": "gelu"}}]}"#;
/// # let graph = dlc_egg::ir::frontend::load_str(json, "doc.json").unwrap();
/// # let prog = dlc_egg::run::lower_and_verify(&graph).unwrap();
/// let o = optimize(&prog, &OptimizeOptions::default()).unwrap();
/// check_optimized(&prog, &o, &Default::default(), &[1, 2]).unwrap();
/// ```
pub fn check_optimized(
    prog: &Program,
    optimized: &impl AsRef<RegionProgram>,
    bindings: &BTreeMap<String, i64>,
    seeds: &[u64],
) -> Result<(), String> {
    // The region program reads every symbol from the bindings: the program's defaults, then
    // the caller's.
    let mut syms = prog.symbols.clone();
    syms.extend(bindings.iter().map(|(k, v)| (k.clone(), *v)));
    for seed in seeds {
        let inputs = random_inputs(prog, &syms, *seed)?;
        let want = evaluate(prog, &syms, &inputs).map_err(|d| format!("reference: {d}"))?;
        let got = crate::ir::region::program::evaluate_program(optimized.as_ref(), &syms, &inputs)
            .map_err(|d| format!("optimized program: {d}"))?;
        for (name, w) in &want {
            let g = got
                .get(name)
                .ok_or_else(|| format!("output `{name}` missing"))?;
            compare_tensor(name, g, w, Compare::Fused).map_err(|e| format!("seed {seed}: {e}"))?;
        }
    }
    Ok(())
}
