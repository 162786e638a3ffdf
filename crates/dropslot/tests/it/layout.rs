//! The shape of the workspace (issues 26 and 43). Cargo keeps the layers between crates: the
//! core names neither the store, HTTP nor a database driver; the store names no HTTP. Inside
//! each crate no two modules import each other, directly or through others: neither two
//! top-level modules (folders) nor two files anywhere, inside a folder too. The HTTP toolkit
//! knows no domain and no application, and the store's backend roots know no domain. Read from
//! the sources' code (never their comments) and the manifests, so an import that breaks a rule
//! fails the suite.

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

/// The module a source file is (`orders/create.rs` → `orders::create`, `orders/mod.rs` →
/// `orders`); empty for the crate root and `main.rs`, which declare modules and import none back.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") || !parts.is_empty() && stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

/// The text's code: without comments (`//` lines and doc comments name modules in prose, and
/// `/* */` blocks) and without its unit tests (`#[cfg(test)] mod tests { … }`, whose
/// `use super::*` is the file itself). String literals are kept: no path is built in one.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut chars, mut in_str) = (text.chars().peekable(), false);
    while let Some(ch) = chars.next() {
        if in_str {
            out.push(ch);
            if ch == '\\' {
                out.extend(chars.next());
            } else if ch == '"' {
                in_str = false;
            }
            continue;
        }
        match (ch, chars.peek()) {
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            ('"', _) => {
                in_str = true;
                out.push(ch);
            }
            ('\'', _) => {
                // A char literal (`'"'`, `'\\'`) is copied whole, so its quote opens no string
                // that would hide the code after it; a lifetime (`'a`) has no quote two on.
                out.push(ch);
                let ahead: Vec<char> = chars.clone().take(3).collect();
                let literal = match ahead.as_slice() {
                    ['\\', _, '\''] => 3,
                    [_, '\'', ..] => 2,
                    _ => 0,
                };
                for _ in 0..literal {
                    out.extend(chars.next());
                }
            }
            _ => out.push(ch),
        }
    }
    match out.find("#[cfg(test)]\nmod tests {") {
        Some(at) => {
            let mut depth = 0;
            let rest = &out[at..];
            let end = rest
                .char_indices()
                .find_map(|(i, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 1 => return Some(i + 1),
                        '}' => depth -= 1,
                        _ => {}
                    }
                    None
                })
                .unwrap_or(rest.len());
            format!("{}{}", &out[..at], &rest[end..])
        }
        None => out,
    }
}

/// The paths a `use` tree or an expression names from `at` on: `a::b::{C, d::E}` → `a::b::C`,
/// `a::b::d::E`. Only the path's segments matter, so a name's last segment is kept as it is.
fn paths_from(text: &str) -> Vec<Vec<String>> {
    fn ident(rest: &str) -> String {
        rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
    }
    let mut out = Vec::new();
    let mut prefix = Vec::new();
    let mut rest = text;
    loop {
        let name = ident(rest);
        if name.is_empty() {
            if let Some(group) = rest.strip_prefix('{') {
                // The group's top-level entries, each a path of its own.
                let (mut depth, mut start) = (0, 0);
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            for p in paths_from(group[start..i].trim_start()) {
                                out.push(prefix.iter().cloned().chain(p).collect());
                            }
                            return out;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            for p in paths_from(group[start..i].trim_start()) {
                                out.push(prefix.iter().cloned().chain(p).collect());
                            }
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
            }
            if !prefix.is_empty() {
                out.push(prefix);
            }
            return out;
        }
        rest = &rest[name.len()..];
        prefix.push(name);
        let Some(r) = rest.strip_prefix("::") else {
            out.push(prefix);
            return out;
        };
        rest = r.trim_start();
    }
}

