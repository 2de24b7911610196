//! `.npy` I/O through the public API: arrays written with `npyz` (as numpy would write them) are
//! read back with `dlc_egg::npy`, and tensors written by `dlc_egg::npy` are read back with `npyz`.

use dlc_egg::ir::dtype::DType;
use dlc_egg::npy::{read_array, to_tensor, write_tensor, NpyData};
use dlc_egg::tensor::{Tensor, TensorData};
use half::f16;
use npyz::WriterBuilder;
use std::path::{Path, PathBuf};

fn save<T: npyz::AutoSerialize>(dir: &Path, name: &str, shape: &[u64], items: Vec<T>) -> PathBuf {
    let path = dir.join(name);
    let mut bytes = Vec::new();
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(&mut bytes)
        .begin_nd()
        .expect("begin");
    w.extend(items).expect("extend");
    w.finish().expect("finish");
    std::fs::write(&path, bytes).expect("write");
    path
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

#[test]
fn f4_array_feeds_fp32_fp16_bf16_tensors() {
    let dir = tmp();
    let p = save(
        dir.path(),
        "a.npy",
        &[2, 2],
        vec![0.1f32, -0.5, 3.0, 65504.0],
    );
    let arr = read_array(&p).expect("read");
    assert_eq!(arr.descr, "<f4");
    assert_eq!(arr.shape, vec![2, 2]);
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let t = to_tensor(arr.clone(), "A", dtype).expect("float");
        assert_eq!(t.dtype, dtype);
        assert_eq!(t.shape, vec![2, 2]);
        let expected: Vec<f64> = [0.1f32, -0.5, 3.0, 65504.0]
            .iter()
            .map(|x| dtype.round(*x as f64))
            .collect();
        assert_eq!(t.to_f64(), expected, "{dtype}");
    }
}

#[test]
fn f2_array_feeds_float_tensors() {
    let dir = tmp();
    let vals = vec![
        f16::from_f32(1.5),
        f16::from_f32(-0.25),
        f16::from_f32(1000.0),
    ];
    let p = save(dir.path(), "h.npy", &[3], vals);
    let arr = read_array(&p).expect("read");
    assert_eq!(arr.descr, "<f2");
    let t = to_tensor(arr.clone(), "H", DType::F32).expect("fp32");
    assert_eq!(t.to_f64(), vec![1.5, -0.25, 1000.0]);
    let b = to_tensor(arr, "H", DType::BF16).expect("bf16");
    assert_eq!(b.to_f64(), vec![1.5, -0.25, 1000.0]);
}

#[test]
fn i4_and_b1_arrays() {
    let dir = tmp();
    let i = read_array(&save(dir.path(), "i.npy", &[3], vec![1i32, -2, 7])).expect("i4");
    assert_eq!(i.descr, "<i4");
    let t = to_tensor(i, "I", DType::I32).expect("i32");
    assert_eq!(t.data, TensorData::I32(vec![1, -2, 7]));
    let b = read_array(&save(dir.path(), "b.npy", &[2], vec![true, false])).expect("b1");
    assert_eq!(b.descr, "|b1");
    let t = to_tensor(b, "B", DType::Bool).expect("bool");
    assert_eq!(t.data, TensorData::Bool(vec![true, false]));
}

