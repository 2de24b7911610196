//! The tensor-core flash-attention kernel of an [`AttentionPair`] (see the parent module doc for
//! the algorithm; [`super::stage`] for the operand tiles).

use super::super::super::cexpr;
use super::super::super::gpu::{CType, Div, Kernel, Launch, Smem, Stmt};
use super::super::super::scalar::Emitter;
use super::super::super::CodegenError;
use super::super::contraction::Side;
use super::super::contraction_mma::smem::Tile;
use super::super::{bind_flat, params_of, store_yields};
use super::stage::{self, Operand, REFILL, TILE};
use super::{
    heaviest_first, inputs, kernel_symbols, pad16, AttentionPair, AttentionPlan, Mask, Softmax,
};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::Size;
use crate::target::Arch;

/// The compute token of the accumulators.
const ACC: &str = "acc_ready";

fn exp_of(sm: Softmax, x: &str) -> String {
    match sm {
        Softmax::Exp => format!("dlc_exp({x})"),
        Softmax::Exp2(c) => format!("dlc_exp2(({x}) * {})", cexpr::float(c)),
    }
}

/// `for (int var = 0; var < end; ++var)`, unrolled, block-uniform.
fn unrolled(var: &str, end: u64, body: Vec<Stmt>) -> Stmt {
    Stmt::For {
        var: var.into(),
        start: "0".into(),
        end: end.to_string(),
        step: "1".into(),
        unroll: true,
        div: Div::Block,
        body,
    }
}

fn uniform_if(cond: impl Into<String>, then: Vec<Stmt>) -> Stmt {
    Stmt::If {
        cond: cond.into(),
        div: Div::Block,
        then,
        otherwise: vec![],
    }
}

fn assign(place: impl Into<String>, value: impl Into<String>) -> Stmt {
    Stmt::Assign {
        place: place.into(),
        value: value.into(),
    }
}

/// The C condition under which key tile `t` is masked for every row of the block (its most
/// permissive key against the block's most permissive query row).
fn skip_cond(m: Mask, bm: u64, bn: u64) -> String {
    let n = if m.dn >= 0 {
        format!("t * {bn}")
    } else {
        format!("(t * {bn} + {})", bn - 1)
    };
    let q = if m.dm <= 0 {
        format!("(m0 + {})", bm - 1)
    } else {
        "m0".to_string()
    };
    format!(
        "((long long){} * {n} + (long long){} * {q} + (long long){} > 0LL)",
        m.dn, m.dm, m.dc
    )
}

