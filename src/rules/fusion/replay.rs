//! Growth replay (issue 23, optimize speed): the growth of a seed ([`super::Grow`]) is a
//! deterministic function of what it observes in the e-graph — the op e-nodes and kernels of the
//! classes it visits, their facts, hash-cons lookups of the nodes it builds, which classes are
//! contractions or read outside the body — and it compares e-class ids only for equality. So
//! growth runs against a [`GrowView`]; a [`Recorder`] view writes every observation down with
//! the classes renamed to labels in order of first appearance ([`Trace`]), and a later seed with
//! the same body whose e-graph answers every recorded observation the same way, under a
//! one-to-one renaming of the labels ([`Trace::replay`]), gets the recorded result renamed,
//! without growing. The twelve identical layers of an encoder are grown once (or twice: the
//! first layer's neighbourhood differs), and the result is exactly what growing would give.

use super::{kernels_largest_first, single_op_bodies, Consumers, Grown, Made};
use crate::ir::egraph::kernel::KernelBody;
use crate::ir::egraph::{TensorFacts, TensorGraph, TensorLang};
use egg::{Id, Language, RecExpr};
use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

/// Everything growth reads from the e-graph.
pub(super) trait GrowView {
    /// The single-op body of every op e-node of `d` except identities on `d` itself
    /// ([`single_op_bodies`]).
    fn op_bodies(&self, d: Id) -> Vec<Grown>;
    /// The class of `node` (children given as classes), when the e-graph has it.
    fn lookup(&self, node: &TensorLang) -> Option<Id>;
    /// The tensor facts of class `d`.
    fn facts(&self, d: Id) -> Option<&TensorFacts>;
    /// Whether `d` computes a contraction ([`super::is_contraction_class`]).
    fn is_contraction(&self, d: Id) -> bool;
    /// Whether `d` computes a dense layer's GEMM ([`super::is_dense_class`]).
    fn is_dense(&self, d: Id) -> bool;
    /// Whether an op node of a class outside `inside` reads `d`.
    fn read_outside(&self, d: Id, inside: &BTreeSet<Id>) -> bool;
    /// The kernels of `d`, largest body first ([`kernels_largest_first`]).
    fn kernels(&self, d: Id) -> Vec<(KernelBody, Vec<Id>)>;
}

/// The e-graph itself, with the phase iteration's consumer map.
pub(super) struct Direct<'a> {
    /// The e-graph.
    pub eg: &'a TensorGraph,
    /// Its consumers ([`super::consumers`]).
    pub consumers: &'a Consumers,
}

impl GrowView for Direct<'_> {
    fn op_bodies(&self, d: Id) -> Vec<Grown> {
        single_op_bodies(self.eg, d)
    }

    fn lookup(&self, node: &TensorLang) -> Option<Id> {
        self.eg.lookup(node.clone())
    }

    fn facts(&self, d: Id) -> Option<&TensorFacts> {
        self.eg[d].data.tensor()
    }

    fn is_contraction(&self, d: Id) -> bool {
        super::is_contraction_class(self.eg, d)
    }

    fn is_dense(&self, d: Id) -> bool {
        super::is_dense_class(self.eg, d)
    }

    fn read_outside(&self, d: Id, inside: &BTreeSet<Id>) -> bool {
        self.consumers
            .get(&d)
            .is_some_and(|cs| cs.iter().any(|c| !inside.contains(c)))
    }

    fn kernels(&self, d: Id) -> Vec<(KernelBody, Vec<Id>)> {
        kernels_largest_first(self.eg, d)
    }
}

/// A [`Direct`] view that remembers the class lists it computed (op bodies, kernels) for one
/// replay attempt: a seed tries up to [`MAX_TRACES`] traces, most of which observe the same
/// classes first, and the maximal growth's kernel lists (sorted) were most of the failed
/// replays' cost. Valid while the e-graph does not change, i.e. within one
/// [`Replays::grow`] call.
pub(super) struct Cached<'a> {
    inner: &'a Direct<'a>,
    op_bodies: RefCell<FxHashMap<Id, Rc<Vec<Grown>>>>,
    kernels: RefCell<FxHashMap<Id, Rc<KernelList>>>,
}

/// A class's kernels as (body, input classes), largest first ([`GrowView::kernels`]).
type KernelList = Vec<(KernelBody, Vec<Id>)>;

