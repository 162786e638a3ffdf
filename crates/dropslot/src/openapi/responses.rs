//! The answers operations share, added from what each operation is: its security (token
//! checks, the 403 of each scheme to the other kinds of token, rate limits), whether it reads
//! a body (the `JsonBody` refusals), and what every request can meet (500, 503). Handlers' attributes list only their own answers; one they
//! already give keeps its description. Every response gets its `X-Request-Id` header.

use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{ContentBuilder, Header, OpenApi, Ref, RefOr, Response, ResponseBuilder};

/// The security schemes whose extractors take a request from a token bucket (`Caller`,
/// `OpsCaller`, `OperatorCaller`); the admin token has no bucket.
const RATE_LIMITED: &[&str] = &["client_token", "ops_token", "operator_token", "publishable_key"];

pub(super) fn complete(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
            &mut item.head,
            &mut item.options,
            &mut item.trace,
        ];
        for op in operations.into_iter().flatten() {
            complete_operation(op);
        }
    }
}

/// The names of the security schemes an operation takes.
fn schemes(op: &Operation) -> Vec<String> {
    let requirements = serde_json::to_value(&op.security).unwrap_or_default();
    let mut names = Vec::new();
    for requirement in requirements.as_array().into_iter().flatten() {
        names.extend(requirement.as_object().into_iter().flat_map(|m| m.keys().cloned()));
    }
    names
}

fn complete_operation(op: &mut Operation) {
    let schemes = schemes(op);
    let authenticated = !schemes.is_empty();
    let body = op.request_body.is_some();
    let mut bad_request = Vec::new();
    if body {
        bad_request.push(
            "The body is not valid JSON or not an object, a number is out of range, nesting is too deep, a key \
             appears twice, or a field has the wrong JSON type, is not one the body takes, or has a value outside \
             its allowed ones (`errors` names the path). `Content-Type` was sent more than once \
             (`header.Content-Type`).",
        );
    }
    if authenticated {
        bad_request.push("`Authorization` was sent more than once (`header.Authorization`).");
    }
    if !bad_request.is_empty() {
        add(op, 400, &bad_request.join(" "));
    }
    if authenticated {
        add(op, 401, "`Authorization` is missing, not `Bearer <token>`, or the token is unknown or revoked.");
    }
    if schemes.iter().any(|s| s == "client_token") {
        add(
            op,
            403,
            "An `ops`, `operator` or `driver` token: they cannot call the client API; a publishable key (`pk_…`): it reaches `GET /slots` only.",
        );
    }
    if schemes.iter().any(|s| s == "ops_token") {
        add(
            op,
            403,
            "A `test`, `live`, `operator` or `driver` token or a publishable key: the operations API takes ops tokens only.",
        );
    }
    if schemes.iter().any(|s| s == "operator_token") {
        add(
            op,
            403,
            "A client token (`test`, `live`, `ops`, a publishable key) or a `driver` token: this takes operator tokens only.",
        );
    }
    if schemes.iter().any(|s| s == "driver_token") {
        add(
            op,
            403,
            "A client token (`test`, `live`, `ops`) or an `operator` token: the driver API takes driver tokens only.",
        );
    }
    if json_body(op) {
        required(op);
    }
    if body {
        add(op, 408, "The body did not arrive in time.");
        add(op, 413, "The body is larger than the limit (1 MiB by default).");
        add(op, 415, "The body is not sent as JSON (`Content-Type`), or is compressed (`Content-Encoding`).");
    }
    let rate_limited = schemes.iter().any(|s| RATE_LIMITED.contains(&s.as_str()));
    if rate_limited {
        add(op, 429, "Over this token's rate limit; retry after `Retry-After` seconds.");
    }
    add(op, 500, "A bug; nothing internal is shown, the error is logged with the request id.");
    add(
        op,
        503,
        "The service is starting or draining, the database is busy or unreachable, or the request took too long. Safe to retry.",
    );
    for (status, response) in &mut op.responses.responses {
        if let RefOr::T(response) = response {
            decorate(status, response, rate_limited);
        }
    }
}

/// Whether the operation reads a JSON body (through `JsonBody`).
fn json_body(op: &Operation) -> bool {
    op.request_body.as_ref().is_some_and(|b| b.content.contains_key("application/json"))
}

/// What a JSON body's read answers to a required field left out: the 422 at its path.
const REQUIRED: &str = "A required field left out, at its path (\"This field is required.\" or the field's own words).";

/// Adds [`REQUIRED`] to the operation's 422, or the 422 with it.
fn required(op: &mut Operation) {
    match op.responses.responses.get_mut("422") {
        Some(RefOr::T(response)) => {
            if !response.description.is_empty() {
                response.description.push(' ');
            }
            response.description.push_str(REQUIRED);
        }
        Some(RefOr::Ref(_)) => {}
        None => add(op, 422, REQUIRED),
    }
}

/// An error answer in the error envelope, unless the operation already documents `status`.
fn add(op: &mut Operation, status: u16, description: &str) {
    let key = status.to_string();
    if op.responses.responses.contains_key(&key) {
        return;
    }
    let content = ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorEnvelope"))).build();
    let response = ResponseBuilder::new().description(description).content("application/json", content).build();
    op.responses.responses.insert(key, RefOr::T(response));
}

fn string_header(description: &str) -> Header {
    let mut h = Header::new(ObjectBuilder::new().schema_type(Type::String));
    h.description = Some(description.to_string());
    h
}

/// The headers an answer of this status carries (`rate_limited`: the operation counts against
/// a token's bucket, so every answer after the check tells what is left).
fn decorate(status: &str, response: &mut Response, rate_limited: bool) {
    let mut headers = vec![("X-Request-Id", "The request's id: the one sent, else 24 hex characters. Logs carry it.")];
    if rate_limited && status.starts_with('2') {
        headers.extend([
            ("RateLimit-Policy", "The token's bucket for this operation's class (IETF draft `RateLimit` fields): `\"<class>\";q=<burst>;w=<seconds to refill>`."),
            ("RateLimit", "What remains of it after this request: `\"<class>\";r=<remaining>;t=<seconds until full>`."),
        ]);
    }
    match status {
        "401" => headers.push(("WWW-Authenticate", "`Bearer realm=\"dropslot\"`.")),
        "429" => headers.extend([
            ("Retry-After", "Seconds until a request will be accepted."),
            ("RateLimit-Policy", "The bucket's policy (IETF draft `RateLimit` fields)."),
            ("RateLimit", "The bucket's current state (IETF draft `RateLimit` fields)."),
        ]),
        "503" => headers.push(("Retry-After", "`1`: retry shortly.")),
        _ => {}
    }
    for (name, description) in headers {
        response.headers.entry(name.to_string()).or_insert_with(|| string_header(description));
    }
}
