//! Reading orders, shipments and their events back on `PostgreSQL` (client reads, the ops
//! answer, the tracking page). Every query is filtered by what the caller may see; the
//! results are the same records, strings included, as the `SQLite` backend's.

use crate::labels::{LabelParcelRow, LabelRows};
use crate::postgres::sql::Sql;
use crate::postgres::{PgStore, column, map_err, status_column};
use crate::{
    LabelDropOff, LabelKind, LabelSource, Mode, OrderFilter, Scope, ShipmentStore, StoreError, StoreResult,
    StoredDropOff, StoredEvent, StoredOrder, StoredParcel, StoredPickUp, StoredShipment, Tracking, Visibility, labels,
};
use async_trait::async_trait;
use dropslot_core::ids::{CustomCode, DropOffShipmentId, OrderId, PickUpShipmentId, ShipmentOrderId};
use dropslot_core::money::Money;
use dropslot_core::quote::Totals;
use dropslot_core::shipments::{Actor, ShipmentKind, Status};
use jiff::Timestamp;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, Type};

#[async_trait]
impl ShipmentStore for PgStore {
    async fn shipment(&self, visible: Visibility, unique_id: &str) -> StoreResult<Option<StoredShipment>> {
        shipment(&self.conn().await?, visible, unique_id).await
    }

    async fn progress_of(&self, unique_ids: Vec<String>) -> StoreResult<Vec<crate::StoredProgress>> {
        progress_of(&self.conn().await?, &unique_ids).await
    }

    async fn pick_up_members(&self, pick_up_unique_id: &str) -> StoreResult<Vec<String>> {
        pick_up_members(&self.conn().await?, pick_up_unique_id).await
    }

    async fn order(&self, scope: Scope, unique_id: &str) -> StoreResult<Option<StoredOrder>> {
        order(&self.conn().await?, scope, unique_id).await
    }

    async fn orders(&self, scope: Scope, before: Option<i64>, limit: usize) -> StoreResult<Vec<StoredOrder>> {
        orders(&self.conn().await?, scope, before, limit).await
    }

    async fn find_orders(
        &self,
        scope: Scope,
        filter: &OrderFilter,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<StoredOrder>> {
        find_orders(&self.conn().await?, scope, filter, before, limit).await
    }

    async fn parcel_by_custom_code(
        &self,
        scope: Scope,
        code: &CustomCode,
    ) -> StoreResult<Option<(String, StoredShipment)>> {
        parcel_by_custom_code(&self.conn().await?, scope, code.as_str()).await
    }

    async fn tracking(&self, code: &str) -> StoreResult<Option<Tracking>> {
        tracking(&self.conn().await?, code).await
    }

    async fn shipment_by_code(&self, code: &str) -> StoreResult<Option<(Mode, StoredShipment)>> {
        shipment_by_code(&self.conn().await?, code).await
    }

    async fn label_source(&self, kind: LabelKind, token: &str) -> StoreResult<Option<LabelSource>> {
        label_rows(&self.conn().await?, kind, token).await?.map(crate::labels::assemble).transpose()
    }
}

/// A column of a row; a type that does not match the schema is an error, never a panic.
fn col<'a, T: FromSql<'a>>(r: &'a Row, i: usize) -> Result<T, StoreError> {
    r.try_get(i).map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))
}

/// A BIGINT column narrowed to the type the record holds; one that does not fit is an error.
fn narrow<T: TryFrom<i64>>(value: i64, what: &str) -> Result<T, StoreError> {
    T::try_from(value).map_err(|_| StoreError::Corrupt(format!("stored {what} {value} is out of range")))
}

/// A row the caller's id points at is gone: the data is inconsistent (not a retryable 503,
/// which is what a driver's "no rows" error would map to).
fn missing(what: &str, id: i64) -> StoreError {
    StoreError::Corrupt(format!("{what} {id} not found"))
}

/// A drop-off shipment with everything around it, by row id: its two statements are sent
/// together (one round trip).
async fn shipment_by_id(c: &impl Sql, id: i64) -> Result<StoredShipment, StoreError> {
    let (mut s, events) = tokio::try_join!(shipment_without_events(c, id), events(c, id))?;
    s.events = events;
    Ok(s)
}

/// A drop-off shipment without its events (what an event's webhook body shows of it).
pub(crate) async fn shipment_without_events(c: &impl Sql, drop_off: i64) -> Result<StoredShipment, StoreError> {
    shipments_without_events(c, &[drop_off]).await?.pop().ok_or_else(|| missing("drop-off shipment", drop_off))
}

