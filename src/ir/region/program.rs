//! A region program: a whole graph as a sequence of kernels ([`Region`]s) and buffer aliases over
//! named buffers. Every buffer is defined once — a graph input, a region output, or an alias (a
//! reshape of a materialized row-major buffer: same data, new shape, no kernel) — before it is
//! used.
//!
//! JSON: `{"inputs": [{"name", "dtype", "shape"}], "steps": [{"region": {…}} | {"alias": {"name",
//! "of", "dtype", "shape"}}], "outputs": [["graph output", "buffer"]]}`, regions in their seed
//! 001 §6.8 form.

// `ProgramError` carries the failing region's `RegionError`; it is returned only on cold
// failure paths, so boxing it would only add noise (as in `crate::cli`).
#![allow(clippy::result_large_err)]

use super::eval::evaluate_region;
use super::{Region, RegionError, Size};
use crate::diag::codes;
use crate::diag::{Diagnostic, Diagnostics, Location};
use crate::ir::dim::{fmt_shape, numel, Dim};
use crate::ir::dtype::DType;
use crate::tensor::Tensor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A named buffer's type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Buffer {
    /// Buffer name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    #[serde(with = "dims")]
    pub shape: Vec<Dim>,
}

/// One step of a program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// A kernel: reads region inputs from buffers of the same names, defines its outputs.
    Region(Region),
    /// `name` is buffer `of` reshaped (same row-major data, same element count).
    Alias {
        /// The new buffer.
        name: String,
        /// The aliased buffer.
        of: String,
        /// Element type (that of `of`).
        dtype: DType,
        /// The new shape.
        #[serde(with = "dims")]
        shape: Vec<Dim>,
    },
}

/// Inputs, steps in order, and `(graph output, buffer)` pairs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionProgram {
    /// Buffers defined before the first step: the graph inputs, then the derived constants
    /// the steps read (defined by `derived`).
    pub inputs: Vec<Buffer>,
    /// Kernels and aliases, in execution order.
    pub steps: Vec<Step>,
    /// Which buffer each graph output is.
    pub outputs: Vec<(String, String)>,
    /// Derived constants (issue 23, `crate::extract::derived`): kernels and aliases over the
    /// graph's bound weights, run once when the weights are bound ([`bind_derived`]), not per
    /// run. They read graph inputs and earlier derived buffers; the `inputs` they define are
    /// what the steps read of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub derived: Vec<Step>,
}

impl RegionProgram {
    /// The kernels of the program (its `Region` steps), in execution order.
    pub fn regions(&self) -> impl Iterator<Item = &Region> {
        self.steps.iter().filter_map(|s| match s {
            Step::Region(r) => Some(r),
            Step::Alias { .. } => None,
        })
    }

    /// The names of the inputs computed by [`RegionProgram::derived`] (not given by the caller).
    pub fn derived_inputs(&self) -> std::collections::BTreeSet<String> {
        let defined = defined_by(&self.derived);
        self.inputs
            .iter()
            .filter(|b| defined.contains(&b.name))
            .map(|b| b.name.clone())
            .collect()
    }
}

/// The buffer names `steps` define (region outputs and aliases).
pub(crate) fn defined_by(steps: &[Step]) -> std::collections::BTreeSet<String> {
    steps
        .iter()
        .flat_map(|s| match s {
            Step::Region(r) => r.outputs.iter().map(|o| o.name.clone()).collect::<Vec<_>>(),
            Step::Alias { name, .. } => vec![name.clone()],
        })
        .collect()
}

/// The buffer names `steps` read (region inputs and the buffers aliases rename).
pub(crate) fn read_by(steps: &[Step]) -> std::collections::BTreeSet<&str> {
    steps
        .iter()
        .flat_map(|s| match s {
            Step::Region(r) => r.inputs.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
            Step::Alias { of, .. } => vec![of.as_str()],
        })
        .collect()
}

mod dims {
    use super::{Dim, Size};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &[Dim], s: S) -> Result<S::Ok, S::Error> {
        let sizes: Vec<Size> = v.iter().cloned().map(Size).collect();
        sizes.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Dim>, D::Error> {
        Ok(Vec::<Size>::deserialize(d)?
            .into_iter()
            .map(|s| s.0)
            .collect())
    }
}

