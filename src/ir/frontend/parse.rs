//! JSON text → [`RawDoc`]: the document walked by hand so that every problem is a located
//! diagnostic (never a panic). Attributes are typed here (see [`super::attrs`]) but normalized
//! only in inference, where the input ranks are known.

use super::attrs::{is_symbol_name, parse_attrs, unknown_dtype, Attrs};
use super::diagnose::{diag, did_you_mean, field, node_loc, tensor_loc};
use super::ops::Op;
use super::{Mutability, Operand, Role, SigInput, SigOutput, Signature, Storage, TensorInfo};
use crate::diag::codes;
use crate::diag::{Diagnostic, Diagnostics, Location};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One node as written, with typed attributes.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct RawNode {
    pub name: String,
    /// One of [`Op::NAMES`].
    pub op: &'static str,
    pub inputs: Vec<Operand>,
    pub outputs: Vec<String>,
    pub attrs: Attrs,
}

impl RawNode {
    pub(super) fn loc(&self) -> Location {
        node_loc(&self.name, self.op)
    }
}

/// The parsed document, before structural checks.
#[derive(Clone, Debug, PartialEq, Default)]
pub(super) struct RawDoc {
    pub signature: Signature,
    pub symbols: BTreeMap<String, i64>,
    /// Declared tensors, in document order.
    pub tensors: Vec<(String, TensorInfo)>,
    /// Nodes in document order.
    pub nodes: Vec<RawNode>,
    /// The `constants` section (an extension: `super::constants`).
    pub constants: Vec<(String, super::constants::ConstSpec)>,
}

const DOC_KEYS: [&str; 5] = ["signature", "symbols", "tensors", "graph", "constants"];
const SIG_KEYS: [&str; 2] = ["inputs", "outputs"];
const INPUT_KEYS: [&str; 4] = ["tensor", "role", "mutability", "storage"];
const OUTPUT_KEYS: [&str; 1] = ["tensor"];
const TENSOR_KEYS: [&str; 2] = ["dtype", "shape"];
const NODE_KEYS: [&str; 6] = ["op", "name", "inputs", "outputs", "attrs", "fn"];

fn invalid(at: Location, why: impl Into<String>, sugg: impl Into<String>) -> Diagnostic {
    diag(codes::INVALID_FIELD, at, why, sugg)
}

/// Reports keys of `obj` that are not in `known`.
fn check_keys(obj: &Map<String, Value>, known: &[&str], path: &str, errs: &mut Vec<Diagnostic>) {
    for k in obj.keys() {
        if !known.contains(&k.as_str()) {
            errs.push(invalid(
                field(format!("{path}.{k}")),
                format!("unknown field `{k}` in `{path}`"),
                did_you_mean(k, known.iter().copied(), "fields"),
            ));
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Parses the document.
pub(super) fn parse_document(text: &str, file: &str) -> Result<RawDoc, Diagnostics> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        Diagnostics::one(
            diag(
                codes::MALFORMED_JSON,
                Location::Source {
                    file: file.to_string(),
                    line: e.line(),
                    column: e.column(),
                },
                format!("the input is not valid JSON: {e}"),
                "fix the JSON syntax at the given line and column (a missing comma, quote or bracket)",
            )
            .with("json_error", e),
        )
    })?;
    let mut errs = Vec::new();
    let doc = parse_value(&value, &mut errs);
    if errs.is_empty() {
        Ok(doc)
    } else {
        Err(Diagnostics(errs))
    }
}

