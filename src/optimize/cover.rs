//! The kernel cover's choice: the extractor of the options (the fast one, the exact one or a
//! user's) over the priced kernel e-nodes, with the derived constants' realizations priced as
//! computed once at load time.

use super::{pricer, ExtractorKind, OptimizeError, OptimizeOptions};
use crate::extract::cover::{extract_cover_derived, Cover, CoverError};
use crate::extract::dag::{
    DagExtractor, ExactExtractor, ExtractError, ExtractOptions, FastExtractor,
};
use crate::extract::derived::Derived;
use crate::extract::kernels::CostModel;
use crate::ir::egraph::TensorGraph;
use crate::ir::tiny::Program;
use egg::Id;

/// The kernel cover of the outputs (`roots`, their classes in `eg` after the kernels phase) by
/// the extractor and pricer of `opts`; an output without a finite cover is
/// [`OptimizeError::Unrealizable`].
pub fn choose_cover(
    eg: &TensorGraph,
    prog: &Program,
    roots: &[Id],
    sizes: &CostModel,
    opts: &OptimizeOptions,
) -> Result<Cover, OptimizeError> {
    let derived = Derived::analyze(eg, &opts.constants, sizes);
    choose_cover_timed(eg, prog, roots, sizes, opts, &derived).map(|(c, _)| c)
}

/// Phase 2's work per e-node of the fast extractor when the graph substitutions merged
/// MatMuls (3× the default): a merged GEMM pays only when every consumer of its parts
/// switches to it, which the local search finds one layer at a time from the outputs down.
/// On BERT-12 at batch 1, sequence 256 / 384 / 512, the default budget merged the last three,
/// ten and all twelve layers' Q/K/V (130 / 128 / 120 kernels); with this, all twelve at each
/// (114 kernels; 1963.6 → 1894.4, 2845.5 → 2792.0, 3720.5 → 3699.3 µs predicted, +0.6 s of
/// optimize). Without merges (the gate refuses them where the parts fill the GPU) the
/// default budget is kept: there the extra work bought 0.02 % on BERT-12 for 0.3 s.
pub const MERGED_WORK_PER_NODE: u64 = 1200;

/// The built-in fast extractor for `eg`: the default, or with [`MERGED_WORK_PER_NODE`] when
/// the substitutions merged MatMuls in it (`crate::rules::subst::has_merged_matmuls`).
fn fast_extractor(eg: &TensorGraph) -> FastExtractor {
    let base = FastExtractor::default();
    if crate::rules::subst::has_merged_matmuls(eg) {
        FastExtractor {
            work_per_node: base.work_per_node.max(MERGED_WORK_PER_NODE),
            ..base
        }
    } else {
        base
    }
}

/// [`choose_cover`], also returning the wall and CPU seconds spent pricing the kernel e-nodes
/// (the rest is the extractor's).
pub(super) fn choose_cover_timed(
    eg: &TensorGraph,
    prog: &Program,
    roots: &[Id],
    sizes: &CostModel,
    opts: &OptimizeOptions,
    derived: &Derived,
) -> Result<(Cover, (f64, Option<f64>)), OptimizeError> {
    let builtin: Box<dyn DagExtractor> = match opts.extractor {
        ExtractorKind::Fast => Box::new(fast_extractor(eg)),
        ExtractorKind::Exact => Box::new(ExactExtractor::default()),
    };
    let extractor: &dyn DagExtractor = match &opts.extensions.extractor {
        Some(e) => e.as_ref(),
        None => builtin.as_ref(),
    };
    let limits = ExtractOptions {
        time_limit: Some(opts.extract_time_limit),
    };
    let cover = extract_cover_derived(eg, roots, sizes, pricer(opts), extractor, &limits, derived);
    cover.map_err(|e| match e {
        CoverError::Extract(ExtractError::NoFiniteSolution { root }) => {
            let output = prog
                .outputs
                .iter()
                .zip(roots)
                .find(|(_, r)| r.to_string() == root)
                .map(|(o, _)| o.tensor.clone())
                .unwrap_or(root);
            OptimizeError::Unrealizable(output)
        }
        e => OptimizeError::Extraction(e.to_string()),
    })
}
