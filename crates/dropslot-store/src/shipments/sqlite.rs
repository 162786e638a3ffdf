//! Reading orders, shipments and their events back on `SQLite` (client reads, the ops answer,
//! the tracking page). Every query is filtered by what the caller may see.

use crate::labels::{LabelParcelRow, LabelRows};
use crate::sqlite::{SqliteStore, status_column};
use crate::{
    LabelDropOff, LabelKind, LabelSource, Mode, OrderFilter, Scope, ShipmentStore, StoreResult, StoredDropOff,
    StoredEvent, StoredOrder, StoredParcel, StoredPickUp, StoredPickUpAddress, StoredShipment, Tracking, Visibility,
    labels,
};
use async_trait::async_trait;
use dropslot_core::ids::{CustomCode, DropOffShipmentId, OrderId, PickUpShipmentId, ShipmentOrderId};
use dropslot_core::money::Money;
use dropslot_core::quote::Totals;
use dropslot_core::shipments::{Actor, ShipmentKind, Status};
use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};
use std::str::FromStr;

#[async_trait]
impl ShipmentStore for SqliteStore {
    async fn shipment(&self, visible: Visibility, unique_id: &str) -> StoreResult<Option<StoredShipment>> {
        self.read(|c| shipment(c, visible, unique_id))
    }

    async fn progress_of(&self, unique_ids: Vec<String>) -> StoreResult<Vec<crate::StoredProgress>> {
        self.read(|c| progress_of(c, &unique_ids))
    }

    async fn pick_up_members(&self, pick_up_unique_id: &str) -> StoreResult<Vec<String>> {
        self.read(|c| pick_up_members(c, pick_up_unique_id))
    }

    async fn order(&self, scope: Scope, unique_id: &str) -> StoreResult<Option<StoredOrder>> {
        let unique_id = unique_id.to_string();
        self.read_blocking(move |c| order(c, scope, &unique_id)).await
    }

    async fn orders(&self, scope: Scope, before: Option<i64>, limit: usize) -> StoreResult<Vec<StoredOrder>> {
        self.read_blocking(move |c| orders(c, scope, before, limit)).await
    }

    async fn find_orders(
        &self,
        scope: Scope,
        filter: &OrderFilter,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<StoredOrder>> {
        let filter = filter.clone();
        self.read_blocking(move |c| find_orders(c, scope, &filter, before, limit)).await
    }

    async fn parcel_by_custom_code(
        &self,
        scope: Scope,
        code: &CustomCode,
    ) -> StoreResult<Option<(String, StoredShipment)>> {
        self.read(|c| parcel_by_custom_code(c, scope, code.as_str()))
    }

    async fn tracking(&self, code: &str) -> StoreResult<Option<Tracking>> {
        self.read(|c| tracking(c, code))
    }

    async fn shipment_by_code(&self, code: &str) -> StoreResult<Option<(Mode, StoredShipment)>> {
        self.read(|c| shipment_by_code(c, code))
    }

    async fn label_source(&self, kind: LabelKind, token: &str) -> StoreResult<Option<LabelSource>> {
        let token = token.to_string();
        self.read_blocking(move |c| label_rows(c, kind, &token)).await?.map(crate::labels::assemble).transpose()
    }
}

fn conversion(i: usize, e: impl std::fmt::Display) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, e.to_string().into())
}

