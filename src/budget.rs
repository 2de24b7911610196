//! Resource budgets (issue 19): limits on what one command may read, hold and build, checked
//! before the work starts, so that an input too large for the machine is a coded diagnostic
//! (exit 2) naming the budget and the flag that raises it, never an allocation abort or an
//! internal error.
//!
//! | code | kind | budget (default) | flag |
//! | --- | --- | --- | --- |
//! | E1400 | InputFileTooLarge | bytes of a graph or `.npy` file (1 GiB) | `--max-file-bytes` |
//! | E1401 | TooManyNodes | frontend nodes of a graph (20,000) | `--max-nodes` |
//! | E1402 | TooManyConcatInputs | inputs of one `Concat` (256) | `--max-concat-inputs` |
//! | E1403 | RankTooLarge | rank of a tensor at load (16) | `--max-rank` |
//! | E1404 | TensorOverBudget | bytes of one tensor `run` materializes (4 GiB) | `--max-tensor-bytes` |
//! | E1405 | MemoryOverBudget | bytes `run` holds at once, or `optimize`'s e-graph estimate (16 GiB) | `--max-memory` |
//! | E1406 | NpyHeaderTooLong | header length of a `.npy` file ([`NPY_HEADER_CAP`]) | — |
//! | E1407 | AllocationFailed | a buffer sized by the input could not be allocated | `--max-memory` (lower it) |
//! | E1408 | SizeBeyondTarget | a tensor larger than any target's global memory, or (compiled programs) an axis over 2^32 − 1 | — |
//! | E1409 | ExternalDataOverBudget | bytes read from one ONNX external-data file for one tensor (the file budget) | `--max-file-bytes` |
//!
//! Sizes are computed in `u128` (a byte count of any shape whose dimensions fit `i64` cannot
//! overflow it, up to rank 2), and saturate beyond.

// A `Diagnostic` is the project's user-facing error (crate::diag); it is large by design and
// returned only on cold failure paths, so boxing it would only add noise.
#![allow(clippy::result_large_err)]

use crate::diag::codes;
use crate::diag::{Diagnostic, Location};
use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::frontend::{Graph, Op};
use crate::ir::tiny::{Program, Src, UOp};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Longest `.npy` header accepted, bytes (numpy itself refuses headers over 10,000 bytes unless
/// told otherwise; a header announcing 4 GiB would otherwise be allocated before it is read).
pub const NPY_HEADER_CAP: u64 = 1 << 16;

/// Estimated bytes `optimize` holds per Tiny IR node (e-graph, explanations, region and plan
/// caches), measured on elementwise chains (`bench/peak_memory.sh`).
pub const OPTIMIZE_BYTES_PER_NODE: u64 = 256 << 10;

/// The file budget applied to ONNX external data (set from `--max-file-bytes` when a model is
/// loaded; the default budget otherwise).
static EXTERNAL_DATA_BUDGET: AtomicU64 = AtomicU64::new(1 << 30);

/// Sets the byte budget of every later ONNX external-data read ([`read_file_range`]).
pub fn set_external_data_budget(max: u64) {
    EXTERNAL_DATA_BUDGET.store(max, Ordering::Relaxed);
}

/// Reads bytes `offset..offset + len` (to the end without `len`) of the regular file `path`
/// (ONNX external data), checking the range against the file's size and the external-data
/// budget ([`set_external_data_budget`]) before anything is read, into a fallibly allocated
/// buffer. Errors are text naming their code (`E1409`, `E1407`) for the caller's diagnostic.
pub fn read_file_range(path: &Path, offset: u64, len: Option<u64>) -> Result<Vec<u8>, String> {
    use std::io::{Seek, SeekFrom};
    let shown = path.display();
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    if !meta.is_file() {
        return Err(format!("`{shown}` is not a regular file"));
    }
    let size = meta.len();
    let len = len.unwrap_or_else(|| size.saturating_sub(offset));
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(format!(
            "`{shown}` is shorter than offset {offset} + length {len}"
        ));
    }
    let max = EXTERNAL_DATA_BUDGET.load(Ordering::Relaxed);
    if len > max {
        return Err(format!(
            "{} {}: the external data of this tensor is {len} bytes, over the file budget of \
             {max} bytes; raise it with --max-file-bytes",
            codes::EXTERNAL_DATA_OVER_BUDGET.0,
            codes::EXTERNAL_DATA_OVER_BUDGET.1
        ));
    }
    let n = usize::try_from(len).map_err(|_| format!("{len} bytes do not fit in memory"))?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(n).map_err(|_| {
        format!(
            "{} {}: cannot allocate {len} bytes for `{shown}`",
            codes::ALLOCATION_FAILED.0,
            codes::ALLOCATION_FAILED.1
        )
    })?;
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    file.take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    if bytes.len() != n {
        return Err(format!(
            "`{shown}` is shorter than offset {offset} + length {len}"
        ));
    }
    Ok(bytes)
}

