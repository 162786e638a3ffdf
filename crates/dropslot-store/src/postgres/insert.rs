//! Order creation on `PostgreSQL`: any number of orders in one statement ([`INSERT_ORDERS`]),
//! so an order costs one round trip, or a share of one when the batcher (`batch.rs`) groups
//! concurrent orders into one transaction.

use std::collections::HashMap;

use jiff::Timestamp;
use tokio_postgres::Row;
use tokio_postgres::types::Type;

use super::lifecycle::column;
use super::map_err;
use super::outbox::{self, Sink};
use super::sql::Sql;
use crate::webhooks::{created_events, plan};
use crate::{
    CreateOrderError, CreatedOrder, IdempotencyClaim, NewDropOff, NewOrder, OrderIds, RenderFn, Scope, ShipmentIds,
    StoreError, WrittenOrder,
};
use dropslot_core::ids::{
    CustomCode, DropOffShipmentId, OrderId, ParcelId, PickUpShipmentId, SavedAddressId, ShipmentOrderId,
};
use dropslot_core::money::Money;
use dropslot_core::shipments::{self, ShipmentKind};
use dropslot_core::time::iso;

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
    SELECT o.pick_up_uid, x.id, o.client_id, o.mode, s.id, 'scheduled', o.scheduled_date, o.slot_code, o.slot_name,
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
    SELECT d.unique_id, so.id, pu.id, o.client_id, o.mode, 'scheduled', d.scheduled_date, d.slot_code, d.slot_name,
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
UNION ALL SELECT 'pick_up', id, ord, NULL FROM pick_up_ord
UNION ALL SELECT 'shipment_order', so.id, s.ord, NULL FROM so JOIN so_in s ON s.unique_id = so.unique_id
UNION ALL SELECT 'drop_off', id, ord, NULL FROM drop_off_ord
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
                "pick_up" => {
                    out.pick_ups.insert(key()?, id()?);
                }
                "shipment_order" => {
                    out.shipment_orders.insert(key()?, id()?);
                }
                "drop_off" => {
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
                super::to_json(&p.address)?,
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
                    super::to_json(&d.address)?,
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
pub(super) async fn insert_orders(
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
    super::capacity::reserve(c, orders).await?;
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
    let by_tenant = outbox::subscribers_of(c, &tenants).await?;
    let mut planned = outbox::Planned::default();
    for (n, ((scope, _), w)) in orders.iter().zip(written).enumerate() {
        let tenant = (scope.client.0, scope.mode.as_str().to_string());
        let Some(subscribers) = by_tenant.get(&tenant).filter(|_| subscribed(n)) else { continue };
        let created = w.created_at.timestamp();
        for (shipment, scheduled) in created_events(w, |drop_off| got.events.get(&drop_off).copied())? {
            let mut busy = vec![false; subscribers.len()];
            let queued = plan(sink.outbox, subscribers, &mut busy, shipment, &[scheduled], true, created)?;
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
    let mut planned = super::notify::Planned::default();
    for ((scope, _), w) in orders.iter().zip(written) {
        let key = (scope.client.0, scope.mode.as_str());
        if let std::collections::hash_map::Entry::Vacant(e) = tenants.entry(key) {
            let settings = super::notify::settings(c, *scope).await?;
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
pub(super) async fn insert_order(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    scope: Scope,
    o: &NewOrder,
    render: &RenderFn,
) -> Result<CreatedOrder, CreateOrderError> {
    let (client, mode) = (scope.client.0, scope.mode.as_str());
    if let Some(end) = &o.completes {
        super::requests::hold(c, end).await?;
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
        super::requests::complete(c, sink, scope, end, written.ids.order.0).await?;
    }
    Ok(CreatedOrder { order: written, body })
}

/// Claims `claim`'s key with this status and body, replacing an expired record: taken when
/// a record within the window exists (the caller replays it).
pub(super) async fn claim_idempotency_key(
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
