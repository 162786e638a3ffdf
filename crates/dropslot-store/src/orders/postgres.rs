//! Concurrent orders share a transaction: a process's order requests queue here, and
//! `[postgres] order_writers` writer tasks each take every order waiting (up to a bound) and
//! write them with one statement and one COMMIT (`insert_orders`). Under load, the cost of a round
//! trip, a plan's start-up and a WAL flush is shared by the whole batch; with one order
//! waiting, a batch is that order. Each order is answered only after its COMMIT.
//!
//! A batch stands or falls as a whole, so one order cannot fail its neighbours: when a batch
//! fails (a custom code taken, a deadlock with another process's batch, anything), it is
//! rolled back and each of its orders is written again in a transaction of its own, which
//! gives each its own answer. Orders with an `Idempotency-Key` do not come here (their key
//! is claimed first, in their own transaction).
//! Order creation on `PostgreSQL`: any number of orders in one statement ([`INSERT_ORDERS`]),
//! so an order costs one round trip, or a share of one when the batcher (`batch.rs`) groups
//! concurrent orders into one transaction.
//! Order rows on `PostgreSQL` after their creation (`insert.rs`): deletion by custom code with
//! re-pricing, and the reads behind labels. Each runs in the caller's transaction; an error
//! means the caller rolls it back.
//! Asynchronous order requests on `PostgreSQL`: queued with their idempotency record,
//! claimed with `FOR UPDATE SKIP LOCKED` under a lease (so several processes share the
//! queue), finished (completed by the order's own transaction, or failed) with their
//! `same.request.completed` webhook in the same transaction.

use crate::outbox::postgres::Sink;
use crate::outbox::postgres::apply;
use crate::outbox::{created_events, plan_deliveries};
use crate::postgres::sql::Sql;
use crate::postgres::{
    BUMP_EPOCH, Connections, PgStore, SAVED_ADDRESS_COLUMNS, column, in_tx, map_err, narrow, parsed, status_column,
    zoned_text,
};
use crate::{
    COMPLETED_EVENT, ClaimedRequest, CreateOrderError, CreatedOrder, DeleteOutcome, IdempotencyClaim, LEASE_LOST, Mode,
    NewDropOff, NewOrder, NewRequest, OrderIds, OrderStore, Outbox, RenderFn, RequestEnd, RequestStatus, SavedAddress,
    Scope, ShipmentIds, StoreError, StoreResult, StoredRequest, StoredResponse, WrittenOrder,
};
use async_trait::async_trait;
use dropslot_core::ids::{
    ClientId, CustomCode, DropOffShipmentId, OrderId, ParcelId, PickUpShipmentId, SavedAddressId, ShipmentOrderId,
};
use dropslot_core::money::{Money, TaxRate};
use dropslot_core::quote::Totals;
use dropslot_core::shipments;
use dropslot_core::shipments::{ChargeLine, DeletionPlan, DeletionSnapshot, ShipmentKind, Status};
use dropslot_core::time::iso;
use jiff::Timestamp;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::LazyLock;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_postgres::Row;
use tokio_postgres::types::Type;

#[async_trait]
impl OrderStore for PgStore {
    async fn saved_address_id_by_text(&self, scope: Scope, normalized: &str) -> StoreResult<Option<SavedAddressId>> {
        let epoch = self.epoch().await?;
        let key = (scope, normalized.to_string());
        if let Some(cached) = self.saved_ids.get(&key, epoch) {
            return Ok(cached);
        }
        let c = self.conn().await?;
        let row = c
            .query_typed(
                "SELECT id FROM saved_addresses WHERE client_id = $1 AND mode = $2 AND normalized = $3",
                &[(&scope.client.0, Type::INT8), (&scope.mode.as_str(), Type::TEXT), (&normalized, Type::TEXT)],
            )
            .await
            .map_err(map_err)?;
        let found = row.first().map(|r| crate::postgres::column(r, 0).map(SavedAddressId)).transpose()?;
        // "None" too: an order that creates this address bumps the epoch in its statement.
        self.saved_ids.put(key, epoch, found);
        Ok(found)
    }

    async fn saved_address(&self, scope: Scope, id: SavedAddressId) -> StoreResult<Option<SavedAddress>> {
        let c = self.conn().await?;
        c.query_opt(
            &format!("SELECT {SAVED_ADDRESS_COLUMNS} WHERE s.client_id = $1 AND s.mode = $2 AND s.id = $3"),
            &[&scope.client.0, &scope.mode.as_str(), &id.0],
        )
        .await
        .map_err(map_err)?
        .as_ref()
        .map(saved_address_row)
        .transpose()
    }

    async fn list_saved_addresses(&self, scope: Scope) -> StoreResult<Vec<SavedAddress>> {
        let c = self.conn().await?;
        c.query(
            &format!(
                "SELECT {SAVED_ADDRESS_COLUMNS} WHERE s.client_id = $1 AND s.mode = $2 ORDER BY 6 DESC, s.id DESC"
            ),
            &[&scope.client.0, &scope.mode.as_str()],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(saved_address_row)
        .collect()
    }

    async fn delete_saved_address(&self, scope: Scope, id: SavedAddressId) -> StoreResult<bool> {
        let c = self.conn().await?;
        let row = c
            .query_one(
                &format!(
                    "WITH deleted AS (DELETE FROM saved_addresses WHERE client_id = $1 AND mode = $2 AND id = $3 RETURNING 1),
                     bump AS ({BUMP_EPOCH} AND EXISTS (SELECT 1 FROM deleted))
                     SELECT count(*) FROM deleted"
                ),
                &[&scope.client.0, &scope.mode.as_str(), &id.0],
            )
            .await
            .map_err(map_err)?;
        self.changed();
        Ok(row.get::<_, i64>(0) == 1)
    }

    async fn idempotent_response(
        &self,
        scope: Scope,
        key: &str,
        since: Timestamp,
    ) -> StoreResult<Option<StoredResponse>> {
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT request_hash, status, body FROM idempotency_keys
                 WHERE client_id = $1 AND mode = $2 AND key = $3 AND created_at >= $4",
                &[&scope.client.0, &scope.mode.as_str(), &key, &since.as_second()],
            )
            .await
            .map_err(map_err)?;
        row.map(|r| {
            let status: i64 = r.get(1);
            Ok(StoredResponse {
                request_hash: r.get(0),
                status: u16::try_from(status)
                    .map_err(|_| StoreError::Corrupt(format!("stored HTTP status {status}")))?,
                body: r.get(2),
            })
        })
        .transpose()
    }

    async fn create_order(
        &self,
        scope: Scope,
        order: NewOrder,
        render: RenderFn,
    ) -> Result<CreatedOrder, CreateOrderError> {
        // An order that completes a request is written alone: its transaction also holds and
        // finishes the request, which a batch's all-or-nothing retry would not keep apart.
        if order.idempotency.is_none() && order.completes.is_none() {
            let batcher = self
                .orders
                .get_or_init(|| Batcher::start(&self.pool, &self.outbox, self.order_writers, &self.stats))?;
            let order = batcher.create(scope, order).await?;
            return Ok(CreatedOrder { order, body: None });
        }
        let mut sink = crate::outbox::postgres::Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let created = in_tx!(self, |tx| insert_order(tx, &mut sink, scope, &order, &render).await?);
        self.notify(sink.queued);
        self.notified(sink.notified);
        Ok(created)
    }

