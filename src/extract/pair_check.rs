//! The attention pairs of a chosen cover, checked against how the cover runs.
//!
//! The pricer prices the first kernel of an attention pair (scores and softmax) at its share of
//! the fused kernel and the second (`P·V`) at the fused time less that share
//! ([`super::pricing::PairRole`]), so that a cover choosing both pays the one fused kernel. But the
//! fused kernel only runs when the first kernel's output is read by its second kernel alone and is
//! no graph output (`crate::cost::program::find_pairs`); otherwise both run by themselves, and a
//! first kernel priced at its share costs far more than the extractor paid (a d = 256 masked
//! attention: the un-normalized `exp(scores − max)` kernel priced at 21 µs, read by a row-sum
//! kernel too, ran by itself at 1578 µs).
//!
//! [`extract_checked`] is the lazy-constraint loop that closes this hole: extract, find the first
//! kernels the cover runs by themselves, reprice them at their own time, extract again; prices only
//! rise, so it ends (at most [`MAX_REPAIRS`] repricings), and the cover returned is the one of least
//! *true* price among those found (each priced as it runs: unfused first and second kernels at
//! their own times).

use super::dag::{dag_cost, DagExtractor, ExtractOptions, Extraction, NodeIx, Problem, Status};
use super::pricing::PairRole;
use crate::ir::egraph::TensorLang;
use rustc_hash::FxHashMap;

/// The most repricing rounds [`extract_checked`] runs after the first extraction (each reprices at
/// least one first kernel; a graph has few attention pairs whose first kernel is read twice).
pub const MAX_REPAIRS: usize = 8;

/// The pair roles of a problem's nodes, by node index.
#[derive(Debug, Default)]
pub struct PairTable {
    /// First kernels priced below their own price: node → own price.
    firsts: FxHashMap<NodeIx, f64>,
    /// Second kernels: node → (the first kernel node it pairs with, its own price).
    seconds: FxHashMap<NodeIx, (NodeIx, f64)>,
}

/// What a cover really costs compared to its price in the problem.
#[derive(Debug, Default)]
struct Audit {
    /// True price − problem price.
    delta: f64,
    /// First kernels the cover runs by themselves, with their own price.
    under: Vec<(NodeIx, f64)>,
}

impl PairTable {
    /// The table of `roles` (by problem node index; `nodes` are the problem's e-nodes).
    pub fn new(nodes: &[TensorLang], roles: &[Option<PairRole>]) -> PairTable {
        let index: FxHashMap<&TensorLang, NodeIx> = nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| matches!(n, TensorLang::Kernel(_)))
            .map(|(i, n)| (n, NodeIx(i as u32)))
            .collect();
        let mut table = PairTable::default();
        for (i, role) in roles.iter().enumerate() {
            let n = NodeIx(i as u32);
            match role {
                Some(PairRole::First { alone }) => {
                    table.firsts.insert(n, alone.scalar());
                }
                Some(PairRole::Second { first, alone }) => {
                    if let Some(f) = index.get(first) {
                        table.seconds.insert(n, (*f, alone.scalar()));
                    }
                }
                None => {}
            }
        }
        table
    }

    /// Whether the table has no pair (then every cover costs its problem price).
    pub fn is_empty(&self) -> bool {
        self.firsts.is_empty() && self.seconds.is_empty()
    }

    /// How `e` runs its pairs: a chosen first kernel is fused when its class is no root and its
    /// one reader among the chosen nodes is a second kernel paired with it.
    fn audit(&self, p: &Problem, e: &Extraction) -> Audit {
        let mut readers: FxHashMap<u32, Vec<NodeIx>> = FxHashMap::default();
        for (_, n) in e.chosen() {
            for c in p.node(n).distinct_children() {
                readers.entry(c.0).or_default().push(n);
            }
        }
        let fused = |f: NodeIx| {
            let c = p.node(f).class;
            e.choice(c) == Some(f)
                && !p.roots().contains(&c)
                && matches!(readers.get(&c.0).map(Vec::as_slice), Some([r])
                    if self.seconds.get(r).is_some_and(|(first, _)| *first == f))
        };
        let mut audit = Audit::default();
        for (_, n) in e.chosen() {
            let cost = p.node(n).cost;
            if let Some(alone) = self.firsts.get(&n) {
                if !fused(n) && *alone > cost {
                    audit.delta += alone - cost;
                    audit.under.push((n, *alone));
                }
            }
            if let Some((first, alone)) = self.seconds.get(&n) {
                if !fused(*first) {
                    audit.delta += alone - cost;
                }
            }
        }
        audit
    }
}

