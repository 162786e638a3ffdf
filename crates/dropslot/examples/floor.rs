//! The "floor" a real endpoint is compared with: a bare axum server (same axum version and
//! features as the crate, tokio multi-thread runtime, no middleware, no database) that, for
//! any `POST`, reads the body, parses it into `serde_json::Value` and answers a fixed JSON
//! document of the same byte size as the real `POST /requests/preview` response.
//!
//! ```text
//! cargo run --release -p dropslot --example floor -- 127.0.0.1:8099
//! FLOOR_LISTEN=127.0.0.1:8099 cargo run --release -p dropslot --example floor
//! ```
//!
//! Response size: `PREVIEW_RESPONSE_BYTES` below is the length of a real preview response,
//! captured once with
//!
//! ```text
//! DROPSLOT_NOW=2026-11-23T12:00:00Z DROPSLOT_BASE_URL=http://127.0.0.1:8080 \
//!   dropslot serve --database sqlite:///tmp/x.db --listen 127.0.0.1:8080
//! curl -s -o preview.json -w '%{size_download}\n' http://127.0.0.1:8080/scheduled-service/api/v1/requests/preview \
//!   -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d @body.json
//! ```
//!
//! with the 263-byte, 1-drop-off / 2-parcel body that `scripts/load.sh` posts. `scripts/load.sh`
//! does exactly this on every run and passes the measured size in `FLOOR_RESPONSE_BYTES`, which
//! overrides the constant, so the floor follows the real response if it changes. The response
//! is generated: a success envelope whose `object.padding` string is filled with `x` up to that
//! length (any length from 87 bytes up).

use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

/// Bytes of the real preview response to the load-test body, measured with
/// `DROPSLOT_NOW=2026-11-23T12:00:00Z`, `DROPSLOT_BASE_URL=http://127.0.0.1:8080` and a fresh database
/// (`content-length: 2053`; 3 bytes less once the pick-up is a saved address).
const PREVIEW_RESPONSE_BYTES: usize = 2053;

/// A valid JSON document of exactly `len` bytes (at least the envelope's own length).
fn fixed_response(len: usize) -> Bytes {
    let head = r#"{"status":"success","code":200,"message":"Preview calculated.","object":{"padding":""#;
    let tail = r#""}}"#;
    let pad = len.saturating_sub(head.len() + tail.len());
    let mut s = String::with_capacity(head.len() + pad + tail.len());
    s.push_str(head);
    s.extend(std::iter::repeat_n('x', pad));
    s.push_str(tail);
    debug_assert!(serde_json::from_str::<serde_json::Value>(&s).is_ok());
    Bytes::from(s)
}

fn main() {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("FLOOR_LISTEN").ok())
        .unwrap_or_else(|| "127.0.0.1:8099".into())
        .parse()
        .expect("listen address: ADDR:PORT");
    let len = std::env::var("FLOOR_RESPONSE_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(PREVIEW_RESPONSE_BYTES);
    let body = fixed_response(len);

    let handler = move |bytes: Bytes| {
        let body = body.clone();
        async move {
            // The same work the real extractor does first: parse the whole body.
            if serde_json::from_slice::<serde_json::Value>(&bytes).is_err() {
                return StatusCode::BAD_REQUEST.into_response();
            }
            let mut res = Response::new(axum::body::Body::from(body));
            res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            // The real service adds a 24-character request id to every response.
            res.headers_mut().insert("x-request-id", HeaderValue::from_static("000000000000000000000000"));
            res
        }
    };
    let app = Router::new().route("/", post(handler.clone())).route("/{*path}", post(handler));

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        println!("floor listening on http://{} (response {} bytes)", listener.local_addr().expect("local addr"), len);
        axum::serve(listener, app).await.expect("serve");
    });
}
