//! Golden IndexBook dumps of every example (`tests/golden/indexbook/<example>.json`), byte-identical
//! across runs. Regenerate with `UPDATE_GOLDEN=1 cargo test --test golden_indexbook`.

mod common;

use dlc_egg::ir::{frontend, indexbook, lower};
use std::path::Path;

fn dump(path: &Path) -> String {
    let g = frontend::load_file(path).unwrap_or_else(|d| panic!("{}: {d}", path.display()));
    let p = lower::lower(&g).unwrap_or_else(|d| panic!("{}: {d}", path.display()));
    let book = indexbook::index_book(&p).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::to_string_pretty(&book.to_json()).expect("json") + "\n"
}

#[test]
fn indexbook_dumps_match_golden_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/indexbook");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    if update {
        std::fs::create_dir_all(&dir).expect("golden dir");
    }
    let exs = common::example_paths();
    assert!(!exs.is_empty(), "no examples/*.json");
    for ex in exs {
        let got = dump(&ex);
        let golden = dir.join(ex.file_name().expect("file name"));
        if update {
            std::fs::write(&golden, &got).expect("write golden");
            continue;
        }
        let want = std::fs::read_to_string(&golden).unwrap_or_else(|_| {
            panic!(
                "{} missing: run UPDATE_GOLDEN=1 cargo test --test golden_indexbook",
                golden.display()
            )
        });
        assert!(
            got == want,
            "{} differs from its golden IndexBook; inspect and regenerate with UPDATE_GOLDEN=1",
            ex.display()
        );
    }
}

#[test]
fn indexbook_dumps_are_byte_identical_across_runs() {
    for ex in common::example_paths() {
        assert_eq!(dump(&ex), dump(&ex), "{}", ex.display());
    }
}
