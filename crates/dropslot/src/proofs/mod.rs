//! Proof-of-delivery files (CONTRACT §13): the driver app uploads a signature or photo
//! (`POST /driver/proofs`, in `driver::proofs`), names its URL in the delivery's `proof_of_delivery`, and the move
//! attaches it to the shipment; its merchant then reads it (`GET /proofs/{token}`, or the
//! dashboard's `/dashboard/proofs/{token}`). The images live in the database (see
//! docs/architecture.md §9 for the limits and why).

pub mod content;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::app::App;
use crate::auth::Caller;
use crate::error::{Error, ErrorEnvelope, FieldErrors, Result};
use crate::http::PathParam;
use dropslot_core::shipments::{Move, Proof, ProofKind};
use dropslot_store::{Mode, ProofFile, Scope};

/// The largest proof file, in bytes (CONTRACT §13: 5 MB).
pub const MAX_BYTES: usize = 5 * 1024 * 1024;
/// The most proof bytes one shipment's delivery may attach.
pub const SHIPMENT_MAX_BYTES: i64 = 10 * 1024 * 1024;
/// At most this many proofs of each kind in one delivery.
const MAX_SIGNATURES: usize = 1;
const MAX_PHOTOS: usize = 3;
/// A driver holds at most this many proofs not yet attached to a delivery.
pub const UNATTACHED_PER_DRIVER: i64 = 50;
/// An unattached proof is deleted this long after its upload (by the hourly upkeep).
pub const UNATTACHED_KEPT_MS: i64 = 2 * 86_400_000;
/// How long a browser may keep a proof it read (its bytes never change).
const CACHE_CONTROL: &str = "private, max-age=86400";
/// The path under the API prefix that serves a proof.
const PREFIX: &str = crate::http::api_path!("/proofs/");

pub fn routes() -> axum::Router<App> {
    use axum::routing::get;
    axum::Router::new().route(crate::http::api_path!("/proofs/{token}"), get(serve))
}

/// A new proof token: 32 random bytes, base64url.
pub fn new_token() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(dropslot_core::ids::random_bytes::<32>())
}

/// `{"url"}`: where the uploaded proof is served.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"url": "https://dropslot.example.com/scheduled-service/api/v1/proofs/3q2-7wXkPz0nB4rT9vLmYc6Hd1sJf8aUeKoQiGpN5Zy"}))]
pub struct ProofUrl {
    /// The value to give as a `signature` or `photo` in the delivery's `proof_of_delivery`.
    pub url: String,
}

/// A proof file's bytes, as the OpenAPI document describes a body or answer of
/// `image/png` or `image/jpeg` (a binary string).
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct ImageFile(#[allow(dead_code)] Vec<u8>);

/// A proof's URL.
pub fn url(base_url: &str, token: &str) -> String {
    format!("{base_url}{PREFIX}{token}")
}

/// Whether `token` has the shape of a proof token (32 random bytes, base64url): anything else
/// names no proof, and is not looked up.
fn well_formed(token: &str) -> bool {
    token.len() == 43 && token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The token of a proof URL of this service, if `value` is one.
pub fn token_of<'a>(base_url: &str, value: &'a str) -> Option<&'a str> {
    let token = value.trim().strip_prefix(base_url)?.strip_prefix(PREFIX)?;
    well_formed(token).then_some(token)
}

/// Whether the caller's client and mode own the proof: attached to one of its live shipments
/// (a driver delivers live shipments only, so a test token never reads a proof).
pub(crate) fn owned_by(file: &ProofFile, scope: Scope) -> bool {
    scope.mode == Mode::Live && file.info.client_id == Some(scope.client)
}

/// The proof a caller in `scope` may read, or a 404 (unknown, unattached, another client's).
pub(crate) async fn readable(app: &App, scope: Scope, token: &str) -> Result<ProofFile> {
    if !well_formed(token) {
        return Err(Error::NotFound);
    }
    let file = app.store.proof_file(token).await?.ok_or(Error::NotFound)?;
    if owned_by(&file, scope) { Ok(file) } else { Err(Error::NotFound) }
}

/// The image with its type, cached privately, never sniffed; `If-None-Match` with its `ETag`
/// (the token's digest: a proof's bytes never change) is a 304.
pub(crate) fn image_response(file: ProofFile, request: &HeaderMap) -> Response {
    let digest = Sha256::digest(file.info.token.as_bytes());
    let etag = format!("\"{}\"", dropslot_core::ids::hex(&digest[..12]));
    let etag = HeaderValue::from_str(&etag).unwrap_or_else(|_| HeaderValue::from_static("\"proof\""));
    let fresh = request.get_all(header::IF_NONE_MATCH).iter().any(|v| {
        v.to_str().is_ok_and(|v| v.split(',').any(|t| t.trim() == "*" || t.trim().as_bytes() == etag.as_bytes()))
    });
    let content_type = HeaderValue::from_str(&file.info.content_type)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (header::CACHE_CONTROL, HeaderValue::from_static(CACHE_CONTROL)),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::ETAG, etag),
    ];
    if fresh { (StatusCode::NOT_MODIFIED, headers).into_response() } else { (headers, file.bytes).into_response() }
}

