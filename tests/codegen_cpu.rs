//! The emitted CUDA executed on the CPU (`codegen::host`: the `.cu` compiled with g++ against
//! the host emulation of `dlc_kernel.cuh`) against the reference: every example at its own
//! sizes (sm80 plans) and at random small sizes that leave tails in every tile (symbols bound to
//! values in 1..=40; sm90 and sm80 plans in turn). Outputs must equal the optimized program's CPU playback
//! (`evaluate_program`, the regions' semantics) within graph-json's tolerances plus 1e-4 of the
//! output's magnitude (summation order).

mod common;

use dlc_egg::codegen::generate;
use dlc_egg::codegen::host::{run_on_host, HostOptions};
use dlc_egg::ir::region::program::evaluate_program;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::rules::testing::random_inputs;
use dlc_egg::target::Arch;
use dlc_egg::{ir::frontend, lower};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;

/// Runs `path`'s generated kernels for `arch` on the host at `bindings` and compares with the
/// playback of the optimized program.
fn check(path: &Path, arch: Arch, bindings: &BTreeMap<String, i64>, seed: u64) {
    let who = format!("{} ({}, {bindings:?})", path.display(), arch.name());
    let g = frontend::load_file(path).unwrap_or_else(|d| panic!("{who}: {d}"));
    let p = lower::lower(&g).unwrap_or_else(|d| panic!("{who}: {d}"));
    let opts = OptimizeOptions {
        target: arch.target(),
        ..OptimizeOptions::default()
    };
    let o = optimize(&p, &opts).unwrap_or_else(|e| panic!("{who}: {e}"));
    let code = generate(&o).unwrap_or_else(|e| panic!("{who}: {e}"));
    let inputs = random_inputs(&p, bindings, seed).unwrap_or_else(|e| panic!("{who}: {e}"));
    let want = evaluate_program(&o.program, bindings, &inputs)
        .unwrap_or_else(|d| panic!("{who}: playback: {d}"));
    let got = run_on_host(
        &code.emitted.source,
        &code.emitted.manifest,
        &inputs,
        bindings,
        &HostOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{who}: {e}\n{}", code.emitted.source));
    assert_eq!(got.len(), want.len(), "{who}: outputs");
    for (name, w) in &want {
        let gt = got
            .get(name)
            .unwrap_or_else(|| panic!("{who}: output {name} missing"));
        assert_eq!((gt.dtype, &gt.shape), (w.dtype, &w.shape), "{who}: {name}");
        // graph-json's tolerance, plus 1e-4 of the output's largest magnitude: the kernels sum
        // in another order than the playback (tiles, tensor-core fragments, warp trees), and an
        // output that is a small difference of large terms (the MLP's K = 3072 rows) differs by
        // that much after rounding to fp16.
        let (g, e) = (gt.to_f64(), w.to_f64());
        let tol = common::graph_json_tolerance(w.dtype);
        let scale = e
            .iter()
            .filter(|v| v.is_finite())
            .fold(0f64, |m, v| m.max(v.abs()));
        for (k, (a, b)) in g.iter().zip(&e).enumerate() {
            let ok = match tol {
                Some(t) if b.is_finite() => (a - b).abs() <= t + 1e-4 * scale + t * b.abs(),
                _ => a == b || (a.is_nan() && b.is_nan()),
            };
            assert!(
                ok,
                "{who}: output {name}: element {k} is {a}, the playback says {b}"
            );
        }
    }
}

/// The example's own symbol values (its `symbols` table).
fn own_bindings(path: &Path) -> BTreeMap<String, i64> {
    let g = frontend::load_file(path).expect("loads");
    g.symbols.iter().map(|(k, v)| (k.clone(), *v)).collect()
}

#[test]
fn every_example_runs_on_the_cpu_like_the_reference() {
    for ex in common::example_paths() {
        let b = own_bindings(&ex);
        check(&ex, Arch::Sm80, &b, 1);
    }
}

#[test]
fn random_tail_sizes_run_on_the_cpu_like_the_reference() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    // One random size per example, the arch alternating (each host program is a g++ build).
    for (case, ex) in common::example_paths().iter().enumerate() {
        let arch = if case % 2 == 0 {
            Arch::Sm90
        } else {
            Arch::Sm80
        };
        let b: BTreeMap<String, i64> = own_bindings(ex)
            .keys()
            .map(|k| (k.clone(), rng.gen_range(1..=40)))
            .collect();
        check(ex, arch, &b, 10 + case as u64);
    }
}

/// Compute-at kernels (seed 003): Conv → ReLU → AvgPool 3×3 stride 2 with padding, fused into
/// one nest that recomputes the overlapping windows' conv points, and the example's MaxPool,
/// executed on the CPU at two batch sizes for both targets.
#[test]
fn compute_at_kernels_run_on_the_cpu_like_the_reference() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for file in [
        "tests/data/conv_relu_avgpool.json",
        "examples/conv_relu_pool.json",
    ] {
        let path = root.join(file);
        let g = frontend::load_file(&path).expect("loads");
        let p = lower::lower(&g).expect("lowers");
        let o = optimize(&p, &OptimizeOptions::default()).expect("optimizes");
        assert_eq!(o.kernels.len(), 1, "{file}: one compute-at kernel");
        assert!(o.kernels[0].embeds, "{file}");
        for (k, (arch, n)) in [(Arch::Sm80, 1), (Arch::Sm90, 3)].into_iter().enumerate() {
            let b: BTreeMap<String, i64> = [("N".to_string(), n)].into_iter().collect();
            check(&path, arch, &b, 40 + k as u64);
        }
    }
}

/// The pointwise template's vector accesses (`tests/data/vector_access.json`): 2 lanes of fp16
/// (rows of 6), 4 lanes of fp32 with a broadcast operand, a transpose (scalar: its innermost size
/// is symbolic), a pad (guarded reads stay scalar, the store is a vector), a slice whose offset
/// of 4 keeps its loads aligned and a softmax (the row template's chunked folds); at the graph's
/// sizes and at random ones.
#[test]
fn vector_accesses_run_on_the_cpu_like_the_reference() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/vector_access.json");
    let g = frontend::load_file(&path).expect("loads");
    let p = lower::lower(&g).expect("lowers");
    let o = optimize(&p, &OptimizeOptions::default()).expect("optimizes");
    let code = generate(&o).expect("generates");
    let templates: Vec<&str> = code
        .kernels
        .iter()
        .map(|k| k.kernel.template.as_str())
        .collect();
    assert!(templates.contains(&"row"), "{templates:?}");
    let src = code.emitted.source;
    for access in [
        "dlc_ld_vec<4>(",
        "dlc_st_vec<4>(",
        "dlc_ld_vec<16>(",
        "dlc_st_vec<16>(",
        "+ 4))]);",
    ] {
        assert!(src.contains(access), "{access} missing:\n{src}");
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    for (k, arch) in [Arch::Sm90, Arch::Sm80].into_iter().enumerate() {
        let t = if k == 0 { 5 } else { rng.gen_range(1..=40) };
        check(
            &path,
            arch,
            &BTreeMap::from([("T".to_string(), t)]),
            30 + k as u64,
        );
    }
}
