//! The SASS of a compiled program, summarized per kernel: what the tensor cores, the memory
//! pipes and the main loops do, read off `cuobjdump -sass` of the cubin NVRTC made. No GPU and
//! no CUDA toolkit needed: `cuobjdump` and the `nvdisasm` it runs come from NVIDIA's PyPI wheels
//! (`scripts/install-cuda-wheels.sh` puts them in `<repo>/.cuda/nvidia/cu13/bin/`).
//!
//! Where `cuobjdump` is found, in order: `$DLC_CUOBJDUMP` (the executable); the wheel's
//! `bin/cuobjdump`; `cuobjdump` on `PATH`. `nvdisasm` is looked for beside it (passed as
//! `NVDISASM_PATH`).
//!
//! [`sass_summary`] returns one [`SassSummary`] per kernel: counts of `HMMA` / `HGMMA`
//! (tensor cores), `LDGSTS` by width (`cp.async`), `LDG` / `STG` by width, `LDSM` (`ldmatrix`),
//! `LDL` / `STL` (local memory: spills or indexed arrays), `BAR`, and every loop (a backward
//! branch) with its instruction and `HMMA` counts.

use super::{wheel_dir, INSTALL_SUGGESTION};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable naming the `cuobjdump` executable to use.
pub const ENV_CUOBJDUMP: &str = "DLC_CUOBJDUMP";

/// Why the SASS could not be read.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SassError {
    /// `cuobjdump` (or the `nvdisasm` it needs) cannot be found.
    #[error("cuobjdump is not available: {why}; {suggestion}")]
    Unavailable {
        /// What is missing.
        why: String,
        /// How to install or point to it.
        suggestion: String,
    },
    /// Writing the cubin to a temporary file or starting `cuobjdump` failed.
    #[error("cannot run cuobjdump: {why}")]
    Io {
        /// The I/O error.
        why: String,
    },
    /// `cuobjdump` ran and failed.
    #[error("cuobjdump -sass failed ({status}):\n{stderr}")]
    Failed {
        /// Its exit status.
        status: String,
        /// Its stderr.
        stderr: String,
    },
}

/// Global memory access widths, bits → instruction count (`LDG.E.128` → 128; `LDG.E.U16` → 16;
/// no width suffix → 32).
pub type ByWidth = BTreeMap<u32, u32>;

/// A loop of the SASS: a branch back to an earlier address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SassLoop {
    /// Byte address of the first instruction of the loop (the branch's target).
    pub start: u32,
    /// Byte address of the backward branch.
    pub end: u32,
    /// Instructions in `[start, end]` (`NOP`s excluded).
    pub instructions: u32,
    /// `HMMA` plus `HGMMA` instructions in `[start, end]`.
    pub mma: u32,
    /// `LDGSTS` instructions in `[start, end]`.
    pub ldgsts: u32,
    /// `LDSM` instructions in `[start, end]`.
    pub ldsm: u32,
}

/// The instruction mix of one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SassSummary {
    /// The kernel (`Function : …` in cuobjdump's output).
    pub name: String,
    /// Instructions (`NOP`s excluded).
    pub instructions: u32,
    /// `HMMA.*` (`mma.sync`).
    pub hmma: u32,
    /// `HGMMA.*` (`wgmma`).
    pub hgmma: u32,
    /// `LDGSTS` (`cp.async`) by width.
    pub ldgsts: ByWidth,
    /// `UTMALDG` (`cp.async.bulk.tensor`: TMA tile loads, whole boxes into shared memory).
    pub utmaldg: u32,
    /// `LDG` by width.
    pub ldg: ByWidth,
    /// `STG` by width.
    pub stg: ByWidth,
    /// `LDSM` (`ldmatrix`).
    pub ldsm: u32,
    /// `LDL` (local-memory loads).
    pub ldl: u32,
    /// `STL` (local-memory stores).
    pub stl: u32,
    /// `BAR.*` (barriers).
    pub bar: u32,
    /// Every loop, by start address (nested loops each appear).
    pub loops: Vec<SassLoop>,
}

impl SassSummary {
    /// The loops holding tensor-core instructions.
    pub fn mma_loops(&self) -> impl Iterator<Item = &SassLoop> {
        self.loops.iter().filter(|l| l.mma > 0)
    }

    /// The main loop: the loop with the most tensor-core instructions, else the longest.
    pub fn main_loop(&self) -> Option<&SassLoop> {
        self.loops
            .iter()
            .max_by_key(|l| (l.mma, l.instructions, std::cmp::Reverse(l.start)))
    }

    /// Tensor-core instructions outside every loop.
    pub fn mma_outside_loops(&self) -> u32 {
        let inside: u32 = self.mma_loops().map(|l| l.mma).max().unwrap_or(0);
        (self.hmma + self.hgmma).saturating_sub(inside)
    }
}

