//! Producer → consumer edges between the regions of a program, with their RAW (flow) relation:
//! every statement that writes a region output, paired with every later statement that reads it
//! (directly, or through buffer aliases), related by equating the written index with the read
//! index, both domains and the read's guard included. Memory-based (every writer, not only the
//! last one): TODO(issue 6): value-based last-writer dependences need the affine engine.

use super::aff::{Aff, Cons};
use super::isl;
use super::stmt::{Access, Stmt};
use crate::ir::dim::Dim;
use crate::ir::region::program::{RegionProgram, Step};
use std::collections::BTreeMap;

/// One RAW edge.
#[derive(Clone, Debug, PartialEq)]
pub struct Edge {
    /// Producer region.
    pub producer: String,
    /// Consumer region.
    pub consumer: String,
    /// The buffer written by the producer.
    pub tensor: String,
    /// The name the consumer reads it by, when an alias.
    pub read_as: Option<String>,
    /// Writing statement.
    pub source: String,
    /// Reading statement.
    pub sink: String,
    /// `[params] -> { S_p[...] -> S_c[...'] : write index = read index and domains and guard }`.
    pub relation: String,
    /// Why the relation is over-approximated, if it is.
    pub note: Option<String>,
}

/// How a buffer name resolves: the root buffer and, for an alias, its shape.
struct Resolved {
    root: String,
    alias_shape: Option<Vec<Dim>>,
}

/// The edges of `p`, whose regions have statements `stmts` (one list per step, empty for
/// aliases).
pub fn edges(p: &RegionProgram, stmts: &[Vec<Stmt>]) -> Vec<Edge> {
    let mut aliases: BTreeMap<&str, (&str, &Vec<Dim>)> = BTreeMap::new();
    // Buffer → (step, output shape) of the region defining it.
    let mut producer: BTreeMap<&str, (usize, Vec<Dim>)> = BTreeMap::new();
    let mut out = Vec::new();
    for (step, s) in p.steps.iter().enumerate() {
        match s {
            Step::Alias {
                name, of, shape, ..
            } => {
                aliases.insert(name, (of, shape));
            }
            Step::Region(r) => {
                for (sink, consumer) in stmts[step].iter().map(|c| (c, r)) {
                    for a in sink.accesses.iter().filter(|a| !a.write && !a.local) {
                        let res = resolve(&a.tensor, &aliases);
                        let Some((pstep, root_shape)) = producer.get(res.root.as_str()) else {
                            continue;
                        };
                        let Step::Region(pr) = &p.steps[*pstep] else {
                            continue;
                        };
                        for src in &stmts[*pstep] {
                            for w in src
                                .accesses
                                .iter()
                                .filter(|w| w.write && w.tensor == res.root)
                            {
                                let (relation, note) =
                                    relation(src, w, sink, a, root_shape, &res.alias_shape);
                                let e = Edge {
                                    producer: pr.name.clone(),
                                    consumer: consumer.name.clone(),
                                    tensor: res.root.clone(),
                                    read_as: (a.tensor != res.root).then(|| a.tensor.clone()),
                                    source: src.name.clone(),
                                    sink: sink.name.clone(),
                                    relation,
                                    note,
                                };
                                if !out.contains(&e) {
                                    out.push(e);
                                }
                            }
                        }
                    }
                }
                for o in &r.outputs {
                    let shape = o.memref.shape.iter().map(|s| s.0.clone()).collect();
                    producer.insert(&o.name, (step, shape));
                }
            }
        }
    }
    out
}

fn resolve(name: &str, aliases: &BTreeMap<&str, (&str, &Vec<Dim>)>) -> Resolved {
    let mut root = name;
    let mut alias_shape = None;
    while let Some((of, shape)) = aliases.get(root) {
        if alias_shape.is_none() {
            alias_shape = Some((*shape).clone());
        }
        root = of;
    }
    Resolved {
        root: root.to_string(),
        alias_shape,
    }
}

/// Row-major strides of `shape` when they are constants (the first size is not needed).
fn const_strides(shape: &[Dim]) -> Option<Vec<i64>> {
    let mut st = vec![1i64; shape.len()];
    for j in (0..shape.len().saturating_sub(1)).rev() {
        st[j] = st[j + 1].checked_mul(shape[j + 1].as_int()?)?;
    }
    Some(st)
}

fn prime(d: &str) -> String {
    format!("{d}'")
}

fn relation(
    src: &Stmt,
    w: &Access,
    sink: &Stmt,
    r: &Access,
    root_shape: &[Dim],
    alias_shape: &Option<Vec<Dim>>,
) -> (String, Option<String>) {
    let rn = |v: &str| sink.dims.contains(&v.to_string()).then(|| prime(v));
    let read: Vec<Option<Aff>> = r
        .index
        .iter()
        .map(|x| x.as_ref().map(|a| a.rename(&rn)))
        .collect();
    let mut eqs: Vec<Cons> = Vec::new();
    let mut note = None;
    match alias_shape {
        None => {
            for (wx, rx) in w.index.iter().zip(&read) {
                if let (Some(wx), Some(rx)) = (wx, rx) {
                    eqs.push(Cons::eq(wx, rx));
                }
            }
            if w.index.iter().chain(&r.index).any(|x| x.is_none()) {
                note = Some("a non-affine index: its dimension is left unconstrained".into());
            }
        }
        Some(ashape) => {
            // A reshape keeps the row-major linear index: equate the linear indices.
            let lin = |ix: &[Option<Aff>], shape: &[Dim]| -> Option<Aff> {
                let st = const_strides(shape)?;
                let mut acc = Aff::int(0);
                for (x, s) in ix.iter().zip(st) {
                    acc = acc.add(&x.as_ref()?.scale(s));
                }
                Some(acc)
            };
            match (lin(&w.index, root_shape), lin(&read, ashape)) {
                (Some(a), Some(b)) => eqs.push(Cons::eq(&a, &b)),
                _ => {
                    note = Some(
                        "an alias with symbolic strides or a non-affine index: the index \
                         relation is left out (TODO(issue 6))"
                            .into(),
                    )
                }
            }
        }
    }
    let mut order: Vec<String> = src.dims.clone();
    order.extend(sink.dims.iter().map(|d| prime(d)));
    let id = |d: &str| d.to_string();
    let pr = |d: &str| prime(d);
    let mut base: Vec<String> = eqs.iter().map(|c| c.isl(&order)).collect();
    base.extend(isl::box_constraints(src, &id, &order));
    base.extend(isl::box_constraints(sink, &pr, &order));
    let head = format!("{} -> {}", isl::tuple(src, &id), isl::tuple(sink, &pr));
    let guards = r.guard.clone().unwrap_or_else(|| vec![Vec::new()]);
    let pieces: Vec<String> = guards
        .iter()
        .map(|g| {
            let mut cs = base.clone();
            cs.extend(g.iter().map(|c| {
                Cons {
                    aff: c.aff.rename(&rn),
                    eq: c.eq,
                }
                .isl(&order)
            }));
            format!("{head} : {}", cs.join(" and "))
        })
        .collect();
    let mut affs: Vec<&Aff> = isl::box_affs(src);
    affs.extend(isl::box_affs(sink));
    affs.extend(eqs.iter().map(|c| &c.aff));
    let mut bound = order.clone();
    bound.extend(src.dims.iter().cloned());
    let mut params = isl::params_of(affs, &bound);
    for p in isl::params_of(
        r.guard.iter().flatten().flatten().map(|c| &c.aff),
        &sink.dims,
    ) {
        if !params.contains(&p) {
            params.push(p);
        }
    }
    (isl::wrap(&params, &pieces), note)
}
