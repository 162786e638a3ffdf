//! Webhook endpoints, deliveries and the dispatcher's claims on `PostgreSQL`. Several
//! processes' dispatchers and API handlers write at once, so what `SQLite`'s single writer
//! thread gave for free is row locks here; every function runs in the caller's transaction.
//!
//! Lock order, to keep concurrent units of work from deadlocking: an endpoint's row before
//! its deliveries' rows, and deliveries in id order (a stream's oldest first). Rows read to
//! decide an `UPDATE` are locked `FOR NO KEY UPDATE`: the lock that `UPDATE` takes anyway,
//! taken at the read, and the weakest that serialises two writers of one row. (The queue's
//! tables have no foreign keys on this backend, migration 0027: a message and its deliveries
//! are written together and nothing here is ever deleted.)

use crate::outbox::postgres::{add_delivery, enqueue, now_ms};
use crate::postgres::sql::Sql;
use crate::postgres::{PgStore, in_tx, map_err};
use crate::{
    AttemptOutcome, AttemptRecord, AuthHeader, Claimed, Claims, DeliveryState, EndpointPatch, NewEndpoint,
    ResendOutcome, Scope, StoreError, StoreResult, StoredAttempt, StoredDelivery, StoredEndpoint, WebhookStore,
};
use async_trait::async_trait;
use dropslot_core::webhooks::{EndpointWrite, Health, plan as attempt_plan};
use jiff::Timestamp;
use std::collections::HashMap;
use std::sync::LazyLock;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, Type};

// The states are the core's `DeliveryState` names. Most statements bind them; those whose
// condition is a partial index's (`webhook_deliveries_due`: `state = 'pending'`,
// `webhook_deliveries_stream`: `state IN ('waiting', 'pending')`) spell it, built once from
// the enum: the service's sessions plan every statement generically (`plan_cache_mode`), and
// a generic plan cannot prove a partial index's condition from a bound state.

#[async_trait]
impl WebhookStore for PgStore {
    async fn create_endpoint(&self, scope: Scope, e: NewEndpoint, now: Timestamp) -> StoreResult<StoredEndpoint> {
        Ok(in_tx!(self, |tx| create_endpoint(tx, scope, &e, now).await?))
    }

    async fn endpoints(&self, scope: Scope) -> StoreResult<Vec<StoredEndpoint>> {
        endpoints(&self.conn().await?, scope).await
    }

    async fn endpoint(&self, scope: Scope, id: i64) -> StoreResult<Option<StoredEndpoint>> {
        endpoint(&self.conn().await?, scope, id).await
    }

    async fn update_endpoint(
        &self,
        scope: Scope,
        id: i64,
        patch: EndpointPatch,
        now: Timestamp,
    ) -> StoreResult<Option<StoredEndpoint>> {
        Ok(in_tx!(self, |tx| update_endpoint(tx, scope, id, &patch, now).await?))
    }

    async fn delete_endpoint(&self, scope: Scope, id: i64, now: Timestamp) -> StoreResult<bool> {
        Ok(in_tx!(self, |tx| delete_endpoint(tx, scope, id, now).await?))
    }

    async fn rotate_secret(
        &self,
        scope: Scope,
        id: i64,
        secret: String,
        previous_until_ms: i64,
        now: Timestamp,
    ) -> StoreResult<Option<StoredEndpoint>> {
        Ok(in_tx!(self, |tx| rotate_secret(tx, scope, id, &secret, previous_until_ms, now).await?))
    }

    async fn queue_test(
        &self,
        scope: Scope,
        id: i64,
        event: &str,
        body: String,
        now: Timestamp,
    ) -> StoreResult<Option<StoredDelivery>> {
        let queued = in_tx!(self, |tx| {
            match queue_test(tx, scope, id, event, &body, now).await? {
                Some(d) => delivery(tx, scope, d).await?,
                None => None,
            }
        });
        self.notify(usize::from(queued.is_some()));
        Ok(queued)
    }

    async fn deliveries(
        &self,
        scope: Scope,
        endpoint: i64,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Option<Vec<StoredDelivery>>> {
        deliveries(&self.conn().await?, scope, endpoint, before, limit).await
    }

    async fn resend(&self, scope: Scope, delivery: i64) -> StoreResult<ResendOutcome> {
        let outcome = in_tx!(self, |tx| resend(tx, scope, delivery).await?);
        self.notify(usize::from(matches!(outcome, ResendOutcome::Queued(_))));
        Ok(outcome)
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
        // A claim's commit does not wait for its WAL flush: lost in a crash, its lease goes with
        // the process holding it, and the delivery is sent again (at least once), as it would
        // be after the lease ran out. The sends start one flush earlier (issue 33).
        Ok(in_tx!(self, |tx| {
            tx.batch_execute("SET LOCAL synchronous_commit TO off").await.map_err(map_err)?;
            let renewed = renew_leases(tx, &renew, lease_until_ms).await?;
            let claimed = if limit == 0 {
                Vec::new()
            } else {
                claim(tx, now_ms, lease_until_ms, limit, per_endpoint, &in_flight).await?
            };
            Claims { claimed, renewed }
        }))
    }

    async fn record_attempts(&self, attempts: Vec<AttemptRecord>) -> StoreResult<()> {
        in_tx!(self, |tx| record_attempts(tx, &attempts).await?);
        Ok(())
    }

    async fn next_due_ms(&self) -> StoreResult<Option<i64>> {
        next_due_ms(&self.conn().await?).await
    }

    async fn queue_depth(&self) -> StoreResult<i64> {
        queue_depth(&self.conn().await?).await
    }
}

/// A column as `T`: a type the schema does not have is corrupt data, never a panic.
fn col<'a, T: FromSql<'a>>(r: &'a Row, i: usize) -> Result<T, StoreError> {
    r.try_get(i).map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))
}

