//! The native CPU backend's kernels when an allocation fails (issue 16): every kernel of a few
//! programs is compiled with `posix_memalign` and `free` redirected to a counting harness,
//! warmed up (scratch and kept packs allocated), then run once per allocation it makes with
//! that allocation failing. Each such run must report the failure (return 2) and leave no
//! buffer allocated that it did not hold before: a contraction's result buffers included,
//! whichever of them fails.
//!
//! Needs a C compiler (`cc`/`gcc`/`clang`).

use dlc_egg::cpu::build::{base_flags, find_compiler};
use dlc_egg::cpu::exec::param_inputs;
use dlc_egg::cpu::program::emit_program_with_params;
use dlc_egg::cpu::Isa;
use dlc_egg::ir::frontend::load_str;
use dlc_egg::lower::lower;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use std::process::Command;

/// Two contractions summed (one region with two result buffers), a GEMM + bias + ReLU, a
/// softmax (row buffers per thread) and a 3x3 convolution read in place.
const GRAPH: &str = r#"{
  "signature": {
    "inputs": [{"tensor": "A"}, {"tensor": "B"}, {"tensor": "C"}, {"tensor": "D"},
               {"tensor": "W", "role": "param"}, {"tensor": "b", "role": "param"},
               {"tensor": "X"}, {"tensor": "K", "role": "param"}],
    "outputs": [{"tensor": "Y"}, {"tensor": "S"}, {"tensor": "Z"}]
  },
  "tensors": {
    "A": {"dtype": "fp32", "shape": [33, 40]}, "B": {"dtype": "fp32", "shape": [40, 50]},
    "C": {"dtype": "fp32", "shape": [33, 20]}, "D": {"dtype": "fp32", "shape": [20, 50]},
    "P": {"dtype": "fp32", "shape": [33, 50]}, "Q": {"dtype": "fp32", "shape": [33, 50]},
    "Y": {"dtype": "fp32", "shape": [33, 50]},
    "W": {"dtype": "fp32", "shape": [50, 70]}, "b": {"dtype": "fp32", "shape": [70]},
    "H": {"dtype": "fp32", "shape": [33, 70]}, "Hb": {"dtype": "fp32", "shape": [33, 70]},
    "S": {"dtype": "fp32", "shape": [33, 70]},
    "X": {"dtype": "fp32", "shape": [1, 8, 12, 12]}, "K": {"dtype": "fp32", "shape": [24, 8, 3, 3]},
    "Z": {"dtype": "fp32", "shape": [1, 24, 12, 12]}
  },
  "graph": [
    {"op": "MatMul", "name": "m1", "inputs": ["A", "B"], "outputs": ["P"]},
    {"op": "MatMul", "name": "m2", "inputs": ["C", "D"], "outputs": ["Q"]},
    {"op": "Elementwise", "name": "s", "inputs": ["P", "Q"], "outputs": ["Y"], "attrs": {"fn": "add"}},
    {"op": "MatMul", "name": "m3", "inputs": ["Y", "W"], "outputs": ["H"]},
    {"op": "Elementwise", "name": "hb", "inputs": ["H", "b"], "outputs": ["Hb"], "attrs": {"fn": "add"}},
    {"op": "Softmax", "name": "sm", "inputs": ["Hb"], "outputs": ["S"], "attrs": {"axis": -1}},
    {"op": "Conv", "name": "c", "inputs": ["X", "K"], "outputs": ["Z"], "attrs": {"pad": 1, "acc_dtype": "fp32"}}
  ]
}"#;

