//! Input preparation for `run`: `--input` names checked, arrays read and converted within the
//! budgets, symbols resolved from the arrays' shapes, missing inputs filled with seeded random
//! values.

use super::*;
use crate::diag::{codes, Diagnostics};
use crate::ir::tiny::Program;

/// Checks the `--input` names, reads and converts the given arrays, reports missing inputs
/// (unless `random` is given), resolves symbols, checks the arrays' shapes and fills the missing
/// inputs with seeded random values.
pub fn prepare_inputs(
    graph: &Graph,
    inputs: &[(String, PathBuf)],
    binds: &BTreeMap<String, i64>,
    random: Option<u64>,
) -> Result<PreparedInputs, Failure> {
    let budgets = crate::budget::RunBudgets::default();
    prepare_inputs_budgeted(graph, None, inputs, binds, random, &budgets)
}

/// [`prepare_inputs`] within `budgets`: input files are read within `max_file_bytes`, and, with
/// the lowered `prog`, the binding's tensors are checked against the memory budgets
/// ([`crate::budget::check_run`]) before any random input is generated.
pub fn prepare_inputs_budgeted(
    graph: &Graph,
    prog: Option<&Program>,
    inputs: &[(String, PathBuf)],
    binds: &BTreeMap<String, i64>,
    random: Option<u64>,
    budgets: &crate::budget::RunBudgets,
) -> Result<PreparedInputs, Failure> {
    check_input_names(graph, inputs)?;
    let mut tensors = read_given_inputs(graph, inputs, budgets.max_file_bytes)?;
    // Values that travel with the graph (constants, imported weights) fill inputs not given.
    // Copied without keeping a decoded copy in the graph (an imported model's are lazy).
    for (name, c) in graph.constants.constants() {
        tensors.entry(name.clone()).or_insert_with(|| c.to_tensor());
    }
    let missing = missing_inputs(graph, &tensors);
    if random.is_none() && !missing.is_empty() {
        return Err(Failure::user(Diagnostics(
            missing.iter().map(|t| missing_input(t)).collect(),
        )));
    }
    check_static_shapes(graph, &tensors)?;
    let shapes: BTreeMap<String, Vec<usize>> = tensors
        .iter()
        .map(|(k, t)| (k.clone(), t.shape.clone()))
        .collect();
    let bindings = frontend::resolve_symbols(graph, binds, &shapes)?;
    check_shapes(graph, &tensors, &bindings)?;
    if let Some(prog) = prog {
        crate::budget::check_run(prog, &bindings, budgets).map_err(Failure::user)?;
    }
    if let Some(seed) = random {
        tensors.extend(random_inputs(graph, seed, &bindings, &missing)?);
    }
    Ok(PreparedInputs { bindings, tensors })
}

/// `E0309` for names that are not signature inputs, `E0310` for a tensor given twice.
pub fn check_input_names(graph: &Graph, inputs: &[(String, PathBuf)]) -> Result<(), Failure> {
    let known: Vec<&str> = graph
        .signature
        .inputs
        .iter()
        .map(|i| i.tensor.as_str())
        .collect();
    let mut seen = BTreeSet::new();
    let mut diags = Vec::new();
    for (name, path) in inputs {
        if !known.contains(&name.as_str()) {
            diags.push(unknown_input(name, &known, graph));
        } else if !seen.insert(name.as_str()) {
            diags.push(
                Diagnostic::error(
                    codes::INVALID_INPUT_ARGUMENT,
                    Location::Argument {
                        argument: format!("--input {name}={}", path.display()),
                    },
                    format!("tensor `{name}` is given more than once"),
                    "pass one --input per signature input",
                )
                .with("tensor", name),
            );
        }
    }
    diags_result(diags)
}

fn unknown_input(name: &str, known: &[&str], graph: &Graph) -> Diagnostic {
    let why = if graph.signature.outputs.iter().any(|o| o.tensor == name) {
        format!("`{name}` is a signature output, not an input")
    } else {
        format!("`{name}` is not a signature input of the graph")
    };
    Diagnostic::error(
        codes::UNKNOWN_INPUT,
        Location::Argument {
            argument: format!("--input {name}"),
        },
        why,
        format!("the signature inputs are: {}", list_or_none(known)),
    )
}

fn list_or_none(names: &[&str]) -> String {
    if names.is_empty() {
        "(none)".to_string()
    } else {
        names.join(", ")
    }
}

/// Reads every `--input` file and converts it to its tensor's dtype; every bad file is reported.
fn read_given_inputs(
    graph: &Graph,
    inputs: &[(String, PathBuf)],
    max_file_bytes: u64,
) -> Result<BTreeMap<String, Tensor>, Failure> {
    let mut tensors = BTreeMap::new();
    let mut diags = Vec::new();
    for (name, path) in inputs {
        match read_input(graph, name, path, max_file_bytes) {
            Ok(t) => {
                tensors.insert(name.clone(), t);
            }
            Err(d) => diags.push(d),
        }
    }
    diags_result(diags).map(|()| tensors)
}

fn read_input(
    graph: &Graph,
    name: &str,
    path: &Path,
    max_file_bytes: u64,
) -> Result<Tensor, Diagnostic> {
    let info = tensor_info(graph, name)?;
    let array =
        npy::read_array_limited(path, max_file_bytes).map_err(|d| d.with("tensor", name))?;
    npy::to_tensor(array, name, info.dtype)
}

