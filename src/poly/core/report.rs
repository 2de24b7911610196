//! The Poly Core report: one entry per region, one per producer → consumer pair (see the
//! module doc of `poly::core`).

use super::compute_at::{compute_at, ComputeAt};
use super::hints;
use super::relation::{dependences, DepKind, Dependence};
use crate::diag::{codes, Diagnostic};
use crate::ir::region::program::RegionProgram;
use crate::ir::region::Region;
use crate::plan::Plan;
use crate::poly::view::{self, diag as view_diag, PolyView, Stmt};
use crate::target::Arch;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The analyses of one region.
#[derive(Clone, Debug)]
pub struct RegionReport {
    /// The region's name.
    pub region: String,
    /// Its statements.
    pub statements: Vec<String>,
    /// Axes without loop-carried dependences.
    pub parallel_axes: Vec<String>,
    /// Reduction axes.
    pub reduce_axes: Vec<String>,
    /// Axes whose tiles leave a tail.
    pub tail_axes: Vec<String>,
    /// Whether every access is affine.
    pub affine_closed: bool,
    /// Dependences between its statements.
    pub dependences: Vec<Dependence>,
    /// Where barriers are needed (JSON).
    pub barrier_hints: Value,
    /// Shared-memory bank-conflict hints (JSON).
    pub bank_conflict_hints: Vec<Value>,
    /// Analyses that failed (engine errors), with why.
    pub notes: Vec<String>,
}

/// The analyses of one producer → consumer pair through one buffer.
#[derive(Clone, Debug)]
pub struct PairReport {
    /// The producing region.
    pub producer: String,
    /// The consuming region.
    pub consumer: String,
    /// The buffer between them.
    pub tensor: String,
    /// How the consumer reads it (its access, printed), when known.
    pub read_as: Option<String>,
    /// Dependences through the buffer.
    pub dependences: Vec<Dependence>,
    /// The compute-at analysis of the pair.
    pub compute_at: ComputeAt,
    /// The smallest buffer the consumer needs (JSON).
    pub min_buffer: Value,
    /// Analyses that failed, with why.
    pub notes: Vec<String>,
}

/// The Poly Core report of a program.
#[derive(Clone, Debug)]
pub struct PolyCore {
    /// The target architecture.
    pub arch: Arch,
    /// One report per region.
    pub regions: Vec<RegionReport>,
    /// One report per producer → consumer pair.
    pub pairs: Vec<PairReport>,
    /// `W2101 ExcessivePiecewise` (from the view and from the engine).
    pub diagnostics: Vec<Diagnostic>,
}

/// The report of `p`, with the plans of its regions (by name; possibly none) for `arch`.
pub fn build(p: &RegionProgram, plans: &BTreeMap<String, Plan>, arch: Arch) -> PolyCore {
    let v = view::build(p);
    let mut diagnostics: Vec<Diagnostic> = v
        .diagnostics
        .iter()
        .filter(|d| d.code == codes::EXCESSIVE_PIECEWISE.0)
        .cloned()
        .collect();
    let regions: Vec<&Region> = p.regions().collect();
    let mut reports = Vec::new();
    for r in &regions {
        let rep = region_report(r, &v, plans.get(&r.name), arch);
        budget_warnings(&r.name, &rep.notes, &mut diagnostics);
        reports.push(rep);
    }
    let pairs = pair_reports(&regions, &v, plans);
    for pr in &pairs {
        budget_warnings(&pr.consumer, &pr.notes, &mut diagnostics);
        if pr.compute_at.over_budget {
            let d = view_diag::excessive_piecewise(&pr.consumer, &pr.tensor, &pr.compute_at.why);
            diagnostics.push(d);
        }
    }
    PolyCore {
        arch,
        regions: reports,
        pairs,
        diagnostics,
    }
}

const OVER_BUDGET_NOTE: &str = "(ExcessivePiecewise)";

fn budget_warnings(region: &str, notes: &[String], out: &mut Vec<Diagnostic>) {
    for n in notes.iter().filter(|n| n.contains(OVER_BUDGET_NOTE)) {
        out.push(view_diag::excessive_piecewise(region, region, n));
    }
}

fn stmts_of<'v>(v: &'v PolyView, region: &str) -> Vec<&'v Stmt> {
    v.blocks.iter().filter(|b| b.region == region).collect()
}

