//! What a library user adds to the pipeline: rules in built-in phases, whole phases, a kernel
//! pricer and an extractor ([`Extensions`], set through the builder methods of
//! [`OptimizeOptions`]). [`optimize`](super::optimize) runs them exactly like the built-ins: user
//! rules appear in [`PhaseStats::applied`](crate::rules::PhaseStats) and in the rewrite chains of
//! `--explain`, the cover keeps its `covers:` lines, and the result is the same [`Optimized`]
//! (regions, plans, report, CUDA) the CLI produces.
//!
//! The phases, in order: `movement`, `rbssa`, `srnf`, `contraction`, `epilogue` (rewrites),
//! `kernels` (fusion; its legality oracle is region synthesis), then, unless the substitutions
//! are off, `subst` (graph substitutions) and `kernels` again over what they added (a rule added
//! to `kernels` runs in both rounds). Every phase runs checked
//! ([`crate::rules::try_run_phase`]): a rule that builds an ill-typed e-node or makes values of
//! different dtype or shape equal is an [`OptimizeError::Rule`] naming it.
//!
//! [`Optimized`]: super::Optimized
//! [`OptimizeError::Rule`]: super::OptimizeError::Rule

use super::{ExtractorKind, OptimizeOptions};
use crate::extract::dag::DagExtractor;
use crate::extract::pricing::KernelPricer;
use crate::rules::subst::{self, MergeGate};
use crate::rules::{all_phases_with, Rule, RuleError};
use crate::target::Target;
use std::fmt;
use std::sync::Arc;

/// The name of the kernels (fusion) phase: it runs after the rewrite phases and, with the
/// substitutions on, again after phase [`SUBST_PHASE`].
pub const KERNELS_PHASE: &str = "kernels";

/// The name of the graph substitutions phase (`crate::rules::subst`): it runs after the first
/// kernels round (`--no-subst` leaves it and the second kernels round out).
pub const SUBST_PHASE: &str = "subst";

/// A phase a library user adds.
#[derive(Clone)]
pub struct AddedPhase {
    /// The phase it runs after (a built-in or an earlier added phase).
    pub after: String,
    /// Its name (in statistics and reports).
    pub name: String,
    /// Its rules.
    pub rules: Vec<Rule>,
}

/// A library user's additions to the pipeline (empty by default: the CLI's pipeline).
#[derive(Clone, Default)]
pub struct Extensions {
    /// Rules added to a phase, as `(phase, rule)`: they run together with the phase's own rules.
    pub rules: Vec<(String, Rule)>,
    /// Phases added, in the order given.
    pub phases: Vec<AddedPhase>,
    /// The kernel pricer of extraction (`None`: [`crate::extract::pricing::Roofline`]).
    pub pricer: Option<Arc<dyn KernelPricer>>,
    /// The extractor choosing the cover (`None`: the one [`OptimizeOptions::extractor`] names).
    pub extractor: Option<Arc<dyn DagExtractor + Send + Sync>>,
}

impl Extensions {
    /// True when nothing is added (the CLI's pipeline).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
            && self.phases.is_empty()
            && self.pricer.is_none()
            && self.extractor.is_none()
    }

    /// A short text naming everything added (empty when nothing is): part of the plan-cache key,
    /// since added rules change the result.
    pub fn key(&self) -> String {
        if self.is_empty() {
            return String::new();
        }
        let mut parts: Vec<String> = self
            .rules
            .iter()
            .map(|(p, r)| format!("{p}+{}", r.name))
            .collect();
        for ph in &self.phases {
            let names: Vec<String> = ph.rules.iter().map(|r| r.name.to_string()).collect();
            parts.push(format!("{}>{}[{}]", ph.after, ph.name, names.join(",")));
        }
        if let Some(p) = &self.pricer {
            parts.push(format!("pricer={}", p.name()));
        }
        if let Some(e) = &self.extractor {
            parts.push(format!("extractor={}", e.name()));
        }
        parts.join(";")
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rules: Vec<String> = self
            .rules
            .iter()
            .map(|(p, r)| format!("{p}: {}", r.name))
            .collect();
        let phases: Vec<String> = self
            .phases
            .iter()
            .map(|p| format!("{} (after {}, {} rules)", p.name, p.after, p.rules.len()))
            .collect();
        f.debug_struct("Extensions")
            .field("rules", &rules)
            .field("phases", &phases)
            .field(
                "pricer",
                &self.pricer.as_ref().map(|p| p.name().to_string()),
            )
            .field(
                "extractor",
                &self.extractor.as_ref().map(|e| e.name().to_string()),
            )
            .finish()
    }
}

/// Builder methods: each returns the options with one thing changed.
///
/// ```
/// use dlc_egg::optimize::OptimizeOptions;
/// use dlc_egg::rules::Rule;
///
/// let double_relu: Rule = egg::rewrite!("relu-relu"; "(relu (relu ?x))" => "(relu ?x)");
/// let opts = OptimizeOptions::default()
///     .with_rule("srnf", double_relu)
///     .with_explain(true);
/// assert_eq!(opts.phase_names().unwrap().len(), 8); // kernels twice, around subst
/// ```
impl OptimizeOptions {
    /// Adds `rule` to `phase` (a built-in phase — `subst`, `movement`, `rbssa`, `srnf`,
    /// `contraction`, `epilogue`, `kernels` — or an added one). An unknown phase is reported by
    /// [`super::optimize`] (E1502).
    pub fn with_rule(mut self, phase: &str, rule: Rule) -> OptimizeOptions {
        self.extensions.rules.push((phase.to_string(), rule));
        self
    }

