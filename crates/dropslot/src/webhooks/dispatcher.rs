//! The dispatcher: started by the composition root beside the HTTP server. It claims due
//! deliveries in batches (a lease per claim, so a killed process's claims are taken over once
//! they expire), sends them concurrently over one shared HTTP client within a bounded pool
//! and a per-endpoint share, and records every attempt. On shutdown it stops claiming and
//! gives in-flight deliveries `drain` to finish; the rest are retried after their lease.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use tokio::sync::{Notify, Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinSet;

use super::{retry, signing, target};
use crate::metrics::{Metrics, Outcome};
use dropslot_core::clock::Clock;
use dropslot_core::config::WebhookSettings;
use dropslot_store::{AttemptOutcome, AttemptRecord, Claimed, DynStore};

/// Deliveries claimed per round at most.
const BATCH: usize = 256;
/// How often the queue is looked at without a wake-up (other processes' writes, retries).
const POLL: Duration = Duration::from_secs(1);
/// A claim's lease outlasts the attempt's deadline by this much (time to record it); a
/// killed process's claims are taken over after the deadline plus this.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// The response body kept per attempt.
const EXCERPT: usize = 1024;
/// Attempts recorded in one store call at most.
const RECORD_BATCH: usize = 256;

/// An attempt to record, and who waits for it to be committed.
type Recording = (AttemptRecord, oneshot::Sender<Result<(), String>>);

pub struct Dispatcher {
    store: DynStore,
    settings: WebhookSettings,
    client: reqwest::Client,
    wake: Arc<Notify>,
    metrics: Arc<Metrics>,
    /// The business clock: decides whether a rotated-out secret still signs (the queue
    /// itself runs on the system clock).
    clock: Clock,
    /// Deliveries in flight per endpoint.
    in_flight: Mutex<HashMap<i64, usize>>,
}

/// The shared HTTP client: rustls, no redirects, no proxy from the environment, names
/// resolved only through the guarded resolver, and the attempt's whole deadline.
fn client(s: &WebhookSettings) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(s.timeout)
        .connect_timeout(s.timeout.min(Duration::from_secs(5)))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(target::GuardedResolver { allow_private: s.allow_private }))
        .user_agent(concat!("dropslot-webhooks/", env!("CARGO_PKG_VERSION")))
        .pool_max_idle_per_host(s.per_endpoint_concurrency)
        .build()
}

impl Dispatcher {
    pub fn new(
        store: DynStore,
        settings: WebhookSettings,
        wake: Arc<Notify>,
        metrics: Arc<Metrics>,
        clock: Clock,
    ) -> Result<Arc<Dispatcher>, String> {
        let client = client(&settings).map_err(|e| format!("the webhook HTTP client: {e}"))?;
        Ok(Arc::new(Dispatcher { store, settings, client, wake, metrics, clock, in_flight: Mutex::default() }))
    }

    /// Runs until `stop` turns true, then drains.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let permits = Arc::new(Semaphore::new(self.settings.concurrency));
        let (record, recordings) = mpsc::channel::<Recording>(self.settings.concurrency.max(1));
        let recorder = tokio::spawn(record_attempts(self.store.clone(), recordings));
        let mut tasks = JoinSet::new();
        let mut sampled = Instant::now().checked_sub(POLL).unwrap_or_else(Instant::now);
        while !*stop.borrow() {
            while tasks.try_join_next().is_some() {}
            let free = permits.available_permits().min(BATCH);
            let mut claimed = 0;
            if free > 0 {
                match self.claim(free).await {
                    Ok(batch) => {
                        claimed = batch.len();
                        for d in batch {
                            let Ok(permit) = permits.clone().try_acquire_owned() else { break };
                            let (me, record) = (self.clone(), record.clone());
                            tasks.spawn(async move {
                                me.deliver(d, &record).await;
                                drop(permit);
                            });
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "webhook claim failed; retrying"),
                }
            }
            if sampled.elapsed() >= POLL {
                sampled = Instant::now();
                if let Ok(depth) = self.store.queue_depth().await {
                    self.metrics.webhook_queue_depth.set(depth);
                }
            }
            if claimed == free && claimed > 0 {
                continue; // more may be due
            }
            let wait = self.until_next_due().await;
            tokio::select! {
                () = self.wake.notified() => {}
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                () = tokio::time::sleep(wait) => {}
                _ = stop.changed() => {}
            }
        }
        let drain = self.settings.drain;
        if !tasks.is_empty() {
            tracing::info!(in_flight = tasks.len(), "draining webhook deliveries");
        }
        let drained = tokio::time::timeout(drain, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(left = tasks.len(), "webhook deliveries still in flight after the drain; they are retried");
            tasks.abort_all();
        }
        // The recorder ends once every delivery's sender is gone; what it holds is written.
        drop(record);
        let _ = recorder.await;
    }

