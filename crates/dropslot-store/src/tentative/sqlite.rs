//! Tentative plans on `SQLite` (issue 45): the one writer thread orders every order's
//! transaction, so the version row needs no lock; it still tells a kept plan from one that a
//! rolled-back order left ahead of the database.

use crate::plans::sqlite_placeholders;
use crate::sqlite::{SqliteStore, map_err};
use crate::tentative::{
    Fleet, GENERATION, Row, Versions, assemble, by_day, place, routes_by_unique_id, rows_params, rows_sql, visit_from,
    visit_sql,
};
use crate::{CreateOrderError, StoreError, StoreResult, TentativeStore};
use async_trait::async_trait;
use dropslot_core::dispatch::tentative::{Change, Tentative, Visit};
use dropslot_core::quote::capacity::Reservation;
use jiff::civil::Date;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use std::sync::{Arc, LazyLock};

static ROWS: LazyLock<String> = LazyLock::new(|| sqlite_placeholders(&rows_sql()));
static HELD: LazyLock<String> = LazyLock::new(|| sqlite_placeholders(&crate::tentative::held_sql()));
static VISIT: LazyLock<String> = LazyLock::new(|| sqlite_placeholders(&visit_sql()));

#[async_trait]
impl TentativeStore for SqliteStore {
    async fn tentative_plan(&self, depot: &str, date: Date) -> StoreResult<Option<Arc<Tentative>>> {
        Ok(self.tentative_versioned(depot, date).await?.map(|(_, plan)| plan))
    }

    async fn tentative_versioned(&self, depot: &str, date: Date) -> StoreResult<Option<(Versions, Arc<Tentative>)>> {
        let Some(fleet) = self.outbox.fleet() else { return Ok(None) };
        if fleet.rules.fleet_depot(depot).is_none() {
            return Ok(None);
        }
        let key = (depot.to_string(), date);
        if let Some(kept) = fleet.fresh(&key) {
            return Ok(Some(kept));
        }
        let depot_ = depot.to_string();
        let version = self.read(|c| version(c, &depot_, date))?;
        if let Some(kept) = fleet.at_least(&key, version) {
            return Ok(Some(kept));
        }
        let depot_ = depot.to_string();
        let (drivers, rows) = self.read_blocking(move |c| Ok((drivers(c, &depot_), rows(c, &depot_, date)))).await?;
        let Some(a) = assemble(&fleet.rules, depot, date, &drivers?, rows?, &[])? else { return Ok(None) };
        let plan = Arc::new(a.plan);
        fleet.keep(key, version, plan.clone(), false);
        Ok(Some((version, plan)))
    }

    async fn improve_tentative(&self, depot: &str, date: Date, at: Versions, plan: Tentative) -> StoreResult<bool> {
        if self.outbox.fleet().is_none() {
            return Ok(false);
        }
        let (depot, outbox) = (depot.to_string(), self.outbox.clone());
        self.writer
            .write(move |c| {
                let Some(fleet) = outbox.fleet() else { return Ok::<_, StoreError>(false) };
                if version(c, &depot, date).map_err(map_err)? != at {
                    return Ok(false);
                }
                let day = raise(c, &depot, date)?;
                write(c, &depot, date, &plan.places())?;
                // Kept in the transaction, as an order's plan is: a rollback leaves it ahead.
                fleet.keep((depot, date), (day, at.1), Arc::new(plan), true);
                Ok(true)
            })
            .await
    }

