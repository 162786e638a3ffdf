//! The webhook receiver of `scripts/webhook-bench.sh` (issue 33): one process listening on N
//! loopback ports (one "endpoint" each, so the sender sees N hosts with N connection pools),
//! answering every `POST` with `200 {}` once its body is read, and noting for each the port's
//! index, the `webhook-id` header and the receipt time (Unix ms, fractional).
//!
//! ```text
//! cargo run --release -p dropslot --example hook_sink -- 4
//! ```
//!
//! It prints one line per port, `sink listening on http://127.0.0.1:PORT`, then serves until
//! killed. On every port, `GET /count` answers how many POSTs arrived in all; `GET
//! /wait?count=N&timeout_ms=T` answers the same once N have arrived or T ms have passed (the
//! bench waits on it rather than polling, which took a tenth of the machine's CPU from the
//! system measured); and `GET /dump` answers every receipt noted so far as lines `INDEX
//! WEBHOOK_ID RECEIPT_MS` (the bench joins them with the queue's rows: duplicates per
//! endpoint, commit-to-receipt latency).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

#[derive(Default)]
struct Receipts {
    count: AtomicU64,
    seen: Mutex<Vec<(usize, String, f64)>>,
    /// The count a `/wait` waits for (0: none), and its wake-up once reached.
    want: AtomicU64,
    reached: tokio::sync::Notify,
}

#[derive(serde::Deserialize)]
struct Wait {
    count: u64,
    timeout_ms: u64,
}

fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

fn main() {
    let ports: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(4);
    let receipts = Arc::new(Receipts::default());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    runtime.block_on(async move {
        let mut servers = Vec::new();
        for index in 0..ports {
            let hook = move |State(r): State<Arc<Receipts>>, headers: HeaderMap, _body: Bytes| async move {
                let at = now_ms();
                let id = headers.get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or("-").to_string();
                r.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((index, id, at));
                let now = r.count.fetch_add(1, Ordering::SeqCst) + 1;
                let want = r.want.load(Ordering::SeqCst);
                if want > 0 && now >= want {
                    r.reached.notify_waiters();
                }
                let mut res = Response::new(axum::body::Body::from("{}"));
                res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                res
            };
            let count = |State(r): State<Arc<Receipts>>| async move { r.count.load(Ordering::Relaxed).to_string() };
            let wait = |State(r): State<Arc<Receipts>>, Query(w): Query<Wait>| async move {
                let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(w.timeout_ms);
                r.want.store(w.count, Ordering::SeqCst);
                loop {
                    let reached = r.reached.notified();
                    tokio::pin!(reached);
                    reached.as_mut().enable();
                    let now = r.count.load(Ordering::SeqCst);
                    if now >= w.count || tokio::time::timeout_at(deadline, reached).await.is_err() {
                        return r.count.load(Ordering::SeqCst).to_string();
                    }
                }
            };
            let dump = |State(r): State<Arc<Receipts>>| async move {
                let seen = r.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let mut text = String::with_capacity(seen.len() * 48);
                for (i, id, at) in seen.iter() {
                    let _ = writeln!(text, "{i} {id} {at:.3}");
                }
                text.into_response()
            };
            let app = Router::new()
                .route("/count", get(count))
                .route("/wait", get(wait))
                .route("/dump", get(dump))
                .route("/{*path}", post(hook))
                .with_state(receipts.clone());
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            println!("sink listening on http://{}", listener.local_addr().expect("local addr"));
            servers.push(tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") }));
        }
        for s in servers {
            let _ = s.await;
        }
    });
}
