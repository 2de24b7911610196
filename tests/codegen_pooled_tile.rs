//! The pooled tile (`plan::work::PoolTile`, issue 23): a convolution whose output is only
//! read by a window reduction — ResNet-18's and MobileNetV2's last convolution and global
//! average pool, `mean_hw(relu(conv3x3(X) + b + S))` — is one SIMT tile whose rows are the
//! window points: its epilogue computes `relu(· + b + S)` at each row, folds each window in
//! shared memory in window order and stores the pooled value. The kernel runs on the CPU
//! emulation against the reference for several tiles (one or two windows per tile) and every
//! split-K share, with tails in the windows' rows, the channels and `K`; realistic shapes
//! compile with NVRTC for sm_80 and sm_90a without spills. Needs g++ (and NVRTC for the
//! compile).

mod common;

use dlc_egg::codegen::generate;
use dlc_egg::cost::{choose_plan, choose_plan_for, PlanChoice};
use dlc_egg::cuda::{compile, CompileOptions};
use dlc_egg::ir::region::Region;
use dlc_egg::optimize::Optimized;
use dlc_egg::plan::work::Shape;
use dlc_egg::target::Arch;
use serde_json::json;

/// `Y = pool(relu(conv3x3(X) + b + S))` in fp32: `C` output channels from `CI` at `HW×HW`,
/// batch `n`; `pool` the Pool node's attributes (`mode`, `kernel`, `stride`).
fn conv_pool(n: i64, c: i64, ci: i64, hw: i64, pool: serde_json::Value, out_hw: i64) -> String {
    conv_pool_of("fp32", [n, c, ci, hw], pool, out_hw)
}

/// [`conv_pool`] in `dtype`.
fn conv_pool_of(
    dtype: &str,
    [n, c, ci, hw]: [i64; 4],
    pool: serde_json::Value,
    out_hw: i64,
) -> String {
    let param = |t: &str| json!({"tensor": t, "role": "param"});
    json!({
        "signature": {
            "inputs": [{"tensor": "X"}, {"tensor": "S"}, param("W"), param("b")],
            "outputs": [{"tensor": "Y"}]
        },
        "tensors": {
            "X": {"dtype": dtype, "shape": [n, ci, hw, hw]},
            "S": {"dtype": dtype, "shape": [n, c, hw, hw]},
            "W": {"dtype": dtype, "shape": [c, ci, 3, 3]},
            "b": {"dtype": dtype, "shape": [c]},
            "Y": {"dtype": dtype, "shape": [n, c, out_hw, out_hw]}
        },
        "graph": [
            {"op": "Conv", "name": "conv", "inputs": ["X", "W", "b"], "outputs": ["C1"],
             "attrs": {"stride": [1, 1], "pad": [[1, 1], [1, 1]], "dilation": [1, 1],
                       "groups": 1}},
            {"op": "Elementwise", "name": "residual", "inputs": ["C1", "S"], "outputs": ["A"],
             "attrs": {"fn": "add"}},
            {"op": "Elementwise", "name": "relu", "inputs": ["A"], "outputs": ["R"],
             "attrs": {"fn": "relu"}},
            {"op": "Pool", "name": "pool", "inputs": ["R"], "outputs": ["Y"], "attrs": pool}
        ]
    })
    .to_string()
}

/// A global average pool over `hw×hw`.
fn global_avg(n: i64, c: i64, ci: i64, hw: i64) -> String {
    conv_pool(
        n,
        c,
        ci,
        hw,
        json!({"mode": "avg", "kernel": hw, "stride": hw}),
        1,
    )
}

/// The one kernel of the program, a compute-at region, and its plan as the pooled tile (when
/// `chosen`, the plan the cost model chose must be that tile; else the tile's own fastest plan,
/// where the nest is priced faster).
fn pooled_kernel(o: &Optimized, chosen: bool) -> (&Region, PlanChoice, PlanChoice) {
    let regions: Vec<&Region> = o.program.regions().collect();
    let covers: Vec<&Vec<String>> = o.kernels.iter().map(|k| &k.covers).collect();
    assert_eq!(regions.len(), 1, "one kernel: {covers:?}");
    let r = regions[0];
    let planned = choose_plan(r, &o.model).expect("a plan");
    let choice = match &planned.work.shape {
        Shape::ComputeAt(ca) if !chosen => {
            let tiled = ca
                .tiled
                .as_deref()
                .expect("the region is a pooled tile too");
            choose_plan_for(tiled.clone(), &o.model.target).expect("a tile plan")
        }
        _ => planned.clone(),
    };
    let g = common::host::simt_gemm(&choice);
    assert!(g.pool.is_some(), "the tile folds the windows: {g:?}");
    (r, planned, choice)
}