/// Drop-off shipments without their events, in the order of `ids`, in one statement: each
/// with its shipment order, order, pick-up leg and live parcels (in request order).
pub(crate) async fn shipments_without_events(c: &impl Sql, ids: &[i64]) -> Result<Vec<StoredShipment>, StoreError> {
    let rows = c
        .query_typed(
            "SELECT d.id, d.unique_id, d.label_token, d.scheduled_date, d.slot_code, d.slot_name, d.start_at, d.end_at,
                d.city, d.address_json, d.status, d.attempts, d.max_attempts,
                so.id, so.unique_id, so.actual_total_price, so.actual_total_tax, so.actual_price_with_tax,
                so.total_price, so.total_tax, so.price_with_tax, o.unique_id, so.min_price,
                (SELECT count(*) FROM shipment_orders so2 JOIN drop_off_shipments d2 ON d2.shipment_order_id = so2.id
                 WHERE so2.order_id = so.order_id AND d2.id < d.id),
                p.id, p.unique_id, p.label_token, p.scheduled_date, p.start_at, p.end_at, p.status, p.slot_name,
                p.address_json,
                x.pick_up_codes, x.custom_codes, x.size_codes, x.label_tokens,
                e.arrival_ms, e.from_ms, e.to_ms, e.late, e.stops_before,
                d.zone_code, d.instruction, d.return_attempts, d.return_date, d.return_slot_code, d.return_slot_name,
                d.return_start_at, d.return_end_at
             FROM unnest($1::bigint[]) WITH ORDINALITY AS w (id, ord)
             JOIN drop_off_shipments d ON d.id = w.id
             LEFT JOIN stop_etas e ON e.shipment_unique_id = d.unique_id
             JOIN shipment_orders so ON so.id = d.shipment_order_id
             JOIN orders o ON o.id = so.order_id
             JOIN pick_up_shipments p ON p.id = d.pick_up_shipment_id
             CROSS JOIN LATERAL (
                SELECT coalesce(array_agg(pick_up_code ORDER BY position), '{}') AS pick_up_codes,
                    coalesce(array_agg(custom_code ORDER BY position), '{}') AS custom_codes,
                    coalesce(array_agg(size_code ORDER BY position), '{}') AS size_codes,
                    coalesce(array_agg(label_token ORDER BY position), '{}') AS label_tokens
                FROM parcels WHERE drop_off_shipment_id = d.id AND deleted_at IS NULL) x
             ORDER BY w.ord",
            &[(&ids, tokio_postgres::types::Type::INT8_ARRAY)],
        )
        .await
        .map_err(map_err)?;
    if rows.len() != ids.len() {
        let found: Vec<i64> = rows.iter().map(|r| col(r, 0)).collect::<Result<_, _>>()?;
        let gone = ids.iter().find(|id| !found.contains(id)).copied().unwrap_or_default();
        return Err(missing("drop-off shipment", gone));
    }
    rows.iter().map(shipment_row).collect()
}

