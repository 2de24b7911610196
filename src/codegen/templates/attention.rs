//! The attention template: the two regions the optimizer extracts for attention — scores and
//! softmax into a *deferred* buffer `P`, then `P·V` — as ONE streaming-softmax kernel
//! (FlashAttention's online softmax), so `P` never exists.
//!
//! # The pattern ([`pair`])
//!
//! `first` yields, as its only output, a deferred `P = e / sum_n(e)` where
//! `e = exp2((s − max_n(s))·c)` (`c > 0` a constant) or `e = exp(s − max_n(s))`, all three
//! reductions fp32 with their identity as init, over the same iter `n` (the *key* axis). The
//! *score* `s` contains exactly one reduce, `sum_k(a·b)` over an axis `k` that is no iter (the
//! *head* axis, of constant extent), and that reduce is a let of its own; everything else in `s`
//! (the scale, the mask, a bias) is the *score epilogue*, computed per element by the region's
//! own expressions through the [`Emitter`]. Of the operands, the query side `a` does not mention
//! `n` and the key side `b` mentions `n`; the iters other than `n` that `b` does not mention must
//! be exactly one, the *query* axis `m`, the rest are *batch* axes (read by the key side).
//!
//! `second` has exactly one reduce, `sum_k2(P[map]·v)` in fp32, whose one read of `P` maps
//! every iter of `first` to a plain axis of `second` (the key to the reduce axis `k2`, the other
//! iters to distinct iters of the same sizes), the `V` side `v` reads neither `P` nor the query
//! axis, and exactly one iter of `second` (the *column*, of constant extent) is not in the map.
//! The key extent of `k2` is `first`'s key size. Lets after the reduce are `second`'s epilogue.
//! [`find_pairs`] also checks the program: `P` is read by no other step and is no graph output.
//!
//! Matching is on inlined expressions (`pattern`), so how the optimizer split the chain into lets
//! does not matter; the values differ from the two-kernel reference only by floating-point
//! reassociation (the online softmax).
//!
//! # The kernel ([`build`])
//!
//! Grid `(batch points, ⌈M / BM⌉)`, `BM` threads per block, one query row per thread:
//! - the thread's query row `q[D]` in registers (the query side's prologue computed on load);
//!   rows past `M` compute on a clamped row and store nothing, so every thread reaches every
//!   barrier;
//! - key tiles of `BN` keys: `K` and `V` tiles loaded cooperatively into shared memory as fp32
//!   (consecutive threads take consecutive head/column elements: coalesced; keys past the end
//!   are zero), the tile's scores `s = epilogue(q·k)` into shared memory `Ss[BN][BM]` (keys past
//!   the end are `-INF`), then the online softmax in registers: running max `m_i` and sum `l_i`,
//!   the accumulator `o[DV]` rescaled by `exp((m_old − m_new)…)`, `o += p·v` per key;
//! - a key tile is *skipped* (block-uniform) when the score's top-level mask
//!   (`where(cond, s, -INF)`, `select(pred, s, -INF)`) keeps a key only where
//!   `dn·n + dm·m + dc ≤ 0` (causal `n ≤ m`, `n < m + c`, sliding windows by their first affine
//!   conjunct) and that form is positive at the tile's most permissive corner for the block's
//!   rows — then every score of the tile is `-INF` and contributes exactly 0;
//! - at the end `o / l_i` is provided as `second`'s accumulator and `second`'s yields (epilogue,
//!   cast) are stored.
//!
//! The lowering's safe softmax is accepted too: the max guarded as `where(max == -INF, 0, max)`
//! (what the kernel's running max does anyway) and the sum as `where(sum == 0, 1, sum)` (then
//! the kernel divides by 1 where `l_i = 0`): a row whose keys are all masked gives zeros, as in
//! the reference; unguarded, it gives `0/0` (NaN), as in the reference too.

mod pattern;

pub use pattern::{inline, AttentionPair, Mask, Softmax};

use super::super::cexpr;
use super::super::gpu::{CType, Div, Kernel, Launch, Smem, Stmt};
use super::super::scalar::Emitter;
use super::super::CodegenError;
use super::{bind_flat, params_of, store_yields, symbols};
use crate::ir::dim::Dim;
use crate::ir::region::program::{RegionProgram, Step};
use crate::ir::region::{Input, Region, Size};
use crate::target::Arch;
use std::collections::BTreeSet;

