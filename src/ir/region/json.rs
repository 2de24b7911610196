//! The wire form of region expressions (seed 001 §6.8): hand-written conversions between
//! [`Expr`] / [`AxisExpr`] / [`Pred`] / [`Size`] and `serde_json::Value`, because the seed's form
//! (single-key objects named by the op, bare strings and numbers as leaves) is not what serde's
//! derive produces.

use super::{AxisExpr, BinaryFn, CmpOp, Expr, Pred, Reduce, Scan, Size, UnaryFn};
use crate::ir::dtype::DType;
use crate::ir::tiny::ReduceOp;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Map, Value};

type R<T> = Result<T, String>;

impl UnaryFn {
    /// Every unary function.
    pub const ALL: [UnaryFn; 13] = [
        UnaryFn::Neg,
        UnaryFn::Exp,
        UnaryFn::Exp2,
        UnaryFn::Log,
        UnaryFn::Log2,
        UnaryFn::Sqrt,
        UnaryFn::Rsqrt,
        UnaryFn::Recip,
        UnaryFn::Relu,
        UnaryFn::Abs,
        UnaryFn::Erf,
        UnaryFn::Sigmoid,
        UnaryFn::Tanh,
    ];

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            UnaryFn::Neg => "neg",
            UnaryFn::Exp => "exp",
            UnaryFn::Exp2 => "exp2",
            UnaryFn::Log => "log",
            UnaryFn::Log2 => "log2",
            UnaryFn::Sqrt => "sqrt",
            UnaryFn::Rsqrt => "rsqrt",
            UnaryFn::Recip => "recip",
            UnaryFn::Relu => "relu",
            UnaryFn::Abs => "abs",
            UnaryFn::Erf => "erf",
            UnaryFn::Sigmoid => "sigmoid",
            UnaryFn::Tanh => "tanh",
        }
    }
}

impl BinaryFn {
    /// Every binary function.
    pub const ALL: [BinaryFn; 12] = [
        BinaryFn::Add,
        BinaryFn::Sub,
        BinaryFn::Mul,
        BinaryFn::Div,
        BinaryFn::Idiv,
        BinaryFn::Max,
        BinaryFn::Min,
        BinaryFn::Pow,
        BinaryFn::Cmplt,
        BinaryFn::Cmple,
        BinaryFn::Cmpeq,
        BinaryFn::Cmpne,
    ];

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            BinaryFn::Add => "add",
            BinaryFn::Sub => "sub",
            BinaryFn::Mul => "mul",
            BinaryFn::Div => "div",
            BinaryFn::Idiv => "idiv",
            BinaryFn::Max => "max",
            BinaryFn::Min => "min",
            BinaryFn::Pow => "pow",
            BinaryFn::Cmplt => "cmplt",
            BinaryFn::Cmple => "cmple",
            BinaryFn::Cmpeq => "cmpeq",
            BinaryFn::Cmpne => "cmpne",
        }
    }
}

impl CmpOp {
    const ALL: [CmpOp; 5] = [CmpOp::Ge, CmpOp::Gt, CmpOp::Le, CmpOp::Lt, CmpOp::Eq];

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Ge => "ge",
            CmpOp::Gt => "gt",
            CmpOp::Le => "le",
            CmpOp::Lt => "lt",
            CmpOp::Eq => "eq",
        }
    }
}

/// The wire name of a reduce op.
pub fn reduce_op_name(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "sum",
        ReduceOp::Max => "max",
        ReduceOp::Min => "min",
        ReduceOp::Prod => "prod",
    }
}

fn reduce_op(s: &str) -> Option<ReduceOp> {
    [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod]
        .into_iter()
        .find(|o| reduce_op_name(*o) == s)
}

// ---------------------------------------------------------------- helpers

fn single(v: &Value) -> R<(&str, &Value)> {
    match v.as_object() {
        Some(o) if o.len() == 1 => o
            .iter()
            .next()
            .map(|(k, v)| (k.as_str(), v))
            .ok_or_else(|| "empty object".into()),
        _ => Err(format!("expected an object with one key, found {v}")),
    }
}

fn list<'a>(v: &'a Value, what: &str) -> R<&'a Vec<Value>> {
    v.as_array()
        .ok_or_else(|| format!("`{what}` takes a list, found {v}"))
}

