//! The `constants` section of graph.json (an extension, `docs/graph-json-extensions.md`): values of
//! signature inputs that travel with the graph, so that `run` needs no `--input` for weights.
//!
//! ```json
//! "constants": {
//!   "bias": {"values": [0.5, -1.0]},
//!   "W":    {"file": "model.safetensors", "key": "W"}
//! }
//! ```
//!
//! Each entry names a signature input with a concrete declared shape. `values` lists its elements
//! in row-major order (numbers; `true`/`false` or numbers for `bool`). `file` names a
//! `.safetensors` file, relative to the graph file's folder; `key` (default: the tensor's name)
//! picks the tensor in it; its dtype may be F32, F16, BF16 (float tensors), I32, I64 (i32 tensors,
//! every value must fit) or BOOL, and its shape must be the declared one.

use super::diagnose::{diag, field, tensor_loc};
use super::Graph;
use crate::diag::codes;
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::dtype::DType;
use crate::tensor::{Tensor, TensorData};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// One entry of `constants`, as written.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum ConstSpec {
    /// Inline row-major values.
    Values(Vec<f64>),
    /// A tensor of a `.safetensors` file.
    File { file: String, key: String },
}

/// Parses the `constants` object (values are checked against the tensors later, in [`resolve`]).
pub(super) fn parse(v: &Value, errs: &mut Vec<Diagnostic>) -> Vec<(String, ConstSpec)> {
    let bad = |at: String, why: String| {
        diag(
            codes::INVALID_CONSTANT,
            field(at),
            why,
            "write {\"values\": [..]} or {\"file\": \"x.safetensors\", \"key\": \"..\"}",
        )
    };
    let Some(obj) = v.as_object() else {
        errs.push(bad(
            "constants".into(),
            "`constants` must be an object".into(),
        ));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, spec) in obj {
        let at = format!("constants.{name}");
        let Some(o) = spec.as_object() else {
            errs.push(bad(at, format!("constant `{name}` must be an object")));
            continue;
        };
        if let Some(unknown) = o
            .keys()
            .find(|k| !["values", "file", "key"].contains(&k.as_str()))
        {
            errs.push(bad(
                at,
                format!("unknown field `{unknown}` in constant `{name}`"),
            ));
            continue;
        }
        match (o.get("values"), o.get("file")) {
            (Some(vals), None) => {
                let parsed: Option<Vec<f64>> = vals.as_array().and_then(|a| {
                    a.iter()
                        .map(|x| x.as_f64().or_else(|| x.as_bool().map(f64::from)))
                        .collect()
                });
                match parsed {
                    Some(p) => out.push((name.clone(), ConstSpec::Values(p))),
                    None => errs.push(bad(
                        at,
                        format!("`values` of `{name}` must be a list of numbers"),
                    )),
                }
            }
            (None, Some(file)) => {
                let key = o.get("key").and_then(Value::as_str).unwrap_or(name);
                match file.as_str() {
                    Some(f) => out.push((
                        name.clone(),
                        ConstSpec::File {
                            file: f.to_string(),
                            key: key.to_string(),
                        },
                    )),
                    None => errs.push(bad(at, format!("`file` of `{name}` must be a string"))),
                }
            }
            _ => errs.push(bad(
                at,
                format!("constant `{name}` needs exactly one of `values` and `file`"),
            )),
        }
    }
    out
}

