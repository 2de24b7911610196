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

/// Every SIMT `(tile, warps)` of the plan space of `text`'s one SIMT contraction on `arch`, each
/// run on the host against the reference; returns the tiles run.
fn every_simt_tile(text: &str, arch: Arch) -> BTreeSet<[u64; 3]> {
    let (p, o) = common::host::optimized_for(text, arch);
    let target = &o.model.target;
    let regions = common::host::contraction_regions(&o, &[Algo::Simt]);
    assert_eq!(regions.len(), 1, "one SIMT contraction kernel");
    let r = regions[0];
    let choice = choose_plan(r, &o.model).expect("a plan");
    let generated = generate(&o).expect("generates");
    let planned = emit::kernel_of(r, &choice, target).expect("the plan emits");
    let b = BTreeMap::new();
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
            ..
        } = c.knobs
        else {
            continue;
        };
        if !seen.insert((bm, bn, bk, warps_m, warps_n)) {
            continue;
        }
        tiles.insert([bm, bn, bk]);
        let what = format!("{arch:?} {bm}x{bn}x{bk} warps {warps_m}x{warps_n}");
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
            assert!(tiles.contains(&t), "{arch:?}: {t:?} is in the space");
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
    assert!(tiles.contains(&[32, 32, 32]));
}
