//! What kernels are priced with ([`CostModel`]: symbol bindings, target, synthesized regions),
//! and the cache of regions synthesized for kernel bodies ([`RegionCache`]) that the legality
//! check fills and pricing (`crate::extract`) reads.

use super::Time;
use crate::ir::dim::Dim;
use crate::ir::egraph::kernel::KernelBody;
use crate::ir::egraph::{TensorFacts, TensorLang};
use crate::ir::region::{Materialize, Region};
use crate::synth::{synthesize, SynthArg};
use crate::target::Target;
use egg::RecExpr;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// `a + b` saturating below `u64::MAX` (which marks [`KernelCost::INFINITY`]'s bytes): finite
/// byte counts stay finite however large.
pub(crate) fn finite_sum(a: u64, b: u64) -> u64 {
    a.saturating_add(b).min(u64::MAX - 1)
}

/// What kernels are priced with: the program's bound symbols (or a shape cluster's representative
/// binding, `OptimizeOptions::pricing`, `crate::shapes`), `default_size` for every other symbol,
/// the target GPU, and optionally the
/// regions the legality check already synthesized.
#[derive(Clone, Debug)]
pub struct CostModel {
    /// Symbol values (bound, or a shape cluster's representative).
    pub bindings: BTreeMap<String, i64>,
    /// The size of every other symbol.
    pub default_size: i64,
    /// The GPU kernels are priced for.
    pub target: Target,
    /// Regions the legality check already synthesized (by body and input facts).
    pub regions: Option<Arc<RegionCache>>,
}

/// Regions synthesized for kernel bodies (inputs `in0`, `in1`, …, output `out`), by body and
/// input facts: the kernels phase's legality check fills it, pricing reads it, so each body is
/// synthesized once.
#[derive(Default)]
pub struct RegionCache(
    Mutex<RegionMap>,
    Mutex<PairMap>,
    Mutex<DeferredMap>,
    Mutex<KernelIds>,
);

/// Small ids of (body, input facts), given on first use: an attention pair's key is two of
/// them, so looking a pair up clones and hashes no facts (pricing looks up every first ×
/// second kernel pair of a class).
type KernelIds = FxHashMap<(KernelBody, Vec<TensorFacts>), u32>;

type RegionMap = FxHashMap<(RecExpr<TensorLang>, Vec<TensorFacts>), Arc<Region>>;

/// A [`RegionMap`] key, owned (in the map) or borrowed (a lookup), hashed and compared by its
/// parts: the owned tuple hashes its body and then its facts exactly as the borrowed pair does.
trait RegionKey {
    fn parts(&self) -> (&RecExpr<TensorLang>, &[TensorFacts]);
}

impl RegionKey for (RecExpr<TensorLang>, Vec<TensorFacts>) {
    fn parts(&self) -> (&RecExpr<TensorLang>, &[TensorFacts]) {
        (&self.0, &self.1)
    }
}

impl RegionKey for (&RecExpr<TensorLang>, &[TensorFacts]) {
    fn parts(&self) -> (&RecExpr<TensorLang>, &[TensorFacts]) {
        (self.0, self.1)
    }
}

impl<'a> std::borrow::Borrow<dyn RegionKey + 'a> for (RecExpr<TensorLang>, Vec<TensorFacts>) {
    fn borrow(&self) -> &(dyn RegionKey + 'a) {
        self
    }
}

impl std::hash::Hash for dyn RegionKey + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let (body, facts) = self.parts();
        body.hash(state);
        facts.hash(state);
    }
}

impl PartialEq for dyn RegionKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn RegionKey + '_ {}

/// An attention pair's first kernel (the [`RegionCache::kernel_id`] of its body and input
/// facts, the second's input it writes) and second kernel (its id), with the cost model's
/// fingerprint.
pub(crate) type PairKey = (u32, usize, u32, u64);

/// The fused attention kernel's best time by pair (`None`: not a pair, or no plan).
type PairMap = FxHashMap<PairKey, Option<Time>>;

/// An attention pair's first region (its output deferred to the second's input `in{i}`) by
/// (body, input facts, i) (`None`: no such region).
type DeferredMap = FxHashMap<(KernelBody, Vec<TensorFacts>, usize), Option<Arc<Region>>>;