/// Query rows per block (one per thread).
pub const BM: u64 = 64;
/// Keys per tile.
pub const BN: u64 = 32;
/// The largest head and value dimensions (registers per thread).
pub const MAX_DIM: u64 = 128;

/// The two regions as one attention, when they are (see the module doc).
pub fn pair<'p>(first: &'p Region, second: &'p Region) -> Option<AttentionPair<'p>> {
    let p = pattern::pair(first, second)?;
    (p.head_dim > 0 && p.head_dim <= MAX_DIM && p.value_dim > 0 && p.value_dim <= MAX_DIM)
        .then_some(p)
}

/// The attention pairs of `program` as `(first step, second step)` indices: a region yielding a
/// deferred buffer that exactly one later region reads, [`pair`] accepting the two, the buffer
/// read by no other step (region or alias) and no graph output.
pub fn find_pairs(program: &RegionProgram) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut used = BTreeSet::new();
    for (i, s) in program.steps.iter().enumerate() {
        let Step::Region(first) = s else { continue };
        let [o] = first.outputs.as_slice() else {
            continue;
        };
        if program.outputs.iter().any(|(_, b)| *b == o.name) || used.contains(&i) {
            continue;
        }
        let readers: Vec<usize> = program
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| match s {
                Step::Region(r) => r.inputs.iter().any(|inp| inp.name == o.name),
                Step::Alias { of, .. } => *of == o.name,
            })
            .map(|(j, _)| j)
            .collect();
        let [j] = readers.as_slice() else { continue };
        let Some(Step::Region(second)) = program.steps.get(*j) else {
            continue;
        };
        if *j > i && !used.contains(j) && pair(first, second).is_some() {
            used.insert(i);
            used.insert(*j);
            out.push((i, *j));
        }
    }
    out
}

/// The kernel's inputs, in parameter order: `first`'s, then `second`'s others (not the
/// deferred buffer, not one `first` already has).
pub fn inputs<'p>(p: &AttentionPair<'p>) -> Vec<&'p Input> {
    let mut out: Vec<&Input> = p.first.inputs.iter().collect();
    for i in &p.second.inputs {
        if i.name != p.deferred && !out.iter().any(|o| o.name == i.name) {
            out.push(i);
        }
    }
    out
}

/// Every symbol the kernel takes, sorted (its parameters after the buffers).
pub fn kernel_symbols(p: &AttentionPair) -> BTreeSet<String> {
    let mut s = symbols(p.first);
    s.extend(symbols(p.second));
    s
}

fn exp_of(sm: Softmax, x: &str) -> String {
    match sm {
        Softmax::Exp => format!("dlc_exp({x})"),
        Softmax::Exp2(c) => format!("dlc_exp2(({x}) * {})", cexpr::float(c)),
    }
}

fn loop_(
    var: &str,
    start: &str,
    end: String,
    step: String,
    div: Div,
    unroll: bool,
    body: Vec<Stmt>,
) -> Stmt {
    Stmt::range(var, [start.into(), end, step], div, unroll, body)
}

/// The C condition under which key tile `n0` is masked for every row of the block.
fn skip_cond(m: Mask) -> String {
    let n = if m.dn >= 0 {
        "n0".to_string()
    } else {
        format!("(n0 + {})", BN - 1)
    };
    let q = if m.dm <= 0 {
        format!("(m0 + {})", BM - 1)
    } else {
        "m0".to_string()
    };
    format!(
        "((long long){} * {n} + (long long){} * {q} + (long long){} > 0LL)",
        m.dn, m.dm, m.dc
    )
}

