//! Pipeline fuzzing: random *valid* `graph.json` documents (DAGs of 1–6 nodes drawn from every op
//! of `graph-json.md`, fp16/bf16/fp32 and i32/bool where the op allows, some symbolic sizes bound
//! through `resolve_symbols`, zero-size axes, special input values) must load, lower to Tiny IR
//! that verifies, and evaluate to every signature output with its declared dtype and bound shape —
//! never a panic, an internal error or an unsupported-lowering diagnostic.
//!
//! Documents are valid by construction: each node is built from the inferred shapes of the tensors
//! before it (every node is probe-loaded as it is added, as `common::one_op` does) and from the
//! concrete symbol values the case binds, so sizes that only become concrete at `run` time (a
//! slice of a symbolic axis, a conv output size) are valid too.
//!
//! Numerics, two oracles written here, independent of the evaluator:
//! - exact: movement ops, casts, exact elementwise functions (neg, abs, relu, max, min,
//!   comparisons, where, and add/sub/mul/div rounded to the dtype, i32 wrapping), max/min
//!   reductions, scans and max pooling, i32 sums and products are replayed per element (index
//!   arithmetic only) and must match bit for bit;
//! - f64: MatMul, GEMM, Conv, ConvTranspose, avg Pool, Attention, Softmax, LayerNorm, RMSNorm,
//!   float sums/means/products, scans and transcendental functions are recomputed with naive loops
//!   in f64 from exact, finite inputs (fp32 accumulation) and compared within graph-json's
//!   tolerances.
//!
//! A second property checks identities (Flip∘Flip, Permute∘inverse, Reshape∘Reshape back, Concat
//! then Slice back, Pad then crop, Softmax rows summing to 1, the last element of a cumulative sum
//! equal to the Reduce sum); a third, that the generator reaches every op, function and dtype.
//!
//! Generation reads a tape of random `u32`s (a value past its end reads 0), so proptest shrinks a
//! failure towards short tapes and the first choice of every decision. `PIPELINE_FUZZ_CASES=N`
//! runs more cases (2000 by default, about a second).

mod common;

use dlc_egg::eval::evaluate;
use dlc_egg::ir::dim::{broadcast_shapes, Dim};
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend::{load_str, resolve_symbols};
use dlc_egg::ir::lower::lower;
use dlc_egg::ir::tiny::verify;
use dlc_egg::tensor::Tensor;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};

// ---------------------------------------------------------------------------------------------
// The tape of choices.

struct Tape<'a> {
    t: &'a [u32],
    i: usize,
}

impl Tape<'_> {
    fn next(&mut self) -> u32 {
        let v = self.t.get(self.i).copied().unwrap_or(0);
        self.i += 1;
        v
    }

    /// Uniform in `0..n` (0 when `n <= 1`).
    fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            0
        } else {
            self.next() as usize % n
        }
    }

    /// True with probability `num/den`; a 0 on the tape reads false (the simpler choice).
    fn chance(&mut self, num: u32, den: u32) -> bool {
        self.next() % den >= den - num
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as usize) as i64
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())].clone()
    }
}

// ---------------------------------------------------------------------------------------------
// Tensors, inputs and the generator.

const UNARY: [&str; 14] = [
    "neg",
    "abs",
    "exp",
    "exp2",
    "log",
    "sqrt",
    "rsqrt",
    "recip",
    "relu",
    "sigmoid",
    "tanh",
    "silu",
    "gelu",
    "gelu_tanh",
];
const BINARY: [&str; 13] = [
    "add", "sub", "mul", "div", "max", "min", "pow", "lt", "le", "gt", "ge", "eq", "ne",
];
const FLOATS: [DType; 3] = [DType::F16, DType::BF16, DType::F32];

/// The generator's op menu (Elementwise split by arity).
const OPS: [&str; 25] = [
    "MatMul",
    "GEMM",
    "Conv",
    "ConvTranspose",
    "Pool",
    "Attention",
    "Softmax",
    "LayerNorm",
    "RMSNorm",
    "Unary",
    "Binary",
    "Where",
    "Reduce",
    "Cumulative",
    "Cast",
    "Reshape",
    "Permute",
    "Expand",
    "Pad",
    "Slice",
    "Flip",
    "Concat",
    "Repeat",
    "Unfold",
    "Gather",
];

/// How an input's values are drawn.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Fill {
    Normal,
    /// i32 divisors: never 0.
    NonZero,
    /// Gather indices: in `0..n`.
    Index(usize),
}

struct Input {
    name: String,
    decl: Vec<Dim>,
    tensor: Tensor,
}

/// A tensor the generator can use as an operand.
#[derive(Clone, Debug)]
struct Tn {
    name: String,
    dtype: DType,
    /// As the frontend inferred it.
    shape: Vec<Dim>,
    /// With the case's symbol values.
    conc: Vec<usize>,
    /// Reference values (row-major) where the naive interpreter can compute them exactly.
    refv: Option<Vec<f64>>,
    /// Reference values of arithmetic ops computed in f64 from exact inputs (compared with a
    /// tolerance).
    approx: Option<Vec<f64>>,
}

impl Tn {
    fn rank(&self) -> usize {
        self.shape.len()
    }
}

/// A size that can be written in a document (`tensors` shapes and Reshape/Expand targets).
fn declarable(d: &Dim) -> bool {
    d.as_int().is_some() || d.as_symbol().is_some()
}

fn dim_json(d: &Dim) -> Value {
    match d.as_int() {
        Some(v) => json!(v),
        None => json!(d.as_symbol().expect("declarable dim")),
    }
}

fn shape_json(s: &[Dim]) -> Value {
    Value::Array(s.iter().map(dim_json).collect())
}

/// A generated case.
struct Case {
    doc: Value,
    inputs: Vec<Input>,
    cli: BTreeMap<String, i64>,
    arrays: BTreeMap<String, Vec<usize>>,
    syms: BTreeMap<String, i64>,
    outputs: Vec<Tn>,
    /// Labels of what was generated (ops, functions, dtypes), for the coverage test.
    labels: Vec<String>,
}

struct Gen<'a> {
    tp: Tape<'a>,
    syms: BTreeMap<String, i64>,
    zero_dims: bool,
    seed: u64,
    inputs: Vec<Input>,
    nodes: Vec<Value>,
    vals: Vec<Tn>,
    consumed: BTreeSet<String>,
    labels: Vec<String>,
}