/// Finds `cuobjdump`: `env` (which must be a file), `<wheels>/bin/cuobjdump`, else `cuobjdump`
/// on `PATH`.
pub fn choose_cuobjdump(env: Option<&str>, wheels: &Path) -> Result<PathBuf, SassError> {
    let unavailable = |why: String| SassError::Unavailable {
        why,
        suggestion: INSTALL_SUGGESTION.to_string(),
    };
    if let Some(p) = env.filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(unavailable(format!(
                "{ENV_CUOBJDUMP}={} is not a file",
                p.display()
            )))
        };
    }
    let wheel = wheels.join("bin").join("cuobjdump");
    if wheel.is_file() {
        return Ok(wheel);
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("cuobjdump"))
            .find(|p| p.is_file())
    });
    on_path.ok_or_else(|| {
        unavailable(format!(
            "{} does not exist, {ENV_CUOBJDUMP} is not set and no cuobjdump is on PATH",
            wheel.display()
        ))
    })
}

/// The `cuobjdump` of this machine ([`choose_cuobjdump`] with the environment and the wheels).
pub fn cuobjdump() -> Result<PathBuf, SassError> {
    let env = std::env::var(ENV_CUOBJDUMP).ok();
    choose_cuobjdump(env.as_deref(), &wheel_dir())
}