/// The kernel (see the parent module doc).
pub fn build(
    p: &AttentionPair,
    plan: &AttentionPlan,
    dtype: DType,
    arch: Arch,
) -> Result<Kernel, CodegenError> {
    let name = cexpr::ident(&format!("{}_{}", p.first.name, p.second.name));
    let bad = |why: String| CodegenError::Unsupported {
        kernel: name.clone(),
        why,
    };
    let (bm, bn) = (plan.bm, plan.bn);
    if bm == 0 || !bm.is_multiple_of(16) || bn == 0 || !bn.is_multiple_of(16) || plan.stages != 2 {
        return Err(bad(format!(
            "no flash-attention layout of {bm} query rows x {bn} keys, {} stages",
            plan.stages
        )));
    }
    let threads = plan.threads();
    let (d, dv) = (p.head_dim, p.value_dim);
    let (dp, dvp) = (pad16(d), pad16(dv));
    let ins = inputs(p);
    // `second` seen with the kernel's inputs, so that its input `i` is parameter `in{i}` too;
    // the deferred buffer comes last (its read is never emitted).
    let mut second = p.second.clone();
    second.inputs = ins.iter().map(|i| (*i).clone()).collect();
    second.inputs.extend(
        p.second
            .inputs
            .iter()
            .filter(|i| i.name == p.deferred)
            .cloned(),
    );
    let mut e1 = Emitter::new(p.first, "")?;
    let mut e2 = Emitter::new(&second, "v_")?;
    let size1 = |n: &str| -> Result<Dim, CodegenError> {
        let i = p.first.iters.iter().position(|i| i.name == n);
        i.map(|i| e1.iter_sizes[i].clone())
            .ok_or_else(|| bad(format!("no iter `{n}`")))
    };
    let (m_size, s_size) = (size1(&p.query)?, size1(&p.key)?);
    let batch_sizes = p
        .batch
        .iter()
        .map(|b| size1(b))
        .collect::<Result<Vec<_>, _>>()?;
    let (mc, sc) = (cexpr::dim(&m_size), cexpr::dim(&s_size));
    let batch_c: Vec<String> = batch_sizes.iter().map(cexpr::dim).collect();
    let nb = Dim::product(&batch_sizes);
    let nb_c = cexpr::dim(&nb);
    let corr = |a: &str| -> Result<String, CodegenError> {
        p.corr
            .get(a)
            .cloned()
            .ok_or_else(|| bad(format!("iter `{a}` has no partner")))
    };
    let copy = |e, axis: &str, extent| {
        if plan.async_ {
            stage::plain_read(p.first, e, axis, extent, dtype)
        } else {
            None
        }
    };
    let q_op = Operand {
        smem: "Qs",
        staged: false,
        tile: Tile::new(true, bm, dp),
        side: Side::A,
        value: &p.q_side,
        outer_axis: p.query.clone(),
        outer_extent: mc.clone(),
        k_axis: p.head_axis.clone(),
        k_extent: d.to_string(),
        copy: copy(&p.q_side, &p.head_axis, d),
    };
    let k_op = Operand {
        smem: "Ks",
        staged: true,
        tile: Tile::new(true, bn, dp),
        side: Side::B,
        value: &p.k_side,
        outer_axis: p.key.clone(),
        outer_extent: sc.clone(),
        k_axis: p.head_axis.clone(),
        k_extent: d.to_string(),
        copy: copy(&p.k_side, &p.head_axis, d),
    };
    let v_op = Operand {
        smem: "Vs",
        staged: true,
        tile: Tile::new(false, dvp, bn),
        side: Side::B,
        value: &p.v_side,
        outer_axis: p.col.clone(),
        outer_extent: dv.to_string(),
        k_axis: p.key2.clone(),
        k_extent: sc.clone(),
        copy: if plan.async_ {
            stage::plain_read(&second, &p.v_side, &p.col, dv, dtype)
        } else {
            None
        },
    };
    let any_async = [&q_op, &k_op, &v_op].iter().any(|o| o.copy.is_some());

    e1.open();
    for op in [&q_op, &k_op, &v_op] {
        e1.emit(Stmt::Comment(op.describe()));
    }
    let mblocks = format!("(({mc} + {}) / {bm})", bm - 1);
    e1.emit(Stmt::int("tid", "(int)threadIdx.x"));
    e1.emit(Stmt::int("lane", "(int)dlc_lane()"));
    e1.emit(Stmt::int("warp", "(int)dlc_warp()"));
    e1.emit(Stmt::int("bid", "(int)blockIdx.x"));
    if heaviest_first(p.mask) {
        e1.emit(Stmt::Comment(
            "the heaviest query blocks (most unmasked keys) first".into(),
        ));
        e1.emit(Stmt::int("mb", format!("{mblocks} - 1 - bid / ({nb_c})")));
        e1.emit(Stmt::int("bb", format!("bid % ({nb_c})")));
    } else {
        e1.emit(Stmt::int("mb", format!("bid % {mblocks}")));
        e1.emit(Stmt::int("bb", format!("bid / {mblocks}")));
    }
    e1.emit(Stmt::int("m0", format!("mb * {bm}")));
    e1.emit(Stmt::int("wrow", "m0 + warp * 16"));
    e1.emit(Stmt::int("nt", format!("({sc} + {}) / {bn}", bn - 1)));
    e1.push_scope();
    if !p.batch.is_empty() {
        bind_flat(&mut e1, &p.batch, &batch_c, "bb", "b_");
    }
    let batch_vars: Vec<(String, String)> = p
        .batch
        .iter()
        .map(|b| Ok((corr(b)?, e1.name(b))))
        .collect::<Result<_, CodegenError>>()?;
    e2.push_scope();
    for (a, v) in &batch_vars {
        e2.bind(a, v.clone());
    }
    // The key tiles this block visits: [t_lo, t_hi) (the unmasked tiles are contiguous: the
    // skip condition is monotone in the tile).
    match p.mask {
        Some(m) => {
            for (n, v) in [("t_lo", "nt"), ("t_hi", "0")] {
                e1.emit(Stmt::Let {
                    ty: CType::I32,
                    name: n.into(),
                    value: v.into(),
                    mutable: true,
                });
            }
            e1.emit(Stmt::For {
                var: "t".into(),
                start: "0".into(),
                end: "nt".into(),
                step: "1".into(),
                unroll: false,
                div: Div::Block,
                body: vec![uniform_if(
                    format!("!{}", skip_cond(m, bm, bn)),
                    vec![
                        assign("t_lo", "t_lo < t ? t_lo : t"),
                        assign("t_hi", "t + 1"),
                    ],
                )],
            });
        }
        None => {
            e1.emit(Stmt::int("t_lo", "0"));
            e1.emit(Stmt::int("t_hi", "nt"));
        }
    }
    // The prologue: Q (one group), the first key tile (another).
    for f in stage::fill(&mut e1, &q_op, "0", ("m0", "0"), threads, dtype, TILE)? {
        e1.emit(f);
    }
    if any_async {
        e1.emit(Stmt::Commit { token: TILE.into() });
    }
    let origin = format!("t_lo * {bn}");
    let mut first_tile = stage::fill(&mut e1, &k_op, "0", (&origin, "0"), threads, dtype, TILE)?;
    first_tile.extend(stage::fill(
        &mut e2,
        &v_op,
        "0",
        ("0", &origin),
        threads,
        dtype,
        TILE,
    )?);
    e1.emit(uniform_if("t_lo < t_hi", first_tile));
    if any_async {
        e1.emit(Stmt::Commit { token: TILE.into() });
    }
    let ks_n = dp / 16;
    if plan.q_in_regs {
        if any_async {
            e1.emit(Stmt::Wait {
                tokens: vec![TILE.into()],
                pending: 1,
            });
        }
        e1.emit(Stmt::Barrier);
        e1.emit(Stmt::Array {
            ty: CType::U32,
            name: "qf".into(),
            dims: vec![ks_n, 4],
            zero: false,
        });
        e1.emit(unrolled(
            "ks",
            ks_n,
            q_op.ldmatrix("0", "warp * 16", "ks * 16", "qf[ks]", TILE),
        ));
    }
    e1.emit(Stmt::Array {
        ty: CType::F32,
        name: "oacc".into(),
        dims: vec![dvp / 8, 4],
        zero: true,
    });
    for (n, v) in [("m_i", "(-dlc_inf())"), ("l_i", "0.0f")] {
        e1.emit(Stmt::Array {
            ty: CType::F32,
            name: n.into(),
            dims: vec![2],
            zero: false,
        });
        e1.emit(unrolled("h", 2, vec![assign(format!("{n}[h]"), v)]));
    }

    // One key tile.
    let mut step = vec![
        Stmt::int("st", "(t - t_lo) & 1"),
        Stmt::int("n0", format!("t * {bn}")),
    ];
    if any_async {
        step.push(Stmt::Wait {
            tokens: vec![TILE.into()],
            pending: 0,
        });
    }
    step.push(Stmt::Barrier);
    // Prefetch tile t + 1 into the other stage (read by the previous step, which every thread
    // has finished: it passed the barrier above).
    let next = format!("n0 + {bn}");
    let mut refill = stage::fill(
        &mut e1,
        &k_op,
        "st ^ 1",
        (&next, "0"),
        threads,
        dtype,
        REFILL,
    )?;
    refill.extend(stage::fill(
        &mut e2,
        &v_op,
        "st ^ 1",
        ("0", &next),
        threads,
        dtype,
        REFILL,
    )?);
    step.push(uniform_if("t + 1 < t_hi", refill));
    if any_async {
        step.push(Stmt::Commit {
            token: REFILL.into(),
        });
    }
    step.extend(scores(&mut e1, p, plan, [&q_op, &k_op], dtype, [&mc, &sc])?);
    step.extend(online_softmax(p, plan, dvp));
    step.extend(pv(plan, &v_op, dvp, dtype));
    e1.emit(Stmt::For {
        var: "t".into(),
        start: "t_lo".into(),
        end: "t_hi".into(),
        step: "1".into(),
        unroll: false,
        div: Div::Block,
        body: step,
    });

    // The epilogue: o / l as `second`'s accumulator, its yields stored.
    for h in 0..2 {
        for off in [1, 2] {
            e1.emit(assign(
                format!("l_i[{h}]"),
                format!("l_i[{h}] + dlc_shfl_xor(l_i[{h}], {off})"),
            ));
        }
    }
    e2.open();
    e2.push_scope();
    e2.bind(&corr(&p.query)?, "row");
    e2.bind(&p.col, "col");
    e2.provide(&p.acc2, "ov");
    let stored = store_yields(&mut e2);
    e2.pop_scope();
    let stores = e2.close();
    stored?;
    let l = if p.safe_sum {
        "(l == 0.0f ? 1.0f : l)"
    } else {
        "l"
    };
    let mut per = vec![
        Stmt::int("row", "wrow + (lane >> 2) + (e >> 1) * 8"),
        Stmt::int("col", "ci * 8 + (lane & 3) * 2 + (e & 1)"),
        Stmt::f32("l", "l_i[e >> 1]", false),
    ];
    per.push(Stmt::If {
        cond: format!("row < {mc} && col < {dv}"),
        div: Div::Thread,
        then: [
            vec![Stmt::f32("ov", format!("oacc[ci][e] / {l}"), false)],
            stores,
        ]
        .concat(),
        otherwise: vec![],
    });
    e1.emit(Stmt::Epilogue {
        after: ACC.into(),
        token: "stored".into(),
        body: vec![unrolled("ci", dvp / 8, vec![unrolled("e", 4, per)])],
    });
    e1.pop_scope();
    let inner = e1.close();
    let body = vec![Stmt::If {
        cond: format!("{mc} > 0 && {nb_c} > 0 && (int)blockIdx.x < {mblocks} * ({nb_c})"),
        div: Div::Block,
        then: inner,
        otherwise: vec![],
    }];
    let params = params_of(
        ins.iter().map(|i| i.dtype),
        p.second.outputs.iter().map(|o| o.dtype),
        &kernel_symbols(p),
    );
    let ty = if dtype == DType::BF16 {
        CType::Bf16
    } else {
        CType::Half
    };
    let smem = |op: &Operand, stages: Option<u64>| Smem {
        name: op.smem.into(),
        ty,
        dims: stages
            .into_iter()
            .chain([op.tile.rows, op.tile.len])
            .collect(),
        dynamic: true,
    };
    let grid = m_size.ceildiv(bm as i64).mul(&nb).max_of(&Dim::int(1));
    let mut k = Kernel {
        name: name.clone(),
        arch,
        template: "attention".into(),
        params,
        launch: Launch {
            grid: [grid, Dim::int(1), Dim::int(1)].map(Size),
            block: [threads as u32, 1, 1],
            dyn_smem_bytes: 0,
        },
        smem: vec![
            smem(&q_op, None),
            smem(&k_op, Some(2)),
            smem(&v_op, Some(2)),
        ],
        body,
    };
    let dynamic = k.smem_bytes().1;
    k.launch.dyn_smem_bytes =
        u32::try_from(dynamic).map_err(|_| bad(format!("{dynamic} B of shared memory")))?;
    Ok(k)
}

