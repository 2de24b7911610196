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
use crate::mapped::SharedBytes;
use crate::tensor::{Constant, Tensor, TensorData};
use safetensors::Dtype as S;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
/// reported. A `.safetensors` file is mapped and its header read once; float weights are decoded
/// when first asked for ([`crate::tensor::Constant::lazy`]: `optimize` never asks), the rest
/// (integer and boolean tensors, whose values are checked) at once.
pub(super) fn resolve(
    graph: &mut Graph,
    specs: Vec<(String, ConstSpec)>,
    base: &Path,
) -> Result<(), Diagnostics> {
    let mut errs = Vec::new();
    let mut files: BTreeMap<PathBuf, Result<Arc<SafeFile>, SafeError>> = BTreeMap::new();
    for (name, spec) in specs {
        match resolve_one(graph, &name, spec, base, &mut files) {
            Ok(c) => {
                graph.constants.insert_constant(name, c);
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

/// A mapped `.safetensors` file and its parsed header.
struct SafeFile {
    bytes: SharedBytes,
    /// Where the data section starts (after the length word and the header).
    data_start: usize,
    meta: safetensors::tensor::Metadata,
}

/// Why a `.safetensors` file could not be opened.
enum SafeError {
    /// It could not be read (missing, not a regular file, ...).
    Io(String),
    /// Its header is not a valid safetensors header.
    Format(String),
}

impl SafeFile {
    fn open(path: &Path) -> Result<SafeFile, SafeError> {
        let bytes = crate::mapped::map_regular_file(path).map_err(SafeError::Io)?;
        let (header, meta) = safetensors::SafeTensors::read_metadata(&bytes)
            .map_err(|e| SafeError::Format(format!("not a valid .safetensors file: {e}")))?;
        Ok(SafeFile {
            bytes,
            data_start: 8 + header,
            meta,
        })
    }

    /// The stored dtype and shape of tensor `key`, and where its data lies in the file.
    fn tensor(&self, key: &str) -> Option<(safetensors::Dtype, &[usize], Range<usize>)> {
        let info = self.meta.info(key)?;
        let (from, to) = info.data_offsets;
        let range = self.data_start + from..self.data_start + to;
        self.bytes.get(range.clone())?;
        Some((info.dtype, &info.shape, range))
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
    files: &mut BTreeMap<PathBuf, Result<Arc<SafeFile>, SafeError>>,
) -> Result<Constant, Diagnostic> {
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
            Ok(Constant::ready(Tensor::from_f64(dtype, shape, &v)))
        }
        ConstSpec::File { file, key } => {
            let path = base.join(&file);
            let opened = files
                .entry(path.clone())
                .or_insert_with(|| SafeFile::open(&path).map(Arc::new));
            let unreadable = |why: String, suggestion: &str| {
                diag(
                    codes::UNREADABLE_CONSTANT,
                    tensor_loc(name),
                    why,
                    suggestion,
                )
            };
            let regenerate = "regenerate the file (dlc-egg import writes it beside graph.json)";
            let st = opened.as_ref().map_err(|e| match e {
                SafeError::Format(why) => unreadable(
                    format!("constants file `{}`: {why}", path.display()),
                    regenerate,
                ),
                SafeError::Io(e) => unreadable(
                    format!("cannot read constants file `{}`: {e}", path.display()),
                    "the file is named relative to the graph file's folder; keep them together",
                ),
            })?;
            let (stored, stored_shape, range) = st.tensor(&key).ok_or_else(|| {
                unreadable(
                    format!(
                        "constants file `{}`: it has no tensor `{key}`",
                        path.display()
                    ),
                    regenerate,
                )
            })?;
            if stored_shape != shape.as_slice() {
                return Err(invalid(
                    name,
                    format!(
                        "constant `{name}` has shape {stored_shape:?} in the file, declared {shape:?}"
                    ),
                    "the stored shape must be the declared one",
                ));
            }
            let misfit = |why: String| {
                invalid(
                    name,
                    format!("constant `{name}`: {why}"),
                    "store it in a dtype that fits",
                )
            };
            if dtype.is_float() && matches!(stored, S::F32 | S::F16 | S::BF16) {
                // Decoded when first asked for, from the map (kept alive by the recipe).
                let st = Arc::clone(st);
                return Ok(Constant::lazy(dtype, shape.clone(), move || Tensor {
                    dtype,
                    shape: shape.clone(),
                    data: TensorData::F32(decode_float(stored, &st.bytes[range.clone()], dtype)),
                }));
            }
            decode(stored, &st.bytes[range], dtype)
                .map(|data| Constant::ready(Tensor { dtype, shape, data }))
                .map_err(misfit)
        }
    }
}

/// Decodes little-endian float data (`F32`, `F16` or `BF16`) rounded to the float dtype `want`.
/// Generic, not `dyn`: one indirect call per element was most of loading a large model's weights
/// (BERT-base: 110 M floats).
fn decode_float(st: safetensors::Dtype, b: &[u8], want: DType) -> Vec<f32> {
    fn round(want: DType, it: impl Iterator<Item = f32>) -> Vec<f32> {
        it.map(|x| round_one(want, x)).collect()
    }
    match st {
        S::F16 => round(
            want,
            b.chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()),
        ),
        S::BF16 => round(
            want,
            b.chunks_exact(2)
                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()),
        ),
        _ => round(
            want,
            b.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        ),
    }
}

/// Decodes little-endian safetensors data into the storage of `want`.
fn decode(st: safetensors::Dtype, b: &[u8], want: DType) -> Result<TensorData, String> {
    let words = |n: usize| b.chunks_exact(n);
    Ok(match (st, want) {
        (S::F32 | S::F16 | S::BF16, w) if w.is_float() => TensorData::F32(decode_float(st, b, w)),
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