impl<'a> Gen<'a> {
    fn new(tape: &'a [u32]) -> Gen<'a> {
        let mut tp = Tape { t: tape, i: 0 };
        let seed = u64::from(tp.next());
        let zero_dims = tp.chance(1, 6);
        let mut syms = BTreeMap::new();
        for s in ["S", "T"] {
            if tp.chance(1, 2) {
                let v = if zero_dims && tp.chance(1, 5) {
                    0
                } else {
                    tp.range(1, 4)
                };
                syms.insert(s.to_string(), v);
            }
        }
        Gen {
            tp,
            syms,
            zero_dims,
            seed,
            inputs: Vec::new(),
            nodes: Vec::new(),
            vals: Vec::new(),
            consumed: BTreeSet::new(),
            labels: Vec::new(),
        }
    }

    fn label(&mut self, s: impl Into<String>) {
        self.labels.push(s.into());
    }

    /// The concrete value of a size.
    fn val(&self, d: &Dim) -> usize {
        let v = d
            .eval_with(&self.syms)
            .unwrap_or_else(|e| panic!("generator: size {d} does not evaluate: {e}"));
        usize::try_from(v).unwrap_or_else(|_| panic!("generator: size {d} is {v} < 0"))
    }

    fn conc(&self, s: &[Dim]) -> Vec<usize> {
        s.iter().map(|d| self.val(d)).collect()
    }

    fn rand_dim(&mut self) -> Dim {
        if !self.syms.is_empty() && self.tp.chance(1, 5) {
            let names: Vec<String> = self.syms.keys().cloned().collect();
            return Dim::sym(&self.tp.pick(&names));
        }
        if self.zero_dims && self.tp.chance(1, 10) {
            return Dim::int(0);
        }
        if self.tp.chance(1, 12) {
            return Dim::int(self.tp.range(5, 6));
        }
        Dim::int(self.tp.range(1, 4))
    }

    /// A size that is at least 1 with the case's symbol values.
    fn pos_dim(&mut self) -> Dim {
        let d = self.rand_dim();
        if self.val(&d) >= 1 {
            d
        } else {
            Dim::int(self.tp.range(1, 3))
        }
    }

    fn rank(&mut self) -> usize {
        self.tp.pick(&[0, 1, 1, 2, 2, 2, 3, 3, 4])
    }

    fn rand_shape(&mut self, rank: usize) -> Vec<Dim> {
        (0..rank).map(|_| self.rand_dim()).collect()
    }

    fn float_dt(&mut self) -> DType {
        self.tp.pick(&FLOATS)
    }

    fn any_dt(&mut self) -> DType {
        self.tp.pick(&DType::ALL)
    }

    /// A new signature input.
    fn input(&mut self, dtype: DType, shape: Vec<Dim>, fill: Fill) -> Tn {
        assert!(
            shape.iter().all(declarable),
            "generator: undeclarable input"
        );
        let name = format!("in{}", self.inputs.len());
        let conc = self.conc(&shape);
        let n: usize = conc.iter().product();
        let raw = common::data(
            self.seed
                .wrapping_mul(1_000_003)
                .wrapping_add(self.inputs.len() as u64),
            n,
        );
        // Now and then some elements are special values: infinities, NaN, overflowing or
        // subnormal magnitudes, signed zeros, extreme i32s.
        let special = fill == Fill::Normal && self.tp.chance(1, 10);
        let vals: Vec<f64> = raw
            .iter()
            .enumerate()
            .map(|(k, v)| match (dtype, fill) {
                (DType::I32, Fill::Normal) if special && k % 3 == 0 => {
                    [i32::MAX as f64, i32::MIN as f64, -1.0, 0.0][(k / 3) % 4]
                }
                (DType::F16 | DType::BF16 | DType::F32, Fill::Normal) if special && k % 3 == 0 => [
                    f64::INFINITY,
                    -0.0,
                    1e5,
                    f64::NAN,
                    -1e30,
                    65504.0,
                    1e-8,
                    f64::NEG_INFINITY,
                    70000.0,
                ][(k / 3) % 9],
                (_, Fill::Index(b)) => ((v + 1.0) / 2.0 * b as f64).floor().min(b as f64 - 1.0),
                (DType::I32, Fill::NonZero) => {
                    let k = (v * 3.0).floor();
                    if k >= 0.0 {
                        k + 1.0
                    } else {
                        k
                    }
                }
                (DType::I32, _) => (v * 4.0).floor(),
                (DType::Bool, _) => f64::from(u8::from(*v > 0.0)),
                _ => *v,
            })
            .collect();
        let tensor = Tensor::from_f64(dtype, conc.clone(), &vals);
        let t = Tn {
            name: name.clone(),
            dtype,
            shape: shape.clone(),
            conc,
            refv: Some(tensor.to_f64()),
            approx: None,
        };
        self.inputs.push(Input {
            name,
            decl: shape,
            tensor,
        });
        self.label(format!("input:{}", dtype.name()));
        self.vals.push(t.clone());
        t
    }

    fn fresh(&mut self, dtype: DType) -> Tn {
        let r = self.rank();
        let s = self.rand_shape(r);
        self.input(dtype, s, Fill::Normal)
    }

    /// An existing tensor satisfying `pred` (most of the time, when there is one).
    fn existing(&mut self, pred: impl Fn(&Tn) -> bool) -> Option<Tn> {
        let cands: Vec<Tn> = self
            .vals
            .iter()
            .filter(|t| t.conc.iter().product::<usize>() <= 1024 && pred(t))
            .cloned()
            .collect();
        if cands.is_empty() || self.tp.chance(1, 6) {
            return None;
        }
        // Prefer recent tensors: chains rather than forests.
        let k = cands.len();
        let i = if self.tp.chance(2, 3) {
            k - 1
        } else {
            self.tp.below(k)
        };
        Some(cands[i].clone())
    }

    /// The document: signature inputs, `nodes`, the given outputs (declared) and declared
    /// intermediates. With no outputs (a probe), the first input is the output.
    fn doc(&self, outs: &[&Tn], declare: &[&Tn], symbols: &BTreeMap<String, i64>) -> Value {
        let mut tensors = serde_json::Map::new();
        for i in &self.inputs {
            tensors.insert(
                i.name.clone(),
                json!({"dtype": i.tensor.dtype.name(), "shape": shape_json(&i.decl)}),
            );
        }
        for t in outs.iter().chain(declare) {
            tensors.insert(
                t.name.clone(),
                json!({"dtype": t.dtype.name(), "shape": shape_json(&t.shape)}),
            );
        }
        let sig_in: Vec<Value> = self
            .inputs
            .iter()
            .enumerate()
            .map(|(k, i)| match k % 4 {
                1 => json!({"tensor": i.name, "role": "param", "storage": "const_pool"}),
                2 => json!({"tensor": i.name, "mutability": "mutable"}),
                3 => json!({"tensor": i.name, "role": "data", "storage": "arg", "mutability": "immutable"}),
                _ => json!({"tensor": i.name}),
            })
            .collect();
        let sig_out: Vec<Value> = if outs.is_empty() {
            self.inputs
                .first()
                .map(|i| json!({"tensor": i.name}))
                .into_iter()
                .collect()
        } else {
            outs.iter().map(|t| json!({"tensor": t.name})).collect()
        };
        let mut doc = json!({
            "signature": {"inputs": sig_in, "outputs": sig_out},
            "tensors": tensors,
            "graph": self.nodes,
        });
        if !symbols.is_empty() {
            doc["symbols"] = json!(symbols);
        }
        doc
    }

    /// Appends a node with output `t<k>` and learns the output's dtype and shape from a probe
    /// load. Returns its index in `vals`.
    fn node(&mut self, op: &str, ins: Vec<Value>, attrs: Value) -> usize {
        self.node_with(op, ins, attrs, None)
    }

    fn node_with(
        &mut self,
        op: &str,
        ins: Vec<Value>,
        attrs: Value,
        top_fn: Option<&str>,
    ) -> usize {
        let k = self.nodes.len();
        let out = format!("t{k}");
        for i in &ins {
            if let Some(s) = i.as_str() {
                self.consumed.insert(s.to_string());
            }
        }
        let mut node = json!({"op": op, "name": format!("n{k}"), "inputs": ins, "outputs": [out]});
        let empty = attrs.as_object().is_some_and(|o| o.is_empty());
        if !empty || !self.tp.chance(1, 2) {
            node["attrs"] = attrs;
        }
        if let Some(f) = top_fn {
            node["fn"] = json!(f);
        }
        self.nodes.push(node);
        self.label(op.to_string());
        let doc = self.doc(&[], &[], &BTreeMap::new());
        let g = load_str(&doc.to_string(), "probe.json").unwrap_or_else(|d| {
            panic!(
                "generator: the frontend rejects a generated node:\n{d}\n{}",
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            )
        });
        let info = g.tensor(&out).expect("inferred output").clone();
        let conc = self.conc(&info.shape);
        self.vals.push(Tn {
            name: out,
            dtype: info.dtype,
            shape: info.shape,
            conc,
            refv: None,
            approx: None,
        });
        self.vals.len() - 1
    }

    fn set_ref(&mut self, i: usize, r: Option<Vec<f64>>) {
        if let Some(v) = &r {
            let n: usize = self.vals[i].conc.iter().product();
            assert_eq!(
                v.len(),
                n,
                "generator: reference of {} has the wrong size",
                self.vals[i].name
            );
        }
        self.vals[i].refv = r;
    }

    /// A shape that broadcasts against `x`: trailing axes of `x`, each kept or 1 (with `grow`, an
    /// axis of `x` of size 1 may get any size), and with `lead` maybe new leading axes (up to rank
    /// 4).
    fn partner_shape(&mut self, x: &[Dim], lead: bool, grow: bool) -> Vec<Dim> {
        let r = x.len();
        let full = self.tp.chance(2, 3);
        let keep = if full { r } else { self.tp.below(r + 1) };
        let mut out = Vec::new();
        if full && lead && r < 4 && self.tp.chance(1, 4) {
            let extra = self.tp.range(1, (4 - r) as i64);
            for _ in 0..extra {
                out.push(self.rand_dim());
            }
        }
        for d in &x[r - keep..] {
            let nd = if grow && d.is_int(1) && self.tp.chance(1, 3) {
                self.rand_dim()
            } else if !declarable(d) || self.tp.chance(1, 4) {
                Dim::int(1)
            } else {
                d.clone()
            };
            out.push(nd);
        }
        out
    }

    // -----------------------------------------------------------------------------------------
    // Ops.

    fn step(&mut self) {
        let op = self.tp.pick(&OPS);
        match op {
            "MatMul" => self.matmul(),
            "GEMM" => self.gemm(),
            "Conv" => self.conv(),
            "ConvTranspose" => self.conv_transpose(),
            "Pool" => self.pool(),
            "Attention" => self.attention(),
            "Softmax" => self.softmax(),
            "LayerNorm" | "RMSNorm" => self.norm(op),
            "Unary" => self.unary(),
            "Binary" => self.binary(),
            "Where" => self.where_(),
            "Reduce" => self.reduce(),
            "Cumulative" => self.cumulative(),
            "Cast" => self.cast(),
            "Reshape" => self.reshape(),
            "Permute" => self.permute(),
            "Expand" => self.expand(),
            "Pad" => self.pad(),
            "Slice" => self.slice(),
            "Flip" => self.flip(),
            "Concat" => self.concat(),
            "Repeat" => self.repeat(),
            "Unfold" => self.unfold(),
            _ => self.gather(),
        }
    }

    /// Maybe an explicit `acc_dtype`; returns the accumulation dtype.
    fn acc_attr(&mut self, attrs: &mut Value, dt: DType) -> DType {
        if self.tp.chance(1, 3) {
            let acc = if self.tp.chance(1, 3) { dt } else { DType::F32 };
            attrs["acc_dtype"] = json!(acc.name());
            self.label(format!("acc:{}", acc.name()));
            return acc;
        }
        DType::F32
    }

    /// Sets the f64 reference of `vals[i]`, rounded to its dtype (None when an input was not
    /// tame or the accumulation is not fp32).
    fn set_approx(&mut self, i: usize, r: Option<Vec<f64>>) {
        let t = &mut self.vals[i];
        if let Some(v) = &r {
            let n: usize = t.conc.iter().product();
            assert_eq!(
                v.len(),
                n,
                "generator: f64 reference of {} has the wrong size",
                t.name
            );
        }
        let dt = t.dtype;
        t.approx = r.map(|v| v.into_iter().map(|x| dt.round(x)).collect());
    }

    fn matmul(&mut self) {
        let x = self.existing(|t| t.dtype.is_float() && t.rank() >= 1 && t.rank() <= 4);
        let (a, b) = match x {
            Some(x) if self.tp.chance(1, 3) && declarable(&x.shape[x.rank().saturating_sub(2)]) => {
                // x is B: K is its second-to-last axis (its only axis when 1-D).
                let r = x.rank();
                let k = x.shape[r.saturating_sub(2)].clone();
                let mut sa = if r >= 2 && self.tp.chance(1, 2) {
                    let mut p = self.partner_shape(&x.shape[..r - 2], false, true);
                    p.push(self.rand_dim());
                    p
                } else if self.tp.chance(1, 3) {
                    Vec::new()
                } else {
                    vec![self.rand_dim()]
                };
                sa.push(k);
                let a = self.input(x.dtype, sa, Fill::Normal);
                (a, x)
            }
            Some(x) if declarable(&x.shape[x.rank() - 1]) => {
                let r = x.rank();
                let k = x.shape[r - 1].clone();
                let sb = match self.tp.below(3) {
                    0 => vec![k],
                    1 if r >= 2 => {
                        let mut p = self.partner_shape(&x.shape[..r - 2], false, true);
                        p.push(k);
                        p.push(self.rand_dim());
                        p
                    }
                    _ => vec![k, self.rand_dim()],
                };
                let b = self.input(x.dtype, sb, Fill::Normal);
                (x, b)
            }
            _ => {
                let dt = self.float_dt();
                let k = self.rand_dim();
                let nb = self.tp.below(3);
                let batch = self.rand_shape(nb);
                let mut sa: Vec<Dim> = batch.clone();
                if self.tp.chance(1, 4) {
                    sa.clear();
                } else {
                    sa.push(self.rand_dim());
                }
                sa.push(k.clone());
                let mut sb: Vec<Dim> = if self.tp.chance(1, 2) {
                    self.partner_shape(&batch, false, true)
                } else {
                    Vec::new()
                };
                sb.push(k);
                if !self.tp.chance(1, 4) {
                    sb.push(self.rand_dim());
                } else {
                    sb = vec![sb[sb.len() - 1].clone()];
                }
                let a = self.input(dt, sa, Fill::Normal);
                let b = self.input(dt, sb, Fill::Normal);
                (a, b)
            }
        };
        self.label(format!("MatMul:{}x{}", a.rank(), b.rank()));
        let mut attrs = json!({});
        let acc = self.acc_attr(&mut attrs, a.dtype);
        let i = self.node("MatMul", vec![json!(a.name), json!(b.name)], attrs);
        let r = (|| {
            (acc == DType::F32).then_some(())?;
            Some(ref_matmul(tame(&a)?, &a.conc, tame(&b)?, &b.conc))
        })();
        self.set_approx(i, r);
    }

    fn gemm(&mut self) {
        let trans_a = self.tp.chance(1, 2);
        let trans_b = self.tp.chance(1, 2);
        let ka = usize::from(!trans_a);
        let x = self.existing(|t| t.dtype.is_float() && t.rank() == 2 && declarable(&t.shape[ka]));
        let a = match x {
            Some(x) => x,
            None => {
                let dt = self.float_dt();
                let s = vec![self.rand_dim(), self.rand_dim()];
                self.input(dt, s, Fill::Normal)
            }
        };
        let k = a.shape[ka].clone();
        let m = a.shape[1 - ka].clone();
        let n = self.rand_dim();
        let sb = if trans_b {
            vec![n.clone(), k]
        } else {
            vec![k, n.clone()]
        };
        let b = self.input(a.dtype, sb, Fill::Normal);
        let mut ins = vec![json!(a.name), json!(b.name)];
        let mut c_t = None;
        if self.tp.chance(1, 2) {
            let m1 = if declarable(&m) { m } else { Dim::int(1) };
            let sc = match self.tp.below(6) {
                0 => vec![n],
                1 => vec![m1, Dim::int(1)],
                2 => vec![Dim::int(1), n],
                3 => vec![m1, n],
                4 => vec![],
                _ => vec![Dim::int(1)],
            };
            let c = self.input(a.dtype, sc, Fill::Normal);
            ins.push(json!(c.name));
            c_t = Some(c);
            self.label("GEMM:C");
        }
        let mut attrs = json!({});
        if trans_a || self.tp.chance(1, 4) {
            attrs["trans_a"] = json!(trans_a);
        }
        if trans_b || self.tp.chance(1, 4) {
            attrs["trans_b"] = json!(trans_b);
        }
        let (mut alpha, mut beta) = (1.0, 1.0);
        if self.tp.chance(1, 2) {
            alpha = self.tp.pick(&[1.0, 0.5, -2.0, 0.0]);
            attrs["alpha"] = json!(alpha);
        }
        if self.tp.chance(1, 2) {
            beta = self.tp.pick(&[1.0, 0.5, -1.0, 0.0]);
            attrs["beta"] = json!(beta);
        }
        let acc = self.acc_attr(&mut attrs, a.dtype);
        let i = self.node("GEMM", ins, attrs);
        let r = (|| {
            (acc == DType::F32).then_some(())?;
            let c = match &c_t {
                Some(c) => Some((tame(c)?, c.conc.as_slice())),
                None => None,
            };
            let g = Gemm {
                trans_a,
                trans_b,
                alpha,
                beta,
            };
            Some(ref_gemm(tame(&a)?, &a.conc, tame(&b)?, &b.conc, c, &g))
        })();
        self.set_approx(i, r);
    }

    /// A spatial list attribute: one integer (when all equal) or one per spatial dim.
    fn spatial_attr(&mut self, v: &[i64]) -> Value {
        if v.iter().all(|x| *x == v[0]) && self.tp.chance(1, 2) {
            json!(v[0])
        } else {
            json!(v)
        }
    }

    /// A spatial pad in one of the three forms.
    fn pad_attr(&mut self, p: &[(i64, i64)]) -> Value {
        let sym = p.iter().all(|(lo, hi)| lo == hi);
        if sym && p.iter().all(|x| *x == p[0]) && self.tp.chance(1, 3) {
            json!(p[0].0)
        } else if sym && self.tp.chance(1, 2) {
            json!(p.iter().map(|x| x.0).collect::<Vec<_>>())
        } else {
            json!(p.iter().map(|(lo, hi)| json!([lo, hi])).collect::<Vec<_>>())
        }
    }

    /// `[N, C, *spatial]` input of a windowed op: an existing tensor of rank 3–4 whose dtype
    /// passes `dt_ok`, or a fresh one of dtype `fresh_dt` with `c` channels.
    fn window_input(&mut self, dt_ok: impl Fn(DType) -> bool, fresh_dt: DType, c: Dim) -> Tn {
        let x = self.existing(|t| (t.rank() == 3 || t.rank() == 4) && dt_ok(t.dtype));
        match x {
            Some(x) => x,
            None => {
                let nsp = self.tp.range(1, 2) as usize;
                let mut s = vec![self.rand_dim(), c];
                for _ in 0..nsp {
                    s.push(self.pos_dim());
                }
                self.input(fresh_dt, s, Fill::Normal)
            }
        }
    }

    fn conv(&mut self) {
        let x = self.existing(|t| {
            (t.rank() == 3 || t.rank() == 4) && t.dtype.is_float() && declarable(&t.shape[1])
        });
        let x = match x {
            Some(x) => x,
            None => {
                let dt = self.float_dt();
                let g = self.tp.range(1, 3);
                let c = Dim::int(g * self.tp.range(1, 2));
                self.window_input(|_| false, dt, c)
            }
        };
        let c = x.shape[1].clone();
        let cv = c.as_int();
        let gs: Vec<i64> = [1, 2, 3]
            .into_iter()
            .filter(|g| *g == 1 || cv.is_some_and(|c| c > 0 && c % g == 0))
            .collect();
        let g = self.tp.pick(&gs);
        let cout = g * self.tp.range(1, 2);
        let nsp = x.rank() - 2;
        let (mut ks, mut st, mut dl, mut pd) = (vec![], vec![], vec![], vec![]);
        // Symbols that can be a kernel size (Conv takes symbolic kernels).
        let ksyms: Vec<(String, i64)> = self
            .syms
            .iter()
            .filter(|(_, v)| (1..=3).contains(*v))
            .map(|(s, v)| (s.clone(), *v))
            .collect();
        for i in 0..nsp {
            let input = x.conc[i + 2] as i64;
            let mut ok = false;
            for _ in 0..6 {
                let (k, kd) = if !ksyms.is_empty() && self.tp.chance(1, 6) {
                    let (s, v) = self.tp.pick(&ksyms);
                    (v, Dim::sym(&s))
                } else {
                    let k = self.tp.range(1, 3);
                    (k, Dim::int(k))
                };
                let d = self.tp.range(1, 2);
                let lo = self.tp.range(0, 2);
                let hi = if self.tp.chance(1, 2) {
                    lo
                } else {
                    self.tp.range(0, 2)
                };
                let s = self.tp.range(1, 3);
                if input + lo + hi > d * (k - 1) {
                    if kd.as_symbol().is_some() {
                        self.label("Conv:symbolic-kernel");
                    }
                    ks.push(kd);
                    dl.push(d);
                    pd.push((lo, hi));
                    st.push(s);
                    ok = true;
                    break;
                }
            }
            if !ok {
                ks.push(Dim::int(1));
                dl.push(1);
                pd.push((1, 1));
                st.push(1);
            }
        }
        let cg = match cv {
            Some(v) => Dim::int(v / g),
            None => c.clone(),
        };
        let mut sw = vec![Dim::int(cout), cg];
        sw.extend(ks);
        let w = self.input(x.dtype, sw, Fill::Normal);
        let mut ins = vec![json!(x.name), json!(w.name)];
        let mut bias = None;
        if self.tp.chance(1, 2) {
            let b = self.input(x.dtype, vec![Dim::int(cout)], Fill::Normal);
            ins.push(json!(b.name));
            bias = Some(b);
        }
        let mut attrs = json!({});
        if st.iter().any(|s| *s != 1) || self.tp.chance(1, 3) {
            attrs["stride"] = self.spatial_attr(&st);
        }
        if dl.iter().any(|s| *s != 1) || self.tp.chance(1, 3) {
            attrs["dilation"] = self.spatial_attr(&dl);
        }
        if pd.iter().any(|p| *p != (0, 0)) || self.tp.chance(1, 3) {
            attrs["pad"] = self.pad_attr(&pd);
        }
        if g != 1 || self.tp.chance(1, 4) {
            attrs["groups"] = json!(g);
        }
        let acc = self.acc_attr(&mut attrs, x.dtype);
        self.label(format!("Conv:{nsp}d:g{g}"));
        let i = self.node("Conv", ins, attrs);
        let p = Window {
            stride: st,
            pad: pd,
            dilation: dl,
            groups: g as usize,
            output_padding: vec![],
        };
        let r = (|| {
            (acc == DType::F32).then_some(())?;
            let b = match &bias {
                Some(b) => Some(tame(b)?),
                None => None,
            };
            Some(ref_conv(tame(&x)?, &x.conc, tame(&w)?, &w.conc, b, &p))
        })();
        self.set_approx(i, r);
    }

    fn conv_transpose(&mut self) {
        let x = self.existing(|t| {
            (t.rank() == 3 || t.rank() == 4) && t.dtype.is_float() && declarable(&t.shape[1])
        });
        let x = match x {
            Some(x) => x,
            None => {
                let dt = self.float_dt();
                let g = self.tp.range(1, 3);
                let c = Dim::int(g * self.tp.range(1, 2));
                self.window_input(|_| false, dt, c)
            }
        };
        let c = x.shape[1].clone();
        let cv = c.as_int();
        let gs: Vec<i64> = [1, 2, 3]
            .into_iter()
            .filter(|g| *g == 1 || cv.is_some_and(|c| c > 0 && c % g == 0))
            .collect();
        let g = self.tp.pick(&gs);
        let cout_g = self.tp.range(1, 2);
        let nsp = x.rank() - 2;
        let (mut ks, mut st, mut dl, mut pd, mut op) = (vec![], vec![], vec![], vec![], vec![]);
        for i in 0..nsp {
            let input = x.conc[i + 2] as i64;
            let mut ok = false;
            for _ in 0..6 {
                let k = self.tp.range(1, 3);
                let d = self.tp.range(1, 2);
                let s = self.tp.range(1, 3);
                let o = self.tp.range(0, s.max(d) - 1);
                let lo = self.tp.range(0, 2);
                let hi = if self.tp.chance(1, 2) {
                    lo
                } else {
                    self.tp.range(0, 2)
                };
                let out = (input - 1) * s - lo - hi + d * (k - 1) + o + 1;
                if out >= 1 {
                    ks.push(k);
                    dl.push(d);
                    st.push(s);
                    op.push(o);
                    pd.push((lo, hi));
                    ok = true;
                    break;
                }
            }
            if !ok {
                // (in-1)·1 + 2·(3-1) + 1 >= 1 for any in >= 0.
                ks.push(3);
                dl.push(2);
                st.push(1);
                op.push(0);
                pd.push((0, 0));
            }
        }
        let mut sw = vec![c.clone(), Dim::int(cout_g)];
        sw.extend(ks.iter().map(|k| Dim::int(*k)));
        let w = self.input(x.dtype, sw, Fill::Normal);
        let mut ins = vec![json!(x.name), json!(w.name)];
        let mut bias = None;
        if self.tp.chance(1, 2) {
            let b = self.input(x.dtype, vec![Dim::int(cout_g * g)], Fill::Normal);
            ins.push(json!(b.name));
            bias = Some(b);
        }
        let mut attrs = json!({});
        if st.iter().any(|s| *s != 1) || self.tp.chance(1, 3) {
            attrs["stride"] = self.spatial_attr(&st);
        }
        if dl.iter().any(|s| *s != 1) || self.tp.chance(1, 3) {
            attrs["dilation"] = self.spatial_attr(&dl);
        }
        if pd.iter().any(|p| *p != (0, 0)) || self.tp.chance(1, 3) {
            attrs["pad"] = self.pad_attr(&pd);
        }
        if op.iter().any(|s| *s != 0) || self.tp.chance(1, 3) {
            attrs["output_padding"] = self.spatial_attr(&op);
        }
        if g != 1 || self.tp.chance(1, 4) {
            attrs["groups"] = json!(g);
        }
        let acc = self.acc_attr(&mut attrs, x.dtype);
        self.label(format!("ConvTranspose:{nsp}d:g{g}"));
        let i = self.node("ConvTranspose", ins, attrs);
        let p = Window {
            stride: st,
            pad: pd,
            dilation: dl,
            groups: g as usize,
            output_padding: op,
        };
        let r = (|| {
            (acc == DType::F32).then_some(())?;
            let b = match &bias {
                Some(b) => Some(tame(b)?),
                None => None,
            };
            Some(ref_conv_transpose(
                tame(&x)?,
                &x.conc,
                tame(&w)?,
                &w.conc,
                b,
                &p,
            ))
        })();
        self.set_approx(i, r);
    }

    fn pool(&mut self) {
        let avg = self.tp.chance(1, 2);
        let fresh_dt = if avg {
            self.float_dt()
        } else {
            self.tp
                .pick(&[DType::F16, DType::BF16, DType::F32, DType::I32])
        };
        let c = self.rand_dim();
        let x = self.window_input(
            |d| if avg { d.is_float() } else { d != DType::Bool },
            fresh_dt,
            c,
        );
        let nsp = x.rank() - 2;
        let (mut ks, mut st, mut dl, mut pd) = (vec![], vec![], vec![], vec![]);
        for i in 0..nsp {
            let input = x.conc[i + 2] as i64;
            let mut ok = false;
            for _ in 0..6 {
                let k = self.tp.range(1, 3);
                let d = self.tp.range(1, 2);
                let eff = (k - 1) * d + 1;
                let lo = self.tp.range(0, eff / 2);
                let hi = if self.tp.chance(1, 2) {
                    lo
                } else {
                    self.tp.range(0, eff / 2)
                };
                let s = self.tp.range(1, 3);
                if input + lo + hi >= eff {
                    ks.push(k);
                    dl.push(d);
                    pd.push((lo, hi));
                    st.push(s);
                    ok = true;
                    break;
                }
            }
            if !ok {
                // input is 0: a kernel of 2 with pad 1 on both sides.
                ks.push(2);
                dl.push(1);
                pd.push((1, 1));
                st.push(1);
            }
        }
        let mode = if avg { "avg" } else { "max" };
        let mut attrs = json!({ "mode": mode });
        attrs["kernel"] = self.spatial_attr(&ks);
        if st != ks || self.tp.chance(1, 3) {
            attrs["stride"] = self.spatial_attr(&st);
        }
        if dl.iter().any(|s| *s != 1) || self.tp.chance(1, 3) {
            attrs["dilation"] = self.spatial_attr(&dl);
        }
        if pd.iter().any(|p| *p != (0, 0)) || self.tp.chance(1, 3) {
            attrs["pad"] = self.pad_attr(&pd);
        }
        let mut cip = true;
        if self.tp.chance(1, 2) {
            cip = self.tp.chance(1, 2);
            attrs["count_include_pad"] = json!(cip);
        }
        self.label(format!(
            "Pool:{}:{nsp}d:{}",
            if avg { "avg" } else { "max" },
            x.dtype.name()
        ));
        let i = self.node("Pool", vec![json!(x.name)], attrs);
        let p = Window {
            stride: st,
            pad: pd,
            dilation: dl,
            groups: 1,
            output_padding: vec![],
        };
        if avg {
            let r = tame(&x).map(|v| ref_pool(v, &x.conc, &ks, &p, Some(cip), x.dtype));
            self.set_approx(i, r);
        } else {
            // Max pooling only selects: exact, NaN propagating, padding is the lowest value.
            let r = x
                .refv
                .as_ref()
                .map(|v| ref_pool(v, &x.conc, &ks, &p, None, x.dtype));
            self.set_ref(i, r);
        }
    }

    fn attention(&mut self) {
        let x = self.existing(|t| {
            t.dtype.is_float() && t.rank() >= 2 && declarable(&t.shape[t.rank() - 1])
        });
        let q = match x {
            Some(x) => x,
            None => {
                let dt = self.float_dt();
                let nb = self.tp.below(3);
                let s = self.rand_shape(nb + 2);
                self.input(dt, s, Fill::Normal)
            }
        };
        let r = q.rank();
        let batch = q.shape[..r - 2].to_vec();
        let m = q.shape[r - 2].clone();
        let d = q.shape[r - 1].clone();
        let n = self.rand_dim();
        let dv = self.rand_dim();
        let mut sk = self.partner_shape(&batch, false, true);
        sk.push(n.clone());
        sk.push(d.clone());
        let kb = broadcast_shapes(&batch, &sk[..sk.len() - 2]).expect("K batch broadcasts");
        let mut sv = self.partner_shape(&kb, false, false);
        let all_batch = broadcast_shapes(&kb, &sv).expect("V batch broadcasts");
        sv.push(n.clone());
        sv.push(dv);
        let k = self.input(q.dtype, sk, Fill::Normal);
        let v = self.input(q.dtype, sv, Fill::Normal);
        let mut ins = vec![json!(q.name), json!(k.name), json!(v.name)];
        let mut mask = None;
        if self.tp.chance(1, 2) {
            let mut scores = all_batch;
            scores.push(m);
            scores.push(n);
            let sm = self.partner_shape(&scores, false, false);
            let bool_mask = self.tp.chance(1, 2);
            let mdt = if bool_mask { DType::Bool } else { q.dtype };
            let mk = self.input(mdt, sm, Fill::Normal);
            ins.push(json!(mk.name));
            mask = Some(mk);
            self.label(format!("Attention:mask:{}", mdt.name()));
        }
        let mut attrs = json!({});
        let causal = self.tp.chance(1, 2);
        if causal || self.tp.chance(1, 4) {
            attrs["causal"] = json!(causal);
            self.label(format!("Attention:causal:{causal}"));
        }
        let d_pos = d.as_int().is_some_and(|v| v > 0);
        let mut scale = 1.0 / (q.conc[r - 1] as f64).sqrt();
        if !d_pos || self.tp.chance(1, 3) {
            scale = self.tp.pick(&[0.5, 1.0, 0.125]);
            attrs["scale"] = json!(scale);
        }
        let acc = self.acc_attr(&mut attrs, q.dtype);
        let i = self.node("Attention", ins, attrs);
        let r = (|| {
            (acc == DType::F32).then_some(())?;
            let m = match &mask {
                Some(m) => Some((tame(m)?, m.conc.as_slice(), m.dtype == DType::Bool)),
                None => None,
            };
            let qkv = [
                (tame(&q)?, q.conc.as_slice()),
                (tame(&k)?, k.conc.as_slice()),
                (tame(&v)?, v.conc.as_slice()),
            ];
            Some(ref_attention(qkv, m, causal, scale))
        })();
        self.set_approx(i, r);
    }

    fn softmax(&mut self) {
        let x = self.existing(|t| t.dtype.is_float() && t.rank() >= 1);
        let x = x.unwrap_or_else(|| {
            let dt = self.float_dt();
            let r = self.tp.range(1, 4) as usize;
            let s = self.rand_shape(r);
            self.input(dt, s, Fill::Normal)
        });
        let mut attrs = json!({});
        let r = x.rank() as i64;
        let mut axis = x.rank() - 1;
        if self.tp.chance(2, 3) {
            let a = self.tp.range(-r, r - 1);
            attrs["axis"] = json!(a);
            axis = a.rem_euclid(r) as usize;
        }
        if self.tp.chance(1, 4) {
            attrs["acc_dtype"] = json!("fp32");
        }
        let i = self.node("Softmax", vec![json!(x.name)], attrs);
        let r = tame(&x).map(|v| ref_softmax(v, &x.conc, axis));
        self.set_approx(i, r);
    }

    fn norm(&mut self, op: &str) {
        let x = self.existing(|t| t.dtype.is_float() && t.rank() >= 1);
        let x = x.unwrap_or_else(|| {
            let dt = self.float_dt();
            let r = self.tp.range(1, 4) as usize;
            let s = self.rand_shape(r);
            self.input(dt, s, Fill::Normal)
        });
        let r = x.rank() as i64;
        let mut attrs = json!({});
        let axis = if self.tp.chance(2, 3) {
            let a = self.tp.range(-r, r - 1);
            attrs["axis"] = json!(a);
            a.rem_euclid(r) as usize
        } else {
            x.rank() - 1
        };
        let mut eps = if op == "LayerNorm" { 1e-5 } else { 1e-6 };
        if self.tp.chance(1, 2) {
            eps = self.tp.pick(&[1e-5, 0.0, 0.1]);
            attrs["eps"] = json!(eps);
        }
        if op == "LayerNorm" && self.tp.chance(1, 4) {
            attrs["acc_dtype"] = json!("fp32");
        }
        let normalized = x.shape[axis..].to_vec();
        let mut ins = vec![json!(x.name)];
        let mut params = Vec::new();
        let nparams = if op == "LayerNorm" { 2 } else { 1 };
        if normalized.iter().all(declarable) {
            let np = self.tp.below(nparams + 1);
            for _ in 0..np {
                let p = self.input(x.dtype, normalized.clone(), Fill::Normal);
                ins.push(json!(p.name));
                params.push(p);
            }
        }
        self.label(format!("{op}:params{}", ins.len() - 1));
        let i = self.node(op, ins, attrs);
        let r = (|| {
            // With eps = 0 a constant row is 0/0 in exact arithmetic but ±1 after rounding.
            (eps > 0.0).then_some(())?;
            let ps = params.iter().map(tame).collect::<Option<Vec<_>>>()?;
            Some(ref_norm(
                tame(&x)?,
                &x.conc,
                axis,
                eps,
                op == "LayerNorm",
                &ps,
            ))
        })();
        self.set_approx(i, r);
    }

    fn unary(&mut self) {
        let f = self.tp.pick(&UNARY);
        let float_only = !matches!(f, "neg" | "abs" | "relu");
        let x = self.existing(|t| {
            if float_only {
                t.dtype.is_float()
            } else {
                t.dtype != DType::Bool
            }
        });
        let x = x.unwrap_or_else(|| {
            let dt = if float_only {
                self.float_dt()
            } else {
                self.tp
                    .pick(&[DType::F16, DType::BF16, DType::F32, DType::I32])
            };
            self.fresh(dt)
        });
        self.label(format!("fn:{f}:{}", x.dtype.name()));
        // Now and then the operand is a scalar (an fp32 rank-0 result).
        let x = if self.tp.chance(1, 16) {
            let v = self.scalar(DType::F32, false);
            self.label("scalar-only");
            Tn {
                name: String::new(),
                dtype: DType::F32,
                shape: vec![],
                conc: vec![],
                refv: Some(vec![v]),
                approx: None,
            }
        } else {
            x
        };
        let operand = if x.name.is_empty() {
            json!(x.refv.as_ref().expect("scalar")[0])
        } else {
            json!(x.name)
        };
        let top = self.tp.chance(1, 4);
        let i = if top {
            self.node_with("Elementwise", vec![operand], json!({}), Some(f))
        } else {
            self.node("Elementwise", vec![operand], json!({"fn": f}))
        };
        let dt = x.dtype;
        let r = x.refv.as_ref().and_then(|v| {
            let g: fn(f64) -> f64 = match f {
                "neg" => |a| -a,
                "abs" => f64::abs,
                "relu" => |a| if a > 0.0 || a.is_nan() { a } else { 0.0 },
                _ => return None,
            };
            Some(v.iter().map(|a| dt.round(g(*a))).collect())
        });
        self.set_ref(i, r);
        let g: Option<fn(f64) -> f64> = match f {
            "exp" => Some(f64::exp),
            "exp2" => Some(f64::exp2),
            "log" => Some(f64::ln),
            "sqrt" => Some(f64::sqrt),
            "rsqrt" => Some(|a| 1.0 / a.sqrt()),
            "recip" => Some(|a| 1.0 / a),
            "sigmoid" => Some(sigmoid),
            "tanh" => Some(f64::tanh),
            "silu" => Some(|a| a * sigmoid(a)),
            "gelu" => Some(|a| 0.5 * a * (1.0 + libm::erf(a / std::f64::consts::SQRT_2))),
            "gelu_tanh" => Some(|a| {
                let k = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * a * (1.0 + (k * (a + 0.044715 * a * a * a)).tanh())
            }),
            _ => None,
        };
        let r = g.and_then(|g| Some(tame(&x)?.iter().map(|a| g(*a)).collect()));
        self.set_approx(i, r);
    }

    /// A scalar operand for a tensor of dtype `dt`.
    fn scalar(&mut self, dt: DType, nonzero: bool) -> f64 {
        match dt {
            DType::I32 if nonzero => self.tp.pick(&[2.0, -3.0, 1.0]),
            DType::I32 => self.tp.pick(&[2.0, -3.0, 1.0, 0.0]),
            DType::Bool => self.tp.pick(&[0.0, 1.0]),
            _ if nonzero => self.tp.pick(&[0.5, 2.0, -1.5, 3.0]),
            _ => self.tp.pick(&[0.5, 2.0, -1.5, 0.0, 3.0]),
        }
    }

    /// A second operand for `x`: a scalar, `x` itself, an existing tensor or a fresh input that
    /// broadcasts against it.
    /// `against` is the shape it must broadcast with (`x`'s, or more).
    fn partner(&mut self, x: &Tn, against: &[Dim], fill: Fill, allow_scalar: bool) -> Operand {
        let nonzero = fill == Fill::NonZero;
        match self.tp.below(4) {
            0 if allow_scalar => Operand::Scalar(self.scalar(x.dtype, nonzero)),
            1 if !nonzero => Operand::T(x.clone()),
            2 if !nonzero => {
                let xs = against.to_vec();
                let dt = x.dtype;
                match self.existing(|t| {
                    t.dtype == dt && broadcast_shapes(&xs, &t.shape).is_ok_and(|s| s.len() <= 4)
                }) {
                    Some(t) => Operand::T(t),
                    None => {
                        let s = self.partner_shape(against, true, true);
                        Operand::T(self.input(x.dtype, s, fill))
                    }
                }
            }
            _ => {
                let s = self.partner_shape(against, true, true);
                Operand::T(self.input(x.dtype, s, fill))
            }
        }
    }

    fn binary(&mut self) {
        let f = self.tp.pick(&BINARY);
        let arith = matches!(f, "add" | "sub" | "mul" | "div" | "pow");
        let x = self.existing(|t| {
            if f == "pow" {
                t.dtype.is_float()
            } else {
                !arith || t.dtype != DType::Bool
            }
        });
        let x = x.unwrap_or_else(|| {
            let dt = if f == "pow" {
                self.float_dt()
            } else if arith {
                self.tp
                    .pick(&[DType::F16, DType::BF16, DType::F32, DType::I32])
            } else {
                self.any_dt()
            };
            self.fresh(dt)
        });
        let int_div = f == "div" && x.dtype == DType::I32;
        let fill = if int_div { Fill::NonZero } else { Fill::Normal };
        let xs = x.shape.clone();
        let y = self.partner(&x, &xs, fill, true);
        // Both scalars (an fp32 scalar result) now and then.
        let x_op = if !int_div && self.tp.chance(1, 12) {
            Operand::Scalar(self.scalar(DType::F32, false))
        } else {
            Operand::T(x.clone())
        };
        let (a, b) = if !int_div && self.tp.chance(1, 3) {
            (y, x_op)
        } else {
            (x_op, y)
        };
        self.label(format!("fn:{f}:{}", x.dtype.name()));
        if matches!(a, Operand::Scalar(_)) || matches!(b, Operand::Scalar(_)) {
            self.label("scalar-operand");
        }
        let i = self.node("Elementwise", vec![a.json(), b.json()], json!({"fn": f}));
        let out = self.vals[i].clone();
        let in_dt = if out.dtype == DType::Bool && f != "max" && f != "min" {
            match (&a, &b) {
                (Operand::T(t), _) | (_, Operand::T(t)) => t.dtype,
                _ => DType::F32,
            }
        } else {
            out.dtype
        };
        let int = in_dt == DType::I32;
        let g: Option<fn(f64, f64) -> f64> = match f {
            // i32 arithmetic wraps (two's complement), exactly.
            "add" if int => Some(|a, b| f64::from((a as i32).wrapping_add(b as i32))),
            "sub" if int => Some(|a, b| f64::from((a as i32).wrapping_sub(b as i32))),
            "mul" if int => Some(|a, b| f64::from((a as i32).wrapping_mul(b as i32))),
            "add" => Some(|a, b| a + b),
            "sub" => Some(|a, b| a - b),
            "mul" => Some(|a, b| a * b),
            "div" if in_dt.is_float() => Some(|a, b| a / b),
            "max" => Some(nan_max),
            "min" => Some(nan_min),
            "lt" => Some(|a, b| f64::from(u8::from(a < b))),
            "le" => Some(|a, b| f64::from(u8::from(a <= b))),
            "gt" => Some(|a, b| f64::from(u8::from(a > b))),
            "ge" => Some(|a, b| f64::from(u8::from(a >= b))),
            "eq" => Some(|a, b| f64::from(u8::from(a == b))),
            "ne" => Some(|a, b| f64::from(u8::from(a != b))),
            _ => None,
        };
        let r = g.and_then(|g| {
            let va = a.values(in_dt, &out.conc)?;
            let vb = b.values(in_dt, &out.conc)?;
            Some(
                va.iter()
                    .zip(&vb)
                    .map(|(p, q)| out.dtype.round(g(*p, *q)))
                    .collect(),
            )
        });
        self.set_ref(i, r);
        if f == "pow" && a.tame() && b.tame() {
            let r = (|| {
                let va = a.values(in_dt, &out.conc)?;
                let vb = b.values(in_dt, &out.conc)?;
                Some(va.iter().zip(&vb).map(|(p, q)| p.powf(*q)).collect())
            })();
            self.set_approx(i, r);
        }
    }

    fn where_(&mut self) {
        let x = self.existing(|_| true);
        let x = x.unwrap_or_else(|| {
            let dt = self.any_dt();
            self.fresh(dt)
        });
        let cond = if x.dtype == DType::Bool && self.tp.chance(1, 4) {
            Operand::T(x.clone())
        } else if self.tp.chance(1, 16) {
            Operand::Scalar(1.0)
        } else {
            let s = self.partner_shape(&x.shape, true, true);
            Operand::T(self.input(DType::Bool, s, Fill::Normal))
        };
        let against = match &cond {
            Operand::T(c) => broadcast_shapes(&x.shape, &c.shape).expect("cond broadcasts"),
            Operand::Scalar(_) => x.shape.clone(),
        };
        let other = self.partner(&x, &against, Fill::Normal, true);
        let x_op = if self.tp.chance(1, 8) {
            Operand::Scalar(self.scalar(x.dtype, false))
        } else {
            Operand::T(x.clone())
        };
        let (a, b) = if self.tp.chance(1, 2) {
            (x_op, other)
        } else {
            (other, x_op)
        };
        self.label(format!("fn:where:{}", x.dtype.name()));
        let i = self.node(
            "Elementwise",
            vec![cond.json(), a.json(), b.json()],
            json!({"fn": "where"}),
        );
        let out = self.vals[i].clone();
        let r = (|| {
            let vc = cond.values(DType::Bool, &out.conc)?;
            let va = a.values(out.dtype, &out.conc)?;
            let vb = b.values(out.dtype, &out.conc)?;
            Some(
                (0..vc.len())
                    .map(|k| if vc[k] != 0.0 { va[k] } else { vb[k] })
                    .collect(),
            )
        })();
        self.set_ref(i, r);
    }

    /// Distinct axes of a rank-`r` tensor, each written non-negative or negative.
    fn axes(&mut self, r: usize, min: usize) -> (Vec<usize>, Vec<i64>) {
        let mut axes: Vec<usize> = (0..r).filter(|_| self.tp.chance(1, 2)).collect();
        while axes.len() < min.min(r) {
            let a = self.tp.below(r);
            if !axes.contains(&a) {
                axes.push(a);
            }
        }
        let written = axes
            .iter()
            .map(|a| {
                if self.tp.chance(1, 3) {
                    *a as i64 - r as i64
                } else {
                    *a as i64
                }
            })
            .collect();
        (axes, written)
    }

    fn reduce(&mut self) {
        let f = self.tp.pick(&["sum", "max", "min", "mean", "prod"]);
        let dt = match f {
            "max" | "min" => self.any_dt(),
            "mean" => self.float_dt(),
            _ => self
                .tp
                .pick(&[DType::F16, DType::BF16, DType::F32, DType::I32]),
        };
        let x = self.existing(|t| t.rank() >= 1 && t.dtype == dt);
        let x = x.unwrap_or_else(|| {
            let r = self.tp.range(1, 4) as usize;
            let s = self.rand_shape(r);
            self.input(dt, s, Fill::Normal)
        });
        let (axes, written) = self.axes(x.rank(), 1);
        let mut attrs = json!({"fn": f});
        attrs["axes"] = if written.len() == 1 && self.tp.chance(1, 2) {
            json!(written[0])
        } else {
            json!(written)
        };
        let keepdim = self.tp.chance(1, 2);
        if keepdim || self.tp.chance(1, 4) {
            attrs["keepdim"] = json!(keepdim);
        }
        let mut acc = DType::F32;
        if x.dtype.is_float() {
            acc = self.acc_attr(&mut attrs, x.dtype);
        } else if x.dtype == DType::I32 && self.tp.chance(1, 4) {
            attrs["acc_dtype"] = json!("i32");
        }
        self.label(format!("Reduce:{f}:{}:keepdim:{keepdim}", x.dtype.name()));
        let i = self.node("Reduce", vec![json!(x.name)], attrs);
        let comb = Comb::parse(f);
        if f == "max" || f == "min" || x.dtype == DType::I32 {
            // Selections and wrapping i32 sums/products: exact.
            let r = x
                .refv
                .as_ref()
                .map(|v| ref_reduce(&x.conc, v, &axes, comb, x.dtype));
            self.set_ref(i, r);
        } else if acc == DType::F32 {
            let r = tame(&x).map(|v| {
                let mut y = ref_reduce(&x.conc, v, &axes, comb, DType::F32);
                if f == "mean" {
                    let n: usize = axes.iter().map(|a| x.conc[*a]).product();
                    y.iter_mut().for_each(|s| *s /= n as f64);
                }
                y
            });
            self.set_approx(i, r);
        }
    }

    fn cumulative(&mut self) {
        let f = self.tp.pick(&["sum", "prod", "max", "min"]);
        let x = self
            .existing(|t| t.rank() >= 1 && (t.dtype != DType::Bool || f == "max" || f == "min"));
        let x = x.unwrap_or_else(|| {
            let dt = if f == "max" || f == "min" {
                self.any_dt()
            } else {
                self.tp
                    .pick(&[DType::F16, DType::BF16, DType::F32, DType::I32])
            };
            let r = self.tp.range(1, 4) as usize;
            let s = self.rand_shape(r);
            self.input(dt, s, Fill::Normal)
        });
        let r = x.rank() as i64;
        let mut attrs = json!({"fn": f});
        let axis = if self.tp.chance(2, 3) {
            let a = self.tp.range(-r, r - 1);
            attrs["axis"] = json!(a);
            a.rem_euclid(r) as usize
        } else {
            x.rank() - 1
        };
        let reverse = self.tp.chance(1, 2);
        let exclusive = self.tp.chance(1, 2);
        if reverse || self.tp.chance(1, 4) {
            attrs["reverse"] = json!(reverse);
        }
        if exclusive || self.tp.chance(1, 4) {
            attrs["exclusive"] = json!(exclusive);
        }
        self.label(format!(
            "Cumulative:{f}:{}:rev:{reverse}:excl:{exclusive}",
            x.dtype.name()
        ));
        let i = self.node("Cumulative", vec![json!(x.name)], attrs);
        let comb = Comb::parse(f);
        let scan = |v: &[f64], dt| ref_scan(&x.conc, v, axis, comb, reverse, exclusive, dt);
        if f == "max" || f == "min" || x.dtype == DType::I32 {
            let r = x.refv.as_ref().map(|v| scan(v, x.dtype));
            self.set_ref(i, r);
        } else {
            let r = tame(&x).map(|v| scan(v, DType::F32));
            self.set_approx(i, r);
        }
    }

    fn cast(&mut self) {
        let from = self.any_dt();
        let x = self.existing(|t| t.dtype == from);
        let x = x.unwrap_or_else(|| self.fresh(from));
        let to = self.any_dt();
        self.label(format!("Cast:{}->{}", x.dtype.name(), to.name()));
        let i = self.node("Cast", vec![json!(x.name)], json!({"to": to.name()}));
        let r = x
            .refv
            .as_ref()
            .map(|v| v.iter().map(|a| to.round(*a)).collect());
        self.set_ref(i, r);
    }

    fn movement_input(&mut self, min_rank: usize) -> Tn {
        let x = self.existing(|t| t.rank() >= min_rank);
        x.unwrap_or_else(|| {
            let dt = self.any_dt();
            let r = self.tp.range(min_rank as i64, 4) as usize;
            let s = self.rand_shape(r);
            self.input(dt, s, Fill::Normal)
        })
    }

    /// A random factorization of `n` into `k` factors.
    fn factorize(&mut self, mut n: usize, k: usize) -> Vec<usize> {
        if k == 0 {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(k);
        for _ in 0..k - 1 {
            let divs: Vec<usize> = (1..=n.max(1))
                .filter(|d| n == 0 || n.is_multiple_of(*d))
                .collect();
            let d = if n == 0 && self.tp.chance(1, 3) {
                0
            } else {
                self.tp.pick(&divs)
            };
            out.push(d);
            n = n.checked_div(d).unwrap_or(n);
        }
        out.push(n);
        // Shuffle.
        for i in (1..out.len()).rev() {
            let j = self.tp.below(i + 1);
            out.swap(i, j);
        }
        out
    }

    fn reshape(&mut self) {
        let x = self.movement_input(0);
        // Plain symbols may stay named; every other non-constant axis is absorbed by the -1.
        let mut named: Vec<Dim> = Vec::new();
        let mut absorbed = false;
        let mut concrete: usize = 1;
        for d in &x.shape {
            if let Some(v) = d.as_int() {
                concrete *= v as usize;
            } else if d.as_symbol().is_some() && self.tp.chance(2, 3) {
                named.push(d.clone());
            } else {
                absorbed = true;
            }
        }
        let target: Vec<Value> = if self.tp.chance(1, 8) {
            vec![json!(-1)]
        } else {
            let room = 4usize.saturating_sub(named.len() + usize::from(absorbed));
            // With a 0 among the constant factors the -1 cannot be computed: let it take them all.
            let k = if concrete == 0 && absorbed {
                0
            } else {
                self.tp.below(room + 1)
            };
            let mut target: Vec<Value> = self
                .factorize(concrete, k)
                .into_iter()
                .map(|f| json!(f))
                .collect();
            let needs_minus = absorbed || (k == 0 && concrete != 1);
            if !needs_minus && k >= 1 && concrete != 0 && self.tp.chance(1, 4) {
                let j = self.tp.below(target.len());
                target[j] = json!(-1);
            }
            for d in &named {
                let at = self.tp.below(target.len() + 1);
                target.insert(at, dim_json(d));
            }
            if needs_minus {
                let at = self.tp.below(target.len() + 1);
                target.insert(at, json!(-1));
            }
            target
        };
        self.label(format!("Reshape:{}->{}", x.rank(), target.len()));
        let i = self.node("Reshape", vec![json!(x.name)], json!({ "shape": target }));
        let r = x.refv.clone();
        self.set_ref(i, r);
    }

    fn permute(&mut self) {
        let x = self.movement_input(0);
        let r = x.rank();
        let mut perm: Vec<usize> = (0..r).collect();
        for i in (1..r).rev() {
            let j = self.tp.below(i + 1);
            perm.swap(i, j);
        }
        let written: Vec<i64> = perm
            .iter()
            .map(|p| {
                if self.tp.chance(1, 4) {
                    *p as i64 - r as i64
                } else {
                    *p as i64
                }
            })
            .collect();
        let i = self.node("Permute", vec![json!(x.name)], json!({"perm": written}));
        let out = self.vals[i].conc.clone();
        let r = x.refv.as_ref().map(|v| {
            tabulate(&out, |o| {
                let mut j = vec![0; o.len()];
                for (a, p) in perm.iter().enumerate() {
                    j[*p] = o[a];
                }
                v[ravel(&j, &x.conc)]
            })
        });
        self.set_ref(i, r);
    }

    fn expand(&mut self) {
        let x = self.movement_input(0);
        let lead = if x.rank() < 4 && self.tp.chance(1, 3) {
            self.tp.range(1, (4 - x.rank()) as i64) as usize
        } else {
            0
        };
        let mut target: Vec<Value> = Vec::new();
        for _ in 0..lead {
            let d = self.rand_dim();
            target.push(dim_json(&d));
        }
        for d in &x.shape {
            let v = if d.is_int(1) && self.tp.chance(1, 2) {
                dim_json(&self.rand_dim())
            } else if !declarable(d) || self.tp.chance(1, 4) {
                json!(-1)
            } else {
                dim_json(d)
            };
            target.push(v);
        }
        let i = self.node("Expand", vec![json!(x.name)], json!({"shape": target}));
        let out = self.vals[i].conc.clone();
        let r = x.refv.as_ref().map(|v| {
            tabulate(&out, |o| {
                let j: Vec<usize> = x
                    .conc
                    .iter()
                    .enumerate()
                    .map(|(k, d)| if *d == 1 { 0 } else { o[k + lead] })
                    .collect();
                v[ravel(&j, &x.conc)]
            })
        });
        self.set_ref(i, r);
    }

    fn pad(&mut self) {
        let x = self.movement_input(0);
        let mut pads = Vec::new();
        for n in &x.conc {
            let n = *n as i64;
            let mut p = (0, 0);
            if self.tp.chance(1, 8) {
                // Crop past the whole axis on one side, pad the other.
                p = (-(n + 1), n + 1 + self.tp.range(0, 2));
                if self.tp.chance(1, 2) {
                    p = (p.1, p.0);
                }
            } else {
                for _ in 0..4 {
                    let lo = self.tp.range(-n.min(3), 3);
                    let hi = self.tp.range(-n.min(3), 3);
                    if n + lo + hi >= 0 {
                        p = (lo, hi);
                        break;
                    }
                }
            }
            pads.push(p);
        }
        let mut attrs = json!({"pad": pads.iter().map(|(l, h)| json!([l, h])).collect::<Vec<_>>()});
        let value = if self.tp.chance(1, 2) {
            let v = match x.dtype {
                DType::Bool => self.tp.pick(&[0.0, 1.0]),
                DType::I32 => self.tp.pick(&[0.0, 7.0, -2.0]),
                _ => self.tp.pick(&[0.0, 1.5, -2.25]),
            };
            attrs["value"] = json!(v);
            v
        } else {
            0.0
        };
        self.label(format!("Pad:{}", x.dtype.name()));
        let i = self.node("Pad", vec![json!(x.name)], attrs);
        let out = self.vals[i].conc.clone();
        let fill = x.dtype.round(value);
        let r = x.refv.as_ref().map(|v| {
            tabulate(&out, |o| {
                let j: Vec<i64> = o
                    .iter()
                    .zip(&pads)
                    .map(|(a, (lo, _))| *a as i64 - lo)
                    .collect();
                if j.iter()
                    .zip(&x.conc)
                    .all(|(a, d)| *a >= 0 && (*a as usize) < *d)
                {
                    let j: Vec<usize> = j.iter().map(|a| *a as usize).collect();
                    v[ravel(&j, &x.conc)]
                } else {
                    fill
                }
            })
        });
        self.set_ref(i, r);
    }

    fn slice_bound(&mut self, n: i64) -> i64 {
        match self.tp.below(8) {
            0 => i64::MAX,
            1 => -1000,
            2 => 1000,
            _ => self.tp.range(-n - 2, n + 2),
        }
    }

    fn slice(&mut self) {
        let x = self.movement_input(1);
        let r = x.rank();
        let given_axes = self.tp.chance(1, 2);
        let (axes, written) = if given_axes {
            let (mut a, w) = self.axes(r, 1);
            // Keep the written order in step with `a`.
            let mut pairs: Vec<(usize, i64)> = a.drain(..).zip(w).collect();
            for i in (1..pairs.len()).rev() {
                let j = self.tp.below(i + 1);
                pairs.swap(i, j);
            }
            pairs.into_iter().unzip()
        } else {
            let n = self.tp.range(1, r as i64) as usize;
            (
                (0..n).collect::<Vec<_>>(),
                (0..n as i64).collect::<Vec<_>>(),
            )
        };
        let mut starts = Vec::new();
        let mut ends = Vec::new();
        let mut steps = Vec::new();
        for a in &axes {
            let n = x.conc[*a] as i64;
            starts.push(self.slice_bound(n));
            ends.push(self.slice_bound(n));
            steps.push(self.tp.range(1, 3));
        }
        let mut attrs = json!({"starts": starts, "ends": ends});
        if given_axes {
            attrs["axes"] = json!(written);
        }
        if steps.iter().any(|s| *s != 1) || self.tp.chance(1, 3) {
            attrs["steps"] = json!(steps);
        }
        let i = self.node("Slice", vec![json!(x.name)], attrs);
        let out = self.vals[i].conc.clone();
        let mut lo = vec![0usize; r];
        let mut st = vec![1usize; r];
        for (k, a) in axes.iter().enumerate() {
            let d = x.conc[*a] as i64;
            let s = if starts[k] < 0 {
                starts[k].saturating_add(d)
            } else {
                starts[k]
            };
            lo[*a] = s.clamp(0, d) as usize;
            st[*a] = steps[k] as usize;
        }
        let r = x.refv.as_ref().map(|v| {
            tabulate(&out, |o| {
                let j: Vec<usize> = (0..o.len()).map(|a| lo[a] + st[a] * o[a]).collect();
                v[ravel(&j, &x.conc)]
            })
        });
        self.set_ref(i, r);
    }

    fn flip(&mut self) {
        let x = self.movement_input(0);
        let min = usize::from(!self.tp.chance(1, 8));
        let (axes, written) = self.axes(x.rank(), min);
        let w = if written.len() == 1 && self.tp.chance(1, 2) {
            json!(written[0])
        } else {
            json!(written)
        };
        let i = self.node("Flip", vec![json!(x.name)], json!({"axes": w}));
        let r = x.refv.as_ref().map(|v| {
            tabulate(&x.conc, |o| {
                let mut j = o.to_vec();
                for a in &axes {
                    j[*a] = x.conc[*a] - 1 - o[*a];
                }
                v[ravel(&j, &x.conc)]
            })
        });
        self.set_ref(i, r);
    }

    fn concat(&mut self) {
        let x = self.existing(|t| t.shape.iter().any(|d| d.as_int().is_some()));
        let x = x.unwrap_or_else(|| {
            let dt = self.any_dt();
            let r = self.tp.range(1, 4) as usize;
            let mut s = self.rand_shape(r);
            s[0] = Dim::int(self.tp.range(0, 3));
            self.input(dt, s, Fill::Normal)
        });
        let r = x.rank();
        let cands: Vec<usize> = (0..r).filter(|a| x.shape[*a].as_int().is_some()).collect();
        let axis = self.tp.pick(&cands);
        let others_decl = x
            .shape
            .iter()
            .enumerate()
            .all(|(a, d)| a == axis || declarable(d));
        let nparts = self.tp.range(1, 3) as usize;
        let mut parts = Vec::new();
        for _ in 0..nparts {
            if others_decl && self.tp.chance(2, 3) {
                let mut s = x.shape.clone();
                s[axis] = Dim::int(self.tp.range(0, 3));
                parts.push(self.input(x.dtype, s, Fill::Normal));
            } else {
                parts.push(x.clone());
            }
        }
        let at = self.tp.below(nparts + 1);
        parts.insert(at, x.clone());
        let written = if self.tp.chance(1, 3) {
            axis as i64 - r as i64
        } else {
            axis as i64
        };
        self.label(format!("Concat:{}:{}", parts.len(), x.dtype.name()));
        let i = self.node(
            "Concat",
            parts.iter().map(|p| json!(p.name)).collect(),
            json!({"axis": written}),
        );
        let out = self.vals[i].conc.clone();
        let r = if parts.iter().all(|p| p.refv.is_some()) {
            Some(tabulate(&out, |o| {
                let mut j = o.to_vec();
                for p in &parts {
                    if j[axis] < p.conc[axis] {
                        return p.refv.as_ref().expect("ref")[ravel(&j, &p.conc)];
                    }
                    j[axis] -= p.conc[axis];
                }
                unreachable!("concat index past the parts")
            }))
        } else {
            None
        };
        self.set_ref(i, r);
    }

    fn repeat(&mut self) {
        let x = self.movement_input(0);
        let r = x.rank();
        let lead = self.tp.below(4 - r + 1);
        let reps: Vec<i64> = (0..r + lead)
            .map(|_| {
                if self.tp.chance(1, 10) {
                    0
                } else {
                    self.tp.range(1, 3)
                }
            })
            .collect();
        let i = self.node("Repeat", vec![json!(x.name)], json!({"repeats": reps}));
        let out = self.vals[i].conc.clone();
        let r = x.refv.as_ref().map(|v| {
            tabulate(&out, |o| {
                let j: Vec<usize> = x
                    .conc
                    .iter()
                    .enumerate()
                    .map(|(k, d)| o[k + lead] % d)
                    .collect();
                v[ravel(&j, &x.conc)]
            })
        });
        self.set_ref(i, r);
    }

    fn unfold(&mut self) {
        let x = self.existing(|t| t.rank() >= 1 && t.rank() <= 3 && t.conc.iter().any(|d| *d >= 1));
        let x = x.unwrap_or_else(|| {
            let dt = self.any_dt();
            let r = self.tp.range(1, 3) as usize;
            let mut s = self.rand_shape(r);
            s[0] = self.pos_dim();
            self.input(dt, s, Fill::Normal)
        });
        let cands: Vec<usize> = (0..x.rank()).filter(|a| x.conc[*a] >= 1).collect();
        let axis = self.tp.pick(&cands);
        let size = self.tp.range(1, x.conc[axis] as i64);
        let step = self.tp.range(1, 3);
        let r = x.rank() as i64;
        let written = if self.tp.chance(1, 3) {
            axis as i64 - r
        } else {
            axis as i64
        };
        let i = self.node(
            "Unfold",
            vec![json!(x.name)],
            json!({"axis": written, "size": size, "step": step}),
        );
        let out = self.vals[i].conc.clone();
        let rk = x.rank();
        let r = x.refv.as_ref().map(|v| {
            tabulate(&out, |o| {
                let mut j = o[..rk].to_vec();
                j[axis] = o[axis] * step as usize + o[rk];
                v[ravel(&j, &x.conc)]
            })
        });
        self.set_ref(i, r);
    }

    fn gather(&mut self) {
        // The frontend must see that the index fits on the other axes: every axis of X is either
        // writable (the index copies it) or provably non-negative (the index may be 0 there).
        let x = self
            .existing(|t| t.rank() >= 1 && t.shape.iter().all(|d| declarable(d) || d.is_nonneg()));
        let x = x.unwrap_or_else(|| {
            let dt = self.any_dt();
            let r = self.tp.range(1, 4) as usize;
            let s = self.rand_shape(r);
            self.input(dt, s, Fill::Normal)
        });
        let r = x.rank();
        let axis = self.tp.below(r);
        let mut s = Vec::with_capacity(r);
        for (j, d) in x.shape.iter().enumerate() {
            if j == axis {
                s.push(if x.conc[axis] == 0 {
                    Dim::int(0)
                } else {
                    Dim::int(self.tp.range(1, 4))
                });
                continue;
            }
            let v = self.tp.range(0, x.conc[j] as i64);
            let smaller = Dim::int(v);
            if declarable(d) && (self.tp.chance(1, 2) || !d.sub(&smaller).is_nonneg()) {
                s.push(d.clone());
            } else if d.sub(&smaller).is_nonneg() {
                s.push(smaller);
            } else {
                s.push(Dim::int(0));
            }
        }
        let idx = self.input(DType::I32, s, Fill::Index(x.conc[axis].max(1)));
        let written = if self.tp.chance(1, 3) {
            axis as i64 - r as i64
        } else {
            axis as i64
        };
        self.label(format!("Gather:{}", x.dtype.name()));
        let i = self.node(
            "Gather",
            vec![json!(x.name), json!(idx.name)],
            json!({"axis": written}),
        );
        let out = self.vals[i].conc.clone();
        let iv = idx.refv.clone().expect("index values");
        let r = x.refv.as_ref().map(|v| {
            tabulate(&out, |o| {
                let mut j = o.to_vec();
                j[axis] = iv[ravel(o, &idx.conc)] as usize;
                v[ravel(&j, &x.conc)]
            })
        });
        self.set_ref(i, r);
    }

    // -----------------------------------------------------------------------------------------

    /// Generates a whole case: 1–6 nodes, outputs, symbol bindings.
    fn case(mut self) -> Case {
        let n = self.tp.range(1, 6);
        for _ in 0..n {
            self.step();
        }
        // Sinks whose shape cannot be declared are reduced over the undeclarable axes.
        let sinks: Vec<Tn> = self
            .vals
            .iter()
            .filter(|t| t.name.starts_with('t') && !self.consumed.contains(&t.name))
            .cloned()
            .collect();
        let mut outs: Vec<Tn> = Vec::new();
        for s in sinks {
            if s.shape.iter().all(declarable) {
                outs.push(s);
                continue;
            }
            let axes: Vec<usize> = (0..s.rank())
                .filter(|a| !declarable(&s.shape[*a]))
                .collect();
            let f = if s.dtype == DType::Bool { "max" } else { "sum" };
            let keepdim = self.tp.chance(1, 2);
            let i = self.node(
                "Reduce",
                vec![json!(s.name)],
                json!({"fn": f, "axes": axes, "keepdim": keepdim}),
            );
            let comb = Comb::parse(f);
            if f == "max" || s.dtype == DType::I32 {
                let r = s
                    .refv
                    .as_ref()
                    .map(|v| ref_reduce(&s.conc, v, &axes, comb, s.dtype));
                self.set_ref(i, r);
            } else {
                let r = tame(&s).map(|v| ref_reduce(&s.conc, v, &axes, comb, DType::F32));
                self.set_approx(i, r);
            }
            outs.push(self.vals[i].clone());
        }
        // Some intermediates are outputs too, some are declared.
        let mut declare = Vec::new();
        for t in self.vals.clone() {
            if !t.name.starts_with('t')
                || outs.iter().any(|o| o.name == t.name)
                || !t.shape.iter().all(declarable)
            {
                continue;
            }
            // Tensors with an f64 reference are outputs more often: it is only checked there.
            let k = if t.approx.is_some() {
                self.tp.below(5).min(1)
            } else {
                self.tp.below(4)
            };
            match k {
                0 => outs.push(t),
                1 => declare.push(t),
                _ => {}
            }
        }
        // Symbols: values from --bind, from the arrays (a random subset is passed to
        // `resolve_symbols`) or from the document; a document default that something else
        // overrides may be wrong on purpose.
        let used: BTreeSet<String> = self
            .vals
            .iter()
            .flat_map(|t| t.shape.iter().flat_map(|d| d.symbols()))
            .collect();
        let mut arrays = BTreeMap::new();
        for i in &self.inputs {
            if self.tp.chance(2, 3) {
                arrays.insert(i.name.clone(), i.tensor.shape.clone());
            }
        }
        let mut cli = BTreeMap::new();
        let mut symbols = BTreeMap::new();
        let syms: BTreeMap<String, i64> = self
            .syms
            .iter()
            .filter(|(s, _)| used.contains(*s))
            .map(|(s, v)| (s.clone(), *v))
            .collect();
        for (s, v) in &syms {
            if self.tp.chance(1, 3) {
                cli.insert(s.clone(), *v);
            }
            let from_arrays = self.inputs.iter().any(|i| {
                arrays.contains_key(&i.name)
                    && i.decl.iter().any(|d| d.as_symbol() == Some(s.as_str()))
            });
            if !cli.contains_key(s) && !from_arrays {
                symbols.insert(s.clone(), *v);
            } else {
                match self.tp.below(3) {
                    0 => {
                        symbols.insert(s.clone(), *v);
                    }
                    1 => {
                        symbols.insert(s.clone(), *v + 1);
                    }
                    _ => {}
                }
            }
        }
        // A signature input may be an output too.
        if self.tp.chance(1, 10) {
            let k = self.tp.below(self.inputs.len());
            let name = self.inputs[k].name.clone();
            if let Some(t) = self.vals.iter().find(|t| t.name == name) {
                outs.push(t.clone());
            }
        }
        let out_refs: Vec<&Tn> = outs.iter().collect();
        let decl_refs: Vec<&Tn> = declare.iter().collect();
        let mut doc = self.doc(&out_refs, &decl_refs, &symbols);
        // Nodes may come in any order.
        if self.tp.chance(1, 3) {
            if let Some(g) = doc["graph"].as_array_mut() {
                for i in (1..g.len()).rev() {
                    let j = self.tp.below(i + 1);
                    g.swap(i, j);
                }
            }
        }
        Case {
            doc,
            inputs: self.inputs,
            cli,
            arrays,
            syms,
            outputs: outs,
            labels: self.labels,
        }
    }
}

/// An elementwise operand: a tensor or a scalar constant.
#[derive(Clone)]
enum Operand {
    T(Tn),
    Scalar(f64),
}

impl Operand {
    fn json(&self) -> Value {
        match self {
            Operand::T(t) => json!(t.name),
            Operand::Scalar(v) => json!(v),
        }
    }

    fn tame(&self) -> bool {
        match self {
            Operand::T(t) => tame(t).is_some(),
            Operand::Scalar(_) => true,
        }
    }

    /// Values broadcast to `out` (a scalar rounded to `dt`), if known.
    fn values(&self, dt: DType, out: &[usize]) -> Option<Vec<f64>> {
        match self {
            Operand::Scalar(v) => Some(vec![dt.round(*v); out.iter().product()]),
            Operand::T(t) => {
                let v = t.refv.as_ref()?;
                let lead = out.len() - t.conc.len();
                Some(tabulate(out, |o| {
                    let j: Vec<usize> = t
                        .conc
                        .iter()
                        .enumerate()
                        .map(|(k, d)| if *d == 1 { 0 } else { o[k + lead] })
                        .collect();
                    v[ravel(&j, &t.conc)]
                }))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The naive interpreter's index arithmetic.

fn ravel(i: &[usize], shape: &[usize]) -> usize {
    i.iter().zip(shape).fold(0, |acc, (a, d)| acc * d + a)
}

/// Values of every index of `shape`, row-major.
fn tabulate(shape: &[usize], f: impl Fn(&[usize]) -> f64) -> Vec<f64> {
    let n: usize = shape.iter().product();
    (0..n).map(|k| f(&common::unravel(k, shape))).collect()
}

/// `max` as graph-json's reductions and PyTorch define it: NaN propagates.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a >= b {
        a
    } else {
        b
    }
}

fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a <= b {
        a
    } else {
        b
    }
}

/// The combining function of a reduction or a scan.
#[derive(Clone, Copy, PartialEq)]
enum Comb {
    Max,
    Min,
    Sum,
    Prod,
}

impl Comb {
    /// `fn` of Reduce (`mean` sums) or Cumulative.
    fn parse(f: &str) -> Comb {
        match f {
            "max" => Comb::Max,
            "min" => Comb::Min,
            "prod" => Comb::Prod,
            _ => Comb::Sum,
        }
    }

    fn identity(self, dt: DType) -> f64 {
        match self {
            Comb::Max => dt.lowest(),
            Comb::Min => dt.highest(),
            Comb::Sum => 0.0,
            Comb::Prod => 1.0,
        }
    }

    /// In f64, or with wrapping i32 arithmetic for `i32`.
    fn apply(self, a: f64, b: f64, dt: DType) -> f64 {
        let int = dt == DType::I32;
        match self {
            Comb::Max => nan_max(a, b),
            Comb::Min => nan_min(a, b),
            Comb::Sum if int => f64::from((a as i32).wrapping_add(b as i32)),
            Comb::Prod if int => f64::from((a as i32).wrapping_mul(b as i32)),
            Comb::Sum => a + b,
            Comb::Prod => a * b,
        }
    }
}

fn ref_reduce(shape: &[usize], v: &[f64], axes: &[usize], comb: Comb, dt: DType) -> Vec<f64> {
    let out: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(a, d)| if axes.contains(&a) { 1 } else { *d })
        .collect();
    let mut acc = vec![comb.identity(dt); out.iter().product()];
    for (k, x) in v.iter().enumerate() {
        let mut i = common::unravel(k, shape);
        for a in axes {
            i[*a] = 0;
        }
        let o = ravel(&i, &out);
        acc[o] = comb.apply(acc[o], *x, dt);
    }
    acc
}

fn ref_scan(
    shape: &[usize],
    v: &[f64],
    axis: usize,
    comb: Comb,
    reverse: bool,
    exclusive: bool,
    dt: DType,
) -> Vec<f64> {
    let n = shape[axis];
    tabulate(shape, |o| {
        let mut acc = comb.identity(dt);
        let mut j = o.to_vec();
        for k in 0..n {
            let take = match (reverse, exclusive) {
                (false, false) => k <= o[axis],
                (false, true) => k < o[axis],
                (true, false) => k >= o[axis],
                (true, true) => k > o[axis],
            };
            if take {
                j[axis] = k;
                acc = comb.apply(acc, v[ravel(&j, shape)], dt);
            }
        }
        acc
    })
}

// ---------------------------------------------------------------------------------------------
// The f64 oracle of arithmetic ops (naive loops over the definitions in graph-json.md).

/// Values of a tensor that are exact, finite and moderate (the f64 oracle's inputs).
fn tame(t: &Tn) -> Option<&[f64]> {
    t.refv
        .as_deref()
        .filter(|v| v.iter().all(|x| x.is_finite() && x.abs() <= 1e4))
}

fn sigmoid(a: f64) -> f64 {
    1.0 / (1.0 + (-a).exp())
}

/// Element `idx` of `v` (shape `shape`) broadcast right-aligned to `idx`'s rank (size-1 axes
/// read index 0).
fn at(v: &[f64], shape: &[usize], idx: &[usize]) -> f64 {
    let lead = idx.len() - shape.len();
    let k = shape.iter().enumerate().fold(0, |k, (a, d)| {
        k * d + if *d == 1 { 0 } else { idx[a + lead] }
    });
    v[k]
}

/// Broadcast of two concrete shapes that are known to broadcast.
fn bcast_conc(a: &[usize], b: &[usize]) -> Vec<usize> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|i| {
            let da = (i + a.len()).checked_sub(r).map_or(1, |j| a[j]);
            let db = (i + b.len()).checked_sub(r).map_or(1, |j| b[j]);
            if da == 1 {
                db
            } else {
                da
            }
        })
        .collect()
}

