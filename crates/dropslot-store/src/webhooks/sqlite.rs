//! Webhook endpoints, deliveries and the dispatcher's claims on `SQLite`. Writes run on the
//! writer thread; a claim and an attempt's record are each one small transaction job.

use crate::outbox::sqlite::{add_delivery, enqueue, now_ms};
use crate::sqlite::{SqliteStore, map_err};
use crate::{
    AttemptRecord, AuthHeader, Claimed, Claims, DeliveryState, EndpointPatch, NewEndpoint, ResendOutcome, Scope,
    StoreError, StoreResult, StoredAttempt, StoredDelivery, StoredEndpoint, WebhookStore,
};
use async_trait::async_trait;
use dropslot_core::webhooks::{EndpointWrite, Health, plan as attempt_plan};
use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};
use std::sync::LazyLock;

// The states are the core's `DeliveryState` names. Most statements bind them; those whose
// condition is a partial index's (`webhook_deliveries_due`: `state = 'pending'`,
// `webhook_deliveries_stream`: `state IN ('waiting', 'pending')`) spell it, built once from
// the enum: `SQLite` uses a partial index only when the query's terms prove its condition, and
// a bound state proves nothing.

#[async_trait]
impl WebhookStore for SqliteStore {
    async fn create_endpoint(&self, scope: Scope, e: NewEndpoint, now: Timestamp) -> StoreResult<StoredEndpoint> {
        self.writer.write(move |c| create_endpoint(c, scope, &e, now)).await
    }

    async fn endpoints(&self, scope: Scope) -> StoreResult<Vec<StoredEndpoint>> {
        self.read_blocking(move |c| endpoints(c, scope)).await
    }

    async fn endpoint(&self, scope: Scope, id: i64) -> StoreResult<Option<StoredEndpoint>> {
        self.read(|c| endpoint(c, scope, id))
    }

    async fn update_endpoint(
        &self,
        scope: Scope,
        id: i64,
        patch: EndpointPatch,
        now: Timestamp,
    ) -> StoreResult<Option<StoredEndpoint>> {
        self.writer.write(move |c| update_endpoint(c, scope, id, &patch, now)).await
    }

    async fn delete_endpoint(&self, scope: Scope, id: i64, now: Timestamp) -> StoreResult<bool> {
        self.writer.write(move |c| delete_endpoint(c, scope, id, now)).await
    }

    async fn rotate_secret(
        &self,
        scope: Scope,
        id: i64,
        secret: String,
        previous_until_ms: i64,
        now: Timestamp,
    ) -> StoreResult<Option<StoredEndpoint>> {
        self.writer.write(move |c| rotate_secret(c, scope, id, &secret, previous_until_ms, now)).await
    }

    async fn queue_test(
        &self,
        scope: Scope,
        id: i64,
        event: &str,
        body: String,
        now: Timestamp,
    ) -> StoreResult<Option<StoredDelivery>> {
        let event = event.to_string();
        let queued = self
            .write_events(move |c, sink| {
                let Some(d) = queue_test(c, scope, id, &event, &body, now)? else { return Ok(None) };
                sink.queued += 1;
                delivery(c, scope, d).map_err(map_err)
            })
            .await?;
        Ok(queued)
    }

