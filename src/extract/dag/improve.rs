//! Phase 2 of the fast extractor: DAG-cost local improvement.
//!
//! State: a choice for every derivable class (reachable from the roots or not), acyclic, with a
//! rank per class that orders it topologically (a chosen node's children rank lower), and per
//! class a reference count: the number of chosen-node edges into it from classes reachable from
//! the roots (plus one for a root). In an acyclic choice graph a class is reachable exactly when
//! its count is positive, and the DAG cost is the sum of the chosen costs of those classes.
//!
//! A move re-chooses one reachable class `c`: drop the edges of its old node (a class whose count
//! falls to zero is no longer paid, and drops its own edges, recursively), add the edges of the
//! new node (a class whose count rises from zero is paid, and adds its edges). Every count and
//! choice change is logged so a trial move is undone exactly. A move is kept when it lowers the
//! DAG cost and the new node cannot reach `c`: children ranked below `c` cannot; for the others a
//! search decides, and the ranks are recomputed after such a move.
//!
//! With *lookahead*, a trial move is followed by the best single moves of the classes it made
//! reachable (a class newly needed may have been chosen for another context: re-choosing it can
//! share what is already paid), and the move is judged with them. Classes are visited from the
//! roots' side down (decreasing rank), sweep after sweep: first plain moves to a fixpoint, then
//! moves with lookahead to a fixpoint, or until the work budget (counted in cascade and search
//! steps) is spent. A class's lookahead search stops trying alternatives once it has taken
//! [`CLASS_SHARE`] times an even share of the work left among the classes the sweep has still to
//! visit, so every class gets its search (a sweep that improved nothing but cut a search short
//! runs again with a larger share).

use super::fast::NONE;
use super::reduce::Reduced;
use super::Problem;
use std::sync::Arc;

/// A class with more alternatives than this has its lookahead trials run on two threads (on
/// BERT-12 three such classes took two thirds of the extraction's search).
const PARALLEL_TRIALS: usize = 8;

/// The most a class's lookahead search may take of the work left, as a multiple of an even
/// share among the classes the sweep has still to try.
const CLASS_SHARE: u64 = 4;

/// Alternatives whose lookahead trials run in parallel between two judgements of the class's
/// work (two threads, half each).
const PARALLEL_ROUND: usize = 8;

/// Class `c` with the edges of its chosen node `old` removed, in a best-move search: what
/// that freed, the log marks to roll back to and whether the ranks were valid.
struct Removed {
    c: u32,
    old: u32,
    freed: f64,
    marks: (usize, usize),
    valid: bool,
}

#[derive(Clone)]
pub(crate) struct Improver<'a> {
    p: &'a Problem,
    red: &'a Reduced,
    choice: Vec<u32>,
    rank: Vec<u32>,
    refc: Vec<u32>,
    /// (class, count before) for every count change since the last commit.
    log: Vec<(u32, u32)>,
    /// (class, choice before) for every choice change since the last commit.
    clog: Vec<(u32, u32)>,
    /// Classes whose count rose from zero, while `collect` is set.
    added: Vec<u32>,
    collect: bool,
    /// Whether `rank` orders the current choices (false inside a trial that added an edge upward).
    ranks_valid: bool,
    work: u64,
    /// Scratch marks for the cycle search.
    seen: Vec<u32>,
    epoch: u32,
    /// Per class, the kept nodes that read it (compressed rows: starts, then the list), shared
    /// by the copies that try moves in parallel.
    parents: Arc<(Vec<u32>, Vec<u32>)>,
    /// Lookahead trials of a class with more alternatives than this run in parallel.
    parallel_above: usize,
    /// Whether a best-move search of the current sweep stopped at its work cap.
    cut: bool,
    /// Classes a lookahead search was run for (all sweeps).
    lookahead_searches: usize,
    /// Scratch stack of [`Improver::inc`] and [`Improver::dec`] (kept: they run millions of
    /// times, and allocating it each time was a tenth of the search).
    stack: Vec<u32>,
}