impl<'a> Cached<'a> {
    fn new(inner: &'a Direct<'a>) -> Cached<'a> {
        Cached {
            inner,
            op_bodies: RefCell::default(),
            kernels: RefCell::default(),
        }
    }

    fn op_bodies_rc(&self, d: Id) -> Rc<Vec<Grown>> {
        if let Some(v) = self.op_bodies.borrow().get(&d) {
            return v.clone();
        }
        let v = Rc::new(self.inner.op_bodies(d));
        self.op_bodies.borrow_mut().insert(d, v.clone());
        v
    }

    fn kernels_rc(&self, d: Id) -> Rc<KernelList> {
        if let Some(v) = self.kernels.borrow().get(&d) {
            return v.clone();
        }
        let v = Rc::new(self.inner.kernels(d));
        self.kernels.borrow_mut().insert(d, v.clone());
        v
    }
}

impl GrowView for Cached<'_> {
    fn op_bodies(&self, d: Id) -> Vec<Grown> {
        self.op_bodies_rc(d).as_ref().clone()
    }

    fn lookup(&self, node: &TensorLang) -> Option<Id> {
        self.inner.lookup(node)
    }

    fn facts(&self, d: Id) -> Option<&TensorFacts> {
        self.inner.facts(d)
    }

    fn is_contraction(&self, d: Id) -> bool {
        self.inner.is_contraction(d)
    }

    fn is_dense(&self, d: Id) -> bool {
        self.inner.is_dense(d)
    }

    fn read_outside(&self, d: Id, inside: &BTreeSet<Id>) -> bool {
        self.inner.read_outside(d, inside)
    }

    fn kernels(&self, d: Id) -> Vec<(KernelBody, Vec<Id>)> {
        self.kernels_rc(d).as_ref().clone()
    }
}

/// One observation and its answer, classes as labels.
enum Obs {
    OpBodies(u32, Vec<(RecExpr<TensorLang>, Vec<u32>)>),
    Lookup(TensorLang, Option<u32>),
    Facts(u32, Option<TensorFacts>),
    Contraction(u32, bool),
    Dense(u32, bool),
    ReadOutside(u32, Vec<u32>, bool),
    Kernels(u32, Vec<(KernelBody, Vec<u32>)>),
}

/// The recorded growth of one seed: what it observed, in order, and what it returned.
pub(super) struct Trace<R> {
    observations: Vec<Obs>,
    result: Vec<(KernelBody, Vec<u32>)>,
    extra: R,
}

/// The labels given to classes so far (label `i` is `classes[i]`).
#[derive(Default)]
struct Labels {
    classes: Vec<Id>,
    of: FxHashMap<Id, u32>,
}

impl Labels {
    fn label(&mut self, c: Id) -> u32 {
        if let Some(l) = self.of.get(&c) {
            return *l;
        }
        let l = self.classes.len() as u32;
        self.classes.push(c);
        self.of.insert(c, l);
        l
    }

    /// Binds `label` to `c` one-to-one: an existing label must name `c`, a new one (the next
    /// label) must not name a class already labelled.
    fn bind(&mut self, label: u32, c: Id) -> bool {
        match self.classes.get(label as usize) {
            Some(x) => *x == c,
            None if label as usize == self.classes.len() && !self.of.contains_key(&c) => {
                self.label(c);
                true
            }
            None => false,
        }
    }

    fn class(&self, label: u32) -> Option<Id> {
        self.classes.get(label as usize).copied()
    }
}

/// What a [`Recorder`] has seen.
#[derive(Default)]
struct Record {
    labels: Labels,
    observations: Vec<Obs>,
    /// Queries already recorded (the e-graph does not change during one growth).
    lookups: FxHashSet<TensorLang>,
    classes: FxHashSet<(u8, Id)>,
    outside: FxHashSet<(Id, Vec<Id>)>,
}

/// A view that answers from the e-graph and records every observation ([`Trace`]).
pub(super) struct Recorder<'a> {
    inner: &'a Cached<'a>,
    record: RefCell<Record>,
}

impl<'a> Recorder<'a> {
    /// A recorder over `inner` whose first labels are `seed` (the seed's class and inputs).
    fn new(inner: &'a Cached<'a>, seed: &[Id]) -> Recorder<'a> {
        let mut record = Record::default();
        for c in seed {
            record.labels.label(*c);
        }
        Recorder {
            inner,
            record: RefCell::new(record),
        }
    }

    /// True the first time class query `kind` is asked about `d` (0 op bodies, 1 facts,
    /// 2 contraction, 3 kernels, 4 dense).
    fn first(&self, kind: u8, d: Id) -> bool {
        self.record.borrow_mut().classes.insert((kind, d))
    }

    /// Records the answer of class query `kind` about `d` (`obs` of `d`'s label) the first time
    /// it is asked.
    fn note(&self, kind: u8, d: Id, obs: impl FnOnce(u32) -> Obs) {
        if self.first(kind, d) {
            let mut r = self.record.borrow_mut();
            let l = r.labels.label(d);
            r.observations.push(obs(l));
        }
    }

    /// The trace of what was observed, with `result` (its classes labelled), and every class
    /// the growth observed or returned.
    fn finish<R>(self, result: &[Made], extra: R) -> (Trace<R>, Vec<Id>) {
        let mut r = self.record.into_inner();
        let result = result
            .iter()
            .map(|(b, ins)| (b.clone(), ins.iter().map(|c| r.labels.label(*c)).collect()))
            .collect();
        let trace = Trace {
            observations: r.observations,
            result,
            extra,
        };
        (trace, r.labels.classes)
    }
}

