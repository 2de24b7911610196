//! Memory semantics the emulation enforces: cp.async copies that land only when waited for,
//! ldmatrix of rows in flight or unpublished, out-of-range and misaligned accesses, vector
//! accesses, shared memory in every form, divergent barriers and warp collectives.

use super::*;

#[test]
fn cp_async_copies_land_only_when_waited_for() {
    let n = 37usize;
    let prog = cp_async_prog();
    let xh = tensor(DType::F16, &[256], &data(6, 256));
    let xf = tensor(DType::F32, &[256], &data(7, 256));
    let xt = tensor(
        DType::F16,
        &[n],
        &(1..=n).map(|v| v as f64).collect::<Vec<_>>(),
    );
    let (xhv, xfv) = (floats(&xh).to_vec(), floats(&xf).to_vec());
    let out = run(
        CP_ASYNC,
        &prog,
        vec![("Xh", xh), ("Xf", xf), ("Xt", xt)],
        &[("n", n as i64)],
    )
    .expect("runs");
    // Waited for and published: the neighbour's data.
    assert_eq!(floats(&out["late"]), &xhv[..]);
    // Read before waiting: shared memory still holds what the launcher put there (NaN).
    let early = floats(&out["early"]);
    assert!(
        early.iter().all(|v| v.is_nan()),
        "stale reads must not see the copies"
    );
    // wait<1> lands the first group only; wait<0> the second.
    let groups = floats(&out["groups"]);
    assert_eq!(&groups[..128], &xfv[..128]);
    assert!(
        groups[128..256].iter().all(|v| v.is_nan()),
        "the newest group is still pending"
    );
    assert_eq!(&groups[256..], &xfv[128..]);
    // 16-, 8- and 4-byte copies with partial src sizes zero-fill past n.
    let tail = floats(&out["tail"]);
    for buf in 0..3 {
        for i in 0..64 {
            let want = if i < n { (i + 1) as f32 } else { 0.0 };
            assert_eq!(tail[buf * 64 + i], want, "buffer {buf} element {i}");
        }
    }
    // ldmatrix.x1 after a barrier: lane l holds row l/4, columns 2(l%4) and 2(l%4)+1.
    let published = ints(&out["published"]);
    for (l, got) in published.iter().enumerate() {
        let e = (l / 4) * 8 + 2 * (l % 4);
        assert_eq!(
            *got as u32,
            pack16(half_bits(xhv[e]), half_bits(xhv[e + 1])),
            "lane {l}"
        );
    }
}

/// The launches of `emu/cp_async.cu`: copies read before and after their wait, two commit
/// groups, partial copies past `n`, and an ldmatrix of published rows.
fn cp_async_prog() -> Prog {
    Prog::new(&["n"])
        .input("Xh", DType::F16, &[int(256)])
        .input("Xf", DType::F32, &[int(256)])
        .input("Xt", DType::F16, &[sym("n")])
        .output("early", DType::F16, &[int(256)])
        .output("late", DType::F16, &[int(256)])
        .output("groups", DType::F32, &[int(384)])
        .output("tail", DType::F16, &[int(192)])
        .output("published", DType::I32, &[int(32)])
        .then(
            launch("copy_early", one_block(), [32, 1, 1])
                .ins(&["Xh"])
                .outs(&["early"]),
        )
        .then(
            launch("copy_late", one_block(), [32, 1, 1])
                .ins(&["Xh"])
                .outs(&["late"]),
        )
        .then(
            launch("copy_groups", one_block(), [32, 1, 1])
                .ins(&["Xf"])
                .outs(&["groups"]),
        )
        .then(
            launch("copy_tail", one_block(), [32, 1, 1])
                .ins(&["Xt"])
                .outs(&["tail"])
                .syms(&["n"]),
        )
        .then(
            launch("ldmatrix_published", one_block(), [64, 1, 1])
                .ins(&["Xh"])
                .outs(&["published"]),
        )
}

#[test]
fn ldmatrix_rejects_rows_still_in_flight() {
    let prog = Prog::new(&[])
        .input("X", DType::F16, &[int(64)])
        .output("Y", DType::I32, &[int(32)])
        .then(
            launch("ldmatrix_before_wait", one_block(), [32, 1, 1])
                .ins(&["X"])
                .outs(&["Y"]),
        );
    let x = tensor(DType::F16, &[64], &data(8, 64));
    let err = run_error(run(CP_ASYNC, &prog, vec![("X", x)], &[]));
    assert!(
        err.contains("dlc_ldmatrix") && err.contains("still in flight"),
        "{err}"
    );
}

