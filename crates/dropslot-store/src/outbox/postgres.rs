//! The transactional outbox on `PostgreSQL`: the webhook messages and deliveries a change
//! causes, written in that change's transaction (so a crash loses none and invents none).
//! The change has locked its drop-off shipment row, so two processes cannot interleave the
//! deliveries of one shipment's stream.

use crate::outbox::{Queued, Subscriber, plan_deliveries};
use crate::postgres::sql::Sql;
use crate::postgres::{column, map_err, narrow};
use crate::shipments::postgres::{events_of, shipments_without_events};
use crate::{Outbox, StoreError, StoredEvent, StoredShipment};
use dropslot_core::shipments::{NewEvent, ShipmentKind, Status};
use dropslot_core::webhooks::DeliveryState;
use jiff::Timestamp;
use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;
use tokio_postgres::types::Type;

/// The outbox a unit of work renders with, and how many deliveries it queued (reported
/// after the commit).
pub(crate) struct Sink<'a> {
    pub outbox: &'a dyn Outbox,
    pub queued: usize,
    /// Recipient notifications queued to send.
    pub notified: usize,
}

pub(crate) use crate::queue_now_ms as now_ms;

/// Writes one message and its deliveries to `endpoints`; each delivery joins the back of its
/// (endpoint, `ordering_key`) stream: `pending` when the stream is empty, else `waiting`.
pub(crate) async fn enqueue(
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
            &[&crate::outbox::new_webhook_id(), &client, &mode, &event, &body, &now],
        )
        .await
        .map_err(map_err)?;
    Ok(row.get(0))
}

/// A delivery of `message` to `endpoint`, at the back of its stream.
pub(crate) async fn add_delivery(
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
pub(crate) async fn lock_stream(c: &impl Sql, endpoint: i64, key: i64) -> Result<(), StoreError> {
    c.execute("SELECT pg_advisory_xact_lock(($1::bigint << 32) # $2::bigint)", &[&endpoint, &key])
        .await
        .map_err(map_err)?;
    Ok(())
}

/// Whether the (endpoint, key) stream has an unfinished delivery; takes the stream's lock.
/// The states are spelled, built once from the core's names: the stream index is partial on
/// exactly this condition, and a generic plan (`plan_cache_mode`) over a bound state cannot
/// prove it, so it would not use the index.
async fn stream_busy(c: &impl Sql, endpoint: i64, key: i64) -> Result<bool, StoreError> {
    static STREAM_BUSY: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT EXISTS (SELECT 1 FROM webhook_deliveries
                WHERE endpoint_id = $1 AND ordering_key = $2 AND state IN ('{waiting}', '{pending}'))",
            waiting = DeliveryState::Waiting.as_str(),
            pending = DeliveryState::Pending.as_str(),
        )
    });
    lock_stream(c, endpoint, key).await?;
    let row = c.query_one(&STREAM_BUSY, &[&endpoint, &key]).await.map_err(map_err)?;
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
    let state = DeliveryState::queued(behind).as_str();
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

/// Messages and deliveries to write in one statement ([`Planned::write`]): a change's
/// every shipment, or a batch's every order, costs one round trip for its webhooks.
#[derive(Default)]
pub(crate) struct Planned {
    webhook_ids: Vec<String>,
    clients: Vec<i64>,
    modes: Vec<String>,
    events: Vec<String>,
    bodies: Vec<String>,
    created: Vec<Timestamp>,
    /// Per delivery: its message's 1-based ordinal, endpoint, ordering key and state.
    messages: Vec<i64>,
    endpoints: Vec<i64>,
    keys: Vec<i64>,
    states: Vec<&'static str>,
}

impl Planned {
    /// Adds the messages of one shipment's tenant, created at `at`.
    pub(crate) fn add(&mut self, (client, mode): (i64, &str), at: Timestamp, queued: Vec<Queued>) {
        for q in queued {
            self.webhook_ids.push(crate::outbox::new_webhook_id());
            self.clients.push(client);
            self.modes.push(mode.to_string());
            self.events.push(q.event);
            self.bodies.push(q.body);
            self.created.push(at);
            let message = i64::try_from(self.webhook_ids.len()).unwrap_or(i64::MAX);
            for (endpoint, behind) in q.deliveries {
                self.messages.push(message);
                self.endpoints.push(endpoint);
                self.keys.push(q.shipment);
                self.states.push(DeliveryState::queued(behind).as_str());
            }
        }
    }