/// One row of [`shipments_without_events`].
fn shipment_row(r: &Row) -> Result<StoredShipment, StoreError> {
    let drop_off = StoredDropOff {
        id: DropOffShipmentId(col(r, 0)?),
        unique_id: col(r, 1)?,
        label_token: col(r, 2)?,
        scheduled_date: col(r, 3)?,
        slot_code: col(r, 4)?,
        slot_name: col(r, 5)?,
        start_at: col(r, 6)?,
        end_at: col(r, 7)?,
        city: col(r, 8)?,
        address: crate::postgres::json_column(col(r, 9)?, "drop-off address")?,
        status: status_column(r, 10)?,
        attempts: narrow(col(r, 11)?, "attempts")?,
        max_attempts: narrow(col(r, 12)?, "max_attempts")?,
        zone_code: col(r, 42)?,
        instruction: col(r, 43)?,
        return_attempts: narrow(col(r, 44)?, "return_attempts")?,
        return_slot: crate::StoredReturn::of([col(r, 45)?, col(r, 46)?, col(r, 47)?, col(r, 48)?, col(r, 49)?])
            .map_err(StoreError::Corrupt)?,
    };
    let totals = Totals {
        min_price: Money(col(r, 22)?),
        actual_total_price: Money(col(r, 15)?),
        actual_total_tax: Money(col(r, 16)?),
        actual_price_with_tax: Money(col(r, 17)?),
        total_price: Money(col(r, 18)?),
        total_tax: Money(col(r, 19)?),
        price_with_tax: Money(col(r, 20)?),
    };
    let address = crate::postgres::json_column::<crate::StoredPickUpAddress>(col(r, 32)?, "pick-up address")?;
    let pick_up = StoredPickUp {
        id: PickUpShipmentId(col(r, 24)?),
        unique_id: col(r, 25)?,
        label_token: col(r, 26)?,
        scheduled_date: col(r, 27)?,
        start_at: col(r, 28)?,
        end_at: col(r, 29)?,
        status: status_column(r, 30)?,
        slot_name: col(r, 31)?,
        address_text: address.text,
        address_located_by: address.located_by,
    };
    let codes: Vec<String> = col(r, 33)?;
    let custom: Vec<Option<String>> = col(r, 34)?;
    let sizes: Vec<String> = col(r, 35)?;
    let labels: Vec<String> = col(r, 36)?;
    if custom.len() != codes.len() || sizes.len() != codes.len() || labels.len() != codes.len() {
        return Err(StoreError::Corrupt(format!("drop-off shipment {}'s parcels do not line up", drop_off.id.0)));
    }
    let parcels = codes
        .into_iter()
        .zip(custom)
        .zip(sizes.into_iter().zip(labels))
        .map(|((pick_up_code, custom_code), (size_code, label_token))| StoredParcel {
            pick_up_code,
            custom_code,
            size_code,
            size_name: None,
            label_token,
        })
        .collect();
    let eta = match col::<Option<i64>>(r, 37)? {
        None => None,
        Some(arrival_ms) => Some(crate::StoredEta {
            arrival_ms,
            from_ms: col(r, 38)?,
            to_ms: col(r, 39)?,
            late: col::<i32>(r, 40)? != 0,
            stops_before: narrow(col::<i32>(r, 41)?.into(), "stops_before")?,
        }),
    };
    Ok(StoredShipment {
        eta,
        order_unique_id: col(r, 21)?,
        drop_off_index: narrow(col(r, 23)?, "drop-off index")?,
        shipment_order: ShipmentOrderId(col(r, 13)?),
        shipment_order_unique_id: col(r, 14)?,
        totals,
        pick_up,
        drop_off,
        parcels,
        events: Vec::new(),
    })
}

/// A drop-off shipment's events, oldest first.
async fn events(c: &impl Sql, drop_off: i64) -> Result<Vec<StoredEvent>, StoreError> {
    c.query(
        "SELECT id, seq, previous_status, status, at, actor, reason, attempt, proof_json FROM shipment_events
         WHERE shipment_kind = $2 AND shipment_id = $1 ORDER BY seq",
        &[&drop_off, &ShipmentKind::DropOff.as_str()],
    )
    .await
    .map_err(map_err)?
    .iter()
    .map(event_row)
    .collect()
}

/// Drop-off shipments with their events, in the order of `ids`: two statements however many,
/// sent together.
pub(crate) async fn shipments_with_events(c: &impl Sql, ids: &[i64]) -> Result<Vec<StoredShipment>, StoreError> {
    let (shipments, mut events) = tokio::try_join!(shipments_without_events(c, ids), events_of(c, ids))?;
    Ok(shipments
        .into_iter()
        .map(|mut s| {
            s.events = events.remove(&s.drop_off.id.0).unwrap_or_default();
            s
        })
        .collect())
}

/// The events of drop-off shipments, each one's oldest first, by shipment: one statement.
pub(crate) async fn events_of(
    c: &impl Sql,
    ids: &[i64],
) -> Result<std::collections::HashMap<i64, Vec<StoredEvent>>, StoreError> {
    let rows = c
        .query_typed(
            "SELECT shipment_id, id, seq, previous_status, status, at, actor, reason, attempt, proof_json
             FROM shipment_events WHERE shipment_kind = $2 AND shipment_id = ANY($1)
             ORDER BY shipment_id, seq",
            &[(&ids, Type::INT8_ARRAY), (&ShipmentKind::DropOff.as_str(), Type::TEXT)],
        )
        .await
        .map_err(map_err)?;
    let mut by_shipment: std::collections::HashMap<i64, Vec<StoredEvent>> = std::collections::HashMap::new();
    for r in &rows {
        by_shipment.entry(col(r, 0)?).or_default().push(event_row_at(r, 1)?);
    }
    Ok(by_shipment)
}