impl<'a> Improver<'a> {
    /// Starts from an acyclic `choice` of every derivable class, with `rank` ordering it.
    pub(crate) fn new(p: &'a Problem, red: &'a Reduced, choice: Vec<u32>, rank: Vec<u32>) -> Self {
        let nc = p.num_classes();
        let mut s = Improver {
            parents: Arc::new(red.parents(p)),
            parallel_above: PARALLEL_TRIALS,
            p,
            red,
            choice,
            rank,
            refc: vec![0; nc],
            log: Vec::new(),
            clog: Vec::new(),
            added: Vec::new(),
            collect: false,
            ranks_valid: true,
            work: 0,
            seen: vec![0; nc],
            epoch: 0,
            cut: false,
            lookahead_searches: 0,
            stack: Vec::new(),
        };
        for r in p.roots() {
            s.inc(r.0);
        }
        s.log.clear();
        s
    }

    pub(crate) fn into_choices(self) -> Vec<u32> {
        self.choice
    }

    fn cost(&self, n: u32) -> f64 {
        self.p.nodes()[n as usize].cost
    }

    /// Adds one reference to class `c`; returns the cost that became paid.
    fn inc(&mut self, c: u32) -> f64 {
        let mut paid = 0.0;
        let mut stack = std::mem::take(&mut self.stack);
        stack.push(c);
        while let Some(d) = stack.pop() {
            self.work += 1;
            self.log.push((d, self.refc[d as usize]));
            self.refc[d as usize] += 1;
            if self.refc[d as usize] == 1 {
                let n = self.choice[d as usize];
                paid += self.cost(n);
                stack.extend_from_slice(self.red.children.get(n));
                if self.collect {
                    self.added.push(d);
                }
            }
        }
        self.stack = stack;
        paid
    }

    /// Removes one reference from class `c`; returns the cost no longer paid.
    fn dec(&mut self, c: u32) -> f64 {
        let mut freed = 0.0;
        let mut stack = std::mem::take(&mut self.stack);
        stack.push(c);
        while let Some(d) = stack.pop() {
            self.work += 1;
            self.log.push((d, self.refc[d as usize]));
            self.refc[d as usize] -= 1;
            if self.refc[d as usize] == 0 {
                let n = self.choice[d as usize];
                freed += self.cost(n);
                stack.extend_from_slice(self.red.children.get(n));
            }
        }
        self.stack = stack;
        freed
    }

    fn set_choice(&mut self, c: u32, n: u32) {
        self.clog.push((c, self.choice[c as usize]));
        self.choice[c as usize] = n;
    }

    fn marks(&self) -> (usize, usize) {
        (self.log.len(), self.clog.len())
    }

    /// Undoes count and choice changes back to `marks`.
    fn rollback(&mut self, (counts, choices): (usize, usize)) {
        while self.log.len() > counts {
            if let Some((c, before)) = self.log.pop() {
                self.refc[c as usize] = before;
            }
        }
        while self.clog.len() > choices {
            if let Some((c, before)) = self.clog.pop() {
                self.choice[c as usize] = before;
            }
        }
    }