/// Estimated bytes `optimize` holds per `Concat` input (the concatenation's piecewise index
/// expressions grow with the input count), measured on wide Concats.
pub const OPTIMIZE_BYTES_PER_CONCAT_INPUT: u64 = 4 << 20;

/// Largest element count of one tensor any target can address (2^48: beyond it the byte count of
/// an fp32 tensor exceeds the 48-bit virtual address space of every GPU and CPU planned for).
pub const MAX_TARGET_ELEMENTS: u128 = 1 << 48;

/// Budgets checked when a graph is loaded (every command that reads a graph).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadBudgets {
    /// Bytes of the graph file (and of each `.npy` input of `run`).
    pub max_file_bytes: u64,
    /// Frontend nodes.
    pub max_nodes: usize,
    /// Inputs of one `Concat`.
    pub max_concat_inputs: usize,
    /// Rank of any tensor.
    pub max_rank: usize,
}

impl Default for LoadBudgets {
    fn default() -> LoadBudgets {
        LoadBudgets {
            max_file_bytes: 1 << 30,
            max_nodes: 20_000,
            max_concat_inputs: 256,
            max_rank: 16,
        }
    }
}

/// Budgets of `run`: what the evaluator may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunBudgets {
    /// Bytes of one tensor (input, intermediate or output).
    pub max_tensor_bytes: u64,
    /// Bytes held at once (a liveness estimate over the Tiny IR program, inputs included).
    pub max_memory: u64,
    /// Bytes of each `.npy` input file.
    pub max_file_bytes: u64,
}

impl Default for RunBudgets {
    fn default() -> RunBudgets {
        RunBudgets {
            max_tensor_bytes: 4 << 30,
            max_memory: 16 << 30,
            max_file_bytes: LoadBudgets::default().max_file_bytes,
        }
    }
}

/// Default of `optimize --max-memory`, bytes.
pub const DEFAULT_OPTIMIZE_MEMORY: u64 = 16 << 30;

/// Parses a byte count: an integer with an optional binary suffix `K`, `M`, `G` or `T` (`4G` =
/// 4 GiB). Used as the clap value parser of the byte-budget flags.
pub fn parse_bytes(raw: &str) -> Result<u64, String> {
    let s = raw.trim();
    let (digits, shift) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("`{raw}`: unknown size suffix `{c}` (K, M, G or T)")),
            };
            (&s[..i], shift)
        }
        _ => (s, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{raw}` is not a byte count (e.g. 4096, 512M, 4G)"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{raw}` does not fit in 64 bits"))
}

/// Reads a whole file, refusing one over `max` bytes (`E1400`) without reading past `max + 1`
/// bytes (so `/dev/zero` or a FIFO is refused, not read until memory runs out). Read failures
/// are `E0000 UnreadableInput`.
pub fn read_file_limited(path: &Path, max: u64) -> Result<Vec<u8>, Diagnostic> {
    let file = std::fs::File::open(path).map_err(|e| unreadable(path, e))?;
    let hint = file.metadata().map(|m| m.len()).unwrap_or(0);
    read_open_file_limited(file, hint, path, max)
}

