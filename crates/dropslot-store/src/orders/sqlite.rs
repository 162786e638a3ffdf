//! Order rows on `SQLite`: the atomic order insert, deletion by custom code with re-pricing,
//! and the reads behind labels. Runs on the writer thread (writes) or a pooled reader.
//! Asynchronous order requests on `SQLite`: queued with their idempotency record, claimed
//! under a lease, finished (completed by the order's own insert, or failed) with their
//! `same.request.completed` webhook in the same transaction.

use crate::outbox::sqlite::Sink;
use crate::outbox::sqlite::{apply, record_event};
use crate::sqlite::{SqliteStore, map_err, status_column};
use crate::{
    COMPLETED_EVENT, ClaimedRequest, CreateOrderError, CreatedOrder, DeleteOutcome, IdempotencyClaim, Mode, NewOrder,
    NewRequest, OrderIds, OrderStore, RenderFn, RequestEnd, RequestStatus, SavedAddress, Scope, ShipmentIds,
    StoreError, StoreResult, StoredRequest, StoredResponse, WrittenOrder,
};
use async_trait::async_trait;
use dropslot_core::ids::{
    ClientId, CustomCode, DropOffShipmentId, OrderId, ParcelId, PickUpShipmentId, SavedAddressId, ShipmentOrderId,
};
use dropslot_core::money::{Money, TaxRate};
use dropslot_core::shipments;
use dropslot_core::shipments::{ChargeLine, DeletionPlan, DeletionSnapshot, ShipmentKind, Status};
use dropslot_core::time::iso;
use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};
use std::sync::LazyLock;

#[async_trait]
impl OrderStore for SqliteStore {
    async fn saved_address_id_by_text(&self, scope: Scope, normalized: &str) -> StoreResult<Option<SavedAddressId>> {
        let epoch = self.epoch.read();
        let key = (scope, normalized.to_string());
        if let Some(cached) = epoch.and_then(|e| self.saved_ids.get(&key, e)) {
            return Ok(cached);
        }
        let found = self.read(|c| {
            c.prepare_cached("SELECT id FROM saved_addresses WHERE client_id = ?1 AND mode = ?2 AND normalized = ?3")?
                .query_row(params![scope.client.0, scope.mode.as_str(), normalized], |r| r.get(0).map(SavedAddressId))
                .optional()
        })?;
        // "None" too: an order that creates this address touches the epoch after its commit.
        if let Some(epoch) = epoch {
            self.saved_ids.put(key, epoch, found);
        }
        Ok(found)
    }

    async fn saved_address(&self, scope: Scope, id: SavedAddressId) -> StoreResult<Option<SavedAddress>> {
        self.read(|c| {
            c.prepare_cached(
                "SELECT id, text, use_count, created_at, last_used_at FROM saved_addresses
                 WHERE client_id = ?1 AND mode = ?2 AND id = ?3",
            )?
            .query_row(params![scope.client.0, scope.mode.as_str(), id.0], saved_address_row)
            .optional()
        })
    }

    async fn list_saved_addresses(&self, scope: Scope) -> StoreResult<Vec<SavedAddress>> {
        self.read_blocking(move |c| {
            let mut st = c.prepare_cached(
                "SELECT id, text, use_count, created_at, last_used_at FROM saved_addresses
                 WHERE client_id = ?1 AND mode = ?2 ORDER BY last_used_at DESC, id DESC",
            )?;
            st.query_map(params![scope.client.0, scope.mode.as_str()], saved_address_row)?.collect()
        })
        .await
    }

    async fn delete_saved_address(&self, scope: Scope, id: SavedAddressId) -> StoreResult<bool> {
        let deleted = self
            .writer
            .write(move |c| {
                let n = c
                    .execute(
                        "DELETE FROM saved_addresses WHERE client_id = ?1 AND mode = ?2 AND id = ?3",
                        params![scope.client.0, scope.mode.as_str(), id.0],
                    )
                    .map_err(map_err)?;
                Ok(n == 1)
            })
            .await?;
        if deleted {
            self.changed()?;
        }
        Ok(deleted)
    }

    async fn idempotent_response(
        &self,
        scope: Scope,
        key: &str,
        since: Timestamp,
    ) -> StoreResult<Option<StoredResponse>> {
        self.read(|c| {
            c.prepare_cached(
                "SELECT request_hash, status, body FROM idempotency_keys
                 WHERE client_id = ?1 AND mode = ?2 AND key = ?3 AND created_at >= ?4",
            )?
            .query_row(params![scope.client.0, scope.mode.as_str(), key, since.as_second()], |r| {
                Ok(StoredResponse { request_hash: r.get(0)?, status: r.get(1)?, body: r.get(2)? })
            })
            .optional()
        })
    }

