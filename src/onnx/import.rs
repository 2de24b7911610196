//! The importer: ONNX graph → graph.json document. Walks the live nodes in order, folding
//! constants and shape computations ([`super::fold`]) and emitting graph.json nodes for the rest
//! ([`super::ops`]).

use super::proto::{self, ModelProto, NodeProto};
use super::value::{decode_tensor, graph_dtype, to_graph_tensor, CTensor, TInfo, Val};
use super::Imported;
use crate::diag::codes;
use crate::diag::{Diagnostic, Diagnostics, Location};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::tensor::{Constant, Constants};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

/// The default-domain opset whose op versions the mapping follows; models of older opsets are
/// imported node by node where the op's semantics have not changed since
/// ([`oldest_faithful_opset`]).
pub const MIN_OPSET: i64 = 13;

/// The oldest default-domain opset from which `op`'s semantics (as far as graph.json expresses
/// them) equal the version the mapping follows: an older model's node of this op is refused.
pub fn oldest_faithful_opset(op: &str) -> i64 {
    match op {
        "Constant" | "Identity" | "Not" | "Transpose" | "Shape" | "Size" | "Softsign"
        | "Softplus" => 1,
        "Abs" | "Neg" | "Sqrt" | "Exp" | "Log" | "Relu" | "Sigmoid" | "Tanh" | "Reciprocal"
        | "Cast" | "Tile" | "Elu" | "Selu" | "LeakyRelu" | "HardSigmoid" => 6,
        "And" | "Or" | "Xor" | "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Equal" | "Greater"
        | "Less" => 7,
        "Max" | "Min" | "Sum" | "Mean" | "Expand" => 8,
        "Where" | "Erf" | "IsNaN" | "ConstantOfShape" | "Shrink" | "PRelu" => 9,
        "ThresholdedRelu" => 10,
        // Opset 10 made the mask boolean; the ratio is an attribute before 12 (inference: identity).
        "Dropout" => 10,
        "Range" | "CumSum" | "Gather" | "GatherElements" => 11,
        "Einsum" | "GreaterOrEqual" | "LessOrEqual" | "Celu" => 12,
        _ => MIN_OPSET,
    }
}

/// An import failure at one node: an op or form dlc-egg cannot express, or a model error.
#[derive(Clone, Debug)]
pub(super) enum NodeError {
    /// The op (or this use of it) has no graph.json form; listed in the one `E0601`.
    Unsupported(String),
    /// Anything else, with its own diagnostic.
    Diag(Diagnostic),
}

pub(super) type NResult<T> = Result<T, NodeError>;

/// `E0602` at a node.
pub(super) fn invalid(node: &NodeProto, why: impl Into<String>) -> NodeError {
    NodeError::Diag(Diagnostic::error(
        codes::ONNX_INVALID,
        node_loc(node),
        why,
        "check the model with onnx.checker; see docs/onnx.md for what each op supports",
    ))
}

pub(super) fn unsupported(why: impl Into<String>) -> NodeError {
    NodeError::Unsupported(why.into())
}

pub(super) fn node_loc(node: &NodeProto) -> Location {
    Location::Node {
        node: node.name.clone().unwrap_or_default(),
        op: node.op_type.clone().unwrap_or_default(),
    }
}

/// Operand of an elementwise node: a runtime tensor or a scalar constant.
#[derive(Clone, Debug)]
pub(super) enum Opnd {
    T(TInfo),
    S(f64),
}

/// Import state.
pub(super) struct Importer<'m> {
    pub model: &'m ModelProto,
    pub dir: &'m Path,
    pub opset: i64,
    pub vals: HashMap<String, Val>,
    pub nodes: Vec<Value>,
    pub inputs: Vec<Value>,
    pub tensors: serde_json::Map<String, Value>,
    pub constants: Constants,
    used_names: BTreeSet<String>,
    counter: usize,
    /// Symbols named by `dim_param`s, and fresh ones.
    pub symbols: BTreeSet<String>,
}

