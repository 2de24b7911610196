//! Property test: the fused, vectorized evaluator agrees bit for bit with a deliberately naive
//! per-element reference (every node materialized, every index mapped one at a time) on random
//! chains of movement ops, elementwise ops and reductions.

use dlc_egg::eval::evaluate;
use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::tiny::{
    AffineIndex, BinaryOp, Builder, NodeId, Program, ReduceOp, Src, UOp, UnaryOp,
};
use dlc_egg::tensor::Tensor;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

// ---------------------------------------------------------------- naive reference

#[derive(Clone, Debug)]
struct Dense {
    shape: Vec<usize>,
    v: Vec<f64>,
}

fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (i, d) in idx.iter_mut().zip(shape).rev() {
        *i = flat % d;
        flat /= d;
    }
    idx
}

fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (i, d)| acc * d + i)
}

fn ints(shape: &[Dim]) -> Vec<usize> {
    shape.iter().map(|d| d.as_int().unwrap() as usize).collect()
}

/// Builds a dense value by asking `f` for each output multi-index.
fn tabulate(shape: Vec<usize>, f: impl Fn(&[usize]) -> f64) -> Dense {
    let n: usize = shape.iter().product();
    let v = (0..n).map(|i| f(&unravel(i, &shape))).collect();
    Dense { shape, v }
}

fn imm_or(s: &Src, vals: &[Dense], i: usize, dt: DType) -> f64 {
    match s {
        Src::Node(id) => vals[id.index()].v[i],
        Src::Imm(x) => dt.round(*x),
    }
}

