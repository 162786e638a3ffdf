//! The fan-out's floor (issue 33): a bare hyper client posting the same webhook bodies to the
//! same receivers as the dispatcher, with its work per delivery and nothing else: each body
//! signed (Standard Webhooks, HMAC-SHA256) and posted with the same headers to every URL,
//! `CONCURRENCY` requests in flight at most and `PER_ENDPOINT` per URL (the dispatcher's
//! defaults, 128 and 32), keep-alive connections, `TCP_NODELAY`. No queue, no store.
//!
//! ```text
//! fanout_floor MESSAGES_FILE URL [URL …]
//! ```
//!
//! `MESSAGES_FILE` holds one message a line, `WEBHOOK_ID<TAB>BODY` (the bench exports the run's
//! messages from the database). Prints one line:
//! `FANOUT_FLOOR deliveries=N ok=N secs=S per_s=R cpu_ticks=T` (the process's user+system
//! CPU in clock ticks, from `/proc/self/stat`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use sha2::Sha256;
use tokio::sync::Semaphore;

fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: state is the 3rd field, utime the 14th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let file = args.next().expect("usage: fanout_floor MESSAGES_FILE URL [URL …]");
    let urls: Vec<hyper::Uri> = args.map(|u| u.parse().expect("a URL")).collect();
    assert!(!urls.is_empty(), "usage: fanout_floor MESSAGES_FILE URL [URL …]");
    let text = std::fs::read_to_string(&file).expect("the messages file");
    let messages: Vec<(String, Bytes)> = text
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(id, body)| (id.to_string(), Bytes::from(body.to_string())))
        .collect();
    let concurrency = env("CONCURRENCY", 128);
    let per_endpoint = env("PER_ENDPOINT", 32);
    let key = STANDARD.encode([7u8; 32]);
    let key = Arc::new(STANDARD.decode(key).expect("key"));

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let ok = Arc::new(AtomicU64::new(0));
    let answered = ok.clone();
    let (n, secs) = runtime.block_on(async move {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        let client: Client<HttpConnector, Body> =
            Client::builder(TokioExecutor::new()).pool_max_idle_per_host(per_endpoint).build(http);
        let total = Arc::new(Semaphore::new(concurrency));
        let shares: Vec<Arc<Semaphore>> = urls.iter().map(|_| Arc::new(Semaphore::new(per_endpoint))).collect();
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        let mut n = 0u64;
        // Message by message, each to every URL: the order the dispatcher claims them in.
        for (id, body) in messages {
            for (u, url) in urls.iter().enumerate() {
                let share = shares[u].clone().acquire_owned().await.expect("semaphore");
                let place = total.clone().acquire_owned().await.expect("semaphore");
                let (client, url, id, body, key) = (client.clone(), url.clone(), id.clone(), body.clone(), key.clone());
                let answered = answered.clone();
                tasks.spawn(async move {
                    let timestamp = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
                    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("hmac key");
                    mac.update(id.as_bytes());
                    mac.update(b".");
                    mac.update(timestamp.to_string().as_bytes());
                    mac.update(b".");
                    mac.update(&body);
                    let signature = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
                    let req = hyper::Request::post(url)
                        .header("webhook-id", id)
                        .header("webhook-timestamp", timestamp)
                        .header("webhook-signature", signature)
                        .header("content-type", "application/json")
                        .header("user-agent", "dropslot-webhooks/0.1.0")
                        .body(Body::from(body))
                        .expect("request");
                    if let Ok(res) = client.request(req).await {
                        let good = res.status().is_success();
                        // The answer read whole, as the dispatcher reads its excerpt.
                        if axum::body::to_bytes(Body::new(res.into_body()), 1024).await.is_ok() && good {
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    drop((share, place));
                });
                while tasks.try_join_next().is_some() {}
                n += 1;
            }
        }
        while tasks.join_next().await.is_some() {}
        (n, started.elapsed().as_secs_f64())
    });
    let ok = ok.load(Ordering::Relaxed);
    println!(
        "FANOUT_FLOOR deliveries={n} ok={ok} secs={secs:.3} per_s={:.0} cpu_ticks={}",
        ok as f64 / secs.max(1e-9),
        cpu_ticks()
    );
}
