//! The tensor-core flash-attention kernel of an [`AttentionPair`] (see the parent module doc for
//! the algorithm; [`super::stage`] for the operand tiles).

mod epilogue;

use super::super::super::cexpr;
use super::super::super::gpu::{CType, Div, Kernel, Launch, Smem, Stmt, Unroll, WarpOp};
use super::super::super::scalar::Emitter;
use super::super::super::CodegenError;
use super::super::contraction::Side;
use super::super::contraction_mma::smem::Tile;
use super::super::{bind_flat, params_of};
use super::pattern::{fold_scale, kept_score};
use super::stage::{self, Operand, REFILL, TILE};
use super::{
    heaviest_first, inputs, kernel_symbols, pad16, AttentionPair, AttentionPlan, Mask, Softmax,
};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::{Expr, Size};
use crate::target::Arch;

/// The compute token of the accumulators.
const ACC: &str = "acc_ready";

/// The base-2 factor `c` of the softmax's exponent: `exp(x) = 2^(x·log2 e)`, `exp2(x·c)`.
fn exp2_factor(sm: Softmax) -> f64 {
    match sm {
        Softmax::Exp => std::f64::consts::LOG2_E,
        Softmax::Exp2(c) => c,
    }
}

/// `e^(…)` of `x − m` as the kernel computes it: `2^(x·c − m·c)` (`c` the exponent's
/// `factor`), one `FFMA` on `x` and the row's `m·c` (`mc`, computed once per row and tile), then
/// one `MUFU.EX2` (`dlc_exp2_approx`, `ex2.approx.ftz`: subnormal probabilities flush to 0; `P`
/// is rounded to fp16/bf16 for `P·V` anyway).
fn exp_of(factor: f64, x: &str, mc: &str) -> String {
    format!(
        "dlc_exp2_approx(fmaf({x}, {}, -{mc}))",
        cexpr::float(factor)
    )
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

/// What the parts of the kernel share.
struct Cx<'r> {
    p: &'r AttentionPair<'r>,
    plan: AttentionPlan,
    dtype: DType,
    threads: u64,
    /// C spellings of the query rows, the keys, the batch points and the query blocks.
    mc: String,
    sc: String,
    nb_c: String,
    mblocks: String,
    /// The operand tiles.
    q: Operand<'r>,
    k: Operand<'r>,
    v: Operand<'r>,
    any_async: bool,
    /// The score the kernel computes per element (`p.score`, or with its scale folded out,
    /// [`fold_scale`]) and the factor `c` of the exponent `2^(s·c − m·c)` (the scale folded in).
    score: Expr,
    factor: f64,
}

/// `p.second` seen with the kernel's inputs, so that its input `i` is parameter `in{i}` too;
/// the deferred buffer comes last (its read is never emitted).
fn second_with_kernel_inputs(p: &AttentionPair) -> crate::ir::region::Region {
    let mut second = p.second.clone();
    second.inputs = inputs(p).iter().map(|i| (*i).clone()).collect();
    second.inputs.extend(
        p.second
            .inputs
            .iter()
            .filter(|i| i.name == p.deferred)
            .cloned(),
    );
    second
}

