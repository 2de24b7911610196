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
//!
//! A vector `Load`/`Store` moves a power-of-two number of bytes (2 to 16, or whole 16-byte
//! accesses beyond); that its address is aligned is the template's proof obligation, which the
//! CPU emulation checks at run time (`dlc_ld_vec`/`dlc_st_vec`).

use super::render::walk;
#[cfg(test)]
use super::WarpOp;
use super::{Div, Kernel, Stmt};
use crate::target::Target;
use std::collections::BTreeMap;

/// The token of shared memory written by plain stores: ready after a `Barrier`.
pub const BARRIER_TOKEN: &str = "barrier";

/// Static shared memory a kernel may declare (CUDA's limit without opt-in).
pub const STATIC_SMEM_LIMIT: u64 = 48 * 1024;

/// Largest grid size per axis on every architecture this compiler targets (sm_80, sm_90):
/// x ≤ 2³¹−1, y and z ≤ 65535.
pub const GRID_LIMITS: [i64; 3] = [i32::MAX as i64, 65535, 65535];

/// A launch whose grid, evaluated at the bound sizes, exceeds [`GRID_LIMITS`] (diagnostic
/// `E0404 GridLimitExceeded` at run time: the sizes are too large for the kernel's launch
/// geometry, not a CUDA failure).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}` needs grid.{axis} = {value}, over the hardware limit of {limit} \
     (grid {grid:?})"
)]
pub struct GridLimitError {
    /// The kernel's name.
    pub kernel: String,
    /// `x`, `y` or `z`.
    pub axis: char,
    /// The evaluated extent on that axis (blocks).
    pub value: i64,
    /// The hardware's limit on that axis (blocks).
    pub limit: i64,
    /// The whole evaluated grid.
    pub grid: [i64; 3],
}

/// Checks an evaluated grid (every axis non-negative, see [`GRID_LIMITS`]); returns it as the
/// driver's `u32`s. A negative axis is reported as over the limit with its value.
pub fn check_grid(kernel: &str, grid: [i64; 3]) -> Result<[u32; 3], GridLimitError> {
    let mut out = [0u32; 3];
    for (i, ((v, limit), axis)) in grid
        .iter()
        .zip(GRID_LIMITS)
        .zip(['x', 'y', 'z'])
        .enumerate()
    {
        match u32::try_from(*v) {
            Ok(u) if *v <= limit => out[i] = u,
            _ => {
                return Err(GridLimitError {
                    kernel: kernel.to_string(),
                    axis,
                    value: *v,
                    limit,
                    grid,
                })
            }
        }
    }
    Ok(out)
}

pub use crate::target::DEVICE_MEMORY_BYTES;

/// A graph whose signature inputs and outputs alone, at their concrete sizes, need more global
/// memory than the GPU has: no template or plan can avoid it (diagnostic `E0405
/// DeviceMemoryExceeded` at `optimize` and `run`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the signature tensors need {bytes} B of GPU memory, over the {limit} B of the GPU (largest: \
     `{largest}`, {largest_bytes} B)"
)]
pub struct DeviceMemoryError {
    /// Bytes the signature inputs and outputs need together.
    pub bytes: u128,
    /// Bytes of global memory the GPU has ([`DEVICE_MEMORY_BYTES`]).
    pub limit: u128,
    /// The largest signature tensor.
    pub largest: String,
    /// Its size, bytes.
    pub largest_bytes: u128,
}