fn ref_matmul(a: &[f64], sa: &[usize], b: &[f64], sb: &[usize]) -> Vec<f64> {
    let mut sa2 = sa.to_vec();
    if sa.len() == 1 {
        sa2.insert(0, 1);
    }
    let mut sb2 = sb.to_vec();
    if sb.len() == 1 {
        sb2.push(1);
    }
    let (ra, rb) = (sa2.len(), sb2.len());
    let (m, k, n) = (sa2[ra - 2], sa2[ra - 1], sb2[rb - 1]);
    let batch = bcast_conc(&sa2[..ra - 2], &sb2[..rb - 2]);
    let nb = batch.len();
    let mut full = batch.clone();
    full.extend([m, n]);
    // The squeezed output has the same row-major order as `full`.
    tabulate(&full, |o| {
        let mut ia: Vec<usize> = o[..nb].to_vec();
        ia.extend([o[nb], 0]);
        let mut ib: Vec<usize> = o[..nb].to_vec();
        ib.extend([0, o[nb + 1]]);
        (0..k)
            .map(|kk| {
                ia[nb + 1] = kk;
                ib[nb] = kk;
                at(a, &sa2, &ia) * at(b, &sb2, &ib)
            })
            .sum()
    })
}

struct Gemm {
    trans_a: bool,
    trans_b: bool,
    alpha: f64,
    beta: f64,
}

