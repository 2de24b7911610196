//! Compute-at legality of a producer statement inside a consumer statement's loop nest, with
//! the halo and the pre-image (seed 001 §7.1, seed 003 §3): the reusable analysis behind the
//! Poly Core report's `compute_at`, meant for fusion legality checks too.
//!
//! One *consumer point* fixes the consumer's free iters (they become parameters `<iter>_c`);
//! its reduce axes stay free. The *footprint* is the set of elements of the producer's buffer
//! that point reads (every affine read of the buffer by the consumer, guards included), and
//! the *pre-image* the producer statement's instances that write them.
//!
//! Legal (`ok`) when:
//! 1. every read of the buffer by the consumer is affine (no opaque `non_scop` dimension:
//!    a gather is data-dependent);
//! 2. the footprint is a bounded box: each dimension has finite bounds ([`Set::dim_bounds`])
//!    and a constant extent (a read of a whole symbolic dimension is no tile-local box);
//! 3. no negative dependence distance: along each dimension, the first element read sits at or
//!    after `stride · iter` (a consumer point never needs producer elements "behind" its own
//!    position, which an earlier tile would have produced — a padded window reading at
//!    `iter - 1` is one).
//!
//! Where a bound is a `max`/`min` (a guard clamping a padded read to the tensor), the
//! candidate that depends on the consumer's iters is the interior one and is used; the clamp
//! only shrinks boundary tiles.
//!
//! Halo per consumer axis `x` = the footprint's extent along the dimension `x` indexes minus
//! the consumer's stride along it (`DimBounds::halo`: `upper(x) - lower(x + 1) + 1`): a 2x2
//! stride-2 window gives 0, 3x3 stride 2 gives 1. An axis no read depends on reuses the same
//! elements at every step: halo 0. `halo_bytes` = (footprint elements − elements without the
//! halo) × element size, per consumer point.

use super::relation::access_map;
use crate::poly::affine::isl::parse_map;
use crate::poly::affine::{Aff, AffineError, Bound, Map, Set};
use crate::poly::view::aff::Aff as ViewAff;
use crate::poly::view::isl;
use crate::poly::view::{Access, Stmt};
use std::collections::BTreeMap;

/// The compute-at analysis of one producer → consumer pair.
#[derive(Clone, Debug, PartialEq)]
pub struct ComputeAt {
    /// Legal to compute the producer at the consumer's point (tile).
    pub ok: bool,
    /// Why (legal: what was checked; illegal: the first failed condition).
    pub why: String,
    /// Halo per consumer free iter (see the module doc).
    pub halo_per_axis: BTreeMap<String, i64>,
    /// Halo elements × element size, per consumer point.
    pub halo_bytes: u64,
    /// The producer's instances one consumer point needs, isl notation, the consumer's iters as
    /// parameters `<iter>_c`.
    pub preimage: Option<String>,
    /// The producer buffer's elements one consumer point reads.
    pub footprint: Option<String>,
    /// Each consumer point reads exactly one element (extent 1 along every dimension).
    pub one_to_one: bool,
    /// The engine answered `PiecewiseOverBudget` (reported as `W2101`).
    pub over_budget: bool,
}

impl ComputeAt {
    /// An illegal result with its reason.
    pub(crate) fn illegal(why: String) -> ComputeAt {
        ComputeAt {
            ok: false,
            why,
            halo_per_axis: BTreeMap::new(),
            halo_bytes: 0,
            preimage: None,
            footprint: None,
            one_to_one: false,
            over_budget: false,
        }
    }
}

/// The rename of a consumer free iter into a parameter: `<iter>_c` (more `_` on a clash).
fn param_names(consumer: &Stmt, producer: &Stmt) -> BTreeMap<String, String> {
    let mut taken: Vec<String> = consumer.dims.clone();
    taken.extend(producer.dims.iter().cloned());
    let mut out = BTreeMap::new();
    for d in &consumer.dims[..consumer.out_dims] {
        let mut n = format!("{d}_c");
        while taken.contains(&n) {
            n.push('_');
        }
        taken.push(n.clone());
        out.insert(d.clone(), n);
    }
    out
}

