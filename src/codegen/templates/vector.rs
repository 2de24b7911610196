//! Vector accesses of the pointwise template: which lane count a region allows and which of
//! its reads one aligned vector load serves.
//!
//! A pointwise kernel with `lanes` lanes gives each thread `lanes` consecutive points of the
//! innermost iter. That needs the innermost iter's size to be a multiple of `lanes` (every chunk
//! then lies in one row, and starts at an element offset that is a multiple of `lanes`), so the
//! output store of a chunk is contiguous and aligned to `lanes` elements. A read is loaded as
//! one vector when
//! - every point evaluates it: it is reached from a yield through lets without entering a
//!   reduce body (a reduce body rebinds axes), and outside a `select`/`where` branch unless it
//!   is in bounds at every point (`in_bounds`: each index is an axis whose extent is the
//!   dimension's size — a mask's `where(m, s[b, h, i, j], -inf)`), as a guarded read may be out
//!   of bounds on some lanes (a convolution's padded taps);
//! - the innermost iter indexes the input's last dimension as `axis + c` with `c` a multiple of
//!   `lanes`, and no other dimension;
//! - the input's last dimension is a multiple of `lanes`,
//!
//! so its lanes are `lanes` consecutive elements starting at a multiple of `lanes`. Buffers are
//! 256-byte aligned (cudaMalloc, and the host runtime's allocator), so element alignment is byte
//! alignment. Everything else stays a scalar access (a transpose's strided reads, gathers,
//! padded reads, reduction windows).

use super::super::cexpr;
use super::super::gpu::{CType, Div, Stmt, Unroll};
use super::super::scalar::{store_value, Emitter, Val};
use super::super::CodegenError;
use crate::ir::axis::AxisExpr;
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::region::kind::Kind;
use crate::ir::region::{Expr, Reduce, Region};
use std::collections::{BTreeMap, BTreeSet};

/// The lanes per thread for `r` (iteration sizes `iter_sizes`): the largest power of two at most
/// `want` that divides the innermost iter's size (provably, for a symbolic size), else 1.
pub fn lanes(iter_sizes: &[Dim], want: u32) -> u32 {
    let Some(last) = iter_sizes.last() else {
        return 1;
    };
    let mut l = want.max(1).next_power_of_two();
    if l > want.max(1) {
        l /= 2;
    }
    while l > 1 && last.div_exact(&Dim::int(i64::from(l))).is_none() {
        l /= 2;
    }
    l
}

/// Whether the pointwise kernel of `r` under a plan of `lanes` lanes per thread emits what
/// the plan claims: the template keeps all `lanes` ([`lanes`] of `r`'s iteration sizes) and
/// loads at least one read of `r` as one vector per chunk ([`vector_reads`], or in the fold of
/// a reduce let, [`lane_reduces`]). The plan space offers a pointwise vector width above one
/// element only then (`cost::choose_plan`), so a plan never claims vector loads whose reads are
/// all scalar (a depthwise convolution's padded taps, a transpose's strided reads, the scores
/// `Q·Kᵀ` of an attention over one query, whose reads run along the head axis).
pub fn loads_vectors(r: &Region, want: u32) -> bool {
    narrowest_vector_read(r, want).is_some()
}

/// The element size, bytes, of the narrowest read the pointwise kernel of `r` loads as one
/// vector per chunk at `want` lanes ([`vector_reads`] and the reads of [`lane_reduces`]);
/// `None` when it loads none that way or keeps fewer lanes ([`loads_vectors`]). A chunk's
/// load of that read is `want` × this many bytes: the plan's lanes follow it
/// (`cost::emitted_candidates`), so that a 16-byte plan loads 16 bytes at a time even where
/// the reads are narrower than the output (bf16 in, fp32 out: 8 lanes).
pub fn narrowest_vector_read(r: &Region, want: u32) -> Option<u64> {
    let inner = r.iters.last()?;
    let em = Emitter::new(r, "").ok()?;
    let l = lanes(&em.iter_sizes, want);
    if l < 2 || l != want {
        return None;
    }
    let mut reads = vector_reads(r, &inner.name, l);
    for (_, red, extents) in lane_reduce_lets(&em, &inner.name, l).unwrap_or_default() {
        reads.extend(reads_at(
            r,
            std::slice::from_ref(&red.body),
            &inner.name,
            l,
            &extents,
        ));
    }
    reads
        .iter()
        .filter_map(|(t, _)| r.input(t).map(|i| i.dtype.size_bytes()))
        .min()
}