/// A stored BIGINT narrowed to its Rust type (an attempt count, an HTTP status).
fn narrow<T: TryFrom<i64>>(v: i64, what: &str) -> Result<T, StoreError> {
    T::try_from(v).map_err(|_| StoreError::Corrupt(format!("stored {what} {v}")))
}

fn narrow_opt<T: TryFrom<i64>>(v: Option<i64>, what: &str) -> Result<Option<T>, StoreError> {
    v.map(|v| narrow(v, what)).transpose()
}

const ENDPOINT_COLUMNS: &str = "id, url, events_json, description, enabled, disabled_reason, auth_header_name,
    auth_header_value, secret, previous_expires_ms, failing_since_ms, last_success_ms, last_error, created_at,
    updated_at";

fn endpoint_row(r: &Row) -> Result<StoredEndpoint, StoreError> {
    let value: Option<String> = col(r, 7)?;
    Ok(StoredEndpoint {
        id: col(r, 0)?,
        url: col(r, 1)?,
        events: crate::postgres::json_column(col(r, 2)?, "endpoint events")?,
        description: col(r, 3)?,
        enabled: col(r, 4)?,
        disabled_reason: col(r, 5)?,
        auth_header_name: col(r, 6)?,
        auth_header_last4: value.map(|v| last4(&v)),
        secret: col(r, 8)?,
        previous_expires_ms: col(r, 9)?,
        failing_since_ms: col(r, 10)?,
        last_success_ms: col(r, 11)?,
        last_error: col(r, 12)?,
        created_at: col::<Timestamp>(r, 13)?.to_string(),
        updated_at: col::<Timestamp>(r, 14)?.to_string(),
    })
}

/// The last 4 characters of a header value (fewer when it is that short).
fn last4(v: &str) -> String {
    let chars: Vec<char> = v.chars().collect();
    chars[chars.len().saturating_sub(4)..].iter().collect()
}

pub(crate) async fn endpoint(c: &impl Sql, scope: Scope, id: i64) -> Result<Option<StoredEndpoint>, StoreError> {
    endpoint_locked(c, scope, id, "").await
}

/// [`endpoint`] with a row lock clause (`""` for none).
async fn endpoint_locked(
    c: &impl Sql,
    scope: Scope,
    id: i64,
    lock: &str,
) -> Result<Option<StoredEndpoint>, StoreError> {
    c.query_opt(
        &format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints
             WHERE id = $1 AND client_id = $2 AND mode = $3 AND deleted_at IS NULL {lock}"
        ),
        &[&id, &scope.client.0, &scope.mode.as_str()],
    )
    .await
    .map_err(map_err)?
    .as_ref()
    .map(endpoint_row)
    .transpose()
}

pub(crate) async fn endpoints(c: &impl Sql, scope: Scope) -> Result<Vec<StoredEndpoint>, StoreError> {
    c.query(
        &format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints
             WHERE client_id = $1 AND mode = $2 AND deleted_at IS NULL ORDER BY id"
        ),
        &[&scope.client.0, &scope.mode.as_str()],
    )
    .await
    .map_err(map_err)?
    .iter()
    .map(endpoint_row)
    .collect()
}

pub(crate) async fn create_endpoint(
    c: &impl Sql,
    scope: Scope,
    e: &NewEndpoint,
    now: Timestamp,
) -> Result<StoredEndpoint, StoreError> {
    let events = crate::postgres::to_json(&e.events)?;
    let (name, value) = e.auth_header.as_ref().map(|h| (&h.name, &h.value)).unzip();
    let row = c
        .query_one(
            &format!(
                "INSERT INTO webhook_endpoints (client_id, mode, url, events_json, description, enabled,
                    auth_header_name, auth_header_value, secret, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING {ENDPOINT_COLUMNS}"
            ),
            &[
                &scope.client.0,
                &scope.mode.as_str(),
                &e.url,
                &events,
                &e.description,
                &e.enabled,
                &name,
                &value,
                &e.secret,
                &now,
            ],
        )
        .await
        .map_err(map_err)?;
    endpoint_row(&row)
}

/// Fails an endpoint's unfinished deliveries (it was disabled or deleted): nothing is sent
/// to it any more, and re-enabling replays nothing. Locks them in id order first (the
/// order a finishing attempt locks its stream in), waiting for in-flight claims and
/// attempts to commit, whose deliveries it then sees as they left them.
async fn fail_unfinished(c: &impl Sql, endpoint: i64, why: &str) -> Result<(), StoreError> {
    /// The stream index's condition, spelled (see the top of this file).
    static FAIL_UNFINISHED: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH unfinished AS MATERIALIZED (
            SELECT id FROM webhook_deliveries WHERE endpoint_id = $1 AND state IN ('{waiting}', '{pending}')
            ORDER BY id FOR NO KEY UPDATE)
         UPDATE webhook_deliveries d SET state = '{failed}', finished_ms = $3, last_error = $2
         FROM unfinished u WHERE d.id = u.id AND d.state IN ('{waiting}', '{pending}')",
            waiting = DeliveryState::Waiting.as_str(),
            pending = DeliveryState::Pending.as_str(),
            failed = DeliveryState::Failed.as_str(),
        )
    });
    c.execute(&FAIL_UNFINISHED, &[&endpoint, &why, &now_ms()]).await.map_err(map_err)?;
    Ok(())
}

