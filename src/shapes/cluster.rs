//! Shape clusters: a concrete binding of a graph's symbols maps to a [`ShapeCluster`], per symbol
//! a magnitude bucket and a divisibility class ([`SymbolClass`]).
//!
//! Assumptions (documented choices):
//! * the magnitude bucket of a value `v >= 1` is `k = ceil(log2 v)`, the range `(2^(k-1), 2^k]`
//!   (a power-of-two range closed at the top: a bucket is "the sizes that pad to `2^k`", so 48
//!   and 56 share `(32, 64]` while 64 and 96 do not); the value 0 (an empty tensor) has a
//!   bucket of its own, [`Bucket::Zero`];
//! * the divisibility class is the largest power of two `d <= 16` dividing the value
//!   ([`MAX_DIVISOR`]; 16 elements are the widest vector access of an fp16/bf16 tensor, 4×fp32, so a
//!   larger factor proves nothing more to the templates); 0 is divisible by everything, so its class
//!   is 16;
//! * the representative of a class (what the cluster's kernels are priced with) is the bucket's
//!   geometric midpoint `2^k/√2` rounded to the nearest multiple of `d`, moved into the bucket
//!   when rounding left it (`d` divides `2^k`, so `2^k` itself is always a candidate); it lies
//!   in the bucket and is a multiple of `d`; 0 for the zero bucket.

use super::ShapeError;
use std::collections::BTreeMap;
use std::fmt;

/// The largest divisibility class (a power of two).
pub const MAX_DIVISOR: i64 = 16;

/// The magnitude bucket of a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Bucket {
    /// The value 0.
    Zero,
    /// `(2^(k-1), 2^k]` (`k = 0`: the value 1).
    Pow2(u32),
}

/// The class of one symbol's value: magnitude bucket and divisibility.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SymbolClass {
    /// The size bucket.
    pub bucket: Bucket,
    /// Largest power of two `<= MAX_DIVISOR` dividing every value of the class.
    pub divisor: i64,
}

impl SymbolClass {
    /// The class of a size (`ShapeError::NegativeSize` for a negative value).
    pub fn of(symbol: &str, v: i64) -> Result<SymbolClass, ShapeError> {
        if v < 0 {
            return Err(ShapeError::NegativeSize {
                symbol: symbol.to_string(),
                value: v,
            });
        }
        if v == 0 {
            return Ok(SymbolClass {
                bucket: Bucket::Zero,
                divisor: MAX_DIVISOR,
            });
        }
        // ceil(log2 v): the bit length of v - 1.
        let k = 64 - (v - 1).leading_zeros();
        let mut d = MAX_DIVISOR;
        while v % d != 0 {
            d /= 2;
        }
        Ok(SymbolClass {
            bucket: Bucket::Pow2(k),
            divisor: d,
        })
    }

    /// Whether `v` belongs to the class.
    pub fn contains(&self, v: i64) -> bool {
        SymbolClass::of("", v).is_ok_and(|c| c == *self)
    }

    /// The value the class is priced with (see the module doc).
    pub fn representative(&self) -> i64 {
        match self.bucket {
            Bucket::Zero => 0,
            Bucket::Pow2(k) => {
                let hi = 1i64 << k.min(62);
                let lo = hi / 2;
                let mid = (hi as f64) / std::f64::consts::SQRT_2;
                let d = self.divisor.max(1);
                let rounded = ((mid / d as f64).round() as i64).saturating_mul(d);
                if rounded <= lo {
                    (lo + d).min(hi)
                } else {
                    rounded.min(hi)
                }
            }
        }
    }

    /// `b6d8` (bucket `(2^5, 2^6]`, divisible by 8), `z` for the zero bucket.
    pub fn tag(&self) -> String {
        match self.bucket {
            Bucket::Zero => "z".to_string(),
            Bucket::Pow2(k) => format!("b{k}d{}", self.divisor),
        }
    }
}

/// A shape cluster: the class of every clustered symbol, by symbol name (sorted, so keys and
/// files never depend on hash-map order).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ShapeCluster {
    /// The class of every symbol.
    pub classes: BTreeMap<String, SymbolClass>,
}

impl ShapeCluster {
    /// The cluster of a concrete binding (every symbol of `binding` is clustered).
    pub fn of(binding: &BTreeMap<String, i64>) -> Result<ShapeCluster, ShapeError> {
        let mut classes = BTreeMap::new();
        for (s, v) in binding {
            classes.insert(s.clone(), SymbolClass::of(s, *v)?);
        }
        Ok(ShapeCluster { classes })
    }

    /// The binding the cluster's kernels are priced with.
    pub fn representative(&self) -> BTreeMap<String, i64> {
        self.classes
            .iter()
            .map(|(s, c)| (s.clone(), c.representative()))
            .collect()
    }

    /// Whether `binding` falls into this cluster (same symbols, same classes).
    pub fn contains(&self, binding: &BTreeMap<String, i64>) -> bool {
        ShapeCluster::of(binding).is_ok_and(|c| c == *self)
    }

