//! From Poly-View statements to the affine engine's objects (through the view's isl text, which
//! the engine's parser reads), and the memory-based dependences between two statements:
//! RAW `W ; R⁻¹`, WAR `R ; W⁻¹`, WAW `W ; W'⁻¹`, with the free iters each one carries.

use super::CoreError;
use crate::poly::affine::isl::{parse_map, parse_set};
use crate::poly::affine::{Aff, AffineError, Answer, Constraint, Map, Set};
use crate::poly::view::aff::Aff as ViewAff;
use crate::poly::view::isl;
use crate::poly::view::{Access, Stmt};

/// The kind of a dependence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DepKind {
    /// Read after write (true / flow).
    Raw,
    /// Write after read (anti).
    War,
    /// Write after write (output).
    Waw,
}

impl DepKind {
    /// `"RAW"`, `"WAR"`, `"WAW"`.
    pub fn name(self) -> &'static str {
        match self {
            DepKind::Raw => "RAW",
            DepKind::War => "WAR",
            DepKind::Waw => "WAW",
        }
    }
}

/// One dependence between two statements through one tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Dependence {
    /// RAW, WAR or WAW.
    pub kind: DepKind,
    /// The earlier statement.
    pub source: String,
    /// The later statement (the same one for a self-dependence).
    pub sink: String,
    /// The tensor through which it flows.
    pub tensor: String,
    /// `[params] -> { S_src[..] -> S_sink[..'] : .. }` (isl notation, the engine's printing).
    pub relation: String,
    /// The dimensions (free iters and reduce axes, by name) of both statements along which
    /// source and sink instances can differ (the dependence is carried by them); `Unknown`
    /// answers count as carried.
    pub carried_by: Vec<String>,
}

/// Every name an access (with its statement's box and guard) mentions that is no dimension.
fn access_params(s: &Stmt, a: &Access) -> Vec<String> {
    let mut affs: Vec<&ViewAff> = isl::box_affs(s);
    affs.extend(isl::access_affs(a));
    affs.extend(a.guard.iter().flatten().flatten().map(|c| &c.aff));
    isl::params_of(affs, &s.dims)
}

/// The access relation of `a` restricted to `s`'s domain (and the access's guard).
pub fn access_map(s: &Stmt, a: &Access) -> Result<Map, CoreError> {
    let text = isl::wrap(&access_params(s, a), &isl::access_pieces(s, a, true));
    parse_map(&text).map_err(|e| CoreError::Affine {
        what: format!("the access of `{}` by {}", a.tensor, s.name),
        source: e,
    })
}

/// The domain of `s`.
pub fn domain_set(s: &Stmt) -> Result<Set, CoreError> {
    parse_set(&s.domain_isl()).map_err(|e| CoreError::Affine {
        what: format!("the domain of {}", s.name),
        source: e,
    })
}

/// `first ; second⁻¹`: pairs of instances of the two statements touching the same element.
fn compose(first: &Map, second: &Map) -> Result<Map, AffineError> {
    first.apply_range(&second.reverse())
}

/// The dimensions (by name and role) of both statements along which the relation `dep` (over
/// `src.dims -> sink.dims`) relates instances with different values.
fn carried(dep: &Map, src: &Stmt, sink: &Stmt) -> Result<Vec<String>, AffineError> {
    let wrapped = dep.wrap();
    let names = &wrapped.space().tuple.dims;
    let mut out = Vec::new();
    for (i, d) in src.dims.iter().enumerate() {
        // Same name and same role (free iter or reduce axis): a reduce axis may share a free
        // iter's name in another statement without being the same loop.
        let free = i < src.out_dims;
        let same = |(j, e): &(usize, &String)| e == &d && (*j < sink.out_dims) == free;
        let Some((j, _)) = sink.dims.iter().enumerate().find(same) else {
            continue;
        };
        let (Some(a), Some(b)) = (names.get(i), names.get(src.dims.len() + j)) else {
            continue;
        };
        let (x, y) = (Aff::var(a), Aff::var(b));
        let mut differs = false;
        for c in [
            Constraint::ge(&x, &y.add_const(1)?)?,
            Constraint::ge(&y, &x.add_const(1)?)?,
        ] {
            let mut part = wrapped.clone();
            part.add_constraint(&c)?;
            if part.is_empty()? != Answer::Yes {
                differs = true;
            }
        }
        if differs {
            out.push(d.clone());
        }
    }
    Ok(out)
}

/// The dependences from `src` to `sink` (`src` runs first; they may be the same statement)
/// through tensors both touch (by name). Region-local buffers count only inside one region
/// (`same_region`); across regions the loops differ, so `carried_by` stays empty.
pub fn dependences(
    src: &Stmt,
    sink: &Stmt,
    same_region: bool,
) -> Result<Vec<Dependence>, CoreError> {
    let mut out = Vec::new();
    for a in &src.accesses {
        for b in &sink.accesses {
            if a.tensor != b.tensor || (!same_region && (a.local || b.local)) {
                continue;
            }
            let kind = match (a.write, b.write) {
                (true, false) => DepKind::Raw,
                (false, true) => DepKind::War,
                (true, true) => DepKind::Waw,
                (false, false) => continue,
            };
            let (ma, mb) = (access_map(src, a)?, access_map(sink, b)?);
            let wrap = |e: AffineError| CoreError::Affine {
                what: format!(
                    "the {} dependence {} -> {} on `{}`",
                    kind.name(),
                    src.name,
                    sink.name,
                    a.tensor
                ),
                source: e,
            };
            let dep = compose(&ma, &mb).map_err(wrap)?;
            if dep.wrap().is_empty().map_err(wrap)? == Answer::Yes {
                continue;
            }
            let carried_by = if same_region {
                carried(&dep, src, sink).map_err(wrap)?
            } else {
                Vec::new()
            };
            let d = Dependence {
                kind,
                source: src.name.clone(),
                sink: sink.name.clone(),
                tensor: a.tensor.clone(),
                relation: dep.to_string(),
                carried_by,
            };
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    Ok(out)
}
