//! The exact extractor: an integer linear program, solved with `microlp` (pure Rust: branch and
//! bound over a sparse simplex; no system solver library), with lazy cycle cuts.
//!
//! Model, over the classes reachable from the roots through the nodes `reduce` keeps
//! (live, not dominated — some optimum uses only those), one binary `x_n` per kept node:
//!
//! - minimize `Σ cost(n) · x_n`;
//! - a root class has exactly one chosen node, any other class at most one;
//! - a chosen node needs each of its distinct child classes: `x_n ≤ Σ_{m ∈ d} x_m`.
//!
//! That relaxes acyclicity. After each solve the chosen nodes are followed from the roots; each
//! cycle `c₁ → c₂ → … → c_k → c₁` found becomes the cut `Σ_i Σ_{n ∈ c_i, n has child c_{i+1}} x_n ≤
//! k − 1` (with at most one node per class, all `k` classes can only use such an edge at once along
//! a cycle, so no acyclic extraction violates it), and the model is solved again. The first
//! acyclic optimum is optimal for the real problem; the optimum of each relaxation is a lower
//! bound.
//!
//! The fast extractor's answer seeds every solve (a warm start) and is the incumbent: when the
//! time limit passes, the best valid solution found is returned marked [`Status::TimeLimit`].

use super::fast::FastExtractor;
use super::reduce::Reduced;
use super::{
    dag_cost, DagExtractor, ExtractError, ExtractOptions, Extraction, NodeIx, Problem, Status,
};
use microlp::{ComparisonOp, OptimizationDirection, SolveOptions, TerminationReason, Variable};
use std::time::{Duration, Instant};

/// The exact extractor (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct ExactExtractor {
    /// Seed the search with the fast extractor's answer (warm start and incumbent). Without it a
    /// time limit that passes before the first acyclic solution is an error.
    pub warm_start: bool,
    /// Upper bound on solve rounds (each adds the cuts of the cycles it found).
    pub max_rounds: usize,
}

impl Default for ExactExtractor {
    fn default() -> ExactExtractor {
        ExactExtractor {
            warm_start: true,
            max_rounds: 10_000,
        }
    }
}

impl DagExtractor for ExactExtractor {
    fn name(&self) -> &str {
        "exact"
    }

    fn extract(&self, p: &Problem, opts: &ExtractOptions) -> Result<Extraction, ExtractError> {
        let start = Instant::now();
        let deadline = opts.time_limit.map(|t| start + t);
        let red = Reduced::new(p, true);
        if let Some(r) = red.underivable_root(p) {
            return Err(ExtractError::NoFiniteSolution {
                root: p.class(r).name.clone(),
            });
        }
        let mut incumbent: Option<(f64, Extraction)> = None;
        if self.warm_start {
            let e = FastExtractor::default().extract(p, opts)?;
            let cost = dag_cost(p, &e).map_err(|v| ExtractError::Solver(v.to_string()))?;
            incumbent = Some((cost, e));
        }
        let model = std::sync::Arc::new(Model::new(p, &red));
        let mut cuts: Vec<Vec<u32>> = Vec::new();
        let mut lower_bound: Option<f64> = None;
        let timed_out = |incumbent: Option<(f64, Extraction)>, lb: Option<f64>| match incumbent {
            Some((cost, mut e)) => {
                e.status = if lb.is_some_and(|b| b >= cost - 1e-9 * cost.abs().max(1.0)) {
                    Status::Optimal
                } else {
                    Status::TimeLimit
                };
                e.lower_bound = lb;
                Ok(e)
            }
            None => Err(ExtractError::Timeout {
                seconds: opts.time_limit.unwrap_or_default().as_secs_f64(),
            }),
        };
        for _ in 0..self.max_rounds {
            let remaining = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(r) if r > Duration::ZERO => Some(r),
                    _ => return timed_out(incumbent, lower_bound),
                },
                None => None,
            };
            let hint = incumbent.as_ref().map(|(_, e)| model.hint(e));
            let Some(outcome) = solve_by_deadline(&model, &cuts, remaining, hint) else {
                return timed_out(incumbent, lower_bound);
            };
            let solved = match outcome {
                Ok(s) => s,
                Err(SolveFailure::NoSolution(b)) => {
                    return timed_out(incumbent, max_bound(lower_bound, b))
                }
                Err(SolveFailure::Infeasible) => {
                    // The relaxation of a problem whose roots are derivable is feasible; a solver
                    // claiming otherwise is numerical trouble.
                    return match incumbent {
                        Some(_) => timed_out(incumbent, lower_bound),
                        None => Err(ExtractError::Solver(
                            "the solver reported the relaxation infeasible".into(),
                        )),
                    };
                }
                Err(SolveFailure::Error(msg)) => {
                    return match incumbent {
                        Some(_) => timed_out(incumbent, lower_bound),
                        None => Err(ExtractError::Solver(msg)),
                    }
                }
            };
            lower_bound = max_bound(lower_bound, solved.bound);
            let cycles = model.cycles(&solved.chosen);
            if cycles.is_empty() {
                let e = model.extraction(p, &solved.chosen);
                let cost = dag_cost(p, &e).map_err(|v| ExtractError::Solver(v.to_string()))?;
                if incumbent.as_ref().is_none_or(|(c, _)| cost < *c) {
                    incumbent = Some((cost, e));
                }
                if solved.optimal {
                    let Some((_, mut e)) = incumbent else {
                        return Err(ExtractError::Solver(
                            "no incumbent after an optimal solve".into(),
                        ));
                    };
                    e.status = Status::Optimal;
                    e.lower_bound = lower_bound;
                    return Ok(e);
                }
                return timed_out(incumbent, lower_bound);
            }
            if !solved.optimal {
                return timed_out(incumbent, lower_bound);
            }
            cuts.extend(cycles);
        }
        timed_out(incumbent, lower_bound)
    }
}

