//! Constant-pool canonicalization at load time (seed 001 §ConstPool, issue 23): small program
//! constants with the same dtype, shape and value are one value.
//!
//! Exporters write one scalar per use: the real BERT export has a `Constant_N_output_0 = finfo.min`
//! per layer for the attention mask's `where(mask, 0, min)`, so every layer computed (and the
//! optimizer kept as a kernel of its own) the same `[B, 1, S, S]` additive mask. Lowering reads
//! every duplicate through its representative ([`equal_constants`]), so the twelve masks are one
//! term in the e-graph and one kernel. The graph's declared inputs do not change (a duplicate stays
//! in the signature, bound at run time as before, and is simply not read): the interface of the
//! compiled program is the graph's.
//!
//! Only constants the program cannot change are merged: a signature input with `storage:
//! const_pool`, `mutability: immutable` and a value in [`Graph::constants`] of at most
//! [`MAX_ELEMENTS`] elements: scalars and small index vectors. Weights and biases are left alone
//! even when equal (a randomly initialized export's zero biases and unit LayerNorm gains are all
//! equal; merging them would measure covers no trained model has).

use super::{Graph, Mutability, Storage};
use crate::tensor::{Tensor, TensorData};
use std::collections::BTreeMap;

/// Largest constant (in elements) compared with the others.
pub const MAX_ELEMENTS: usize = 16;

/// For every small immutable const-pool input whose dtype, shape and value equal an earlier
/// one's (in signature order), that earlier input's name: lowering reads the duplicate through it.
pub fn equal_constants(g: &Graph) -> BTreeMap<String, String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut alias = BTreeMap::new();
    for inp in &g.signature.inputs {
        if inp.storage != Storage::ConstPool || inp.mutability != Mutability::Immutable {
            continue;
        }
        let (Some(info), Some(c)) = (
            g.tensors.get(&inp.tensor),
            g.constants.constant(&inp.tensor),
        ) else {
            continue;
        };
        // Weights are not compared, so not decoded (an imported model's are read lazily).
        if c.numel() > MAX_ELEMENTS {
            continue;
        }
        let value = c.value();
        let same = seen.iter().find(|r| {
            g.tensors.get(**r) == Some(info) && g.constants.get(r).is_some_and(|v| same(v, value))
        });
        match same {
            Some(r) => {
                alias.insert(inp.tensor.clone(), (*r).to_string());
            }
            None => seen.push(&inp.tensor),
        }
    }
    alias
}

/// Bit-identical values (`-0` differs from `+0`, a NaN equals the same NaN).
fn same(a: &Tensor, b: &Tensor) -> bool {
    a.dtype == b.dtype
        && a.shape == b.shape
        && match (&a.data, &b.data) {
            (TensorData::F32(x), TensorData::F32(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
            }
            (x, y) => x == y,
        }
}
