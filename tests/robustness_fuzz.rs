//! Issue 19, the promise "`check` accepts ⇒ `optimize` never reports an internal error" and the
//! CI smoke run of the fuzz target.
//!
//! 1. A property over the random valid documents of `common::graphgen` (the generator of
//!    `pipeline_fuzz` / `optimize_fuzz`) with their symbols inflated to huge values (2^k, k up
//!    to 62): the checks `dlc-egg optimize` runs before any work (load, lower + verify, E0405
//!    device memory, E1408 target sizes, E1405 memory estimate) either refuse the document
//!    with a user diagnostic, or `optimize` succeeds. Fixed seed; `ROBUST_PROP_CASES=N` (150 by
//!    default).
//! 2. The smoke run of `dlc_egg::fuzz_target::fuzz_one` (the libFuzzer target of `fuzz/`): a
//!    seeded mutation loop (byte flips, inserts, deletions, splices, numbers replaced by huge
//!    ones) over a seed corpus from `examples/`, `tests/data/`, `.npy` encodings and small
//!    egraph-serialize documents. Every input must end without a panic or an internal error.
//!    `ROBUST_FUZZ_ITERS=N` (4,000 by default), `ROBUST_FUZZ_SECS` (a 12 s wall-clock cap by
//!    default) and `ROBUST_FUZZ_SEED` (the mutation seed, 0x19 by default: shards of a
//!    campaign run with different seeds); a long campaign is `ROBUST_FUZZ_ITERS=1000000
//!    ROBUST_FUZZ_SECS=100000 cargo test --test robustness_fuzz fuzz_target_smoke_run --
//!    --nocapture` (the test profile keeps debug assertions: overflow panics), or
//!    coverage-guided `cargo +nightly fuzz run pipeline` in `fuzz/` (see `fuzz/README.md`).

mod common;

use common::graphgen::gen_case;
use dlc_egg::fuzz_target::{fuzz_one, Reached};
use dlc_egg::ir::frontend::load_str;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::run;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

fn env_or(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `Ok(true)` when the checks accept and `optimize` succeeds, `Ok(false)` when a check refuses
/// with a user diagnostic, `Err` on an internal error or an optimizer failure after acceptance.
fn check_then_optimize(doc: &Value) -> Result<bool, String> {
    let Ok(g) = load_str(&doc.to_string(), "prop.json") else {
        return Ok(false);
    };
    let prog = match run::lower_and_verify(&g) {
        Ok(p) => p,
        Err(f) if f.internal => return Err(format!("lower: internal error\n{}", f.diagnostics)),
        Err(_) => return Ok(false),
    };
    let defaults = |s: &str| g.symbols.get(s).copied();
    if run::check_device_memory(&g).is_err()
        || dlc_egg::budget::check_target_sizes(&g, &defaults).is_err()
        || dlc_egg::budget::check_optimize(&g, &prog, dlc_egg::budget::DEFAULT_OPTIMIZE_MEMORY)
            .is_err()
    {
        return Ok(false);
    }
    optimize(&prog, &OptimizeOptions::default())
        .map(|_| true)
        .map_err(|e| format!("optimize fails on an accepted document: {e}\n{doc}"))
}

/// The document with every symbol default set to `2^k` (k from `exps`, cycled).
fn inflate(doc: &Value, exps: &[u32]) -> Value {
    let mut d = doc.clone();
    if let Some(Value::Object(syms)) = d.get_mut("symbols") {
        for (i, v) in syms.values_mut().enumerate() {
            let k = exps.get(i % exps.len().max(1)).copied().unwrap_or(40) % 63;
            *v = Value::from(1u64 << k.max(1));
        }
    }
    d
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: env_or("ROBUST_PROP_CASES", 150),
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x0019_b0d9),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// `check` accepts ⇒ `optimize` never reports an internal error, huge sizes included.
    #[test]
    fn accepted_documents_optimize(
        tape in prop::collection::vec(any::<u32>(), 0..300),
        exps in prop::collection::vec(16u32..63, 1..4),
    ) {
        let case = gen_case(&tape);
        check_then_optimize(&case.doc).map_err(TestCaseError::fail)?;
        check_then_optimize(&inflate(&case.doc, &exps)).map_err(TestCaseError::fail)?;
    }
}

