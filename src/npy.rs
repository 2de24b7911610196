//! `.npy` input and output of `dlc-egg run` (`graph-json.md` § `dlc-egg run`), through `npyz`.
//!
//! Reading is two steps so that a diagnostic can name the tensor an array was meant for:
//! [`read_array`] decodes a file into an [`NpyArray`] (array type string, shape, elements in C
//! order), then [`to_tensor`] applies the contract's dtype rules:
//!
//! | tensor dtype | accepted array type strings |
//! | --- | --- |
//! | `fp16`, `bf16`, `fp32` | `<f4`, `<f2` (converted, rounded to nearest even to the dtype) |
//! | `i32` | `<i4`, `<i8` (int64, e.g. ONNX token ids: every value must fit in i32) |
//! | `bool` | `\|b1` |
//!
//! Anything else is `E0301 NpyDtypeMismatch`; a file that cannot be read or decoded is
//! `E0300 NpyUnreadable`. Fortran-order arrays are accepted and transposed into C order.
//!
//! [`write_tensor`] writes a tensor in its dtype: `fp16` as `<f2`, `fp32` and `bf16` as `<f4`
//! (numpy has no bfloat16), `i32` as `<i4`, `bool` as `|b1`, always C order.

// A `Diagnostic` is the project's user-facing error (crate::diag); it is large by design and
// returned only on cold failure paths, so boxing it would only add noise.
#![allow(clippy::result_large_err)]

use crate::diag::codes;
use crate::diag::{Diagnostic, Location};
use crate::ir::dtype::DType;
use crate::tensor::{Tensor, TensorData};
use half::f16;
use npyz::WriterBuilder;
use std::io;
use std::path::Path;

/// Elements of a decoded array, in C (row-major) order.
#[derive(Clone, Debug, PartialEq)]
pub enum NpyData {
    /// `<f4`.
    F32(Vec<f32>),
    /// `<f2`.
    F16(Vec<f16>),
    /// `<i4`.
    I32(Vec<i32>),
    /// `<i8` (accepted for `i32` tensors when every value fits).
    I64(Vec<i64>),
    /// `|b1`.
    Bool(Vec<bool>),
    /// Any other element type: not decoded (no tensor accepts it), only its type string is kept.
    Unsupported,
}

/// A decoded `.npy` array.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    /// The numpy type string as written in the file, e.g. `<f4`, `|b1`, `>i8`.
    pub descr: String,
    /// The array's shape.
    pub shape: Vec<usize>,
    /// The elements in C order.
    pub data: NpyData,
}

/// Reads and decodes a `.npy` file. Errors are `E0300 NpyUnreadable` located at the path.
pub fn read_array(path: &Path) -> Result<NpyArray, Diagnostic> {
    read_array_limited(path, crate::budget::RunBudgets::default().max_file_bytes)
}

/// [`read_array`] of a file of at most `max_file_bytes` bytes (`E1400` beyond, found without
/// reading the file whole).
pub fn read_array_limited(path: &Path, max_file_bytes: u64) -> Result<NpyArray, Diagnostic> {
    let source = path.display().to_string();
    let bytes = crate::budget::read_file_limited(path, max_file_bytes).map_err(|d| {
        if d.code == codes::UNREADABLE_INPUT.0 {
            unreadable(&source, d.why)
        } else {
            d
        }
    })?;
    parse_array(&bytes, &source)
}

/// Decodes the bytes of a `.npy` file; `source` names it in diagnostics.
pub fn parse_array(bytes: &[u8], source: &str) -> Result<NpyArray, Diagnostic> {
    check_header_length(bytes, source)?;
    check_header_sizes(bytes).map_err(|why| unreadable(source, why))?;
    let mut cursor = bytes;
    let header = npyz::NpyHeader::from_reader(&mut cursor)
        .map_err(|e| unreadable(source, format!("not a valid .npy file: {e}")))?;
    let descr = type_string(&header.dtype());
    let shape = shape_usize(header.shape()).map_err(|why| unreadable(source, why))?;
    check_data_length(&header, &descr, cursor.len()).map_err(|why| unreadable(source, why))?;
    let order = header.order();
    let file = npyz::NpyFile::with_header(header, cursor);
    let data = decode_elements(file, &descr)
        .map_err(|e| unreadable(source, format!("corrupt array data: {e}")))?;
    let data = match order {
        npyz::Order::C => data,
        npyz::Order::Fortran => fortran_to_c(data, &shape),
    };
    Ok(NpyArray { descr, shape, data })
}

