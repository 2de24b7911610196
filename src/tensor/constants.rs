//! Values of a graph's constants ([`crate::ir::frontend::Graph::constants`]), decoded on demand
//! (issue 23): `optimize` reads the dtype and shape of every weight but never its values, so an
//! imported model's initializers stay undecoded bytes ([`Constant::lazy`]) until something asks
//! for them (`run`, `import`'s sidecar, the constant pool's comparison of small constants).
//!
//! A [`Constant`] is a cheap handle (shared): a consumer can keep one and build a derived
//! constant from it (e.g. weights concatenated once at load time) as another lazy constant whose
//! recipe asks the handles it captured for their values.

use super::{Tensor, TensorData};
use crate::dtype::DType;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// How a lazy constant's value is computed (decoding an initializer's bytes, or deriving it from
/// other constants). Called at most once per [`Constant`]; must return a tensor of the declared
/// dtype and shape.
pub type Recipe = dyn Fn() -> Tensor + Send + Sync;

struct Inner {
    dtype: DType,
    shape: Vec<usize>,
    value: OnceLock<Tensor>,
    recipe: Option<Box<Recipe>>,
}

/// One constant: its dtype and shape, and its value, computed at most once when first asked for.
#[derive(Clone)]
pub struct Constant(Arc<Inner>);

impl Constant {
    /// A constant whose value is known.
    pub fn ready(t: Tensor) -> Constant {
        Constant(Arc::new(Inner {
            dtype: t.dtype,
            shape: t.shape.clone(),
            value: OnceLock::from(t),
            recipe: None,
        }))
    }

    /// A constant of `dtype` and `shape` whose value `recipe` computes when first asked for.
    pub fn lazy(
        dtype: DType,
        shape: Vec<usize>,
        recipe: impl Fn() -> Tensor + Send + Sync + 'static,
    ) -> Constant {
        Constant(Arc::new(Inner {
            dtype,
            shape,
            value: OnceLock::new(),
            recipe: Some(Box::new(recipe)),
        }))
    }

    /// The element type (known without computing the value).
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// The shape (known without computing the value).
    pub fn shape(&self) -> &[usize] {
        &self.0.shape
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.0.shape.iter().product()
    }

    /// Whether the value has been computed (or was given).
    pub fn is_computed(&self) -> bool {
        self.0.value.get().is_some()
    }

    /// The value, computed on the first call and kept.
    pub fn value(&self) -> &Tensor {
        self.0.value.get_or_init(|| self.compute())
    }

    /// A copy of the value; computed without keeping it when it was not computed yet (`run`
    /// copies every weight into its bindings once: no second copy stays behind).
    pub fn to_tensor(&self) -> Tensor {
        match self.0.value.get() {
            Some(t) => t.clone(),
            None => self.compute(),
        }
    }

    fn compute(&self) -> Tensor {
        let recipe = self.0.recipe.as_ref().unwrap_or_else(|| {
            unreachable!("a constant without a recipe is created with its value")
        });
        let t = recipe();
        assert!(
            t.dtype == self.0.dtype && t.shape == self.0.shape,
            "a constant's recipe returned {:?} {:?} for {:?} {:?}",
            t.dtype,
            t.shape,
            self.0.dtype,
            self.0.shape
        );
        t
    }
}

impl fmt::Debug for Constant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Constant")
            .field("dtype", &self.0.dtype)
            .field("shape", &self.0.shape)
            .field("computed", &self.is_computed())
            .finish()
    }
}

impl PartialEq for Constant {
    /// Equal dtype, shape and values (computes both).
    fn eq(&self, other: &Constant) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.value() == other.value()
    }
}

impl From<Tensor> for Constant {
    fn from(t: Tensor) -> Constant {
        Constant::ready(t)
    }
}

/// Constants by name: a map whose values are computed on demand ([`Constant`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Constants(BTreeMap<String, Constant>);

impl Constants {
    /// No constants.
    pub fn new() -> Constants {
        Constants::default()
    }

    /// Adds (or replaces) a constant whose value is known.
    pub fn insert(&mut self, name: String, t: Tensor) {
        self.0.insert(name, Constant::ready(t));
    }

    /// Adds (or replaces) a constant, lazy or not.
    pub fn insert_constant(&mut self, name: String, c: Constant) {
        self.0.insert(name, c);
    }

    /// The value of `name` (computed on the first call).
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.0.get(name).map(Constant::value)
    }

    /// The constant `name` itself: its dtype and shape without its value, or a handle to keep.
    pub fn constant(&self, name: &str) -> Option<&Constant> {
        self.0.get(name)
    }

    /// Whether `name` has a value.
    pub fn contains_key(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// Number of constants.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The names, in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.keys()
    }

    /// The constants by name, values not computed.
    pub fn constants(&self) -> impl Iterator<Item = (&String, &Constant)> {
        self.0.iter()
    }

    /// Names and values, in name order (every value computed).
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Tensor)> {
        self.0.iter().map(|(k, c)| (k, c.value()))
    }

    /// Every value copied into a plain map ([`Constant::to_tensor`]: lazy values are not kept).
    pub fn to_map(&self) -> BTreeMap<String, Tensor> {
        self.0
            .iter()
            .map(|(k, c)| (k.clone(), c.to_tensor()))
            .collect()
    }
}