/// The inflation reaches both sides: some inflated documents are refused, some optimized.
#[test]
fn inflated_documents_reach_both_outcomes() {
    let mut rng = ChaCha8Rng::seed_from_u64(19);
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..200 {
        let tape: Vec<u32> = (0..200).map(|_| rng.gen()).collect();
        let case = gen_case(&tape);
        if case
            .doc
            .get("symbols")
            .is_none_or(|s| s.as_object().is_none_or(|m| m.is_empty()))
        {
            continue;
        }
        let k = rng.gen_range(20..63);
        let doc = inflate(&case.doc, &[k]);
        let Ok(g) = load_str(&doc.to_string(), "prop.json") else {
            continue;
        };
        let defaults = |s: &str| g.symbols.get(s).copied();
        let fits = dlc_egg::budget::check_target_sizes(&g, &defaults).is_ok()
            && run::check_device_memory(&g).is_ok();
        if fits {
            accepted += 1;
        } else {
            refused += 1;
        }
    }
    assert!(
        accepted > 0 && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
}

// ---- the fuzz target's smoke run ------------------------------------------------------------

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The seed corpus: mode byte + bytes (as `fuzz/seed-corpus.sh` writes it for libFuzzer).
fn seed_corpus() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for dir in ["examples", "tests/data"] {
        let mut paths: Vec<_> = std::fs::read_dir(root().join(dir))
            .expect("corpus folder")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        for p in paths {
            let mut s = vec![0u8];
            s.extend(std::fs::read(&p).expect("read seed"));
            seeds.push(s);
        }
    }
    use dlc_egg::ir::dtype::DType;
    use dlc_egg::tensor::{Tensor, TensorData};
    for t in [
        Tensor {
            dtype: DType::F32,
            shape: vec![2, 3],
            data: TensorData::F32(vec![0.5, -1.0, 2.0, 3.5, f32::NAN, 0.0]),
        },
        Tensor {
            dtype: DType::F16,
            shape: vec![4],
            data: TensorData::F32(vec![1.0, 2.0, 3.0, 4.0]),
        },
        Tensor {
            dtype: DType::I32,
            shape: vec![3, 1],
            data: TensorData::I32(vec![1, -2, 3]),
        },
        Tensor {
            dtype: DType::Bool,
            shape: vec![2],
            data: TensorData::Bool(vec![true, false]),
        },
    ] {
        let mut s = vec![1u8];
        s.extend(dlc_egg::npy::encode_tensor(&t).expect("encode"));
        seeds.push(s);
    }
    for eg in [
        r#"{"nodes": {"a": {"op": "leaf", "children": [], "eclass": "x", "cost": 2.0},
                      "b": {"op": "f", "children": ["a", "a"], "eclass": "r", "cost": 1.0},
                      "c": {"op": "g", "children": ["b"], "eclass": "x", "cost": 0.5}},
            "root_eclasses": ["r"]}"#,
        r#"{"nodes": {"n1": {"op": "1", "children": [], "eclass": "c1", "cost": 1.0},
                      "n2": {"op": "+", "children": ["n1", "n3"], "eclass": "c2", "cost": 1.0},
                      "n3": {"op": "2", "children": [], "eclass": "c3", "cost": 3.0},
                      "n4": {"op": "*", "children": ["n2", "n2"], "eclass": "c2", "cost": 4.0}},
            "root_eclasses": ["c2"]}"#,
    ] {
        let mut s = vec![2u8];
        s.extend_from_slice(eg.as_bytes());
        seeds.push(s);
    }
    seeds
}

const HUGE: [&str; 6] = [
    "4611686018427387904",
    "2305843009213693952",
    "2147483647",
    "1099511627776",
    "-1",
    "0",
];

/// One to four random edits of `input` (never the mode byte).
fn mutate(rng: &mut ChaCha8Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..rng.gen_range(1..=4) {
        if v.len() < 2 {
            v.push(rng.gen());
            continue;
        }
        let at = rng.gen_range(1..v.len());
        match rng.gen_range(0..6) {
            0 => v[at] ^= 1 << rng.gen_range(0..8),
            1 => v.insert(at, rng.gen()),
            2 => {
                let end = (at + rng.gen_range(1..16)).min(v.len());
                v.drain(at..end);
            }
            3 => {
                // Splice a piece of another input.
                if other.len() > 1 {
                    let from = rng.gen_range(1..other.len());
                    let end = (from + rng.gen_range(1..64)).min(other.len());
                    v.splice(at..at, other[from..end].iter().copied());
                }
            }
            _ => {
                // Replace the number starting at or after `at` by a huge or edge value.
                if let Some(start) = (at..v.len()).find(|&i| v[i].is_ascii_digit()) {
                    let end = (start..v.len())
                        .find(|&i| !v[i].is_ascii_digit())
                        .unwrap_or(v.len());
                    let h = HUGE[rng.gen_range(0..HUGE.len())];
                    v.splice(start..end, h.bytes());
                }
            }
        }
    }
    v
}

/// [`fuzz_one`] on `input`; a panic or a broken promise fails the test with the input printed
/// (a panic inside the pipeline is caught so that the crashing input can be minimized).
fn run_one(input: &[u8]) -> Reached {
    let shown = || format!("{:?}", String::from_utf8_lossy(input));
    match std::panic::catch_unwind(|| fuzz_one(input)) {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => panic!("input {}:\n{e}", shown()),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            panic!("input {} panics: {msg}", shown())
        }
    }
}

#[test]
fn fuzz_target_smoke_run() {
    let seeds = seed_corpus();
    assert!(seeds.len() >= 10, "{} seeds", seeds.len());
    let mut counts: BTreeMap<Reached, u32> = BTreeMap::new();
    for s in &seeds {
        let r = run_one(s);
        *counts.entry(r).or_default() += 1;
    }
    let iters = env_or("ROBUST_FUZZ_ITERS", 4000);
    let secs = env_or("ROBUST_FUZZ_SECS", 12);
    let deadline = Instant::now() + Duration::from_secs(u64::from(secs));
    let mut rng = ChaCha8Rng::seed_from_u64(env_or("ROBUST_FUZZ_SEED", 0x19).into());
    let mut done = 0;
    for _ in 0..iters {
        if Instant::now() > deadline {
            break;
        }
        let a = &seeds[rng.gen_range(0..seeds.len())];
        let b = &seeds[rng.gen_range(0..seeds.len())];
        let input = mutate(&mut rng, a, b);
        let r = run_one(&input);
        *counts.entry(r).or_default() += 1;
        done += 1;
    }
    eprintln!("fuzz smoke run: {done} mutated inputs, outcomes {counts:?}");
    assert!(
        counts.get(&Reached::Ran).copied().unwrap_or(0) > 0,
        "{counts:?}"
    );
    assert!(
        counts.get(&Reached::Rejected).copied().unwrap_or(0) > 0,
        "{counts:?}"
    );
}