/// A read: input name and index map.
pub type ReadKey = (String, Vec<AxisExpr>);

/// The reads of `r` (tensor, map) one vector load of `lanes` elements serves at every chunk,
/// `axis` being the innermost iter; see the module doc. In first-use order, without duplicates.
pub fn vector_reads(r: &Region, axis: &str, lanes: u32) -> Vec<ReadKey> {
    let roots: Vec<Expr> = r.yields.iter().map(|y| Expr::Let(y.from.clone())).collect();
    vector_reads_of(r, &roots, axis, lanes)
}

/// [`vector_reads`] of the values `roots` (evaluated at every point of a chunk).
pub fn vector_reads_of(r: &Region, roots: &[Expr], axis: &str, lanes: u32) -> Vec<ReadKey> {
    reads_at(r, roots, axis, lanes, &iter_extents(r))
}

/// The region's iters and their extents (none when the region does not verify).
fn iter_extents(r: &Region) -> BTreeMap<String, Dim> {
    let Ok(checked) = crate::ir::region::verify::verify(r) else {
        return BTreeMap::new();
    };
    r.iters
        .iter()
        .map(|i| i.name.clone())
        .zip(checked.iter_sizes)
        .collect()
}

/// [`vector_reads_of`] where the axes bound have the `extents` (a guarded read is loaded only
/// when [`in_bounds`] at them).
fn reads_at(
    r: &Region,
    roots: &[Expr],
    axis: &str,
    lanes: u32,
    extents: &BTreeMap<String, Dim>,
) -> Vec<ReadKey> {
    let mut out: Vec<ReadKey> = Vec::new();
    let mut seen_lets = BTreeSet::new();
    for root in roots {
        unconditional(r, root, false, &mut seen_lets, &mut |e, guarded| {
            if let Expr::Read { tensor, map } = e {
                let key = (tensor.clone(), map.clone());
                if !out.contains(&key)
                    && contiguous(r, tensor, map, axis, lanes)
                    && (!guarded || in_bounds(r, tensor, map, extents))
                {
                    out.push(key);
                }
            }
        });
    }
    out
}

/// Whether the read `map` of input `tensor` is in bounds at every point: each index is an axis
/// whose extent (`extents`) is the dimension's size, or a constant within it.
fn in_bounds(r: &Region, tensor: &str, map: &[AxisExpr], extents: &BTreeMap<String, Dim>) -> bool {
    let Some(input) = r.input(tensor) else {
        return false;
    };
    let shape = &input.memref.shape;
    map.len() == shape.len()
        && map.iter().zip(shape).all(|(m, d)| match m {
            AxisExpr::Name(a) => extents.get(a).is_some_and(|e| *e == d.0),
            AxisExpr::Const(c) => d.0.as_int().is_some_and(|n| (0..n).contains(c)),
            _ => false,
        })
}

/// The reads of a chunk loaded into registers: read, C parameter, register array.
pub struct Loaded {
    read: ReadKey,
    param: String,
    reg: String,
}

/// Emits, in the current scope (where the innermost axis is bound to the chunk's first lane),
/// one vector load of `lanes` elements per read of `reads` into a fresh register array.
pub fn load_chunk(
    em: &mut Emitter,
    reads: &[ReadKey],
    lanes: u32,
) -> Result<Vec<Loaded>, CodegenError> {
    let mut loaded = Vec::new();
    for (tensor, map) in reads {
        let (param, dt, off) = em.read_offset(tensor, map)?;
        let reg = em.fresh("v");
        let ty = CType::of(dt);
        em.emit(Stmt::Array {
            ty,
            name: reg.clone(),
            dims: vec![u64::from(lanes)],
            zero: false,
        });
        em.emit(Stmt::Load {
            dst: reg.clone(),
            buffer: param.clone(),
            index: off,
            ty,
            vector: lanes,
        });
        loaded.push(Loaded {
            read: (tensor.clone(), map.clone()),
            param,
            reg,
        });
    }
    Ok(loaded)
}