    async fn create_order(
        &self,
        scope: Scope,
        order: NewOrder,
        render: RenderFn,
    ) -> Result<CreatedOrder, CreateOrderError> {
        let (created, new_address) =
            self.write_events(move |c, sink| insert_order(c, sink, scope, &order, &render)).await?;
        if new_address {
            // The order is committed and answered whatever happens here: a failed touch only
            // means other processes may show no saved_address_id for this text for up to 1 s.
            if let Err(e) = self.changed() {
                tracing::warn!(error = %e, "a new saved address");
            }
        }
        Ok(created)
    }

    async fn delete_parcel_by_custom_code(
        &self,
        scope: Scope,
        code: &CustomCode,
        now: Timestamp,
    ) -> StoreResult<DeleteOutcome> {
        let code = code.clone();
        self.write_events(move |c, sink| delete_parcel(c, sink, scope, &code, now)).await
    }

    async fn queue_request(&self, scope: Scope, request: NewRequest) -> Result<(), CreateOrderError> {
        self.writer.write(move |c| queue(c, scope, &request)).await
    }

    async fn order_request(&self, scope: Scope, request_id: &str) -> StoreResult<Option<StoredRequest>> {
        self.read(|c| get(c, scope, request_id))
    }

    async fn claim_requests(&self, now_ms: i64, lease_until_ms: i64, limit: usize) -> StoreResult<Vec<ClaimedRequest>> {
        self.writer.write(move |c| claim(c, now_ms, lease_until_ms, limit)).await
    }

    async fn fail_request(&self, end: RequestEnd, errors_json: String) -> StoreResult<bool> {
        self.write_events(move |c, sink| fail(c, sink, &end, &errors_json)).await
    }

    async fn next_request_due_ms(&self) -> StoreResult<Option<i64>> {
        self.read(next_due_ms)
    }
}