    async fn delete_parcel_by_custom_code(
        &self,
        scope: Scope,
        code: &CustomCode,
        now: Timestamp,
    ) -> StoreResult<DeleteOutcome> {
        let mut sink = crate::outbox::postgres::Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let outcome = in_tx!(self, |tx| delete_parcel(tx, &mut sink, scope, code, now).await?);
        self.notify(sink.queued);
        self.notified(sink.notified);
        Ok(outcome)
    }

    async fn queue_request(&self, scope: Scope, request: NewRequest) -> Result<(), CreateOrderError> {
        in_tx!(self, |tx| queue(tx, scope, &request).await?);
        Ok(())
    }

    async fn order_request(&self, scope: Scope, request_id: &str) -> StoreResult<Option<StoredRequest>> {
        get(&self.conn().await?, scope, request_id).await
    }

    async fn claim_requests(&self, now_ms: i64, lease_until_ms: i64, limit: usize) -> StoreResult<Vec<ClaimedRequest>> {
        let claimed = in_tx!(self, |tx| claim(tx, now_ms, lease_until_ms, limit).await?);
        Ok(claimed)
    }

    async fn fail_request(&self, end: RequestEnd, errors_json: String) -> StoreResult<bool> {
        let mut sink = crate::outbox::postgres::Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let failed = in_tx!(self, |tx| fail(tx, &mut sink, &end, &errors_json).await?);
        self.notify(sink.queued);
        self.notified(sink.notified);
        Ok(failed)
    }

    async fn next_request_due_ms(&self) -> StoreResult<Option<i64>> {
        next_due_ms(&self.conn().await?).await
    }
}

/// Orders in one batch at most, and drop-offs (a batch stops growing at either).
const MAX_ORDERS: usize = 64;
const MAX_DROP_OFFS: usize = 1_000;
/// Orders queued at most; a request finding it full waits for room.
const QUEUE: usize = 4_096;

struct Job {
    scope: Scope,
    order: NewOrder,
    reply: oneshot::Sender<Result<WrittenOrder, CreateOrderError>>,
}

pub(crate) struct Batcher {
    queue: mpsc::Sender<Job>,
    stats: Arc<crate::StoreStats>,
}

impl Batcher {
    /// Starts the writers (on the current Tokio runtime); they stop when the batcher is
    /// dropped and the queue is empty.
    pub(crate) fn start(
        pool: &Connections,
        outbox: &Arc<dyn Outbox>,
        writers: usize,
        stats: &Arc<crate::StoreStats>,
    ) -> Batcher {
        let (queue, jobs) = mpsc::channel(QUEUE);
        let jobs = Arc::new(Mutex::new(jobs));
        for _ in 0..writers {
            tokio::spawn(writer(jobs.clone(), pool.clone(), outbox.clone(), stats.clone()));
        }
        Batcher { queue, stats: stats.clone() }
    }

    /// Writes one order in the next batch; its ids once committed.
    pub(crate) async fn create(&self, scope: Scope, order: NewOrder) -> Result<WrittenOrder, CreateOrderError> {
        let stopped = || StoreError::Unavailable("the order writer has stopped".into());
        let (reply, answer) = oneshot::channel();
        self.stats.queued.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.queue.send(Job { scope, order, reply }).await.is_err() {
            self.stats.queued.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            return Err(stopped().into());
        }
        answer.await.map_err(|_| stopped())?
    }
}

async fn writer(
    jobs: Arc<Mutex<mpsc::Receiver<Job>>>,
    pool: Connections,
    outbox: Arc<dyn Outbox>,
    stats: Arc<crate::StoreStats>,
) {
    loop {
        // One writer at a time waits for work and takes what is queued; the others write.
        let batch = {
            let mut jobs = jobs.lock().await;
            let Some(first) = jobs.recv().await else { return };
            let mut drop_offs = first.order.shipments.len();
            let mut batch = vec![first];
            while batch.len() < MAX_ORDERS && drop_offs < MAX_DROP_OFFS {
                let Ok(job) = jobs.try_recv() else { break };
                drop_offs += job.order.shipments.len();
                batch.push(job);
            }
            batch
        };
        stats.batch(batch.len());
        write(&pool, &*outbox, batch).await;
    }
}

/// Writes a batch, or, when it fails, each of its orders alone; answers every order.
async fn write(pool: &Connections, outbox: &dyn Outbox, batch: Vec<Job>) {
    if batch.len() > 1 {
        let orders: Vec<(Scope, &NewOrder)> = batch.iter().map(|j| (j.scope, &j.order)).collect();
        if let Ok(ids) = commit(pool, outbox, &orders).await {
            for (job, ids) in batch.into_iter().zip(ids) {
                let _ = job.reply.send(Ok(ids));
            }
            return;
        }
    }
    for job in batch {
        let written = commit(pool, outbox, &[(job.scope, &job.order)]).await.and_then(|mut ids| {
            ids.pop().ok_or_else(|| StoreError::Corrupt("the order insert returned no order".into()).into())
        });
        // The requester may have gone (a closed connection); its order stands all the same.
        let _ = job.reply.send(written);
    }
}

/// `orders` in one transaction; their ids once committed.
async fn commit(
    pool: &Connections,
    outbox: &dyn Outbox,
    orders: &[(Scope, &NewOrder)],
) -> Result<Vec<WrittenOrder>, CreateOrderError> {
    let mut conn = pool.get().await?;
    let tx = conn.transaction().await.map_err(map_err)?;
    let mut sink = Sink { outbox, queued: 0, notified: 0 };
    let written = insert_orders(&tx, &mut sink, orders).await?;
    tx.commit().await.map_err(map_err)?;
    if sink.queued > 0 {
        outbox.queued(sink.queued);
    }
    if sink.notified > 0 {
        outbox.notified(sink.notified);
    }
    Ok(written)
}

