//! Golden IndexBook dumps of every example (`tests/golden/indexbook/<example>.json`), byte-identical
//! across runs. Regenerate with `UPDATE_GOLDEN=1 cargo test --test golden_indexbook`.

mod common;

use dlc_egg::{
    ir::{frontend, indexbook},
    lower,
};
use std::path::Path;

fn dump(path: &Path) -> String {
    let g = frontend::load_file(path).unwrap_or_else(|d| panic!("{}: {d}", path.display()));
    let p = lower::lower(&g).unwrap_or_else(|d| panic!("{}: {d}", path.display()));
    let book = indexbook::index_book(&p).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::to_string_pretty(&book.to_json()).expect("json") + "\n"
}

#[test]
fn indexbook_dumps_match_golden_files() {
    common::check_golden_files("indexbook", "json", "golden_indexbook", "IndexBook", &dump);
}

#[test]
fn indexbook_dumps_are_byte_identical_across_runs() {
    for ex in common::example_paths() {
        assert_eq!(dump(&ex), dump(&ex), "{}", ex.display());
    }
}