/// `S = Q·Kᵀ` of the tile into `sacc` (mma), then the score epilogue per accumulator element:
/// keys past the end are `-INF`, rows past the end compute on the last row (never stored).
fn scores(
    e1: &mut Emitter,
    p: &AttentionPair,
    plan: &AttentionPlan,
    [q_op, k_op]: [&Operand; 2],
    dtype: DType,
    [mc, sc]: [&str; 2],
) -> Result<Vec<Stmt>, CodegenError> {
    let bn = plan.bn;
    let ks_n = pad16(p.head_dim) / 16;
    let bf16 = dtype == DType::BF16;
    let mut out = vec![Stmt::Array {
        ty: CType::F32,
        name: "sacc".into(),
        dims: vec![bn / 8, 4],
        zero: true,
    }];
    let mut kstep = vec![];
    let a = if plan.q_in_regs {
        "qf[ks]".to_string()
    } else {
        kstep.push(Stmt::Array {
            ty: CType::U32,
            name: "qa".into(),
            dims: vec![4],
            zero: false,
        });
        kstep.extend(q_op.ldmatrix("0", "warp * 16", "ks * 16", "qa", TILE));
        "qa".to_string()
    };
    let mut per_nj = vec![Stmt::Array {
        ty: CType::U32,
        name: "kf".into(),
        dims: vec![4],
        zero: false,
    }];
    per_nj.extend(k_op.ldmatrix("st", "nj * 16", "ks * 16", "kf", TILE));
    for h in 0..2 {
        per_nj.push(Stmt::Mma {
            bf16,
            d: format!("sacc[nj * 2 + {h}]"),
            a: a.clone(),
            b: format!("&kf[{}]", 2 * h),
            c: format!("sacc[nj * 2 + {h}]"),
            token: ACC.into(),
        });
    }
    kstep.push(unrolled("nj", bn / 16, per_nj));
    out.push(unrolled("ks", ks_n, kstep));
    let score = e1.assign_f32("sacc[ni][e]", &p.score, |e| {
        e.bind(&p.key, "key");
        e.bind(&p.query, "rowc");
        e.provide(&p.acc, "dot");
    })?;
    let per = vec![
        Stmt::int("key", "n0 + ni * 8 + (lane & 3) * 2 + (e & 1)"),
        Stmt::int("qrow", "wrow + (lane >> 2) + (e >> 1) * 8"),
        Stmt::int("rowc", format!("qrow < {mc} ? qrow : {mc} - 1")),
        Stmt::f32("dot", "sacc[ni][e]", false),
        Stmt::If {
            cond: format!("key < {sc}"),
            div: Div::Thread,
            then: score,
            otherwise: vec![assign("sacc[ni][e]", "(-dlc_inf())")],
        },
    ];
    out.push(unrolled("ni", bn / 8, vec![unrolled("e", 4, per)]));
    Ok(out)
}

