//! `/docs`: the API reference, rendered on the server from the OpenAPI document itself (so
//! the page and `/openapi.json` cannot disagree). One inline stylesheet, no script, nothing
//! fetched from anywhere: the same strict CSP as the tracking page.

use std::sync::LazyLock;

use askama::Template;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::Error;

const CSS: &str = include_str!("../../templates/docs.css");

static CSP: LazyLock<String> = LazyLock::new(|| {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(CSS.as_bytes()));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
});

#[derive(Template)]
#[template(path = "docs.html")]
struct Page {
    css: &'static str,
    title: String,
    version: String,
    description: String,
    groups: Vec<Group>,
    schemas: Vec<SchemaView>,
}

struct Group {
    tag: String,
    operations: Vec<OperationView>,
}

struct OperationView {
    anchor: String,
    method: String,
    path: String,
    summary: String,
    description: String,
    auth: String,
    parameters: Vec<Field>,
    request: Option<String>,
    responses: Vec<ResponseView>,
}

struct ResponseView {
    status: String,
    description: String,
    bodies: Vec<(String, String)>,
    headers: String,
}

/// A property or a parameter: name, type (HTML), whether required, description (HTML).
struct Field {
    name: String,
    kind: String,
    required: bool,
    description: String,
}

struct SchemaView {
    name: String,
    kind: String,
    description: String,
    fields: Vec<Field>,
}

/// Text as HTML, with `code` spans: escaped first, so nothing in a description is markup.
fn prose(text: &str) -> String {
    let escaped = text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    let mut out = String::with_capacity(escaped.len());
    for (i, part) in escaped.split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str("<code>");
            out.push_str(part);
            out.push_str("</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// A schema's type in a few words (HTML): a link for a named schema, the fields of an inline
/// object (how the generic envelope appears), `a | b` for alternatives.
fn kind(s: &Value) -> String {
    if let Some(name) = s.get("$ref").and_then(Value::as_str).and_then(|r| r.rsplit('/').next()) {
        let name = prose(name);
        return format!("<a href=\"#schema-{name}\">{name}</a>");
    }
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        let listed: Vec<String> = values.iter().map(|v| format!("<code>{}</code>", prose(&v.to_string()))).collect();
        return format!("one of {}", listed.join(", "));
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(items) = s.get(key).and_then(Value::as_array) {
            let parts: Vec<String> = items.iter().map(kind).collect();
            return parts.join(if key == "allOf" { " and " } else { " | " });
        }
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let mut words: Vec<String> = Vec::new();
    for t in types {
        words.push(match t {
            "array" => format!("array of {}", s.get("items").map_or_else(|| "any".into(), kind)),
            "object" if s.get("properties").is_some() => {
                let fields: Vec<String> = fields(s)
                    .into_iter()
                    .map(|f| format!("{}{}: {}", f.name, if f.required { "" } else { "?" }, f.kind))
                    .collect();
                format!("{{{}}}", fields.join(", "))
            }
            "object" => match s.get("additionalProperties") {
                Some(v) if v.is_object() => format!("map of {}", kind(v)),
                _ => "object".into(),
            },
            other => prose(other),
        });
    }
    if words.is_empty() { "any".into() } else { words.join(" | ") }
}

/// An object schema's properties, in the document's order.
fn fields(s: &Value) -> Vec<Field> {
    let required: Vec<&str> =
        s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let empty = Map::new();
    let properties = s.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    properties
        .iter()
        .map(|(name, p)| Field {
            name: prose(name),
            kind: kind(p),
            required: required.contains(&name.as_str()),
            description: prose(&text(p, "description")),
        })
        .collect()
}

fn operation(method: &str, path: &str, op: &Value) -> OperationView {
    let auth: Vec<String> = op
        .get("security")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .flat_map(|m| m.keys().map(|k| prose(k)))
        .collect();
    let parameters = op
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| Field {
            name: format!("{} ({})", prose(&text(p, "name")), prose(&text(p, "in"))),
            kind: p.get("schema").map_or_else(|| "any".into(), kind),
            required: p.get("required").and_then(Value::as_bool).unwrap_or(false),
            description: prose(&text(p, "description")),
        })
        .collect();
    let bodies = |content: Option<&Value>| -> Vec<(String, String)> {
        content
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(media, c)| (prose(media), c.get("schema").map_or_else(|| "any".into(), kind)))
            .collect()
    };
    let request = op.pointer("/requestBody/content").map(|c| {
        bodies(Some(c)).into_iter().map(|(m, k)| format!("<code>{m}</code>: {k}")).collect::<Vec<_>>().join("<br>")
    });
    let responses = op
        .get("responses")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(status, r)| ResponseView {
            status: prose(status),
            description: prose(&text(r, "description")),
            bodies: bodies(r.get("content")),
            headers: r
                .get("headers")
                .and_then(Value::as_object)
                .map(|h| h.keys().map(|k| format!("<code>{}</code>", prose(k))).collect::<Vec<_>>().join(", "))
                .unwrap_or_default(),
        })
        .collect();
    let id = text(op, "operationId");
    OperationView {
        anchor: prose(&id),
        method: method.to_ascii_uppercase(),
        path: prose(path),
        summary: prose(&text(op, "summary")),
        description: prose(&text(op, "description")),
        auth: if auth.is_empty() { "none".into() } else { auth.join(" or ") },
        parameters,
        request,
        responses,
    }
}