/// The lane loop of a chunk: `body` runs in a new block and scope where `axis` is bound to
/// `first + lane` and the `loaded` reads are their registers' lanes; then the unrolled loop over
/// the `lanes` is emitted. `lane` names the loop variable.
pub fn lane_loop<T>(
    em: &mut Emitter,
    (axis, first, lane): (&str, &str, &str),
    lanes: u32,
    loaded: &[Loaded],
    body: impl FnOnce(&mut Emitter) -> Result<T, CodegenError>,
) -> Result<T, CodegenError> {
    em.open();
    em.push_scope();
    let point = em.fresh(&format!("i_{}", cexpr::ident(axis)));
    em.emit(Stmt::int(&point, format!("{first} + {lane}")));
    em.bind(axis, point);
    let mut out = Ok(());
    for l in loaded {
        match em.read_offset(&l.read.0, &l.read.1) {
            Ok((_, _, off)) => em.preload(&l.param, &off, format!("{}[{lane}]", l.reg)),
            Err(e) => out = Err(e),
        }
    }
    let result = out.and_then(|()| body(em));
    em.forget_preloaded();
    em.pop_scope();
    let block = em.close();
    let result = result?;
    em.emit(Stmt::range(
        lane,
        ["0".into(), lanes.to_string(), "1".into()],
        Div::Block,
        Unroll::Full,
        block,
    ));
    Ok(result)
}

/// A reduce let a chunk folds for all its lanes at once ([`lane_reduces`]): its name and the
/// register array holding each lane's accumulator.
pub struct LaneReduce {
    name: String,
    acc: String,
}

impl LaneReduce {
    /// Inside the chunk's [`lane_loop`]: the let is the lane's accumulator.
    pub fn provide(reduces: &[LaneReduce], em: &mut Emitter, lane: &str) {
        for r in reduces {
            em.provide(&r.name, format!("{}[{lane}]", r.acc));
        }
    }
}

/// Emits, where the innermost iter `axis` is bound to the chunk's first lane `first`, the folds
/// of the reduce lets that every point of a chunk evaluates (reached from a yield as in
/// [`vector_reads`]), that depend on `axis`, and whose body reads a run of `lanes` elements
/// contiguous along `axis` ([`vector_reads_of`] at the reduce axes: `V[b, h, j, d]` of an
/// attention's `P·V` fold, `d` innermost). Such a fold runs once per chunk, the lanes inside
/// its loop: each step loads the run as one vector and folds it into one accumulator per lane
/// (the lanes' lane-invariant terms, the scores of `P·V`, are one computation the compiler
/// shares across the unrolled lanes). Each lane folds its elements in the order the scalar
/// loop does. The caller provides the accumulators in its lane loop ([`LaneReduce::provide`]).
pub fn lane_reduces(
    em: &mut Emitter,
    axis: &str,
    first: &str,
    lanes: u32,
) -> Result<Vec<LaneReduce>, CodegenError> {
    let mut out = Vec::new();
    for (name, red, extents) in lane_reduce_lets(em, axis, lanes)? {
        let acc = lane_reduce(em, red, (axis, first), lanes, &extents)?;
        out.push(LaneReduce { name, acc });
    }
    Ok(out)
}

/// A reduce let [`lane_reduces`] folds per chunk: its name, the reduce, and the extents of the
/// region's iters and the reduce's axes its reads are checked at.
type LaneReduceLet<'r> = (String, &'r Reduce, BTreeMap<String, Dim>);

