//! Shape and dtype inference (symbolic sizes, defaults, normal form) of contractions, windowed
//! ops, normalizations, reductions and elementwise ops. Movement ops, graph-level behaviour and
//! the examples: `frontend_infer_movement.rs`.

mod common;
use common::fe::{doc_with, dtype, load, node, op, shape};

use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend::{load_str, CumFn, EwFn, Op, Operand, PoolMode, ReduceFn};
use serde_json::json;
use std::collections::BTreeMap;

// ---------------------------------------------------------------- contractions

#[test]
fn matmul_symbolic_and_defaults() {
    let g = load(
        &[
            ("A", "fp16", json!(["M", "K"])),
            ("B", "fp16", json!(["K", 32])),
        ],
        node("MatMul", json!(["A", "B"]), json!({})),
    );
    assert_eq!(shape(&g, "Y"), "[M, 32]");
    assert_eq!(dtype(&g, "Y"), DType::F16);
    assert_eq!(op(&g), &Op::MatMul { acc: DType::F32 });
    let g = load(
        &[("A", "fp16", json!([4, 8])), ("B", "fp16", json!([8, 2]))],
        node("MatMul", json!(["A", "B"]), json!({"acc_dtype": "fp16"})),
    );
    assert_eq!(op(&g), &Op::MatMul { acc: DType::F16 });
}

#[test]
fn matmul_1d_operands_are_promoted_and_squeezed() {
    let cases = [
        (json!(["K"]), json!(["K", "N"]), "[N]"),
        (json!(["M", "K"]), json!(["K"]), "[M]"),
        (json!([7]), json!([7]), "[]"),
        (json!(["K"]), json!([2, "K", 5]), "[2, 5]"),
        (json!([2, 1, "M", 8]), json!([3, 8, "N"]), "[2, 3, M, N]"),
    ];
    for (a, b, want) in cases {
        let g = load(
            &[("A", "fp32", a), ("B", "fp32", b)],
            node("MatMul", json!(["A", "B"]), json!({})),
        );
        assert_eq!(shape(&g, "Y"), want);
    }
}

#[test]
fn gemm_transposes_and_bias() {
    let g = load(
        &[
            ("A", "fp32", json!(["K", "M"])),
            ("B", "fp32", json!(["N", "K"])),
            ("C", "fp32", json!(["N"])),
        ],
        node(
            "GEMM",
            json!(["A", "B", "C"]),
            json!({"trans_a": true, "trans_b": true, "alpha": 0.5}),
        ),
    );
    assert_eq!(shape(&g, "Y"), "[M, N]");
    assert_eq!(
        op(&g),
        &Op::Gemm {
            trans_a: true,
            trans_b: true,
            alpha: 0.5,
            beta: 1.0,
            acc: DType::F32
        }
    );
    let g = load(
        &[
            ("A", "fp16", json!([4, 8])),
            ("B", "fp16", json!([8, 3])),
            ("C", "fp16", json!([4, 1])),
        ],
        node("GEMM", json!(["A", "B", "C"]), json!({})),
    );
    assert_eq!(shape(&g, "Y"), "[4, 3]");
}

#[test]
fn attention_shapes_scale_and_mask() {
    let g = load(
        &[
            ("Q", "fp16", json!(["B", 2, "M", 64])),
            ("K", "fp16", json!(["B", 2, "N", 64])),
            ("V", "fp16", json!(["B", 2, "N", 32])),
            ("mask", "bool", json!(["M", "N"])),
        ],
        node(
            "Attention",
            json!(["Q", "K", "V", "mask"]),
            json!({"causal": true}),
        ),
    );
    assert_eq!(shape(&g, "Y"), "[B, 2, M, 32]");
    assert_eq!(
        op(&g),
        &Op::Attention {
            causal: true,
            scale: 0.125,
            acc: DType::F32
        }
    );
    // Symbolic head dim with an explicit scale; float mask; batch broadcast.
    let g = load(
        &[
            ("Q", "fp32", json!([1, "H", "S", "D"])),
            ("K", "fp32", json!([3, 1, "S", "D"])),
            ("V", "fp32", json!(["S", "D"])),
            ("mask", "fp32", json!([1, 1, "S", "S"])),
        ],
        node(
            "Attention",
            json!(["Q", "K", "V", "mask"]),
            json!({"scale": 0.5}),
        ),
    );
    assert_eq!(shape(&g, "Y"), "[3, H, S, D]");
    assert!(matches!(op(&g), Op::Attention { scale, causal: false, .. } if *scale == 0.5));
}

// ---------------------------------------------------------------- windows

#[test]
fn conv_output_sizes_and_normal_form() {
    let g = load(
        &[
            ("X", "fp16", json!(["N", 64, 56, 56])),
            ("W", "fp16", json!([128, 64, 3, 3])),
            ("b", "fp16", json!([128])),
        ],
        node(
            "Conv",
            json!(["X", "W", "b"]),
            json!({"stride": 2, "pad": 1}),
        ),
    );
    assert_eq!(shape(&g, "Y"), "[N, 128, 28, 28]");
    let Op::Conv(a) = op(&g) else { panic!() };
    assert_eq!(a.stride, vec![2, 2]);
    assert_eq!(a.pad, vec![(1, 1), (1, 1)]);
    assert_eq!(a.dilation, vec![1, 1]);
    assert_eq!(a.output_padding, vec![0, 0]);
    assert_eq!((a.groups, a.acc), (1, DType::F32));
}