fn exactly<'a>(v: &'a Value, what: &str, n: usize) -> R<&'a [Value]> {
    let l = list(v, what)?;
    if l.len() != n {
        return Err(format!("`{what}` takes {n} operand(s), found {}", l.len()));
    }
    Ok(l)
}

fn fields<'a>(v: &'a Value, what: &str, allowed: &[&str]) -> R<&'a Map<String, Value>> {
    let o = v
        .as_object()
        .ok_or_else(|| format!("`{what}` takes an object, found {v}"))?;
    if let Some(k) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!("unknown field `{k}` in `{what}`"));
    }
    Ok(o)
}

fn field<'a>(o: &'a Map<String, Value>, what: &str, k: &str) -> R<&'a Value> {
    o.get(k)
        .ok_or_else(|| format!("`{what}` needs a `{k}` field"))
}

fn string(v: &Value, what: &str) -> R<String> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("`{what}` must be a string, found {v}"))
}

fn index_list(v: &Value, what: &str) -> R<Vec<usize>> {
    list(v, what)?
        .iter()
        .map(|x| {
            x.as_u64()
                .map(|u| u as usize)
                .ok_or_else(|| format!("`{what}` holds non-negative integers, found {x}"))
        })
        .collect()
}

fn dtype(v: &Value, what: &str) -> R<DType> {
    let s = string(v, what)?;
    DType::parse(&s).ok_or_else(|| format!("unknown dtype `{s}` in `{what}`"))
}

/// A scalar: a number or `"INF"`, `"-INF"`, `"NAN"`.
pub fn scalar_from_json(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "INF" => Some(f64::INFINITY),
            "-INF" => Some(f64::NEG_INFINITY),
            "NAN" => Some(f64::NAN),
            _ => None,
        },
        _ => None,
    }
}

/// A scalar as JSON: a float, or `"INF"`, `"-INF"`, `"NAN"`.
pub fn scalar_to_json(x: f64) -> Value {
    if x.is_nan() {
        json!("NAN")
    } else if x == f64::INFINITY {
        json!("INF")
    } else if x == f64::NEG_INFINITY {
        json!("-INF")
    } else {
        json!(x)
    }
}

// ---------------------------------------------------------------- axis expressions

impl AxisExpr {
    /// Parses an axis expression.
    pub fn from_json(v: &Value) -> R<AxisExpr> {
        match v {
            Value::Number(n) => n
                .as_i64()
                .map(AxisExpr::Const)
                .ok_or_else(|| format!("an index constant must be an integer, found {n}")),
            Value::String(s) if !s.is_empty() => Ok(AxisExpr::Name(s.clone())),
            _ => {
                let (k, a) = single(v)?;
                match k {
                    "add" => {
                        let l = list(a, k)?;
                        if l.len() < 2 {
                            return Err("`add` takes at least two operands".into());
                        }
                        l.iter()
                            .map(AxisExpr::from_json)
                            .collect::<R<_>>()
                            .map(AxisExpr::Add)
                    }
                    "min" | "max" => {
                        let l = exactly(a, k, 2)?;
                        let (x, y) = (
                            Box::new(AxisExpr::from_json(&l[0])?),
                            Box::new(AxisExpr::from_json(&l[1])?),
                        );
                        Ok(if k == "min" {
                            AxisExpr::Min(x, y)
                        } else {
                            AxisExpr::Max(x, y)
                        })
                    }
                    "mul" => {
                        let l = exactly(a, k, 2)?;
                        Ok(AxisExpr::Mul(
                            Box::new(AxisExpr::from_json(&l[0])?),
                            Box::new(AxisExpr::from_json(&l[1])?),
                        ))
                    }
                    "floordiv" => {
                        let l = exactly(a, k, 2)?;
                        let c = l[1].as_i64().ok_or_else(|| {
                            format!("a floordiv divisor must be an integer, found {}", l[1])
                        })?;
                        Ok(AxisExpr::FloorDiv(Box::new(AxisExpr::from_json(&l[0])?), c))
                    }
                    _ => Err(format!(
                        "unknown index operator `{k}` (add, mul, floordiv, min, max)"
                    )),
                }
            }
        }
    }

