//! Values during import: constant tensors (initializers, `Constant`, folded subgraphs), symbolic
//! shape values, and runtime tensors of the emitted graph; decoding of `TensorProto` data
//! (raw, typed fields, external data).

use super::proto::{tensor_proto::DataLocation, TensorProto};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::tensor::{decode_float_le, Constant, Tensor, TensorData};
use std::path::Path;

/// ONNX element type codes used here (`TensorProto.DataType`).
pub(super) mod et {
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT8: i32 = 3;
    pub const UINT16: i32 = 4;
    pub const INT16: i32 = 5;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const BOOL: i32 = 9;
    pub const FLOAT16: i32 = 10;
    pub const DOUBLE: i32 = 11;
    pub const UINT32: i32 = 12;
    pub const UINT64: i32 = 13;
    pub const BFLOAT16: i32 = 16;
}

/// The graph.json dtype of an ONNX element type (ints narrow to `i32`); `None` if it has none.
pub(super) fn graph_dtype(elem: i32) -> Option<DType> {
    match elem {
        et::FLOAT => Some(DType::F32),
        et::FLOAT16 => Some(DType::F16),
        et::BFLOAT16 => Some(DType::BF16),
        et::INT32 | et::INT64 => Some(DType::I32),
        et::BOOL => Some(DType::Bool),
        _ => None,
    }
}

/// Whether an ONNX element type is a float type.
pub(super) fn is_float_elem(elem: i32) -> bool {
    matches!(elem, et::FLOAT | et::FLOAT16 | et::BFLOAT16 | et::DOUBLE)
}

/// A constant tensor, values widened to `f64` (exact for every int64 shape value in practice).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct CTensor {
    /// ONNX element type.
    pub elem: i32,
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

impl CTensor {
    pub fn scalar(elem: i32, v: f64) -> CTensor {
        CTensor {
            elem,
            shape: Vec::new(),
            data: vec![v],
        }
    }

    pub fn vec_i64(v: &[i64]) -> CTensor {
        CTensor {
            elem: et::INT64,
            shape: vec![v.len()],
            data: v.iter().map(|x| *x as f64).collect(),
        }
    }

    pub fn numel(&self) -> usize {
        self.data.len()
    }

    /// The values as integers (truncated).
    pub fn ints(&self) -> Vec<i64> {
        self.data.iter().map(|x| *x as i64).collect()
    }

    /// Rounds every value to the element type (float rounding, int truncation, bool).
    pub fn normalized(mut self) -> CTensor {
        let e = self.elem;
        for x in &mut self.data {
            *x = round_elem(e, *x);
        }
        self
    }
}

/// Rounds `x` as a value of ONNX element type `elem`.
pub(super) fn round_elem(elem: i32, x: f64) -> f64 {
    match elem {
        et::FLOAT => f64::from(x as f32),
        et::FLOAT16 => DType::F16.round(x),
        et::BFLOAT16 => DType::BF16.round(x),
        et::DOUBLE => x,
        et::BOOL => f64::from(u8::from(x != 0.0)),
        _ if x.is_nan() => 0.0,
        _ => x.trunc(),
    }
}

/// A runtime tensor of the emitted graph.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct TInfo {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<Dim>,
}

/// What an ONNX value name stands for during import.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Val {
    /// An initializer (index into `graph.initializer`), decoded when used.
    Init(usize),
    /// A known constant.
    Const(CTensor),
    /// An int64 shape value with symbolic entries: rank 0 (`scalar`) or 1.
    Sym { dims: Vec<Dim>, scalar: bool },
    /// A tensor computed at run time.
    T(TInfo),
    /// The output of an op that could not be imported (already reported).
    Poison,
}

