//! Seeded random inputs for `dlc-egg run --random SEED`: deterministic per input (its own ChaCha8
//! stream), valid for `Gather` indices.

use super::{concrete_shape, tensor_info};
use crate::budget::try_collect;
use crate::diag::Diagnostic;
use crate::ir::dtype::DType;
use crate::ir::frontend::{Graph, Op, Operand};
use crate::tensor::{Tensor, TensorData};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// Seeded random values for the signature inputs named in `missing`. Each tensor has its own
/// ChaCha8 stream (seed `seed`, stream = its position in the signature), so adding an input
/// changes no other input's values. Floats are uniform in [-1, 1) rounded to the dtype, `bool`
/// is Bernoulli(0.5), `i32` is uniform in [0, 4) — except the `index` operand of a `Gather`,
/// uniform in [0, size of X along the gather axis).
pub fn random_inputs(
    graph: &Graph,
    seed: u64,
    bindings: &BTreeMap<String, i64>,
    missing: &[String],
) -> Result<BTreeMap<String, Tensor>, Diagnostic> {
    let bounds = gather_index_bounds(graph, bindings);
    let mut out = BTreeMap::new();
    for (position, input) in graph.signature.inputs.iter().enumerate() {
        let name = &input.tensor;
        if !missing.contains(name) {
            continue;
        }
        let info = tensor_info(graph, name)?;
        let shape = concrete_shape(name, info, bindings)?;
        let int_bound = bounds.get(name).copied().unwrap_or(4);
        let t = try_random_tensor(info.dtype, shape, seed, position as u64, int_bound)?;
        out.insert(name.clone(), t);
    }
    Ok(out)
}

/// For every `i32` tensor used as the `index` operand of a `Gather`, the size of `X` along the
/// gather axis (the smallest over several uses; at least 1).
pub fn gather_index_bounds(
    graph: &Graph,
    bindings: &BTreeMap<String, i64>,
) -> BTreeMap<String, i64> {
    let mut bounds: BTreeMap<String, i64> = BTreeMap::new();
    for node in &graph.nodes {
        let Op::Gather { axis } = &node.op else {
            continue;
        };
        let (Some(Operand::Tensor(x)), Some(Operand::Tensor(index))) =
            (node.inputs.first(), node.inputs.get(1))
        else {
            continue;
        };
        let size = graph
            .tensor(x)
            .and_then(|info| info.shape.get(*axis))
            .and_then(|d| d.eval_with(bindings).ok());
        if let Some(size) = size {
            let size = size.max(1);
            let entry = bounds.entry(index.clone()).or_insert(size);
            *entry = (*entry).min(size);
        }
    }
    bounds
}

/// One seeded random tensor (see [`random_inputs`]); `int_bound` is the exclusive upper bound
/// of `i32` values. For shapes a user chose, use [`try_random_tensor`] (this one aborts when
/// the buffer cannot be allocated, like any `Vec`).
pub fn random_tensor(
    dtype: DType,
    shape: Vec<usize>,
    seed: u64,
    stream: u64,
    int_bound: i64,
) -> Tensor {
    let n: usize = shape.iter().product();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    let data = match dtype {
        DType::Bool => TensorData::Bool((0..n).map(|_| rng.gen_bool(0.5)).collect()),
        DType::I32 => {
            let hi = int_bound.clamp(1, i32::MAX as i64) as i32;
            TensorData::I32((0..n).map(|_| rng.gen_range(0..hi)).collect())
        }
        _ => TensorData::F32(
            (0..n)
                .map(|_| dtype.round(rng.gen_range(-1.0f64..1.0)) as f32)
                .collect(),
        ),
    };
    Tensor { dtype, shape, data }
}

/// [`random_tensor`] with a fallible allocation: `E1407 AllocationFailed` when the buffer
/// cannot be had (the same values otherwise).
pub fn try_random_tensor(
    dtype: DType,
    shape: Vec<usize>,
    seed: u64,
    stream: u64,
    int_bound: i64,
) -> Result<Tensor, Diagnostic> {
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| crate::budget::allocation_failed("a random input", u128::MAX))?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    let what = "a random input";
    let data = match dtype {
        DType::Bool => TensorData::Bool(try_collect(n, (0..n).map(|_| rng.gen_bool(0.5)), what)?),
        DType::I32 => {
            let hi = int_bound.clamp(1, i32::MAX as i64) as i32;
            TensorData::I32(try_collect(n, (0..n).map(|_| rng.gen_range(0..hi)), what)?)
        }
        _ => TensorData::F32(try_collect(
            n,
            (0..n).map(|_| dtype.round(rng.gen_range(-1.0f64..1.0)) as f32),
            what,
        )?),
    };
    Ok(Tensor { dtype, shape, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_values_have_the_documented_ranges() {
        let f = random_tensor(DType::BF16, vec![4096], 1, 0, 4);
        assert!(f.to_f64().iter().all(|x| (-1.0..=1.0).contains(x)));
        assert!(f.to_f64().iter().all(|x| DType::BF16.round(*x) == *x));
        let i = random_tensor(DType::I32, vec![4096], 1, 0, 4);
        assert!(i.to_f64().iter().all(|x| (0.0..4.0).contains(x)));
        let b = random_tensor(DType::Bool, vec![4096], 1, 0, 4);
        let ones = b.to_f64().iter().filter(|x| **x == 1.0).count();
        assert!((1700..2400).contains(&ones), "{ones}");
    }

    #[test]
    fn streams_are_per_position() {
        // Adding an input before another must not change the other's values: the stream is the
        // signature position, so the same position and seed give the same values.
        let a = random_tensor(DType::F32, vec![8], 5, 2, 4);
        let b = random_tensor(DType::F32, vec![8], 5, 2, 4);
        let c = random_tensor(DType::F32, vec![8], 5, 3, 4);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