    /// Writes every message and delivery added, deliveries in the order added (their ids
    /// order each stream), and counts the deliveries into `sink`.
    pub(crate) async fn write(self, c: &impl Sql, sink: &mut Sink<'_>) -> Result<(), StoreError> {
        if self.webhook_ids.is_empty() {
            return Ok(());
        }
        let n = c
            .execute_typed(
                "WITH m AS (
                    SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[],
                            $6::timestamptz[])
                        WITH ORDINALITY AS m (webhook_id, client_id, mode, event, body, created_at, ord)
                ),
                message AS (
                    INSERT INTO webhook_messages (webhook_id, client_id, mode, event, body, created_at)
                    SELECT webhook_id, client_id, mode, event, body, created_at FROM m ORDER BY ord
                    RETURNING id, webhook_id
                )
                INSERT INTO webhook_deliveries (message_id, endpoint_id, ordering_key, state, next_attempt_ms,
                    queued_ms)
                SELECT message.id, d.endpoint, d.key, d.state, $11, $11
                FROM unnest($7::bigint[], $8::bigint[], $9::bigint[], $10::text[])
                        WITH ORDINALITY AS d (message, endpoint, key, state, ord)
                    JOIN m ON m.ord = d.message
                    JOIN message ON message.webhook_id = m.webhook_id
                ORDER BY d.ord",
                &[
                    (&self.webhook_ids, Type::TEXT_ARRAY),
                    (&self.clients, Type::INT8_ARRAY),
                    (&self.modes, Type::TEXT_ARRAY),
                    (&self.events, Type::TEXT_ARRAY),
                    (&self.bodies, Type::TEXT_ARRAY),
                    (&self.created, Type::TIMESTAMPTZ_ARRAY),
                    (&self.messages, Type::INT8_ARRAY),
                    (&self.endpoints, Type::INT8_ARRAY),
                    (&self.keys, Type::INT8_ARRAY),
                    (&self.states, Type::TEXT_ARRAY),
                    (&now_ms(), Type::INT8),
                ],
            )
            .await
            .map_err(map_err)?;
        if usize::try_from(n).ok() != Some(self.endpoints.len()) {
            return Err(StoreError::Corrupt(format!("{n} of {} webhook deliveries written", self.endpoints.len())));
        }
        sink.queued += self.endpoints.len();
        Ok(())
    }
}

/// An endpoint from the columns `e.id, e.events_json, e.client_id, e.mode`, from `at` on.
fn subscriber(r: &tokio_postgres::Row, at: usize) -> Result<Subscriber, StoreError> {
    Ok(Subscriber {
        id: column(r, at)?,
        events: crate::postgres::json_column(column(r, at + 1)?, "webhook events")?,
        client: column(r, at + 2)?,
        mode: column(r, at + 3)?,
    })
}

/// The enabled endpoints of each of `tenants` (client, mode), by tenant, each tenant's in id
/// order: one statement for a batch of orders.
pub(crate) async fn subscribers_of(
    c: &impl Sql,
    tenants: &[(i64, &str)],
) -> Result<HashMap<(i64, String), Vec<Subscriber>>, StoreError> {
    let (clients, modes): (Vec<i64>, Vec<&str>) = tenants.iter().copied().unzip();
    let rows = c
        .query_typed(
            "SELECT e.id, e.events_json, e.client_id, e.mode FROM webhook_endpoints e
             JOIN unnest($1::bigint[], $2::text[]) AS t (client_id, mode)
                ON e.client_id = t.client_id AND e.mode = t.mode
             WHERE e.enabled AND e.deleted_at IS NULL ORDER BY e.id",
            &[(&clients, Type::INT8_ARRAY), (&modes, Type::TEXT_ARRAY)],
        )
        .await
        .map_err(map_err)?;
    let mut by_tenant: HashMap<(i64, String), Vec<Subscriber>> = HashMap::new();
    for r in &rows {
        let s = subscriber(r, 0)?;
        by_tenant.entry((s.client, s.mode.clone())).or_default().push(s);
    }
    Ok(by_tenant)
}

