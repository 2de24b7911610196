//! The evaluator's benchmark programs (also used by tests and for peak-memory measurements):
//! a 512³ fp32 matmul and a 3×3 64→64 conv on 56×56, both lowered the tinygrad way.

use crate::ir::dim::Dim;
use crate::ir::dtype::DType;
use crate::ir::tiny::{AffineIndex, BinaryOp, Builder, NodeId, Program, ReduceOp, TinyError};
use crate::tensor::Tensor;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

/// A named program with inputs.
#[derive(Clone, Debug)]
pub struct BenchProgram {
    /// Benchmark name.
    pub name: &'static str,
    /// The program.
    pub program: Program,
    /// Its inputs, seeded.
    pub inputs: BTreeMap<String, Tensor>,
}

fn dims(v: &[i64]) -> Vec<Dim> {
    v.iter().map(|d| Dim::int(*d)).collect()
}

/// Uniform random values in `[-1, 1)` rounded to `dtype`, from a fixed seed.
pub fn random_tensor(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    Tensor::from_f64(dtype, shape.to_vec(), &v)
}

/// `C[M,N] = A[M,K] · B[K,N]` as RESHAPE/PERMUTE/EXPAND → MUL → REDUCE(SUM, acc) (seed 002 §5.1).
/// Inputs `A`, `B` of `dtype`; output `C` of dtype `acc`.
pub fn matmul(m: i64, k: i64, n: i64, dtype: DType, acc: DType) -> Result<Program, TinyError> {
    let mut b = Builder::new();
    let a = b.input("A", dtype, dims(&[m, k]))?;
    let bb = b.input("B", dtype, dims(&[k, n]))?;
    let a3 = b.reshape(a, dims(&[m, 1, k]))?;
    let bt = b.permute(bb, vec![1, 0])?;
    let b3 = b.reshape(bt, dims(&[1, n, k]))?;
    let ae = b.expand(a3, dims(&[m, n, k]))?;
    let be = b.expand(b3, dims(&[m, n, k]))?;
    let p = b.binary(BinaryOp::Mul, ae.into(), be.into())?;
    let c = b.reduce(ReduceOp::Sum, p, vec![2], acc)?;
    b.output("C", c);
    Ok(b.finish())
}

/// Convolution parameters (2-D, one group).
#[derive(Clone, Copy, Debug)]
pub struct ConvSpec {
    /// Batch.
    pub n: i64,
    /// Input channels.
    pub cin: i64,
    /// Output channels.
    pub cout: i64,
    /// Input height.
    pub h: i64,
    /// Input width.
    pub w: i64,
    /// Kernel size (square).
    pub k: i64,
    /// Padding (each side).
    pub pad: i64,
    /// Stride.
    pub stride: i64,
    /// Dilation.
    pub dilation: i64,
}

impl ConvSpec {
    /// Output spatial sizes `(oy, ox)`.
    pub fn out_hw(&self) -> (i64, i64) {
        let o = |x: i64| (x + 2 * self.pad - self.dilation * (self.k - 1) - 1) / self.stride + 1;
        (o(self.h), o(self.w))
    }
}

/// `Y = conv2d(X, W)` in the seed-002 form: PAD → VIEW sliding window → RESHAPE → EXPAND →
/// PERMUTE, weight RESHAPE → EXPAND, MUL, REDUCE(SUM, \[5,6,7\], fp32) → RESHAPE `[N,Cout,Oy,Ox]`.
pub fn conv2d(s: ConvSpec, dtype: DType) -> Result<Program, TinyError> {
    let (oy, ox) = s.out_hw();
    let mut b = Builder::new();
    let x = b.input("X", dtype, dims(&[s.n, s.cin, s.h, s.w]))?;
    let w = b.input("W", dtype, dims(&[s.cout, s.cin, s.k, s.k]))?;
    let xp = b.pad(x, vec![(0, 0), (0, 0), (s.pad, s.pad), (s.pad, s.pad)], 0.0)?;
    let win = b.view(
        xp,
        dims(&[s.n, s.cin, oy, ox, s.k, s.k]),
        vec![
            AffineIndex::new(vec![(0, 1)], 0),
            AffineIndex::new(vec![(1, 1)], 0),
            AffineIndex::new(vec![(2, s.stride), (4, s.dilation)], 0),
            AffineIndex::new(vec![(3, s.stride), (5, s.dilation)], 0),
        ],
    )?;
    let x1 = b.reshape(win, dims(&[s.n, 1, s.cin, 1, oy, ox, s.k, s.k]))?;
    let x2 = b.expand(x1, dims(&[s.n, 1, s.cin, s.cout, oy, ox, s.k, s.k]))?;
    let x3 = b.permute(x2, vec![0, 1, 3, 4, 5, 2, 6, 7])?;
    let w1 = b.reshape(w, dims(&[1, 1, s.cout, 1, 1, s.cin, s.k, s.k]))?;
    let w2 = b.expand(w1, dims(&[s.n, 1, s.cout, oy, ox, s.cin, s.k, s.k]))?;
    let p = b.binary(BinaryOp::Mul, x3.into(), w2.into())?;
    let r = b.reduce(ReduceOp::Sum, p, vec![5, 6, 7], DType::F32)?;
    let y: NodeId = b.reshape(r, dims(&[s.n, s.cout, oy, ox]))?;
    b.output("Y", y);
    Ok(b.finish())
}

/// The two benchmark targets with random inputs: `matmul512` (fp32 512³) and `conv3x3`
/// (N=1, 64→64 channels, 56×56, pad 1, stride 1, fp32).
pub fn bench_programs() -> Result<Vec<BenchProgram>, TinyError> {
    let mm = matmul(512, 512, 512, DType::F32, DType::F32)?;
    let mm_in = [
        ("A".to_string(), random_tensor(DType::F32, &[512, 512], 1)),
        ("B".to_string(), random_tensor(DType::F32, &[512, 512], 2)),
    ];
    let spec = ConvSpec {
        n: 1,
        cin: 64,
        cout: 64,
        h: 56,
        w: 56,
        k: 3,
        pad: 1,
        stride: 1,
        dilation: 1,
    };
    let cv = conv2d(spec, DType::F32)?;
    let cv_in = [
        (
            "X".to_string(),
            random_tensor(DType::F32, &[1, 64, 56, 56], 3),
        ),
        (
            "W".to_string(),
            random_tensor(DType::F32, &[64, 64, 3, 3], 4),
        ),
    ];
    Ok(vec![
        BenchProgram {
            name: "matmul512",
            program: mm,
            inputs: mm_in.into_iter().collect(),
        },
        BenchProgram {
            name: "conv3x3",
            program: cv,
            inputs: cv_in.into_iter().collect(),
        },
    ])
}