impl GrowView for Recorder<'_> {
    fn op_bodies(&self, d: Id) -> Vec<Grown> {
        let out = self.inner.op_bodies(d);
        if self.first(0, d) {
            let mut r = self.record.borrow_mut();
            let l = r.labels.label(d);
            let ans = out
                .iter()
                .map(|(b, ins)| (b.clone(), ins.iter().map(|c| r.labels.label(*c)).collect()))
                .collect();
            r.observations.push(Obs::OpBodies(l, ans));
        }
        out
    }

    fn lookup(&self, node: &TensorLang) -> Option<Id> {
        let out = self.inner.lookup(node);
        let mut r = self.record.borrow_mut();
        if r.lookups.insert(node.clone()) {
            let labelled = node
                .clone()
                .map_children(|c| Id::from(r.labels.label(c) as usize));
            let ans = out.map(|c| r.labels.label(c));
            r.observations.push(Obs::Lookup(labelled, ans));
        }
        out
    }

    fn facts(&self, d: Id) -> Option<&TensorFacts> {
        let out = self.inner.facts(d);
        self.note(1, d, |l| Obs::Facts(l, out.cloned()));
        out
    }

    fn is_contraction(&self, d: Id) -> bool {
        let out = self.inner.is_contraction(d);
        self.note(2, d, |l| Obs::Contraction(l, out));
        out
    }

    fn is_dense(&self, d: Id) -> bool {
        let out = self.inner.is_dense(d);
        self.note(4, d, |l| Obs::Dense(l, out));
        out
    }

    fn read_outside(&self, d: Id, inside: &BTreeSet<Id>) -> bool {
        let out = self.inner.read_outside(d, inside);
        let mut r = self.record.borrow_mut();
        let key = (d, inside.iter().copied().collect::<Vec<Id>>());
        if !r.outside.contains(&key) {
            let l = r.labels.label(d);
            let ls = key.1.iter().map(|c| r.labels.label(*c)).collect();
            r.observations.push(Obs::ReadOutside(l, ls, out));
            r.outside.insert(key);
        }
        out
    }

    fn kernels(&self, d: Id) -> Vec<(KernelBody, Vec<Id>)> {
        let out = self.inner.kernels(d);
        if self.first(3, d) {
            let mut r = self.record.borrow_mut();
            let l = r.labels.label(d);
            let ans = out
                .iter()
                .map(|(b, ins)| (b.clone(), ins.iter().map(|c| r.labels.label(*c)).collect()))
                .collect();
            r.observations.push(Obs::Kernels(l, ans));
        }
        out
    }
}

/// Binds the labels of `ins` to `classes`, in order.
fn bind_all(labels: &mut Labels, ins: &[u32], classes: &[Id]) -> bool {
    ins.len() == classes.len() && ins.iter().zip(classes).all(|(l, c)| labels.bind(*l, *c))
}

impl<R: Clone> Trace<R> {
    /// The recorded result renamed onto `seed`'s classes, when `view` answers every recorded
    /// observation the same way under a one-to-one renaming, with the classes the labels name
    /// (what growing would observe); `None` otherwise.
    fn replay(&self, view: &Cached, seed: &[Id]) -> Option<(Vec<Made>, R, Vec<Id>)> {
        let mut labels = Labels::default();
        for c in seed {
            if labels.of.contains_key(c) {
                return None;
            }
            labels.label(*c);
        }
        for o in &self.observations {
            if !check(o, view, &mut labels)? {
                return None;
            }
        }
        let result = self
            .result
            .iter()
            .map(|(b, ins)| {
                let ins = ins
                    .iter()
                    .map(|l| labels.class(*l))
                    .collect::<Option<Vec<Id>>>()?;
                Some((b.clone(), ins))
            })
            .collect::<Option<Vec<Made>>>()?;
        Some((result, self.extra.clone(), labels.classes))
    }
}