/// Converts a decoded array into a tensor of `dtype` (the dtype rules of the module docs).
/// Mismatches are `E0301 NpyDtypeMismatch` located at `tensor`. The shape is not checked here.
pub fn to_tensor(array: NpyArray, tensor: &str, dtype: DType) -> Result<Tensor, Diagnostic> {
    let NpyArray { descr, shape, data } = array;
    let data = match (dtype, data) {
        (d, NpyData::F32(v)) if d.is_float() => TensorData::F32(round_all(d, v)),
        (d, NpyData::F16(v)) if d.is_float() => {
            TensorData::F32(round_all(d, v.into_iter().map(f32::from)))
        }
        (DType::I32, NpyData::I32(v)) => TensorData::I32(v),
        (DType::I32, NpyData::I64(v)) => TensorData::I32(narrow_i64(tensor, &v)?),
        (DType::Bool, NpyData::Bool(v)) => TensorData::Bool(v),
        _ => return Err(dtype_mismatch(tensor, dtype, &descr)),
    };
    Ok(Tensor { dtype, shape, data })
}

/// Narrows int64 values to i32; a value outside the i32 range is `E0301` (it cannot be
/// represented: dlc-egg has no 64-bit integer dtype).
fn narrow_i64(tensor: &str, v: &[i64]) -> Result<Vec<i32>, Diagnostic> {
    v.iter()
        .map(|&x| {
            i32::try_from(x).map_err(|_| {
                Diagnostic::error(
                    codes::NPY_DTYPE_MISMATCH,
                    Location::Tensor {
                        tensor: tensor.to_string(),
                    },
                    format!("the `<i8` array holds {x}, which does not fit the tensor's i32 dtype"),
                    "int64 arrays are accepted for i32 tensors only when every value fits in 32 bits",
                )
            })
        })
        .collect()
}

/// Writes `t` to `path` in its dtype (see the module docs). Errors are `E0312
/// OutputWriteFailed` located at the path.
pub fn write_tensor(path: &Path, t: &Tensor) -> Result<(), Diagnostic> {
    let source = path.display().to_string();
    let bytes = encode_tensor(t).map_err(|e| {
        if e.kind() == io::ErrorKind::OutOfMemory {
            let need = (t.numel() as u128).saturating_mul(4);
            crate::budget::allocation_failed(&source, need)
        } else {
            write_failed(&source, e.to_string())
        }
    })?;
    std::fs::write(path, bytes).map_err(|e| write_failed(&source, e.to_string()))
}

/// The `.npy` bytes [`write_tensor`] writes.
pub fn encode_tensor(t: &Tensor) -> io::Result<Vec<u8>> {
    let shape: Vec<u64> = t.shape.iter().map(|&d| d as u64).collect();
    if t.numel() != data_len(&t.data) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "tensor has {} elements but shape {:?}",
                data_len(&t.data),
                t.shape
            ),
        ));
    }
    // The whole file is one buffer: reserve it fallibly (header + data) so that a tensor too
    // large for memory is an error, not an allocation abort.
    let item: u64 = match t.dtype {
        DType::Bool => 1,
        DType::F16 => 2,
        _ => 4,
    };
    let need = (t.numel() as u64).saturating_mul(item).saturating_add(4096);
    let mut out = Vec::new();
    out.try_reserve_exact(usize::try_from(need).unwrap_or(usize::MAX))
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!("cannot allocate {need} bytes for the .npy file (E1407 AllocationFailed)"),
            )
        })?;
    match (&t.data, t.dtype) {
        (TensorData::F32(v), DType::F16) => {
            write_elems(&mut out, &shape, v.iter().map(|x| f16::from_f32(*x)))?
        }
        (TensorData::F32(v), _) => write_elems(&mut out, &shape, v.iter().copied())?,
        (TensorData::I32(v), _) => write_elems(&mut out, &shape, v.iter().copied())?,
        (TensorData::Bool(v), _) => write_elems(&mut out, &shape, v.iter().copied())?,
    }
    Ok(out)
}

fn write_elems<T: npyz::AutoSerialize>(
    out: &mut Vec<u8>,
    shape: &[u64],
    items: impl IntoIterator<Item = T>,
) -> io::Result<()> {
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(out)
        .begin_nd()?;
    w.extend(items)?;
    w.finish()
}

fn data_len(d: &TensorData) -> usize {
    match d {
        TensorData::F32(v) => v.len(),
        TensorData::I32(v) => v.len(),
        TensorData::Bool(v) => v.len(),
    }
}

