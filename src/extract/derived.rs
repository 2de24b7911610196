//! Derived constants (issue 23): a kernel whose inputs are all constants — graph inputs bound to
//! values that travel with the graph (an imported model's initializers, `constants`), or other
//! derived constants — computes the same value on every run. It is computed **once, when the
//! weights are bound**, not per run: a merged Q‖K‖V GEMM reads `Wq‖Wk‖Wv` concatenated at load
//! time, a transposed, cast or folded weight is read as a plain input.
//!
//! The recognition lives in extraction, so what is priced is what runs:
//! - [`Derived::analyze`] finds the *constant classes* of the e-graph: a class holding an input
//!   e-node of a bound constant, a reshape of a constant class, or an *eligible* kernel e-node
//!   whose input classes are all constant (`Derived::eligible`: concrete output shape, no
//!   larger than its inputs together, and a region exists);
//! - the extraction problem ([`super::cover::kernel_problem_derived`]) keeps only those
//!   realizations in a constant class and prices its kernels at [`DERIVED_PRICE`] per body op (no
//!   launch, no per-run time or bytes: a tie-breaker that prefers the input itself to a copy and
//!   the smaller recipe), so the consumer reading the constant pays a plain input read;
//! - the cover's cost ([`super::kernels::cover_cost_derived`]) counts them as zero, and the
//!   program builder (`crate::optimize`) moves exactly these kernels into
//!   [`crate::ir::region::program::RegionProgram::derived`], which the runtimes evaluate once
//!   when the weights are bound (`crate::run`). Their one-time cost is reported apart
//!   (`--explain`: "precomputed at load").
//!
//! A class whose value depends only on constants always has a route of constant realizations
//! (that is how it was found), so dropping its other realizations loses no cover that could be
//! cheaper: every per-run kernel costs at least a launch.

use super::kernels::CostModel;
use crate::ir::egraph::kernel::kernel_parts;
use crate::ir::egraph::{Attr, TensorGraph, TensorLang};
use egg::Id;
use std::collections::{BTreeSet, HashSet};

/// The extraction price of a derived-constant kernel per body op, in nanoseconds (the
/// extractor's tie-breaker weight of one body op, [`super::kernels::KernelCost::scalar`]): it
/// runs at load time, not per run.
pub const DERIVED_PRICE: f64 = 1e-6;

/// The constant classes of an e-graph (canonical ids), for the bound constants it was analyzed
/// with. Empty when no input is a bound constant.
#[derive(Clone, Debug, Default)]
pub struct Derived {
    classes: HashSet<Id>,
    /// The eligible kernel e-nodes over constant classes (canonical children).
    kernels: HashSet<TensorLang>,
}

impl Derived {
    /// No constant classes: every kernel runs per run (what a graph without bound values gets).
    pub fn none() -> Derived {
        Derived::default()
    }

    /// The constant classes of `eg` when the inputs named in `constants` are bound to values at
    /// load time: a fixpoint over the e-graph (a class is constant when one of its e-nodes is an
    /// input in `constants`, a reshape of a constant class, or an eligible kernel over constant
    /// classes). `model` gives the region cache used to check that a kernel has a region.
    pub fn analyze(eg: &TensorGraph, constants: &BTreeSet<String>, model: &CostModel) -> Derived {
        let mut d = Derived::none();
        if constants.is_empty() {
            return d;
        }
        let ids = super::cover::tensor_classes(eg);
        loop {
            let mut grew = false;
            for id in &ids {
                for n in &eg[*id].nodes {
                    let constant = match n {
                        TensorLang::Input([name, _, _]) => matches!(
                            eg[*name].data.attr(),
                            Some(Attr::Name(s)) if constants.contains(s)
                        ),
                        TensorLang::Reshape([x, _]) => d.classes.contains(&eg.find(*x)),
                        TensorLang::Kernel(_) if d.kernels.contains(n) => true,
                        TensorLang::Kernel(_) if d.eligible(eg, *id, n, model) => {
                            d.kernels.insert(n.clone());
                            grew = true;
                            true
                        }
                        _ => false,
                    };
                    if constant && d.classes.insert(*id) {
                        grew = true;
                    }
                }
            }
            if !grew {
                return d;
            }
        }
    }