pub(crate) async fn update_endpoint(
    c: &impl Sql,
    scope: Scope,
    id: i64,
    p: &EndpointPatch,
    now: Timestamp,
) -> Result<Option<StoredEndpoint>, StoreError> {
    // Locked: whether this change disables the endpoint (and fails its queue) is decided on
    // `before`, which a concurrent change or a dispatcher's disable must not move meanwhile.
    let Some(before) = endpoint_locked(c, scope, id, "FOR NO KEY UPDATE").await? else { return Ok(None) };
    let events = p.events.as_ref().map(crate::postgres::to_json).transpose()?;
    let header = p.auth_header.as_ref().map(|h| h.as_ref().map(|h| (h.name.clone(), h.value.clone())).unzip());
    let (set_header, name, value): (bool, Option<String>, Option<String>) = match header {
        None => (false, None, None),
        Some((n, v)) => (true, n, v),
    };
    let row = c
        .query_one(
            &format!(
                "UPDATE webhook_endpoints SET
                    url = coalesce($2::text, url),
                    events_json = coalesce($3::text, events_json),
                    description = coalesce($4::text, description),
                    enabled = coalesce($5::boolean, enabled),
                    auth_header_name = CASE WHEN $6::boolean THEN $7::text ELSE auth_header_name END,
                    auth_header_value = CASE WHEN $6::boolean THEN $8::text ELSE auth_header_value END,
                    disabled_reason = CASE WHEN coalesce($5::boolean, enabled) THEN NULL ELSE disabled_reason END,
                    failing_since_ms = CASE WHEN $5::boolean AND NOT enabled THEN NULL ELSE failing_since_ms END,
                    updated_at = $9
                 WHERE id = $1 RETURNING {ENDPOINT_COLUMNS}"
            ),
            &[&id, &p.url, &events, &p.description, &p.enabled, &set_header, &name, &value, &now],
        )
        .await
        .map_err(map_err)?;
    if before.enabled && p.enabled == Some(false) {
        fail_unfinished(c, id, "the endpoint was disabled").await?;
    }
    endpoint_row(&row).map(Some)
}

pub(crate) async fn delete_endpoint(c: &impl Sql, scope: Scope, id: i64, now: Timestamp) -> Result<bool, StoreError> {
    // The row stays for the delivery log's sake, without its credentials. The `UPDATE` locks
    // it, so of two concurrent deletes only one matches `deleted_at IS NULL`.
    let n = c
        .execute(
            "UPDATE webhook_endpoints SET deleted_at = $4, enabled = false, auth_header_value = NULL, secret = '',
                previous_secret = NULL
             WHERE id = $1 AND client_id = $2 AND mode = $3 AND deleted_at IS NULL",
            &[&id, &scope.client.0, &scope.mode.as_str(), &now],
        )
        .await
        .map_err(map_err)?;
    if n == 1 {
        fail_unfinished(c, id, "the endpoint was deleted").await?;
    }
    Ok(n == 1)
}

pub(crate) async fn rotate_secret(
    c: &impl Sql,
    scope: Scope,
    id: i64,
    secret: &str,
    previous_until_ms: i64,
    now: Timestamp,
) -> Result<Option<StoredEndpoint>, StoreError> {
    c.query_opt(
        &format!(
            "UPDATE webhook_endpoints SET previous_secret = secret, previous_expires_ms = $5, secret = $4,
                updated_at = $6
             WHERE id = $1 AND client_id = $2 AND mode = $3 AND deleted_at IS NULL RETURNING {ENDPOINT_COLUMNS}"
        ),
        &[&id, &scope.client.0, &scope.mode.as_str(), &secret, &previous_until_ms, &now],
    )
    .await
    .map_err(map_err)?
    .as_ref()
    .map(endpoint_row)
    .transpose()
}

pub(crate) async fn queue_test(
    c: &impl Sql,
    scope: Scope,
    id: i64,
    event: &str,
    body: &str,
    now: Timestamp,
) -> Result<Option<i64>, StoreError> {
    // Shared lock: a concurrent delete or disable waits for this commit and then fails the
    // new delivery, or commits first and this sees the endpoint gone; never a delivery
    // queued to an endpoint that was deleted meanwhile.
    if endpoint_locked(c, scope, id, "FOR SHARE").await?.is_none() {
        return Ok(None);
    }
    let ids = enqueue(c, (scope.client.0, scope.mode.as_str()), event, body, None, &[id], now).await?;
    Ok(ids.first().copied())
}

const DELIVERY_COLUMNS: &str = "d.id, d.endpoint_id, m.webhook_id, m.event, d.state, d.attempts, d.next_attempt_ms,
    d.queued_ms, d.finished_ms, d.last_status, d.last_error";

fn delivery_row(r: &Row) -> Result<StoredDelivery, StoreError> {
    let state = crate::postgres::parsed(col(r, 4)?, "delivery state", DeliveryState::parse)?;
    Ok(StoredDelivery {
        id: col(r, 0)?,
        endpoint_id: col(r, 1)?,
        webhook_id: col(r, 2)?,
        event: col(r, 3)?,
        state,
        attempts: narrow(col(r, 5)?, "attempt count")?,
        next_attempt_ms: if state == DeliveryState::Pending { Some(col(r, 6)?) } else { None },
        queued_ms: col(r, 7)?,
        finished_ms: col(r, 8)?,
        last_status: narrow_opt(col(r, 9)?, "HTTP status")?,
        last_error: col(r, 10)?,
        log: Vec::new(),
    })
}

