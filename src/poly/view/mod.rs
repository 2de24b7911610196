//! Poly-View (seed 001 §5, seed 003 §1–3): the SCoP domains and access relations of every
//! region of an optimized program, in isl notation (`dlc-egg optimize --dump poly_view`).
//!
//! # Model
//!
//! Each region gives polyhedral *statements* (a "block" each in the dump):
//! - one per `reduce` let `L`, named `S_<region>_<L>`: its domain is the let's free iters (in
//!   iter order) followed by the reduce axes (a reduce axis that has the name of a free iter is
//!   renamed `<axis>_r`), so a direct convolution is the seed's 7-D `S_conv[n, k, h, w, c, rh,
//!   rw]`. It reads what its body reads (pointwise lets are inlined, a `reduce` let read inside
//!   is a read of that let's buffer) plus its accumulator (the seed's self-read `S_conv[…] ->
//!   Out[n, k, h, w]`) and writes the accumulator. The accumulator is the region output the let
//!   flows into when its free iters are all the iters and the output's yielded let reaches it
//!   through pointwise lets only and no other reduction (the seed's `Out[n, k, h, w] += …`);
//!   otherwise a region-local buffer named after the let (`"local": true`), indexed by its free
//!   iters.
//!   A reduce embedded in that body by compute-at (a conv folded at every point of a pool's
//!   window, seed 003) adds its axes after the statement's own: the seed's fused nest
//!   `S[n, k, h, w, ph, pw, c, kh, kw]`, the producer's accumulator a register (no access).
//! - one pointwise statement `S_<region>` over the iters, when some output is not written
//!   directly by a reduction: it reads what the yielded lets read (reductions through their
//!   buffers, so an epilogue updates its reduction's output in place) and writes those outputs.
//!
//! Bounds are the iter sizes and reduce extents (`crate::ir::region::verify::iter_sizes` /
//! `reduce_extents`) as affine expressions of the size symbols, which are the isl parameters;
//! concrete sizes print as numbers. (The seed writes every size as a parameter — `Cout`,
//! `H_out`, `S` — so "equal to the seed up to renaming" means: with the example's concrete sizes
//! substituted for the seed's parameters.) A size that is a product of symbols prints as an
//! opaque parameter `P_…` (noted in `notes`). A read under a `select` happens on the part of the
//! domain where the predicate holds (the other branch where it does not): its map carries the
//! guard's constraints and its `domain` that part of the box, a union (`;`-separated pieces)
//! when the predicate is a disjunction (or a negated conjunction, for the `else` branch). Reads
//! under a value `where` are may-reads (unguarded).
//!
//! A `mul` under `reduce(sum)` whose operands are reads (through casts, views, pointwise lets
//! and a pad `select(p, read, 0)`) is a contraction ([`pattern`]): `kind`
//! `"contraction_pattern"`, `attrs.pattern` `"matmul"` (every operand index a single variable)
//! or `"conv"` (an index `a*x + b*y + c`; `affine_offsets` lists, per operand, each such
//! dimension with its strides and offset).
//!
//! Non-affine accesses — a `gather` (data-dependent), an index with `min`/`max` of a loop
//! variable or a product of two variables — make the block `"non_scop": true` with the reason in
//! `"boundary"` (seed 001 §4.3.5: a non-SCoP point is a region boundary); the access prints as an
//! opaque read of the whole dimension (a fresh variable bounded by the dimension's size).
//!
//! `edges` ([`edges`]) pair every statement writing a region output with every later statement
//! reading it (through aliases: a reshape equates row-major linear indices), with the RAW
//! relation `S_p[…] -> S_c[…'] : write index = read index and both domains (and the read's
//! guard)`; consumer variables are primed.
//!
//! # Dump (`--dump poly_view`)
//!
//! ```json
//! {"poly_view": {
//!   "blocks": [{"name": "S_k0_acc", "region": "k0", "let": "acc",
//!               "kind": "contraction_pattern" | "reduction" | "pointwise",
//!               "domain": {"set": "[N] -> { S_k0_acc[b, h, m, n, k, k1, k2] : 0 <= b < N and … }",
//!                          "params": ["N"]},
//!               "accesses": [{"tensor": "X", "kind": "read",
//!                             "map": "[N] -> { S_k0_acc[…] -> X[b, k, m + k1 - 1, n + k2 - 1] : m + k1 >= 1 and … }",
//!                             "domain": "…guarded part…"},
//!                            {"tensor": "_t0", "kind": "read", "accumulator": true, "map": …},
//!                            {"tensor": "_t0", "kind": "write", "map": …}],
//!               "attrs": {"pattern": "conv", "lhs_idx", "rhs_idx", "out_idx", "reduce_idx",
//!                         "affine_offsets"},
//!               "non_scop": true, "boundary": "…", "notes": […]}],
//!   "edges": [{"producer", "consumer", "tensor", "read_as"?, "source", "sink", "relation"}],
//!   "union": {"domain", "reads", "writes"},
//!   "diagnostics": [ … ]}}
//! ```
//! `attrs` is seed 001 §5.2's for contractions and `{"reduce_op", "out_idx", "reduce_idx"}` for
//! other reductions (absent for pointwise blocks); `non_scop`, `boundary`, `notes` and
//! `diagnostics` appear only when they apply. isl syntax throughout (islpy reads it): `and`
//! between constraints, `;` between pieces, `2*h` coefficients, `floor((e)/c)`.
//!
//! Diagnostics ([`diag`]): `E1203 MissingDivGuard`, `E1304 AxisAlignmentMismatch`.
//! [`isl`] also reads this subset back and canonicalizes it for structural comparisons.

