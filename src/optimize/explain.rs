//! `--explain`: the rewrite chain from each output's input term to the extracted kernel term, from
//! egg's explanations, shortened to the rules that mattered (each rule once per run of
//! consecutive uses, with a count), and a readable text rendering of a [`super::Report`].

use super::Report;
use crate::ir::egraph::kernel::graft;
use crate::ir::egraph::{Attr, TensorGraph, TensorLang};
use egg::{Language, RecExpr, TreeExplanation, TreeTerm};
use serde::Serialize;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::rc::Rc;

/// A run of consecutive uses of one rule on a rewrite chain.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleUse {
    /// The rule's name.
    pub rule: String,
    /// Consecutive uses.
    pub count: usize,
}

/// The rules on the chain from one output's input term to its extracted term.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RewriteChain {
    /// The output tensor.
    pub output: String,
    /// Rewrite steps in egg's explanation, each shared sub-proof counted once.
    pub steps: usize,
    /// The rules, in proof order.
    pub rules: Vec<RuleUse>,
}

/// The rules of a tree explanation in proof order (sub-proofs of a step before its rule), each
/// shared sub-proof once: egg shares equal sub-proofs (`Rc`), and flattening them — what
/// `make_flat_explanation` does — is exponential in the sharing of a DAG-shaped program (a
/// transformer layer's residual stream took 16 s and 2.5 GB that way).
fn collect_rules(
    proof: &TreeExplanation<TensorLang>,
    seen: &mut HashSet<*const TreeTerm<TensorLang>>,
    out: &mut Vec<String>,
) {
    for term in proof {
        if !seen.insert(Rc::as_ptr(term)) {
            continue;
        }
        for child in &term.child_proofs {
            collect_rules(child, seen, out);
        }
        if let Some(r) = term.forward_rule.or(term.backward_rule) {
            out.push(r.to_string());
        }
    }
}

/// Shortens a rule list: consecutive repeats become one entry with a count.
pub fn shorten(rules: &[String]) -> Vec<RuleUse> {
    let mut out: Vec<RuleUse> = Vec::new();
    for r in rules {
        match out.last_mut() {
            Some(last) if last.rule == *r => last.count += 1,
            _ => out.push(RuleUse {
                rule: r.clone(),
                count: 1,
            }),
        }
    }
    out
}

/// `term` with every kernel node replaced by its body, the body's placeholders bound to the
/// kernel's (expanded) inputs: the same value spelled with the e-nodes the kernels were grown
/// from (reads, contractions, epilogues), so its proof shows the rules that shaped them.
fn expand_kernels(term: &RecExpr<TensorLang>) -> RecExpr<TensorLang> {
    let mut out: RecExpr<TensorLang> = RecExpr::default();
    let mut map: Vec<egg::Id> = Vec::with_capacity(term.as_ref().len());
    for node in term.as_ref() {
        let id = match node {
            TensorLang::Kernel(ch) => match term[ch[0]].clone() {
                TensorLang::Attr(Attr::Body(body)) => {
                    let args: Vec<egg::Id> = ch[1..].iter().map(|c| map[usize::from(*c)]).collect();
                    graft(&mut out, body.expr(), &args)
                }
                n => out.add(n.map_children(|c| map[usize::from(c)])),
            },
            n => out.add(n.clone().map_children(|c| map[usize::from(c)])),
        };
        map.push(id);
    }
    out
}

/// The rewrite chain of every output (`outputs[i]` was added as e-class `originals[i]` and
/// extracted as `extracted[i]`): the rules from the input term to the extracted kernels' bodies
/// (`expand_kernels`), then those from the bodies to the kernels (`kernel-wrap`,
/// `kernel-fuse`). Needs an e-graph built with explanations enabled.
pub fn rewrite_chains(
    eg: &mut TensorGraph,
    outputs: &[(String, egg::Id, RecExpr<TensorLang>)],
) -> Vec<RewriteChain> {
    outputs
        .iter()
        .map(|(name, original, extracted)| {
            let start = eg.id_to_expr(*original);
            let bodies = expand_kernels(extracted);
            let mut rules = Vec::new();
            let mut seen = HashSet::new();
            let expl = eg.explain_equivalence(&start, &bodies);
            collect_rules(&expl.explanation_trees, &mut seen, &mut rules);
            let expl = eg.explain_equivalence(&bodies, extracted);
            collect_rules(&expl.explanation_trees, &mut seen, &mut rules);
            RewriteChain {
                output: name.clone(),
                steps: rules.len(),
                rules: shorten(&rules),
            }
        })
        .collect()
}

