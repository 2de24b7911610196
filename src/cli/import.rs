//! `dlc-egg import model.onnx [-o graph.json]`: imports an ONNX model (`crate::onnx`) and writes
//! graph.json with its `constants` section, plus the weights sidecar `<stem>.safetensors` beside
//! it when some initializer has more than `crate::onnx::INLINE_MAX` elements.

use crate::diag::{Diagnostic, Location};
use crate::run::Failure;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Arguments of `dlc-egg import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The ONNX model (external-data files are read from its folder).
    pub model: PathBuf,
    /// Where to write graph.json (default: the model's path with `.json`).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

fn write_failed(path: &Path, why: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::error(
        "E0312",
        "OutputWriteFailed",
        Location::Argument {
            argument: path.display().to_string(),
        },
        format!("cannot write the file: {why}"),
        "check that the folder exists and is writable",
    )
}

/// Runs `dlc-egg import`.
pub fn cmd_import(a: &ImportArgs) -> Result<(), Failure> {
    let start = Instant::now();
    let imported = crate::onnx::import_file(&a.model)?;
    let out = a
        .output
        .clone()
        .unwrap_or_else(|| a.model.with_extension("json"));
    let stem = out
        .file_stem()
        .map_or_else(|| "graph".into(), |s| s.to_string_lossy().into_owned());
    let sidecar_name = format!("{stem}.safetensors");
    let sidecar = out.with_file_name(&sidecar_name);
    let bytes = imported
        .sidecar_bytes()
        .map_err(|e| Failure::internal(write_failed(&sidecar, e)))?;
    if let Some(b) = &bytes {
        std::fs::write(&sidecar, b).map_err(|e| write_failed(&sidecar, e))?;
    }
    let doc = imported.document(&sidecar_name);
    let text = serde_json::to_string_pretty(&doc).map_err(|e| write_failed(&out, e))?;
    std::fs::write(&out, text + "\n").map_err(|e| write_failed(&out, e))?;
    let nodes = doc["graph"].as_array().map_or(0, Vec::len);
    println!(
        "wrote {} ({nodes} nodes, {} constants{}) in {:.3} s",
        out.display(),
        imported.constants.len(),
        if bytes.is_some() {
            format!(", weights in {}", sidecar.display())
        } else {
            String::new()
        },
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
