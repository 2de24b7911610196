//! Recognizes the erf-based GELU subgraph of torch exports,
//! `0.5 · x · (1 + erf(x / √2))` in its usual association orders, and replaces it by one `Gelu`
//! node (graph.json `Elementwise gelu`). The pattern's nodes stay in the list and die unless
//! something else reads their outputs.

use super::import::Importer;
use super::proto::{attribute_proto::AttributeType, NodeProto};
use super::value::{decode_tensor, Val};
use std::collections::HashMap;

const SQRT2: f64 = std::f64::consts::SQRT_2;

/// The scalar value of `name`, if it is a one-element constant (initializer or `Constant` node).
fn scalar(
    imp: &Importer<'_>,
    producers: &HashMap<&str, usize>,
    nodes: &[NodeProto],
    name: &str,
) -> Option<f64> {
    if matches!(imp.val(name), Some(Val::Init(_)) | Some(Val::Const(_))) {
        let c = imp.konst(name).ok()??;
        return (c.numel() == 1).then(|| c.data[0]);
    }
    let n = nodes.get(*producers.get(name)?)?;
    if n.op_type.as_deref() != Some("Constant") {
        return None;
    }
    let a = n.attribute.first()?;
    match a.name.as_deref()? {
        "value" => {
            let c = decode_tensor(a.t.as_ref()?, imp.dir).ok()?;
            (c.numel() == 1).then(|| c.data[0])
        }
        "value_float" if a.r#type == Some(AttributeType::Float as i32) => a.f.map(f64::from),
        _ => None,
    }
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-3 * b.abs())
}

/// The other input of a binary node whose one input is `x`.
fn other<'a>(n: &'a NodeProto, x: &str) -> Option<&'a str> {
    match n.input.as_slice() {
        [a, b] if a == x => Some(b),
        [a, b] if b == x => Some(a),
        _ => None,
    }
}

/// Returns the node list with every recognized erf-GELU replaced by a `Gelu` node placed at the
/// pattern's last node.
pub(super) fn rewrite(imp: &Importer<'_>, nodes: &[NodeProto]) -> Vec<NodeProto> {
    let mut producers: HashMap<&str, usize> = HashMap::new();
    let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for o in &n.output {
            producers.insert(o, i);
        }
        for inp in &n.input {
            consumers.entry(inp).or_default().push(i);
        }
    }
    let op = |i: usize| nodes[i].op_type.as_deref().unwrap_or("");
    let only_consumer = |t: &str| match consumers.get(t).map(Vec::as_slice) {
        Some([c]) => Some(*c),
        _ => None,
    };
    let sc = |name: &str| scalar(imp, &producers, nodes, name);
    let mut out: Vec<NodeProto> = nodes.to_vec();
    let mut inserts: Vec<(usize, NodeProto)> = Vec::new();
    for (ei, e) in nodes.iter().enumerate() {
        if op(ei) != "Erf" || e.input.len() != 1 || e.output.len() != 1 {
            continue;
        }
        let Some(&pi) = producers.get(e.input[0].as_str()) else {
            continue;
        };
        let p = &nodes[pi];
        let x = match (op(pi), p.input.as_slice()) {
            ("Div", [x, c]) if close(sc(c), SQRT2) => x.as_str(),
            ("Mul", [a, b]) if close(sc(b), 1.0 / SQRT2) => a.as_str(),
            ("Mul", [a, b]) if close(sc(a), 1.0 / SQRT2) => b.as_str(),
            _ => continue,
        };
        let Some(ai) = only_consumer(&e.output[0]) else {
            continue;
        };
        if op(ai) != "Add" || !close(other(&nodes[ai], &e.output[0]).and_then(sc), 1.0) {
            continue;
        }
        let s = nodes[ai].output[0].as_str();
        let Some(mi) = only_consumer(s) else { continue };
        if op(mi) != "Mul" {
            continue;
        }
        let Some(m_other) = other(&nodes[mi], s) else {
            continue;
        };
        let m_out = nodes[mi].output[0].as_str();
        // (a) x·s then ·0.5; (b) (x·0.5)·s; (c) (s·0.5) then x·.
        let last = if m_other == x {
            only_consumer(m_out)
                .filter(|&li| op(li) == "Mul" && close(other(&nodes[li], m_out).and_then(sc), 0.5))
        } else if close(sc(m_other), 0.5) {
            only_consumer(m_out)
                .filter(|&li| op(li) == "Mul" && other(&nodes[li], m_out) == Some(x))
        } else {
            producers
                .get(m_other)
                .copied()
                .filter(|&hi| {
                    op(hi) == "Mul" && other(&nodes[hi], x).is_some_and(|c| close(sc(c), 0.5))
                })
                .map(|_| mi)
        };
        let Some(li) = last else { continue };
        let gelu = NodeProto {
            input: vec![x.to_string()],
            output: vec![nodes[li].output[0].clone()],
            name: Some(format!("{}_gelu", e.name.as_deref().unwrap_or("erf"))),
            op_type: Some("Gelu".into()),
            ..NodeProto::default()
        };
        inserts.push((li, gelu));
    }
    // The replaced last nodes no longer produce their output.
    for (li, g) in inserts {
        out[li] = g;
    }
    out
}
