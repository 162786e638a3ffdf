//! Order rows on `SQLite`: the atomic order insert, deletion by custom code with re-pricing,
//! and the reads behind labels. Runs on the writer thread (writes) or a pooled reader.

use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

use super::map_err;
use crate::ids::{DropOffShipmentId, OrderId, ParcelId, PickUpShipmentId, SavedAddressId, ShipmentOrderId};
use crate::money::{Money, TaxRate};
use crate::quote::pricing;
use crate::store::{
    CreateOrderError, CreatedOrder, DeleteOutcome, LabelDropOff, LabelKind, LabelParcel, LabelSource, NewOrder,
    OrderIds, RenderFn, Scope, ShipmentIds, StoreError, StoredPickUpAddress,
};

/// Who recorded a status change made by the client API.
const ACTOR_CLIENT: &str = "client";

pub(super) fn insert_order(
    c: &Connection,
    scope: Scope,
    o: &NewOrder,
    render: &RenderFn,
) -> Result<CreatedOrder, CreateOrderError> {
    let (client, mode) = (scope.client.0, scope.mode.as_str());
    if let Some(claim) = &o.idempotency {
        let existing: Option<i64> = c
            .prepare_cached("SELECT created_at FROM idempotency_keys WHERE client_id = ?1 AND mode = ?2 AND key = ?3")
            .and_then(|mut s| s.query_row(params![client, mode, claim.key], |r| r.get(0)).optional())
            .map_err(map_err)?;
        match existing {
            Some(at) if at >= claim.expired_before.as_second() => return Err(CreateOrderError::IdempotencyKeyTaken),
            Some(_) => {
                c.execute(
                    "DELETE FROM idempotency_keys WHERE client_id = ?1 AND mode = ?2 AND key = ?3",
                    params![client, mode, claim.key],
                )
                .map_err(map_err)?;
            }
            None => {}
        }
    }
    let saved_address = SavedAddressId(
        c.prepare_cached(
            "INSERT INTO saved_addresses (client_id, mode, text, normalized, created_at, last_used_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)
             ON CONFLICT (client_id, mode, normalized)
             DO UPDATE SET use_count = use_count + 1, last_used_at = excluded.last_used_at
             RETURNING id",
        )
        .and_then(|mut s| {
            s.query_row(params![client, mode, o.pick_up.saved_text, o.pick_up.saved_normalized, o.created_at], |r| {
                r.get(0)
            })
        })
        .map_err(map_err)?,
    );
    c.prepare_cached("INSERT INTO orders (unique_id, client_id, mode, created_at) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut s| s.execute(params![o.unique_id, client, mode, o.created_at]))
        .map_err(map_err)?;
    let order = OrderId(c.last_insert_rowid());
    let p = &o.pick_up;
    let pick_up_address = super::to_json(&p.address).map_err(map_err)?;
    c.prepare_cached(
        "INSERT INTO pick_up_shipments (unique_id, order_id, client_id, mode, saved_address_id, status, scheduled_date,
            slot_code, slot_name, start_at, end_at, address_json, label_token)
         VALUES (?1, ?2, ?3, ?4, ?5, 'scheduled', ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )
    .and_then(|mut s| {
        s.execute(params![
            p.unique_id,
            order.0,
            client,
            mode,
            saved_address.0,
            p.scheduled_date,
            p.slot_code,
            p.slot_name,
            p.start,
            p.end,
            pick_up_address,
            p.label_token
        ])
    })
    .map_err(map_err)?;
    let pick_up = PickUpShipmentId(c.last_insert_rowid());
    record_event(c, "pick_up", pick_up.0, "scheduled", None, &o.created_at, None)?;

    let mut shipments = Vec::with_capacity(o.shipments.len());
    for (i, s) in o.shipments.iter().enumerate() {
        let t = &s.totals;
        c.prepare_cached(
            "INSERT INTO shipment_orders (unique_id, order_id, client_id, mode, min_price, tax_bp, actual_total_price,
                actual_total_tax, actual_price_with_tax, total_price, total_tax, price_with_tax)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        )
        .and_then(|mut st| {
            st.execute(params![
                s.unique_id,
                order.0,
                client,
                mode,
                s.min_price.0,
                s.tax_bp,
                t.actual_total_price.0,
                t.actual_total_tax.0,
                t.actual_price_with_tax.0,
                t.total_price.0,
                t.total_tax.0,
                t.price_with_tax.0
            ])
        })
        .map_err(map_err)?;
        let shipment_order = ShipmentOrderId(c.last_insert_rowid());
        let d = &s.drop_off;
        let address = super::to_json(&d.address).map_err(map_err)?;
        c.prepare_cached(
            "INSERT INTO drop_off_shipments (unique_id, shipment_order_id, pick_up_shipment_id, client_id, mode, status,
                scheduled_date, slot_code, slot_name, start_at, end_at, zone_code, warehouse, city, address_json, label_token)
             VALUES (?1, ?2, ?3, ?4, ?5, 'scheduled', ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        )
        .and_then(|mut st| {
            st.execute(params![
                d.unique_id, shipment_order.0, pick_up.0, client, mode, d.scheduled_date, d.slot_code, d.slot_name,
                d.start, d.end, d.zone_code, d.warehouse, d.city, address, d.label_token
            ])
        })
        .map_err(map_err)?;
        let drop_off = DropOffShipmentId(c.last_insert_rowid());
        record_event(c, "drop_off", drop_off.0, "scheduled", None, &o.created_at, None)?;
        let mut parcels = Vec::with_capacity(s.parcels.len());
        for (j, parcel) in s.parcels.iter().enumerate() {
            let inserted = c
                .prepare_cached(
                    "INSERT INTO parcels (drop_off_shipment_id, client_id, mode, position, pick_up_code, custom_code,
                        size_code, weight_mg, price, label_token)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                )
                .and_then(|mut st| {
                    st.execute(params![
                        drop_off.0,
                        client,
                        mode,
                        j as i64,
                        parcel.pick_up_code,
                        parcel.custom_code,
                        parcel.size_code,
                        parcel.weight_mg as i64,
                        parcel.price.0,
                        parcel.label_token
                    ])
                });
            match inserted {
                Ok(_) => parcels.push(ParcelId(c.last_insert_rowid())),
                Err(e) if is_custom_code_conflict(&e) => {
                    return Err(CreateOrderError::CustomCodeTaken { drop_off: i, parcel: j });
                }
                Err(e) => return Err(map_err(e).into()),
            }
        }
        shipments.push(ShipmentIds { shipment_order, drop_off, parcels });
    }
    let ids = OrderIds { order, pick_up, saved_address, shipments };
    let mut body = None;
    if let Some(claim) = &o.idempotency {
        let rendered = render(&ids).map_err(|e| StoreError::Corrupt(format!("the order response: {e}")))?;
        c.prepare_cached(
            "INSERT INTO idempotency_keys (client_id, mode, key, request_hash, status, body, created_at)
             VALUES (?1, ?2, ?3, ?4, 201, ?5, ?6)",
        )
        .and_then(|mut s| {
            s.execute(params![client, mode, claim.key, claim.request_hash, rendered, claim.now.as_second()])
        })
        .map_err(map_err)?;
        body = Some(rendered);
    }
    Ok(CreatedOrder { ids, body })
}

