//! Shape and dtype inference of every op, defaults and normal form; all examples load.

use dlc_egg::ir::dim::Dim;
use dlc_egg::ir::dtype::DType;
use dlc_egg::ir::frontend::{load_file, load_str, Graph};

#[test]
fn all_examples_load() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let g = load_file(&p).unwrap_or_else(|d| panic!("{}: {d}", p.display()));
            assert!(!g.nodes.is_empty());
            n += 1;
        }
    }
    assert!(n >= 7);
}
