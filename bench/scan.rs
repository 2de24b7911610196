//! Scans run in linear time (issue 16): a cumulative sum over `n` fp32 elements, n = 10^4 … 10^7,
//! by the reference evaluator (Tiny SCAN) and by the optimized program's playback
//! (`run --optimized`: the region's scan let), with the old triangular-window form (a REDUCE
//! over `n × n`) at 10^3 and 10^4 for contrast. Prints one line per size: best of three wall
//! times and ns per element (flat when linear).
//!
//! `cargo bench --bench scan` (release); `-- --test` runs only the smallest sizes once.

use dlc_egg::eval::evaluate;
use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::region::program::evaluate_program;
use dlc_egg::ir::tiny::{Builder, Program, ReduceOp, ScanSpec};
use dlc_egg::lower::cumulative_window;
use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::tensor::Tensor;
use std::collections::BTreeMap;
use std::time::Instant;

fn program(window: bool) -> Program {
    let mut b = Builder::new();
    let x = b
        .input("X", DType::F32, vec![Dim::sym("N")])
        .expect("input");
    let spec = ScanSpec {
        op: ReduceOp::Sum,
        axis: 0,
        exclusive: false,
        reverse: false,
    };
    let y = if window {
        cumulative_window(&mut b, x, spec).expect("window form")
    } else {
        b.scan(x, spec, DType::F32).expect("scan")
    };
    b.output("Y", y);
    b.finish()
}

/// Best of `reps` wall times of `f`, in seconds.
fn best(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let smoke = std::env::args().any(|a| a == "--test");
    let sizes: &[usize] = if smoke {
        &[10_000]
    } else {
        &[10_000, 100_000, 1_000_000, 10_000_000]
    };
    let reps = if smoke { 1 } else { 3 };
    let scan = program(false);
    let optimized = optimize(&scan, &OptimizeOptions::default()).expect("optimize");
    println!("cumsum over n fp32 elements (best of {reps}):");
    println!(
        "{:>10} {:>14} {:>10} {:>14} {:>10}",
        "n", "reference ms", "ns/elem", "playback ms", "ns/elem"
    );
    for &n in sizes {
        let bind = BTreeMap::from([("N".to_string(), n as i64)]);
        let x: Vec<f64> = (0..n)
            .map(|i| ((i * 7919) % 13) as f64 / 13.0 - 0.5)
            .collect();
        let ins = BTreeMap::from([("X".to_string(), Tensor::from_f64(DType::F32, vec![n], &x))]);
        let r = best(reps, || {
            evaluate(&scan, &bind, &ins).expect("reference");
        });
        let p = best(reps, || {
            evaluate_program(&optimized.program, &bind, &ins).expect("playback");
        });
        println!(
            "{n:>10} {:>14.3} {:>10.2} {:>14.3} {:>10.2}",
            r * 1e3,
            r * 1e9 / n as f64,
            p * 1e3,
            p * 1e9 / n as f64
        );
    }
    let window = program(true);
    println!("old triangular-window form (REDUCE over n × n), reference evaluator:");
    let old: &[usize] = if smoke { &[1_000] } else { &[1_000, 10_000] };
    for &n in old {
        let bind = BTreeMap::from([("N".to_string(), n as i64)]);
        let ins = BTreeMap::from([(
            "X".to_string(),
            Tensor::from_f64(DType::F32, vec![n], &vec![0.5; n]),
        )]);
        let t = best(reps, || {
            evaluate(&window, &bind, &ins).expect("window form");
        });
        println!(
            "{n:>10} {:>14.3} ms {:>10.2} ns/elem",
            t * 1e3,
            t * 1e9 / n as f64
        );
    }
}