/// The enabled endpoints of a tenant that take `event`, by id: for an event [`changes`] does
/// not render (`same.shipment.rescheduled`), queued with [`enqueue`].
pub(crate) async fn tenant_subscribers(c: &impl Sql, scope: crate::Scope, event: &str) -> Result<Vec<i64>, StoreError> {
    let rows = c
        .query_typed(
            "SELECT e.id, e.events_json, e.client_id, e.mode FROM webhook_endpoints e
             WHERE e.client_id = $1 AND e.mode = $2 AND e.enabled AND e.deleted_at IS NULL ORDER BY e.id",
            &[(&scope.client.0, Type::INT8), (&scope.mode.as_str(), Type::TEXT)],
        )
        .await
        .map_err(map_err)?;
    let mut ids = Vec::new();
    for r in &rows {
        let s = subscriber(r, 0)?;
        if s.wants(event) {
            ids.push(s.id);
        }
    }
    Ok(ids)
}

/// The enabled endpoints of each drop-off shipment's client in its mode, by shipment, each
/// shipment's in id order. The shipments are found by id, then each one's endpoints by tenant
/// (`OFFSET 0` keeps the planner from joining the other way round: on a table not yet
/// analysed it read every shipment of the tenant through `drop_off_shipments_by_date` and
/// filtered them by id, 5 ms a call in the ops fan-out of issue 27).
async fn subscribers_by_shipment(c: &impl Sql, drop_offs: &[i64]) -> Result<HashMap<i64, Vec<Subscriber>>, StoreError> {
    let rows = c
        .query_typed(
            "SELECT d.id, e.id, e.events_json, e.client_id, e.mode FROM drop_off_shipments d
             CROSS JOIN LATERAL (
                SELECT id, events_json, client_id, mode FROM webhook_endpoints
                WHERE client_id = d.client_id AND mode = d.mode AND enabled AND deleted_at IS NULL
                OFFSET 0
             ) e
             WHERE d.id = ANY($1) ORDER BY d.id, e.id",
            &[(&drop_offs, Type::INT8_ARRAY)],
        )
        .await
        .map_err(map_err)?;
    let mut by_shipment: HashMap<i64, Vec<Subscriber>> = HashMap::new();
    for r in &rows {
        by_shipment.entry(column(r, 0)?).or_default().push(subscriber(r, 1)?);
    }
    Ok(by_shipment)
}

/// Takes the locks of the `(endpoint, key)` streams (see [`lock_stream`]), in that order, then
/// reads which of them have an unfinished delivery. Two changes only ever share a stream when
/// they change the same shipment, which its row lock already serialises, so taking several
/// stream locks at once cannot deadlock.
pub(crate) async fn streams_busy(c: &impl Sql, streams: &[(i64, i64)]) -> Result<HashSet<(i64, i64)>, StoreError> {
    // The states spelled, as in `stream_busy` (the stream index's condition).
    static BUSY: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT DISTINCT d.endpoint_id, d.ordering_key FROM unnest($1::bigint[], $2::bigint[]) AS s (e, k)
         JOIN webhook_deliveries d ON d.endpoint_id = s.e AND d.ordering_key = s.k
         WHERE d.state IN ('{waiting}', '{pending}')",
            waiting = DeliveryState::Waiting.as_str(),
            pending = DeliveryState::Pending.as_str(),
        )
    });
    let (endpoints, keys): (Vec<i64>, Vec<i64>) = streams.iter().copied().unzip();
    c.execute_typed(
        "SELECT pg_advisory_xact_lock((e << 32) # k) FROM unnest($1::bigint[], $2::bigint[]) AS s (e, k)",
        &[(&endpoints, Type::INT8_ARRAY), (&keys, Type::INT8_ARRAY)],
    )
    .await
    .map_err(map_err)?;
    // A new statement: its snapshot sees what the streams' previous holders committed.
    c.query_typed(&BUSY, &[(&endpoints, Type::INT8_ARRAY), (&keys, Type::INT8_ARRAY)])
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| Ok((column(r, 0)?, column(r, 1)?)))
        .collect()
}

