//! The HTTP edge: the router, the middleware every response passes through (request ids,
//! panic guard, body limit, tracing) and the success envelope.

mod extract;
pub mod json;
pub mod page;
pub mod server;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub use extract::{JsonBody, PathParam};

use crate::app::App;
use crate::error::Error;

/// A path under the client API's prefix, joined at compile time: `api_path!("/orders")`. The
/// domains' API routes are declared with it, so the router matches them whole; nesting them
/// under the prefix cost a stripped copy of every request's URI (issue 13's profile).
#[macro_export]
macro_rules! api_path {
    ($path:literal) => {
        concat!("/scheduled-service/api/v1", $path)
    };
}

pub const API: &str = api_path!("");
static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The interface's envelope, the one shape of every JSON response: `{"status", "code",
/// "message", "object"}`, and on an error also `"errors"` (before `"object"`). `T` is the
/// type of `object`, so every response is typed end to end (and so is its OpenAPI schema).
#[derive(Serialize, Debug, utoipa::ToSchema)]
#[schema(
    description = "The envelope of every JSON answer: `status` (`success`), `code` (the HTTP status), `message` and the typed `object`."
)]
pub struct Envelope<'a, T: Serialize> {
    /// `success` (`error` only on the error envelope).
    #[schema(example = "success")]
    pub status: &'static str,
    /// Equals the HTTP status.
    pub code: u16,
    /// Short human text; do not parse it.
    pub message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub errors: Option<&'a crate::error::FieldErrors>,
    pub object: &'a T,
}

/// The error envelope of CONTRACT §2, as the OpenAPI document names it. Never built: every
/// error body is written by [`error_json`] (a test holds the two to the same keys).
#[derive(utoipa::ToSchema)]
#[schema(
    description = "The error envelope (CONTRACT §2): the HTTP status is `code`; `errors` maps a field path (`drop_offs.0.address.text`, `header.Idempotency-Key`, `path.custom_code`, `query.limit`, `body`) to messages."
)]
#[allow(dead_code)] // a schema only
pub struct ErrorEnvelope {
    /// Always `error`.
    #[schema(pattern = "^error$", example = "error")]
    status: String,
    /// Equals the HTTP status.
    code: u16,
    /// Human text; do not parse it.
    message: String,
    /// Field path → messages; `{}` when no field is to blame.
    errors: crate::error::FieldErrors,
    object: crate::error::EmptyObject,
}

impl<'a, T: Serialize> Envelope<'a, T> {
    pub fn success(code: u16, message: &'a str, object: &'a T) -> Self {
        Envelope { status: "success", code, message, errors: None, object }
    }

    /// The JSON text; a value that cannot be serialised is an error, never an empty body.
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }
}

impl<T: Serialize> IntoResponse for Envelope<'_, T> {
    fn into_response(self) -> Response {
        // The buffer starts at 4 KiB: from serde_json's 128 bytes it grew five times for a
        // preview's 2 KB, a copy each time.
        let mut out = Vec::with_capacity(4096);
        match serde_json::to_writer(&mut out, &self) {
            Ok(()) => json_response(self.code, out),
            Err(e) => Error::Internal(format!("serialising a response: {e}")).into_response(),
        }
    }
}

/// The error envelope's JSON text (`object` is `{}`). Serialising strings and a string map
/// cannot fail; if it ever did, the answer is still a whole envelope, never an empty body.
pub fn error_json(code: u16, message: &str, errors: &crate::error::FieldErrors) -> String {
    let object = crate::error::EmptyObject {};
    Envelope { status: "error", code, message, errors: Some(errors), object: &object }.to_json().unwrap_or_else(|_| {
        r#"{"status":"error","code":500,"message":"Internal server error.","errors":{},"object":{}}"#.to_string()
    })
}

/// A success envelope with HTTP status = `code`.
pub fn envelope<T: Serialize>(code: u16, message: &str, object: &T) -> Response {
    Envelope::success(code, message, object).into_response()
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

/// Counts every answered request and its latency under its route template (`unmatched`
/// for a path no route has: a scanner's paths must not each become a series).
async fn count_request(
    axum::extract::State(app): axum::extract::State<App>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if !app.settings.http_metrics {
        return next.run(req).await;
    }
    let start = std::time::Instant::now();
    let method = crate::metrics::method_label(req.method());
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unmatched", |p| crate::metrics::route_label(p.as_str()));
    let res = next.run(req).await;
    app.metrics.request(method, route, res.status().as_u16(), start.elapsed());
    res
}

/// What a listener serves: the router inside the edge every request and response passes
/// through ([`service`]). Cloning it is a reference count.
#[derive(Clone)]
pub struct HttpService(std::sync::Arc<dyn Fn(axum::extract::Request) -> EdgeFuture + Send + Sync>);

type EdgeFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>>;

impl HttpService {
    /// The response to `req` (never an error: a failure is an envelope).
    pub fn call(&self, req: axum::extract::Request) -> EdgeFuture {
        (self.0)(req)
    }
}

/// The whole router: the domains' API routes (declared under [`API`] with [`api_path!`]), their root routes (labels,
/// icons, health) beside them, the 404/405 fallbacks, and the per-route request metrics
/// (which need the matched route). `http` knows no domain: the composition root hands the
/// routes in, and wraps the result with [`service`].
pub fn router(app: App, api: Router<App>, root: Router<App>) -> Router {
    Router::new()
        .merge(api)
        .merge(root)
        .fallback(|| async { Error::NotFound })
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed })
        .layer(axum::middleware::from_fn_with_state(app.clone(), count_request))
        .with_state(app)
}

