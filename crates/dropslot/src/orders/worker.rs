//! The asynchronous order worker (CONTRACT §3.5), started by the composition root: claims due
//! requests under a lease and turns each into one order with the same validation, quote and
//! writer as `sync`. The order and the request's completion commit in one transaction, so a
//! crash anywhere leaves the request either untouched (taken over when its lease ends) or
//! completed: never two orders.

use std::sync::Arc;
use std::time::Duration;

use jiff::fmt::temporal::{Pieces, PiecesOffset};
use jiff::tz::{Offset, TimeZone};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::Terms;
use super::asynchronous::{RequestFinished, request_completed};
use super::request::{Purpose, RequestPayload};
use crate::app::App;
use crate::auth::ClientSettings;
use crate::error::{Error, FieldErrors};
use dropslot_core::time::iso;
use dropslot_store::{ClaimedRequest, CreateOrderError, LEASE_LOST, NewOrder, RequestEnd, StoreError, queue_now_ms};

/// How long to sleep at most when nothing is due: requests another process accepted are
/// only this process's to take over once their lease ends, so this needs no doorbell.
const POLL: Duration = Duration::from_secs(1);
/// A request whose processing failed for a reason other than its content (the database was
/// unavailable) is tried again when its lease ends, this many times in all.
const MAX_ATTEMPTS: u32 = 5;

/// Runs until `stop` turns true; requests being written then finish first.
pub async fn run(app: App, mut stop: watch::Receiver<bool>) {
    let batch = app.settings.async_orders.batch;
    let permits = Arc::new(Semaphore::new(batch));
    let mut tasks = JoinSet::new();
    while !*stop.borrow() {
        while tasks.try_join_next().is_some() {}
        let free = permits.available_permits();
        // A read first: an idle worker costs one indexed read a second, never a write.
        let now = queue_now_ms();
        let due = match app.store.next_request_due_ms().await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e, "reading the order request queue failed; retrying");
                Some(now + POLL.as_millis() as i64)
            }
        };
        let mut claimed = 0;
        if free > 0 && due.is_some_and(|at| at <= now) {
            let lease_until = now + app.settings.async_orders.lease.as_millis() as i64;
            match app.store.claim_requests(now, lease_until, free).await {
                Ok(requests) => {
                    claimed = requests.len();
                    for r in requests {
                        let Ok(permit) = permits.clone().try_acquire_owned() else { break };
                        let app = app.clone();
                        tasks.spawn(async move {
                            process(&app, r).await;
                            drop(permit);
                        });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "claiming order requests failed; retrying"),
            }
        }
        if claimed == free && claimed > 0 {
            continue; // more may be due
        }
        // Sleep until the next request falls due (a lease ends), at most POLL; when one is
        // due but could not be taken (every permit busy, or another process holds it), a
        // finishing task or POLL wakes the loop, never a spin.
        let wait = match due {
            Some(at) if at > now => Duration::from_millis((at - now).min(POLL.as_millis() as i64) as u64),
            _ => POLL,
        };
        tokio::select! {
            () = app.requests_queued.notified() => {}
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            () = tokio::time::sleep(wait) => {}
            _ = stop.changed() => {}
        }
    }
    while tasks.join_next().await.is_some() {}
}

/// One claimed request to its end: an order, a failure with field errors, or (the database
/// was unavailable) nothing, to be taken up again when the lease ends.
#[tracing::instrument(skip_all, fields(request_id = %r.request_id, attempt = r.attempts))]
async fn process(app: &App, r: ClaimedRequest) {
    let outcome = match write(app, &r).await {
        Ok(()) => return,
        Err(Error::Validation(errors)) => fail(app, &r, &errors).await,
        Err(Error::Store(StoreError::Unavailable(why))) if why == LEASE_LOST => {
            tracing::info!("{LEASE_LOST}");
            return;
        }
        Err(e) if r.attempts < MAX_ATTEMPTS => {
            tracing::warn!(error = %e, "the order request could not be processed; it is retried when its lease ends");
            return;
        }
        Err(e) => {
            tracing::error!(error = %e, "the order request could not be processed; giving up");
            let errors = FieldErrors::single("request", "The order could not be created; please send it again.");
            fail(app, &r, &errors).await
        }
    };
    if let Err(e) = outcome {
        tracing::warn!(error = %e, "recording the failed order request failed; it is retried when its lease ends");
    }
}

