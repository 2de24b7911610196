//! Inlining a parsed program into one graph.json document: `main`'s parameters become the
//! signature, every subgraph call is replaced by the callee's body (its shape variables bound by
//! unification with the arguments' inferred shapes), up to a maximum call depth. Every node keeps
//! the source position it came from, so frontend diagnostics can be located by line and column.

use super::ast::*;
use super::builtins::{builtin, Builtin};
use super::lex::Pos;
use super::located::{self, dsl_diag};
use crate::diag::codes::{self, Code};
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::frontend::{self, TensorInfo};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

mod call;
mod outputs;

/// A value of the DSL: a tensor of the graph being built, or a scalar literal.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Val {
    Tensor(String),
    Scalar(f64),
}

/// Where a node or tensor came from.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Origin {
    pub pos: Pos,
    /// The subgraph calls it was inlined through, outermost first (`relu@3:14`).
    pub stack: Vec<String>,
}

/// A type a tensor must have once inferred (a subgraph result, a `main` output).
#[derive(Clone, Debug)]
pub(super) struct Expect {
    pub tensor: String,
    pub dtype: DType,
    pub shape: Vec<Dim>,
    pub origin: Origin,
    pub what: String,
}

/// One graph being inlined.
struct Frame<'p> {
    def: &'p GraphDef,
    env: BTreeMap<String, Val>,
    /// Shape variables: `main`'s are symbols, a subgraph's are bound by its call.
    vars: BTreeMap<String, Option<Dim>>,
    prefix: String,
    stack: Vec<String>,
    depth: usize,
}

/// The document under construction.
pub(super) struct Builder<'p> {
    pub file: &'p str,
    graphs: BTreeMap<&'p str, &'p GraphDef>,
    max_depth: usize,
    used: BTreeSet<String>,
    pub nodes: Vec<Map<String, Value>>,
    pub origins: BTreeMap<String, Origin>,
    known: BTreeMap<String, TensorInfo>,
    pub inputs: Vec<Value>,
    pub outputs: Vec<Value>,
    pub symbols: Map<String, Value>,
    pub tensors: Map<String, Value>,
    pub expects: Vec<Expect>,
}

type R<T> = Result<T, Diagnostics>;

fn err<T>(c: Code, file: &str, pos: Pos, why: String, sugg: impl Into<String>) -> R<T> {
    Err(Diagnostics::one(dsl_diag(c, file, pos, why, sugg)))
}