fn attempt_row(r: &Row) -> Result<StoredAttempt, StoreError> {
    Ok(StoredAttempt {
        attempt: narrow(col(r, 1)?, "attempt number")?,
        at: col::<Timestamp>(r, 2)?.to_string(),
        status: narrow_opt(col(r, 3)?, "HTTP status")?,
        latency_ms: col(r, 4)?,
        response: col(r, 5)?,
        error: col(r, 6)?,
    })
}

/// The attempts of `deliveries`, oldest first, as (delivery id, attempt): one query for a
/// whole page, not one per delivery.
async fn attempts(c: &impl Sql, deliveries: &[i64]) -> Result<Vec<(i64, StoredAttempt)>, StoreError> {
    c.query(
        "SELECT delivery_id, attempt, at, status, latency_ms, response, error FROM webhook_attempts
         WHERE delivery_id = ANY($1) ORDER BY id",
        &[&deliveries],
    )
    .await
    .map_err(map_err)?
    .iter()
    .map(|r| Ok((col(r, 0)?, attempt_row(r)?)))
    .collect()
}

/// Fills each delivery's log.
async fn with_attempts(c: &impl Sql, list: &mut [StoredDelivery]) -> Result<(), StoreError> {
    if list.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = list.iter().map(|d| d.id).collect();
    let at: HashMap<i64, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    for (delivery, a) in attempts(c, &ids).await? {
        if let Some(d) = at.get(&delivery).and_then(|&i| list.get_mut(i)) {
            d.log.push(a);
        }
    }
    Ok(())
}

/// One delivery of the caller's, with its attempts.
pub(crate) async fn delivery(c: &impl Sql, scope: Scope, id: i64) -> Result<Option<StoredDelivery>, StoreError> {
    let Some(row) = c
        .query_opt(
            &format!(
                "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d
                 JOIN webhook_messages m ON m.id = d.message_id
                 WHERE d.id = $1 AND m.client_id = $2 AND m.mode = $3"
            ),
            &[&id, &scope.client.0, &scope.mode.as_str()],
        )
        .await
        .map_err(map_err)?
    else {
        return Ok(None);
    };
    let mut d = [delivery_row(&row)?];
    with_attempts(c, &mut d).await?;
    let [d] = d;
    Ok(Some(d))
}

pub(crate) async fn deliveries(
    c: &impl Sql,
    scope: Scope,
    endpoint_id: i64,
    before: Option<i64>,
    limit: usize,
) -> Result<Option<Vec<StoredDelivery>>, StoreError> {
    if endpoint(c, scope, endpoint_id).await?.is_none() {
        return Ok(None);
    }
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut list = c
        .query(
            &format!(
                "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d
                 JOIN webhook_messages m ON m.id = d.message_id
                 WHERE d.endpoint_id = $1 AND ($2::bigint IS NULL OR d.id < $2) ORDER BY d.id DESC LIMIT $3"
            ),
            &[&endpoint_id, &before, &limit],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(delivery_row)
        .collect::<Result<Vec<_>, _>>()?;
    with_attempts(c, &mut list).await?;
    Ok(Some(list))
}

pub(crate) async fn resend(c: &impl Sql, scope: Scope, id: i64) -> Result<ResendOutcome, StoreError> {
    // The endpoint's row share-locked, as in `queue_test`: `enabled` stays true until the new
    // delivery is committed, and a disable or delete waiting on it then fails that one too.
    let found = c
        .query_opt(
            "SELECT d.message_id, d.endpoint_id, d.ordering_key, e.enabled FROM webhook_deliveries d
             JOIN webhook_endpoints e ON e.id = d.endpoint_id
             WHERE d.id = $1 AND e.client_id = $2 AND e.mode = $3 AND e.deleted_at IS NULL
             FOR SHARE OF e",
            &[&id, &scope.client.0, &scope.mode.as_str()],
        )
        .await
        .map_err(map_err)?;
    let Some(r) = found else { return Ok(ResendOutcome::NotFound) };
    let (message, endpoint, key, enabled): (i64, i64, Option<i64>, bool) =
        (col(&r, 0)?, col(&r, 1)?, col(&r, 2)?, col(&r, 3)?);
    if !enabled {
        return Ok(ResendOutcome::EndpointDisabled);
    }
    let new = add_delivery(c, message, endpoint, key).await?;
    let d =
        delivery(c, scope, new).await?.ok_or_else(|| StoreError::Corrupt("a delivery vanished mid-change".into()))?;
    Ok(ResendOutcome::Queued(d))
}

/// Why a due delivery is failed instead of sent.
const ENDPOINT_GONE: &str = "the endpoint was disabled or deleted";
/// A delivery whose message or endpoint row is missing: nothing the service writes leaves
/// one (the queue's tables have no foreign keys on this backend, migration 0027), so only a
/// hand-made change does; it is failed, visibly, rather than left pending unseen.
const ROW_MISSING: &str = "its message or endpoint is missing from the database";

/// Fails due deliveries (locked by this claim) whose endpoint was disabled or deleted, with
/// the rest of their streams, with `why`. Disabling fails an endpoint's queue in its own
/// transaction, but a change that read the endpoint as enabled just before can commit its
/// deliveries just after; those are caught here, never sent. (On `SQLite` the single writer
/// orders the two.) The heads by id, then their streams' waiting rows by (endpoint, key): each
/// an index lookup.
async fn fail_orphans(c: &impl Sql, ids: &[i64], why: &str) -> Result<(), StoreError> {
    /// The streams' waiting rows through the stream index: its condition is implied only by a
    /// spelled state (see the top of this file).
    static FAIL_ORPHANS: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH heads AS (
            UPDATE webhook_deliveries SET state = '{failed}', finished_ms = $2, last_error = $3::text
            WHERE id = ANY($1) RETURNING endpoint_id, ordering_key
         )
         UPDATE webhook_deliveries d SET state = '{failed}', finished_ms = $2, last_error = $3::text
         FROM (SELECT DISTINCT endpoint_id, ordering_key FROM heads) h
         WHERE d.endpoint_id = h.endpoint_id AND d.ordering_key = h.ordering_key AND d.state = '{waiting}'",
            failed = DeliveryState::Failed.as_str(),
            waiting = DeliveryState::Waiting.as_str(),
        )
    });
    c.execute(&FAIL_ORPHANS, &[&ids, &now_ms(), &why]).await.map_err(map_err)?;
    Ok(())
}

