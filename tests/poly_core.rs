//! Poly Core (`--dump poly_core`, seed 001 §7.1, seed 003 §3) on the examples and small graphs
//! of `tests/data/poly_core/`: dependences, parallel / reduce axes, compute-at legality with
//! halo, minimal buffers, barrier hints per architecture; golden dumps
//! (`tests/golden/poly_core/<example>.json`, regenerate with
//! `UPDATE_GOLDEN=1 cargo test --release --test poly_core`).

mod common;

use dlc_egg::dump::DumpLayer;
use dlc_egg::optimize::{optimize, OptimizeOptions, Optimized};
use dlc_egg::poly::core::{self, PairReport, PolyCore};
use dlc_egg::poly::view::isl;
use dlc_egg::target::Arch;
use dlc_egg::{ir::frontend, lower};
use std::path::{Path, PathBuf};

fn path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn optimized(rel: &str, arch: Arch) -> Optimized {
    let g = frontend::load_file(&path(rel)).expect("loads");
    let p = lower::lower(&g).expect("lowers");
    // The pairs are between regions: analyze the program before compute-at embeds a conv in
    // its pool (`tests/compute_at.rs` covers the fused kernel).
    let opts = OptimizeOptions {
        target: arch.target(),
        compute_at: false,
        ..OptimizeOptions::default()
    };
    optimize(&p, &opts).expect("optimizes")
}

fn report(rel: &str) -> PolyCore {
    optimized(rel, Arch::Sm90).poly_core()
}

/// The one pair whose consumer statement reads `tensor` from another region.
fn only_pair(c: &PolyCore) -> &PairReport {
    assert_eq!(c.pairs.len(), 1, "{:#?}", c.pairs);
    &c.pairs[0]
}

#[test]
fn conv_to_pool_2x2_s2_is_compute_at_legal_without_halo() {
    let c = report("examples/conv_relu_pool.json");
    let pair = only_pair(&c);
    let ca = &pair.compute_at;
    assert!(ca.ok, "{}", ca.why);
    assert_eq!(ca.halo_bytes, 0);
    assert_eq!(ca.halo_per_axis.len(), 4);
    assert!(
        ca.halo_per_axis.values().all(|h| *h == 0),
        "{:?}",
        ca.halo_per_axis
    );
    // One pool output point reads a 2x2 window of the conv output (which the extracted conv
    // kernel writes as `[N, 1, 32, 32, 32]`, a group axis of 1: the pool, with the bias and
    // ReLU moved after the max, is one pointwise kernel).
    let fp = ca.footprint.as_deref().expect("footprint");
    assert!(
        fp.contains("2*m_c <= o3 <= 2*m_c + 1") && fp.contains("o1 = 0"),
        "{fp}"
    );
    assert!(ca.preimage.as_deref().expect("preimage").starts_with('['));
    // No halo: every conv point feeds one pooled point, folded in a register (the seed's
    // `conv_sum → activated → max_val`).
    assert_eq!(pair.min_buffer["buffer"], "reg");
    assert_eq!(pair.min_buffer["depth"], 1);
    // The engine's RAW relation of conv → pool is seed 003 §3's (stride 2, window 2), from the
    // statement that writes the conv's output points (`[N, 1, 32, 32, 32]`) to the pool's
    // window reduction.
    let raw = pair
        .dependences
        .iter()
        .find(|d| d.kind == core::DepKind::Raw && d.sink.ends_with("_acc"))
        .expect("RAW into the pool reduction");
    let want = "[N] -> { S_conv[n, g, k, h, w] -> S_pool[n', c', h', w', rh', rw'] : \
        n = n' and g = 0 and k = c' and h = 2h' + rh' and w = 2w' + rw' and \
        0 <= n < N and 0 <= k < 32 and 0 <= h < 32 and 0 <= w < 32 and \
        0 <= n' < N and 0 <= c' < 32 and 0 <= h' < 16 and 0 <= w' < 16 and \
        0 <= rh' < 2 and 0 <= rw' < 2 }";
    let rename = [
        ("S_conv", raw.source.as_str()),
        ("S_pool", raw.sink.as_str()),
    ];
    assert_eq!(
        isl::same(want, &raw.relation, &rename),
        Ok(true),
        "{}",
        raw.relation
    );
    assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
}

#[test]
fn conv_to_pool_3x3_s2_has_halo_one() {
    let c = report("tests/data/poly_core/conv_relu_pool3s2.json");
    let ca = &only_pair(&c).compute_at;
    assert!(ca.ok, "{}", ca.why);
    let (m, n) = (&ca.halo_per_axis["m"], &ca.halo_per_axis["n"]);
    assert_eq!((*m, *n), (1, 1), "{:?}", ca.halo_per_axis);
    assert_eq!(ca.halo_per_axis["b"], 0);
    // 3x3 window, 2x2 of it new per step: 5 halo elements of 4 bytes.
    assert_eq!(ca.halo_bytes, 20);
}

