//! `--dump dot` / `--dump egraph-dot` of `lower` and `optimize` on every example render with
//! graphviz `dot -Tsvg`. Without `dot` on the PATH the test fails under CI (`CI=true`; `.ci/run`
//! installs graphviz) and is skipped with a message elsewhere.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_dlc-egg");

fn dot_available() -> bool {
    Command::new("dot")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Renders DOT text to SVG with graphviz; returns the SVG.
fn render(text: &str) -> Result<String, String> {
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(text.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() || !out.stderr.is_empty() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn dump(cmd: &str, layer: &str, path: &std::path::Path) -> String {
    let out = Command::new(BIN)
        .args([cmd, "--dump", layer, path.to_str().unwrap_or("")])
        .output()
        .expect("runs dlc-egg");
    assert!(
        out.status.success(),
        "{cmd} --dump {layer} {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_dump_renders_with_graphviz() {
    if !dot_available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "graphviz `dot` is not installed (CI needs it: .ci/run installs it with apt-get)"
        );
        eprintln!("skipped: graphviz `dot` is not installed (apt-get install graphviz)");
        return;
    }
    for path in common::example_paths() {
        for (cmd, layer, must) in [
            ("lower", "dot", "cluster_tiny"),
            ("lower", "egraph-dot", "e-class"),
            ("optimize", "dot", "predicted"),
            ("optimize", "egraph-dot", "e-class"),
        ] {
            let text = dump(cmd, layer, &path);
            assert!(text.starts_with("digraph "), "plain DOT expected:\n{text}");
            assert!(text.contains(must), "{cmd} {layer}: no `{must}`");
            let svg = render(&text)
                .unwrap_or_else(|e| panic!("{cmd} --dump {layer} {}: {e}", path.display()));
            assert!(svg.contains("<svg"), "{}", path.display());
        }
    }
}

#[test]
fn cover_clusters_name_template_time_and_bytes() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/conv_relu_pool.json");
    let text = dump("optimize", "dot", &path);
    // One cluster per kernel, labelled with its template and predicted time.
    let clusters = text.matches("subgraph \"cluster_").count();
    assert!(clusters >= 1, "{text}");
    assert_eq!(clusters, text.matches("predicted ").count(), "{text}");
    // Edges carry the buffer, its type and its bytes (W: 32·16·3·3 fp32 = 18432 B).
    assert!(text.contains("W\\nfp32[32, 16, 3, 3]\\n18432 B"), "{text}");
    // With another layer, DOT travels as a JSON string.
    let both = dump("lower", "frontend,dot", &path);
    let v: serde_json::Value = serde_json::from_str(&both).expect("json");
    assert!(v["dot"]
        .as_str()
        .is_some_and(|s| s.starts_with("digraph lower")));
}

#[test]
fn egraph_dot_is_cut_with_a_note() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp_gelu.json");
    let text = dump("optimize", "egraph-dot", &path);
    let classes = text.matches("subgraph \"cluster_").count();
    assert!(classes <= dlc_egg::viz::EGRAPH_CLASS_LIMIT, "{classes}");
    assert!(text.contains(&format!("cut to {classes} of ")), "no note");
}