/// The pieces `S[reduce dims] -> T[index] : reduce box and iter box and guard` of one read,
/// free iters renamed by `rn`.
fn point_pieces(c: &Stmt, a: &Access, rn: &BTreeMap<String, String>) -> Vec<String> {
    let r = |x: &ViewAff| x.rename(&|v| rn.get(v).cloned());
    let order: Vec<String> = c.dims[c.out_dims..].to_vec();
    let mut base = Vec::new();
    for (k, (d, (lo, hi))) in c.dims.iter().zip(&c.bounds).enumerate() {
        let v = if k < c.out_dims {
            rn.get(d).cloned().unwrap_or_else(|| d.clone())
        } else {
            d.clone()
        };
        base.push(format!(
            "{} <= {v} < {}",
            r(lo).isl(&order),
            r(hi).isl(&order)
        ));
    }
    let idx: Vec<String> = a
        .index
        .iter()
        .map(|x| x.as_ref().map(|x| r(x).isl(&order)).unwrap_or_default())
        .collect();
    let head = format!(
        "{}[{}] -> {}[{}]",
        c.name,
        order.join(", "),
        a.tensor,
        idx.join(", ")
    );
    let guards = a.guard.clone().unwrap_or_else(|| vec![Vec::new()]);
    guards
        .iter()
        .map(|g| {
            let mut cs = base.clone();
            cs.extend(g.iter().map(|k| {
                crate::poly::view::aff::Cons {
                    aff: r(&k.aff),
                    eq: k.eq,
                }
                .isl(&order)
            }));
            format!("{head} : {}", cs.join(" and "))
        })
        .collect()
}

/// The footprint of one consumer point over `reads` (affine reads of one buffer).
fn footprint(c: &Stmt, reads: &[&Access], rn: &BTreeMap<String, String>) -> Result<Set, String> {
    let order: Vec<String> = c.dims[c.out_dims..].to_vec();
    let mut pieces = Vec::new();
    let mut affs: Vec<ViewAff> = Vec::new();
    let r = |x: &ViewAff| x.rename(&|v| rn.get(v).cloned());
    for a in reads {
        pieces.extend(point_pieces(c, a, rn));
        affs.extend(a.index.iter().flatten().map(r));
        affs.extend(a.guard.iter().flatten().flatten().map(|k| r(&k.aff)));
    }
    affs.extend(c.bounds.iter().flat_map(|(l, h)| [r(l), r(h)]));
    affs.extend(rn.values().map(ViewAff::var));
    let params = isl::params_of(affs.iter(), &order);
    let text = isl::wrap(&params, &pieces);
    let map = parse_map(&text).map_err(|e| err("the consumer's read", &e))?;
    map.range().map_err(|e| err("the footprint", &e))
}

fn err(what: &str, e: &AffineError) -> String {
    format!("{what}: {e}")
}

/// Of a bound, the affine candidate that depends on a consumer iter (else the only one).
fn interior(b: &Bound, iters: &[&String]) -> Option<Aff> {
    match b {
        Bound::Infinite => None,
        Bound::Aff(a) => Some(a.clone()),
        Bound::Max(v) | Bound::Min(v) => {
            let affs: Vec<&Aff> = v.iter().filter_map(Bound::as_aff).collect();
            affs.iter()
                .find(|a| iters.iter().any(|x| a.coeff(x) != 0))
                .or_else(|| affs.first())
                .map(|a| (*a).clone())
        }
    }
}

/// One footprint dimension: bounds' interior candidates, extent, and (iter, stride) pairs.
struct DimFoot {
    lower: Aff,
    upper: Aff,
    extent: i64,
}

fn dim_foot(fp: &Set, j: usize, iters: &[&String]) -> Result<DimFoot, String> {
    let b = fp
        .dim_bounds(j)
        .map_err(|e| err(&format!("bounds of footprint dimension {j}"), &e))?
        .ok_or_else(|| "the footprint is empty".to_string())?;
    let (Some(lower), Some(upper)) = (interior(&b.lower, iters), interior(&b.upper, iters)) else {
        return Err(format!("footprint dimension {j} is unbounded"));
    };
    let ext = upper
        .sub(&lower)
        .and_then(|d| d.add_const(1))
        .map_err(|e| err("extent", &e))?;
    let Some(extent) = ext.as_const() else {
        return Err(format!(
            "footprint dimension {j} has extent `{ext}`, not a constant (no tile-local box)"
        ));
    };
    Ok(DimFoot {
        lower,
        upper,
        extent,
    })
}

/// `upper(x) - lower(x + 1) + 1` for the iter parameter `x`.
fn halo_along(f: &DimFoot, x: &str) -> Result<i64, String> {
    let next = f
        .lower
        .substitute(&|n| (n == x).then(|| Aff::var(x).add_const(1).ok())?)
        .map_err(|e| err("halo", &e))?;
    let h = f
        .upper
        .sub(&next)
        .and_then(|d| d.add_const(1))
        .map_err(|e| err("halo", &e))?;
    h.as_const()
        .ok_or_else(|| format!("the halo along `{x}` is `{h}`, not a constant"))
}