fn region_report(r: &Region, v: &PolyView, plan: Option<&Plan>, arch: Arch) -> RegionReport {
    let stmts = stmts_of(v, &r.name);
    let mut deps = Vec::new();
    let mut notes = Vec::new();
    for (i, a) in stmts.iter().enumerate() {
        for b in &stmts[i..] {
            match dependences(a, b, true) {
                Ok(d) => deps.extend(d),
                Err(e) => notes.push(e.to_string()),
            }
        }
    }
    // Carried free iters (a reduce axis may share an iter's name: it does not count).
    let free_of = |name: &str| {
        stmts
            .iter()
            .find(|s| s.name == name)
            .map_or(&[][..], |s| &s.dims[..s.out_dims])
    };
    let carried: Vec<&String> = deps
        .iter()
        .flat_map(|d| {
            d.carried_by
                .iter()
                .filter(|c| free_of(&d.source).contains(c))
        })
        .collect();
    let uncertain = !notes.is_empty();
    let parallel_axes: Vec<String> = r
        .iters
        .iter()
        .map(|i| i.name.clone())
        .filter(|n| !uncertain && !carried.contains(&n))
        .collect();
    let mut reduce_axes: Vec<String> = Vec::new();
    for s in &stmts {
        for d in &s.dims[s.out_dims..] {
            if !reduce_axes.contains(d) {
                reduce_axes.push(d.clone());
            }
        }
    }
    RegionReport {
        region: r.name.clone(),
        statements: stmts.iter().map(|s| s.name.clone()).collect(),
        parallel_axes,
        reduce_axes,
        tail_axes: hints::tail_axes(&stmts, plan),
        affine_closed: notes.is_empty() && stmts.iter().all(|s| s.non_scop.is_empty()),
        dependences: deps,
        barrier_hints: hints::barrier_hints(plan, arch),
        bank_conflict_hints: hints::bank_conflict_hints(r, plan),
        notes,
    }
}

/// `(producer region, consumer region, buffer, read_as)` → the (source, sink) statement pairs.
type PairKey = (String, String, String, Option<String>);

/// `(source statement, sink statement, the view's RAW relation)`.
type Link = (String, String, String);

fn pair_reports(
    regions: &[&Region],
    v: &PolyView,
    plans: &BTreeMap<String, Plan>,
) -> Vec<PairReport> {
    let mut groups: Vec<(PairKey, Vec<Link>)> = Vec::new();
    for e in &v.edges {
        let key = (
            e.producer.clone(),
            e.consumer.clone(),
            e.tensor.clone(),
            e.read_as.clone(),
        );
        let link = (e.source.clone(), e.sink.clone(), e.relation.clone());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, links)) => links.push(link),
            None => groups.push((key, vec![link])),
        }
    }
    groups
        .into_iter()
        .map(|(key, links)| pair_report(key, &links, regions, v, plans))
        .collect()
}

fn pair_report(
    (producer, consumer, tensor, read_as): PairKey,
    links: &[Link],
    regions: &[&Region],
    v: &PolyView,
    plans: &BTreeMap<String, Plan>,
) -> PairReport {
    let mut deps = Vec::new();
    let mut notes = Vec::new();
    for (src, sink, relation) in links {
        let (Some(a), Some(b)) = (v.block(src), v.block(sink)) else {
            continue;
        };
        if read_as.is_some() {
            deps.push(Dependence {
                kind: DepKind::Raw,
                source: src.clone(),
                sink: sink.clone(),
                tensor: tensor.clone(),
                relation: relation.clone(),
                carried_by: Vec::new(),
            });
            continue;
        }
        match dependences(a, b, false) {
            Ok(d) => deps.extend(d.into_iter().filter(|d| d.tensor == tensor)),
            Err(e) => notes.push(e.to_string()),
        }
    }
    let elem = regions
        .iter()
        .find(|r| r.name == producer)
        .and_then(|r| r.outputs.iter().find(|o| o.name == tensor))
        .map_or(4, |o| o.dtype.size_bytes());
    let writer = stmts_of(v, &producer)
        .into_iter()
        .rev()
        .find(|s| s.accesses.iter().any(|a| a.write && a.tensor == tensor));
    let mut sinks: Vec<&Stmt> = Vec::new();
    for (_, sink, _) in links {
        if let Some(s) = v.block(sink).filter(|s| !sinks.contains(s)) {
            sinks.push(s);
        }
    }
    let ca = match writer {
        Some(w) => pick(
            sinks
                .iter()
                .map(|c| compute_at(w, c, &tensor, elem))
                .collect(),
        ),
        None => None,
    }
    .unwrap_or_else(|| compute_at_missing(&producer, &tensor));
    let contraction = |region: &str| {
        stmts_of(v, region)
            .iter()
            .any(|s| s.pattern.is_some())
            .then(|| plans.get(region).map(|p| p.stages))
            .flatten()
    };
    let stages = contraction(&producer).max(contraction(&consumer));
    PairReport {
        min_buffer: hints::min_buffer(&ca, stages),
        producer,
        consumer,
        tensor,
        read_as,
        dependences: deps,
        compute_at: ca,
        notes,
    }
}

