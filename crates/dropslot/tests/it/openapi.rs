//! The OpenAPI document (issue 12): `/openapi.json` from the real server equals the committed
//! `docs/openapi.json` (`DROPSLOT_WRITE_OPENAPI=1` rewrites it), every route of the sources is
//! documented with its methods, and `/docs` renders it with the strict CSP.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{API, TestServer};

const REGENERATE: &str = "DROPSLOT_WRITE_OPENAPI=1 cargo nextest run -p dropslot --test it openapi";

fn committed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

/// Routes deliberately not in the document (`METHOD path`, or a path prefix for every method):
/// the dashboard and the dispatcher's pages (`/ops`) are browser UIs behind a session cookie
/// (docs/api.md), and the driver app's static files (docs/driver.md; its API is documented).
/// Each entry must still match a route, so a stale one fails too.
const UNDOCUMENTED: &[&str] = &[
    "/dashboard",
    "/ops",
    "GET /driver",
    "GET /driver/app.js",
    "GET /driver/app.css",
    "GET /driver/icon.svg",
    "GET /driver/manifest.webmanifest",
    "GET /driver/sw.js",
    "GET /embed/slots.js",
];

/// Whether `route` (`METHOD path`) is one of [`UNDOCUMENTED`].
fn undocumented(route: &str) -> bool {
    let path = route.split_once(' ').map_or(route, |(_, p)| p);
    UNDOCUMENTED.iter().any(|u| if u.starts_with('/') { path.starts_with(u) } else { route == *u })
}

#[tokio::test]
async fn openapi_json_is_the_committed_document() {
    let s = TestServer::start().await;
    let res = s.http.get(format!("{}/openapi.json", s.base)).send().await.expect("GET /openapi.json");
    assert_eq!(res.status(), 200);
    let content_type = res.headers()["content-type"].to_str().unwrap().to_string();
    assert!(content_type.starts_with("application/json"), "{content_type}");
    assert!(res.headers().contains_key("x-request-id"));
    let served = res.text().await.expect("body");
    let doc: Value = serde_json::from_str(&served).expect("the document is JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(!served.contains("127.0.0.1"), "the document must not name the test server's address");
    if std::env::var("DROPSLOT_WRITE_OPENAPI").is_ok_and(|v| v == "1") {
        std::fs::write(committed(), &served).expect("write docs/openapi.json");
    }
    let on_disk = std::fs::read_to_string(committed()).unwrap_or_default();
    assert!(
        on_disk == served,
        "docs/openapi.json differs from the document the server generates; regenerate it with:\n  {REGENERATE}"
    );
}

/// `.route("path", get(..).post(..))` and `.route(crate::http::api_path!("path"), ..)` calls of a
/// source file: (the path served, with the API prefix for the latter; methods).
fn routes_in(text: &str) -> Vec<(String, Vec<String>)> {
    let mut found = Vec::new();
    for chunk in text.split(".route(").skip(1) {
        let chunk = chunk.trim_start();
        let (prefix, chunk) = match chunk.strip_prefix("crate::http::api_path!(") {
            Some(rest) => (API, rest.trim_start()),
            None => ("", chunk),
        };
        let Some(rest) = chunk.strip_prefix('"') else { continue };
        let Some((path, rest)) = rest.split_once('"') else { continue };
        let path = format!("{prefix}{path}");
        // The macro's own closing parenthesis.
        let rest = if prefix.is_empty() { rest } else { rest.trim_start().strip_prefix(')').unwrap_or(rest) };
        // The handler argument: up to the parenthesis that closes `.route(`.
        let (mut depth, mut end) = (0i32, rest.len());
        for (i, c) in rest.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = i;
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let handlers = &rest[..end];
        let methods = ["get", "post", "put", "patch", "delete"]
            .iter()
            .filter(|m| {
                handlers
                    .match_indices(&format!("{m}("))
                    .any(|(i, _)| i == 0 || !handlers[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
            })
            .map(|m| m.to_ascii_uppercase())
            .collect();
        found.push((path, methods));
    }
    found
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

#[test]
fn every_route_in_the_sources_is_documented() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    // API routes are declared with `api_path!` (the prefix joined at compile time); the
    // others are served at the root as written.
    let mut in_code = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (path, methods) in routes_in(&text) {
            assert!(!methods.is_empty(), "{}: no method found for {path}", file.display());
            for m in methods {
                in_code.insert(format!("{m} {path}"));
            }
        }
    }
    let doc: Value = serde_json::from_str(&dropslot::openapi::JSON).unwrap();
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert(format!("{} {path}", method.to_ascii_uppercase()));
        }
    }
    for skip in UNDOCUMENTED {
        let live =
            in_code.iter().any(|r| if skip.starts_with('/') { r.contains(&format!(" {skip}")) } else { r == skip });
        assert!(live, "{skip} is no longer a route: drop it from UNDOCUMENTED");
    }
    let missing: Vec<&String> = in_code.iter().filter(|r| !documented.contains(*r) && !undocumented(r)).collect();
    assert!(missing.is_empty(), "routes missing from the OpenAPI document (src/openapi/mod.rs): {missing:?}");
    let stale: Vec<&String> = documented.difference(&in_code).collect();
    assert!(stale.is_empty(), "documented operations that no route serves: {stale:?}");
    assert!(documented.len() >= 30, "the scan sees the routes: {documented:?}");
}