/// `routed` (the router, with whatever the composition root wrapped it in) inside the edge
/// every request and response passes through, written out as one function ([`edge`]) rather
/// than a stack of tower layers: each layer cost a clone, a box or a clock read per request
/// (issue 13's profiles). The body limit is axum's own layer: it only marks the request.
pub fn service<S>(body_limit: usize, routed: S) -> HttpService
where
    S: tower::Service<axum::extract::Request, Response = Response, Error = std::convert::Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    use tower::Layer;
    let routed = DefaultBodyLimit::max(body_limit).layer(routed);
    HttpService(std::sync::Arc::new(move |req| Box::pin(edge(routed.clone(), req))))
}

/// One request through the edge:
/// - the request's id (the connection loop gave it one, `server::request_id`) goes onto the
///   response;
/// - a debug-level span (`request{method path request_id}`) around everything the request
///   logs, with a line when it starts and one when it ends (status, latency); at `info` the
///   span is off and none of this is computed;
/// - a panic in a handler is a 500 envelope, never a dropped connection;
/// - a server error is one `ERROR request failed` line with what the client can quote (its
///   `X-Request-Id`), the method, the path and the error's detail (`ServerError`), which the
///   client never sees. The span is at debug level, so at the default level this line is
///   what joins an error to its request.
async fn edge<S>(routed: S, req: axum::extract::Request) -> Response
where
    S: tower::Service<axum::extract::Request, Response = Response, Error = std::convert::Infallible>,
{
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::task::Poll;
    use tower::ServiceExt;
    use tracing::Instrument;

    // Reference-counted copies: nothing is allocated for a request that succeeds.
    let id = req.headers().get(&REQUEST_ID).cloned();
    let (method, uri) = (req.method().clone(), req.uri().clone());
    let id_text = || id.as_ref().and_then(|v| v.to_str().ok()).unwrap_or("");
    let span = tracing::debug_span!("request", method = %method, path = %uri.path(), request_id = %id_text());
    let started = (!span.is_disabled()).then(std::time::Instant::now);
    if started.is_some() {
        tracing::debug!(parent: &span, "started processing request");
    }
    // The router is called inside the first poll, so a panic in `call` is caught too.
    let mut routing = std::pin::pin!(routed.oneshot(req));
    let caught = std::future::poll_fn(|cx| match catch_unwind(AssertUnwindSafe(|| routing.as_mut().poll(cx))) {
        Ok(Poll::Ready(Ok(res))) => Poll::Ready(Some(res)),
        Ok(Poll::Ready(Err(never))) => match never {},
        Ok(Poll::Pending) => Poll::Pending,
        Err(_panic) => Poll::Ready(None),
    })
    .instrument(span.clone())
    .await;
    let mut res = caught.unwrap_or_else(|| Error::Internal("handler panicked".into()).into_response());
    if let Some(id) = &id {
        res.headers_mut().entry(&REQUEST_ID).or_insert_with(|| id.clone());
    }
    if let Some(crate::error::ServerError(detail)) = res.extensions().get() {
        tracing::error!(request_id = %id_text(), method = %method, path = %uri.path(), status = res.status().as_u16(),
            error = %detail, "request failed");
    }
    if let Some(started) = started {
        tracing::debug!(parent: &span, status = res.status().as_u16(), latency_ms = started.elapsed().as_secs_f64() * 1e3,
            "finished processing request");
    }
    res
}

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;

    use super::*;

    fn keys(json: &str) -> Vec<String> {
        let value: serde_json::Value = serde_json::from_str(json).unwrap();
        value.as_object().unwrap().keys().cloned().collect()
    }

    /// The documented error envelope is what `error_json` writes: the same keys, all required.
    #[test]
    fn error_json_has_the_documented_shape() {
        let schema = serde_json::to_value(ErrorEnvelope::schema()).unwrap();
        let mut documented: Vec<String> = schema["properties"].as_object().unwrap().keys().cloned().collect();
        let mut required: Vec<String> = serde_json::from_value(schema["required"].clone()).unwrap();
        let errors = crate::error::FieldErrors::single("drop_offs", "m");
        let mut written = keys(&error_json(422, "The given data was invalid.", &errors));
        for list in [&mut documented, &mut required, &mut written] {
            list.sort();
        }
        assert_eq!(written, documented);
        assert_eq!(written, required);
    }
}
