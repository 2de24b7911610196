//! Generators of the contractions: MatMul, GEMM, Conv and ConvTranspose.

use super::*;

impl Gen<'_> {
    pub(super) fn matmul(&mut self) {
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

    pub(super) fn gemm(&mut self) {
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
    pub(super) fn spatial_attr(&mut self, v: &[i64]) -> Value {
        if v.iter().all(|x| *x == v[0]) && self.tp.chance(1, 2) {
            json!(v[0])
        } else {
            json!(v)
        }
    }

    /// A spatial pad in one of the three forms.
    pub(super) fn pad_attr(&mut self, p: &[(i64, i64)]) -> Value {
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
    pub(super) fn window_input(
        &mut self,
        dt_ok: impl Fn(DType) -> bool,
        fresh_dt: DType,
        c: Dim,
    ) -> Tn {
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

    /// The input of a (transposed) convolution — an existing float tensor of rank 3 or 4 with a
    /// declarable channel count, or a fresh one — with its channel count and a group count
    /// dividing it.
    fn grouped_conv_input(&mut self) -> (Tn, Dim, i64) {
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
        (x, c, g)
    }

    pub(super) fn conv(&mut self) {
        let (x, c, g) = self.grouped_conv_input();
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
        let cg = match c.as_int() {
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

    pub(super) fn conv_transpose(&mut self) {
        let (x, c, g) = self.grouped_conv_input();
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
}
