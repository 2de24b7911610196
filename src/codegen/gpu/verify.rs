//! The GPU IR verifier: async tokens (seed 001 §9.2), barrier and warp-collective placement,
//! shared-memory and block-size limits. Runs after every kernel is built (tests and debug
//! builds check every emitted kernel; `emit_program` always runs it).
//!
//! Token rules, checked by abstract interpretation of the statement tree (a loop body runs
//! twice, so loop-carried tokens are seen in their steady state; both branches of an `if` are
//! joined, a token being ready only when it is ready on both):
//! - a `TokLoad` is *open* from its first `CpAsync` to its `Commit`, then *in flight* until a
//!   `Wait` lists it, then *ready*; a `Wait` may only list committed tokens;
//! - `LdMatrix` and `SmemUse` need their token ready;
//! - `Mma` makes its `TokCompute` ready; an `Epilogue` needs its `TokCompute` and makes its
//!   `TokEpilogue`;
//! - shared memory written by ordinary stores (a tile staged through registers) is published
//!   by a barrier: `Barrier` makes the token [`BARRIER_TOKEN`] ready, which an `LdMatrix` or
//!   `SmemUse` of such data names.

use super::render::walk;
use super::{Div, Kernel, Stmt};
use crate::target::Target;
use std::collections::BTreeMap;

/// The token of shared memory written by plain stores: ready after a `Barrier`.
pub const BARRIER_TOKEN: &str = "barrier";

/// Static shared memory a kernel may declare (CUDA's limit without opt-in).
pub const STATIC_SMEM_LIMIT: u64 = 48 * 1024;

/// A broken GPU IR invariant (always a code generator bug).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GpuIrError {
    #[error("kernel `{kernel}`: token `{token}` is used before it is {need}")]
    TokenNotReady {
        kernel: String,
        token: String,
        need: &'static str,
    },
    #[error("kernel `{kernel}`: waits on token `{token}`, which has no committed group")]
    WaitUncommitted { kernel: String, token: String },
    #[error("kernel `{kernel}`: {what} under {div:?}-divergent control flow")]
    Divergent {
        kernel: String,
        what: &'static str,
        div: Div,
    },
    #[error("kernel `{kernel}`: {bytes} B of {kind} shared memory, over the {limit} B limit")]
    SmemOver {
        kernel: String,
        kind: &'static str,
        bytes: u64,
        limit: u64,
    },
    #[error("kernel `{kernel}`: launch declares {declared} B of dynamic shared memory, buffers need {needed} B")]
    DynSmemMismatch {
        kernel: String,
        declared: u64,
        needed: u64,
    },
    #[error("kernel `{kernel}`: {threads} threads per block ({why})")]
    BlockSize {
        kernel: String,
        threads: u32,
        why: &'static str,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    Open,
    InFlight,
    Ready,
}

type State = BTreeMap<String, Tok>;

/// Checks every invariant of `k` for `target`.
pub fn verify(k: &Kernel, target: &Target) -> Result<(), GpuIrError> {
    let name = k.name.clone();
    let threads = k.launch.threads();
    if threads == 0 || threads > 1024 {
        return Err(GpuIrError::BlockSize {
            kernel: name,
            threads,
            why: "must be 1..=1024",
        });
    }
    let mut collective = false;
    walk(&k.body, &mut |s| {
        if matches!(
            s,
            Stmt::WarpReduce { .. } | Stmt::LdMatrix { .. } | Stmt::Mma { .. }
        ) {
            collective = true;
        }
    });
    if collective && !threads.is_multiple_of(32) {
        return Err(GpuIrError::BlockSize {
            kernel: name,
            threads,
            why: "warp collectives need whole warps",
        });
    }
    let (stat, dynamic) = k.smem_bytes();
    if stat > STATIC_SMEM_LIMIT {
        return Err(GpuIrError::SmemOver {
            kernel: name,
            kind: "static",
            bytes: stat,
            limit: STATIC_SMEM_LIMIT,
        });
    }
    let limit = target.smem_per_block as u64;
    if stat + dynamic > limit {
        return Err(GpuIrError::SmemOver {
            kernel: name,
            kind: "static + dynamic",
            bytes: stat + dynamic,
            limit,
        });
    }
    if dynamic != k.launch.dyn_smem_bytes as u64 {
        return Err(GpuIrError::DynSmemMismatch {
            kernel: name,
            declared: k.launch.dyn_smem_bytes as u64,
            needed: dynamic,
        });
    }
    divergence(&name, &k.body, Div::Block)?;
    let mut st = State::new();
    tokens(&name, &k.body, &mut st)?;
    Ok(())
}

