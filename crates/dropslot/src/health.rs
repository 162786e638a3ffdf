//! Liveness and readiness (`/healthz`, `/readyz`) for load balancers and orchestrators, and
//! the Prometheus scrape (`/metrics`).

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::app::App;
use crate::error::{EmptyObject, Envelope, Error, ErrorEnvelope, envelope};

/// `/healthz`, `/readyz`, and `/metrics` unless it has a listener of its own
/// (`server.metrics_listen`).
pub fn routes(with_metrics: bool) -> Router<App> {
    let health = Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz));
    if with_metrics { health.merge(metrics_routes()) } else { health }
}

/// `/metrics` alone: for the separate metrics listener.
pub fn metrics_routes() -> Router<App> {
    Router::new().route("/metrics", get(metrics))
}

/// The Prometheus text exposition (unauthenticated, like `/healthz`), in the format the
/// scraper's `Accept` prefers.
#[utoipa::path(get, path = "/metrics", tag = "Service", operation_id = "metrics",
    summary = "Prometheus metrics",
    description = "The OpenMetrics text format, or the classic `text/plain; version=0.0.4` when `Accept` prefers it. Absent here when `--metrics-listen` gives it a listener of its own.",
    responses((status = 200, description = "The metrics.", content_type = "application/openmetrics-text", body = String)))]
async fn metrics(State(app): State<App>, headers: axum::http::HeaderMap) -> Response {
    let accept = headers.get(axum::http::header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = crate::metrics::Exposition::negotiate(accept);
    crate::reports::refresh_gauges(&app).await;
    ([(axum::http::header::CONTENT_TYPE, format.content_type())], app.metrics.render_as(format)).into_response()
}

#[utoipa::path(get, path = "/healthz", tag = "Service", operation_id = "healthz",
    summary = "Liveness", description = "200 while the process serves, also while it is starting.",
    responses((status = 200, description = "Alive; `message` is `ok`.", body = Envelope<EmptyObject>)))]
async fn healthz() -> Response {
    envelope(200, "ok", &EmptyObject {})
}

/// Ready when the database takes a write within 2 s and the server is not draining. The
/// probe is a real committed write (`Store::ping`), so a read-only or full database, or one
/// locked by another process, is not ready; it is ready again as soon as writes succeed.
#[utoipa::path(get, path = "/readyz", tag = "Service", operation_id = "readyz",
    summary = "Readiness", description = "Ready when the database takes a write within 2 s and the server is not draining.",
    responses(
        (status = 200, description = "Ready; `message` is `ready`.", body = Envelope<EmptyObject>),
        (status = 503, description = "Starting, draining, or the database does not take a write.", body = ErrorEnvelope),
    ))]
async fn readyz(State(app): State<App>) -> Response {
    if app.is_stopping() {
        return Error::Unavailable("draining").into_response();
    }
    match tokio::time::timeout(Duration::from_secs(2), app.store.ping()).await {
        Ok(Ok(())) => envelope(200, "ready", &EmptyObject {}),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "not ready: the database does not take writes");
            Error::Unavailable("database not writable").into_response()
        }
        Err(_) => Error::Unavailable("database did not answer in time").into_response(),
    }
}
