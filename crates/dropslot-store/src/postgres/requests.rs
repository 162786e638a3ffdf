//! Asynchronous order requests on `PostgreSQL`: queued with their idempotency record,
//! claimed with `FOR UPDATE SKIP LOCKED` under a lease (so several processes share the
//! queue), finished (completed by the order's own transaction, or failed) with their
//! `same.request.completed` webhook in the same transaction.

use tokio_postgres::types::Type;

use super::lifecycle::column;
use super::outbox::{self, Sink};
use super::sql::Sql;
use super::{map_err, parsed};
use crate::{
    COMPLETED_EVENT, ClaimedRequest, CreateOrderError, LEASE_LOST, Mode, NewRequest, RequestEnd, RequestStatus, Scope,
    StoreError, StoredRequest,
};
use dropslot_core::ids::ClientId;

pub(super) async fn queue(c: &impl Sql, scope: Scope, r: &NewRequest) -> Result<(), CreateOrderError> {
    if let Some(claim) = &r.idempotency {
        super::insert::claim_idempotency_key(c, scope, claim, 202, &r.response).await?;
    }
    c.execute_typed(
        "INSERT INTO order_requests (request_id, client_id, mode, status, payload, terms, drop_offs_count, created_at,
            next_attempt_ms)
         VALUES ($1, $2, $3, 'queued', $4, $5, $6, $7, $8)",
        &[
            (&r.request_id, Type::TEXT),
            (&scope.client.0, Type::INT8),
            (&scope.mode.as_str(), Type::TEXT),
            (&r.payload, Type::TEXT),
            (&r.terms, Type::TEXT),
            (&(r.drop_offs_count as i64), Type::INT8),
            (&r.created_at, Type::TEXT),
            (&r.due_ms, Type::INT8),
        ],
    )
    .await
    .map_err(map_err)?;
    Ok(())
}

pub(super) async fn get(c: &impl Sql, scope: Scope, request_id: &str) -> Result<Option<StoredRequest>, StoreError> {
    let row = c
        .query_opt(
            "SELECT r.request_id, r.status, r.drop_offs_count, r.created_at, r.completed_at, o.unique_id, r.errors_json
             FROM order_requests r LEFT JOIN orders o ON o.id = r.order_id
             WHERE r.request_id = $1 AND r.client_id = $2 AND r.mode = $3",
            &[&request_id, &scope.client.0, &scope.mode.as_str()],
        )
        .await
        .map_err(map_err)?;
    row.map(|r| {
        Ok(StoredRequest {
            request_id: column(&r, 0)?,
            status: parsed(column(&r, 1)?, "request status", RequestStatus::parse)?,
            drop_offs_count: super::lifecycle::narrow(column(&r, 2)?, "drop-off count")?,
            created_at: column(&r, 3)?,
            completed_at: column(&r, 4)?,
            order_unique_id: column(&r, 5)?,
            errors_json: column(&r, 6)?,
        })
    })
    .transpose()
}

