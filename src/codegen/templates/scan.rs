//! The scan template (seed 004's 並列スキャン; a region with a `scan` let, `region` module doc):
//! one block per *line* (a point of every iter but the scanned one), walking the line in tiles
//! of `block × items` elements with a running carry — a chunked single-pass scan:
//!
//! 1. each thread loads `items` consecutive scan positions (position `q` is element `q`, or
//!    `len − 1 − q` when `reverse`; the scanned iter may be innermost or strided, the index is
//!    the region's own map), applies the prologue (the scan body) and converts to the
//!    accumulation dtype (fp32 for fp16/bf16/fp32 inputs, i32 for i32), positions past the end
//!    holding the identity (tails);
//! 2. a sequential inclusive scan of its `items` in registers;
//! 3. a warp inclusive scan of the thread totals (Hillis–Steele over `dlc_shfl`/`dlc_shfl_i32`,
//!    five steps), the thread's exclusive prefix from its left neighbour;
//! 4. the warp totals through shared memory: each thread folds the warps before its own, every
//!    thread the block total (two barriers per tile);
//! 5. the outputs: `carry ⊕ warps before ⊕ lanes before ⊕ own items` (without the own item when
//!    `exclusive`), the epilogue lets on it, stored; the carry advances by the block total.
//!
//! Work and traffic are linear (every element loaded and stored once). Floats are combined in a
//! tree order within a tile, so sums and products differ from the sequential playback by
//! rounding (max/min and i32 are exact). One block per line: a few long lines leave SMs idle —
//! TODO(issue 16): a decoupled look-back (or a chunked multi-launch scan) for lines longer than
//! a few tiles when there are fewer lines than SMs.

use super::super::cexpr;
use super::super::gpu::{CType, Div, Kernel, Launch, Smem, Stmt, Unroll};
use super::super::scalar::{ctype, Emitter, Val};
use super::super::CodegenError;
use super::{bind_flat, params, store_yields};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::kind::Kind;
use crate::ir::region::verify::children;
use crate::ir::region::{Expr, Reduce, Region, Scan, Size};
use crate::target::Arch;

/// The region's scan let (its index and the scan), when it has one.
pub fn scan_let(r: &Region) -> Option<(usize, &Scan)> {
    r.lets.iter().enumerate().find_map(|(i, l)| match &l.expr {
        Expr::Scan(s) => Some((i, &**s)),
        _ => None,
    })
}

/// The number of scans in `e` (its own and those of its sub-expressions).
fn scans_in(e: &Expr) -> usize {
    usize::from(matches!(e, Expr::Scan(_))) + children(e).map(scans_in).sum::<usize>()
}

/// Whether a GPU kernel can hold the region's scans: none (no scan template needed), or exactly
/// one that is the whole expression of a let (the scan template binds that let to the running
/// accumulator). Every other expression goes through the scalar emitter, which has no scan: a
/// region with two scans — exported BERT's attention-mask index combines two `Range`s, each an
/// exclusive cumulative sum, and kernel growth fuses them — has no plan, and its scans run as
/// kernels of their own.
pub fn fits(r: &Region) -> bool {
    match r.lets.iter().map(|l| scans_in(&l.expr)).sum::<usize>() {
        0 => true,
        1 => scan_let(r).is_some(),
        _ => false,
    }
}

/// How the scan combines accumulators (through the reduce helpers of [`Emitter`]).
struct Fold {
    proxy: Reduce,
    kind: Kind,
    identity: String,
    shfl: &'static str,
}

impl Fold {
    fn new(sc: &Scan) -> Option<Fold> {
        let shfl = match sc.dtype {
            DType::F32 => "dlc_shfl",
            DType::I32 => "dlc_shfl_i32",
            _ => return None,
        };
        let proxy = Reduce {
            op: sc.op,
            axes: vec![],
            extents: vec![],
            init: None,
            dtype: Some(sc.dtype),
            body: Expr::Const(0.0),
        };
        let (identity, kind) = Emitter::reduce_init(&proxy);
        Some(Fold {
            proxy,
            kind,
            identity,
            shfl,
        })
    }

    /// `a ⊕ b`, both accumulators.
    fn comb(&self, a: &str, b: &str) -> String {
        self.val(
            a,
            &Val {
                code: b.to_string(),
                kind: self.kind,
            },
        )
    }

    /// `a ⊕ v`, `v` any value (converted and rounded to the accumulation dtype).
    fn val(&self, a: &str, v: &Val) -> String {
        Emitter::fold(&self.proxy, a, v)
    }

    fn ty(&self) -> CType {
        ctype(self.kind)
    }