    /// Sweeps (plain moves, then moves with lookahead) until nothing improves or `budget` steps
    /// are spent; returns the number of moves made.
    pub(crate) fn run(&mut self, budget: u64) -> usize {
        let total: f64 = (0..self.p.num_classes())
            .filter(|c| self.refc[*c] > 0)
            .map(|c| self.cost(self.choice[c]))
            .sum();
        let eps = 1e-9 * total.abs().max(1.0);
        let mut moves = 0;
        for lookahead in [false, true] {
            // A lookahead search gets `share` times an even share of the work left: one class
            // with many alternatives near the roots spent the whole budget on BERT-12 at
            // sequence 128, and no other class was tried. A sweep that improves nothing but cut
            // a search short is run again with four times the share.
            let mut share = CLASS_SHARE;
            loop {
                let mut order: Vec<u32> = (0..self.p.num_classes() as u32)
                    .filter(|c| {
                        self.refc[*c as usize] > 0 && self.red.class_nodes[*c as usize].len() > 1
                    })
                    .collect();
                order.sort_unstable_by_key(|c| std::cmp::Reverse(self.rank[*c as usize]));
                let mut improved = false;
                self.cut = false;
                let count = order.len() as u64;
                for (i, c) in order.into_iter().enumerate() {
                    if self.work > budget {
                        return moves;
                    }
                    let cap = if lookahead {
                        let left = budget - self.work;
                        (left / (count - i as u64)).saturating_mul(share)
                    } else {
                        u64::MAX
                    };
                    if self.refc[c as usize] > 0 && self.try_class(c, eps, lookahead, cap) {
                        improved = true;
                        moves += 1;
                    }
                }
                if !improved && !self.cut {
                    break;
                }
                if !improved {
                    share = share.saturating_mul(4);
                }
            }
        }
        moves
    }

    /// Makes the best improving acyclic move of reachable class `c`, if any.
    fn try_class(&mut self, c: u32, eps: f64, lookahead: bool, cap: u64) -> bool {
        self.lookahead_searches += usize::from(lookahead);
        let Some((_, n)) = self.best_move(c, eps, lookahead, cap) else {
            return false;
        };
        // Replay the winning trial (deterministic), then keep it.
        let old = self.choice[c as usize];
        let mut freed = 0.0;
        for &d in self.red.children.get(old) {
            freed += self.dec(d);
        }
        let base = self.cost(n) - self.cost(old) - freed;
        self.trial(c, n, base, eps, lookahead);
        self.log.clear();
        self.clog.clear();
        if !self.ranks_valid {
            self.rerank();
            self.ranks_valid = true;
        }
        true
    }

    /// The best improving acyclic alternative of reachable class `c` and its cost change; the
    /// state is left as it was. Alternatives are tried in node order until their trials have
    /// taken `cap` work steps (the trial that crosses it is judged, later ones not run).
    fn best_move(&mut self, c: u32, eps: f64, lookahead: bool, cap: u64) -> Option<(f64, u32)> {
        let start_work = self.work;
        let old = self.choice[c as usize];
        let start = self.marks();
        let valid = self.ranks_valid;
        let mut freed = 0.0;
        for &d in self.red.children.get(old) {
            freed += self.dec(d);
        }
        let at = Removed {
            c,
            old,
            freed,
            marks: self.marks(),
            valid,
        };
        let mut best: Option<(f64, u32)> = None;
        let red = self.red;
        let nodes = &red.class_nodes[c as usize];
        // Rounds of PARALLEL_ROUND alternatives, the work judged before each (the same rounds
        // in turn and in parallel, so both stop at the same alternative).
        if lookahead && nodes.len() > self.parallel_above {
            let alternatives: Vec<u32> = nodes.iter().copied().filter(|n| *n != old).collect();
            for round in alternatives.chunks(PARALLEL_ROUND) {
                if self.over_cap(start_work, cap) {
                    break;
                }
                // Every alternative is tried from the same state: the trials run on two copies
                // of it, and are judged below in node order exactly as in turn.
                for (n, delta) in self.trials_in_parallel(&at, round, eps) {
                    self.judge(&mut best, c, n, delta, eps);
                }
            }
        } else {
            for (k, &n) in nodes.iter().filter(|n| **n != old).enumerate() {
                if k % PARALLEL_ROUND == 0 && self.over_cap(start_work, cap) {
                    break;
                }
                let base = self.cost(n) - self.cost(old) - freed;
                // Without lookahead, adding edges never lowers the cost below `base`.
                if !lookahead && (base >= -eps || best.is_some_and(|(b, _)| base >= b)) {
                    continue;
                }
                let delta = self.trial_undone(&at, n, base, eps, lookahead);
                self.judge(&mut best, c, n, delta, eps);
            }
        }
        self.rollback(start);
        best
    }

