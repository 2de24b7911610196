//! `--dump tiny`: Tiny IR as seed 002 JSON (`{"uops": [{"id","uop","src","arg",…}]}`), plus the
//! dtype and shape of every node and the program's signature. Output is deterministic: the same
//! program always prints the same bytes.

use super::{Program, ReduceOp, Src, UOp};
use serde_json::{json, Map, Value};

/// A scalar as JSON: integral values as integers, non-finite ones as the strings `inf`, `-inf`,
/// `nan` (JSON has no literal for them).
pub fn scalar_json(v: f64) -> Value {
    if v.is_nan() {
        Value::String("nan".into())
    } else if v.is_infinite() {
        Value::String(if v > 0.0 { "inf" } else { "-inf" }.into())
    } else if v.fract() == 0.0 && v.abs() < 9.0e15 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

fn reduce_name(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "SUM",
        ReduceOp::Max => "MAX",
        ReduceOp::Min => "MIN",
        ReduceOp::Prod => "PROD",
    }
}

/// The seed 002 JSON form of a program.
pub fn to_json(prog: &Program) -> Value {
    let mut uops = Vec::with_capacity(prog.nodes.len());
    for n in &prog.nodes {
        let src: Vec<Value> = n
            .src
            .iter()
            .map(|s| match s {
                Src::Node(id) => Value::String(id.to_string()),
                Src::Imm(v) => scalar_json(*v),
            })
            .collect();
        let arg: Value = match &n.uop {
            UOp::Input { tensor_id } => {
                json!({"tensor_id": tensor_id, "dtype": n.dtype, "shape": n.shape})
            }
            UOp::Const { value } => json!({ "value": scalar_json(*value) }),
            UOp::Range => json!({ "size": n.shape[0] }),
            UOp::Reshape => json!({ "result_shape": n.shape }),
            UOp::Permute { perm } => json!({ "perm": perm }),
            UOp::Expand => {
                let src_shape = match n.src.first() {
                    Some(Src::Node(id)) => prog.node(*id).shape.clone(),
                    _ => vec![],
                };
                let kept: Vec<usize> = (0..n.shape.len())
                    .filter(|i| src_shape.get(*i) == Some(&n.shape[*i]))
                    .collect();
                json!({"result_shape": n.shape, "broadcast_dimensions": kept})
            }
            UOp::Pad { pad, value } => {
                let p: Vec<[i64; 2]> = pad.iter().map(|(l, h)| [*l, *h]).collect();
                json!({"pad": p, "value": scalar_json(*value)})
            }
            UOp::Shrink { lo, hi, step } => json!({"lo": lo, "hi": hi, "step": step}),
            UOp::Flip { axes } => json!({ "axes": axes }),
            UOp::View { map } => {
                let m: Vec<String> = map.iter().map(|e| e.to_string()).collect();
                json!({"result_shape": n.shape, "index_map": m})
            }
            UOp::Read { access } => {
                let index: Vec<Value> = access.index.iter().map(|e| e.to_json()).collect();
                let mut m = Map::new();
                m.insert("result_shape".into(), json!(access.shape));
                m.insert("index".into(), Value::Array(index));
                if let Some(g) = &access.guard {
                    m.insert("guard".into(), g.to_json());
                }
                m.insert("fill".into(), scalar_json(access.fill.0));
                Value::Object(m)
            }
            UOp::Cast => json!({ "to": n.dtype }),
            UOp::Reduce { op, axes, acc } => {
                json!({"op": reduce_name(*op), "axes": axes, "dtype": acc})
            }
            UOp::Gather { axis } => json!({ "axis": axis }),
            UOp::Scan {
                op,
                axis,
                exclusive,
                reverse,
                acc,
            } => json!({"op": reduce_name(*op), "axis": axis, "exclusive": exclusive,
                        "reverse": reverse, "dtype": acc}),
            UOp::Unary(_) | UOp::Binary(_) | UOp::Where => Value::Object(Map::new()),
        };
        let mut obj = Map::new();
        obj.insert("id".into(), Value::String(n.id.to_string()));
        obj.insert("uop".into(), Value::String(n.uop.name().into()));
        obj.insert("src".into(), Value::Array(src));
        if arg.as_object().is_some_and(|o| !o.is_empty()) {
            obj.insert("arg".into(), arg);
        }
        obj.insert("dtype".into(), json!(n.dtype));
        obj.insert("shape".into(), json!(n.shape));
        if let Some(t) = &n.tag {
            obj.insert("tag".into(), Value::String(t.clone()));
        }
        uops.push(Value::Object(obj));
    }
    let inputs: Vec<Value> = prog
        .inputs
        .iter()
        .map(|i| json!({"tensor": i.tensor, "node": i.node.to_string()}))
        .collect();
    let outputs: Vec<Value> = prog
        .outputs
        .iter()
        .map(|o| json!({"tensor": o.tensor, "node": o.node.to_string()}))
        .collect();
    json!({
        "symbols": prog.symbols,
        "inputs": inputs,
        "outputs": outputs,
        "uops": uops,
    })
}