/// Orders in one statement: each one's pick-up address saved (or found), the order, its
/// pick-up, shipment orders, drop-offs, parcels and every shipment's first event, with each
/// row's id back, and how many webhook endpoints each order's client has in its mode. One
/// round trip and one cached plan, however many orders and drop-offs: rows of a table go in
/// one `INSERT` from `unnest` arrays, linked to their parents by unique ids and ordinals.
///
/// An address already saved is only read, never updated (its use count and last use are
/// derived from its pick-ups), so concurrent orders from one address do not queue on its
/// row. A custom code held by a live parcel of the client and mode (the unique index
/// `parcels_live_custom_code` decides; a concurrent order's uncommitted one is waited for)
/// skips its row instead of aborting the statement, so the missing row names the parcel.
///
/// Names are bound: `$46` and `$47` the shipment kinds (which also tag the rows given back),
/// `$48` the first event's status, which is the new shipments' status too.
const INSERT_ORDERS: &str = "
WITH o_in AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::int[],
            $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
            $15::text[])
        WITH ORDINALITY AS n (client_id, mode, saved_text, normalized, created_at, created_offset, order_uid,
            pick_up_uid, scheduled_date, slot_code, slot_name, start_at, end_at, address_json, label_token, ord)
),
saved_new AS (
    INSERT INTO saved_addresses (client_id, mode, text, normalized, created_at, created_offset)
    SELECT DISTINCT ON (client_id, mode, normalized) client_id, mode, saved_text, normalized, created_at,
        created_offset
    FROM o_in ORDER BY client_id, mode, normalized, ord
    ON CONFLICT (client_id, mode, normalized) DO NOTHING
    RETURNING id, client_id, mode, normalized
),
-- A new saved address changes what the read caches hold (that its text was no saved address):
-- the cache epoch moves with it, in this statement. Orders that reuse addresses bump nothing.
epoch_bump AS (
    UPDATE cache_epoch SET n = n + 1 WHERE id = 1 AND EXISTS (SELECT 1 FROM saved_new)
),
saved AS (
    SELECT o.ord, coalesce(
        (SELECT s.id FROM saved_new s
         WHERE s.client_id = o.client_id AND s.mode = o.mode AND s.normalized = o.normalized),
        (SELECT s.id FROM saved_addresses s
         WHERE s.client_id = o.client_id AND s.mode = o.mode AND s.normalized = o.normalized)) AS id
    FROM o_in o
),
new_order AS (
    INSERT INTO orders (unique_id, client_id, mode, created_at, created_offset)
    SELECT order_uid, client_id, mode, created_at, created_offset FROM o_in ORDER BY ord
    RETURNING id, unique_id
),
order_ord AS (
    SELECT new_order.id, o.ord FROM new_order JOIN o_in o ON o.order_uid = new_order.unique_id
),
pick_up AS (
    INSERT INTO pick_up_shipments (unique_id, order_id, client_id, mode, saved_address_id, status, scheduled_date,
        slot_code, slot_name, start_at, end_at, address_json, label_token)
    SELECT o.pick_up_uid, x.id, o.client_id, o.mode, s.id, $48, o.scheduled_date, o.slot_code, o.slot_name,
        o.start_at, o.end_at, o.address_json, o.label_token
    FROM o_in o JOIN order_ord x ON x.ord = o.ord JOIN saved s ON s.ord = o.ord
    ORDER BY o.ord
    RETURNING id, unique_id
),
pick_up_ord AS (
    SELECT pick_up.id, o.ord FROM pick_up JOIN o_in o ON o.pick_up_uid = pick_up.unique_id
),
so_in AS (
    SELECT * FROM unnest($16::bigint[], $17::text[], $18::bigint[], $19::bigint[], $20::bigint[], $21::bigint[],
            $22::bigint[], $23::bigint[], $24::bigint[], $25::bigint[])
        WITH ORDINALITY AS n (order_ord, unique_id, min_price, tax_bp, actual_total_price, actual_total_tax,
            actual_price_with_tax, total_price, total_tax, price_with_tax, ord)
),
so AS (
    INSERT INTO shipment_orders (unique_id, order_id, client_id, mode, min_price, tax_bp, actual_total_price,
        actual_total_tax, actual_price_with_tax, total_price, total_tax, price_with_tax)
    SELECT n.unique_id, x.id, o.client_id, o.mode, n.min_price, n.tax_bp, n.actual_total_price, n.actual_total_tax,
        n.actual_price_with_tax, n.total_price, n.total_tax, n.price_with_tax
    FROM so_in n JOIN order_ord x ON x.ord = n.order_ord JOIN o_in o ON o.ord = n.order_ord
    ORDER BY n.ord
    RETURNING id, unique_id
),
do_in AS (
    SELECT * FROM unnest($26::text[], $27::text[], $28::text[], $29::text[], $30::text[], $31::text[],
            $32::text[], $33::text[], $34::text[], $35::text[], $36::text[], $37::bigint[])
        WITH ORDINALITY AS n (unique_id, scheduled_date, slot_code, slot_name, start_at, end_at, zone_code,
            warehouse, city, address_json, label_token, max_attempts, ord)
),
drop_off AS (
    INSERT INTO drop_off_shipments (unique_id, shipment_order_id, pick_up_shipment_id, client_id, mode, status,
        scheduled_date, slot_code, slot_name, start_at, end_at, zone_code, warehouse, city, address_json,
        label_token, max_attempts)
    SELECT d.unique_id, so.id, pu.id, o.client_id, o.mode, $48, d.scheduled_date, d.slot_code, d.slot_name,
        d.start_at, d.end_at, d.zone_code, d.warehouse, d.city, d.address_json, d.label_token, d.max_attempts
    FROM do_in d
        JOIN so_in s ON s.ord = d.ord
        JOIN so ON so.unique_id = s.unique_id
        JOIN pick_up_ord pu ON pu.ord = s.order_ord
        JOIN o_in o ON o.ord = s.order_ord
    ORDER BY d.ord
    RETURNING id, unique_id
),
drop_off_ord AS (
    SELECT drop_off.id, d.ord, s.order_ord FROM drop_off
        JOIN do_in d ON d.unique_id = drop_off.unique_id
        JOIN so_in s ON s.ord = d.ord
),
parcel AS (
    INSERT INTO parcels (drop_off_shipment_id, client_id, mode, position, pick_up_code, custom_code, size_code,
        weight_mg, price, label_token)
    SELECT x.id, o.client_id, o.mode, p.position, p.pick_up_code, p.custom_code, p.size_code, p.weight_mg, p.price,
        p.label_token
    FROM unnest($38::bigint[], $39::bigint[], $40::text[], $41::text[], $42::text[], $43::bigint[], $44::bigint[],
            $45::text[])
        WITH ORDINALITY AS p (shipment, position, pick_up_code, custom_code, size_code, weight_mg, price,
            label_token, ord)
        JOIN drop_off_ord x ON x.ord = p.shipment
        JOIN o_in o ON o.ord = x.order_ord
    ORDER BY p.ord
    ON CONFLICT (client_id, mode, custom_code) WHERE custom_code IS NOT NULL AND deleted_at IS NULL DO NOTHING
    RETURNING id, drop_off_shipment_id, position
),
event AS (
    INSERT INTO shipment_events (shipment_kind, shipment_id, seq, status, previous_status, at, actor)
    SELECT $46, x.id, 1, $48, NULL, o.created_at, $49 FROM pick_up_ord x JOIN o_in o ON o.ord = x.ord
    UNION ALL
    SELECT $47, x.id, 1, $48, NULL, o.created_at, $49 FROM drop_off_ord x JOIN o_in o ON o.ord = x.order_ord
    RETURNING id, shipment_kind, shipment_id
)
SELECT 'saved_address'::text, id, ord, NULL::bigint FROM saved
UNION ALL SELECT 'order', id, ord, NULL FROM order_ord
UNION ALL SELECT $46, id, ord, NULL FROM pick_up_ord
UNION ALL SELECT 'shipment_order', so.id, s.ord, NULL FROM so JOIN so_in s ON s.unique_id = so.unique_id
UNION ALL SELECT $47, id, ord, NULL FROM drop_off_ord
UNION ALL SELECT 'parcel', id, drop_off_shipment_id, position FROM parcel
UNION ALL SELECT 'event', id, shipment_id, NULL FROM event WHERE shipment_kind = $47
UNION ALL SELECT 'subscribers', count(e.id), o.ord, NULL FROM o_in o
    LEFT JOIN webhook_endpoints e
        ON e.client_id = o.client_id AND e.mode = o.mode AND e.enabled AND e.deleted_at IS NULL
    GROUP BY o.ord";