fn naive(p: &Program, inputs: &BTreeMap<String, Tensor>) -> BTreeMap<String, Dense> {
    let mut vals: Vec<Dense> = Vec::new();
    for n in &p.nodes {
        let shape = ints(&n.shape);
        let src = |i: usize| match n.src[i] {
            Src::Node(id) => &vals[id.index()],
            Src::Imm(_) => unreachable!(),
        };
        let dt = n.dtype;
        let d = match &n.uop {
            UOp::Input { tensor_id } => {
                let t = &inputs[tensor_id];
                Dense {
                    shape,
                    v: t.to_f64(),
                }
            }
            UOp::Const { value } => Dense {
                shape,
                v: vec![dt.round(*value)],
            },
            UOp::Range => tabulate(shape, |i| i[0] as f64),
            UOp::Reshape => Dense {
                shape,
                v: src(0).v.clone(),
            },
            UOp::Permute { perm } => {
                let x = src(0);
                tabulate(shape, |i| {
                    let mut j = vec![0; i.len()];
                    for (a, p) in perm.iter().enumerate() {
                        j[*p] = i[a];
                    }
                    x.v[ravel(&j, &x.shape)]
                })
            }
            UOp::Expand => {
                let x = src(0);
                tabulate(shape, |i| {
                    let j: Vec<usize> = i
                        .iter()
                        .zip(&x.shape)
                        .map(|(a, d)| if *d == 1 { 0 } else { *a })
                        .collect();
                    x.v[ravel(&j, &x.shape)]
                })
            }
            UOp::Pad { pad, value } => {
                let x = src(0);
                tabulate(shape, |i| {
                    let j: Vec<i64> = i
                        .iter()
                        .zip(pad)
                        .map(|(a, (lo, _))| *a as i64 - lo)
                        .collect();
                    if j.iter()
                        .zip(&x.shape)
                        .all(|(a, d)| *a >= 0 && (*a as usize) < *d)
                    {
                        let j: Vec<usize> = j.iter().map(|a| *a as usize).collect();
                        x.v[ravel(&j, &x.shape)]
                    } else {
                        dt.round(*value)
                    }
                })
            }
            UOp::Shrink { lo, step, .. } => {
                let x = src(0);
                let lo: Vec<usize> = lo.iter().map(|d| d.as_int().unwrap() as usize).collect();
                tabulate(shape, |i| {
                    let j: Vec<usize> = (0..i.len())
                        .map(|a| lo[a] + step[a] as usize * i[a])
                        .collect();
                    x.v[ravel(&j, &x.shape)]
                })
            }
            UOp::Flip { axes } => {
                let x = src(0);
                tabulate(shape, |i| {
                    let mut j = i.to_vec();
                    for a in axes {
                        j[*a] = x.shape[*a] - 1 - i[*a];
                    }
                    x.v[ravel(&j, &x.shape)]
                })
            }
            UOp::View { map } => {
                let x = src(0);
                tabulate(shape, |i| {
                    let ii: Vec<i64> = i.iter().map(|a| *a as i64).collect();
                    let j: Vec<usize> = map.iter().map(|m| m.eval(&ii) as usize).collect();
                    x.v[ravel(&j, &x.shape)]
                })
            }
            UOp::Unary(op) => {
                let x = src(0);
                let f = |v: f64| match op {
                    UnaryOp::Neg => -v,
                    UnaryOp::Exp2 => v.exp2(),
                    UnaryOp::Log2 => v.log2(),
                    UnaryOp::Sqrt => v.sqrt(),
                    UnaryOp::Rsqrt => 1.0 / v.sqrt(),
                    UnaryOp::Recip => 1.0 / v,
                    UnaryOp::Relu => {
                        if v < 0.0 {
                            0.0
                        } else {
                            v
                        }
                    }
                    UnaryOp::Abs => v.abs(),
                    UnaryOp::Erf => libm::erf(v),
                };
                Dense {
                    shape,
                    v: x.v.iter().map(|v| dt.round(f(*v))).collect(),
                }
            }
            UOp::Binary(op) => {
                let odt = n.src.iter().find_map(|s| match s {
                    Src::Node(id) => Some(p.node(*id).dtype),
                    _ => None,
                });
                let odt = odt.unwrap();
                let numel: usize = shape.iter().product();
                let v = (0..numel)
                    .map(|i| {
                        let (a, b) = (
                            imm_or(&n.src[0], &vals, i, odt),
                            imm_or(&n.src[1], &vals, i, odt),
                        );
                        let r = match op {
                            BinaryOp::Add => a + b,
                            BinaryOp::Sub => a - b,
                            BinaryOp::Mul => a * b,
                            BinaryOp::Fdiv => a / b,
                            BinaryOp::Max => {
                                if a.is_nan() || b.is_nan() {
                                    f64::NAN
                                } else {
                                    a.max(b)
                                }
                            }
                            BinaryOp::Min => {
                                if a.is_nan() || b.is_nan() {
                                    f64::NAN
                                } else {
                                    a.min(b)
                                }
                            }
                            BinaryOp::Pow => a.powf(b),
                            BinaryOp::CmpLt => (a < b) as i32 as f64,
                            BinaryOp::CmpLe => (a <= b) as i32 as f64,
                            BinaryOp::CmpEq => (a == b) as i32 as f64,
                            BinaryOp::CmpNe => (a != b) as i32 as f64,
                            BinaryOp::Idiv => unreachable!("not generated"),
                        };
                        dt.round(r)
                    })
                    .collect();
                Dense { shape, v }
            }
            UOp::Cast => Dense {
                shape,
                v: src(0).v.iter().map(|v| dt.round(*v)).collect(),
            },
            UOp::Scan {
                op,
                axis,
                exclusive,
                reverse,
                acc,
            } => {
                // From the definition: the window of `i` folded in scan order.
                let x = src(0);
                let n = x.shape[*axis];
                tabulate(shape, |o| {
                    let i = o[*axis];
                    let window: Vec<usize> = if *reverse {
                        (i..n).rev().filter(|j| !*exclusive || *j != i).collect()
                    } else {
                        (0..=i).filter(|j| !*exclusive || *j != i).collect()
                    };
                    let mut a = op.identity(*acc);
                    let mut at = o.to_vec();
                    for j in window {
                        at[*axis] = j;
                        let v = acc.round(x.v[ravel(&at, &x.shape)]);
                        a = acc.round(match op {
                            ReduceOp::Sum => a + v,
                            ReduceOp::Prod => a * v,
                            ReduceOp::Max if a.is_nan() || v.is_nan() => f64::NAN,
                            ReduceOp::Max => a.max(v),
                            ReduceOp::Min if a.is_nan() || v.is_nan() => f64::NAN,
                            ReduceOp::Min => a.min(v),
                        });
                    }
                    a
                })
            }
            UOp::Reduce { op, axes, acc } => {
                let x = src(0);
                let rshape: Vec<usize> = axes.iter().map(|a| x.shape[*a]).collect();
                let rn: usize = rshape.iter().product();
                tabulate(shape, |o| {
                    let mut a = op.identity(*acc);
                    for r in 0..rn {
                        let ri = unravel(r, &rshape);
                        let (mut oi, mut k) = (o.iter(), ri.iter());
                        let j: Vec<usize> = (0..x.shape.len())
                            .map(|ax| {
                                if axes.contains(&ax) {
                                    *k.next().unwrap()
                                } else {
                                    *oi.next().unwrap()
                                }
                            })
                            .collect();
                        let v = acc.round(x.v[ravel(&j, &x.shape)]);
                        a = acc.round(match op {
                            ReduceOp::Sum => a + v,
                            ReduceOp::Prod => a * v,
                            ReduceOp::Max => {
                                if a.is_nan() || v.is_nan() {
                                    f64::NAN
                                } else {
                                    a.max(v)
                                }
                            }
                            ReduceOp::Min => {
                                if a.is_nan() || v.is_nan() {
                                    f64::NAN
                                } else {
                                    a.min(v)
                                }
                            }
                        });
                    }
                    a
                })
            }
            UOp::Where | UOp::Gather { .. } | UOp::Read { .. } => unreachable!("not generated"),
        };
        vals.push(d);
    }
    p.outputs
        .iter()
        .map(|o| (o.tensor.clone(), vals[o.node.index()].clone()))
        .collect()
}

