//! Poly-View (`--dump poly_view`, seed 001 §5) on the examples: the Conv, Pool and Conv+Pool
//! domains, access relations and RAW relation of seed 003 §1–3, compared structurally (isl text
//! read back and canonicalized: variables renamed by position, constraint sets compared, tuple
//! names renamed by a table), and golden dumps (`tests/golden/poly_view/<example>.json`,
//! regenerate with `UPDATE_GOLDEN=1 cargo test --release --test poly_view`).

mod common;

use dlc_egg::dump::DumpLayer;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::poly::view::{self, isl, PolyView};
use dlc_egg::{ir::frontend, lower};
use std::path::Path;

fn view_of(name: &str) -> PolyView {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}.json"));
    let g = frontend::load_file(&path).expect("loads");
    let p = lower::lower(&g).expect("lowers");
    // Seed 003 §1–3 model the Conv and the Pool as two statements: the program before
    // compute-at embeds one in the other (`tests/compute_at.rs` covers the fused kernel).
    let opts = OptimizeOptions {
        compute_at: false,
        ..OptimizeOptions::default()
    };
    let o = optimize(&p, &opts).expect("optimizes");
    view::build(&o.program)
}

/// The seed's text with its size parameters replaced by the example's values (the seed keeps
/// every size symbolic; the example fixes all but the batch `N`). Substituted names leave the
/// parameter list.
fn seed(text: &str, values: &[(&str, i64)]) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        match values.iter().find(|(n, _)| n == word) {
            Some((_, v)) => out.push_str(&v.to_string()),
            None => out.push_str(word),
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' || (c == '\'' && !word.is_empty()) {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    // `[N, 32, 3] -> {` → `[N] -> {`.
    if let (Some(open), Some(close)) = (out.find('['), out.find("] -> {")) {
        if open == 0 {
            let kept: Vec<&str> = out[1..close]
                .split(',')
                .map(str::trim)
                .filter(|p| p.parse::<i64>().is_err())
                .collect();
            out = format!("[{}]{}", kept.join(", "), &out[close + 1..]);
        }
    }
    out
}

fn assert_same(what: &str, seed_text: &str, ours: &str, rename: &[(&str, &str)]) {
    let a = isl::canonical(seed_text, rename).unwrap_or_else(|e| panic!("{what}: seed: {e}"));
    let b = isl::canonical(ours, &[]).unwrap_or_else(|e| panic!("{what}: ours: {e}"));
    assert!(
        a == b,
        "{what} differs from the seed\n seed: {seed_text}\n ours: {ours}\n seed canon: {a:?}\n \
         ours canon: {b:?}"
    );
}

// Seed 003 §1 (Conv2D NCHW), with the padding of the examples (pad P: the input index shifts by
// −P and the read is guarded to the input, seed 001 §4.5 Conv piecewise): domain, reads, writes.
const CONV_DOMAIN: &str = "[N, Cout, H_out, W_out, Cin, KH, KW] -> {
    S_conv[n, k, h, w, c, rh, rw] :
        0 <= n < N and 0 <= k < Cout and 0 <= h < H_out and 0 <= w < W_out and
        0 <= c < Cin and 0 <= rh < KH and 0 <= rw < KW }";
const CONV_READS: &str = "[N, Cout, H_out, W_out, Cin, KH, KW, S, P, H, W] -> {
    S_conv[n, k, h, w, c, rh, rw] -> In[n, c, h * S + rh - P, w * S + rw - P] :
        0 <= h * S + rh - P < H and 0 <= w * S + rw - P < W;
    S_conv[n, k, h, w, c, rh, rw] -> Weight[k, c, rh, rw];
    S_conv[n, k, h, w, c, rh, rw] -> Out[n, k, h, w] }";
const CONV_WRITES: &str = "[N, Cout, H_out, W_out, Cin, KH, KW] -> {
    S_conv[n, k, h, w, c, rh, rw] -> Out[n, k, h, w] }";

// Seed 003 §2 (max pool NCHW).
const POOL_DOMAIN: &str = "[N, C, Pool_H, Pool_W, Pool_KH, Pool_KW] -> {
    S_pool[n, c, h, w, rh, rw] :
        0 <= n < N and 0 <= c < C and 0 <= h < Pool_H and 0 <= w < Pool_W and
        0 <= rh < Pool_KH and 0 <= rw < Pool_KW }";
const POOL_WRITES: &str = "[N, C, Pool_H, Pool_W, Pool_KH, Pool_KW] -> {
    S_pool[n, c, h, w, rh, rw] -> Pool[n, c, h, w] }";

