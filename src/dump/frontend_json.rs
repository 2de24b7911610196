//! `--dump frontend`: the loaded, normalized frontend graph as JSON, in the shape of `graph.json`
//! (`signature`, `symbols`, `tensors`, `graph`) with every attribute in its normal form (defaults
//! filled in, axes non-negative, pads as `[lo, hi]` pairs) and every tensor, inferred ones
//! included. Deterministic: tensors are sorted by name, nodes are in topological order.

use crate::ir::frontend::{
    ConvAttrs, CumFn, Graph, Node, Op, Operand, PoolAttrs, PoolMode, ReduceFn,
};
use crate::ir::tiny::scalar_json;
use serde_json::{json, Map, Value};

/// The frontend graph as a JSON document.
pub fn graph_to_json(g: &Graph) -> Value {
    let tensors: Map<String, Value> = g
        .tensors
        .iter()
        .map(|(k, t)| (k.clone(), json!({"dtype": t.dtype, "shape": t.shape})))
        .collect();
    let nodes: Vec<Value> = g.nodes.iter().map(node_json).collect();
    json!({
        "signature": g.signature,
        "symbols": g.symbols,
        "tensors": tensors,
        "graph": nodes,
    })
}

fn node_json(n: &Node) -> Value {
    let inputs: Vec<Value> = n.inputs.iter().map(operand_json).collect();
    json!({
        "op": n.op.name(),
        "name": n.name,
        "inputs": inputs,
        "outputs": n.outputs,
        "attrs": attrs_json(&n.op),
    })
}

fn operand_json(o: &Operand) -> Value {
    match o {
        Operand::Tensor(t) => Value::String(t.clone()),
        Operand::Scalar(v) => scalar_json(*v),
    }
}

fn pairs(p: &[(i64, i64)]) -> Vec<[i64; 2]> {
    p.iter().map(|(l, h)| [*l, *h]).collect()
}

fn conv_json(c: &ConvAttrs, transpose: bool) -> Value {
    let mut v = json!({
        "stride": c.stride,
        "pad": pairs(&c.pad),
        "dilation": c.dilation,
        "groups": c.groups,
        "acc_dtype": c.acc,
    });
    if transpose {
        v["output_padding"] = json!(c.output_padding);
    }
    v
}

fn pool_json(p: &PoolAttrs) -> Value {
    let mode = match p.mode {
        PoolMode::Max => "max",
        PoolMode::Avg => "avg",
    };
    json!({
        "mode": mode,
        "kernel": p.kernel,
        "stride": p.stride,
        "pad": pairs(&p.pad),
        "dilation": p.dilation,
        "count_include_pad": p.count_include_pad,
    })
}

fn reduce_name(f: ReduceFn) -> &'static str {
    match f {
        ReduceFn::Sum => "sum",
        ReduceFn::Max => "max",
        ReduceFn::Min => "min",
        ReduceFn::Mean => "mean",
        ReduceFn::Prod => "prod",
    }
}

fn cum_name(f: CumFn) -> &'static str {
    match f {
        CumFn::Sum => "sum",
        CumFn::Prod => "prod",
        CumFn::Max => "max",
        CumFn::Min => "min",
    }
}

fn attrs_json(op: &Op) -> Value {
    match op {
        Op::MatMul { acc } => json!({ "acc_dtype": acc }),
        Op::Gemm {
            trans_a,
            trans_b,
            alpha,
            beta,
            acc,
        } => json!({
            "trans_a": trans_a,
            "trans_b": trans_b,
            "alpha": scalar_json(*alpha),
            "beta": scalar_json(*beta),
            "acc_dtype": acc,
        }),
        Op::Conv(c) => conv_json(c, false),
        Op::ConvTranspose(c) => conv_json(c, true),
        Op::Pool(p) => pool_json(p),
        Op::Attention { causal, scale, acc } => {
            json!({"causal": causal, "scale": scalar_json(*scale), "acc_dtype": acc})
        }
        Op::Softmax { axis, acc } => json!({ "axis": axis, "acc_dtype": acc }),
        Op::LayerNorm { axis, eps, acc } | Op::RmsNorm { axis, eps, acc } => {
            json!({"axis": axis, "eps": scalar_json(*eps), "acc_dtype": acc})
        }
        Op::Elementwise { func } => json!({ "fn": func.name() }),
        Op::Reduce {
            func,
            axes,
            keepdim,
            acc,
        } => json!({
            "fn": reduce_name(*func),
            "axes": axes,
            "keepdim": keepdim,
            "acc_dtype": acc,
        }),
        Op::Cumulative {
            func,
            axis,
            reverse,
            exclusive,
        } => json!({
            "fn": cum_name(*func),
            "axis": axis,
            "reverse": reverse,
            "exclusive": exclusive,
        }),
        Op::Cast { to } => json!({ "to": to }),
        Op::Reshape { shape } => json!({ "shape": shape }),
        Op::Permute { perm } => json!({ "perm": perm }),
        Op::Expand { shape } => json!({ "shape": shape }),
        Op::Pad { pad, value } => json!({"pad": pairs(pad), "value": scalar_json(*value)}),
        Op::Slice {
            starts,
            ends,
            steps,
        } => json!({"starts": starts, "ends": ends, "steps": steps}),
        Op::Flip { axes } => json!({ "axes": axes }),
        Op::Concat { axis } => json!({ "axis": axis }),
        Op::Repeat { repeats } => json!({ "repeats": repeats }),
        Op::Unfold { axis, size, step } => json!({"axis": axis, "size": size, "step": step}),
        Op::Gather { axis } => json!({ "axis": axis }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::dim::Dim;
    use crate::ir::dtype::DType;
    use crate::ir::frontend::{SigOutput, TensorInfo};

    #[test]
    fn dumps_nodes_with_normalized_attrs() {
        let mut g = Graph::default();
        g.signature.outputs.push(SigOutput { tensor: "Y".into() });
        g.tensors.insert(
            "Y".into(),
            TensorInfo {
                dtype: DType::F32,
                shape: vec![Dim::sym("M"), Dim::int(4)],
            },
        );
        g.nodes.push(Node {
            name: "p".into(),
            op: Op::Pad {
                pad: vec![(1, 2)],
                value: f64::NEG_INFINITY,
            },
            inputs: vec![Operand::Tensor("X".into()), Operand::Scalar(0.5)],
            outputs: vec!["Y".into()],
        });
        let v = graph_to_json(&g);
        assert_eq!(v["tensors"]["Y"]["shape"], json!(["M", 4]));
        assert_eq!(v["graph"][0]["attrs"]["pad"], json!([[1, 2]]));
        assert_eq!(v["graph"][0]["attrs"]["value"], json!("-inf"));
        assert_eq!(v["graph"][0]["inputs"], json!(["X", 0.5]));
        assert_eq!(v["signature"]["outputs"], json!([{"tensor": "Y"}]));
    }
}