#[test]
fn conv_symbolic_spatial_groups_dilation_pairs() {
    let g = load(
        &[
            ("X", "fp32", json!([1, 8, "H", "W"])),
            ("W", "fp32", json!([16, 4, 3, 3])),
        ],
        node(
            "Conv",
            json!(["X", "W"]),
            json!({"stride": [2, 1], "pad": [[1, 0], [1, 1]], "dilation": [1, 2], "groups": 2}),
        ),
    );
    // H: floor((H + 1 - 2 - 1)/2) + 1 = (H-2)//2 + 1 = H//2 ; W: W + 2 - 4 - 1 + 1 = W-2
    assert_eq!(shape(&g, "Y"), "[1, 16, H//2, W-2]");
    let y = &g.tensor("Y").unwrap().shape;
    for (h, want) in [(9, 4), (8, 4), (2, 1)] {
        let b: BTreeMap<String, i64> = [("H".to_string(), h)].into();
        assert_eq!(y[2].eval_with(&b), Ok(want));
    }
    let Op::Conv(a) = op(&g) else { panic!() };
    assert_eq!(a.pad, vec![(1, 0), (1, 1)]);
    assert_eq!(a.groups, 2);
    // 1-D and 3-D convolutions, per-dim symmetric pad list.
    let g = load(
        &[
            ("X", "fp32", json!([2, 3, 10])),
            ("W", "fp32", json!([5, 3, 4])),
        ],
        node("Conv", json!(["X", "W"]), json!({"pad": [2]})),
    );
    assert_eq!(shape(&g, "Y"), "[2, 5, 11]");
    let g = load(
        &[
            ("X", "fp32", json!([1, 2, 8, 8, 8])),
            ("W", "fp32", json!([4, 2, 3, 3, 3])),
        ],
        node("Conv", json!(["X", "W"]), json!({})),
    );
    assert_eq!(shape(&g, "Y"), "[1, 4, 6, 6, 6]");
}

#[test]
fn conv_transpose_pytorch_formula() {
    let g = load(
        &[
            ("X", "fp32", json!([1, 8, 14, 14])),
            ("W", "fp32", json!([8, 4, 3, 3])),
        ],
        node(
            "ConvTranspose",
            json!(["X", "W"]),
            json!({"stride": 2, "pad": 1, "output_padding": 1, "groups": 2}),
        ),
    );
    // (14-1)*2 - 2 + 2 + 1 + 1 = 28; Cout = 4*2
    assert_eq!(shape(&g, "Y"), "[1, 8, 28, 28]");
    let Op::ConvTranspose(a) = op(&g) else {
        panic!()
    };
    assert_eq!(a.output_padding, vec![1, 1]);
    assert_eq!(a.groups, 2);
    let g = load(
        &[
            ("X", "fp32", json!([1, 2, "L"])),
            ("W", "fp32", json!([2, 3, 4])),
        ],
        node("ConvTranspose", json!(["X", "W"]), json!({"stride": 2})),
    );
    assert_eq!(shape(&g, "Y"), "[1, 3, 2*L+2]");
}

#[test]
fn pool_defaults_and_floor() {
    let g = load(
        &[("X", "fp16", json!(["N", 32, 33, 32]))],
        node("Pool", json!(["X"]), json!({"mode": "max", "kernel": 2})),
    );
    assert_eq!(shape(&g, "Y"), "[N, 32, 16, 16]");
    let Op::Pool(a) = op(&g) else { panic!() };
    assert_eq!(a.mode, PoolMode::Max);
    assert_eq!(a.stride, vec![2, 2]);
    assert_eq!(a.pad, vec![(0, 0), (0, 0)]);
    assert_eq!(a.dilation, vec![1, 1]);
    assert!(a.count_include_pad);
    let g = load(
        &[("X", "fp32", json!([1, 1, 7]))],
        node(
            "Pool",
            json!(["X"]),
            json!({"mode": "avg", "kernel": 3, "stride": 2, "pad": 1, "count_include_pad": false}),
        ),
    );
    assert_eq!(shape(&g, "Y"), "[1, 1, 4]");
    let Op::Pool(a) = op(&g) else { panic!() };
    assert_eq!((a.mode, a.count_include_pad), (PoolMode::Avg, false));
}

// ---------------------------------------------------------------- norms, reductions