fn divergence(kernel: &str, body: &[Stmt], under: Div) -> Result<(), GpuIrError> {
    for s in body {
        let bad = |what| {
            Err(GpuIrError::Divergent {
                kernel: kernel.to_string(),
                what,
                div: under,
            })
        };
        match s {
            Stmt::Barrier if under != Div::Block => return bad("__syncthreads"),
            Stmt::WarpReduce { .. } if under == Div::Thread => return bad("a warp reduction"),
            Stmt::LdMatrix { .. } if under == Div::Thread => return bad("ldmatrix"),
            Stmt::Mma { .. } if under == Div::Thread => return bad("mma.sync"),
            Stmt::For { div, body, .. } => divergence(kernel, body, under.max(*div))?,
            Stmt::If {
                div,
                then,
                otherwise,
                ..
            } => {
                divergence(kernel, then, under.max(*div))?;
                divergence(kernel, otherwise, under.max(*div))?;
            }
            Stmt::Epilogue { body, .. } | Stmt::Block(body) => divergence(kernel, body, under)?,
            _ => {}
        }
    }
    Ok(())
}

fn need_ready(kernel: &str, st: &State, token: &str, need: &'static str) -> Result<(), GpuIrError> {
    if st.get(token) == Some(&Tok::Ready) {
        Ok(())
    } else {
        Err(GpuIrError::TokenNotReady {
            kernel: kernel.to_string(),
            token: token.to_string(),
            need,
        })
    }
}

fn tokens(kernel: &str, body: &[Stmt], st: &mut State) -> Result<(), GpuIrError> {
    for s in body {
        match s {
            Stmt::CpAsync { token, .. } => {
                st.insert(token.clone(), Tok::Open);
            }
            Stmt::Commit { token } if st.get(token) == Some(&Tok::Open) => {
                st.insert(token.clone(), Tok::InFlight);
            }
            Stmt::Wait { tokens: ts, .. } => {
                for t in ts {
                    match st.get(t) {
                        Some(Tok::InFlight) | Some(Tok::Ready) => {
                            st.insert(t.clone(), Tok::Ready);
                        }
                        _ => {
                            return Err(GpuIrError::WaitUncommitted {
                                kernel: kernel.to_string(),
                                token: t.clone(),
                            })
                        }
                    }
                }
            }
            Stmt::SmemUse { token } | Stmt::LdMatrix { token, .. } => {
                need_ready(kernel, st, token, "waited on")?
            }
            Stmt::Mma { token, .. } => {
                st.insert(token.clone(), Tok::Ready);
            }
            Stmt::Epilogue { after, token, body } => {
                need_ready(kernel, st, after, "computed")?;
                tokens(kernel, body, st)?;
                st.insert(token.clone(), Tok::Ready);
            }
            Stmt::For { body, .. } => {
                tokens(kernel, body, st)?;
                tokens(kernel, body, st)?;
            }
            Stmt::If {
                then, otherwise, ..
            } => {
                let mut a = st.clone();
                let mut b = st.clone();
                tokens(kernel, then, &mut a)?;
                tokens(kernel, otherwise, &mut b)?;
                *st = join(&a, &b);
            }
            Stmt::Block(body) => tokens(kernel, body, st)?,
            Stmt::Barrier => {
                st.insert(BARRIER_TOKEN.to_string(), Tok::Ready);
            }
            _ => {}
        }
    }
    Ok(())
}

/// A token is ready after an `if` only when ready on both paths; otherwise the least advanced.
fn join(a: &State, b: &State) -> State {
    let mut out = a.clone();
    for (k, v) in b {
        let w = match out.get(k) {
            None => *v,
            Some(u) => {
                if *u == Tok::Ready && *v == Tok::Ready {
                    Tok::Ready
                } else if *u == Tok::Open || *v == Tok::Open {
                    Tok::Open
                } else {
                    Tok::InFlight
                }
            }
        };
        out.insert(k.clone(), w);
    }
    for (k, v) in a {
        if !b.contains_key(k) && *v == Tok::Ready {
            out.insert(k.clone(), Tok::InFlight);
        }
    }
    out
}