/// Runs `cuobjdump -sass` on `cubin` and returns its text.
pub fn disassemble(cubin: &[u8]) -> Result<String, SassError> {
    let tool = cuobjdump()?;
    let io = |e: std::io::Error| SassError::Io { why: e.to_string() };
    let dir = std::env::temp_dir();
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = dir.join(format!("dlc-egg-{}-{n}.cubin", std::process::id()));
    std::fs::write(&file, cubin).map_err(io)?;
    let mut cmd = Command::new(&tool);
    cmd.arg("-sass").arg(&file);
    if let Some(bin) = tool.parent() {
        if bin.join("nvdisasm").is_file() {
            cmd.env("NVDISASM_PATH", bin);
        }
    }
    let out = cmd.output();
    let _ = std::fs::remove_file(&file);
    let out = out.map_err(io)?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        if stderr.contains("nvdisasm") {
            return Err(SassError::Unavailable {
                why: format!("{} cannot find nvdisasm: {}", tool.display(), stderr.trim()),
                suggestion: INSTALL_SUGGESTION.to_string(),
            });
        }
        return Err(SassError::Failed {
            status: out.status.to_string(),
            stderr,
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// [`disassemble`] and [`parse_sass`]: one summary per kernel of `cubin`, sorted by name.
pub fn sass_summary(cubin: &[u8]) -> Result<Vec<SassSummary>, SassError> {
    let mut s = parse_sass(&disassemble(cubin)?);
    s.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(s)
}

/// One instruction: address, opcode with modifiers, branch target.
struct Inst {
    addr: u32,
    opcode: String,
    target: Option<u32>,
}

/// Parses one line `/*0d80*/  @!P4 BRA 0x20d0 ;  /* 0x… */` (other lines: `None`).
fn parse_line(line: &str) -> Option<Inst> {
    let t = line.trim_start();
    let rest = t.strip_prefix("/*")?;
    let close = rest.find("*/")?;
    let addr = u32::from_str_radix(&rest[..close], 16).ok()?;
    let body = rest[close + 2..].split(';').next()?.trim();
    let mut words = body.split_whitespace();
    let mut opcode = words.next()?;
    if opcode.starts_with('@') {
        opcode = words.next()?;
    }
    let target = if opcode.starts_with("BRA") {
        words
            .next()
            .and_then(|w| w.strip_prefix("0x"))
            .and_then(|h| u32::from_str_radix(h.trim_end_matches(','), 16).ok())
    } else {
        None
    };
    Some(Inst {
        addr,
        opcode: opcode.to_string(),
        target,
    })
}

/// The access width in bits of a `LDG` / `STG` / `LDGSTS` opcode.
fn width_bits(opcode: &str) -> u32 {
    let mut width = 32;
    for m in opcode.split('.').skip(1) {
        width = match m {
            "128" => 128,
            "64" => 64,
            "U16" | "S16" => 16,
            "U8" | "S8" => 8,
            _ => continue,
        };
    }
    width
}

fn summarize(name: String, insts: &[Inst]) -> SassSummary {
    let mut s = SassSummary {
        name,
        ..SassSummary::default()
    };
    let base = |op: &str| op.split('.').next().unwrap_or("").to_string();
    for i in insts {
        let b = base(&i.opcode);
        if b != "NOP" {
            s.instructions += 1;
        }
        match b.as_str() {
            "HMMA" => s.hmma += 1,
            "HGMMA" => s.hgmma += 1,
            "UTMALDG" => s.utmaldg += 1,
            "LDGSTS" => *s.ldgsts.entry(width_bits(&i.opcode)).or_default() += 1,
            "LDG" => *s.ldg.entry(width_bits(&i.opcode)).or_default() += 1,
            "STG" => *s.stg.entry(width_bits(&i.opcode)).or_default() += 1,
            "LDSM" => s.ldsm += 1,
            "LDL" => s.ldl += 1,
            "STL" => s.stl += 1,
            "BAR" => s.bar += 1,
            _ => {}
        }
    }
    for br in insts {
        let Some(target) = br.target.filter(|&t| t < br.addr) else {
            continue;
        };
        let mut l = SassLoop {
            start: target,
            end: br.addr,
            ..SassLoop::default()
        };
        for i in insts
            .iter()
            .filter(|i| (target..=br.addr).contains(&i.addr))
        {
            match base(&i.opcode).as_str() {
                "NOP" => continue,
                "HMMA" | "HGMMA" => l.mma += 1,
                "LDGSTS" => l.ldgsts += 1,
                "LDSM" => l.ldsm += 1,
                _ => {}
            }
            l.instructions += 1;
        }
        s.loops.push(l);
    }
    s.loops.sort_by_key(|l| (l.start, l.end));
    s.loops.dedup();
    s
}

/// Parses `cuobjdump -sass` output into one [`SassSummary`] per `Function : NAME` block, in
/// the order they appear.
pub fn parse_sass(text: &str) -> Vec<SassSummary> {
    let mut out = Vec::new();
    let mut current: Option<(String, Vec<Inst>)> = None;
    for line in text.lines() {
        if let Some(i) = line.find("Function : ") {
            if let Some((name, insts)) = current.take() {
                out.push(summarize(name, &insts));
            }
            let name = line[i + "Function : ".len()..].trim().to_string();
            current = Some((name, Vec::new()));
        } else if let (Some((_, insts)), Some(inst)) = (current.as_mut(), parse_line(line)) {
            insts.push(inst);
        }
    }
    if let Some((name, insts)) = current {
        out.push(summarize(name, &insts));
    }
    out
}

/// `128:4 16:2` (width in bits: count), or `-` when empty.
pub fn format_widths(w: &ByWidth) -> String {
    if w.is_empty() {
        return "-".to_string();
    }
    w.iter()
        .rev()
        .map(|(bits, n)| format!("{bits}:{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "
\tcode for sm_80
\t\tFunction : gemm
\t.headerflags\t@\"EF_CUDA_SM80 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM80)\"
        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;   /* 0x00000a00ff017624 */
                                                                             /* 0x000fe400078e00ff */
        /*0010*/              @!P4 BRA 0x60 ;                                /* 0x0000000000007919 */
        /*0020*/                   LDGSTS.E.BYPASS.LTC128B.128 [R3], desc[UR4][R4.64] ;
        /*0030*/                   LDSM.16.M88.4 R32, [R32] ;
        /*0040*/                   HMMA.16816.F32 R24, R32.reuse, R40, R24 ;
        /*0050*/               @P0 BRA 0x20 ;
        /*0060*/                   NOP ;
        /*0070*/              @!P0 STG.E.U16 [R4.64], R13 ;
        /*0080*/                   LDG.E.128.CONSTANT R8, [R2.64] ;
        /*0090*/                   LDG.E.CONSTANT R9, [R2.64] ;
        /*00a0*/                   STL [R1], R2 ;
        /*00b0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00c0*/                   EXIT ;
        /*00d0*/                   BRA 0xd0;
\t\tFunction : rows
        /*0000*/                   LDL.64 R2, [R1] ;
        /*0010*/                   EXIT ;
";

    #[test]
    fn sass_is_summarized_per_kernel() {
        let s = parse_sass(SAMPLE);
        assert_eq!(s.len(), 2);
        let g = &s[0];
        assert_eq!(g.name, "gemm");
        assert_eq!((g.hmma, g.hgmma, g.ldsm, g.bar), (1, 0, 1, 1));
        assert_eq!(g.instructions, 13, "NOP excluded");
        assert_eq!(g.ldgsts, ByWidth::from([(128, 1)]));
        assert_eq!(g.ldg, ByWidth::from([(32, 1), (128, 1)]));
        assert_eq!(g.stg, ByWidth::from([(16, 1)]));
        assert_eq!((g.ldl, g.stl), (0, 1));
        assert_eq!(
            g.loops,
            vec![SassLoop {
                start: 0x20,
                end: 0x50,
                instructions: 4,
                mma: 1,
                ldgsts: 1,
                ldsm: 1
            }],
            "the forward branch and the trailing self-branch are no loops"
        );
        assert_eq!(g.main_loop().map(|l| l.start), Some(0x20));
        assert_eq!(g.mma_outside_loops(), 0);
        assert_eq!(format_widths(&g.ldg), "128:1 32:1");
        assert_eq!((s[1].name.as_str(), s[1].ldl), ("rows", 1));
        assert!(s[1].loops.is_empty());
    }

    #[test]
    fn cuobjdump_choice() {
        let dir = tempfile::tempdir().expect("temp dir");
        let wheels = dir.path().join("cu13");
        let missing = dir.path().join("nope");
        let err = choose_cuobjdump(missing.to_str(), &wheels).expect_err("missing");
        assert!(
            err.to_string()
                .contains("run scripts/install-cuda-wheels.sh"),
            "{err}"
        );
        std::fs::create_dir_all(wheels.join("bin")).expect("mkdir");
        let tool = wheels.join("bin").join("cuobjdump");
        std::fs::write(&tool, b"").expect("write");
        assert_eq!(choose_cuobjdump(None, &wheels), Ok(tool));
    }
}
