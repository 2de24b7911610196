//! The SIMT contraction template (`contraction_simt`) run on the CPU: fp32 GEMMs with tails in
//! every tile (and with both operands transposed, so that the loads walk `K` fastest) are
//! optimized, their SIMT kernel is rebuilt under every SIMT tile and warp layout of the plan
//! space (`plan::space`, the kept points and the ones a resource STOP rejects: the template must
//! be right for each), emitted, compiled with `g++` against the host emulation (`codegen::host`)
//! and compared with the reference evaluator; the kernel's shared memory is the plan's. Needs
//! g++, no GPU.

mod common;

use dlc_egg::codegen::host::{run_on_host, HostOptions};
use dlc_egg::codegen::{emit, generate};
use dlc_egg::cost::choose_plan;
use dlc_egg::eval::evaluate;
use dlc_egg::plan::space::{candidates, Algo, Knobs};
use dlc_egg::rules::testing::random_inputs;
use dlc_egg::target::Arch;
use std::collections::{BTreeMap, BTreeSet};

/// Every SIMT `(tile, warps, splits)` of the plan space of `text`'s one SIMT contraction on
/// `arch`, each run on the host against the reference; returns the tiles run (`[BM, BN, BK,
/// splits]`).
fn every_simt_tile(text: &str, arch: Arch) -> BTreeSet<[u64; 4]> {
    every_simt_tile_at(text, arch, &[])
}

/// [`every_simt_tile`] with the symbols bound to `bindings` at run time.
fn every_simt_tile_at(text: &str, arch: Arch, bindings: &[(&str, i64)]) -> BTreeSet<[u64; 4]> {
    let (p, o) = common::host::optimized_for(text, arch);
    let target = &o.model.target;
    let regions = common::host::contraction_regions(&o, &[Algo::Simt]);
    assert_eq!(regions.len(), 1, "one SIMT contraction kernel");
    let r = regions[0];
    let choice = choose_plan(r, &o.model).expect("a plan");
    let generated = generate(&o).expect("generates");
    let planned = emit::kernel_of(r, &choice, target).expect("the plan emits");
    let b: BTreeMap<String, i64> = bindings.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let ins = random_inputs(&p, &b, 11).expect("inputs");
    let want = evaluate(&p, &b, &ins).expect("reference evaluates");
    let mut seen = BTreeSet::new();
    let mut tiles = BTreeSet::new();
    for c in candidates(&choice.work, target) {
        let Knobs::Contraction {
            algo: Algo::Simt,
            bm,
            bn,
            bk,
            warps_m,
            warps_n,
            splits,
            ..
        } = c.knobs
        else {
            continue;
        };
        if !seen.insert((bm, bn, bk, warps_m, warps_n, splits)) {
            continue;
        }
        tiles.insert([bm, bn, bk, splits]);
        let what = format!("{arch:?} {bm}x{bn}x{bk} warps {warps_m}x{warps_n} splits {splits}");
        let mut one = choice.clone();
        one.best.knobs = c.knobs;
        one.best.resources = c.resources;
        let k = emit::kernel_of(r, &one, target)
            .unwrap_or_else(|e| panic!("{what}: the SIMT kernel builds: {e}"));
        assert_eq!(k.template, "contraction_simt", "{what}");
        assert_eq!(
            u64::from(k.launch.block[0]),
            warps_m * warps_n * 32,
            "{what}: threads"
        );
        // The shared memory the plan priced is the kernel's (padded fp32 tiles).
        let smem: u64 = k
            .smem
            .iter()
            .map(|s| 4 * s.dims.iter().product::<u64>())
            .sum();
        assert_eq!(smem, u64::from(c.resources.smem_bytes), "{what}: smem");
        let (source, manifest) = common::host::swap_kernel(&generated, &planned, &k);
        let got = run_on_host(&source, &manifest, &ins, &b, &HostOptions::default())
            .unwrap_or_else(|e| panic!("{what}: the host run fails: {e}"));
        common::host::assert_outputs_within(&got, &want, 1e-5, &what);
    }
    tiles
}

/// Row-major operands, tails in every tile (`M` = 45, `K` = 70, `N` = 83): every SIMT tile of the
/// space runs right on sm90 (the 32-row tiles included) and on sm80.
#[test]
fn every_simt_tile_runs_a_gemm_with_tails() {
    for arch in [Arch::Sm90, Arch::Sm80] {
        let tiles = every_simt_tile(
            &common::gemm_bias_relu_t("fp32", ["45", "70", "83"], 1, [false; 2]),
            arch,
        );
        for t in [[32, 32, 32], [32, 64, 32], [64, 64, 16], [128, 128, 16]] {
            assert!(
                tiles.contains(&[t[0], t[1], t[2], 1]),
                "{arch:?}: {t:?} is in the space"
            );
        }
    }
}

/// Both operands transposed (`A [K, M]`, `B [N, K]`: `B`'s loads walk `K` fastest), tails again.
#[test]
fn every_simt_tile_runs_a_transposed_gemm() {
    let tiles = every_simt_tile(
        &common::gemm_bias_relu_t("fp32", ["37", "41", "50"], 1, [true; 2]),
        Arch::Sm90,
    );
    assert!(tiles.contains(&[32, 32, 32, 1]));
}

/// Split-K (`M` = 45, `K` = 530, `N` = 50: 6 tiles of 32×32 for 132 SMs, 17 steps of 32 or 34
/// of 16): every split of the space, 2 to 16 CTAs per tile, with the `K` tail in the last
/// split that has steps and splits left without one (17 steps in 8 splits of 3: the sixth walks
/// 2, the seventh and eighth none; 34 in 16 of 3: the twelfth walks 1, the last four none),
/// each summing its partial tiles back in split order.
#[test]
fn every_split_k_point_runs_a_deep_gemm() {
    let tiles = every_simt_tile(
        &common::gemm_bias_relu_t("fp32", ["45", "530", "50"], 1, [false; 2]),
        Arch::Sm90,
    );
    for t in [[32, 32, 32, 2], [32, 32, 32, 8], [64, 64, 16, 16]] {
        assert!(tiles.contains(&t), "{t:?} is in the space: {tiles:?}");
    }
}

/// Split-K on a transposed deep GEMM (`B`'s loads walk `K` fastest) with a symbolic `M`
/// (planned at 100, run at 77): the tile count, the workspace and the counters are sized at
/// launch.
#[test]
fn split_k_runs_a_symbolic_transposed_gemm() {
    let tiles = every_simt_tile_at(
        &common::gemm_bias_relu_t("fp32", ["M", "300", "36"], 100, [true; 2]),
        Arch::Sm80,
        &[("M", 77)],
    );
    assert!(tiles.iter().any(|t| t[3] > 1), "{tiles:?}");
}
