//! The GPU-independent parts of the runtime: buffer layout, launch planning, tensor bytes.

use super::*;
use serde_json::json;

fn plan() -> serde_json::Value {
    json!({
        "template": "elementwise", "tile": [128], "stages": 1, "bind": {}, "warp_tile": "-",
        "cache": [], "vectorize": {"axis": "i", "width": 1}, "predicate_tail": [],
        "epilogue": [], "arch": "sm80", "layout_hints": {}, "algo_choice": {},
        "local_edges": [],
        "async": {"enable": false, "prefetch_depth": 0, "epilogue_overlap": false},
        "barrier_model": "syncthreads"
    })
}

fn launch(kernel: &str, args: serde_json::Value, grid: serde_json::Value) -> serde_json::Value {
    json!({"launch": {
        "kernel": kernel, "template": "pointwise", "args": args, "grid": grid,
        "block": [128, 1, 1], "dyn_smem_bytes": 0, "plan": plan(), "predicted_us": 1.0
    }})
}

/// X fp16 [M, 4] → (k1) Y fp32 [M, 4]; Yf = Y as [4*M]; (k2) Z fp16 [M].
fn manifest() -> Manifest {
    let m = json!({
        "format": "dlc-egg-kernels/1", "arch": "sm80", "source": "kernels.cu",
        "header": "dlc_kernel.cuh", "symbols": ["M"],
        "buffers": [
            {"name": "X", "dtype": "fp16", "shape": ["M", 4], "role": "input"},
            {"name": "Y", "dtype": "fp32", "shape": ["M", 4], "role": "kernel"},
            {"name": "Yf", "dtype": "fp32", "shape": ["4*M"], "role": {"alias": {"of": "Y"}}},
            {"name": "Z", "dtype": "fp16", "shape": ["M"], "role": "kernel"}
        ],
        "steps": [
            launch("k1", json!([{"buffer": {"name": "X", "write": false}},
                               {"buffer": {"name": "Y", "write": true}},
                               {"symbol": {"name": "M"}}]), json!(["(4*M+127)//128", 1, 1])),
            {"alias": {"name": "Yf", "of": "Y"}},
            launch("k2", json!([{"buffer": {"name": "Yf", "write": false}},
                               {"buffer": {"name": "Z", "write": true}},
                               {"symbol": {"name": "M"}}]), json!(["(M+127)//128", 1, 1]))
        ],
        "outputs": [["Z", "Z"], ["Y", "Yf"]]
    });
    serde_json::from_value(m).expect("a valid manifest")
}

fn binds(m: i64) -> BTreeMap<String, i64> {
    BTreeMap::from([("M".to_string(), m)])
}

#[test]
fn aliases_share_storage_and_sizes_follow_the_bindings() {
    let layout = plan_buffers(&manifest(), &binds(300)).expect("layout");
    let names: Vec<(&str, usize, usize)> = layout
        .buffers
        .iter()
        .map(|b| (b.name.as_str(), b.storage, b.bytes))
        .collect();
    assert_eq!(
        names,
        vec![
            ("X", 0, 2400),
            ("Y", 1, 4800),
            ("Yf", 1, 4800),
            ("Z", 2, 600)
        ]
    );
    assert_eq!(layout.storage_bytes, vec![2400, 4800, 600]);
    assert_eq!(layout.get("Yf").map(|b| b.shape.clone()), Some(vec![1200]));
}

#[test]
fn bad_aliases_are_manifest_errors() {
    let mut m = manifest();
    m.buffers[2].shape = vec![crate::ir::region::Size(crate::ir::dim::Dim::int(3))];
    let e = plan_buffers(&m, &binds(2)).expect_err("element count");
    assert!(e.to_string().contains("does not match"), "{e}");
    let mut m = manifest();
    m.buffers[2].role = BufferRole::Alias { of: "W".into() };
    let e = plan_buffers(&m, &binds(2)).expect_err("unknown");
    assert!(e.to_string().contains("unknown `W`"), "{e}");
    let mut m = manifest();
    m.buffers[1].role = BufferRole::Alias { of: "Yf".into() };
    let e = plan_buffers(&m, &binds(2)).expect_err("cycle");
    assert!(e.to_string().contains("cycle"), "{e}");
    let mut m = manifest();
    m.steps[1] = ManifestStep::Alias {
        name: "Z".into(),
        of: "Y".into(),
    };
    let e = plan_buffers(&m, &binds(2)).expect_err("undeclared alias step");
    assert!(e.to_string().contains("not a declared alias"), "{e}");
    let e = plan_buffers(&manifest(), &BTreeMap::new()).expect_err("unbound");
    assert!(matches!(e, CudaError::Manifest { .. }), "{e}");
}