/// Every module of a crate (by path) and the other modules of the same crate each imports:
/// `crate::…`, `super::…` and `self::…` paths, and a parent's paths through its own child
/// modules (`writer::Writer` in `sqlite/mod.rs`), each resolved to the deepest module it names.
fn file_graph(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = crates_dir().join(krate).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_path(&src, f)).collect();
    let reexported = reexported(&src, &files);
    let mut graph: BTreeMap<String, BTreeSet<String>> =
        modules.iter().filter(|m| !m.is_empty()).map(|m| (m.join("::"), BTreeSet::new())).collect();
    for file in &files {
        let me = module_path(&src, file);
        if me.is_empty() {
            continue;
        }
        let text = code(&std::fs::read_to_string(file).unwrap());
        let children: BTreeSet<String> = modules
            .iter()
            .filter(|m| m.len() == me.len() + 1 && m.starts_with(&me))
            .map(|m| m[me.len()].clone())
            .collect();
        let bytes = text.as_bytes();
        for (at, _) in text.char_indices() {
            // A path starts where no identifier or `::` ends just before it.
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b':') {
                continue;
            }
            let rest = &text[at..];
            let first: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if first.is_empty() || !rest[first.len()..].starts_with("::") {
                continue;
            }
            if !matches!(first.as_str(), "crate" | "super" | "self") && !children.contains(&first) {
                continue;
            }
            for path in paths_from(rest) {
                let mut resolved: Vec<String> = Vec::new();
                let mut segs = path.into_iter().peekable();
                match segs.peek().map(String::as_str) {
                    Some("crate") => {
                        segs.next();
                        // A name the crate root re-exports is its defining module's.
                        if let Some(home) = segs.peek().and_then(|name| reexported.get(name)) {
                            resolved.clone_from(home);
                            segs.next();
                        }
                    }
                    Some("self") => {
                        segs.next();
                        resolved.clone_from(&me);
                    }
                    Some("super") => {
                        resolved.clone_from(&me);
                        while segs.peek().map(String::as_str) == Some("super") {
                            segs.next();
                            resolved.pop();
                        }
                    }
                    _ => resolved.clone_from(&me),
                }
                resolved.extend(segs);
                while !resolved.is_empty() && !modules.contains(&resolved) {
                    resolved.pop();
                }
                // A child sees its parents' items (`super::X`): that is nesting, not a circle.
                if !resolved.is_empty() && !me.starts_with(&resolved) {
                    graph.get_mut(&me.join("::")).unwrap().insert(resolved.join("::"));
                }
            }
        }
    }
    graph
}

/// The names the crate root re-exports with `pub use module::*`, each with its module: a
/// `crate::Name` path is an import of the module that defines `Name`, so the scan sees the edge.
fn reexported(src: &Path, files: &[PathBuf]) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let Ok(root) = std::fs::read_to_string(src.join("lib.rs")) else { return out };
    for line in code(&root).lines() {
        let Some(module) = line.trim().strip_prefix("pub use ").and_then(|l| l.strip_suffix("::*;")) else { continue };
        let home: Vec<String> = module.split("::").map(String::from).collect();
        for file in files.iter().filter(|f| module_path(src, f) == home) {
            for line in code(&std::fs::read_to_string(file).unwrap()).lines() {
                let item = ["struct ", "enum ", "fn ", "async fn ", "trait ", "type ", "const ", "static "]
                    .iter()
                    .find_map(|kind| line.strip_prefix("pub ").and_then(|l| l.strip_prefix(kind)));
                if let Some(rest) = item {
                    let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    out.insert(name, home.clone());
                }
            }
        }
    }
    out
}

/// The same graph between top-level modules (folders and the files beside them).
fn graph(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let top = |m: &str| m.split("::").next().unwrap().to_string();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, used) in file_graph(krate) {
        let entry = out.entry(top(&module)).or_default();
        entry.extend(used.iter().map(|u| top(u)).filter(|u| *u != top(&module)));
    }
    out
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

const CRATES: [&str; 4] = ["dropslot", "dropslot-core", "dropslot-store", "dropslot-labels"];

