//! The `.graph` DSL of seed 004 (サブグラフ機能, DSL構文, Decompile): a second input format beside
//! graph.json.
//!
//! A program is a list of `graph` definitions; `graph main` is the entry point and every other
//! graph is a subgraph, called like a function. [`load_str`] parses the program, **inlines** every
//! subgraph call (so the whole program becomes one frontend graph and one e-graph; subgraphs are
//! not optimized separately), bounding the call depth by [`Options::max_depth`], and loads the
//! result with the graph.json frontend ([`crate::ir::frontend`]), so validation, inference and the
//! normal form are exactly graph.json's. Every diagnostic is located by line and column (`E07xx`
//! for the DSL's own rules, graph.json's codes for op rules). [`decompile`] prints any frontend
//! graph back as a DSL program with entry `main`.
//!
//! Seed 004's shape rule holds: the tensor operands of an elementwise op have the same shape;
//! only scalars (literals and rank-0 tensors) broadcast; other broadcasts are explicit
//! (`expand`, `reshape`). `E0710` reports a violation.

// Diagnostics travel on the cold error path only; boxing them would buy nothing.
#![allow(clippy::result_large_err)]

pub mod ast;
pub mod builtins;
mod decompile;
mod inline;
pub mod lex;
pub mod located;
pub mod parse;

pub use decompile::decompile;

use crate::diag::codes;
use crate::diag::{Diagnostic, Diagnostics, Location};
use crate::ir::dim::fmt_shape;
use crate::ir::frontend::{self, Graph, Op, Operand};
use std::path::Path;

/// The default maximum nesting of subgraph calls (seed 004: 再帰呼び出しは許可（デフォルト最大深度: 10）).
pub const DEFAULT_MAX_DEPTH: usize = 10;

/// How a DSL program is loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Deepest allowed nesting of subgraph calls (`main` is depth 0); deeper is `E0707`.
    pub max_depth: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

/// Parses, inlines and loads a DSL program; `file` names it in diagnostics.
pub fn load_str(text: &str, file: &str, opts: Options) -> Result<Graph, Diagnostics> {
    let prog = parse::parse_program(text, file)?;
    let mut b = inline::Builder::new(&prog, file, opts.max_depth)?;
    b.build_main()?;
    let doc = b.document(&b.outputs.clone());
    let graph = b.load(&doc)?;
    let mut errs = Vec::new();
    check_expectations(&b, &graph, &mut errs);
    check_shape_rule(&b, &graph, &mut errs);
    if errs.is_empty() {
        Ok(graph)
    } else {
        Err(Diagnostics(errs))
    }
}

/// Whether a path names a DSL program (`.graph`) rather than graph.json.
pub fn is_dsl_path(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "graph")
}

/// Loads a graph file of either format: `.graph` as DSL, anything else as graph.json.
pub fn load_path(path: &Path, opts: Options) -> Result<Graph, Diagnostics> {
    if !is_dsl_path(path) {
        return frontend::load_file(path);
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        Diagnostics::one(Diagnostic::unreadable_input(
            path,
            format!("cannot read the file: {e}"),
        ))
    })?;
    load_str(&text, &path.display().to_string(), opts)
}

/// Subgraph results and `main` outputs have their declared types.
fn check_expectations(b: &inline::Builder, g: &Graph, errs: &mut Vec<Diagnostic>) {
    for e in &b.expects {
        let Some(t) = g.tensor(&e.tensor) else {
            continue;
        };
        if t.dtype != e.dtype || t.shape != e.shape {
            let mut d = located::dsl_diag(
                codes::TYPE_MISMATCH,
                b.file,
                e.origin.pos,
                format!(
                    "{} is declared {}{}, but the value returned is {}{}",
                    e.what,
                    parse::dtype_name(e.dtype),
                    fmt_shape(&e.shape),
                    parse::dtype_name(t.dtype),
                    fmt_shape(&t.shape)
                ),
                "return a value of the declared type, or change the declaration",
            );
            if !e.origin.stack.is_empty() {
                d = d.with("inlined_through", e.origin.stack.join(" -> "));
            }
            errs.push(d);
        }
    }
}

/// Seed 004's shape rule: elementwise tensor operands share a shape unless one is a scalar.
fn check_shape_rule(b: &inline::Builder, g: &Graph, errs: &mut Vec<Diagnostic>) {
    for n in &g.nodes {
        if !matches!(n.op, Op::Elementwise { .. }) {
            continue;
        }
        let shapes: Vec<(&str, &Vec<crate::ir::dim::Dim>)> = n
            .inputs
            .iter()
            .filter_map(|o| match o {
                Operand::Tensor(t) => g.tensor(t).map(|i| (t.as_str(), &i.shape)),
                Operand::Scalar(_) => None,
            })
            .filter(|(_, s)| !s.is_empty())
            .collect();
        let Some((first, s0)) = shapes.first() else {
            continue;
        };
        if let Some((other, s1)) = shapes.iter().find(|(_, s)| s != s0) {
            let d = Diagnostic::error(
                codes::IMPLICIT_BROADCAST,
                Location::Node {
                    node: n.name.clone(),
                    op: n.op.name().into(),
                },
                format!(
                    "operands of different shapes: `{first}` is {} and `{other}` is {}; only scalars broadcast implicitly",
                    fmt_shape(s0),
                    fmt_shape(s1)
                ),
                format!(
                    "broadcast explicitly, e.g. `expand({other}, shape=[…])` or `reshape` first"
                ),
            );
            errs.push(b.locate(d));
        }
    }
}