    /// The deterministic key: `N:b2d1,T:b6d8` (`-` for no symbol).
    pub fn key(&self) -> String {
        if self.classes.is_empty() {
            return "-".to_string();
        }
        self.classes
            .iter()
            .map(|(s, c)| format!("{s}:{}", c.tag()))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Readable ranges: `T in (32, 64] multiple of 8`.
    pub fn describe(&self) -> String {
        if self.classes.is_empty() {
            return "no symbols".to_string();
        }
        self.classes
            .iter()
            .map(|(s, c)| match c.bucket {
                Bucket::Zero => format!("{s} = 0"),
                Bucket::Pow2(0) => format!("{s} = 1"),
                Bucket::Pow2(k) => {
                    let hi = 1i128 << k;
                    let m = match c.divisor {
                        1 => String::new(),
                        d => format!(" multiple of {d}"),
                    };
                    format!("{s} in ({}, {hi}]{m}", hi / 2)
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for ShapeCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

/// Parses one `--shape-set SYMBOL=V1,V2,...` argument into the symbol and its values
/// (`ShapeError::ShapeSetSyntax` otherwise).
pub fn parse_shape_set(raw: &str) -> Result<(String, Vec<i64>), ShapeError> {
    let bad = |why: String| ShapeError::ShapeSetSyntax {
        raw: raw.to_string(),
        why,
    };
    let Some((sym, values)) = raw.split_once('=') else {
        return Err(bad("a shape set must be given as SYMBOL=V1,V2,...".into()));
    };
    let sym = sym.trim();
    let mut chars = sym.chars();
    let ident = matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_');
    if !ident {
        return Err(bad(format!("`{sym}` is not a symbol name")));
    }
    let mut out = Vec::new();
    for v in values.split(',') {
        let v = v.trim();
        let n: i64 = v
            .parse()
            .map_err(|_| bad(format!("`{v}` is not an integer")))?;
        if n < 0 {
            return Err(bad(format!("`{v}` is negative; a size is >= 0")));
        }
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok((sym.to_string(), out))
}

/// Every binding of the cartesian product of `sets` (symbol → values), in a deterministic order
/// (symbols sorted, values in the given order, the last symbol varying fastest), each completed
/// with `fixed` for the other symbols.
pub fn bindings_of(
    sets: &BTreeMap<String, Vec<i64>>,
    fixed: &BTreeMap<String, i64>,
) -> Vec<BTreeMap<String, i64>> {
    let mut out = vec![fixed.clone()];
    for (s, values) in sets {
        let mut next = Vec::with_capacity(out.len() * values.len());
        for b in &out {
            for v in values {
                let mut b = b.clone();
                b.insert(s.clone(), *v);
                next.push(b);
            }
        }
        out = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str, v: i64) -> BTreeMap<String, i64> {
        [(s.to_string(), v)].into_iter().collect()
    }

    #[test]
    fn buckets_and_divisibility() {
        let c48 = ShapeCluster::of(&one("T", 48)).expect("48");
        let c56 = ShapeCluster::of(&one("T", 56)).expect("56");
        assert_eq!(c48.classes["T"].bucket, c56.classes["T"].bucket);
        assert_eq!(c48.classes["T"].divisor, 16);
        assert_eq!(c56.classes["T"].divisor, 8);
        assert_ne!(c48, c56);
        let c64 = ShapeCluster::of(&one("T", 64)).expect("64");
        let c96 = ShapeCluster::of(&one("T", 96)).expect("96");
        assert_ne!(c64.classes["T"].bucket, c96.classes["T"].bucket);
        assert_eq!(c64.key(), "T:b6d16");
        assert_eq!(c56.key(), "T:b6d8");
        assert_eq!(c96.key(), "T:b7d16");
        assert_eq!(ShapeCluster::of(&one("T", 1)).expect("1").key(), "T:b0d1");
        assert_eq!(ShapeCluster::of(&one("T", 33)).expect("33").key(), "T:b6d1");
        assert!(c56.contains(&one("T", 40)));
        assert!(!c56.contains(&one("T", 48)));
        assert_eq!(ShapeCluster::of(&one("T", 0)).expect("0").key(), "T:z");
        assert_eq!(SymbolClass::of("T", 7).expect("7").divisor, 1);
        assert!(matches!(
            SymbolClass::of("T", -1),
            Err(ShapeError::NegativeSize { .. })
        ));
    }

    #[test]
    fn representatives_lie_in_their_class() {
        for v in [
            1,
            2,
            3,
            4,
            5,
            8,
            12,
            16,
            40,
            48,
            56,
            64,
            96,
            100,
            1000,
            4096,
            1 << 40,
        ] {
            let c = SymbolClass::of("T", v).expect("class");
            let r = c.representative();
            let rc = SymbolClass::of("T", r).expect("rep class");
            assert_eq!(rc.bucket, c.bucket, "{v} -> {r}");
            assert_eq!(r % c.divisor, 0, "{v} -> {r}");
        }
        assert_eq!(SymbolClass::of("T", 56).expect("56").representative(), 48);
    }

    #[test]
    fn shape_set_syntax() {
        assert_eq!(
            parse_shape_set("T=48, 56,48").expect("ok"),
            ("T".to_string(), vec![48, 56])
        );
        for bad in ["T", "=1", "T=", "T=1,x", "1T=3", "T=-4"] {
            assert!(
                matches!(parse_shape_set(bad), Err(ShapeError::ShapeSetSyntax { .. })),
                "{bad}"
            );
        }
        let sets: BTreeMap<String, Vec<i64>> = [
            ("B".to_string(), vec![1, 2]),
            ("T".to_string(), vec![48, 56]),
        ]
        .into_iter()
        .collect();
        let all = bindings_of(&sets, &BTreeMap::new());
        assert_eq!(all.len(), 4);
        assert_eq!(all[1]["T"], 56);
        assert_eq!(all[2]["B"], 2);
    }
}