#[test]
fn every_wrong_pairing_is_e0301() {
    let dir = tmp();
    let f8 = read_array(&save(dir.path(), "d.npy", &[1], vec![1.0f64])).expect("f8");
    // `<i8` narrows to i32 when every value fits (ONNX int64 ids); 2^40 does not.
    let i8 = read_array(&save(dir.path(), "l.npy", &[1], vec![1i64 << 40])).expect("i8");
    let u1 = read_array(&save(dir.path(), "u.npy", &[1], vec![1u8])).expect("u1");
    let f4 = read_array(&save(dir.path(), "f.npy", &[1], vec![1.0f32])).expect("f4");
    let i4 = read_array(&save(dir.path(), "i.npy", &[1], vec![1i32])).expect("i4");
    let b1 = read_array(&save(dir.path(), "b.npy", &[1], vec![true])).expect("b1");
    assert_eq!(f8.data, NpyData::Unsupported);
    let cases = [
        (&f8, DType::F32),
        (&f8, DType::F16),
        (&i8, DType::I32),
        (&u1, DType::Bool),
        (&f4, DType::I32),
        (&f4, DType::Bool),
        (&i4, DType::F32),
        (&i4, DType::Bool),
        (&b1, DType::I32),
        (&b1, DType::F16),
    ];
    for (arr, dtype) in cases {
        let d = to_tensor(arr.clone(), "T", dtype).expect_err("mismatch");
        assert_eq!((d.code, d.kind), ("E0301", "NpyDtypeMismatch"), "{dtype}");
        assert!(d.why.contains(&arr.descr), "{}", d.why);
        assert!(
            d.suggestion.contains("np.save") || d.suggestion.contains("32 bits"),
            "{}",
            d.suggestion
        );
    }
}

#[test]
fn unreadable_files_are_e0300() {
    let dir = tmp();
    let missing = read_array(&dir.path().join("nope.npy")).expect_err("missing");
    assert_eq!((missing.code, missing.kind), ("E0300", "NpyUnreadable"));
    let text = dir.path().join("t.npy");
    std::fs::write(&text, "1.0 2.0 3.0\n").expect("write");
    assert_eq!(read_array(&text).expect_err("text").code, "E0300");
    let p = save(dir.path(), "x.npy", &[8], vec![1.0f32; 8]);
    let mut bytes = std::fs::read(&p).expect("read");
    bytes.truncate(bytes.len() - 5);
    std::fs::write(&p, bytes).expect("write");
    assert_eq!(read_array(&p).expect_err("truncated").code, "E0300");
    // A |b1 byte other than 0 or 1 is corrupt data.
    let p = save(dir.path(), "bad_bool.npy", &[2], vec![true, false]);
    let mut bytes = std::fs::read(&p).expect("read");
    let n = bytes.len();
    bytes[n - 1] = 7;
    std::fs::write(&p, bytes).expect("write");
    assert_eq!(read_array(&p).expect_err("bad bool").code, "E0300");
}

#[test]
fn fortran_order_arrays_are_read_in_c_order() {
    let dir = tmp();
    let path = dir.path().join("f.npy");
    let mut bytes = Vec::new();
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&[2, 2, 3])
        .order(npyz::Order::Fortran)
        .writer(&mut bytes)
        .begin_nd()
        .expect("begin");
    // Element (i, j, k) = 100i + 10j + k, written first axis fastest.
    let mut items = Vec::new();
    for k in 0..3 {
        for j in 0..2 {
            for i in 0..2 {
                items.push((100 * i + 10 * j + k) as f32);
            }
        }
    }
    w.extend(items).expect("extend");
    w.finish().expect("finish");
    std::fs::write(&path, bytes).expect("write");
    let t = to_tensor(read_array(&path).expect("read"), "F", DType::F32).expect("t");
    let expected: Vec<f64> = (0..2)
        .flat_map(|i| (0..2).flat_map(move |j| (0..3).map(move |k| (100 * i + 10 * j + k) as f64)))
        .collect();
    assert_eq!(t.to_f64(), expected);
}

fn read_back_with_npyz(path: &Path) -> (String, Vec<u64>, npyz::NpyFile<std::io::Cursor<Vec<u8>>>) {
    let bytes = std::fs::read(path).expect("read");
    let file = npyz::NpyFile::new(std::io::Cursor::new(bytes)).expect("npy");
    let descr = match file.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => other.descr(),
    };
    (descr, file.shape().to_vec(), file)
}