/// Reads every constant into `graph.constants`; paths are relative to `base`. Every problem is
/// reported.
pub(super) fn resolve(
    graph: &mut Graph,
    specs: Vec<(String, ConstSpec)>,
    base: &Path,
) -> Result<(), Diagnostics> {
    let mut errs = Vec::new();
    let mut files: BTreeMap<PathBuf, Result<Vec<u8>, String>> = BTreeMap::new();
    for (name, spec) in specs {
        match resolve_one(graph, &name, spec, base, &mut files) {
            Ok(t) => {
                graph.constants.insert(name, t);
            }
            Err(d) => errs.push(d),
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(Diagnostics(errs))
    }
}

fn invalid(name: &str, why: String, sugg: &str) -> Diagnostic {
    diag(codes::INVALID_CONSTANT, tensor_loc(name), why, sugg)
}

fn resolve_one(
    graph: &Graph,
    name: &str,
    spec: ConstSpec,
    base: &Path,
    files: &mut BTreeMap<PathBuf, Result<Vec<u8>, String>>,
) -> Result<Tensor, Diagnostic> {
    if !graph.signature.inputs.iter().any(|i| i.tensor == name) {
        return Err(invalid(
            name,
            format!("constant `{name}` is not a signature input"),
            "constants give values to signature inputs (usually `role: param`); list it in `signature.inputs`",
        ));
    }
    let info = graph.tensor(name).ok_or_else(|| {
        invalid(
            name,
            format!("constant `{name}` has no declared tensor"),
            "declare it in `tensors`",
        )
    })?;
    let shape: Option<Vec<usize>> = info
        .shape
        .iter()
        .map(|d| d.as_int().and_then(|v| usize::try_from(v).ok()))
        .collect();
    let shape = shape.ok_or_else(|| {
        invalid(
            name,
            format!("constant `{name}` has a symbolic shape"),
            "a constant's declared shape must be concrete",
        )
    })?;
    let numel: usize = shape.iter().product();
    let dtype = info.dtype;
    match spec {
        ConstSpec::Values(v) => {
            if v.len() != numel {
                return Err(invalid(
                    name,
                    format!(
                        "constant `{name}` lists {} values, its shape {shape:?} has {numel}",
                        v.len()
                    ),
                    "list every element in row-major order",
                ));
            }
            Ok(Tensor::from_f64(dtype, shape, &v))
        }
        ConstSpec::File { file, key } => {
            let path = base.join(&file);
            let bytes = files
                .entry(path.clone())
                .or_insert_with(|| read_regular_file(&path));
            let bytes = bytes.as_ref().map_err(|e| {
                diag(
                    codes::UNREADABLE_CONSTANT,
                    tensor_loc(name),
                    format!("cannot read constants file `{}`: {e}", path.display()),
                    "the file is named relative to the graph file's folder; keep them together",
                )
            })?;
            let unreadable = |why: String| {
                diag(
                    codes::UNREADABLE_CONSTANT,
                    tensor_loc(name),
                    format!("constants file `{}`: {why}", path.display()),
                    "regenerate the file (dlc-egg import writes it beside graph.json)",
                )
            };
            let st = safetensors::SafeTensors::deserialize(bytes)
                .map_err(|e| unreadable(format!("not a valid .safetensors file: {e}")))?;
            let view = st
                .tensor(&key)
                .map_err(|_| unreadable(format!("it has no tensor `{key}`")))?;
            if view.shape() != shape.as_slice() {
                return Err(invalid(
                    name,
                    format!(
                        "constant `{name}` has shape {:?} in the file, declared {shape:?}",
                        view.shape()
                    ),
                    "the stored shape must be the declared one",
                ));
            }
            decode(view.dtype(), view.data(), dtype)
                .map(|data| Tensor { dtype, shape, data })
                .map_err(|why| {
                    invalid(
                        name,
                        format!("constant `{name}`: {why}"),
                        "store it in a dtype that fits",
                    )
                })
        }
    }
}

/// Decodes little-endian safetensors data into the storage of `want`.
fn decode(st: safetensors::Dtype, b: &[u8], want: DType) -> Result<TensorData, String> {
    use safetensors::Dtype as S;
    let words = |n: usize| b.chunks_exact(n);
    // Generic, not `dyn`: one indirect call per element was most of loading a large model's
    // weights (BERT-base: 110 M floats).
    fn round(want: DType, it: impl Iterator<Item = f32>) -> Vec<f32> {
        it.map(|x| round_one(want, x)).collect()
    }
    Ok(match (st, want) {
        (S::F32, w) if w.is_float() => TensorData::F32(round(
            w,
            words(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        )),
        (S::F16, w) if w.is_float() => TensorData::F32(round(
            w,
            words(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()),
        )),
        (S::BF16, w) if w.is_float() => TensorData::F32(round(
            w,
            words(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()),
        )),
        (S::I32, DType::I32) => TensorData::I32(
            words(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        (S::I64, DType::I32) => TensorData::I32(
            words(8)
                .map(|c| {
                    let v = i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
                    i32::try_from(v).map_err(|_| format!("value {v} does not fit in i32"))
                })
                .collect::<Result<_, _>>()?,
        ),
        (S::BOOL, DType::Bool) => TensorData::Bool(b.iter().map(|x| *x != 0).collect()),
        (s, w) => return Err(format!("stored as {s:?}, which does not fit dtype {w}")),
    })
}

/// `want.round(x)` as f32 ([`DType::round`]); a finite or infinite f32 stored as `F32` is
/// already rounded (`x as f64 as f32 == x`), so only NaNs (whose payload the round trip may
/// quiet) take the general path: the same bits, without two conversions per weight.
#[inline]
fn round_one(want: DType, x: f32) -> f32 {
    if want == DType::F32 && !x.is_nan() {
        x
    } else {
        want.round(f64::from(x)) as f32
    }
}

/// Reads a regular file whole (a side file named by the graph, e.g. `constants`), with a
/// fallible allocation of its size; a device, FIFO or directory is refused, so a graph naming
/// `/dev/zero` cannot make the loader read forever. Errors are plain text for the caller's
/// diagnostic.
fn read_regular_file(path: &Path) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    let len = usize::try_from(meta.len()).map_err(|_| "it is too large".to_string())?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(len)
        .map_err(|_| format!("cannot allocate {len} bytes for it (E1407 AllocationFailed)"))?;
    file.take(meta.len())
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    Ok(bytes)
}