fn timestamp(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Timestamp> {
    crate::sqlite::parsed(r, i, "timestamp", |t| Timestamp::from_str(t).ok())
}

/// A drop-off shipment with everything around it, by row id.
pub(crate) fn shipment_by_row(c: &Connection, id: i64) -> rusqlite::Result<StoredShipment> {
    shipment_by_id(c, id)
}

fn shipment_by_id(c: &Connection, id: i64) -> rusqlite::Result<StoredShipment> {
    let mut s = shipment_without_events(c, id)?;
    s.events = events(c, id)?;
    Ok(s)
}

/// A drop-off shipment without its events (what an event's webhook body shows of it).
pub(crate) fn shipment_without_events(c: &Connection, id: i64) -> rusqlite::Result<StoredShipment> {
    let (drop_off, totals, shipment_order, shipment_order_unique_id, order_unique_id, pick_up_id, drop_off_index) = c
        .prepare_cached(
            "SELECT d.id, d.unique_id, d.label_token, d.scheduled_date, d.slot_code, d.slot_name, d.start_at, d.end_at,
                d.city, d.address_json, d.status, d.attempts, d.max_attempts,
                so.id, so.unique_id, so.actual_total_price, so.actual_total_tax, so.actual_price_with_tax,
                so.total_price, so.total_tax, so.price_with_tax, o.unique_id, d.pick_up_shipment_id, so.min_price,
                (SELECT count(*) FROM shipment_orders so2 JOIN drop_off_shipments d2 ON d2.shipment_order_id = so2.id
                 WHERE so2.order_id = so.order_id AND d2.id < d.id),
                d.zone_code, d.instruction, d.return_attempts, d.return_date, d.return_slot_code, d.return_slot_name,
                d.return_start_at, d.return_end_at
             FROM drop_off_shipments d
             JOIN shipment_orders so ON so.id = d.shipment_order_id
             JOIN orders o ON o.id = so.order_id
             WHERE d.id = ?1",
        )?
        .query_row([id], |r| {
            let drop_off = StoredDropOff {
                id: DropOffShipmentId(r.get(0)?),
                unique_id: r.get(1)?,
                label_token: r.get(2)?,
                scheduled_date: r.get(3)?,
                slot_code: r.get(4)?,
                slot_name: r.get(5)?,
                start_at: r.get(6)?,
                end_at: r.get(7)?,
                city: r.get(8)?,
                address: crate::sqlite::json_column(r, 9)?,
                status: status_column(r, 10)?,
                attempts: r.get(11)?,
                max_attempts: r.get(12)?,
                zone_code: r.get(25)?,
                instruction: r.get(26)?,
                return_attempts: r.get(27)?,
                return_slot: crate::StoredReturn::of([r.get(28)?, r.get(29)?, r.get(30)?, r.get(31)?, r.get(32)?])
                    .map_err(|e| conversion(28, e))?,
            };
            let totals = Totals {
                min_price: Money(r.get(23)?),
                actual_total_price: Money(r.get(15)?),
                actual_total_tax: Money(r.get(16)?),
                actual_price_with_tax: Money(r.get(17)?),
                total_price: Money(r.get(18)?),
                total_tax: Money(r.get(19)?),
                price_with_tax: Money(r.get(20)?),
            };
            Ok((
                drop_off,
                totals,
                ShipmentOrderId(r.get(13)?),
                r.get::<_, String>(14)?,
                r.get::<_, String>(21)?,
                r.get::<_, i64>(22)?,
                r.get::<_, usize>(24)?,
            ))
        })?;
    let pick_up = c
        .prepare_cached(
            "SELECT id, unique_id, label_token, scheduled_date, start_at, end_at, status, slot_name, address_json
             FROM pick_up_shipments WHERE id = ?1",
        )?
        .query_row([pick_up_id], |r| {
            let address = crate::sqlite::json_column::<crate::StoredPickUpAddress>(r, 8)?;
            Ok(StoredPickUp {
                id: PickUpShipmentId(r.get(0)?),
                unique_id: r.get(1)?,
                label_token: r.get(2)?,
                scheduled_date: r.get(3)?,
                start_at: r.get(4)?,
                end_at: r.get(5)?,
                status: status_column(r, 6)?,
                slot_name: r.get(7)?,
                address_text: address.text,
                address_located_by: address.located_by,
            })
        })?;
    let parcels = c
        .prepare_cached(
            "SELECT pick_up_code, custom_code, size_code, label_token FROM parcels
             WHERE drop_off_shipment_id = ?1 AND deleted_at IS NULL ORDER BY position",
        )?
        .query_map([id], |r| {
            Ok(StoredParcel {
                pick_up_code: r.get(0)?,
                custom_code: r.get(1)?,
                size_code: r.get(2)?,
                size_name: None,
                label_token: r.get(3)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(StoredShipment {
        order_unique_id,
        drop_off_index,
        shipment_order,
        shipment_order_unique_id,
        totals,
        pick_up,
        eta: eta_of(c, &drop_off.unique_id)?,
        drop_off,
        parcels,
        events: Vec::new(),
    })
}

/// A drop-off's live ETA, while it is on a published delivery route.
pub(crate) fn eta_of(c: &Connection, unique_id: &str) -> rusqlite::Result<Option<crate::StoredEta>> {
    c.prepare_cached(
        "SELECT arrival_ms, from_ms, to_ms, late, stops_before FROM stop_etas WHERE shipment_unique_id = ?1",
    )?
    .query_row([unique_id], |r| {
        Ok(crate::StoredEta {
            arrival_ms: r.get(0)?,
            from_ms: r.get(1)?,
            to_ms: r.get(2)?,
            late: r.get(3)?,
            stops_before: r.get(4)?,
        })
    })
    .optional()
}

/// A drop-off shipment's events, oldest first.
fn events(c: &Connection, drop_off: i64) -> rusqlite::Result<Vec<StoredEvent>> {
    c.prepare_cached(
        "SELECT id, seq, previous_status, status, at, actor, reason, attempt, proof_json FROM shipment_events
         WHERE shipment_kind = ?2 AND shipment_id = ?1 ORDER BY seq",
    )?
    .query_map(params![drop_off, ShipmentKind::DropOff.as_str()], |r| {
        let from: Option<String> = r.get(2)?;
        let proof: Option<String> = r.get(8)?;
        Ok(StoredEvent {
            id: r.get(0)?,
            seq: r.get(1)?,
            from: from
                .map(|f| Status::parse(&f).ok_or_else(|| conversion(2, format!("unknown status {f:?}"))))
                .transpose()?,
            to: status_column(r, 3)?,
            at: timestamp(r, 4)?,
            actor: crate::sqlite::parsed(r, 5, "actor", Actor::parse)?,
            reason: r.get(6)?,
            attempt: r.get(7)?,
            proof: match proof {
                None => Vec::new(),
                Some(p) => serde_json::from_str(&p).map_err(|e| conversion(8, e))?,
            },
        })
    })?
    .collect()
}

/// A drop-off shipment by tracking code, where visible.
pub(crate) fn shipment(
    c: &Connection,
    visible: Visibility,
    unique_id: &str,
) -> rusqlite::Result<Option<StoredShipment>> {
    let (client, mode) = match visible {
        Visibility::Tenant(s) => (Some(s.client.0), s.mode.as_str()),
        Visibility::Ops => (None, Mode::Live.as_str()),
    };
    let id: Option<i64> = c
        .prepare_cached(
            "SELECT id FROM drop_off_shipments WHERE unique_id = ?1 AND mode = ?2 AND (?3 IS NULL OR client_id = ?3)",
        )?
        .query_row(params![unique_id, mode, client], |r| r.get(0))
        .optional()?;
    id.map(|id| shipment_by_id(c, id)).transpose()
}

/// Each live drop-off's status and the time of its newest event.
pub(crate) fn progress_of(c: &Connection, unique_ids: &[String]) -> rusqlite::Result<Vec<crate::StoredProgress>> {
    let mut q = c.prepare_cached(
        "SELECT d.unique_id, d.status, e.at, d.start_at, d.end_at FROM drop_off_shipments d
         JOIN shipment_events e ON e.id = (SELECT max(id) FROM shipment_events
            WHERE shipment_kind = ?2 AND shipment_id = d.id)
         WHERE d.unique_id = ?1 AND d.mode = ?3",
    )?;
    let mut out = Vec::with_capacity(unique_ids.len());
    let (drop_off, live) = (ShipmentKind::DropOff.as_str(), Mode::Live.as_str());
    for u in unique_ids {
        if let Some(row) = q
            .query_row(params![u, drop_off, live], |r| {
                let (start, end): (String, String) = (r.get(3)?, r.get(4)?);
                crate::StoredProgress::of(r.get(0)?, status_column(r, 1)?, timestamp(r, 2)?, &start, &end)
                    .map_err(|e| conversion(3, e))
            })
            .optional()?
        {
            out.push(row);
        }
    }
    Ok(out)
}

/// The live drop-off shipments of a pick-up shipment, oldest first.
pub(crate) fn pick_up_members(c: &Connection, pick_up_unique_id: &str) -> rusqlite::Result<Vec<String>> {
    c.prepare_cached(
        "SELECT d.unique_id FROM pick_up_shipments u JOIN drop_off_shipments d ON d.pick_up_shipment_id = u.id
         WHERE u.unique_id = ?1 AND u.mode = ?2 ORDER BY d.id",
    )?
    .query_map(params![pick_up_unique_id, Mode::Live.as_str()], |r| r.get(0))?
    .collect()
}

/// An order with its shipments, by row id (already scoped by the caller).
fn order_by_id(c: &Connection, id: i64) -> rusqlite::Result<StoredOrder> {
    let (unique_id, created_at): (String, String) = c
        .prepare_cached("SELECT unique_id, created_at FROM orders WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let drop_offs: Vec<i64> = c
        .prepare_cached(
            "SELECT d.id FROM shipment_orders so JOIN drop_off_shipments d ON d.shipment_order_id = so.id
             WHERE so.order_id = ?1 ORDER BY d.id",
        )?
        .query_map([id], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let shipments = drop_offs.into_iter().map(|d| shipment_by_id(c, d)).collect::<rusqlite::Result<_>>()?;
    Ok(StoredOrder { id: OrderId(id), unique_id, created_at, shipments })
}

pub(crate) fn order(c: &Connection, scope: Scope, unique_id: &str) -> rusqlite::Result<Option<StoredOrder>> {
    let id: Option<i64> = c
        .prepare_cached("SELECT id FROM orders WHERE unique_id = ?1 AND client_id = ?2 AND mode = ?3")?
        .query_row(params![unique_id, scope.client.0, scope.mode.as_str()], |r| r.get(0))
        .optional()?;
    id.map(|id| order_by_id(c, id)).transpose()
}

/// Newest first, strictly before the row id `before` (the cursor): orders created meanwhile
/// have higher ids, so pages never shift under concurrent inserts.
pub(crate) fn orders(
    c: &Connection,
    scope: Scope,
    before: Option<i64>,
    limit: usize,
) -> rusqlite::Result<Vec<StoredOrder>> {
    let ids: Vec<i64> = c
        .prepare_cached(
            "SELECT id FROM orders WHERE client_id = ?1 AND mode = ?2 AND id < ?3 ORDER BY id DESC LIMIT ?4",
        )?
        .query_map(params![scope.client.0, scope.mode.as_str(), before.unwrap_or(i64::MAX), limit as i64], |r| {
            r.get(0)
        })?
        .collect::<rusqlite::Result<_>>()?;
    ids.into_iter().map(|id| order_by_id(c, id)).collect()
}

/// The orders `filter` matches, newest first, before the row id `before`: one query for the
/// ids (an `EXISTS` over the order's drop-offs), then the same loader as [`orders`].
pub(crate) fn find_orders(
    c: &Connection,
    scope: Scope,
    filter: &OrderFilter,
    before: Option<i64>,
    limit: usize,
) -> rusqlite::Result<Vec<StoredOrder>> {
    let text = filter.text.as_deref().map(str::trim).filter(|t| !t.is_empty());
    let like = text.map(|t| format!("%{}%", crate::like_escape(&t.to_lowercase())));
    let ids: Vec<i64> = c
        .prepare_cached(
            "SELECT o.id FROM orders o
             WHERE o.client_id = ?1 AND o.mode = ?2 AND o.id < ?3
               AND EXISTS (
                 SELECT 1 FROM drop_off_shipments d
                 JOIN shipment_orders so ON so.id = d.shipment_order_id
                 WHERE so.order_id = o.id
                   AND (?4 IS NULL OR d.status = ?4)
                   AND (?5 IS NULL OR d.scheduled_date = ?5)
                   AND (?6 IS NULL
                        OR upper(o.unique_id) = upper(?6)
                        OR upper(d.unique_id) = upper(?6)
                        OR lower(json_extract(d.address_json, '$.person_name')) LIKE ?7 ESCAPE '\\'
                        OR EXISTS (SELECT 1 FROM parcels p
                                   WHERE p.drop_off_shipment_id = d.id AND p.deleted_at IS NULL
                                     AND upper(p.custom_code) = upper(?6))))
             ORDER BY o.id DESC LIMIT ?8",
        )?
        .query_map(
            params![
                scope.client.0,
                scope.mode.as_str(),
                before.unwrap_or(i64::MAX),
                filter.status.map(Status::as_str),
                filter.date,
                text,
                like,
                limit as i64
            ],
            |r| r.get(0),
        )?
        .collect::<rusqlite::Result<_>>()?;
    ids.into_iter().map(|id| order_by_id(c, id)).collect()
}

/// The live parcel holding a custom code, with its shipment.
pub(crate) fn parcel_by_custom_code(
    c: &Connection,
    scope: Scope,
    code: &str,
) -> rusqlite::Result<Option<(String, StoredShipment)>> {
    let found: Option<(String, i64)> = c
        .prepare_cached(
            "SELECT pick_up_code, drop_off_shipment_id FROM parcels
             WHERE client_id = ?1 AND mode = ?2 AND custom_code = ?3 AND deleted_at IS NULL",
        )?
        .query_row(params![scope.client.0, scope.mode.as_str(), code], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    found.map(|(pick_up_code, d)| Ok((pick_up_code, shipment_by_id(c, d)?))).transpose()
}

/// What the public tracking page shows, by tracking code (test or live).
pub(crate) fn tracking(c: &Connection, code: &str) -> rusqlite::Result<Option<Tracking>> {
    let found = c
        .prepare_cached(
            "SELECT id, unique_id, status, scheduled_date, slot_name, city, label_token FROM drop_off_shipments
             WHERE unique_id = ?1",
        )?
        .query_row([code], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                Tracking {
                    tracking_code: r.get(1)?,
                    status: status_column(r, 2)?,
                    scheduled_date: r.get(3)?,
                    slot_name: r.get(4)?,
                    city: r.get(5)?,
                    events: Vec::new(),
                    eta: None,
                    label_token: r.get(6)?,
                },
            ))
        })
        .optional()?;
    let Some((id, mut t)) = found else { return Ok(None) };
    t.events = events(c, id)?.into_iter().map(|e| (e.to, e.at)).collect();
    t.eta = eta_of(c, &t.tracking_code)?;
    Ok(Some(t))
}

/// A drop-off shipment by tracking code, in either mode, with its mode.
pub(crate) fn shipment_by_code(c: &Connection, code: &str) -> rusqlite::Result<Option<(Mode, StoredShipment)>> {
    let found: Option<(i64, String)> = c
        .prepare_cached("SELECT id, mode FROM drop_off_shipments WHERE unique_id = ?1")?
        .query_row([code], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((id, mode)) = found else { return Ok(None) };
    let mode = Mode::parse(&mode).ok_or_else(|| conversion(1, format!("mode {mode:?}")))?;
    Ok(Some((mode, shipment_by_id(c, id)?)))
}

/// A label's rows (`labels::assemble` makes the source from them).
pub(crate) fn label_rows(c: &Connection, kind: LabelKind, token: &str) -> rusqlite::Result<Option<LabelRows>> {
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
        .query_row([pick_up], |r| {
            Ok((r.get(0)?, crate::sqlite::json_column(r, 1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?;
    let drop_offs = c
        .prepare_cached(
            "SELECT id, unique_id, address_json, scheduled_date, slot_name, zone_code, warehouse, status = ?2
             FROM drop_off_shipments WHERE pick_up_shipment_id = ?1 ORDER BY id",
        )?
        .query_map(params![pick_up, Status::Deleted.as_str()], |r| {
            Ok((
                r.get(0)?,
                LabelDropOff {
                    tracking_code: r.get(1)?,
                    address: crate::sqlite::json_column(r, 2)?,
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
        pick_up_deleted: pick_up_status == Status::Deleted.as_str(),
        drop_offs,
        parcels,
    }))
}