fn round_all(dtype: DType, values: impl IntoIterator<Item = f32>) -> Vec<f32> {
    values
        .into_iter()
        .map(|x| dtype.round(x as f64) as f32)
        .collect()
}

/// The type string of a plain dtype (`<f4`), or numpy's description of a structured one.
fn type_string(dtype: &npyz::DType) -> String {
    match dtype {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => other.descr(),
    }
}

fn decode_elements(file: npyz::NpyFile<&[u8]>, descr: &str) -> io::Result<NpyData> {
    Ok(match descr {
        "<f4" => NpyData::F32(file.into_vec()?),
        "<f2" => NpyData::F16(file.into_vec()?),
        "<i4" => NpyData::I32(file.into_vec()?),
        "<i8" => NpyData::I64(file.into_vec()?),
        "|b1" => NpyData::Bool(file.into_vec()?),
        _ => NpyData::Unsupported,
    })
}

/// Guards `npyz` against header lengths it would allocate before reading: the length field (a
/// `u16` in version 1, a `u32` in versions 2 and 3, after the 6-byte magic and 2 version bytes)
/// must not exceed [`crate::budget::NPY_HEADER_CAP`] (`E1406`) nor the file.
fn check_header_length(bytes: &[u8], source: &str) -> Result<(), Diagnostic> {
    if bytes.len() < 10 || !bytes.starts_with(b"\x93NUMPY") {
        return Ok(()); // npyz reports the bad magic
    }
    let (len, start) = match bytes[6] {
        1 => (u64::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10u64),
        _ if bytes.len() >= 12 => (
            u64::from(u32::from_le_bytes([
                bytes[8], bytes[9], bytes[10], bytes[11],
            ])),
            12,
        ),
        _ => return Err(unreadable(source, "the header length is truncated".into())),
    };
    let cap = crate::budget::NPY_HEADER_CAP;
    if len > cap {
        return Err(Diagnostic::error(
            codes::NPY_HEADER_TOO_LONG,
            Location::Argument {
                argument: source.to_string(),
            },
            format!("the .npy header announces {len} bytes, over the {cap}-byte header cap"),
            "write the array with numpy.save; its headers are a few hundred bytes",
        )
        .with("header_len", len)
        .with("cap", cap));
    }
    if start + len > bytes.len() as u64 {
        return Err(unreadable(
            source,
            format!(
                "the file is truncated: the header announces {len} bytes, the file has {}",
                bytes.len() as u64 - start
            ),
        ));
    }
    Ok(())
}

/// Guards `npyz` against headers whose sizes overflow (it multiplies them unchecked): finds the
/// `shape` tuple in the header text and checks that the product of its non-zero entries fits.
fn check_header_sizes(bytes: &[u8]) -> Result<(), String> {
    let head = &bytes[..bytes.len().min(65_536 + 12)];
    let text = String::from_utf8_lossy(head);
    let Some(start) = text.find("'shape'") else {
        return Ok(()); // npyz reports the missing key
    };
    let rest = &text[start..];
    let (Some(open), Some(close)) = (rest.find('('), rest.find(')')) else {
        return Ok(());
    };
    if close < open {
        return Ok(());
    }
    let mut product: u64 = 1;
    for part in rest[open + 1..close].split(',') {
        let part = part.trim().trim_end_matches('L');
        if part.is_empty() {
            continue;
        }
        let n: u64 = part
            .parse()
            .map_err(|_| format!("shape entry `{part}` is not a size"))?;
        if n != 0 {
            product = product
                .checked_mul(n)
                .ok_or("the shape's element count overflows")?;
        }
    }
    Ok(())
}

fn shape_usize(shape: &[u64]) -> Result<Vec<usize>, String> {
    shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("dimension {d} is too large")))
        .collect()
}

/// The data section must hold every element (a truncated file would otherwise be caught only
/// after allocating for the claimed size).
fn check_data_length(header: &npyz::NpyHeader, descr: &str, have: usize) -> Result<(), String> {
    if !matches!(descr, "<f4" | "<f2" | "<i4" | "|b1") {
        return Ok(()); // not decoded
    }
    let item = match descr {
        "<f4" | "<i4" => 4u64,
        "<f2" => 2,
        _ => 1,
    };
    let need = header
        .len()
        .checked_mul(item)
        .ok_or("the array's byte size overflows")?;
    if (have as u64) < need {
        return Err(format!(
            "the file is truncated: the header announces {need} data bytes, the file has {have}"
        ));
    }
    Ok(())
}

