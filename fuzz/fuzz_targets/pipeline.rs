//! libFuzzer target: one input through `dlc_egg::fuzz_target::fuzz_one` (graph.json, `.npy` or
//! egraph-serialize by its first byte; load → check → optimize → run). A panic or an internal
//! error on an input is a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = dlc_egg::fuzz_target::fuzz_one(data) {
        panic!("{e}");
    }
});
