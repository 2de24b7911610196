//! Helpers of `tests/codegen_emu.rs`: hand-built manifests, runs, reference computations.
#![allow(dead_code)]

use dlc_egg::codegen::host::{run_on_host, HostError, HostOptions};
use dlc_egg::codegen::manifest::{
    BufferDecl, BufferRole, KernelArg, KernelLaunch, Manifest, ManifestStep, FORMAT,
};
use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::region::Size;
use dlc_egg::plan::{AsyncPlan, Plan, Vectorize};
use dlc_egg::target::Arch;
use dlc_egg::tensor::{Tensor, TensorData};
use std::collections::BTreeMap;

pub fn sym(s: &str) -> Dim {
    Dim::sym(s)
}

pub fn int(v: i64) -> Dim {
    Dim::int(v)
}

/// A grid of one block.
pub fn one_block() -> [Dim; 3] {
    [int(1), int(1), int(1)]
}

/// A grid of `x` blocks.
pub fn grid_x(x: Dim) -> [Dim; 3] {
    [x, int(1), int(1)]
}

/// Any valid plan (the emulation does not read it).
pub fn plan() -> Plan {
    Plan {
        template: "contraction".into(),
        tile: vec![64, 64, 32],
        stages: 2,
        bind: BTreeMap::new(),
        warp_tile: "32x32".into(),
        cache: vec![],
        vectorize: Vectorize {
            axis: "k".into(),
            width: 8,
        },
        predicate_tail: vec![],
        epilogue: vec![],
        arch: Arch::Sm80,
        layout_hints: BTreeMap::new(),
        algo_choice: BTreeMap::new(),
        local_edges: vec![],
        async_: AsyncPlan {
            enable: true,
            prefetch_depth: 1,
            epilogue_overlap: false,
        },
        barrier_model: "cp_async_group".into(),
        split_k: 1,
    }
}

/// One launch under construction: buffer arguments are inputs then outputs, then symbols.
pub struct Launch(KernelLaunch);

/// `kernel` on `grid` blocks of `block` threads.
pub fn launch(kernel: &str, grid: [Dim; 3], block: [u32; 3]) -> Launch {
    Launch(KernelLaunch {
        kernel: kernel.into(),
        template: "test".into(),
        args: vec![],
        grid: grid.map(Size),
        block,
        dyn_smem_bytes: 0,
        plan: plan(),
        predicted_us: 0.0,
    })
}

impl Launch {
    fn bufs(mut self, names: &[&str], write: bool) -> Launch {
        self.0.args.extend(names.iter().map(|n| KernelArg::Buffer {
            name: n.to_string(),
            write,
        }));
        self
    }

    pub fn ins(self, names: &[&str]) -> Launch {
        self.bufs(names, false)
    }

    pub fn outs(self, names: &[&str]) -> Launch {
        self.bufs(names, true)
    }

    pub fn syms(mut self, names: &[&str]) -> Launch {
        self.0.args.extend(names.iter().map(|n| KernelArg::Symbol {
            name: n.to_string(),
        }));
        self
    }

    pub fn smem(mut self, bytes: u32) -> Launch {
        self.0.dyn_smem_bytes = bytes;
        self
    }
}

/// A manifest under construction.
pub struct Prog(pub Manifest);

impl Prog {
    pub fn new(symbols: &[&str]) -> Prog {
        Prog(Manifest {
            format: FORMAT.into(),
            arch: Arch::Sm80,
            source: "kernels.cu".into(),
            header: "dlc_kernel.cuh".into(),
            symbols: symbols.iter().map(|s| s.to_string()).collect(),
            buffers: vec![],
            steps: vec![],
            outputs: vec![],
        })
    }

    pub fn buffer(mut self, name: &str, dtype: DType, shape: &[Dim], role: BufferRole) -> Prog {
        self.0.buffers.push(BufferDecl {
            name: name.into(),
            dtype,
            shape: shape.iter().cloned().map(Size).collect(),
            role,
        });
        self
    }