/// The first illegal result, else the one with the largest halo.
fn pick(mut cs: Vec<ComputeAt>) -> Option<ComputeAt> {
    if let Some(k) = cs.iter().position(|c| !c.ok) {
        return Some(cs.swap_remove(k));
    }
    cs.into_iter().max_by_key(|c| c.halo_bytes)
}

fn compute_at_missing(producer: &str, tensor: &str) -> ComputeAt {
    ComputeAt::illegal(format!("no statement of {producer} writes `{tensor}`"))
}

fn deps_json(ds: &[Dependence]) -> Value {
    Value::Array(
        ds.iter()
            .map(|d| {
                json!({"kind": d.kind.name(), "source": d.source, "sink": d.sink,
                       "tensor": d.tensor, "relation": d.relation, "carried_by": d.carried_by})
            })
            .collect(),
    )
}

impl RegionReport {
    fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("region".into(), json!(self.region));
        m.insert("statements".into(), json!(self.statements));
        m.insert(
            "analysis".into(),
            json!({
                "parallel_axes": self.parallel_axes,
                "reduce_axes": self.reduce_axes,
                "tail_axes": self.tail_axes,
                "affine_closed": self.affine_closed,
                "dependences": deps_json(&self.dependences),
                "barrier_hints": self.barrier_hints,
                "bank_conflict_hints": self.bank_conflict_hints,
            }),
        );
        if !self.notes.is_empty() {
            m.insert("notes".into(), json!(self.notes));
        }
        Value::Object(m)
    }
}

impl ComputeAt {
    /// `{"ok", "why", "halo": {"bytes", "per_axis"}, "preimage"?, "footprint"?}`.
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("ok".into(), json!(self.ok));
        m.insert("why".into(), json!(self.why));
        m.insert(
            "halo".into(),
            json!({"bytes": self.halo_bytes, "per_axis": self.halo_per_axis}),
        );
        if let Some(p) = &self.preimage {
            m.insert("preimage".into(), json!(p));
        }
        if let Some(f) = &self.footprint {
            m.insert("footprint".into(), json!(f));
        }
        Value::Object(m)
    }
}

impl PairReport {
    fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("producer".into(), json!(self.producer));
        m.insert("consumer".into(), json!(self.consumer));
        m.insert("tensor".into(), json!(self.tensor));
        if let Some(r) = &self.read_as {
            m.insert("read_as".into(), json!(r));
        }
        m.insert("dependences".into(), deps_json(&self.dependences));
        m.insert(
            "analysis".into(),
            json!({"compute_at": self.compute_at.to_json(), "min_buffer": self.min_buffer}),
        );
        if !self.notes.is_empty() {
            m.insert("notes".into(), json!(self.notes));
        }
        Value::Object(m)
    }
}

impl PolyCore {
    /// The report of region `name`.
    pub fn region(&self, name: &str) -> Option<&RegionReport> {
        self.regions.iter().find(|r| r.region == name)
    }

    /// `{"poly_core": {"arch", "regions", "pairs", "diagnostics"?}}`.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::Map::new();
        v.insert("arch".into(), json!(self.arch.name()));
        v.insert(
            "regions".into(),
            Value::Array(self.regions.iter().map(RegionReport::to_json).collect()),
        );
        v.insert(
            "pairs".into(),
            Value::Array(self.pairs.iter().map(PairReport::to_json).collect()),
        );
        if !self.diagnostics.is_empty() {
            v.insert("diagnostics".into(), json!(self.diagnostics));
        }
        json!({ "poly_core": Value::Object(v) })
    }
}