#[test]
fn softmax_layernorm_rmsnorm() {
    let g = load(
        &[("X", "fp32", json!(["B", "S", 16]))],
        node("Softmax", json!(["X"]), json!({})),
    );
    assert_eq!(
        op(&g),
        &Op::Softmax {
            axis: 2,
            acc: DType::F32
        }
    );
    assert_eq!(shape(&g, "Y"), "[B, S, 16]");
    let g = load(
        &[
            ("X", "fp16", json!(["T", 4, 8])),
            ("g", "fp16", json!([4, 8])),
            ("b", "fp16", json!([4, 8])),
        ],
        node("LayerNorm", json!(["X", "g", "b"]), json!({"axis": -2})),
    );
    assert_eq!(
        op(&g),
        &Op::LayerNorm {
            axis: 1,
            eps: 1e-5,
            acc: DType::F32
        }
    );
    let g = load(
        &[("X", "fp32", json!(["T", 8])), ("g", "fp32", json!([8]))],
        node("RMSNorm", json!(["X", "g"]), json!({})),
    );
    assert_eq!(
        op(&g),
        &Op::RmsNorm {
            axis: 1,
            eps: 1e-6,
            acc: DType::F32
        }
    );
}

#[test]
fn reduce_axes_keepdim_acc() {
    let g = load(
        &[("X", "fp16", json!(["A", "B", "C"]))],
        node(
            "Reduce",
            json!(["X"]),
            json!({"fn": "sum", "axes": [-1, 0]}),
        ),
    );
    assert_eq!(shape(&g, "Y"), "[B]");
    assert_eq!(
        op(&g),
        &Op::Reduce {
            func: ReduceFn::Sum,
            axes: vec![0, 2],
            keepdim: false,
            acc: DType::F32
        }
    );
    let g = load(
        &[("X", "fp32", json!(["A", "B"]))],
        node(
            "Reduce",
            json!(["X"]),
            json!({"fn": "mean", "axes": 1, "keepdim": true}),
        ),
    );
    assert_eq!(shape(&g, "Y"), "[A, 1]");
    let g = load(
        &[("X", "i32", json!([3, 4]))],
        node("Reduce", json!(["X"]), json!({"fn": "max", "axes": [1]})),
    );
    assert!(matches!(
        op(&g),
        Op::Reduce {
            acc: DType::I32,
            func: ReduceFn::Max,
            ..
        }
    ));
    assert_eq!(dtype(&g, "Y"), DType::I32);
}

#[test]
fn cumulative_and_cast() {
    let g = load(
        &[("X", "fp32", json!(["N", 5]))],
        node("Cumulative", json!(["X"]), json!({"fn": "sum"})),
    );
    assert_eq!(
        op(&g),
        &Op::Cumulative {
            func: CumFn::Sum,
            axis: 1,
            reverse: false,
            exclusive: false
        }
    );
    let g = load(
        &[("X", "fp32", json!(["N", 5]))],
        node("Cast", json!(["X"]), json!({"to": "bf16"})),
    );
    assert_eq!(dtype(&g, "Y"), DType::BF16);
    assert_eq!(shape(&g, "Y"), "[N, 5]");
}

// ---------------------------------------------------------------- elementwise

#[test]
fn elementwise_broadcast_scalars_comparisons_where() {
    let g = load(
        &[
            ("a", "fp16", json!(["M", 1, 4])),
            ("b", "fp16", json!([3, 1])),
        ],
        node("Elementwise", json!(["a", "b"]), json!({"fn": "mul"})),
    );
    assert_eq!(shape(&g, "Y"), "[M, 3, 4]");
    assert_eq!(op(&g), &Op::Elementwise { func: EwFn::Mul });
    // A scalar constant adopts the tensor's dtype.
    let g = load(
        &[("a", "i32", json!([2]))],
        node("Elementwise", json!([2.0, "a"]), json!({"fn": "sub"})),
    );
    assert_eq!(dtype(&g, "Y"), DType::I32);
    assert_eq!(g.nodes[0].inputs[0], Operand::Scalar(2.0));
    // Comparisons give bool.
    let g = load(
        &[("a", "fp32", json!(["N"]))],
        node("Elementwise", json!(["a", 0]), json!({"fn": "gt"})),
    );
    assert_eq!(dtype(&g, "Y"), DType::Bool);
    // where: bool cond; a scalar branch adopts the other's dtype; two scalars give fp32.
    let g = load(
        &[("c", "bool", json!(["N", 1])), ("x", "bf16", json!([4]))],
        node("Elementwise", json!(["c", "x", 0]), json!({"fn": "where"})),
    );
    assert_eq!(
        (dtype(&g, "Y"), shape(&g, "Y")),
        (DType::BF16, "[N, 4]".into())
    );
    let g = load(
        &[("c", "bool", json!([3]))],
        node("Elementwise", json!(["c", 1, 0]), json!({"fn": "where"})),
    );
    assert_eq!(dtype(&g, "Y"), DType::F32);
    // fn at node level (seed 001).
    let text = doc_with(
        &[("x", "fp32", json!([2]))],
        json!([{"op": "Elementwise", "name": "r", "fn": "gelu_tanh", "inputs": ["x"], "outputs": ["Y"]}]),
    );
    let g = load_str(&text, "t").unwrap();
    assert_eq!(
        op(&g),
        &Op::Elementwise {
            func: EwFn::GeluTanh
        }
    );
}
