//! The shipment lifecycle on `SQLite`: every status change is persisted by [`apply`] (status,
//! attempts and the numbered event, in the changing transaction), after the domain planned it
//! from a snapshot loaded in that same transaction. Writes run on the writer thread.

use crate::outbox::sqlite::{Sink, apply};
use crate::sqlite::{SqliteStore, map_err, status_column};
use crate::{
    LifecycleStore, Mode, MoveOutcome, ScenarioResult, Scope, Selection, StoreError, StoreResult, StoredShipment,
    Visibility,
};
use async_trait::async_trait;
use dropslot_core::ids::DropOffShipmentId;
use dropslot_core::shipments;
use dropslot_core::shipments::{Actor, Leg, Move, Scenario, ShipmentKind, Status};
use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

#[async_trait]
impl LifecycleStore for SqliteStore {
    async fn sandbox_candidates(&self, scope: Scope, selection: Selection) -> StoreResult<Vec<i64>> {
        self.read_blocking(move |c| sandbox_candidates(c, scope, &selection)).await
    }

    async fn run_scenario(
        &self,
        scope: Scope,
        ids: Vec<i64>,
        scenario: dropslot_core::shipments::Scenario,
        now: Timestamp,
    ) -> StoreResult<Vec<ScenarioResult>> {
        self.write_events(move |c, sink| run_scenario(c, sink, scope, &ids, scenario, now)).await
    }

    async fn ops_move(
        &self,
        unique_id: &str,
        m: dropslot_core::shipments::Move,
        now: Timestamp,
    ) -> StoreResult<MoveOutcome<Box<StoredShipment>>> {
        let code = unique_id.to_string();
        let outcome = self.write_events(move |c, sink| ops_move(c, sink, &code, &m, now)).await?;
        // Read back on a reader, after the writer's commit (the writer stays on writes).
        Ok(match outcome {
            MoveOutcome::NotFound => MoveOutcome::NotFound,
            MoveOutcome::Refused(r) => MoveOutcome::Refused(r),
            MoveOutcome::Moved(moved) => {
                match self.read(|c| crate::shipments::sqlite::shipment(c, Visibility::Ops, &moved))? {
                    // Deleted meanwhile by its merchant.
                    None => MoveOutcome::NotFound,
                    Some(s) => MoveOutcome::Moved(Box::new(s)),
                }
            }
        })
    }

    async fn driver_move(
        &self,
        key: crate::DriverKey,
        unique_id: &str,
        m: dropslot_core::shipments::Move,
        attach: Vec<String>,
        now: Timestamp,
    ) -> StoreResult<crate::DriverMove> {
        let unique_id = unique_id.to_string();
        self.write_events(move |c, sink| driver_move(c, sink, &key, &unique_id, &m, &attach, now)).await
    }

    async fn pick_up_scan(&self, pick_up_code: &str, now: Timestamp) -> StoreResult<MoveOutcome> {
        let code = pick_up_code.to_string();
        self.write_events(move |c, sink| pick_up_scan(c, sink, &code, now)).await
    }
}

/// A drop-off shipment and its pick-up leg as the domain needs them, with its tracking code
/// and whether a scenario has moved it.
struct Loaded {
    leg: Leg,
    unique_id: String,
    sandbox_moved: bool,
}

/// Loads by the drop-off's row id (`by_id`) or tracking code, only where `visible`.
fn load(
    c: &Connection,
    visible: Visibility,
    id: Option<i64>,
    unique_id: Option<&str>,
) -> rusqlite::Result<Option<Loaded>> {
    let (client, mode) = match visible {
        Visibility::Tenant(s) => (Some(s.client.0), s.mode.as_str()),
        Visibility::Ops => (None, Mode::Live.as_str()),
    };
    c.prepare_cached(
        "SELECT d.id, d.unique_id, d.status, d.attempts, d.max_attempts, d.sandbox_moved, p.id, p.status
         FROM drop_off_shipments d JOIN pick_up_shipments p ON p.id = d.pick_up_shipment_id
         WHERE (d.id = ?1 OR d.unique_id = ?2) AND d.mode = ?3 AND (?4 IS NULL OR d.client_id = ?4)",
    )?
    .query_row(params![id, unique_id, mode, client], |r| {
        Ok(Loaded {
            leg: Leg::of((r.get(0)?, status_column(r, 2)?, r.get(3)?, r.get(4)?), (r.get(6)?, status_column(r, 7)?)),
            unique_id: r.get(1)?,
            sandbox_moved: r.get(5)?,
        })
    })
    .optional()
}

/// The caller's test drop-off shipments matched by any selector, oldest first. Ids of other
/// clients or of live data match nothing.
pub(crate) fn sandbox_candidates(c: &Connection, scope: Scope, s: &Selection) -> rusqlite::Result<Vec<i64>> {
    let ids = serde_json::to_string(&s.ids).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    let unique_ids =
        serde_json::to_string(&s.unique_ids).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    let mut st = c.prepare_cached(
        "SELECT id FROM drop_off_shipments
         WHERE client_id = ?1 AND mode = ?2 AND (
            id IN (SELECT value FROM json_each(?3))
            OR unique_id IN (SELECT value FROM json_each(?4))
            OR scheduled_date = ?5)
         ORDER BY id",
    )?;
    st.query_map(params![scope.client.0, scope.mode.as_str(), ids, unique_ids, s.date.map(|d| d.to_string())], |r| {
        r.get(0)
    })?
    .collect()
}

