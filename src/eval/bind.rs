//! Binding symbolic sizes: every node's shape and every [`Dim`] argument (SHRINK bounds) becomes a
//! concrete integer before evaluation starts.

use super::error::{bad_shape, dim_error, overflow, EvalResult};
use crate::ir::dim::Dim;
use crate::ir::tiny::{NodeId, Program, UOp};
use std::collections::BTreeMap;

/// Concrete sizes of a program.
#[derive(Clone, Debug, Default)]
pub struct Bound {
    /// Shape of every node.
    pub shapes: Vec<Vec<usize>>,
    /// `(lo, hi)` of every SHRINK node (empty for other nodes).
    pub shrink: Vec<(Vec<i64>, Vec<i64>)>,
    /// The symbol table the sizes were bound with (READ maps name symbols).
    pub syms: BTreeMap<String, i64>,
}

/// The symbol table used: the program's defaults overridden by `bindings`.
pub fn symbol_table(prog: &Program, bindings: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    let mut syms = prog.symbols.clone();
    syms.extend(bindings.iter().map(|(k, v)| (k.clone(), *v)));
    syms
}

/// Binds every node of `prog` with `syms`.
pub fn bind_program(prog: &Program, syms: &BTreeMap<String, i64>) -> EvalResult<Bound> {
    let mut b = Bound {
        syms: syms.clone(),
        ..Bound::default()
    };
    for n in &prog.nodes {
        b.shapes.push(bind_shape(n.id, &n.shape, syms)?);
        let args = match &n.uop {
            UOp::Shrink { lo, hi, .. } => (bind_dims(n.id, lo, syms)?, bind_dims(n.id, hi, syms)?),
            _ => (Vec::new(), Vec::new()),
        };
        b.shrink.push(args);
    }
    Ok(b)
}

/// One size.
pub fn bind_dim(node: NodeId, d: &Dim, syms: &BTreeMap<String, i64>) -> EvalResult<i64> {
    d.eval_with(syms).map_err(|e| dim_error(node, &e))
}

fn bind_dims(node: NodeId, ds: &[Dim], syms: &BTreeMap<String, i64>) -> EvalResult<Vec<i64>> {
    ds.iter().map(|d| bind_dim(node, d, syms)).collect()
}

/// A shape: non-negative sizes whose product fits `i64`.
pub fn bind_shape(
    node: NodeId,
    shape: &[Dim],
    syms: &BTreeMap<String, i64>,
) -> EvalResult<Vec<usize>> {
    let mut out = Vec::with_capacity(shape.len());
    let mut total: i64 = 1;
    for (axis, d) in shape.iter().enumerate() {
        let v = bind_dim(node, d, syms)?;
        if v < 0 {
            return Err(bad_shape(
                node,
                format!("axis {axis} of Tiny IR node {node} has size `{d}` = {v} < 0"),
            ));
        }
        total = total.checked_mul(v).ok_or_else(|| overflow(node))?;
        out.push(v as usize);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::dtype::DType;
    use crate::ir::tiny::Builder;

    #[test]
    fn binds_shapes_and_reports_unbound() {
        let mut b = Builder::new();
        let x = b
            .input("x", DType::F32, vec![Dim::sym("N"), Dim::int(3)])
            .unwrap();
        b.output("y", x);
        let p = b.finish();
        let syms: BTreeMap<String, i64> = [("N".to_string(), 5)].into_iter().collect();
        assert_eq!(bind_program(&p, &syms).unwrap().shapes[0], vec![5, 3]);
        let e = bind_program(&p, &BTreeMap::new()).unwrap_err();
        assert_eq!(e.first_code(), "E0201");
        let big: BTreeMap<String, i64> = [("N".to_string(), i64::MAX / 2)].into_iter().collect();
        assert_eq!(bind_program(&p, &big).unwrap_err().first_code(), "E0203");
        let neg: BTreeMap<String, i64> = [("N".to_string(), -1)].into_iter().collect();
        assert_eq!(bind_program(&p, &neg).unwrap_err().first_code(), "E0206");
    }
}
