//! The intermediate representations of a graph as documents: the layers `dlc-egg lower --dump`
//! and `dlc-egg optimize --dump` print ([`DumpLayer`]), gathered into one JSON value by
//! [`dump_document`] (or plain text by [`plain_text`] for a lone DOT layer).
//!
//! The same documents are available to library users: load and lower a graph, optionally
//! optimize it and generate code, then ask for the layers you want.

// A `Diagnostic` is the project's user-facing error (crate::diag); it is large by design and
// returned only on cold failure paths, so boxing it would only add noise.
#![allow(clippy::result_large_err)]

mod frontend_json;

pub use frontend_json::graph_to_json;

use crate::diag::codes;
use crate::diag::{Diagnostic, Location};
use crate::ir::frontend::Graph;
use crate::ir::tiny::{self, Program};

/// A layer `lower --dump` / `optimize --dump` can print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DumpLayer {
    /// The normalized frontend graph.
    Frontend,
    /// Tiny IR.
    Tiny,
    /// The IndexBook of the Tiny program (seed 001 §4.5).
    Indexbook,
    /// The e-graph, egraph-serialize JSON (`lower`: before any rewrite; `optimize`: final).
    Egraph,
    /// The extracted region program (`optimize` only).
    Region,
    /// The Poly-View of the extracted regions: SCoP domains, access relations and RAW edges in
    /// isl notation (`optimize` only; `crate::poly::view`).
    PolyView,
    /// The Poly Core report of the extracted regions: dependences, parallel / reduce / tail
    /// axes, compute-at legality with halo, minimal buffers, barrier and bank-conflict hints
    /// (`optimize` only; `crate::poly::core`).
    PolyCore,
    /// Each kernel's Schedule Plan (`optimize` only).
    Plan,
    /// The GPU dialect IR of every kernel (`optimize` only).
    Gpu,
    /// The emitted CUDA C (`optimize` only; printed as text when it is the only layer).
    Cu,
    /// Graphviz DOT (`lower`: the frontend graph and the Tiny IR DAG; `optimize`: the kernel
    /// cover); printed as plain DOT text when it is the only layer.
    Dot,
    /// Graphviz DOT of the e-graph (`lower`: before any rewrite; `optimize`: final), e-classes as
    /// clusters, cut to `crate::viz::EGRAPH_CLASS_LIMIT` classes with a note.
    EgraphDot,
}

impl DumpLayer {
    /// Every layer (`optimize`).
    pub const ALL: &'static [DumpLayer] = &[
        DumpLayer::Frontend,
        DumpLayer::Tiny,
        DumpLayer::Indexbook,
        DumpLayer::Egraph,
        DumpLayer::Region,
        DumpLayer::PolyView,
        DumpLayer::PolyCore,
        DumpLayer::Plan,
        DumpLayer::Gpu,
        DumpLayer::Cu,
        DumpLayer::Dot,
        DumpLayer::EgraphDot,
    ];
    /// The layers `lower` can print.
    pub const LOWER: &'static [DumpLayer] = &[
        DumpLayer::Frontend,
        DumpLayer::Tiny,
        DumpLayer::Indexbook,
        DumpLayer::Egraph,
        DumpLayer::Dot,
        DumpLayer::EgraphDot,
    ];

    /// The layer's name on the command line (`--dump NAME`) and its key in a dump document
    /// of several layers.
    pub fn name(self) -> &'static str {
        match self {
            DumpLayer::Frontend => "frontend",
            DumpLayer::Tiny => "tiny",
            DumpLayer::Indexbook => "indexbook",
            DumpLayer::Egraph => "egraph",
            DumpLayer::Region => "region",
            DumpLayer::PolyView => "poly_view",
            DumpLayer::PolyCore => "poly_core",
            DumpLayer::Plan => "plan",
            DumpLayer::Gpu => "gpu",
            DumpLayer::Cu => "cu",
            DumpLayer::Dot => "dot",
            DumpLayer::EgraphDot => "egraph-dot",
        }
    }
}

/// Parses `--dump` (comma-separated layer names, each one of `allowed`) into layers in pipeline
/// order.
pub fn parse_dump(raw: &str, allowed: &[DumpLayer]) -> Result<Vec<DumpLayer>, Diagnostic> {
    let mut layers = Vec::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let layer = allowed.iter().copied().find(|l| l.name() == part);
        let Some(layer) = layer else {
            let names: Vec<&str> = allowed.iter().map(|l| l.name()).collect();
            return Err(Diagnostic::error(
                codes::INVALID_ARGUMENT,
                Location::Argument {
                    argument: format!("--dump {raw}"),
                },
                format!("`{part}` is not a layer this command can dump"),
                format!(
                    "available layers: {} (e.g. --dump {})",
                    names.join(", "),
                    names.join(",")
                ),
            ));
        };
        if !layers.contains(&layer) {
            layers.push(layer);
        }
    }
    if layers.is_empty() {
        layers.push(DumpLayer::Tiny);
    }
    layers.sort();
    Ok(layers)
}