impl<'m> Importer<'m> {
    fn graph(&self) -> &'m proto::GraphProto {
        self.model.graph.as_ref().expect("checked in import_model")
    }

    /// A fresh tensor or node name based on `base`.
    pub fn fresh(&mut self, base: &str) -> String {
        loop {
            self.counter += 1;
            let n = format!("{base}__{}", self.counter);
            if self.used_names.insert(n.clone()) {
                return n;
            }
        }
    }

    /// The value of an input name ("" = absent optional input).
    pub fn val(&self, name: &str) -> Option<&Val> {
        self.vals.get(name)
    }

    /// The constant value of `name`, if it is one (initializers decoded here).
    pub fn konst(&self, name: &str) -> NResult<Option<CTensor>> {
        match self.vals.get(name) {
            Some(Val::Const(c)) => Ok(Some(c.clone())),
            Some(Val::Init(i)) => {
                let t = &self.graph().initializer[*i];
                decode_tensor(t, self.dir).map(Some).map_err(|why| {
                    NodeError::Diag(Diagnostic::error(
                        codes::ONNX_UNREADABLE,
                        Location::Tensor {
                            tensor: name.to_string(),
                        },
                        format!("initializer `{name}`: {why}"),
                        "check the model and its external-data files",
                    ))
                })
            }
            Some(Val::Sym { dims, scalar }) => {
                let ints: Option<Vec<i64>> = dims.iter().map(Dim::as_int).collect();
                Ok(ints.map(|v| {
                    let mut c = CTensor::vec_i64(&v);
                    if *scalar {
                        c.shape.clear();
                    }
                    c
                }))
            }
            _ => Ok(None),
        }
    }

    /// The runtime tensor for `name`, materializing a constant as a `param` input.
    pub fn tensor(&mut self, name: &str) -> NResult<TInfo> {
        match self.vals.get(name).cloned() {
            Some(Val::T(t)) => Ok(t),
            Some(Val::Poison) => Err(NodeError::Unsupported(String::new())),
            None => Err(unsupported(format!("input `{name}` is not defined"))),
            Some(Val::Init(i))
                if super::value::lazy_float(&self.graph().initializer[i]).is_some() =>
            {
                // Float weights decoded from their bytes when first read (`optimize` never
                // does), with no f64 round trip: the bulk of a model.
                let init = &self.graph().initializer[i];
                let c = super::value::lazy_float(init).unwrap_or_else(|| unreachable!());
                let t = self.add_param(name, c);
                self.vals.insert(name.to_string(), Val::T(t.clone()));
                Ok(t)
            }
            Some(Val::Sym { .. }) | Some(Val::Init(_)) | Some(Val::Const(_)) => {
                let t = match self.konst(name)? {
                    Some(c) => self.materialize(name, &c)?,
                    None => match self.vals.get(name).cloned() {
                        // A shape value with symbolic entries used as data: computed at run time.
                        Some(Val::Sym { dims, scalar }) => {
                            super::symdata::shape_value_tensor(self, name, &dims, scalar)?
                        }
                        _ => return Err(unsupported(format!("`{name}` has no value"))),
                    },
                };
                self.vals.insert(name.to_string(), Val::T(t.clone()));
                Ok(t)
            }
        }
    }

    /// Adds a constant as a `param` signature input named `name` (or a fresh name if taken).
    pub fn materialize(&mut self, name: &str, c: &CTensor) -> NResult<TInfo> {
        let tensor = to_graph_tensor(c).map_err(|why| {
            let code = if why.contains("fit") {
                codes::ONNX_VALUE_OUT_OF_RANGE
            } else {
                codes::ONNX_UNSUPPORTED_DTYPE
            };
            NodeError::Diag(Diagnostic::error(
                code,
                Location::Tensor {
                    tensor: name.to_string(),
                },
                format!("constant `{name}`: {why}"),
                "dlc-egg has fp32/fp16/bf16/i32/bool tensors; int64 values must fit in i32",
            ))
        })?;
        Ok(self.add_param(name, Constant::ready(tensor)))
    }

    /// Adds `c` as a `param` signature input named `name` (or a fresh name if taken).
    fn add_param(&mut self, name: &str, c: Constant) -> TInfo {
        let tname = if self.used_names.insert(name.to_string()) {
            name.to_string()
        } else {
            self.fresh(name)
        };
        let shape: Vec<Dim> = c.shape().iter().map(|d| Dim::int(*d as i64)).collect();
        self.inputs
            .push(json!({"tensor": tname, "role": "param", "storage": "const_pool"}));
        self.tensors.insert(
            tname.clone(),
            json!({"dtype": c.dtype().name(), "shape": shape}),
        );
        let dtype = c.dtype();
        self.constants.insert_constant(tname.clone(), c);
        TInfo {
            name: tname,
            dtype,
            shape,
        }
    }

    /// Emits a graph.json node with one output named `out` (made unique).
    pub fn emit(
        &mut self,
        op: &str,
        inputs: Vec<Value>,
        attrs: Value,
        out: &str,
        dtype: DType,
        shape: Vec<Dim>,
    ) -> TInfo {
        let name = self.fresh(out);
        let node_name = self.fresh(&format!("n_{op}"));
        self.nodes.push(json!({
            "op": op, "name": node_name, "inputs": inputs, "outputs": [name], "attrs": attrs
        }));
        TInfo { name, dtype, shape }
    }

    /// Emits an `Elementwise` node; the output shape is the operands' broadcast.
    pub fn ew(&mut self, node: &NodeProto, func: &str, ops: &[Opnd], out: &str) -> NResult<TInfo> {
        let mut shape: Vec<Dim> = Vec::new();
        let mut dtype = None;
        for (i, o) in ops.iter().enumerate() {
            if let Opnd::T(t) = o {
                shape = crate::ir::dim::broadcast_shapes(&shape, &t.shape).map_err(|(a, b)| {
                    invalid(node, format!("operands do not broadcast ({a} vs {b})"))
                })?;
                // `where`'s condition does not decide the dtype.
                if !(func == "where" && i == 0) && dtype.is_none() {
                    dtype = Some(t.dtype);
                }
            }
        }
        let cmp = matches!(func, "lt" | "le" | "gt" | "ge" | "eq" | "ne");
        let dtype = if cmp {
            DType::Bool
        } else {
            dtype.unwrap_or(DType::F32)
        };
        let inputs: Vec<Value> = ops
            .iter()
            .map(|o| match o {
                Opnd::T(t) => json!(t.name),
                Opnd::S(v) => json!(v),
            })
            .collect();
        Ok(self.emit(
            "Elementwise",
            inputs,
            json!({"fn": func}),
            out,
            dtype,
            shape,
        ))
    }

    /// An elementwise operand for ONNX input `name`: a scalar when it is a one-element constant
    /// whose rank does not exceed `max_rank` (so broadcasting is unchanged), else a tensor.
    pub fn opnd(&mut self, name: &str, max_rank: usize) -> NResult<Opnd> {
        if !matches!(self.vals.get(name), Some(Val::T(_))) {
            if let Some(c) = self.konst(name)? {
                if c.numel() == 1 && c.shape.len() <= max_rank && c.data[0].is_finite() {
                    return Ok(Opnd::S(c.data[0]));
                }
            }
        }
        self.tensor(name).map(Opnd::T)
    }

    /// The rank of `name` if it is known without materializing.
    pub fn rank_of(&self, name: &str) -> NResult<usize> {
        Ok(match self.vals.get(name) {
            Some(Val::T(t)) => t.shape.len(),
            Some(Val::Sym { scalar, .. }) => usize::from(!scalar),
            Some(Val::Const(c)) => c.shape.len(),
            Some(Val::Init(i)) => self.graph().initializer[*i].dims.len(),
            _ => 0,
        })
    }

    /// Gives the tensor `t` (produced by the last emitted node) the ONNX name `out` when that
    /// name is free, so that graph.json keeps the model's tensor names.
    pub fn finalize(&mut self, t: TInfo, out: &str) -> TInfo {
        let last_is_t = self
            .nodes
            .last()
            .is_some_and(|n| n["outputs"][0].as_str() == Some(t.name.as_str()));
        if !last_is_t || out.is_empty() || !self.used_names.insert(out.to_string()) {
            return t;
        }
        if let Some(n) = self.nodes.last_mut() {
            n["outputs"] = json!([out]);
        }
        TInfo {
            name: out.to_string(),
            ..t
        }
    }

    /// Binds an ONNX output name.
    pub fn set(&mut self, name: &str, v: Val) {
        if !name.is_empty() {
            self.vals.insert(name.to_string(), v);
        }
    }
}