pub mod aff;
pub mod diag;
pub mod edges;
pub mod isl;
pub mod pattern;
pub mod stmt;

#[cfg(test)]
mod tests;

use crate::diag::Diagnostic;
use crate::ir::region::program::{RegionProgram, Step};
use crate::ir::region::Region;
pub use edges::Edge;
use serde_json::{json, Value};
pub use stmt::{Access, Stmt, StmtKind};

/// The Poly-View of a program.
#[derive(Clone, Debug)]
pub struct PolyView {
    /// Every statement, region by region.
    pub blocks: Vec<Stmt>,
    /// RAW edges between regions.
    pub edges: Vec<Edge>,
    /// `E1203` / `E1304`.
    pub diagnostics: Vec<Diagnostic>,
}

/// The view of one region (no edges).
pub fn build_region(r: &Region) -> PolyView {
    let blocks = stmt::region_stmts(r);
    let diagnostics = diag::region_diagnostics(r, &blocks);
    PolyView {
        blocks,
        edges: Vec::new(),
        diagnostics,
    }
}

/// The view of a program: every region's statements and the edges between them.
pub fn build(p: &RegionProgram) -> PolyView {
    let mut per_step = Vec::new();
    let mut diagnostics = Vec::new();
    for s in &p.steps {
        match s {
            Step::Region(r) => {
                let v = build_region(r);
                diagnostics.extend(v.diagnostics);
                per_step.push(v.blocks);
            }
            Step::Alias { .. } => per_step.push(Vec::new()),
        }
    }
    let edges = edges::edges(p, &per_step);
    PolyView {
        blocks: per_step.into_iter().flatten().collect(),
        edges,
        diagnostics,
    }
}

fn block_params(s: &Stmt) -> Vec<String> {
    let mut affs = isl::box_affs(s);
    for a in &s.accesses {
        affs.extend(isl::access_affs(a));
    }
    isl::params_of(affs, &s.dims)
}

impl Stmt {
    /// The domain in isl notation.
    pub fn domain_isl(&self) -> String {
        isl::wrap(&block_params(self), &[isl::domain_piece(self)])
    }

    /// Access `k`'s relation in isl notation (guard constraints, no box, as the seed prints).
    pub fn access_isl(&self, k: usize) -> String {
        isl::wrap(
            &block_params(self),
            &isl::access_pieces(self, &self.accesses[k], false),
        )
    }

    /// The union of the read (`write = false`) or write relations.
    pub fn accesses_isl(&self, write: bool) -> String {
        let pieces: Vec<String> = self
            .accesses
            .iter()
            .filter(|a| a.write == write)
            .flat_map(|a| isl::access_pieces(self, a, false))
            .collect();
        isl::wrap(&block_params(self), &pieces)
    }

