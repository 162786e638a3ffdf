//! Order rows on `SQLite`: the atomic order insert, deletion by custom code with re-pricing,
//! and the reads behind labels. Runs on the writer thread (writes) or a pooled reader.

use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

use super::lifecycle::{apply, record_event, status_column};
use super::map_err;
use super::outbox::{self, Sink};
use crate::labels::{self, LabelParcelRow, LabelRows};
use crate::{
    CreateOrderError, CreatedOrder, DeleteOutcome, IdempotencyClaim, LabelDropOff, LabelKind, NewOrder, OrderIds,
    RenderFn, Scope, ShipmentIds, StoreError, StoredPickUpAddress, WrittenOrder,
};
use dropslot_core::ids::{
    CustomCode, DropOffShipmentId, OrderId, ParcelId, PickUpShipmentId, SavedAddressId, ShipmentOrderId,
};
use dropslot_core::money::{Money, TaxRate};
use dropslot_core::shipments::{self, ChargeLine, DeletionPlan, DeletionSnapshot, ShipmentKind, Status};
use dropslot_core::time::iso;

/// One order in the writer's transaction, and whether it created its pick-up's saved address
/// (then the read caches must hear of it once it is committed).
pub(super) fn insert_order(
    c: &Connection,
    sink: &mut Sink<'_>,
    scope: Scope,
    o: &NewOrder,
    render: &RenderFn,
) -> Result<(CreatedOrder, bool), CreateOrderError> {
    let (client, mode) = (scope.client.0, scope.mode.as_str());
    // Times are stored as ISO 8601 text with their local offset, dates as YYYY-MM-DD.
    let created_at = iso(&o.created_at);
    let created = o.created_at.timestamp();
    if let Some(claim) = &o.idempotency {
        claim_idempotency_key(c, scope, claim)?;
    }
    super::capacity::reserve(c, scope.mode, &o.reservations)?;
    // `use_count` is 1 only on the row this insert created (a reuse adds 1 to it).
    let (saved_address, new_address) = c
        .prepare_cached(
            "INSERT INTO saved_addresses (client_id, mode, text, normalized, created_at, last_used_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)
             ON CONFLICT (client_id, mode, normalized)
             DO UPDATE SET use_count = use_count + 1, last_used_at = excluded.last_used_at
             RETURNING id, use_count = 1",
        )
        .and_then(|mut s| {
            s.query_row(params![client, mode, o.pick_up.saved_text, o.pick_up.saved_normalized, created_at], |r| {
                Ok((SavedAddressId(r.get(0)?), r.get::<_, bool>(1)?))
            })
        })
        .map_err(map_err)?;
    c.prepare_cached("INSERT INTO orders (unique_id, client_id, mode, created_at) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut s| s.execute(params![o.unique_id, client, mode, created_at]))
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
            p.scheduled_date.to_string(),
            p.slot_code,
            p.slot_name,
            iso(&p.start),
            iso(&p.end),
            pick_up_address,
            p.label_token
        ])
    })
    .map_err(map_err)?;
    let pick_up = PickUpShipmentId(c.last_insert_rowid());
    record_event(c, &shipments::created(ShipmentKind::PickUp, pick_up.0), created, &created_at)?;

    let mut shipments = Vec::with_capacity(o.shipments.len());
    let mut first_events = std::collections::HashMap::with_capacity(o.shipments.len());
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
                scheduled_date, slot_code, slot_name, start_at, end_at, zone_code, warehouse, city, address_json, label_token,
                max_attempts)
             VALUES (?1, ?2, ?3, ?4, ?5, 'scheduled', ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        )
        .and_then(|mut st| {
            st.execute(params![
                d.unique_id, shipment_order.0, pick_up.0, client, mode, d.scheduled_date.to_string(), d.slot_code,
                d.slot_name, iso(&d.start), iso(&d.end), d.zone_code, d.warehouse, d.city, address, d.label_token,
                d.max_attempts
            ])
        })
        .map_err(map_err)?;
        let drop_off = DropOffShipmentId(c.last_insert_rowid());
        let scheduled = record_event(c, &shipments::created(ShipmentKind::DropOff, drop_off.0), created, &created_at)?;
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
                        parcel.custom_code.as_ref().map(CustomCode::as_str),
                        parcel.size_code,
                        parcel.weight.0 as i64,
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
        first_events.insert(drop_off.0, scheduled.id);
        shipments.push(ShipmentIds { shipment_order, drop_off, parcels });
    }
    let written = WrittenOrder::new(o, OrderIds { order, pick_up, saved_address, shipments });
    outbox::order_created(c, sink, &written, &first_events)?;
    let mut body = None;
    if let Some(claim) = &o.idempotency {
        let rendered = render(&written).map_err(|e| StoreError::Corrupt(format!("the order response: {e}")))?;
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
    if let Some(end) = &o.completes {
        super::requests::complete(c, sink, scope, end, written.ids.order.0)?;
    }
    Ok((CreatedOrder { order: written, body }, new_address))
}

/// Makes room for a new record of `claim`'s key: taken when a record within the window
/// exists (the caller replays it), replaced when it has expired.
pub(super) fn claim_idempotency_key(
    c: &Connection,
    scope: Scope,
    claim: &IdempotencyClaim,
) -> Result<(), CreateOrderError> {
    let (client, mode) = (scope.client.0, scope.mode.as_str());
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
    Ok(())
}

fn is_custom_code_conflict(e: &rusqlite::Error) -> bool {
    super::violated_constraint(e) == Some("parcels_live_custom_code")
}