    async fn deliveries(
        &self,
        scope: Scope,
        endpoint: i64,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Option<Vec<StoredDelivery>>> {
        self.read_blocking(move |c| deliveries(c, scope, endpoint, before, limit)).await
    }

    async fn resend(&self, scope: Scope, delivery: i64) -> StoreResult<ResendOutcome> {
        self.write_events(move |c, sink| {
            let outcome = resend(c, scope, delivery)?;
            if matches!(outcome, ResendOutcome::Queued(_)) {
                sink.queued += 1;
            }
            Ok(outcome)
        })
        .await
    }

    async fn claim_deliveries(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
        per_endpoint: usize,
        in_flight: Vec<(i64, usize)>,
        renew: Vec<(i64, i64)>,
    ) -> StoreResult<Claims> {
        // Answered before its batch commits (see `Writer::write_unsynced`): the claim's sends
        // start one fsync earlier, which bounded the fan-out while events arrived (issue 33).
        self.writer
            .write_unsynced(move |c| {
                let renewed = renew_leases(c, &renew, lease_until_ms)?;
                let claimed = if limit == 0 {
                    Vec::new()
                } else {
                    claim(c, now_ms, lease_until_ms, limit, per_endpoint, &in_flight)?
                };
                Ok(Claims { claimed, renewed })
            })
            .await
    }

    async fn record_attempts(&self, attempts: Vec<AttemptRecord>) -> StoreResult<()> {
        self.writer.write(move |c| attempts.iter().try_for_each(|a| record_attempt(c, a))).await
    }

    async fn next_due_ms(&self) -> StoreResult<Option<i64>> {
        self.read(next_due_ms)
    }

    async fn queue_depth(&self) -> StoreResult<i64> {
        self.read_blocking(queue_depth).await
    }
}

const ENDPOINT_COLUMNS: &str = "id, url, events_json, description, enabled, disabled_reason, auth_header_name,
    auth_header_value, secret, previous_expires_ms, failing_since_ms, last_success_ms, last_error, created_at,
    updated_at";

fn endpoint_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredEndpoint> {
    let value: Option<String> = r.get(7)?;
    Ok(StoredEndpoint {
        id: r.get(0)?,
        url: r.get(1)?,
        events: crate::sqlite::json_column(r, 2)?,
        description: r.get(3)?,
        enabled: r.get(4)?,
        disabled_reason: r.get(5)?,
        auth_header_name: r.get(6)?,
        auth_header_last4: value.map(|v| last4(&v)),
        secret: r.get(8)?,
        previous_expires_ms: r.get(9)?,
        failing_since_ms: r.get(10)?,
        last_success_ms: r.get(11)?,
        last_error: r.get(12)?,
        created_at: r.get(13)?,
        updated_at: r.get(14)?,
    })
}

/// The last 4 characters of a header value (fewer when it is that short).
fn last4(v: &str) -> String {
    let chars: Vec<char> = v.chars().collect();
    chars[chars.len().saturating_sub(4)..].iter().collect()
}

pub(crate) fn endpoint(c: &Connection, scope: Scope, id: i64) -> rusqlite::Result<Option<StoredEndpoint>> {
    c.prepare_cached(&format!(
        "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints
         WHERE id = ?1 AND client_id = ?2 AND mode = ?3 AND deleted_at IS NULL"
    ))?
    .query_row(params![id, scope.client.0, scope.mode.as_str()], endpoint_row)
    .optional()
}

pub(crate) fn endpoints(c: &Connection, scope: Scope) -> rusqlite::Result<Vec<StoredEndpoint>> {
    c.prepare_cached(&format!(
        "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints
         WHERE client_id = ?1 AND mode = ?2 AND deleted_at IS NULL ORDER BY id"
    ))?
    .query_map(params![scope.client.0, scope.mode.as_str()], endpoint_row)?
    .collect()
}

pub(crate) fn create_endpoint(
    c: &Connection,
    scope: Scope,
    e: &NewEndpoint,
    now: Timestamp,
) -> Result<StoredEndpoint, StoreError> {
    let events = crate::sqlite::to_json(&e.events).map_err(map_err)?;
    let (name, value) = e.auth_header.as_ref().map(|h| (&h.name, &h.value)).unzip();
    let id: i64 = c
        .prepare_cached(
            "INSERT INTO webhook_endpoints (client_id, mode, url, events_json, description, enabled, auth_header_name,
                auth_header_value, secret, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10) RETURNING id",
        )
        .and_then(|mut s| {
            s.query_row(
                params![
                    scope.client.0,
                    scope.mode.as_str(),
                    e.url,
                    events,
                    e.description,
                    e.enabled,
                    name,
                    value,
                    e.secret,
                    now.to_string()
                ],
                |r| r.get(0),
            )
        })
        .map_err(map_err)?;
    found(endpoint(c, scope, id))
}

fn found(e: rusqlite::Result<Option<StoredEndpoint>>) -> Result<StoredEndpoint, StoreError> {
    e.map_err(map_err)?.ok_or_else(|| StoreError::Corrupt("an endpoint vanished mid-change".into()))
}