fn ref_gemm(
    a: &[f64],
    sa: &[usize],
    b: &[f64],
    sb: &[usize],
    c: Option<(&[f64], &[usize])>,
    g: &Gemm,
) -> Vec<f64> {
    let (m, k) = if g.trans_a {
        (sa[1], sa[0])
    } else {
        (sa[0], sa[1])
    };
    let n = if g.trans_b { sb[0] } else { sb[1] };
    tabulate(&[m, n], |o| {
        let s: f64 = (0..k)
            .map(|kk| {
                let av = if g.trans_a {
                    a[kk * sa[1] + o[0]]
                } else {
                    a[o[0] * sa[1] + kk]
                };
                let bv = if g.trans_b {
                    b[o[1] * sb[1] + kk]
                } else {
                    b[kk * sb[1] + o[1]]
                };
                av * bv
            })
            .sum();
        g.alpha * s + c.map_or(0.0, |(cv, cs)| g.beta * at(cv, cs, o))
    })
}

/// Window attributes of Conv, ConvTranspose and Pool (normalized: one entry per spatial dim).
struct Window {
    stride: Vec<i64>,
    pad: Vec<(i64, i64)>,
    dilation: Vec<i64>,
    groups: usize,
    /// ConvTranspose only.
    output_padding: Vec<i64>,
}

