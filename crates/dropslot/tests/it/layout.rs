//! The shape of the workspace (issue 26). Cargo keeps the layers between crates: the core
//! names neither the store, HTTP nor a database driver; the store names no HTTP. Inside each
//! crate no two modules import each other, directly or through others, and the HTTP toolkit
//! knows no domain and no application. Read from the sources and manifests, so an import
//! that breaks a rule fails the suite.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

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

/// The top-level module a source file belongs to (`orders/create.rs` → `orders`); `None`
/// for the crate root and `main.rs`, which declare modules and import none back.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    let name = first.trim_end_matches(".rs").to_string();
    (!matches!(name.as_str(), "lib" | "main")).then_some(name)
}

/// The text without `//` comments (doc comments name modules in prose).
fn code(text: &str) -> String {
    text.lines().map(|l| l.split_once("//").map_or(l, |(code, _)| code)).collect::<Vec<_>>().join("\n")
}

/// The crate's modules a file names as `crate::x` (paths, `use` lines and `crate::{a, b::c}`
/// groups, over several lines too).
fn imports(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let text = code(text);
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The names at the group's top level: `crate::{a, b::{C, D}, e}` → a, b, e.
            let (mut depth, mut name, mut expect_name) = (0, String::new(), true);
            for ch in group.chars() {
                if depth == 0 && expect_name && (ch.is_alphanumeric() || ch == '_') {
                    name.push(ch);
                    continue;
                }
                if !name.is_empty() {
                    found.insert(std::mem::take(&mut name));
                    expect_name = false;
                }
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => expect_name = true,
                    _ => {}
                }
            }
            if !name.is_empty() {
                found.insert(name);
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            found.insert(name);
        }
    }
    found.retain(|m| modules.contains(m));
    found
}

/// Every module of a crate and the other modules of the same crate it imports.
fn graph(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = crates_dir().join(krate).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(&src, f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for file in &files {
        let Some(module) = module_of(&src, file) else { continue };
        let text = std::fs::read_to_string(file).unwrap();
        let used = imports(&text, &modules);
        graph.get_mut(&module).unwrap().extend(used.into_iter().filter(|d| *d != module));
    }
    graph
}

/// Depth-first search for a cycle from `n`.
fn visit(n: &str, graph: &BTreeMap<String, BTreeSet<String>>, path: &mut Vec<String>, done: &mut BTreeSet<String>) {
    if let Some(at) = path.iter().position(|p| p == n) {
        panic!("modules import each other in a cycle: {} → {n}", path[at..].join(" → "));
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

fn assert_no_cycle(graph: &BTreeMap<String, BTreeSet<String>>) {
    let mut done = BTreeSet::new();
    for n in graph.keys() {
        visit(n, graph, &mut Vec::new(), &mut done);
    }
}

#[test]
fn no_module_of_any_crate_imports_itself_back() {
    let service = graph("dropslot");
    assert_no_cycle(&service);
    // The scan sees every module, not only the domains: the application state, the error,
    // the rate limits and the metrics are where the old circle ran.
    for (module, must) in [("orders", "app"), ("auth", "app"), ("app", "ratelimit"), ("root", "webhooks")] {
        assert!(service[module].contains(must), "the scan sees imports: {module} → {must} in {service:?}");
    }
    assert_no_cycle(&graph("dropslot-core"));
    assert_no_cycle(&graph("dropslot-store"));
}

#[test]
fn the_toolkits_know_no_domain_and_no_application() {
    let service = graph("dropslot");
    // What the HTTP toolkit, the error, the metrics and the rate limits may name: each other
    // (in this order), never the application or a domain.
    let allowed: [(&str, &[&str]); 4] =
        [("error", &[]), ("metrics", &[]), ("ratelimit", &["error", "metrics"]), ("http", &["error", "metrics"])];
    for (module, may) in allowed {
        let extra: Vec<_> = service[module].iter().filter(|m| !may.contains(&m.as_str())).collect();
        assert!(extra.is_empty(), "{module} imports {extra:?}: it is a toolkit, below the app and the domains");
    }
    // The application state imports no domain: the composition root hands it the outbox.
    let app_may = ["error", "http", "metrics", "ratelimit"];
    let extra: Vec<_> = service["app"].iter().filter(|m| !app_may.contains(&m.as_str())).collect();
    assert!(extra.is_empty(), "app imports {extra:?}");
    // Only the composition root names it (the CLI starts it).
    for (module, used) in &service {
        assert!(!used.contains("root") || module == "cli", "{module} imports the composition root");
    }
}

/// The names in a manifest's `[dependencies]` table.
fn dependencies(krate: &str) -> BTreeSet<String> {
    let manifest = std::fs::read_to_string(crates_dir().join(krate).join("Cargo.toml")).unwrap();
    let mut names = BTreeSet::new();
    let mut inside = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[dependencies]";
        } else if inside {
            if let Some((name, _)) = line.split_once('=') {
                names.insert(name.trim().to_string());
            }
        }
    }
    names
}

#[test]
fn the_core_names_no_store_http_or_driver_and_the_store_no_http() {
    let core = dependencies("dropslot-core");
    let store = dependencies("dropslot-store");
    assert!(core.contains("jiff") && store.contains("rusqlite"), "the manifests are read: {core:?} {store:?}");
    let http = ["axum", "hyper", "hyper-util", "tower", "reqwest", "askama"];
    let drivers = ["rusqlite", "tokio-postgres", "deadpool-postgres"];
    for name in http.iter().chain(&drivers).chain(&["dropslot-store", "dropslot", "tokio"]) {
        assert!(!core.contains(*name), "dropslot-core depends on {name}: the core is pure");
    }
    for name in http.iter().chain(&["dropslot"]) {
        assert!(!store.contains(*name), "dropslot-store depends on {name}: storage knows no HTTP");
    }
}

#[test]
fn the_import_scan_reads_groups_over_lines() {
    let modules: BTreeSet<String> = ["a", "b", "c", "d"].into_iter().map(String::from).collect();
    let text = "use crate::{\n    a::X,\n    b::{Y, Z},\n};\n// crate::d in a comment\nlet _ = crate::c::f();";
    let found: Vec<_> = imports(text, &modules).into_iter().collect();
    assert_eq!(found, ["a", "b", "c"]);
}