/// Fails an endpoint's unfinished deliveries (it was disabled or deleted): nothing is sent
/// to it any more, and re-enabling replays nothing.
fn fail_unfinished(c: &Connection, endpoint: i64, why: &str) -> Result<(), StoreError> {
    /// The stream index's condition, spelled (see the top of this file).
    static FAIL_UNFINISHED: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE webhook_deliveries SET state = '{failed}', finished_ms = ?3, last_error = ?2
         WHERE endpoint_id = ?1 AND state IN ('{waiting}', '{pending}')",
            failed = DeliveryState::Failed.as_str(),
            waiting = DeliveryState::Waiting.as_str(),
            pending = DeliveryState::Pending.as_str(),
        )
    });
    c.prepare_cached(&FAIL_UNFINISHED)
        .and_then(|mut s| s.execute(params![endpoint, why, now_ms()]))
        .map_err(map_err)?;
    Ok(())
}

pub(crate) fn update_endpoint(
    c: &Connection,
    scope: Scope,
    id: i64,
    p: &EndpointPatch,
    now: Timestamp,
) -> Result<Option<StoredEndpoint>, StoreError> {
    let Some(before) = endpoint(c, scope, id).map_err(map_err)? else { return Ok(None) };
    let events = p.events.as_ref().map(crate::sqlite::to_json).transpose().map_err(map_err)?;
    let header = p.auth_header.as_ref().map(|h| h.as_ref().map(|h| (h.name.clone(), h.value.clone())).unzip());
    let (set_header, name, value): (bool, Option<String>, Option<String>) = match header {
        None => (false, None, None),
        Some((n, v)) => (true, n, v),
    };
    c.prepare_cached(
        "UPDATE webhook_endpoints SET
            url = coalesce(?2, url),
            events_json = coalesce(?3, events_json),
            description = coalesce(?4, description),
            enabled = coalesce(?5, enabled),
            auth_header_name = CASE WHEN ?6 THEN ?7 ELSE auth_header_name END,
            auth_header_value = CASE WHEN ?6 THEN ?8 ELSE auth_header_value END,
            disabled_reason = CASE WHEN coalesce(?5, enabled) THEN NULL ELSE disabled_reason END,
            failing_since_ms = CASE WHEN ?5 AND NOT enabled THEN NULL ELSE failing_since_ms END,
            updated_at = ?9
         WHERE id = ?1",
    )
    .and_then(|mut s| {
        s.execute(params![id, p.url, events, p.description, p.enabled, set_header, name, value, now.to_string()])
    })
    .map_err(map_err)?;
    if before.enabled && p.enabled == Some(false) {
        fail_unfinished(c, id, "the endpoint was disabled")?;
    }
    found(endpoint(c, scope, id)).map(Some)
}

pub(crate) fn delete_endpoint(c: &Connection, scope: Scope, id: i64, now: Timestamp) -> Result<bool, StoreError> {
    // The row stays for the delivery log's sake, without its credentials.
    let n = c
        .prepare_cached(
            "UPDATE webhook_endpoints SET deleted_at = ?4, enabled = 0, auth_header_value = NULL, secret = '',
                previous_secret = NULL
             WHERE id = ?1 AND client_id = ?2 AND mode = ?3 AND deleted_at IS NULL",
        )
        .and_then(|mut s| s.execute(params![id, scope.client.0, scope.mode.as_str(), now.to_string()]))
        .map_err(map_err)?;
    if n == 1 {
        fail_unfinished(c, id, "the endpoint was deleted")?;
    }
    Ok(n == 1)
}

pub(crate) fn rotate_secret(
    c: &Connection,
    scope: Scope,
    id: i64,
    secret: &str,
    previous_until_ms: i64,
    now: Timestamp,
) -> Result<Option<StoredEndpoint>, StoreError> {
    let n = c
        .prepare_cached(
            "UPDATE webhook_endpoints SET previous_secret = secret, previous_expires_ms = ?5, secret = ?4, updated_at = ?6
             WHERE id = ?1 AND client_id = ?2 AND mode = ?3 AND deleted_at IS NULL",
        )
        .and_then(|mut s| {
            s.execute(params![id, scope.client.0, scope.mode.as_str(), secret, previous_until_ms, now.to_string()])
        })
        .map_err(map_err)?;
    if n == 0 {
        return Ok(None);
    }
    found(endpoint(c, scope, id)).map(Some)
}