    /// The JSON form.
    pub fn to_json(&self) -> Value {
        match self {
            AxisExpr::Const(c) => json!(c),
            AxisExpr::Name(n) => json!(n),
            AxisExpr::Add(l) => json!({"add": l.iter().map(|e| e.to_json()).collect::<Vec<_>>()}),
            AxisExpr::Mul(a, b) => json!({"mul": [a.to_json(), b.to_json()]}),
            AxisExpr::FloorDiv(e, c) => json!({"floordiv": [e.to_json(), c]}),
            AxisExpr::Min(a, b) => json!({"min": [a.to_json(), b.to_json()]}),
            AxisExpr::Max(a, b) => json!({"max": [a.to_json(), b.to_json()]}),
        }
    }
}

impl Pred {
    /// Parses a predicate.
    pub fn from_json(v: &Value) -> R<Pred> {
        let (k, a) = single(v)?;
        match k {
            "and" | "or" => {
                let ps = list(a, k)?
                    .iter()
                    .map(Pred::from_json)
                    .collect::<R<Vec<_>>>()?;
                Ok(if k == "and" {
                    Pred::And(ps)
                } else {
                    Pred::Or(ps)
                })
            }
            _ => {
                let op = CmpOp::ALL
                    .into_iter()
                    .find(|o| o.name() == k)
                    .ok_or_else(|| {
                        format!("unknown predicate `{k}` (and, or, ge, gt, le, lt, eq)")
                    })?;
                let l = exactly(a, k, 2)?;
                Ok(Pred::Cmp(
                    op,
                    AxisExpr::from_json(&l[0])?,
                    AxisExpr::from_json(&l[1])?,
                ))
            }
        }
    }

    /// The JSON form.
    pub fn to_json(&self) -> Value {
        match self {
            Pred::And(ps) => json!({"and": ps.iter().map(|p| p.to_json()).collect::<Vec<_>>()}),
            Pred::Or(ps) => json!({"or": ps.iter().map(|p| p.to_json()).collect::<Vec<_>>()}),
            Pred::Cmp(op, a, b) => {
                let mut m = Map::new();
                m.insert(op.name().into(), json!([a.to_json(), b.to_json()]));
                Value::Object(m)
            }
        }
    }
}

// ---------------------------------------------------------------- value expressions

impl Expr {
    /// Parses a value expression.
    pub fn from_json(v: &Value) -> R<Expr> {
        if let Some(x) = scalar_from_json(v) {
            return Ok(Expr::Const(x));
        }
        if let Value::String(s) = v {
            return Ok(Expr::Let(s.clone()));
        }
        let (k, a) = single(v)?;
        let sub = |v: &Value| Expr::from_json(v).map(Box::new);
        if let Some(f) = UnaryFn::ALL.into_iter().find(|f| f.name() == k) {
            let l = exactly(a, k, 1)?;
            return Ok(Expr::Unary(f, sub(&l[0])?));
        }
        if let Some(f) = BinaryFn::ALL.into_iter().find(|f| f.name() == k) {
            let l = exactly(a, k, 2)?;
            return Ok(Expr::Binary(f, sub(&l[0])?, sub(&l[1])?));
        }
        match k {
            "read" => {
                let o = fields(a, k, &["tensor", "map"])?;
                let map = list(field(o, k, "map")?, "map")?
                    .iter()
                    .map(AxisExpr::from_json)
                    .collect::<R<_>>()?;
                Ok(Expr::Read {
                    tensor: string(field(o, k, "tensor")?, "tensor")?,
                    map,
                })
            }
            "select" => {
                let o = fields(a, k, &["pred", "then", "else"])?;
                Ok(Expr::Select {
                    pred: Pred::from_json(field(o, k, "pred")?)?,
                    then: sub(field(o, k, "then")?)?,
                    otherwise: sub(field(o, k, "else")?)?,
                })
            }
            "reduce" => reduce_from_json(a).map(|r| Expr::Reduce(Box::new(r))),
            "scan" => scan_from_json(a).map(|s| Expr::Scan(Box::new(s))),
            "BroadcastInDim" => {
                let o = fields(a, k, &["operand", "result_shape", "broadcast_dimensions"])?;
                let result_shape = list(field(o, k, "result_shape")?, "result_shape")?
                    .iter()
                    .map(Size::from_json)
                    .collect::<R<_>>()?;
                Ok(Expr::BroadcastInDim {
                    operand: sub(field(o, k, "operand")?)?,
                    result_shape,
                    broadcast_dimensions: index_list(
                        field(o, k, "broadcast_dimensions")?,
                        "broadcast_dimensions",
                    )?,
                })
            }
            "transpose" => {
                let o = fields(a, k, &["operand", "permutation"])?;
                Ok(Expr::Transpose {
                    operand: sub(field(o, k, "operand")?)?,
                    permutation: index_list(field(o, k, "permutation")?, "permutation")?,
                })
            }
            "index" => Ok(Expr::Index(AxisExpr::from_json(a)?)),
            "where" => {
                let l = exactly(a, k, 3)?;
                Ok(Expr::Where(sub(&l[0])?, sub(&l[1])?, sub(&l[2])?))
            }
            "gather" => {
                let o = fields(a, k, &["tensor", "map", "axis", "index"])?;
                let map = list(field(o, k, "map")?, "map")?
                    .iter()
                    .map(AxisExpr::from_json)
                    .collect::<R<_>>()?;
                let axis = field(o, k, "axis")?
                    .as_u64()
                    .and_then(|x| usize::try_from(x).ok())
                    .ok_or_else(|| "`gather.axis` must be a non-negative integer".to_string())?;
                Ok(Expr::Gather {
                    tensor: string(field(o, k, "tensor")?, "tensor")?,
                    map,
                    axis,
                    index: sub(field(o, k, "index")?)?,
                })
            }
            "cast" => {
                let o = fields(a, k, &["to", "x"])?;
                Ok(Expr::Cast {
                    to: dtype(field(o, k, "to")?, "to")?,
                    x: sub(field(o, k, "x")?)?,
                })
            }
            _ => Err(format!("unknown expression `{k}`")),
        }
    }

