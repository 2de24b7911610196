//! The load-time part of a program being built (issue 23, derived constants): the kernels of
//! the cover whose inputs are all weights bound at load time ([`Derived`]) become
//! [`RegionProgram::derived`](crate::ir::region::program::RegionProgram) steps, run once when the
//! weights are bound; the buffers the per-run steps read from them are program inputs.

use super::build::{kernel_name, KernelInfo, Realized};
use super::OptimizeError;
use crate::extract::derived::Derived;
use crate::extract::kernels::{kernel_own_cost, CostModel};
use crate::ir::egraph::kernel::kernel_parts;
use crate::ir::egraph::{TensorGraph, TensorLang};
use crate::ir::region::program::{defined_by, read_by, Buffer, Step};
use crate::ir::region::Materialize;
use crate::synth::{synthesize_traced, SynthArg};
use egg::Id;
use std::collections::{BTreeSet, HashMap};

/// The classes of `order` realized at load time: derived-constant kernels (`derived`) and the
/// aliases of their buffers (an alias of a graph input stays a per-run alias).
pub(super) fn load_time(
    eg: &TensorGraph,
    order: &[(Id, Realized)],
    derived: &Derived,
) -> BTreeSet<Id> {
    let mut at_load = BTreeSet::new();
    for (c, r) in order {
        let here = match r {
            Realized::Kernel(n) => derived.is_derived_kernel(eg, *c, n),
            Realized::Alias(x) => at_load.contains(x),
            Realized::Input(_) => false,
        };
        if here {
            at_load.insert(*c);
        }
    }
    at_load
}

/// The load-time part of a program being built: its steps and kernels.
#[derive(Default)]
pub(super) struct LoadSteps {
    pub(super) steps: Vec<Step>,
    pub(super) infos: Vec<KernelInfo>,
    /// Load-time aliases of per-run aliases of graph inputs, by the per-run alias's name.
    aliases: HashMap<String, String>,
}

impl LoadSteps {
    /// Adds the region of the derived-constant kernel `node` (class `c`, buffer `buf[c]`); its
    /// inputs are graph inputs, derived buffers or aliases of graph inputs (repeated here under
    /// a fresh name: the per-run alias runs after the load steps).
    pub(super) fn kernel(
        &mut self,
        eg: &TensorGraph,
        c: Id,
        node: &TensorLang,
        order: &[(Id, Realized)],
        buf: &HashMap<Id, String>,
        sizes: &CostModel,
    ) -> Result<(), OptimizeError> {
        let attr = |id: Id| eg[id].data.attr();
        let TensorLang::Kernel(ch) = node else {
            unreachable!("a derived-constant kernel is a kernel")
        };
        let (body, inputs) = kernel_parts(ch, &attr).map_err(OptimizeError::Program)?;
        let realized: HashMap<Id, &Realized> = order.iter().map(|(c, r)| (*c, r)).collect();
        let mut args = Vec::with_capacity(inputs.len());
        for i in inputs {
            let i = eg.find(*i);
            let t = eg[i]
                .data
                .tensor()
                .cloned()
                .ok_or_else(|| OptimizeError::Program(format!("class {i} is not a tensor")))?;
            let name = self.load_name(eg, i, &realized, buf)?;
            args.push(SynthArg {
                name,
                dtype: t.dtype,
                shape: t.shape,
            });
        }
        let kname = format!(
            "c{}_{}",
            self.infos.len(),
            &kernel_name(0, body.expr())[3..]
        );
        let out = buf[&c].clone();
        let region = synthesize_traced(&kname, body.expr(), &args, &out, Materialize::Gmem)
            .map_err(|e| OptimizeError::Region {
                kernel: kname.clone(),
                why: e.to_string(),
            })?
            .0;
        self.infos.push(KernelInfo {
            name: kname,
            inputs: args.iter().map(|a| a.name.clone()).collect(),
            output: out,
            covers: Vec::new(),
            fused_because: vec![
                "derived constant: every input is a weight bound at load time; precomputed once \
                 when the weights are bound, read per run as a plain input"
                    .into(),
            ],
            body: body.text().to_string(),
            cost: kernel_own_cost(eg, node, sizes),
            plan: Err("precomputed at load (not a per-run kernel)".into()),
            compute_at: Vec::new(),
            embeds: false,
        });
        self.steps.push(Step::Region(region));
        Ok(())
    }

    /// The name class `c` (an input of a derived-constant kernel) has at load time.
    fn load_name(
        &mut self,
        eg: &TensorGraph,
        c: Id,
        realized: &HashMap<Id, &Realized>,
        buf: &HashMap<Id, String>,
    ) -> Result<String, OptimizeError> {
        let name = buf[&c].clone();
        let Some(Realized::Alias(x)) = realized.get(&c) else {
            return Ok(name); // a graph input or a derived buffer
        };
        if defined_by(&self.steps).contains(&name) {
            return Ok(name);
        }
        if let Some(n) = self.aliases.get(&name) {
            return Ok(n.clone());
        }
        let of = self.load_name(eg, eg.find(*x), realized, buf)?;
        let t = eg[c]
            .data
            .tensor()
            .cloned()
            .ok_or_else(|| OptimizeError::Program(format!("class {c} is not a tensor")))?;
        let fresh = format!("{name}_load");
        self.steps.push(Step::Alias {
            name: fresh.clone(),
            of,
            dtype: t.dtype,
            shape: t.shape,
        });
        self.aliases.insert(name, fresh.clone());
        Ok(fresh)
    }

    /// The buffers the load steps define that the per-run `steps` read: the derived constants,
    /// inputs of the per-run program.
    pub(super) fn exports(&self, steps: &[Step]) -> Vec<Buffer> {
        let read = read_by(steps);
        let mut out = Vec::new();
        for s in &self.steps {
            let defined: Vec<Buffer> = match s {
                Step::Region(r) => r
                    .outputs
                    .iter()
                    .map(|o| Buffer {
                        name: o.name.clone(),
                        dtype: o.dtype,
                        shape: o.memref.shape.iter().map(|d| d.0.clone()).collect(),
                    })
                    .collect(),
                Step::Alias {
                    name, dtype, shape, ..
                } => vec![Buffer {
                    name: name.clone(),
                    dtype: *dtype,
                    shape: shape.clone(),
                }],
            };
            out.extend(
                defined
                    .into_iter()
                    .filter(|b| read.contains(b.name.as_str())),
            );
        }
        out
    }
}