#[tokio::test]
async fn docs_page_is_the_reference_with_a_strict_csp() {
    let s = TestServer::start().await;
    let res = s.http.get(format!("{}/docs", s.base)).send().await.expect("GET /docs");
    assert_eq!(res.status(), 200);
    let h = res.headers().clone();
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(csp.starts_with("default-src 'none'; style-src 'sha256-"), "{csp}");
    assert!(!csp.contains("script-src"), "{csp}");
    assert_eq!(h["x-content-type-options"], "nosniff");
    let html = res.text().await.expect("body");
    for expected in [
        "/scheduled-service/api/v1/requests/sync",
        "/scheduled-service/api/v1/sandbox/scenarios/{scenario}",
        "delivering-drop-off-shipments",
        "id=\"schema-ErrorEnvelope\"",
        "Idempotent-Replayed",
    ] {
        assert!(html.contains(expected), "/docs does not show {expected}");
    }
    // Nothing is loaded from elsewhere: no script at all, no external stylesheet or image.
    assert!(!html.contains("<script"), "a script on /docs");
    assert!(!html.contains("src=\"http") && !html.contains("<link"), "an external resource on /docs");
}

/// Issue 27: a client generated from the committed document by a real generator
/// (`openapi-python-client`, from `PyPI`) drives preview, a synchronous order and a shipment read
/// end to end, each answer parsed into its generated model, and those models have the names
/// a person would write (`PreviewResponse`, `Preview`, `Order`), never utoipa's generic ones
/// (`EnvelopePreviewObjectObject`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_python_client_works_end_to_end() {
    let s = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let package = dir.path().join("dropslot_client");
    let generated = std::process::Command::new("openapi-python-client")
        .args(["generate", "--meta", "none", "--path"])
        .arg(committed())
        .arg("--output-path")
        .arg(&package)
        .current_dir(dir.path())
        .output()
        .expect("openapi-python-client runs (scripts/test-deps.sh installs it)");
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/openapi-client-check.py");
    let (base, token) = (s.base.clone(), s.token.clone());
    let parent = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .arg(script)
            .arg(&parent)
            .args(["dropslot_client", &base, &token])
            .output()
            .expect("python3 runs")
    })
    .await
    .unwrap();
    assert!(out.status.success(), "the generated client failed: {}", String::from_utf8_lossy(&out.stderr));
    let seen: Value = serde_json::from_slice(&out.stdout).expect("the driver's JSON");
    assert_eq!(seen["preview_model"], "PreviewResponse");
    assert_eq!(seen["preview_object_model"], "Preview");
    assert_eq!(seen["price_with_tax"], 50.85);
    assert_eq!(seen["order_model"], "OrderResponse");
    assert_eq!(seen["order_object_model"], "Order");
    assert_eq!(seen["shipment_model"], "ShipmentViewResponse");
    assert_eq!(seen["shipment_status"], "scheduled");
    assert_eq!(seen["shipment_tracking_code"], seen["tracking_code"]);
    let code = seen["tracking_code"].as_str().unwrap();
    assert_eq!(s.scalar(&format!("SELECT count(*) FROM drop_off_shipments WHERE unique_id = '{code}'")), 1);
    let models: Vec<&str> = seen["models"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    let awkward: Vec<&&str> =
        models.iter().filter(|m| m.starts_with("Envelope") || m.contains("ObjectObject")).collect();
    assert!(awkward.is_empty(), "generated model names: {awkward:?}");
}

/// A value for a parameter of the document: its first `enum` value or its `example` where it
/// has one, else a well-formed value that names nothing stored (so no call changes what
/// another sees, in whatever order they run).
pub(crate) fn plausible(param: &Value) -> String {
    let schema = &param["schema"];
    if let Some(first) = schema["enum"].get(0).and_then(Value::as_str) {
        return first.to_string();
    }
    if let Some(example) = param["example"].as_str().or_else(|| schema["example"].as_str()) {
        return example.to_string();
    }
    let integer =
        schema["type"] == "integer" || schema["type"].as_array().is_some_and(|t| t.contains(&"integer".into()));
    if integer {
        return "987654321".into();
    }
    if schema["format"] == "date" {
        return crate::driver_api::DATE.into();
    }
    match param["name"].as_str().unwrap_or_default() {
        "unique_id" | "tracking_code" => "DOFF7M2Q9XR4TB".into(),
        "custom_code" => "UNKNOWNCODE000000001".into(),
        "id" => "DRV01J9Z3K4M5N6P7Q8R9S0T1".into(),
        "text" => crate::common::DROP_OFF.into(),
        "depot" => "YYZ1".into(),
        _ => "unknown".into(),
    }
}