/// The conv statement's domain, reads and writes equal seed 003 §1's (`s` substitutes the
/// example's sizes, `rename` maps the seed's names to ours).
fn assert_conv_matches_seed(
    conv: &view::Stmt,
    s: &dyn Fn(&str) -> String,
    rename: &[(&str, &str)],
) {
    assert_same("conv domain", &s(CONV_DOMAIN), &conv.domain_isl(), rename);
    assert_same(
        "conv reads",
        &s(CONV_READS),
        &conv.accesses_isl(false),
        rename,
    );
    assert_same(
        "conv writes",
        &s(CONV_WRITES),
        &conv.accesses_isl(true),
        rename,
    );
}

// Seed 003 §2's pool reads under the cover the extractor chooses (plan-once prices): the conv
// kernel stores its accumulator as `Out[n, 0, k, h, w]` (the size-1 channel-group axis of its
// output), and bias + ReLU run after the max in the pool kernel (monotone: they commute with
// it), which therefore also reads `Bias[c]`.
const POOL_READS_SPLIT: &str = "[N, C, Pool_H, Pool_W, Pool_KH, Pool_KW, Sp] -> {
    S_pool[n, c, h, w, rh, rw] -> Out[n, 0, c, h * Sp + rh, w * Sp + rw];
    S_pool[n, c, h, w, rh, rw] -> Bias[c];
    S_pool[n, c, h, w, rh, rw] -> Pool[n, c, h, w] }";

// Seed 003 §3's flow dependence under that cover: from the conv kernel's store statement (its
// domain the output points `[n, 0, k, h, w]`) to the pool, `k = c ∧ h = h'·Sp + rh ∧ w = w'·Sp +
// rw` (and the same batch).
const RAW_SPLIT: &str = "[N, Cout, H_out, W_out, C, Pool_H, Pool_W, Pool_KH, Pool_KW, Sp] -> {
    S_store[n, z, k, h, w] -> S_pool[n', c', h', w', rh', rw'] :
        n = n' and z = 0 and k = c' and h = h' * Sp + rh' and w = w' * Sp + rw' and
        0 <= n < N and 0 <= z < 1 and 0 <= k < Cout and 0 <= h < H_out and 0 <= w < W_out and
        0 <= n' < N and 0 <= c' < C and 0 <= h' < Pool_H and 0 <= w' < Pool_W and
        0 <= rh' < Pool_KH and 0 <= rw' < Pool_KW }";

// With plan-once prices the extractor splits the example as conv | bias+ReLU+pool (the pool is
// the pointwise kernel it runs as, so bias and ReLU after the max cost nothing). The conv
// statement accumulates into the region's accumulator `acc` (seed 003 §1's `Out`), a store
// statement writes it to `_t0`, and the pool reads `_t0` (§2 and §3 as `POOL_READS_SPLIT` and
// `RAW_SPLIT` state them).
#[test]
fn conv_relu_pool_matches_seed_003() {
    let v = view_of("conv_relu_pool");
    // conv: X [N,16,32,32], W [32,16,3,3], stride 1, pad 1; pool 2x2 stride 2.
    let sizes: &[(&str, i64)] = &[
        ("Cout", 32),
        ("H_out", 32),
        ("W_out", 32),
        ("Cin", 16),
        ("KH", 3),
        ("KW", 3),
        ("S", 1),
        ("P", 1),
        ("H", 32),
        ("W", 32),
        ("C", 32),
        ("Pool_H", 16),
        ("Pool_W", 16),
        ("Pool_KH", 2),
        ("Pool_KW", 2),
        ("Sp", 2),
    ];
    let conv = v.block("S_k0_reduce_mul_acc").expect("the conv statement");
    let store = v
        .block("S_k0_reduce_mul")
        .expect("the conv's store statement");
    let pool = v
        .block("S_k1_reduce_relu_add_acc")
        .expect("the pool statement");
    let conv_rename = [
        ("S_conv", conv.name.as_str()),
        ("In", "X"),
        ("Weight", "W"),
        ("Out", "acc"),
    ];
    let pool_rename = [
        ("S_pool", pool.name.as_str()),
        ("S_store", store.name.as_str()),
        ("Out", "_t0"),
        ("Bias", "bias"),
        ("Pool", "Y"),
    ];
    assert_eq!(conv.dims.len(), 7, "the seed's 7-D conv nest");
    assert_eq!(pool.dims.len(), 6, "the seed's 6-D pool nest");
    let s = |t: &str| seed(t, sizes);
    assert_conv_matches_seed(conv, &s, &conv_rename);
    assert_same(
        "pool domain",
        &s(POOL_DOMAIN),
        &pool.domain_isl(),
        &pool_rename,
    );
    assert_same(
        "pool reads",
        &s(POOL_READS_SPLIT),
        &pool.accesses_isl(false),
        &pool_rename,
    );
    assert_same(
        "pool writes",
        &s(POOL_WRITES),
        &pool.accesses_isl(true),
        &pool_rename,
    );

    // §3 combined domain: the conv and pool pieces of the union.
    let combined = format!(
        "[N] -> {{ {}; {} }}",
        body(&s(CONV_DOMAIN)),
        body(&s(POOL_DOMAIN))
    );
    let rename = [
        ("S_conv", conv.name.as_str()),
        ("S_pool", pool.name.as_str()),
    ];
    let want = isl::canonical(&combined, &rename).expect("seed union");
    let got: std::collections::BTreeSet<_> = isl::canonical(&v.domain_union(), &[])
        .expect("our union")
        .into_iter()
        .filter(|p| p.input.0 == conv.name || p.input.0 == pool.name)
        .collect();
    assert_eq!(want, got, "combined domain");

    let raw = v
        .edges
        .iter()
        .find(|e| e.source == store.name && e.sink == pool.name)
        .expect("a conv store → pool edge");
    assert_eq!(raw.tensor, "_t0");
    assert_same(
        "conv → pool RAW",
        &s(RAW_SPLIT),
        &raw.relation,
        &pool_rename,
    );
}

