//! The transactional outbox on `SQLite`: the webhook messages and deliveries a change causes,
//! written in that change's transaction (so a crash loses none and invents none).

use jiff::Timestamp;
use rusqlite::{Connection, params};

use super::map_err;
use super::reads::shipment_without_events;
use crate::store::{Outbox, StoreError, StoredEvent};

/// The outbox a write job renders with, and how many deliveries it queued (reported after
/// the commit).
pub(super) struct Sink<'a> {
    pub outbox: &'a dyn Outbox,
    pub queued: usize,
}

/// An endpoint that may receive a shipment's events: its id, the kinds it takes, and its
/// tenant (the shipment's).
struct Subscriber {
    id: i64,
    events: Vec<String>,
    client: i64,
    mode: String,
}

impl Subscriber {
    fn wants(&self, event: &str) -> bool {
        self.events.iter().any(|e| e == "*" || e == event)
    }
}

/// The enabled endpoints of the drop-off shipment's client, in its mode.
fn subscribers(c: &Connection, drop_off: i64) -> Result<Vec<Subscriber>, StoreError> {
    c.prepare_cached(
        "SELECT e.id, e.events_json, e.client_id, e.mode FROM webhook_endpoints e
         JOIN drop_off_shipments d ON d.client_id = e.client_id AND d.mode = e.mode
         WHERE d.id = ?1 AND e.enabled = 1 AND e.deleted_at IS NULL ORDER BY e.id",
    )
    .and_then(|mut s| {
        s.query_map([drop_off], |r| {
            Ok(Subscriber { id: r.get(0)?, events: super::json_column(r, 1)?, client: r.get(2)?, mode: r.get(3)? })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()
    })
    .map_err(map_err)
}

pub(super) fn now_ms() -> i64 {
    Timestamp::now().as_millisecond()
}

/// `msg_` + 22 base64url characters (16 random bytes): the stable `webhook-id`.
fn webhook_id() -> String {
    use base64::Engine;
    format!("msg_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(crate::ids::random_bytes::<16>()))
}

/// Writes one message and its deliveries to `endpoints`; each delivery joins the back of its
/// (endpoint, `ordering_key`) stream: `pending` when the stream is empty, else `waiting`.
pub(super) fn enqueue(
    c: &Connection,
    (client, mode): (i64, &str),
    event: &str,
    body: &str,
    ordering_key: Option<i64>,
    endpoints: &[i64],
    now: Timestamp,
) -> Result<Vec<i64>, StoreError> {
    let message: i64 = c
        .prepare_cached(
            "INSERT INTO webhook_messages (webhook_id, client_id, mode, event, body, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
        )
        .and_then(|mut s| s.query_row(params![webhook_id(), client, mode, event, body, now.to_string()], |r| r.get(0)))
        .map_err(map_err)?;
    endpoints.iter().map(|&e| add_delivery(c, message, e, ordering_key)).collect()
}

/// A delivery of `message` to `endpoint`, at the back of its stream.
pub(super) fn add_delivery(
    c: &Connection,
    message: i64,
    endpoint: i64,
    ordering_key: Option<i64>,
) -> Result<i64, StoreError> {
    let at = now_ms();
    c.prepare_cached(
        "INSERT INTO webhook_deliveries (message_id, endpoint_id, ordering_key, state, next_attempt_ms, queued_ms)
         VALUES (?1, ?2, ?3,
            CASE WHEN ?3 IS NOT NULL AND EXISTS (SELECT 1 FROM webhook_deliveries
                WHERE endpoint_id = ?2 AND ordering_key = ?3 AND state IN ('waiting', 'pending'))
            THEN 'waiting' ELSE 'pending' END, ?4, ?4)
         RETURNING id",
    )
    .and_then(|mut s| s.query_row(params![message, endpoint, ordering_key, at], |r| r.get(0)))
    .map_err(map_err)
}

/// The events of one drop-off shipment, just recorded in this transaction: rendered and
/// queued to every subscribed endpoint. With no endpoint, nothing is read or rendered.
pub(super) fn shipment_events(
    c: &Connection,
    sink: &mut Sink<'_>,
    drop_off: i64,
    events: &[StoredEvent],
    parcels_created: bool,
    now: Timestamp,
) -> Result<(), StoreError> {
    let subscribers = subscribers(c, drop_off)?;
    let Some(first) = subscribers.first() else { return Ok(()) };
    let tenant = (first.client, first.mode.as_str());
    let shipment = shipment_without_events(c, drop_off).map_err(map_err)?;
    for e in events {
        let kind = format!("same.shipment.{}", e.to.as_str());
        let to: Vec<i64> = subscribers.iter().filter(|s| s.wants(&kind)).map(|s| s.id).collect();
        if to.is_empty() {
            continue;
        }
        let body = sink.outbox.shipment_event(&shipment, e).map_err(StoreError::Corrupt)?;
        sink.queued += enqueue(c, tenant, &kind, &body, Some(drop_off), &to, now)?.len();
    }
    if parcels_created {
        let kind = "same.parcel.created";
        let to: Vec<i64> = subscribers.iter().filter(|s| s.wants(kind)).map(|s| s.id).collect();
        if !to.is_empty() {
            let at = events.first().map_or(now, |e| e.at);
            for p in &shipment.parcels {
                let body = sink.outbox.parcel_created(&shipment, p, at).map_err(StoreError::Corrupt)?;
                sink.queued += enqueue(c, tenant, kind, &body, Some(drop_off), &to, now)?.len();
            }
        }
    }
    Ok(())
}

/// Every shipment's events in `events`, grouped by drop-off shipment in their order.
pub(super) fn changes(
    c: &Connection,
    sink: &mut Sink<'_>,
    events: &[(i64, StoredEvent)],
    now: Timestamp,
) -> Result<(), StoreError> {
    let mut seen: Vec<i64> = Vec::new();
    for (shipment, _) in events {
        if seen.contains(shipment) {
            continue;
        }
        seen.push(*shipment);
        let mine: Vec<StoredEvent> = events.iter().filter(|(s, _)| s == shipment).map(|(_, e)| e.clone()).collect();
        shipment_events(c, sink, *shipment, &mine, false, now)?;
    }
    Ok(())
}