    fn let_(&self, name: &str, value: impl Into<String>, mutable: bool) -> Stmt {
        Stmt::Let {
            ty: self.ty(),
            name: name.into(),
            value: value.into(),
            mutable,
        }
    }
}

/// Where a tile's items sit on the line: scan position `q = t0 + tx·items + j` is element `q`,
/// or `len − 1 − q` when `reverse`.
struct Walk<'s> {
    sc: &'s Scan,
    len: String,
    items: u32,
}

impl Walk<'_> {
    fn pos(&self, j: u32) -> String {
        format!("t0 + tx * {} + {j}", self.items)
    }

    fn at(&self, q: &str) -> String {
        if self.sc.reverse {
            format!("({} - 1 - {q})", self.len)
        } else {
            q.to_string()
        }
    }

    /// `then` at every item of the thread inside the line, with the scanned axis bound there;
    /// `before` runs first at every item (inside or not).
    fn each(
        &self,
        em: &mut Emitter,
        mut before: impl FnMut(&mut Emitter, u32),
        mut then: impl FnMut(&mut Emitter, u32) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        for j in 0..self.items {
            let q = em.fresh("q");
            em.emit(Stmt::int(&q, self.pos(j)));
            before(em, j);
            em.open();
            em.push_scope();
            em.bind(&self.sc.axis, self.at(&q));
            let done = then(em, j);
            em.pop_scope();
            let body = em.close();
            done?;
            em.emit(Stmt::If {
                cond: format!("{q} < {}", self.len),
                div: Div::Thread,
                then: body,
                otherwise: vec![],
            });
        }
        Ok(())
    }
}

/// Steps 1–2: the thread's items through the prologue into `v[]`, scanned in registers.
fn load_items(em: &mut Emitter, f: &Fold, w: &Walk) -> Result<(), CodegenError> {
    em.emit(Stmt::Array {
        ty: f.ty(),
        name: "v".into(),
        dims: vec![u64::from(w.items)],
        zero: false,
    });
    w.each(
        em,
        |em, j| {
            em.emit(Stmt::Assign {
                place: format!("v[{j}]"),
                value: f.identity.clone(),
            })
        },
        |em, j| {
            let x = em.value(&w.sc.body)?;
            em.emit(Stmt::Assign {
                place: format!("v[{j}]"),
                value: f.val(&f.identity, &x),
            });
            Ok(())
        },
    )?;
    for j in 1..w.items {
        em.emit(Stmt::Assign {
            place: format!("v[{j}]"),
            value: f.comb(&format!("v[{}]", j - 1), &format!("v[{j}]")),
        });
    }
    Ok(())
}

/// Steps 3–4: the warp scan of thread totals, the warps before this one and the block total
/// (`total`), then `pre` = everything before the thread's first item. Returns the shared memory.
fn block_scan(em: &mut Emitter, f: &Fold, items: u32, warps: u32) -> Vec<Smem> {
    em.emit(f.let_("w", format!("v[{}]", items - 1), true));
    for d in [1u32, 2, 4, 8, 16] {
        let n = em.fresh("up");
        em.emit(f.let_(
            &n,
            format!("{}(w, lane >= {d} ? lane - {d} : lane)", f.shfl),
            false,
        ));
        em.emit(Stmt::If {
            cond: format!("lane >= {d}"),
            div: Div::Thread,
            then: vec![Stmt::Assign {
                place: "w".into(),
                value: f.comb(&n, "w"),
            }],
            otherwise: vec![],
        });
    }
    em.emit(f.let_(
        "left",
        format!("{}(w, lane > 0 ? lane - 1 : 0)", f.shfl),
        false,
    ));
    em.emit(f.let_(
        "lanes_before",
        format!("lane > 0 ? left : {}", f.identity),
        false,
    ));
    em.emit(f.let_("before", f.identity.clone(), true));
    let mut smem = Vec::new();
    if warps > 1 {
        smem.push(Smem {
            name: "wsum".into(),
            ty: f.ty(),
            dims: vec![u64::from(warps)],
            dynamic: false,
        });
        em.emit(f.let_("total", f.identity.clone(), true));
        em.emit(Stmt::If {
            cond: "lane == 31".into(),
            div: Div::Thread,
            then: vec![Stmt::Assign {
                place: "wsum[warp]".into(),
                value: "w".into(),
            }],
            otherwise: vec![],
        });
        em.emit(Stmt::Barrier);
        em.emit(Stmt::unrolled(
            "k",
            u64::from(warps),
            vec![
                Stmt::If {
                    cond: "k < warp".into(),
                    div: Div::Thread,
                    then: vec![Stmt::Assign {
                        place: "before".into(),
                        value: f.comb("before", "wsum[k]"),
                    }],
                    otherwise: vec![],
                },
                Stmt::Assign {
                    place: "total".into(),
                    value: f.comb("total", "wsum[k]"),
                },
            ],
        ));
        // The next tile overwrites `wsum`.
        em.emit(Stmt::Barrier);
    } else {
        em.emit(f.let_("total", format!("{}(w, 31)", f.shfl), false));
    }
    em.emit(f.let_(
        "pre",
        f.comb(&f.comb("carry", "before"), "lanes_before"),
        false,
    ));
    smem
}

