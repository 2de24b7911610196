//! The generated C's per-call scratch comes from the loaded library's cache of free blocks
//! (`dlc_take` / `dlc_give`, `src/cpu/prelude.h`): repeated runs of a loaded program map no new
//! memory. glibc is told to mmap every block of 64 KiB or more (`mallopt(M_MMAP_THRESHOLD)`,
//! which also stops its dynamic threshold from rising), so a kernel that mallocs and frees its
//! 4 MiB scan line per call faults its 1024 pages in again every run. Its own process: the
//! allocator setting and the page-fault counter are process-wide.

mod common;

use common::native::opts;
use dlc_egg::cpu::exec::{param_inputs, prepare, run_loaded, NativeOptions};
use dlc_egg::cpu::Isa;
use dlc_egg::ir::frontend::load_str;
use dlc_egg::ir::lower::lower;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use std::collections::BTreeMap;

/// A cumsum over one line of 2^20 fp32 points (a 4 MiB scan buffer per call) and a softmax
/// whose rows are staged in per-thread buffers.
const GRAPH: &str = r#"{
  "signature": {"inputs": [{"tensor": "X"}, {"tensor": "S"}], "outputs": [{"tensor": "Y"}, {"tensor": "SM"}]},
  "tensors": {
    "X": {"dtype": "fp32", "shape": [1048576]}, "Y": {"dtype": "fp32", "shape": [1048576]},
    "S": {"dtype": "fp32", "shape": [64, 40000]}, "SM": {"dtype": "fp32", "shape": [64, 40000]}
  },
  "graph": [
    {"op": "Cumulative", "name": "c", "inputs": ["X"], "outputs": ["Y"],
     "attrs": {"fn": "sum", "axis": 0, "exclusive": false, "reverse": false}},
    {"op": "Softmax", "name": "sm", "inputs": ["S"], "outputs": ["SM"], "attrs": {"axis": -1}}
  ]
}"#;

extern "C" {
    fn mallopt(param: i32, value: i32) -> i32;
}
const M_MMAP_THRESHOLD: i32 = -3;

/// This process's minor page faults so far (`/proc/self/stat`, field 10).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // the fields after the parenthesized command name: state is field 3
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    rest.split(' ')
        .nth(7)
        .and_then(|f| f.parse().ok())
        .expect("minflt")
}

#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn repeated_runs_take_their_scratch_from_the_library_cache() {
    if Isa::host() == Isa::Scalar {
        return;
    }
    // SAFETY: glibc's mallopt, called before this test allocates anything large.
    assert_eq!(unsafe { mallopt(M_MMAP_THRESHOLD, 64 << 10) }, 1);
    let g = load_str(GRAPH, "scratch").expect("graph");
    let prog = lower(&g).expect("lower");
    let o = optimize(&prog, &OptimizeOptions::default()).expect("optimize");
    let (native, loaded) = prepare(&o.program, &param_inputs(&g), None).expect("native");
    let prepared =
        dlc_egg::run::prepare_inputs(&g, &[], &BTreeMap::new(), Some(5)).expect("inputs");
    let faults = |repeat: u32| {
        let nopts = NativeOptions { repeat, ..opts() };
        let before = minor_faults();
        let (out, _) = run_loaded(
            &o.program,
            &native,
            &loaded,
            &prepared.bindings,
            &prepared.tensors,
            &nopts,
        )
        .expect("run");
        let after = minor_faults();
        drop(out);
        after - before
    };
    // a call's buffers: the outputs (reused from run to run) and the kernels' scratch
    let few = faults(2);
    let many = faults(22);
    let per_run = (many.saturating_sub(few)) as f64 / 20.0;
    // Without the cache: >= 1024 faults per run (the 4 MiB line mapped anew each call).
    assert!(
        per_run < 64.0,
        "{per_run} minor page faults per extra run ({few} for 3 runs, {many} for 23)"
    );
}
