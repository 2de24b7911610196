//! The generated host program: the buffers laid out under the bindings ([`layout`]) and
//! `main.cpp` with its parameter file ([`generate`]): allocation, input files, one
//! `dlc_emu::launch` per manifest launch, output files.

use super::{Buf, HostError, Layout, Program, Storage};
use crate::codegen::gpu::verify::check_grid;
use crate::codegen::manifest::{BufferRole, KernelArg, KernelLaunch, Manifest, ManifestStep};
use crate::codegen::HEADER_NAME;
use crate::ir::dtype::DType;
use std::collections::BTreeMap;
use std::fmt::Write as _;

fn c_type(d: DType) -> &'static str {
    match d {
        DType::F16 => "__half",
        DType::BF16 => "__nv_bfloat16",
        DType::F32 => "float",
        DType::I32 => "int",
        DType::Bool => "bool",
    }
}

fn eval(
    size: &crate::ir::region::Size,
    b: &BTreeMap<String, i64>,
    what: &str,
) -> Result<i64, HostError> {
    size.0.eval_with(b).map_err(|e| HostError::Size {
        what: what.to_string(),
        why: e.to_string(),
    })
}

pub(super) fn layout(m: &Manifest, bindings: &BTreeMap<String, i64>) -> Result<Layout, HostError> {
    let decls: BTreeMap<&str, _> = m.buffers.iter().map(|b| (b.name.as_str(), b)).collect();
    if decls.len() != m.buffers.len() {
        return Err(HostError::Manifest(
            "a buffer name is declared twice".into(),
        ));
    }
    let mut storages = Vec::new();
    let mut storage_of: BTreeMap<&str, usize> = BTreeMap::new();
    for b in &m.buffers {
        if matches!(b.role, BufferRole::Alias { .. }) {
            continue;
        }
        storage_of.insert(&b.name, storages.len());
        storages.push(Storage {
            bytes: 0,
            input: (b.role == BufferRole::Input).then(|| b.name.clone()),
            zeroed: b.role == BufferRole::Workspace { zeroed: true },
        });
    }
    let mut bufs = BTreeMap::new();
    for b in &m.buffers {
        let mut shape = Vec::with_capacity(b.shape.len());
        for (i, s) in b.shape.iter().enumerate() {
            let what = format!("buffer `{}` dimension {i}", b.name);
            let v = eval(s, bindings, &what)?;
            shape.push(usize::try_from(v).map_err(|_| HostError::Size {
                what,
                why: format!("{v} is negative"),
            })?);
        }
        let numel = shape
            .iter()
            .try_fold(1usize, |a, d| a.checked_mul(*d))
            .ok_or_else(|| HostError::Size {
                what: format!("buffer `{}`", b.name),
                why: "element count overflows".into(),
            })?;
        // Follow aliases to the storage, refusing cycles and unknown targets.
        let mut root = b;
        for _ in 0..=m.buffers.len() {
            let BufferRole::Alias { of } = &root.role else {
                break;
            };
            root = decls.get(of.as_str()).ok_or_else(|| {
                HostError::Manifest(format!("buffer `{}` aliases unknown `{of}`", root.name))
            })?;
        }
        let storage = *storage_of
            .get(root.name.as_str())
            .ok_or_else(|| HostError::Manifest(format!("alias cycle through `{}`", b.name)))?;
        if root.dtype != b.dtype {
            return Err(HostError::Manifest(format!(
                "alias `{}` is {} but its storage `{}` is {}",
                b.name, b.dtype, root.name, root.dtype
            )));
        }
        let bytes = (numel as u64).saturating_mul(b.dtype.size_bytes());
        let st = &mut storages[storage];
        st.bytes = st.bytes.max(bytes);
        bufs.insert(
            b.name.clone(),
            Buf {
                dtype: b.dtype,
                shape,
                numel,
                storage,
            },
        );
    }
    // Every alias views the whole storage: its element count is its target's.
    for b in &m.buffers {
        let buf = &bufs[&b.name];
        if (buf.numel as u64) * b.dtype.size_bytes() != storages[buf.storage].bytes {
            return Err(HostError::Manifest(format!(
                "buffer `{}` ({} elements) does not cover its storage",
                b.name, buf.numel
            )));
        }
    }
    Ok(Layout { bufs, storages })
}

