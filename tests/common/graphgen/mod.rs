//! A random *valid* `graph.json` generator (DAGs of 1–6 nodes drawn from every op of
//! `graph-json.md`, fp16/bf16/fp32 and i32/bool where the op allows, some symbolic sizes bound
//! through `resolve_symbols`, zero-size axes, special input values) with two reference oracles,
//! shared by the fuzz tests (`use common::graphgen::gen_case`).
//!
//! Documents are valid by construction: each node is built from the inferred shapes of the tensors
//! before it (every node is probe-loaded as it is added, as `common::one_op` does) and from the
//! concrete symbol values the case binds, so sizes that only become concrete at `run` time (a
//! slice of a symbolic axis, a conv output size) are valid too.
//!
//! Numerics, two oracles written here, independent of the evaluator:
//! - exact ([`oracle_exact`]): movement ops, casts, exact elementwise functions (neg, abs, relu,
//!   max, min, comparisons, where, and add/sub/mul/div rounded to the dtype, i32 wrapping),
//!   max/min reductions, scans and max pooling, i32 sums and products are replayed per element
//!   (index arithmetic only): a tensor's [`Tn::refv`] must match bit for bit;
//! - f64 ([`oracle_f64`]): MatMul, GEMM, Conv, ConvTranspose, avg Pool, Attention, Softmax,
//!   LayerNorm, RMSNorm, float sums/means/products, scans and transcendental functions are
//!   recomputed with naive loops in f64 from exact, finite inputs (fp32 accumulation): a tensor's
//!   [`Tn::approx`] is compared within graph-json's tolerances.
//!
//! Generation reads a [`tape::Tape`] of random `u32`s, so proptest shrinks a failure towards short
//! tapes and the first choice of every decision.

mod ops_contraction;
mod ops_elementwise;
mod ops_movement;
mod ops_window;
pub mod oracle_exact;
pub mod oracle_f64;
mod tape;

use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend::load_str;
use dlc_egg::tensor::Tensor;
use oracle_exact::*;
use oracle_f64::*;
use serde_json::{json, Value};
use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use tape::Tape;

// ---------------------------------------------------------------------------------------------
// Tensors, inputs and the generator.

pub const UNARY: [&str; 14] = [
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
pub const BINARY: [&str; 13] = [
    "add", "sub", "mul", "div", "max", "min", "pow", "lt", "le", "gt", "ge", "eq", "ne",
];
pub const FLOATS: [DType; 3] = [DType::F16, DType::BF16, DType::F32];

/// The generator's op menu (Elementwise split by arity).
pub const OPS: [&str; 25] = [
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
pub enum Fill {
    Normal,
    /// i32 divisors: never 0.
    NonZero,
    /// Gather indices: in `0..n`.
    Index(usize),
}

pub struct Input {
    pub name: String,
    pub decl: Vec<Dim>,
    pub tensor: Tensor,
}

/// A tensor the generator can use as an operand.
#[derive(Clone, Debug)]
pub struct Tn {
    pub name: String,
    pub dtype: DType,
    /// As the frontend inferred it.
    pub shape: Vec<Dim>,
    /// With the case's symbol values.
    pub conc: Vec<usize>,
    /// Reference values (row-major) where the naive interpreter can compute them exactly.
    pub refv: Option<Vec<f64>>,
    /// Reference values of arithmetic ops computed in f64 from exact inputs (compared with a
    /// tolerance).
    pub approx: Option<Vec<f64>>,
}

impl Tn {
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
}

/// A size that can be written in a document (`tensors` shapes and Reshape/Expand targets).
pub fn declarable(d: &Dim) -> bool {
    d.as_int().is_some() || d.as_symbol().is_some()
}

pub fn dim_json(d: &Dim) -> Value {
    match d.as_int() {
        Some(v) => json!(v),
        None => json!(d.as_symbol().expect("declarable dim")),
    }
}

pub fn shape_json(s: &[Dim]) -> Value {
    Value::Array(s.iter().map(dim_json).collect())
}

/// A generated case.
pub struct Case {
    pub doc: Value,
    pub inputs: Vec<Input>,
    pub cli: BTreeMap<String, i64>,
    pub arrays: BTreeMap<String, Vec<usize>>,
    pub syms: BTreeMap<String, i64>,
    pub outputs: Vec<Tn>,
    /// Labels of what was generated (ops, functions, dtypes), for the coverage test.
    pub labels: Vec<String>,
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
        let raw = super::data(
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

impl Case {
    /// A failure report: `why`, the symbol bindings and the document.
    pub fn report(&self, why: &str) -> String {
        format!(
            "{why}\ncli {:?}, arrays {:?}, symbol values {:?}\ndocument:\n{}",
            self.cli,
            self.arrays,
            self.syms,
            serde_json::to_string_pretty(&self.doc).unwrap_or_default()
        )
    }

    /// The inputs by name, as the evaluators take them.
    pub fn input_map(&self) -> BTreeMap<String, Tensor> {
        self.inputs
            .iter()
            .map(|i| (i.name.clone(), i.tensor.clone()))
            .collect()
    }
}

/// The message of a caught panic.
pub fn panic_message(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Runs `run` on a case, catching panics; a failure or a panic gives the case's report.
pub fn run_reported(case: &Case, run: fn(&Case) -> Result<(), String>) -> Result<(), String> {
    let why = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(case))) {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(why)) => why,
        Err(p) => format!("panic: {}", panic_message(p.as_ref())),
    };
    Err(case.report(&why))
}

/// The case a tape generates.
pub fn gen_case(tape: &[u32]) -> Case {
    Gen::new(tape).case()
}
