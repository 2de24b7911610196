use super::*;
use crate::ir::frontend::{
    Mutability, Node, Op, Operand, Role, SigInput, SigOutput, Signature, Storage,
};
use crate::tensor::TensorData;

fn sig_in(t: &str) -> SigInput {
    SigInput {
        tensor: t.into(),
        role: Role::Data,
        mutability: Mutability::Immutable,
        storage: Storage::Arg,
    }
}

fn info(dtype: DType, shape: Vec<Dim>) -> TensorInfo {
    TensorInfo { dtype, shape }
}

/// `Y = gather(X[M, 5], I[2, 3], axis 1)`, plus an unused bool input `B`.
fn graph() -> Graph {
    let mut g = Graph {
        signature: Signature {
            inputs: vec![sig_in("X"), sig_in("I"), sig_in("B")],
            outputs: vec![SigOutput { tensor: "Y".into() }],
        },
        ..Graph::default()
    };
    g.symbols.insert("M".into(), 2);
    g.tensors.insert(
        "X".into(),
        info(DType::F16, vec![Dim::sym("M"), Dim::int(5)]),
    );
    g.tensors
        .insert("I".into(), info(DType::I32, vec![Dim::int(2), Dim::int(3)]));
    g.tensors.insert("B".into(), info(DType::Bool, vec![]));
    g.tensors
        .insert("Y".into(), info(DType::F16, vec![Dim::int(2), Dim::int(3)]));
    g.nodes.push(Node {
        name: "g".into(),
        op: Op::Gather { axis: 1 },
        inputs: vec![Operand::Tensor("X".into()), Operand::Tensor("I".into())],
        outputs: vec!["Y".into()],
    });
    g
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dlc-egg-run-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn save(dir: &Path, name: &str, t: &Tensor) -> PathBuf {
    let p = dir.join(name);
    npy::write_tensor(&p, t).expect("write");
    p
}

#[test]
fn missing_inputs_are_reported_each() {
    let e = prepare_inputs(&graph(), &[], &BTreeMap::new(), None).expect_err("missing");
    assert!(!e.internal);
    assert_eq!(e.diagnostics.codes(), vec!["E0303"; 3]);
    assert!(e.diagnostics.0[0].suggestion.contains("--random"));
}

#[test]
fn unknown_and_duplicate_inputs() {
    let g = graph();
    let ins = vec![
        ("Y".to_string(), PathBuf::from("y.npy")),
        ("X".to_string(), PathBuf::from("a.npy")),
        ("X".to_string(), PathBuf::from("b.npy")),
    ];
    let e = check_input_names(&g, &ins).expect_err("bad names");
    assert_eq!(e.diagnostics.codes(), vec!["E0309", "E0310"]);
    assert!(e.diagnostics.0[0].why.contains("output"));
}

#[test]
fn dtype_and_shape_are_checked() {
    let dir = temp_dir("checks");
    let x_bad_dtype = save(
        &dir,
        "x.npy",
        &Tensor::from_f64(DType::I32, vec![2, 5], &[0.0; 10]),
    );
    let ins = vec![("X".to_string(), x_bad_dtype)];
    let e = prepare_inputs(&graph(), &ins, &BTreeMap::new(), Some(0)).expect_err("dtype");
    assert_eq!(e.diagnostics.first_code(), "E0301");

    let x_bad_shape = save(
        &dir,
        "x2.npy",
        &Tensor::from_f64(DType::F32, vec![3, 4], &[0.0; 12]),
    );
    let ins = vec![("X".to_string(), x_bad_shape)];
    let e = prepare_inputs(&graph(), &ins, &BTreeMap::new(), Some(0)).expect_err("shape");
    assert_eq!(e.diagnostics.first_code(), "E0302");
    assert!(e.diagnostics.0[0].why.contains("[M, 5]"));

    // Rank and constant sizes fit, but M (bound to 2) does not: a shape mismatch here, or a
    // symbol conflict if resolve_symbols reports it first.
    let x_bad_symbol = save(
        &dir,
        "x3.npy",
        &Tensor::from_f64(DType::F32, vec![3, 5], &[0.0; 15]),
    );
    let ins = vec![("X".to_string(), x_bad_symbol)];
    let bind = BTreeMap::from([("M".to_string(), 2)]);
    let e = prepare_inputs(&graph(), &ins, &bind, Some(0)).expect_err("M");
    let code = e.diagnostics.first_code();
    assert!(code == "E0302" || code.starts_with("E02"), "{code}");

    let ins = vec![("X".to_string(), dir.join("absent.npy"))];
    let e = prepare_inputs(&graph(), &ins, &BTreeMap::new(), Some(0)).expect_err("absent");
    assert_eq!(e.diagnostics.first_code(), "E0300");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn random_fills_only_missing_inputs_deterministically() {
    let dir = temp_dir("random");
    let x = Tensor::from_f64(DType::F32, vec![2, 5], &[0.25; 10]);
    let ins = vec![("X".to_string(), save(&dir, "x.npy", &x))];
    let a = prepare_inputs(&graph(), &ins, &BTreeMap::new(), Some(7)).expect("a");
    let b = prepare_inputs(&graph(), &ins, &BTreeMap::new(), Some(7)).expect("b");
    assert_eq!(a, b);
    let c = prepare_inputs(&graph(), &ins, &BTreeMap::new(), Some(8)).expect("c");
    assert_ne!(a.tensors["I"], c.tensors["I"]);
    // The given input is kept (converted to fp16), not replaced.
    assert_eq!(a.tensors["X"].to_f64(), vec![0.25; 10]);
    assert_eq!(a.tensors["X"].dtype, DType::F16);
    assert_eq!(a.tensors["I"].shape, vec![2, 3]);
    assert_eq!(a.tensors["B"].shape, Vec::<usize>::new());
    let bytes = |t: &Tensor| npy::encode_tensor(t).expect("encode");
    assert_eq!(bytes(&a.tensors["I"]), bytes(&b.tensors["I"]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gather_indices_stay_in_range() {
    let bounds = gather_index_bounds(&graph(), &BTreeMap::new());
    assert_eq!(bounds.get("I"), Some(&5));
    let t = random_tensor(DType::I32, vec![1000], 3, 1, 5);
    let TensorData::I32(v) = &t.data else {
        panic!("i32 data")
    };
    assert!(v.iter().all(|x| (0..5).contains(x)));
    assert!(v.contains(&4), "covers the range");
}

#[test]
fn unbound_and_huge_sizes_are_diagnostics() {
    let i = info(DType::F32, vec![Dim::sym("N")]);
    let d = concrete_shape("T", &i, &BTreeMap::new()).expect_err("unbound");
    assert_eq!(d.code, "E0314");
    let big = BTreeMap::from([("N".to_string(), i64::MAX)]);
    let i2 = info(DType::F32, vec![Dim::sym("N"), Dim::sym("N")]);
    assert_eq!(
        concrete_shape("T", &i2, &big).expect_err("big").code,
        "E0314"
    );
}

#[test]
fn output_names_cannot_escape_the_directory() {
    assert_eq!(output_file_name("Y"), "Y");
    assert_eq!(output_file_name("../etc/x"), "_.._etc_x");
    assert_eq!(output_file_name(""), "_");
}

#[test]
fn cuda_needs_a_gpu_driver_and_nvrtc() {
    assert_eq!(check_device(Device::Reference), Ok(None));
    // A GPU machine with NVRTC gets its device; any other gets E0400, a user error.
    if let Err(e) = check_device(Device::Cuda) {
        assert_eq!(e.diagnostics.first_code(), "E0400");
        assert!(!e.internal);
    }
}

#[test]
fn evaluator_outputs_are_checked() {
    let g = graph();
    let b = BTreeMap::from([("M".to_string(), 2)]);
    let good = Tensor::from_f64(DType::F16, vec![2, 3], &[0.0; 6]);
    let outs = BTreeMap::from([("Y".to_string(), good)]);
    assert!(check_outputs(&g, &outs, &b).is_ok());
    let bad = Tensor::from_f64(DType::F32, vec![2, 3], &[0.0; 6]);
    let outs = BTreeMap::from([("Y".to_string(), bad)]);
    let e = check_outputs(&g, &outs, &b).expect_err("dtype");
    assert!(e.internal);
    assert_eq!(e.diagnostics.first_code(), "E0316");
    let e = check_outputs(&g, &BTreeMap::new(), &b).expect_err("missing");
    assert_eq!(e.diagnostics.first_code(), "E0315");
}

#[test]
fn missing_evaluator_output_is_internal() {
    let dir = temp_dir("out");
    let e = write_outputs(&graph(), &BTreeMap::new(), &dir).expect_err("no outputs");
    assert!(e.internal);
    let _ = std::fs::remove_dir_all(&dir);
}