/// Whether `view` answers observation `o` as recorded (binding new labels); `None` when it names
/// a label not bound yet.
fn check(o: &Obs, view: &Cached, labels: &mut Labels) -> Option<bool> {
    Some(match o {
        Obs::OpBodies(l, ans) => {
            let got = view.op_bodies_rc(labels.class(*l)?);
            got.len() == ans.len()
                && got
                    .iter()
                    .zip(ans)
                    .all(|((gb, gi), (b, i))| gb == b && bind_all(labels, i, gi))
        }
        Obs::Lookup(node, ans) => {
            let mut known = true;
            let n = node.clone().map_children(|c| {
                let c = labels.class(usize::from(c) as u32);
                known &= c.is_some();
                c.unwrap_or(Id::from(0))
            });
            if !known {
                return None;
            }
            match (view.lookup(&n), ans) {
                (None, None) => true,
                (Some(c), Some(l)) => labels.bind(*l, c),
                _ => false,
            }
        }
        Obs::Facts(l, f) => view.facts(labels.class(*l)?) == f.as_ref(),
        Obs::Contraction(l, b) => view.is_contraction(labels.class(*l)?) == *b,
        Obs::Dense(l, b) => view.is_dense(labels.class(*l)?) == *b,
        Obs::ReadOutside(l, inside, b) => {
            let inside = inside
                .iter()
                .map(|c| labels.class(*c))
                .collect::<Option<BTreeSet<Id>>>()?;
            view.read_outside(labels.class(*l)?, &inside) == *b
        }
        Obs::Kernels(l, ans) => {
            let got = view.kernels_rc(labels.class(*l)?);
            got.len() == ans.len()
                && got
                    .iter()
                    .zip(ans)
                    .all(|((gb, gi), (b, i))| gb == b && bind_all(labels, i, gi))
        }
    })
}

/// The most traces kept per seed body and growth kind (the first layer's and the others'
/// neighbourhoods, and a few boundary variants): more would make failed replays cost more than
/// growing.
const MAX_TRACES: usize = 64;

/// What recorded growths are filed under: the seed's body, the growth kind and the facts of the
/// seed's classes (only a candidate: the replay checks everything the growth observed).
type Key = (RecExpr<TensorLang>, u8, Vec<Option<TensorFacts>>);

/// Recorded growths by seed body, growth kind and seed facts.
pub(super) struct Replays<R> {
    traces: Mutex<FxHashMap<Key, Vec<Arc<Trace<R>>>>>,
}

impl<R> Default for Replays<R> {
    fn default() -> Replays<R> {
        Replays {
            traces: Mutex::default(),
        }
    }
}

impl<R: Clone> Replays<R> {
    /// The growth of kind `kind` of the seed with body `body` over classes `seed` (its class,
    /// then its inputs): a recorded growth replayed when one fits, else `grow` run against a
    /// recorder (and its trace kept). Also returns every class the growth observed (its
    /// result depends on nothing else: `GrowthState::forget_changed`). The bodies returned are
    /// the trace's own (a replay shares them with the recorded growth's kernel e-nodes).
    pub(super) fn grow(
        &self,
        view: &Direct,
        body: &RecExpr<TensorLang>,
        kind: u8,
        seed: &[Id],
        grow: impl FnOnce(&Recorder) -> (Vec<Grown>, R),
    ) -> (Vec<Made>, R, Vec<Id>) {
        let facts = seed.iter().map(|c| view.facts(*c).cloned()).collect();
        let key = (body.clone(), kind, facts);
        let known: Vec<Arc<Trace<R>>> = self
            .lock()
            .get(&key)
            .map(|v| v.to_vec())
            .unwrap_or_default();
        let cached = Cached::new(view);
        for (k, t) in known.iter().enumerate() {
            if let Some(r) = t.replay(&cached, seed) {
                if k > 0 {
                    // Most recently replayed first: a later seed of the same layer position
                    // tends to fit the same trace. The order only decides how soon a fitting
                    // trace is found, never the result (every fitting trace gives exactly what
                    // growing gives).
                    let mut traces = self.lock();
                    if let Some(v) = traces.get_mut(&key) {
                        if let Some(at) = v.iter().position(|x| Arc::ptr_eq(x, t)) {
                            let hit = v.remove(at);
                            v.insert(0, hit);
                        }
                    }
                }
                return r;
            }
        }
        let rec = Recorder::new(&cached, seed);
        let (out, extra) = grow(&rec);
        let out = super::made(out);
        let (trace, observed) = rec.finish(&out, extra.clone());
        let mut traces = self.lock();
        let v = traces.entry(key).or_default();
        if v.len() < MAX_TRACES {
            v.push(Arc::new(trace));
        }
        (out, extra, observed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FxHashMap<Key, Vec<Arc<Trace<R>>>>> {
        // A panic while holding the lock leaves only recorded traces behind, which stay valid.
        self.traces.lock().unwrap_or_else(|e| e.into_inner())
    }
}