/// Due requests, oldest first, each moved to `processing` under a fresh claim tag; rows
/// another process is claiming are skipped, never waited for.
pub(super) async fn claim(
    c: &impl Sql,
    now_ms: i64,
    lease_until_ms: i64,
    limit: usize,
) -> Result<Vec<ClaimedRequest>, StoreError> {
    let tag = i64::from_le_bytes(dropslot_core::ids::random_bytes::<8>());
    let rows = c
        .query(
            "UPDATE order_requests r SET status = 'processing', claim = $3, next_attempt_ms = $2,
                attempts = r.attempts + 1
             FROM (SELECT id FROM order_requests
                   WHERE status IN ('queued', 'processing') AND next_attempt_ms <= $1
                   ORDER BY id LIMIT $4 FOR UPDATE SKIP LOCKED) due
             WHERE r.id = due.id
             RETURNING r.id, r.client_id, r.mode, r.request_id, r.payload, r.terms, r.attempts, r.drop_offs_count,
                r.created_at",
            &[&now_ms, &lease_until_ms, &tag, &(limit as i64)],
        )
        .await
        .map_err(map_err)?;
    let mut claimed = rows
        .iter()
        .map(|r| {
            Ok(ClaimedRequest {
                id: column(r, 0)?,
                claim: tag,
                scope: Scope { client: ClientId(column(r, 1)?), mode: parsed(column(r, 2)?, "mode", Mode::parse)? },
                request_id: column(r, 3)?,
                payload: column(r, 4)?,
                terms: column(r, 5)?,
                attempts: super::lifecycle::narrow(column(r, 6)?, "request attempts")?,
                drop_offs_count: super::lifecycle::narrow(column(r, 7)?, "drop-off count")?,
                created_at: column(r, 8)?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    claimed.sort_by_key(|r| r.id);
    Ok(claimed)
}

/// Locks the claimed request's row for the order's transaction, or fails when the claim was
/// lost: taken first, so two workers whose leases overlapped cannot both write an order.
pub(super) async fn hold(c: &impl Sql, end: &RequestEnd) -> Result<(), StoreError> {
    let n = c
        .execute(
            "SELECT 1 FROM order_requests WHERE id = $1 AND claim = $2 AND status = 'processing' FOR UPDATE",
            &[&end.id, &end.claim],
        )
        .await
        .map_err(map_err)?;
    if n == 1 { Ok(()) } else { Err(StoreError::Unavailable(LEASE_LOST.into())) }
}

/// Marks the held request completed by `order`, in the order's transaction.
pub(super) async fn complete(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    scope: Scope,
    end: &RequestEnd,
    order: i64,
) -> Result<(), StoreError> {
    let n = c
        .execute(
            "UPDATE order_requests SET status = 'completed', completed_at = $3, order_id = $4, claim = NULL
             WHERE id = $1 AND claim = $2 AND status = 'processing'",
            &[&end.id, &end.claim, &end.completed_at, &order],
        )
        .await
        .map_err(map_err)?;
    if n != 1 {
        return Err(StoreError::Unavailable(LEASE_LOST.into()));
    }
    finished_event(c, sink, scope, end).await
}

/// Marks the claimed request failed; false (nothing written) when the claim was lost.
pub(super) async fn fail(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    end: &RequestEnd,
    errors_json: &str,
) -> Result<bool, StoreError> {
    let row = c
        .query_opt(
            "UPDATE order_requests SET status = 'failed', completed_at = $3, errors_json = $4, claim = NULL
             WHERE id = $1 AND claim = $2 AND status = 'processing'
             RETURNING client_id, mode",
            &[&end.id, &end.claim, &end.completed_at, &errors_json],
        )
        .await
        .map_err(map_err)?;
    let Some(r) = row else { return Ok(false) };
    let scope = Scope { client: ClientId(column(&r, 0)?), mode: parsed(column(&r, 1)?, "mode", Mode::parse)? };
    finished_event(c, sink, scope, end).await?;
    Ok(true)
}

/// `same.request.completed` to every enabled endpoint of the tenant that takes it. Not part
/// of any shipment's stream: it has no ordering key.
async fn finished_event(c: &impl Sql, sink: &mut Sink<'_>, scope: Scope, end: &RequestEnd) -> Result<(), StoreError> {
    let tenant = (scope.client.0, scope.mode.as_str());
    let subscribers = outbox::subscribers_of(c, &[tenant]).await?;
    let endpoints: Vec<i64> = subscribers
        .get(&(tenant.0, tenant.1.to_string()))
        .map(|all| all.iter().filter(|s| s.wants(COMPLETED_EVENT)).map(|s| s.id).collect())
        .unwrap_or_default();
    if !endpoints.is_empty() {
        let queued = outbox::enqueue(c, tenant, COMPLETED_EVENT, &end.event_body, None, &endpoints, end.at).await?;
        sink.queued += queued.len();
    }
    Ok(())
}

pub(super) async fn next_due_ms(c: &impl Sql) -> Result<Option<i64>, StoreError> {
    let row = c
        .query_one("SELECT min(next_attempt_ms) FROM order_requests WHERE status IN ('queued', 'processing')", &[])
        .await
        .map_err(map_err)?;
    column(&row, 0)
}