/// The reduce lets [`lane_reduces`] folds for chunks of `lanes` lanes along `axis` (see there).
fn lane_reduce_lets<'r>(
    em: &Emitter<'r>,
    axis: &str,
    lanes: u32,
) -> Result<Vec<LaneReduceLet<'r>>, CodegenError> {
    let r = em.region;
    let mut names: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    for y in &r.yields {
        unconditional(
            r,
            &Expr::Let(y.from.clone()),
            false,
            &mut seen,
            &mut |e, guarded| {
                if let (Expr::Let(n), false) = (e, guarded) {
                    if !names.contains(n) {
                        names.push(n.clone());
                    }
                }
            },
        );
    }
    let mut out = Vec::new();
    for n in names {
        let Some(Expr::Reduce(red)) = r.lets.iter().find(|l| l.name == n).map(|l| &l.expr) else {
            continue;
        };
        let lane_dependent = em.let_free(&n).contains(axis);
        if lanes < 2 || !lane_dependent || red.axes.iter().any(|a| a == axis) {
            continue;
        }
        let mut extents = iter_extents(r);
        for (a, e) in red.axes.iter().zip(em.reduce_extents(red)?) {
            extents.insert(a.clone(), e);
        }
        let body = std::slice::from_ref(&red.body);
        if reads_at(r, body, axis, lanes, &extents).is_empty() {
            continue;
        }
        out.push((n, &**red, extents));
    }
    Ok(out)
}

/// The fold of `red` for the `lanes` lanes of a chunk (see [`lane_reduces`]); returns the
/// accumulator array.
fn lane_reduce(
    em: &mut Emitter,
    red: &crate::ir::region::Reduce,
    (axis, first): (&str, &str),
    lanes: u32,
    extents: &BTreeMap<String, Dim>,
) -> Result<String, CodegenError> {
    let (init, kind) = Emitter::reduce_init(red);
    let acc = em.fresh("acc");
    em.emit(Stmt::Array {
        ty: super::super::scalar::ctype(kind),
        name: acc.clone(),
        dims: vec![u64::from(lanes)],
        zero: false,
    });
    let l0 = em.fresh("l");
    em.emit(Stmt::range(
        &l0,
        ["0".into(), lanes.to_string(), "1".into()],
        Div::Block,
        Unroll::Full,
        vec![Stmt::Assign {
            place: format!("{acc}[{l0}]"),
            value: init,
        }],
    ));
    let dims = em.reduce_extents(red)?;
    let vars: Vec<String> = red.axes.iter().map(|a| em.fresh(a)).collect();
    em.open();
    em.push_scope();
    for (a, v) in red.axes.iter().zip(&vars) {
        em.bind(a, v.clone());
    }
    let reads = reads_at(
        em.region,
        std::slice::from_ref(&red.body),
        axis,
        lanes,
        extents,
    );
    let folded = load_chunk(em, &reads, lanes).and_then(|loaded| {
        let lane = em.fresh("l");
        lane_loop(em, (axis, first, &lane), lanes, &loaded, |em| {
            let v = em.value(&red.body)?;
            let place = format!("{acc}[{lane}]");
            em.emit(Stmt::Assign {
                value: Emitter::fold(red, &place, &v),
                place,
            });
            Ok(())
        })
    });
    em.pop_scope();
    let mut body = em.close();
    folded?;
    // The innermost loop two steps at a time (two vector loads in flight over `lanes`
    // accumulators), the outer ones as loops.
    let last = vars.len().saturating_sub(1);
    for (i, (v, e)) in vars.iter().zip(&dims).enumerate().rev() {
        body = vec![Stmt::For {
            var: v.clone(),
            start: "0".into(),
            end: cexpr::dim(e),
            step: "1".into(),
            unroll: if i == last {
                Unroll::By(2)
            } else {
                Unroll::Never
            },
            div: Div::Block,
            body,
        }];
    }
    for s in body {
        em.emit(s);
    }
    Ok(acc)
}

/// `sizes` with the last one divided by `lanes` (the chunk counts), when it divides provably.
pub fn chunk_sizes(sizes: &[Dim], lanes: u32) -> Option<Vec<Dim>> {
    let mut out = sizes.to_vec();
    let last = out.last_mut()?;
    *last = last.div_exact(&Dim::int(i64::from(lanes)))?;
    Some(out)
}