/// A malformed program (`E1230`–`E1233`), or a step's region error.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ProgramError {
    /// Error: Step *step*: buffer *name* is used before it is defined.
    #[error("step {step}: buffer `{name}` is used before it is defined")]
    UndefinedBuffer {
        /// The program step.
        step: usize,
        /// The name.
        name: String,
    },
    /// Error: Step *step*: buffer *name* is defined twice.
    #[error("step {step}: buffer `{name}` is defined twice")]
    BufferRedefined {
        /// The program step.
        step: usize,
        /// The name.
        name: String,
    },
    /// Error: Step *step*: buffer *name* is *have*, but the step declares *want*.
    #[error("step {step}: buffer `{name}` is {have}, but the step declares {want}")]
    BufferMismatch {
        /// The program step.
        step: usize,
        /// The name.
        name: String,
        /// What it is.
        have: String,
        /// What was expected.
        want: String,
    },
    /// Error: Step *step*: alias *name* of *of* has *want* elements, *of* has *have*.
    #[error("step {step}: alias `{name}` of `{of}` has {want} elements, `{of}` has {have}")]
    AliasSizeMismatch {
        /// The program step.
        step: usize,
        /// The name.
        name: String,
        /// The aliased buffer.
        of: String,
        /// What it is.
        have: String,
        /// What was expected.
        want: String,
    },
    /// Error: Step *step* (region *region*): *error*.
    #[error("step {step} (region `{region}`): {error}")]
    Region {
        /// The program step.
        step: usize,
        /// The region.
        region: String,
        /// The region's error.
        error: Box<RegionError>,
    },
}

impl ProgramError {
    /// The user-facing diagnostic.
    pub fn to_diagnostic(&self) -> Diagnostic {
        let (code, hint, name) = match self {
            ProgramError::UndefinedBuffer { name, .. } => (
                codes::UNDEFINED_BUFFER,
                "define the buffer (an input, an earlier region's output or alias) first",
                name,
            ),
            ProgramError::BufferRedefined { name, .. } => (
                codes::BUFFER_REDEFINED,
                "give every buffer one definition",
                name,
            ),
            ProgramError::BufferMismatch { name, .. } => (
                codes::BUFFER_MISMATCH,
                "declare region inputs and aliases with the buffer's dtype and shape",
                name,
            ),
            ProgramError::AliasSizeMismatch { name, .. } => (
                codes::ALIAS_SIZE_MISMATCH,
                "an alias keeps the element count of the buffer it reshapes",
                name,
            ),
            ProgramError::Region { error, .. } => {
                let mut d = error.to_diagnostic();
                d.why = self.to_string();
                return d;
            }
        };
        Diagnostic::error(
            code,
            Location::Tensor {
                tensor: name.clone(),
            },
            self.to_string(),
            hint,
        )
    }
}

impl From<ProgramError> for Diagnostics {
    fn from(e: ProgramError) -> Diagnostics {
        Diagnostics::one(e.to_diagnostic())
    }
}

fn ty(dtype: DType, shape: &[Dim]) -> String {
    format!("{dtype}{}", fmt_shape(shape))
}

