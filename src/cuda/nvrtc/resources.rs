//! What a compiled kernel uses (registers, static shared memory, spills: ptxas's `-v` log,
//! [`parse_ptxas_log`]) checked against each launch of a manifest
//! ([`check_manifest_resources`]).

use super::{gpu_architecture, Compiled, KernelResources, NvrtcError};
use crate::codegen::manifest::{Manifest, ManifestStep};

/// The first `'…'`-quoted word after `keyword` in `line`.
fn quoted_after(line: &str, keyword: &str) -> Option<String> {
    let rest = &line[line.find(keyword)? + keyword.len()..];
    let start = rest.find('\'')? + 1;
    let len = rest[start..].find('\'')?;
    Some(rest[start..start + len].to_string())
}

/// The number just before `unit` in `line` (`"20 registers"`, `"768 bytes smem"`).
fn number_before(line: &str, unit: &str) -> Option<u32> {
    let head = line[..line.find(unit)?].trim_end();
    let digits = head.rsplit(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok()
}

/// Parses ptxas's `-v` lines into one [`KernelResources`] per entry function:
///
/// ```text
/// ptxas info    : Compiling entry function 'gemm' for 'sm_80'
/// ptxas info    : Function properties for gemm
///     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
/// ptxas info    : Used 20 registers, used 1 barriers, 768 bytes smem, 356 bytes cmem[0]
/// ```
pub fn parse_ptxas_log(log: &str) -> Vec<KernelResources> {
    let mut kernels: Vec<KernelResources> = Vec::new();
    // The function whose "Function properties" block is being read, if it is an entry.
    let mut properties_of: Option<usize> = None;
    let mut current: Option<usize> = None;
    for line in log.lines() {
        if line.contains("Compiling entry function") {
            let Some(name) = quoted_after(line, "function") else {
                continue;
            };
            let at = match kernels.iter().position(|k| k.name == name) {
                Some(i) => i,
                None => {
                    kernels.push(KernelResources {
                        name,
                        ..KernelResources::default()
                    });
                    kernels.len() - 1
                }
            };
            current = Some(at);
            properties_of = None;
        } else if let Some(i) = line.find("Function properties for ") {
            let name = line[i + "Function properties for ".len()..].trim();
            properties_of = kernels.iter().position(|k| k.name == name);
        } else if line.contains("spill stores") {
            if let Some(k) = properties_of.and_then(|i| kernels.get_mut(i)) {
                k.spill_bytes = number_before(line, "bytes spill stores").unwrap_or(0)
                    + number_before(line, "bytes spill loads").unwrap_or(0);
            }
        } else if line.contains("Used ") && line.contains(" registers") {
            if let Some(k) = current.and_then(|i| kernels.get_mut(i)) {
                k.registers = number_before(line, " registers").unwrap_or(0);
                k.static_smem_bytes = number_before(line, " bytes smem").unwrap_or(0);
            }
        }
    }
    kernels
}

/// Threads of one block may hold at most this many registers (sm_80 and sm_90).
pub const REGS_PER_BLOCK: u32 = 65536;

/// Registers are allocated per warp in units of this many.
const REG_ALLOC_UNIT: u32 = 256;

/// Checks every launch of `manifest` against what `compiled` says of its kernel: the kernel
/// exists; static plus dynamic shared memory fit the per-block limit of `compiled.arch` (163 KiB
/// on sm_80, 227 KiB on sm_90); the block has 1 to 1024 threads within the per-axis limits; its
/// warps' registers fit the 64 Ki registers of a block.
pub fn check_manifest_resources(
    compiled: &Compiled,
    manifest: &Manifest,
) -> Result<(), NvrtcError> {
    let target = gpu_architecture(compiled.arch).to_string();
    let limit = compiled.arch.target().smem_per_block;
    for step in &manifest.steps {
        let ManifestStep::Launch(l) = step else {
            continue;
        };
        let k = compiled
            .kernel(&l.kernel)
            .ok_or_else(|| NvrtcError::MissingKernel {
                kernel: l.kernel.clone(),
                defined: compiled
                    .kernels
                    .iter()
                    .map(|k| k.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let total = u64::from(k.static_smem_bytes) + u64::from(l.dyn_smem_bytes);
        if total > u64::from(limit) {
            return Err(NvrtcError::SharedMemory {
                kernel: l.kernel.clone(),
                target,
                static_bytes: k.static_smem_bytes,
                dyn_bytes: l.dyn_smem_bytes,
                limit,
            });
        }
        let launch_error = |why: String| NvrtcError::LaunchResources {
            kernel: l.kernel.clone(),
            target: target.clone(),
            why,
        };
        let [x, y, z] = l.block;
        let threads = u64::from(x) * u64::from(y) * u64::from(z);
        if threads == 0 || threads > 1024 || x > 1024 || y > 1024 || z > 64 {
            return Err(launch_error(format!(
                "block {:?} must have 1 to 1024 threads (x, y ≤ 1024, z ≤ 64)",
                l.block
            )));
        }
        let warps = threads.div_ceil(32);
        let per_warp = (u64::from(k.registers) * 32).div_ceil(u64::from(REG_ALLOC_UNIT))
            * u64::from(REG_ALLOC_UNIT);
        if warps * per_warp > u64::from(REGS_PER_BLOCK) {
            return Err(launch_error(format!(
                "{threads} threads × {} registers need {} registers, over the {REGS_PER_BLOCK} of a block",
                k.registers,
                warps * per_warp
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptxas_log_is_parsed_per_entry() {
        let log = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'a' for 'sm_80'
ptxas info    : Function properties for a
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 20 registers, used 1 barriers, 768 bytes smem, 356 bytes cmem[0]
ptxas info    : Function properties for helper
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function 'b' for 'sm_80'
ptxas info    : Function properties for b
    16 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 255 registers, 356 bytes cmem[0]
";
        let ks = parse_ptxas_log(log);
        assert_eq!(
            ks,
            vec![
                KernelResources {
                    name: "a".into(),
                    registers: 20,
                    static_smem_bytes: 768,
                    spill_bytes: 0
                },
                KernelResources {
                    name: "b".into(),
                    registers: 255,
                    static_smem_bytes: 0,
                    spill_bytes: 20
                },
            ]
        );
    }
}