/// The page's model, from the document's JSON: operations grouped by tag (in the order tags
/// first appear), then every named schema.
fn page_of(doc: &Value) -> Page {
    let mut groups: Vec<Group> = Vec::new();
    for (path, item) in doc.get("paths").and_then(Value::as_object).into_iter().flatten() {
        for method in ["get", "put", "post", "delete", "patch", "head", "options", "trace"] {
            let Some(op) = item.get(method) else { continue };
            let tag = op.pointer("/tags/0").and_then(Value::as_str).unwrap_or("Other").to_string();
            let view = operation(method, path, op);
            match groups.iter_mut().find(|g| g.tag == tag) {
                Some(g) => g.operations.push(view),
                None => groups.push(Group { tag, operations: vec![view] }),
            }
        }
    }
    groups.sort_by(|a, b| a.tag.cmp(&b.tag));
    let schemas = doc
        .pointer("/components/schemas")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, s)| SchemaView {
            name: prose(name),
            kind: if s.get("properties").is_some() { "object".into() } else { kind(s) },
            description: prose(&text(s, "description")),
            fields: fields(s),
        })
        .collect();
    Page {
        css: CSS,
        title: text(&doc["info"], "title"),
        version: text(&doc["info"], "version"),
        description: prose(&text(&doc["info"], "description")),
        groups,
        schemas,
    }
}

/// The rendered page, once: the document does not change while the process runs.
static HTML: LazyLock<Result<String, String>> = LazyLock::new(|| {
    let doc: Value = serde_json::from_str(&super::JSON).map_err(|e| e.to_string())?;
    page_of(&doc).render().map_err(|e| e.to_string())
});

#[utoipa::path(get, path = "/docs", tag = "Service", operation_id = "docs",
    summary = "This reference, as a web page",
    description = "Rendered on the server from this document; no script, nothing loaded from elsewhere.",
    responses((status = 200, description = "The page.", content_type = "text/html", body = String)))]
pub(super) async fn page() -> Response {
    match HTML.as_ref() {
        Ok(html) => {
            let mut res = html.clone().into_response();
            let h = res.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
            h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
            h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
            if let Ok(csp) = HeaderValue::from_str(&CSP) {
                h.insert(header::CONTENT_SECURITY_POLICY, csp);
            }
            res
        }
        Err(e) => Error::Internal(format!("API reference page: {e}")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_escapes_markup_and_marks_code() {
        assert_eq!(prose("a <b> & `c<d>`"), "a &lt;b&gt; &amp; <code>c&lt;d&gt;</code>");
    }

    #[test]
    fn kinds_read_as_types() {
        let s = serde_json::json!({"type": "array", "items": {"$ref": "#/components/schemas/Proof"}});
        assert_eq!(kind(&s), "array of <a href=\"#schema-Proof\">Proof</a>");
        let s = serde_json::json!({"type": ["string", "null"]});
        assert_eq!(kind(&s), "string | null");
    }

    #[test]
    fn the_page_lists_every_operation() {
        let doc: Value = serde_json::from_str(&crate::openapi::JSON).unwrap();
        let page = page_of(&doc);
        let count: usize = page.groups.iter().map(|g| g.operations.len()).sum();
        let expected: usize = doc["paths"].as_object().unwrap().values().map(|i| i.as_object().unwrap().len()).sum();
        assert_eq!(count, expected);
        assert!(page.render().unwrap().contains("/scheduled-service/api/v1/requests/sync"));
    }
}
