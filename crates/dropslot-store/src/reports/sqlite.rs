//! The day's report's reads on `SQLite`: one statement for the plans, then indexed lookups a
//! shipment (its row with its events, its told windows) and a driver (its positions).

use crate::reports::{REPORTED, ReportDropOff, ReportFacts, ReportStore, event, members, position};
use crate::sqlite::SqliteStore;
use crate::{Mode, StoreError, StoreResult};
use async_trait::async_trait;
use dropslot_core::dispatch::Plan;
use dropslot_core::dispatch::{PlanKind, PlanStatus};
use dropslot_core::reports::Told;
use dropslot_core::shipments::{ShipmentKind, Status};
use jiff::Timestamp;
use jiff::civil::Date;
use rusqlite::{Connection, OptionalExtension, params};

/// A drop-off's columns (unique id, zone, events as status, time text and reason, told
/// windows) and a position's (driver, time, latitude, longitude): parsed outside the read.
type Shipment = (String, String, Vec<(String, String, Option<String>)>, Vec<Told>);
type Rows = (Vec<Plan>, Vec<Shipment>, Vec<(String, i64, f64, f64)>);

#[async_trait]
impl ReportStore for SqliteStore {
    async fn report_facts(
        &self,
        depot: &str,
        from: Date,
        to: Date,
        positions_ms: (i64, i64),
    ) -> StoreResult<ReportFacts> {
        let depot = depot.to_string();
        let (plans, shipments, positions) =
            self.read_blocking(move |c| rows(c, &depot, from, to, positions_ms)).await??;
        let mut facts = ReportFacts { plans, ..ReportFacts::default() };
        for (unique_id, zone, events, told) in shipments {
            let events = events
                .into_iter()
                .map(|(status, at, reason)| {
                    let at: Timestamp = at
                        .parse()
                        .map_err(|e| StoreError::Corrupt(format!("shipment {unique_id}: event time {at:?}: {e}")))?;
                    event(&status, at.as_millisecond(), reason)
                })
                .collect::<StoreResult<_>>()?;
            facts.drop_offs.push(ReportDropOff { unique_id, zone, events, told });
        }
        facts.positions = positions
            .into_iter()
            .map(|(driver, at_ms, lat, lng)| position(driver, at_ms, lat, lng))
            .collect::<StoreResult<_>>()?;
        Ok(facts)
    }
}

fn rows(
    c: &Connection,
    depot: &str,
    from: Date,
    to: Date,
    positions_ms: (i64, i64),
) -> rusqlite::Result<StoreResult<Rows>> {
    let (mut shipments, mut positions) = (Vec::new(), Vec::new());
    let plan_rows: Vec<(String, String, i64, Option<String>)> = c
        .prepare_cached(
            "SELECT id, status, version, plan_json FROM plans
             WHERE depot = ?1 AND kind = ?2 AND status = ?3 AND date >= ?4 AND date <= ?5 ORDER BY date, id",
        )?
        .query_map(
            params![
                depot,
                PlanKind::Delivery.as_str(),
                PlanStatus::Published.as_str(),
                from.to_string(),
                to.to_string()
            ],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut plans = Vec::with_capacity(plan_rows.len());
    for (id, status, version, json) in &plan_rows {
        match crate::plans::plan_row(id, status, *version, json.as_deref()) {
            Ok(p) => plans.extend(p.map(|p| p.plan)),
            Err(e) => return Ok(Err(e)),
        }
    }
    let (ids, drivers) = members(&plans);
    let mut zone =
        c.prepare_cached("SELECT id, zone_code FROM drop_off_shipments WHERE unique_id = ?1 AND mode = ?2")?;
    let mut events = c.prepare_cached(
        "SELECT status, at, reason FROM shipment_events
         WHERE shipment_kind = ?1 AND shipment_id = ?2 AND status IN (?3, ?4, ?5, ?6) ORDER BY id",
    )?;
    let mut told =
        c.prepare_cached("SELECT from_ms, to_ms, at_ms FROM eta_windows WHERE shipment_unique_id = ?1 ORDER BY id")?;
    let statuses = REPORTED.map(Status::as_str);
    for u in ids {
        let found: Option<(i64, String)> =
            zone.query_row(params![u, Mode::Live.as_str()], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
        let Some((id, zone_code)) = found else { continue };
        let evs = events
            .query_map(
                params![ShipmentKind::DropOff.as_str(), id, statuses[0], statuses[1], statuses[2], statuses[3]],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let windows = told
            .query_map(params![u], |r| Ok(Told { from_ms: r.get(0)?, to_ms: r.get(1)?, at_ms: r.get(2)? }))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        shipments.push((u, zone_code, evs, windows));
    }
    let mut at = c.prepare_cached(
        "SELECT lat, lng, at_ms FROM driver_positions WHERE driver_id = ?1 AND at_ms >= ?2 AND at_ms < ?3 ORDER BY at_ms",
    )?;
    for d in drivers {
        let rows = at
            .query_map(params![d, positions_ms.0, positions_ms.1], |r| Ok((r.get(2)?, r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<Vec<(i64, f64, f64)>>>()?;
        positions.extend(rows.into_iter().map(|(t, lat, lng)| (d.clone(), t, lat, lng)));
    }
    Ok(Ok((plans, shipments, positions)))
}