/// [`read_file_limited`] of a file already open, `hint` its size from its metadata (0 when
/// unknown, e.g. a FIFO).
fn read_open_file_limited(
    file: std::fs::File,
    hint: u64,
    path: &Path,
    max: u64,
) -> Result<Vec<u8>, Diagnostic> {
    if hint > max {
        return Err(file_too_large(path, hint, max));
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(hint as usize)
        .map_err(|_| allocation_failed(&path.display().to_string(), u128::from(hint)))?;
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| unreadable(path, e))?;
    if bytes.len() as u64 > max {
        return Err(file_too_large(path, bytes.len() as u64, max));
    }
    Ok(bytes)
}

/// A whole file as shared bytes, refusing one over `max` bytes (`E1400`): a regular file is
/// mapped ([`crate::mapped`], nothing is read until used: an ONNX model's weights are slices of
/// the map), anything else is read whole as [`read_file_limited`] reads it. Failures are `E0000
/// UnreadableInput`.
pub fn map_file_limited(path: &Path, max: u64) -> Result<crate::mapped::SharedBytes, Diagnostic> {
    let file = std::fs::File::open(path).map_err(|e| unreadable(path, e))?;
    let meta = file.metadata().map_err(|e| unreadable(path, e))?;
    if !meta.is_file() {
        // Read from the descriptor already open (a FIFO is not opened twice).
        return read_open_file_limited(file, meta.len(), path, max)
            .map(crate::mapped::SharedBytes::owned);
    }
    if meta.len() > max {
        return Err(file_too_large(path, meta.len(), max));
    }
    crate::mapped::SharedBytes::map(&file, meta.len()).map_err(|e| unreadable(path, e))
}

/// `E0000 UnreadableInput` for a read failure of `path`.
fn unreadable(path: &Path, e: std::io::Error) -> Diagnostic {
    Diagnostic::unreadable_input(path, format!("cannot read the file: {e}"))
}

fn file_too_large(path: &Path, bytes: u64, max: u64) -> Diagnostic {
    Diagnostic::error(
        codes::INPUT_FILE_TOO_LARGE,
        Location::Argument {
            argument: path.display().to_string(),
        },
        format!("the file holds more than {max} bytes, the input-file budget"),
        "raise the budget with --max-file-bytes (e.g. --max-file-bytes 4G) if the file is meant",
    )
    .with("bytes_read", bytes)
    .with("budget", max)
}

/// `E1407` for a buffer of `bytes` bytes that could not be allocated while producing `what`.
pub fn allocation_failed(what: &str, bytes: u128) -> Diagnostic {
    Diagnostic::error(
        codes::ALLOCATION_FAILED,
        Location::Argument {
            argument: what.to_string(),
        },
        format!("could not allocate {bytes} bytes for {what}"),
        "make the sizes smaller, or lower --max-memory / --max-tensor-bytes so that the budget \
         refuses such inputs before any work starts",
    )
    .with("bytes", bytes)
}

/// A vector of `n` items from `items`, allocated fallibly (`E1407` naming `what`).
pub fn try_collect<T>(
    n: usize,
    items: impl IntoIterator<Item = T>,
    what: &str,
) -> Result<Vec<T>, Diagnostic> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        allocation_failed(
            what,
            (n as u128).saturating_mul(std::mem::size_of::<T>() as u128),
        )
    })?;
    v.extend(items.into_iter().take(n));
    Ok(v)
}

