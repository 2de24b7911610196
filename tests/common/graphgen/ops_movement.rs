//! Generators of the movement ops: Reshape, Permute, Expand, Pad, Slice, Flip, Concat, Repeat,
//! Unfold and Gather.

use super::*;

impl Gen<'_> {
    pub(super) fn movement_input(&mut self, min_rank: usize) -> Tn {
        let x = self.existing(|t| t.rank() >= min_rank);
        x.unwrap_or_else(|| {
            let dt = self.any_dt();
            let r = self.tp.range(min_rank as i64, 4) as usize;
            let s = self.rand_shape(r);
            self.input(dt, s, Fill::Normal)
        })
    }

    /// A random factorization of `n` into `k` factors.
    pub(super) fn factorize(&mut self, mut n: usize, k: usize) -> Vec<usize> {
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

    pub(super) fn reshape(&mut self) {
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

    pub(super) fn permute(&mut self) {
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

    pub(super) fn expand(&mut self) {
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

    pub(super) fn pad(&mut self) {
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

    pub(super) fn slice_bound(&mut self, n: i64) -> i64 {
        match self.tp.below(8) {
            0 => i64::MAX,
            1 => -1000,
            2 => 1000,
            _ => self.tp.range(-n - 2, n + 2),
        }
    }

    pub(super) fn slice(&mut self) {
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

    pub(super) fn flip(&mut self) {
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

    pub(super) fn concat(&mut self) {
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

    pub(super) fn repeat(&mut self) {
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

    pub(super) fn unfold(&mut self) {
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

    pub(super) fn gather(&mut self) {
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
}