    fn to_json(&self) -> Value {
        let params = block_params(self);
        let accesses: Vec<Value> = self
            .accesses
            .iter()
            .map(|a| {
                let mut m = serde_json::Map::new();
                m.insert("tensor".into(), json!(a.tensor));
                m.insert("kind".into(), json!(if a.write { "write" } else { "read" }));
                let map = isl::wrap(&params, &isl::access_pieces(self, a, false));
                m.insert("map".into(), json!(map));
                if a.guard.is_some() {
                    let d = isl::wrap(&params, &isl::access_domain_pieces(self, a));
                    m.insert("domain".into(), json!(d));
                }
                if a.local {
                    m.insert("local".into(), json!(true));
                }
                if a.accumulator {
                    m.insert("accumulator".into(), json!(true));
                }
                if a.index.iter().any(|x| x.is_none()) {
                    m.insert("opaque".into(), json!(true));
                }
                Value::Object(m)
            })
            .collect();
        let mut b = serde_json::Map::new();
        b.insert("name".into(), json!(self.name));
        b.insert("region".into(), json!(self.region));
        if let Some(l) = &self.let_name {
            b.insert("let".into(), json!(l));
        }
        let kind = match (&self.pattern, &self.kind) {
            (Some(_), _) => "contraction_pattern",
            (None, StmtKind::Reduction(_)) => "reduction",
            (None, StmtKind::Pointwise) => "pointwise",
        };
        b.insert("kind".into(), json!(kind));
        b.insert(
            "domain".into(),
            json!({"set": isl::wrap(&params, &[isl::domain_piece(self)]), "params": params}),
        );
        b.insert("accesses".into(), Value::Array(accesses));
        let (outs, reds) = self.dims.split_at(self.out_dims);
        match (&self.pattern, &self.kind) {
            (Some(p), _) => {
                b.insert("attrs".into(), p.attrs(&self.dims));
            }
            (None, StmtKind::Reduction(op)) => {
                b.insert(
                    "attrs".into(),
                    json!({"reduce_op": crate::ir::region::json::reduce_op_name(*op),
                           "out_idx": outs, "reduce_idx": reds}),
                );
            }
            (None, StmtKind::Pointwise) => {}
        }
        if !self.non_scop.is_empty() {
            b.insert("non_scop".into(), json!(true));
            b.insert(
                "boundary".into(),
                json!(format!(
                    "not a SCoP, so a region boundary (seed 001 §4.3.5): {}",
                    self.non_scop.join("; ")
                )),
            );
        }
        if !self.notes.is_empty() {
            b.insert("notes".into(), json!(self.notes));
        }
        Value::Object(b)
    }
}

impl PolyView {
    /// The statement named `name`.
    pub fn block(&self, name: &str) -> Option<&Stmt> {
        self.blocks.iter().find(|b| b.name == name)
    }

    fn all_params(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for b in &self.blocks {
            for p in block_params(b) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// The union of every statement's domain.
    pub fn domain_union(&self) -> String {
        let pieces: Vec<String> = self.blocks.iter().map(isl::domain_piece).collect();
        isl::wrap(&self.all_params(), &pieces)
    }

    /// The union of every read (`write = false`) or write relation.
    pub fn access_union(&self, write: bool) -> String {
        let pieces: Vec<String> = self
            .blocks
            .iter()
            .flat_map(|b| {
                b.accesses
                    .iter()
                    .filter(|a| a.write == write)
                    .flat_map(|a| isl::access_pieces(b, a, false))
                    .collect::<Vec<_>>()
            })
            .collect();
        isl::wrap(&self.all_params(), &pieces)
    }

    /// `{"poly_view": {"blocks", "edges", "union", "diagnostics"?}}` (see the module doc).
    pub fn to_json(&self) -> Value {
        let edges: Vec<Value> = self
            .edges
            .iter()
            .map(|e| {
                let mut m = serde_json::Map::new();
                m.insert("producer".into(), json!(e.producer));
                m.insert("consumer".into(), json!(e.consumer));
                m.insert("tensor".into(), json!(e.tensor));
                if let Some(r) = &e.read_as {
                    m.insert("read_as".into(), json!(r));
                }
                m.insert("source".into(), json!(e.source));
                m.insert("sink".into(), json!(e.sink));
                m.insert("relation".into(), json!(e.relation));
                if let Some(n) = &e.note {
                    m.insert("note".into(), json!(n));
                }
                Value::Object(m)
            })
            .collect();
        let mut v = serde_json::Map::new();
        v.insert(
            "blocks".into(),
            Value::Array(self.blocks.iter().map(Stmt::to_json).collect()),
        );
        v.insert("edges".into(), Value::Array(edges));
        v.insert(
            "union".into(),
            json!({
                "domain": self.domain_union(),
                "reads": self.access_union(false),
                "writes": self.access_union(true),
            }),
        );
        if !self.diagnostics.is_empty() {
            v.insert("diagnostics".into(), json!(self.diagnostics));
        }
        json!({ "poly_view": Value::Object(v) })
    }
}
