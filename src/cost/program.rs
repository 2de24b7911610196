//! Plans a whole region program once (seed 001 §8: a plan is chosen once and carried
//! forward): every region its fastest emittable plan ([`super::choose_plan`]), every attention
//! pair ([`find_pairs`]) the fused kernel's plan at its second step. Code generation
//! (`crate::codegen::emit`), `--explain`, `--report`, `--dump plan` and the manifest read the
//! result ([`PlannedKernel`]); none of them chooses again.

use super::{attention, choose_plan, CostModel, PlanChoice};
use crate::codegen::templates::attention::{self as template, pair};
use crate::ir::region::program::{RegionProgram, Step};
pub use crate::plan::priced::PlannedKernel;
use crate::target::Target;
use std::collections::BTreeSet;

/// Plans every kernel of `program` once: a region its own fastest emittable plan
/// ([`choose_plan`]), an attention pair one plan at its second step.
pub fn plan_program(program: &RegionProgram, model: &CostModel) -> Vec<PlannedKernel> {
    let pairs = find_pairs(program, &model.target);
    let mut out = Vec::new();
    for (i, s) in program.steps.iter().enumerate() {
        let Step::Region(r) = s else { continue };
        match attention_role(&pairs, i) {
            Some(Err(())) => {}
            Some(Ok(f)) => {
                let name = match template::pair_at(program, f, i) {
                    Some(p) => attention_name(&p),
                    None => r.name.clone(),
                };
                out.push(PlannedKernel {
                    step: i,
                    fused_first: Some(f),
                    name,
                    choice: pair_plan(program, f, i, model),
                });
            }
            None => out.push(PlannedKernel {
                step: i,
                fused_first: None,
                name: r.name.clone(),
                choice: choose_plan(r, model).map_err(|e| e.to_string()),
            }),
        }
    }
    out
}

/// The name of the fused kernel of an attention pair (what `templates::attention::build`
/// names it).
fn attention_name(p: &template::AttentionPair<'_>) -> String {
    crate::codegen::cexpr::ident(&format!("{}_{}", p.first.name, p.second.name))
}

/// The single plan of the attention pair at steps `f` and `s`: the fused tensor-core kernel's
/// ([`super::attention::choose_attention_plan`]); code generation builds the kernel from this
/// plan (`codegen::emit::kernels`), it does not choose again).
fn pair_plan(
    program: &RegionProgram,
    f: usize,
    s: usize,
    model: &CostModel,
) -> Result<PlanChoice, String> {
    let p = template::pair_at(program, f, s)
        .ok_or_else(|| format!("steps {f}, {s}: not an attention pair"))?;
    super::attention::choose_attention_plan(&p, model)
        .map_err(|e| format!("`{}`: {e}", attention_name(&p)))
}

/// Step `i`'s part in an attention pair of `pairs`: `Ok(first)` when it is the second region of
/// the pair whose first region is step `first` (the fused kernel launches there), `Err(())`
/// when it is a first region (no launch of its own), `None` otherwise.
fn attention_role(pairs: &[(usize, usize)], i: usize) -> Option<Result<usize, ()>> {
    pairs.iter().find_map(|&(f, s)| {
        if s == i {
            Some(Ok(f))
        } else if f == i {
            Some(Err(()))
        } else {
            None
        }
    })
}

/// The attention pairs of `program` as `(first step, second step)` indices: a region yielding a
/// deferred buffer that exactly one later region reads, [`pair`] accepting the two, the buffer
/// read by no other step (region or alias) and no graph output, and the fused kernel having a
/// plan on `target` (`cost::attention::has_plan`, the test the extractor's pair pricing makes:
/// a pair without one runs as the two kernels the extractor priced).
pub fn find_pairs(program: &RegionProgram, target: &Target) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut used = BTreeSet::new();
    for (i, s) in program.steps.iter().enumerate() {
        let Step::Region(first) = s else { continue };
        let [o] = first.outputs.as_slice() else {
            continue;
        };
        if program.outputs.iter().any(|(_, b)| *b == o.name) || used.contains(&i) {
            continue;
        }
        let readers: Vec<usize> = program
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| match s {
                Step::Region(r) => r.inputs.iter().any(|inp| inp.name == o.name),
                Step::Alias { of, .. } => *of == o.name,
            })
            .map(|(j, _)| j)
            .collect();
        let [j] = readers.as_slice() else { continue };
        let Some(Step::Region(second)) = program.steps.get(*j) else {
            continue;
        };
        let fused = pair(first, second).is_some_and(|p| attention::has_plan(&p, target));
        if *j > i && !used.contains(j) && fused {
            used.insert(i);
            used.insert(*j);
            out.push((i, *j));
        }
    }
    out
}
