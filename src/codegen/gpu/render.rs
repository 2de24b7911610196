//! GPU IR → CUDA C. Each statement renders as one C statement or block; the helpers it calls
//! (`dlc_cvt`, `dlc_cp_async_16`, `dlc_mma_m16n8k16_f16`, …) live in `dlc_kernel.cuh`, which has
//! a device and a host (emulation) implementation of the same names.

use super::{CType, Kernel, ParamKind, Stmt, Unroll, WarpOp};
use std::fmt::Write;

/// The name dynamic shared memory is declared under.
pub const DYN_SMEM: &str = "dlc_dyn_smem";

/// The kernel as CUDA C (`extern "C"`, so that loaders find it by name). The launch bounds
/// name the block size and one resident block per SM: without the second figure ptxas on
/// sm_90a caps registers low enough to spill a SIMT micro-tile (measured: 64 registers and a
/// spill, against 96 and none with it).
pub fn kernel(k: &Kernel) -> String {
    let mut out = String::new();
    let params: Vec<String> = k
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Input => format!("const {}* __restrict__ {}", p.ty.c(), p.name),
            ParamKind::Output | ParamKind::Workspace => {
                format!("{}* __restrict__ {}", p.ty.c(), p.name)
            }
            ParamKind::Symbol => format!("int {}", p.name),
            ParamKind::TensorMap => format!("const __grid_constant__ dlc_tmap {}", p.name),
        })
        .collect();
    let _ = writeln!(
        out,
        "// {} kernel `{}` for {}: grid ({}, {}, {}), block ({}, {}, {}), {} B dynamic shared memory",
        k.template,
        k.name,
        k.arch.name(),
        k.launch.grid[0].0,
        k.launch.grid[1].0,
        k.launch.grid[2].0,
        k.launch.block[0],
        k.launch.block[1],
        k.launch.block[2],
        k.launch.dyn_smem_bytes
    );
    // ptxas takes one of the two qualifiers: the register cap implies the block size's.
    let bounds = match k.max_regs {
        Some(n) => format!("__maxnreg__({n})"),
        None => format!("__launch_bounds__({}, 1)", k.launch.threads()),
    };
    let _ = writeln!(
        out,
        "extern \"C\" __global__ void {bounds} {}({}) {{",
        k.name,
        params.join(", ")
    );
    let mut offset = 0u64;
    let mut any_dynamic = false;
    for s in &k.smem {
        let dims: String = s.dims.iter().map(|d| format!("[{d}]")).collect();
        if s.dynamic {
            if !any_dynamic {
                let _ = writeln!(out, "  DLC_DYN_SMEM({DYN_SMEM});");
                any_dynamic = true;
            }
            offset = offset.div_ceil(16) * 16;
            let _ = writeln!(
                out,
                "  {ty} (&{name}){dims} = *reinterpret_cast<{ty} (*){dims}>({DYN_SMEM} + {offset});",
                ty = s.ty.c(),
                name = s.name
            );
            offset += s.bytes();
        } else {
            let _ = writeln!(
                out,
                "  __shared__ __align__(16) {} {}{};",
                s.ty.c(),
                s.name,
                dims
            );
        }
    }
    stmts(&mut out, &k.body, 1);
    out.push_str("}\n");
    out
}

