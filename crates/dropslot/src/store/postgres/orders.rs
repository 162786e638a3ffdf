//! Order rows on `PostgreSQL`: the atomic order insert, deletion by custom code with re-pricing,
//! and the reads behind labels. Each runs in the caller's transaction; an error means the
//! caller rolls it back. Rows of one table are written in one statement (`unnest` arrays), so
//! an order costs the same round trips whatever its size.

use std::collections::HashMap;

use jiff::Timestamp;
use tokio_postgres::types::Type;
use tokio_postgres::{GenericClient, Row};

use super::lifecycle::{apply, column, narrow, record_events, status_column};
use super::map_err;
use super::outbox::{self, Sink};
use crate::ids::{CustomCode, DropOffShipmentId, OrderId, ParcelId, PickUpShipmentId, SavedAddressId, ShipmentOrderId};
use crate::money::{Money, TaxRate};
use crate::quote::Totals;
use crate::quote::schedule::iso;
use crate::shipments::{self, ChargeLine, DeletionPlan, DeletionSnapshot, ShipmentKind};
use crate::store::{
    CreateOrderError, CreatedOrder, DeleteOutcome, LabelDropOff, LabelKind, LabelParcel, LabelSource, NewDropOff,
    NewOrder, OrderIds, RenderFn, Scope, ShipmentIds, StoreError, StoredPickUpAddress,
};

/// The ids a multi-row `INSERT … RETURNING id, unique_id` gave, in the order of `unique_ids`
/// (`RETURNING` promises no order).
fn ids_by_unique_id(rows: &[Row], unique_ids: &[&str], what: &str) -> Result<Vec<i64>, StoreError> {
    let mut by_unique_id = HashMap::with_capacity(rows.len());
    for r in rows {
        by_unique_id.insert(column::<String>(r, 1)?, column::<i64>(r, 0)?);
    }
    unique_ids
        .iter()
        .map(|u| {
            by_unique_id.get(*u).copied().ok_or_else(|| StoreError::Corrupt(format!("{what} {u} was not inserted")))
        })
        .collect()
}