    /// Whether the trials since `start_work` took more than `cap` steps (then the sweep was
    /// `cut`).
    fn over_cap(&mut self, start_work: u64, cap: u64) -> bool {
        let over = self.work - start_work > cap;
        self.cut |= over;
        over
    }

    /// Keeps `n` as `best` when its cost change `delta` improves on it and choosing `n` for `c`
    /// stays acyclic.
    fn judge(&mut self, best: &mut Option<(f64, u32)>, c: u32, n: u32, delta: f64, eps: f64) {
        if delta < -eps && best.is_none_or(|(b, _)| delta < b) && !self.reaches(n, c) {
            *best = Some((delta, n));
        }
    }

    /// [`Improver::trial`] of `n` for `at.c` from the state `at`, undone: its cost change.
    fn trial_undone(&mut self, at: &Removed, n: u32, base: f64, eps: f64, lookahead: bool) -> f64 {
        let delta = self.trial(at.c, n, base, eps, lookahead);
        self.rollback(at.marks);
        self.ranks_valid = at.valid;
        delta
    }

    /// The cost change of a lookahead trial of each of `alternatives` of class `at.c`, in
    /// order, each from the state `at`; the first half on `self`, the second on a copy, in
    /// parallel. The state is left at `at` and `work` counts both halves' steps, as if run in
    /// turn.
    fn trials_in_parallel(
        &mut self,
        at: &Removed,
        alternatives: &[u32],
        eps: f64,
    ) -> Vec<(u32, f64)> {
        let (left, right) = alternatives.split_at(alternatives.len() / 2);
        let mut other = self.clone();
        let work_before = other.work;
        let (mut a, b) = rayon::join(
            || self.trials(at, left, eps),
            || other.trials(at, right, eps),
        );
        self.work += other.work - work_before;
        a.extend(b);
        a
    }

    /// [`Improver::trials_in_parallel`]'s half: the lookahead trials of `nodes`, in order.
    fn trials(&mut self, at: &Removed, nodes: &[u32], eps: f64) -> Vec<(u32, f64)> {
        nodes
            .iter()
            .map(|&n| {
                let base = self.cost(n) - self.cost(at.old) - at.freed;
                (n, self.trial_undone(at, n, base, eps, true))
            })
            .collect()
    }

    /// With `c`'s old edges removed (`base`: the cost change so far), chooses `n` for `c`, and with
    /// `lookahead` makes the best move of each class that became reachable; returns the total cost
    /// change.
    fn trial(&mut self, c: u32, n: u32, base: f64, eps: f64, lookahead: bool) -> f64 {
        self.set_choice(c, n);
        let rc = self.rank[c as usize];
        if self
            .red
            .children
            .get(n)
            .iter()
            .any(|d| self.rank[*d as usize] > rc)
        {
            self.ranks_valid = false;
        }
        self.added.clear();
        self.collect = true;
        let mut delta = base;
        for &d in self.red.children.get(n) {
            delta += self.inc(d);
        }
        self.collect = false;
        if lookahead {
            let mut newly = std::mem::take(&mut self.added);
            newly.sort_unstable_by_key(|d| (std::cmp::Reverse(self.rank[*d as usize]), *d));
            for &d in &newly {
                if self.refc[d as usize] > 0 && self.red.class_nodes[d as usize].len() > 1 {
                    if let Some((dd, m)) = self.best_move(d, eps, false, u64::MAX) {
                        self.apply(d, m);
                        delta += dd;
                    }
                }
            }
            // Classes already paid for that have a node reading a newly paid class: re-choosing
            // them may share it (the sharing a single move cannot see).
            let mut siblings: Vec<u32> = Vec::new();
            for &d in &newly {
                if self.refc[d as usize] > 0 {
                    siblings.extend(
                        self.parents(d)
                            .iter()
                            .map(|m| self.p.nodes()[*m as usize].class.0),
                    );
                }
            }
            siblings.retain(|x| *x != c && self.refc[*x as usize] > 0);
            siblings.sort_unstable_by_key(|x| (std::cmp::Reverse(self.rank[*x as usize]), *x));
            siblings.dedup();
            for x in siblings {
                if self.refc[x as usize] > 0 {
                    if let Some((dx, m)) = self.best_move(x, eps, false, u64::MAX) {
                        self.apply(x, m);
                        delta += dx;
                    }
                }
            }
        }
        delta
    }