pub(crate) fn queue_test(
    c: &Connection,
    scope: Scope,
    id: i64,
    event: &str,
    body: &str,
    now: Timestamp,
) -> Result<Option<i64>, StoreError> {
    if endpoint(c, scope, id).map_err(map_err)?.is_none() {
        return Ok(None);
    }
    let ids = enqueue(c, (scope.client.0, scope.mode.as_str()), event, body, None, &[id], now)?;
    Ok(ids.first().copied())
}

const DELIVERY_COLUMNS: &str = "d.id, d.endpoint_id, m.webhook_id, m.event, d.state, d.attempts, d.next_attempt_ms,
    d.queued_ms, d.finished_ms, d.last_status, d.last_error";

fn delivery_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredDelivery> {
    let state = crate::sqlite::parsed(r, 4, "delivery state", DeliveryState::parse)?;
    Ok(StoredDelivery {
        id: r.get(0)?,
        endpoint_id: r.get(1)?,
        webhook_id: r.get(2)?,
        event: r.get(3)?,
        state,
        attempts: r.get(5)?,
        next_attempt_ms: if state == DeliveryState::Pending { r.get(6)? } else { None },
        queued_ms: r.get(7)?,
        finished_ms: r.get(8)?,
        last_status: r.get(9)?,
        last_error: r.get(10)?,
        log: Vec::new(),
    })
}

fn attempts(c: &Connection, delivery: i64) -> rusqlite::Result<Vec<StoredAttempt>> {
    c.prepare_cached(
        "SELECT attempt, at, status, latency_ms, response, error FROM webhook_attempts
         WHERE delivery_id = ?1 ORDER BY id",
    )?
    .query_map([delivery], |r| {
        Ok(StoredAttempt {
            attempt: r.get(0)?,
            at: r.get(1)?,
            status: r.get(2)?,
            latency_ms: r.get(3)?,
            response: r.get(4)?,
            error: r.get(5)?,
        })
    })?
    .collect()
}

/// One delivery of the caller's, with its attempts.
pub(crate) fn delivery(c: &Connection, scope: Scope, id: i64) -> rusqlite::Result<Option<StoredDelivery>> {
    let d = c
        .prepare_cached(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d
             JOIN webhook_messages m ON m.id = d.message_id
             WHERE d.id = ?1 AND m.client_id = ?2 AND m.mode = ?3"
        ))?
        .query_row(params![id, scope.client.0, scope.mode.as_str()], delivery_row)
        .optional()?;
    d.map(|mut d| {
        d.log = attempts(c, d.id)?;
        Ok(d)
    })
    .transpose()
}

pub(crate) fn deliveries(
    c: &Connection,
    scope: Scope,
    endpoint_id: i64,
    before: Option<i64>,
    limit: usize,
) -> rusqlite::Result<Option<Vec<StoredDelivery>>> {
    if endpoint(c, scope, endpoint_id)?.is_none() {
        return Ok(None);
    }
    let mut list: Vec<StoredDelivery> = c
        .prepare_cached(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d
             JOIN webhook_messages m ON m.id = d.message_id
             WHERE d.endpoint_id = ?1 AND (?2 IS NULL OR d.id < ?2) ORDER BY d.id DESC LIMIT ?3"
        ))?
        .query_map(params![endpoint_id, before, limit as i64], delivery_row)?
        .collect::<rusqlite::Result<_>>()?;
    for d in &mut list {
        d.log = attempts(c, d.id)?;
    }
    Ok(Some(list))
}