/// Runs the planned kernel of `graph` with each tile of `tiles` and each split of `splits`
/// on the emulation against the reference, within `1e-4` of the output's scale.
fn every_tile_and_split(graph: &str, tiles: &[[u64; 3]], splits: &[u64]) {
    every_tile_and_split_within(graph, tiles, splits, 1e-4)
}

/// [`every_tile_and_split`] within `rtol`.
fn every_tile_and_split_within(graph: &str, tiles: &[[u64; 3]], splits: &[u64], rtol: f64) {
    let (p, o) = common::host::optimized_for(graph, Arch::Sm80);
    let (r, planned, tiled) = pooled_kernel(&o, false);
    common::host::tile_variants_match(
        &p,
        &o,
        r,
        &planned,
        &tiled,
        (tiles, splits),
        |_| (2, 2),
        (5, rtol),
        &|text, at, split| {
            assert!(text.contains("Ps["), "{at}: the pooled epilogue");
            assert_eq!(text.contains("kt0"), split > 1, "{at}: split");
        },
    );
}

/// Two images of 5×5 (windows of 25 rows: one per 32-row tile, two per 64-row tile, the last
/// tile's second window empty), 36 channels (a tail in `N`), `K` = 12·9 = 108 (a tail in the
/// last step), split-K from 1 to 16 (the last splits walk no step).
#[test]
fn a_global_average_pool_folds_in_the_tile_every_split_and_tile() {
    every_tile_and_split(
        &global_avg(2, 36, 12, 5),
        &[[32, 32, 32], [64, 32, 32], [64, 64, 16]],
        &[1, 2, 4, 16],
    );
}

/// A 2×2 max pool of stride 2 over 6×6 (windows of 4 rows, 16 per 64-row tile; overlapping
/// nothing): the fold is a max and the window axes index the image with the map's own `2·oh +
/// kh'` form.
#[test]
fn a_max_pool_folds_many_windows_per_tile() {
    let graph = conv_pool(
        1,
        20,
        8,
        6,
        json!({"mode": "max", "kernel": 2, "stride": 2}),
        3,
    );
    every_tile_and_split(&graph, &[[32, 32, 32], [64, 32, 32]], &[1, 2]);
}

/// In fp16 (the SIMT tile converts the operands to fp32 as it loads them; the pooled value is
/// rounded to fp16 once, at the store, where the reference rounds the convolution, the residual
/// sum and the ReLU to fp16 too: within four units of fp16 roundoff, `4·2⁻¹¹ ≈ 2·10⁻³`,
/// relative to the output's scale — `docs/numerics.md`).
#[test]
fn an_fp16_global_average_pool_folds_in_the_tile() {
    let graph = conv_pool_of(
        "fp16",
        [2, 36, 12, 5],
        json!({"mode": "avg", "kernel": 5, "stride": 5}),
        1,
    );
    every_tile_and_split_within(&graph, &[[32, 32, 32], [64, 32, 32]], &[1, 4], 2e-3);
}

/// ResNet's stem pool, a 3×3 max pool of stride 2 padded by 1 over 7×7 (windows of 9 rows that
/// overlap, so the tile recomputes the shared points; the padded window points are guarded to
/// the max's identity, their rows computing the convolution off the image).
#[test]
fn an_overlapping_padded_max_pool_folds_its_guarded_windows() {
    let graph = conv_pool(
        1,
        20,
        8,
        7,
        json!({"mode": "max", "kernel": 3, "stride": 2, "pad": 1}),
        4,
    );
    every_tile_and_split(&graph, &[[32, 32, 32], [64, 32, 32]], &[1, 4]);
}

/// ResNet-18's last stage at batch 1 (512 channels at 7×7) is one kernel with the pool, the
/// pooled tile, predicted faster than the convolution and the pool apart; the kernel compiles
/// for sm_80 and sm_90a without spills.
#[test]
fn the_resnet_tail_is_one_kernel_and_compiles_spill_free() {
    for arch in [Arch::Sm80, Arch::Sm90] {
        let (_, o) = common::host::optimized_for(&global_avg(1, 512, 512, 7), arch);
        assert_eq!(o.kernels.len(), 1);
        pooled_kernel(&o, true);
        if !common::nvrtc_here() {
            continue;
        }
        let generated = generate(&o).expect("generates");
        let compiled = compile(&generated.emitted.source, arch, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{arch:?}: {e}"));
        for k in &compiled.kernels {
            assert_eq!(k.spill_bytes, 0, "{arch:?}: {k:?}");
            eprintln!("{arch:?}: {k:?}");
        }
    }
}