/// The readable `--explain` text of a report.
/// The plan lines of one kernel: the chosen plan, its prediction and resources, and the best
/// rejected alternatives with the reason.
fn render_plan(s: &mut String, plan: &Result<crate::cost::PlanReport, String>) {
    let p = match plan {
        Ok(p) => p,
        Err(why) => {
            let _ = writeln!(s, "  plan: none ({why})");
            return;
        }
    };
    let _ = writeln!(s, "  plan: {}", p.plan.summary());
    let bound = match p.bound {
        crate::cost::roofline::Bound::Compute => "compute-bound",
        crate::cost::roofline::Bound::Memory => "memory-bound",
    };
    let _ = writeln!(
        s,
        "  predicted: {:.3} µs, {}; {:.4e} FLOP, {:.4e} B; occupancy {:.3}; smem {} B, {} regs/thread, {} CTA(s)/SM",
        p.predicted_us,
        bound,
        p.flops,
        p.bytes,
        p.occupancy,
        p.smem_bytes,
        p.regs_per_thread,
        p.ctas_per_sm
    );
    let _ = writeln!(s, "  plan space: {} point(s), {} priced", p.space, p.priced);
    for r in &p.rejected {
        let _ = writeln!(s, "    rejected {}: {}", r.plan, r.reason);
    }
}

/// The `--explain` text of a report (`timings`: with phase times).
pub fn render(report: &Report, timings: bool) -> String {
    render_for(report, timings, None)
}

/// A target's own account of the program for `--explain` (the native CPU backend's: its ISA,
/// loop forms, what it emits and the CPU model's times), in place of the GPU header and of each
/// kernel's GPU plan lines; the cover, fusion reasons, rewrite chains and e-graph phases are
/// the target-independent part of the report and stay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TargetExplain {
    /// The first line.
    pub header: String,
    /// Per kernel name: the lines printed after its `cost:` line.
    pub kernels: std::collections::BTreeMap<String, Vec<String>>,
}

/// [`render`], with `target`'s header and kernel lines instead of the GPU's when given.
pub fn render_for(report: &Report, timings: bool, target: Option<&TargetExplain>) -> String {
    let mut s = String::new();
    match target {
        Some(t) => {
            let _ = writeln!(s, "{}", t.header);
        }
        None => {
            let _ = writeln!(
                s,
                "{} kernel(s) on {} ({}); predicted {}, {} bytes to/from global memory, {} launch(es)",
                report.kernels.len(),
                report.target.name,
                report.target.arch.name(),
                report.cost.time,
                report.cost.bytes,
                report.cost.kernels
            );
        }
    }
    render_precomputed(&mut s, report);
    for k in &report.kernels {
        let _ = writeln!(
            s,
            "\nkernel {}: {} <- {}",
            k.name,
            k.output,
            k.inputs.join(", ")
        );
        if !k.covers.is_empty() {
            let _ = writeln!(s, "  covers: {}", k.covers.join(", "));
        }
        for r in &k.fused_because {
            let _ = writeln!(s, "  fused: {r}");
        }
        for r in &k.compute_at {
            let _ = writeln!(s, "  {r}");
        }
        let _ = writeln!(
            s,
            "  cost: {} bytes, {} element op(s), {} body op(s), {} narrow rounding(s)",
            k.cost.bytes, k.cost.flops, k.cost.ops, k.cost.roundings
        );
        match target {
            Some(t) => {
                for line in t.kernels.get(&k.name).into_iter().flatten() {
                    let _ = writeln!(s, "  {line}");
                }
            }
            None => render_plan(&mut s, &k.plan),
        }
    }
    render_rewrites(&mut s, report);
    render_phases(&mut s, report, timings);
    if timings && !report.steps.is_empty() {
        s.push_str(&render_steps(&report.steps));
    }
    s
}

