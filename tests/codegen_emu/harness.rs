//! The host harness itself: aliases, the binary cache, input errors, and the sanitized build.

use super::*;

#[test]
fn harness_aliases_cache_and_reports_input_errors() {
    let cache = tempfile::tempdir().expect("temp dir");
    let opts = HostOptions {
        cache_dir: Some(cache.path().to_path_buf()),
        ..HostOptions::default()
    };
    let prog = aliased_scale();
    let xs = data(12, 72);
    let out = run_with(
        SCALE,
        &prog,
        vec![("X", tensor(DType::F32, &[72], &xs))],
        &[("n", 72)],
        &opts,
    )
    .expect("runs");
    assert_eq!(out["y"].shape, vec![8, 9]);
    let want: Vec<f32> = xs.iter().map(|v| 2.0 * *v as f32).collect();
    assert_eq!(floats(&out["y"]), &want[..]);
    // The same program again, other bindings: served from the cache (no compiler needed), and a
    // launch with an empty grid is skipped.
    let no_cxx = HostOptions {
        compiler: "/nonexistent/g++".into(),
        ..opts.clone()
    };
    let out = run_with(
        SCALE,
        &prog,
        vec![("X", tensor(DType::F32, &[0], &[]))],
        &[("n", 0)],
        &no_cxx,
    )
    .expect("cached");
    assert_eq!(out["y"].shape, vec![8, 0]);
    // A program not in the cache needs the compiler.
    let other = format!("{SCALE}\n// another program\n");
    let r = run_with(
        &other,
        &prog,
        vec![("X", tensor(DType::F32, &[8], &[0.0; 8]))],
        &[("n", 8)],
        &no_cxx,
    );
    assert!(matches!(r, Err(HostError::CompilerMissing { .. })), "{r:?}");
    // Inputs and bindings are checked before anything runs.
    let r = run_with(SCALE, &prog, vec![], &[("n", 8)], &opts);
    assert!(
        matches!(&r, Err(HostError::MissingInput { name }) if name == "X"),
        "{r:?}"
    );
    let r = run_with(
        SCALE,
        &prog,
        vec![("X", tensor(DType::F32, &[9], &[0.0; 9]))],
        &[("n", 8)],
        &opts,
    );
    assert!(matches!(r, Err(HostError::BadInput { .. })), "{r:?}");
    let r = run_with(
        SCALE,
        &prog,
        vec![("X", tensor(DType::F32, &[8], &[0.0; 8]))],
        &[],
        &opts,
    );
    assert!(matches!(r, Err(HostError::Size { .. })), "{r:?}");
    // A kernel that does not compile.
    let r = run_with(
        "#include \"dlc_kernel.cuh\"\n__global__ void scale2(int) { undefined_name(); }\n",
        &prog,
        vec![("X", tensor(DType::F32, &[8], &[0.0; 8]))],
        &[("n", 8)],
        &opts,
    );
    assert!(
        matches!(&r, Err(HostError::Compile { log }) if log.contains("undefined_name")),
        "{r:?}"
    );
}

/// `scale2` writing `Y[n]`, read back through `Yr[8, n / 8]`, an alias of `Y`, as output `y`.
fn aliased_scale() -> Prog {
    let prog = Prog::new(&["n"])
        .input("X", DType::F32, &[sym("n")])
        .buffer("Y", DType::F32, &[sym("n")], BufferRole::Kernel)
        .buffer(
            "Yr",
            DType::F32,
            &[int(8), sym("n").floordiv(8)],
            BufferRole::Alias { of: "Y".into() },
        )
        .then(
            launch("scale2", grid_x(sym("n").ceildiv(64)), [64, 1, 1])
                .ins(&["X"])
                .outs(&["Y"])
                .syms(&["n"]),
        );
    let mut prog = prog;
    prog.0.steps.push(ManifestStep::Alias {
        name: "Yr".into(),
        of: "Y".into(),
    });
    prog.0.outputs.push(("y".into(), "Yr".into()));
    prog
}

#[test]
fn sanitized_build_reports_out_of_bounds_reads() {
    let prog = Prog::new(&["n"])
        .input("X", DType::F32, &[sym("n")])
        .output("Y", DType::F32, &[sym("n")])
        .then(
            launch("overrun", grid_x(sym("n").ceildiv(64)), [64, 1, 1])
                .ins(&["X"])
                .outs(&["Y"])
                .syms(&["n"]),
        );
    let opts = HostOptions {
        sanitize: true,
        ..HostOptions::default()
    };
    let x = tensor(DType::F32, &[40], &data(13, 40));
    let err = run_error(run_with(SCALE, &prog, vec![("X", x)], &[("n", 40)], &opts));
    assert!(
        err.contains("AddressSanitizer: heap-buffer-overflow"),
        "{err}"
    );
}