/// The `Q`, `K` and `V` tiles of the plan (`mc`, `sc`: the query and key extents, C).
fn operands<'r>(
    p: &'r AttentionPair<'r>,
    second: &'r crate::ir::region::Region,
    plan: &AttentionPlan,
    dtype: DType,
    [mc, sc]: [&str; 2],
) -> [Operand<'r>; 3] {
    let (d, dv) = (p.head_dim, p.value_dim);
    let (dp, dvp) = (pad16(d), pad16(dv));
    let copy = |r, e, axis: &str, extent| {
        if plan.async_ {
            stage::plain_read(r, e, axis, extent, dtype)
        } else {
            None
        }
    };
    [
        Operand {
            smem: "Qs",
            staged: false,
            tile: Tile::new(true, plan.bm, dp),
            side: Side::A,
            value: &p.q_side,
            outer_axis: p.query.clone(),
            outer_extent: mc.to_string(),
            k_axis: p.head_axis.clone(),
            k_extent: d.to_string(),
            copy: copy(p.first, &p.q_side, &p.head_axis, d),
        },
        Operand {
            smem: "Ks",
            staged: true,
            tile: Tile::new(true, plan.bn, dp),
            side: Side::B,
            value: &p.k_side,
            outer_axis: p.key.clone(),
            outer_extent: sc.to_string(),
            k_axis: p.head_axis.clone(),
            k_extent: d.to_string(),
            copy: copy(p.first, &p.k_side, &p.head_axis, d),
        },
        Operand {
            smem: "Vs",
            staged: true,
            tile: Tile::new(false, dvp, plan.bn),
            side: Side::B,
            value: &p.v_side,
            outer_axis: p.col.clone(),
            outer_extent: dv.to_string(),
            k_axis: p.key2.clone(),
            k_extent: sc.to_string(),
            copy: copy(second, &p.v_side, &p.col, dv),
        },
    ]
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
    let (bm, bn, rows) = (plan.bm, plan.bn, plan.rows);
    let rows_ok = matches!(rows, 16 | 32) && bm.is_multiple_of(rows);
    if !rows_ok || bm == 0 || bn == 0 || !bn.is_multiple_of(16) || plan.stages != 2 {
        return Err(bad(format!(
            "no flash-attention layout of {bm} query rows ({rows} per warp) x {bn} keys, {} \
             stages",
            plan.stages
        )));
    }
    let second = second_with_kernel_inputs(p);
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
    let nb = Dim::product(&batch_sizes);
    let corr = |a: &str| -> Result<String, CodegenError> {
        p.corr
            .get(a)
            .cloned()
            .ok_or_else(|| bad(format!("iter `{a}` has no partner")))
    };
    let [q, k, v] = operands(p, &second, plan, dtype, [&mc, &sc]);
    let (score, factor) = match fold_scale(&p.score, &p.acc) {
        Some((raw, k)) => (raw, exp2_factor(p.softmax) * k),
        None => (p.score.clone(), exp2_factor(p.softmax)),
    };
    let cx = Cx {
        score,
        factor,
        p,
        plan: *plan,
        dtype,
        threads: plan.threads(),
        mblocks: format!("(({mc} + {}) / {bm})", bm - 1),
        nb_c: cexpr::dim(&nb),
        any_async: [&q, &k, &v].iter().any(|o| o.copy.is_some()),
        mc,
        sc,
        q,
        k,
        v,
    };
    e1.open();
    block_origin(&cx, &mut e1);
    e1.push_scope();
    if !p.batch.is_empty() {
        let batch_c: Vec<String> = batch_sizes.iter().map(cexpr::dim).collect();
        bind_flat(&mut e1, &p.batch, &batch_c, "bb", "b_");
    }
    e2.push_scope();
    for b in &p.batch {
        e2.bind(&corr(b)?, e1.name(b));
    }
    for st in visited_tiles(p.mask, plan) {
        e1.emit(st);
    }
    prologue(&cx, &mut e1, &mut e2)?;
    let step = key_step(&cx, &mut e1, &mut e2)?;
    e1.emit(Stmt::For {
        var: "t".into(),
        start: "t_lo".into(),
        end: "t_hi".into(),
        step: "1".into(),
        unroll: Unroll::Compiler,
        div: Div::Block,
        body: step,
    });
    epilogue::store_output(&cx, &mut e1, &mut e2, &corr(&p.query)?)?;
    e1.pop_scope();
    let inner = e1.close();
    let (mc, nb_c, mblocks) = (&cx.mc, &cx.nb_c, &cx.mblocks);
    let body = vec![Stmt::If {
        cond: format!("{mc} > 0 && {nb_c} > 0 && (int)blockIdx.x < {mblocks} * ({nb_c})"),
        div: Div::Block,
        then: inner,
        otherwise: vec![],
    }];
    let grid = m_size.ceildiv(bm as i64).mul(&nb).max_of(&Dim::int(1));
    assemble(&cx, name.clone(), arch, grid, body).map_err(bad)
}