/// A cover of `problem` by `extractor` whose attention pairs are priced as they run (module
/// documentation): its extraction, true price and the number of first kernels repriced. When no first kernel had to be repriced it is
/// exactly the extractor's answer at its problem price; otherwise the least true price found,
/// marked [`Status::Heuristic`] without a lower bound (the repriced problem bounds no cover's true
/// price). `problem` keeps the repriced costs.
pub fn extract_checked(
    problem: &mut Problem,
    table: &PairTable,
    extractor: &dyn DagExtractor,
    opts: &ExtractOptions,
) -> Result<(Extraction, f64, usize), CheckError> {
    let (e, price, audit) = extract_once(problem, table, extractor, opts)?;
    if audit.under.is_empty() {
        return Ok((e, price, 0));
    }
    let mut best = (e, price + audit.delta);
    let mut under = audit.under;
    let mut repriced = 0;
    for _ in 0..MAX_REPAIRS {
        repriced += under.len();
        for (n, alone) in under.drain(..) {
            problem
                .set_cost(n, alone)
                .map_err(|v| CheckError::Invalid(v.to_string()))?;
        }
        let (e, price, audit) = extract_once(problem, table, extractor, opts)?;
        let truth = price + audit.delta;
        if truth < best.1 {
            best = (e, truth);
        }
        if audit.under.is_empty() {
            break;
        }
        under = audit.under;
    }
    let (mut e, truth) = best;
    e.status = Status::Heuristic;
    e.lower_bound = None;
    Ok((e, truth, repriced))
}

/// One extraction of `problem`, its problem price and its [`Audit`].
fn extract_once(
    problem: &Problem,
    table: &PairTable,
    extractor: &dyn DagExtractor,
    opts: &ExtractOptions,
) -> Result<(Extraction, f64, Audit), CheckError> {
    let e = extractor.extract(problem, opts)?;
    let price = dag_cost(problem, &e).map_err(|v| CheckError::Invalid(v.to_string()))?;
    let audit = if table.is_empty() {
        Audit::default()
    } else {
        table.audit(problem, &e)
    };
    Ok((e, price, audit))
}