    /// The JSON form.
    pub fn to_json(&self) -> Value {
        let one = |k: &str, v: Value| {
            let mut m = Map::new();
            m.insert(k.to_string(), v);
            Value::Object(m)
        };
        match self {
            Expr::Const(x) => scalar_to_json(*x),
            Expr::Let(n) => json!(n),
            Expr::Read { tensor, map } => json!({"read": {
                "tensor": tensor,
                "map": map.iter().map(|e| e.to_json()).collect::<Vec<_>>()
            }}),
            Expr::Unary(f, x) => one(f.name(), json!([x.to_json()])),
            Expr::Binary(f, a, b) => one(f.name(), json!([a.to_json(), b.to_json()])),
            Expr::Select {
                pred,
                then,
                otherwise,
            } => json!({"select": {
                "pred": pred.to_json(), "then": then.to_json(), "else": otherwise.to_json()
            }}),
            Expr::Reduce(r) => one("reduce", reduce_to_json(r)),
            Expr::Scan(s) => json!({"scan": {
                "op": reduce_op_name(s.op),
                "axis": s.axis,
                "exclusive": s.exclusive,
                "reverse": s.reverse,
                "dtype": s.dtype,
                "body": s.body.to_json(),
            }}),
            Expr::BroadcastInDim {
                operand,
                result_shape,
                broadcast_dimensions,
            } => json!({"BroadcastInDim": {
                "operand": operand.to_json(),
                "result_shape": result_shape,
                "broadcast_dimensions": broadcast_dimensions,
            }}),
            Expr::Transpose {
                operand,
                permutation,
            } => json!({"transpose": {"operand": operand.to_json(), "permutation": permutation}}),
            Expr::Cast { to, x } => json!({"cast": {"to": to, "x": x.to_json()}}),
            Expr::Index(e) => json!({"index": e.to_json()}),
            Expr::Where(c, a, b) => json!({"where": [c.to_json(), a.to_json(), b.to_json()]}),
            Expr::Gather {
                tensor,
                map,
                axis,
                index,
            } => json!({"gather": {
                "tensor": tensor,
                "map": map.iter().map(|e| e.to_json()).collect::<Vec<_>>(),
                "axis": axis,
                "index": index.to_json(),
            }}),
        }
    }
}

fn reduce_from_json(a: &Value) -> R<Reduce> {
    let k = "reduce";
    let o = fields(a, k, &["op", "axes", "extents", "init", "dtype", "body"])?;
    let op_s = string(field(o, k, "op")?, "op")?;
    let op = reduce_op(&op_s)
        .ok_or_else(|| format!("unknown reduce op `{op_s}` (sum, max, min, prod)"))?;
    let axes = list(field(o, k, "axes")?, "axes")?
        .iter()
        .map(|x| string(x, "axes"))
        .collect::<R<_>>()?;
    let extents = match o.get("extents") {
        None => Vec::new(),
        Some(e) => e
            .as_object()
            .ok_or_else(|| format!("`extents` takes an object, found {e}"))?
            .iter()
            .map(|(n, s)| Size::from_json(s).map(|s| (n.clone(), s)))
            .collect::<R<_>>()?,
    };
    let init = match o.get("init") {
        None => None,
        Some(v) => Some(scalar_from_json(v).ok_or_else(|| {
            format!("`init` must be a number or \"-INF\"/\"INF\"/\"NAN\", found {v}")
        })?),
    };
    let dtype = match o.get("dtype") {
        None => None,
        Some(v) => Some(dtype(v, "dtype")?),
    };
    Ok(Reduce {
        op,
        axes,
        extents,
        init,
        dtype,
        body: Expr::from_json(field(o, k, "body")?)?,
    })
}