fn parse_value(value: &Value, errs: &mut Vec<Diagnostic>) -> RawDoc {
    let mut doc = RawDoc::default();
    let Some(obj) = value.as_object() else {
        errs.push(invalid(
            Location::Document,
            format!(
                "the document must be a JSON object, found {}",
                type_name(value)
            ),
            "write {\"signature\": …, \"tensors\": …, \"graph\": […]} (see graph-json.md)",
        ));
        return doc;
    };
    check_keys(obj, &DOC_KEYS, "document", errs);
    for key in ["signature", "tensors", "graph"] {
        if !obj.contains_key(key) {
            errs.push(invalid(
                field(key),
                format!("the document has no `{key}`"),
                format!("add `\"{key}\"` (see graph-json.md § Document)"),
            ));
        }
    }
    if let Some(v) = obj.get("signature") {
        doc.signature = parse_signature(v, errs);
    }
    if let Some(v) = obj.get("symbols") {
        doc.symbols = parse_symbols(v, errs);
    }
    if let Some(v) = obj.get("tensors") {
        doc.tensors = parse_tensors(v, errs);
    }
    if let Some(v) = obj.get("graph") {
        doc.nodes = parse_nodes(v, errs);
    }
    if let Some(v) = obj.get("constants") {
        doc.constants = super::constants::parse(v, errs);
    }
    doc
}

fn enum_field<T: Copy>(
    obj: &Map<String, Value>,
    key: &str,
    path: &str,
    values: &[(&'static str, T)],
    default: T,
    errs: &mut Vec<Diagnostic>,
) -> T {
    let Some(v) = obj.get(key) else {
        return default;
    };
    let names: Vec<&str> = values.iter().map(|(n, _)| *n).collect();
    match v.as_str() {
        Some(s) => match values.iter().find(|(n, _)| *n == s) {
            Some((_, t)) => *t,
            None => {
                errs.push(invalid(
                    field(format!("{path}.{key}")),
                    format!("`{s}` is not a valid `{key}`"),
                    did_you_mean(s, names.iter().copied(), "values"),
                ));
                default
            }
        },
        None => {
            errs.push(invalid(
                field(format!("{path}.{key}")),
                format!("`{key}` must be a string, found {}", type_name(v)),
                format!("write one of: {}", names.join(", ")),
            ));
            default
        }
    }
}

fn tensor_field(
    obj: &Map<String, Value>,
    path: &str,
    errs: &mut Vec<Diagnostic>,
) -> Option<String> {
    match obj.get("tensor") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(v) => {
            errs.push(invalid(
                field(format!("{path}.tensor")),
                format!("`tensor` must be a non-empty string, found {v}"),
                "name a tensor declared in `tensors`",
            ));
            None
        }
        None => {
            errs.push(invalid(
                field(path),
                format!("`{path}` has no `tensor`"),
                "add `\"tensor\": \"<name>\"`",
            ));
            None
        }
    }
}

fn list_of<'a>(v: &'a Value, path: &str, errs: &mut Vec<Diagnostic>) -> &'a [Value] {
    match v.as_array() {
        Some(a) => a,
        None => {
            errs.push(invalid(
                field(path),
                format!("`{path}` must be a list, found {}", type_name(v)),
                format!("write `{path}` as a JSON list"),
            ));
            &[]
        }
    }
}