    /// How long to sleep when nothing is due: until the next due delivery, at most `POLL`.
    async fn until_next_due(&self) -> Duration {
        match self.store.next_due_ms().await {
            Ok(Some(at)) => {
                let ms = (at - Timestamp::now().as_millisecond()).clamp(1, POLL.as_millis() as i64);
                Duration::from_millis(ms as u64)
            }
            _ => POLL,
        }
    }

    async fn claim(&self, limit: usize) -> Result<Vec<Claimed>, dropslot_store::StoreError> {
        let cap = self.settings.per_endpoint_concurrency;
        let in_flight: Vec<(i64, usize)> = self.lock_in_flight().iter().map(|(e, n)| (*e, *n)).collect();
        let now = Timestamp::now().as_millisecond();
        let lease = now + (self.settings.timeout + LEASE_MARGIN).as_millis() as i64;
        let claimed = self.store.claim_deliveries(now, lease, limit, cap, in_flight).await?;
        let mut counts = self.lock_in_flight();
        for d in &claimed {
            *counts.entry(d.endpoint_id).or_default() += 1;
        }
        Ok(claimed)
    }

    fn lock_in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<i64, usize>> {
        self.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends one delivery and records the attempt (through the recorder, with others).
    async fn deliver(&self, d: Claimed, record: &mpsc::Sender<Recording>) {
        let started = Instant::now();
        let sent = self.send(&d).await;
        let latency = started.elapsed();
        self.metrics.webhook_latency.observe(latency.as_secs_f64());
        let now = Timestamp::now();
        let outcome = match &sent {
            Sent { status: Some(s), .. } if (200..300).contains(s) => AttemptOutcome::Delivered,
            Sent { status: Some(410), .. } => AttemptOutcome::DisableEndpoint,
            Sent { retry_after, .. } => {
                match retry::next_delay(&self.settings.retry_schedule, d.attempt, *retry_after, retry::unit()) {
                    Some(delay) => AttemptOutcome::Retry(now.as_millisecond() + delay.as_millis() as i64),
                    None => AttemptOutcome::Failed,
                }
            }
        };
        self.metrics.attempt(match outcome {
            AttemptOutcome::Delivered => Outcome::Delivered,
            AttemptOutcome::Retry(_) => Outcome::Retried,
            AttemptOutcome::Failed | AttemptOutcome::DisableEndpoint => Outcome::Failed,
        });
        let error = match (&sent.error, outcome) {
            (_, AttemptOutcome::DisableEndpoint) => {
                Some("The endpoint answered 410 Gone; it has been disabled.".to_string())
            }
            (Some(e), _) => Some(e.clone()),
            (None, _) => None,
        };
        tracing::info!(
            delivery_id = d.delivery_id,
            endpoint_id = d.endpoint_id,
            attempt = d.attempt,
            status = sent.status,
            latency_ms = latency.as_millis() as u64,
            error = error.as_deref(),
            "webhook attempt"
        );
        let attempt = AttemptRecord {
            delivery_id: d.delivery_id,
            claim: d.claim,
            endpoint_id: d.endpoint_id,
            attempt: d.attempt,
            at: now,
            status: sent.status,
            latency_ms: latency.as_millis() as i64,
            response: sent.excerpt,
            error,
            outcome,
            disable_after_ms: self.settings.disable_after.as_millis() as i64,
        };
        let (ack, recorded) = oneshot::channel();
        let result = match record.send((attempt, ack)).await {
            Ok(()) => recorded.await.unwrap_or_else(|_| Err("the attempt recorder stopped".into())),
            Err(_) => Err("the attempt recorder stopped".into()),
        };
        if let Err(e) = result {
            // The lease runs out and the delivery is sent again: at least once.
            tracing::error!(delivery_id = d.delivery_id, error = %e, "recording a webhook attempt failed");
        }
        if let Some(n) = self.lock_in_flight().get_mut(&d.endpoint_id) {
            *n = n.saturating_sub(1);
        }
    }

    async fn send(&self, d: &Claimed) -> Sent {
        let failed = |error: String| Sent { status: None, excerpt: None, error: Some(error), retry_after: None };
        let url = match target::parse(&d.url) {
            Ok(u) => u,
            Err(e) => return failed(e),
        };
        if let Err(e) = target::check_literal(&url, self.settings.allow_private) {
            return failed(e);
        }
        let timestamp = Timestamp::now().as_second();
        let mut secrets = vec![d.secret.clone()];
        if let Some((previous, until)) = &d.previous_secret {
            if *until > self.clock.now().as_millisecond() {
                secrets.push(previous.clone());
            }
        }
        let signature = match signing::header(&secrets, &d.webhook_id, timestamp, &d.body) {
            Ok(s) => s,
            Err(e) => return failed(format!("signing: {e}")),
        };
        let mut req = self
            .client
            .post(url)
            .header("webhook-id", &d.webhook_id)
            .header("webhook-timestamp", timestamp)
            .header("webhook-signature", signature)
            .header(CONTENT_TYPE, "application/json")
            .body(d.body.clone());
        if let Some(h) = &d.auth_header {
            match (HeaderName::from_bytes(h.name.as_bytes()), HeaderValue::from_str(&h.value)) {
                (Ok(name), Ok(mut value)) => {
                    value.set_sensitive(true);
                    req = req.header(name, value);
                }
                _ => return failed("the stored auth_header is not a valid HTTP header".into()),
            }
        }
        let mut res = match req.send().await {
            Ok(r) => r,
            Err(e) => return failed(describe(e, self.settings.timeout)),
        };
        let status = res.status().as_u16();
        let retry_after = res
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry::parse_retry_after(v, Timestamp::now()));
        let mut body = Vec::new();
        let mut error = None;
        while body.len() < EXCERPT {
            match res.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk[..chunk.len().min(EXCERPT - body.len())]),
                Ok(None) => break,
                Err(e) => {
                    error = Some(describe(e, self.settings.timeout));
                    break;
                }
            }
        }
        let excerpt = (!body.is_empty()).then(|| String::from_utf8_lossy(&body).into_owned());
        let error = error.or_else(|| match status {
            200..=299 => None,
            300..=399 => Some(format!("HTTP {status}: redirects are not followed")),
            _ => Some(format!("HTTP {status}")),
        });
        // A 2xx whose body then failed to arrive in time still counts: the receiver has it.
        Sent {
            status: Some(status),
            excerpt,
            error: if (200..300).contains(&status) { None } else { error },
            retry_after,
        }
    }
}

