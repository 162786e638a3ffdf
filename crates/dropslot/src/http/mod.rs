//! The HTTP edge: the router, the middleware every response passes through (request ids,
//! panic guard, body limit, tracing) and the success envelope.

mod extract;
pub mod json;
pub mod server;

use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Serialize;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

pub use extract::{JsonBody, PathParam};

use crate::app::App;
use crate::error::Error;
use crate::{addresses, auth, labels, orders};

pub const API: &str = "/scheduled-service/api/v1";
static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

#[derive(Serialize)]
struct Envelope<'a, T: Serialize> {
    status: &'static str,
    code: u16,
    message: &'a str,
    object: &'a T,
}

/// The success envelope with HTTP status = `code`.
pub fn envelope<T: Serialize>(code: u16, message: &str, object: &T) -> Response {
    let body = serde_json::to_vec(&Envelope { status: "success", code, message, object })
        .map_err(|e| Error::Internal(e.to_string()));
    match body {
        Ok(bytes) => json_response(code, bytes),
        Err(e) => e.into_response(),
    }
}

/// A header that must appear at most once was sent several times: 400 at `header.<Name>`.
pub fn repeated_header(name: &str) -> Error {
    Error::BadRequest {
        message: format!("The {name} header was sent more than once."),
        errors: crate::error::FieldErrors::single(format!("header.{name}"), "Send this header once."),
    }
}

/// Raw JSON bytes with a status (used to replay stored responses byte for byte).
pub fn json_response(code: u16, body: impl Into<axum::body::Body>) -> Response {
    let mut res = Response::new(body.into());
    *res.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}

/// Request ids: 12 random bytes as 24 hex characters, unless the client sent one.
#[derive(Clone, Copy)]
struct MakeId;

impl MakeRequestId for MakeId {
    fn make_request_id<B>(&mut self, _: &axum::http::Request<B>) -> Option<RequestId> {
        Some(RequestId::new(server::new_request_id()))
    }
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    Error::Internal("handler panicked".into()).into_response()
}

pub fn router(app: App) -> Router {
    let api = Router::new()
        .route("/requests/preview", post(orders::preview::handle))
        .route("/requests/sync", post(orders::create::handle))
        .route("/parcels/find/by-custom-code/{custom_code}", delete(orders::delete::handle))
        .route("/saved-addresses", get(addresses::list))
        .route("/saved-addresses/{id}", get(addresses::show).delete(addresses::remove))
        .route("/admin/clients", post(auth::admin::create_client))
        .route("/admin/clients/{id}/settings", axum::routing::put(auth::admin::put_settings))
        .route("/admin/clients/{id}/tokens", post(auth::admin::create_token).get(auth::admin::list_tokens))
        .route("/admin/tokens/{prefix}", delete(auth::admin::revoke_token));

    let body_limit = app.settings.body_limit;
    Router::new()
        .nest(API, api)
        .route("/labels/{kind}/{token}/{file}", get(labels::serve))
        .route("/static/icons/{file}", get(labels::icon))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(|| async { Error::NotFound })
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed })
        .with_state(app)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &axum::http::Request<_>| {
            let id = req.headers().get(&REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("");
            tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
        }))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID.clone()))
        .layer(SetRequestIdLayer::new(REQUEST_ID.clone(), MakeId))
}

async fn healthz() -> Response {
    envelope(200, "ok", &serde_json::json!({}))
}

/// Ready when the database takes a write within 2 s and the server is not draining. The
/// probe is a real committed write (`Store::ping`), so a read-only or full database, or one
/// locked by another process, is not ready; it is ready again as soon as writes succeed.
async fn readyz(State(app): State<App>) -> Response {
    if app.is_stopping() {
        return Error::Unavailable("draining").into_response();
    }
    match tokio::time::timeout(Duration::from_secs(2), app.store.ping()).await {
        Ok(Ok(())) => envelope(200, "ready", &serde_json::json!({})),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "not ready: the database does not take writes");
            Error::Unavailable("database not writable").into_response()
        }
        Err(_) => Error::Unavailable("database did not answer in time").into_response(),
    }
}
