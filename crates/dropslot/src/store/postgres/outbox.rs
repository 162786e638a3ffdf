//! The transactional outbox on `PostgreSQL`: the webhook messages and deliveries a change
//! causes, written in that change's transaction (so a crash loses none and invents none).
//! The change has locked its drop-off shipment row, so two processes cannot interleave the
//! deliveries of one shipment's stream.

use super::sql::Sql;
use jiff::Timestamp;

use super::map_err;
use super::reads::shipment_without_events;
use crate::store::webhooks::Subscriber;
use crate::store::{Outbox, StoreError, StoredEvent};

/// The outbox a unit of work renders with, and how many deliveries it queued (reported
/// after the commit).
pub(super) struct Sink<'a> {
    pub outbox: &'a dyn Outbox,
    pub queued: usize,
}

/// The enabled endpoints of the drop-off shipment's client, in its mode.
async fn subscribers(c: &impl Sql, drop_off: i64) -> Result<Vec<Subscriber>, StoreError> {
    let rows = c
        .query(
            "SELECT e.id, e.events_json, e.client_id, e.mode FROM webhook_endpoints e
             JOIN drop_off_shipments d ON d.client_id = e.client_id AND d.mode = e.mode
             WHERE d.id = $1 AND e.enabled AND e.deleted_at IS NULL ORDER BY e.id",
            &[&drop_off],
        )
        .await
        .map_err(map_err)?;
    rows.iter()
        .map(|r| {
            Ok(Subscriber {
                id: r.get(0),
                events: super::json_column(r.get(1), "webhook events")?,
                client: r.get(2),
                mode: r.get(3),
            })
        })
        .collect()
}

pub(super) use crate::store::webhooks::queue_now_ms as now_ms;

/// Writes one message and its deliveries to `endpoints`; each delivery joins the back of its
/// (endpoint, `ordering_key`) stream: `pending` when the stream is empty, else `waiting`.
pub(super) async fn enqueue(
    c: &impl Sql,
    (client, mode): (i64, &str),
    event: &str,
    body: &str,
    ordering_key: Option<i64>,
    endpoints: &[i64],
    now: Timestamp,
) -> Result<Vec<i64>, StoreError> {
    let message = insert_message(c, (client, mode), event, body, now).await?;
    let mut ids = Vec::with_capacity(endpoints.len());
    for &e in endpoints {
        ids.push(add_delivery(c, message, e, ordering_key).await?);
    }
    Ok(ids)
}

/// One message row; its id.
async fn insert_message(
    c: &impl Sql,
    (client, mode): (i64, &str),
    event: &str,
    body: &str,
    now: Timestamp,
) -> Result<i64, StoreError> {
    let row = c
        .query_one(
            "INSERT INTO webhook_messages (webhook_id, client_id, mode, event, body, created_at)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
            &[&crate::store::webhooks::new_webhook_id(), &client, &mode, &event, &body, &now],
        )
        .await
        .map_err(map_err)?;
    Ok(row.get(0))
}

/// A delivery of `message` to `endpoint`, at the back of its stream.
pub(super) async fn add_delivery(
    c: &impl Sql,
    message: i64,
    endpoint: i64,
    ordering_key: Option<i64>,
) -> Result<i64, StoreError> {
    let behind = match ordering_key {
        Some(key) => stream_busy(c, endpoint, key).await?,
        None => false,
    };
    insert_delivery(c, message, endpoint, ordering_key, behind).await
}

/// Serialises the writers of one (endpoint, key) stream until the transaction ends: the
/// change that appends to it and the dispatcher that finishes its head. Without it, an
/// append could see the head unfinished and queue `waiting` while the finisher, not seeing
/// the uncommitted append, promotes nothing: a stream stuck forever. Two appends to an
/// empty stream could also both queue `pending`. (Colliding keys only serialise more.)
pub(super) async fn lock_stream(c: &impl Sql, endpoint: i64, key: i64) -> Result<(), StoreError> {
    c.execute("SELECT pg_advisory_xact_lock(($1::bigint << 32) # $2::bigint)", &[&endpoint, &key])
        .await
        .map_err(map_err)?;
    Ok(())
}

