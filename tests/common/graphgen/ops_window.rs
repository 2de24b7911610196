//! Generators of Pool, Attention, Softmax, LayerNorm and RMSNorm.

use super::*;
use dlc_egg::ir::dim::broadcast_shapes;

impl Gen<'_> {
    pub(super) fn pool(&mut self) {
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

    pub(super) fn attention(&mut self) {
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

    pub(super) fn softmax(&mut self) {
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

    pub(super) fn norm(&mut self, op: &str) {
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
}