/// `y[n, co, o] = bias[co] + Σ_{ci, k} x[n, g·C/G + ci, o·s − lo + k·d] · w[co, ci, k]` (PyTorch).
fn ref_conv(
    x: &[f64],
    sx: &[usize],
    w: &[f64],
    sw: &[usize],
    bias: Option<&[f64]>,
    p: &Window,
) -> Vec<f64> {
    let nsp = sx.len() - 2;
    let (cout, cg) = (sw[0], sw[1]);
    let coutg = cout / p.groups;
    let kernel = &sw[2..];
    let mut out = vec![sx[0], cout];
    for i in 0..nsp {
        let (lo, hi) = p.pad[i];
        let span = p.dilation[i] * (kernel[i] as i64 - 1) + 1;
        out.push(((sx[2 + i] as i64 + lo + hi - span) / p.stride[i] + 1) as usize);
    }
    let nk: usize = kernel.iter().product();
    tabulate(&out, |o| {
        let co = o[1];
        let grp = co / coutg;
        let mut acc = bias.map_or(0.0, |b| b[co]);
        for ci in 0..cg {
            'taps: for kf in 0..nk {
                let kidx = common::unravel(kf, kernel);
                let mut xi = vec![o[0], grp * cg + ci];
                for i in 0..nsp {
                    let pos =
                        o[2 + i] as i64 * p.stride[i] - p.pad[i].0 + kidx[i] as i64 * p.dilation[i];
                    if pos < 0 || pos >= sx[2 + i] as i64 {
                        continue 'taps;
                    }
                    xi.push(pos as usize);
                }
                let mut wi = vec![co, ci];
                wi.extend(&kidx);
                acc += x[ravel(&xi, sx)] * w[ravel(&wi, sw)];
            }
        }
        acc
    })
}