    pub fn input(self, name: &str, dtype: DType, shape: &[Dim]) -> Prog {
        self.buffer(name, dtype, shape, BufferRole::Input)
    }

    /// A kernel-written buffer that is also the graph output of the same name.
    pub fn output(mut self, name: &str, dtype: DType, shape: &[Dim]) -> Prog {
        self.0.outputs.push((name.into(), name.into()));
        self.buffer(name, dtype, shape, BufferRole::Kernel)
    }

    pub fn then(mut self, l: Launch) -> Prog {
        self.0.steps.push(ManifestStep::Launch(l.0));
        self
    }
}

pub fn tensor(dtype: DType, shape: &[usize], values: &[f64]) -> Tensor {
    Tensor::from_f64(dtype, shape.to_vec(), values)
}

/// Deterministic values in [-1, 1).
pub fn data(seed: u64, n: usize) -> Vec<f64> {
    dlc_egg::rules::testing::lcg(seed, n)
}

pub type Outputs = Result<BTreeMap<String, Tensor>, HostError>;

pub fn run(src: &str, prog: &Prog, inputs: Vec<(&str, Tensor)>, b: &[(&str, i64)]) -> Outputs {
    run_with(src, prog, inputs, b, &HostOptions::default())
}

pub fn run_with(
    src: &str,
    prog: &Prog,
    inputs: Vec<(&str, Tensor)>,
    bindings: &[(&str, i64)],
    opts: &HostOptions,
) -> Outputs {
    let inputs = inputs
        .into_iter()
        .map(|(n, t)| (n.to_string(), t))
        .collect();
    let bindings = bindings.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    run_on_host(src, &prog.0, &inputs, &bindings, opts)
}

pub fn floats(t: &Tensor) -> &[f32] {
    match &t.data {
        TensorData::F32(v) => v,
        other => panic!("expected float data, got {other:?}"),
    }
}

pub fn ints(t: &Tensor) -> &[i32] {
    match &t.data {
        TensorData::I32(v) => v,
        other => panic!("expected i32 data, got {other:?}"),
    }
}

/// The failure report of a run that must fail at run time.
pub fn run_error(r: Outputs) -> String {
    match r {
        Err(HostError::Run { stderr, .. }) => stderr,
        Err(e) => panic!("expected a run failure, got {e}"),
        Ok(_) => panic!("expected a run failure, the program succeeded"),
    }
}

/// A reference result and, per element, the magnitude its error bound scales with.
pub type Reference = (Vec<f64>, Vec<f64>);

/// `C = A · B` in f64 (row-major, `A` is `m×k`, `B` is `k×n`), and `Σ|a·b|` per element.
pub fn matmul(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Reference {
    let mut c = vec![0.0; m * n];
    let mut mag = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                let (x, y) = (a[i * k + p] as f64, b[p * n + j] as f64);
                c[i * n + j] += x * y;
                mag[i * n + j] += (x * y).abs();
            }
        }
    }
    (c, mag)
}

pub fn half_bits(v: f32) -> u16 {
    half::f16::from_f32(v).to_bits()
}

pub fn bf16_bits(v: f32) -> u16 {
    half::bf16::from_f32(v).to_bits()
}

/// Two 16-bit values in one register, `lo` in the low half.
pub fn pack16(lo: u16, hi: u16) -> u32 {
    u32::from(lo) | (u32::from(hi) << 16)
}

/// The reference evaluator's NaN-propagating max.
pub fn ref_max(x: f32, y: f32) -> f32 {
    if x.is_nan() || y.is_nan() {
        f32::NAN
    } else if x >= y {
        x
    } else {
        y
    }
}

/// The reference evaluator's NaN-propagating min.
pub fn ref_min(x: f32, y: f32) -> f32 {
    if x.is_nan() || y.is_nan() {
        f32::NAN
    } else if x <= y {
        x
    } else {
        y
    }
}

/// Equal bit for bit, or both NaN.
pub fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}