/// `GET /proofs/{token}`.
#[utoipa::path(get, path = "/proofs/{token}", tag = "Shipments", operation_id = "get_proof",
    summary = "A proof-of-delivery image",
    description = "The signature or photo a driver attached to the delivery of one of the caller's live shipments: the URL in its `proof_of_delivery` (reads and webhooks). Served with its type (`image/png` or `image/jpeg`), `Cache-Control: private`, `X-Content-Type-Options: nosniff` and an `ETag` (`If-None-Match` answers 304). Only the client whose shipment it is reads it, with its live token; anything else is a 404.",
    security(("client_token" = [])),
    params(("token" = String, Path, description = "The last part of the proof's URL.")),
    responses(
        (status = 200, description = "The image.", content(
            (ImageFile = "image/png"),
            (ImageFile = "image/jpeg"),
        ), headers(
            ("ETag" = String, description = "The image's version (it never changes)."),
            ("Cache-Control" = String, description = "`private, max-age=86400`."),
        )),
        (status = 304, description = "Not modified (`If-None-Match` named its ETag)."),
        (status = 401, description = "No valid token.", body = ErrorEnvelope),
        (status = 403, description = "An operations, operator or driver token.", body = ErrorEnvelope),
        (status = 404, description = "No proof of the caller's shipments has this URL.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn serve(
    State(app): State<App>,
    caller: Caller,
    PathParam(token): PathParam<String>,
    headers: HeaderMap,
) -> Result<Response> {
    let file = readable(&app, caller.scope, &token).await?;
    Ok(image_response(file, &headers))
}

/// The proofs a driver's move attaches (their tokens), checked before the move: each
/// `signature` or `photo` is the URL of a proof this driver uploaded, not another shipment's;
/// at most one signature and three photos, together at most [`SHIPMENT_MAX_BYTES`]. The
/// store checks ownership again in the move's transaction (a race with another move).
pub(crate) async fn to_attach(app: &App, driver_id: &str, unique_id: &str, m: &Move) -> Result<Vec<String>> {
    let base = &app.settings.base_url;
    let mut errors = FieldErrors::new();
    let mut tokens: Vec<String> = Vec::new();
    let (mut signatures, mut photos, mut bytes) = (0, 0, 0i64);
    for (i, p) in m.proof.iter().enumerate() {
        let path = format!("proof_of_delivery.{i}.value");
        match p.kind {
            ProofKind::ReceiverName => continue,
            ProofKind::Signature => signatures += 1,
            ProofKind::Photo => photos += 1,
        }
        let Some(token) = token_of(base, &p.value) else {
            errors.add(
                path,
                format!(
                    "A signature or photo is the URL of an image you uploaded (POST /driver/proofs answers it: {}…).",
                    url(base, "")
                ),
            );
            continue;
        };
        if tokens.iter().any(|t| t == token) {
            errors.add(path, "This proof is named twice: give each image once.");
            continue;
        }
        match app.store.proof(token).await? {
            Some(info) if info.driver_id == driver_id => {
                if info.shipment_unique_id.as_deref().is_some_and(|s| s != unique_id) {
                    errors.add(path, "This proof belongs to another delivery: upload the image again for this one.");
                    continue;
                }
                bytes += info.size;
                tokens.push(token.to_string());
            }
            _ => errors.add(path, "No image you uploaded has this URL (or it was deleted, unused, after 2 days)."),
        }
    }
    if signatures > MAX_SIGNATURES || photos > MAX_PHOTOS {
        errors.add(
            "proof_of_delivery",
            format!("A delivery carries at most {MAX_SIGNATURES} signature and {MAX_PHOTOS} photos."),
        );
    }
    if bytes > SHIPMENT_MAX_BYTES {
        errors.add(
            "proof_of_delivery",
            format!(
                "The images of one delivery are at most {} MB together; these are {:.1} MB.",
                SHIPMENT_MAX_BYTES / (1024 * 1024),
                bytes as f64 / (1024.0 * 1024.0)
            ),
        );
    }
    errors.into_result()?;
    Ok(tokens)
}

/// The 422 for a proof the move's transaction found taken (by another move meanwhile).
pub(crate) fn unavailable(base_url: &str, proofs: &[Proof], token: &str) -> Error {
    let i = proofs.iter().position(|p| token_of(base_url, &p.value) == Some(token)).unwrap_or(0);
    Error::invalid(
        format!("proof_of_delivery.{i}.value"),
        "This proof belongs to another delivery: upload the image again for this one.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proof_urls_round_trip_and_nothing_else_is_one() {
        let token = "A".repeat(43);
        let u = url("https://d.example", &token);
        assert_eq!(token_of("https://d.example", &u), Some(token.as_str()));
        assert_eq!(token_of("https://d.example", &format!(" {u} ")), Some(token.as_str()));
        assert_eq!(token_of("https://other.example", &u), None);
        assert_eq!(token_of("https://d.example", "sig/123.png"), None);
        assert_eq!(token_of("https://d.example", &format!("{u}/x")), None);
    }
}
