//! The shared-memory operand tiles of the attention kernel (`Q`, and the double-buffered `K` and
//! `V` key tiles): their layout ([`Tile`], the tensor-core template's swizzled layout), how each
//! is filled (`cp.async` 16-byte chunks of a plain aligned read, zero-filled outside the operand;
//! else element pairs computed with the operand's prologue, rounded, packed and stored through
//! registers) and the `ldmatrix` addresses of their fragments.

use super::super::super::gpu::verify::BARRIER_TOKEN;
use super::super::super::gpu::{CType, Div, Stmt, Unroll};
use super::super::super::scalar::Emitter;
use super::super::super::CodegenError;
use super::super::contraction::Side;
use super::super::contraction_mma::smem::{ldmatrix_lane, Tile, C, CHUNK};
use crate::ir::axis::AxisExpr;
use crate::ir::dtype::DType;
use crate::ir::region::{Expr, Region};

/// The load token of tiles copied with `cp.async` in the prologue.
pub const TILE: &str = "tile";
/// The load token of the key tiles a step prefetches.
pub const REFILL: &str = "tile_refill";

/// The element type an operand is multiplied in: a read's input type, through casts that
/// widen fp16/bf16 to fp32 exactly; a narrowing cast's target; `None` for computed values.
pub fn operand_dtype(r: &Region, e: &Expr) -> Option<DType> {
    match e {
        Expr::Read { tensor, .. } => r.input(tensor).map(|i| i.dtype),
        Expr::Cast { to: DType::F32, x } => {
            operand_dtype(r, x).filter(|d| matches!(d, DType::F16 | DType::BF16))
        }
        Expr::Cast { to, .. } if matches!(to, DType::F16 | DType::BF16) => Some(*to),
        _ => None,
    }
}

/// The plain read `cp.async` can copy for operand `e` (inlined): a read of a `dtype` input
/// (through exact widening casts) whose last index is exactly `axis`, mentioned nowhere else,
/// with `axis`' extent `extent` and the input's last dimension multiples of 8, so that an
/// aligned 8-element chunk along `axis` is 16 contiguous, 16-byte aligned bytes, all inside or
/// all outside the operand.
pub fn plain_read<'r>(
    r: &'r Region,
    e: &'r Expr,
    axis: &str,
    extent: u64,
    dtype: DType,
) -> Option<(&'r str, &'r [AxisExpr])> {
    let mut e = e;
    while let Expr::Cast { to: DType::F32, x } = e {
        e = x;
    }
    let Expr::Read { tensor, map } = e else {
        return None;
    };
    let input = r.input(tensor)?;
    let (last, rest) = map.split_last()?;
    let is_axis = matches!(last, AxisExpr::Name(n) if n == axis);
    let elsewhere = rest.iter().any(|a| a.mentions(&|n| n == axis));
    let row = input.memref.shape.last()?.0.as_int();
    let mult8 = |x: i64| x % CHUNK as i64 == 0;
    (input.dtype == dtype
        && is_axis
        && !elsewhere
        && extent.is_multiple_of(CHUNK)
        && row.is_some_and(mult8))
    .then_some((tensor.as_str(), map.as_slice()))
}

/// One operand tile of the kernel.
pub struct Operand<'r> {
    /// The shared-memory buffer (`[stages][rows][len]`, or `[rows][len]` for `Q`).
    pub smem: &'static str,
    /// Whether the buffer has a stage dimension.
    pub staged: bool,
    pub tile: Tile,
    /// Which mma operand it feeds (`Q`: `A`; `K`, `V`: `B`).
    pub side: Side,
    /// The operand's value (inlined, axes of its region).
    pub value: &'r Expr,
    /// The region's axis along the tile's outer dimension, and its extent (C).
    pub outer_axis: String,
    pub outer_extent: String,
    /// The region's axis along the tile's `K` dimension, and its extent (C).
    pub k_axis: String,
    pub k_extent: String,
    /// The plain read `cp.async` copies, when it can.
    pub copy: Option<(&'r str, &'r [AxisExpr])>,
}

