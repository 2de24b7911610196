//! Element types of tensors (`graph-json.md` § Document) and the rounding rules of the reference
//! semantics (§ Numerics): every tensor is rounded to its dtype, round to nearest even.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The element types a tensor may have. Names on the wire are `fp16 bf16 fp32 i32 bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DType {
    #[serde(rename = "fp16")]
    /// IEEE binary16 (`fp16`).
    F16,
    #[serde(rename = "bf16")]
    /// bfloat16 (`bf16`).
    BF16,
    #[serde(rename = "fp32")]
    /// IEEE binary32 (`fp32`).
    F32,
    #[serde(rename = "i32")]
    /// 32-bit signed integer (`i32`).
    I32,
    #[serde(rename = "bool")]
    /// Boolean (`bool`).
    Bool,
}

impl DType {
    /// Every dtype, in wire order.
    pub const ALL: [DType; 5] = [DType::F16, DType::BF16, DType::F32, DType::I32, DType::Bool];

    /// Parses a wire name (`fp16`, …); `None` for anything else.
    pub fn parse(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == s)
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "fp16",
            DType::BF16 => "bf16",
            DType::F32 => "fp32",
            DType::I32 => "i32",
            DType::Bool => "bool",
        }
    }

    /// True for fp16, bf16 and fp32.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32)
    }

    /// Size of one element in bytes (bool: one byte).
    pub fn size_bytes(self) -> u64 {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::Bool => 1,
        }
    }

    /// Rounds `x` to this dtype and returns it widened back to `f64`: round to nearest even for
    /// floats; for `i32` truncation toward zero with two's-complement wrap (NaN gives 0), for `bool`
    /// non-zero is true. This is the single place the reference semantics round a value.
    #[inline]
    pub fn round(self, x: f64) -> f64 {
        match self {
            DType::F32 => x as f32 as f64,
            DType::F16 => half::f16::from_f64(x).to_f64(),
            DType::BF16 => half::bf16::from_f64(x).to_f64(),
            DType::I32 => wrap_i32(x) as f64,
            DType::Bool => {
                if x != 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }

    /// The identity of `max` for this dtype (−∞, or the type's minimum for `i32`).
    pub fn lowest(self) -> f64 {
        match self {
            DType::I32 => i32::MIN as f64,
            DType::Bool => 0.0,
            _ => f64::NEG_INFINITY,
        }
    }

    /// The identity of `min` for this dtype (+∞, or the type's maximum for `i32`).
    pub fn highest(self) -> f64 {
        match self {
            DType::I32 => i32::MAX as f64,
            DType::Bool => 1.0,
            _ => f64::INFINITY,
        }
    }
}

/// Float → i32 as C and CUDA do for in-range values: truncation toward zero; out-of-range values
/// wrap modulo 2³² so that integer arithmetic carried in `f64` behaves like `i32` arithmetic.
#[inline]
pub fn wrap_i32(x: f64) -> i32 {
    if x.is_nan() {
        return 0;
    }
    let t = x.trunc();
    if t >= i32::MIN as f64 && t <= i32::MAX as f64 {
        t as i32
    } else if t.abs() < 9.0e18 {
        (t as i64) as i32
    } else {
        0
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::parse(d.name()), Some(d));
        }
        assert_eq!(DType::parse("float32"), None);
    }

    #[test]
    fn fp16_rounds_to_nearest_even() {
        // 2049 lies exactly between 2048 and 2050 in fp16; ties go to the even mantissa (2048).
        assert_eq!(DType::F16.round(2049.0), 2048.0);
        assert_eq!(DType::F16.round(2051.0), 2052.0);
        assert_eq!(DType::F16.round(1e6), f64::INFINITY);
    }

    #[test]
    fn bf16_keeps_eight_bits() {
        assert_eq!(DType::BF16.round(1.0 + 1.0 / 256.0), 1.0);
        assert_eq!(DType::BF16.round(1.0 + 3.0 / 256.0), 1.0 + 4.0 / 256.0);
    }

    #[test]
    fn i32_truncates_and_wraps() {
        assert_eq!(DType::I32.round(-2.7), -2.0);
        assert_eq!(DType::I32.round(2147483648.0), -2147483648.0);
        assert_eq!(DType::I32.round(f64::NAN), 0.0);
        assert_eq!(DType::Bool.round(-0.5), 1.0);
    }
}