/// Checks that `graph`'s signature inputs and outputs fit [`DEVICE_MEMORY_BYTES`] together.
/// Sizes are evaluated with the graph's `symbols` defaults; a tensor whose size stays symbolic
/// is left out (its size is only known at `run`).
pub fn check_device_memory(graph: &crate::ir::frontend::Graph) -> Result<(), DeviceMemoryError> {
    let lookup = |s: &str| graph.symbols.get(s).copied();
    let names = graph.signature.inputs.iter().map(|i| &i.tensor);
    let names = names.chain(graph.signature.outputs.iter().map(|o| &o.tensor));
    let mut seen = std::collections::BTreeSet::new();
    let (mut total, mut largest) = (0u128, (String::new(), 0u128));
    for name in names.filter(|n| seen.insert(n.as_str())) {
        let Some(t) = graph.tensor(name) else {
            continue;
        };
        let mut bytes = u128::from(t.dtype.size_bytes());
        for d in &t.shape {
            match d.eval(&lookup) {
                Ok(v) => bytes = bytes.saturating_mul(u128::try_from(v).unwrap_or(0)),
                Err(_) => bytes = 0,
            }
        }
        total = total.saturating_add(bytes);
        if bytes > largest.1 {
            largest = (name.clone(), bytes);
        }
    }
    if total > DEVICE_MEMORY_BYTES {
        return Err(DeviceMemoryError {
            bytes: total,
            limit: DEVICE_MEMORY_BYTES,
            largest: largest.0,
            largest_bytes: largest.1,
        });
    }
    Ok(())
}