#[test]
fn ldmatrix_rejects_copies_no_barrier_published() {
    let prog = Prog::new(&[])
        .input("X", DType::F16, &[int(64)])
        .output("Y", DType::I32, &[int(32)])
        .then(
            launch("ldmatrix_unpublished", one_block(), [64, 1, 1])
                .ins(&["X"])
                .outs(&["Y"]),
        );
    let x = tensor(DType::F16, &[64], &data(9, 64));
    let err = run_error(run(CP_ASYNC, &prog, vec![("X", x)], &[]));
    assert!(err.contains("no __syncthreads()"), "{err}");
}

#[test]
fn cp_async_source_past_its_buffer_is_reported() {
    let prog = Prog::new(&["n"])
        .input("X", DType::F16, &[sym("n")])
        .output("Y", DType::F16, &[int(8)])
        .then(
            launch("copy_overrun", one_block(), [32, 1, 1])
                .ins(&["X"])
                .outs(&["Y"])
                .syms(&["n"]),
        );
    let x = tensor(DType::F16, &[12], &data(14, 12));
    let err = run_error(run(CP_ASYNC, &prog, vec![("X", x)], &[("n", 12)]));
    assert!(
        err.contains("dlc_cp_async_16: source") && err.contains("not inside one global buffer"),
        "{err}"
    );
}

/// `vec_scale` over `n` halves of Y from X (`x_len` halves) shifted by `shift`.
fn vec_scale(n: i64, x_len: usize, shift: i64) -> Outputs {
    let prog = Prog::new(&["n", "shift"])
        .input("X", DType::F16, &[int(x_len as i64)])
        .output("Y", DType::F16, &[sym("n")])
        .then(
            launch("vec_scale", grid_x(int(2)), [32, 1, 1])
                .ins(&["X"])
                .outs(&["Y"])
                .syms(&["n", "shift"]),
        );
    let xs: Vec<f64> = (0..x_len).map(|i| i as f64 - 100.0).collect();
    let x = tensor(DType::F16, &[x_len], &xs);
    run(VECTOR, &prog, vec![("X", x)], &[("n", n), ("shift", shift)])
}

#[test]
fn vector_accesses_copy_whole_words() {
    let out = vec_scale(512, 520, 8).expect("runs");
    let y = floats(&out["Y"]);
    for (i, v) in y.iter().enumerate() {
        assert_eq!(*v, 2.0 * (i as f32 + 8.0 - 100.0), "Y[{i}]");
    }
}

#[test]
fn misaligned_or_overrunning_vector_accesses_are_reported() {
    let err = run_error(vec_scale(64, 80, 3));
    assert!(
        err.contains("dlc_ld_vec<16>") && err.contains("not 16-byte aligned"),
        "{err}"
    );
    let err = run_error(vec_scale(64, 64, 8));
    assert!(
        err.contains("dlc_ld_vec<16>") && err.contains("not inside one global buffer"),
        "{err}"
    );
}

#[test]
fn shared_memory_at_file_scope_in_inline_helpers_and_templates() {
    let prog = Prog::new(&[])
        .input("X", DType::F32, &[int(64)])
        .output("Y", DType::F32, &[int(64)])
        .then(
            launch("shared_forms", grid_x(int(3)), [64, 1, 1])
                .ins(&["X"])
                .outs(&["Y"]),
        );
    let xs: Vec<f64> = (0..64).map(|i| f64::from(i * i % 17)).collect();
    let out = run(
        SHARED_FORMS,
        &prog,
        vec![("X", tensor(DType::F32, &[64], &xs))],
        &[],
    )
    .expect("runs");
    let want: Vec<f32> = (0..64)
        .map(|t| (xs[(t + 1) % 64] + xs[(t + 2) % 64] + xs[(t + 3) % 64]) as f32)
        .collect();
    assert_eq!(floats(&out["Y"]), &want[..]);
}

fn divergent(kernel: &str, threads: u32) -> String {
    let prog = Prog::new(&[])
        .output("Y", DType::F32, &[int(i64::from(threads))])
        .then(launch(kernel, grid_x(int(2)), [threads, 1, 1]).outs(&["Y"]));
    run_error(run(DIVERGENT, &prog, vec![], &[]))
}

#[test]
fn divergent_syncthreads_is_reported() {
    let err = divergent("divergent_barrier", 32);
    assert!(err.contains("divergent __syncthreads()"), "{err}");
    assert!(
        err.contains("block (0,0,0) thread (16,0,0)") && err.contains("16 thread(s) wait"),
        "{err}"
    );
}

#[test]
fn divergent_warp_collective_and_mismatched_barriers_are_reported() {
    let err = divergent("divergent_shfl", 32);
    assert!(
        err.contains("divergent warp") && err.contains("dlc_shfl_xor"),
        "{err}"
    );
    let err = divergent("two_barriers", 64);
    assert!(
        err.contains("divergent __syncthreads()") && err.contains("thread (32,0,0)"),
        "{err}"
    );
}