/// Step 5: each item's scan value as let `scan_name`, the yields stored.
fn store_items(em: &mut Emitter, f: &Fold, w: &Walk, scan_name: &str) -> Result<(), CodegenError> {
    w.each(
        em,
        |_, _| {},
        |em, j| {
            let value = match (w.sc.exclusive, j) {
                (true, 0) => "pre".to_string(),
                (true, _) => f.comb("pre", &format!("v[{}]", j - 1)),
                (false, _) => f.comb("pre", &format!("v[{j}]")),
            };
            let s = em.fresh("s");
            em.emit(f.let_(&s, value, false));
            em.provide(scan_name, s);
            store_yields(em)
        },
    )
}

/// The scan kernel of `r`: `block` threads (whole warps) per line, `items` elements per thread
/// and tile.
pub fn build(r: &Region, arch: Arch, block: u32, items: u32) -> Result<Kernel, CodegenError> {
    let unsupported = |why: &str| CodegenError::Unsupported {
        kernel: r.name.clone(),
        why: why.to_string(),
    };
    let (li, sc) = scan_let(r).ok_or_else(|| unsupported("no scan let"))?;
    if block == 0 || !block.is_multiple_of(32) || block > 1024 || items == 0 {
        return Err(unsupported(
            "a scan block is 32..=1024 threads, whole warps",
        ));
    }
    let f = Fold::new(sc).ok_or_else(|| unsupported("a scan accumulates in fp32 or i32"))?;
    let mut em = Emitter::new(r, "")?;
    let sizes = em.iter_sizes.clone();
    let ax = r
        .iters
        .iter()
        .position(|i| i.name == sc.axis)
        .ok_or_else(|| unsupported("the scanned axis is not an iter"))?;
    let walk = Walk {
        sc,
        len: cexpr::dim(&sizes[ax]),
        items,
    };
    let (mut others, mut osizes) = (Vec::new(), Vec::new());
    for (i, (it, s)) in r.iters.iter().zip(&sizes).enumerate() {
        if i != ax {
            others.push(it.name.clone());
            osizes.push(s.clone());
        }
    }
    let lines = Dim::product(&osizes);
    let osizes_c: Vec<String> = osizes.iter().map(cexpr::dim).collect();
    em.emit(Stmt::int("ln", "(int)blockIdx.x"));
    em.emit(Stmt::int("tx", "(int)threadIdx.x"));
    em.emit(Stmt::int("lane", "tx & 31"));
    em.emit(Stmt::int("warp", "tx >> 5"));
    em.open();
    em.push_scope();
    bind_flat(&mut em, &others, &osizes_c, "ln", "i_");
    em.emit(f.let_("carry", f.identity.clone(), true));
    em.open();
    let tiled = load_items(&mut em, &f, &walk).and_then(|()| {
        let smem = block_scan(&mut em, &f, items, block / 32);
        store_items(&mut em, &f, &walk, &r.lets[li].name).map(|()| smem)
    });
    em.emit(Stmt::Assign {
        place: "carry".into(),
        value: f.comb("carry", "total"),
    });
    let tile = em.close();
    em.pop_scope();
    let smem = tiled?;
    em.emit(Stmt::For {
        var: "t0".into(),
        start: "0".into(),
        end: walk.len.clone(),
        step: (block * items).to_string(),
        unroll: Unroll::Compiler,
        div: Div::Block,
        body: tile,
    });
    let inner = em.close();
    em.emit(Stmt::uniform_if(
        format!("ln < {}", cexpr::dim(&lines)),
        inner,
    ));
    let body = em.close();
    Ok(Kernel {
        name: cexpr::ident(&r.name),
        arch,
        template: "scan".into(),
        params: params(r),
        launch: Launch {
            grid: [
                Size(lines.max_of(&Dim::int(1))),
                Size(Dim::int(1)),
                Size(Dim::int(1)),
            ],
            block: [block, 1, 1],
            dyn_smem_bytes: 0,
        },
        smem,
        body,
        max_regs: None,
    })
}
