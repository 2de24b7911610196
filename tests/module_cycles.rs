//! Module dependency lint (issue 20): the top-level modules of `src/` (the first path segment
//! after `crate::`) must form no dependency cycle. Computed from the source text: every
//! `crate::m` path (also inside `use crate::{a, b}` groups) outside comments is an edge from the
//! file's top-level module to `m`; `main`, `lib` and the binary's `cli` are roots, not layers.
//!
//! Cycles still in the tree would be listed in [`KNOWN_CYCLE_EDGES`] (empty today): an edge
//! between two modules of one strongly connected component. The test fails when a new edge
//! closes a cycle, and when a listed edge no longer does ("remove it from KNOWN_CYCLE_EDGES"),
//! so the list can only shrink until it is empty.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Edges `(from, to)` inside a dependency cycle today: none. The last one, `codegen` ↔ `cost`,
/// was split (issue 20): the cost model asks the templates what they emit (`cost` → `codegen`),
/// and code generation builds the plans the cost model chose, carried in `plan::priced`
/// (`codegen` reads no `cost`).
const KNOWN_CYCLE_EDGES: &[(&str, &str)] = &[];

/// Removes `//` comments (doc comments included) and string-free noise well enough for paths.
fn strip_comments(src: &str) -> String {
    src.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules named by `crate::` paths in `src`.
fn crate_refs(src: &str) -> BTreeSet<String> {
    let text = strip_comments(src);
    let mut out = BTreeSet::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("src/ is readable")
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module graph: top-level module → modules it names.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).expect("under src/");
        let first = rel.components().next().expect("non-empty path");
        let top = first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if matches!(top.as_str(), "main" | "lib" | "cli") {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("source is UTF-8");
        let deps = graph.entry(top.clone()).or_default();
        for m in crate_refs(&text) {
            if m != top {
                deps.insert(m);
            }
        }
    }
    graph
}

/// Strongly connected components (Tarjan), each sorted; singletons included.
fn sccs(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct St<'g> {
        g: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(s: &mut St<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        let g = s.g;
        for w in g.get(v).into_iter().flatten().map(String::as_str) {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            s.out.push(comp);
        }
    }
    let mut s = St {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// Edges whose two ends lie in one strongly connected component.
fn cycle_edges(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<(String, String)> {
    let comp_of: BTreeMap<String, usize> = sccs(graph)
        .into_iter()
        .enumerate()
        .flat_map(|(i, c)| c.into_iter().map(move |m| (m, i)))
        .collect();
    graph
        .iter()
        .flat_map(|(a, bs)| bs.iter().map(move |b| (a.clone(), b.clone())))
        .filter(|(a, b)| comp_of.contains_key(a) && comp_of.get(a) == comp_of.get(b))
        .collect()
}

#[test]
fn no_new_dependency_cycle_among_top_level_modules() {
    let graph = module_graph();
    assert!(graph.len() > 10, "the module graph was read: {graph:?}");
    let found = cycle_edges(&graph);
    let known: BTreeSet<(String, String)> = KNOWN_CYCLE_EDGES
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let new: Vec<_> = found.difference(&known).collect();
    let gone: Vec<_> = known.difference(&found).collect();
    assert!(
        new.is_empty(),
        "these `crate::` dependencies close a cycle among the top-level modules: {new:?}"
    );
    assert!(
        gone.is_empty(),
        "these edges no longer lie on a cycle: remove them from KNOWN_CYCLE_EDGES: {gone:?}"
    );
}

#[test]
fn the_lint_finds_a_cycle_and_groups() {
    let src = "use crate::{a, b::c};\n// crate::ignored\nfn f() { crate::d::e(); }";
    let refs: Vec<_> = crate_refs(src).into_iter().collect();
    assert_eq!(refs, ["a", "b", "d"]);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("x".into()).or_default().insert("y".into());
    g.entry("y".into()).or_default().insert("x".into());
    g.entry("y".into()).or_default().insert("z".into());
    g.entry("z".into()).or_default();
    let edges: Vec<_> = cycle_edges(&g).into_iter().collect();
    assert_eq!(
        edges,
        [
            ("x".to_string(), "y".to_string()),
            ("y".to_string(), "x".to_string())
        ]
    );
}

/// Ground-floor modules (issue 20): they name no other module of the crate — the index algebra
/// with `Dim` and the wire form, the element types — so every layer can build on them.
const GROUND_FLOOR: &[&str] = &["index", "dtype"];

#[test]
fn ground_floor_modules_import_nothing_else_from_the_crate() {
    let graph = module_graph();
    for m in GROUND_FLOOR {
        let deps = graph
            .get(*m)
            .unwrap_or_else(|| panic!("module {m} was read"));
        assert!(
            deps.is_empty(),
            "`{m}` must import nothing else from the crate: {deps:?}"
        );
    }
}