// ---------------------------------------------------------------- random programs

struct Gen {
    b: Builder,
    rng: ChaCha8Rng,
    inputs: BTreeMap<String, Tensor>,
}

impl Gen {
    fn shape(&self, id: NodeId) -> Vec<usize> {
        ints(self.b.shape(id))
    }

    fn new_input(&mut self, dt: DType, shape: &[usize]) -> NodeId {
        let name = format!("in{}", self.inputs.len());
        let n: usize = shape.iter().product();
        let v: Vec<f64> = (0..n)
            .map(|_| (self.rng.gen_range(-8..8) as f64) * 0.375)
            .collect();
        self.inputs
            .insert(name.clone(), Tensor::from_f64(dt, shape.to_vec(), &v));
        let d = shape.iter().map(|x| Dim::int(*x as i64)).collect();
        self.b.input(&name, dt, d).unwrap()
    }

    fn dims(s: &[usize]) -> Vec<Dim> {
        s.iter().map(|x| Dim::int(*x as i64)).collect()
    }

    /// One random step applied to `x`.
    fn step(&mut self, x: NodeId, code: u8) -> NodeId {
        let s = self.shape(x);
        let r = s.len();
        let numel: usize = s.iter().product();
        let b = &mut self.b;
        let rng = &mut self.rng;
        match code % 11 {
            0 if r > 1 => {
                let mut perm: Vec<usize> = (0..r).collect();
                for i in (1..r).rev() {
                    perm.swap(i, rng.gen_range(0..=i));
                }
                b.permute(x, perm).unwrap()
            }
            1 => {
                // Merge two adjacent axes, split one, or insert a size-1 axis.
                let mut ns = s.clone();
                match rng.gen_range(0..3) {
                    0 if r > 1 => {
                        let a = rng.gen_range(0..r - 1);
                        let m = ns[a] * ns[a + 1];
                        ns.splice(a..a + 2, [m]);
                    }
                    1 if r > 0 && s.iter().any(|d| d.is_multiple_of(2)) && r < 5 => {
                        let a = (0..r).find(|a| s[*a].is_multiple_of(2)).unwrap();
                        ns.splice(a..a + 1, [2, s[a] / 2]);
                    }
                    _ if r < 5 => ns.insert(rng.gen_range(0..=r), 1),
                    _ => {}
                }
                b.reshape(x, Self::dims(&ns)).unwrap()
            }
            2 if numel * 3 <= 1500 => {
                let mut ns = s.clone();
                let x = if let Some(a) = (0..r).find(|a| s[*a] == 1) {
                    ns[a] = rng.gen_range(1..4);
                    x
                } else if r < 5 {
                    let a = rng.gen_range(0..=r);
                    let mut one = s.clone();
                    one.insert(a, 1);
                    ns.insert(a, rng.gen_range(1..4));
                    b.reshape(x, Self::dims(&one)).unwrap()
                } else {
                    return x;
                };
                b.expand(x, Self::dims(&ns)).unwrap()
            }
            3 if numel * 4 <= 1500 => {
                let pads: Vec<(i64, i64)> = (0..r)
                    .map(|_| (rng.gen_range(0..2), rng.gen_range(0..2)))
                    .collect();
                let v = [0.0, -1.5, 3.0][rng.gen_range(0..3)];
                b.pad(x, pads, v).unwrap()
            }
            4 => {
                let (mut lo, mut hi, mut st) = (vec![], vec![], vec![]);
                for d in &s {
                    let l = rng.gen_range(0..=d / 2);
                    let h = rng.gen_range(l.max(1).min(*d)..=*d);
                    lo.push(Dim::int(l as i64));
                    hi.push(Dim::int(h as i64));
                    st.push(rng.gen_range(1..3));
                }
                b.shrink(x, lo, hi, st).unwrap()
            }
            5 => {
                let axes: Vec<usize> = (0..r).filter(|_| rng.gen_bool(0.5)).collect();
                b.flip(x, axes).unwrap()
            }
            6 if r < 5 && s.iter().any(|d| *d >= 2) => {
                let j = (0..r).find(|a| s[*a] >= 2).unwrap();
                let k = rng.gen_range(1..=s[j]);
                let o = s[j] - k + 1;
                let mut ns = s.clone();
                ns.splice(j..j + 1, [o, k]);
                let map = (0..r)
                    .map(|a| match a.cmp(&j) {
                        std::cmp::Ordering::Less => AffineIndex::new(vec![(a, 1)], 0),
                        std::cmp::Ordering::Equal => AffineIndex::new(vec![(j, 1), (j + 1, 1)], 0),
                        std::cmp::Ordering::Greater => AffineIndex::new(vec![(a + 1, 1)], 0),
                    })
                    .collect();
                b.view(x, Self::dims(&ns), map).unwrap()
            }
            7 => {
                let op = [
                    UnaryOp::Neg,
                    UnaryOp::Abs,
                    UnaryOp::Relu,
                    UnaryOp::Exp2,
                    UnaryOp::Sqrt,
                ][rng.gen_range(0..5)];
                b.unary(op, x).unwrap()
            }
            8 => {
                let op = [BinaryOp::Add, BinaryOp::Mul, BinaryOp::Max, BinaryOp::Sub]
                    [rng.gen_range(0..4)];
                let imm = Src::Imm(rng.gen_range(-4..4) as f64 * 0.3);
                if rng.gen_bool(0.5) {
                    b.binary(op, x.into(), imm).unwrap()
                } else {
                    b.binary(op, imm, x.into()).unwrap()
                }
            }
            9 => {
                let dt = b.dtype(x);
                let y = self.new_input(dt, &s);
                let op = [BinaryOp::Add, BinaryOp::Mul, BinaryOp::Min][self.rng.gen_range(0..3)];
                self.b.binary(op, x.into(), y.into()).unwrap()
            }
            10 if r > 0 => {
                let mut axes: Vec<usize> = (0..r).filter(|_| rng.gen_bool(0.4)).collect();
                if axes.is_empty() {
                    axes.push(rng.gen_range(0..r));
                }
                let op = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod]
                    [rng.gen_range(0..4)];
                let acc = [DType::F32, DType::F16][rng.gen_range(0..2)];
                let x = if b.dtype(x) == acc {
                    x
                } else {
                    b.cast(x, acc).unwrap()
                };
                b.reduce(op, x, axes, acc).unwrap()
            }
            _ => x,
        }
    }
}

