//! ShapeSets (seed 001 §12): dynamic shapes are clustered, and the optimized program is cached
//! per cluster.
//!
//! * [`cluster`]: a concrete binding of a graph's symbols maps to a [`ShapeCluster`] (per symbol a
//!   power-of-two magnitude bucket and a power-of-two divisibility class ≤ 16) with a
//!   representative binding the cluster's kernels are priced with;
//! * [`specialize`]: the graph is specialized to the cluster by writing each symbol `T` of
//!   divisibility `d > 1` as `d*T_d`, which keeps the code symbolic (valid for every binding of
//!   the cluster) but lets `Dim::div_exact` prove vector widths and tile divisibility (seed 003:
//!   symbolic tile sizes are out of reach of the affine model, so sizes are specialized at run
//!   time, by cluster rather than by value);
//! * [`cache`]: a [`PlanCache`] keyed by (graph file hash, target arch, optimizer variant,
//!   cluster), in memory and optionally in a directory (`--plan-cache DIR` on `dlc-egg run` and
//!   `dlc-egg optimize --shape-set`).
//!
//! `dlc-egg run --optimized` (and `--device cuda`) compile through the cache; `dlc-egg optimize
//! --shape-set T=48,56,...` prints the clusters the values fall into and each cluster's kernel
//! plans.
//!
//! Diagnostic codes raised here:
//!
//! | code | kind | when |
//! | --- | --- | --- |
//! | E0500 | InvalidShapeSet | `--shape-set` is not `SYMBOL=V1,V2,...` with sizes ≥ 0, or names a symbol the graph does not use |
//! | E0501 | BindingOutsideCluster | a binding is not a multiple of the factor a cluster's specialization needs |
//! | E0502 | PlanCacheUnwritable | the `--plan-cache` directory or an entry cannot be written |
//!
//! A negative size is the frontend's `E0205 NegativeSize`; a specialized graph the optimizer
//! cannot compile is the run's internal `E0317 OptimizerFailed`.

// A `Diagnostic` is the project's user-facing error (crate::diag); see `crate::run`.
#![allow(clippy::result_large_err)]

pub mod cache;
pub mod cluster;
pub mod specialize;

pub use cache::{CacheOutcome, CachedPlan, Compiled, PlanCache};
pub use cluster::{parse_shape_set, ShapeCluster, SymbolClass};
pub use specialize::Specialization;

use crate::diag::codes;
use crate::diag::Failure;
use crate::diag::{Diagnostic, Location};

/// Why clustering, specialization or the plan cache failed.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    /// A `--shape-set` argument is malformed.
    #[error("`{raw}`: {why}")]
    ShapeSetSyntax {
        /// The argument.
        raw: String,
        /// What is wrong.
        why: String,
    },
    /// A `--shape-set` symbol is not in the graph.
    #[error("symbol `{symbol}` is not used by any tensor of the graph")]
    UnknownSymbol {
        /// The symbol.
        symbol: String,
        /// The graph's symbols.
        known: Vec<String>,
    },
    /// A negative size.
    #[error("symbol `{symbol}` is a size and cannot be {value}")]
    NegativeSize {
        /// The symbol.
        symbol: String,
        /// Its value.
        value: i64,
    },
    /// A value outside its cluster's divisibility class.
    #[error(
        "symbol `{symbol}` = {value} is not a multiple of {divisor}, which cluster {cluster} needs"
    )]
    NotMultiple {
        /// The symbol.
        symbol: String,
        /// Its value.
        value: i64,
        /// The divisor the cluster needs.
        divisor: i64,
        /// The cluster.
        cluster: String,
    },
    /// The plan cache cannot be written.
    #[error("cannot write the plan cache entry `{path}`: {why}")]
    CacheWrite {
        /// The file.
        path: String,
        /// The I/O error.
        why: String,
    },
    /// The specialized graph does not lower.
    #[error("the specialized graph does not lower: {0}")]
    Lower(String),
    /// The optimizer failed on a cluster.
    #[error("the optimizer failed on cluster {cluster}: {why}")]
    Optimize {
        /// The cluster.
        cluster: String,
        /// The optimizer's error.
        why: String,
    },
}

