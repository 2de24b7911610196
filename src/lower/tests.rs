//! Structural tests of lowering: the naive tinygrad-order forms the later layers pattern-match.
//! Semantics are tested end to end against the reference evaluator in `tests/ops_*.rs`.

use super::lower;
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::frontend::{
    ConvAttrs, Graph, Mutability, Node, Op, Operand, Role, SigInput, SigOutput, Storage, TensorInfo,
};
use crate::ir::tiny::{Program, UOp};

fn graph(
    inputs: &[(&str, DType, Vec<Dim>)],
    op: Op,
    ops: &[&str],
    out: (DType, Vec<Dim>),
) -> Graph {
    let mut g = Graph::default();
    for (n, d, s) in inputs {
        g.signature.inputs.push(SigInput {
            tensor: n.to_string(),
            role: Role::Data,
            mutability: Mutability::Immutable,
            storage: Storage::Arg,
        });
        g.tensors.insert(
            n.to_string(),
            TensorInfo {
                dtype: *d,
                shape: s.clone(),
            },
        );
    }
    g.signature.outputs.push(SigOutput { tensor: "Y".into() });
    g.tensors.insert(
        "Y".into(),
        TensorInfo {
            dtype: out.0,
            shape: out.1,
        },
    );
    g.nodes.push(Node {
        name: "n".into(),
        op,
        inputs: ops.iter().map(|s| Operand::Tensor(s.to_string())).collect(),
        outputs: vec!["Y".into()],
    });
    g
}

fn uops(p: &Program) -> Vec<&'static str> {
    p.nodes.iter().map(|n| n.uop.name()).collect()
}

fn d(s: &str) -> Dim {
    Dim::sym(s)
}

#[test]
fn matmul_keeps_tinygrad_order() {
    // fp16 [M,K]·[K,N]: reshape x → [M,1,K]; reshape w → [1,K,N] → permute → [1,N,K]; expand
    // both; cast to fp32 after the views; MUL; REDUCE(SUM, last, fp32); cast to fp16.
    let g = graph(
        &[
            ("A", DType::F16, vec![d("M"), d("K")]),
            ("B", DType::F16, vec![d("K"), d("N")]),
        ],
        Op::MatMul { acc: DType::F32 },
        &["A", "B"],
        (DType::F16, vec![d("M"), d("N")]),
    );
    let p = lower(&g).expect("lowers");
    assert_eq!(
        uops(&p),
        [
            "INPUT", "INPUT", "RESHAPE", "RESHAPE", "PERMUTE", "EXPAND", "EXPAND", "CAST", "CAST",
            "MUL", "REDUCE", "CAST"
        ]
    );
    let red = &p.nodes[10];
    assert!(matches!(&red.uop, UOp::Reduce { axes, acc: DType::F32, .. } if axes == &vec![2]));
    assert_eq!(red.shape, vec![d("M"), d("N")]);
}

#[test]
fn matmul_1d_2d_inserts_no_axis() {
    let g = graph(
        &[
            ("x", DType::F32, vec![Dim::int(8)]),
            ("W", DType::F32, vec![Dim::int(8), Dim::int(4)]),
        ],
        Op::MatMul { acc: DType::F32 },
        &["x", "W"],
        (DType::F32, vec![Dim::int(4)]),
    );
    let p = lower(&g).expect("lowers");
    // x stays [8]; W → [8,4] permute → [4,8]; x expands to [4,8] via reshape [1,8].
    assert_eq!(
        uops(&p),
        ["INPUT", "INPUT", "PERMUTE", "RESHAPE", "EXPAND", "MUL", "REDUCE"]
    );
}

#[test]
fn conv_is_pad_view_reshape_expand_permute_mul_reduce() {
    let s = |v: &[i64]| v.iter().map(|x| Dim::int(*x)).collect::<Vec<_>>();
    let g = graph(
        &[
            ("X", DType::F32, s(&[1, 4, 8, 8])),
            ("W", DType::F32, s(&[6, 4, 3, 3])),
        ],
        Op::Conv(ConvAttrs {
            stride: vec![2, 2],
            pad: vec![(1, 1), (1, 1)],
            dilation: vec![1, 1],
            groups: 1,
            acc: DType::F32,
            output_padding: vec![0, 0],
        }),
        &["X", "W"],
        (DType::F32, s(&[1, 6, 4, 4])),
    );
    let p = lower(&g).expect("lowers");
    assert_eq!(
        uops(&p),
        [
            "INPUT", "INPUT", "PAD", "VIEW", "RESHAPE", "EXPAND", "PERMUTE", "RESHAPE", "EXPAND",
            "MUL", "REDUCE", "RESHAPE"
        ]
    );
    let view = p
        .nodes
        .iter()
        .find(|n| n.uop.name() == "VIEW")
        .expect("view");
    assert_eq!(view.shape, s(&[1, 4, 4, 4, 3, 3]));
    let UOp::View { map } = &view.uop else {
        unreachable!()
    };
    let m: Vec<String> = map.iter().map(|e| e.to_string()).collect();
    assert_eq!(m, ["i0", "i1", "2*i2+i4", "2*i3+i5"]);
    assert!(matches!(&p.nodes[10].uop, UOp::Reduce { axes, .. } if axes == &vec![5, 6, 7]));
}

#[test]
fn shape_mismatch_with_frontend_is_a_diagnostic_not_a_panic() {
    let g = graph(
        &[
            ("A", DType::F32, vec![Dim::int(2), Dim::int(3)]),
            ("B", DType::F32, vec![Dim::int(3), Dim::int(4)]),
        ],
        Op::MatMul { acc: DType::F32 },
        &["A", "B"],
        (DType::F32, vec![Dim::int(2), Dim::int(5)]),
    );
    let err = lower(&g).unwrap_err();
    assert_eq!(err.first_code(), "E1100");
}
