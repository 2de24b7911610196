//! Concrete tensors: the values `run` reads and writes and the reference evaluator produces.
//! Row-major, dense. fp16/bf16 values are stored as `f32` holding exactly the rounded value.

use crate::dtype::DType;

mod constants;
pub use constants::{decode_float_le, Constant, Constants, Recipe};

/// Element storage.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    /// fp16, bf16 and fp32 tensors (values already rounded to the dtype).
    F32(Vec<f32>),
    /// `i32` elements.
    I32(Vec<i32>),
    /// `bool` elements.
    Bool(Vec<bool>),
}

/// A dense row-major tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<usize>,
    /// Elements, row-major.
    pub data: TensorData,
}

impl Tensor {
    /// A tensor from `f64` values, rounding each to `dtype`. Panics if `values.len()` is not the
    /// shape's element count (a programming error, never user input).
    pub fn from_f64(dtype: DType, shape: Vec<usize>, values: &[f64]) -> Tensor {
        assert_eq!(
            values.len(),
            shape.iter().product::<usize>(),
            "element count"
        );
        let data = match dtype {
            DType::I32 => TensorData::I32(values.iter().map(|v| dtype.round(*v) as i32).collect()),
            DType::Bool => TensorData::Bool(values.iter().map(|v| *v != 0.0).collect()),
            _ => TensorData::F32(values.iter().map(|v| dtype.round(*v) as f32).collect()),
        };
        Tensor { dtype, shape, data }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Element `i` (row-major) widened to `f64`.
    #[inline]
    pub fn get_f64(&self, i: usize) -> f64 {
        match &self.data {
            TensorData::F32(v) => v[i] as f64,
            TensorData::I32(v) => v[i] as f64,
            TensorData::Bool(v) => {
                if v[i] {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }

    /// All elements widened to `f64`.
    pub fn to_f64(&self) -> Vec<f64> {
        (0..self.numel()).map(|i| self.get_f64(i)).collect()
    }
}