impl Operand<'_> {
    /// The C place of tile element (`o`, `k`) in stage `st` (the swizzled column).
    pub fn at(&self, st: &str, o: C, k: C) -> String {
        let (row, col) = self.tile.place(o, k);
        if self.staged {
            format!("{}[{st}][{row}][{col}]", self.smem)
        } else {
            format!("{}[{row}][{col}]", self.smem)
        }
    }

    /// The load token an `ldmatrix` of this tile waits on.
    pub fn token(&self, copied: &str) -> String {
        if self.copy.is_some() {
            copied
        } else {
            BARRIER_TOKEN
        }
        .to_string()
    }

    /// The `ldmatrix.x4` (`.trans` for a tile whose rows run along the outer axis) of the 16×16
    /// block at outer offset `ob`, `K` offset `kb` (C) of stage `st` into `dst`.
    pub fn ldmatrix(&self, st: &str, ob: &str, kb: &str, dst: &str, token: &str) -> Vec<Stmt> {
        let (o, k) = ldmatrix_lane(
            self.side,
            self.tile.k_fastest,
            C::expr(ob),
            C::expr(kb),
            C::atom("lane"),
        );
        vec![
            Stmt::int("lo", o.to_string()),
            Stmt::int("lk", k.to_string()),
            Stmt::LdMatrix {
                dst: dst.into(),
                num: 4,
                trans: !self.tile.k_fastest,
                addr: format!("&{}", self.at(st, C::atom("lo"), C::atom("lk"))),
                token: self.token(token),
            },
        ]
    }

    /// Human-readable staging, for a comment in the kernel.
    pub fn describe(&self) -> String {
        let how = if self.copy.is_some() {
            "cp.async 16-byte chunks (a plain, aligned read)"
        } else {
            "through registers with its prologue (not a plain 16-byte aligned fp16/bf16 read)"
        };
        format!(
            "{}: {}x{} tile ({}-major), loaded {how}",
            self.smem,
            self.tile.rows,
            self.tile.len,
            if self.tile.k_fastest { "K" } else { "outer" }
        )
    }
}

/// The loop over this thread's `w`-element runs of `op`'s tile (`c` the run number).
fn runs(op: &Operand, w: u64, threads: u64, body: Vec<Stmt>) -> Stmt {
    let total = op.tile.rows * op.tile.len / w;
    let mut inner = vec![Stmt::int("c", format!("tid + l * {threads}"))];
    if total.is_multiple_of(threads) {
        inner.extend(body);
    } else {
        inner.push(Stmt::If {
            cond: format!("c < {total}"),
            div: Div::Thread,
            then: body,
            otherwise: vec![],
        });
    }
    Stmt::For {
        var: "l".into(),
        start: "0".into(),
        end: total.div_ceil(threads).to_string(),
        step: "1".into(),
        unroll: Unroll::Full,
        div: Div::Block,
        body: inner,
    }
}

/// Fills stage `st` (C) of `op`, whose tile starts at `origin = (outer, k)` (C) of the
/// operand: `cp.async` copies joining `token`'s open group when the operand is a plain read,
/// else element pairs computed with `em` (the operand's region, its other axes bound), packed
/// to `dtype` and stored.
pub fn fill(
    em: &mut Emitter,
    op: &Operand,
    st: &str,
    origin: (&str, &str),
    threads: u64,
    dtype: DType,
    token: &str,
) -> Result<Vec<Stmt>, CodegenError> {
    let w = if op.copy.is_some() { CHUNK } else { 2 };
    let (o, k) = op.tile.run(C::atom("c"), w);
    em.open();
    em.emit(Stmt::int("o", o.to_string()));
    em.emit(Stmt::int("kk", k.to_string()));
    em.emit(Stmt::int("go", format!("{} + o", origin.0)));
    em.emit(Stmt::int("gk", format!("{} + kk", origin.1)));
    let inside =
        |go: &str, gk: &str| format!("{go} < {} && {gk} < {}", op.outer_extent, op.k_extent);
    let dst = op.at(st, C::atom("o"), C::atom("kk"));
    if let Some((tensor, map)) = op.copy {
        em.emit(Stmt::Let {
            ty: CType::Bool,
            name: "ok".into(),
            value: inside("go", "gk"),
            mutable: false,
        });
        em.push_scope();
        em.bind(&op.outer_axis, "go");
        em.bind(&op.k_axis, "gk");
        let off = em.read_offset(tensor, map);
        em.pop_scope();
        let (param, _, off) = off?;
        em.emit(Stmt::CpAsync {
            dst: format!("&{dst}"),
            src: format!("(ok ? {param} + ({off}) : {param})"),
            bytes: 16,
            src_bytes: "ok ? 16 : 0".into(),
            token: token.into(),
        });
    } else {
        for (i, x) in ["x0", "x1"].into_iter().enumerate() {
            let (go, gk) = match (op.tile.k_fastest, i) {
                (_, 0) => ("go".to_string(), "gk".to_string()),
                (true, _) => ("go".to_string(), "gk + 1".to_string()),
                (false, _) => ("go + 1".to_string(), "gk".to_string()),
            };
            em.emit(Stmt::f32(x, "0.0f", true));
            let (ga, ka) = (go.clone(), gk.clone());
            let value = em.assign_f32(x, op.value, |e| {
                e.bind(&op.outer_axis, format!("({ga})"));
                e.bind(&op.k_axis, format!("({ka})"));
            })?;
            em.emit(Stmt::If {
                cond: inside(&go, &gk),
                div: Div::Thread,
                then: value,
                otherwise: vec![],
            });
        }
        let pack = if dtype == DType::BF16 {
            "dlc_pack_bf162"
        } else {
            "dlc_pack_half2"
        };
        em.emit(Stmt::Assign {
            place: format!("*reinterpret_cast<unsigned*>(&{dst})"),
            value: format!("{pack}(x0, x1)"),
        });
    }
    let body = em.close();
    Ok(vec![runs(op, w, threads, body)])
}
