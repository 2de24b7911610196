//! Generators of Elementwise (unary, binary, where), Reduce, Cumulative and Cast, and their
//! operands.

use super::*;
use dlc_egg::ir::dim::broadcast_shapes;

impl Gen<'_> {
    pub(super) fn unary(&mut self) {
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
    pub(super) fn scalar(&mut self, dt: DType, nonzero: bool) -> f64 {
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
    pub(super) fn partner(
        &mut self,
        x: &Tn,
        against: &[Dim],
        fill: Fill,
        allow_scalar: bool,
    ) -> Operand {
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

    pub(super) fn binary(&mut self) {
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

    pub(super) fn where_(&mut self) {
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
    pub(super) fn axes(&mut self, r: usize, min: usize) -> (Vec<usize>, Vec<i64>) {
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

    pub(super) fn reduce(&mut self) {
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

    pub(super) fn cumulative(&mut self) {
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

    pub(super) fn cast(&mut self) {
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
}

/// An elementwise operand: a tensor or a scalar constant.
#[derive(Clone)]
pub(super) enum Operand {
    T(Tn),
    Scalar(f64),
}

impl Operand {
    pub(super) fn json(&self) -> Value {
        match self {
            Operand::T(t) => json!(t.name),
            Operand::Scalar(v) => json!(v),
        }
    }

    pub(super) fn tame(&self) -> bool {
        match self {
            Operand::T(t) => tame(t).is_some(),
            Operand::Scalar(_) => true,
        }
    }

    /// Values broadcast to `out` (a scalar rounded to `dt`), if known.
    pub(super) fn values(&self, dt: DType, out: &[usize]) -> Option<Vec<f64>> {
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
