//! Variations the pattern must still fuse (the `exp` form, a shifted causal mask, additive
//! masks and safe softmax, every head dim and value dim, bf16, bool and additive masks, unit
//! batch and head axes) and the cases it must not (two launches).

use super::*;

#[test]
fn exp_form_and_shifted_causal_mask_match() {
    let p = lowered(&example_text());
    let o = optimized(&p);
    // exp(s − max) instead of exp2((s − max) · log2 e): `exp2(c4)` with `c4 = mul(c3, log2e)`
    // becomes `exp(c3)`.
    let mut program = o.program.clone();
    let r = first_region_mut(&mut program);
    let defs: BTreeMap<String, Expr> = r
        .lets
        .iter()
        .map(|l| (l.name.clone(), l.expr.clone()))
        .collect();
    let n = rewrite_lets(r, &|e| match e {
        Expr::Unary(UnaryFn::Exp2, x) => match x.as_ref() {
            Expr::Let(c4) => match defs.get(c4) {
                Some(Expr::Binary(BinaryFn::Mul, c3, _)) => {
                    Some(Expr::Unary(UnaryFn::Exp, c3.clone()))
                }
                _ => None,
            },
            _ => None,
        },
        _ => None,
    });
    assert_eq!(n, 1, "one exp2(mul(…))");
    check_variation(
        &o,
        &p,
        &program,
        Some(Mask {
            dn: 1,
            dm: -1,
            dc: 0,
        }),
    );
    // The mask `n < m + 3` (three keys past the diagonal): cmplt(idx(n), idx(m) + 3).
    let mut program = o.program.clone();
    let r = first_region_mut(&mut program);
    let n = rewrite_lets(r, &|e| match e {
        Expr::Where(c, a, b) => match c.as_ref() {
            Expr::Binary(BinaryFn::Cmple, n_, m_) => Some(Expr::Where(
                Box::new(Expr::Binary(
                    BinaryFn::Cmplt,
                    n_.clone(),
                    Box::new(Expr::Binary(
                        BinaryFn::Add,
                        m_.clone(),
                        Box::new(Expr::Const(3.0)),
                    )),
                )),
                a.clone(),
                b.clone(),
            )),
            _ => None,
        },
        _ => None,
    });
    assert_eq!(n, 1, "one causal where");
    check_variation(
        &o,
        &p,
        &program,
        Some(Mask {
            dn: 1,
            dm: -1,
            dc: -2,
        }),
    );
}

#[test]
fn deferred_buffer_read_elsewhere_or_another_second_region_is_not_fused() {
    let p = lowered(&example_text());
    let o = optimized(&p);
    let rs = regions(&o.program);
    assert_eq!(rs.len(), 2, "the optimizer's two attention regions");
    let deferred = rs[0].outputs[0].name.clone();
    // The probabilities are also a graph output: two launches, still the reference's values.
    let mut program = o.program.clone();
    program.outputs.push(("P".into(), deferred.clone()));
    let e = emitted(&o, &program);
    assert_eq!(
        launches(&e.manifest).len(),
        2,
        "{:?}",
        launches(&e.manifest)
    );
    assert!(!launches(&e.manifest).contains(&"attention"));
    let b = bindings(1, 2, 37);
    let ins = random_inputs(&p, &b, 5).expect("inputs");
    let want = evaluate_program(&program, &b, &ins).expect("reference evaluates");
    run_and_compare(&e, &ins, &b, &want);
    // A second region that is not `P·V` (a max instead of the sum): no pair, two launches.
    let mut program = o.program.clone();
    if let Some(Step::Region(r)) = program
        .steps
        .iter_mut()
        .filter(|s| matches!(s, Step::Region(_)))
        .nth(1)
    {
        for l in &mut r.lets {
            if let Expr::Reduce(red) = &mut l.expr {
                red.op = dlc_egg::ir::tiny::ReduceOp::Max;
                red.init = None;
            }
        }
    }
    let rs = regions(&program);
    assert!(attention::pair(rs[0], rs[1]).is_none());
    assert!(attention::pair(rs[1], rs[0]).is_none());
    assert!(attention::pair(rs[0], rs[0]).is_none());
    assert_eq!(launches(&emitted(&o, &program).manifest).len(), 2);
}

#[test]
fn additive_mask_and_safe_softmax_are_fused() {
    // The lowering's safe softmax (guarded max and sum) with a bias read per element.
    let o = check_fused(&masked_text(false), &[(1, 2, 37), (2, 1, 70)], 31);
    let rs = regions(&o.program);
    let pair = attention::pair(rs[0], rs[1]).expect("the pair matches");
    assert!(pair.safe_sum, "the guarded sum is recognized");
    check_fused(&masked_text(true), &[(1, 2, 45)], 37);
}

