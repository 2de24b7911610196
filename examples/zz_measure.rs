use dlc_egg::optimize::{optimize, OptimizeOptions};
use dlc_egg::rules::testing::{graph_json_tolerance, unit_roundoff};
use std::collections::BTreeMap;
fn main() {
    for f in std::fs::read_dir("examples").unwrap() {
        let p = f.unwrap().path();
        if p.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let g = dlc_egg::ir::frontend::load_file(&p).unwrap();
        let prog = dlc_egg::run::lower_and_verify(&g).unwrap();
        let o = optimize(&prog, &OptimizeOptions::default()).unwrap();
        let b: BTreeMap<String, i64> = prog.symbols.clone();
        for seed in 0..3u64 {
            let names: Vec<String> = g
                .signature
                .inputs
                .iter()
                .map(|i| i.tensor.clone())
                .collect();
            let ins = dlc_egg::run::random_inputs(&g, seed, &b, &names).unwrap();
            let want = dlc_egg::eval::evaluate(&prog, &b, &ins).unwrap();
            let got = dlc_egg::ir::region::program::evaluate_program(&o.program, &b, &ins).unwrap();
            for (n, w) in &want {
                let gt = &got[n];
                let Some(t) = graph_json_tolerance(w.dtype) else {
                    continue;
                };
                let u = unit_roundoff(w.dtype);
                let wv = w.to_f64();
                let gv = gt.to_f64();
                let scale = wv
                    .iter()
                    .filter(|v| v.is_finite())
                    .fold(0f64, |m, v| m.max(v.abs()));
                let (mut kneed, mut bad, mut maxd) = (0f64, 0usize, 0f64);
                for (a, e) in gv.iter().zip(&wv) {
                    if !e.is_finite() {
                        continue;
                    }
                    let d = (a - e).abs();
                    maxd = maxd.max(d);
                    let over = d - (t + t * e.abs());
                    if over > 0.0 {
                        bad += 1;
                        kneed = kneed.max(over / (u * scale));
                    }
                }
                println!("{} seed {seed} {n} {}: n={} beyond graph-json={bad} max|d|={maxd:.4} scale={scale:.1} kappa_needed={kneed:.2}", p.display(), w.dtype, wv.len());
            }
        }
    }
}