/// Checks the load budgets on a loaded graph: node count, `Concat` inputs, ranks.
pub fn check_load(graph: &Graph, b: &LoadBudgets) -> Result<(), Vec<Diagnostic>> {
    let mut diags = Vec::new();
    if graph.nodes.len() > b.max_nodes {
        diags.push(
            Diagnostic::error(
                codes::TOO_MANY_NODES,
                Location::Document,
                format!(
                    "the graph has {} nodes, over the node budget of {}",
                    graph.nodes.len(),
                    b.max_nodes
                ),
                "raise the budget with --max-nodes N (optimize needs about 256 KiB per Tiny IR \
                 node, see --max-memory)",
            )
            .with("nodes", graph.nodes.len())
            .with("budget", b.max_nodes),
        );
    }
    for n in &graph.nodes {
        if matches!(n.op, Op::Concat { .. }) && n.inputs.len() > b.max_concat_inputs {
            diags.push(
                Diagnostic::error(
                    codes::TOO_MANY_CONCAT_INPUTS,
                    Location::Node {
                        node: n.name.clone(),
                        op: "Concat".into(),
                    },
                    format!(
                        "the Concat has {} inputs, over the budget of {}",
                        n.inputs.len(),
                        b.max_concat_inputs
                    ),
                    "concatenate in stages, or raise the budget with --max-concat-inputs N",
                )
                .with("inputs", n.inputs.len())
                .with("budget", b.max_concat_inputs),
            );
        }
    }
    for (name, t) in &graph.tensors {
        if t.shape.len() > b.max_rank {
            diags.push(
                Diagnostic::error(
                    codes::RANK_TOO_LARGE,
                    Location::Tensor {
                        tensor: name.clone(),
                    },
                    format!(
                        "the tensor has rank {}, over the rank budget of {}",
                        t.shape.len(),
                        b.max_rank
                    ),
                    "merge axes with a Reshape, or raise the budget with --max-rank N",
                )
                .with("rank", t.shape.len())
                .with("budget", b.max_rank),
            );
            break;
        }
    }
    if diags.is_empty() {
        Ok(())
    } else {
        Err(diags)
    }
}

/// Elements of `shape` under `lookup` in `u128` (saturating); `None` when a size is unbound.
pub fn elements(shape: &[Dim], lookup: &dyn Fn(&str) -> Option<i64>) -> Option<u128> {
    let mut n: u128 = 1;
    for d in shape {
        let v = d.eval(lookup).ok()?;
        n = n.saturating_mul(u128::try_from(v.max(0)).unwrap_or(0));
    }
    Some(n)
}

/// Bytes the evaluator stores per element of `dtype` (floats are held as `f32`, `bool` as one
/// byte).
fn stored_bytes(dtype: DType) -> u128 {
    if dtype == DType::Bool {
        1
    } else {
        4
    }
}