pub(super) async fn insert_order(
    c: &impl GenericClient,
    sink: &mut Sink<'_>,
    scope: Scope,
    o: &NewOrder,
    render: &RenderFn,
) -> Result<CreatedOrder, CreateOrderError> {
    let (client, mode) = (scope.client.0, scope.mode.as_str());
    // Instants are stored as such with the local offset they are shown in beside them; slot
    // times as ISO 8601 text with their offset, dates as YYYY-MM-DD.
    let created = o.created_at.timestamp();
    let offset = o.created_at.offset().seconds();
    if let Some(claim) = &o.idempotency {
        // The key is claimed first, by the primary key: a concurrent request holding it makes
        // this insert wait for its commit, then find it taken (and replay its response),
        // before this one writes anything that could conflict (a custom code). An expired
        // record is replaced; the body is filled in below, before the commit.
        let claimed = c
            .execute_typed(
                "INSERT INTO idempotency_keys (client_id, mode, key, request_hash, status, body, created_at)
                 VALUES ($1, $2, $3, $4, 201, '', $5)
                 ON CONFLICT (client_id, mode, key) DO UPDATE
                 SET request_hash = excluded.request_hash, status = excluded.status, body = excluded.body,
                     created_at = excluded.created_at
                 WHERE idempotency_keys.created_at < $6",
                &[
                    (&client, Type::INT8),
                    (&mode, Type::TEXT),
                    (&claim.key, Type::TEXT),
                    (&claim.request_hash, Type::TEXT),
                    (&claim.now.as_second(), Type::INT8),
                    (&claim.expired_before.as_second(), Type::INT8),
                ],
            )
            .await
            .map_err(map_err)?;
        if claimed == 0 {
            return Err(CreateOrderError::IdempotencyKeyTaken);
        }
    }
    let saved_address = SavedAddressId(column(
        &c.query_typed_one(
            "INSERT INTO saved_addresses (client_id, mode, text, normalized, created_at, created_offset, last_used_at,
                last_used_offset)
             VALUES ($1, $2, $3, $4, $5, $6, $5, $6)
             ON CONFLICT (client_id, mode, normalized)
             DO UPDATE SET use_count = saved_addresses.use_count + 1, last_used_at = excluded.last_used_at,
                last_used_offset = excluded.last_used_offset
             RETURNING id",
            &[
                (&client, Type::INT8),
                (&mode, Type::TEXT),
                (&o.pick_up.saved_text, Type::TEXT),
                (&o.pick_up.saved_normalized, Type::TEXT),
                (&created, Type::TIMESTAMPTZ),
                (&offset, Type::INT4),
            ],
        )
        .await
        .map_err(map_err)?,
        0,
    )?);
    let order = OrderId(column(
        &c.query_typed_one(
            "INSERT INTO orders (unique_id, client_id, mode, created_at, created_offset) VALUES ($1, $2, $3, $4, $5)
             RETURNING id",
            &[
                (&o.unique_id, Type::TEXT),
                (&client, Type::INT8),
                (&mode, Type::TEXT),
                (&created, Type::TIMESTAMPTZ),
                (&offset, Type::INT4),
            ],
        )
        .await
        .map_err(map_err)?,
        0,
    )?);
    let p = &o.pick_up;
    let pick_up_address = super::to_json(&p.address)?;
    let pick_up = PickUpShipmentId(column(
        &c.query_typed_one(
            "INSERT INTO pick_up_shipments (unique_id, order_id, client_id, mode, saved_address_id, status,
                scheduled_date, slot_code, slot_name, start_at, end_at, address_json, label_token)
             VALUES ($1, $2, $3, $4, $5, 'scheduled', $6, $7, $8, $9, $10, $11, $12)
             RETURNING id",
            &[
                (&p.unique_id, Type::TEXT),
                (&order.0, Type::INT8),
                (&client, Type::INT8),
                (&mode, Type::TEXT),
                (&saved_address.0, Type::INT8),
                (&p.scheduled_date.to_string(), Type::TEXT),
                (&p.slot_code, Type::TEXT),
                (&p.slot_name, Type::TEXT),
                (&iso(&p.start), Type::TEXT),
                (&iso(&p.end), Type::TEXT),
                (&pick_up_address, Type::TEXT),
                (&p.label_token, Type::TEXT),
            ],
        )
        .await
        .map_err(map_err)?,
        0,
    )?);

    // The shipment orders, one statement for all.
    let unique_ids: Vec<&str> = o.shipments.iter().map(|s| s.unique_id.as_str()).collect();
    let min_prices: Vec<i64> = o.shipments.iter().map(|s| s.min_price.0).collect();
    let tax_bps: Vec<i64> = o.shipments.iter().map(|s| i64::from(s.tax_bp)).collect();
    let amounts = |f: fn(&Totals) -> Money| -> Vec<i64> { o.shipments.iter().map(|s| f(&s.totals).0).collect() };
    let rows = c
        .query_typed(
            "INSERT INTO shipment_orders (unique_id, order_id, client_id, mode, min_price, tax_bp, actual_total_price,
                actual_total_tax, actual_price_with_tax, total_price, total_tax, price_with_tax)
             SELECT n.unique_id, $2, $3, $4, n.min_price, n.tax_bp, n.actual_total_price, n.actual_total_tax,
                n.actual_price_with_tax, n.total_price, n.total_tax, n.price_with_tax
             FROM unnest($1::text[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[],
                    $10::bigint[], $11::bigint[], $12::bigint[])
                WITH ORDINALITY AS n (unique_id, min_price, tax_bp, actual_total_price, actual_total_tax,
                    actual_price_with_tax, total_price, total_tax, price_with_tax, ord)
             ORDER BY n.ord
             RETURNING id, unique_id",
            &[
                (&unique_ids, Type::TEXT_ARRAY),
                (&order.0, Type::INT8),
                (&client, Type::INT8),
                (&mode, Type::TEXT),
                (&min_prices, Type::INT8_ARRAY),
                (&tax_bps, Type::INT8_ARRAY),
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
    let shipment_orders = ids_by_unique_id(&rows, &unique_ids, "shipment order")?;

    // Their drop-off shipments, one statement for all.
    let mut addresses = Vec::with_capacity(o.shipments.len());
    for s in &o.shipments {
        addresses.push(super::to_json(&s.drop_off.address)?);
    }
    let drop_off_text =
        |f: fn(&NewDropOff) -> String| -> Vec<String> { o.shipments.iter().map(|s| f(&s.drop_off)).collect() };
    let drop_off_unique_ids: Vec<&str> = o.shipments.iter().map(|s| s.drop_off.unique_id.as_str()).collect();
    let max_attempts: Vec<i64> = o.shipments.iter().map(|s| i64::from(s.drop_off.max_attempts)).collect();
    let rows = c
        .query_typed(
            "INSERT INTO drop_off_shipments (unique_id, shipment_order_id, pick_up_shipment_id, client_id, mode, status,
                scheduled_date, slot_code, slot_name, start_at, end_at, zone_code, warehouse, city, address_json,
                label_token, max_attempts)
             SELECT n.unique_id, n.shipment_order_id, $3, $4, $5, 'scheduled', n.scheduled_date, n.slot_code,
                n.slot_name, n.start_at, n.end_at, n.zone_code, n.warehouse, n.city, n.address_json, n.label_token,
                n.max_attempts
             FROM unnest($1::text[], $2::bigint[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
                    $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::bigint[])
                WITH ORDINALITY AS n (unique_id, shipment_order_id, scheduled_date, slot_code, slot_name, start_at,
                    end_at, zone_code, warehouse, city, address_json, label_token, max_attempts, ord)
             ORDER BY n.ord
             RETURNING id, unique_id",
            &[
                (&drop_off_unique_ids, Type::TEXT_ARRAY),
                (&shipment_orders, Type::INT8_ARRAY),
                (&pick_up.0, Type::INT8),
                (&client, Type::INT8),
                (&mode, Type::TEXT),
                (&drop_off_text(|d| d.scheduled_date.to_string()), Type::TEXT_ARRAY),
                (&drop_off_text(|d| d.slot_code.clone()), Type::TEXT_ARRAY),
                (&drop_off_text(|d| d.slot_name.clone()), Type::TEXT_ARRAY),
                (&drop_off_text(|d| iso(&d.start)), Type::TEXT_ARRAY),
                (&drop_off_text(|d| iso(&d.end)), Type::TEXT_ARRAY),
                (&drop_off_text(|d| d.zone_code.clone()), Type::TEXT_ARRAY),
                (&drop_off_text(|d| d.warehouse.clone()), Type::TEXT_ARRAY),
                (&drop_off_text(|d| d.city.clone()), Type::TEXT_ARRAY),
                (&addresses, Type::TEXT_ARRAY),
                (&drop_off_text(|d| d.label_token.clone()), Type::TEXT_ARRAY),
                (&max_attempts, Type::INT8_ARRAY),
            ],
        )
        .await
        .map_err(map_err)?;
    let drop_offs = ids_by_unique_id(&rows, &drop_off_unique_ids, "drop-off shipment")?;

    // Every parcel, one statement for all. A custom code held by a live parcel of this client
    // and mode (the unique index `parcels_live_custom_code` decides; a concurrent order's
    // uncommitted one is waited for) skips its row instead of aborting the transaction, so
    // the missing rows name exactly the parcel to report; the caller then rolls back.
    let mut parcel_drop_offs = Vec::new();
    let mut positions = Vec::new();
    let mut pick_up_codes = Vec::new();
    let mut custom_codes = Vec::new();
    let mut size_codes = Vec::new();
    let mut weights = Vec::new();
    let mut prices = Vec::new();
    let mut label_tokens = Vec::new();
    for (s, &drop_off) in o.shipments.iter().zip(&drop_offs) {
        for (j, parcel) in s.parcels.iter().enumerate() {
            parcel_drop_offs.push(drop_off);
            positions.push(i64::try_from(j).map_err(|_| StoreError::Corrupt(format!("parcel position {j}")))?);
            pick_up_codes.push(parcel.pick_up_code.as_str());
            custom_codes.push(parcel.custom_code.as_ref().map(CustomCode::as_str));
            size_codes.push(parcel.size_code.as_str());
            weights.push(
                i64::try_from(parcel.weight.0)
                    .map_err(|_| StoreError::Corrupt(format!("parcel weight {} mg", parcel.weight.0)))?,
            );
            prices.push(parcel.price.0);
            label_tokens.push(parcel.label_token.as_str());
        }
    }
    let inserted: HashMap<(i64, i64), i64> = c
        .query_typed(
            "INSERT INTO parcels (drop_off_shipment_id, client_id, mode, position, pick_up_code, custom_code, size_code,
                weight_mg, price, label_token)
             SELECT n.drop_off, $2, $3, n.position, n.pick_up_code, n.custom_code, n.size_code, n.weight_mg, n.price,
                n.label_token
             FROM unnest($1::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[],
                    $10::text[])
                WITH ORDINALITY AS n (drop_off, position, pick_up_code, custom_code, size_code, weight_mg, price,
                    label_token, ord)
             ORDER BY n.ord
             ON CONFLICT (client_id, mode, custom_code) WHERE custom_code IS NOT NULL AND deleted_at IS NULL
             DO NOTHING
             RETURNING id, drop_off_shipment_id, position",
            &[
                (&parcel_drop_offs, Type::INT8_ARRAY),
                (&client, Type::INT8),
                (&mode, Type::TEXT),
                (&positions, Type::INT8_ARRAY),
                (&pick_up_codes, Type::TEXT_ARRAY),
                (&custom_codes, Type::TEXT_ARRAY),
                (&size_codes, Type::TEXT_ARRAY),
                (&weights, Type::INT8_ARRAY),
                (&prices, Type::INT8_ARRAY),
                (&label_tokens, Type::TEXT_ARRAY),
            ],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| Ok(((column(r, 1)?, column(r, 2)?), column(r, 0)?)))
        .collect::<Result<_, StoreError>>()?;
    // The rows inserted, in order; the first one skipped is the parcel whose code is taken.
    let mut keys = parcel_drop_offs.iter().zip(&positions);
    let mut shipments = Vec::with_capacity(o.shipments.len());
    for (i, ((s, &shipment_order), &drop_off)) in o.shipments.iter().zip(&shipment_orders).zip(&drop_offs).enumerate() {
        let mut parcels = Vec::with_capacity(s.parcels.len());
        for (j, key) in keys.by_ref().take(s.parcels.len()).enumerate() {
            match inserted.get(&(*key.0, *key.1)) {
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

    // Every shipment's first event, one statement for all; then the drop-offs' webhooks, in order.
    let mut firsts = vec![shipments::created(ShipmentKind::PickUp, pick_up.0)];
    firsts.extend(drop_offs.iter().map(|&d| shipments::created(ShipmentKind::DropOff, d)));
    let recorded = record_events(c, &firsts, created).await?;
    for (&drop_off, scheduled) in drop_offs.iter().zip(recorded.iter().skip(1)) {
        outbox::shipment_events(c, sink, drop_off, std::slice::from_ref(scheduled), true, created).await?;
    }
    let ids = OrderIds { order, pick_up, saved_address, shipments };
    let mut body = None;
    if let Some(claim) = &o.idempotency {
        let rendered = render(&ids).map_err(|e| StoreError::Corrupt(format!("the order response: {e}")))?;
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
    Ok(CreatedOrder { ids, body })
}

/// Deletion by custom code as one unit of work: load and lock the snapshot, let the domain
/// decide (`shipments::plan_deletion`), persist the plan; all in the caller's transaction.
pub(super) async fn delete_parcel(
    c: &impl GenericClient,
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
async fn lock_order(c: &impl GenericClient, order: i64) -> Result<(), StoreError> {
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
    c: &impl GenericClient,
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
                    (SELECT count(*) FROM drop_off_shipments y WHERE y.pick_up_shipment_id = pu.id AND y.status <> 'deleted')
             FROM parcels p
             JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id
             JOIN pick_up_shipments pu ON pu.id = d.pick_up_shipment_id
             JOIN shipment_orders so ON so.id = d.shipment_order_id
             WHERE p.client_id = $1 AND p.mode = $2 AND p.custom_code = $3 AND p.deleted_at IS NULL
                AND so.order_id = $4",
            &[(&client, Type::INT8), (&mode, Type::TEXT), (&code.as_str(), Type::TEXT), (&order, Type::INT8)],
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

/// A parcel of a label's pick-up: its drop-off shipment, id, pick-up code, custom code, size
/// code and whether it is deleted.
type LabelParcelRow = (i64, i64, String, Option<String>, String, bool);

pub(super) async fn label_source(
    c: &impl GenericClient,
    kind: LabelKind,
    token: &str,
) -> Result<Option<LabelSource>, StoreError> {
    // Resolve the token to (pick-up id, drop-off id, parcel id).
    let target: Option<(i64, Option<i64>, Option<i64>)> = match kind {
        LabelKind::PickUp => c
            .query_typed_opt("SELECT id FROM pick_up_shipments WHERE label_token = $1", &[(&token, Type::TEXT)])
            .await
            .map_err(map_err)?
            .map(|r| Ok::<_, StoreError>((column(&r, 0)?, None, None)))
            .transpose()?,
        LabelKind::DropOff => c
            .query_typed_opt(
                "SELECT pick_up_shipment_id, id FROM drop_off_shipments WHERE label_token = $1",
                &[(&token, Type::TEXT)],
            )
            .await
            .map_err(map_err)?
            .map(|r| Ok::<_, StoreError>((column(&r, 0)?, Some(column(&r, 1)?), None)))
            .transpose()?,
        LabelKind::Parcel => c
            .query_typed_opt(
                "SELECT d.pick_up_shipment_id, d.id, p.id FROM parcels p
                 JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id WHERE p.label_token = $1",
                &[(&token, Type::TEXT)],
            )
            .await
            .map_err(map_err)?
            .map(|r| Ok::<_, StoreError>((column(&r, 0)?, Some(column(&r, 1)?), Some(column(&r, 2)?))))
            .transpose()?,
    };
    let Some((pick_up, drop_off_id, parcel_id)) = target else { return Ok(None) };
    let r = c
        .query_typed_opt(
            "SELECT unique_id, address_json, scheduled_date, slot_name, status FROM pick_up_shipments WHERE id = $1",
            &[(&pick_up, Type::INT8)],
        )
        .await
        .map_err(map_err)?
        .ok_or_else(|| StoreError::Corrupt(format!("pick-up shipment {pick_up} is missing")))?;
    let pick_up_unique_id: String = column(&r, 0)?;
    let pick_up_address: StoredPickUpAddress = super::json_column(column(&r, 1)?, "pick-up address")?;
    let pick_up_date: String = column(&r, 2)?;
    let pick_up_slot_name: String = column(&r, 3)?;
    let pick_up_status: String = column(&r, 4)?;
    let mut drop_offs = Vec::new();
    let mut drop_off_index = 0;
    let mut deleted = kind == LabelKind::PickUp && pick_up_status == "deleted";
    let mut parcel = None;
    let rows: Vec<(i64, LabelDropOff, String)> = c
        .query_typed(
            "SELECT id, unique_id, address_json, scheduled_date, slot_name, zone_code, warehouse, status
             FROM drop_off_shipments WHERE pick_up_shipment_id = $1 ORDER BY id",
            &[(&pick_up, Type::INT8)],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| {
            Ok((
                column(r, 0)?,
                LabelDropOff {
                    tracking_code: column(r, 1)?,
                    address: super::json_column(column(r, 2)?, "drop-off address")?,
                    scheduled_date: column(r, 3)?,
                    slot_name: column(r, 4)?,
                    zone_code: column(r, 5)?,
                    warehouse: column(r, 6)?,
                    parcel_sizes: Vec::new(),
                },
                column(r, 7)?,
            ))
        })
        .collect::<Result<_, StoreError>>()?;
    // Every parcel of the pick-up in one read, by drop-off and position.
    let all_parcels: Vec<LabelParcelRow> = c
        .query_typed(
            "SELECT drop_off_shipment_id, id, pick_up_code, custom_code, size_code, deleted_at IS NOT NULL
             FROM parcels
             WHERE drop_off_shipment_id IN (SELECT id FROM drop_off_shipments WHERE pick_up_shipment_id = $1)
             ORDER BY drop_off_shipment_id, position",
            &[(&pick_up, Type::INT8)],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| Ok((column(r, 0)?, column(r, 1)?, column(r, 2)?, column(r, 3)?, column(r, 4)?, column(r, 5)?)))
        .collect::<Result<_, StoreError>>()?;
    for (i, (id, mut d, status)) in rows.into_iter().enumerate() {
        let parcels: Vec<&LabelParcelRow> = all_parcels.iter().filter(|p| p.0 == id).collect();
        d.parcel_sizes = parcels.iter().filter(|p| !p.5).map(|p| p.4.clone()).collect();
        if Some(id) == drop_off_id {
            drop_off_index = i;
            if kind == LabelKind::DropOff {
                deleted = status == "deleted";
            }
            if let Some(pid) = parcel_id {
                let live: Vec<_> = parcels.iter().filter(|p| !p.5).collect();
                let me = parcels.iter().find(|p| p.1 == pid);
                if let Some(me) = me {
                    deleted = me.5;
                    let index = live.iter().position(|p| p.1 == pid).map_or(0, |x| x + 1);
                    parcel = Some(LabelParcel {
                        pick_up_code: me.2.clone(),
                        custom_code: me.3.clone(),
                        size_code: me.4.clone(),
                        index: u32::try_from(index)
                            .map_err(|_| StoreError::Corrupt(format!("parcel position {index}")))?,
                        count: u32::try_from(live.len())
                            .map_err(|_| StoreError::Corrupt(format!("parcel count {}", live.len())))?,
                    });
                }
            }
        }
        drop_offs.push(d);
    }
    Ok(Some(LabelSource {
        kind,
        deleted,
        pick_up_unique_id,
        pick_up_address,
        pick_up_date,
        pick_up_slot_name,
        drop_offs,
        parcel,
        drop_off_index,
    }))
}