/// Binds `axes` (chunk counts `chunk_sizes`, C) from the flat chunk index `flat` (C), then the
/// last axis to the chunk's first lane; returns that lane's variable.
pub fn bind_chunk(
    em: &mut Emitter,
    axes: &[String],
    chunk_sizes: &[String],
    flat: &str,
    base: &str,
    lanes: u32,
) -> String {
    super::bind_flat(em, axes, chunk_sizes, flat, base);
    let Some(inner) = axes.last() else {
        return "0".into();
    };
    let first = em.fresh(&format!("{base}{}0", cexpr::ident(inner)));
    let q = em.name(inner);
    em.emit(Stmt::int(&first, format!("{q} * {lanes}")));
    em.bind(inner, first.clone());
    first
}

/// A chunk's outputs: the offset of its first lane, and per yield the output, its dtype, the
/// let stored and the register array collecting the lanes.
pub struct ChunkStores {
    off: String,
    outputs: Vec<(usize, DType, String, String)>,
}

impl ChunkStores {
    /// Emits, where the innermost iter is bound to the chunk's first lane, the output offset
    /// and one register array of `lanes` elements per yield of the region.
    pub fn declare(em: &mut Emitter, lanes: u32) -> Result<ChunkStores, CodegenError> {
        let r = em.region;
        let off = em.output_offset();
        let off = em.materialize(
            "off",
            Val {
                code: off,
                kind: Kind::I32,
            },
        );
        let mut outputs = Vec::new();
        for y in &r.yields {
            let (j, dt) = super::yield_output(r, y)?;
            let reg = em.fresh("o");
            em.emit(Stmt::Array {
                ty: CType::of(dt),
                name: reg.clone(),
                dims: vec![u64::from(lanes)],
                zero: false,
            });
            outputs.push((j, dt, y.from.clone(), reg));
        }
        Ok(ChunkStores {
            off: off.code,
            outputs,
        })
    }

    /// Inside a [`lane_loop`]: every yield's value at the lane, into its register array.
    pub fn assign(&self, em: &mut Emitter, lane: &str) -> Result<(), CodegenError> {
        for (_, dt, from, reg) in &self.outputs {
            let v = em.let_value(from)?;
            em.emit(Stmt::Assign {
                place: format!("{reg}[{lane}]"),
                value: store_value(&v, *dt),
            });
        }
        Ok(())
    }

    /// The vector stores of the chunk, one per output.
    pub fn stores(&self, lanes: u32) -> Vec<Stmt> {
        self.outputs
            .iter()
            .map(|(j, dt, _, reg)| Stmt::Store {
                buffer: format!("out{j}"),
                index: self.off.clone(),
                value: reg.clone(),
                ty: CType::of(*dt),
                vector: lanes,
            })
            .collect()
    }
}

/// Calls `f` on every expression of `e` and of the lets it reads, outside reduce bodies, with
/// whether a `select`/`where` arm guards it (only the taken arm runs at a point).
fn unconditional(
    r: &Region,
    e: &Expr,
    guarded: bool,
    seen_lets: &mut BTreeSet<(String, bool)>,
    f: &mut dyn FnMut(&Expr, bool),
) {
    f(e, guarded);
    match e {
        Expr::Let(n) => {
            // A let reached unguarded is visited unguarded even when first reached in a branch.
            let before = seen_lets.contains(&(n.clone(), false))
                || guarded && seen_lets.contains(&(n.clone(), true));
            if !before {
                seen_lets.insert((n.clone(), guarded));
                if let Some(l) = r.lets.iter().find(|l| &l.name == n) {
                    unconditional(r, &l.expr, guarded, seen_lets, f);
                }
            }
        }
        // A reduce body runs at rebound axes.
        Expr::Reduce(_) => {}
        // Only the taken branch runs: what its arms read is guarded.
        Expr::Select {
            then, otherwise, ..
        } => {
            unconditional(r, then, true, seen_lets, f);
            unconditional(r, otherwise, true, seen_lets, f);
        }
        Expr::Where(c, a, b) => {
            unconditional(r, c, guarded, seen_lets, f);
            unconditional(r, a, true, seen_lets, f);
            unconditional(r, b, true, seen_lets, f);
        }
        _ => {
            for c in crate::ir::region::verify::children(e) {
                unconditional(r, c, guarded, seen_lets, f);
            }
        }
    }
}

