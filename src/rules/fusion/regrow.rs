//! Kernel growth over an e-graph that changed after the kernels phase (issue 23): the pipeline
//! grows kernels, runs the graph substitutions, and runs the kernels phase again with the same
//! rules. Every kernel of the first round stays in the e-graph (unions never remove e-nodes),
//! so the cover without substitutions stays available to the extractor; the second round grows
//! kernels over what the substitutions added. A seed's breadth-first growth is remembered as
//! final ([`super::GrowMemo::grown`]); here the seeds whose growth observed a class the
//! substitutions changed are forgotten, so they grow again (replayed where a recorded growth
//! fits), while the others keep their kernels without regrowing.
//!
//! What a growth observes of a class (`super::replay::GrowView`): its op e-nodes, its facts,
//! whether it is a contraction, which op e-nodes read it, hash-cons lookups of nodes over it,
//! its kernels. Facts never change; the kernels are the maximal growth's, which reruns when an
//! input class's kernel count changes anyway. So a class *changed* when it was merged with
//! another, is new, or gained op e-nodes or op e-nodes reading it ([`Fingerprints`]): a lookup
//! that now finds a node found nothing before the node was added, and the node reads the
//! looked-up children.

use super::{is_op, lock, GrowMemo};
use crate::ir::egraph::TensorGraph;
use egg::Id;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Per canonical e-class, its op e-node count and the count of op e-nodes reading it.
#[derive(Clone, Debug, Default)]
pub struct Fingerprints(HashMap<Id, (usize, usize)>);

impl Fingerprints {
    /// The fingerprints of every class of `eg` (clean: rebuilt).
    pub fn of(eg: &TensorGraph) -> Fingerprints {
        let mut out: HashMap<Id, (usize, usize)> = HashMap::new();
        for class in eg.classes() {
            for n in class.nodes.iter().filter(|n| is_op(n)) {
                out.entry(class.id).or_default().0 += 1;
                for c in egg::Language::children(n) {
                    out.entry(eg.find(*c)).or_default().1 += 1;
                }
            }
        }
        Fingerprints(out)
    }

    /// The classes of `eg` that changed since `self` was taken of it (canonical ids): merged,
    /// new, or with other op e-node counts (see the module doc).
    pub fn changed(&self, eg: &TensorGraph) -> HashSet<Id> {
        let now = Fingerprints::of(eg);
        let mut olds: HashMap<Id, Vec<Id>> = HashMap::new();
        for old in self.0.keys() {
            olds.entry(eg.find(*old)).or_default().push(*old);
        }
        eg.classes()
            .map(|c| c.id)
            .filter(|c| match olds.get(c).map(Vec::as_slice) {
                Some([old]) => self.0.get(old) != now.0.get(c),
                _ => true,
            })
            .collect()
    }
}

/// A handle on what a `kernel-fuse` rule remembers between runs
/// ([`super::rules_with_state`]).
#[derive(Clone)]
pub struct GrowthState {
    pub(super) memo: Arc<Mutex<GrowMemo>>,
}

impl GrowthState {
    /// Forgets the breadth-first and maximal growths of the seeds whose growth observed a class
    /// of `changed` (canonical ids: [`Fingerprints::changed`]), or whose observations were not
    /// recorded, so that running the rules again grows them over the changed e-graph; the
    /// others are kept (growing them again would give the kernels they already added). Returns
    /// how many seeds were forgotten, and how many kept.
    pub fn forget_changed(&self, eg: &TensorGraph, changed: &HashSet<Id>) -> (usize, usize) {
        let mut memo = lock(&self.memo);
        let GrowMemo {
            grown,
            deferred,
            maxed,
            ..
        } = &mut *memo;
        let total = grown.len();
        grown.retain(|_, observed| {
            observed
                .as_ref()
                .is_some_and(|cs| !cs.iter().any(|c| changed.contains(&eg.find(*c))))
        });
        deferred.retain(|s| grown.contains_key(s));
        maxed.retain(|(s, _), _| grown.contains_key(s));
        (total - grown.len(), grown.len())
    }
}
