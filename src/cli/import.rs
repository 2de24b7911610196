//! `dlc-egg import model.onnx [-o graph.json]`: imports an ONNX model (`dlc_egg::onnx`) and writes
//! graph.json with its `constants` section, plus the weights sidecar `<stem>.safetensors` beside
//! it when some initializer has more than `dlc_egg::onnx::INLINE_MAX` elements.

use dlc_egg::diag::codes;
use dlc_egg::diag::{Diagnostic, Location};
use dlc_egg::run::Failure;
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
        codes::OUTPUT_WRITE_FAILED,
        Location::Argument {
            argument: path.display().to_string(),
        },
        format!("cannot write the file: {why}"),
        "check that the folder exists and is writable",
    )
}

/// Runs `dlc-egg import`; prints what it wrote and the time of each phase (read + decode,
/// import, write).
pub fn cmd_import(a: &ImportArgs) -> Result<(), Failure> {
    let start = Instant::now();
    let model = dlc_egg::onnx::read_model(&a.model)?;
    let read_s = start.elapsed().as_secs_f64();
    let dir = a.model.parent().unwrap_or(Path::new(""));
    let imported = dlc_egg::onnx::import_model(&model, dir)?;
    drop(model);
    let import_s = start.elapsed().as_secs_f64() - read_s;
    let out = a
        .output
        .clone()
        .unwrap_or_else(|| a.model.with_extension("json"));
    let stem = out
        .file_stem()
        .map_or_else(|| "graph".into(), |s| s.to_string_lossy().into_owned());
    let sidecar_name = format!("{stem}.safetensors");
    let sidecar = out.with_file_name(&sidecar_name);
    let wrote_sidecar = imported
        .write_sidecar(&sidecar)
        .map_err(|e| write_failed(&sidecar, e))?;
    let doc = imported.document(&sidecar_name);
    let text = serde_json::to_string_pretty(&doc).map_err(|e| write_failed(&out, e))?;
    std::fs::write(&out, text + "\n").map_err(|e| write_failed(&out, e))?;
    let nodes = doc["graph"].as_array().map_or(0, Vec::len);
    let total = start.elapsed().as_secs_f64();
    println!(
        "wrote {} ({nodes} nodes, {} constants{}) in {total:.3} s (read {read_s:.3} s, import {import_s:.3} s, write {:.3} s)",
        out.display(),
        imported.constants.len(),
        if wrote_sidecar {
            format!(", weights in {}", sidecar.display())
        } else {
            String::new()
        },
        total - read_s - import_s
    );
    Ok(())
}