/// Whether `tensor[map]` reads `lanes` consecutive, `lanes`-aligned elements over a chunk of
/// the innermost iter `axis`.
fn contiguous(r: &Region, tensor: &str, map: &[AxisExpr], axis: &str, lanes: u32) -> bool {
    let Some(input) = r.input(tensor) else {
        return false;
    };
    let (Some((last, outer)), Some(size)) = (map.split_last(), input.memref.shape.last()) else {
        return false;
    };
    let is_axis = |n: &str| n == axis;
    let offset = unit_offset(last, axis);
    let lanes = i64::from(lanes);
    offset.is_some_and(|c| c.rem_euclid(lanes) == 0)
        && !outer.iter().any(|m| m.mentions(&is_axis))
        && size.0.div_exact(&Dim::int(lanes)).is_some()
}

/// `c` when `e` is `axis + c` (`c` an integer, 0 for `axis` alone).
fn unit_offset(e: &AxisExpr, axis: &str) -> Option<i64> {
    match e {
        AxisExpr::Name(n) if n == axis => Some(0),
        AxisExpr::Add(terms) => {
            let mut found = false;
            let mut c = 0i64;
            for t in terms {
                match t {
                    AxisExpr::Name(n) if n == axis && !found => found = true,
                    AxisExpr::Const(k) => c = c.checked_add(*k)?,
                    _ => return None,
                }
            }
            found.then_some(c)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(lets: &str, x_shape: &str, n: &str) -> Region {
        let doc = format!(
            r#"{{"region": {{"name": "k", "iters": [{{"name": "m", "size": 4}}, {{"name": "n", "size": {n}}}],
              "inputs": [{{"name": "x", "dtype": "fp16", "memref": {{"shape": {x_shape}, "alignment": 16, "noalias": true, "layout": {{"kind": "row_major"}}}}}},
                         {{"name": "b", "dtype": "fp32", "memref": {{"shape": [16], "alignment": 16, "noalias": true, "layout": {{"kind": "row_major"}}}}}}],
              "outputs": [{{"name": "y", "dtype": "fp16", "memref": {{"shape": [4, {n}], "alignment": 16, "noalias": true, "layout": {{"kind": "row_major"}}}}, "materialize": "gmem"}}],
              "lets": {lets}, "yield": [{{"from": "y0", "to": "y"}}]}}}}"#
        );
        Region::from_json_str(&doc).expect("test region parses")
    }

    fn reads(r: &Region, lanes: u32) -> Vec<String> {
        vector_reads(r, "n", lanes)
            .into_iter()
            .map(|(t, _)| t)
            .collect()
    }

    #[test]
    fn lanes_are_the_largest_power_of_two_dividing_the_innermost_size() {
        let sizes = |n: Dim| vec![Dim::int(3), n];
        assert_eq!(lanes(&sizes(Dim::int(1024)), 8), 8);
        assert_eq!(lanes(&sizes(Dim::int(12)), 8), 4);
        assert_eq!(lanes(&sizes(Dim::int(6)), 8), 2);
        assert_eq!(lanes(&sizes(Dim::int(7)), 8), 1);
        assert_eq!(lanes(&sizes(Dim::int(16)), 6), 4);
        assert_eq!(lanes(&sizes(Dim::sym("N")), 8), 1);
        assert_eq!(lanes(&sizes(Dim::sym("N").mul_int(4)), 8), 4);
        assert_eq!(lanes(&[], 8), 1);
    }

    #[test]
    fn contiguous_unconditional_reads_are_vectorized() {
        let r = region(
            r#"[{"let": "y0", "expr": {"add": [{"read": {"tensor": "x", "map": ["m", "n"]}},
                                                {"read": {"tensor": "b", "map": ["n"]}}]}}]"#,
            "[4, 16]",
            "16",
        );
        assert_eq!(reads(&r, 8), ["x", "b"]);
    }

    #[test]
    fn strided_transposed_or_misaligned_reads_stay_scalar() {
        // x[n, m]: the innermost iter indexes the outer dimension (a transpose).
        let r = region(
            r#"[{"let": "y0", "expr": {"read": {"tensor": "x", "map": ["n", "m"]}}}]"#,
            "[16, 4]",
            "16",
        );
        assert!(reads(&r, 8).is_empty());
        // x[m, n + 1]: lane 0 is not 8-aligned.
        let r = region(
            r#"[{"let": "y0", "expr": {"read": {"tensor": "x", "map": ["m", {"add": ["n", 1]}]}}}]"#,
            "[4, 17]",
            "16",
        );
        assert!(reads(&r, 8).is_empty());
        // x[m, n + 8] into a row of 24: aligned.
        let r = region(
            r#"[{"let": "y0", "expr": {"read": {"tensor": "x", "map": ["m", {"add": ["n", 8]}]}}}]"#,
            "[4, 24]",
            "16",
        );
        assert_eq!(reads(&r, 8), ["x"]);
        // Rows of 12 elements: row starts are not 8-aligned.
        let r = region(
            r#"[{"let": "y0", "expr": {"read": {"tensor": "x", "map": ["m", "n"]}}}]"#,
            "[4, 12]",
            "8",
        );
        assert!(reads(&r, 8).is_empty());
        assert_eq!(reads(&r, 4), ["x"]);
    }

    #[test]
    fn a_vector_width_is_offered_only_where_a_read_is_vector_loaded() {
        let plain = region(
            r#"[{"let": "y0", "expr": {"read": {"tensor": "x", "map": ["m", "n"]}}}]"#,
            "[4, 16]",
            "16",
        );
        assert!(loads_vectors(&plain, 8));
        assert!(loads_vectors(&plain, 4));
        // One lane is no vector; 32 lanes are more than the innermost size allows.
        assert!(!loads_vectors(&plain, 1));
        assert!(!loads_vectors(&plain, 32));
        // Rows of 12: 8 lanes are cut to 4 by the template, so a plan of 8 is not emitted.
        let rows12 = region(
            r#"[{"let": "y0", "expr": {"read": {"tensor": "x", "map": ["m", "n"]}}}]"#,
            "[4, 12]",
            "12",
        );
        assert!(!loads_vectors(&rows12, 8));
        assert!(loads_vectors(&rows12, 4));
        // Only padded (guarded) reads, as in a depthwise convolution's taps: no vector load.
        let padded = region(
            r#"[{"let": "y0", "expr": {"select": {"pred": {"lt": ["n", 8]},
                 "then": {"read": {"tensor": "x", "map": ["m", "n"]}}, "else": 0.0}}}]"#,
            "[4, 8]",
            "16",
        );
        assert!(!loads_vectors(&padded, 8));
    }

    #[test]
    fn a_guarded_read_in_bounds_at_every_point_is_vectorized() {
        // x[m, n] with n over x's 16 columns: whichever lanes take the arm, the whole chunk is
        // in x (an attention mask's `where(mask, scores, -inf)`).
        let r = region(
            r#"[{"let": "y0", "expr": {"select": {"pred": {"lt": ["n", 8]},
                 "then": {"read": {"tensor": "x", "map": ["m", "n"]}}, "else": 0.0}}}]"#,
            "[4, 16]",
            "16",
        );
        assert_eq!(reads(&r, 8), ["x"]);
        assert!(loads_vectors(&r, 8));
    }

    #[test]
    fn guarded_reads_stay_scalar() {
        // A padded read: only the in-bounds lanes may touch x.
        let r = region(
            r#"[{"let": "y0", "expr": {"select": {"pred": {"lt": ["n", 8]},
                 "then": {"read": {"tensor": "x", "map": ["m", "n"]}}, "else": 0.0}}}]"#,
            "[4, 8]",
            "16",
        );
        assert!(reads(&r, 8).is_empty());
    }
}