/// The offset `lower - Σ stride·iter` of a dimension's first element (negative: the consumer
/// reads behind its own position).
fn offset(f: &DimFoot, iters: &[&String]) -> Option<i64> {
    let mut rest = f.lower.clone();
    for x in iters {
        let k = f.lower.coeff(x);
        rest = rest.sub(&Aff::var(x).scale(k).ok()?).ok()?;
    }
    rest.as_const()
}

/// Compute-at of `producer` (a statement writing buffer `tensor`) at the points of `consumer`
/// (a statement reading `tensor` by that name), `elem_bytes` the buffer's element size. See the
/// module doc for the conditions, the halo and the pre-image.
pub fn compute_at(producer: &Stmt, consumer: &Stmt, tensor: &str, elem_bytes: u64) -> ComputeAt {
    let reads: Vec<&Access> = consumer
        .accesses
        .iter()
        .filter(|a| !a.write && !a.accumulator && a.tensor == tensor)
        .collect();
    if reads.is_empty() {
        return ComputeAt::illegal(format!(
            "{} does not read `{tensor}` by that name (a reshape alias: the index relation is \
             a linearization, not a box)",
            consumer.name
        ));
    }
    if reads.iter().any(|a| a.index.iter().any(Option::is_none)) {
        return ComputeAt::illegal(format!(
            "the read of `{tensor}` by {} is not affine (non_scop: {})",
            consumer.name,
            consumer.non_scop.join("; ")
        ));
    }
    let Some(write) = producer
        .accesses
        .iter()
        .find(|a| a.write && a.tensor == tensor)
    else {
        return ComputeAt::illegal(format!("{} does not write `{tensor}`", producer.name));
    };
    let rn = param_names(consumer, producer);
    match analyze(producer, write, consumer, &reads, &rn, elem_bytes) {
        Ok(c) => c,
        Err(why) => {
            let mut c = ComputeAt::illegal(why);
            c.over_budget = c.why.contains("ExcessivePiecewise");
            c
        }
    }
}

fn analyze(
    producer: &Stmt,
    write: &Access,
    consumer: &Stmt,
    reads: &[&Access],
    rn: &BTreeMap<String, String>,
    elem_bytes: u64,
) -> Result<ComputeAt, String> {
    let fp = footprint(consumer, reads, rn)?;
    let iters: Vec<&String> = rn.values().collect();
    let n = fp.space().tuple.len();
    let feet: Vec<DimFoot> = (0..n)
        .map(|j| dim_foot(&fp, j, &iters))
        .collect::<Result<_, _>>()?;
    let mut halo_per_axis = BTreeMap::new();
    let mut dim_halo = vec![0i64; n];
    for (orig, x) in rn {
        let mut h = 0;
        for (j, f) in feet.iter().enumerate() {
            if f.lower.coeff(x) == 0 {
                continue;
            }
            if let Some(o) = offset(f, &iters).filter(|o| *o < 0) {
                return Err(format!(
                    "negative dependence distance along `{orig}`: a consumer point reads \
                     `{}` dimension {j} from {o} before its own position",
                    write.tensor
                ));
            }
            let hj = halo_along(f, x)?;
            dim_halo[j] = dim_halo[j].max(hj);
            h = h.max(hj);
        }
        halo_per_axis.insert(orig.clone(), h);
    }
    let total: i64 = feet.iter().map(|f| f.extent).product();
    let core: i64 = feet
        .iter()
        .zip(&dim_halo)
        .map(|(f, h)| (f.extent - h.max(&0)).max(0))
        .product();
    let halo_elems = u64::try_from(total - core).unwrap_or(0);
    let wmap: Map = access_map(producer, write).map_err(|e| e.to_string())?;
    let pre = fp.preimage(&wmap).map_err(|e| err("the pre-image", &e))?;
    let one_to_one = feet.iter().all(|f| f.extent == 1);
    Ok(ComputeAt {
        ok: true,
        why: format!(
            "{}'s read of `{}` is affine, one point of {} needs a bounded box of {total} \
             element(s) with no negative dependence distance",
            consumer.name, write.tensor, consumer.name
        ),
        halo_per_axis,
        halo_bytes: halo_elems * elem_bytes,
        preimage: Some(pre.to_string()),
        footprint: Some(fp.to_string()),
        one_to_one,
        over_budget: false,
    })
}