#[test]
fn no_module_of_any_crate_imports_itself_back() {
    for krate in CRATES {
        assert_no_cycle(&graph(krate));
        assert_no_cycle(&file_graph(krate));
    }
    // The scan sees every module, not only the domains: the application state, the error,
    // the rate limits and the metrics are where the old circle ran.
    let service = graph("dropslot");
    for (module, must) in [("orders", "app"), ("auth", "app"), ("app", "ratelimit"), ("root", "webhooks")] {
        assert!(service[module].contains(must), "the scan sees imports: {module} → {must} in {service:?}");
    }
    // Inside folders too: a backend's half of a domain, its child modules, and its parent.
    let store = file_graph("dropslot-store");
    for (module, must) in [
        ("orders::sqlite", "sqlite"),
        ("orders::sqlite", "outbox::sqlite"),
        ("orders::postgres", "capacity::postgres"),
        ("sqlite", "sqlite::writer"),
        ("sqlite", "cache"),
        ("lifecycle::postgres", "postgres"),
    ] {
        assert!(store[module].contains(must), "the scan sees imports: {module} → {must} in {store:?}");
    }
    let labels = file_graph("dropslot-labels");
    assert!(labels["text"].contains("font"), "the scan sees imports: text → font in {labels:?}");
}

/// The store's shape (issue 43): each domain is one folder, its role trait and records in
/// `mod.rs` beside that trait's two halves; the backends' roots (the connection, the writer,
/// the caches) sit below every domain and name none of them.
#[test]
fn each_store_domain_is_one_folder_and_the_backend_roots_know_no_domain() {
    let src = crates_dir().join("dropslot-store").join("src");
    let mut domains = BTreeSet::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() && !matches!(name.as_str(), "sqlite" | "postgres") {
            for half in ["mod.rs", "sqlite.rs", "postgres.rs"] {
                assert!(
                    path.join(half).is_file(),
                    "store/src/{name}/ has no {half}: a domain is one folder of three files"
                );
            }
            domains.insert(name);
        }
    }
    assert!(domains.len() >= 13 && domains.contains("orders"), "the domains are read: {domains:?}");
    let store = file_graph("dropslot-store");
    for root in ["sqlite", "postgres"] {
        let named: Vec<_> = store
            .iter()
            .filter(|(m, _)| *m == root || m.starts_with(&format!("{root}::")))
            .flat_map(|(_, used)| used.iter().filter(|u| domains.contains(u.split("::").next().unwrap())))
            .collect();
        assert!(named.is_empty(), "the {root} backend's root names domains {named:?}: it must sit below them");
    }
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
fn the_core_names_no_store_http_or_driver_and_the_store_no_http_or_api_schema() {
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
    // The API's schemas belong to the service's wire types; a store record is plain data (the
    // core's own schemas are behind its `openapi` feature, which only the service turns on).
    assert!(!store.contains("utoipa"), "dropslot-store depends on utoipa: its records are not wire types");
}

#[test]
fn the_import_scan_reads_code_over_lines_and_not_comments() {
    let text = "//! names crate::d in prose, and [`crate::e::F`]\nuse crate::{\n    a::X,\n    b::{Y, z::Z},\n};\n/* crate::d */ let _ = crate::c::f(); // crate::d\n#[cfg(test)]\nmod tests {\n    use crate::d::*;\n}\n";
    let code = code(text);
    assert!(!code.contains("crate::d") && !code.contains("crate::e"), "{code}");
    let found: Vec<Vec<String>> = code.match_indices("crate::").flat_map(|(at, _)| paths_from(&code[at..])).collect();
    let found: Vec<String> = found.iter().map(|p| p.join("::")).collect();
    assert_eq!(found, ["crate::a::X", "crate::b::Y", "crate::b::z::Z", "crate::c::f"]);
    // A char literal holding a quote opens no string: the comment after it is still a comment.
    let quoted =
        self::code("let q = '\"'; let e = '\\''; fn f<'a>(_: &'a str) {} // crate::e::H\nlet _ = crate::d::G;");
    assert!(!quoted.contains("crate::e"), "{quoted}");
    assert_eq!(paths_from(&quoted[quoted.find("crate::").unwrap()..]), [["crate", "d", "G"]]);
}