/// Whether an answer of `status` is one the operation documents (exactly, as a range, or
/// as its default).
fn documented(op: &Value, status: u16) -> bool {
    let responses = &op["responses"];
    let range = format!("{}XX", status / 100);
    [status.to_string(), range, "default".into()].iter().any(|k| responses.get(k).is_some())
}

/// One call of [`every_answer_to_every_kind_of_token_is_documented`].
struct Call {
    op: Value,
    method: reqwest::Method,
    path: String,
    query: Vec<(String, String)>,
    headers: Vec<String>,
    body: Option<String>,
    kind: &'static str,
    token: Option<String>,
}

/// Issue 47: every operation of the document, called with every kind of token (none, a
/// client's `test`, `live` and `ops`, an operator's, a driver's, the admin's), answers only
/// statuses the document lists for that operation. The calls come from the document itself
/// (its paths, methods, parameters and body types), so a new operation is covered when it is
/// documented. Path parameters name nothing stored and JSON bodies are `{}`: what is checked
/// is every refusal a client can meet, token first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_to_every_kind_of_token_is_documented() {
    use futures_util::StreamExt;

    let s = TestServer::start().await;
    let (_, test, live, ops) = s.new_client("Every Token Ltd").await;
    let operator = crate::driver_api::operator(&s).await;
    let (_, driver) = crate::driver_api::driver(&s, &operator, "Tess Token").await;
    let tokens: Vec<(&'static str, Option<String>)> = vec![
        ("none", None),
        ("test", Some(test)),
        ("live", Some(live)),
        ("ops", Some(ops)),
        ("operator", Some(operator)),
        ("driver", Some(driver)),
        ("admin", Some(crate::common::ADMIN_TOKEN.to_string())),
    ];
    let doc: Value = serde_json::from_str(&dropslot::openapi::JSON).unwrap();
    let mut calls = Vec::new();
    for (template, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let Ok(method) = reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes()) else { continue };
            let params = op["parameters"].as_array().cloned().unwrap_or_default();
            let mut path = template.clone();
            let mut query = Vec::new();
            let mut headers = Vec::new();
            for p in &params {
                let name = p["name"].as_str().unwrap();
                let required = p["required"] == true;
                match p["in"].as_str().unwrap() {
                    "path" => path = path.replace(&format!("{{{name}}}"), &plausible(p)),
                    "query" if required => query.push((name.to_string(), plausible(p))),
                    "header" if required => headers.push(name.to_string()),
                    _ => {}
                }
            }
            assert!(!path.contains('{'), "{template}: a path parameter is not declared");
            let body = op["requestBody"]["content"].as_object().and_then(|c| c.keys().next().cloned());
            for (kind, token) in &tokens {
                calls.push(Call {
                    op: op.clone(),
                    method: method.clone(),
                    path: path.clone(),
                    query: query.clone(),
                    headers: headers.clone(),
                    body: body.clone(),
                    kind,
                    token: token.clone(),
                });
            }
        }
    }
    assert!(calls.len() >= 7 * 60, "the document's operations are all called: {}", calls.len());
    let answers: Vec<(String, u16, bool)> = futures_util::stream::iter(calls.into_iter().enumerate())
        .map(|(i, call)| {
            let s = &s;
            async move {
                let Call { op, method, path, query, headers, body, kind, token } = call;
                let mut req = s.http.request(method.clone(), format!("{}{path}", s.base)).query(&query);
                for h in &headers {
                    req = req.header(h.as_str(), format!("every-token-{i}"));
                }
                if let Some(token) = &token {
                    req = req.bearer_auth(token);
                }
                req = match body.as_deref() {
                    Some("application/json") => req.header("Content-Type", "application/json").body("{}"),
                    Some(other) => req.header("Content-Type", other).body(""),
                    None => req,
                };
                let r = s.send(req).await;
                let status = r.status.as_u16();
                let operation = format!("{method} {path} ({}) with {kind}: {status} {}", op["operationId"], r.body);
                (operation, status, documented(&op, status))
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let undocumented: Vec<&String> = answers.iter().filter(|(_, _, ok)| !ok).map(|(what, _, _)| what).collect();
    assert!(undocumented.is_empty(), "answers the document does not list:\n{}", {
        let lines: Vec<&str> = undocumented.iter().map(|s| s.as_str()).collect();
        lines.join("\n")
    });
    // The calls reached past the token checks, and each token was refused somewhere.
    for status in [200, 401, 403, 404, 422] {
        assert!(answers.iter().any(|(_, s, _)| *s == status), "no call answered {status}");
    }
}