/// The derived constants (issue 23): computed once when the weights are bound, not per run;
/// their one-time cost is the roofline's time of each as a kernel.
fn render_precomputed(s: &mut String, report: &Report) {
    if report.precomputed.is_empty() {
        return;
    }
    let once = report
        .precomputed
        .iter()
        .fold(crate::cost::Time::ZERO, |t, k| t.plus(k.cost.time));
    let _ = writeln!(
        s,
        "{} derived constant(s) precomputed at load (once, not per run; {} as kernels)",
        report.precomputed.len(),
        once
    );
    for k in &report.precomputed {
        let _ = writeln!(
            s,
            "  precomputed at load {}: {} <- {}; {}, {} bytes once; {}",
            k.name,
            k.output,
            k.inputs.join(", "),
            k.cost.time,
            k.cost.bytes,
            k.body
        );
    }
}

/// The rewrite chains that mattered, one line per output.
fn render_rewrites(s: &mut String, report: &Report) {
    if !report.rewrites.is_empty() {
        let _ = writeln!(s, "\nrewrite chains (rules that mattered, in order):");
        for c in &report.rewrites {
            let rules: Vec<String> = c
                .rules
                .iter()
                .map(|u| {
                    if u.count > 1 {
                        format!("{} ×{}", u.rule, u.count)
                    } else {
                        u.rule.clone()
                    }
                })
                .collect();
            let _ = writeln!(
                s,
                "  {}: {} step(s): {}",
                c.output,
                c.steps,
                if rules.is_empty() {
                    "(none)".to_string()
                } else {
                    rules.join(" → ")
                }
            );
        }
    }
}

/// The e-graph phases table, with the rules that fired in each.
fn render_phases(s: &mut String, report: &Report, timings: bool) {
    let _ = writeln!(s, "\ne-graph phases:");
    let _ = writeln!(
        s,
        "  {:<12} {:>5} {:>9} {:>9} {:<18}{}",
        "phase",
        "iters",
        "e-nodes",
        "e-classes",
        "stop",
        if timings { " time" } else { "" }
    );
    for p in &report.phases {
        let _ = write!(
            s,
            "  {:<12} {:>5} {:>9} {:>9} {:<18}",
            p.name, p.iterations, p.egraph_nodes, p.egraph_classes, p.stop_reason
        );
        if timings {
            let _ = write!(s, " {:.3} s", p.time);
        }
        let _ = writeln!(s);
        let fired: Vec<String> = p.applied.iter().map(|(r, n)| format!("{r} ×{n}")).collect();
        if !fired.is_empty() {
            let _ = writeln!(s, "      rules: {}", fired.join(", "));
        }
    }
}

/// The `--timings` breakdown: wall (and, where known, process CPU) time of every pipeline
/// step, and the totals.
pub fn render_steps(steps: &[super::StepTime]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\noptimize steps:           wall        cpu");
    let cpu = |c: Option<f64>| c.map_or("-".to_string(), |c| format!("{c:.2} s"));
    for t in steps {
        let _ = writeln!(
            s,
            "  {:<20} {:>8.3} s {:>10}",
            t.step,
            t.seconds,
            cpu(t.cpu_seconds)
        );
    }
    let wall: f64 = steps.iter().map(|t| t.seconds).sum();
    let total = steps
        .iter()
        .any(|t| t.cpu_seconds.is_some())
        .then(|| steps.iter().filter_map(|t| t.cpu_seconds).sum::<f64>());
    let _ = writeln!(s, "  {:<20} {:>8.3} s {:>10}", "total", wall, cpu(total));
    s
}