/// Decodes a `TensorProto` (raw data, typed fields or external data relative to `dir`).
pub(super) fn decode_tensor(t: &TensorProto, dir: &Path) -> Result<CTensor, String> {
    let shape: Vec<usize> = t
        .dims
        .iter()
        .map(|d| usize::try_from(*d).map_err(|_| format!("negative dimension {d}")))
        .collect::<Result<_, _>>()?;
    let n: usize = shape.iter().product();
    let elem = t.data_type.unwrap_or(0);
    let external;
    let raw: Option<&[u8]> = if t.data_location == Some(DataLocation::External as i32) {
        external = read_external(t, dir)?;
        Some(&external)
    } else {
        t.raw_data.as_deref().filter(|r| !r.is_empty() || n == 0)
    };
    let data: Vec<f64> = match raw {
        Some(b) => decode_raw(elem, b)?,
        None => match elem {
            et::FLOAT => t.float_data.iter().map(|x| f64::from(*x)).collect(),
            et::DOUBLE => t.double_data.clone(),
            et::INT64 => t.int64_data.iter().map(|x| *x as f64).collect(),
            et::UINT32 | et::UINT64 => t.uint64_data.iter().map(|x| *x as f64).collect(),
            et::FLOAT16 => t
                .int32_data
                .iter()
                .map(|x| f64::from(half::f16::from_bits(*x as u16).to_f32()))
                .collect(),
            et::BFLOAT16 => t
                .int32_data
                .iter()
                .map(|x| f64::from(half::bf16::from_bits(*x as u16).to_f32()))
                .collect(),
            et::INT32 | et::INT16 | et::INT8 | et::UINT8 | et::UINT16 | et::BOOL => {
                t.int32_data.iter().map(|x| f64::from(*x)).collect()
            }
            e => return Err(format!("element type {e} is not supported")),
        },
    };
    if data.len() != n {
        return Err(format!(
            "tensor `{}` holds {} values for shape {shape:?}",
            t.name.as_deref().unwrap_or(""),
            data.len()
        ));
    }
    Ok(CTensor { elem, shape, data })
}

fn read_external(t: &TensorProto, dir: &Path) -> Result<Vec<u8>, String> {
    let get = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key.as_deref() == Some(k))
            .and_then(|e| e.value.clone())
    };
    let loc = get("location").ok_or("external data without `location`")?;
    if Path::new(&loc).is_absolute() || loc.contains("..") {
        return Err(format!(
            "external data location `{loc}` must be a relative path inside the model's folder"
        ));
    }
    let offset: u64 = get("offset")
        .map_or(Ok(0), |s| s.parse())
        .map_err(|_| "bad offset")?;
    let len = get("length")
        .map(|s| s.parse::<u64>().map_err(|_| "bad length"))
        .transpose()?;
    // Budgeted (issue 19): only the tensor's range is read, within --max-file-bytes.
    crate::budget::read_file_range(&dir.join(&loc), offset, len)
}

fn decode_raw(elem: i32, b: &[u8]) -> Result<Vec<f64>, String> {
    macro_rules! le {
        ($t:ty, $n:expr) => {
            b.chunks_exact($n)
                .map(|c| {
                    let mut a = [0u8; $n];
                    a.copy_from_slice(c);
                    <$t>::from_le_bytes(a) as f64
                })
                .collect()
        };
    }
    Ok(match elem {
        et::FLOAT => b
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        et::DOUBLE => le!(f64, 8),
        et::INT64 => le!(i64, 8),
        et::UINT64 => le!(u64, 8),
        et::INT32 => le!(i32, 4),
        et::UINT32 => le!(u32, 4),
        et::INT16 => le!(i16, 2),
        et::UINT16 => le!(u16, 2),
        et::INT8 => b.iter().map(|x| f64::from(*x as i8)).collect(),
        et::UINT8 | et::BOOL => b.iter().map(|x| f64::from(*x)).collect(),
        et::FLOAT16 => b
            .chunks_exact(2)
            .map(|c| f64::from(half::f16::from_le_bytes([c[0], c[1]]).to_f32()))
            .collect(),
        et::BFLOAT16 => b
            .chunks_exact(2)
            .map(|c| f64::from(half::bf16::from_le_bytes([c[0], c[1]]).to_f32()))
            .collect(),
        e => return Err(format!("element type {e} is not supported")),
    })
}