impl<'p> Builder<'p> {
    pub(super) fn new(prog: &'p Program, file: &'p str, max_depth: usize) -> R<Builder<'p>> {
        let mut graphs = BTreeMap::new();
        for g in &prog.graphs {
            if graphs.insert(g.name.name.as_str(), g).is_some() {
                return err(
                    codes::DUPLICATE_DEFINITION,
                    file,
                    g.name.pos,
                    format!("graph `{}` is defined twice", g.name.name),
                    "rename one of the graphs",
                );
            }
        }
        Ok(Builder {
            file,
            graphs,
            max_depth,
            used: BTreeSet::new(),
            nodes: Vec::new(),
            origins: BTreeMap::new(),
            known: BTreeMap::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            symbols: Map::new(),
            tensors: Map::new(),
            expects: Vec::new(),
        })
    }

    fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 1;
        while self.used.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.used.insert(name.clone());
        name
    }

    /// Inlines `main` into the document.
    pub(super) fn build_main(&mut self) -> R<()> {
        let Some(main) = self.graphs.get("main").copied() else {
            return err(
                codes::MISSING_MAIN,
                self.file,
                Pos { line: 1, column: 1 },
                "the program has no `graph main`, its entry point".into(),
                "define `graph main(x: f32[N]) -> (y: f32[N]) { … return y }`",
            );
        };
        let vars = declare_vars(main, self.file)?;
        let mut vars_dim = BTreeMap::new();
        for v in &main.shape_vars {
            vars_dim.insert(v.name.name.clone(), Some(Dim::sym(&v.name.name)));
            if let Some(d) = v.default {
                self.symbols.insert(v.name.name.clone(), json!(d));
            }
        }
        let _ = vars;
        check_distinct_names(main, self.file)?;
        let mut frame = Frame {
            def: main,
            env: BTreeMap::new(),
            vars: vars_dim,
            prefix: String::new(),
            stack: Vec::new(),
            depth: 0,
        };
        for p in &main.params {
            let shape = self.param_shape(&frame, p)?;
            let mut entry = Map::new();
            entry.insert("tensor".into(), json!(p.name.name));
            for q in &p.quals {
                let (k, v) = match q.name.as_str() {
                    "param" => ("role", "param"),
                    "mutable" => ("mutability", "mutable"),
                    _ => ("storage", "const_pool"),
                };
                entry.insert(k.into(), json!(v));
            }
            self.inputs.push(Value::Object(entry));
            self.declare(&p.name.name, p.dtype, &shape);
            self.used.insert(p.name.name.clone());
            self.origins.insert(
                p.name.name.clone(),
                Origin {
                    pos: p.name.pos,
                    stack: Vec::new(),
                },
            );
            frame
                .env
                .insert(p.name.name.clone(), Val::Tensor(p.name.name.clone()));
        }
        for o in &main.outputs {
            if let Some(q) = o.quals.first() {
                return err(
                    codes::INVALID_KEYWORD_ARGUMENT,
                    self.file,
                    q.pos,
                    format!("`{}` qualifies inputs, not outputs", q.name),
                    "remove it from the output",
                );
            }
        }
        let values = self.exec(&mut frame)?;
        self.bind_outputs(&frame, &values)
    }

    fn declare(&mut self, name: &str, dtype: DType, shape: &[Dim]) {
        self.tensors.insert(
            name.to_string(),
            json!({"dtype": dtype.name(), "shape": shape}),
        );
        self.known.insert(
            name.to_string(),
            TensorInfo {
                dtype,
                shape: shape.to_vec(),
            },
        );
    }

    /// The declared shape of a parameter or output with the frame's shape variables substituted.
    fn param_shape(&self, frame: &Frame, p: &Param) -> R<Vec<Dim>> {
        p.shape
            .iter()
            .map(|d| match d {
                DimExpr::Int(v) => Ok(Dim::int(*v)),
                DimExpr::Var(id) => self.var_dim(frame, id),
            })
            .collect()
    }

    fn var_dim(&self, frame: &Frame, id: &Ident) -> R<Dim> {
        match frame.vars.get(&id.name) {
            Some(Some(d)) => Ok(d.clone()),
            Some(None) => err(
                codes::UNDECLARED_SHAPE_VARIABLE,
                self.file,
                id.pos,
                format!(
                    "shape variable `{}` of graph `{}` is not bound by the arguments and has no default",
                    id.name, frame.def.name.name
                ),
                format!("give it a default: `graph<{}=…>`", id.name),
            ),
            None => err(
                codes::UNDECLARED_SHAPE_VARIABLE,
                self.file,
                id.pos,
                format!(
                    "`{}` is not a shape variable of graph `{}`",
                    id.name, frame.def.name.name
                ),
                format!(
                    "declare it: `graph<{}=…> {}(…)`",
                    id.name, frame.def.name.name
                ),
            ),
        }
    }

    /// Runs a graph body; returns the values of its `return`.
    fn exec(&mut self, frame: &mut Frame<'p>) -> R<Vec<Val>> {
        let def = frame.def;
        let n = def.body.len();
        for (i, stmt) in def.body.iter().enumerate() {
            match stmt {
                Stmt::Assign {
                    targets,
                    tuple,
                    value,
                } => {
                    let hint = targets.first().map(|t| t.name.as_str());
                    let vals = if *tuple {
                        self.eval_multi(frame, value, hint)?
                    } else {
                        vec![self.eval(frame, value, hint)?]
                    };
                    if vals.len() != targets.len() {
                        return err(
                            codes::ARITY_MISMATCH,
                            self.file,
                            value.pos(),
                            format!(
                                "{} names are bound to {} value(s)",
                                targets.len(),
                                vals.len()
                            ),
                            "destructure exactly as many names as the call returns",
                        );
                    }
                    for (t, v) in targets.iter().zip(vals) {
                        frame.env.insert(t.name.clone(), v);
                    }
                }
                Stmt::Return { values, pos } => {
                    if let Some(next) = def.body.get(i + 1) {
                        let at = match next {
                            Stmt::Assign { targets, .. } => targets.first().map(|t| t.pos),
                            Stmt::Return { pos, .. } => Some(*pos),
                        };
                        return err(
                            codes::MISSING_RETURN,
                            self.file,
                            at.unwrap_or(*pos),
                            "a statement follows the `return`".into(),
                            "`return` ends a graph: move it to the end",
                        );
                    }
                    if values.len() != def.outputs.len() {
                        return err(
                            codes::ARITY_MISMATCH,
                            self.file,
                            *pos,
                            format!(
                                "graph `{}` declares {} output(s) but returns {} value(s)",
                                def.name.name,
                                def.outputs.len(),
                                values.len()
                            ),
                            "return one value per declared output, in order",
                        );
                    }
                    let mut out = Vec::with_capacity(values.len());
                    for (e, o) in values.iter().zip(&def.outputs) {
                        out.push(self.eval(frame, e, Some(&o.name.name))?);
                    }
                    let _ = n;
                    return Ok(out);
                }
            }
        }
        err(
            codes::MISSING_RETURN,
            self.file,
            def.name.pos,
            format!("graph `{}` has no `return`", def.name.name),
            "end the body with `return <value>` (one value per declared output)",
        )
    }

    fn eval_multi(&mut self, frame: &mut Frame<'p>, e: &Expr, hint: Option<&str>) -> R<Vec<Val>> {
        match e {
            Expr::Call { func, args, kwargs } if self.graphs.contains_key(func.name.as_str()) => {
                self.call_graph(frame, func, args, kwargs)
            }
            _ => Ok(vec![self.eval(frame, e, hint)?]),
        }
    }

    fn eval(&mut self, frame: &mut Frame<'p>, e: &Expr, hint: Option<&str>) -> R<Val> {
        match e {
            Expr::Num { value, .. } => Ok(Val::Scalar(*value)),
            Expr::Bool { pos, .. } => err(
                codes::SCALAR_ONLY_EXPRESSION,
                self.file,
                *pos,
                "`true`/`false` are attribute values, not tensor operands".into(),
                "compare tensors to get a bool tensor (e.g. `x > 0.0`)",
            ),
            Expr::Var(id) => match frame.env.get(&id.name) {
                Some(v) => Ok(v.clone()),
                None => {
                    let known = frame.env.keys().map(String::as_str);
                    let sugg = match frontend::closest_name(&id.name, known) {
                        Some(c) => format!("did you mean `{c}`?"),
                        None => format!("assign `{} = …` before reading it", id.name),
                    };
                    err(
                        codes::UNDEFINED_NAME,
                        self.file,
                        id.pos,
                        format!(
                            "`{}` is not defined in graph `{}`",
                            id.name, frame.def.name.name
                        ),
                        sugg,
                    )
                }
            },
            Expr::Neg { arg, pos } => {
                let a = self.eval(frame, arg, None)?;
                self.elementwise(frame, "neg", vec![a], *pos, hint)
            }
            Expr::Binary { op, lhs, rhs, pos } => {
                let a = self.eval(frame, lhs, None)?;
                let b = self.eval(frame, rhs, None)?;
                self.elementwise(frame, op.func(), vec![a, b], *pos, hint)
            }
            Expr::Call { func, args, kwargs } => self.eval_call(frame, func, args, kwargs, hint),
        }
    }

    /// A call: of a subgraph of the program (inlined; exactly one result here), or of a
    /// builtin (an elementwise function or an op).
    fn eval_call(
        &mut self,
        frame: &mut Frame<'p>,
        func: &Ident,
        args: &[Expr],
        kwargs: &[KwArg],
        hint: Option<&str>,
    ) -> R<Val> {
        if self.graphs.contains_key(func.name.as_str()) {
            let mut vals = self.call_graph(frame, func, args, kwargs)?;
            if vals.len() != 1 {
                return err(
                    codes::ARITY_MISMATCH,
                    self.file,
                    func.pos,
                    format!(
                        "graph `{}` returns {} values; here one is needed",
                        func.name,
                        vals.len()
                    ),
                    "destructure them: `(a, b) = f(…)`",
                );
            }
            return Ok(vals.remove(0));
        }
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            vals.push(self.eval(frame, a, None)?);
        }
        match builtin(&func.name) {
            Some(Builtin::Elementwise(f)) => {
                if let Some(k) = kwargs.first() {
                    return err(
                        codes::INVALID_KEYWORD_ARGUMENT,
                        self.file,
                        k.name.pos,
                        format!("`{}` takes no attributes", func.name),
                        "remove the keyword argument",
                    );
                }
                if vals.len() != f.arity() {
                    return err(
                        codes::ARITY_MISMATCH,
                        self.file,
                        func.pos,
                        format!(
                            "`{}` takes {} operand(s), found {}",
                            func.name,
                            f.arity(),
                            vals.len()
                        ),
                        format!("call it with {} operand(s)", f.arity()),
                    );
                }
                self.elementwise(frame, f.name(), vals, func.pos, hint)
            }
            Some(Builtin::Op(op)) => self.op_node(frame, op, func, vals, kwargs, hint),
            None => self.unknown_function(func),
        }
    }

    /// `E0703 UnknownFunction`: a call of a name that is neither a graph nor a builtin, with the
    /// closest known name as suggestion.
    fn unknown_function(&self, func: &Ident) -> R<Val> {
        let mut cands: Vec<String> = self.graphs.keys().map(|k| k.to_string()).collect();
        cands.extend(super::builtins::names().map(str::to_string));
        let sugg = match frontend::closest_name(&func.name, cands.iter().map(String::as_str)) {
            Some(c) => format!("did you mean `{c}`?"),
            None => {
                "define it as a graph, or call a builtin (README § The graph DSL lists them)".into()
            }
        };
        err(
            codes::UNKNOWN_FUNCTION,
            self.file,
            func.pos,
            format!(
                "`{}` is neither a graph of this program nor a builtin",
                func.name
            ),
            sugg,
        )
    }

    fn origin(&self, frame: &Frame, pos: Pos) -> Origin {
        Origin {
            pos,
            stack: frame.stack.clone(),
        }
    }

    fn push_node(
        &mut self,
        frame: &Frame,
        op: &str,
        inputs: Vec<Value>,
        attrs: Map<String, Value>,
        pos: Pos,
        hint: Option<&str>,
    ) -> Val {
        let base = format!("{}{}", frame.prefix, hint.unwrap_or("t"));
        let name = self.fresh(&base);
        let mut node = Map::new();
        node.insert("op".into(), json!(op));
        node.insert("name".into(), json!(name));
        node.insert("inputs".into(), Value::Array(inputs));
        node.insert("outputs".into(), json!([name]));
        node.insert("attrs".into(), Value::Object(attrs));
        self.nodes.push(node);
        self.origins.insert(name.clone(), self.origin(frame, pos));
        Val::Tensor(name)
    }

    fn elementwise(
        &mut self,
        frame: &Frame,
        func: &str,
        vals: Vec<Val>,
        pos: Pos,
        hint: Option<&str>,
    ) -> R<Val> {
        // Over scalar literals only, the node gives a rank-0 fp32 tensor (graph.json's rule).
        let inputs = vals.iter().map(operand_json).collect();
        let mut attrs = Map::new();
        attrs.insert("fn".into(), json!(func));
        Ok(self.push_node(frame, "Elementwise", inputs, attrs, pos, hint))
    }

    fn op_node(
        &mut self,
        frame: &Frame,
        op: &str,
        func: &Ident,
        vals: Vec<Val>,
        kwargs: &[KwArg],
        hint: Option<&str>,
    ) -> R<Val> {
        if vals.iter().any(|v| matches!(v, Val::Scalar(_))) || vals.is_empty() {
            return err(
                codes::SCALAR_ONLY_EXPRESSION,
                self.file,
                func.pos,
                format!("`{}` takes tensor operands only", func.name),
                "pass tensors; scalar literals are allowed in elementwise operations",
            );
        }
        let mut attrs = Map::new();
        for k in kwargs {
            if attrs.contains_key(&k.name.name) {
                return err(
                    codes::INVALID_KEYWORD_ARGUMENT,
                    self.file,
                    k.name.pos,
                    format!("attribute `{}` is given twice", k.name.name),
                    "give each attribute once",
                );
            }
            let v = if k.name.name == "shape" {
                self.shape_attr(frame, &k.value, k.name.pos)?
            } else {
                attr_json(&k.value)
            };
            attrs.insert(k.name.name.clone(), v);
        }
        let inputs = vals.iter().map(operand_json).collect();
        Ok(self.push_node(frame, op, inputs, attrs, func.pos, hint))
    }

    /// `shape=[…]`: shape variables replaced by what they are bound to.
    fn shape_attr(&self, frame: &Frame, v: &AttrValue, pos: Pos) -> R<Value> {
        let AttrValue::List(items) = v else {
            return Ok(attr_json(v));
        };
        let mut out = Vec::with_capacity(items.len());
        for it in items {
            let AttrValue::Name(n) = it else {
                out.push(attr_json(it));
                continue;
            };
            let d = self.var_dim(
                frame,
                &Ident {
                    name: n.clone(),
                    pos,
                },
            )?;
            match (d.as_int(), d.as_symbol()) {
                (Some(i), _) => out.push(json!(i)),
                (None, Some(s)) => out.push(json!(s)),
                _ => {
                    return err(
                        codes::COMPLEX_SHAPE_BINDING,
                        self.file,
                        pos,
                        format!("shape variable `{n}` is bound to `{d}`, which an attribute cannot hold"),
                        "use -1 for that axis, or pass a tensor whose size is an integer or a plain symbol",
                    )
                }
            }
        }
        Ok(Value::Array(out))
    }

    /// The graph.json document with the given signature outputs.
    pub(super) fn document(&self, outputs: &[Value]) -> Value {
        json!({
            "signature": {"inputs": self.inputs, "outputs": outputs},
            "symbols": self.symbols,
            "tensors": self.tensors,
            "graph": self.nodes,
        })
    }

    /// Loads a document with the frontend, locating its diagnostics in the DSL source.
    pub(super) fn load(&self, doc: &Value) -> R<frontend::Graph> {
        frontend::load_str(&doc.to_string(), self.file)
            .map_err(|ds| Diagnostics(ds.0.into_iter().map(|d| self.locate(d)).collect()))
    }

    /// Moves a diagnostic located at a node or tensor to the source position it came from.
    pub(super) fn locate(&self, d: Diagnostic) -> Diagnostic {
        use crate::diag::Location;
        let name = match &d.at {
            Location::Node { node, .. } => node.clone(),
            Location::Tensor { tensor } => tensor.clone(),
            _ => return d,
        };
        let Some(o) = self.origins.get(&name) else {
            return d;
        };
        let old = d.at.to_string();
        let mut d = d
            .at(located::source(self.file, o.pos))
            .with("graph_element", old);
        if !o.stack.is_empty() {
            d = d.with("inlined_through", o.stack.join(" -> "));
        }
        d
    }
}