#[test]
fn outputs_are_written_in_their_dtype() {
    let dir = tmp();
    let vals = [0.0, 1.0, -1.5, 2.0, 0.25, 8.0];
    // fp16 as <f2
    let p = dir.path().join("h.npy");
    write_tensor(&p, &Tensor::from_f64(DType::F16, vec![2, 3], &vals)).expect("write");
    let (descr, shape, file) = read_back_with_npyz(&p);
    assert_eq!((descr.as_str(), shape), ("<f2", vec![2, 3]));
    let got: Vec<f64> = file
        .into_vec::<f16>()
        .expect("f16")
        .iter()
        .map(|x| x.to_f64())
        .collect();
    assert_eq!(got, vals);
    // fp32 and bf16 as <f4
    for dtype in [DType::F32, DType::BF16] {
        let p = dir.path().join(format!("{dtype}.npy"));
        write_tensor(&p, &Tensor::from_f64(dtype, vec![6], &vals)).expect("write");
        let (descr, shape, file) = read_back_with_npyz(&p);
        assert_eq!((descr.as_str(), shape), ("<f4", vec![6]));
        let got: Vec<f64> = file
            .into_vec::<f32>()
            .expect("f32")
            .iter()
            .map(|x| *x as f64)
            .collect();
        assert_eq!(got, vals);
    }
    // i32 as <i4, bool as |b1
    let p = dir.path().join("i.npy");
    write_tensor(
        &p,
        &Tensor::from_f64(DType::I32, vec![3], &[1.0, -2.0, 3.0]),
    )
    .expect("write");
    let (descr, _, file) = read_back_with_npyz(&p);
    assert_eq!(descr, "<i4");
    assert_eq!(file.into_vec::<i32>().expect("i32"), vec![1, -2, 3]);
    let p = dir.path().join("b.npy");
    write_tensor(&p, &Tensor::from_f64(DType::Bool, vec![2], &[1.0, 0.0])).expect("write");
    let (descr, _, file) = read_back_with_npyz(&p);
    assert_eq!(descr, "|b1");
    assert_eq!(file.into_vec::<bool>().expect("bool"), vec![true, false]);
}

#[test]
fn write_then_read_round_trips_every_dtype() {
    let dir = tmp();
    for dtype in DType::ALL {
        let t = Tensor::from_f64(dtype, vec![1, 2, 2], &[0.5, -1.0, 0.0, 3.0]);
        let p = dir.path().join(format!("rt_{dtype}.npy"));
        write_tensor(&p, &t).expect("write");
        let back = to_tensor(read_array(&p).expect("read"), "T", dtype).expect("convert");
        assert_eq!(back, t, "{dtype}");
    }
}

#[test]
fn unwritable_output_is_a_diagnostic() {
    let dir = tmp();
    let p = dir.path().join("no_such_dir").join("y.npy");
    let d = write_tensor(&p, &Tensor::from_f64(DType::F32, vec![1], &[1.0])).expect_err("dir");
    assert_eq!(d.code, "E0312");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn shape_and_values() -> impl Strategy<Value = (Vec<usize>, Vec<f64>)> {
        prop::collection::vec(0usize..4, 0..4).prop_flat_map(|shape| {
            let n: usize = shape.iter().product();
            (
                Just(shape),
                prop::collection::vec(-70000.0f64..70000.0, n..=n),
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever `write_tensor` writes, `read_array` + `to_tensor` give back unchanged.
        #[test]
        fn any_tensor_round_trips((shape, values) in shape_and_values(), which in 0usize..5) {
            let dtype = DType::ALL[which];
            let t = Tensor::from_f64(dtype, shape, &values);
            let dir = tmp();
            let p = dir.path().join("t.npy");
            write_tensor(&p, &t).expect("write");
            let back = to_tensor(read_array(&p).expect("read"), "T", dtype).expect("convert");
            prop_assert_eq!(back, t);
        }
    }
}
