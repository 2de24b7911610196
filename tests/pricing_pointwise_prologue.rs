//! What the cost model prices is what codegen emits (issue 15): a contraction on the pointwise
//! template (one thread per output point, a serial fold) evaluates its operands' prologues at
//! every multiply-accumulate — a convolution input's `relu(x + b)`, attention's softmax
//! `exp2((s − max)·c) / sum` under `P·V` — not once per operand element as a tiled kernel
//! stages them. The analysis records that work (`Gemm::pointwise_prologue`) and the pointwise
//! price adds it: per lane for an operand that reads the fastest output axis, once per thread
//! for one that does not (the compiler shares it across a vectorized thread's unrolled lanes),
//! with the prologue's reads beyond the operand's own (the `c[k]` of `relu(x + c)`).
//! Before, BERT at sequence 128 took a pointwise softmax·V kernel priced 6.4 µs that runs the
//! softmax 64 times per score (priced as emitted: QKᵀ, the softmax and a tiled P·V).

use dlc_egg::codegen::templates::applicability::{as_emitted, Emits};
use dlc_egg::cost::work::{analyze, Shape};
use dlc_egg::extract::kernels::CostModel;
use dlc_egg::ir::region::Region;
use dlc_egg::target::Target;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const M: f64 = 64.0;
const N: f64 = 32.0;
const K: f64 = 256.0;

fn memref(shape: Value) -> Value {
    json!({"shape": shape, "alignment": 16, "noalias": true, "layout": {"kind": "row_major"}})
}

/// `Y[m, n] = Σ_k relu(X[m, k] + c[k]) · W[k, n]` (fp32), the prologue on `A` when `on_a`, else
/// `Y[m, n] = Σ_k X[m, k] · relu(W[k, n] + c[k])` (on `B`, which reads the fastest axis `n`).
fn gemm_with_prologue(on_a: bool) -> Region {
    let x = json!({"read": {"tensor": "X", "map": ["m", "k"]}});
    let w = json!({"read": {"tensor": "W", "map": ["k", "n"]}});
    let c = json!({"read": {"tensor": "c", "map": ["k"]}});
    let (a, b) = if on_a {
        (json!({"relu": [{"add": [x, c]}]}), w)
    } else {
        (x, json!({"relu": [{"add": [w, c]}]}))
    };
    let v = json!({"region": {
        "name": "g",
        "iters": [{"name": "m", "size": M as i64}, {"name": "n", "size": N as i64}],
        "inputs": [
            {"name": "X", "dtype": "fp32", "memref": memref(json!([M as i64, K as i64]))},
            {"name": "W", "dtype": "fp32", "memref": memref(json!([K as i64, N as i64]))},
            {"name": "c", "dtype": "fp32", "memref": memref(json!([K as i64]))}
        ],
        "outputs": [{"name": "Y", "dtype": "fp32", "memref": memref(json!([M as i64, N as i64])),
                     "materialize": "gmem"}],
        "lets": [{"let": "acc", "expr": {"reduce": {"op": "sum", "axes": ["k"], "init": 0.0,
            "dtype": "fp32", "body": {"mul": [a, b]}}}}],
        "yield": [{"from": "acc", "to": "Y"}]
    }});
    Region::from_json_value(v).unwrap_or_else(|e| panic!("{e}"))
}

fn model() -> CostModel {
    CostModel {
        bindings: BTreeMap::new(),
        default_size: 1024,
        target: Target::h100_sxm5(),
        regions: None,
    }
}

#[test]
fn an_operand_prologue_is_priced_per_multiply_accumulate_on_the_pointwise_template() {
    // `relu(x + c)`: two ops per element, staged once per element of its operand by a tiled
    // kernel, evaluated at every multiply-accumulate by the pointwise one.
    let again = |elems: f64| 2.0 * (M * N * K - elems);
    for (on_a, thread, lane) in [(true, again(M * K), 0.0), (false, 0.0, again(N * K))] {
        let w = analyze(&gemm_with_prologue(on_a), &model()).expect("work");
        let Shape::Contraction(g) = &w.shape else {
            panic!("a contraction: {:?}", w.shape)
        };
        assert_eq!(g.prologue[usize::from(!on_a)].simt, 2.0, "{:?}", g.prologue);
        let p = g.pointwise_prologue;
        assert_eq!((p.thread.ops, p.lane.ops), (thread, lane), "on A: {on_a}");
        // The prologue's second read (`c[k]`), one at every multiply-accumulate.
        let (thread_loads, lane_loads) = if on_a {
            (M * N * K, 0.0)
        } else {
            (0.0, M * N * K)
        };
        assert_eq!(
            (p.thread.loads, p.lane.loads),
            (thread_loads, lane_loads),
            "on A: {on_a}"
        );
        let issue = dlc_egg::cost::roofline::LOAD_ISSUE;
        let tiled = w.ops.simt;
        let refolds = w.pointwise_refolds.thread;
        let pw = as_emitted(w.clone(), Emits::Pointwise);
        assert!(matches!(pw.shape, Shape::Elementwise { .. }));
        // The lane part joins the per-point ops, the shared part the per-thread refolds (the
        // roofline divides those by the plan's lanes).
        assert_eq!(pw.pointwise_refolds.thread.ops - refolds.ops, thread);
        assert_eq!(
            pw.pointwise_refolds.thread.loads - refolds.loads,
            thread_loads
        );
        // The product itself (a multiply and an add, which the analysis leaves to the
        // template) and its two loads of `LOAD_ISSUE` slots each, at every multiply-accumulate.
        let main = M * N * K * (2.0 + 2.0 * issue);
        assert_eq!(
            pw.ops.simt - tiled,
            main + lane + lane_loads * issue,
            "on A: {on_a}"
        );
    }
}
