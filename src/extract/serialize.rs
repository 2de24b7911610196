//! Interchange with the public `egraph-serialize` JSON format (extraction-gym's format), so that
//! our extractors can be compared on public data sets and our e-graphs can be fed to other tools.
//!
//! Export: every e-class `c` becomes class id `"c"`, its e-nodes node ids `"c.0"`, `"c.1"`, … in
//! the e-graph's (deterministic) order; a child is referenced by the first node id of its class (the
//! format lets an extractor pick any node of that class). `class_data[c].typ` is the IndexBook fact
//! (`fp16[M,K]` or `attr`). The same e-graph always exports to the same bytes.

use crate::diag::codes;
use crate::diag::{Diagnostic, Diagnostics, Location};
use crate::ir::egraph::{Facts, TensorGraph, TensorLang};
use egg::{Id, Language};
pub use egraph_serialize::EGraph as SerializedEGraph;
use egraph_serialize::{ClassData, ClassId, Cost, Node, NodeId};
use std::path::Path;

/// The serialized form of `eg` with `roots` as root e-classes; `cost` gives each e-node's cost
/// (non-finite or negative costs are clamped to 0 and +∞ is kept as `f64::MAX`).
pub fn to_serialized(
    eg: &TensorGraph,
    roots: &[Id],
    cost: &dyn Fn(&TensorLang) -> f64,
) -> SerializedEGraph {
    let mut out = SerializedEGraph::default();
    let mut classes: Vec<&egg::EClass<TensorLang, Facts>> = eg.classes().collect();
    classes.sort_by_key(|c| c.id);
    let first = |id: Id| NodeId::from(format!("{}.0", eg.find(id)));
    for class in classes {
        let cid = ClassId::from(class.id.to_string());
        for (i, node) in class.nodes.iter().enumerate() {
            let c = cost(node);
            let c = if c.is_nan() || c < 0.0 {
                0.0
            } else {
                c.min(f64::MAX)
            };
            out.add_node(
                format!("{}.{i}", class.id),
                Node {
                    op: op_text(node),
                    children: node.children().iter().map(|ch| first(*ch)).collect(),
                    eclass: cid.clone(),
                    cost: Cost::new(c).unwrap_or_default(),
                    subsumed: false,
                },
            );
        }
        let typ = match &class.data {
            Facts::Tensor(t) => format!(
                "{}{}",
                t.dtype,
                crate::ir::dim::fmt_shape(&t.shape).replace(' ', "")
            ),
            Facts::Attr(_) => "attr".to_string(),
            Facts::Invalid(_) => "invalid".to_string(),
        };
        out.class_data.insert(
            cid,
            ClassData {
                typ: Some(typ),
                extra: Default::default(),
            },
        );
    }
    out.root_eclasses = roots
        .iter()
        .map(|r| ClassId::from(eg.find(*r).to_string()))
        .collect();
    out
}

/// An e-node's operator text: the op name (`reshape`, `mul`, …) or the attribute's text form.
fn op_text(n: &TensorLang) -> String {
    match n {
        TensorLang::Attr(a) => a.to_string(),
        other => other.to_string(),
    }
}

/// JSON text of a serialized e-graph (pretty, deterministic).
pub fn to_json(g: &SerializedEGraph) -> String {
    serde_json::to_string_pretty(g).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Loads an `egraph-serialize` JSON file; a missing or malformed file is a diagnostic.
pub fn load(path: &Path) -> Result<SerializedEGraph, Diagnostics> {
    let max = crate::budget::LoadBudgets::default().max_file_bytes;
    let bytes = crate::budget::read_file_limited(path, max)?;
    let text = String::from_utf8(bytes).map_err(|e| -> Diagnostics {
        Diagnostic::unreadable_input(
            path,
            format!("cannot read the e-graph file: it is not UTF-8 text ({e})"),
        )
        .into()
    })?;
    serde_json::from_str(&text).map_err(|e| -> Diagnostics {
        Diagnostic::error(
            codes::MALFORMED_JSON,
            Location::Source { file: path.display().to_string(), line: e.line(), column: e.column() },
            format!("not an egraph-serialize document: {e}"),
            "the file must be egraph-serialize JSON: {\"nodes\": {id: {op, children, eclass, cost}}, \"root_eclasses\": [...]}",
        )
        .into()
    })
}