/// The JSON `lower --dump` / `optimize --dump` prints (`optimized`: the optimizer's result, for
/// `region` and the final `egraph`).
pub fn dump_document(
    layers: &[DumpLayer],
    graph: &Graph,
    prog: Option<&Program>,
    optimized: Option<&crate::optimize::Optimized>,
    code: Option<&crate::codegen::Generated>,
) -> serde_json::Value {
    use serde_json::Value;
    let one = |l: DumpLayer| match (l, prog) {
        (DumpLayer::Frontend, _) => graph_to_json(graph),
        (DumpLayer::Tiny, Some(p)) => tiny::to_json(p),
        (DumpLayer::Indexbook, Some(p)) => crate::ir::indexbook::index_book(p)
            .map(|b| b.to_json())
            .unwrap_or_else(|e| serde_json::json!({"error": e.to_string()})),
        (DumpLayer::Egraph, Some(p)) => match optimized {
            Some(o) => optimized_egraph_json(o),
            None => egraph_json(p),
        },
        (DumpLayer::Region, _) => optimized
            .map(|o| serde_json::to_value(&o.program).unwrap_or(Value::Null))
            .unwrap_or(Value::Null),
        (DumpLayer::PolyView, _) => optimized
            .map(|o| crate::poly::view::build(&o.program).to_json())
            .unwrap_or(Value::Null),
        (DumpLayer::PolyCore, _) => optimized
            .map(|o| o.poly_core().to_json())
            .unwrap_or(Value::Null),
        (DumpLayer::Plan, _) => optimized.map(plan_json).unwrap_or(Value::Null),
        (DumpLayer::Gpu, _) => code.map(|c| c.gpu_ir_json()).unwrap_or(Value::Null),
        (DumpLayer::Cu, _) => code
            .map(|c| Value::String(c.emitted.source.clone()))
            .unwrap_or(Value::Null),
        (DumpLayer::Dot, _) => Value::String(match optimized {
            Some(o) => crate::viz::cover_dot(o),
            None => crate::viz::lower_dot(graph, prog),
        }),
        (DumpLayer::EgraphDot, Some(p)) => Value::String(match optimized {
            Some(o) => crate::viz::egraph_dot(&o.egraph, &o.roots, crate::viz::EGRAPH_CLASS_LIMIT),
            None => {
                let (eg, roots) = initial_egraph(p);
                crate::viz::egraph_dot(&eg, &roots, crate::viz::EGRAPH_CLASS_LIMIT)
            }
        }),
        (_, None) => Value::Null,
    };
    match layers {
        [l] => one(*l),
        _ => {
            let map: serde_json::Map<String, Value> = layers
                .iter()
                .map(|l| (l.name().to_string(), one(*l)))
                .collect();
            Value::Object(map)
        }
    }
}

/// The e-graph of a Tiny program in egraph-serialize form, roots = the signature outputs. Costs:
/// 1 per operation e-node, 0 per attribute leaf (TODO(issue 4): the cost model's kernel costs).
fn egraph_json(p: &Program) -> serde_json::Value {
    let (eg, roots) = initial_egraph(p);
    let s = crate::extract::serialize::to_serialized(&eg, &roots, &|n| {
        if n.is_attr() {
            0.0
        } else {
            1.0
        }
    });
    serde_json::to_value(&s).unwrap_or(serde_json::Value::Null)
}

/// The e-graph of a Tiny program before any rewrite, with the classes of its outputs.
fn initial_egraph(p: &Program) -> (crate::ir::egraph::TensorGraph, Vec<egg::Id>) {
    use crate::ir::egraph::{add_program, TensorGraph};
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, p);
    eg.rebuild();
    let roots: Vec<egg::Id> = p.outputs.iter().map(|o| class[o.node.index()]).collect();
    (eg, roots)
}

/// The text to print instead of JSON: a lone `dot` / `egraph-dot` layer is plain DOT.
pub fn plain_text(layers: &[DumpLayer], doc: &serde_json::Value) -> Option<String> {
    match (layers, doc) {
        ([DumpLayer::Dot | DumpLayer::EgraphDot], serde_json::Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// `--dump plan`: `{"arch", "target", "kernels": [{"kernel", "predicted_us", "plan"}]}`, the plan
/// in seed 001 §8.1 form.
fn plan_json(o: &crate::optimize::Optimized) -> serde_json::Value {
    let kernels: Vec<serde_json::Value> = o
        .kernels
        .iter()
        .map(|k| match &k.plan {
            Ok(p) => serde_json::json!({
                "kernel": k.name,
                "predicted_us": p.predicted_us,
                "plan": p.plan,
            }),
            Err(why) => serde_json::json!({"kernel": k.name, "error": why}),
        })
        .collect();
    serde_json::json!({
        "arch": o.model.target.arch,
        "target": o.model.target.name,
        "kernels": kernels,
    })
}

/// The optimizer's final e-graph in egraph-serialize form, priced as the optimizer's extraction
/// prices it (`extract::cover::node_price`: kernels their predicted time in ns, inputs, reshapes
/// and attributes nothing, every other e-node not realizable: +∞, written as `f64::MAX`).
fn optimized_egraph_json(o: &crate::optimize::Optimized) -> serde_json::Value {
    use crate::extract::cover::node_price;
    let eg = &o.egraph;
    let s =
        crate::extract::serialize::to_serialized(eg, &o.roots, &|n| node_price(eg, n, &o.model));
    serde_json::to_value(&s).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_layers() {
        assert_eq!(
            parse_dump("tiny,frontend", DumpLayer::LOWER).expect("ok"),
            vec![DumpLayer::Frontend, DumpLayer::Tiny]
        );
        assert_eq!(
            parse_dump("", DumpLayer::LOWER).expect("ok"),
            vec![DumpLayer::Tiny]
        );
        assert_eq!(
            parse_dump("cu", DumpLayer::LOWER).expect_err("cu").code,
            "E0313"
        );
        assert_eq!(
            parse_dump("poly_view", DumpLayer::LOWER)
                .expect_err("optimize only")
                .code,
            "E0313"
        );
        assert_eq!(
            parse_dump("plan,poly_view,region", DumpLayer::ALL).expect("ok"),
            vec![DumpLayer::Region, DumpLayer::PolyView, DumpLayer::Plan]
        );
    }
}