/// Whether the (endpoint, key) stream has an unfinished delivery; takes the stream's lock.
async fn stream_busy(c: &impl Sql, endpoint: i64, key: i64) -> Result<bool, StoreError> {
    lock_stream(c, endpoint, key).await?;
    let row = c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM webhook_deliveries
                WHERE endpoint_id = $1 AND ordering_key = $2 AND state IN ('waiting', 'pending'))",
            &[&endpoint, &key],
        )
        .await
        .map_err(map_err)?;
    Ok(row.get(0))
}

/// One delivery row: `waiting` when `behind` an unfinished one of its stream, else `pending`.
async fn insert_delivery(
    c: &impl Sql,
    message: i64,
    endpoint: i64,
    ordering_key: Option<i64>,
    behind: bool,
) -> Result<i64, StoreError> {
    let at = now_ms();
    let state = if behind { "waiting" } else { "pending" };
    let row = c
        .query_one(
            "INSERT INTO webhook_deliveries (message_id, endpoint_id, ordering_key, state, next_attempt_ms, queued_ms)
             VALUES ($1, $2, $3, $4, $5, $5) RETURNING id",
            &[&message, &endpoint, &ordering_key, &state, &at],
        )
        .await
        .map_err(map_err)?;
    Ok(row.get(0))
}

/// The events of one drop-off shipment, just recorded in this transaction: rendered and
/// queued to every subscribed endpoint. With no endpoint, nothing is read or rendered.
pub(super) async fn shipment_events(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    drop_off: i64,
    events: &[StoredEvent],
    created: bool,
    now: Timestamp,
) -> Result<(), StoreError> {
    let subscribers = subscribers(c, drop_off).await?;
    let Some(first) = subscribers.first() else { return Ok(()) };
    let tenant = (first.client, first.mode.as_str());
    let shipment = shipment_without_events(c, drop_off).await?;
    // Whether each subscriber's stream for this shipment has an unfinished delivery: a new
    // shipment's streams are empty; otherwise looked up once, before the first delivery.
    let mut busy: Vec<Option<bool>> = vec![created.then_some(false); subscribers.len()];
    let mut bodies: Vec<(String, String)> = Vec::new();
    for e in events {
        let kind = format!("same.shipment.{}", e.to.as_str());
        if subscribers.iter().any(|s| s.wants(&kind)) {
            let body = sink.outbox.shipment_event(&shipment, e).map_err(StoreError::Corrupt)?;
            bodies.push((kind, body));
        }
    }
    if created {
        let kind = "same.parcel.created";
        if subscribers.iter().any(|s| s.wants(kind)) {
            let at = events.first().map_or(now, |e| e.at);
            for p in &shipment.parcels {
                let body = sink.outbox.parcel_created(&shipment, p, at).map_err(StoreError::Corrupt)?;
                bodies.push((kind.to_string(), body));
            }
        }
    }
    for (kind, body) in &bodies {
        let message = insert_message(c, tenant, kind, body, now).await?;
        for (i, s) in subscribers.iter().enumerate() {
            if !s.wants(kind) {
                continue;
            }
            let behind = match busy[i] {
                Some(b) => b,
                None => stream_busy(c, s.id, drop_off).await?,
            };
            insert_delivery(c, message, s.id, Some(drop_off), behind).await?;
            busy[i] = Some(true);
            sink.queued += 1;
        }
    }
    Ok(())
}

/// Every shipment's events in `events`, grouped by drop-off shipment in their order.
pub(super) async fn changes(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    events: &[(i64, StoredEvent)],
    now: Timestamp,
) -> Result<(), StoreError> {
    for (shipment, mine) in crate::store::webhooks::by_shipment(events) {
        shipment_events(c, sink, shipment, &mine, false, now).await?;
    }
    Ok(())
}