/// An event from the columns `id, seq, previous_status, status, at, actor, reason, attempt,
/// proof_json`.
fn event_row(r: &Row) -> Result<StoredEvent, StoreError> {
    event_row_at(r, 0)
}

/// [`event_row`] from column `at` on.
fn event_row_at(r: &Row, at: usize) -> Result<StoredEvent, StoreError> {
    {
        let from: Option<&str> = col(r, at + 2)?;
        let attempt: Option<i64> = col(r, at + 7)?;
        let proof: Option<&str> = col(r, at + 8)?;
        Ok(StoredEvent {
            id: col(r, at)?,
            seq: narrow(col(r, at + 1)?, "event seq")?,
            from: from.map(|f| crate::postgres::parsed(f, "status", Status::parse)).transpose()?,
            to: status_column(r, at + 3)?,
            at: col::<Timestamp>(r, at + 4)?,
            actor: crate::postgres::parsed(col(r, at + 5)?, "actor", Actor::parse)?,
            reason: col(r, at + 6)?,
            attempt: attempt.map(|a| narrow(a, "event attempt")).transpose()?,
            proof: match proof {
                None => Vec::new(),
                Some(p) => crate::postgres::json_column(p, "proof")?,
            },
        })
    }
}

/// A drop-off shipment by tracking code, where visible.
/// Each live drop-off's status and the time of its newest event, in one statement.
pub(crate) async fn progress_of(c: &impl Sql, unique_ids: &[String]) -> Result<Vec<crate::StoredProgress>, StoreError> {
    let rows = c
        .query(
            "SELECT d.unique_id, d.status, e.at, d.start_at, d.end_at FROM drop_off_shipments d
             CROSS JOIN LATERAL (SELECT at FROM shipment_events
                WHERE shipment_kind = $2 AND shipment_id = d.id ORDER BY id DESC LIMIT 1) e
             WHERE d.unique_id = ANY($1) AND d.mode = $3",
            &[&unique_ids, &ShipmentKind::DropOff.as_str(), &Mode::Live.as_str()],
        )
        .await
        .map_err(map_err)?;
    rows.iter()
        .map(|r| {
            let (start, end): (String, String) = (col(r, 3)?, col(r, 4)?);
            crate::StoredProgress::of(col(r, 0)?, status_column(r, 1)?, col::<Timestamp>(r, 2)?, &start, &end)
                .map_err(StoreError::Corrupt)
        })
        .collect()
}

/// The live drop-off shipments of a pick-up shipment, oldest first.
pub(crate) async fn pick_up_members(c: &impl Sql, pick_up_unique_id: &str) -> Result<Vec<String>, StoreError> {
    let rows = c
        .query(
            "SELECT d.unique_id FROM pick_up_shipments u JOIN drop_off_shipments d ON d.pick_up_shipment_id = u.id
             WHERE u.unique_id = $1 AND u.mode = $2 ORDER BY d.id",
            &[&pick_up_unique_id, &Mode::Live.as_str()],
        )
        .await
        .map_err(map_err)?;
    rows.iter().map(|r| col(r, 0)).collect()
}

pub(crate) async fn shipment(
    c: &impl Sql,
    visible: Visibility,
    unique_id: &str,
) -> Result<Option<StoredShipment>, StoreError> {
    let (client, mode) = match visible {
        Visibility::Tenant(s) => (Some(s.client.0), s.mode.as_str()),
        Visibility::Ops => (None, Mode::Live.as_str()),
    };
    let row = c
        .query_opt(
            "SELECT id FROM drop_off_shipments
             WHERE unique_id = $1 AND mode = $2 AND ($3::BIGINT IS NULL OR client_id = $3)",
            &[&unique_id, &mode, &client],
        )
        .await
        .map_err(map_err)?;
    match row {
        None => Ok(None),
        Some(r) => Ok(Some(shipment_by_id(c, col(&r, 0)?).await?)),
    }
}