fn pad(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn stmts(out: &mut String, body: &[Stmt], depth: usize) {
    for s in body {
        stmt(out, s, depth);
    }
}

fn block(out: &mut String, body: &[Stmt], depth: usize) {
    out.push_str("{\n");
    stmts(out, body, depth + 1);
    pad(out, depth);
    out.push('}');
}

fn stmt(out: &mut String, s: &Stmt, depth: usize) {
    pad(out, depth);
    match s {
        Stmt::Comment(t) => {
            let _ = writeln!(out, "// {t}");
        }
        Stmt::Let {
            ty,
            name,
            value,
            mutable,
        } => {
            let c = if *mutable { "" } else { "const " };
            let _ = writeln!(out, "{c}{} {name} = {value};", ty.c());
        }
        Stmt::Array {
            ty,
            name,
            dims,
            zero,
        } => {
            let d: String = dims.iter().map(|d| format!("[{d}]")).collect();
            let init = if *zero { " = {}" } else { "" };
            let _ = writeln!(out, "{} {name}{d}{init};", ty.c());
        }
        Stmt::Assign { place, value } => {
            let _ = writeln!(out, "{place} = {value};");
        }
        Stmt::Load {
            dst,
            buffer,
            index,
            ty,
            vector,
        } => {
            for (e, bytes) in vector_chunks(*ty, *vector) {
                let _ = writeln!(
                    out,
                    "dlc_ld_vec<{bytes}>(&{dst}[{e}], &{buffer}[{}]);",
                    plus(index, e)
                );
            }
        }
        Stmt::Store {
            buffer,
            index,
            value,
            ty,
            vector,
        } => {
            if *vector <= 1 {
                let _ = writeln!(out, "{buffer}[{index}] = {value};");
            } else {
                for (e, bytes) in vector_chunks(*ty, *vector) {
                    let _ = writeln!(
                        out,
                        "dlc_st_vec<{bytes}>(&{buffer}[{}], &{value}[{e}]);",
                        plus(index, e)
                    );
                }
            }
        }
        Stmt::For {
            var,
            start,
            end,
            step,
            unroll,
            body,
            ..
        } => {
            match unroll {
                Unroll::Compiler => {}
                Unroll::Full => {
                    out.push_str("#pragma unroll\n");
                    pad(out, depth);
                }
                Unroll::Never => {
                    out.push_str("#pragma unroll 1\n");
                    pad(out, depth);
                }
                Unroll::By(n) => {
                    let _ = writeln!(out, "#pragma unroll {n}");
                    pad(out, depth);
                }
            }
            let _ = write!(
                out,
                "for (int {var} = {start}; {var} < {end}; {var} += {step}) "
            );
            block(out, body, depth);
            out.push('\n');
        }
        Stmt::If {
            cond,
            then,
            otherwise,
            ..
        } => {
            let _ = write!(out, "if ({cond}) ");
            block(out, then, depth);
            if !otherwise.is_empty() {
                out.push_str(" else ");
                block(out, otherwise, depth);
            }
            out.push('\n');
        }
        Stmt::Barrier => out.push_str("__syncthreads();\n"),
        Stmt::Fence => out.push_str("dlc_fence();\n"),
        Stmt::WarpReduce { op, dst, value } => {
            let f = match op {
                WarpOp::Sum => "dlc_warp_sum",
                WarpOp::Max => "dlc_warp_max",
                WarpOp::Min => "dlc_warp_min",
            };
            let _ = writeln!(out, "{dst} = {f}({value});");
        }
        Stmt::CpAsync {
            dst,
            src,
            bytes,
            src_bytes,
            token,
        } => {
            let _ = writeln!(
                out,
                "dlc_cp_async_{bytes}({dst}, {src}, {src_bytes});  // -> {token}"
            );
        }
        Stmt::Commit { token } => {
            let _ = writeln!(out, "dlc_cp_async_commit();  // TokLoad {token}");
        }
        Stmt::Wait { tokens, pending } => {
            let _ = writeln!(
                out,
                "dlc_cp_async_wait<{pending}>();  // ready: {}",
                tokens.join(", ")
            );
        }
        Stmt::SmemUse { token } => {
            let _ = writeln!(out, "// reads shared memory staged by {token}");
        }
        Stmt::LdMatrix {
            dst,
            num,
            trans,
            addr,
            ..
        } => {
            let t = if *trans { "_trans" } else { "" };
            let _ = writeln!(out, "dlc_ldmatrix_x{num}{t}({dst}, {addr});");
        }
        Stmt::Mma {
            bf16, d, a, b, c, ..
        } => {
            let ty = if *bf16 { "bf16" } else { "f16" };
            let _ = writeln!(out, "dlc_mma_m16n8k16_{ty}({d}, {a}, {b}, {c});");
        }
        Stmt::Epilogue { after, token, body } => {
            let _ = write!(out, "/* epilogue: after {after}, -> {token} */ ");
            block(out, body, depth);
            out.push('\n');
        }
        Stmt::Block(body) => {
            block(out, body, depth);
            out.push('\n');
        }
        Stmt::Sm90 { code, .. } => {
            let _ = writeln!(out, "{code};");
        }
    }
}

/// Applies `f` to every statement, depth first.
pub fn walk<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt)) {
    for s in body {
        f(s);
        match s {
            Stmt::For { body, .. } | Stmt::Epilogue { body, .. } | Stmt::Block(body) => {
                walk(body, f)
            }
            Stmt::If {
                then, otherwise, ..
            } => {
                walk(then, f);
                walk(otherwise, f);
            }
            _ => {}
        }
    }
}

/// The accesses of a `vector`-element access of `ty`: (first element, bytes), at most 16 bytes
/// each.
pub fn vector_chunks(ty: CType, vector: u32) -> Vec<(u64, u64)> {
    let total = ty.bytes() * u64::from(vector);
    let bytes = total.min(16);
    let per = (bytes / ty.bytes()).max(1);
    (0..total.div_ceil(bytes))
        .map(|c| (c * per, bytes))
        .collect()
}

/// `index + e` in C (`index` itself when `e` is 0).
fn plus(index: &str, e: u64) -> String {
    if e == 0 {
        index.to_string()
    } else {
        format!("{index} + {e}")
    }
}
