//! Order rows on `PostgreSQL` after their creation (`insert.rs`): deletion by custom code with
//! re-pricing, and the reads behind labels. Each runs in the caller's transaction; an error
//! means the caller rolls it back.

use jiff::Timestamp;
use tokio_postgres::types::Type;

use super::sql::Sql;

use super::lifecycle::{apply, column, narrow, status_column};
use super::map_err;
use super::outbox::Sink;
use crate::labels::{self, LabelParcelRow, LabelRows};
use crate::{DeleteOutcome, LabelDropOff, LabelKind, Scope, StoreError};
use dropslot_core::ids::{CustomCode, DropOffShipmentId, ParcelId, PickUpShipmentId, ShipmentOrderId};
use dropslot_core::money::{Money, TaxRate};
use dropslot_core::quote::Totals;
use dropslot_core::shipments::{self, ChargeLine, DeletionPlan, DeletionSnapshot, ShipmentKind, Status};

/// Deletion by custom code as one unit of work: load and lock the snapshot, let the domain
/// decide (`shipments::plan_deletion`), persist the plan; all in the caller's transaction.
pub(super) async fn delete_parcel(
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
    super::capacity::release(c, parcel.0, shipment_deleted, pick_up_deleted).await?;
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

/// A label's rows (`labels::assemble` makes the source from them).
pub(super) async fn label_rows(c: &impl Sql, kind: LabelKind, token: &str) -> Result<Option<LabelRows>, StoreError> {
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
    let pick_up_status: String = column(&r, 4)?;
    let drop_offs = c
        .query_typed(
            "SELECT id, unique_id, address_json, scheduled_date, slot_name, zone_code, warehouse, status = 'deleted'
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
    let parcels = c
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
        .map(|r| {
            Ok(LabelParcelRow {
                drop_off: column(r, 0)?,
                id: column(r, 1)?,
                pick_up_code: column(r, 2)?,
                custom_code: column(r, 3)?,
                size_code: column(r, 4)?,
                deleted: column(r, 5)?,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(Some(LabelRows {
        kind,
        target: labels::target(drop_off_id, parcel_id),
        pick_up_unique_id: column(&r, 0)?,
        pick_up_address: super::json_column(column(&r, 1)?, "pick-up address")?,
        pick_up_date: column(&r, 2)?,
        pick_up_slot_name: column(&r, 3)?,
        pick_up_deleted: pick_up_status == "deleted",
        drop_offs,
        parcels,
    }))
}