/// The online softmax of the tile's scores, per row (two per lane: `lane / 4` and `+ 8`): the
/// tile max over the quad (shuffles), the running max `m_i`, the rescale `alpha` of `l_i` and
/// of the output accumulators, and the probabilities in place of the scores.
fn online_softmax(p: &AttentionPair, plan: &AttentionPlan, dvp: u64) -> Vec<Stmt> {
    let bn = plan.bn;
    let mut out = vec![
        Stmt::Array {
            ty: CType::F32,
            name: "mx".into(),
            dims: vec![2],
            zero: false,
        },
        Stmt::Array {
            ty: CType::F32,
            name: "mu".into(),
            dims: vec![2],
            zero: false,
        },
        Stmt::Array {
            ty: CType::F32,
            name: "alpha".into(),
            dims: vec![2],
            zero: false,
        },
        unrolled("h", 2, vec![assign("mx[h]", "m_i[h]")]),
        unrolled(
            "ni",
            bn / 8,
            vec![unrolled(
                "e",
                4,
                vec![assign("mx[e >> 1]", "dlc_max(mx[e >> 1], sacc[ni][e])")],
            )],
        ),
    ];
    let mut per_row = vec![];
    for off in [1, 2] {
        per_row.push(assign(
            "mx[h]",
            format!("dlc_max(mx[h], dlc_shfl_xor(mx[h], {off}))"),
        ));
    }
    per_row.push(assign("mu[h]", "(mx[h] == (-dlc_inf()) ? 0.0f : mx[h])"));
    per_row.push(assign("alpha[h]", exp_of(p.softmax, "m_i[h] - mu[h]")));
    per_row.push(assign("m_i[h]", "mx[h]"));
    per_row.push(assign("l_i[h]", "l_i[h] * alpha[h]"));
    out.push(unrolled("h", 2, per_row));
    out.push(unrolled(
        "ci",
        dvp / 8,
        vec![unrolled(
            "e",
            4,
            vec![assign("oacc[ci][e]", "oacc[ci][e] * alpha[e >> 1]")],
        )],
    ));
    out.push(unrolled(
        "ni",
        bn / 8,
        vec![unrolled(
            "e",
            4,
            vec![
                assign("sacc[ni][e]", exp_of(p.softmax, "sacc[ni][e] - mu[e >> 1]")),
                assign("l_i[e >> 1]", "l_i[e >> 1] + sacc[ni][e]"),
            ],
        )],
    ));
    out
}

