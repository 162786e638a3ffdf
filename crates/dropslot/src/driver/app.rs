//! The driver app at `/driver` (CONTRACT §13): one page, its script and stylesheet, a web
//! manifest and a service worker, served from the binary. The page is a client of the driver
//! API; it holds no server state of its own, so these are static files.
//!
//! The service worker's cache is named after a digest of the files it keeps, so a new build
//! replaces the phone's copy on its next visit and an unchanged one keeps it.

use std::sync::LazyLock;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::app::App;

const INDEX: &str = include_str!("../../templates/driver/index.html");
const SCRIPT: &str = include_str!("../../templates/driver/app.js");
const STYLE: &str = include_str!("../../templates/driver/app.css");
const WORKER: &str = include_str!("../../templates/driver/sw.js");
const MANIFEST: &str = include_str!("../../templates/driver/manifest.webmanifest");
const ICON: &str = include_str!("../../templates/driver/icon.svg");

/// The page's policy: its own script, style and API only; photos and signatures as `blob:`
/// previews; the camera's stream in a `<video>`.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; \
     media-src 'self' blob: mediastream:; connect-src 'self'; manifest-src 'self'; worker-src 'self'; \
     form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

/// The service worker with its cache's name: a digest of everything it keeps.
static WORKER_SOURCE: LazyLock<String> = LazyLock::new(|| {
    let mut h = Sha256::new();
    for part in [INDEX, SCRIPT, STYLE, MANIFEST, ICON] {
        h.update(part.as_bytes());
    }
    let digest = h.finalize();
    let version = dropslot_core::ids::hex(&digest[..8]);
    WORKER.replace("__VERSION__", &version)
});

pub fn routes() -> axum::Router<App> {
    use axum::routing::get;
    axum::Router::new()
        .route("/driver", get(|| async { file(INDEX, "text/html; charset=utf-8", "no-cache") }))
        .route("/driver/app.js", get(|| async { file(SCRIPT, "text/javascript; charset=utf-8", "no-cache") }))
        .route("/driver/app.css", get(|| async { file(STYLE, "text/css; charset=utf-8", "no-cache") }))
        .route("/driver/icon.svg", get(|| async { file(ICON, "image/svg+xml", "public, max-age=86400") }))
        .route(
            "/driver/manifest.webmanifest",
            get(|| async { file(MANIFEST, "application/manifest+json", "no-cache") }),
        )
        .route("/driver/sw.js", get(worker))
}

fn file(body: &'static str, content_type: &'static str, cache: &'static str) -> Response {
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // The sign-in link's token is in the fragment, which no Referer carries; the page
    // leaks nothing else either.
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    res
}

/// The worker may control `/driver` itself (its own path is `/driver/sw.js`, whose default
/// scope would be `/driver/` only).
async fn worker() -> Response {
    let mut res = file("", "text/javascript; charset=utf-8", "no-cache");
    *res.body_mut() = axum::body::Body::from(WORKER_SOURCE.as_str());
    res.headers_mut().insert("service-worker-allowed", HeaderValue::from_static("/driver"));
    res
}