/// PyTorch conv_transpose: every input element `x[n, ci, i]` adds `x · w[ci, co, k]` to
/// `y[n, g·Cout/G + co, i·s − lo + k·d]`.
fn ref_conv_transpose(
    x: &[f64],
    sx: &[usize],
    w: &[f64],
    sw: &[usize],
    bias: Option<&[f64]>,
    p: &Window,
) -> Vec<f64> {
    let nsp = sx.len() - 2;
    let c = sx[1];
    let cg = c / p.groups;
    let coutg = sw[1];
    let kernel = &sw[2..];
    let mut out = vec![sx[0], coutg * p.groups];
    for i in 0..nsp {
        let (lo, hi) = p.pad[i];
        let v = (sx[2 + i] as i64 - 1) * p.stride[i] - lo - hi
            + p.dilation[i] * (kernel[i] as i64 - 1)
            + p.output_padding[i]
            + 1;
        out.push(v as usize);
    }
    let nk: usize = kernel.iter().product();
    tabulate(&out, |o| {
        let co = o[1];
        let grp = co / coutg;
        let mut acc = bias.map_or(0.0, |b| b[co]);
        for cl in 0..cg {
            let ci = grp * cg + cl;
            'taps: for kf in 0..nk {
                let kidx = common::unravel(kf, kernel);
                let mut xi = vec![o[0], ci];
                for i in 0..nsp {
                    let t = o[2 + i] as i64 + p.pad[i].0 - kidx[i] as i64 * p.dilation[i];
                    if t < 0 || t % p.stride[i] != 0 || t / p.stride[i] >= sx[2 + i] as i64 {
                        continue 'taps;
                    }
                    xi.push((t / p.stride[i]) as usize);
                }
                let mut wi = vec![ci, co % coutg];
                wi.extend(&kidx);
                acc += x[ravel(&xi, sx)] * w[ravel(&wi, sw)];
            }
        }
        acc
    })
}