/// Every shipment's events in `events` (recorded in this transaction), grouped by drop-off
/// shipment in their order: rendered and queued to every subscribed endpoint, and the
/// recipient messages they fire. However many shipments, one round trip reads their
/// subscribers and, for the shipments whose events fire a message, their tenants and the
/// shipments themselves, with the shipments `answer` names and their events (what the
/// caller answers with, returned in that order); the statements are pipelined. When there
/// are subscribers, the shipments not read yet are read and their streams locked and checked
/// (three more). One round trip writes every message, delivery and notification.
pub(crate) async fn changes(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    events: &[(i64, StoredEvent)],
    now: Timestamp,
    answer: &[i64],
) -> Result<Vec<StoredShipment>, StoreError> {
    let groups = crate::outbox::by_shipment(events);
    let drop_offs: Vec<i64> = groups.iter().map(|(d, _)| *d).collect();
    let fired: Vec<i64> = groups
        .iter()
        .filter(|(_, mine)| mine.iter().any(|e| crate::Trigger::of(e.to).is_some()))
        .map(|(d, _)| *d)
        .collect();
    let mut read: Vec<i64> = answer.to_vec();
    read.extend(fired.iter().filter(|d| !answer.contains(d)));
    let (subscribers, tenants, read_shipments, mut answer_events) = tokio::try_join!(
        async { if drop_offs.is_empty() { Ok(HashMap::new()) } else { subscribers_by_shipment(c, &drop_offs).await } },
        async {
            if fired.is_empty() { Ok(Vec::new()) } else { crate::notifications::postgres::tenants(c, &fired).await }
        },
        async { if read.is_empty() { Ok(Vec::new()) } else { shipments_without_events(c, &read).await } },
        async { if answer.is_empty() { Ok(HashMap::new()) } else { events_of(c, answer).await } },
    )?;
    let mut shipments: HashMap<i64, StoredShipment> = read.iter().copied().zip(read_shipments).collect();
    let tenants: HashMap<i64, crate::notifications::NotifyTenant> = tenants.into_iter().collect();
    let unread: Vec<i64> =
        drop_offs.iter().copied().filter(|d| subscribers.contains_key(d) && !shipments.contains_key(d)).collect();
    if !unread.is_empty() {
        shipments.extend(unread.iter().copied().zip(shipments_without_events(c, &unread).await?));
    }
    let mut notify = crate::notifications::postgres::Planned::default();
    for (drop_off, mine) in &groups {
        if let (Some(tenant), Some(shipment)) = (tenants.get(drop_off), shipments.get(drop_off)) {
            notify.add(tenant, sink.outbox.channels(), shipment, mine);
        }
    }
    let mut planned = Planned::default();
    if !subscribers.is_empty() {
        let mut streams: Vec<(i64, i64)> =
            subscribers.iter().flat_map(|(d, all)| all.iter().map(move |s| (s.id, *d))).collect();
        streams.sort_unstable();
        let busy = streams_busy(c, &streams).await?;
        for (drop_off, mine) in &groups {
            let (Some(endpoints), Some(shipment)) = (subscribers.get(drop_off), shipments.get(drop_off)) else {
                continue;
            };
            let Some(first) = endpoints.first() else { continue };
            let mut stream_busy: Vec<bool> = endpoints.iter().map(|s| busy.contains(&(s.id, *drop_off))).collect();
            let queued = plan_deliveries(sink.outbox, endpoints, &mut stream_busy, shipment, mine, false, now)?;
            planned.add((first.client, &first.mode), now, queued);
        }
    }
    let outbox = sink.outbox;
    let mut queued = Sink { outbox, queued: 0, notified: 0 };
    let (notified, ()) = tokio::try_join!(notify.write(c, now), planned.write(c, &mut queued))?;
    sink.notified += notified;
    sink.queued += queued.queued;
    answer
        .iter()
        .map(|d| {
            let mut s =
                shipments.remove(d).ok_or_else(|| StoreError::Corrupt(format!("drop-off shipment {d} not found")))?;
            s.events = answer_events.remove(d).unwrap_or_default();
            Ok(s)
        })
        .collect()
}