/// Claims due deliveries, the longest due first, within each endpoint's share of the
/// claimer's pool (endpoints already at their share are not even read). Only stream heads
/// are `pending`, and a claimed one is not due again before its lease ends, so a stream
/// never has two deliveries in flight.
///
/// Across processes: the candidates are locked `FOR UPDATE OF d SKIP LOCKED`, so a row
/// another dispatcher is claiming (or an attempt is finishing) is passed over, never waited
/// for nor taken twice; one whose claim committed after this statement began is re-checked
/// by the lock against `next_attempt_ms <= $1` (now its lease's end) and dropped. Only the
/// delivery rows are locked (`OF d`): the joined endpoint and message are just read, so
/// claimers of one endpoint's deliveries do not skip each other. The chosen ones get their
/// lease and claim tag while still locked; the others are released at the commit.
///
/// Both statements keep to indexes whatever the statistics say (issue 27): the candidates come
/// in `next_attempt_ms` order from the due index, each one's message is a lookup by its key
/// (a `LATERAL … LIMIT 1` is never turned into a hash join over every message), and the lease
/// names its rows by id. The cost model prices each row looked up by key as a random page read,
/// so for a list of ids and a table of a few pages it prefers reading the whole table, and the
/// connection's statement cache keeps that plan while the table grows: sequential scans are
/// therefore off for the service's sessions (`PgStore::open`).
pub(crate) async fn claim(
    c: &impl Sql,
    now_ms: i64,
    lease_until_ms: i64,
    limit: usize,
    per_endpoint: usize,
    in_flight: &[(i64, usize)],
) -> Result<Vec<Claimed>, StoreError> {
    /// The due index's condition, spelled (see the top of this file).
    static CLAIM: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT d.id, d.endpoint_id, d.attempts, m.webhook_id, m.body, e.url, e.secret, e.previous_secret,
                e.previous_expires_ms, e.auth_header_name, e.auth_header_value, e.enabled
             FROM webhook_deliveries d
             LEFT JOIN LATERAL (SELECT webhook_id, body FROM webhook_messages WHERE id = d.message_id LIMIT 1) m ON true
             LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
             WHERE d.state = '{}' AND d.next_attempt_ms <= $1 AND d.endpoint_id <> ALL($3::bigint[])
             ORDER BY d.next_attempt_ms LIMIT $2
             FOR UPDATE OF d SKIP LOCKED",
            DeliveryState::Pending.as_str()
        )
    });
    let mut counts: HashMap<i64, usize> = in_flight.iter().copied().collect();
    let busy: Vec<i64> = in_flight.iter().filter(|(_, n)| *n >= per_endpoint).map(|(e, _)| *e).collect();
    let scan = i64::try_from(limit.saturating_mul(4)).unwrap_or(i64::MAX);
    let rows = c.query(&CLAIM, &[&now_ms, &scan, &busy]).await.map_err(map_err)?;
    let mut claimed = Vec::with_capacity(rows.len().min(limit));
    let (mut orphans, mut broken): (Vec<i64>, Vec<i64>) = (Vec::new(), Vec::new());
    for r in &rows {
        if claimed.len() == limit {
            break;
        }
        let endpoint_id: i64 = col(r, 1)?;
        match (col::<Option<String>>(r, 3)?, col::<Option<bool>>(r, 11)?) {
            (Some(_), Some(true)) => {}
            (Some(_), Some(false)) => {
                orphans.push(col(r, 0)?);
                continue;
            }
            (None, _) | (_, None) => {
                broken.push(col(r, 0)?);
                continue;
            }
        }
        let n = counts.entry(endpoint_id).or_default();
        if *n >= per_endpoint {
            continue;
        }
        *n += 1;
        let attempts: u32 = narrow(col(r, 2)?, "attempt count")?;
        let previous: Option<String> = col(r, 7)?;
        let until: Option<i64> = col(r, 8)?;
        let name: Option<String> = col(r, 9)?;
        let value: Option<String> = col(r, 10)?;
        claimed.push(Claimed {
            delivery_id: col(r, 0)?,
            claim: i64::from_le_bytes(dropslot_core::ids::random_bytes::<8>()),
            endpoint_id,
            attempt: attempts
                .checked_add(1)
                .ok_or_else(|| StoreError::Corrupt(format!("stored attempt count {attempts}")))?,
            webhook_id: col(r, 3)?,
            body: col(r, 4)?,
            url: col(r, 5)?,
            secret: col(r, 6)?,
            previous_secret: previous.zip(until),
            auth_header: name.zip(value).map(|(name, value)| AuthHeader { name, value }),
        });
    }
    if !orphans.is_empty() {
        fail_orphans(c, &orphans, ENDPOINT_GONE).await?;
    }
    if !broken.is_empty() {
        tracing::error!(deliveries = ?broken, "webhook deliveries without their message or endpoint row failed");
        fail_orphans(c, &broken, ROW_MISSING).await?;
    }
    if claimed.is_empty() {
        return Ok(claimed);
    }
    let ids: Vec<i64> = claimed.iter().map(|d| d.delivery_id).collect();
    let tags: Vec<i64> = claimed.iter().map(|d| d.claim).collect();
    c.execute(
        "UPDATE webhook_deliveries SET next_attempt_ms = $1, claim = ($3::bigint[])[array_position($2::bigint[], id)]
         WHERE id = ANY($2::bigint[])",
        &[&lease_until_ms, &ids, &tags],
    )
    .await
    .map_err(map_err)?;
    Ok(claimed)
}