/// One order in the writer's transaction, and whether it created its pick-up's saved address
/// (then the read caches must hear of it once it is committed).
pub(crate) fn insert_order(
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
    crate::capacity::sqlite::reserve(c, scope.mode, &o.reservations)?;
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
    let pick_up_address = crate::sqlite::to_json(&p.address).map_err(map_err)?;
    c.prepare_cached(
        "INSERT INTO pick_up_shipments (unique_id, order_id, client_id, mode, saved_address_id, status, scheduled_date,
            slot_code, slot_name, start_at, end_at, address_json, label_token)
         VALUES (?1, ?2, ?3, ?4, ?5, ?13, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
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
            p.label_token,
            Status::Scheduled.as_str()
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
        let address = crate::sqlite::to_json(&d.address).map_err(map_err)?;
        c.prepare_cached(
            "INSERT INTO drop_off_shipments (unique_id, shipment_order_id, pick_up_shipment_id, client_id, mode, status,
                scheduled_date, slot_code, slot_name, start_at, end_at, zone_code, warehouse, city, address_json, label_token,
                max_attempts)
             VALUES (?1, ?2, ?3, ?4, ?5, ?17, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        )
        .and_then(|mut st| {
            st.execute(params![
                d.unique_id, shipment_order.0, pick_up.0, client, mode, d.scheduled_date.to_string(), d.slot_code,
                d.slot_name, iso(&d.start), iso(&d.end), d.zone_code, d.warehouse, d.city, address, d.label_token,
                d.max_attempts, Status::Scheduled.as_str()
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
    if scope.mode == crate::Mode::Live {
        let ids: Vec<i64> = shipments.iter().map(|s| s.drop_off.0).collect();
        crate::tentative::sqlite::reserve(c, sink.outbox.fleet(), &o.reservations, &ids)?;
    }
    let written = WrittenOrder::new(o, OrderIds { order, pick_up, saved_address, shipments });
    crate::outbox::sqlite::order_created(c, sink, &written, &first_events)?;
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
        complete(c, sink, scope, end, written.ids.order.0)?;
    }
    Ok((CreatedOrder { order: written, body }, new_address))
}

/// Makes room for a new record of `claim`'s key: taken when a record within the window
/// exists (the caller replays it), replaced when it has expired.
pub(crate) fn claim_idempotency_key(
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
    crate::sqlite::violated_constraint(e) == Some("parcels_live_custom_code")
}

/// Deletion by custom code as one unit of work: load the snapshot, let the domain decide
/// (`shipments::plan_deletion`), persist the plan; all in the writer's transaction.
pub(crate) fn delete_parcel(
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
    crate::capacity::sqlite::release(c, parcel.0, shipment_deleted, pick_up_deleted)?;
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
                    (SELECT count(*) FROM drop_off_shipments y WHERE y.pick_up_shipment_id = pu.id AND y.status <> ?4)
             FROM parcels p
             JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id
             JOIN pick_up_shipments pu ON pu.id = d.pick_up_shipment_id
             JOIN shipment_orders so ON so.id = d.shipment_order_id
             WHERE p.client_id = ?1 AND p.mode = ?2 AND p.custom_code = ?3 AND p.deleted_at IS NULL",
        )?
        .query_row(params![scope.client.0, scope.mode.as_str(), code.as_str(), Status::Deleted.as_str()], |r| {
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

pub(crate) fn queue(c: &Connection, scope: Scope, r: &NewRequest) -> Result<(), CreateOrderError> {
    let (client, mode) = (scope.client.0, scope.mode.as_str());
    if let Some(claim) = &r.idempotency {
        claim_idempotency_key(c, scope, claim)?;
    }
    c.prepare_cached(
        "INSERT INTO order_requests (request_id, client_id, mode, status, payload, terms, drop_offs_count, created_at,
            next_attempt_ms)
         VALUES (?1, ?2, ?3, ?9, ?4, ?5, ?6, ?7, ?8)",
    )
    .and_then(|mut s| {
        s.execute(params![
            r.request_id,
            client,
            mode,
            r.payload,
            r.terms,
            r.drop_offs_count as i64,
            r.created_at,
            r.due_ms,
            RequestStatus::Queued.as_str()
        ])
    })
    .map_err(map_err)?;
    if let Some(claim) = &r.idempotency {
        c.prepare_cached(
            "INSERT INTO idempotency_keys (client_id, mode, key, request_hash, status, body, created_at)
             VALUES (?1, ?2, ?3, ?4, 202, ?5, ?6)",
        )
        .and_then(|mut s| {
            s.execute(params![client, mode, claim.key, claim.request_hash, r.response, claim.now.as_second()])
        })
        .map_err(map_err)?;
    }
    Ok(())
}

pub(crate) fn get(c: &Connection, scope: Scope, request_id: &str) -> rusqlite::Result<Option<StoredRequest>> {
    c.prepare_cached(
        "SELECT r.request_id, r.status, r.drop_offs_count, r.created_at, r.completed_at, o.unique_id, r.errors_json
         FROM order_requests r LEFT JOIN orders o ON o.id = r.order_id
         WHERE r.request_id = ?1 AND r.client_id = ?2 AND r.mode = ?3",
    )?
    .query_row(params![request_id, scope.client.0, scope.mode.as_str()], |r| {
        Ok(StoredRequest {
            request_id: r.get(0)?,
            status: crate::sqlite::parsed(r, 1, "request status", RequestStatus::parse)?,
            drop_offs_count: r.get::<_, i64>(2)? as usize,
            created_at: r.get(3)?,
            completed_at: r.get(4)?,
            order_unique_id: r.get(5)?,
            errors_json: r.get(6)?,
        })
    })
    .optional()
}

/// Due requests, oldest first, each moved to `processing` under a fresh claim tag.
pub(crate) fn claim(
    c: &Connection,
    now_ms: i64,
    lease_until_ms: i64,
    limit: usize,
) -> Result<Vec<ClaimedRequest>, StoreError> {
    let mut due = c
        .prepare_cached(&format!(
            "SELECT id, client_id, mode, request_id, payload, terms, attempts, drop_offs_count, created_at FROM order_requests
             WHERE status IN ('{queued}', '{processing}') AND next_attempt_ms <= ?1 ORDER BY id LIMIT {}",
            crate::sqlite::limit_bucket(limit),
            // The due index's condition, spelled: `SQLite` uses a partial index only when the
            // query's terms prove its condition, and bound statuses prove nothing.
            queued = RequestStatus::Queued.as_str(),
            processing = RequestStatus::Processing.as_str(),
        ))
        .and_then(|mut s| {
            s.query_map(params![now_ms], |r| {
                Ok(ClaimedRequest {
                    id: r.get(0)?,
                    claim: 0,
                    scope: Scope {
                        client: ClientId(r.get(1)?),
                        mode: crate::sqlite::parsed(r, 2, "mode", Mode::parse)?,
                    },
                    request_id: r.get(3)?,
                    payload: r.get(4)?,
                    terms: r.get(5)?,
                    attempts: r.get::<_, u32>(6)?.saturating_add(1),
                    drop_offs_count: r.get::<_, i64>(7)? as usize,
                    created_at: r.get(8)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(map_err)?;
    due.truncate(limit);
    for r in &mut due {
        r.claim = i64::from_le_bytes(dropslot_core::ids::random_bytes::<8>());
        c.prepare_cached(
            "UPDATE order_requests SET status = ?5, claim = ?2, next_attempt_ms = ?3, attempts = ?4
             WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.execute(params![r.id, r.claim, lease_until_ms, r.attempts, RequestStatus::Processing.as_str()])
        })
        .map_err(map_err)?;
    }
    Ok(due)
}

/// Marks the claimed request completed by `order`, in the order's transaction. An error when
/// the claim was lost: the whole order then rolls back, and the new holder creates it once.
pub(crate) fn complete(
    c: &Connection,
    sink: &mut Sink<'_>,
    scope: Scope,
    end: &RequestEnd,
    order: i64,
) -> Result<(), StoreError> {
    let n = c
        .prepare_cached(
            "UPDATE order_requests SET status = ?5, completed_at = ?3, order_id = ?4, claim = NULL
             WHERE id = ?1 AND claim = ?2 AND status = ?6",
        )
        .and_then(|mut s| {
            let (to, from) = (RequestStatus::Completed.as_str(), RequestStatus::Processing.as_str());
            s.execute(params![end.id, end.claim, end.completed_at, order, to, from])
        })
        .map_err(map_err)?;
    if n != 1 {
        return Err(StoreError::Unavailable(crate::LEASE_LOST.into()));
    }
    finished_event(c, sink, scope, end)
}

/// Marks the claimed request failed; false (nothing written) when the claim was lost.
pub(crate) fn fail(
    c: &Connection,
    sink: &mut Sink<'_>,
    end: &RequestEnd,
    errors_json: &str,
) -> Result<bool, StoreError> {
    let row: Option<(i64, String)> = c
        .prepare_cached(
            "UPDATE order_requests SET status = ?5, completed_at = ?3, errors_json = ?4, claim = NULL
             WHERE id = ?1 AND claim = ?2 AND status = ?6
             RETURNING client_id, mode",
        )
        .and_then(|mut s| {
            let (to, from) = (RequestStatus::Failed.as_str(), RequestStatus::Processing.as_str());
            s.query_row(params![end.id, end.claim, end.completed_at, errors_json, to, from], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
        })
        .map_err(map_err)?;
    let Some((client, mode)) = row else { return Ok(false) };
    let mode = Mode::parse(&mode).ok_or_else(|| StoreError::Corrupt(format!("unknown mode {mode:?}")))?;
    finished_event(c, sink, Scope { client: ClientId(client), mode }, end)?;
    Ok(true)
}

/// `same.request.completed` to every enabled endpoint of the tenant that takes it. Not part
/// of any shipment's stream: it has no ordering key.
fn finished_event(c: &Connection, sink: &mut Sink<'_>, scope: Scope, end: &RequestEnd) -> Result<(), StoreError> {
    let endpoints = crate::outbox::sqlite::tenant_subscribers(c, scope, COMPLETED_EVENT)?;
    if !endpoints.is_empty() {
        let tenant = (scope.client.0, scope.mode.as_str());
        let queued =
            crate::outbox::sqlite::enqueue(c, tenant, COMPLETED_EVENT, &end.event_body, None, &endpoints, end.at)?;
        sink.queued += queued.len();
    }
    Ok(())
}

/// Read from the due index alone: its condition spelled, as in [`claim`].
pub(crate) fn next_due_ms(c: &Connection) -> rusqlite::Result<Option<i64>> {
    static NEXT_DUE: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT min(next_attempt_ms) FROM order_requests WHERE status IN ('{}', '{}')",
            RequestStatus::Queued.as_str(),
            RequestStatus::Processing.as_str()
        )
    });
    c.prepare_cached(&NEXT_DUE)?.query_row([], |r| r.get(0))
}

fn saved_address_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SavedAddress> {
    Ok(SavedAddress {
        id: SavedAddressId(r.get(0)?),
        text: r.get(1)?,
        use_count: r.get(2)?,
        created_at: r.get(3)?,
        last_used_at: r.get(4)?,
    })
}