// Status changes: the one place a status column is written after creation, with its events,
// which every writing domain (the lifecycle, deletions, failed deliveries) persists through.

/// Records status changes in one statement, each with its shipment's next sequence number;
/// runs in the transaction that makes them. `max + 1` cannot race: the caller holds the row
/// lock of every shipment in `events` (a shipment created in this transaction is seen by no
/// one else). Returns the events as stored (id, number, and the instant as the column keeps
/// it, to the microsecond), in the order given, for the outbox.
pub(crate) async fn record_events(
    c: &impl Sql,
    events: &[NewEvent],
    at: Timestamp,
) -> Result<Vec<StoredEvent>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let mut kinds = Vec::with_capacity(events.len());
    let mut shipments = Vec::with_capacity(events.len());
    let mut statuses = Vec::with_capacity(events.len());
    let mut previous = Vec::with_capacity(events.len());
    let mut actors = Vec::with_capacity(events.len());
    let mut reasons = Vec::with_capacity(events.len());
    let mut attempts = Vec::with_capacity(events.len());
    let mut proofs = Vec::with_capacity(events.len());
    for e in events {
        kinds.push(e.kind.as_str());
        shipments.push(e.shipment);
        statuses.push(e.to.as_str());
        previous.push(e.from.map(Status::as_str));
        actors.push(e.actor.as_str());
        reasons.push(e.reason.as_deref());
        attempts.push(e.attempt.map(i64::from));
        proofs.push(if e.proof.is_empty() { None } else { Some(crate::postgres::to_json(&e.proof)?) });
    }
    // Numbered after the shipment's last stored event, then in the order given; the rows come
    // back joined on (shipment, number), as RETURNING promises no order.
    let rows = c
        .query_typed(
            "WITH new AS (
                SELECT n.ord, n.kind, n.shipment, n.status, n.previous, n.actor, n.reason, n.attempt, n.proof,
                    (SELECT coalesce(max(e.seq), 0) FROM shipment_events e
                     WHERE e.shipment_kind = n.kind AND e.shipment_id = n.shipment)
                    + row_number() OVER (PARTITION BY n.kind, n.shipment ORDER BY n.ord) AS seq
                FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[],
                        $8::text[])
                    WITH ORDINALITY AS n (kind, shipment, status, previous, actor, reason, attempt, proof, ord)
            ),
            stored AS (
                INSERT INTO shipment_events (shipment_kind, shipment_id, seq, status, previous_status, at, actor, reason,
                    attempt, proof_json)
                SELECT kind, shipment, seq, status, previous, $9, actor, reason, attempt, proof FROM new ORDER BY ord
                RETURNING id, shipment_kind, shipment_id, seq, at
            )
            SELECT s.id, s.seq, s.at FROM stored s
            JOIN new n ON n.kind = s.shipment_kind AND n.shipment = s.shipment_id AND n.seq = s.seq
            ORDER BY n.ord",
            &[
                (&kinds, Type::TEXT_ARRAY),
                (&shipments, Type::INT8_ARRAY),
                (&statuses, Type::TEXT_ARRAY),
                (&previous, Type::TEXT_ARRAY),
                (&actors, Type::TEXT_ARRAY),
                (&reasons, Type::TEXT_ARRAY),
                (&attempts, Type::INT8_ARRAY),
                (&proofs, Type::TEXT_ARRAY),
                (&at, Type::TIMESTAMPTZ),
            ],
        )
        .await
        .map_err(map_err)?;
    if rows.len() != events.len() {
        return Err(StoreError::Corrupt(format!("{} events recorded of {}", rows.len(), events.len())));
    }
    events
        .iter()
        .zip(&rows)
        .map(|(e, r)| {
            Ok(StoredEvent {
                id: column(r, 0)?,
                seq: narrow(column(r, 1)?, "event number")?,
                from: e.from,
                to: e.to,
                at: column(r, 2)?,
                actor: e.actor,
                reason: e.reason.clone(),
                attempt: e.attempt,
                proof: e.proof.clone(),
            })
        })
        .collect()
}