/// `O += P·V`: the probabilities of each 16-key step re-packed (in the input precision) as the
/// `A` fragment — accumulator element `e` of block `ni` is row `lane/4 + 8·(e/2)`, key
/// `8·ni + 2·(lane%4) + e%2`, exactly `A`'s layout for the blocks `2·kk`, `2·kk + 1` — and `V`
/// from shared memory by `ldmatrix.trans`.
fn pv(plan: &AttentionPlan, v_op: &Operand, dvp: u64, dtype: DType) -> Vec<Stmt> {
    let pack = if dtype == DType::BF16 {
        "dlc_pack_bf162"
    } else {
        "dlc_pack_half2"
    };
    let mut per_kk = vec![Stmt::Array {
        ty: CType::U32,
        name: "pa".into(),
        dims: vec![4],
        zero: false,
    }];
    for (r, (ni, e)) in [("0", 0), ("0", 2), ("1", 0), ("1", 2)]
        .into_iter()
        .enumerate()
    {
        per_kk.push(assign(
            format!("pa[{r}]"),
            format!(
                "{pack}(sacc[kk * 2 + {ni}][{e}], sacc[kk * 2 + {ni}][{}])",
                e + 1
            ),
        ));
    }
    let mut per_cj = vec![Stmt::Array {
        ty: CType::U32,
        name: "vf".into(),
        dims: vec![4],
        zero: false,
    }];
    per_cj.extend(v_op.ldmatrix("st", "cj * 16", "kk * 16", "vf", TILE));
    for h in 0..2 {
        per_cj.push(Stmt::Mma {
            bf16: dtype == DType::BF16,
            d: format!("oacc[cj * 2 + {h}]"),
            a: "pa".into(),
            b: format!("&vf[{}]", 2 * h),
            c: format!("oacc[cj * 2 + {h}]"),
            token: ACC.into(),
        });
    }
    per_kk.push(unrolled("cj", dvp / 16, per_cj));
    vec![unrolled("kk", plan.bn / 16, per_kk)]
}