/// Reorders Fortran-order elements (first axis fastest) into C order.
fn fortran_to_c(data: NpyData, shape: &[usize]) -> NpyData {
    match data {
        NpyData::F32(v) => NpyData::F32(permute_fortran(&v, shape)),
        NpyData::F16(v) => NpyData::F16(permute_fortran(&v, shape)),
        NpyData::I32(v) => NpyData::I32(permute_fortran(&v, shape)),
        NpyData::I64(v) => NpyData::I64(permute_fortran(&v, shape)),
        NpyData::Bool(v) => NpyData::Bool(permute_fortran(&v, shape)),
        NpyData::Unsupported => NpyData::Unsupported,
    }
}

fn permute_fortran<T: Copy>(src: &[T], shape: &[usize]) -> Vec<T> {
    if shape.len() < 2 {
        return src.to_vec();
    }
    // Fortran strides: axis k moves by the product of the sizes before it.
    let mut fstride = vec![1usize; shape.len()];
    for k in 1..shape.len() {
        fstride[k] = fstride[k - 1] * shape[k - 1];
    }
    let mut out = Vec::with_capacity(src.len());
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..src.len() {
        let off: usize = idx.iter().zip(&fstride).map(|(i, s)| i * s).sum();
        out.push(src[off]);
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

fn unreadable(source: &str, why: String) -> Diagnostic {
    Diagnostic::error(
        codes::NPY_UNREADABLE,
        Location::Argument {
            argument: source.to_string(),
        },
        why,
        "pass a file written by numpy.save (the .npy format, not .npz or text)",
    )
}

fn write_failed(source: &str, why: String) -> Diagnostic {
    Diagnostic::error(
        codes::OUTPUT_WRITE_FAILED,
        Location::Argument {
            argument: source.to_string(),
        },
        format!("cannot write the output file: {why}"),
        "check that the output directory (--out-dir) is writable",
    )
}

/// The accepted type strings for a tensor dtype and the numpy conversion that produces one.
fn accepted(dtype: DType) -> (&'static str, &'static str) {
    match dtype {
        DType::I32 => ("`<i4`", "a.astype('<i4')"),
        DType::Bool => ("`|b1`", "a.astype(bool)"),
        _ => ("`<f4` or `<f2`", "a.astype('<f4')"),
    }
}

fn dtype_mismatch(tensor: &str, dtype: DType, found: &str) -> Diagnostic {
    let (want, conversion) = accepted(dtype);
    Diagnostic::error(
        codes::NPY_DTYPE_MISMATCH,
        Location::Tensor {
            tensor: tensor.to_string(),
        },
        format!("the array has element type `{found}`, but a {dtype} tensor needs {want}"),
        format!("convert it with numpy before saving: np.save(path, {conversion})"),
    )
    .with("tensor_dtype", dtype)
    .with("array_dtype", found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy<T: npyz::AutoSerialize>(shape: &[u64], items: Vec<T>) -> Vec<u8> {
        let mut out = Vec::new();
        write_elems(&mut out, shape, items).expect("write");
        out
    }

    #[test]
    fn reads_f4_as_every_float_dtype_with_rounding() {
        let bytes = npy(
            &[3],
            vec![1.0f32, 1.0 + 1.0 / 1024.0 + 1e-7, 1.0 + 3.0 / 256.0],
        );
        let arr = parse_array(&bytes, "a.npy").expect("read");
        assert_eq!(arr.descr, "<f4");
        let t32 = to_tensor(arr.clone(), "A", DType::F32).expect("fp32");
        assert_eq!(t32.dtype, DType::F32);
        let t16 = to_tensor(arr.clone(), "A", DType::F16).expect("fp16");
        assert_eq!(t16.to_f64()[1], 1.0 + 1.0 / 1024.0);
        let tb = to_tensor(arr, "A", DType::BF16).expect("bf16");
        assert_eq!(tb.to_f64()[2], 1.0 + 4.0 / 256.0);
    }

    #[test]
    fn reads_f2_as_fp32() {
        let bytes = npy(&[2], vec![f16::from_f32(0.5), f16::from_f32(-2.0)]);
        let arr = parse_array(&bytes, "a.npy").expect("read");
        assert_eq!(arr.descr, "<f2");
        let t = to_tensor(arr, "A", DType::F32).expect("fp32");
        assert_eq!(t.to_f64(), vec![0.5, -2.0]);
    }

    #[test]
    fn f8_is_a_dtype_mismatch_with_a_numpy_suggestion() {
        let arr = parse_array(&npy(&[1], vec![1.0f64]), "a.npy").expect("read");
        let d = to_tensor(arr, "A", DType::F32).expect_err("f8");
        assert_eq!((d.code, d.kind), codes::NPY_DTYPE_MISMATCH);
        assert!(d.why.contains("<f8"), "{}", d.why);
        assert!(d.suggestion.contains("astype"), "{}", d.suggestion);
        assert_eq!(d.at, Location::Tensor { tensor: "A".into() });
    }

    #[test]
    fn int_and_bool_need_their_exact_types() {
        let i4 = parse_array(&npy(&[2], vec![1i32, 2]), "i.npy").expect("read");
        assert!(to_tensor(i4.clone(), "I", DType::I32).is_ok());
        assert!(to_tensor(i4, "F", DType::F32).is_err());
        // `<i8` (ONNX int64 ids) narrows to i32 when every value fits, else E0301.
        let i8 = parse_array(&npy(&[2], vec![1i64, 2]), "i.npy").expect("read");
        assert!(to_tensor(i8, "I", DType::I32).is_ok());
        let big = parse_array(&npy(&[1], vec![1i64 << 40]), "i.npy").expect("read");
        assert_eq!(
            to_tensor(big, "I", DType::I32).expect_err("2^40").code,
            "E0301"
        );
        let b = parse_array(&npy(&[2], vec![true, false]), "b.npy").expect("read");
        assert!(to_tensor(b.clone(), "B", DType::Bool).is_ok());
        assert!(to_tensor(b, "I", DType::I32).is_err());
        let f = parse_array(&npy(&[1], vec![1.0f32]), "f.npy").expect("read");
        assert!(to_tensor(f, "B", DType::Bool).is_err());
    }

    #[test]
    fn garbage_and_truncated_files_are_unreadable() {
        let d = parse_array(b"not an npy file", "x.npy").expect_err("garbage");
        assert_eq!((d.code, d.kind), codes::NPY_UNREADABLE);
        let mut bytes = npy(&[4], vec![1.0f32; 4]);
        bytes.truncate(bytes.len() - 3);
        assert_eq!(
            parse_array(&bytes, "x.npy").expect_err("trunc").code,
            "E0300"
        );
    }

    #[test]
    fn overflowing_shapes_are_unreadable_not_panics() {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296, 4294967296), }";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        let pad = 64 - (10 + header.len() + 1) % 64;
        let text = format!("{header}{}\n", " ".repeat(pad));
        bytes.extend_from_slice(&(text.len() as u16).to_le_bytes());
        bytes.extend_from_slice(text.as_bytes());
        assert_eq!(
            parse_array(&bytes, "x.npy").expect_err("overflow").code,
            "E0300"
        );
    }

    #[test]
    fn fortran_order_is_converted_to_c_order() {
        // C-order [[1,2,3],[4,5,6]] stored in Fortran order is 1,4,2,5,3,6.
        let mut out = Vec::new();
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&[2, 3])
            .order(npyz::Order::Fortran)
            .writer(&mut out)
            .begin_nd()
            .expect("begin");
        w.extend([1i32, 4, 2, 5, 3, 6]).expect("extend");
        w.finish().expect("finish");
        let arr = parse_array(&out, "f.npy").expect("read");
        assert_eq!(arr.shape, vec![2, 3]);
        assert_eq!(arr.data, NpyData::I32(vec![1, 2, 3, 4, 5, 6]));
    }

    #[test]
    fn writes_each_dtype_in_its_type_string() {
        let cases = [
            (DType::F16, "<f2"),
            (DType::BF16, "<f4"),
            (DType::F32, "<f4"),
            (DType::I32, "<i4"),
            (DType::Bool, "|b1"),
        ];
        for (dtype, descr) in cases {
            let t = Tensor::from_f64(dtype, vec![2, 2], &[0.0, 1.0, -2.0, 0.5]);
            let bytes = encode_tensor(&t).expect("encode");
            let arr = parse_array(&bytes, "o.npy").expect("read back");
            assert_eq!(arr.descr, descr, "{dtype}");
            assert_eq!(arr.shape, vec![2, 2]);
            let back = to_tensor(arr, "Y", dtype).expect("to tensor");
            assert_eq!(back, t, "{dtype}");
        }
    }

    #[test]
    fn rank0_round_trip() {
        let t = Tensor::from_f64(DType::F32, vec![], &[3.5]);
        let arr = parse_array(&encode_tensor(&t).expect("encode"), "s.npy").expect("read");
        assert_eq!(arr.shape, Vec::<usize>::new());
        assert_eq!(to_tensor(arr, "S", DType::F32).expect("t"), t);
    }
}