/// An order with its shipments, by row id (already scoped by the caller).
async fn order_by_id(c: &impl Sql, id: i64) -> Result<StoredOrder, StoreError> {
    let r = c
        .query_opt("SELECT unique_id, created_at, created_offset FROM orders WHERE id = $1", &[&id])
        .await
        .map_err(map_err)?
        .ok_or_else(|| missing("order", id))?;
    let unique_id: String = col(&r, 0)?;
    // Shown in the offset it was made in, as `SQLite` keeps it.
    let created_at = crate::postgres::zoned_text(col(&r, 1)?, col(&r, 2)?)?;
    let drop_offs: Vec<i64> = c
        .query(
            "SELECT d.id FROM shipment_orders so JOIN drop_off_shipments d ON d.shipment_order_id = so.id
             WHERE so.order_id = $1 ORDER BY d.id",
            &[&id],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| col(r, 0))
        .collect::<Result<_, StoreError>>()?;
    let mut shipments = Vec::with_capacity(drop_offs.len());
    for d in drop_offs {
        shipments.push(shipment_by_id(c, d).await?);
    }
    Ok(StoredOrder { id: OrderId(id), unique_id, created_at, shipments })
}

pub(crate) async fn order(c: &impl Sql, scope: Scope, unique_id: &str) -> Result<Option<StoredOrder>, StoreError> {
    let row = c
        .query_opt(
            "SELECT id FROM orders WHERE unique_id = $1 AND client_id = $2 AND mode = $3",
            &[&unique_id, &scope.client.0, &scope.mode.as_str()],
        )
        .await
        .map_err(map_err)?;
    match row {
        None => Ok(None),
        Some(r) => Ok(Some(order_by_id(c, col(&r, 0)?).await?)),
    }
}

/// Newest first, strictly before the row id `before` (the cursor): orders created meanwhile
/// have higher ids, so pages never shift under concurrent inserts.
pub(crate) async fn orders(
    c: &impl Sql,
    scope: Scope,
    before: Option<i64>,
    limit: usize,
) -> Result<Vec<StoredOrder>, StoreError> {
    // A limit beyond i64 means "all of them".
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let ids: Vec<i64> = c
        .query(
            "SELECT id FROM orders WHERE client_id = $1 AND mode = $2 AND id < $3 ORDER BY id DESC LIMIT $4",
            &[&scope.client.0, &scope.mode.as_str(), &before.unwrap_or(i64::MAX), &limit],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| col(r, 0))
        .collect::<Result<_, StoreError>>()?;
    orders_by_id(c, ids).await
}

/// Each order of `ids`, in that order.
async fn orders_by_id(c: &impl Sql, ids: Vec<i64>) -> Result<Vec<StoredOrder>, StoreError> {
    let mut orders = Vec::with_capacity(ids.len());
    for id in ids {
        orders.push(order_by_id(c, id).await?);
    }
    Ok(orders)
}

/// The orders `filter` matches, newest first, before the row id `before`: one query for the
/// ids (an `EXISTS` over the order's drop-offs), then the same loader as [`orders`].
pub(crate) async fn find_orders(
    c: &impl Sql,
    scope: Scope,
    filter: &OrderFilter,
    before: Option<i64>,
    limit: usize,
) -> Result<Vec<StoredOrder>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let text = filter.text.as_deref().map(str::trim).filter(|t| !t.is_empty());
    let like = text.map(|t| format!("%{}%", crate::like_escape(&t.to_lowercase())));
    let status = filter.status.map(dropslot_core::shipments::Status::as_str);
    let ids: Vec<i64> = c
        .query(
            "SELECT o.id FROM orders o
             WHERE o.client_id = $1 AND o.mode = $2 AND o.id < $3
               AND EXISTS (
                 SELECT 1 FROM drop_off_shipments d
                 JOIN shipment_orders so ON so.id = d.shipment_order_id
                 WHERE so.order_id = o.id
                   AND ($4::text IS NULL OR d.status = $4::text)
                   AND ($5::text IS NULL OR d.scheduled_date = $5::text)
                   AND ($6::text IS NULL
                        OR upper(o.unique_id) = upper($6::text)
                        OR upper(d.unique_id) = upper($6::text)
                        OR lower(d.address_json::jsonb ->> 'person_name') LIKE $7::text ESCAPE '\\'
                        OR EXISTS (SELECT 1 FROM parcels p
                                   WHERE p.drop_off_shipment_id = d.id AND p.deleted_at IS NULL
                                     AND upper(p.custom_code) = upper($6::text))))
             ORDER BY o.id DESC LIMIT $8",
            &[
                &scope.client.0,
                &scope.mode.as_str(),
                &before.unwrap_or(i64::MAX),
                &status,
                &filter.date,
                &text,
                &like,
                &limit,
            ],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| col(r, 0))
        .collect::<Result<_, StoreError>>()?;
    orders_by_id(c, ids).await
}