/// Checks `run`'s budgets over the Tiny IR program under `bindings` before anything is
/// materialized: every value the evaluator stores (not the values it fuses into their consumer)
/// against `max_tensor_bytes` (`E1404`), and the peak of the
/// values alive at once (each value lives from its node to its last reader, a view keeps its
/// source alive) against `max_memory` (`E1405`).
pub fn check_run(
    prog: &Program,
    bindings: &BTreeMap<String, i64>,
    b: &RunBudgets,
) -> Result<(), Diagnostic> {
    let lookup = |s: &str| bindings.get(s).or_else(|| prog.symbols.get(s)).copied();
    let n = prog.nodes.len();
    // last[i]: the last node reading i's storage (views forward to their source).
    let mut owner: Vec<usize> = (0..n).collect();
    let mut last: Vec<usize> = (0..n).collect();
    for node in &prog.nodes {
        let i = node.id.index();
        for s in &node.src {
            if let Src::Node(id) = s {
                let o = owner[id.index()];
                last[o] = last[o].max(i);
            }
        }
        if node.uop.is_movement() && !matches!(node.uop, UOp::Input { .. }) {
            if let Some(Src::Node(id)) = node.src.first() {
                owner[i] = owner[id.index()];
            }
        }
    }
    for o in &prog.outputs {
        let ow = owner[o.node.index()];
        last[ow] = n;
    }
    // Only what the evaluator stores counts: an elementwise value fused into its consumer (a
    // MatMul's [M, N, K] product inside its reduction) is never held.
    let stored = crate::eval::materialized_nodes(prog);
    let mut bytes = vec![0u128; n];
    let mut release: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
    let (mut live, mut peak) = (0u128, 0u128);
    for node in &prog.nodes {
        let i = node.id.index();
        if owner[i] == i && stored[i] {
            let elems = elements(&node.shape, &lookup).unwrap_or(0);
            let b_i = elems.saturating_mul(stored_bytes(node.dtype));
            if b_i > u128::from(b.max_tensor_bytes) {
                return Err(Diagnostic::error(
                    codes::TENSOR_OVER_BUDGET,
                    Location::TinyNode {
                        tiny_node: format!("n{i}"),
                    },
                    format!(
                        "this value ({}{}) needs {b_i} bytes, over the per-tensor budget of {}",
                        node.dtype,
                        crate::ir::dim::fmt_shape(&node.shape),
                        b.max_tensor_bytes
                    ),
                    "use smaller symbol values or inputs, or raise the budget with \
                     --max-tensor-bytes (e.g. --max-tensor-bytes 16G)",
                )
                .with("bytes", b_i)
                .with("budget", b.max_tensor_bytes)
                .with("from", node.tag.clone().unwrap_or_default()));
            }
            bytes[i] = b_i;
            live = live.saturating_add(b_i);
            release[last[i].min(n)].push(i);
        }
        peak = peak.max(live);
        for &r in &release[i] {
            live -= bytes[r];
        }
    }
    if peak > u128::from(b.max_memory) {
        return Err(Diagnostic::error(
            codes::MEMORY_OVER_BUDGET,
            Location::Document,
            format!(
                "running this binding holds about {peak} bytes at once, over the memory budget \
                 of {}",
                b.max_memory
            ),
            "use smaller symbol values or inputs, or raise the budget with --max-memory (e.g. \
             --max-memory 64G)",
        )
        .with("bytes", peak)
        .with("budget", b.max_memory));
    }
    Ok(())
}

/// `optimize`'s memory estimate for `prog` (bytes): [`OPTIMIZE_BYTES_PER_NODE`] per Tiny IR node
/// plus [`OPTIMIZE_BYTES_PER_CONCAT_INPUT`] per `Concat` input of `graph`.
pub fn optimize_estimate(graph: &Graph, prog: &Program) -> u128 {
    let concat_inputs: u128 = graph
        .nodes
        .iter()
        .filter(|n| matches!(n.op, Op::Concat { .. }))
        .map(|n| n.inputs.len() as u128)
        .sum();
    (prog.nodes.len() as u128)
        .saturating_mul(u128::from(OPTIMIZE_BYTES_PER_NODE))
        .saturating_add(concat_inputs.saturating_mul(u128::from(OPTIMIZE_BYTES_PER_CONCAT_INPUT)))
}

/// `E1405` when `optimize`'s estimate for `prog` exceeds `max_memory`.
pub fn check_optimize(graph: &Graph, prog: &Program, max_memory: u64) -> Result<(), Diagnostic> {
    let est = optimize_estimate(graph, prog);
    if est > u128::from(max_memory) {
        return Err(Diagnostic::error(
            codes::MEMORY_OVER_BUDGET,
            Location::Document,
            format!(
                "optimizing this graph ({} Tiny IR nodes) needs about {est} bytes, over the \
                 memory budget of {max_memory}",
                prog.nodes.len()
            ),
            "split the graph, or raise the budget with --max-memory (e.g. --max-memory 64G)",
        )
        .with("estimate_bytes", est)
        .with("budget", max_memory));
    }
    Ok(())
}

