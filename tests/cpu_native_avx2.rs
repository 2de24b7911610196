//! The native CPU backend compiled for AVX2 with FMA (`DLC_CPU_ISA=avx2fma`: `-mno-avx512f`)
//! against the reference evaluator, on any machine with AVX2 and FMA — on an AVX-512 machine
//! the 8-lane code paths are otherwise never compiled: `gemm.h`'s channel-vector convolution
//! tile (16 channels × 6 positions, half-width tails of 3), the 6 × 16 GEMM tile, the AVX2
//! streaming stores and the 8-lane vector loops. Its own process: the variable is set once,
//! before any kernel is built (the shared-object cache is keyed by the ISA).

mod common;

use common::native::check_graph;
use dlc_egg::cpu::Isa;
use dlc_egg::ir::frontend::load_str;
use dlc_egg::lower::lower;
use dlc_egg::optimize::{optimize, OptimizeOptions};

/// Direct convolutions whose channel counts leave a partial 16-channel panel (17, 40, 33) and
/// whose output rows end in a half-width tile (13 = 2·6 + 1, 20 = 3·6 + 2) or a full one
/// (30 = 5·6), fp32 and fp16, with a bias, ReLU and residual epilogue and a 1-D window; a GEMM
/// with tails in both tile dimensions; a softmax and a LayerNorm over 37-element rows.
const GRAPHS: &str = r#"{
  "signature": {
    "inputs": [{"tensor": "X1"}, {"tensor": "W1", "role": "param"}, {"tensor": "b1", "role": "param"},
               {"tensor": "R1"}, {"tensor": "X2"}, {"tensor": "W2", "role": "param"},
               {"tensor": "X3"}, {"tensor": "W3", "role": "param"}, {"tensor": "P"},
               {"tensor": "Q", "role": "param"}, {"tensor": "S"}, {"tensor": "g", "role": "param"},
               {"tensor": "b", "role": "param"}],
    "outputs": [{"tensor": "Y1"}, {"tensor": "Y2"}, {"tensor": "Y3"}, {"tensor": "PQ"},
                {"tensor": "SM"}, {"tensor": "LN"}]
  },
  "tensors": {
    "X1": {"dtype": "fp32", "shape": [1, 20, 9, 13]}, "W1": {"dtype": "fp32", "shape": [17, 20, 3, 3]},
    "b1": {"dtype": "fp32", "shape": [17]}, "R1": {"dtype": "fp32", "shape": [1, 17, 9, 13]},
    "Y1": {"dtype": "fp32", "shape": [1, 17, 9, 13]},
    "X2": {"dtype": "fp16", "shape": [2, 8, 7, 20]}, "W2": {"dtype": "fp16", "shape": [40, 8, 3, 3]},
    "Y2": {"dtype": "fp16", "shape": [2, 40, 7, 20]},
    "X3": {"dtype": "fp32", "shape": [1, 6, 30]}, "W3": {"dtype": "fp32", "shape": [33, 6, 5]},
    "Y3": {"dtype": "fp32", "shape": [1, 33, 30]},
    "P": {"dtype": "fp32", "shape": [37, 70]}, "Q": {"dtype": "fp32", "shape": [70, 45]},
    "PQ": {"dtype": "fp32", "shape": [37, 45]},
    "S": {"dtype": "fp32", "shape": [5, 37]}, "SM": {"dtype": "fp32", "shape": [5, 37]},
    "g": {"dtype": "fp32", "shape": [37]}, "b": {"dtype": "fp32", "shape": [37]},
    "LN": {"dtype": "fp32", "shape": [5, 37]}
  },
  "graph": [
    {"op": "Conv", "name": "c1", "inputs": ["X1", "W1", "b1"], "outputs": ["C1"],
     "attrs": {"pad": 1, "acc_dtype": "fp32"}},
    {"op": "Elementwise", "name": "r1", "inputs": ["C1"], "outputs": ["A1"], "attrs": {"fn": "relu"}},
    {"op": "Elementwise", "name": "s1", "inputs": ["A1", "R1"], "outputs": ["Y1"], "attrs": {"fn": "add"}},
    {"op": "Conv", "name": "c2", "inputs": ["X2", "W2"], "outputs": ["Y2"], "attrs": {"pad": 1, "acc_dtype": "fp32"}},
    {"op": "Conv", "name": "c3", "inputs": ["X3", "W3"], "outputs": ["Y3"], "attrs": {"pad": 2, "acc_dtype": "fp32"}},
    {"op": "MatMul", "name": "m", "inputs": ["P", "Q"], "outputs": ["PQ"], "attrs": {"acc_dtype": "fp32"}},
    {"op": "Softmax", "name": "sm", "inputs": ["S"], "outputs": ["SM"], "attrs": {"axis": -1}},
    {"op": "LayerNorm", "name": "ln", "inputs": ["S", "g", "b"], "outputs": ["LN"],
     "attrs": {"axis": -1, "eps": 1e-5}}
  ]
}"#;

#[test]
fn the_avx2_build_runs_like_the_reference() {
    if Isa::host() == Isa::Scalar {
        eprintln!("skipped: this machine has no AVX2 with FMA");
        return;
    }
    // the only test of this process: no other thread reads the environment meanwhile
    std::env::set_var(dlc_egg::cpu::ENV_ISA, "avx2fma");
    assert_eq!(Isa::detect(), Isa::Avx2Fma);
    let flags = dlc_egg::cpu::build::base_flags(Isa::detect());
    assert!(flags.iter().any(|f| f == "-mno-avx512f"), "{flags:?}");
    // the three convolutions take the channel-vector direct path, covered as `run --device cpu`
    // covers them: by the CPU pricer
    let g = load_str(GRAPHS, "avx2").expect("loads");
    let prog = lower(&g).expect("lowers");
    let cpu = dlc_egg::cpu::pricing::CpuPricer::new(Default::default(), 2);
    let o = optimize(&prog, &OptimizeOptions::default().with_pricer(cpu)).expect("optimizes");
    let params = dlc_egg::cpu::exec::param_inputs(&g);
    let native =
        dlc_egg::cpu::program::emit_program_with_params(&o.program, &params).expect("emits");
    let direct = native
        .kernels
        .iter()
        .filter(|k| k.notes.iter().any(|n| n.starts_with("direct convolution")))
        .count();
    assert_eq!(direct, 3, "{:?}", native.kernels);
    check_graph(GRAPHS, &[], "avx2 graphs").unwrap();
}