fn scan_from_json(a: &Value) -> R<Scan> {
    let k = "scan";
    let o = fields(
        a,
        k,
        &["op", "axis", "exclusive", "reverse", "dtype", "body"],
    )?;
    let op_s = string(field(o, k, "op")?, "op")?;
    let op = reduce_op(&op_s)
        .ok_or_else(|| format!("unknown scan op `{op_s}` (sum, max, min, prod)"))?;
    let flag = |name: &str| match o.get(name) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(format!("`{name}` takes true or false, found {v}")),
    };
    Ok(Scan {
        op,
        axis: string(field(o, k, "axis")?, "axis")?,
        exclusive: flag("exclusive")?,
        reverse: flag("reverse")?,
        dtype: dtype(field(o, k, "dtype")?, "dtype")?,
        body: Expr::from_json(field(o, k, "body")?)?,
    })
}

fn reduce_to_json(r: &Reduce) -> Value {
    let mut m = Map::new();
    m.insert("op".into(), json!(reduce_op_name(r.op)));
    m.insert("axes".into(), json!(r.axes));
    if !r.extents.is_empty() {
        let e: Map<String, Value> = r
            .extents
            .iter()
            .map(|(n, s)| (n.clone(), json!(s)))
            .collect();
        m.insert("extents".into(), Value::Object(e));
    }
    if let Some(i) = r.init {
        m.insert("init".into(), scalar_to_json(i));
    }
    if let Some(d) = r.dtype {
        m.insert("dtype".into(), json!(d));
    }
    m.insert("body".into(), r.body.to_json());
    Value::Object(m)
}

macro_rules! via_value {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.to_json().serialize(s)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                <$t>::from_json(&Value::deserialize(d)?).map_err(D::Error::custom)
            }
        }
    };
}

via_value!(Expr);
via_value!(AxisExpr);
via_value!(Pred);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_round_trip() {
        let v = json!({"select": {"pred": {"and": [{"ge": [{"add": ["h", -1]}, 0]},
            {"lt": [{"floordiv": [{"mul": [2, "h"]}, 3]}, "H"]}]},
            "then": {"exp": [{"read": {"tensor": "X", "map": ["h"]}}]}, "else": "-INF"}});
        let e = Expr::from_json(&v).expect("parse");
        assert_eq!(e.to_json(), v);
        assert!(Expr::from_json(&json!({"frob": [1.0]})).is_err());
        assert!(Expr::from_json(&json!({"add": [1.0]})).is_err());
        assert!(AxisExpr::from_json(&json!(1.5)).is_err());
    }

    #[test]
    fn min_max_offsets_round_trip() {
        let v = json!({"add": ["i", {"min": [1000, "S"]}, {"max": [0, {"add": ["T", -2]}]}]});
        let e = AxisExpr::from_json(&v).expect("parse");
        assert_eq!(e.to_json(), v);
        assert_eq!(e.to_string(), "i+min(1000,S)+max(0,T+-2)");
        assert!(AxisExpr::from_json(&json!({"min": [1]})).is_err());
    }

    #[test]
    fn extensions_round_trip() {
        let v = json!({"where": [{"index": {"add": ["m", 1]}},
            {"gather": {"tensor": "X", "map": ["m", 0], "axis": 1,
                "index": {"read": {"tensor": "I", "map": ["m"]}}}}, 0.0]});
        let e = Expr::from_json(&v).expect("parse");
        assert_eq!(e.to_json(), v);
        assert!(Expr::from_json(&json!({"where": [1.0, 2.0]})).is_err());
        assert!(
            Expr::from_json(&json!({"gather": {"tensor": "X", "map": [], "axis": -1,
            "index": 0.0}}))
            .is_err()
        );
    }
}