/// The block's coordinates: its query block `mb` (heaviest first when the mask keeps more
/// keys for later rows) and batch point `bb` from the flat block index, its first row `m0`,
/// the warp's first row `wrow`, the key tile count `nt`.
fn block_origin(cx: &Cx, e1: &mut Emitter) {
    for op in [&cx.q, &cx.k, &cx.v] {
        e1.emit(Stmt::Comment(op.describe()));
    }
    let (bm, bn) = (cx.plan.bm, cx.plan.bn);
    let (mblocks, nb_c) = (&cx.mblocks, &cx.nb_c);
    e1.emit(Stmt::int("tid", "(int)threadIdx.x"));
    e1.emit(Stmt::int("lane", "(int)dlc_lane()"));
    e1.emit(Stmt::int("warp", "(int)dlc_warp()"));
    e1.emit(Stmt::int("bid", "(int)blockIdx.x"));
    if heaviest_first(cx.p.mask) {
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
    e1.emit(Stmt::int("wrow", format!("m0 + warp * {}", cx.plan.rows)));
    e1.emit(Stmt::int("nt", format!("({} + {}) / {bn}", cx.sc, bn - 1)));
}

/// The key tiles the block visits, `[t_lo, t_hi)`: all, or those the mask does not skip (a
/// contiguous range: the skip condition is monotone in the tile).
fn visited_tiles(mask: Option<Mask>, plan: &AttentionPlan) -> Vec<Stmt> {
    let Some(m) = mask else {
        return vec![Stmt::int("t_lo", "0"), Stmt::int("t_hi", "nt")];
    };
    let mut out: Vec<Stmt> = [("t_lo", "nt"), ("t_hi", "0")]
        .into_iter()
        .map(|(n, v)| Stmt::Let {
            ty: CType::I32,
            name: n.into(),
            value: v.into(),
            mutable: true,
        })
        .collect();
    out.push(Stmt::For {
        var: "t".into(),
        start: "0".into(),
        end: "nt".into(),
        step: "1".into(),
        unroll: Unroll::Compiler,
        div: Div::Block,
        body: vec![Stmt::uniform_if(
            format!("!{}", skip_cond(m, plan.bm, plan.bn)),
            vec![
                assign("t_lo", "t_lo < t ? t_lo : t"),
                assign("t_hi", "t + 1"),
            ],
        )],
    });
    out
}

/// The prologue: `Q` (one `cp.async` group), the first key tile (another), the `Q` fragments
/// when they stay in registers, the accumulators and the running max and sum.
fn prologue(cx: &Cx, e1: &mut Emitter, e2: &mut Emitter) -> Result<(), CodegenError> {
    let (threads, dtype) = (cx.threads, cx.dtype);
    for f in stage::fill(e1, &cx.q, "0", ("m0", "0"), threads, dtype, TILE)? {
        e1.emit(f);
    }
    if cx.any_async {
        e1.emit(Stmt::Commit { token: TILE.into() });
    }
    let origin = format!("t_lo * {}", cx.plan.bn);
    let mut first = stage::fill(e1, &cx.k, "0", (&origin, "0"), threads, dtype, TILE)?;
    first.extend(stage::fill(
        e2,
        &cx.v,
        "0",
        ("0", &origin),
        threads,
        dtype,
        TILE,
    )?);
    e1.emit(Stmt::uniform_if("t_lo < t_hi", first));
    if cx.any_async {
        e1.emit(Stmt::Commit { token: TILE.into() });
    }
    let ks_n = pad16(cx.p.head_dim) / 16;
    let frags = cx.plan.frags();
    if cx.plan.q_in_regs {
        if cx.any_async {
            e1.emit(Stmt::Wait {
                tokens: vec![TILE.into()],
                pending: 1,
            });
        }
        e1.emit(Stmt::Barrier);
        e1.emit(Stmt::Array {
            ty: CType::U32,
            name: "qf".into(),
            dims: vec![frags, ks_n, 4],
            zero: false,
        });
        let q_row = format!("warp * {} + mf * 16", cx.plan.rows);
        e1.emit(Stmt::unrolled(
            "mf",
            frags,
            vec![Stmt::unrolled(
                "ks",
                ks_n,
                cx.q.ldmatrix("0", &q_row, "ks * 16", "qf[mf][ks]", TILE),
            )],
        ));
    }
    e1.emit(Stmt::Array {
        ty: CType::F32,
        name: "oacc".into(),
        dims: vec![frags, pad16(cx.p.value_dim) / 8, 4],
        zero: true,
    });
    for (n, v) in [("m_i", "(-dlc_inf())"), ("l_i", "0.0f"), ("mc", "0.0f")] {
        e1.emit(Stmt::Array {
            ty: CType::F32,
            name: n.into(),
            dims: vec![2 * frags],
            zero: false,
        });
        e1.emit(Stmt::unrolled(
            "r",
            2 * frags,
            vec![assign(format!("{n}[r]"), v)],
        ));
    }
    Ok(())
}

/// One key tile `t`: wait for it, prefetch tile `t + 1` into the other stage (read by the
/// previous step, which every thread has finished: it passed this step's barrier), then the
/// scores, the online softmax and `O += P·V`.
fn key_step(cx: &Cx, e1: &mut Emitter, e2: &mut Emitter) -> Result<Vec<Stmt>, CodegenError> {
    let (threads, dtype, bn) = (cx.threads, cx.dtype, cx.plan.bn);
    let mut step = vec![
        Stmt::int("st", "(t - t_lo) & 1"),
        Stmt::int("n0", format!("t * {bn}")),
    ];
    if cx.any_async {
        step.push(Stmt::Wait {
            tokens: vec![TILE.into()],
            pending: 0,
        });
    }
    step.push(Stmt::Barrier);
    let next = format!("n0 + {bn}");
    let mut refill = stage::fill(e1, &cx.k, "st ^ 1", (&next, "0"), threads, dtype, REFILL)?;
    refill.extend(stage::fill(
        e2,
        &cx.v,
        "st ^ 1",
        ("0", &next),
        threads,
        dtype,
        REFILL,
    )?);
    step.push(Stmt::uniform_if("t + 1 < t_hi", refill));
    if cx.any_async {
        step.push(Stmt::Commit {
            token: REFILL.into(),
        });
    }
    let dvp = pad16(cx.p.value_dim);
    step.extend(scores(
        e1,
        cx.p,
        &cx.score,
        &cx.plan,
        [&cx.q, &cx.k],
        dtype,
        [&cx.mc, &cx.sc],
    )?);
    step.extend(online_softmax(cx.factor, &cx.plan, dvp));
    step.extend(pv(&cx.plan, &cx.v, dvp, dtype));
    Ok(step)
}

/// The kernel record: parameters, launch (`grid` blocks on `x`), dynamic shared memory.
fn assemble(
    cx: &Cx,
    name: String,
    arch: Arch,
    grid: Dim,
    body: Vec<Stmt>,
) -> Result<Kernel, String> {
    let p = cx.p;
    let params = params_of(
        inputs(p).iter().map(|i| i.dtype),
        p.second.outputs.iter().map(|o| o.dtype),
        &kernel_symbols(p),
    );
    let ty = if cx.dtype == DType::BF16 {
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
    let mut k = Kernel {
        name,
        arch,
        template: "attention".into(),
        params,
        launch: Launch {
            grid: [grid, Dim::int(1), Dim::int(1)].map(Size),
            block: [cx.threads as u32, 1, 1],
            dyn_smem_bytes: 0,
        },
        smem: vec![
            smem(&cx.q, None),
            smem(&cx.k, Some(cx.plan.stages)),
            smem(&cx.v, Some(cx.plan.stages)),
        ],
        body,
        max_regs: None,
    };
    let dynamic = k.smem_bytes().1;
    k.launch.dyn_smem_bytes =
        u32::try_from(dynamic).map_err(|_| format!("{dynamic} B of shared memory"))?;
    Ok(k)
}

/// `S = Q·Kᵀ` of the tile into `sacc` (mma), then the score epilogue per accumulator element:
/// keys past the end are `-INF`, rows past the end compute on the last row (never stored).
fn scores(
    e1: &mut Emitter,
    p: &AttentionPair,
    score_expr: &Expr,
    plan: &AttentionPlan,
    [q_op, k_op]: [&Operand; 2],
    dtype: DType,
    [mc, sc]: [&str; 2],
) -> Result<Vec<Stmt>, CodegenError> {
    let (bn, frags) = (plan.bn, plan.frags());
    let ks_n = pad16(p.head_dim) / 16;
    let bf16 = dtype == DType::BF16;
    let mut out = vec![Stmt::Array {
        ty: CType::F32,
        name: "sacc".into(),
        dims: vec![frags, bn / 8, 4],
        zero: true,
    }];
    let mut kstep = vec![];
    // Each `K` fragment read from shared memory feeds the MMAs of every `m16` fragment of the
    // warp's rows.
    let a = if plan.q_in_regs {
        "qf[mf][ks]".to_string()
    } else {
        kstep.push(Stmt::Array {
            ty: CType::U32,
            name: "qa".into(),
            dims: vec![frags, 4],
            zero: false,
        });
        let q_row = format!("warp * {} + mf * 16", plan.rows);
        kstep.push(Stmt::unrolled(
            "mf",
            frags,
            q_op.ldmatrix("0", &q_row, "ks * 16", "qa[mf]", TILE),
        ));
        "qa[mf]".to_string()
    };
    let mut per_nj = vec![Stmt::Array {
        ty: CType::U32,
        name: "kf".into(),
        dims: vec![4],
        zero: false,
    }];
    per_nj.extend(k_op.ldmatrix("st", "nj * 16", "ks * 16", "kf", TILE));
    let per_mf = (0..2)
        .map(|h| Stmt::Mma {
            bf16,
            d: format!("sacc[mf][nj * 2 + {h}]"),
            a: a.clone(),
            b: format!("&kf[{}]", 2 * h),
            c: format!("sacc[mf][nj * 2 + {h}]"),
            token: ACC.into(),
        })
        .collect();
    per_nj.push(Stmt::unrolled("mf", frags, per_mf));
    kstep.push(Stmt::unrolled("nj", bn / 16, per_nj));
    out.push(Stmt::unrolled("ks", ks_n, kstep));
    let mut score_of = |expr: &Expr| {
        e1.assign_f32("sacc[mf][ni][e]", expr, |e| {
            e.bind(&p.key, "key");
            e.bind(&p.query, "rowc");
            e.provide(&p.acc, "dot");
        })
    };
    let score = score_of(score_expr)?;
    let coords = || {
        vec![
            Stmt::int("key", "n0 + ni * 8 + (lane & 3) * 2 + (e & 1)"),
            Stmt::int("qrow", "wrow + mf * 16 + (lane >> 2) + (e >> 1) * 8"),
            Stmt::int("rowc", format!("qrow < {mc} ? qrow : {mc} - 1")),
            Stmt::f32("dot", "sacc[mf][ni][e]", false),
        ]
    };
    // Every score element of the warp: fragment `mf`, key block `ni`, register `e`.
    let each = |body: Vec<Stmt>| {
        Stmt::unrolled(
            "mf",
            frags,
            vec![Stmt::unrolled(
                "ni",
                bn / 8,
                vec![Stmt::unrolled("e", 4, body)],
            )],
        )
    };
    let mut per = coords();
    per.push(Stmt::If {
        cond: format!("key < {sc}"),
        div: Div::Thread,
        then: score,
        otherwise: vec![assign("sacc[mf][ni][e]", "(-dlc_inf())")],
    });
    let masked = each(per);
    // A tile whose every key is in range and kept by the mask for every row of the block
    // (the block-uniform test of `kept_cond`) computes the kept score alone: no key bound, no
    // mask comparison and select per element (FlashAttention-2's unmasked steady state).
    match kept_score(score_expr, &p.key, &p.query) {
        Some((kept, m)) => {
            let mut fast = coords();
            fast.extend(score_of(kept)?);
            out.push(Stmt::If {
                cond: kept_cond(m, plan.bm, bn, sc),
                div: Div::Block,
                then: vec![each(fast)],
                otherwise: vec![masked],
            });
        }
        None => out.push(masked),
    }
    Ok(out)
}

/// The C condition under which the mask keeps every key of tile `n0 .. n0 + bn` (all in
/// range) for every row `m0 .. m0 + bm` of the block: the form `dn·n + dm·m + dc` at the
/// tile's least permissive corner is `≤ 0` (rows past the end compute on the last row, which
/// lies inside the range, so the test is conservative for them).
fn kept_cond(m: Mask, bm: u64, bn: u64, sc: &str) -> String {
    let n = if m.dn > 0 {
        format!("(n0 + {})", bn - 1)
    } else {
        "n0".to_string()
    };
    let q = if m.dm > 0 {
        format!("(m0 + {})", bm - 1)
    } else {
        "m0".to_string()
    };
    format!(
        "n0 + {bn} <= {sc} && (long long){} * {n} + (long long){} * {q} + (long long){} <= 0LL",
        m.dn, m.dm, m.dc
    )
}

/// The exponent (base 2) by which a row's maximum may exceed the reference maximum `m_i`
/// before the warp rescales: the probabilities are `2^(s·c − m_i·c) ≤ 2^RESCALE_SLACK` (256:
/// exact enough in fp16/bf16 and far from fp32's range), and the quotient `O / l` does not
/// depend on the reference (FlashAttention-4's conditional rescaling).
pub const RESCALE_SLACK: f64 = 8.0;

/// The online softmax of the tile's scores, per row (two per lane and `m16` fragment: row
/// `r = 2·mf + h` is `lane / 4 + 8·h` of fragment `mf`): the tile max over the quad
/// (shuffles) and the running max `mx`; when some row of the warp exceeds its reference max
/// `m_i` by more than [`RESCALE_SLACK`] (in the exponent, base 2: a warp-uniform vote), the
/// warp moves every row's reference to its running max — the rescale `alpha` of `l_i` and of
/// the output accumulators, `mc = m_i·c` — else it skips the rescale (after the first tiles it
/// rarely runs); then the probabilities `2^(s·c − mc)` in place of the scores. The maxima are
/// `fmaxf` (one `FMNMX`) rather than the reference's NaN-propagating `dlc_max` (four
/// instructions): a NaN score still reaches its row's output, through `exp(NaN − m)` in `l_i`
/// and in the `P·V` product, so the stored values are the same.
fn online_softmax(factor: f64, plan: &AttentionPlan, dvp: u64) -> Vec<Stmt> {
    let (bn, frags) = (plan.bn, plan.frags());
    let rows = 2 * frags;
    let row_array = |name: &str| Stmt::Array {
        ty: CType::F32,
        name: name.into(),
        dims: vec![rows],
        zero: false,
    };
    // Every element of the warp's fragments: `mf`, block `ni` (or `ci`), register `e`.
    let each = |blocks: &str, n: u64, body: Vec<Stmt>| {
        Stmt::unrolled(
            "mf",
            frags,
            vec![Stmt::unrolled(
                blocks,
                n,
                vec![Stmt::unrolled("e", 4, body)],
            )],
        )
    };
    let mut out = vec![
        row_array("mx"),
        Stmt::unrolled("r", rows, vec![assign("mx[r]", "m_i[r]")]),
        each(
            "ni",
            bn / 8,
            vec![assign(
                "mx[mf * 2 + (e >> 1)]",
                "fmaxf(mx[mf * 2 + (e >> 1)], sacc[mf][ni][e])",
            )],
        ),
        Stmt::f32("need", "0.0f", true),
    ];
    let mut per_row = vec![];
    for off in [1, 2] {
        per_row.push(assign(
            "mx[r]",
            format!("fmaxf(mx[r], dlc_shfl_xor(mx[r], {off}))"),
        ));
    }
    per_row.push(assign(
        "need",
        format!(
            "mx[r] > m_i[r] + {} ? 1.0f : need",
            cexpr::float(RESCALE_SLACK / factor)
        ),
    ));
    out.push(Stmt::unrolled("r", rows, per_row));
    out.push(Stmt::WarpReduce {
        op: WarpOp::Max,
        dst: "need".into(),
        value: "need".into(),
    });
    let rescale_row = vec![
        Stmt::f32("mu", "(mx[r] == (-dlc_inf()) ? 0.0f : mx[r])", false),
        assign("mc[r]", format!("mu * {}", cexpr::float(factor))),
        assign("alpha[r]", exp_of(factor, "m_i[r]", "mc[r]")),
        assign("m_i[r]", "mx[r]"),
        assign("l_i[r]", "l_i[r] * alpha[r]"),
    ];
    out.push(Stmt::If {
        cond: "need > 0.0f".into(),
        div: Div::Warp,
        then: vec![
            row_array("alpha"),
            Stmt::unrolled("r", rows, rescale_row),
            each(
                "ci",
                dvp / 8,
                vec![assign(
                    "oacc[mf][ci][e]",
                    "oacc[mf][ci][e] * alpha[mf * 2 + (e >> 1)]",
                )],
            ),
        ],
        otherwise: vec![],
    });
    out.push(each(
        "ni",
        bn / 8,
        vec![
            assign(
                "sacc[mf][ni][e]",
                exp_of(factor, "sacc[mf][ni][e]", "mc[mf * 2 + (e >> 1)]"),
            ),
            assign(
                "l_i[mf * 2 + (e >> 1)]",
                "l_i[mf * 2 + (e >> 1)] + sacc[mf][ni][e]",
            ),
        ],
    ));
    out
}

/// `O += P·V`: the probabilities of each 16-key step re-packed (in the input precision) as the
/// `A` fragments, one per `m16` fragment of the warp — accumulator element `e` of block `ni` is
/// row `lane/4 + 8·(e/2)`, key `8·ni + 2·(lane%4) + e%2`, exactly `A`'s layout for the blocks
/// `2·kk`, `2·kk + 1` — and `V` from shared memory by `ldmatrix.trans`, each `V` fragment
/// feeding the MMAs of every fragment.
fn pv(plan: &AttentionPlan, v_op: &Operand, dvp: u64, dtype: DType) -> Vec<Stmt> {
    let frags = plan.frags();
    let pack = if dtype == DType::BF16 {
        "dlc_pack_bf162"
    } else {
        "dlc_pack_half2"
    };
    let mut per_kk = vec![Stmt::Array {
        ty: CType::U32,
        name: "pa".into(),
        dims: vec![frags, 4],
        zero: false,
    }];
    let mut packs = vec![];
    for (r, (ni, e)) in [("0", 0), ("0", 2), ("1", 0), ("1", 2)]
        .into_iter()
        .enumerate()
    {
        packs.push(assign(
            format!("pa[mf][{r}]"),
            format!(
                "{pack}(sacc[mf][kk * 2 + {ni}][{e}], sacc[mf][kk * 2 + {ni}][{}])",
                e + 1
            ),
        ));
    }
    per_kk.push(Stmt::unrolled("mf", frags, packs));
    let mut per_cj = vec![Stmt::Array {
        ty: CType::U32,
        name: "vf".into(),
        dims: vec![4],
        zero: false,
    }];
    per_cj.extend(v_op.ldmatrix("st", "cj * 16", "kk * 16", "vf", TILE));
    let per_mf = (0..2)
        .map(|h| Stmt::Mma {
            bf16: dtype == DType::BF16,
            d: format!("oacc[mf][cj * 2 + {h}]"),
            a: "pa[mf]".into(),
            b: format!("&vf[{}]", 2 * h),
            c: format!("oacc[mf][cj * 2 + {h}]"),
            token: ACC.into(),
        })
        .collect();
    per_cj.push(Stmt::unrolled("mf", frags, per_mf));
    per_kk.push(Stmt::unrolled("cj", dvp / 16, per_cj));
    vec![Stmt::unrolled("kk", plan.bn / 16, per_kk)]
}