    async fn held(&self, depot: &str, date: Date) -> StoreResult<Vec<(String, String, String)>> {
        let (depot, date) = (depot.to_string(), date.to_string());
        self.read_blocking(move |c| {
            c.prepare_cached(&HELD)?
                .query_map(params_from_iter(crate::tentative::held_params(&depot, &date)), |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?
                .collect()
        })
        .await
    }

    async fn recheck_tentative(&self) {
        if let Some(fleet) = self.outbox.fleet() {
            fleet.recheck();
        }
    }

    async fn tentative_routes(&self, depot: &str, date: Date) -> StoreResult<Vec<(String, Vec<String>)>> {
        let Some(fleet) = self.outbox.fleet() else { return Ok(Vec::new()) };
        let depot_ = depot.to_string();
        let (drivers, rows) = self.read_blocking(move |c| Ok((drivers(c, &depot_), rows(c, &depot_, date)))).await?;
        let rows = rows?;
        let ids: Vec<(i64, String)> = rows.iter().map(|r| (r.0, r.1.0.clone())).collect();
        let Some(a) = assemble(&fleet.rules, depot, date, &drivers?, rows, &[])? else { return Ok(Vec::new()) };
        Ok(routes_by_unique_id(&a.plan, &ids))
    }
}

/// The stored version of a day and the fleet's generation (0: never written).
fn version(c: &Connection, depot: &str, date: Date) -> rusqlite::Result<Versions> {
    c.prepare_cached(
        "SELECT coalesce((SELECT version FROM fleet_days WHERE depot = ?1 AND date = ?2), 0),
                coalesce((SELECT version FROM fleet_days WHERE depot = ?3 AND date = ?4), 0)",
    )?
    .query_row(params![depot, date.to_string(), GENERATION.0, GENERATION.1], |r| Ok((r.get(0)?, r.get(1)?)))
}

fn generation(c: &Connection) -> Result<i64, StoreError> {
    c.prepare_cached("SELECT version FROM fleet_days WHERE depot = ?1 AND date = ?2")
        .and_then(|mut s| s.query_row(params![GENERATION.0, GENERATION.1], |r| r.get(0)).optional())
        .map(|v| v.unwrap_or(0))
        .map_err(map_err)
}

fn drivers(c: &Connection, depot: &str) -> StoreResult<Vec<crate::StoredDriver>> {
    crate::fleet::sqlite::drivers_columns(c, Some(depot))
        .map_err(map_err)?
        .into_iter()
        .map(crate::fleet::driver_row)
        .collect()
}

fn rows(c: &Connection, depot: &str, date: Date) -> StoreResult<Vec<Row>> {
    let date = date.to_string();
    c.prepare_cached(&ROWS)
        .and_then(|mut s| {
            s.query_map(params_from_iter(rows_params(depot, &date)), |r| {
                Ok((
                    r.get(0)?,
                    (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?),
                    r.get(8)?,
                    r.get(9)?,
                ))
            })?
            .collect()
        })
        .map_err(map_err)
}

/// An order's stops on its fleet depots, in the writer's transaction: each day's version
/// raised, its plan (kept, or read anew) takes the stops, their rows are written. A stop that
/// fits nowhere refuses the order (the job's savepoint rolls everything back).
pub(crate) fn reserve(
    c: &Connection,
    fleet: Option<&Fleet>,
    reservations: &[Reservation],
    drop_off_ids: &[i64],
) -> Result<(), CreateOrderError> {
    let placed = reservations.iter().filter_map(|r| {
        let id = drop_off_ids.get(r.drop_off?)?;
        Some((r, *id, 0))
    });
    let days = by_day(placed);
    if days.is_empty() {
        return Ok(());
    }
    let Some(fleet) = fleet else {
        return Err(StoreError::Corrupt("a fleet reservation without the fleet's rules".into()).into());
    };
    for (key, visits) in days {
        let (depot, date) = (&key.0, key.1);
        let placing: Vec<i64> = visits.iter().map(|(v, _, _)| v.id).collect();
        let (version, mut plan, _) = lock_day(c, fleet, depot, date, &placing, false)?;
        let changes = place(&mut plan, &visits).map_err(|(_, e)| e)?;
        write(c, depot, date, &changes)?;
        fleet.keep(key, version, Arc::new(plan), true);
    }
    Ok(())
}

/// Raises a day's version; what it is now.
pub(crate) fn raise(c: &Connection, depot: &str, date: Date) -> Result<i64, StoreError> {
    c.prepare_cached(
        "INSERT INTO fleet_days (depot, date, version) VALUES (?1, ?2, 1)
         ON CONFLICT (depot, date) DO UPDATE SET version = version + 1 RETURNING version",
    )
    .and_then(|mut s| s.query_row(params![depot, date.to_string()], |r| r.get(0)))
    .map_err(map_err)
}

fn write(c: &Connection, depot: &str, date: Date, changes: &[Change]) -> Result<(), StoreError> {
    let mut s = c
        .prepare_cached(
            "INSERT INTO fleet_stops (drop_off_shipment_id, depot, date, driver_id, seq) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (drop_off_shipment_id) DO UPDATE SET depot = excluded.depot, date = excluded.date,
                driver_id = excluded.driver_id, seq = excluded.seq",
        )
        .map_err(map_err)?;
    let date = date.to_string();
    for ch in changes {
        s.execute(params![ch.id, depot, date, ch.driver, ch.seq]).map_err(map_err)?;
    }
    Ok(())
}

/// Drop-off `id`'s visit in the window `from..to` (Unix seconds).
pub(crate) fn visit_of(c: &Connection, id: i64, from: i64, to: i64) -> Result<Visit, StoreError> {
    let columns = c
        .prepare_cached(&VISIT)
        .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))))
        .map_err(map_err)?;
    visit_from(id, columns, from, to)
}

