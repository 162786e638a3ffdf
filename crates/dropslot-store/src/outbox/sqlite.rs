//! The transactional outbox on `SQLite`: the webhook messages and deliveries a change causes,
//! written in that change's transaction (so a crash loses none and invents none).

use crate::outbox::{Subscriber, created_events, plan_deliveries};
use crate::shipments::sqlite::shipment_without_events;
use crate::sqlite::map_err;
use crate::{Outbox, StoreError, StoredEvent, StoredShipment, WrittenOrder};
use dropslot_core::shipments::{NewEvent, ShipmentKind, Status};
use dropslot_core::webhooks::DeliveryState;
use jiff::Timestamp;
use rusqlite::{Connection, params};
use std::collections::HashMap;
use std::sync::LazyLock;

/// The outbox a write job renders with, and how many deliveries it queued (reported after
/// the commit).
pub(crate) struct Sink<'a> {
    pub outbox: &'a dyn Outbox,
    pub queued: usize,
    /// Recipient notifications queued to send.
    pub notified: usize,
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
            Ok(Subscriber {
                id: r.get(0)?,
                events: crate::sqlite::json_column(r, 1)?,
                client: r.get(2)?,
                mode: r.get(3)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()
    })
    .map_err(map_err)
}

/// The enabled endpoints of a tenant that take `event`, by id: for events of no shipment.
pub(crate) fn tenant_subscribers(c: &Connection, scope: crate::Scope, event: &str) -> Result<Vec<i64>, StoreError> {
    c.prepare_cached(
        "SELECT id, events_json, client_id, mode FROM webhook_endpoints
         WHERE client_id = ?1 AND mode = ?2 AND enabled = 1 AND deleted_at IS NULL ORDER BY id",
    )
    .and_then(|mut s| {
        s.query_map(params![scope.client.0, scope.mode.as_str()], |r| {
            Ok(Subscriber {
                id: r.get(0)?,
                events: crate::sqlite::json_column(r, 1)?,
                client: r.get(2)?,
                mode: r.get(3)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()
    })
    .map_err(map_err)
    .map(|all| all.into_iter().filter(|s| s.wants(event)).map(|s| s.id).collect())
}

pub(crate) use crate::queue_now_ms as now_ms;

/// Writes one message and its deliveries to `endpoints`; each delivery joins the back of its
/// (endpoint, `ordering_key`) stream: `pending` when the stream is empty, else `waiting`.
pub(crate) fn enqueue(
    c: &Connection,
    (client, mode): (i64, &str),
    event: &str,
    body: &str,
    ordering_key: Option<i64>,
    endpoints: &[i64],
    now: Timestamp,
) -> Result<Vec<i64>, StoreError> {
    let message = insert_message(c, (client, mode), event, body, now)?;
    endpoints.iter().map(|&e| add_delivery(c, message, e, ordering_key)).collect()
}

/// One message row; its id. (No `RETURNING`: `SQLite` runs it as a trigger, which costs every
/// insert a statement journal.)
fn insert_message(
    c: &Connection,
    (client, mode): (i64, &str),
    event: &str,
    body: &str,
    now: Timestamp,
) -> Result<i64, StoreError> {
    c.prepare_cached(
        "INSERT INTO webhook_messages (webhook_id, client_id, mode, event, body, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| s.execute(params![crate::outbox::new_webhook_id(), client, mode, event, body, now.to_string()]))
    .map_err(map_err)?;
    Ok(c.last_insert_rowid())
}

/// A delivery of `message` to `endpoint`, at the back of its stream.
pub(crate) fn add_delivery(
    c: &Connection,
    message: i64,
    endpoint: i64,
    ordering_key: Option<i64>,
) -> Result<i64, StoreError> {
    let behind = match ordering_key {
        Some(key) => stream_busy(c, endpoint, key)?,
        None => false,
    };
    insert_delivery(c, message, endpoint, ordering_key, behind)
}

/// Whether the (endpoint, key) stream has an unfinished delivery. The states are spelled,
/// built once from the core's names: `SQLite` reads the stream index (partial on exactly this
/// condition) only when the query spells its condition, which a bound state does not.
fn stream_busy(c: &Connection, endpoint: i64, key: i64) -> Result<bool, StoreError> {
    static STREAM_BUSY: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT EXISTS (SELECT 1 FROM webhook_deliveries
            WHERE endpoint_id = ?1 AND ordering_key = ?2 AND state IN ('{waiting}', '{pending}'))",
            waiting = DeliveryState::Waiting.as_str(),
            pending = DeliveryState::Pending.as_str(),
        )
    });
    c.prepare_cached(&STREAM_BUSY).and_then(|mut s| s.query_row(params![endpoint, key], |r| r.get(0))).map_err(map_err)
}

/// One delivery row: `waiting` when `behind` an unfinished one of its stream, else `pending`.
fn insert_delivery(
    c: &Connection,
    message: i64,
    endpoint: i64,
    ordering_key: Option<i64>,
    behind: bool,
) -> Result<i64, StoreError> {
    let at = now_ms();
    c.prepare_cached(
        "INSERT INTO webhook_deliveries (message_id, endpoint_id, ordering_key, state, next_attempt_ms, queued_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
    )
    .and_then(|mut s| s.execute(params![message, endpoint, ordering_key, DeliveryState::queued(behind).as_str(), at]))
    .map_err(map_err)?;
    Ok(c.last_insert_rowid())
}

/// The events of one drop-off shipment, just recorded in this transaction: rendered and
/// queued to every subscribed endpoint. With no endpoint, nothing is read or rendered.
pub(crate) fn shipment_events(
    c: &Connection,
    sink: &mut Sink<'_>,
    drop_off: i64,
    events: &[StoredEvent],
    now: Timestamp,
) -> Result<(), StoreError> {
    sink.notified += crate::notifications::sqlite::enqueue(c, sink.outbox.channels(), drop_off, None, events, now)?;
    let subscribers = subscribers(c, drop_off)?;
    if subscribers.is_empty() {
        return Ok(());
    }
    let shipment = shipment_without_events(c, drop_off).map_err(map_err)?;
    let mut busy = subscribers.iter().map(|s| stream_busy(c, s.id, drop_off)).collect::<Result<Vec<_>, _>>()?;
    queue(c, sink, &subscribers, &mut busy, &shipment, events, false, now)
}

/// A new order's webhooks (`crate::webhooks::sqlite::created_events`: each drop-off's `scheduled` and its
/// parcels' `same.parcel.created`), queued to its tenant's endpoints. With no endpoint,
/// nothing is built or rendered.
pub(crate) fn order_created(
    c: &Connection,
    sink: &mut Sink<'_>,
    written: &WrittenOrder,
    events: &HashMap<i64, i64>,
) -> Result<(), StoreError> {
    let now = written.created_at.timestamp();
    for (shipment, scheduled) in created_events(written, |drop_off| events.get(&drop_off).copied())? {
        let drop_off = shipment.drop_off.id.0;
        sink.notified += crate::notifications::sqlite::enqueue(
            c,
            sink.outbox.channels(),
            drop_off,
            Some(shipment),
            &[scheduled],
            now,
        )?;
    }
    // Every shipment of an order is the same tenant's: its first one names the endpoints.
    let Some(first) = written.ids.shipments.first() else { return Ok(()) };
    let subscribers = subscribers(c, first.drop_off.0)?;
    if subscribers.is_empty() {
        return Ok(());
    }
    for (shipment, scheduled) in created_events(written, |drop_off| events.get(&drop_off).copied())? {
        // A new shipment's streams are empty.
        let mut busy = vec![false; subscribers.len()];
        queue(c, sink, &subscribers, &mut busy, shipment, &[scheduled], true, now)?;
    }
    Ok(())
}

/// Renders what `plan` queues and writes its messages and deliveries.
#[allow(clippy::too_many_arguments)]
fn queue(
    c: &Connection,
    sink: &mut Sink<'_>,
    subscribers: &[Subscriber],
    busy: &mut [bool],
    shipment: &StoredShipment,
    events: &[StoredEvent],
    created: bool,
    now: Timestamp,
) -> Result<(), StoreError> {
    let Some(first) = subscribers.first() else { return Ok(()) };
    let tenant = (first.client, first.mode.as_str());
    for q in plan_deliveries(sink.outbox, subscribers, busy, shipment, events, created, now)? {
        let message = insert_message(c, tenant, &q.event, &q.body, now)?;
        for (endpoint, behind) in q.deliveries {
            insert_delivery(c, message, endpoint, Some(q.shipment), behind)?;
            sink.queued += 1;
        }
    }
    Ok(())
}

/// Every shipment's events in `events`, grouped by drop-off shipment in their order.
pub(crate) fn changes(
    c: &Connection,
    sink: &mut Sink<'_>,
    events: &[(i64, StoredEvent)],
    now: Timestamp,
) -> Result<(), StoreError> {
    for (shipment, mine) in crate::outbox::by_shipment(events) {
        shipment_events(c, sink, shipment, &mine, now)?;
    }
    Ok(())
}

impl crate::sqlite::SqliteStore {
    /// A write that may cause webhook events: `work` renders them through the outbox into
    /// its own transaction; once committed, the outbox hears how many deliveries it queued.
    pub(crate) async fn write_events<T, E, F>(&self, work: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(&Connection, &mut Sink<'_>) -> Result<T, E> + Send + 'static,
    {
        let outbox = self.outbox.clone();
        let (value, queued, notified) = self
            .writer
            .write(move |c| {
                let mut sink = Sink { outbox: &*outbox, queued: 0, notified: 0 };
                let value = work(c, &mut sink)?;
                Ok::<_, E>((value, sink.queued, sink.notified))
            })
            .await?;
        if queued > 0 {
            self.outbox.queued(queued);
        }
        if notified > 0 {
            self.outbox.notified(notified);
        }
        Ok(value)
    }
}

// Status changes: the one place a status column is written after creation, with its events,
// which every writing domain (the lifecycle, deletions, failed deliveries) persists through.

/// Records a status change with the shipment's next sequence number; runs in the transaction
/// that makes the change (the writer serialises writers, so `max + 1` cannot race). A
/// shipment's first event (`from` is none: its creation) is number 1 without a lookup.
/// Returns the event as stored (its id and number), for the outbox.
pub(crate) fn record_event(
    c: &Connection,
    e: &NewEvent,
    at: Timestamp,
    at_text: &str,
) -> Result<StoredEvent, StoreError> {
    let proof = if e.proof.is_empty() { None } else { Some(crate::sqlite::to_json(&e.proof).map_err(map_err)?) };
    let sql = if e.from.is_none() {
        "INSERT INTO shipment_events (shipment_kind, shipment_id, seq, status, previous_status, at, actor, reason,
            attempt, proof_json)
         VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING id, seq"
    } else {
        "INSERT INTO shipment_events (shipment_kind, shipment_id, seq, status, previous_status, at, actor, reason,
            attempt, proof_json)
         VALUES (?1, ?2,
            (SELECT coalesce(max(seq), 0) + 1 FROM shipment_events WHERE shipment_kind = ?1 AND shipment_id = ?2),
            ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING id, seq"
    };
    let (id, seq) = c
        .prepare_cached(sql)
        .and_then(|mut s| {
            s.query_row(
                params![
                    e.kind.as_str(),
                    e.shipment,
                    e.to.as_str(),
                    e.from.map(Status::as_str),
                    at_text,
                    e.actor.as_str(),
                    e.reason,
                    e.attempt,
                    proof
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
        .map_err(map_err)?;
    Ok(StoredEvent {
        id,
        seq,
        from: e.from,
        to: e.to,
        at,
        actor: e.actor,
        reason: e.reason.clone(),
        attempt: e.attempt,
        proof: e.proof.clone(),
    })
}

/// Persists planned changes in order: each shipment's status (and a drop-off's attempts)
/// and its event, then queues the drop-off events' webhooks. The one place a status column
/// is written after creation.
pub(crate) fn apply(
    c: &Connection,
    sink: &mut Sink<'_>,
    events: &[NewEvent],
    now: Timestamp,
) -> Result<(), StoreError> {
    let at = now.to_string();
    let mut recorded = Vec::new();
    for e in events {
        let sql = match e.kind {
            ShipmentKind::PickUp => "UPDATE pick_up_shipments SET status = ?2 WHERE id = ?1",
            ShipmentKind::DropOff => "UPDATE drop_off_shipments SET status = ?2, attempts = ?3 WHERE id = ?1",
        };
        let changed = c
            .prepare_cached(sql)
            .and_then(|mut s| match e.kind {
                ShipmentKind::PickUp => s.execute(params![e.shipment, e.to.as_str()]),
                ShipmentKind::DropOff => s.execute(params![e.shipment, e.to.as_str(), e.attempts]),
            })
            .map_err(map_err)?;
        if changed != 1 {
            return Err(StoreError::Corrupt(format!(
                "{} shipment {} vanished mid-change",
                e.kind.as_str(),
                e.shipment
            )));
        }
        let stored = record_event(c, e, now, &at)?;
        if e.kind == ShipmentKind::DropOff {
            recorded.push((e.shipment, stored));
        }
    }
    crate::outbox::sqlite::changes(c, sink, &recorded, now)
}