/// The ids [`INSERT_ORDERS`] gave back. Orders and shipments by their 1-based ordinal in
/// the statement's arrays; parcels by (drop-off id, position); events by drop-off id.
#[derive(Default)]
struct Inserted {
    saved_addresses: HashMap<i64, Option<i64>>,
    orders: HashMap<i64, i64>,
    pick_ups: HashMap<i64, i64>,
    shipment_orders: HashMap<i64, i64>,
    drop_offs: HashMap<i64, i64>,
    parcels: HashMap<(i64, i64), i64>,
    events: HashMap<i64, i64>,
    subscribers: HashMap<i64, i64>,
}

impl Inserted {
    fn read(rows: &[Row]) -> Result<Inserted, StoreError> {
        let mut out = Inserted::default();
        for r in rows {
            let what: String = column(r, 0)?;
            let id: Option<i64> = column(r, 1)?;
            let (a, b): (Option<i64>, Option<i64>) = (column(r, 2)?, column(r, 3)?);
            let id = || id.ok_or_else(|| StoreError::Corrupt(format!("{what} inserted without an id")));
            let key = || a.ok_or_else(|| StoreError::Corrupt(format!("{what} inserted without its ordinal")));
            match what.as_str() {
                "saved_address" => {
                    out.saved_addresses.insert(key()?, column(r, 1)?);
                }
                "order" => {
                    out.orders.insert(key()?, id()?);
                }
                k if k == ShipmentKind::PickUp.as_str() => {
                    out.pick_ups.insert(key()?, id()?);
                }
                "shipment_order" => {
                    out.shipment_orders.insert(key()?, id()?);
                }
                k if k == ShipmentKind::DropOff.as_str() => {
                    out.drop_offs.insert(key()?, id()?);
                }
                "parcel" => {
                    let position = b.ok_or_else(|| StoreError::Corrupt("a parcel without its position".into()))?;
                    out.parcels.insert((key()?, position), id()?);
                }
                "event" => {
                    out.events.insert(key()?, id()?);
                }
                "subscribers" => {
                    out.subscribers.insert(key()?, id()?);
                }
                other => return Err(StoreError::Corrupt(format!("the order insert returned {other:?}"))),
            }
        }
        Ok(out)
    }
}

/// [`INSERT_ORDERS`]'s parameters: one array per column.
#[derive(Default)]
struct Columns<'a> {
    clients: Vec<i64>,
    modes: Vec<&'static str>,
    saved_texts: Vec<&'a str>,
    saved_normalized: Vec<&'a str>,
    created: Vec<Timestamp>,
    offsets: Vec<i32>,
    order_uids: Vec<&'a str>,
    pick_up_uids: Vec<&'a str>,
    pick_up_text: [Vec<String>; 7],
    so_orders: Vec<i64>,
    so_uids: Vec<&'a str>,
    min_prices: Vec<i64>,
    tax_bps: Vec<i64>,
    amounts: [Vec<i64>; 6],
    do_uids: Vec<&'a str>,
    do_text: [Vec<String>; 10],
    max_attempts: Vec<i64>,
    parcel_shipments: Vec<i64>,
    positions: Vec<i64>,
    pick_up_codes: Vec<&'a str>,
    custom_codes: Vec<Option<&'a str>>,
    size_codes: Vec<&'a str>,
    weights: Vec<i64>,
    prices: Vec<i64>,
    label_tokens: Vec<&'a str>,
}

/// The 1-based ordinal of the `i`th item, as `WITH ORDINALITY` numbers it.
fn ordinal(i: usize) -> Result<i64, StoreError> {
    i64::try_from(i + 1).map_err(|_| StoreError::Corrupt(format!("ordinal {i}")))
}