/// Pooling over the taps `o·s − lo + k·d`: max (`avg` None; padding taps are the lowest value),
/// or the average dividing by every tap (`Some(true)`: count_include_pad) or by the taps inside
/// the input (`Some(false)`).
fn ref_pool(
    x: &[f64],
    sx: &[usize],
    kernel: &[i64],
    p: &Window,
    avg: Option<bool>,
    dt: DType,
) -> Vec<f64> {
    let nsp = sx.len() - 2;
    let mut out = vec![sx[0], sx[1]];
    for i in 0..nsp {
        let (lo, hi) = p.pad[i];
        let span = p.dilation[i] * (kernel[i] - 1) + 1;
        out.push(((sx[2 + i] as i64 + lo + hi - span) / p.stride[i] + 1) as usize);
    }
    let ks: Vec<usize> = kernel.iter().map(|k| *k as usize).collect();
    let nk: usize = ks.iter().product();
    tabulate(&out, |o| {
        let mut acc = if avg.is_some() { 0.0 } else { dt.lowest() };
        let mut inside = 0usize;
        'taps: for kf in 0..nk {
            let kidx = common::unravel(kf, &ks);
            let mut xi = vec![o[0], o[1]];
            for i in 0..nsp {
                let pos =
                    o[2 + i] as i64 * p.stride[i] - p.pad[i].0 + kidx[i] as i64 * p.dilation[i];
                if pos < 0 || pos >= sx[2 + i] as i64 {
                    continue 'taps;
                }
                xi.push(pos as usize);
            }
            inside += 1;
            let v = x[ravel(&xi, sx)];
            acc = if avg.is_some() {
                acc + v
            } else {
                nan_max(acc, v)
            };
        }
        match avg {
            Some(true) => acc / nk as f64,
            Some(false) => acc / inside as f64,
            None => acc,
        }
    })
}

/// `softmax(scale·QKᵀ + mask)·V` over broadcast batch axes; `causal` keeps n <= m, a bool mask
/// keeps true, a float mask is added; a row with nothing kept gives zeros.
fn ref_attention(
    qkv: [(&[f64], &[usize]); 3],
    mask: Option<(&[f64], &[usize], bool)>,
    causal: bool,
    scale: f64,
) -> Vec<f64> {
    let [(q, sq), (k, sk), (v, sv)] = qkv;
    let (rq, rk, rv) = (sq.len(), sk.len(), sv.len());
    let batch = bcast_conc(&bcast_conc(&sq[..rq - 2], &sk[..rk - 2]), &sv[..rv - 2]);
    let nb = batch.len();
    let (m, d, n, dv) = (sq[rq - 2], sq[rq - 1], sk[rk - 2], sv[rv - 1]);
    let mut out = batch.clone();
    out.extend([m, dv]);
    tabulate(&out, |o| {
        let b = &o[..nb];
        let mi = o[nb];
        let idx = |x: usize, y: usize| {
            let mut i = b.to_vec();
            i.extend([x, y]);
            i
        };
        let mut scores = Vec::with_capacity(n);
        for ni in 0..n {
            let mut keep = !causal || ni <= mi;
            let mut s: f64 = (0..d)
                .map(|di| at(q, sq, &idx(mi, di)) * at(k, sk, &idx(ni, di)))
                .sum::<f64>()
                * scale;
            if let Some((mv, ms, is_bool)) = mask {
                let mval = at(mv, ms, &idx(mi, ni));
                if is_bool {
                    keep &= mval != 0.0;
                } else {
                    s += mval;
                }
            }
            if keep {
                scores.push((ni, s));
            }
        }
        if scores.is_empty() {
            return 0.0;
        }
        let mx = scores.iter().fold(f64::NEG_INFINITY, |a, (_, s)| a.max(*s));
        let z: f64 = scores.iter().map(|(_, s)| (s - mx).exp()).sum();
        scores
            .iter()
            .map(|(ni, s)| (s - mx).exp() / z * at(v, sv, &idx(*ni, o[nb + 1])))
            .sum()
    })
}

fn ref_softmax(x: &[f64], sx: &[usize], axis: usize) -> Vec<f64> {
    let mx = ref_reduce(sx, x, &[axis], Comb::Max, DType::F32);
    let mut red = sx.to_vec();
    red[axis] = 1;
    let e: Vec<f64> = tabulate(sx, |o| x[ravel(o, sx)] - at(&mx, &red, o))
        .into_iter()
        .map(f64::exp)
        .collect();
    let z = ref_reduce(sx, &e, &[axis], Comb::Sum, DType::F32);
    tabulate(sx, |o| e[ravel(o, sx)] / at(&z, &red, o))
}

/// LayerNorm (`layer`: `(x − mean)/sqrt(var + eps)`, then · gamma + beta) or RMSNorm
/// (`x/sqrt(mean(x²) + eps)` · gamma) over the axes `axis..`.
fn ref_norm(
    x: &[f64],
    sx: &[usize],
    axis: usize,
    eps: f64,
    layer: bool,
    params: &[&[f64]],
) -> Vec<f64> {
    let axes: Vec<usize> = (axis..sx.len()).collect();
    let cnt: usize = sx[axis..].iter().product();
    let mut red = sx.to_vec();
    for a in &axes {
        red[*a] = 1;
    }
    let mean: Vec<f64> = ref_reduce(sx, x, &axes, Comb::Sum, DType::F32)
        .into_iter()
        .map(|s| s / cnt as f64)
        .collect();
    let centered: Vec<f64> = if layer {
        tabulate(sx, |o| x[ravel(o, sx)] - at(&mean, &red, o))
    } else {
        x.to_vec()
    };
    let sq: Vec<f64> = centered.iter().map(|c| c * c).collect();
    let var: Vec<f64> = ref_reduce(sx, &sq, &axes, Comb::Sum, DType::F32)
        .into_iter()
        .map(|s| s / cnt as f64)
        .collect();
    let pshape = &sx[axis..];
    tabulate(sx, |o| {
        let mut y = centered[ravel(o, sx)] / (at(&var, &red, o) + eps).sqrt();
        if let Some(g) = params.first() {
            y *= at(g, pshape, o);
        }
        if let Some(b) = params.get(1) {
            y += at(b, pshape, o);
        }
        y
    })
}