/// Sanitizes a `dim_param` into a symbol name.
fn symbol_name(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out
}

fn value_info_type(
    vi: &proto::ValueInfoProto,
    imp: &mut Importer<'_>,
) -> Result<(DType, Vec<Dim>), Diagnostic> {
    let name = vi.name.clone().unwrap_or_default();
    let bad = |why: String| {
        Diagnostic::error(
            codes::ONNX_UNSUPPORTED_DTYPE,
            Location::Tensor {
                tensor: name.clone(),
            },
            why,
            "graph inputs and outputs must be tensors of float, float16, bfloat16, int32, int64 or bool",
        )
    };
    let Some(proto::type_proto::Value::TensorType(tt)) =
        vi.r#type.as_ref().and_then(|t| t.value.as_ref())
    else {
        return Err(bad(format!("`{name}` is not a tensor")));
    };
    let elem = tt.elem_type.unwrap_or(0);
    let dtype =
        graph_dtype(elem).ok_or_else(|| bad(format!("`{name}` has element type {elem}")))?;
    let mut shape = Vec::new();
    if let Some(s) = &tt.shape {
        for (i, d) in s.dim.iter().enumerate() {
            use proto::tensor_shape_proto::dimension::Value as DV;
            shape.push(match &d.value {
                Some(DV::DimValue(v)) => Dim::int(*v),
                Some(DV::DimParam(p)) if !p.is_empty() => {
                    let s = symbol_name(p);
                    imp.symbols.insert(s.clone());
                    Dim::sym(&s)
                }
                _ => {
                    let s = symbol_name(&format!("{name}_dim{i}"));
                    imp.symbols.insert(s.clone());
                    Dim::sym(&s)
                }
            });
        }
    }
    Ok((dtype, shape))
}