impl<'a> Columns<'a> {
    fn of(orders: &[(Scope, &'a NewOrder)]) -> Result<Columns<'a>, StoreError> {
        let mut c = Columns::default();
        for (n, (scope, o)) in orders.iter().enumerate() {
            let p = &o.pick_up;
            c.clients.push(scope.client.0);
            c.modes.push(scope.mode.as_str());
            c.saved_texts.push(&p.saved_text);
            c.saved_normalized.push(&p.saved_normalized);
            c.created.push(o.created_at.timestamp());
            c.offsets.push(o.created_at.offset().seconds());
            c.order_uids.push(&o.unique_id);
            c.pick_up_uids.push(&p.unique_id);
            for (column, value) in c.pick_up_text.iter_mut().zip([
                p.scheduled_date.to_string(),
                p.slot_code.clone(),
                p.slot_name.clone(),
                iso(&p.start),
                iso(&p.end),
                crate::postgres::to_json(&p.address)?,
                p.label_token.clone(),
            ]) {
                column.push(value);
            }
            for s in &o.shipments {
                c.so_orders.push(ordinal(n)?);
                c.so_uids.push(&s.unique_id);
                c.min_prices.push(s.min_price.0);
                c.tax_bps.push(i64::from(s.tax_bp));
                let t = &s.totals;
                let amounts: [Money; 6] = [
                    t.actual_total_price,
                    t.actual_total_tax,
                    t.actual_price_with_tax,
                    t.total_price,
                    t.total_tax,
                    t.price_with_tax,
                ];
                for (column, value) in c.amounts.iter_mut().zip(amounts) {
                    column.push(value.0);
                }
                let d: &NewDropOff = &s.drop_off;
                c.do_uids.push(&d.unique_id);
                for (column, value) in c.do_text.iter_mut().zip([
                    d.scheduled_date.to_string(),
                    d.slot_code.clone(),
                    d.slot_name.clone(),
                    iso(&d.start),
                    iso(&d.end),
                    d.zone_code.clone(),
                    d.warehouse.clone(),
                    d.city.clone(),
                    crate::postgres::to_json(&d.address)?,
                    d.label_token.clone(),
                ]) {
                    column.push(value);
                }
                c.max_attempts.push(i64::from(d.max_attempts));
                let shipment = i64::try_from(c.so_uids.len())
                    .map_err(|_| StoreError::Corrupt("too many shipments in one statement".into()))?;
                for (j, parcel) in s.parcels.iter().enumerate() {
                    c.parcel_shipments.push(shipment);
                    c.positions.push(ordinal(j)? - 1);
                    c.pick_up_codes.push(&parcel.pick_up_code);
                    c.custom_codes.push(parcel.custom_code.as_ref().map(CustomCode::as_str));
                    c.size_codes.push(&parcel.size_code);
                    c.weights.push(
                        i64::try_from(parcel.weight.0)
                            .map_err(|_| StoreError::Corrupt(format!("parcel weight {} mg", parcel.weight.0)))?,
                    );
                    c.prices.push(parcel.price.0);
                    c.label_tokens.push(&parcel.label_token);
                }
            }
        }
        Ok(c)
    }
}

/// Writes `orders` (none with an idempotency key: see [`insert_order`]) in the caller's
/// transaction and queues their webhooks; their ids, in order. The first order with a parcel
/// whose custom code is taken fails the whole call with `CustomCodeTaken` (its indexes
/// within that order); the caller rolls back.
pub(crate) async fn insert_orders(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    orders: &[(Scope, &NewOrder)],
) -> Result<Vec<WrittenOrder>, CreateOrderError> {
    let k = Columns::of(orders)?;
    let first = shipments::created(ShipmentKind::DropOff, 0);
    let rows = c
        .query_typed(
            INSERT_ORDERS,
            &[
                (&k.clients, Type::INT8_ARRAY),
                (&k.modes, Type::TEXT_ARRAY),
                (&k.saved_texts, Type::TEXT_ARRAY),
                (&k.saved_normalized, Type::TEXT_ARRAY),
                (&k.created, Type::TIMESTAMPTZ_ARRAY),
                (&k.offsets, Type::INT4_ARRAY),
                (&k.order_uids, Type::TEXT_ARRAY),
                (&k.pick_up_uids, Type::TEXT_ARRAY),
                (&k.pick_up_text[0], Type::TEXT_ARRAY),
                (&k.pick_up_text[1], Type::TEXT_ARRAY),
                (&k.pick_up_text[2], Type::TEXT_ARRAY),
                (&k.pick_up_text[3], Type::TEXT_ARRAY),
                (&k.pick_up_text[4], Type::TEXT_ARRAY),
                (&k.pick_up_text[5], Type::TEXT_ARRAY),
                (&k.pick_up_text[6], Type::TEXT_ARRAY),
                (&k.so_orders, Type::INT8_ARRAY),
                (&k.so_uids, Type::TEXT_ARRAY),
                (&k.min_prices, Type::INT8_ARRAY),
                (&k.tax_bps, Type::INT8_ARRAY),
                (&k.amounts[0], Type::INT8_ARRAY),
                (&k.amounts[1], Type::INT8_ARRAY),
                (&k.amounts[2], Type::INT8_ARRAY),
                (&k.amounts[3], Type::INT8_ARRAY),
                (&k.amounts[4], Type::INT8_ARRAY),
                (&k.amounts[5], Type::INT8_ARRAY),
                (&k.do_uids, Type::TEXT_ARRAY),
                (&k.do_text[0], Type::TEXT_ARRAY),
                (&k.do_text[1], Type::TEXT_ARRAY),
                (&k.do_text[2], Type::TEXT_ARRAY),
                (&k.do_text[3], Type::TEXT_ARRAY),
                (&k.do_text[4], Type::TEXT_ARRAY),
                (&k.do_text[5], Type::TEXT_ARRAY),
                (&k.do_text[6], Type::TEXT_ARRAY),
                (&k.do_text[7], Type::TEXT_ARRAY),
                (&k.do_text[8], Type::TEXT_ARRAY),
                (&k.do_text[9], Type::TEXT_ARRAY),
                (&k.max_attempts, Type::INT8_ARRAY),
                (&k.parcel_shipments, Type::INT8_ARRAY),
                (&k.positions, Type::INT8_ARRAY),
                (&k.pick_up_codes, Type::TEXT_ARRAY),
                (&k.custom_codes, Type::TEXT_ARRAY),
                (&k.size_codes, Type::TEXT_ARRAY),
                (&k.weights, Type::INT8_ARRAY),
                (&k.prices, Type::INT8_ARRAY),
                (&k.label_tokens, Type::TEXT_ARRAY),
                (&ShipmentKind::PickUp.as_str(), Type::TEXT),
                (&ShipmentKind::DropOff.as_str(), Type::TEXT),
                (&first.to.as_str(), Type::TEXT),
                (&first.actor.as_str(), Type::TEXT),
            ],
        )
        .await
        .map_err(map_err)?;
    let got = Inserted::read(&rows)?;
    let missing = |what: &str| StoreError::Corrupt(format!("an order's {what} was not inserted"));
    let mut all = Vec::with_capacity(orders.len());
    let mut shipment_ordinal = 0;
    for (n, (scope, o)) in orders.iter().enumerate() {
        let key = ordinal(n)?;
        let order = OrderId(*got.orders.get(&key).ok_or_else(|| missing("row"))?);
        let pick_up = PickUpShipmentId(*got.pick_ups.get(&key).ok_or_else(|| missing("pick-up"))?);
        let saved_address = match got.saved_addresses.get(&key).copied().flatten() {
            Some(id) => SavedAddressId(id),
            None => saved_address_after_race(c, *scope, &o.pick_up.saved_normalized, pick_up).await?,
        };
        // The first parcel missing is the one whose code is taken.
        let mut shipments = Vec::with_capacity(o.shipments.len());
        for (i, s) in o.shipments.iter().enumerate() {
            shipment_ordinal += 1;
            let shipment_order = *got.shipment_orders.get(&shipment_ordinal).ok_or_else(|| missing("shipment"))?;
            let drop_off = *got.drop_offs.get(&shipment_ordinal).ok_or_else(|| missing("drop-off shipment"))?;
            let mut parcels = Vec::with_capacity(s.parcels.len());
            for j in 0..s.parcels.len() {
                match got.parcels.get(&(drop_off, ordinal(j)? - 1)) {
                    Some(&id) => parcels.push(ParcelId(id)),
                    None => return Err(CreateOrderError::CustomCodeTaken { drop_off: i, parcel: j }),
                }
            }
            shipments.push(ShipmentIds {
                shipment_order: ShipmentOrderId(shipment_order),
                drop_off: DropOffShipmentId(drop_off),
                parcels,
            });
        }
        all.push(WrittenOrder::new(o, OrderIds { order, pick_up, saved_address, shipments }));
    }
    queue_webhooks(c, sink, orders, &all, &got).await?;
    queue_notifications(c, sink, orders, &all, &got).await?;
    // The slots' counters last: their rows are held from here to the commit only, so batches
    // for one slot (every batch, on a busy day) overlap all their other work.
    crate::capacity::postgres::reserve(c, orders).await?;
    // The fleet's days after the counters: a day's version row is held from here to the commit.
    let ids: Vec<Vec<i64>> = all.iter().map(|w| w.ids.shipments.iter().map(|s| s.drop_off.0).collect()).collect();
    crate::tentative::postgres::reserve(c, sink.outbox.fleet(), orders, &ids).await?;
    Ok(all)
}

/// The new drop-offs' `scheduled` and `same.parcel.created` webhooks, for the orders whose
/// client has endpoints in their mode: rendered from the orders as written (the same
/// shipments a read would load) and queued in one write. A new shipment's streams are empty.
async fn queue_webhooks(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    orders: &[(Scope, &NewOrder)],
    written: &[WrittenOrder],
    got: &Inserted,
) -> Result<(), StoreError> {
    let subscribed = |n: usize| ordinal(n).is_ok_and(|key| got.subscribers.get(&key).is_some_and(|&k| k > 0));
    let mut tenants: Vec<(i64, &str)> = Vec::new();
    for (n, (scope, _)) in orders.iter().enumerate() {
        let tenant = (scope.client.0, scope.mode.as_str());
        if subscribed(n) && !tenants.contains(&tenant) {
            tenants.push(tenant);
        }
    }
    if tenants.is_empty() {
        return Ok(());
    }
    let by_tenant = crate::outbox::postgres::subscribers_of(c, &tenants).await?;
    let mut planned = crate::outbox::postgres::Planned::default();
    for (n, ((scope, _), w)) in orders.iter().zip(written).enumerate() {
        let tenant = (scope.client.0, scope.mode.as_str().to_string());
        let Some(subscribers) = by_tenant.get(&tenant).filter(|_| subscribed(n)) else { continue };
        let created = w.created_at.timestamp();
        for (shipment, scheduled) in created_events(w, |drop_off| got.events.get(&drop_off).copied())? {
            let mut busy = vec![false; subscribers.len()];
            let queued = plan_deliveries(sink.outbox, subscribers, &mut busy, shipment, &[scheduled], true, created)?;
            planned.add((tenant.0, &tenant.1), created, queued);
        }
    }
    planned.write(c, sink).await
}

/// The new drop-offs' `scheduled` recipient notifications, planned from the orders as written
/// and written in one statement (one settings read per tenant of the batch).
async fn queue_notifications(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    orders: &[(Scope, &NewOrder)],
    written: &[WrittenOrder],
    got: &Inserted,
) -> Result<(), StoreError> {
    let channels = sink.outbox.channels();
    let mut tenants: HashMap<(i64, &str), crate::notifications::NotifyTenant> = HashMap::new();
    let mut planned = crate::notifications::postgres::Planned::default();
    for ((scope, _), w) in orders.iter().zip(written) {
        let key = (scope.client.0, scope.mode.as_str());
        if let std::collections::hash_map::Entry::Vacant(e) = tenants.entry(key) {
            let settings = crate::notifications::postgres::settings(c, *scope).await?;
            e.insert(crate::notifications::NotifyTenant { client: key.0, mode: key.1.to_string(), settings });
        }
        let Some(tenant) = tenants.get(&key) else { continue };
        for (shipment, scheduled) in created_events(w, |drop_off| got.events.get(&drop_off).copied())? {
            planned.add(tenant, channels, shipment, &[scheduled]);
        }
    }
    sink.notified +=
        planned.write(c, written.first().map_or_else(Timestamp::now, |w| w.created_at.timestamp())).await?;
    Ok(())
}

/// One order in the caller's transaction, its idempotency key claimed first when it has one,
/// and the rendered response stored with the key.
pub(crate) async fn insert_order(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    scope: Scope,
    o: &NewOrder,
    render: &RenderFn,
) -> Result<CreatedOrder, CreateOrderError> {
    let (client, mode) = (scope.client.0, scope.mode.as_str());
    if let Some(end) = &o.completes {
        hold(c, end).await?;
    }
    if let Some(claim) = &o.idempotency {
        // The key is claimed first, by the primary key: a concurrent request holding it makes
        // this insert wait for its commit, then find it taken (and replay its response),
        // before this one writes anything that could conflict (a custom code). The body is
        // filled in below, before the commit.
        claim_idempotency_key(c, scope, claim, 201, "").await?;
    }
    let written = insert_orders(c, sink, &[(scope, o)])
        .await?
        .pop()
        .ok_or_else(|| StoreError::Corrupt("the order insert returned no order".into()))?;
    let mut body = None;
    if let Some(claim) = &o.idempotency {
        let rendered = render(&written).map_err(|e| StoreError::Corrupt(format!("the order response: {e}")))?;
        let n = c
            .execute_typed(
                "UPDATE idempotency_keys SET body = $4 WHERE client_id = $1 AND mode = $2 AND key = $3",
                &[(&client, Type::INT8), (&mode, Type::TEXT), (&claim.key, Type::TEXT), (&rendered, Type::TEXT)],
            )
            .await
            .map_err(map_err)?;
        if n != 1 {
            return Err(StoreError::Corrupt("the idempotency key claimed for this order vanished".into()).into());
        }
        body = Some(rendered);
    }
    if let Some(end) = &o.completes {
        complete(c, sink, scope, end, written.ids.order.0).await?;
    }
    Ok(CreatedOrder { order: written, body })
}

/// Claims `claim`'s key with this status and body, replacing an expired record: taken when
/// a record within the window exists (the caller replays it).
pub(crate) async fn claim_idempotency_key(
    c: &impl Sql,
    scope: Scope,
    claim: &IdempotencyClaim,
    status: i64,
    body: &str,
) -> Result<(), CreateOrderError> {
    let claimed = c
        .execute_typed(
            "INSERT INTO idempotency_keys (client_id, mode, key, request_hash, status, body, created_at)
             VALUES ($1, $2, $3, $4, $7, $8, $5)
             ON CONFLICT (client_id, mode, key) DO UPDATE
             SET request_hash = excluded.request_hash, status = excluded.status, body = excluded.body,
                 created_at = excluded.created_at
             WHERE idempotency_keys.created_at < $6",
            &[
                (&scope.client.0, Type::INT8),
                (&scope.mode.as_str(), Type::TEXT),
                (&claim.key, Type::TEXT),
                (&claim.request_hash, Type::TEXT),
                (&claim.now.as_second(), Type::INT8),
                (&claim.expired_before.as_second(), Type::INT8),
                (&status, Type::INT8),
                (&body, Type::TEXT),
            ],
        )
        .await
        .map_err(map_err)?;
    if claimed == 0 {
        return Err(CreateOrderError::IdempotencyKeyTaken);
    }
    Ok(())
}

/// The saved address of a pick-up whose address another order saved at the same moment:
/// that order committed after [`INSERT_ORDERS`] took its snapshot, so the statement found
/// neither its own row nor the other's. A new statement sees it.
async fn saved_address_after_race(
    c: &impl Sql,
    scope: Scope,
    normalized: &str,
    pick_up: PickUpShipmentId,
) -> Result<SavedAddressId, StoreError> {
    let row = c
        .query_typed_opt(
            "UPDATE pick_up_shipments SET saved_address_id =
                (SELECT id FROM saved_addresses WHERE client_id = $1 AND mode = $2 AND normalized = $3)
             WHERE id = $4
             RETURNING saved_address_id",
            &[
                (&scope.client.0, Type::INT8),
                (&scope.mode.as_str(), Type::TEXT),
                (&normalized, Type::TEXT),
                (&pick_up.0, Type::INT8),
            ],
        )
        .await
        .map_err(map_err)?;
    match row.map(|r| column::<Option<i64>>(&r, 0)).transpose()?.flatten() {
        Some(id) => Ok(SavedAddressId(id)),
        None => Err(StoreError::Unavailable("the pick-up address was deleted while the order was saved".into())),
    }
}

/// Deletion by custom code as one unit of work: load and lock the snapshot, let the domain
/// decide (`shipments::plan_deletion`), persist the plan; all in the caller's transaction.
pub(crate) async fn delete_parcel(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    scope: Scope,
    code: &CustomCode,
    now: Timestamp,
) -> Result<DeleteOutcome, StoreError> {
    let Some(snapshot) = deletion_snapshot(c, scope, code).await? else {
        return Ok(DeleteOutcome::NotFound);
    };
    let plan = shipments::plan_deletion(&snapshot);
    let shipment_deleted = plan.shipment_deleted();
    let DeletionPlan::Delete { parcel, charges, changes } = plan else {
        return Ok(DeleteOutcome::TooLate(snapshot.drop_off_status));
    };
    let pick_up_deleted = changes.iter().any(|e| e.kind == ShipmentKind::PickUp && e.to == Status::Deleted);
    crate::capacity::postgres::release(c, parcel.0, shipment_deleted, pick_up_deleted).await?;
    c.execute_typed(
        "UPDATE parcels SET deleted_at = $2 WHERE id = $1",
        &[(&parcel.0, Type::INT8), (&now, Type::TIMESTAMPTZ)],
    )
    .await
    .map_err(map_err)?;
    if !charges.is_empty() {
        let ids: Vec<i64> = charges.iter().map(|(s, _)| s.0).collect();
        let amounts = |f: fn(&Totals) -> Money| -> Vec<i64> { charges.iter().map(|(_, t)| f(t).0).collect() };
        c.execute_typed(
            "UPDATE shipment_orders s SET actual_total_price = n.actual_total_price,
                actual_total_tax = n.actual_total_tax, actual_price_with_tax = n.actual_price_with_tax,
                total_price = n.total_price, total_tax = n.total_tax, price_with_tax = n.price_with_tax
             FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
                    $7::bigint[])
                AS n (id, actual_total_price, actual_total_tax, actual_price_with_tax, total_price, total_tax,
                    price_with_tax)
             WHERE s.id = n.id",
            &[
                (&ids, Type::INT8_ARRAY),
                (&amounts(|t| t.actual_total_price), Type::INT8_ARRAY),
                (&amounts(|t| t.actual_total_tax), Type::INT8_ARRAY),
                (&amounts(|t| t.actual_price_with_tax), Type::INT8_ARRAY),
                (&amounts(|t| t.total_price), Type::INT8_ARRAY),
                (&amounts(|t| t.total_tax), Type::INT8_ARRAY),
                (&amounts(|t| t.price_with_tax), Type::INT8_ARRAY),
            ],
        )
        .await
        .map_err(map_err)?;
    }
    apply(c, sink, &changes, now).await?;
    Ok(DeleteOutcome::Deleted { shipment_deleted })
}

/// Locks every row a deletion in `order` decides on, in the order all units of work lock:
/// the order's shipment orders (their charges are rewritten from every parcel of the order),
/// its pick-up shipment (its status; it is deleted with its last drop-off), the pick-up's
/// drop-off shipments (their statuses and how many are left), then their parcels (which are
/// live), each in id order. Concurrent deletions in one order then run one after the other,
/// and an ops move or scan of these shipments waits at the pick-up leg.
async fn lock_order(c: &impl Sql, order: i64) -> Result<(), StoreError> {
    for sql in [
        "SELECT id FROM shipment_orders WHERE order_id = $1 ORDER BY id FOR UPDATE",
        "SELECT id FROM pick_up_shipments WHERE order_id = $1 ORDER BY id FOR UPDATE",
        "SELECT id FROM drop_off_shipments
         WHERE pick_up_shipment_id IN (SELECT id FROM pick_up_shipments WHERE order_id = $1)
         ORDER BY id FOR UPDATE",
        "SELECT id FROM parcels
         WHERE drop_off_shipment_id IN (SELECT d.id FROM drop_off_shipments d
             JOIN pick_up_shipments p ON p.id = d.pick_up_shipment_id WHERE p.order_id = $1)
         ORDER BY id FOR UPDATE",
    ] {
        c.query_typed(sql, &[(&order, Type::INT8)]).await.map_err(map_err)?;
    }
    Ok(())
}

/// The rows `plan_deletion` needs, locked and then read in the deleting transaction. The
/// parcel's order is found unlocked (a parcel never changes order); once its rows are locked
/// the snapshot is read afresh, within that order: a parcel deleted meanwhile is not found.
async fn deletion_snapshot(
    c: &impl Sql,
    scope: Scope,
    code: &CustomCode,
) -> Result<Option<DeletionSnapshot>, StoreError> {
    let (client, mode) = (scope.client.0, scope.mode.as_str());
    let order: Option<i64> = c
        .query_typed_opt(
            "SELECT so.order_id FROM parcels p
             JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id
             JOIN shipment_orders so ON so.id = d.shipment_order_id
             WHERE p.client_id = $1 AND p.mode = $2 AND p.custom_code = $3 AND p.deleted_at IS NULL",
            &[(&client, Type::INT8), (&mode, Type::TEXT), (&code.as_str(), Type::TEXT)],
        )
        .await
        .map_err(map_err)?
        .map(|r| column(&r, 0))
        .transpose()?;
    let Some(order) = order else { return Ok(None) };
    lock_order(c, order).await?;
    let found = c
        .query_typed_opt(
            "SELECT p.id, d.id, d.status, d.shipment_order_id, d.pick_up_shipment_id, pu.status, so.order_id,
                    so.min_price, so.tax_bp,
                    (SELECT count(*) FROM parcels x WHERE x.drop_off_shipment_id = d.id AND x.deleted_at IS NULL),
                    (SELECT count(*) FROM drop_off_shipments y WHERE y.pick_up_shipment_id = pu.id AND y.status <> $5)
             FROM parcels p
             JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id
             JOIN pick_up_shipments pu ON pu.id = d.pick_up_shipment_id
             JOIN shipment_orders so ON so.id = d.shipment_order_id
             WHERE p.client_id = $1 AND p.mode = $2 AND p.custom_code = $3 AND p.deleted_at IS NULL
                AND so.order_id = $4",
            &[
                (&client, Type::INT8),
                (&mode, Type::TEXT),
                (&code.as_str(), Type::TEXT),
                (&order, Type::INT8),
                (&Status::Deleted.as_str(), Type::TEXT),
            ],
        )
        .await
        .map_err(map_err)?;
    let Some(r) = found else { return Ok(None) };
    let parcel = ParcelId(column(&r, 0)?);
    let drop_off = DropOffShipmentId(column(&r, 1)?);
    let drop_off_status = status_column(&r, 2)?;
    let pick_up = PickUpShipmentId(column(&r, 4)?);
    let pick_up_status = status_column(&r, 5)?;
    let min_price = Money(column(&r, 7)?);
    let tax = TaxRate(narrow(column(&r, 8)?, "tax rate")?);
    let live_parcels: usize = narrow(column(&r, 9)?, "parcel count")?;
    let live_drop_offs: usize = narrow(column(&r, 10)?, "drop-off shipment count")?;
    let rows = c
        .query_typed(
            "SELECT so.id, p.price FROM shipment_orders so
             LEFT JOIN drop_off_shipments d ON d.shipment_order_id = so.id
             LEFT JOIN parcels p ON p.drop_off_shipment_id = d.id AND p.deleted_at IS NULL AND p.id <> $2
             WHERE so.order_id = $1 ORDER BY so.id, p.id",
            &[(&order, Type::INT8), (&parcel.0, Type::INT8)],
        )
        .await
        .map_err(map_err)?;
    let pairs = rows
        .iter()
        .map(|row| Ok((ShipmentOrderId(column(row, 0)?), column::<Option<i64>>(row, 1)?.map(Money))))
        .collect::<Result<Vec<_>, StoreError>>()?;
    let order_lines = ChargeLine::group(pairs);
    Ok(Some(DeletionSnapshot {
        parcel,
        drop_off,
        drop_off_status,
        drop_off_live_parcels: live_parcels,
        pick_up,
        pick_up_status,
        pick_up_live_drop_offs: live_drop_offs,
        order: order_lines,
        min_price,
        tax,
    }))
}

pub(crate) async fn queue(c: &impl Sql, scope: Scope, r: &NewRequest) -> Result<(), CreateOrderError> {
    if let Some(claim) = &r.idempotency {
        claim_idempotency_key(c, scope, claim, 202, &r.response).await?;
    }
    c.execute_typed(
        "INSERT INTO order_requests (request_id, client_id, mode, status, payload, terms, drop_offs_count, created_at,
            next_attempt_ms)
         VALUES ($1, $2, $3, $9, $4, $5, $6, $7, $8)",
        &[
            (&r.request_id, Type::TEXT),
            (&scope.client.0, Type::INT8),
            (&scope.mode.as_str(), Type::TEXT),
            (&r.payload, Type::TEXT),
            (&r.terms, Type::TEXT),
            (&(r.drop_offs_count as i64), Type::INT8),
            (&r.created_at, Type::TEXT),
            (&r.due_ms, Type::INT8),
            (&RequestStatus::Queued.as_str(), Type::TEXT),
        ],
    )
    .await
    .map_err(map_err)?;
    Ok(())
}

pub(crate) async fn get(c: &impl Sql, scope: Scope, request_id: &str) -> Result<Option<StoredRequest>, StoreError> {
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
            drop_offs_count: crate::postgres::narrow(column(&r, 2)?, "drop-off count")?,
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
pub(crate) async fn claim(
    c: &impl Sql,
    now_ms: i64,
    lease_until_ms: i64,
    limit: usize,
) -> Result<Vec<ClaimedRequest>, StoreError> {
    // The due index's condition, spelled, built once from the core's names: the service's
    // sessions plan generically (`plan_cache_mode`), and a generic plan cannot prove a partial
    // index's condition from bound statuses.
    static CLAIM: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE order_requests r SET status = '{processing}', claim = $3, next_attempt_ms = $2,
                attempts = r.attempts + 1
             FROM (SELECT id FROM order_requests
                   WHERE status IN ('{queued}', '{processing}') AND next_attempt_ms <= $1
                   ORDER BY id LIMIT $4 FOR UPDATE SKIP LOCKED) due
             WHERE r.id = due.id
             RETURNING r.id, r.client_id, r.mode, r.request_id, r.payload, r.terms, r.attempts, r.drop_offs_count,
                r.created_at",
            queued = RequestStatus::Queued.as_str(),
            processing = RequestStatus::Processing.as_str(),
        )
    });
    let tag = i64::from_le_bytes(dropslot_core::ids::random_bytes::<8>());
    let rows = c.query(&CLAIM, &[&now_ms, &lease_until_ms, &tag, &(limit as i64)]).await.map_err(map_err)?;
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
                attempts: crate::postgres::narrow(column(r, 6)?, "request attempts")?,
                drop_offs_count: crate::postgres::narrow(column(r, 7)?, "drop-off count")?,
                created_at: column(r, 8)?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    claimed.sort_by_key(|r| r.id);
    Ok(claimed)
}