struct Sent {
    status: Option<u16>,
    excerpt: Option<String>,
    error: Option<String>,
    retry_after: Option<Duration>,
}

/// Records the attempts the deliveries hand over, every one waiting at the time in one store
/// call (one transaction), instead of a transaction per attempt; each delivery hears when its
/// attempt is committed. Ends when every sender is dropped.
async fn record_attempts(store: DynStore, mut recordings: mpsc::Receiver<Recording>) {
    let mut batch = Vec::with_capacity(RECORD_BATCH);
    while recordings.recv_many(&mut batch, RECORD_BATCH).await > 0 {
        // In endpoint order, so two processes' batches on PostgreSQL lock endpoint rows in the
        // same order and cannot deadlock.
        batch.sort_by_key(|(a, _)| (a.endpoint_id, a.delivery_id));
        let (attempts, acks): (Vec<_>, Vec<_>) = batch.drain(..).unzip();
        let result = store.record_attempts(attempts).await.map_err(|e| e.to_string());
        for ack in acks {
            // A delivery gone (aborted at shutdown) needs no answer.
            let _ = ack.send(result.clone());
        }
    }
}

/// An HTTP client error in the integrator's words, with its cause; without the URL, which
/// may carry a credential in its query (the log and the attempt record show the endpoint id).
fn describe(e: reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        return format!("No answer within {} s.", timeout.as_secs_f64());
    }
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