/// Extends the lease of each (delivery, claim) pair still pending under that claim to
/// `lease_until_ms`; the ids extended. A row another transaction holds (this process's own
/// recording of it, waiting on a lock) is skipped, not waited for: the claim round goes on, and
/// the next one asks again. Nothing when `renew` is empty.
async fn renew_leases(c: &impl Sql, renew: &[(i64, i64)], lease_until_ms: i64) -> Result<Vec<i64>, StoreError> {
    if renew.is_empty() {
        return Ok(Vec::new());
    }
    let (ids, claims): (Vec<i64>, Vec<i64>) = renew.iter().copied().unzip();
    let rows = c
        .query_typed(
            "UPDATE webhook_deliveries d SET next_attempt_ms = $3
             WHERE d.id IN (
                SELECT x.id FROM webhook_deliveries x
                JOIN unnest($1::bigint[], $2::bigint[]) AS u (id, claim) ON x.id = u.id AND x.claim = u.claim
                WHERE x.state = $4 AND x.next_attempt_ms < $3
                FOR NO KEY UPDATE OF x SKIP LOCKED)
             RETURNING d.id",
            &[
                (&ids, Type::INT8_ARRAY),
                (&claims, Type::INT8_ARRAY),
                (&lease_until_ms, Type::INT8),
                (&DeliveryState::Pending.as_str(), Type::TEXT),
            ],
        )
        .await
        .map_err(map_err)?;
    rows.iter().map(|r| col(r, 0)).collect()
}

/// Moves the oldest waiting delivery of the finished delivery's stream to `pending` (the
/// finished one has left the stream, so the stream's next unfinished one is it; the `IN`
/// matches the partial index's condition, which keeps this a point lookup). Whether that one
/// is waiting is checked on the locked row itself, so the `UPDATE` finds it by its key alone
/// (a state written in its `WHERE` would let the planner read it through the partial index's
/// whole range instead). The stream's lock is held (see [`promote_after`]).
///
/// The finished delivery's row is already locked by the `UPDATE` that finished it, so a
/// concurrent `add_delivery` to this stream that locks the stream's rows waits for this
/// commit. The stream's head is locked here before it is promoted: a head finished by a
/// transaction that committed meanwhile fails the lock's re-check and the next row is
/// taken, and of two promoters of one stream the second waits, then finds the head
/// `pending` and leaves it.
async fn promote_locked(c: &impl Sql, delivery: i64) -> Result<(), StoreError> {
    static PROMOTE: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE webhook_deliveries SET state = '{pending}', next_attempt_ms = LEAST(next_attempt_ms, $2::bigint)
         WHERE id = (
            SELECT next.id FROM (
                SELECT n.id, n.state FROM webhook_deliveries n JOIN webhook_deliveries d
                    ON n.endpoint_id = d.endpoint_id AND n.ordering_key = d.ordering_key
                WHERE d.id = $1 AND n.state IN ('{waiting}', '{pending}')
                ORDER BY n.id LIMIT 1 FOR NO KEY UPDATE OF n
            ) next WHERE next.state = '{waiting}')",
            pending = DeliveryState::Pending.as_str(),
            waiting = DeliveryState::Waiting.as_str(),
        )
    });
    c.execute(&PROMOTE, &[&delivery, &now_ms()]).await.map_err(map_err)?;
    Ok(())
}

/// How long recording attempts waits for a row or stream lock at most: another transaction
/// holding an endpoint's row (a client's change, the other process's batch, the last
/// transaction of a process whose death the server has not noticed yet) then fails the call
/// instead of stalling it. The dispatcher writes each endpoint's attempts again on their own,
/// so the other endpoints' attempts are recorded meanwhile.
const RECORD_LOCK_WAIT: &str = "2s";

/// An endpoint's health columns as the batch leaves them (written once, at the end).
struct HealthRow {
    failing_since_ms: Option<i64>,
    last_success_ms: Option<i64>,
    last_error: Option<String>,
}