impl RegionCache {
    /// The region of `body` over `inputs`, synthesized on first use; `Err` says why the body is
    /// not one region.
    pub fn region(
        &self,
        body: &RecExpr<TensorLang>,
        inputs: &[TensorFacts],
    ) -> Result<Arc<Region>, String> {
        // Looked up by reference: a hit (most lookups: legality asks for the same bodies again,
        // pricing for every legal one) clones no body or facts.
        if let Some(r) = self.lock().get(&(body, inputs) as &dyn RegionKey) {
            return Ok(r.clone());
        }
        let r = Arc::new(synthesize_kernel(body, inputs)?);
        self.lock()
            .insert((body.clone(), inputs.to_vec()), r.clone());
        Ok(r)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RegionMap> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The first region of an attention pair ([`synthesize_deferred`] of `body` over `inputs`,
    /// its output the second's input `in{i}`), synthesized on first use: every second kernel
    /// reading the class pairs with the same first kernels.
    pub(crate) fn deferred(
        &self,
        body: &KernelBody,
        inputs: &[TensorFacts],
        i: usize,
    ) -> Option<Arc<Region>> {
        let lock = || self.2.lock().unwrap_or_else(|e| e.into_inner());
        let key = (body.clone(), inputs.to_vec(), i);
        if let Some(r) = lock().get(&key) {
            return r.clone();
        }
        let r = synthesize_deferred(body, inputs, &format!("in{i}"))
            .ok()
            .map(Arc::new);
        lock().insert(key, r.clone());
        r
    }

    /// The id of a kernel body over inputs of these facts (equal ids: equal body and facts),
    /// for [`PairKey`].
    pub(crate) fn kernel_id(&self, body: &KernelBody, inputs: Vec<TensorFacts>) -> u32 {
        let mut ids = self.3.lock().unwrap_or_else(|e| e.into_inner());
        let next = ids.len() as u32;
        *ids.entry((body.clone(), inputs)).or_insert(next)
    }

    /// The fused attention time of a pair, computed by `make` on first use (identical layers
    /// of a model share their pairs).
    pub(crate) fn pair_time(
        &self,
        key: PairKey,
        make: impl FnOnce() -> Option<Time>,
    ) -> Option<Time> {
        let lock = || self.1.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = lock().get(&key) {
            return *t;
        }
        let t = make();
        lock().insert(key, t);
        t
    }
}

impl std::fmt::Debug for RegionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RegionCache({} regions)", self.lock().len())
    }
}

/// Synthesis arguments `{prefix}0`, `{prefix}1`, … with the facts of `inputs`.
fn synth_args(inputs: &[TensorFacts], prefix: &str) -> Vec<SynthArg> {
    inputs
        .iter()
        .enumerate()
        .map(|(i, f)| SynthArg {
            name: format!("{prefix}{i}"),
            dtype: f.dtype,
            shape: f.shape.clone(),
        })
        .collect()
}

/// The region of a kernel body: inputs `in0`, `in1`, … with the given facts, output `out`.
pub fn synthesize_kernel(
    body: &RecExpr<TensorLang>,
    inputs: &[TensorFacts],
) -> Result<Region, String> {
    let args = synth_args(inputs, "in");
    synthesize("kernel", body, &args, "out", Materialize::Gmem).map_err(|e| e.to_string())
}

impl crate::plan::work::Sizes for CostModel {
    fn numel(&self, shape: &[Dim]) -> u64 {
        CostModel::numel(self, shape)
    }
}

impl CostModel {
    /// Number of elements of `shape` (saturating; unbound symbols take `default_size`).
    pub fn numel(&self, shape: &[Dim]) -> u64 {
        let lookup = |s: &str| Some(self.bindings.get(s).copied().unwrap_or(self.default_size));
        shape.iter().fold(1u64, |acc, d| {
            let v = d.eval(&lookup).unwrap_or(self.default_size).max(0) as u64;
            acc.saturating_mul(v)
        })
    }

    /// A fingerprint of the model (target, bindings, default size): the key of the plan choice
    /// cached on kernel bodies.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        self.target.name.hash(&mut h);
        self.target.launch_s.to_bits().hash(&mut h);
        self.bindings.hash(&mut h);
        self.default_size.hash(&mut h);
        h.finish()
    }

    /// Bytes of a tensor with these facts.
    pub fn bytes(&self, t: &TensorFacts) -> u64 {
        finite_sum(self.numel(&t.shape).saturating_mul(t.dtype.size_bytes()), 0)
    }
}

/// The region of a kernel body whose output `out_name` is deferred (the first region of an
/// attention pair); its inputs are `f0`, `f1`, … (apart from the reader's `in*`).
pub(crate) fn synthesize_deferred(
    body: &KernelBody,
    inputs: &[TensorFacts],
    out_name: &str,
) -> Result<Region, String> {
    let args = synth_args(inputs, "f");
    synthesize(
        "kernel",
        body.expr(),
        &args,
        out_name,
        Materialize::Deferred,
    )
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::dtype::DType;
    use crate::ir::egraph::attr::Attr;
    use std::hash::BuildHasher;

    /// The borrowed key hashes and compares as the owned one: a lookup by reference finds what
    /// was inserted (a miss would synthesize every region again).
    #[test]
    fn region_keys_are_found_by_reference() {
        let mut body: RecExpr<TensorLang> = RecExpr::default();
        body.add(TensorLang::Attr(Attr::Arg(0)));
        let facts = vec![TensorFacts {
            dtype: DType::F32,
            shape: vec![Dim::int(4), Dim::sym("N")],
        }];
        let owned = (body.clone(), facts.clone());
        let build = rustc_hash::FxBuildHasher;
        let borrowed = (&body, facts.as_slice());
        assert_eq!(
            build.hash_one(&owned),
            build.hash_one(&borrowed as &dyn RegionKey)
        );
        let mut map: FxHashMap<(RecExpr<TensorLang>, Vec<TensorFacts>), u32> = FxHashMap::default();
        map.insert(owned, 7);
        assert_eq!(map.get(&borrowed as &dyn RegionKey), Some(&7));
        let other = vec![TensorFacts {
            dtype: DType::F16,
            shape: facts[0].shape.clone(),
        }];
        assert!(!map.contains_key(&(&body, other.as_slice()) as &dyn RegionKey));
    }
}