/// The part of `[..] -> { body }` between the braces.
fn body(t: &str) -> &str {
    let (a, b) = (t.find('{').expect("{"), t.rfind('}').expect("}"));
    t[a + 1..b].trim()
}

#[test]
fn conv3x3_s2_p1_matches_seed_003_conv() {
    let v = view_of("conv3x3_s2_p1_silu");
    // X [N,64,56,56], W [64,64,3,3], stride 2, pad 1 → 28x28.
    let sizes: &[(&str, i64)] = &[
        ("Cout", 64),
        ("H_out", 28),
        ("W_out", 28),
        ("Cin", 64),
        ("KH", 3),
        ("KW", 3),
        ("S", 2),
        ("P", 1),
        ("H", 56),
        ("W", 56),
    ];
    let conv = v
        .blocks
        .iter()
        .find(|b| b.dims.len() == 7)
        .expect("a 7-D conv statement");
    let rename = [
        ("S_conv", conv.name.as_str()),
        ("In", "X"),
        ("Weight", "W"),
        ("Out", "Y"),
    ];
    let s = |t: &str| seed(t, sizes);
    assert_conv_matches_seed(conv, &s, &rename);
    // Seed 001 §15.2: pattern `conv`, affine offsets (2h + kh − 1, 2w + kw − 1).
    let attrs = conv
        .pattern
        .as_ref()
        .expect("a contraction")
        .attrs(&conv.dims);
    assert_eq!(attrs["pattern"], "conv");
    assert_eq!(attrs["affine_offsets"]["X"][0]["index"], "2*m + k1 - 1");
    assert_eq!(attrs["affine_offsets"]["X"][1]["offset"], -1);
}

fn dump(path: &Path) -> String {
    common::optimized_dump(path, DumpLayer::PolyView)
}

#[test]
fn poly_view_dumps_match_golden_files() {
    for (ex, got) in
        common::check_golden_files("poly_view", "json", "poly_view", "Poly-View", &dump)
    {
        assert_eq!(got, dump(&ex), "{}: not deterministic", ex.display());
    }
}

#[test]
fn every_isl_string_of_the_examples_reads_back() {
    for ex in common::example_paths() {
        let doc: serde_json::Value = serde_json::from_str(&dump(&ex)).expect("json");
        let pv = &doc["poly_view"];
        let mut texts: Vec<&str> = Vec::new();
        for b in pv["blocks"].as_array().expect("blocks") {
            texts.push(b["domain"]["set"].as_str().expect("set"));
            for a in b["accesses"].as_array().expect("accesses") {
                texts.push(a["map"].as_str().expect("map"));
                if let Some(d) = a["domain"].as_str() {
                    texts.push(d);
                }
            }
        }
        for e in pv["edges"].as_array().expect("edges") {
            texts.push(e["relation"].as_str().expect("relation"));
        }
        for k in ["domain", "reads", "writes"] {
            texts.push(pv["union"][k].as_str().expect("union"));
        }
        for t in texts {
            isl::canonical(t, &[]).unwrap_or_else(|e| panic!("{}: `{t}`: {e}", ex.display()));
        }
        assert!(pv.get("diagnostics").is_none(), "{}", ex.display());
    }
}
