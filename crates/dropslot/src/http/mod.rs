//! The HTTP edge: the router, the middleware every response passes through (request ids,
//! panic guard, body limit, tracing) and the success envelope.

mod extract;

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

pub use extract::{JsonBody, PathParam, parse};

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
        let s = crate::ids::hex(&crate::ids::random_bytes::<12>());
        HeaderValue::from_str(&s).ok().map(RequestId::new)
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

/// Ready when the database answers and the server is not draining.
async fn readyz(State(app): State<App>) -> Response {
    if !app.is_ready() {
        return Error::Unavailable("draining").into_response();
    }
    match tokio::time::timeout(Duration::from_secs(2), app.store.ping()).await {
        Ok(Ok(())) => envelope(200, "ready", &serde_json::json!({})),
        _ => Error::Unavailable("database unreachable").into_response(),
    }
}