/// The counting allocator and the driver: per kernel and thread count, a clean run, then one
/// run per allocation of a clean run with that allocation failing; prints
/// `<kernel> <threads> <failing call> <return code> <buffers leaked>` per run.
const HARNESS: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef int (*kfn)(void *const *, const int64_t *, int);
static long calls, fail_at, live;
int t_memalign(void **p, size_t a, size_t n) {
    long c = __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
    if (c == __atomic_load_n(&fail_at, __ATOMIC_SEQ_CST)) { *p = NULL; return 12; }
    int r = posix_memalign(p, a, n);
    if (r == 0) __atomic_add_fetch(&live, 1, __ATOMIC_SEQ_CST);
    return r;
}
void t_free(void *p) {
    if (p) __atomic_sub_fetch(&live, 1, __ATOMIC_SEQ_CST);
    free(p);
}
KERNEL_DECLS
static const char *names[] = {KERNEL_NAMES};
static const kfn fns[] = {KERNEL_FNS};
int main(void) {
    void *buf[16];
    for (int i = 0; i < 16; i++) buf[i] = calloc(1, 1 << 20);
    int64_t sym[4] = {0};
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++)
        for (int nt = 1; nt <= 2; nt++) {
            fail_at = 0;
            if (fns[k](buf, sym, nt) != 0) { printf("%s %d clean-run-failed 0 0\n", names[k], nt); continue; }
            calls = 0;
            long before = live;
            int rc = fns[k](buf, sym, nt);
            long n = calls;
            printf("%s %d 0 %d %ld\n", names[k], nt, rc, live - before);
            for (long f = 1; f <= n; f++) {
                calls = 0; fail_at = f; before = live;
                rc = fns[k](buf, sym, nt);
                fail_at = 0;
                printf("%s %d %ld %d %ld\n", names[k], nt, f, rc, live - before);
            }
        }
    return 0;
}
"#;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_failed_allocation_is_reported_and_frees_what_the_kernel_holds() {
    let g = load_str(GRAPH, "alloc").expect("load");
    let prog = lower(&g).expect("lower");
    let o = optimize(&prog, &OptimizeOptions::default()).expect("optimize");
    let native = emit_program_with_params(&o.program, &param_inputs(&g)).expect("emit");
    // some kernel holds two contraction buffers at once (the case that leaked)
    assert!(
        native.source.split("\nint dlc_k").any(|f| f
            .lines()
            .filter(|l| l.trim_start().starts_with("float *restrict L")
                && l.contains("= (float *)dlc_alloc(4 * "))
            .count()
            >= 2),
        "no kernel with two contraction buffers: {:?}",
        native.kernels.iter().map(|k| &k.region).collect::<Vec<_>>()
    );
    let dir = std::env::temp_dir().join(format!("dlc-alloc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cc = find_compiler().expect("a C compiler");
    let (kc, hc, obj, exe) = (
        dir.join("kernels.c"),
        dir.join("harness.c"),
        dir.join("kernels.o"),
        dir.join("harness"),
    );
    std::fs::write(&kc, &native.source).unwrap();
    let fns: Vec<&str> = native.kernels.iter().map(|k| k.function.as_str()).collect();
    let decls: String = fns
        .iter()
        .map(|f| format!("int {f}(void *const *, const int64_t *, int);\n"))
        .collect();
    let names: Vec<String> = fns.iter().map(|f| format!("\"{f}\"")).collect();
    let h = HARNESS
        .replace("KERNEL_DECLS", &decls)
        .replace("KERNEL_NAMES", &names.join(", "))
        .replace("KERNEL_FNS", &fns.join(", "));
    std::fs::write(&hc, h).unwrap();
    let flags: Vec<String> = base_flags(Isa::detect())
        .into_iter()
        .filter(|f| f != "-shared")
        .collect();
    run(Command::new(&cc)
        .args(&flags)
        .args(["-Dposix_memalign=t_memalign", "-Dfree=t_free", "-c"])
        .arg(&kc)
        .arg("-o")
        .arg(&obj));
    run(Command::new(&cc)
        .args(["-O1", "-fopenmp"])
        .arg(&hc)
        .arg(&obj)
        .arg("-o")
        .arg(&exe)
        .arg("-lm"));
    let out = run(&mut Command::new(&exe));
    let mut failed_runs = 0;
    let mut bad = Vec::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 5, "{line}");
        let (call, rc, leaked) = (f[2], f[3], f[4]);
        let want_rc = if call == "0" { "0" } else { "2" };
        if rc != want_rc || leaked != "0" {
            bad.push(line.to_string());
        }
        failed_runs += usize::from(call != "0");
    }
    // every kernel ran clean at both thread counts, and allocations were failed
    assert_eq!(
        out.lines()
            .filter(|l| l.split_whitespace().nth(2) == Some("0"))
            .count(),
        2 * fns.len(),
        "{out}"
    );
    assert!(failed_runs >= 2 * fns.len(), "{out}");
    assert!(
        bad.is_empty(),
        "runs with a wrong return code or leaked buffers:\n{}",
        bad.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
