//! Graphviz DOT pictures (seed 004 `visualization.rs`): the frontend graph and the Tiny IR DAG
//! (`lower --dump dot`), the kernel cover of the optimizer (`optimize --dump dot`: one cluster per
//! kernel with its template and predicted time, edges labelled with the buffer and its bytes) and
//! an e-graph (`--dump egraph-dot`: one cluster per e-class, cut to a size limit with a note).
//! Every output is one `digraph` that `dot -Tsvg` renders; node order follows the inputs, so the
//! text is deterministic.

use crate::ir::dim::{fmt_shape, numel, Dim};
use crate::ir::dtype::DType;
use crate::ir::egraph::TensorGraph;
use crate::ir::frontend::{Graph, Operand};
use crate::ir::region::program::Step;
use crate::ir::tiny::{Program, Src};
use crate::optimize::Optimized;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write;

/// Most e-classes `egraph-dot` draws; beyond it the classes farthest from the roots are cut.
pub const EGRAPH_CLASS_LIMIT: usize = 150;

/// A DOT string literal.
fn q(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

fn ty(d: DType, shape: &[Dim]) -> String {
    format!("{}{}", d.name(), fmt_shape(shape))
}

/// `bytes` of a buffer: a number when the shape is concrete, else `numel·size B`.
pub fn bytes_label(d: DType, shape: &[Dim]) -> String {
    let n = numel(shape);
    match n.as_int() {
        Some(v) => format!("{} B", v.saturating_mul(d.size_bytes() as i64)),
        None => format!("({n})·{} B", d.size_bytes()),
    }
}

const HEADER: &str = "  rankdir=TB;\n  fontname=\"Helvetica\";\n  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n";

/// The frontend graph and the Tiny IR DAG of `lower`, as two clusters of one digraph.
pub fn lower_dot(g: &Graph, p: Option<&Program>) -> String {
    let mut s = String::from("digraph lower {\n");
    s.push_str(HEADER);
    s.push_str("  subgraph cluster_frontend {\n    label=\"frontend graph\";\n");
    frontend_body(g, &mut s);
    s.push_str("  }\n");
    if let Some(p) = p {
        s.push_str("  subgraph cluster_tiny {\n    label=\"Tiny IR DAG\";\n");
        tiny_body(p, &mut s);
        s.push_str("  }\n");
    }
    s.push_str("}\n");
    s
}

fn frontend_body(g: &Graph, s: &mut String) {
    let id = |t: &str| q(&format!("f:{t}"));
    let tensor_ty = |t: &str| {
        g.tensor(t)
            .map(|i| ty(i.dtype, &i.shape))
            .unwrap_or_default()
    };
    // Who produces each tensor.
    let mut producer: BTreeMap<&str, String> = BTreeMap::new();
    for i in &g.signature.inputs {
        let _ = writeln!(
            s,
            "    {} [shape=ellipse, style=filled, fillcolor=\"#dbeafe\", label={}];",
            id(&format!("in:{}", i.tensor)),
            q(&format!("{}\n{}", i.tensor, tensor_ty(&i.tensor)))
        );
        producer.insert(&i.tensor, format!("in:{}", i.tensor));
    }
    for n in &g.nodes {
        let detail = match &n.op {
            crate::ir::frontend::Op::Elementwise { func } => format!("Elementwise {}", func.name()),
            op => op.name().to_string(),
        };
        let _ = writeln!(
            s,
            "    {} [shape=box, style=rounded, label={}];",
            id(&format!("node:{}", n.name)),
            q(&format!("{}\n{detail}", n.name))
        );
        for o in &n.outputs {
            producer.insert(o, format!("node:{}", n.name));
        }
    }
    for n in &g.nodes {
        for (k, o) in n.inputs.iter().enumerate() {
            match o {
                Operand::Tensor(t) => {
                    if let Some(p) = producer.get(t.as_str()) {
                        let _ = writeln!(
                            s,
                            "    {} -> {} [label={}];",
                            id(p),
                            id(&format!("node:{}", n.name)),
                            q(&format!("{t}\n{}", tensor_ty(t)))
                        );
                    }
                }
                Operand::Scalar(v) => {
                    let c = format!("const:{}:{k}", n.name);
                    let _ = writeln!(
                        s,
                        "    {} [shape=plaintext, label={}];\n    {} -> {};",
                        id(&c),
                        q(&v.to_string()),
                        id(&c),
                        id(&format!("node:{}", n.name))
                    );
                }
            }
        }
    }
    for o in &g.signature.outputs {
        let out = format!("out:{}", o.tensor);
        let _ = writeln!(
            s,
            "    {} [shape=doublecircle, style=filled, fillcolor=\"#dcfce7\", label={}];",
            id(&out),
            q(&o.tensor)
        );
        if let Some(p) = producer.get(o.tensor.as_str()) {
            let _ = writeln!(
                s,
                "    {} -> {} [label={}];",
                id(p),
                id(&out),
                q(&tensor_ty(&o.tensor))
            );
        }
    }
}

fn tiny_body(p: &Program, s: &mut String) {
    let id = |i: usize| q(&format!("t:n{i}"));
    for n in &p.nodes {
        let i = n.id.index();
        let imms: Vec<String> = n
            .src
            .iter()
            .filter_map(|x| match x {
                Src::Imm(v) => Some(v.to_string()),
                Src::Node(_) => None,
            })
            .collect();
        let mut label = format!("n{i} {}\n{}", n.uop.name(), ty(n.dtype, &n.shape));
        if !imms.is_empty() {
            let _ = write!(label, "\nimm {}", imms.join(", "));
        }
        let shape = if n.uop.is_movement() {
            "shape=box, style=dashed"
        } else {
            "shape=box"
        };
        let _ = writeln!(s, "    {} [{shape}, label={}];", id(i), q(&label));
        for x in &n.src {
            if let Src::Node(m) = x {
                let _ = writeln!(s, "    {} -> {};", id(m.index()), id(i));
            }
        }
    }
    for o in &p.outputs {
        let out = q(&format!("t:out:{}", o.tensor));
        let _ = writeln!(
            s,
            "    {out} [shape=doublecircle, style=filled, fillcolor=\"#dcfce7\", label={}];\n    {} -> {out};",
            q(&o.tensor),
            id(o.node.index())
        );
    }
}

/// The kernel cover of an optimized program: one cluster per kernel (label: name, template,
/// predicted time; content: the frontend nodes it covers), input and alias buffers as nodes, edges
/// labelled with the buffer, its type and its bytes.
pub fn cover_dot(o: &Optimized) -> String {
    let mut s = String::from("digraph cover {\n");
    s.push_str(HEADER);
    s.push_str("  compound=true;\n");
    // buffer name -> (node id, dtype, shape)
    let mut buffers: BTreeMap<String, (String, DType, Vec<Dim>)> = BTreeMap::new();
    for b in &o.program.inputs {
        let nid = format!("in:{}", b.name);
        let _ = writeln!(
            s,
            "  {} [shape=ellipse, style=filled, fillcolor=\"#dbeafe\", label={}];",
            q(&nid),
            q(&format!("{}\n{}", b.name, ty(b.dtype, &b.shape)))
        );
        buffers.insert(b.name.clone(), (nid, b.dtype, b.shape.clone()));
    }
    let mut k = 0usize;
    let mut edges = String::new();
    for step in &o.program.steps {
        match step {
            Step::Region(r) => {
                let info = o.kernels.get(k);
                k += 1;
                let nid = format!("kernel:{}", r.name);
                let (template, time) = match info.map(|i| &i.plan) {
                    Some(Ok(p)) => (p.template.to_string(), format!("{:.3} us", p.predicted_us)),
                    Some(Err(why)) => ("no plan".to_string(), why.clone()),
                    None => ("?".to_string(), String::new()),
                };
                let covers = info
                    .map(|i| i.covers.join("\n"))
                    .unwrap_or_else(|| r.name.clone());
                let _ = writeln!(
                    s,
                    "  subgraph {} {{\n    label={};\n    style=filled;\n    fillcolor=\"#fef9c3\";\n    {} [shape=box, style=\"rounded,filled\", fillcolor=white, label={}];\n  }}",
                    q(&format!("cluster_{}", r.name)),
                    q(&format!("{}: {template}\npredicted {time}", r.name)),
                    q(&nid),
                    q(&covers)
                );
                let mut seen = BTreeSet::new();
                for i in &r.inputs {
                    if !seen.insert(i.name.as_str()) {
                        continue;
                    }
                    if let Some((src, d, shape)) = buffers.get(&i.name) {
                        edge(&mut edges, src, &nid, &i.name, *d, shape);
                    }
                }
                for out in &r.outputs {
                    let shape: Vec<Dim> = out.memref.shape.iter().map(|x| x.0.clone()).collect();
                    buffers.insert(out.name.clone(), (nid.clone(), out.dtype, shape));
                }
            }
            Step::Alias {
                name,
                of,
                dtype,
                shape,
            } => {
                let nid = format!("alias:{name}");
                let _ = writeln!(
                    s,
                    "  {} [shape=note, label={}];",
                    q(&nid),
                    q(&format!("{name} = reshape of {of}\n{}", ty(*dtype, shape)))
                );
                if let Some((src, d, sh)) = buffers.get(of) {
                    edge(&mut edges, src, &nid, of, *d, sh);
                }
                buffers.insert(name.clone(), (nid, *dtype, shape.clone()));
            }
        }
    }
    for (graph_out, buf) in &o.program.outputs {
        let nid = format!("out:{graph_out}");
        let _ = writeln!(
            s,
            "  {} [shape=doublecircle, style=filled, fillcolor=\"#dcfce7\", label={}];",
            q(&nid),
            q(graph_out)
        );
        if let Some((src, d, shape)) = buffers.get(buf) {
            edge(&mut edges, src, &nid, buf, *d, shape);
        }
    }
    s.push_str(&edges);
    s.push_str("}\n");
    s
}

fn edge(out: &mut String, from: &str, to: &str, buf: &str, d: DType, shape: &[Dim]) {
    let _ = writeln!(
        out,
        "  {} -> {} [label={}];",
        q(from),
        q(to),
        q(&format!(
            "{buf}\n{}\n{}",
            ty(d, shape),
            bytes_label(d, shape)
        ))
    );
}

/// An e-graph: one cluster per e-class (its e-nodes inside), an edge from each e-node to a child
/// class. At most `limit` classes, chosen breadth-first from `roots`; a note says what was cut.
pub fn egraph_dot(eg: &TensorGraph, roots: &[egg::Id], limit: usize) -> String {
    let mut order: Vec<egg::Id> = Vec::new();
    let mut seen: BTreeSet<egg::Id> = BTreeSet::new();
    let mut queue: VecDeque<egg::Id> = roots.iter().map(|r| eg.find(*r)).collect();
    while let Some(c) = queue.pop_front() {
        if !seen.insert(c) {
            continue;
        }
        order.push(c);
        for n in &eg[c].nodes {
            for ch in egg::Language::children(n) {
                queue.push_back(eg.find(*ch));
            }
        }
    }
    let total_classes = eg.number_of_classes();
    let total_nodes = eg.total_number_of_nodes();
    let shown: Vec<egg::Id> = order.iter().copied().take(limit).collect();
    let shown_set: BTreeSet<egg::Id> = shown.iter().copied().collect();
    let root_set: BTreeSet<egg::Id> = roots.iter().map(|r| eg.find(*r)).collect();
    let mut s = String::from("digraph egraph {\n");
    s.push_str(HEADER);
    s.push_str("  compound=true;\n");
    let mut edges = String::new();
    let mut drawn_nodes = 0usize;
    for c in &shown {
        let style = if root_set.contains(c) {
            "style=filled; fillcolor=\"#dcfce7\";"
        } else {
            "style=rounded;"
        };
        let _ = writeln!(
            s,
            "  subgraph {} {{\n    label={};\n    {style}",
            q(&format!("cluster_{c}")),
            q(&format!("e-class {c}"))
        );
        for (j, n) in eg[*c].nodes.iter().enumerate() {
            drawn_nodes += 1;
            let nid = format!("c{c}_{j}");
            let _ = writeln!(
                s,
                "    {} [shape=box, label={}];",
                q(&nid),
                q(&n.to_string())
            );
            for ch in egg::Language::children(n) {
                let ch = eg.find(*ch);
                if shown_set.contains(&ch) {
                    let _ = writeln!(
                        edges,
                        "  {} -> {} [lhead={}];",
                        q(&nid),
                        q(&format!("c{ch}_0")),
                        q(&format!("cluster_{ch}"))
                    );
                }
            }
        }
        s.push_str("  }\n");
    }
    s.push_str(&edges);
    if shown.len() < total_classes {
        let _ = writeln!(
            s,
            "  note [shape=note, style=filled, fillcolor=\"#fee2e2\", label={}];",
            q(&format!(
                "cut to {} of {total_classes} e-classes ({drawn_nodes} of {total_nodes} e-nodes drawn):\nthe classes nearest the roots are shown, edges into cut classes omitted",
                shown.len()
            ))
        );
    }
    s.push_str("}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_bytes() {
        assert_eq!(q("a\"b\nc"), "\"a\\\"b\\nc\"");
        assert_eq!(bytes_label(DType::F16, &[Dim::int(4), Dim::int(8)]), "64 B");
        assert_eq!(
            bytes_label(DType::F32, &[Dim::sym("M"), Dim::int(8)]),
            "(8*M)·4 B"
        );
    }
}
