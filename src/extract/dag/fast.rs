//! The fast extractor, for large e-graphs: a greedy DAG fixpoint, then local improvement.
//!
//! **Phase 1 (greedy DAG, as extraction-gym's `faster-greedy-dag`).** A candidate node's cost is
//! the DAG cost of the union of its children's chosen term graphs plus its own cost. Classes are
//! finalized in order of that cost (Knuth's generalization of Dijkstra): a node becomes a
//! candidate when all its child classes are final, and the cheapest candidate finalizes its class.
//! Because the cost of a union is at least the cost of each part, no later candidate could be
//! cheaper for a class already final, so this is the fixpoint of the bottom-up iteration, reached
//! with one evaluation per node; and because a node only uses final classes, the choices are
//! acyclic by construction. A candidate whose children's union contains its own class is skipped.
//!
//! **Phase 2 (`improve`).** Re-choose one class's node when that lowers the DAG cost of
//! the whole extraction given every other choice; repeat to a fixpoint (or the work budget),
//! keeping the choices acyclic.
//!
//! **Bounded work.** The term-graph sets are kept only up to [`SHARING_WINDOW`] classes: a class
//! whose set would be larger keeps its DAG cost alone, and a candidate reading such a class is
//! priced by the sum of its distinct children's DAG costs (an upper bound: sharing deeper than
//! the window is not credited in phase 1; phase 2 sees the whole extraction). Each evaluation
//! then costs at most (children × window), so phase 1 is linear in the e-graph size times the
//! window (plus the heap's log factor) instead of quadratic on long chains; [`greedy_work`]
//! counts its steps.
//!
//! Deterministic: ties are broken by node index.