/// Why [`extract_checked`] found no cover.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The extractor found no cover.
    #[error(transparent)]
    Extract(#[from] super::dag::ExtractError),
    /// An extraction fails validation, or a repricing was refused (a bug).
    #[error("{0}")]
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::dag::{ExactExtractor, FastExtractor};

    /// An attention whose scores `P` (a first kernel priced at its share, 21, by itself 1578)
    /// feed `P·V` (`o_pair`, paired with it: 100) and, when `sum_reads_p`, a row sum (12) too;
    /// the fused kernel reading the inputs directly (`o_fused`) costs 136. Returns the problem,
    /// the table and the nodes (`p`, `o_pair`, `o_fused`).
    fn attention(sum_reads_p: bool, p_is_root: bool) -> (Problem, PairTable, [NodeIx; 3]) {
        let mut pb = Problem::new();
        let [a, p, r, o] = ["a", "p", "r", "o"].map(|n| pb.add_class(n).expect("class"));
        pb.add_node(a, "input", 0.0, &[]).expect("node");
        let p1 = pb.add_node(p, "kernel", 21.0, &[a]).expect("node");
        let sum_of = if sum_reads_p { p } else { a };
        pb.add_node(r, "kernel", 12.0, &[sum_of]).expect("node");
        let o_pair = pb.add_node(o, "kernel", 100.0, &[p, r]).expect("node");
        let o_fused = pb.add_node(o, "kernel", 136.0, &[a]).expect("node");
        pb.add_root(o).expect("root");
        if p_is_root {
            pb.add_root(p).expect("root");
        }
        let mut table = PairTable::default();
        table.firsts.insert(p1, 1578.0);
        table.seconds.insert(o_pair, (p1, 100.0));
        (pb, table, [p1, o_pair, o_fused])
    }

    fn checked(pb: &mut Problem, table: &PairTable) -> (Extraction, f64) {
        let exact = ExactExtractor::default();
        let (e, price, _) =
            extract_checked(pb, table, &exact, &ExtractOptions::default()).expect("extracts");
        (e, price)
    }

    #[test]
    fn a_first_kernel_read_by_another_kernel_is_repriced_and_the_fused_cover_wins() {
        let (mut pb, table, [p1, o_pair, o_fused]) = attention(true, false);
        // Priced at its share the split cover looks cheapest: 21 + 12 + 100 = 133 < 136.
        let naive = ExactExtractor::default()
            .extract(&pb, &ExtractOptions::default())
            .expect("extracts");
        assert_eq!(naive.choice(pb.node(o_pair).class), Some(o_pair));
        assert_eq!(dag_cost(&pb, &naive), Ok(133.0));
        // As it runs: P by itself (another reader), 1578 + 12 + 100.
        let audit = table.audit(&pb, &naive);
        assert_eq!(audit.under, vec![(p1, 1578.0)]);
        assert_eq!(133.0 + audit.delta, 1690.0);
        let (e, price) = checked(&mut pb, &table);
        assert_eq!(e.choice(pb.node(o_fused).class), Some(o_fused));
        assert_eq!(price, 136.0);
        assert_eq!((e.status, e.lower_bound), (Status::Heuristic, None));
        assert_eq!(
            pb.node(p1).cost,
            1578.0,
            "the repricing stays in the problem"
        );
    }

    #[test]
    fn a_first_kernel_read_by_its_second_kernel_alone_keeps_its_share() {
        let (mut pb, table, [p1, o_pair, _]) = attention(false, false);
        let (e, price) = checked(&mut pb, &table);
        assert_eq!(e.choice(pb.node(o_pair).class), Some(o_pair));
        assert_eq!(price, 133.0);
        assert_eq!(e.status, Status::Optimal);
        assert_eq!(pb.node(p1).cost, 21.0);
    }

    #[test]
    fn a_first_kernel_that_is_a_graph_output_runs_by_itself() {
        let (mut pb, table, [p1, o_pair, _]) = attention(false, true);
        let (e, price) = checked(&mut pb, &table);
        // P is materialized (a root): 1578 by itself; then `P·V` reading it by itself (100)
        // and the row sum (12) beat the fused kernel recomputing it (136).
        assert_eq!(e.choice(pb.node(p1).class), Some(p1));
        assert_eq!(e.choice(pb.node(o_pair).class), Some(o_pair));
        assert_eq!(price, 1578.0 + 100.0 + 12.0);
        assert_eq!(pb.node(p1).cost, 1578.0);
    }

    #[test]
    fn the_fast_extractor_is_checked_alike() {
        let (mut pb, table, [_, _, o_fused]) = attention(true, false);
        let (e, price, repriced) = extract_checked(
            &mut pb,
            &table,
            &FastExtractor::default(),
            &ExtractOptions::default(),
        )
        .expect("extracts");
        assert_eq!(e.choice(pb.node(o_fused).class), Some(o_fused));
        assert_eq!((price, repriced), (136.0, 1));
    }
}