// ---------------------------------------------------------------------------------------------
// Running a case.

/// Diagnostic codes that mean a compiler bug on a valid graph.
fn internal_code(c: &str) -> bool {
    c == "E1100"
        || c == "E0306"
        || c == "E0315"
        || c == "E0316"
        || c.starts_with("E9")
        || c.starts_with("E10")
}

fn run_case(case: &Case) -> Result<(), String> {
    let text = case.doc.to_string();
    let g = load_str(&text, "fuzz.json").map_err(|d| format!("load rejects it:\n{d}"))?;
    let bindings = resolve_symbols(&g, &case.cli, &case.arrays)
        .map_err(|d| format!("resolve_symbols fails:\n{d}"))?;
    for (s, v) in &case.syms {
        if bindings.get(s) != Some(v) {
            return Err(format!(
                "symbol {s} bound to {:?}, expected {v}",
                bindings.get(s)
            ));
        }
    }
    let prog = lower(&g).map_err(|d| {
        let tag = if d.codes().iter().any(|c| internal_code(c)) {
            "internal error"
        } else {
            "error"
        };
        format!("lower fails ({tag}):\n{d}")
    })?;
    verify(&prog).map_err(|e| format!("verify fails:\n{}", e.to_diagnostic()))?;
    let ins: BTreeMap<String, Tensor> = case
        .inputs
        .iter()
        .map(|i| (i.name.clone(), i.tensor.clone()))
        .collect();
    let out = evaluate(&prog, &bindings, &ins).map_err(|d| format!("evaluate fails:\n{d}"))?;
    for o in &case.outputs {
        let t = out
            .get(&o.name)
            .ok_or_else(|| format!("output {} missing", o.name))?;
        if t.dtype != o.dtype || t.shape != o.conc {
            return Err(format!(
                "output {}: {} {:?}, declared {} {:?}",
                o.name,
                t.dtype.name(),
                t.shape,
                o.dtype.name(),
                o.conc
            ));
        }
        if t.numel() != t.to_f64().len() {
            return Err(format!(
                "output {}: data length differs from its shape",
                o.name
            ));
        }
        if let Some(want) = &o.refv {
            let got = t.to_f64();
            for (k, (a, b)) in got.iter().zip(want).enumerate() {
                if !(a == b || (a.is_nan() && b.is_nan())) {
                    return Err(format!(
                        "output {}: element {k} is {a}, the naive interpreter says {b}\n  got  {got:?}\n  want {want:?}",
                        o.name
                    ));
                }
            }
        }
        if let Some(want) = &o.approx {
            // graph-json's tolerances: 1e-3 for fp32 outputs, 1e-2 for fp16/bf16.
            let tol = if o.dtype == DType::F32 { 1e-3 } else { 1e-2 };
            let got = t.to_f64();
            for (k, (a, b)) in got.iter().zip(want).enumerate() {
                let close = if b.is_finite() {
                    (a - b).abs() <= tol + tol * b.abs()
                } else {
                    a == b || (a.is_nan() && b.is_nan())
                };
                if !close {
                    return Err(format!(
                        "output {}: element {k} is {a}, the f64 oracle says {b}\n  got  {got:?}\n  want {want:?}",
                        o.name
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Runs a case; a failure or a panic reports the document.
fn check(case: &Case) -> Result<(), TestCaseError> {
    let res = catch_unwind(AssertUnwindSafe(|| run_case(case)));
    let why = match res {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(why)) => why,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            format!("panic: {msg}")
        }
    };
    Err(TestCaseError::fail(format!(
        "{why}\ncli {:?}, arrays {:?}, symbol values {:?}\ndocument:\n{}",
        case.cli,
        case.arrays,
        case.syms,
        serde_json::to_string_pretty(&case.doc).unwrap_or_default()
    )))
}

fn gen_case(tape: &[u32]) -> Case {
    Gen::new(tape).case()
}

/// Case count: 2000 (about a second), or `PIPELINE_FUZZ_CASES` for a longer run.
fn fuzz_cases() -> u32 {
    std::env::var("PIPELINE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

proptest! {
    // Failures are minimized by hand into tests/pipeline_regressions.rs; no persistence file.
    #![proptest_config(ProptestConfig {
        cases: fuzz_cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Valid documents never make lowering or the evaluator fail or panic, and every output has
    /// its declared dtype and bound shape (and the naive interpreter's values where it has them).
    #[test]
    fn valid_graphs_lower_and_evaluate(tape in prop::collection::vec(any::<u32>(), 0..400)) {
        let case = gen_case(&tape);
        check(&case)?;
    }
}

/// The generator reaches every op, every elementwise function and every dtype (checked on a fixed
/// set of tapes, generation only).
#[test]
fn generator_covers_every_op_and_dtype() {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut s: u64 = 12345;
    for _ in 0..1500 {
        let tape: Vec<u32> = (0..400)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 33) as u32
            })
            .collect();
        seen.extend(gen_case(&tape).labels);
    }
    let mut want: Vec<String> = dlc_egg::ir::frontend::Op::NAMES
        .iter()
        .map(|s| s.to_string())
        .collect();
    want.retain(|o| o != "GEMM" && o != "Elementwise");
    want.push("GEMM".into());
    want.push("Elementwise".into());
    for f in UNARY.iter().chain(BINARY.iter()).chain(["where"].iter()) {
        assert!(
            seen.iter().any(|l| l.starts_with(&format!("fn:{f}:"))),
            "function {f} never generated"
        );
    }
    for o in want {
        assert!(seen.contains(&o), "op {o} never generated");
    }
    for d in DType::ALL {
        assert!(
            seen.contains(&format!("input:{}", d.name())),
            "dtype {d:?} never generated"
        );
    }
    for a in DType::ALL {
        for b in DType::ALL {
            let l = format!("Cast:{}->{}", a.name(), b.name());
            assert!(seen.contains(&l), "{l} never generated");
        }
    }
    for f in ["sum", "max", "min", "mean", "prod"] {
        for k in [false, true] {
            assert!(
                seen.iter().any(|l| l.starts_with(&format!("Reduce:{f}:"))
                    && l.ends_with(&format!(":keepdim:{k}"))),
                "Reduce {f} keepdim={k} never generated"
            );
        }
    }
    for f in ["sum", "prod", "max", "min"] {
        for rev in [false, true] {
            for ex in [false, true] {
                assert!(
                    seen.iter()
                        .any(|l| l.starts_with(&format!("Cumulative:{f}:"))
                            && l.ends_with(&format!(":rev:{rev}:excl:{ex}"))),
                    "Cumulative {f} reverse={rev} exclusive={ex} never generated"
                );
            }
        }
    }
    for l in [
        "Reduce:max:bool:keepdim:false",
        "Reduce:min:i32:keepdim:true",
        "Conv:1d:g2",
        "Conv:2d:g3",
        "Conv:symbolic-kernel",
        "ConvTranspose:1d:g2",
        "ConvTranspose:2d:g1",
        "Pool:max:2d:i32",
        "Pool:avg:1d:bf16",
        "Attention:mask:fp32",
        "Attention:causal:false",
        "LayerNorm:params2",
        "RMSNorm:params1",
        "Reshape:0->2",
        "Reshape:3->1",
        "MatMul:4x4",
        "acc:fp16",
        "MatMul:1x1",
        "MatMul:1x2",
        "MatMul:2x1",
        "MatMul:3x3",
        "Attention:mask:bool",
        "Attention:causal:true",
        "Pool:avg:2d:fp16",
        "GEMM:C",
        "scalar-operand",
        "scalar-only",
        "Cast:bool->bf16",
        "Cast:fp32->i32",
    ] {
        assert!(seen.contains(l), "{l} never generated");
    }
}

// ---------------------------------------------------------------------------------------------
// Identities.

/// Loads, binds (no symbols), lowers and evaluates a document; returns the outputs.
fn eval_doc(doc: &Value, inputs: &[(&str, Tensor)]) -> BTreeMap<String, Tensor> {
    let ins: Vec<(&str, Tensor)> = inputs.iter().map(|(n, t)| (*n, t.clone())).collect();
    common::try_run(&doc.to_string(), ins).unwrap_or_else(|d| {
        panic!(
            "{d}\n{}",
            serde_json::to_string_pretty(doc).unwrap_or_default()
        )
    })
}

fn two_node_doc(x_shape: &[usize], dt: &str, n1: Value, n2: Value, y_shape: Value) -> Value {
    json!({
        "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "Y"}]},
        "tensors": {
            "X": {"dtype": dt, "shape": x_shape},
            "Y": {"dtype": dt, "shape": y_shape},
        },
        "graph": [n1, n2],
    })
}

fn nd(op: &str, i: &str, o: &str, attrs: Value) -> Value {
    json!({"op": op, "name": o, "inputs": [i], "outputs": [o], "attrs": attrs})
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 120,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Movement round trips give back the input exactly.
    #[test]
    fn movement_roundtrips_are_identity(
        shape in prop::collection::vec(1usize..5, 1..5),
        kind in 0usize..5,
        seed in any::<u64>(),
        aux in any::<u32>(),
        dt in prop::sample::select(vec!["fp16", "bf16", "fp32", "i32"]),
    ) {
        let r = shape.len();
        let x = common::rand_tensor(seed, DType::parse(dt).expect("dtype"), &shape);
        let (n1, n2) = match kind {
            0 => {
                let axes: Vec<usize> = (0..r).filter(|a| aux >> a & 1 == 1).collect();
                (nd("Flip", "X", "A", json!({"axes": axes})), nd("Flip", "A", "Y", json!({"axes": axes})))
            }
            1 => {
                let mut perm: Vec<usize> = (0..r).collect();
                perm.rotate_left(aux as usize % r);
                let mut inv = vec![0; r];
                for (i, p) in perm.iter().enumerate() {
                    inv[*p] = i;
                }
                (nd("Permute", "X", "A", json!({"perm": perm})), nd("Permute", "A", "Y", json!({"perm": inv})))
            }
            2 => {
                let n: usize = shape.iter().product();
                let t = if aux % 2 == 0 { json!([n]) } else { json!([-1, shape[r - 1]]) };
                (nd("Reshape", "X", "A", json!({"shape": t})), nd("Reshape", "A", "Y", json!({"shape": shape})))
            }
            3 => {
                let axis = aux as usize % r;
                let n = shape[axis] as i64;
                let n1 = json!({"op": "Concat", "name": "A", "inputs": ["X", "X", "X"], "outputs": ["A"], "attrs": {"axis": axis}});
                (n1, nd("Slice", "A", "Y", json!({"starts": [n], "ends": [2 * n], "axes": [axis]})))
            }
            _ => {
                let pads: Vec<Value> = (0..r).map(|a| json!([(aux >> a) as i64 % 3, (aux >> (a + 8)) as i64 % 2])).collect();
                let crops: Vec<Value> = (0..r).map(|a| json!([-((aux >> a) as i64 % 3), -((aux >> (a + 8)) as i64 % 2)])).collect();
                (nd("Pad", "X", "A", json!({"pad": pads, "value": 5})), nd("Pad", "A", "Y", json!({"pad": crops})))
            }
        };
        let doc = two_node_doc(&shape, dt, n1, n2, json!(shape));
        let y = eval_doc(&doc, &[("X", x.clone())]).remove("Y").expect("Y");
        prop_assert_eq!(y, x);
    }

    /// Softmax rows sum to 1; the last element of an inclusive cumulative sum (the first, when
    /// reversed) is the Reduce sum.
    #[test]
    fn softmax_rows_and_scan_totals(
        shape in prop::collection::vec(1usize..6, 1..4),
        axis_pick in any::<usize>(),
        reverse in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let r = shape.len();
        let axis = axis_pick % r;
        let x = common::rand_tensor(seed, DType::F32, &shape);
        let mut reduced = shape.clone();
        reduced[axis] = 1;
        let doc = json!({
            "signature": {"inputs": [{"tensor": "X"}], "outputs": [{"tensor": "P"}, {"tensor": "C"}, {"tensor": "R"}]},
            "tensors": {
                "X": {"dtype": "fp32", "shape": shape},
                "P": {"dtype": "fp32", "shape": reduced},
                "C": {"dtype": "fp32", "shape": shape},
                "R": {"dtype": "fp32", "shape": reduced},
            },
            "graph": [
                {"op": "Softmax", "name": "sm", "inputs": ["X"], "outputs": ["S"], "attrs": {"axis": axis}},
                {"op": "Reduce", "name": "ps", "inputs": ["S"], "outputs": ["P"], "attrs": {"fn": "sum", "axes": [axis], "keepdim": true}},
                {"op": "Cumulative", "name": "cs", "inputs": ["X"], "outputs": ["C"], "attrs": {"fn": "sum", "axis": axis, "reverse": reverse}},
                {"op": "Reduce", "name": "rs", "inputs": ["X"], "outputs": ["R"], "attrs": {"fn": "sum", "axes": axis, "keepdim": true}},
            ],
        });
        let out = eval_doc(&doc, &[("X", x)]);
        for p in out["P"].to_f64() {
            prop_assert!((p - 1.0).abs() < 1e-5, "softmax row sums to {}", p);
        }
        let c = &out["C"];
        let rsum = out["R"].to_f64();
        let n = shape[axis];
        for (k, total) in rsum.iter().enumerate() {
            let mut i = common::unravel(k, &reduced);
            i[axis] = if reverse { 0 } else { n - 1 };
            let last = c.get_f64(ravel(&i, &shape));
            prop_assert!((last - total).abs() <= 1e-5 * (1.0 + total.abs()), "scan total {} vs reduce {}", last, total);
        }
    }
}