/// `graph<…>` names: no duplicates; returns them.
fn declare_vars(def: &GraphDef, file: &str) -> R<BTreeSet<String>> {
    let mut seen = BTreeSet::new();
    for v in &def.shape_vars {
        if !seen.insert(v.name.name.clone()) {
            return err(
                codes::DUPLICATE_DEFINITION,
                file,
                v.name.pos,
                format!("shape variable `{}` is declared twice", v.name.name),
                "declare it once",
            );
        }
    }
    Ok(seen)
}

/// Parameter and output names are distinct.
fn check_distinct_names(def: &GraphDef, file: &str) -> R<()> {
    // An output may share an input's name (graph.json's output that is an input); `main`
    // checks that it returns exactly that input.
    for list in [&def.params, &def.outputs] {
        let mut seen = BTreeSet::new();
        for p in list.iter() {
            if seen.insert(p.name.name.as_str()) {
                continue;
            }
            return err(
                codes::DUPLICATE_DEFINITION,
                file,
                p.name.pos,
                format!(
                    "`{}` names two inputs/outputs of graph `{}`",
                    p.name.name, def.name.name
                ),
                "give every input and output its own name",
            );
        }
    }
    for p in def.params.iter().filter(|_| def.name.name != "main") {
        if let Some(q) = p.quals.first() {
            return err(
                codes::INVALID_KEYWORD_ARGUMENT,
                file,
                q.pos,
                format!("`{}` qualifies inputs of `main` only", q.name),
                "remove it: a subgraph's inputs are whatever its caller passes",
            );
        }
    }
    Ok(())
}

fn operand_json(v: &Val) -> Value {
    match v {
        Val::Tensor(t) => json!(t),
        Val::Scalar(x) => json!(x),
    }
}

/// An attribute value as graph.json writes it.
fn attr_json(v: &AttrValue) -> Value {
    match v {
        AttrValue::Int(i) => json!(i),
        AttrValue::Num(x) => json!(x),
        AttrValue::Bool(b) => json!(b),
        AttrValue::Name(n) => match super::parse::dtype_of(n) {
            Some(d) => json!(d.name()),
            None => json!(n),
        },
        AttrValue::List(items) => Value::Array(items.iter().map(attr_json).collect()),
    }
}