fn is_custom_code_conflict(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, Some(msg))
        if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE && msg.contains("parcels.custom_code"))
}

fn record_event(
    c: &Connection,
    kind: &str,
    id: i64,
    status: &str,
    previous: Option<&str>,
    at: &str,
    reason: Option<&str>,
) -> Result<(), StoreError> {
    c.prepare_cached(
        "INSERT INTO shipment_events (shipment_kind, shipment_id, status, previous_status, at, actor, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut s| s.execute(params![kind, id, status, previous, at, ACTOR_CLIENT, reason]))
    .map_err(map_err)?;
    Ok(())
}

pub(super) fn delete_parcel(
    c: &Connection,
    scope: Scope,
    code: &str,
    now: Timestamp,
) -> Result<DeleteOutcome, StoreError> {
    let found: Option<(i64, i64, String, i64, i64)> = c
        .prepare_cached(
            "SELECT p.id, d.id, d.status, d.shipment_order_id, d.pick_up_shipment_id
             FROM parcels p JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id
             WHERE p.client_id = ?1 AND p.mode = ?2 AND p.custom_code = ?3 AND p.deleted_at IS NULL",
        )
        .and_then(|mut s| {
            s.query_row(params![scope.client.0, scope.mode.as_str(), code], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .optional()
        })
        .map_err(map_err)?;
    let Some((parcel, drop_off, status, shipment_order, pick_up)) = found else {
        return Ok(DeleteOutcome::NotFound);
    };
    if status != "scheduled" && status != "to_pick_up" {
        return Ok(DeleteOutcome::TooLate(status));
    }
    let at = now.to_string();
    c.execute("UPDATE parcels SET deleted_at = ?2 WHERE id = ?1", params![parcel, at]).map_err(map_err)?;
    let remaining: i64 = c
        .query_row(
            "SELECT count(*) FROM parcels WHERE drop_off_shipment_id = ?1 AND deleted_at IS NULL",
            [drop_off],
            |r| r.get(0),
        )
        .map_err(map_err)?;
    reprice_order(c, shipment_order)?;
    if remaining > 0 {
        return Ok(DeleteOutcome::Deleted { shipment_deleted: false });
    }
    c.execute("UPDATE drop_off_shipments SET status = 'deleted' WHERE id = ?1", [drop_off]).map_err(map_err)?;
    record_event(c, "drop_off", drop_off, "deleted", Some(&status), &at, Some("the client deleted its last parcel"))?;
    let live: i64 = c
        .query_row(
            "SELECT count(*) FROM drop_off_shipments WHERE pick_up_shipment_id = ?1 AND status <> 'deleted'",
            [pick_up],
            |r| r.get(0),
        )
        .map_err(map_err)?;
    if live == 0 {
        let previous: String = c
            .query_row("SELECT status FROM pick_up_shipments WHERE id = ?1", [pick_up], |r| r.get(0))
            .map_err(map_err)?;
        c.execute("UPDATE pick_up_shipments SET status = 'deleted' WHERE id = ?1", [pick_up]).map_err(map_err)?;
        record_event(c, "pick_up", pick_up, "deleted", Some(&previous), &at, Some("all its drop-offs were deleted"))?;
    }
    Ok(DeleteOutcome::Deleted { shipment_deleted: true })
}

/// Re-prices every shipment order of the order that `shipment_order` belongs to, on the
/// terms they were created with: the minimum and tax apply once to the order and are shared
/// out (`pricing::allocate`); a shipment order with no parcel left is charged nothing.
fn reprice_order(c: &Connection, shipment_order: i64) -> Result<(), StoreError> {
    let mut st = c
        .prepare_cached(
            "SELECT so.id, so.min_price, so.tax_bp,
                    (SELECT count(*) FROM parcels p JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id
                      WHERE d.shipment_order_id = so.id AND p.deleted_at IS NULL),
                    (SELECT coalesce(sum(p.price), 0) FROM parcels p JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id
                      WHERE d.shipment_order_id = so.id AND p.deleted_at IS NULL)
             FROM shipment_orders so
             WHERE so.order_id = (SELECT order_id FROM shipment_orders WHERE id = ?1)
             ORDER BY so.id",
        )
        .map_err(map_err)?;
    let rows: Vec<(i64, i64, u32, i64, i64)> = st
        .query_map([shipment_order], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .and_then(Iterator::collect)
        .map_err(map_err)?;
    let Some(&(_, min_price, tax_bp, _, _)) = rows.first() else {
        return Err(StoreError::Corrupt(format!("shipment order {shipment_order} has no order")));
    };
    let actuals: Vec<Option<Money>> = rows.iter().map(|r| (r.3 > 0).then_some(Money(r.4))).collect();
    for (row, t) in rows.iter().zip(pricing::allocate(&actuals, Money(min_price), TaxRate(tax_bp))) {
        c.prepare_cached(
            "UPDATE shipment_orders SET actual_total_price = ?2, actual_total_tax = ?3, actual_price_with_tax = ?4,
                total_price = ?5, total_tax = ?6, price_with_tax = ?7 WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.execute(params![
                row.0,
                t.actual_total_price.0,
                t.actual_total_tax.0,
                t.actual_price_with_tax.0,
                t.total_price.0,
                t.total_tax.0,
                t.price_with_tax.0
            ])
        })
        .map_err(map_err)?;
    }
    Ok(())
}

pub(super) fn label_source(c: &Connection, kind: LabelKind, token: &str) -> rusqlite::Result<Option<LabelSource>> {
    // Resolve the token to (pick-up id, drop-off id, parcel id).
    let target: Option<(i64, Option<i64>, Option<i64>)> = match kind {
        LabelKind::PickUp => c
            .prepare_cached("SELECT id FROM pick_up_shipments WHERE label_token = ?1")?
            .query_row([token], |r| Ok((r.get(0)?, None, None)))
            .optional()?,
        LabelKind::DropOff => c
            .prepare_cached("SELECT pick_up_shipment_id, id FROM drop_off_shipments WHERE label_token = ?1")?
            .query_row([token], |r| Ok((r.get(0)?, Some(r.get(1)?), None)))
            .optional()?,
        LabelKind::Parcel => c
            .prepare_cached(
                "SELECT d.pick_up_shipment_id, d.id, p.id FROM parcels p
                 JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id WHERE p.label_token = ?1",
            )?
            .query_row([token], |r| Ok((r.get(0)?, Some(r.get(1)?), Some(r.get(2)?))))
            .optional()?,
    };
    let Some((pick_up, drop_off_id, parcel_id)) = target else { return Ok(None) };
    let (pick_up_unique_id, pick_up_address, pick_up_date, pick_up_slot_name, pick_up_status): (
        String,
        StoredPickUpAddress,
        String,
        String,
        String,
    ) = c
        .prepare_cached(
            "SELECT unique_id, address_json, scheduled_date, slot_name, status FROM pick_up_shipments WHERE id = ?1",
        )?
        .query_row([pick_up], |r| Ok((r.get(0)?, super::json_column(r, 1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?;
    let mut drop_offs = Vec::new();
    let mut drop_off_index = 0;
    let mut deleted = kind == LabelKind::PickUp && pick_up_status == "deleted";
    let mut parcel = None;
    let mut st = c.prepare_cached(
        "SELECT id, unique_id, address_json, scheduled_date, slot_name, zone_code, warehouse, status
         FROM drop_off_shipments WHERE pick_up_shipment_id = ?1 ORDER BY id",
    )?;
    let rows: Vec<(i64, LabelDropOff, String)> = st
        .query_map([pick_up], |r| {
            Ok((
                r.get(0)?,
                LabelDropOff {
                    tracking_code: r.get(1)?,
                    address: super::json_column(r, 2)?,
                    scheduled_date: r.get(3)?,
                    slot_name: r.get(4)?,
                    zone_code: r.get(5)?,
                    warehouse: r.get(6)?,
                    parcel_sizes: Vec::new(),
                },
                r.get(7)?,
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    for (i, (id, mut d, status)) in rows.into_iter().enumerate() {
        let mut ps = c.prepare_cached(
            "SELECT id, pick_up_code, custom_code, size_code, deleted_at IS NOT NULL
             FROM parcels WHERE drop_off_shipment_id = ?1 ORDER BY position",
        )?;
        let parcels: Vec<(i64, String, Option<String>, String, bool)> = ps
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?
            .collect::<rusqlite::Result<_>>()?;
        d.parcel_sizes = parcels.iter().filter(|p| !p.4).map(|p| p.3.clone()).collect();
        if Some(id) == drop_off_id {
            drop_off_index = i;
            if kind == LabelKind::DropOff {
                deleted = status == "deleted";
            }
            if let Some(pid) = parcel_id {
                let live: Vec<_> = parcels.iter().filter(|p| !p.4).collect();
                let me = parcels.iter().find(|p| p.0 == pid);
                if let Some(me) = me {
                    deleted = me.4;
                    let index = live.iter().position(|p| p.0 == pid).map_or(0, |x| x + 1);
                    parcel = Some(LabelParcel {
                        pick_up_code: me.1.clone(),
                        custom_code: me.2.clone(),
                        size_code: me.3.clone(),
                        index: index as u32,
                        count: live.len() as u32,
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