/// Converts a constant to a graph tensor of its graph dtype; int values must fit in i32.
pub(super) fn to_graph_tensor(c: &CTensor) -> Result<Tensor, String> {
    let dtype = graph_dtype(c.elem)
        .ok_or_else(|| format!("element type {} has no graph.json dtype", c.elem))?;
    if dtype == DType::I32 {
        let v: Vec<i32> = c
            .data
            .iter()
            .map(|x| i32::try_from(*x as i64).map_err(|_| format!("value {x} does not fit in i32")))
            .collect::<Result<_, _>>()?;
        return Ok(Tensor {
            dtype,
            shape: c.shape.clone(),
            data: TensorData::I32(v),
        });
    }
    Ok(Tensor::from_f64(dtype, c.shape.clone(), &c.data))
}

/// The safetensors dtype and element width of a tensor of `dtype` as the sidecar stores it:
/// floats in their dtype (`bf16` as BF16), `i32` as I32, bool as BOOL.
pub(super) fn sidecar_dtype(dtype: DType) -> (&'static str, usize) {
    match dtype {
        DType::F16 => ("F16", 2),
        DType::BF16 => ("BF16", 2),
        DType::F32 => ("F32", 4),
        DType::I32 => ("I32", 4),
        DType::Bool => ("BOOL", 1),
    }
}

/// Writes a tensor's little-endian bytes (in [`sidecar_dtype`]) through a small reused buffer.
pub(super) fn write_le(w: &mut impl std::io::Write, t: &Tensor) -> std::io::Result<()> {
    const CHUNK: usize = 1 << 14;
    let mut buf: Vec<u8> = Vec::with_capacity(4 * CHUNK);
    macro_rules! chunks {
        ($v:expr, $f:expr) => {
            for c in $v.chunks(CHUNK) {
                buf.clear();
                for x in c {
                    buf.extend_from_slice(&$f(x));
                }
                w.write_all(&buf)?;
            }
        };
    }
    match (&t.data, t.dtype) {
        (TensorData::F32(v), DType::F16) => {
            chunks!(v, |x: &f32| half::f16::from_f32(*x).to_le_bytes())
        }
        (TensorData::F32(v), DType::BF16) => {
            chunks!(v, |x: &f32| half::bf16::from_f32(*x).to_le_bytes())
        }
        (TensorData::F32(v), _) => chunks!(v, |x: &f32| x.to_le_bytes()),
        (TensorData::I32(v), _) => chunks!(v, |x: &i32| x.to_le_bytes()),
        (TensorData::Bool(v), _) => chunks!(v, |x: &bool| [u8::from(*x)]),
    }
    Ok(())
}

/// A float initializer (fp32, fp16, bf16) stored inline as raw bytes of the right length, as a
/// constant decoded from those bytes when first read (a slice of the model file's buffer, no copy
/// until then). `None` for any other initializer (decoded now by [`decode_tensor`], which reports
/// what is wrong with a malformed one).
pub(super) fn lazy_float(t: &TensorProto) -> Option<Constant> {
    let raw = t.raw_data.clone()?;
    let dtype = match t.data_type? {
        et::FLOAT => DType::F32,
        et::FLOAT16 => DType::F16,
        et::BFLOAT16 => DType::BF16,
        _ => return None,
    };
    if t.data_location == Some(DataLocation::External as i32) {
        return None;
    }
    let shape: Vec<usize> = t
        .dims
        .iter()
        .map(|d| usize::try_from(*d).ok())
        .collect::<Option<_>>()?;
    let width = if dtype == DType::F32 { 4 } else { 2 };
    if shape
        .iter()
        .try_fold(width, |n: usize, d| n.checked_mul(*d))
        != Some(raw.len())
    {
        return None;
    }
    let at = shape.clone();
    Some(Constant::lazy(dtype, shape, move || {
        decode_float_le(dtype, at.clone(), &raw)
            .unwrap_or_else(|| unreachable!("the length was checked"))
    }))
}
