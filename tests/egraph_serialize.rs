//! egraph-serialize interchange: our e-graphs export deterministically and read back; the public
//! extraction-gym files load with the sizes their README states.

use dlc_egg::extract::serialize::{load, to_json, to_serialized};
use dlc_egg::ir::egraph::{add_program, TensorGraph};
use dlc_egg::{ir::frontend, lower};
use std::path::Path;

fn exported(name: &str) -> (String, usize, usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(format!("{name}.json"));
    let g = frontend::load_file(&path).unwrap_or_else(|d| panic!("{d}"));
    let p = lower::lower(&g).unwrap_or_else(|d| panic!("{d}"));
    let mut eg = TensorGraph::default();
    let class = add_program(&mut eg, &p);
    eg.rebuild();
    let roots: Vec<_> = p.outputs.iter().map(|o| class[o.node.index()]).collect();
    let s = to_serialized(&eg, &roots, &|_| 1.0);
    (
        to_json(&s),
        eg.total_number_of_nodes(),
        eg.number_of_classes(),
    )
}

#[test]
fn examples_export_deterministically_and_read_back() {
    for name in ["gemm_bias_relu", "attention_causal", "conv_relu_pool"] {
        let (a, nodes, classes) = exported(name);
        let (b, _, _) = exported(name);
        assert_eq!(a, b, "{name}: export must be byte-identical");
        let back: dlc_egg::extract::serialize::SerializedEGraph =
            serde_json::from_str(&a).expect("parses");
        assert_eq!(back.nodes.len(), nodes, "{name}");
        assert_eq!(back.classes().len(), classes, "{name}");
        assert_eq!(back.root_eclasses.len(), 1);
        // Every child refers to an existing node.
        assert!(back
            .nodes
            .values()
            .all(|n| n.children.iter().all(|c| back.nodes.contains_key(c))));
    }
}

#[test]
fn extraction_gym_files_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/extraction-gym");
    if !dir.exists() {
        // CI always has shared/ beside the checkout; a developer's checkout may not.
        assert!(
            std::env::var("CI").is_err(),
            "{} missing under CI",
            dir.display()
        );
        eprintln!("skipping: {} not present", dir.display());
        return;
    }
    // (file, e-nodes, e-classes) as the data set's README lists them.
    for (file, nodes, classes) in [
        ("tensat/vgg_acyclic.json", 112, 96),
        ("tensat/resnet50_acyclic.json", 266, 242),
        ("diospyros/simple_vec_add_root_7.json", 91, 18),
    ] {
        let g = load(&dir.join(file)).unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(
            (g.nodes.len(), g.classes().len()),
            (nodes, classes),
            "{file}"
        );
    }
}

#[test]
fn malformed_files_are_diagnostics() {
    let p = std::env::temp_dir().join(format!("dlc-egg-bad-egraph-{}.json", std::process::id()));
    std::fs::write(&p, "{\"nodes\": [}").expect("write");
    assert_eq!(load(&p).unwrap_err().first_code(), "E0001");
    assert_eq!(
        load(Path::new("/nonexistent/x.json"))
            .unwrap_err()
            .first_code(),
        "E0000"
    );
    let _ = std::fs::remove_file(&p);
}