/// Records a batch of attempts in a fixed number of statements, however many (issue 27: one
/// transaction of six statements per attempt bounded the fan-out at about 700 deliveries a
/// second). Loads the endpoints' health, lets the core's planner decide each attempt in
/// (endpoint, delivery) order on the health the earlier ones left (`Health::after`), and
/// persists the plans: the endpoints' last health, the attempts, the deliveries' moves, and the
/// promotion of each finished stream's next delivery.
///
/// Lock order: endpoint rows (by id) first, then the deliveries, then their streams (by
/// endpoint and key): the order `update_endpoint`, `delete_endpoint` and `disable` lock them
/// in, so a client disabling an endpoint meanwhile waits instead of deadlocking. A success
/// reads its endpoint's health without a lock (most write nothing: a healthy endpoint is
/// rewritten at most once a second, and a locking read would queue the other process's
/// batches behind this one); a failure locks it, as its streak's start and the disable
/// decision must see every other failure. Only the claim that made an attempt moves its
/// delivery: if its lease ran out and another dispatcher took it over, that one decides.
pub(crate) async fn record_attempts(c: &impl Sql, attempts: &[AttemptRecord]) -> Result<(), StoreError> {
    let mut batch: Vec<&AttemptRecord> = attempts.iter().collect();
    batch.sort_by_key(|a| (a.endpoint_id, a.delivery_id));
    if batch.is_empty() {
        return Ok(());
    }
    c.execute("SELECT set_config('lock_timeout', $1, true)", &[&RECORD_LOCK_WAIT]).await.map_err(map_err)?;
    let mut failing: Vec<i64> =
        batch.iter().filter(|a| a.outcome != AttemptOutcome::Delivered).map(|a| a.endpoint_id).collect();
    failing.dedup();
    let mut succeeding: Vec<i64> = batch.iter().map(|a| a.endpoint_id).filter(|e| !failing.contains(e)).collect();
    succeeding.dedup();
    let mut health: HashMap<i64, Health> = HashMap::new();
    for (ids, read) in [
        (
            &failing,
            "SELECT id, failing_since_ms, last_success_ms, last_error IS NOT NULL FROM webhook_endpoints
             WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE",
        ),
        (
            &succeeding,
            "SELECT id, failing_since_ms, last_success_ms, last_error IS NOT NULL FROM webhook_endpoints
             WHERE id = ANY($1)",
        ),
    ] {
        if ids.is_empty() {
            continue;
        }
        for r in c.query(read, &[ids]).await.map_err(map_err)? {
            let h = Health { failing_since_ms: col(&r, 1)?, last_success_ms: col(&r, 2)?, has_error: col(&r, 3)? };
            health.insert(col(&r, 0)?, h);
        }
    }

    let mut rows: std::collections::BTreeMap<i64, HealthRow> = std::collections::BTreeMap::new();
    let mut disables: Vec<(i64, String, i64)> = Vec::new();
    let n = batch.len();
    let (mut ids, mut claims, mut states, mut numbers, mut nexts, mut ats, mut statuses, mut errors) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut instants, mut latencies, mut responses, mut any_claims) =
        (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    for a in &batch {
        let at_ms = a.at.as_millisecond();
        let error = a.error.as_deref();
        let known = health.get_mut(&a.endpoint_id);
        let plan =
            attempt_plan(a.outcome, error, known.as_deref().copied().unwrap_or_default(), at_ms, a.disable_after_ms);
        if let Some(h) = known {
            *h = h.after(&plan.endpoint, error);
            let last_error = match &plan.endpoint {
                EndpointWrite::Keep => None,
                EndpointWrite::Healthy { .. } => Some(None),
                EndpointWrite::Failing { .. } => Some(a.error.clone()),
                EndpointWrite::Disable { reason, failing_since_ms } => {
                    if !disables.iter().any(|(e, _, _)| *e == a.endpoint_id) {
                        disables.push((a.endpoint_id, reason.clone(), *failing_since_ms));
                    }
                    None
                }
            };
            if let Some(last_error) = last_error {
                let row =
                    HealthRow { failing_since_ms: h.failing_since_ms, last_success_ms: h.last_success_ms, last_error };
                rows.insert(a.endpoint_id, row);
            }
        }
        ids.push(a.delivery_id);
        claims.push(a.claim);
        states.push(plan.delivery.state().as_str());
        numbers.push(i64::from(a.attempt));
        nexts.push(plan.delivery.next_attempt_ms());
        any_claims.push(plan.delivery.settles_any_claim());
        ats.push(at_ms);
        statuses.push(a.status.map(i64::from));
        errors.push(a.error.as_deref());
        instants.push(a.at);
        latencies.push(a.latency_ms);
        responses.push(a.response.as_deref());
    }

    if !rows.is_empty() {
        let written: Vec<i64> = rows.keys().copied().collect();
        // The succeeding endpoints were read unlocked: their rows are locked here, in id order.
        let unlocked: Vec<i64> = written.iter().copied().filter(|e| !failing.contains(e)).collect();
        if !unlocked.is_empty() {
            c.execute("SELECT 1 FROM webhook_endpoints WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE", &[&unlocked])
                .await
                .map_err(map_err)?;
        }
        let since: Vec<Option<i64>> = rows.values().map(|r| r.failing_since_ms).collect();
        let success: Vec<Option<i64>> = rows.values().map(|r| r.last_success_ms).collect();
        let last_errors: Vec<Option<&str>> = rows.values().map(|r| r.last_error.as_deref()).collect();
        c.execute_typed(
            "UPDATE webhook_endpoints e SET failing_since_ms = u.since, last_success_ms = u.success, last_error = u.error
             FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[]) AS u (id, since, success, error)
             WHERE e.id = u.id",
            &[
                (&written, Type::INT8_ARRAY),
                (&since, Type::INT8_ARRAY),
                (&success, Type::INT8_ARRAY),
                (&last_errors, Type::TEXT_ARRAY),
            ],
        )
        .await
        .map_err(map_err)?;
    }
    c.execute_typed(
        "INSERT INTO webhook_attempts (delivery_id, attempt, at, status, latency_ms, response, error)
         SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::bigint[], $5::bigint[], $6::text[],
            $7::text[])",
        &[
            (&ids, Type::INT8_ARRAY),
            (&numbers, Type::INT8_ARRAY),
            (&instants, Type::TIMESTAMPTZ_ARRAY),
            (&statuses, Type::INT8_ARRAY),
            (&latencies, Type::INT8_ARRAY),
            (&responses, Type::TEXT_ARRAY),
            (&errors, Type::TEXT_ARRAY),
        ],
    )
    .await
    .map_err(map_err)?;
    // The state each delivery must still be in, `pending`, is a parameter: as a constant it
    // would match the partial indexes' conditions, and a plan made while they are small reads
    // their whole range. A retried delivery keeps its stream's head. Only the claim that made
    // an attempt moves its delivery, except an answer (`DeliveryWrite::settles_any_claim`).
    let moved = c
        .query_typed(
            "UPDATE webhook_deliveries d SET state = u.state, attempts = GREATEST(d.attempts, u.attempt),
                next_attempt_ms = coalesce(u.next, d.next_attempt_ms), claim = NULL,
                finished_ms = CASE WHEN u.next IS NULL THEN u.at ELSE NULL END, last_status = u.status,
                last_error = u.error
             FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[],
                    $7::bigint[], $8::text[], $10::bool[])
                    AS u (id, claim, state, attempt, next, at, status, error, any_claim)
             WHERE d.id = u.id AND (d.claim = u.claim OR u.any_claim) AND d.state = $9
             RETURNING d.id, d.endpoint_id, d.ordering_key, u.next IS NULL",
            &[
                (&ids, Type::INT8_ARRAY),
                (&claims, Type::INT8_ARRAY),
                (&states, Type::TEXT_ARRAY),
                (&numbers, Type::INT8_ARRAY),
                (&nexts, Type::INT8_ARRAY),
                (&ats, Type::INT8_ARRAY),
                (&statuses, Type::INT8_ARRAY),
                (&errors, Type::TEXT_ARRAY),
                (&DeliveryState::Pending.as_str(), Type::TEXT),
                (&any_claims, Type::BOOL_ARRAY),
            ],
        )
        .await
        .map_err(map_err)?;
    let mut finished: Vec<(i64, i64, i64)> = Vec::new();
    for r in &moved {
        if let (true, Some(key)) = (col::<bool>(r, 3)?, col::<Option<i64>>(r, 2)?) {
            finished.push((col(r, 1)?, key, col(r, 0)?));
        }
    }
    promote_after(c, finished).await?;
    // Disabling fails the endpoint's unfinished deliveries, so it comes after they moved.
    for (endpoint, reason, since) in disables {
        if health.contains_key(&endpoint) {
            disable(c, endpoint, &reason, since).await?;
        }
    }
    Ok(())
}