/// Locks the claimed request's row for the order's transaction, or fails when the claim was
/// lost: taken first, so two workers whose leases overlapped cannot both write an order.
pub(crate) async fn hold(c: &impl Sql, end: &RequestEnd) -> Result<(), StoreError> {
    let n = c
        .execute(
            "SELECT 1 FROM order_requests WHERE id = $1 AND claim = $2 AND status = $3 FOR UPDATE",
            &[&end.id, &end.claim, &RequestStatus::Processing.as_str()],
        )
        .await
        .map_err(map_err)?;
    if n == 1 { Ok(()) } else { Err(StoreError::Unavailable(LEASE_LOST.into())) }
}

/// Marks the held request completed by `order`, in the order's transaction.
pub(crate) async fn complete(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    scope: Scope,
    end: &RequestEnd,
    order: i64,
) -> Result<(), StoreError> {
    let n = c
        .execute(
            "UPDATE order_requests SET status = $5, completed_at = $3, order_id = $4, claim = NULL
             WHERE id = $1 AND claim = $2 AND status = $6",
            &[
                &end.id,
                &end.claim,
                &end.completed_at,
                &order,
                &RequestStatus::Completed.as_str(),
                &RequestStatus::Processing.as_str(),
            ],
        )
        .await
        .map_err(map_err)?;
    if n != 1 {
        return Err(StoreError::Unavailable(LEASE_LOST.into()));
    }
    finished_event(c, sink, scope, end).await
}