fn parse_signature(v: &Value, errs: &mut Vec<Diagnostic>) -> Signature {
    let mut sig = Signature::default();
    let Some(obj) = v.as_object() else {
        errs.push(invalid(
            field("signature"),
            format!("`signature` must be an object, found {}", type_name(v)),
            "write {\"inputs\": […], \"outputs\": […]}",
        ));
        return sig;
    };
    check_keys(obj, &SIG_KEYS, "signature", errs);
    for key in SIG_KEYS {
        if !obj.contains_key(key) {
            errs.push(invalid(
                field(format!("signature.{key}")),
                format!("`signature` has no `{key}`"),
                format!("add `\"{key}\": […]` (it may be empty)"),
            ));
        }
    }
    let inputs = obj
        .get("inputs")
        .map(|v| list_of(v, "signature.inputs", errs));
    for (i, e) in inputs.unwrap_or(&[]).iter().enumerate() {
        let path = format!("signature.inputs[{i}]");
        let Some(o) = e.as_object() else {
            errs.push(invalid(
                field(&path),
                format!(
                    "a signature input must be an object, found {}",
                    type_name(e)
                ),
                "write {\"tensor\": \"<name>\", \"role\": \"data\"}",
            ));
            continue;
        };
        check_keys(o, &INPUT_KEYS, &path, errs);
        let role = enum_field(
            o,
            "role",
            &path,
            &[("data", Role::Data), ("param", Role::Param)],
            Role::Data,
            errs,
        );
        let mutability = enum_field(
            o,
            "mutability",
            &path,
            &[
                ("immutable", Mutability::Immutable),
                ("mutable", Mutability::Mutable),
            ],
            Mutability::Immutable,
            errs,
        );
        let storage = enum_field(
            o,
            "storage",
            &path,
            &[("arg", Storage::Arg), ("const_pool", Storage::ConstPool)],
            Storage::Arg,
            errs,
        );
        if let Some(tensor) = tensor_field(o, &path, errs) {
            sig.inputs.push(SigInput {
                tensor,
                role,
                mutability,
                storage,
            });
        }
    }
    let outputs = obj
        .get("outputs")
        .map(|v| list_of(v, "signature.outputs", errs));
    for (i, e) in outputs.unwrap_or(&[]).iter().enumerate() {
        let path = format!("signature.outputs[{i}]");
        let Some(o) = e.as_object() else {
            errs.push(invalid(
                field(&path),
                format!(
                    "a signature output must be an object, found {}",
                    type_name(e)
                ),
                "write {\"tensor\": \"<name>\"}",
            ));
            continue;
        };
        check_keys(o, &OUTPUT_KEYS, &path, errs);
        if let Some(tensor) = tensor_field(o, &path, errs) {
            if sig.outputs.iter().any(|s| s.tensor == tensor) {
                errs.push(invalid(
                    field(&path),
                    format!("tensor `{tensor}` is listed twice in `signature.outputs`"),
                    "list each output once",
                ));
                continue;
            }
            sig.outputs.push(SigOutput { tensor });
        }
    }
    sig
}

fn parse_symbols(v: &Value, errs: &mut Vec<Diagnostic>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let Some(obj) = v.as_object() else {
        errs.push(invalid(
            field("symbols"),
            format!("`symbols` must be an object, found {}", type_name(v)),
            "write {\"M\": 128, …}",
        ));
        return out;
    };
    for (k, val) in obj {
        if !is_symbol_name(k) {
            errs.push(invalid(
                Location::Symbol { symbol: k.clone() },
                format!("`{k}` is not a valid symbol name"),
                "use a name like `M`, `seq_len` or `N'` (a letter or `_`, then letters, digits, `_`, `'`)",
            ));
            continue;
        }
        match val.as_i64().filter(|x| *x >= 0) {
            Some(x) => {
                out.insert(k.clone(), x);
            }
            None => errs.push(invalid(
                Location::Symbol { symbol: k.clone() },
                format!(
                    "the default value of symbol `{k}` must be a non-negative integer, found {val}"
                ),
                format!("write e.g. `\"{k}\": 128`"),
            )),
        }
    }
    out
}

fn parse_tensors(v: &Value, errs: &mut Vec<Diagnostic>) -> Vec<(String, TensorInfo)> {
    let mut out = Vec::new();
    let Some(obj) = v.as_object() else {
        errs.push(invalid(
            field("tensors"),
            format!("`tensors` must be an object, found {}", type_name(v)),
            "write {\"A\": {\"dtype\": \"fp16\", \"shape\": [\"M\", 64]}, …}",
        ));
        return out;
    };
    for (name, t) in obj {
        let at = || tensor_loc(name);
        let Some(o) = t.as_object() else {
            errs.push(invalid(
                at(),
                format!("tensor `{name}` must be an object, found {}", type_name(t)),
                "write {\"dtype\": \"fp16\", \"shape\": [\"M\", 64]}",
            ));
            continue;
        };
        check_keys(o, &TENSOR_KEYS, &format!("tensors.{name}"), errs);
        let dtype = match o.get("dtype") {
            Some(Value::String(s)) => match DType::parse(s) {
                Some(d) => Some(d),
                None => {
                    errs.push(unknown_dtype(s, at(), &format!("tensor `{name}`")));
                    None
                }
            },
            Some(other) => {
                errs.push(invalid(
                    at(),
                    format!("the dtype of tensor `{name}` must be a string, found {other}"),
                    "write one of fp16, bf16, fp32, i32, bool",
                ));
                None
            }
            None => {
                errs.push(invalid(
                    at(),
                    format!("tensor `{name}` has no `dtype`"),
                    "add `\"dtype\": \"fp16\"` (or bf16, fp32, i32, bool)",
                ));
                None
            }
        };
        let shape = match o.get("shape") {
            Some(s) => parse_shape(name, s, errs),
            None => {
                errs.push(invalid(
                    at(),
                    format!("tensor `{name}` has no `shape`"),
                    "add `\"shape\": [...]` (`[]` for a scalar)",
                ));
                None
            }
        };
        if let (Some(dtype), Some(shape)) = (dtype, shape) {
            out.push((name.clone(), TensorInfo { dtype, shape }));
        }
    }
    out
}

