//! Frontend IR (seed 001 §2): `graph.json` as `graph-json.md` specifies it, loaded, validated and
//! shape/dtype-inferred.
//!
//! [`load_str`] / [`load_file`] return a [`Graph`] whose nodes are topologically sorted and whose
//! ops are **normalized**: every per-spatial-dimension list has one entry per spatial dim, every
//! pad is `[lo, hi]` pairs, every axis is non-negative and every optional attribute holds its
//! default. Lowering relies on that normal form. Every tensor (declared or inferred) is in
//! [`Graph::tensors`].

// Diagnostics travel on the cold error path only; boxing them would buy nothing.
#![allow(clippy::result_large_err)]

mod ops;
pub use ops::*;

mod attrs;
mod bind;
mod constants;
mod diagnose;
mod graph;
mod infer;
mod pack;
mod parse;

pub use bind::resolve_symbols;
/// The closest candidate to a misspelled name (used by the DSL's suggestions too).
pub(crate) use diagnose::closest as closest_name;
pub use pack::equal_constants;

use crate::diag::codes;
use crate::diag::Diagnostics;
use crate::ir::dim::Shape;
use crate::ir::dtype::DType;
use std::collections::BTreeMap;
use std::path::Path;

/// `role` of a signature input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Activations and other per-call data (the default).
    Data,
    /// Weights and other parameters.
    Param,
}

/// `mutability` of a signature input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mutability {
    /// The program never writes the input (the default).
    Immutable,
    /// The program may update the input in place.
    Mutable,
}

/// `storage` of a signature input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Storage {
    /// Passed as an argument on every call (the default).
    Arg,
    /// Uploaded once into the constant pool.
    ConstPool,
}

/// One entry of `signature.inputs`, defaults filled in.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SigInput {
    /// The tensor.
    pub tensor: String,
    /// Data or parameter.
    pub role: Role,
    /// Whether the program may write it.
    pub mutability: Mutability,
    /// Argument or constant pool.
    pub storage: Storage,
}

/// One entry of `signature.outputs`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SigOutput {
    /// The tensor.
    pub tensor: String,
}

/// The graph signature: the ABI of the compiled program. Inputs and outputs are not nodes.
#[derive(Clone, Debug, PartialEq, Default, serde::Serialize)]
pub struct Signature {
    /// Inputs, in order.
    pub inputs: Vec<SigInput>,
    /// Outputs, in order.
    pub outputs: Vec<SigOutput>,
}

/// Dtype and (symbolic) shape of a tensor.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TensorInfo {
    /// Element type.
    pub dtype: DType,
    /// Shape (symbolic sizes allowed).
    pub shape: Shape,
}

/// An operand of a node: a tensor name or a scalar constant.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum Operand {
    /// A tensor, by name.
    Tensor(String),
    /// A scalar constant (it adopts the tensor operands' dtype).
    Scalar(f64),
}

/// One graph node.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Its name (unique).
    pub name: String,
    /// The op with its normalized attributes.
    pub op: Op,
    /// Operands, in order.
    pub inputs: Vec<Operand>,
    /// Tensors it produces.
    pub outputs: Vec<String>,
}

/// A loaded, validated, inferred graph.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Graph {
    /// Inputs and outputs.
    pub signature: Signature,
    /// Default symbol values from the document's `symbols`.
    pub symbols: BTreeMap<String, i64>,
    /// Every tensor: signature tensors, declared and inferred intermediates.
    pub tensors: BTreeMap<String, TensorInfo>,
    /// Nodes in a topological order (stable: among ready nodes, document order).
    pub nodes: Vec<Node>,
    /// Values of signature inputs that travel with the graph (the `constants` extension, or an
    /// imported model's initializers, decoded when first read); `run` uses them for inputs not
    /// given with `--input`.
    pub constants: crate::tensor::Constants,
}

impl Graph {
    /// Info of a tensor known to exist after loading.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.get(name)
    }
}

/// Loads `graph.json` text. `file` names the input in diagnostics.
///
/// ```
/// let json = r#"{"signature": {"inputs": [{"tensor": "x"}], "outputs": [{"tensor": "y"}]},
///   "tensors": {"x": {"dtype": "fp16", "shape": [2, 4]}, "y": {"dtype": "fp16", "shape": [2, 4]}},
///   "graph": [{"op": "Elementwise", "name": "r", "inputs": ["x"], "outputs": ["y"],
///              "attrs": {"fn": "relu"}}]}"#;
/// let g = dlc_egg::ir::frontend::load_str(json, "doc.json").unwrap();
/// assert_eq!(g.nodes.len(), 1);
/// assert_eq!(g.tensor("y").unwrap().dtype, dlc_egg::ir::dtype::DType::F16);
/// assert!(dlc_egg::ir::frontend::load_str("{}", "bad.json").is_err());
/// ```
///
/// Checks run in three stages, each reporting every independent problem it finds before the load
/// stops: the document (`E00xx`), the graph structure (`E01xx`), then shapes and dtypes node by
/// node (`E1xxx`, `E0203`); see `docs/diagnostics.md`.
/// Files named by `constants` are read relative to the current directory.
pub fn load_str(text: &str, file: &str) -> Result<Graph, Diagnostics> {
    load_str_in(text, file, Path::new(""))
}

/// [`load_str`] with the folder that `constants` files are relative to.
pub fn load_str_in(text: &str, file: &str, base: &Path) -> Result<Graph, Diagnostics> {
    let mut raw = parse::parse_document(text, file)?;
    let consts = std::mem::take(&mut raw.constants);
    let ordered = graph::check_structure(raw)?;
    let mut graph = infer::infer_graph(ordered)?;
    constants::resolve(&mut graph, consts, base)?;
    Ok(graph)
}

/// Loads a `graph.json` file. Other formats (ONNX models, the `.graph` DSL) are read by
/// `crate::pipeline::load_file`, which dispatches on the extension; this layer knows graph.json
/// only, so a `.onnx` path is refused with a diagnostic that says where to go.
pub fn load_file(path: &Path) -> Result<Graph, Diagnostics> {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
    {
        return Err(Diagnostics::one(crate::diag::Diagnostic::error(
            codes::UNREADABLE_INPUT,
            crate::diag::Location::Argument {
                argument: path.display().to_string(),
            },
            "`ir::frontend::load_file` reads graph.json only; this is an ONNX model",
            "load it with `dlc_egg::pipeline::load_file`, which reads every input format",
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        Diagnostics::one(crate::diag::Diagnostic::unreadable_input(
            path,
            format!("cannot read the file: {e}"),
        ))
    })?;
    let base = path.parent().unwrap_or(Path::new(""));
    load_str_in(&text, &path.display().to_string(), base)
}