/// Default-domain opset of the model.
fn model_opset(model: &ModelProto) -> i64 {
    model
        .opset_import
        .iter()
        .find(|o| {
            o.domain.as_deref().unwrap_or("").is_empty() || o.domain.as_deref() == Some("ai.onnx")
        })
        .and_then(|o| o.version)
        .unwrap_or(1)
}

/// Imports a decoded model; `dir` is where external data lives.
pub fn import_model(model: &ModelProto, dir: &Path) -> Result<Imported, Diagnostics> {
    let doc_err = |why: String| {
        Diagnostics::one(Diagnostic::error(
            codes::ONNX_INVALID,
            Location::Document,
            why,
            "export the model with opset 13 or later (torch.onnx.export(..., opset_version=17))",
        ))
    };
    let Some(g) = model.graph.as_ref() else {
        return Err(doc_err("the model has no graph".into()));
    };
    let opset = model_opset(model);
    let mut imp = Importer {
        model,
        dir,
        opset,
        vals: HashMap::new(),
        nodes: Vec::new(),
        inputs: Vec::new(),
        tensors: serde_json::Map::new(),
        constants: Constants::new(),
        used_names: BTreeSet::new(),
        counter: 0,
        symbols: BTreeSet::new(),
    };
    let mut errs: Vec<Diagnostic> = Vec::new();
    for (i, t) in g.initializer.iter().enumerate() {
        imp.vals
            .insert(t.name.clone().unwrap_or_default(), Val::Init(i));
    }
    bind_inputs(&mut imp, g, &mut errs);
    if !errs.is_empty() {
        return Err(Diagnostics(errs));
    }
    let nodes = super::gelu::rewrite(&imp, &g.node);
    let live = live_nodes(&nodes, g);
    let unsupported_ops = import_nodes(&mut imp, &nodes, &live, &mut errs);
    if !unsupported_ops.is_empty() {
        errs.insert(0, unsupported_diag(&unsupported_ops));
    }
    if !errs.is_empty() {
        return Err(Diagnostics(errs));
    }
    let outputs = bind_outputs(&mut imp, g).map_err(|e| match e {
        NodeError::Diag(d) => Diagnostics::one(d),
        NodeError::Unsupported(why) => doc_err(why),
    })?;
    let doc = json!({
        "signature": {"inputs": imp.inputs, "outputs": outputs},
        "tensors": imp.tensors,
        "graph": imp.nodes,
    });
    Ok(Imported {
        doc,
        constants: imp.constants,
    })
}

/// Graph inputs (those that are not initializers) become signature inputs with their names.
fn bind_inputs(imp: &mut Importer<'_>, g: &proto::GraphProto, errs: &mut Vec<Diagnostic>) {
    for vi in &g.input {
        let name = vi.name.clone().unwrap_or_default();
        if imp.vals.contains_key(&name) {
            continue;
        }
        match value_info_type(vi, imp) {
            Ok((dtype, shape)) => {
                imp.used_names.insert(name.clone());
                imp.inputs.push(json!({"tensor": name}));
                imp.tensors
                    .insert(name.clone(), json!({"dtype": dtype.name(), "shape": shape}));
                imp.vals
                    .insert(name.clone(), Val::T(TInfo { name, dtype, shape }));
            }
            Err(d) => errs.push(d),
        }
    }
}

/// The one `E0601` listing every unsupported node.
fn unsupported_diag(unsupported_ops: &[String]) -> Diagnostic {
    Diagnostic::error(
        codes::ONNX_UNSUPPORTED_OPS,
        Location::Document,
        format!(
            "{} node(s) use ops that dlc-egg cannot import: {}",
            unsupported_ops.len(),
            unsupported_ops.join("; ")
        ),
        "see docs/onnx.md for the supported ops and attributes",
    )
    .with("nodes", unsupported_ops.join("\n"))
}

