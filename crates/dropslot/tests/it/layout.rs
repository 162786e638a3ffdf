//! The shape of the crate (issue 7): `http/` is a toolkit that knows no domain, and no two
//! domain modules import each other, directly or through others. Read from the sources, so
//! an import that breaks either rule fails the suite.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The domain modules: a folder or file under `src/` each.
const DOMAINS: &[&str] = &[
    "addresses",
    "auth",
    "dashboard",
    "geo",
    "health",
    "labels",
    "ops",
    "orders",
    "quote",
    "sandbox",
    "shipments",
    "store",
    "tracking",
    "webhooks",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a source file belongs to (`orders/create.rs` → `orders`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_string()
}

/// The domains a file names as `crate::x` (in `use` lines and paths alike).
fn imports(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
        for d in DOMAINS {
            if line.contains(&format!("crate::{d}::"))
                || line.contains(&format!("crate::{d};"))
                || line.contains(&format!("crate::{d}}}"))
            {
                found.insert((*d).to_string());
            }
        }
        if let Some(group) = line.split("crate::{").nth(1) {
            for name in group.split([',', '}', ' ']).filter(|n| !n.is_empty()) {
                if DOMAINS.contains(&name) {
                    found.insert(name.to_string());
                }
            }
        }
    }
    found
}

/// Depth-first search for a cycle from `n`.
fn visit(n: &str, graph: &BTreeMap<String, BTreeSet<String>>, path: &mut Vec<String>, done: &mut BTreeSet<String>) {
    if let Some(at) = path.iter().position(|p| p == n) {
        panic!("domain modules import each other in a cycle: {} → {n}", path[at..].join(" → "));
    }
    if done.contains(n) {
        return;
    }
    path.push(n.to_string());
    for next in graph.get(n).into_iter().flatten() {
        visit(next, graph, path, done);
    }
    path.pop();
    done.insert(n.to_string());
}

#[test]
fn http_knows_no_domain_and_domains_import_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        let text = std::fs::read_to_string(file).unwrap();
        let used = imports(&text);
        if module == "http" {
            assert!(used.is_empty(), "{} imports domain modules {used:?}: http/ is the toolkit", file.display());
        }
        if DOMAINS.contains(&module.as_str()) {
            graph.entry(module.clone()).or_default().extend(used.into_iter().filter(|d| *d != module));
        }
    }
    let mut done = BTreeSet::new();
    for n in graph.keys() {
        visit(n, &graph, &mut Vec::new(), &mut done);
    }
    assert!(graph.contains_key("orders") && graph["orders"].contains("quote"), "the scan sees imports: {graph:?}");
}