#[test]
fn launches_get_grids_storages_and_ints() {
    let m = manifest();
    let layout = plan_buffers(&m, &binds(300)).expect("layout");
    let ls = plan_launches(&m, &layout, &binds(300)).expect("launches");
    assert_eq!(ls.len(), 2);
    assert_eq!(ls[0].grid, [10, 1, 1]);
    assert_eq!(
        ls[0].args,
        vec![
            ArgValue::Storage(0),
            ArgValue::Storage(1),
            ArgValue::Int(300)
        ]
    );
    assert_eq!(ls[1].grid, [3, 1, 1]);
    assert_eq!(
        ls[1].args[0],
        ArgValue::Storage(1),
        "the alias is Y's storage"
    );
    assert!(!ls[1].is_empty());
    let layout0 = plan_buffers(&m, &binds(0)).expect("empty tensors");
    let empty = plan_launches(&m, &layout0, &binds(0)).expect("launches");
    assert!(empty.iter().all(LaunchPlan::is_empty));
    match plan_launches(&m, &layout, &binds(1 << 40)).expect_err("grid too large") {
        CudaError::GridLimit(g) => {
            assert_eq!((g.kernel.as_str(), g.axis), ("k1", 'x'));
            assert_eq!((g.value, g.limit), (1i64 << 35, i64::from(i32::MAX)));
        }
        e => panic!("{e}"),
    }
    // M tiles on grid.y: over 65535 from M = 65536·128 + 1 on (a coded diagnostic, E0404).
    let mut tall = manifest();
    if let ManifestStep::Launch(l) = &mut tall.steps[2] {
        l.grid = [
            crate::ir::region::Size(crate::ir::dim::Dim::int(1)),
            l.grid[0].clone(),
            crate::ir::region::Size(crate::ir::dim::Dim::int(1)),
        ];
    }
    let ok = binds(65535 * 128);
    let layout = plan_buffers(&tall, &ok).expect("layout");
    assert_eq!(
        plan_launches(&tall, &layout, &ok).expect("fits")[1].grid,
        [1, 65535, 1]
    );
    let over = binds(65535 * 128 + 1);
    let layout = plan_buffers(&tall, &over).expect("layout");
    let e = plan_launches(&tall, &layout, &over).expect_err("grid.y over 65535");
    assert!(
        matches!(&e, CudaError::GridLimit(g) if g.axis == 'y' && g.value == 65536),
        "{e}"
    );
    assert!(e.to_string().contains("grid.y = 65536"), "{e}");
}

#[test]
fn tensors_round_trip_through_device_bytes() {
    let cases = [
        (DType::F16, vec![1.0, -2.5, 65504.0, 0.0]),
        (DType::BF16, vec![1.0, -3.0, 0.5, 256.0]),
        (DType::F32, vec![0.1, -1e30, 7.0, 0.0]),
        (DType::I32, vec![1.0, -7.0, 3.0, 2147483647.0]),
        (DType::Bool, vec![1.0, 0.0, 0.0, 1.0]),
    ];
    for (dtype, values) in cases {
        let t = Tensor::from_f64(dtype, vec![2, 2], &values);
        let bytes = tensor_bytes(&t);
        assert_eq!(bytes.len(), 4 * dtype.size_bytes() as usize, "{dtype}");
        assert_eq!(
            tensor_from_bytes(dtype, vec![2, 2], &bytes),
            Some(t),
            "{dtype}"
        );
        assert_eq!(tensor_from_bytes(dtype, vec![3], &bytes), None, "{dtype}");
    }
    let one = Tensor::from_f64(DType::F16, vec![1], &[1.0]);
    assert_eq!(tensor_bytes(&one), vec![0x00, 0x3C], "fp16 1.0 is 0x3C00");
    let one = Tensor::from_f64(DType::BF16, vec![1], &[1.0]);
    assert_eq!(tensor_bytes(&one), vec![0x80, 0x3F], "bf16 1.0 is 0x3F80");
}

#[test]
fn inputs_are_checked_against_their_buffers() {
    let layout = plan_buffers(&manifest(), &binds(2)).expect("layout");
    let e = input_bytes(&layout, &BTreeMap::new()).expect_err("missing");
    assert!(
        matches!(&e, CudaError::Input { name, .. } if name == "X"),
        "{e}"
    );
    let wrong = Tensor::from_f64(DType::F32, vec![2, 4], &[0.0; 8]);
    let e = input_bytes(&layout, &BTreeMap::from([("X".to_string(), wrong)])).expect_err("dtype");
    assert!(e.to_string().contains("fp32"), "{e}");
    let x = Tensor::from_f64(DType::F16, vec![2, 4], &[1.0; 8]);
    let ok = input_bytes(&layout, &BTreeMap::from([("X".to_string(), x)])).expect("ok");
    assert_eq!(ok.len(), 1);
    assert_eq!((ok[0].0, ok[0].1.len()), (0, 16));
}

#[test]
fn no_driver_is_no_device_not_a_panic() {
    // On a machine with a GPU this returns the device; without one, NoDevice. Either way no
    // panic, and the error says why and what to do.
    match probe(0) {
        Ok(d) => assert!(matches!(d.compute_capability.0, 8 | 9), "{d:?}"),
        Err(CudaError::NoDevice { why, suggestion }) => {
            assert!(!why.is_empty());
            assert!(suggestion.contains("--device cpu"), "{suggestion}");
        }
        Err(e @ CudaError::UnsupportedArch { .. }) => assert!(e.to_string().contains("8.x")),
        Err(e) => panic!("unexpected: {e}"),
    }
}
