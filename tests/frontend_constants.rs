//! The `constants` section's `.safetensors` files: mapped, their header read at load, float
//! weights decoded when first asked for; every problem a coded diagnostic at load.

use dlc_egg::ir::frontend::load_str_in;
use dlc_egg::tensor::TensorData;
use safetensors::tensor::{Dtype, TensorView};
use std::path::Path;

/// A graph with inputs `w` (`dtype`, `shape`) and `i` (i32 [2]) read from `file`.
fn graph(dtype: &str, shape: &[usize], file: &str, key: &str) -> String {
    serde_json::json!({
        "signature": {
            "inputs": [{"tensor": "w", "role": "param"}, {"tensor": "i", "role": "param"}],
            "outputs": [{"tensor": "y"}]
        },
        "tensors": {
            "w": {"dtype": dtype, "shape": shape},
            "i": {"dtype": "i32", "shape": [2]},
            "y": {"dtype": dtype, "shape": shape}
        },
        "graph": [{"op": "Elementwise", "name": "r", "inputs": ["w"], "outputs": ["y"],
                   "attrs": {"fn": "relu"}}],
        "constants": {"w": {"file": file, "key": key}, "i": {"file": file, "key": "i"}}
    })
    .to_string()
}

/// Writes `w` (from `bytes`, stored as `dtype` of `shape`) and `i` (I64 values) to `path`.
fn write(path: &Path, dtype: Dtype, shape: &[usize], bytes: &[u8], i: &[i64]) {
    let ib: Vec<u8> = i.iter().flat_map(|v| v.to_le_bytes()).collect();
    let views = vec![
        ("w", TensorView::new(dtype, shape.to_vec(), bytes).unwrap()),
        (
            "i",
            TensorView::new(Dtype::I64, vec![i.len()], &ib).unwrap(),
        ),
    ];
    safetensors::serialize_to_file(views, None, path).unwrap();
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn float_weights_are_decoded_when_first_read() {
    let dir = tempfile::tempdir().unwrap();
    let v = [1.5f32, -2.0, 3.25, 0.1];
    write(
        &dir.path().join("w.safetensors"),
        Dtype::F32,
        &[2, 2],
        &f32_bytes(&v),
        &[7, -3],
    );
    let g = load_str_in(
        &graph("fp32", &[2, 2], "w.safetensors", "w"),
        "g.json",
        dir.path(),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let w = g.constants.constant("w").unwrap();
    assert!(!w.is_computed(), "a weight is not decoded by loading");
    assert_eq!(w.shape(), &[2, 2]);
    assert_eq!(w.value().data, TensorData::F32(v.to_vec()));
    // Integer tensors are decoded (and range-checked) at load.
    assert!(g.constants.constant("i").unwrap().is_computed());
    assert_eq!(
        g.constants.get("i").unwrap().data,
        TensorData::I32(vec![7, -3])
    );
}

#[test]
fn half_weights_round_to_the_declared_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let v = [1.0f32, 0.333_333_34, -65504.0, 1e-8];
    let h: Vec<u8> = v
        .iter()
        .flat_map(|x| half::bf16::from_f32(*x).to_le_bytes())
        .collect();
    write(
        &dir.path().join("w.safetensors"),
        Dtype::BF16,
        &[4],
        &h,
        &[0, 1],
    );
    let g = load_str_in(
        &graph("fp16", &[4], "w.safetensors", "w"),
        "g.json",
        dir.path(),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let want: Vec<f32> = v
        .iter()
        .map(|x| half::f16::from_f32(half::bf16::from_f32(*x).to_f32()).to_f32())
        .collect();
    assert_eq!(g.constants.get("w").unwrap().data, TensorData::F32(want));
}

/// Loads the one-weight graph over `file` in `dir`; the codes and text of the diagnostics.
fn failure(dir: &Path, file: &str, key: &str, shape: &[usize]) -> (Vec<&'static str>, String) {
    match load_str_in(&graph("fp32", shape, file, key), "g.json", dir) {
        Ok(_) => panic!("loaded"),
        Err(d) => (d.codes(), d.to_string()),
    }
}

#[test]
fn every_problem_is_a_coded_diagnostic_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let v = f32_bytes(&[1.0, 2.0, 3.0, 4.0]);
    write(
        &dir.path().join("ok.safetensors"),
        Dtype::F32,
        &[2, 2],
        &v,
        &[1, 2],
    );
    std::fs::write(
        dir.path().join("bad.safetensors"),
        b"not a safetensors file",
    )
    .unwrap();
    write(
        &dir.path().join("big.safetensors"),
        Dtype::F32,
        &[2, 2],
        &v,
        &[1, 1 << 40],
    );

    let (codes, text) = failure(dir.path(), "missing.safetensors", "w", &[2, 2]);
    assert!(codes.iter().all(|c| *c == "E0007"), "{codes:?}");
    assert!(text.contains("cannot read constants file"), "{text}");

    let (codes, text) = failure(dir.path(), "bad.safetensors", "w", &[2, 2]);
    assert!(codes.contains(&"E0007"), "{codes:?}");
    assert!(text.contains("not a valid .safetensors file"), "{text}");

    let (codes, text) = failure(dir.path(), "ok.safetensors", "nope", &[2, 2]);
    assert_eq!(codes, ["E0007"]);
    assert!(text.contains("no tensor `nope`"), "{text}");

    let (codes, text) = failure(dir.path(), "ok.safetensors", "w", &[4]);
    assert_eq!(codes, ["E0006"]);
    assert!(text.contains("has shape [2, 2] in the file"), "{text}");

    let (codes, text) = failure(dir.path(), "big.safetensors", "w", &[2, 2]);
    assert_eq!(codes, ["E0006"]);
    assert!(text.contains("does not fit in i32"), "{text}");

    let (codes, text) = failure(dir.path(), ".", "w", &[2, 2]);
    assert!(codes.iter().all(|c| *c == "E0007"), "{codes:?}");
    assert!(text.contains("not a regular file"), "{text}");
}