#[test]
fn gemm_region_has_parallel_m_n_and_reduce_k() {
    let c = report("examples/gemm_bias_relu.json");
    assert_eq!(c.regions.len(), 1);
    let r = &c.regions[0].clone();
    assert_eq!(r.parallel_axes, ["m", "n"]);
    assert_eq!(r.reduce_axes, ["k"]);
    // Sizes are symbols: every axis is a tail axis (seed 001 §7.1's example).
    assert_eq!(r.tail_axes, ["m", "n", "k"]);
    assert!(r.affine_closed);
    let acc = r
        .dependences
        .iter()
        .find(|d| d.kind == core::DepKind::Raw && d.source == d.sink && d.source.ends_with("_acc"))
        .expect("the accumulator's self RAW");
    assert_eq!(acc.carried_by, ["k"]);
    assert!(c.pairs.is_empty());
}

#[test]
fn gather_consumer_is_not_compute_at_legal() {
    let c = report("tests/data/poly_core/matmul_gather.json");
    let pair = only_pair(&c);
    assert!(!pair.compute_at.ok);
    assert!(
        pair.compute_at.why.contains("non_scop"),
        "{}",
        pair.compute_at.why
    );
    assert!(
        pair.compute_at.why.contains("gather"),
        "{}",
        pair.compute_at.why
    );
    assert_eq!(pair.min_buffer["buffer"], "gmem");
}

#[test]
fn barrier_hints_follow_the_arch() {
    for (arch, model) in [(Arch::Sm80, "cp_async_group"), (Arch::Sm90, "mbarrier")] {
        let c = optimized("examples/conv_relu_pool.json", arch).poly_core();
        let conv = c
            .regions
            .iter()
            .find(|r| r.statements.iter().any(|s| s.ends_with("_acc")) && r.region.contains("mul"))
            .expect("the conv region");
        assert_eq!(conv.barrier_hints["model"], model, "{arch:?}");
        let pool = c.regions.last().expect("pool region");
        assert_eq!(pool.barrier_hints["model"], "none");
    }
}

fn dump(path: &Path) -> String {
    common::optimized_dump(path, DumpLayer::PolyCore)
}

#[test]
fn poly_core_dumps_match_golden_files() {
    let dumps =
        common::check_golden_files("poly_core", "json", "poly_core", "Poly Core report", &dump);
    for (ex, got) in dumps {
        let doc: serde_json::Value = serde_json::from_str(&got).expect("json");
        assert!(
            doc["poly_core"].get("diagnostics").is_none(),
            "{}: no W2101 on the examples",
            ex.display()
        );
    }
}

/// islpy checks the RAW relations of conv → pool: `W ; R⁻¹` of the view's access maps on their
/// domains equals Poly Core's (skipped without `.islpy/`, as `tests/poly_islpy.rs`).
#[test]
fn conv_pool_raw_agrees_with_islpy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let islpy = root.join(".islpy");
    if !islpy.join("islpy").is_dir() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("islpy is missing in .islpy/ (run bash scripts/install-islpy.sh)");
        }
        eprintln!("skipping the islpy cross-check: .islpy/ is missing");
        return;
    }
    let o = optimized("examples/conv_relu_pool.json", Arch::Sm90);
    let v = dlc_egg::poly::view::build(&o.program);
    let c = o.poly_core();
    let pair = only_pair(&c);
    let mut qs = Vec::new();
    for d in pair
        .dependences
        .iter()
        .filter(|d| d.kind == core::DepKind::Raw)
    {
        let (src, sink) = (
            v.block(&d.source).expect("src"),
            v.block(&d.sink).expect("sink"),
        );
        let w = src
            .accesses
            .iter()
            .position(|a| a.write && a.tensor == d.tensor)
            .expect("write");
        let r = sink
            .accesses
            .iter()
            .position(|a| !a.write && !a.accumulator && a.tensor == d.tensor)
            .expect("read");
        qs.push(serde_json::json!({
            "w": src.access_isl(w), "dw": src.domain_isl(),
            "r": sink.access_isl(r), "dr": sink.domain_isl(), "ours": d.relation}));
    }
    // Since the plan is chosen once, the split is conv | bias+ReLU+pool (the pool runs as the
    // pointwise kernel it is priced as, so bias and ReLU after the max cost nothing): one RAW
    // relation, from the statement writing the conv's output points.
    assert_eq!(qs.len(), 1, "from the conv's output statement");
    let script = "import json, sys, islpy as isl\n\
        ok = True\n\
        for d in json.load(sys.stdin):\n\
        \x20   w = isl.Map(d['w']).intersect_domain(isl.Set(d['dw']))\n\
        \x20   r = isl.Map(d['r']).intersect_domain(isl.Set(d['dr']))\n\
        \x20   dep = w.apply_range(r.reverse())\n\
        \x20   if not isl.Map(d['ours']).is_equal(dep):\n\
        \x20       print('differs:', d['ours'], 'isl:', dep)\n\
        \x20       ok = False\n\
        sys.exit(0 if ok else 1)\n";
    use std::io::Write;
    let mut child = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .env("PYTHONPATH", &islpy)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(serde_json::to_string(&qs).expect("json").as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("python3 finishes");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