/// The emulated `cuTensorMapEncodeTiled` call of a [`KernelArg::TensorMap`] into `CUtensorMap
/// name` (the manifest's encoding: dense row-major strides, 128-byte swizzle, zero fill).
fn tensor_map(
    body: &mut String,
    name: &str,
    b: &Buf,
    dims: &[String],
    box_dims: &[u32],
    kernel: &str,
) -> Result<(), HostError> {
    let dtype = match b.dtype {
        DType::F16 => "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
        DType::BF16 => "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
        d => {
            return Err(HostError::Manifest(format!(
                "`{kernel}`: a tensor map over a {d:?} buffer"
            )))
        }
    };
    if dims.len() != box_dims.len() || dims.is_empty() || dims.len() > 5 {
        return Err(HostError::Manifest(format!(
            "`{kernel}`: a tensor map of rank {} with a box of rank {}",
            dims.len(),
            box_dims.len()
        )));
    }
    let rank = dims.len();
    let elem = b.dtype.size_bytes();
    let _ = writeln!(body, "  CUtensorMap {name};");
    let _ = writeln!(body, "  {{");
    let _ = writeln!(
        body,
        "    const cuuint64_t dims[] = {{{}}};",
        dims.iter()
            .map(|d| format!("(cuuint64_t){d}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(body, "    cuuint64_t strides[5] = {{0, 0, 0, 0, 0}};");
    let _ = writeln!(body, "    cuuint64_t st = {elem};");
    let _ = writeln!(
        body,
        "    for (int d = 0; d + 1 < {rank}; ++d) {{ st *= dims[d]; strides[d] = st; }}"
    );
    let boxes: Vec<String> = box_dims.iter().map(|b| format!("{b}u")).collect();
    let _ = writeln!(
        body,
        "    const cuuint32_t box[] = {{{}}};",
        boxes.join(", ")
    );
    let _ = writeln!(body, "    const cuuint32_t es[] = {{1u, 1u, 1u, 1u, 1u}};");
    let _ = writeln!(
        body,
        "    if (cuTensorMapEncodeTiled(&{name}, {dtype}, {rank}u, s{}, dims, strides, box, es, \
         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, \
         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != 0) {{",
        b.storage
    );
    let _ = writeln!(
        body,
        "      std::fprintf(stderr, \"dlc_emu: cuTensorMapEncodeTiled rejects the tensor map of \
         `{kernel}`\\n\"); return 86;\n    }}\n  }}"
    );
    Ok(())
}

pub(super) fn generate(
    m: &Manifest,
    lay: &Layout,
    bindings: &BTreeMap<String, i64>,
) -> Result<Program, HostError> {
    let mut params = Vec::new();
    let mut body = String::new();
    for (i, s) in lay.storages.iter().enumerate() {
        let bytes = i64::try_from(s.bytes).map_err(|_| HostError::Size {
            what: format!("storage {i}"),
            why: "too large".into(),
        })?;
        let p = param(bytes, &mut params);
        // Inputs are read from their files, zeroed workspaces start at zero, and everything
        // else as 0xFF bytes (NaN), so that an element read before any kernel wrote it shows.
        let fill = match (&s.input, s.zeroed) {
            (Some(_), _) => "-1",
            (None, true) => "0",
            (None, false) => "0xff",
        };
        let _ = writeln!(
            body,
            "  unsigned char* s{i} = dlc_host::alloc({p}, {fill});"
        );
        let _ = writeln!(body, "  dlc_emu::register_global(s{i}, (size_t){p});");
        if s.input.is_some() {
            let _ = writeln!(body, "  dlc_host::read_file(\"in{i}.bin\", s{i}, {p});");
        }
    }
    for (li, step) in m.steps.iter().enumerate() {
        let ManifestStep::Launch(l) = step else {
            if let ManifestStep::Alias { name, of } = step {
                for n in [name, of] {
                    if !lay.bufs.contains_key(n) {
                        return Err(HostError::Manifest(format!(
                            "alias step names unknown `{n}`"
                        )));
                    }
                }
            }
            continue;
        };
        launch(&mut body, &mut params, lay, bindings, li, l)?;
    }
    let mut outputs = Vec::with_capacity(m.outputs.len());
    for (k, (out, buf)) in m.outputs.iter().enumerate() {
        let b = lay.bufs.get(buf).ok_or_else(|| {
            HostError::Manifest(format!("graph output `{out}` is unknown buffer `{buf}`"))
        })?;
        let file = format!("out{k}.bin");
        let bytes = param((b.numel as u64 * b.dtype.size_bytes()) as i64, &mut params);
        let _ = writeln!(
            body,
            "  dlc_host::write_file(\"{file}\", s{}, {bytes});",
            b.storage
        );
        outputs.push((out.clone(), buf.clone(), file));
    }
    let n = params.len().max(1);
    let main_cpp = format!(
        "// Generated by dlc_egg::codegen::host: runs the manifest's launches on the CPU.\n\
         #include \"{HEADER_NAME}\"\n#include \"kernels.cu\"\n{MAIN_SUPPORT}\
         int main(int argc, char** argv) {{\n  if (argc != 2) return 2;\n\
         \x20 dlc_host::dir = argv[1];\n  long long P[{n}];\n  dlc_host::read_params(P, {n});\n\
         {body}  return 0;\n}}\n",
    );
    Ok(Program {
        main_cpp,
        params,
        outputs,
    })
}

/// Appends `v` to the parameter file's values and returns its C spelling `P[k]`.
fn param(v: i64, params: &mut Vec<i64>) -> String {
    params.push(v);
    format!("P[{}]", params.len() - 1)
}

/// The statements of launch `li` (`l`): its grid checked against the GPU's limits, its
/// arguments, and the `dlc_emu::launch` call (skipped for an empty grid).
fn launch(
    body: &mut String,
    params: &mut Vec<i64>,
    lay: &Layout,
    bindings: &BTreeMap<String, i64>,
    li: usize,
    l: &KernelLaunch,
) -> Result<(), HostError> {
    let mut evaluated = [0i64; 3];
    for (d, s) in l.grid.iter().enumerate() {
        let what = format!("launch {li} (`{}`) grid dimension {d}", l.kernel);
        evaluated[d] = eval(s, bindings, &what)?;
    }
    // The GPU's limits, so that the emulation refuses what the GPU would.
    let grid: Vec<String> = check_grid(&l.kernel, evaluated)?
        .iter()
        .map(|v| param(i64::from(*v), params))
        .collect();
    let args = launch_args(body, params, lay, bindings, li, l)?;
    let [bx, by, bz] = l.block;
    let (g, kernel, smem) = (&grid, &l.kernel, l.dyn_smem_bytes);
    let _ = writeln!(body, "  {{ // launch {li}: {kernel}");
    let _ = writeln!(
        body,
        "    dim3 grid((unsigned){}, (unsigned){}, (unsigned){});",
        g[0], g[1], g[2]
    );
    let _ = writeln!(body, "    if (grid.x != 0 && grid.y != 0 && grid.z != 0)");
    let _ = writeln!(
        body,
        "      dlc_emu::launch(grid, dim3({bx}u, {by}u, {bz}u), {smem}u,"
    );
    let _ = writeln!(
        body,
        "                      [&] {{ {kernel}({}); }});\n  }}",
        args.join(", ")
    );
    Ok(())
}

/// The C arguments of launch `li` (`l`): buffers as typed storage pointers, symbols as ints
/// from the parameter file, tensor maps encoded into `body` first.
fn launch_args(
    body: &mut String,
    params: &mut Vec<i64>,
    lay: &Layout,
    bindings: &BTreeMap<String, i64>,
    li: usize,
    l: &KernelLaunch,
) -> Result<Vec<String>, HostError> {
    let mut args = Vec::with_capacity(l.args.len());
    for a in &l.args {
        match a {
            KernelArg::Buffer { name, write } => {
                let b = lay.bufs.get(name).ok_or_else(|| {
                    HostError::Manifest(format!(
                        "launch of `{}` uses unknown buffer `{name}`",
                        l.kernel
                    ))
                })?;
                let cst = if *write { "" } else { "const " };
                args.push(format!("({cst}{}*)s{}", c_type(b.dtype), b.storage));
            }
            KernelArg::Symbol { name } => {
                let v = *bindings.get(name).ok_or_else(|| HostError::Size {
                    what: format!("symbol `{name}` of `{}`", l.kernel),
                    why: "no value bound".into(),
                })?;
                if i32::try_from(v).is_err() {
                    return Err(HostError::Size {
                        what: format!("symbol `{name}`"),
                        why: format!("{v} does not fit an int"),
                    });
                }
                args.push(format!("(int){}", param(v, params)));
            }
            KernelArg::TensorMap {
                buffer,
                dims,
                box_dims,
            } => {
                let b = lay.bufs.get(buffer).ok_or_else(|| {
                    HostError::Manifest(format!(
                        "launch of `{}` maps unknown buffer `{buffer}`",
                        l.kernel
                    ))
                })?;
                let name = format!("tm{}_{}", li, args.len());
                let mut vals = Vec::with_capacity(dims.len());
                for d in dims {
                    let what = format!("tensor map of `{buffer}` in launch {li}");
                    vals.push(param(eval(d, bindings, &what)?, params));
                }
                tensor_map(body, &name, b, &vals, box_dims, &l.kernel)?;
                args.push(name);
            }
        }
    }
    Ok(args)
}

/// The fixed part of `main.cpp`: parameter, input and output files, allocation.
const MAIN_SUPPORT: &str = r#"#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
namespace dlc_host {
static std::string dir;
[[noreturn]] static void die(const char* what, const std::string& path) {
  std::fprintf(stderr, "dlc_host: %s %s\n", what, path.c_str());
  std::exit(2);
}
static void read_params(long long* p, int n) {
  const std::string path = dir + "/params.txt";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) die("cannot open", path);
  for (int i = 0; i < n; ++i)
    if (std::fscanf(f, "%lld", &p[i]) != 1) die("short parameter file", path);
  std::fclose(f);
}
// 256-byte aligned like cudaMalloc, exactly `bytes` long so ASan sees overruns.
// Every byte is `fill` unless it is negative (an input, read from its file next).
static unsigned char* alloc(long long bytes, int fill) {
  void* p = nullptr;
  if (posix_memalign(&p, 256, bytes > 0 ? (size_t)bytes : 1) != 0)
    die("out of memory for", "a buffer");
  if (fill >= 0) std::memset(p, fill, (size_t)bytes);
  return static_cast<unsigned char*>(p);
}
static void read_file(const char* name, unsigned char* p, long long bytes) {
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) die("cannot open", path);
  if (std::fread(p, 1, (size_t)bytes, f) != (size_t)bytes) die("short input file", path);
  std::fclose(f);
}
static void write_file(const char* name, const unsigned char* p, long long bytes) {
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) die("cannot create", path);
  if (std::fwrite(p, 1, (size_t)bytes, f) != (size_t)bytes) die("cannot write", path);
  std::fclose(f);
}
}  // namespace dlc_host
"#;