/// Checks that every buffer is defined once before use, region inputs match their buffers'
/// dtypes and shapes, aliases keep element counts, and every region verifies.
/// The derived steps are checked first, over the inputs they do not define; every input they
/// define must have the type they give it.
pub fn verify_program(p: &RegionProgram) -> Result<(), ProgramError> {
    let mut defined: BTreeMap<String, (DType, Vec<Dim>)> = BTreeMap::new();
    let by_derived = defined_by(&p.derived);
    for b in &p.inputs {
        if defined.contains_key(&b.name) {
            return Err(ProgramError::BufferRedefined {
                step: 0,
                name: b.name.clone(),
            });
        }
        defined.insert(b.name.clone(), (b.dtype, b.shape.clone()));
    }
    if !p.derived.is_empty() {
        let mut load: BTreeMap<String, (DType, Vec<Dim>)> = defined
            .iter()
            .filter(|(n, _)| !by_derived.contains(*n))
            .map(|(n, t)| (n.clone(), t.clone()))
            .collect();
        verify_steps(&p.derived, &mut load)?;
        for b in p.inputs.iter().filter(|b| by_derived.contains(&b.name)) {
            let (dt, shape) = &load[&b.name];
            if *dt != b.dtype || *shape != b.shape {
                return Err(ProgramError::BufferMismatch {
                    step: 0,
                    name: b.name.clone(),
                    have: ty(*dt, shape),
                    want: ty(b.dtype, &b.shape),
                });
            }
        }
    }
    verify_steps(&p.steps, &mut defined)?;
    for (_, b) in &p.outputs {
        if !defined.contains_key(b) {
            return Err(ProgramError::UndefinedBuffer {
                step: p.steps.len(),
                name: b.clone(),
            });
        }
    }
    Ok(())
}

/// Checks `steps` in order over the buffers `defined` so far (and adds theirs).
fn verify_steps(
    steps: &[Step],
    defined: &mut BTreeMap<String, (DType, Vec<Dim>)>,
) -> Result<(), ProgramError> {
    for (step, s) in steps.iter().enumerate() {
        let get = |defined: &BTreeMap<String, (DType, Vec<Dim>)>, name: &str| {
            defined
                .get(name)
                .cloned()
                .ok_or_else(|| ProgramError::UndefinedBuffer {
                    step,
                    name: name.to_string(),
                })
        };
        match s {
            Step::Region(r) => {
                super::verify(r).map_err(|error| ProgramError::Region {
                    step,
                    region: r.name.clone(),
                    error: Box::new(error),
                })?;
                for i in &r.inputs {
                    let (dt, shape) = get(defined, &i.name)?;
                    let want: Vec<Dim> = i.memref.shape.iter().map(|s| s.0.clone()).collect();
                    if dt != i.dtype || shape != want {
                        return Err(ProgramError::BufferMismatch {
                            step,
                            name: i.name.clone(),
                            have: ty(dt, &shape),
                            want: ty(i.dtype, &want),
                        });
                    }
                }
                for o in &r.outputs {
                    if defined.contains_key(&o.name) {
                        return Err(ProgramError::BufferRedefined {
                            step,
                            name: o.name.clone(),
                        });
                    }
                    let shape = o.memref.shape.iter().map(|s| s.0.clone()).collect();
                    defined.insert(o.name.clone(), (o.dtype, shape));
                }
            }
            Step::Alias {
                name,
                of,
                dtype,
                shape,
            } => {
                let (dt, src) = get(defined, of)?;
                if dt != *dtype {
                    return Err(ProgramError::BufferMismatch {
                        step,
                        name: of.clone(),
                        have: ty(dt, &src),
                        want: ty(*dtype, shape),
                    });
                }
                if numel(&src) != numel(shape) {
                    return Err(ProgramError::AliasSizeMismatch {
                        step,
                        name: name.clone(),
                        of: of.clone(),
                        have: numel(&src).to_string(),
                        want: numel(shape).to_string(),
                    });
                }
                if defined.contains_key(name) {
                    return Err(ProgramError::BufferRedefined {
                        step,
                        name: name.clone(),
                    });
                }
                defined.insert(name.clone(), (*dtype, shape.clone()));
            }
        }
    }
    Ok(())
}