pub(crate) fn resend(c: &Connection, scope: Scope, id: i64) -> Result<ResendOutcome, StoreError> {
    let found: Option<(i64, i64, Option<i64>, bool)> = c
        .prepare_cached(
            "SELECT d.message_id, d.endpoint_id, d.ordering_key, e.enabled FROM webhook_deliveries d
             JOIN webhook_endpoints e ON e.id = d.endpoint_id
             WHERE d.id = ?1 AND e.client_id = ?2 AND e.mode = ?3 AND e.deleted_at IS NULL",
        )
        .and_then(|mut s| {
            s.query_row(params![id, scope.client.0, scope.mode.as_str()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()
        })
        .map_err(map_err)?;
    let Some((message, endpoint, key, enabled)) = found else { return Ok(ResendOutcome::NotFound) };
    if !enabled {
        return Ok(ResendOutcome::EndpointDisabled);
    }
    let new = add_delivery(c, message, endpoint, key)?;
    let d = delivery(c, scope, new)
        .map_err(map_err)?
        .ok_or_else(|| StoreError::Corrupt("a delivery vanished mid-change".into()))?;
    Ok(ResendOutcome::Queued(d))
}

/// Claims due deliveries, the longest due first, within each endpoint's share of the
/// claimer's pool (endpoints already at their share are not even read). Only stream heads
/// are `pending`, and a claimed one is not due again before its lease ends, so a stream
/// never has two deliveries in flight.
pub(crate) fn claim(
    c: &Connection,
    now_ms: i64,
    lease_until_ms: i64,
    limit: usize,
    per_endpoint: usize,
    in_flight: &[(i64, usize)],
) -> Result<Vec<Claimed>, StoreError> {
    let mut counts: std::collections::HashMap<i64, usize> = in_flight.iter().copied().collect();
    let busy: Vec<i64> = in_flight.iter().filter(|(_, n)| *n >= per_endpoint).map(|(e, _)| *e).collect();
    let busy = crate::sqlite::to_json(&busy).map_err(map_err)?;
    let mut st = c
        .prepare_cached(&format!(
            "SELECT d.id, d.endpoint_id, d.attempts, m.webhook_id, m.body, e.url, e.secret, e.previous_secret,
                e.previous_expires_ms, e.auth_header_name, e.auth_header_value
             FROM webhook_deliveries d
             JOIN webhook_messages m ON m.id = d.message_id
             JOIN webhook_endpoints e ON e.id = d.endpoint_id
             WHERE d.state = '{pending}' AND d.next_attempt_ms <= ?1
               AND d.endpoint_id NOT IN (SELECT value FROM json_each(?2))
             ORDER BY d.next_attempt_ms LIMIT {}",
            crate::sqlite::limit_bucket(limit.saturating_mul(4)),
            // The due index's condition, spelled (see the top of this file).
            pending = DeliveryState::Pending.as_str(),
        ))
        .map_err(map_err)?;
    let rows = st
        .query_map(params![now_ms, busy], |r| {
            let previous: Option<String> = r.get(7)?;
            let until: Option<i64> = r.get(8)?;
            let name: Option<String> = r.get(9)?;
            let value: Option<String> = r.get(10)?;
            Ok(Claimed {
                delivery_id: r.get(0)?,
                claim: 0,
                endpoint_id: r.get(1)?,
                attempt: r.get::<_, u32>(2)? + 1,
                webhook_id: r.get(3)?,
                body: r.get(4)?,
                url: r.get(5)?,
                secret: r.get(6)?,
                previous_secret: previous.zip(until),
                auth_header: name.zip(value).map(|(name, value)| AuthHeader { name, value }),
            })
        })
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map_err)?;
    let mut claimed = Vec::with_capacity(limit);
    for mut d in rows {
        let n = counts.entry(d.endpoint_id).or_default();
        if *n >= per_endpoint {
            continue;
        }
        *n += 1;
        if claimed.len() == limit {
            break;
        }
        d.claim = i64::from_le_bytes(dropslot_core::ids::random_bytes::<8>());
        c.prepare_cached("UPDATE webhook_deliveries SET next_attempt_ms = ?2, claim = ?3 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![d.delivery_id, lease_until_ms, d.claim]))
            .map_err(map_err)?;
        claimed.push(d);
    }
    Ok(claimed)
}

/// Extends the lease of each (delivery, claim) pair still pending under that claim to
/// `lease_until_ms`; the ids extended.
pub(crate) fn renew_leases(c: &Connection, renew: &[(i64, i64)], lease_until_ms: i64) -> Result<Vec<i64>, StoreError> {
    let mut renewed = Vec::with_capacity(renew.len());
    for &(id, claim) in renew {
        let n = c
            .prepare_cached(
                "UPDATE webhook_deliveries SET next_attempt_ms = ?3
                 WHERE id = ?1 AND claim = ?2 AND state = ?4 AND next_attempt_ms < ?3",
            )
            .and_then(|mut s| s.execute(params![id, claim, lease_until_ms, DeliveryState::Pending.as_str()]))
            .map_err(map_err)?;
        if n == 1 {
            renewed.push(id);
        }
    }
    Ok(renewed)
}

/// Moves the oldest waiting delivery of the finished delivery's stream to `pending` (the
/// finished one is out of the stream index, so the stream's next unfinished one is it; the
/// `IN` matches the partial index's condition, which keeps this a point lookup).
fn promote_next(c: &Connection, delivery: i64) -> Result<(), StoreError> {
    static PROMOTE_NEXT: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE webhook_deliveries SET state = '{pending}', next_attempt_ms = min(next_attempt_ms, ?2)
         WHERE state = '{waiting}' AND id = (SELECT n.id FROM webhook_deliveries n JOIN webhook_deliveries d
                       ON n.endpoint_id = d.endpoint_id AND n.ordering_key = d.ordering_key
                     WHERE d.id = ?1 AND n.state IN ('{waiting}', '{pending}') ORDER BY n.id LIMIT 1)",
            waiting = DeliveryState::Waiting.as_str(),
            pending = DeliveryState::Pending.as_str(),
        )
    });
    c.prepare_cached(&PROMOTE_NEXT).and_then(|mut s| s.execute(params![delivery, now_ms()])).map_err(map_err)?;
    Ok(())
}