/// The one kernel of `p` for `arch` (see the module doc).
pub fn build(p: &AttentionPair, arch: Arch) -> Result<Kernel, CodegenError> {
    let name = cexpr::ident(&format!("{}_{}", p.first.name, p.second.name));
    let bad = |why: String| CodegenError::Unsupported {
        kernel: name.clone(),
        why,
    };
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
    let (d, dv) = (p.head_dim, p.value_dim);
    let corr = |a: &str| -> Result<String, CodegenError> {
        p.corr
            .get(a)
            .cloned()
            .ok_or_else(|| bad(format!("iter `{a}` has no partner")))
    };

    e1.open();
    e1.emit(Stmt::int("tid", "(int)threadIdx.x"));
    e1.emit(Stmt::int("m0", format!("(int)blockIdx.y * {BM}")));
    e1.emit(Stmt::int("row", "m0 + tid"));
    e1.emit(Stmt::Let {
        ty: CType::Bool,
        name: "valid".into(),
        value: format!("row < {mc}"),
        mutable: false,
    });
    e1.emit(Stmt::int("rowc", format!("valid ? row : {mc} - 1")));
    e1.emit(Stmt::int("nt", format!("({sc} + {}) / {BN}", BN - 1)));
    e1.push_scope();
    if !p.batch.is_empty() {
        bind_flat(&mut e1, &p.batch, &batch_c, "(int)blockIdx.x", "b_");
    }
    e1.bind(&p.query, "rowc");
    // The C names of the batch axes, for `second`'s scopes.
    let batch_vars: Vec<(String, String)> = p
        .batch
        .iter()
        .map(|b| Ok((corr(b)?, e1.name(b))))
        .collect::<Result<_, CodegenError>>()?;
    let q2 = corr(&p.query)?;
    let bind2 = |e2: &mut Emitter, batch_vars: &[(String, String)]| {
        for (a, v) in batch_vars {
            e2.bind(a, v.clone());
        }
    };

    // The query row in registers.
    e1.emit(Stmt::Array {
        ty: CType::F32,
        name: "q".into(),
        dims: vec![d],
        zero: false,
    });
    let body = e1.assign_f32("q[kk]", &p.q_side, |e| e.bind(&p.head_axis, "kk"))?;
    e1.emit(loop_(
        "kk",
        "0",
        d.to_string(),
        "1".into(),
        Div::Block,
        true,
        body,
    ));
    e1.emit(Stmt::Array {
        ty: CType::F32,
        name: "o".into(),
        dims: vec![dv],
        zero: true,
    });
    e1.emit(Stmt::f32("m_i", "(-dlc_inf())", true));
    e1.emit(Stmt::f32("l_i", "0.0f", true));

    // One key tile.
    let mut tile = Vec::new();
    // K tile: Ks[j][kk] = key side at (key n0 + j, head kk).
    let load_k = e1.assign_f32("Ks[j][kk]", &p.k_side, |e| {
        e.bind(&p.key, "key");
        e.bind(&p.head_axis, "kk");
    })?;
    // V tile: Vs[j][c] = V side at (key n0 + j, column c).
    let load_v = e2.assign_f32("Vs[j][c]", &p.v_side, |e| {
        bind2(e, &batch_vars);
        e.bind(&p.key2, "key");
        e.bind(&p.col, "c");
    })?;
    for (width, sm, col, load) in [(d, "Ks", "kk", load_k), (dv, "Vs", "c", load_v)] {
        let mut body = vec![
            Stmt::int("j", format!("e / {width}")),
            Stmt::int(col, format!("e % {width}")),
            Stmt::int("key", "n0 + j"),
        ];
        body.push(Stmt::If {
            cond: format!("key < {sc}"),
            div: Div::Thread,
            then: load,
            otherwise: vec![Stmt::Assign {
                place: format!("{sm}[j][{col}]"),
                value: "0.0f".into(),
            }],
        });
        tile.push(loop_(
            "e",
            "tid",
            (BN * width).to_string(),
            BM.to_string(),
            Div::Thread,
            false,
            body,
        ));
    }
    tile.push(Stmt::Barrier);
    // Scores: Ss[j][tid] = epilogue(q · Ks[j]) (keys past the end: -INF); the tile max.
    let score = e1.assign_f32("Ss[j][tid]", &p.score, |e| {
        e.bind(&p.key, "key");
        e.provide(&p.acc, "dot");
    })?;
    tile.push(Stmt::f32("tmax", "(-dlc_inf())", true));
    tile.push(loop_(
        "j",
        "0",
        BN.to_string(),
        "1".into(),
        Div::Block,
        false,
        vec![
            Stmt::int("key", "n0 + j"),
            Stmt::f32("dot", "0.0f", true),
            loop_(
                "kk",
                "0",
                d.to_string(),
                "1".into(),
                Div::Block,
                true,
                vec![Stmt::Assign {
                    place: "dot".into(),
                    value: "dot + q[kk] * Ks[j][kk]".into(),
                }],
            ),
            Stmt::If {
                cond: format!("key < {sc}"),
                div: Div::Thread,
                then: score,
                otherwise: vec![Stmt::Assign {
                    place: "Ss[j][tid]".into(),
                    value: "(-dlc_inf())".into(),
                }],
            },
            Stmt::Assign {
                place: "tmax".into(),
                value: "dlc_max(tmax, Ss[j][tid])".into(),
            },
        ],
    ));
    // The online softmax.
    tile.push(Stmt::f32("m_new", "dlc_max(m_i, tmax)", false));
    tile.push(Stmt::f32(
        "m_use",
        "(m_new == (-dlc_inf()) ? 0.0f : m_new)",
        false,
    ));
    tile.push(Stmt::f32("alpha", exp_of(p.softmax, "m_i - m_use"), false));
    tile.push(Stmt::Assign {
        place: "l_i".into(),
        value: "l_i * alpha".into(),
    });
    tile.push(loop_(
        "c",
        "0",
        dv.to_string(),
        "1".into(),
        Div::Block,
        true,
        vec![Stmt::Assign {
            place: "o[c]".into(),
            value: "o[c] * alpha".into(),
        }],
    ));
    tile.push(loop_(
        "j",
        "0",
        BN.to_string(),
        "1".into(),
        Div::Block,
        false,
        vec![
            Stmt::f32("pj", exp_of(p.softmax, "Ss[j][tid] - m_use"), false),
            Stmt::Assign {
                place: "l_i".into(),
                value: "l_i + pj".into(),
            },
            loop_(
                "c",
                "0",
                dv.to_string(),
                "1".into(),
                Div::Block,
                true,
                vec![Stmt::Assign {
                    place: "o[c]".into(),
                    value: "o[c] + pj * Vs[j][c]".into(),
                }],
            ),
        ],
    ));
    tile.push(Stmt::Assign {
        place: "m_i".into(),
        value: "m_new".into(),
    });
    tile.push(Stmt::Barrier);
    let tile = match p.mask {
        Some(m) => vec![
            Stmt::int("n0", format!("t * {BN}")),
            Stmt::If {
                cond: format!("!{}", skip_cond(m)),
                div: Div::Block,
                then: tile,
                otherwise: vec![],
            },
        ],
        None => [vec![Stmt::int("n0", format!("t * {BN}"))], tile].concat(),
    };
    e1.emit(loop_(
        "t",
        "0",
        "nt".into(),
        "1".into(),
        Div::Block,
        false,
        tile,
    ));

    // The epilogue: o / l_i as `second`'s accumulator, its yields stored.
    e2.open();
    e2.push_scope();
    bind2(&mut e2, &batch_vars);
    e2.bind(&q2, "rowc");
    e2.bind(&p.col, "c");
    e2.provide(&p.acc2, "ov");
    let stored = store_yields(&mut e2);
    e2.pop_scope();
    let stores = e2.close();
    stored?;
    let l = if p.safe_sum {
        "(l_i == 0.0f ? 1.0f : l_i)"
    } else {
        "l_i"
    };
    let mut per_col = vec![Stmt::f32("ov", format!("o[c] / {l}"), false)];
    per_col.extend(stores);
    e1.emit(Stmt::If {
        cond: "valid".into(),
        div: Div::Thread,
        then: vec![loop_(
            "c",
            "0",
            dv.to_string(),
            "1".into(),
            Div::Thread,
            true,
            per_col,
        )],
        otherwise: vec![],
    });
    e1.pop_scope();
    let inner = e1.close();
    let nb_c = cexpr::dim(&nb);
    let body = vec![Stmt::If {
        cond: format!("{mc} > 0 && {nb_c} > 0 && (int)blockIdx.x < {nb_c}"),
        div: Div::Block,
        then: inner,
        otherwise: vec![],
    }];

    let params = params_of(
        ins.iter().map(|i| i.dtype),
        p.second.outputs.iter().map(|o| o.dtype),
        &kernel_symbols(p),
    );
    let grid = [
        nb.max_of(&Dim::int(1)),
        m_size.ceildiv(BM as i64).max_of(&Dim::int(1)),
        Dim::int(1),
    ];
    let smem = |n: &str, w: u64| Smem {
        name: n.into(),
        ty: CType::F32,
        dims: vec![BN, w],
        dynamic: false,
    };
    Ok(Kernel {
        name,
        arch,
        template: "attention".into(),
        params,
        launch: Launch {
            grid: grid.map(Size),
            block: [BM as u32, 1, 1],
            dyn_smem_bytes: 0,
        },
        smem: vec![smem("Ks", d), smem("Vs", dv), smem("Ss", BM)],
        body,
    })
}
