//! Symbol binding for `run`: a symbol's value comes from the command line, then from the shapes of
//! the input arrays, then from the document's `symbols`.

use super::diagnose::{closest, diag, tensor_loc};
use super::Graph;
use crate::diag::codes;
use crate::diag::{Diagnostic, Diagnostics, Location};
use crate::ir::dim::{fmt_shape, Dim, DimError};
use std::collections::{BTreeMap, BTreeSet};

/// Where a symbol's value came from.
#[derive(Clone, Debug)]
enum Source {
    Cli,
    Array { tensor: String, axis: usize },
}

impl Source {
    fn describe(&self) -> String {
        match self {
            Source::Cli => "the command line (--bind)".to_string(),
            Source::Array { tensor, axis } => {
                format!("axis {axis} of the array given for `{tensor}`")
            }
        }
    }
}

fn sym_loc(s: &str) -> Location {
    Location::Symbol {
        symbol: s.to_string(),
    }
}

/// Values of every symbol the graph uses: from `cli` (`--bind`), then from the shapes of the given
/// input arrays (`tensor name → array shape`), then from the document's defaults. Unbound symbols,
/// conflicting bindings and sizes that overflow `i64` are diagnostics.
///
/// Arrays for tensors that are not signature inputs are ignored (the caller reports them).
pub fn resolve_symbols(
    graph: &Graph,
    cli: &BTreeMap<String, i64>,
    arrays: &BTreeMap<String, Vec<usize>>,
) -> Result<BTreeMap<String, i64>, Diagnostics> {
    let mut errs: Vec<Diagnostic> = Vec::new();
    // symbol -> tensors using it
    let mut used: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for (name, t) in &graph.tensors {
        for d in &t.shape {
            for s in d.symbols() {
                used.entry(s).or_default().insert(name.as_str());
            }
        }
    }
    let mut bound: BTreeMap<String, (i64, Source)> = BTreeMap::new();
    for (s, v) in cli {
        let at = Location::Argument {
            argument: format!("--bind {s}={v}"),
        };
        if !used.contains_key(s) {
            let sugg = match closest(s, used.keys().map(String::as_str)) {
                Some(c) => format!("did you mean `{c}`?"),
                None if used.is_empty() => {
                    "this graph has no symbolic sizes: drop the --bind".to_string()
                }
                None => format!(
                    "symbols of this graph: {}",
                    used.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            };
            errs.push(diag(
                codes::UNKNOWN_SYMBOL,
                at,
                format!("--bind names `{s}`, which no tensor of the graph uses"),
                sugg,
            ));
            continue;
        }
        if *v < 0 {
            errs.push(diag(
                codes::NEGATIVE_SIZE,
                at,
                format!("symbol `{s}` is a size and cannot be {v}"),
                "bind a non-negative integer",
            ));
            continue;
        }
        bound.insert(s.clone(), (*v, Source::Cli));
    }
    for input in &graph.signature.inputs {
        let (Some(arr), Some(t)) = (arrays.get(&input.tensor), graph.tensors.get(&input.tensor))
        else {
            continue;
        };
        let mismatch = |why: String| {
            diag(
                codes::NPY_SHAPE_MISMATCH,
                tensor_loc(&input.tensor),
                why,
                format!(
                    "give `{}` an array of shape {} (symbols may take any size)",
                    input.tensor,
                    fmt_shape(&t.shape)
                ),
            )
            .with("declared_shape", fmt_shape(&t.shape))
            .with("array_shape", format!("{arr:?}"))
        };
        if arr.len() != t.shape.len() {
            errs.push(mismatch(format!(
                "the array for `{}` has rank {} but the tensor is declared with rank {}",
                input.tensor,
                arr.len(),
                t.shape.len()
            )));
            continue;
        }
        for (axis, (d, n)) in t.shape.iter().zip(arr).enumerate() {
            let n = i64::try_from(*n).unwrap_or(i64::MAX);
            if let Some(c) = d.as_int() {
                if c != n {
                    errs.push(mismatch(format!(
                        "axis {axis} of the array for `{}` has size {n} but the tensor declares {c}",
                        input.tensor
                    )));
                }
                continue;
            }
            let syms = d.symbols();
            let Some(s) = syms
                .iter()
                .next()
                .filter(|s| syms.len() == 1 && *d == Dim::sym(s))
            else {
                continue; // not a plain symbol: checked after binding
            };
            let src = Source::Array {
                tensor: input.tensor.clone(),
                axis,
            };
            match bound.get(s) {
                Some((v, prev)) if *v != n => errs.push(
                    diag(
                        codes::CONFLICTING_SYMBOL_BINDING,
                        sym_loc(s),
                        format!(
                            "symbol `{s}` is {v} from {} but {n} from {}",
                            prev.describe(),
                            src.describe()
                        ),
                        "make the array shapes agree (and with --bind), or use different symbols for sizes that differ",
                    )
                    .with("first", format!("{v} ({})", prev.describe()))
                    .with("second", format!("{n} ({})", src.describe())),
                ),
                Some(_) => {}
                None => {
                    bound.insert(s.clone(), (n, src));
                }
            }
        }
    }
    if !errs.is_empty() {
        return Err(Diagnostics(errs));
    }
    let mut values: BTreeMap<String, i64> = BTreeMap::new();
    for (s, tensors) in &used {
        if let Some((v, _)) = bound.get(s) {
            values.insert(s.clone(), *v);
        } else if let Some(v) = graph.symbols.get(s) {
            values.insert(s.clone(), *v);
        } else {
            let names: Vec<&str> = tensors.iter().copied().collect();
            errs.push(
                diag(
                    codes::UNBOUND_SYMBOL,
                    sym_loc(s),
                    format!(
                        "symbol `{s}` (used by {}) has no value",
                        names
                            .iter()
                            .map(|n| format!("`{n}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    format!(
                        "pass `--bind {s}=<size>`, give an input array whose shape fixes it, or add `\"{s}\": <size>` to the document's `symbols`"
                    ),
                )
                .with("tensors", names.join(", ")),
            );
        }
    }
    if !errs.is_empty() {
        return Err(Diagnostics(errs));
    }
    for (name, t) in &graph.tensors {
        if let Err(d) = check_sizes(name, &t.shape, &values) {
            errs.push(d);
        }
    }
    if !errs.is_empty() {
        return Err(Diagnostics(errs));
    }
    Ok(values)
}

/// Every axis evaluates to a non-negative size and the element count fits i64.
fn check_sizes(
    name: &str,
    shape: &[Dim],
    values: &BTreeMap<String, i64>,
) -> Result<(), Diagnostic> {
    let overflow = || {
        diag(
            codes::SHAPE_OVERFLOW,
            tensor_loc(name),
            format!(
                "with the bound symbols, tensor `{name}` of shape {} has more elements than fit in i64",
                fmt_shape(shape)
            ),
            "bind smaller sizes",
        )
        .with("shape", fmt_shape(shape))
        .with("bindings", fmt_bindings(shape, values))
    };
    let mut sizes = Vec::with_capacity(shape.len());
    for (axis, d) in shape.iter().enumerate() {
        match d.eval_with(values) {
            Ok(v) if v < 0 => {
                return Err(diag(
                    codes::NEGATIVE_SIZE,
                    tensor_loc(name),
                    format!(
                        "with the bound symbols, axis {axis} of tensor `{name}` ({d}) has the negative size {v}"
                    ),
                    "bind larger sizes: an op (e.g. a cropping Pad) needs the axis to be larger",
                )
                .with("bindings", fmt_bindings(shape, values)))
            }
            Ok(v) => sizes.push(v),
            Err(DimError::Overflow) => return Err(overflow()),
            Err(DimError::Unbound(s)) => {
                return Err(diag(
                    codes::UNBOUND_SYMBOL,
                    sym_loc(&s),
                    format!("symbol `{s}` (used by `{name}`) has no value"),
                    format!("pass `--bind {s}=<size>`"),
                ))
            }
        }
    }
    if sizes.contains(&0) {
        return Ok(());
    }
    sizes
        .iter()
        .try_fold(1i64, |acc, v| acc.checked_mul(*v))
        .map(|_| ())
        .ok_or_else(overflow)
}

fn fmt_bindings(shape: &[Dim], values: &BTreeMap<String, i64>) -> String {
    let mut syms = BTreeSet::new();
    for d in shape {
        syms.extend(d.symbols());
    }
    syms.iter()
        .filter_map(|s| values.get(s).map(|v| format!("{s}={v}")))
        .collect::<Vec<_>>()
        .join(", ")
}