/// One solve that returns by the deadline: `microlp` checks its time limit only between steps
/// and does not time building the program, so with a limit the solve runs on a worker thread
/// and is waited for at most `remaining`; past it the worker is abandoned (it finishes in the
/// background, its answer dropped) and `None` is returned, so `--timeout` and
/// `--extract-timeout` hold to within the thread start-up.
fn solve_by_deadline(
    model: &std::sync::Arc<Model>,
    cuts: &[Vec<u32>],
    remaining: Option<Duration>,
    hint: Option<Vec<u32>>,
) -> Option<Result<Solved, SolveFailure>> {
    let Some(rem) = remaining else {
        return Some(model.solve(cuts, None, hint));
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let (m, c) = (std::sync::Arc::clone(model), cuts.to_vec());
    let spawned = std::thread::Builder::new()
        .name("dlc-egg-ilp".into())
        .spawn(move || {
            let _ = tx.send(m.solve(&c, Some(rem), hint));
        });
    match spawned {
        Ok(_) => rx.recv_timeout(rem).ok(),
        // No thread to be had: solve here, with the solver's own (coarser) limit.
        Err(_) => Some(model.solve(cuts, Some(rem), None)),
    }
}

/// The larger of two optional lower bounds.
fn max_bound(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The ILP model's structure (everything but the cuts).
struct Model {
    /// Classes in the model, and each one's position in it (`u32::MAX` outside).
    classes: Vec<u32>,
    pos: Vec<u32>,
    /// Per model class, its variables' nodes.
    nodes: Vec<Vec<u32>>,
    /// Per node, its variable index (`u32::MAX` outside).
    var: Vec<u32>,
    costs: Vec<f64>,
    roots: Vec<u32>,
    /// Per variable, its node's distinct child classes (problem indices).
    children: Vec<Vec<u32>>,
}

/// One solve's answer.
struct Solved {
    /// Per model class, the chosen node (`u32::MAX` for none).
    chosen: Vec<u32>,
    /// A proven lower bound of this relaxation (so of the real problem), when the solver has one.
    bound: Option<f64>,
    optimal: bool,
}

enum SolveFailure {
    /// The time limit passed with no solution (the solver's bound, if any).
    NoSolution(Option<f64>),
    Infeasible,
    Error(String),
}

impl Model {
    fn new(p: &Problem, red: &Reduced) -> Model {
        let nc = p.num_classes();
        let mut pos = vec![u32::MAX; nc];
        let mut classes = Vec::new();
        let mut stack: Vec<u32> = p.roots().iter().map(|r| r.0).collect();
        while let Some(c) = stack.pop() {
            if pos[c as usize] != u32::MAX {
                continue;
            }
            pos[c as usize] = classes.len() as u32;
            classes.push(c);
            for &n in &red.class_nodes[c as usize] {
                stack.extend_from_slice(red.children.get(n));
            }
        }
        // Deterministic numbering: by class index.
        classes.sort_unstable();
        for (i, c) in classes.iter().enumerate() {
            pos[*c as usize] = i as u32;
        }
        let mut var = vec![u32::MAX; p.num_nodes()];
        let mut nodes = Vec::with_capacity(classes.len());
        let mut costs = Vec::new();
        let mut children = Vec::new();
        for &c in &classes {
            let ns = red.class_nodes[c as usize].clone();
            for &n in &ns {
                var[n as usize] = costs.len() as u32;
                costs.push(p.nodes()[n as usize].cost);
                children.push(red.children.get(n).to_vec());
            }
            nodes.push(ns);
        }
        let roots = p.roots().iter().map(|r| pos[r.ix()]).collect();
        Model {
            classes,
            pos,
            nodes,
            var,
            costs,
            roots,
            children,
        }
    }

    /// The warm-start values of an extraction (its reachable choices 1, the rest 0).
    fn hint(&self, e: &Extraction) -> Vec<u32> {
        self.classes
            .iter()
            .map(|c| e.choices[*c as usize].map_or(u32::MAX, |n| n.0))
            .collect()
    }

    fn solve(
        &self,
        cuts: &[Vec<u32>],
        time_limit: Option<Duration>,
        hint: Option<Vec<u32>>,
    ) -> Result<Solved, SolveFailure> {
        let mut lp = microlp::Problem::new(OptimizationDirection::Minimize);
        let vars: Vec<Variable> = self.costs.iter().map(|c| lp.add_binary_var(*c)).collect();
        let v = |n: u32| vars[self.var[n as usize] as usize];
        for (i, ns) in self.nodes.iter().enumerate() {
            let row: Vec<(Variable, f64)> = ns.iter().map(|n| (v(*n), 1.0)).collect();
            let op = if self.roots.contains(&(i as u32)) {
                ComparisonOp::Eq
            } else {
                ComparisonOp::Le
            };
            lp.add_constraint(row.as_slice(), op, 1.0);
        }
        for ns in &self.nodes {
            for &n in ns {
                for &d in &self.children[self.var[n as usize] as usize] {
                    let mut row: Vec<(Variable, f64)> = vec![(v(n), 1.0)];
                    row.extend(
                        self.nodes[self.pos[d as usize] as usize]
                            .iter()
                            .map(|m| (v(*m), -1.0)),
                    );
                    lp.add_constraint(row.as_slice(), ComparisonOp::Le, 0.0);
                }
            }
        }
        for cut in cuts {
            let (nodes, rhs) = cut.split_at(cut.len() - 1);
            let row: Vec<(Variable, f64)> = nodes.iter().map(|n| (v(*n), 1.0)).collect();
            lp.add_constraint(row.as_slice(), ComparisonOp::Le, rhs[0] as f64);
        }
        let mut opts = SolveOptions::default();
        opts.time_limit = time_limit;
        if let Some(h) = hint {
            let mut values: Vec<(Variable, f64)> = vars.iter().map(|x| (*x, 0.0)).collect();
            for n in h.into_iter().filter(|n| *n != u32::MAX) {
                values[self.var[n as usize] as usize].1 = 1.0;
            }
            opts.warm_start = Some(values);
        }
        let outcome = match lp.solve_with(opts) {
            Ok(o) => o,
            Err(microlp::Error::Infeasible) => return Err(SolveFailure::Infeasible),
            Err(e) => return Err(SolveFailure::Error(e.to_string())),
        };
        let optimal = outcome.termination_reason() == TerminationReason::ProvenOptimal;
        let bound = outcome.stats().best_bound;
        let Some(sol) = outcome.solution() else {
            return Err(SolveFailure::NoSolution(bound));
        };
        let chosen = self
            .nodes
            .iter()
            .map(|ns| {
                ns.iter()
                    .copied()
                    .find(|n| sol.var_value(v(*n)) > 0.5)
                    .unwrap_or(u32::MAX)
            })
            .collect();
        Ok(Solved {
            chosen,
            bound: if optimal {
                Some(sol.objective())
            } else {
                bound
            },
            optimal,
        })
    }

    /// Cuts for the cycles among the classes reachable from the roots through `chosen` (one per
    /// back edge of a depth-first search); each cut is its nodes followed by its right-hand side.
    fn cycles(&self, chosen: &[u32]) -> Vec<Vec<u32>> {
        let k = self.classes.len();
        let mut colour = vec![0u8; k];
        let mut cuts = Vec::new();
        for &r in &self.roots {
            if colour[r as usize] != 0 {
                continue;
            }
            let mut stack: Vec<(u32, usize)> = vec![(r, 0)];
            colour[r as usize] = 1;
            while let Some(top) = stack.last_mut() {
                let (c, i) = *top;
                let n = chosen[c as usize];
                let ch: &[u32] = if n == u32::MAX {
                    &[]
                } else {
                    &self.children[self.var[n as usize] as usize]
                };
                if let Some(&d) = ch.get(i) {
                    top.1 += 1;
                    let dm = self.pos[d as usize];
                    match colour[dm as usize] {
                        0 => {
                            colour[dm as usize] = 1;
                            stack.push((dm, 0));
                        }
                        1 => {
                            let at = stack.iter().position(|(x, _)| *x == dm).unwrap_or(0);
                            let cycle: Vec<u32> = stack[at..].iter().map(|(x, _)| *x).collect();
                            cuts.push(self.cut(&cycle));
                        }
                        _ => {}
                    }
                } else {
                    colour[c as usize] = 2;
                    stack.pop();
                }
            }
        }
        cuts
    }

    /// The cut of the cycle of model classes `cycle` (each one's successor is the next, the last's
    /// the first).
    fn cut(&self, cycle: &[u32]) -> Vec<u32> {
        let mut cut = Vec::new();
        for (i, &c) in cycle.iter().enumerate() {
            let next = self.classes[cycle[(i + 1) % cycle.len()] as usize];
            for &n in &self.nodes[c as usize] {
                if self.children[self.var[n as usize] as usize]
                    .binary_search(&next)
                    .is_ok()
                {
                    cut.push(n);
                }
            }
        }
        cut.push(cycle.len() as u32 - 1);
        cut
    }

    /// The extraction of an acyclic solution.
    fn extraction(&self, p: &Problem, chosen: &[u32]) -> Extraction {
        let mut full = vec![None; p.num_classes()];
        for (i, n) in chosen.iter().enumerate() {
            if *n != u32::MAX {
                full[self.classes[i] as usize] = Some(NodeIx(*n));
            }
        }
        Extraction::from_choices(p, &full, Status::Optimal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_two_cycle_gets_one_cut_over_its_edges() {
        // a: f(b) or leaf; b: g(a) or leaf.
        let mut p = Problem::new();
        let [a, b] = ["a", "b"].map(|n| p.add_class(n).expect("class"));
        p.add_node(a, "f", 0.0, &[b]).expect("node");
        p.add_node(a, "a-leaf", 3.0, &[]).expect("node");
        p.add_node(b, "g", 0.0, &[a]).expect("node");
        p.add_node(b, "b-leaf", 3.0, &[]).expect("node");
        p.add_root(a).expect("root");
        let red = Reduced::new(&p, true);
        let model = Model::new(&p, &red);
        // a = f(b), b = g(a): a cycle; the cut is x_f + x_g <= 1.
        let cuts = model.cycles(&[0, 2]);
        assert_eq!(cuts, vec![vec![0, 2, 1]]);
        assert!(model.cycles(&[0, 3]).is_empty());
        let e = ExactExtractor::default()
            .extract(&p, &ExtractOptions::default())
            .expect("ok");
        assert_eq!(e.status, Status::Optimal);
        assert_eq!(dag_cost(&p, &e), Ok(3.0));
        assert_eq!(e.lower_bound, Some(3.0));
    }

    #[test]
    fn bounds_combine() {
        assert_eq!(max_bound(None, Some(1.0)), Some(1.0));
        assert_eq!(max_bound(Some(2.0), Some(1.0)), Some(2.0));
        assert_eq!(max_bound(None, None), None);
    }
}