pub(super) fn tensor_info<'g>(graph: &'g Graph, name: &str) -> Result<&'g TensorInfo, Diagnostic> {
    graph.tensor(name).ok_or_else(|| {
        Diagnostic::error(
            codes::UNRESOLVED_SIZE,
            Location::Tensor {
                tensor: name.to_string(),
            },
            "the tensor has no declared dtype and shape",
            "declare every signature tensor under `tensors` in graph.json",
        )
    })
}

/// Signature inputs without a tensor, in signature order.
pub fn missing_inputs(graph: &Graph, given: &BTreeMap<String, Tensor>) -> Vec<String> {
    graph
        .signature
        .inputs
        .iter()
        .filter(|i| !given.contains_key(&i.tensor))
        .map(|i| i.tensor.clone())
        .collect()
}

fn missing_input(tensor: &str) -> Diagnostic {
    Diagnostic::error(
        codes::MISSING_INPUT,
        Location::Tensor {
            tensor: tensor.to_string(),
        },
        format!("signature input `{tensor}` has no value"),
        format!(
            "pass it with --input {tensor}=file.npy, or fill missing inputs with --random SEED"
        ),
    )
}

/// The concrete shape of a tensor under `bindings` (`E0314` when a size is unbound, negative,
/// overflows or exceeds [`MAX_ELEMENTS`]).
pub fn concrete_shape(
    name: &str,
    info: &TensorInfo,
    bindings: &BTreeMap<String, i64>,
) -> Result<Vec<usize>, Diagnostic> {
    let fail = |why: String| {
        Diagnostic::error(
            codes::UNRESOLVED_SIZE,
            Location::Tensor {
                tensor: name.to_string(),
            },
            why,
            "bind the symbols with --bind SYMBOL=VALUE (or give arrays whose shapes determine them)",
        )
        .with("shape", fmt_shape(&info.shape))
    };
    let mut shape = Vec::with_capacity(info.shape.len());
    for d in &info.shape {
        let v = d
            .eval_with(bindings)
            .map_err(|e| fail(format!("size `{d}` cannot be computed: {e}")))?;
        let v = usize::try_from(v).map_err(|_| fail(format!("size `{d}` is negative ({v})")))?;
        shape.push(v);
    }
    let numel = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|n| *n <= MAX_ELEMENTS);
    if numel.is_none() {
        return Err(fail(format!(
            "the shape {shape:?} has more than {MAX_ELEMENTS} elements"
        )));
    }
    Ok(shape)
}

/// `E0302` for every given array whose shape is not its tensor's concrete shape.
pub fn check_shapes(
    graph: &Graph,
    tensors: &BTreeMap<String, Tensor>,
    bindings: &BTreeMap<String, i64>,
) -> Result<(), Failure> {
    let mut diags = Vec::new();
    for (name, t) in tensors {
        let checked = tensor_info(graph, name).and_then(|info| {
            let want = concrete_shape(name, info, bindings)?;
            if want == t.shape {
                Ok(())
            } else {
                Err(shape_mismatch(name, &info.shape, &want, &t.shape))
            }
        });
        if let Err(d) = checked {
            diags.push(d);
        }
    }
    diags_result(diags)
}

/// `E0302` for every given array whose rank or constant sizes contradict its tensor's declared
/// shape; runs before symbols are resolved, so that such arrays are reported as shape mismatches
/// rather than as symbol conflicts.
pub fn check_static_shapes(
    graph: &Graph,
    tensors: &BTreeMap<String, Tensor>,
) -> Result<(), Failure> {
    let mut diags = Vec::new();
    for (name, t) in tensors {
        let Some(info) = graph.tensor(name) else {
            continue;
        };
        let fits = info.shape.len() == t.shape.len()
            && info
                .shape
                .iter()
                .zip(&t.shape)
                .all(|(d, &n)| d.as_int().is_none_or(|v| v == n as i64));
        if !fits {
            diags.push(static_shape_mismatch(name, &info.shape, &t.shape));
        }
    }
    diags_result(diags)
}

fn static_shape_mismatch(name: &str, declared: &[Dim], found: &[usize]) -> Diagnostic {
    Diagnostic::error(
        codes::NPY_SHAPE_MISMATCH,
        Location::Tensor {
            tensor: name.to_string(),
        },
        format!(
            "the array has shape {found:?}, but the tensor is declared with shape {}",
            fmt_shape(declared)
        ),
        format!(
            "pass an array of shape {} (symbols may take any size)",
            fmt_shape(declared)
        ),
    )
    .with("expected", fmt_shape(declared))
    .with("found", format!("{found:?}"))
}

fn shape_mismatch(name: &str, declared: &[Dim], want: &[usize], found: &[usize]) -> Diagnostic {
    Diagnostic::error(
        codes::NPY_SHAPE_MISMATCH,
        Location::Tensor {
            tensor: name.to_string(),
        },
        format!(
            "the array has shape {found:?}, but the tensor's shape {} is {want:?}",
            fmt_shape(declared)
        ),
        format!("pass an array of shape {want:?}, or bind the symbols (--bind) to match the array"),
    )
    .with("expected", format!("{want:?}"))
    .with("found", format!("{found:?}"))
}

fn diags_result(diags: Vec<Diagnostic>) -> Result<(), Failure> {
    if diags.is_empty() {
        Ok(())
    } else {
        Err(Failure::user(Diagnostics(diags)))
    }
}