fn random_program(seed: u64, codes: &[u8], rank: usize) -> (Program, BTreeMap<String, Tensor>) {
    let mut g = Gen {
        b: Builder::new(),
        rng: ChaCha8Rng::seed_from_u64(seed),
        inputs: BTreeMap::new(),
    };
    let shape: Vec<usize> = (0..rank).map(|_| g.rng.gen_range(1..5)).collect();
    let dt = if g.rng.gen_bool(0.3) {
        DType::F16
    } else {
        DType::F32
    };
    let mut x = g.new_input(dt, &shape);
    for (i, c) in codes.iter().enumerate() {
        x = g.step(x, *c);
        if i == codes.len() / 2 && g.rng.gen_bool(0.3) {
            g.b.output("mid", x);
        }
    }
    g.b.output("out", x);
    (g.b.finish(), g.inputs)
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn fused_evaluator_matches_naive_reference(
        seed in any::<u64>(),
        codes in prop::collection::vec(0u8..11, 1..9),
        rank in 0usize..4,
    ) {
        let (p, inputs) = random_program(seed, &codes, rank);
        let want = naive(&p, &inputs);
        let got = evaluate(&p, &BTreeMap::new(), &inputs).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (name, w) in &want {
            let g = &got[name];
            prop_assert_eq!(&g.shape, &w.shape);
            let gv = g.to_f64();
            for (i, (a, b)) in gv.iter().zip(&w.v).enumerate() {
                prop_assert!(same(*a, *b), "{}[{}]: got {} want {}\n{}", name, i, a, b, dlc_egg::ir::tiny::to_json(&p));
            }
        }
    }
}