/// Imports the live nodes in order; returns the unsupported ones (`op \`name\` (opset): why`)
/// and adds other failures to `errs`. Outputs of a failed node are poisoned: nodes fed by them
/// are listed only when their own op is unsupported.
fn import_nodes(
    imp: &mut Importer<'_>,
    nodes: &[NodeProto],
    live: &[bool],
    errs: &mut Vec<Diagnostic>,
) -> Vec<String> {
    let mut unsupported_ops: Vec<String> = Vec::new();
    for (node, _) in nodes.iter().zip(live).filter(|(_, l)| **l) {
        let poisoned = node
            .input
            .iter()
            .any(|i| matches!(imp.vals.get(i), Some(Val::Poison)));
        let op = node.op_type.as_deref().unwrap_or("");
        let result = if imp.opset < oldest_faithful_opset(op) {
            Err(NodeError::Unsupported(format!(
                "its opset-{} form differs from the opset-{MIN_OPSET} one dlc-egg maps (supported from opset {})",
                imp.opset,
                oldest_faithful_opset(op)
            )))
        } else if poisoned && !super::SUPPORTED_OPS.contains(&op) {
            Err(NodeError::Unsupported("op not supported".into()))
        } else if poisoned {
            Err(NodeError::Unsupported(String::new()))
        } else {
            super::ops::import_node(imp, node)
        };
        if let Err(e) = result {
            for o in &node.output {
                imp.set(o, Val::Poison);
            }
            match e {
                NodeError::Unsupported(why) if why.is_empty() => {}
                NodeError::Unsupported(why) => unsupported_ops.push(format!(
                    "{} `{}` (opset {}): {why}",
                    node.op_type.as_deref().unwrap_or(""),
                    node.name.as_deref().unwrap_or(""),
                    imp.opset
                )),
                NodeError::Diag(d) => errs.push(d),
            }
        }
    }
    unsupported_ops
}

/// Every graph output becomes a signature output named as in the model, produced by a node.
fn bind_outputs(imp: &mut Importer<'_>, g: &proto::GraphProto) -> NResult<Vec<Value>> {
    let mut outs = Vec::new();
    let mut derived = 0usize;
    for vi in &g.output {
        let name = vi.name.clone().unwrap_or_default();
        let t = match imp.val(&name) {
            Some(Val::T(t)) => t.clone(),
            _ => {
                // A constant output (e.g. a folded Shape): a param under another name, copied.
                let c = imp
                    .konst(&name)?
                    .ok_or_else(|| unsupported(format!("graph output `{name}` is not computed")))?;
                let fresh = imp.fresh(&name);
                imp.materialize(&fresh, &c)?
            }
        };
        // The node producing an output must write the model's name.
        let produced_here =
            imp.nodes.iter().any(|n| n["outputs"][0] == json!(t.name)) && t.name == name;
        let t = if produced_here {
            t
        } else {
            let copy = imp.emit(
                "Reshape",
                vec![json!(t.name)],
                json!({"shape": super::ops::dims_attr_plain(&t.shape)}),
                &name,
                t.dtype,
                t.shape.clone(),
            );
            let copy = imp.finalize(copy, &name);
            if copy.name != name {
                return Err(unsupported(format!(
                    "graph output `{name}` has the name of another tensor"
                )));
            }
            copy
        };
        // Declared shapes take integers and symbol names: name other sizes by derived symbols.
        let shape: Vec<Value> = t
            .shape
            .iter()
            .map(|d| {
                if d.as_int().is_some() || d.as_symbol().is_some() {
                    json!(d)
                } else {
                    derived += 1;
                    json!(format!("_out{derived}"))
                }
            })
            .collect();
        imp.tensors.insert(
            name.clone(),
            json!({"dtype": t.dtype.name(), "shape": shape}),
        );
        outs.push(json!({"tensor": name}));
    }
    Ok(outs)
}

/// Which nodes feed a graph output (dead nodes are not imported).
fn live_nodes(nodes: &[NodeProto], g: &proto::GraphProto) -> Vec<bool> {
    let mut need: BTreeSet<&str> = g.output.iter().filter_map(|o| o.name.as_deref()).collect();
    let mut live = vec![false; nodes.len()];
    for (i, n) in nodes.iter().enumerate().rev() {
        if n.output.iter().any(|o| need.contains(o.as_str())) {
            live[i] = true;
            for inp in &n.input {
                need.insert(inp.as_str());
            }
        }
    }
    live
}