impl<'a> IntoIterator for &'a Constants {
    type Item = (&'a String, &'a Tensor);
    type IntoIter = Box<dyn Iterator<Item = (&'a String, &'a Tensor)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl FromIterator<(String, Tensor)> for Constants {
    fn from_iter<I: IntoIterator<Item = (String, Tensor)>>(iter: I) -> Constants {
        Constants(
            iter.into_iter()
                .map(|(k, t)| (k, Constant::ready(t)))
                .collect(),
        )
    }
}

impl From<BTreeMap<String, Tensor>> for Constants {
    fn from(m: BTreeMap<String, Tensor>) -> Constants {
        m.into_iter().collect()
    }
}

/// Decodes little-endian `f32` (`F32`), `f16` (`F16`) or `bf16` (`BF16`) bytes into a tensor of
/// `dtype` and `shape` (fp16/bf16 held as their exact `f32` values). `None` when `bytes` is not
/// exactly the shape's element count times the element width, or `dtype` is not a float.
pub fn decode_float_le(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Option<Tensor> {
    let width = match dtype {
        DType::F32 => 4,
        DType::F16 | DType::BF16 => 2,
        _ => return None,
    };
    let n: usize = shape.iter().product();
    if n.checked_mul(width) != Some(bytes.len()) {
        return None;
    }
    let v: Vec<f32> = match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        _ => bytes
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
    };
    Some(Tensor {
        dtype,
        shape,
        data: TensorData::F32(v),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_lazy_value_is_computed_once_when_asked() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let c = Constant::lazy(DType::F32, vec![2], move || {
            seen.fetch_add(1, Ordering::Relaxed);
            Tensor::from_f64(DType::F32, vec![2], &[1.0, 2.0])
        });
        let mut m = Constants::new();
        m.insert_constant("w".into(), c.clone());
        assert_eq!(m.constant("w").map(Constant::numel), Some(2));
        assert_eq!(calls.load(Ordering::Relaxed), 0);
        assert_eq!(m.to_map()["w"].to_f64(), vec![1.0, 2.0]);
        assert!(!c.is_computed(), "to_map copies without keeping");
        assert_eq!(m.get("w").map(Tensor::to_f64), Some(vec![1.0, 2.0]));
        assert_eq!(m.get("w").map(Tensor::to_f64), Some(vec![1.0, 2.0]));
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        assert!(c.is_computed());
    }

    #[test]
    fn a_derived_constant_reads_its_sources_by_handle() {
        let a = Constant::lazy(DType::F32, vec![1], || {
            Tensor::from_f64(DType::F32, vec![1], &[3.0])
        });
        let b = Constant::ready(Tensor::from_f64(DType::F32, vec![1], &[4.0]));
        let (pa, pb) = (a.clone(), b.clone());
        let cat = Constant::lazy(DType::F32, vec![2], move || {
            let v = [pa.value().to_f64(), pb.value().to_f64()].concat();
            Tensor::from_f64(DType::F32, vec![2], &v)
        });
        assert_eq!(cat.value().to_f64(), vec![3.0, 4.0]);
    }

    #[test]
    fn float_bytes_decode_by_dtype_and_length() {
        let bytes: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let t = decode_float_le(DType::F32, vec![2], &bytes).expect("decodes");
        assert_eq!(t.to_f64(), vec![1.5, -2.0]);
        assert!(decode_float_le(DType::F32, vec![3], &bytes).is_none());
        assert!(decode_float_le(DType::I32, vec![2], &bytes).is_none());
        let h: Vec<u8> = [half::f16::from_f32(0.5), half::f16::from_f32(-3.0)]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let t = decode_float_le(DType::F16, vec![2], &h).expect("decodes");
        assert_eq!(t.to_f64(), vec![0.5, -3.0]);
        let b: Vec<u8> = half::bf16::from_f32(2.0).to_le_bytes().to_vec();
        let t = decode_float_le(DType::BF16, vec![], &b).expect("decodes");
        assert_eq!(t.to_f64(), vec![2.0]);
    }

    #[test]
    fn maps_compare_by_value() {
        let t = Tensor::from_f64(DType::F32, vec![1], &[1.0]);
        let lazy: Constants = [("x".to_string(), t.clone())].into_iter().collect();
        let mut other = Constants::new();
        other.insert_constant(
            "x".into(),
            Constant::lazy(DType::F32, vec![1], move || t.clone()),
        );
        assert_eq!(lazy, other);
    }
}
