//! SCAN in a kernel body: one `scan` let (`region` module doc) at the kernel's own iteration
//! points. The scan is a kernel boundary on its input side except for an elementwise /
//! movement prologue (its operand's ops, evaluated inline at every window point: casts, a
//! scale, reads through views), and fuses an elementwise epilogue (consumers at the same
//! point read the scan let). Rejected, so that the fusion phase keeps them in other kernels:
//! a scan at a point that is not one per iteration (under a reduction, or read shifted), at two
//! environments, over an axis that is not an iter, and an operand holding a reduction, a scan,
//! or a shared value (a let: the scan template evaluates its operand as one expression).

use super::ix::Ix;
use super::{Cx, SynthError, R};
use crate::ir::dtype::DType;
use crate::ir::egraph::book::{Operand, TinyParts};
use crate::ir::region::verify::children;
use crate::ir::region::{Expr, Scan};
use crate::ir::tiny::ScanSpec;

fn has_let(e: &Expr) -> bool {
    matches!(e, Expr::Let(_)) || children(e).into_iter().any(has_let)
}

impl Cx<'_> {
    /// The scan let of node `id` (a SCAN of `spec` accumulating in `acc`) at `env`.
    pub(super) fn scan(
        &mut self,
        id: usize,
        parts: &TinyParts,
        env: &[Ix],
        spec: ScanSpec,
        acc: DType,
    ) -> R<super::Val> {
        let unsupported = |what: &str| SynthError::Unsupported {
            node: id,
            op: "SCAN",
            what: what.to_string(),
        };
        if !self.aligned(env) || self.scope.len() != self.iters.len() {
            return Err(unsupported(
                "a scan not at one point per iteration (under a reduction or read shifted)",
            ));
        }
        let axis = env
            .get(spec.axis)
            .and_then(Ix::as_var)
            .map(str::to_string)
            .ok_or_else(|| unsupported("a scan whose axis is not an iteration axis"))?;
        let mut seen = std::collections::BTreeSet::new();
        if !env.iter().filter_map(Ix::as_var).all(|v| seen.insert(v)) {
            return Err(unsupported("a scan read along a diagonal"));
        }
        if let Some(v) = self.evaluated_once(id, env)? {
            return Ok(v);
        }
        let Some(Operand::Tensor(x)) = parts.operands.first() else {
            return Err(SynthError::Typing(format!(
                "node {id}: SCAN without operand"
            )));
        };
        let x = usize::from(*x);
        if self.has_reduce[x] {
            return Err(unsupported("a reduction or scan inside a scan's operand"));
        }
        let lets_before = self.lets.len();
        let body = self.eval(x, env)?;
        if self.lets.len() != lets_before || has_let(&body.e) {
            return Err(unsupported(
                "a shared value (a let) inside a scan's operand",
            ));
        }
        let mut free = body.free;
        free.insert(axis.clone());
        let e = Expr::Scan(Box::new(Scan {
            op: spec.op,
            axis,
            exclusive: spec.exclusive,
            reverse: spec.reverse,
            dtype: acc,
            body: body.e,
        }));
        let name = self.fresh_acc();
        self.push_let(&name, e, free);
        self.keyed.insert((id, env.to_vec()), name.clone());
        Ok(self.let_ref(&name))
    }
}
