//! A real HTTP webhook receiver for the tests: listens on 127.0.0.1, records every request
//! as it arrives, and answers from a script (a status, or never), then a default.
//! Signatures are checked by an independent implementation: the Standard Webhooks reference
//! library from `PyPI`, through `scripts/verify-webhooks.py`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot, watch};

/// How the receiver answers one request.
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    /// Never answer (a hung receiver): the sender must give up by its own deadline.
    pub hang: bool,
}

impl Answer {
    pub fn status(status: u16) -> Answer {
        Answer { status, hang: false }
    }
}

#[derive(Clone, Debug)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: String,
    /// The status this request was answered with (0: never answered).
    pub answered: u16,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
    pub fn id(&self) -> &str {
        self.header("webhook-id")
    }
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }
    pub fn event(&self) -> String {
        self.json()["event"].as_str().unwrap_or_default().to_string()
    }
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.answered)
    }
}

struct Inner {
    got: Mutex<Vec<Received>>,
    plan: Mutex<VecDeque<Answer>>,
    default: Mutex<Option<Answer>>,
    arrived: Notify,
    gate: Mutex<Gate>,
    opened: watch::Sender<bool>,
}

/// Holds arriving requests until `width` are held at once (see [`Receiver::gate`]).
#[derive(Default)]
struct Gate {
    width: usize,
    held: usize,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            got: Mutex::default(),
            plan: Mutex::default(),
            default: Mutex::default(),
            arrived: Notify::new(),
            gate: Mutex::default(),
            opened: watch::Sender::new(true),
        }
    }
}

pub struct Receiver {
    pub url: String,
    inner: Arc<Inner>,
    _stop: oneshot::Sender<()>,
}

async fn receive(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    // Behind a closed gate a request waits, unrecorded, until enough are waiting with it.
    let hold = {
        let mut gate = inner.gate.lock().unwrap();
        if *inner.opened.borrow() {
            false
        } else {
            gate.held += 1;
            if gate.held >= gate.width {
                inner.opened.send_replace(true);
            }
            true
        }
    };
    if hold {
        let mut opened = inner.opened.subscribe();
        let _ = opened.wait_for(|open| *open).await;
    }
    let answer = inner
        .plan
        .lock()
        .unwrap()
        .pop_front()
        .or_else(|| inner.default.lock().unwrap().clone())
        .unwrap_or(Answer::status(200));
    inner.got.lock().unwrap().push(Received {
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        // A hung request is never answered.
        answered: if answer.hang { 0 } else { answer.status },
    });
    inner.arrived.notify_waiters();
    if answer.hang {
        std::future::pending::<()>().await;
    }
    (StatusCode::from_u16(answer.status).unwrap(), "received")
}

impl Receiver {
    /// A receiver that stops when dropped (and after two minutes at most).
    pub async fn start() -> Receiver {
        let inner = Arc::new(Inner::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let app = axum::Router::new().route("/hook", axum::routing::post(receive)).with_state(inner.clone());
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let stop = async move {
                let _ = tokio::time::timeout(Duration::from_secs(120), rx).await;
            };
            let _ = axum::serve(listener, app).with_graceful_shutdown(stop).await;
        });
        Receiver { url, inner, _stop: tx }
    }

    /// The next answers, in order; then the default.
    pub fn plan(&self, answers: impl IntoIterator<Item = Answer>) {
        self.inner.plan.lock().unwrap().extend(answers);
    }

    /// From now on, requests are held (unanswered) until `width` are held at once; then those
    /// and every later one are answered. Seeing the gate open proves that `width` requests
    /// were in flight together.
    pub fn gate(&self, width: usize) {
        *self.inner.gate.lock().unwrap() = Gate { width, held: 0 };
        self.inner.opened.send_replace(false);
    }

    pub fn answer_by_default(&self, a: Answer) {
        *self.inner.default.lock().unwrap() = Some(a);
    }

    pub fn received(&self) -> Vec<Received> {
        self.inner.got.lock().unwrap().clone()
    }

    /// Waits (at most 60 s) until `done` holds for what has arrived; returns it.
    pub async fn wait_until(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let wait = async {
            loop {
                let notified = self.inner.arrived.notified();
                let got = self.received();
                if done(&got) {
                    return got;
                }
                notified.await;
            }
        };
        if let Ok(got) = tokio::time::timeout(Duration::from_secs(60), wait).await {
            return got;
        }
        let events: Vec<String> = self.received().iter().map(|r| format!("{} {}", r.event(), r.answered)).collect();
        panic!("the receiver never saw {what}; it got {events:?}")
    }

    /// Waits until `n` requests were answered with a 2xx; returns those, in arrival order.
    pub async fn delivered(&self, n: usize) -> Vec<Received> {
        let got = self.wait_until(&format!("{n} deliveries"), |g| g.iter().filter(|r| r.ok()).count() >= n).await;
        got.into_iter().filter(Received::ok).collect()
    }
}

/// Each request verified against `secret` by the reference implementation.
pub fn verify(secret: &str, received: &[Received]) -> Vec<bool> {
    let items: Vec<Value> = received
        .iter()
        .map(|r| {
            let headers: serde_json::Map<String, Value> = ["webhook-id", "webhook-timestamp", "webhook-signature"]
                .iter()
                .map(|h| ((*h).to_string(), json!(r.header(h))))
                .collect();
            json!({"secret": secret, "headers": headers, "body": r.body})
        })
        .collect();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/verify-webhooks.py");
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 (scripts/test-deps.sh installs standardwebhooks)");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(serde_json::to_string(&items).unwrap().as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the verifier failed: {out:?}");
    serde_json::from_slice(&out.stdout).expect("the verifier's answer")
}