fn parse_shape(name: &str, v: &Value, errs: &mut Vec<Diagnostic>) -> Option<Vec<Dim>> {
    let Some(arr) = v.as_array() else {
        errs.push(invalid(
            tensor_loc(name),
            format!("the shape of tensor `{name}` must be a list, found {v}"),
            "write e.g. `[\"M\", 64]`",
        ));
        return None;
    };
    let mut shape = Vec::with_capacity(arr.len());
    let mut ok = true;
    for (i, d) in arr.iter().enumerate() {
        if let Some(x) = d.as_i64().filter(|x| *x >= 0) {
            shape.push(Dim::int(x));
        } else if let Some(s) = d.as_str().filter(|s| is_symbol_name(s)) {
            shape.push(Dim::sym(s));
        } else {
            ok = false;
            errs.push(
                invalid(
                    tensor_loc(name),
                    format!("axis {i} of tensor `{name}` is {d}: a size must be a non-negative integer or a symbol name"),
                    "write a size like `64` or a symbol like `\"M\"`",
                )
                .with("axis", i),
            );
        }
    }
    ok.then_some(shape)
}

fn parse_nodes(v: &Value, errs: &mut Vec<Diagnostic>) -> Vec<RawNode> {
    let mut out = Vec::new();
    for (i, n) in list_of(v, "graph", errs).iter().enumerate() {
        if let Some(node) = parse_node(i, n, errs) {
            out.push(node);
        }
    }
    out
}

fn string_list(
    v: Option<&Value>,
    what: &str,
    at: &Location,
    errs: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let bad = |errs: &mut Vec<Diagnostic>| {
        errs.push(invalid(
            at.clone(),
            format!("`{what}` must be a list of tensor names"),
            format!("write `\"{what}\": [\"T\"]`"),
        ));
        None
    };
    let Some(arr) = v.and_then(|v| v.as_array()) else {
        return bad(errs);
    };
    let names: Option<Vec<String>> = arr
        .iter()
        .map(|e| e.as_str().filter(|s| !s.is_empty()).map(str::to_string))
        .collect();
    match names {
        Some(n) => Some(n),
        None => bad(errs),
    }
}

