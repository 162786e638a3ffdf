//! Asynchronous order requests on `SQLite`: queued with their idempotency record, claimed
//! under a lease, finished (completed by the order's own insert, or failed) with their
//! `same.request.completed` webhook in the same transaction.

use rusqlite::{Connection, OptionalExtension, params};

use super::map_err;
use super::outbox::{self, Sink};
use crate::{
    COMPLETED_EVENT, ClaimedRequest, CreateOrderError, Mode, NewRequest, RequestEnd, RequestStatus, Scope, StoreError,
    StoredRequest,
};
use dropslot_core::ids::ClientId;

pub(super) fn queue(c: &Connection, scope: Scope, r: &NewRequest) -> Result<(), CreateOrderError> {
    let (client, mode) = (scope.client.0, scope.mode.as_str());
    if let Some(claim) = &r.idempotency {
        super::orders::claim_idempotency_key(c, scope, claim)?;
    }
    c.prepare_cached(
        "INSERT INTO order_requests (request_id, client_id, mode, status, payload, terms, drop_offs_count, created_at,
            next_attempt_ms)
         VALUES (?1, ?2, ?3, 'queued', ?4, ?5, ?6, ?7, ?8)",
    )
    .and_then(|mut s| {
        s.execute(params![
            r.request_id,
            client,
            mode,
            r.payload,
            r.terms,
            r.drop_offs_count as i64,
            r.created_at,
            r.due_ms
        ])
    })
    .map_err(map_err)?;
    if let Some(claim) = &r.idempotency {
        c.prepare_cached(
            "INSERT INTO idempotency_keys (client_id, mode, key, request_hash, status, body, created_at)
             VALUES (?1, ?2, ?3, ?4, 202, ?5, ?6)",
        )
        .and_then(|mut s| {
            s.execute(params![client, mode, claim.key, claim.request_hash, r.response, claim.now.as_second()])
        })
        .map_err(map_err)?;
    }
    Ok(())
}

pub(super) fn get(c: &Connection, scope: Scope, request_id: &str) -> rusqlite::Result<Option<StoredRequest>> {
    c.prepare_cached(
        "SELECT r.request_id, r.status, r.drop_offs_count, r.created_at, r.completed_at, o.unique_id, r.errors_json
         FROM order_requests r LEFT JOIN orders o ON o.id = r.order_id
         WHERE r.request_id = ?1 AND r.client_id = ?2 AND r.mode = ?3",
    )?
    .query_row(params![request_id, scope.client.0, scope.mode.as_str()], |r| {
        Ok(StoredRequest {
            request_id: r.get(0)?,
            status: super::parsed(r, 1, "request status", RequestStatus::parse)?,
            drop_offs_count: r.get::<_, i64>(2)? as usize,
            created_at: r.get(3)?,
            completed_at: r.get(4)?,
            order_unique_id: r.get(5)?,
            errors_json: r.get(6)?,
        })
    })
    .optional()
}

/// Due requests, oldest first, each moved to `processing` under a fresh claim tag.
pub(super) fn claim(
    c: &Connection,
    now_ms: i64,
    lease_until_ms: i64,
    limit: usize,
) -> Result<Vec<ClaimedRequest>, StoreError> {
    let mut due = c
        .prepare_cached(&format!(
            "SELECT id, client_id, mode, request_id, payload, terms, attempts, drop_offs_count, created_at FROM order_requests
             WHERE status IN ('queued', 'processing') AND next_attempt_ms <= ?1 ORDER BY id LIMIT {}",
            super::limit_bucket(limit)
        ))
        .and_then(|mut s| {
            s.query_map(params![now_ms], |r| {
                Ok(ClaimedRequest {
                    id: r.get(0)?,
                    claim: 0,
                    scope: Scope {
                        client: ClientId(r.get(1)?),
                        mode: super::parsed(r, 2, "mode", Mode::parse)?,
                    },
                    request_id: r.get(3)?,
                    payload: r.get(4)?,
                    terms: r.get(5)?,
                    attempts: r.get::<_, u32>(6)?.saturating_add(1),
                    drop_offs_count: r.get::<_, i64>(7)? as usize,
                    created_at: r.get(8)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(map_err)?;
    due.truncate(limit);
    for r in &mut due {
        r.claim = i64::from_le_bytes(dropslot_core::ids::random_bytes::<8>());
        c.prepare_cached(
            "UPDATE order_requests SET status = 'processing', claim = ?2, next_attempt_ms = ?3, attempts = ?4
             WHERE id = ?1",
        )
        .and_then(|mut s| s.execute(params![r.id, r.claim, lease_until_ms, r.attempts]))
        .map_err(map_err)?;
    }
    Ok(due)
}

/// Marks the claimed request completed by `order`, in the order's transaction. An error when
/// the claim was lost: the whole order then rolls back, and the new holder creates it once.
pub(super) fn complete(
    c: &Connection,
    sink: &mut Sink<'_>,
    scope: Scope,
    end: &RequestEnd,
    order: i64,
) -> Result<(), StoreError> {
    let n = c
        .prepare_cached(
            "UPDATE order_requests SET status = 'completed', completed_at = ?3, order_id = ?4, claim = NULL
             WHERE id = ?1 AND claim = ?2 AND status = 'processing'",
        )
        .and_then(|mut s| s.execute(params![end.id, end.claim, end.completed_at, order]))
        .map_err(map_err)?;
    if n != 1 {
        return Err(StoreError::Unavailable(crate::LEASE_LOST.into()));
    }
    finished_event(c, sink, scope, end)
}

/// Marks the claimed request failed; false (nothing written) when the claim was lost.
pub(super) fn fail(
    c: &Connection,
    sink: &mut Sink<'_>,
    end: &RequestEnd,
    errors_json: &str,
) -> Result<bool, StoreError> {
    let row: Option<(i64, String)> = c
        .prepare_cached(
            "UPDATE order_requests SET status = 'failed', completed_at = ?3, errors_json = ?4, claim = NULL
             WHERE id = ?1 AND claim = ?2 AND status = 'processing'
             RETURNING client_id, mode",
        )
        .and_then(|mut s| {
            s.query_row(params![end.id, end.claim, end.completed_at, errors_json], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(map_err)?;
    let Some((client, mode)) = row else { return Ok(false) };
    let mode = Mode::parse(&mode).ok_or_else(|| StoreError::Corrupt(format!("unknown mode {mode:?}")))?;
    finished_event(c, sink, Scope { client: ClientId(client), mode }, end)?;
    Ok(true)
}

/// `same.request.completed` to every enabled endpoint of the tenant that takes it. Not part
/// of any shipment's stream: it has no ordering key.
fn finished_event(c: &Connection, sink: &mut Sink<'_>, scope: Scope, end: &RequestEnd) -> Result<(), StoreError> {
    let endpoints = outbox::tenant_subscribers(c, scope, COMPLETED_EVENT)?;
    if !endpoints.is_empty() {
        let tenant = (scope.client.0, scope.mode.as_str());
        let queued = outbox::enqueue(c, tenant, COMPLETED_EVENT, &end.event_body, None, &endpoints, end.at)?;
        sink.queued += queued.len();
    }
    Ok(())
}

pub(super) fn next_due_ms(c: &Connection) -> rusqlite::Result<Option<i64>> {
    c.prepare_cached("SELECT min(next_attempt_ms) FROM order_requests WHERE status IN ('queued', 'processing')")?
        .query_row([], |r| r.get(0))
}
