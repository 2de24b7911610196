//! Output writing for `run`: one `.npy` file per signature output, named so no tensor name can
//! escape the output directory.

use super::*;
use crate::diag::codes;

/// Writes every signature output to `<out_dir>/<file name>.npy` (see [`output_file_name`]),
/// creating the directory. An output missing from `outputs` is a compiler bug.
pub fn write_outputs(
    graph: &Graph,
    outputs: &BTreeMap<String, Tensor>,
    out_dir: &Path,
) -> Result<Vec<WrittenOutput>, Failure> {
    std::fs::create_dir_all(out_dir).map_err(|e| {
        Failure::user(
            Diagnostic::error(
                codes::OUTPUT_WRITE_FAILED,
                Location::Argument {
                    argument: format!("--out-dir {}", out_dir.display()),
                },
                format!("cannot create the output directory: {e}"),
                "choose a writable directory with --out-dir",
            )
            .with("path", out_dir.display()),
        )
    })?;
    let mut written = Vec::new();
    for o in &graph.signature.outputs {
        let t = outputs
            .get(&o.tensor)
            .ok_or_else(|| Failure::internal(missing_output(&o.tensor)))?;
        let path = out_dir.join(format!("{}.npy", output_file_name(&o.tensor)));
        npy::write_tensor(&path, t)?;
        written.push(WrittenOutput {
            tensor: o.tensor.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
            path,
        });
    }
    Ok(written)
}

/// The file stem of an output: the tensor name with every character outside
/// `[A-Za-z0-9_.-]` (and a leading `.`) replaced by `_`, so no name can escape the directory.
pub fn output_file_name(tensor: &str) -> String {
    let mut s: String = tensor
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        s.replace_range(0..0, "_");
    }
    s
}

pub(super) fn missing_output(tensor: &str) -> Diagnostic {
    Diagnostic::error(
        codes::OUTPUT_NOT_COMPUTED,
        Location::Tensor {
            tensor: tensor.to_string(),
        },
        "the evaluator returned no value for this signature output",
        "this is a compiler bug; please report it with the graph.json",
    )
}