/// Validates and prices the request again under the terms it was accepted with, and writes
/// the order with the request's completion.
async fn write(app: &App, r: &ClaimedRequest) -> Result<(), Error> {
    let settings = ClientSettings::load(&r.terms).map_err(|e| StoreError::Corrupt(format!("request terms: {e}")))?;
    let (Some(prices), Some(limits)) = (settings.pricing, settings.limits) else {
        return Err(StoreError::Corrupt("request terms without prices or limits".into()).into());
    };
    let terms = Terms { scope: r.scope, prices: Arc::new(prices), limits };
    // The parsed body only lives until the typed payload is read from it: with a batch of
    // 100-drop-off requests in flight, each would otherwise hold it through the write.
    let payload: RequestPayload = {
        let body: serde_json::Value =
            serde_json::from_str(&r.payload).map_err(|e| StoreError::Corrupt(format!("request payload: {e}")))?;
        crate::http::json::from_value(&body)?
    };
    let now = app.clock.now();
    let mut prepared = super::prepare(app, &terms, payload, Purpose::AsyncOrder, now).await?;
    // Completed as the order is created: the same instant, in the pick-up city's offset.
    let complete = |order: &mut NewOrder| {
        let completed_at = iso(&order.created_at);
        let event_body = finished_body(app, r, "completed", Some(&order.unique_id), &completed_at, &empty_errors())?;
        order.completes = Some(RequestEnd { id: r.id, claim: r.claim, completed_at, at: now, event_body });
        Ok(())
    };
    match super::create::write_order(app, &terms, &mut prepared, now, None, complete).await? {
        Ok(_) => {
            app.metrics.orders_created.get_or_create(&crate::metrics::OrderLabels { kind: "async" }).inc();
            Ok(())
        }
        Err(CreateOrderError::CustomCodeTaken { drop_off, parcel }) => Err(super::custom_code_taken(drop_off, parcel)),
        Err(CreateOrderError::IdempotencyKeyTaken) => {
            Err(Error::Internal("an idempotency key on a worker's order".into()))
        }
        Err(CreateOrderError::SlotFull { .. }) => Err(Error::Internal("a full slot after the requotes".into())),
        Err(CreateOrderError::Store(e)) => Err(e.into()),
    }
}

async fn fail(app: &App, r: &ClaimedRequest, errors: &FieldErrors) -> Result<(), Error> {
    let now = app.clock.now();
    let completed_at = iso(&now.to_zoned(TimeZone::fixed(offset_of(&r.created_at))));
    let errors = serde_json::to_value(errors).map_err(|e| Error::Internal(format!("request errors: {e}")))?;
    let event_body = finished_body(app, r, "failed", None, &completed_at, &errors)?;
    let end = RequestEnd { id: r.id, claim: r.claim, completed_at, at: now, event_body };
    if !app.store.fail_request(end, errors.to_string()).await? {
        tracing::info!("{LEASE_LOST}");
    }
    Ok(())
}

/// The `same.request.completed` body.
fn finished_body(
    app: &App,
    r: &ClaimedRequest,
    status: &str,
    unique_id: Option<&str>,
    completed_at: &str,
    errors: &serde_json::Value,
) -> Result<String, Error> {
    let url = super::asynchronous::status_url(app, &r.request_id);
    request_completed(&RequestFinished {
        request_id: &r.request_id,
        status,
        unique_id,
        drop_offs_count: r.drop_offs_count,
        created_at: &r.created_at,
        completed_at,
        status_url: &url,
        errors,
    })
    .map_err(|e| Error::Internal(format!("the request's webhook: {e}")))
}

fn empty_errors() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

/// The UTC offset an ISO 8601 timestamp was written with (the pick-up city's at acceptance),
/// so a failed request's `completed_at` reads in the same offset as its `created_at`.
fn offset_of(text: &str) -> Offset {
    match Pieces::parse(text).ok().and_then(|p| p.offset()) {
        Some(PiecesOffset::Numeric(n)) => n.offset(),
        _ => Offset::UTC,
    }
}