/// The live parcel holding a custom code, with its shipment.
pub(crate) async fn parcel_by_custom_code(
    c: &impl Sql,
    scope: Scope,
    code: &str,
) -> Result<Option<(String, StoredShipment)>, StoreError> {
    let row = c
        .query_opt(
            "SELECT pick_up_code, drop_off_shipment_id FROM parcels
             WHERE client_id = $1 AND mode = $2 AND custom_code = $3 AND deleted_at IS NULL",
            &[&scope.client.0, &scope.mode.as_str(), &code],
        )
        .await
        .map_err(map_err)?;
    let Some(r) = row else { return Ok(None) };
    let pick_up_code: String = col(&r, 0)?;
    let drop_off: i64 = col(&r, 1)?;
    Ok(Some((pick_up_code, shipment_by_id(c, drop_off).await?)))
}

/// What the public tracking page shows, by tracking code (test or live).
pub(crate) async fn tracking(c: &impl Sql, code: &str) -> Result<Option<Tracking>, StoreError> {
    let row = c
        .query_opt(
            "SELECT d.id, d.unique_id, d.status, d.scheduled_date, d.slot_name, d.city,
                e.arrival_ms, e.from_ms, e.to_ms, e.late, e.stops_before, d.label_token
             FROM drop_off_shipments d LEFT JOIN stop_etas e ON e.shipment_unique_id = d.unique_id
             WHERE d.unique_id = $1",
            &[&code],
        )
        .await
        .map_err(map_err)?;
    let Some(r) = row else { return Ok(None) };
    let id: i64 = col(&r, 0)?;
    let mut t = Tracking {
        tracking_code: col(&r, 1)?,
        status: status_column(&r, 2)?,
        scheduled_date: col(&r, 3)?,
        slot_name: col(&r, 4)?,
        city: col(&r, 5)?,
        events: Vec::new(),
        eta: match col::<Option<i64>>(&r, 6)? {
            None => None,
            Some(arrival_ms) => Some(crate::StoredEta {
                arrival_ms,
                from_ms: col(&r, 7)?,
                to_ms: col(&r, 8)?,
                late: col::<i32>(&r, 9)? != 0,
                stops_before: narrow(col::<i32>(&r, 10)?.into(), "stops_before")?,
            }),
        },
        label_token: col(&r, 11)?,
    };
    t.events = events(c, id).await?.into_iter().map(|e| (e.to, e.at)).collect();
    Ok(Some(t))
}

/// A drop-off shipment by tracking code, in either mode, with its mode.
pub(crate) async fn shipment_by_code(c: &impl Sql, code: &str) -> Result<Option<(Mode, StoredShipment)>, StoreError> {
    let row =
        c.query_opt("SELECT id, mode FROM drop_off_shipments WHERE unique_id = $1", &[&code]).await.map_err(map_err)?;
    let Some(r) = row else { return Ok(None) };
    let mode: String = col(&r, 1)?;
    let mode = Mode::parse(&mode).ok_or_else(|| StoreError::Corrupt(format!("mode {mode:?}")))?;
    Ok(Some((mode, shipment_by_id(c, col(&r, 0)?).await?)))
}

/// A label's rows (`labels::assemble` makes the source from them).
pub(crate) async fn label_rows(c: &impl Sql, kind: LabelKind, token: &str) -> Result<Option<LabelRows>, StoreError> {
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
            "SELECT id, unique_id, address_json, scheduled_date, slot_name, zone_code, warehouse, status = $2
             FROM drop_off_shipments WHERE pick_up_shipment_id = $1 ORDER BY id",
            &[(&pick_up, Type::INT8), (&Status::Deleted.as_str(), Type::TEXT)],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| {
            Ok((
                column(r, 0)?,
                LabelDropOff {
                    tracking_code: column(r, 1)?,
                    address: crate::postgres::json_column(column(r, 2)?, "drop-off address")?,
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
        pick_up_address: crate::postgres::json_column(column(&r, 1)?, "pick-up address")?,
        pick_up_date: column(&r, 2)?,
        pick_up_slot_name: column(&r, 3)?,
        pick_up_deleted: pick_up_status == Status::Deleted.as_str(),
        drop_offs,
        parcels,
    }))
}