/// Places one drop-off's stop (a shipment moved to `date`, or rebooked) in the plan of `depot`
/// on `date`, in the caller's transaction: the day's version raised, the plan (kept, or read
/// anew) takes it, its row is written, and the day it leaves is read anew everywhere. False
/// when it fits nowhere: nothing is written but the versions.
pub(crate) fn place_one(
    c: &Connection,
    fleet: &Fleet,
    depot: &str,
    date: Date,
    visit: Visit,
) -> Result<bool, StoreError> {
    leave(c, visit.id, depot, date)?;
    let (version, mut plan, _) = lock_day(c, fleet, depot, date, &[visit.id], false)?;
    let placed = match plan.insert(visit) {
        Ok((_, changes)) => {
            write(c, depot, date, &changes)?;
            true
        }
        Err(_) => false,
    };
    fleet.keep((depot.to_string(), date), version, Arc::new(plan), true);
    Ok(placed)
}

/// The day drop-off `id` had a stop on, other than `depot` on `date`, is read anew by every
/// process (the stop leaves it).
pub(crate) fn leave(c: &Connection, id: i64, depot: &str, date: Date) -> Result<(), StoreError> {
    c.prepare_cached(
        "UPDATE fleet_days SET version = version + 1
         WHERE (depot, date) IN (SELECT depot, date FROM fleet_stops WHERE drop_off_shipment_id = ?1)
           AND NOT (depot = ?2 AND date = ?3)",
    )
    .and_then(|mut s| s.execute(params![id, depot, date.to_string()]))
    .map_err(map_err)?;
    Ok(())
}

/// Reads the plan of fleet depot `depot` on `date` anew with the fleet as it is now, leaving
/// out `exclude` (drop-offs to take out of it), in the caller's transaction: the day's version
/// raised, the changed places written, the plan kept. What fits no longer, with what bound.
pub(crate) fn replan(
    c: &Connection,
    fleet: &Fleet,
    depot: &str,
    date: Date,
    exclude: &[i64],
) -> Result<Vec<(Visit, dropslot_core::dispatch::tentative::Binding)>, StoreError> {
    let (version, plan, unplaced) = lock_day(c, fleet, depot, date, exclude, true)?;
    fleet.keep((depot.to_string(), date), version, Arc::new(plan), true);
    Ok(unplaced)
}

/// The day's version raised (on `PostgreSQL` its row held to the commit: the orders of a depot
/// and date take their places one after another) and its plan: the kept one when nobody came
/// between (and not `anew`), else read anew leaving out `exclude` (the drop-offs the caller is
/// placing or taking out), its changed places written; with what fits it no longer.
fn lock_day(
    c: &Connection,
    fleet: &Fleet,
    depot: &str,
    date: Date,
    exclude: &[i64],
    anew: bool,
) -> Result<crate::tentative::Locked, StoreError> {
    let day = raise(c, depot, date)?;
    let version = (day, generation(c)?);
    if !anew && let Some(kept) = fleet.take(&(depot.to_string(), date), (day - 1, version.1)) {
        return Ok((version, kept, Vec::new()));
    }
    let a = assemble(&fleet.rules, depot, date, &drivers(c, depot)?, rows(c, depot, date)?, exclude)?
        .ok_or_else(|| StoreError::Corrupt(format!("depot {depot} does not book on its fleet")))?;
    write(c, depot, date, &a.changes)?;
    Ok((version, a.plan, a.unplaced))
}
