//! The day's report's reads on `PostgreSQL`: four statements — the plans, their drop-offs with
//! their events, their told windows, their drivers' positions — each over every member at once.

use crate::postgres::sql::Sql;
use crate::postgres::{PgStore, map_err};
use crate::reports::{REPORTED, ReportDropOff, ReportFacts, ReportStore, event, members, position};
use crate::{Mode, StoreError, StoreResult};
use async_trait::async_trait;
use dropslot_core::dispatch::{PlanKind, PlanStatus};
use dropslot_core::reports::Told;
use dropslot_core::shipments::{ShipmentKind, Status};
use jiff::Timestamp;
use jiff::civil::Date;
use std::collections::HashMap;
use tokio_postgres::Row;
use tokio_postgres::types::FromSql;

#[async_trait]
impl ReportStore for PgStore {
    async fn report_facts(
        &self,
        depot: &str,
        from: Date,
        to: Date,
        positions_ms: (i64, i64),
    ) -> StoreResult<ReportFacts> {
        let c = self.conn().await?;
        facts(&c, depot, from, to, positions_ms).await
    }
}

/// A column of a row; a type that does not match the schema is an error, never a panic.
fn col<'a, T: FromSql<'a>>(r: &'a Row, i: usize) -> Result<T, StoreError> {
    r.try_get(i).map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))
}

async fn facts(c: &impl Sql, depot: &str, from: Date, to: Date, positions_ms: (i64, i64)) -> StoreResult<ReportFacts> {
    let (from, to) = (from.to_string(), to.to_string());
    let plan_rows = c
        .query(
            "SELECT id, status, version, plan_json FROM plans
             WHERE depot = $1 AND kind = $2 AND status = $3 AND date >= $4 AND date <= $5 ORDER BY date, id",
            &[&depot, &PlanKind::Delivery.as_str(), &PlanStatus::Published.as_str(), &from, &to],
        )
        .await
        .map_err(map_err)?;
    let mut plans = Vec::with_capacity(plan_rows.len());
    for r in &plan_rows {
        let json: Option<String> = col(r, 3)?;
        let plan = crate::plans::plan_row(&col::<String>(r, 0)?, &col::<String>(r, 1)?, col(r, 2)?, json.as_deref())?;
        plans.extend(plan.map(|p| p.plan));
    }
    let (ids, drivers) = members(&plans);
    let statuses: Vec<&str> = REPORTED.iter().copied().map(Status::as_str).collect();
    let rows = c
        .query(
            "SELECT d.unique_id, d.zone_code, e.status, e.at, e.reason FROM drop_off_shipments d
             LEFT JOIN shipment_events e ON e.shipment_kind = $2 AND e.shipment_id = d.id AND e.status = ANY($4)
             WHERE d.unique_id = ANY($1) AND d.mode = $3 ORDER BY d.unique_id, e.id",
            &[&ids, &ShipmentKind::DropOff.as_str(), &Mode::Live.as_str(), &statuses],
        )
        .await
        .map_err(map_err)?;
    let mut drop_offs: Vec<ReportDropOff> = Vec::new();
    for r in &rows {
        let unique_id: String = col(r, 0)?;
        if drop_offs.last().is_none_or(|d| d.unique_id != unique_id) {
            drop_offs.push(ReportDropOff { unique_id, zone: col(r, 1)?, events: Vec::new(), told: Vec::new() });
        }
        let status: Option<String> = col(r, 2)?;
        if let (Some(status), Some(d)) = (status, drop_offs.last_mut()) {
            let at: Timestamp = col(r, 3)?;
            d.events.push(event(&status, at.as_millisecond(), col(r, 4)?)?);
        }
    }
    let told = c
        .query(
            "SELECT shipment_unique_id, from_ms, to_ms, at_ms FROM eta_windows
             WHERE shipment_unique_id = ANY($1) ORDER BY id",
            &[&ids],
        )
        .await
        .map_err(map_err)?;
    let at: HashMap<String, usize> = drop_offs.iter().enumerate().map(|(i, d)| (d.unique_id.clone(), i)).collect();
    for r in &told {
        if let Some(&i) = at.get(&col::<String>(r, 0)?) {
            drop_offs[i].told.push(Told { from_ms: col(r, 1)?, to_ms: col(r, 2)?, at_ms: col(r, 3)? });
        }
    }
    let rows = c
        .query(
            "SELECT driver_id, at_ms, lat, lng FROM driver_positions
             WHERE driver_id = ANY($1) AND at_ms >= $2 AND at_ms < $3 ORDER BY driver_id, at_ms",
            &[&drivers, &positions_ms.0, &positions_ms.1],
        )
        .await
        .map_err(map_err)?;
    let positions =
        rows.iter().map(|r| position(col(r, 0)?, col(r, 1)?, col(r, 2)?, col(r, 3)?)).collect::<StoreResult<_>>()?;
    Ok(ReportFacts { plans, drop_offs, positions })
}