/// Runs `p` on the CPU: verifies it, computes the derived constants `inputs` does not give
/// ([`bind_derived`]), then evaluates every region with [`evaluate_region`] and applies every
/// alias; returns the graph outputs by name. `inputs` are the graph inputs by buffer name.
pub fn evaluate_program(
    p: &RegionProgram,
    bindings: &BTreeMap<String, i64>,
    inputs: &BTreeMap<String, Tensor>,
) -> Result<BTreeMap<String, Tensor>, Diagnostics> {
    verify_program(p)?;
    let derived = if p.derived_inputs().iter().all(|n| inputs.contains_key(n)) {
        BTreeMap::new()
    } else {
        bind_derived(p, bindings, inputs)?
    };
    let mut bufs: BTreeMap<String, Tensor> = BTreeMap::new();
    for b in &p.inputs {
        let t = derived
            .get(&b.name)
            .or_else(|| inputs.get(&b.name))
            .ok_or_else(|| {
                Diagnostics::from(RegionError::InputMismatch {
                    name: b.name.clone(),
                    why: "no value given".into(),
                })
            })?;
        bufs.insert(b.name.clone(), t.clone());
    }
    run_steps(&p.steps, bindings, &mut bufs)?;
    let mut out = BTreeMap::new();
    for (g, b) in &p.outputs {
        let t = bufs.get(b).cloned().ok_or_else(|| {
            Diagnostics::from(ProgramError::UndefinedBuffer {
                step: p.steps.len(),
                name: b.clone(),
            })
        })?;
        out.insert(g.clone(), t);
    }
    Ok(out)
}

/// The derived constants of `p` ([`RegionProgram::derived`]) computed from the bound weights in
/// `inputs` (graph inputs by name): what the runtimes call once when the weights are bound, to
/// pass the results as the program's remaining inputs. Empty when `p` has none.
pub fn bind_derived(
    p: &RegionProgram,
    bindings: &BTreeMap<String, i64>,
    inputs: &BTreeMap<String, Tensor>,
) -> Result<BTreeMap<String, Tensor>, Diagnostics> {
    let wanted = p.derived_inputs();
    if wanted.is_empty() {
        return Ok(BTreeMap::new());
    }
    // Lend the graph inputs the derived steps read, then give them back.
    let defined = defined_by(&p.derived);
    let mut bufs: BTreeMap<String, Tensor> = BTreeMap::new();
    for name in read_by(&p.derived)
        .into_iter()
        .filter(|n| !defined.contains(*n))
    {
        let t = inputs.get(name).ok_or_else(|| {
            Diagnostics::from(RegionError::InputMismatch {
                name: name.to_string(),
                why: "no value given (a weight a derived constant is computed from)".into(),
            })
        })?;
        bufs.insert(name.to_string(), t.clone());
    }
    run_steps(&p.derived, bindings, &mut bufs)?;
    Ok(bufs
        .into_iter()
        .filter(|(n, _)| wanted.contains(n))
        .collect())
}

/// Evaluates `steps` in order over the buffers `bufs` (adding theirs).
fn run_steps(
    steps: &[Step],
    bindings: &BTreeMap<String, i64>,
    bufs: &mut BTreeMap<String, Tensor>,
) -> Result<(), Diagnostics> {
    for (step, s) in steps.iter().enumerate() {
        match s {
            Step::Region(r) => {
                // Lend the input buffers to the region (no copies), then put them back.
                let ins: BTreeMap<String, Tensor> = r
                    .inputs
                    .iter()
                    .filter_map(|i| bufs.remove_entry(&i.name))
                    .collect();
                let outs = evaluate_region(r, bindings, &ins);
                bufs.extend(ins);
                bufs.extend(outs?);
            }
            Step::Alias {
                name, of, shape, ..
            } => {
                let mut t = bufs.get(of).cloned().ok_or_else(|| {
                    Diagnostics::from(ProgramError::UndefinedBuffer {
                        step,
                        name: of.clone(),
                    })
                })?;
                let mut dims = Vec::with_capacity(shape.len());
                for d in shape {
                    let v = d
                        .eval_with(bindings)
                        .ok()
                        .and_then(|v| usize::try_from(v).ok());
                    dims.push(v.ok_or_else(|| {
                        Diagnostics::from(RegionError::UnboundSymbol(d.to_string()))
                    })?);
                }
                if dims.iter().product::<usize>() != t.numel() {
                    return Err(ProgramError::AliasSizeMismatch {
                        step,
                        name: name.clone(),
                        of: of.clone(),
                        have: t.numel().to_string(),
                        want: dims.iter().product::<usize>().to_string(),
                    }
                    .into());
                }
                t.shape = dims;
                bufs.insert(name.clone(), t);
            }
        }
    }
    Ok(())
}