/// One bounded batch of a scenario: each shipment is re-read, planned and moved all the way
/// or skipped, inside this transaction. A racing scenario sees the `sandbox_moved` mark.
pub(crate) fn run_scenario(
    c: &Connection,
    sink: &mut Sink<'_>,
    scope: Scope,
    ids: &[i64],
    scenario: Scenario,
    now: Timestamp,
) -> Result<Vec<ScenarioResult>, StoreError> {
    let mut results = Vec::with_capacity(ids.len());
    for &id in ids {
        let Some(s) = load(c, Visibility::Tenant(scope), Some(id), None).map_err(map_err)? else { continue };
        let (drop_off, status) = (DropOffShipmentId(s.leg.drop_off.id), s.leg.drop_off.status);
        let skip =
            |reason: String| ScenarioResult::Skipped { id: drop_off, unique_id: s.unique_id.clone(), status, reason };
        match scenario.events_for(&s.leg, s.sandbox_moved) {
            Err(reason) => results.push(skip(reason)),
            Ok(events) => {
                apply(c, sink, &events, now)?;
                c.prepare_cached("UPDATE drop_off_shipments SET sandbox_moved = 1 WHERE id = ?1")
                    .and_then(|mut st| st.execute([id]))
                    .map_err(map_err)?;
                let to = events.iter().rev().find(|e| e.kind == ShipmentKind::DropOff).map_or(status, |e| e.to);
                results.push(ScenarioResult::Affected { id: drop_off, unique_id: s.unique_id, from: status, to });
            }
        }
    }
    Ok(results)
}

/// An ops move of a live drop-off shipment, by tracking code.
pub(crate) fn ops_move(
    c: &Connection,
    sink: &mut Sink<'_>,
    unique_id: &str,
    m: &Move,
    now: Timestamp,
) -> Result<MoveOutcome, StoreError> {
    let Some(s) = load(c, Visibility::Ops, None, Some(unique_id)).map_err(map_err)? else {
        return Ok(MoveOutcome::NotFound);
    };
    // A return stop that fails is booked again or cancelled (CONTRACT §15).
    if dropslot_core::attempts::failed_return(s.leg.drop_off.status, m.to) {
        return crate::attempts::sqlite::return_failed(c, sink, s.leg.drop_off.id, m, now);
    }
    match shipments::plan_moves(&s.leg, std::slice::from_ref(m)) {
        Err(refusal) => Ok(MoveOutcome::Refused(refusal)),
        Ok(mut events) => {
            if m.to == Status::Failed {
                crate::attempts::sqlite::follow_failure(c, sink, &mut events, now)?;
            }
            apply(c, sink, &events, now)?;
            Ok(MoveOutcome::Moved(s.unique_id))
        }
    }
}

/// The stored (request hash, shipment) of a driver's key.
fn driver_record(c: &Connection, key: &crate::DriverKey) -> Result<Option<(String, String)>, StoreError> {
    c.prepare_cached("SELECT request_hash, shipment_unique_id FROM driver_requests WHERE driver_id = ?1 AND key = ?2")
        .and_then(|mut s| s.query_row([&key.driver_id, &key.key], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(map_err)
}

/// A driver's move with its idempotency record, in the writer's one transaction (the writer
/// orders every write, so a second request with the key finds the first's record).
pub(crate) fn driver_move(
    c: &Connection,
    sink: &mut Sink<'_>,
    key: &crate::DriverKey,
    unique_id: &str,
    m: &Move,
    attach: &[String],
    now: Timestamp,
) -> Result<crate::DriverMove, StoreError> {
    if let Some(done) = crate::lifecycle::recorded(key, driver_record(c, key)?) {
        return Ok(done);
    }
    if let Some(token) = crate::driver::sqlite::unavailable(c, attach, &key.driver_id, unique_id)? {
        return Ok(crate::DriverMove::ProofUnavailable(token));
    }
    let outcome = ops_move(c, sink, unique_id, m, now)?;
    if let MoveOutcome::Moved(moved) = &outcome {
        crate::driver::sqlite::attach(c, attach, moved)?;
        c.prepare_cached(
            "INSERT INTO driver_requests (driver_id, key, request_hash, shipment_unique_id, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut s| {
            s.execute(rusqlite::params![key.driver_id, key.key, key.request_hash, moved, now.to_string()])
        })
        .map_err(map_err)?;
    }
    Ok(crate::DriverMove::Done(outcome))
}

/// A pick-up scan of a live parcel, by its pick-up code.
pub(crate) fn pick_up_scan(
    c: &Connection,
    sink: &mut Sink<'_>,
    pick_up_code: &str,
    now: Timestamp,
) -> Result<MoveOutcome, StoreError> {
    let drop_off: Option<i64> = c
        .prepare_cached(
            "SELECT drop_off_shipment_id FROM parcels WHERE pick_up_code = ?1 AND mode = ?2 AND deleted_at IS NULL",
        )
        .and_then(|mut s| s.query_row(params![pick_up_code, Mode::Live.as_str()], |r| r.get(0)).optional())
        .map_err(map_err)?;
    let Some(id) = drop_off else { return Ok(MoveOutcome::NotFound) };
    let Some(s) = load(c, Visibility::Ops, Some(id), None).map_err(map_err)? else {
        return Ok(MoveOutcome::NotFound);
    };
    match shipments::pick_up_scan(&s.leg, Actor::Ops) {
        Err(refusal) => Ok(MoveOutcome::Refused(refusal)),
        Ok(events) => {
            apply(c, sink, &events, now)?;
            Ok(MoveOutcome::Moved(s.unique_id))
        }
    }
}