    /// Re-chooses `m` for reachable class `d` (logged).
    fn apply(&mut self, d: u32, m: u32) {
        let old = self.choice[d as usize];
        for &e in self.red.children.get(old) {
            self.dec(e);
        }
        self.set_choice(d, m);
        let rd = self.rank[d as usize];
        if self
            .red
            .children
            .get(m)
            .iter()
            .any(|e| self.rank[*e as usize] > rd)
        {
            self.ranks_valid = false;
        }
        for &e in self.red.children.get(m) {
            self.inc(e);
        }
    }

    /// The kept nodes that read class `d`.
    fn parents(&self, d: u32) -> &[u32] {
        let (start, list) = self.parents.as_ref();
        &list[start[d as usize] as usize..start[d as usize + 1] as usize]
    }

    /// Whether a child of node `n` reaches class `c` through the current choices. While the ranks
    /// are valid, classes ranked below `c` cannot reach it and are not searched.
    fn reaches(&mut self, n: u32, c: u32) -> bool {
        let floor = if self.ranks_valid {
            self.rank[c as usize]
        } else {
            0
        };
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.seen.iter_mut().for_each(|s| *s = 0);
            self.epoch = 1;
        }
        let mut stack: Vec<u32> = self
            .red
            .children
            .get(n)
            .iter()
            .copied()
            .filter(|d| self.rank[*d as usize] >= floor)
            .collect();
        while let Some(d) = stack.pop() {
            if d == c {
                return true;
            }
            if self.seen[d as usize] == self.epoch {
                continue;
            }
            self.seen[d as usize] = self.epoch;
            self.work += 1;
            for &e in self.red.children.get(self.choice[d as usize]) {
                if self.rank[e as usize] >= floor && self.seen[e as usize] != self.epoch {
                    stack.push(e);
                }
            }
        }
        false
    }
    /// Recomputes the ranks: a post-order of the (acyclic) choice graph of all chosen classes.
    fn rerank(&mut self) {
        let nc = self.p.num_classes();
        let mut done = vec![false; nc];
        let mut next = 0u32;
        for root in 0..nc as u32 {
            if self.choice[root as usize] == NONE || done[root as usize] {
                continue;
            }
            let mut stack: Vec<(u32, usize)> = vec![(root, 0)];
            done[root as usize] = true;
            while let Some(top) = stack.last_mut() {
                let (c, i) = *top;
                let ch = self.red.children.get(self.choice[c as usize]);
                if let Some(&d) = ch.get(i) {
                    top.1 += 1;
                    if !done[d as usize] {
                        done[d as usize] = true;
                        stack.push((d, 0));
                    }
                } else {
                    self.rank[c as usize] = next;
                    next += 1;
                    stack.pop();
                }
            }
        }
        self.work += nc as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::dag::fast::greedy_dag;
    use rand::{Rng, SeedableRng};

    /// A random acyclic problem: class `i`'s nodes read classes above `i`; class 0 is the root.
    fn random_problem(seed: u64) -> Problem {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut p = Problem::new();
        let n: usize = 40;
        let classes: Vec<_> = (0..n)
            .map(|i| p.add_class(format!("c{i}")).expect("class"))
            .collect();
        for i in 0..n {
            for k in 0..rng.gen_range(1..14) {
                // Mostly reads of a few shared classes near the bottom: trees price them once
                // per use, the DAG once, so the search has sharing to find.
                let reads: Vec<_> = (0..rng.gen_range(0..4))
                    .filter_map(|_| {
                        let lo = (i + 1).max(n.saturating_sub(8)).min(n);
                        let lo = if rng.gen_bool(0.5) { i + 1 } else { lo };
                        (lo < n).then(|| classes[rng.gen_range(lo..n)])
                    })
                    .collect();
                let cost = if reads.is_empty() {
                    f64::from(rng.gen_range(20u32..60))
                } else {
                    f64::from(rng.gen_range(1u32..8))
                };
                p.add_node(classes[i], format!("n{i}_{k}"), cost, &reads)
                    .expect("node");
            }
        }
        p.add_root(classes[0]).expect("root");
        p
    }

    /// The improvement within `budget` with trials of classes over `parallel_above`
    /// alternatives in parallel: its choices, work count and moves.
    fn improve(p: &Problem, parallel_above: usize, budget: u64) -> (Vec<u32>, u64, usize) {
        let red = Reduced::new(p, true);
        let (choice, rank) = greedy_dag(p, &red);
        let mut imp = Improver::new(p, &red, choice, rank);
        imp.parallel_above = parallel_above;
        let moves = imp.run(budget);
        let work = imp.work;
        (imp.into_choices(), work, moves)
    }

    #[test]
    fn parallel_lookahead_trials_choose_and_count_exactly_as_in_turn() {
        let mut moves = 0;
        for seed in 0..100 {
            let p = random_problem(seed);
            for budget in [u64::MAX, 2_000] {
                let parallel = improve(&p, 1, budget);
                assert_eq!(
                    parallel,
                    improve(&p, usize::MAX, budget),
                    "seed {seed}, budget {budget}"
                );
                moves += parallel.2;
            }
        }
        // The problems give the search something to do.
        assert!(moves >= 10, "{moves} moves");
    }

    /// A root with `k` alternatives, each reading its own chain of `len` classes of two
    /// nodes (a dear leaf, or a read of the next class; the last class's leaf is cheap): every
    /// lookahead trial of a root alternative pays a whole chain and searches each of its
    /// classes.
    fn heavy_root(k: usize, len: usize) -> Problem {
        let mut p = Problem::new();
        let root = p.add_class("root").expect("class");
        for a in 0..k {
            let chain: Vec<_> = (0..len)
                .map(|j| p.add_class(format!("c{a}_{j}")).expect("class"))
                .collect();
            for j in 0..len {
                let leaf = if j + 1 < len { 1000.0 } else { 5.0 };
                p.add_node(chain[j], format!("leaf{a}_{j}"), leaf, &[])
                    .expect("node");
                if j + 1 < len {
                    p.add_node(chain[j], format!("next{a}_{j}"), 1.0, &[chain[j + 1]])
                        .expect("node");
                }
            }
            let cost = 100.0 + a as f64;
            p.add_node(root, format!("r{a}"), cost, &[chain[0]])
                .expect("node");
        }
        p.add_root(root).expect("root");
        p
    }

    #[test]
    fn a_costly_class_leaves_the_others_their_lookahead_search() {
        // The plain sweep takes about 4 000 steps; trying every alternative of the root with
        // lookahead about 12 000 more (without a cap, that was the only lookahead search).
        const BUDGET: u64 = 8_000;
        let p = heavy_root(40, 20);
        let red = Reduced::new(&p, true);
        let (choice, rank) = greedy_dag(&p, &red);
        let mut imp = Improver::new(&p, &red, choice, rank);
        imp.run(BUDGET);
        // The root and its chosen chain's 20 classes.
        assert!(
            imp.lookahead_searches >= 21,
            "not every class was searched ({} searches, {} work)",
            imp.lookahead_searches,
            imp.work
        );
    }
}