/// `E1408` when a tensor of `graph` under `lookup` has more than [`MAX_TARGET_ELEMENTS`]
/// elements, or when its signature tensors need more than the GPU's memory
/// ([`crate::target::DEVICE_MEMORY_BYTES`]): no kernel of any target could be
/// planned for it, so the optimizer is not asked to. Unbound sizes are skipped.
pub fn check_target_sizes(
    graph: &Graph,
    lookup: &dyn Fn(&str) -> Option<i64>,
) -> Result<(), Diagnostic> {
    let beyond = |name: &str, why: String| {
        Diagnostic::error(
            codes::SIZE_BEYOND_TARGET,
            Location::Tensor {
                tensor: name.to_string(),
            },
            why,
            "no target can hold this: use smaller symbol values (split the batch)",
        )
    };
    for (name, t) in &graph.tensors {
        let Some(n) = elements(&t.shape, lookup) else {
            continue;
        };
        if n > MAX_TARGET_ELEMENTS {
            return Err(beyond(
                name,
                format!(
                    "the tensor has {n} elements, over the {MAX_TARGET_ELEMENTS} any target can \
                     address"
                ),
            ));
        }
    }
    let limit = crate::target::DEVICE_MEMORY_BYTES;
    let mut total: u128 = 0;
    let sig = graph.signature.inputs.iter().map(|i| &i.tensor);
    let mut seen = std::collections::BTreeSet::new();
    for name in sig.chain(graph.signature.outputs.iter().map(|o| &o.tensor)) {
        if !seen.insert(name) {
            continue;
        }
        let Some(t) = graph.tensor(name) else {
            continue;
        };
        let n = elements(&t.shape, lookup).unwrap_or(0);
        total = total.saturating_add(n.saturating_mul(u128::from(t.dtype.size_bytes())));
        if total > limit {
            return Err(beyond(
                name,
                format!(
                    "the signature tensors need over {total} bytes, more than the {limit} bytes \
                     of the GPUs planned for"
                ),
            ));
        }
    }
    Ok(())
}

/// Largest extent of one axis that compiled programs are run with (`run --optimized`, `run
/// --device cuda`): the region evaluator and the launch grid index an axis with 32 bits.
pub const MAX_TARGET_AXIS: i64 = u32::MAX as i64;

/// `E1408` when an axis of a tensor of `graph` under `lookup` is longer than
/// [`MAX_TARGET_AXIS`], even in a tensor with no element (a zero elsewhere in its shape).
pub fn check_axis_extents(
    graph: &Graph,
    lookup: &dyn Fn(&str) -> Option<i64>,
) -> Result<(), Diagnostic> {
    for (name, t) in &graph.tensors {
        for (axis, d) in t.shape.iter().enumerate() {
            let Ok(v) = d.eval(lookup) else {
                continue;
            };
            if v > MAX_TARGET_AXIS {
                return Err(Diagnostic::error(
                    codes::SIZE_BEYOND_TARGET,
                    Location::Tensor {
                        tensor: name.clone(),
                    },
                    format!(
                        "axis {axis} has extent {v}, over the {MAX_TARGET_AXIS} a compiled \
                         program indexes"
                    ),
                    "use smaller symbol values, or run the reference evaluator (without \
                     --optimized / --device cuda)",
                )
                .with("axis", axis)
                .with("extent", v));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse_with_binary_suffixes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("4K"), Ok(4096));
        assert_eq!(parse_bytes("2g"), Ok(2 << 30));
        assert_eq!(parse_bytes("1T"), Ok(1 << 40));
        assert!(parse_bytes("16777216T").is_err());
        assert!(parse_bytes("4X").is_err());
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("-1").is_err());
    }

    #[test]
    fn try_collect_refuses_impossible_sizes() {
        let e = try_collect::<u64>(usize::MAX / 4, std::iter::repeat(0), "test").expect_err("big");
        assert_eq!(e.code, "E1407");
        let v = try_collect(3, [1, 2, 3, 4], "small").expect("fits");
        assert_eq!(v, vec![1, 2, 3]);
    }
}