/// Persists planned changes: each shipment's status (and a drop-off's attempts) as its last
/// change leaves it, then every event in order, then queues the drop-off events' webhooks.
/// The one place a status column is written after creation. The caller has loaded the
/// shipments with their rows locked (the plan is only valid while they are).
pub(crate) async fn apply(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    events: &[NewEvent],
    now: Timestamp,
) -> Result<(), StoreError> {
    apply_and_read(c, sink, events, now, &[]).await.map(drop)
}

/// [`apply_and_read`]'s status update. On every change's path (ops moves in batches above
/// all), so its text is kept as measured (docs/performance.md, "Why PostgreSQL moves are
/// batched"), the kinds built once from the core's names rather than bound.
static APPLY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH n AS (
                SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[]) AS n (kind, id, status, attempts)
            ),
            p AS (
                UPDATE pick_up_shipments s SET status = n.status FROM n
                WHERE n.kind = '{pick_up}' AND s.id = n.id RETURNING s.id
            ),
            d AS (
                UPDATE drop_off_shipments s SET status = n.status, attempts = n.attempts FROM n
                WHERE n.kind = '{drop_off}' AND s.id = n.id RETURNING s.id
            )
            SELECT '{pick_up}'::text, id FROM p UNION ALL SELECT '{drop_off}'::text, id FROM d",
        pick_up = ShipmentKind::PickUp.as_str(),
        drop_off = ShipmentKind::DropOff.as_str(),
    )
});

/// [`apply`], then the drop-off shipments `answer` names as the change left them, with their
/// events, in that order: read in the outbox's round trip (`crate::outbox::postgres::changes`).
pub(crate) async fn apply_and_read(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    events: &[NewEvent],
    now: Timestamp,
    answer: &[i64],
) -> Result<Vec<crate::StoredShipment>, StoreError> {
    if events.is_empty() {
        return if answer.is_empty() {
            Ok(Vec::new())
        } else {
            crate::shipments::postgres::shipments_with_events(c, answer).await
        };
    }
    // Within the transaction only the end state of each shipment is ever seen: one row each.
    let mut last: Vec<&NewEvent> = Vec::new();
    let mut at: HashMap<(&str, i64), usize> = HashMap::new();
    for e in events {
        if let Some(l) = at.get(&(e.kind.as_str(), e.shipment)).and_then(|&i| last.get_mut(i)) {
            *l = e;
        } else {
            at.insert((e.kind.as_str(), e.shipment), last.len());
            last.push(e);
        }
    }
    let kinds: Vec<&str> = last.iter().map(|e| e.kind.as_str()).collect();
    let ids: Vec<i64> = last.iter().map(|e| e.shipment).collect();
    let statuses: Vec<&str> = last.iter().map(|e| e.to.as_str()).collect();
    let attempts: Vec<i64> = last.iter().map(|e| i64::from(e.attempts)).collect();
    // The status update and the events' insert touch different tables: sent together, one
    // round trip (a shipment that vanished fails the change, which is rolled back).
    let (changed, stored) = tokio::try_join!(
        async {
            c.query_typed(
                &APPLY,
                &[
                    (&kinds, Type::TEXT_ARRAY),
                    (&ids, Type::INT8_ARRAY),
                    (&statuses, Type::TEXT_ARRAY),
                    (&attempts, Type::INT8_ARRAY),
                ],
            )
            .await
            .map_err(map_err)?
            .iter()
            .map(|r| Ok((column(r, 0)?, column(r, 1)?)))
            .collect::<Result<Vec<(String, i64)>, StoreError>>()
        },
        record_events(c, events, now),
    )?;
    if let Some(e) = last.iter().find(|e| !changed.iter().any(|(k, id)| k == e.kind.as_str() && *id == e.shipment)) {
        return Err(StoreError::Corrupt(format!("{} shipment {} vanished mid-change", e.kind.as_str(), e.shipment)));
    }
    let recorded: Vec<(i64, StoredEvent)> = events
        .iter()
        .zip(stored)
        .filter(|(e, _)| e.kind == ShipmentKind::DropOff)
        .map(|(e, s)| (e.shipment, s))
        .collect();
    crate::outbox::postgres::changes(c, sink, &recorded, now, answer).await
}