    /// Adds every rule of `rules` to `phase` (see [`OptimizeOptions::with_rule`]).
    pub fn with_rules(
        mut self,
        phase: &str,
        rules: impl IntoIterator<Item = Rule>,
    ) -> OptimizeOptions {
        let p = phase.to_string();
        self.extensions
            .rules
            .extend(rules.into_iter().map(|r| (p.clone(), r)));
        self
    }

    /// Adds a phase `name` with `rules`, run right after phase `after` (after earlier phases
    /// added there). Its statistics appear in [`super::Optimized::phases`] under `name`.
    pub fn with_phase(mut self, after: &str, name: &str, rules: Vec<Rule>) -> OptimizeOptions {
        self.extensions.phases.push(AddedPhase {
            after: after.to_string(),
            name: name.to_string(),
            rules,
        });
        self
    }

    /// Prices kernels with `pricer` when choosing the cover (instead of the roofline model).
    pub fn with_pricer(mut self, pricer: impl KernelPricer + 'static) -> OptimizeOptions {
        self.extensions.pricer = Some(Arc::new(pricer));
        self
    }

    /// Chooses the cover with `extractor` (instead of the built-in one [`Self::extractor`]
    /// names). It sees the problem [`crate::extract::cover::kernel_problem_with`] builds.
    pub fn with_extractor(
        mut self,
        extractor: impl DagExtractor + Send + Sync + 'static,
    ) -> OptimizeOptions {
        self.extensions.extractor = Some(Arc::new(extractor));
        self
    }

    /// Chooses a built-in extractor (`--extractor`).
    pub fn with_extractor_kind(mut self, kind: ExtractorKind) -> OptimizeOptions {
        self.extractor = kind;
        self
    }

    /// Records explanations so that [`super::Optimized::rewrites`] gives every output's
    /// rewrite chain (`--explain`).
    pub fn with_explain(mut self, explain: bool) -> OptimizeOptions {
        self.explain = explain;
        self
    }

    /// Plans for `target` (`--arch`).
    pub fn with_target(mut self, target: Target) -> OptimizeOptions {
        self.target = target;
        self
    }

    /// Also runs the rewrites exact for finite values only (`--fast-math`).
    pub fn with_fast_math(mut self, fast_math: bool) -> OptimizeOptions {
        self.fast_math = fast_math;
        self
    }

    /// The phases [`super::optimize`] runs, in order (built-in and added), or why the
    /// extensions do not fit the pipeline.
    pub fn phase_names(&self) -> Result<Vec<String>, RuleError> {
        Ok(self
            .rewrite_phases(None)?
            .into_iter()
            .map(|(n, _)| n)
            .collect())
    }

    /// Every phase with its rules, in order; the kernels phase has only the rules added to it
    /// (the pipeline adds the fusion rules, which need its legality oracle). The substitutions
    /// are built behind `gate` where one is given (`subst::gated_rules`; the pipeline's, the
    /// pricer's gate), ungated otherwise.
    pub(super) fn rewrite_phases(
        &self,
        gate: Option<&MergeGate>,
    ) -> Result<Vec<(String, Vec<Rule>)>, RuleError> {
        let mut phases: Vec<(String, Vec<Rule>)> = Vec::new();
        let mut subst = None;
        for (n, r) in all_phases_with(self.fast_math) {
            if n == SUBST_PHASE {
                subst = Some(match gate {
                    Some(g) => subst::gated_rules(self.fast_math, g),
                    None => r,
                });
            } else {
                phases.push((n.to_string(), r));
            }
        }
        phases.push((KERNELS_PHASE.to_string(), Vec::new()));
        // The substitutions after a first kernels round, and kernels again over what they add
        // (`super::run_phases`: the cover without them stays in the e-graph).
        // (Listed with the substitutions off too, where `super::run_phases` skips both.)
        if let Some(r) = subst {
            phases.push((SUBST_PHASE.to_string(), r));
            phases.push((KERNELS_PHASE.to_string(), Vec::new()));
        }
        let known = |phases: &[(String, Vec<Rule>)]| {
            phases
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        for added in &self.extensions.phases {
            if phases.iter().any(|(n, _)| *n == added.name) {
                return Err(RuleError::DuplicatePhase {
                    phase: added.name.clone(),
                });
            }
            let Some(at) = phases.iter().position(|(n, _)| *n == added.after) else {
                return Err(RuleError::UnknownPhase {
                    phase: added.after.clone(),
                    what: format!("phase `{}`", added.name),
                    known: known(&phases),
                });
            };
            // After `after` and after the phases added there before this one.
            let mut at = at + 1;
            while at < phases.len()
                && self.extensions.phases.iter().any(|p| {
                    p.name == phases[at].0 && p.after == added.after && p.name != added.name
                })
            {
                at += 1;
            }
            phases.insert(at, (added.name.clone(), added.rules.clone()));
        }
        for (phase, rule) in &self.extensions.rules {
            let mut found = false;
            for (_, rules) in phases.iter_mut().filter(|(n, _)| n == phase) {
                rules.push(rule.clone());
                found = true;
            }
            if !found {
                return Err(RuleError::UnknownPhase {
                    phase: phase.clone(),
                    what: format!("rule `{}`", rule.name),
                    known: known(&phases),
                });
            }
        }
        Ok(phases)
    }
}