fn parse_node(i: usize, n: &Value, errs: &mut Vec<Diagnostic>) -> Option<RawNode> {
    let path = format!("graph[{i}]");
    let Some(obj) = n.as_object() else {
        errs.push(invalid(
            field(&path),
            format!("a node must be an object, found {}", type_name(n)),
            "write {\"op\": …, \"name\": …, \"inputs\": […], \"outputs\": […], \"attrs\": {…}}",
        ));
        return None;
    };
    let name = match obj.get("name") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => {
            errs.push(invalid(
                field(&path),
                format!("node {i} of `graph` has no `name` (a non-empty string)"),
                "give every node a unique `\"name\"`",
            ));
            None
        }
    };
    let shown = name.clone().unwrap_or_else(|| path.clone());
    let op_text = obj.get("op").and_then(|v| v.as_str());
    let op = match op_text {
        Some(s) => match Op::NAMES.iter().find(|n| **n == s) {
            Some(n) => Some(*n),
            None => {
                errs.push(
                    diag(
                        codes::UNKNOWN_OP,
                        node_loc(&shown, s),
                        format!("node `{shown}` has the unknown op `{s}`"),
                        did_you_mean(s, Op::NAMES.iter().copied(), "ops"),
                    )
                    .with("op", s),
                );
                None
            }
        },
        None => {
            errs.push(invalid(
                field(&path),
                format!("node `{shown}` has no `op` (a string)"),
                format!("add `\"op\"`: one of {}", Op::NAMES.join(", ")),
            ));
            None
        }
    };
    let at = node_loc(&shown, op_text.unwrap_or("?"));
    for k in obj.keys() {
        if !NODE_KEYS.contains(&k.as_str()) {
            errs.push(invalid(
                at.clone(),
                format!("node `{shown}` has the unknown field `{k}`"),
                if specs_has(op, k) {
                    format!("`{k}` is an attribute: move it into `attrs`")
                } else {
                    did_you_mean(k, NODE_KEYS.iter().copied(), "node fields")
                },
            ));
        }
    }
    let inputs = match obj.get("inputs").and_then(|v| v.as_array()) {
        Some(arr) => {
            let mut ins = Vec::with_capacity(arr.len());
            let mut ok = true;
            for e in arr {
                match e {
                    Value::String(s) if !s.is_empty() => ins.push(Operand::Tensor(s.clone())),
                    Value::Number(x) => match x.as_f64().filter(|x| x.is_finite()) {
                        Some(x) => ins.push(Operand::Scalar(x)),
                        None => ok = false,
                    },
                    _ => ok = false,
                }
            }
            if !ok {
                errs.push(invalid(
                    at.clone(),
                    format!("the inputs of node `{shown}` must be tensor names or numbers"),
                    "write e.g. `\"inputs\": [\"X\", 2.0]`",
                ));
            }
            ok.then_some(ins)
        }
        None => {
            errs.push(invalid(
                at.clone(),
                format!("node `{shown}` has no `inputs` list"),
                "add `\"inputs\": [\"X\"]`",
            ));
            None
        }
    };
    let outputs = string_list(obj.get("outputs"), "outputs", &at, errs);
    if let Some(outs) = &outputs {
        if outs.len() != 1 {
            errs.push(invalid(
                at.clone(),
                format!(
                    "node `{shown}` lists {} outputs; every op produces exactly one",
                    outs.len()
                ),
                "list exactly one output tensor",
            ));
        }
    }
    let mut attrs = Attrs::default();
    if let (Some(op), Some(name)) = (op, &name) {
        let mut attr_obj = match obj.get("attrs") {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(other) => {
                errs.push(invalid(
                    at.clone(),
                    format!(
                        "`attrs` of node `{name}` must be an object, found {}",
                        type_name(other)
                    ),
                    "write `\"attrs\": {…}`",
                ));
                return None;
            }
        };
        if let Some(f) = obj.get("fn") {
            if op != "Elementwise" {
                errs.push(invalid(
                    at.clone(),
                    format!("a node-level `fn` is accepted only for Elementwise, not {op}"),
                    "move `fn` into `attrs`",
                ));
            } else if attr_obj.get("fn").is_some_and(|a| a != f) {
                errs.push(invalid(
                    at.clone(),
                    format!("node `{name}` gives `fn` twice with different values"),
                    "give `fn` once, at node level or in `attrs`",
                ));
            } else {
                attr_obj.insert("fn".to_string(), f.clone());
            }
        }
        attrs = parse_attrs(name, op, &attr_obj, errs);
        if op != "Elementwise" {
            if let Some(ins) = &inputs {
                if ins.iter().any(|o| matches!(o, Operand::Scalar(_))) {
                    errs.push(invalid(
                        at.clone(),
                        format!("{op} takes tensor operands only; scalar constants are allowed for Elementwise"),
                        "declare the value as a tensor, or use an Elementwise node",
                    ));
                }
            }
        }
    }
    Some(RawNode {
        name: name?,
        op: op?,
        inputs: inputs?,
        outputs: outputs?,
        attrs,
    })
}

fn specs_has(op: Option<&str>, k: &str) -> bool {
    op.and_then(super::attrs::specs)
        .is_some_and(|t| t.iter().any(|(n, _, _)| *n == k))
}