/// After deliveries finished (each as (endpoint, key, delivery)): takes their streams' locks
/// (see `crate::outbox::postgres::lock_stream`) in (endpoint, key) order, so an append racing the finish either
/// committed before (and is promoted here) or sees the head finished (and is `pending`); then
/// promotes the next delivery of each stream that has one. Two statements when none has.
async fn promote_after(c: &impl Sql, mut finished: Vec<(i64, i64, i64)>) -> Result<(), StoreError> {
    if finished.is_empty() {
        return Ok(());
    }
    finished.sort_unstable();
    finished.dedup_by_key(|(e, k, _)| (*e, *k));
    let streams: Vec<(i64, i64)> = finished.iter().map(|(e, k, _)| (*e, *k)).collect();
    let unfinished = crate::outbox::postgres::streams_busy(c, &streams).await?;
    for (_, _, delivery) in finished.iter().filter(|(e, k, _)| unfinished.contains(&(*e, *k))) {
        promote_locked(c, *delivery).await?;
    }
    Ok(())
}

/// The service disables an endpoint: its status says why, its queue is failed. The
/// `UPDATE` locks the row, so of two concurrent disables only one matches `enabled` and
/// fails the queue.
async fn disable(c: &impl Sql, endpoint: i64, why: &str, at_ms: i64) -> Result<(), StoreError> {
    let n = c
        .execute(
            "UPDATE webhook_endpoints SET enabled = false, disabled_reason = $2, last_error = $2,
                failing_since_ms = coalesce(failing_since_ms, $3)
             WHERE id = $1 AND enabled",
            &[&endpoint, &why, &at_ms],
        )
        .await
        .map_err(map_err)?;
    if n == 1 {
        tracing::warn!(endpoint_id = endpoint, reason = why, "webhook endpoint disabled");
        fail_unfinished(c, endpoint, why).await?;
    }
    Ok(())
}

/// Read from the due index alone (its condition spelled, see the top of this file).
pub(crate) async fn next_due_ms(c: &impl Sql) -> Result<Option<i64>, StoreError> {
    static NEXT_DUE: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT min(next_attempt_ms) FROM webhook_deliveries WHERE state = '{}'",
            DeliveryState::Pending.as_str()
        )
    });
    let row = c.query_one(&NEXT_DUE, &[]).await.map_err(map_err)?;
    col(&row, 0)
}

/// Counted on the stream index alone (its condition spelled, see the top of this file).
pub(crate) async fn queue_depth(c: &impl Sql) -> Result<i64, StoreError> {
    static QUEUE_DEPTH: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT count(*) FROM webhook_deliveries WHERE state IN ('{}', '{}')",
            DeliveryState::Waiting.as_str(),
            DeliveryState::Pending.as_str()
        )
    });
    let row = c.query_one(&QUEUE_DEPTH, &[]).await.map_err(map_err)?;
    col(&row, 0)
}