#[test]
fn every_head_dim_matches_the_reference() {
    // (d, dv, causal, sizes): tails in M and N (S not a multiple of BM or BN) at every head dim.
    let cases: [(u64, bool, (i64, i64, i64)); 6] = [
        (32, true, (1, 2, 45)),
        (64, false, (1, 1, 100)),
        (80, true, (2, 1, 70)),
        (96, false, (1, 1, 50)),
        (128, true, (1, 1, 67)),
        (256, false, (1, 1, 40)),
    ];
    for (k, (d, causal, size)) in cases.into_iter().enumerate() {
        // Optimized at S = 2048: at the default S = 64 (a 2-block grid) the extractor, pricing
        // the pair as the fused kernel, finds two pointwise kernels cheaper for d = 128 and 256.
        let text = graph(d, d, "fp16", causal, None).replace("\"S\": 64", "\"S\": 2048");
        let o = check_fused(&text, &[size], 100 + k as u64);
        let src = emitted(&o, &o.program).source;
        for smem in ["Qs", "Ks", "Vs"] {
            assert!(
                staging(&src, smem).contains("cp.async"),
                "d = {d}: {smem} is a plain aligned fp16 read"
            );
        }
        assert!(src.contains("dlc_mma_m16n8k16_f16"), "d = {d}");
        assert_eq!(
            src.contains("the heaviest query blocks"),
            causal,
            "d = {d}: causal blocks run heaviest first"
        );
    }
}

#[test]
fn value_dim_bf16_and_register_staged_operands_match() {
    // A value dim other than the head dim; bf16 operands.
    check_fused(&graph(32, 96, "fp16", false, None), &[(1, 2, 41)], 201);
    let o = check_fused(&graph(64, 64, "bf16", true, None), &[(1, 1, 77)], 202);
    assert!(emitted(&o, &o.program)
        .source
        .contains("dlc_mma_m16n8k16_bf16"));
    // Head dims that are no multiple of 8 (36 → 48 in the tile, also the value dim): no 16-byte chunk is all
    // inside or all outside a row, so the tiles are staged through registers.
    let o = check_fused(&graph(36, 36, "fp16", true, None), &[(1, 2, 53)], 203);
    let src = emitted(&o, &o.program).source;
    for smem in ["Qs", "Ks", "Vs"] {
        assert!(
            staging(&src, smem).contains("through registers"),
            "{smem}: not 16-byte chunks"
        );
    }
}

#[test]
fn bool_and_additive_masks_match() {
    check_fused(
        &graph(64, 64, "fp16", false, Some("bool")),
        &[(1, 2, 58)],
        301,
    );
    check_fused(
        &graph(80, 80, "fp16", true, Some("bool")),
        &[(1, 1, 49)],
        302,
    );
    check_fused(
        &graph(32, 32, "fp16", true, Some("fp16")),
        &[(2, 1, 66)],
        303,
    );
}

#[test]
fn fp32_operands_are_not_fused() {
    // The tensor-core kernel multiplies fp16/bf16 operands; fp32 attention stays two kernels.
    let p = lowered(&graph(32, 32, "fp32", true, None));
    let o = optimized(&p);
    let e = emitted(&o, &o.program);
    assert!(!launches(&e.manifest).contains(&"attention"));
    let b = bindings(1, 1, 40);
    let ins = random_inputs(&p, &b, 401).expect("inputs");
    let want = evaluate(&p, &b, &ins).expect("reference evaluates");
    run_and_compare(&e, &ins, &b, &want);
}

/// An attention graph with a size-1 batch (and head, `h1`) written as the literal 1 (the
/// optimizer reads those axes as index 0), `S` symbolic, and a `[1, 1, 1, S]` mask of `mask`
/// type broadcast over the heads and query rows (the sweep's and the exports' form).
fn unit_graph(d: u64, h1: bool, causal: bool, mask: &str) -> String {
    let h = if h1 { "1".to_string() } else { "2".to_string() };
    graph(d, d, "fp16", causal, Some(mask))
        .replace("\"B\", \"H\"", &format!("1, {h}"))
        .replace("\"shape\": [\"S\", \"S\"]", "\"shape\": [1, 1, 1, \"S\"]")
        .replace("\"S\": 64", "\"S\": 2048")
}

#[test]
fn unit_batch_and_head_axes_with_broadcast_masks_are_fused() {
    // Issue 15: at B = 1 (and H = 1) the scores' reduction was reached at `[b, …]` and at
    // `[0, …]`, and the pattern saw two query axes: three kernels instead of one.
    check_fused(&unit_graph(64, true, false, "bool"), &[(1, 1, 77)], 401);
    check_fused(&unit_graph(96, false, true, "fp16"), &[(1, 2, 45)], 402);
}