use super::improve::Improver;
use super::reduce::Reduced;
use super::{DagExtractor, ExtractError, ExtractOptions, Extraction, Problem, Status};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The fast extractor (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct FastExtractor {
    /// Run phase 2 (local improvement).
    pub improve: bool,
    /// Phase 2's work budget, in units of `work_per_node × number of e-nodes` cascade steps
    /// (bounds its time on large e-graphs deterministically).
    pub work_per_node: u64,
    /// The least work budget of phase 2, whatever the e-graph's size: a small e-graph's search
    /// costs little, and ResNet-18's (6 K e-nodes, 2.4 M steps at 400 per node) ended short
    /// of a cover it finds with twice that (545.540 against 541.512 µs predicted).
    pub min_work: u64,
}

impl Default for FastExtractor {
    fn default() -> FastExtractor {
        FastExtractor {
            improve: true,
            work_per_node: 400,
            min_work: MIN_WORK,
        }
    }
}

impl DagExtractor for FastExtractor {
    fn name(&self) -> &str {
        "fast"
    }

    fn extract(&self, p: &Problem, _opts: &ExtractOptions) -> Result<Extraction, ExtractError> {
        let red = Reduced::new(p, true);
        if let Some(r) = red.underivable_root(p) {
            return Err(ExtractError::NoFiniteSolution {
                root: p.class(r).name.clone(),
            });
        }
        let (choice, order) = greedy_dag(p, &red);
        let choice = if self.improve {
            let budget = self
                .work_per_node
                .saturating_mul(p.num_nodes() as u64 + 1)
                .max(self.min_work);
            let mut imp = Improver::new(p, &red, choice, order);
            imp.run(budget);
            imp.into_choices()
        } else {
            choice
        };
        let choices: Vec<_> = choice
            .iter()
            .map(|n| (*n != NONE).then_some(super::NodeIx(*n)))
            .collect();
        Ok(Extraction::from_choices(p, &choices, Status::Heuristic))
    }
}

/// No node.
pub(crate) const NONE: u32 = u32::MAX;

/// [`FastExtractor::min_work`]'s default: 8 M cascade steps (ResNet-18: well under a second of
/// extraction; e-graphs above 20 K e-nodes, BERT-12's, have more at 400 per node).
pub const MIN_WORK: u64 = 8_000_000;

/// The largest term-graph set phase 1 keeps per class (see the module documentation).
pub const SHARING_WINDOW: usize = 512;

/// The number of set-element steps phase 1 takes on `p` (evaluations and set builds; a
/// complexity measure for tests: at most (children × [`SHARING_WINDOW`]) per node).
pub fn greedy_work(p: &Problem) -> u64 {
    let red = Reduced::new(p, true);
    greedy_dag_counted(p, &red).2
}

/// Phase 1: the greedy DAG choice of every derivable class (`NONE` elsewhere) and each class's
/// finalization rank (a topological order of the choices: children rank lower).
pub(crate) fn greedy_dag(p: &Problem, red: &Reduced) -> (Vec<u32>, Vec<u32>) {
    let (choice, rank, _) = greedy_dag_counted(p, red);
    (choice, rank)
}

/// [`greedy_dag`] and its work count.
fn greedy_dag_counted(p: &Problem, red: &Reduced) -> (Vec<u32>, Vec<u32>, u64) {
    let nc = p.num_classes();
    let nn = p.num_nodes();
    let nodes = p.nodes();
    let ch = &red.children;
    // parents[d]: kept nodes with d among their children.
    let (start, parents) = red.parents(p);
    // consumers[d]: kept nodes of not-yet-final classes that read d; d's set is freed at 0.
    let mut consumers: Vec<u32> = (0..nc).map(|d| start[d + 1] - start[d]).collect();
    let mut pending: Vec<u32> = (0..nn).map(|n| ch.get(n as u32).len() as u32).collect();
    let mut choice = vec![NONE; nc];
    let mut rank = vec![NONE; nc];
    let mut own = vec![0.0f64; nc];
    let mut sets: Vec<Vec<u32>> = vec![Vec::new(); nc];
    // dag[c]: the DAG cost of c's chosen term graph; wide[c]: its set was over the window.
    let mut dag = vec![0.0f64; nc];
    let mut wide = vec![false; nc];
    let mut mark = vec![0u32; nc];
    let mut epoch = 0u32;
    let mut work = 0u64;
    let mut heap: BinaryHeap<Reverse<(Key, u32)>> = BinaryHeap::new();

    // Whether node n's children's sets are all kept and small enough to be united.
    let within_window = |n: u32, sets: &[Vec<u32>], wide: &[bool]| -> bool {
        let mut size = 0usize;
        for &d in ch.get(n) {
            if wide[d as usize] {
                return false;
            }
            size += sets[d as usize].len();
        }
        size < SHARING_WINDOW
    };
    // The DAG cost of node n over final classes, or None when the union holds n's class.
    let mut evaluate = |n: u32,
                        sets: &[Vec<u32>],
                        own: &[f64],
                        dag: &[f64],
                        wide: &[bool],
                        mark: &mut [u32],
                        work: &mut u64|
     -> Option<f64> {
        epoch = epoch.wrapping_add(1);
        if epoch == 0 {
            mark.iter_mut().for_each(|m| *m = 0);
            epoch = 1;
        }
        let c = nodes[n as usize].class.0;
        let mut total = nodes[n as usize].cost;
        if !within_window(n, sets, wide) {
            // Distinct children's DAG costs, summed: an upper bound of the union's.
            for &d in ch.get(n) {
                *work += 1;
                if mark[d as usize] != epoch {
                    mark[d as usize] = epoch;
                    total += dag[d as usize];
                }
            }
            return Some(total);
        }
        for &d in ch.get(n) {
            for &x in &sets[d as usize] {
                *work += 1;
                if mark[x as usize] != epoch {
                    if x == c {
                        return None;
                    }
                    mark[x as usize] = epoch;
                    total += own[x as usize];
                }
            }
        }
        Some(total)
    };

    for n in 0..nn as u32 {
        if red.keep[n as usize] && pending[n as usize] == 0 {
            let cost = nodes[n as usize].cost;
            heap.push(Reverse((Key(cost), n)));
        }
    }
    let mut next_rank = 0u32;
    while let Some(Reverse((Key(key), n))) = heap.pop() {
        let c = nodes[n as usize].class.ix();
        if choice[c] != NONE {
            continue;
        }
        choice[c] = n;
        rank[c] = next_rank;
        next_rank += 1;
        own[c] = nodes[n as usize].cost;
        dag[c] = key;
        if within_window(n, &sets, &wide) {
            let mut set: Vec<u32> = ch
                .get(n)
                .iter()
                .flat_map(|d| sets[*d as usize].iter().copied())
                .collect();
            work += set.len() as u64 + 1;
            set.push(c as u32);
            set.sort_unstable();
            set.dedup();
            sets[c] = set;
        } else {
            wide[c] = true;
        }
        // Nodes of c no longer need their children's sets.
        for &m in &red.class_nodes[c] {
            for &d in ch.get(m) {
                consumers[d as usize] -= 1;
                if consumers[d as usize] == 0 {
                    sets[d as usize] = Vec::new();
                }
            }
        }
        for &m in &parents[start[c] as usize..start[c + 1] as usize] {
            pending[m as usize] -= 1;
            let mc = nodes[m as usize].class.ix();
            if pending[m as usize] == 0 && choice[mc] == NONE {
                let cost = evaluate(m, &sets, &own, &dag, &wide, &mut mark, &mut work);
                if let Some(cost) = cost {
                    heap.push(Reverse((Key(cost), m)));
                }
            }
        }
        if consumers[c] == 0 {
            sets[c] = Vec::new();
        }
    }
    (choice, rank, work)
}

/// A cost ordered by `f64::total_cmp` (costs are never NaN).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Key(f64);

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::dag::{dag_cost, ClassIx};

    /// `r = f(a, b)`; `a`: `g(s)` (1) or a leaf (5); `b`: `h(s)` (1) or a leaf (5); `s`: leaf (7).
    fn shared() -> Problem {
        let mut p = Problem::new();
        let [r, a, b, s] = ["r", "a", "b", "s"].map(|n| p.add_class(n).expect("class"));
        p.add_node(r, "f", 1.0, &[a, b]).expect("node");
        p.add_node(a, "g", 1.0, &[s]).expect("node");
        p.add_node(a, "a-leaf", 5.0, &[]).expect("node");
        p.add_node(b, "h", 1.0, &[s]).expect("node");
        p.add_node(b, "b-leaf", 5.0, &[]).expect("node");
        p.add_node(s, "s-leaf", 7.0, &[]).expect("node");
        p.add_root(r).expect("root");
        p
    }

    #[test]
    fn greedy_ranks_order_the_choices() {
        let p = shared();
        let red = Reduced::new(&p, true);
        let (choice, rank) = greedy_dag(&p, &red);
        for (c, n) in choice.iter().enumerate() {
            assert_ne!(*n, NONE, "class {c} is derivable");
            for d in red.children.get(*n) {
                assert!(rank[*d as usize] < rank[c]);
            }
        }
        // Greedy alone takes both leaves: sharing `s` needs two classes to change together.
        let plain = FastExtractor {
            improve: false,
            ..FastExtractor::default()
        };
        let e = plain.extract(&p, &ExtractOptions::default()).expect("ok");
        assert_eq!(dag_cost(&p, &e), Ok(11.0));
        // Lookahead finds the shared term.
        let e = FastExtractor::default()
            .extract(&p, &ExtractOptions::default())
            .expect("ok");
        assert_eq!(dag_cost(&p, &e), Ok(10.0));
        assert_eq!(e.choice(ClassIx(3)), Some(crate::extract::dag::NodeIx(5)));
    }

    #[test]
    fn greedy_skips_candidates_whose_union_holds_their_class() {
        // r: f(x) (1); x: g(y) (1) or leaf (10); y: h(x) (1) or leaf (1). g(y) with y = h(x)
        // would be a cycle; y's leaf makes g(y) fine.
        let mut p = Problem::new();
        let [r, x, y] = ["r", "x", "y"].map(|n| p.add_class(n).expect("class"));
        p.add_node(r, "f", 1.0, &[x]).expect("node");
        p.add_node(x, "g", 1.0, &[y]).expect("node");
        p.add_node(x, "x-leaf", 10.0, &[]).expect("node");
        p.add_node(y, "h", 1.0, &[x]).expect("node");
        p.add_node(y, "y-leaf", 1.0, &[]).expect("node");
        p.add_root(r).expect("root");
        let e = FastExtractor::default()
            .extract(&p, &ExtractOptions::default())
            .expect("ok");
        assert_eq!(dag_cost(&p, &e), Ok(3.0));
    }
}