/// A broken GPU IR invariant (always a code generator bug).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GpuIrError {
    #[error("kernel `{kernel}`: token `{token}` is used before it is {need}")]
    /// A token is consumed before the statement that makes it ready (load data read before its
    /// `cp.async` group is waited for, accumulators read before the MMA).
    TokenNotReady {
        /// The kernel's name.
        kernel: String,
        /// The token.
        token: String,
        /// What the use needs the token to be (e.g. "waited for").
        need: &'static str,
    },
    #[error("kernel `{kernel}`: waits on token `{token}`, which has no committed group")]
    /// A `cp.async.wait_group` names a token no committed group produced.
    WaitUncommitted {
        /// The kernel's name.
        kernel: String,
        /// The token waited on.
        token: String,
    },
    #[error("kernel `{kernel}`: {what} under {div:?}-divergent control flow")]
    /// A barrier or warp-collective operation under control flow that differs between the threads
    /// that must reach it together.
    Divergent {
        /// The kernel's name.
        kernel: String,
        /// The operation (e.g. "__syncthreads()").
        what: &'static str,
        /// How divergent the enclosing condition or loop is.
        div: Div,
    },
    #[error("kernel `{kernel}`: {bytes} B of {kind} shared memory, over the {limit} B limit")]
    /// Shared memory over the architecture's per-block limit.
    SmemOver {
        /// The kernel's name.
        kernel: String,
        /// Which shared memory is over: `static` or `static + dynamic`.
        kind: &'static str,
        /// Bytes the kernel declares.
        bytes: u64,
        /// The architecture's limit, bytes.
        limit: u64,
    },
    #[error("kernel `{kernel}`: launch declares {declared} B of dynamic shared memory, buffers need {needed} B")]
    /// The launch's dynamic shared-memory size differs from what its dynamic buffers need.
    DynSmemMismatch {
        /// The kernel's name.
        kernel: String,
        /// Bytes the launch declares.
        declared: u64,
        /// Bytes the dynamic buffers need (16-byte aligned offsets).
        needed: u64,
    },
    #[error("kernel `{kernel}`: a vector access of {bytes} B into `{buffer}` (2, 4, 8, 16 or a multiple of 16)")]
    /// A vectorized load or store whose width is not a legal access size.
    VectorWidth {
        /// The kernel's name.
        kernel: String,
        /// The buffer accessed.
        buffer: String,
        /// Bytes accessed at once.
        bytes: u64,
    },
    #[error("kernel `{kernel}`: {threads} threads per block ({why})")]
    /// A block size the hardware or the template cannot run (0, over 1024, not a multiple of 32…).
    BlockSize {
        /// The kernel's name.
        kernel: String,
        /// Threads per block.
        threads: u32,
        /// Which rule it breaks.
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
    let mut bad_vector = None;
    walk(&k.body, &mut |s| {
        if let Stmt::Load {
            buffer, ty, vector, ..
        }
        | Stmt::Store {
            buffer, ty, vector, ..
        } = s
        {
            let bytes = ty.bytes() * u64::from(*vector);
            let ok = *vector <= 1
                || (bytes.is_power_of_two() && bytes >= 2)
                || (bytes > 16 && bytes.is_multiple_of(16));
            if !ok && bad_vector.is_none() {
                bad_vector = Some((buffer.clone(), bytes));
            }
        }
        if matches!(
            s,
            Stmt::WarpReduce { .. } | Stmt::LdMatrix { .. } | Stmt::Mma { .. }
        ) {
            collective = true;
        }
    });
    if let Some((buffer, bytes)) = bad_vector {
        return Err(GpuIrError::VectorWidth {
            kernel: name,
            buffer,
            bytes,
        });
    }
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
            Stmt::Sm90 {
                warpgroup: true, ..
            } if under == Div::Thread => return bad("a warpgroup collective (wgmma, setmaxnreg)"),
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

#[cfg(test)]
mod tests {
    use super::super::{CType, Launch, Smem, Unroll};
    use super::*;
    use crate::ir::dim::Dim;
    use crate::ir::region::Size;
    use crate::target::Arch;

    #[test]
    fn signature_tensors_must_fit_the_gpu_memory() {
        let doc = |m: &str| {
            format!(
                r#"{{"signature": {{"inputs": [{{"tensor": "X", "role": "data"}}],
                     "outputs": [{{"tensor": "Y"}}]}},
                   {m}
                   "tensors": {{"X": {{"dtype": "fp32", "shape": ["M", 1048576]}},
                               "Y": {{"dtype": "fp32", "shape": ["M", 1048576]}}}},
                   "graph": [{{"op": "Elementwise", "name": "r", "inputs": ["X"],
                              "outputs": ["Y"], "attrs": {{"fn": "relu"}}}}]}}"#
            )
        };
        let load = |m: &str| {
            crate::ir::frontend::load_str(&doc(m), "g.json").unwrap_or_else(|d| panic!("{d:?}"))
        };
        // 2 × 4 B × 10240 × 2^20 = 80 GiB exactly: fits; one more row does not.
        assert_eq!(
            check_device_memory(&load(r#""symbols": {"M": 10240},"#)),
            Ok(())
        );
        let e = check_device_memory(&load(r#""symbols": {"M": 10241},"#)).expect_err("over");
        assert_eq!(e.bytes, 2 * 4 * 10241 * (1u128 << 20));
        assert_eq!(
            (e.largest.as_str(), e.largest_bytes),
            ("X", (4 * 10241) << 20)
        );
        // Symbolic sizes are only known at run time.
        assert_eq!(check_device_memory(&load("")), Ok(()));
    }

    #[test]
    fn grids_are_checked_against_the_hardware_limits() {
        assert_eq!(check_grid("k", [7, 65535, 65535]), Ok([7, 65535, 65535]));
        assert_eq!(
            check_grid("k", [i64::from(i32::MAX), 1, 1]),
            Ok([i32::MAX as u32, 1, 1])
        );
        assert_eq!(check_grid("k", [0, 1, 1]), Ok([0, 1, 1]));
        let e = check_grid("conv", [1, 100352, 1]).expect_err("y over 65535");
        assert_eq!((e.axis, e.value, e.limit), ('y', 100352, 65535));
        assert_eq!(
            e.to_string(),
            "kernel `conv` needs grid.y = 100352, over the hardware limit of 65535 (grid [1, 100352, 1])"
        );
        let e = check_grid("k", [1i64 << 31, 1, 1]).expect_err("x over 2^31-1");
        assert_eq!(e.axis, 'x');
        assert_eq!(check_grid("k", [1, 1, 65536]).map_err(|e| e.axis), Err('z'));
        assert_eq!(check_grid("k", [-1, 1, 1]).map_err(|e| e.value), Err(-1));
    }

    fn kernel(body: Vec<Stmt>, smem: Vec<Smem>, threads: u32, dyn_smem: u32) -> Kernel {
        Kernel {
            name: "k".into(),
            arch: Arch::Sm80,
            template: "test".into(),
            params: vec![],
            launch: Launch {
                grid: [Size(Dim::int(1)), Size(Dim::int(1)), Size(Dim::int(1))],
                block: [threads, 1, 1],
                dyn_smem_bytes: dyn_smem,
            },
            smem,
            body,
            max_regs: None,
        }
    }

    fn copy(token: &str) -> Stmt {
        Stmt::CpAsync {
            dst: "dst".into(),
            src: "src".into(),
            bytes: 16,
            src_bytes: "16".into(),
            token: token.into(),
        }
    }

    fn ld(token: &str) -> Stmt {
        Stmt::LdMatrix {
            dst: "r".into(),
            num: 4,
            trans: false,
            addr: "a".into(),
            token: token.into(),
        }
    }

    fn wait(token: &str) -> Stmt {
        Stmt::Wait {
            tokens: vec![token.into()],
            pending: 0,
        }
    }

    fn mma() -> Stmt {
        Stmt::Mma {
            bf16: false,
            d: "d".into(),
            a: "a".into(),
            b: "b".into(),
            c: "d".into(),
            token: "tC".into(),
        }
    }

    fn check(k: &Kernel) -> Result<(), GpuIrError> {
        verify(k, &Arch::Sm80.target())
    }

    fn looped(body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var: "kt".into(),
            start: "0".into(),
            end: "n".into(),
            step: "1".into(),
            unroll: Unroll::Compiler,
            div: Div::Block,
            body,
        }
    }

    #[test]
    fn a_pipeline_with_waits_verifies() {
        let body = vec![
            copy("tA"),
            Stmt::Commit { token: "tA".into() },
            looped(vec![
                wait("tA"),
                Stmt::Barrier,
                ld("tA"),
                mma(),
                Stmt::Barrier,
                copy("tA"),
                Stmt::Commit { token: "tA".into() },
            ]),
            Stmt::Epilogue {
                after: "tC".into(),
                token: "tE".into(),
                body: vec![],
            },
        ];
        assert_eq!(check(&kernel(body, vec![], 128, 0)), Ok(()));
    }

    #[test]
    fn ldmatrix_before_its_wait_is_rejected() {
        let body = vec![copy("tA"), Stmt::Commit { token: "tA".into() }, ld("tA")];
        assert!(matches!(
            check(&kernel(body, vec![], 128, 0)),
            Err(GpuIrError::TokenNotReady { .. })
        ));
    }

    #[test]
    fn a_loop_that_reloads_without_waiting_is_rejected() {
        // The first iteration is fine (the prologue's wait); the second reads a stage whose
        // copy was committed in the first and never waited on.
        let body = vec![
            copy("tA"),
            Stmt::Commit { token: "tA".into() },
            wait("tA"),
            looped(vec![
                ld("tA"),
                copy("tA"),
                Stmt::Commit { token: "tA".into() },
            ]),
        ];
        assert!(matches!(
            check(&kernel(body, vec![], 128, 0)),
            Err(GpuIrError::TokenNotReady { .. })
        ));
    }

    #[test]
    fn waiting_on_an_uncommitted_group_is_rejected() {
        let body = vec![copy("tA"), wait("tA")];
        assert!(matches!(
            check(&kernel(body, vec![], 128, 0)),
            Err(GpuIrError::WaitUncommitted { .. })
        ));
    }

    #[test]
    fn a_wait_on_one_branch_only_does_not_make_the_token_ready() {
        let body = vec![
            copy("tA"),
            Stmt::Commit { token: "tA".into() },
            Stmt::If {
                cond: "c".into(),
                div: Div::Block,
                then: vec![wait("tA")],
                otherwise: vec![],
            },
            ld("tA"),
        ];
        assert!(check(&kernel(body, vec![], 128, 0)).is_err());
    }

    #[test]
    fn vector_accesses_must_be_whole_words() {
        use super::super::CType;
        let access = |ty, vector| {
            vec![
                Stmt::Load {
                    dst: "v".into(),
                    buffer: "in0".into(),
                    index: "0".into(),
                    ty,
                    vector,
                },
                Stmt::Store {
                    buffer: "out0".into(),
                    index: "0".into(),
                    value: "v".into(),
                    ty,
                    vector,
                },
            ]
        };
        for (ty, vector) in [
            (CType::Half, 8),
            (CType::F32, 8),
            (CType::Half, 2),
            (CType::F32, 1),
        ] {
            assert!(check(&kernel(access(ty, vector), vec![], 128, 0)).is_ok());
        }
        for (ty, vector) in [(CType::Half, 3), (CType::F32, 6), (CType::F32, 5)] {
            assert!(matches!(
                check(&kernel(access(ty, vector), vec![], 128, 0)),
                Err(GpuIrError::VectorWidth { .. })
            ));
        }
    }

    #[test]
    fn an_epilogue_needs_its_mma() {
        let body = vec![Stmt::Epilogue {
            after: "tC".into(),
            token: "tE".into(),
            body: vec![],
        }];
        assert!(matches!(
            check(&kernel(body, vec![], 128, 0)),
            Err(GpuIrError::TokenNotReady { .. })
        ));
    }

    #[test]
    fn barriers_and_collectives_under_divergent_control_are_rejected() {
        let under = |div, s: Stmt| {
            vec![Stmt::If {
                cond: "threadIdx.x < 16".into(),
                div,
                then: vec![s],
                otherwise: vec![],
            }]
        };
        let warp_sum = Stmt::WarpReduce {
            op: WarpOp::Sum,
            dst: "x".into(),
            value: "x".into(),
        };
        for (div, s, bad) in [
            (Div::Thread, Stmt::Barrier, true),
            (Div::Warp, Stmt::Barrier, true),
            (Div::Block, Stmt::Barrier, false),
            (Div::Thread, warp_sum.clone(), true),
            (Div::Warp, warp_sum, false),
            (Div::Thread, mma(), true),
        ] {
            let r = check(&kernel(under(div, s.clone()), vec![], 128, 0));
            assert_eq!(r.is_err(), bad, "{s:?} under {div:?}: {r:?}");
        }
        // A barrier in a thread-divergent loop (a strided loop over a row) is divergent too.
        let body = vec![Stmt::For {
            var: "e".into(),
            start: "threadIdx.x".into(),
            end: "n".into(),
            step: "128".into(),
            unroll: Unroll::Compiler,
            div: Div::Thread,
            body: vec![Stmt::Barrier],
        }];
        assert!(check(&kernel(body, vec![], 128, 0)).is_err());
    }

    #[test]
    fn shared_memory_and_block_limits() {
        let buf = |n: u64, dynamic| Smem {
            name: format!("s{n}"),
            ty: CType::F32,
            dims: vec![n],
            dynamic,
        };
        // 48 KiB of static shared memory is the limit without opting in.
        assert!(check(&kernel(vec![], vec![buf(12 * 1024, false)], 128, 0)).is_ok());
        assert!(matches!(
            check(&kernel(vec![], vec![buf(12 * 1024 + 1, false)], 128, 0)),
            Err(GpuIrError::SmemOver { kind: "static", .. })
        ));
        // Dynamic shared memory up to the arch's per-block limit (163 KiB on sm80).
        let big = 160 * 1024 / 4;
        assert!(check(&kernel(vec![], vec![buf(big, true)], 128, 160 * 1024)).is_ok());
        assert!(matches!(
            check(&kernel(vec![], vec![buf(big, true)], 128, 1024)),
            Err(GpuIrError::DynSmemMismatch { .. })
        ));
        let over = 164 * 1024 / 4;
        assert!(matches!(
            check(&kernel(vec![], vec![buf(over, true)], 128, 164 * 1024)),
            Err(GpuIrError::SmemOver { .. })
        ));
        assert!(check(&kernel(vec![], vec![], 2048, 0)).is_err());
        // Warp collectives need whole warps.
        let ws = vec![Stmt::WarpReduce {
            op: WarpOp::Max,
            dst: "x".into(),
            value: "x".into(),
        }];
        assert!(check(&kernel(ws, vec![], 48, 0)).is_err());
    }
}