/// Deletion by custom code as one unit of work: load the snapshot, let the domain decide
/// (`shipments::plan_deletion`), persist the plan; all in the writer's transaction.
pub(super) fn delete_parcel(
    c: &Connection,
    sink: &mut Sink<'_>,
    scope: Scope,
    code: &CustomCode,
    now: Timestamp,
) -> Result<DeleteOutcome, StoreError> {
    let Some(snapshot) = deletion_snapshot(c, scope, code).map_err(map_err)? else {
        return Ok(DeleteOutcome::NotFound);
    };
    let plan = shipments::plan_deletion(&snapshot);
    let shipment_deleted = plan.shipment_deleted();
    let DeletionPlan::Delete { parcel, charges, changes } = plan else {
        return Ok(DeleteOutcome::TooLate(snapshot.drop_off_status));
    };
    let pick_up_deleted = changes.iter().any(|e| e.kind == ShipmentKind::PickUp && e.to == Status::Deleted);
    super::capacity::release(c, parcel.0, shipment_deleted, pick_up_deleted)?;
    c.execute("UPDATE parcels SET deleted_at = ?2 WHERE id = ?1", params![parcel.0, now.to_string()])
        .map_err(map_err)?;
    for (shipment_order, t) in &charges {
        c.prepare_cached(
            "UPDATE shipment_orders SET actual_total_price = ?2, actual_total_tax = ?3, actual_price_with_tax = ?4,
                total_price = ?5, total_tax = ?6, price_with_tax = ?7 WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.execute(params![
                shipment_order.0,
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
    apply(c, sink, &changes, now)?;
    Ok(DeleteOutcome::Deleted { shipment_deleted })
}

/// The rows `plan_deletion` needs, read in the deleting transaction.
fn deletion_snapshot(c: &Connection, scope: Scope, code: &CustomCode) -> rusqlite::Result<Option<DeletionSnapshot>> {
    let found = c
        .prepare_cached(
            "SELECT p.id, d.id, d.status, d.shipment_order_id, d.pick_up_shipment_id, pu.status, so.order_id,
                    so.min_price, so.tax_bp,
                    (SELECT count(*) FROM parcels x WHERE x.drop_off_shipment_id = d.id AND x.deleted_at IS NULL),
                    (SELECT count(*) FROM drop_off_shipments y WHERE y.pick_up_shipment_id = pu.id AND y.status <> 'deleted')
             FROM parcels p
             JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id
             JOIN pick_up_shipments pu ON pu.id = d.pick_up_shipment_id
             JOIN shipment_orders so ON so.id = d.shipment_order_id
             WHERE p.client_id = ?1 AND p.mode = ?2 AND p.custom_code = ?3 AND p.deleted_at IS NULL",
        )?
        .query_row(params![scope.client.0, scope.mode.as_str(), code.as_str()], |r| {
            Ok((
                ParcelId(r.get(0)?),
                DropOffShipmentId(r.get(1)?),
                status_column(r, 2)?,
                PickUpShipmentId(r.get(4)?),
                status_column(r, 5)?,
                r.get::<_, i64>(6)?,
                Money(r.get(7)?),
                TaxRate(r.get(8)?),
                r.get::<_, usize>(9)?,
                r.get::<_, usize>(10)?,
            ))
        })
        .optional()?;
    let Some((
        parcel,
        drop_off,
        drop_off_status,
        pick_up,
        pick_up_status,
        order,
        min_price,
        tax,
        live_parcels,
        live_drop_offs,
    )) = found
    else {
        return Ok(None);
    };
    let mut st = c.prepare_cached(
        "SELECT so.id, p.price FROM shipment_orders so
         LEFT JOIN drop_off_shipments d ON d.shipment_order_id = so.id
         LEFT JOIN parcels p ON p.drop_off_shipment_id = d.id AND p.deleted_at IS NULL AND p.id <> ?2
         WHERE so.order_id = ?1 ORDER BY so.id, p.id",
    )?;
    let pairs = st
        .query_map(params![order, parcel.0], |r| {
            Ok((ShipmentOrderId(r.get(0)?), r.get::<_, Option<i64>>(1)?.map(Money)))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
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

/// A label's rows (`labels::assemble` makes the source from them).
pub(super) fn label_rows(c: &Connection, kind: LabelKind, token: &str) -> rusqlite::Result<Option<LabelRows>> {
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
    let drop_offs = c
        .prepare_cached(
            "SELECT id, unique_id, address_json, scheduled_date, slot_name, zone_code, warehouse, status = 'deleted'
             FROM drop_off_shipments WHERE pick_up_shipment_id = ?1 ORDER BY id",
        )?
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
    // Every parcel of the pick-up in one read, by drop-off and position.
    let parcels = c
        .prepare_cached(
            "SELECT p.drop_off_shipment_id, p.id, p.pick_up_code, p.custom_code, p.size_code, p.deleted_at IS NOT NULL
             FROM parcels p JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id
             WHERE d.pick_up_shipment_id = ?1 ORDER BY p.drop_off_shipment_id, p.position",
        )?
        .query_map([pick_up], |r| {
            Ok(LabelParcelRow {
                drop_off: r.get(0)?,
                id: r.get(1)?,
                pick_up_code: r.get(2)?,
                custom_code: r.get(3)?,
                size_code: r.get(4)?,
                deleted: r.get(5)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(Some(LabelRows {
        kind,
        target: labels::target(drop_off_id, parcel_id),
        pick_up_unique_id,
        pick_up_address,
        pick_up_date,
        pick_up_slot_name,
        pick_up_deleted: pick_up_status == "deleted",
        drop_offs,
        parcels,
    }))
}
