//! Golden Tiny IR dumps of every example (`tests/golden/tiny/<example>.json`), byte-identical
//! across runs. Regenerate with `UPDATE_GOLDEN=1 cargo test --test golden_tiny`.

mod common;

use dlc_egg::{
    ir::{frontend, tiny},
    lower,
};
use std::path::Path;

fn dump(path: &Path) -> String {
    let g = frontend::load_file(path).unwrap_or_else(|d| panic!("{}: {d}", path.display()));
    let p = lower::lower(&g).unwrap_or_else(|d| panic!("{}: {d}", path.display()));
    tiny::verify(&p).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::to_string_pretty(&tiny::to_json(&p)).expect("json") + "\n"
}

#[test]
fn every_seed_example_exists() {
    let names: Vec<String> = common::example_paths()
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in common::SEED_EXAMPLES {
        assert!(
            names.iter().any(|n| n == want),
            "examples/{want}.json missing (have {names:?})"
        );
    }
}

#[test]
fn tiny_dumps_match_golden_files() {
    common::check_golden_files("tiny", "json", "golden_tiny", "Tiny IR dump", &dump);
}

#[test]
fn dumps_are_byte_identical_across_runs() {
    for ex in common::example_paths() {
        assert_eq!(dump(&ex), dump(&ex), "{}", ex.display());
    }
}