/// Marks the claimed request failed; false (nothing written) when the claim was lost.
pub(crate) async fn fail(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    end: &RequestEnd,
    errors_json: &str,
) -> Result<bool, StoreError> {
    let row = c
        .query_opt(
            "UPDATE order_requests SET status = $5, completed_at = $3, errors_json = $4, claim = NULL
             WHERE id = $1 AND claim = $2 AND status = $6
             RETURNING client_id, mode",
            &[
                &end.id,
                &end.claim,
                &end.completed_at,
                &errors_json,
                &RequestStatus::Failed.as_str(),
                &RequestStatus::Processing.as_str(),
            ],
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
    let subscribers = crate::outbox::postgres::subscribers_of(c, &[tenant]).await?;
    let endpoints: Vec<i64> = subscribers
        .get(&(tenant.0, tenant.1.to_string()))
        .map(|all| all.iter().filter(|s| s.wants(COMPLETED_EVENT)).map(|s| s.id).collect())
        .unwrap_or_default();
    if !endpoints.is_empty() {
        let queued =
            crate::outbox::postgres::enqueue(c, tenant, COMPLETED_EVENT, &end.event_body, None, &endpoints, end.at)
                .await?;
        sink.queued += queued.len();
    }
    Ok(())
}

/// Read from the due index alone: its condition spelled, as in [`claim`].
pub(crate) async fn next_due_ms(c: &impl Sql) -> Result<Option<i64>, StoreError> {
    static NEXT_DUE: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT min(next_attempt_ms) FROM order_requests WHERE status IN ('{}', '{}')",
            RequestStatus::Queued.as_str(),
            RequestStatus::Processing.as_str()
        )
    });
    let row = c.query_one(&NEXT_DUE, &[]).await.map_err(map_err)?;
    column(&row, 0)
}

fn saved_address_row(r: &tokio_postgres::Row) -> StoreResult<SavedAddress> {
    Ok(SavedAddress {
        id: SavedAddressId(r.get(0)),
        text: r.get(1),
        use_count: r.get(2),
        created_at: zoned_text(r.get(3), r.get(4))?,
        last_used_at: zoned_text(r.get(5), r.get(6))?,
    })
}