    /// Whether there are no constant classes.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// Whether class `c` (canonical or not) holds a value computed from constants only.
    pub fn is_constant(&self, eg: &TensorGraph, c: Id) -> bool {
        self.classes.contains(&eg.find(c))
    }

    /// Whether `node`, an e-node of class `class`, is a realization the extraction problem
    /// keeps: every e-node of a class that is not constant; in a constant class only an input,
    /// a reshape of a constant class or a kernel over constant classes (a derived constant).
    pub fn keeps(&self, eg: &TensorGraph, class: Id, node: &TensorLang) -> bool {
        if !self.is_constant(eg, class) {
            return true;
        }
        match node {
            TensorLang::Input(_) => true,
            TensorLang::Reshape([x, _]) => self.is_constant(eg, *x),
            TensorLang::Kernel(_) => self.kernels.contains(node),
            _ => false,
        }
    }

    /// Whether `node` (an e-node of class `class`) is a derived-constant kernel: a kernel the
    /// problem keeps in a constant class. It runs once at load time.
    pub fn is_derived_kernel(&self, eg: &TensorGraph, class: Id, node: &TensorLang) -> bool {
        matches!(node, TensorLang::Kernel(_))
            && self.is_constant(eg, class)
            && self.keeps(eg, class, node)
    }

    /// A kernel over constant classes may be precomputed when its output's shape is concrete
    /// (no symbol: the value does not depend on the binding), it holds no more elements than
    /// its inputs together (a derived constant never grows the weights: a concatenation, a
    /// transpose, a cast or a folded scale, not a broadcast to activation sizes) and its body
    /// is one region (the runtimes evaluate that region at load time).
    fn eligible(&self, eg: &TensorGraph, class: Id, node: &TensorLang, model: &CostModel) -> bool {
        let TensorLang::Kernel(ch) = node else {
            return false;
        };
        if !ch[1..].iter().all(|c| self.is_constant(eg, *c)) {
            return false;
        }
        let concrete = |c: Id| -> Option<u64> {
            let t = eg[c].data.tensor()?;
            t.shape.iter().try_fold(1u64, |acc, d| {
                let v = u64::try_from(d.as_int()?).ok()?;
                acc.checked_mul(v)
            })
        };
        let Some(out) = concrete(class) else {
            return false;
        };
        let mut inputs = 0u64;
        for c in &ch[1..] {
            match concrete(eg.find(*c)) {
                Some(n) => inputs = inputs.saturating_add(n),
                None => return false,
            }
        }
        if out > inputs.max(1) {
            return false;
        }
        let attr = |id: Id| eg[id].data.attr();
        let Ok((body, ins)) = kernel_parts(ch, &attr) else {
            return false;
        };
        if !binding_free(body.expr()) {
            return false;
        }
        let Some(facts) = ins
            .iter()
            .map(|i| eg[*i].data.tensor().cloned())
            .collect::<Option<Vec<_>>>()
        else {
            return false;
        };
        match &model.regions {
            Some(cache) => cache.region(body.expr(), &facts).is_ok(),
            None => super::kernels::synthesize_kernel(body.expr(), &facts).is_ok(),
        }
    }

    /// The extraction price of a derived-constant kernel: [`DERIVED_PRICE`] per body op.
    pub fn price(node: &TensorLang, eg: &TensorGraph) -> f64 {
        let TensorLang::Kernel(ch) = node else {
            return 0.0;
        };
        let attr = |id: Id| eg[id].data.attr();
        let ops = kernel_parts(ch, &attr).map_or(1, |(b, _)| b.expr().as_ref().len());
        DERIVED_PRICE * ops as f64
    }
}

/// Whether no size in `body` names a symbol (every shape, shrink bound and read shape is a
/// number): a body that expands a weight to `[sequence]` and sums it depends on the binding
/// even when its inputs and output are constants of concrete shapes.
fn binding_free(body: &egg::RecExpr<TensorLang>) -> bool {
    let concrete = |dims: &[crate::ir::dim::Dim]| dims.iter().all(|d| d.as_int().is_some());
    body.as_ref().iter().all(|n| match n {
        TensorLang::Attr(Attr::Shape(s)) => concrete(s),
        TensorLang::Attr(Attr::Access(a)) => concrete(&a.shape),
        _ => true,
    })
}