/// Records an attempt: loads the endpoint's health, lets the core's planner decide
/// (`dropslot_core::webhooks::plan`), and persists the plan. The writer serialises this job
/// with every other write, so nothing changes between the load and the writes.
pub(crate) fn record_attempt(c: &Connection, a: &AttemptRecord) -> Result<(), StoreError> {
    c.prepare_cached(
        "INSERT INTO webhook_attempts (delivery_id, attempt, at, status, latency_ms, response, error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut s| {
        s.execute(params![a.delivery_id, a.attempt, a.at.to_string(), a.status, a.latency_ms, a.response, a.error])
    })
    .map_err(map_err)?;
    let at_ms = a.at.as_millisecond();
    let health = c
        .prepare_cached(
            "SELECT failing_since_ms, last_success_ms, last_error IS NOT NULL FROM webhook_endpoints WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.query_row([a.endpoint_id], |r| {
                Ok(Health { failing_since_ms: r.get(0)?, last_success_ms: r.get(1)?, has_error: r.get(2)? })
            })
            .optional()
        })
        .map_err(map_err)?;
    let plan = attempt_plan(a.outcome, a.error.as_deref(), health.unwrap_or_default(), at_ms, a.disable_after_ms);
    let (state, next) = (plan.delivery.state().as_str(), plan.delivery.next_attempt_ms());
    // Only the claim that made the attempt moves the delivery (if its lease ran out and
    // another dispatcher took it over, that one decides), except an answer: whoever claims it
    // now would send again what the receiver has (`DeliveryWrite::settles_any_claim`).
    let moved = c
        .prepare_cached(
            "UPDATE webhook_deliveries SET state = ?3, attempts = max(attempts, ?4),
                next_attempt_ms = coalesce(?5, next_attempt_ms), claim = NULL,
                finished_ms = CASE WHEN ?5 IS NULL THEN ?6 ELSE NULL END, last_status = ?7, last_error = ?8
             WHERE id = ?1 AND (claim = ?2 OR ?10) AND state = ?9",
        )
        .and_then(|mut s| {
            let pending = DeliveryState::Pending.as_str();
            let any = plan.delivery.settles_any_claim();
            s.execute(params![a.delivery_id, a.claim, state, a.attempt, next, at_ms, a.status, a.error, pending, any])
        })
        .map_err(map_err)?;
    if moved == 1 && next.is_none() {
        promote_next(c, a.delivery_id)?;
    }
    if health.is_none() {
        // The endpoint was deleted meanwhile: there is no health to write.
        return Ok(());
    }
    match plan.endpoint {
        EndpointWrite::Keep => {}
        EndpointWrite::Healthy { last_success_ms } => {
            c.prepare_cached(
                "UPDATE webhook_endpoints SET failing_since_ms = NULL, last_success_ms = ?2, last_error = NULL
                 WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![a.endpoint_id, last_success_ms]))
            .map_err(map_err)?;
        }
        EndpointWrite::Failing { failing_since_ms } => {
            c.prepare_cached("UPDATE webhook_endpoints SET failing_since_ms = ?2, last_error = ?3 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![a.endpoint_id, failing_since_ms, a.error]))
                .map_err(map_err)?;
        }
        EndpointWrite::Disable { reason, failing_since_ms } => disable(c, a.endpoint_id, &reason, failing_since_ms)?,
    }
    Ok(())
}

