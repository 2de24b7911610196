//! `timing.json`: the per-run and per-kernel times of `dlc-egg run --repeat N`.

use crate::cuda::Timings;
use crate::diag::codes;
use crate::diag::{Diagnostic, Failure, Location};
use std::path::{Path, PathBuf};

/// `{"repeat": N, "total_ms": …, "kernels": [{"name", "ms"}]}`.
pub fn timing_json(repeat: u32, t: &Timings) -> serde_json::Value {
    let kernels: Vec<serde_json::Value> = t
        .kernels
        .iter()
        .map(|(name, ms)| serde_json::json!({"name": name, "ms": ms}))
        .collect();
    serde_json::json!({"repeat": repeat, "total_ms": t.total_ms, "kernels": kernels})
}

/// Writes [`timing_json`] to `<out_dir>/timing.json` (`E0312` when it cannot be written).
pub fn write_timing(out_dir: &Path, repeat: u32, t: &Timings) -> Result<PathBuf, Failure> {
    let path = out_dir.join("timing.json");
    let text = serde_json::to_string_pretty(&timing_json(repeat, t))
        .map_err(|e| Failure::internal(write_failed(&path, &e.to_string())))?;
    std::fs::write(&path, text + "\n")
        .map_err(|e| Failure::user(write_failed(&path, &e.to_string())))?;
    Ok(path)
}

fn write_failed(path: &Path, why: &str) -> Diagnostic {
    Diagnostic::error(
        codes::OUTPUT_WRITE_FAILED,
        Location::Argument {
            argument: format!("--out-dir {}", path.parent().unwrap_or(path).display()),
        },
        format!("cannot write {}: {why}", path.display()),
        "choose a writable directory with --out-dir",
    )
    .with("path", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_document_has_the_documented_keys() {
        let t = Timings {
            total_ms: 0.5,
            kernels: vec![("k0".into(), 0.25), ("k1".into(), 0.125)],
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let path = write_timing(dir.path(), 10, &t).expect("written");
        let text = std::fs::read_to_string(path).expect("read");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"repeat": 10, "total_ms": 0.5,
                "kernels": [{"name": "k0", "ms": 0.25}, {"name": "k1", "ms": 0.125}]})
        );
        let e = write_timing(&dir.path().join("missing"), 1, &t).expect_err("no dir");
        assert_eq!(e.diagnostics.first_code(), "E0312");
    }
}
