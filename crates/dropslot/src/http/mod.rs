//! The HTTP edge: the router, the middleware every response passes through (request ids,
//! panic guard, body limit, tracing) and the success envelope.

mod extract;
pub mod json;
pub mod page;
pub mod server;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::extract::FromRef;
use axum::http::HeaderName;
use axum::response::{IntoResponse, Response};

pub use extract::{BodyLimits, FormBody, JsonBody, PathParam, query_params, read_body};

use crate::error::Error;
use crate::metrics::HttpMetrics;

/// A path under the client API's prefix, joined at compile time: `api_path!("/orders")`. The
/// domains' API routes are declared with it, so the router matches them whole; nesting them
/// under the prefix cost a stripped copy of every request's URI (issue 13's profile).
/// Reached by its module path, `crate::http::api_path!`, never from the crate root.
macro_rules! api_path {
    ($path:literal) => {
        concat!("/scheduled-service/api/v1", $path)
    };
}
pub(crate) use api_path;

pub const API: &str = api_path!("");
static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// A header that must appear at most once was sent several times: 400 at `header.<Name>`.
fn repeated_header(name: &str) -> Error {
    Error::BadRequest {
        message: format!("The {name} header was sent more than once."),
        errors: crate::error::FieldErrors::single(format!("header.{name}"), "Send this header once."),
    }
}

/// The one value of a header that may appear at most once (`shown` is its name as the error
/// names it). Sent twice it is ambiguous, and refused, even with equal values: the first one
/// never silently wins.
pub fn single<'a>(
    headers: &'a axum::http::HeaderMap,
    name: &HeaderName,
    shown: &str,
) -> Result<Option<&'a axum::http::HeaderValue>, Error> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(repeated_header(shown));
    }
    Ok(first)
}

/// The `RateLimit-Policy` and `RateLimit` values a request's rate-limit check left: the edge
/// puts them on the request's response, whatever it is (a 429 carries its own).
#[derive(Clone, Default)]
pub struct RateLimitHeaders(std::sync::Arc<std::sync::OnceLock<(axum::http::HeaderValue, axum::http::HeaderValue)>>);

impl RateLimitHeaders {
    pub fn set(&self, policy: axum::http::HeaderValue, limit: axum::http::HeaderValue) {
        let _ = self.0.set((policy, limit));
    }
}

static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

/// Counts every answered request and its latency under its route template (`unmatched`
/// for a path no route has: a scanner's paths must not each become a series).
async fn count_request(
    axum::extract::State(metrics): axum::extract::State<HttpMetrics>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let HttpMetrics(Some(metrics)) = metrics else {
        return next.run(req).await;
    };
    let start = std::time::Instant::now();
    let method = crate::metrics::method_label(req.method());
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unmatched", |p| crate::metrics::route_label(p.as_str()));
    let res = next.run(req).await;
    metrics.request(method, route, res.status().as_u16(), start.elapsed());
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
/// (which need the matched route). `http` knows no domain and no application: the
/// composition root hands the routes and their state in, and wraps the result with
/// [`service`]. The state only has to give the request metrics ([`HttpMetrics`]).
pub fn router<S>(state: S, api: Router<S>, root: Router<S>) -> Router
where
    S: Clone + Send + Sync + 'static,
    HttpMetrics: FromRef<S>,
{
    Router::new()
        .merge(api)
        .merge(root)
        .fallback(|| async { Error::NotFound })
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed })
        .layer(axum::middleware::from_fn_with_state(HttpMetrics::from_ref(&state), count_request))
        .with_state(state)
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
async fn edge<S>(routed: S, mut req: axum::extract::Request) -> Response
where
    S: tower::Service<axum::extract::Request, Response = Response, Error = std::convert::Infallible>,
{
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::task::Poll;
    use tower::ServiceExt;
    use tracing::Instrument;

    // Reference-counted copies; the rate-limit slot is the one allocation of a request.
    let id = req.headers().get(&REQUEST_ID).cloned();
    let rate = RateLimitHeaders::default();
    req.extensions_mut().insert(rate.clone());
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
    if let Some((policy, limit)) = rate.0.get() {
        let headers = res.headers_mut();
        if !headers.contains_key(&RATELIMIT) {
            headers.insert(&RATELIMIT_POLICY, policy.clone());
            headers.insert(&RATELIMIT, limit.clone());
        }
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
