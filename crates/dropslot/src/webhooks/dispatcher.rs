//! The dispatcher: started by the composition root beside the HTTP server. It claims due
//! deliveries in batches (a lease per claim, so a killed process's claims are taken over once
//! they expire), sends them concurrently over one shared HTTP client within a bounded pool
//! and a per-endpoint share, and records every attempt. A delivery it holds stays its own
//! until its attempt is recorded, however late: it is never claimed back and sent twice by
//! this process, and its lease is extended while its recording is late, so no other process
//! takes it over either. On shutdown it stops claiming and gives in-flight deliveries `drain` to
//! finish; the rest are retried after their lease.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
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
/// Attempts whose store call failed are written again after this, doubled after each failure
/// up to `RETRY_MAX`.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(2);

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
    /// The deliveries this process holds (claimed, their attempt not yet recorded), by
    /// endpoint.
    held: Mutex<HashMap<i64, Vec<Held>>>,
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
        Ok(Arc::new(Dispatcher { store, settings, client, wake, metrics, clock, held: Mutex::default() }))
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
            if free > 0 || self.renewals_due() {
                match self.claim(free).await {
                    Ok(batch) => {
                        claimed = batch.len();
                        for d in batch {
                            let Ok(permit) = permits.clone().try_acquire_owned() else { break };
                            let (me, record) = (self.clone(), record.clone());
                            tasks.spawn(async move { me.deliver(d, &record, permit).await });
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

    /// The deliveries this process holds answered, their attempt not recorded yet, whose lease
    /// ends within `LEASE_MARGIN`: (delivery, claim) pairs.
    fn due_for_renewal(&self, now: i64) -> Vec<(i64, i64)> {
        self.lock_held().values().flatten().filter(|h| h.renewal_due(now)).map(|h| (h.id, h.claim)).collect()
    }

    /// Whether any is (asked only when no permit is free, so no claim round would run).
    fn renewals_due(&self) -> bool {
        let now = Timestamp::now().as_millisecond();
        self.lock_held().values().flatten().any(|h| h.renewal_due(now))
    }

    /// Claims up to `limit` due deliveries (none when 0) and, in the same round, extends the
    /// lease of the answered ones whose recording is late: however long the database holds
    /// their recording up (a lock another session keeps, a busy server), no other process takes
    /// them over and sends again what its receiver has (issue 47). Only a process that dies
    /// meanwhile leaves its answers to be sent again, once its leases run out: at least once.
    async fn claim(&self, limit: usize) -> Result<Vec<Claimed>, dropslot_store::StoreError> {
        let cap = self.settings.per_endpoint_concurrency;
        let now = Timestamp::now().as_millisecond();
        let lease = now + (self.settings.timeout + LEASE_MARGIN).as_millis() as i64;
        let renew = self.due_for_renewal(now);
        // A delivery held here past its lease (its answer came, its attempt is not recorded
        // yet) is due again in the claim's eyes. Its endpoint counts as full until the attempt
        // is recorded, so this process never takes it back and sends it a second time. (Another
        // process may, once the lease is over: at least once, as when this one is killed.)
        let in_flight: Vec<(i64, usize)> = self
            .lock_held()
            .iter()
            .map(|(e, held)| {
                let late = held.iter().any(|h| h.lease_until <= now);
                (*e, if late { cap } else { held.iter().filter(|h| h.sending).count() })
            })
            .collect();
        let claims = self.store.claim_deliveries(now, lease, limit, cap, in_flight, renew).await?;
        let mut held = self.lock_held();
        if !claims.renewed.is_empty() {
            tracing::info!(
                deliveries = claims.renewed.len(),
                "webhook attempts not recorded yet; their leases extended"
            );
            for h in held.values_mut().flatten().filter(|h| claims.renewed.contains(&h.id)) {
                h.lease_until = lease;
            }
        }
        let mut fresh = Vec::with_capacity(claims.claimed.len());
        for d in claims.claimed {
            // On SQLite a claim is answered before its commit: if that commit then failed, the
            // lease is gone and the delivery, still out, is claimed again. It stays one send.
            let mine = held.entry(d.endpoint_id).or_default();
            if mine.iter().any(|h| h.id == d.delivery_id) {
                tracing::warn!(delivery_id = d.delivery_id, "a delivery in flight was claimed again; not sent twice");
                continue;
            }
            mine.push(Held { id: d.delivery_id, claim: d.claim, lease_until: lease, sending: true });
            fresh.push(d);
        }
        Ok(fresh)
    }

    fn lock_held(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Vec<Held>>> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends one delivery and records the attempt (through the recorder, with others). Its
    /// `permit` (a place in the pool) is given back once the answer is in: waiting for the
    /// attempt's commit loads neither the receiver nor this process, and holding the place
    /// meanwhile bounded the fan-out on `PostgreSQL` by the recorder's commit time (issue 27).
    async fn deliver(&self, d: Claimed, record: &mpsc::Sender<Recording>, permit: OwnedSemaphorePermit) {
        let started = Instant::now();
        let sent = self.send(&d).await;
        let latency = started.elapsed();
        if let Some(h) =
            self.lock_held().get_mut(&d.endpoint_id).and_then(|l| l.iter_mut().find(|h| h.id == d.delivery_id))
        {
            h.sending = false;
        }
        drop(permit);
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
            // Only when the dispatcher stopped meanwhile: the lease runs out and the delivery is
            // sent again, at least once.
            tracing::error!(delivery_id = d.delivery_id, error = %e, "recording a webhook attempt failed");
        }
        let mut held = self.lock_held();
        if let Some(mine) = held.get_mut(&d.endpoint_id) {
            mine.retain(|h| h.id != d.delivery_id);
            if mine.is_empty() {
                held.remove(&d.endpoint_id);
            }
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

impl Held {
    /// Answered, unrecorded, and its lease ends within `LEASE_MARGIN`.
    fn renewal_due(&self, now: i64) -> bool {
        !self.sending && self.lease_until <= now + LEASE_MARGIN.as_millis() as i64
    }
}

/// A delivery this process holds.
struct Held {
    id: i64,
    /// The claim's tag, which a lease is extended under.
    claim: i64,
    /// Its lease's end (Unix ms).
    lease_until: i64,
    /// Whether its request is still out: only those count against the endpoint's share (one
    /// answered and waiting for its attempt to be recorded no longer loads the receiver).
    sending: bool,
}

struct Sent {
    status: Option<u16>,
    excerpt: Option<String>,
    error: Option<String>,
    retry_after: Option<Duration>,
}

/// Records the attempts the deliveries hand over, every one waiting at the time in one store
/// call (one transaction), instead of a transaction per attempt; each delivery hears when its
/// attempt is committed. An attempt whose call failed is never dropped while the dispatcher
/// runs: it is written again (see [`write`]) until it is committed, as its delivery, already
/// answered, must not be sent again. Ends when every sender is dropped, after one last try at
/// what is still unrecorded.
async fn record_attempts(store: DynStore, mut recordings: mpsc::Receiver<Recording>) {
    let mut fresh = Vec::with_capacity(RECORD_BATCH);
    let mut unrecorded: Vec<Recording> = Vec::new();
    let mut backoff = RETRY_FIRST;
    let mut retry_at = tokio::time::Instant::now();
    let mut open = true;
    while open || !unrecorded.is_empty() {
        let retry = if !open {
            true
        } else if unrecorded.is_empty() {
            open = recordings.recv_many(&mut fresh, RECORD_BATCH).await > 0;
            false
        } else {
            tokio::select! {
                n = recordings.recv_many(&mut fresh, RECORD_BATCH) => { open = n > 0; false }
                () = tokio::time::sleep_until(retry_at) => true,
            }
        };
        if !fresh.is_empty() {
            let failed = write(&store, std::mem::take(&mut fresh)).await;
            if unrecorded.is_empty() {
                retry_at = tokio::time::Instant::now() + backoff;
            }
            unrecorded.extend(failed);
        }
        if retry {
            let failed = write(&store, std::mem::take(&mut unrecorded)).await;
            backoff = if failed.is_empty() { RETRY_FIRST } else { (backoff * 2).min(RETRY_MAX) };
            retry_at = tokio::time::Instant::now() + backoff;
            if !open {
                for (_, ack) in failed {
                    let _ = ack.send(Err("the dispatcher stopped before the attempt could be recorded".into()));
                }
                break;
            }
            unrecorded = failed;
        }
    }
}

/// Writes `batch` in one store call. If that fails, each endpoint's attempts are written in a
/// call of their own, so whatever holds up one endpoint (another transaction on its row, one
/// of its attempts that cannot be written) holds up only its own attempts. Answers every
/// attempt committed; returns the others, to be written again.
async fn write(store: &DynStore, mut batch: Vec<Recording>) -> Vec<Recording> {
    // In endpoint order, so two processes' batches on PostgreSQL lock endpoint rows in the
    // same order and cannot deadlock.
    batch.sort_by_key(|(a, _)| (a.endpoint_id, a.delivery_id));
    let endpoints = batch.first().zip(batch.last()).map(|((a, _), (z, _))| (a.endpoint_id, z.endpoint_id));
    let (mut error, batch) = match commit(store, batch).await {
        Ok(()) => return Vec::new(),
        Err(failed) => failed,
    };
    let mut failed = Vec::new();
    if endpoints.is_some_and(|(a, z)| a != z) {
        let mut groups: Vec<Vec<Recording>> = Vec::new();
        for r in batch {
            match groups.last_mut() {
                Some(group) if group[0].0.endpoint_id == r.0.endpoint_id => group.push(r),
                _ => groups.push(vec![r]),
            }
        }
        for group in groups {
            if let Err((e, group)) = commit(store, group).await {
                error = e;
                failed.extend(group);
            }
        }
    } else {
        failed = batch;
    }
    if !failed.is_empty() {
        tracing::warn!(attempts = failed.len(), %error, "recording webhook attempts failed; writing them again");
    }
    failed
}

/// One store call for `batch`: answers each attempt's delivery once committed; on failure, the
/// error and the batch back, unanswered.
async fn commit(store: &DynStore, batch: Vec<Recording>) -> Result<(), (String, Vec<Recording>)> {
    let attempts = batch.iter().map(|(a, _)| a.clone()).collect();
    match store.record_attempts(attempts).await {
        Ok(()) => {
            for (_, ack) in batch {
                // A delivery gone (aborted at shutdown) needs no answer.
                let _ = ack.send(Ok(()));
            }
            Ok(())
        }
        Err(e) => Err((e.to_string(), batch)),
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