impl ShapeError {
    /// The diagnostic (code, kind, location, why, suggestion).
    pub fn to_diagnostic(&self) -> Diagnostic {
        let why = self.to_string();
        match self {
            ShapeError::ShapeSetSyntax { raw, .. } => Diagnostic::error(
                codes::INVALID_SHAPE_SET,
                Location::Argument {
                    argument: format!("--shape-set {raw}"),
                },
                why,
                "write it like --shape-set T=48,56,64 (a symbol name, `=`, sizes separated by commas)",
            ),
            ShapeError::UnknownSymbol { symbol, known } => Diagnostic::error(
                codes::INVALID_SHAPE_SET,
                Location::Argument {
                    argument: format!("--shape-set {symbol}=..."),
                },
                why,
                if known.is_empty() {
                    "this graph has no symbolic sizes: drop --shape-set".to_string()
                } else {
                    format!("symbols of this graph: {}", known.join(", "))
                },
            ),
            ShapeError::NegativeSize { symbol, .. } => Diagnostic::error(
                codes::NEGATIVE_SIZE,
                Location::Symbol {
                    symbol: symbol.clone(),
                },
                why,
                "bind a non-negative integer",
            ),
            ShapeError::NotMultiple {
                symbol, divisor, ..
            } => Diagnostic::error(
                codes::BINDING_OUTSIDE_CLUSTER,
                Location::Symbol {
                    symbol: symbol.clone(),
                },
                why,
                format!(
                    "bind `{symbol}` to a multiple of {divisor}, or compile the binding's own \
                     cluster (dlc-egg run --optimized picks it from the binding)"
                ),
            ),
            ShapeError::CacheWrite { path, .. } => Diagnostic::error(
                codes::PLAN_CACHE_UNWRITABLE,
                Location::Argument {
                    argument: format!("--plan-cache {path}"),
                },
                why,
                "give --plan-cache a directory that can be created and written",
            ),
            ShapeError::Lower(_) | ShapeError::Optimize { .. } => {
                crate::diag::optimizer_bug(&why)
            }
        }
    }

    /// The failure: compiler bugs (lowering, optimizing) are internal, the rest the user's.
    pub fn to_failure(&self) -> Failure {
        match self {
            ShapeError::Lower(_) | ShapeError::Optimize { .. } => {
                Failure::internal(self.to_diagnostic())
            }
            _ => Failure::user(self.to_diagnostic()),
        }
    }
}

impl From<ShapeError> for Failure {
    fn from(e: ShapeError) -> Failure {
        e.to_failure()
    }
}

/// One line per cluster plan for `optimize --shape-set`: the cluster, its values, its
/// specialization, pricing and each kernel's template, predicted time and plan (compact JSON).
pub fn render_cluster(c: &Compiled, values: &[String]) -> String {
    let p = &c.plan;
    let mut s = format!(
        "cluster {} ({}): {}\n",
        p.cluster,
        p.cluster_ranges,
        values.join("; ")
    );
    let factors: Vec<String> = p
        .factors
        .iter()
        .map(|(t, f)| format!("{t} = {}*{}", f.divisor, f.symbol))
        .collect();
    let pricing: Vec<String> = p.pricing.iter().map(|(k, v)| format!("{k}={v}")).collect();
    s.push_str(&format!(
        "  specialized: {}; priced at {}\n",
        if factors.is_empty() {
            "none".to_string()
        } else {
            factors.join(", ")
        },
        if pricing.is_empty() {
            "-".to_string()
        } else {
            pricing.join(", ")
        }
    ));
    let total: f64 = p
        .kernels
        .iter()
        .filter_map(|k| k.get("predicted_us").and_then(|v| v.as_f64()))
        .sum();
    s.push_str(&format!(
        "  {} kernel(s), predicted {total:.3} us\n",
        p.kernels.len()
    ));
    for k in &p.kernels {
        let name = k.get("kernel").and_then(|v| v.as_str()).unwrap_or("?");
        match (k.get("plan"), k.get("error")) {
            (Some(plan), _) => s.push_str(&format!(
                "    {name}: {} {:.3} us {}\n",
                k.get("template").and_then(|v| v.as_str()).unwrap_or("?"),
                k.get("predicted_us")
                    .and_then(|v| v.as_f64())
                    .unwrap_or(f64::NAN),
                plan
            )),
            (None, Some(e)) => s.push_str(&format!("    {name}: no plan: {e}\n")),
            (None, None) => s.push_str(&format!("    {name}\n")),
        }
    }
    s
}