/// The service disables an endpoint: its status says why, its queue is failed.
fn disable(c: &Connection, endpoint: i64, why: &str, at_ms: i64) -> Result<(), StoreError> {
    let n = c
        .prepare_cached(
            "UPDATE webhook_endpoints SET enabled = 0, disabled_reason = ?2, last_error = ?2,
                failing_since_ms = coalesce(failing_since_ms, ?3)
             WHERE id = ?1 AND enabled = 1",
        )
        .and_then(|mut s| s.execute(params![endpoint, why, at_ms]))
        .map_err(map_err)?;
    if n == 1 {
        tracing::warn!(endpoint_id = endpoint, reason = why, "webhook endpoint disabled");
        fail_unfinished(c, endpoint, why)?;
    }
    Ok(())
}

/// Read from the due index alone (its condition spelled, see the top of this file).
pub(crate) fn next_due_ms(c: &Connection) -> rusqlite::Result<Option<i64>> {
    static NEXT_DUE: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT min(next_attempt_ms) FROM webhook_deliveries WHERE state = '{}'",
            DeliveryState::Pending.as_str()
        )
    });
    c.prepare_cached(&NEXT_DUE)?.query_row([], |r| r.get(0))
}

/// Counted on the stream index alone (its condition spelled, see the top of this file).
pub(crate) fn queue_depth(c: &Connection) -> rusqlite::Result<i64> {
    static QUEUE_DEPTH: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT count(*) FROM webhook_deliveries WHERE state IN ('{}', '{}')",
            DeliveryState::Waiting.as_str(),
            DeliveryState::Pending.as_str()
        )
    });
    c.prepare_cached(&QUEUE_DEPTH)?.query_row([], |r| r.get(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lease is extended only under the claim that holds it, while its delivery is pending,
    /// and never shortened.
    #[test]
    fn a_lease_is_renewed_only_under_its_claim_and_while_pending() {
        let c = Connection::open_in_memory().unwrap();
        crate::sqlite::migrate(&c).unwrap();
        c.execute_batch(
            "PRAGMA foreign_keys = OFF;
             INSERT INTO webhook_deliveries (id, message_id, endpoint_id, state, next_attempt_ms, claim, queued_ms)
             VALUES (1, 1, 1, 'pending', 1000, 11, 0), (2, 1, 1, 'pending', 1000, 12, 0),
                    (3, 1, 1, 'delivered', 1000, 13, 0), (4, 1, 1, 'pending', 9000, 14, 0);",
        )
        .unwrap();
        let renewed = renew_leases(&c, &[(1, 11), (2, 99), (3, 13), (4, 14)], 5000).unwrap();
        assert_eq!(renewed, [1], "its own claim, pending, a later lease");
        let leases: Vec<i64> = c
            .prepare("SELECT next_attempt_ms FROM webhook_deliveries ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(leases, [5000, 1000, 1000, 9000]);
    }
}
