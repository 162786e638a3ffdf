//! Tentative plans on `PostgreSQL` (issue 45): the orders of one depot and date, in any number
//! of processes, take their places one after another on the day's version row, which an
//! order's batch raises (an upsert: the row is held to the commit) before it places its stops.

use crate::postgres::sql::Sql;
use crate::postgres::{PgStore, map_err};
use crate::tentative::{
    Fleet, GENERATION, Row, Versions, assemble, by_day, place, routes_by_unique_id, rows_params, rows_sql, visit_from,
    visit_sql,
};
use crate::{CreateOrderError, NewOrder, Scope, StoreError, StoreResult, TentativeStore};
use async_trait::async_trait;
use dropslot_core::dispatch::tentative::{Binding, Change, Tentative, Visit};
use jiff::civil::Date;
use std::sync::{Arc, LazyLock};
use tokio_postgres::types::Type;

static ROWS: LazyLock<String> = LazyLock::new(rows_sql);
static VISIT: LazyLock<String> = LazyLock::new(visit_sql);
static HELD: LazyLock<String> = LazyLock::new(crate::tentative::held_sql);

#[async_trait]
impl TentativeStore for PgStore {
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
        let c = self.conn().await?;
        let version = version(&c, depot, date).await?;
        if let Some(kept) = fleet.at_least(&key, version) {
            return Ok(Some(kept));
        }
        let (drivers, rows) = (drivers(&c, depot).await?, rows(&c, depot, date).await?);
        let Some(a) = assemble(&fleet.rules, depot, date, &drivers, rows, &[])? else { return Ok(None) };
        let plan = Arc::new(a.plan);
        fleet.keep(key, version, plan.clone(), false);
        Ok(Some((version, plan)))
    }

    async fn improve_tentative(&self, depot: &str, date: Date, at: Versions, plan: Tentative) -> StoreResult<bool> {
        let Some(fleet) = self.outbox.fleet() else { return Ok(false) };
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await.map_err(map_err)?;
        // The day's row first (held to the commit), then the generation: the versions the plan
        // was read at, or nothing is written (the transaction is dropped, rolled back).
        let day = raise(&tx, depot, date).await?;
        if day - 1 != at.0 || generation(&tx).await? != at.1 {
            return Ok(false);
        }
        write(&tx, depot, date, &plan.places()).await?;
        // Kept in the transaction, as an order's plan is: a failed commit leaves it ahead.
        fleet.keep((depot.to_string(), date), (day, at.1), Arc::new(plan), true);
        tx.commit().await.map_err(map_err)?;
        Ok(true)
    }

    async fn held(&self, depot: &str, date: Date) -> StoreResult<Vec<(String, String, String)>> {
        let date = date.to_string();
        let params = crate::tentative::held_params(depot, &date);
        let c = self.conn().await?;
        let rows = c.query_typed(&HELD, &crate::plans::postgres::texts(&params)).await.map_err(map_err)?;
        rows.iter().map(|r| Ok((get(r, 0)?, get(r, 1)?, get(r, 2)?))).collect()
    }

    async fn recheck_tentative(&self) {
        if let Some(fleet) = self.outbox.fleet() {
            fleet.recheck();
        }
    }

    async fn tentative_routes(&self, depot: &str, date: Date) -> StoreResult<Vec<(String, Vec<String>)>> {
        let Some(fleet) = self.outbox.fleet() else { return Ok(Vec::new()) };
        let c = self.conn().await?;
        let (drivers, rows) = (drivers(&c, depot).await?, rows(&c, depot, date).await?);
        let ids: Vec<(i64, String)> = rows.iter().map(|r| (r.0, r.1.0.clone())).collect();
        let Some(a) = assemble(&fleet.rules, depot, date, &drivers, rows, &[])? else { return Ok(Vec::new()) };
        Ok(routes_by_unique_id(&a.plan, &ids))
    }
}

/// The stored version of a day and the fleet's generation (0: never written).
async fn version(c: &impl Sql, depot: &str, date: Date) -> StoreResult<Versions> {
    let row = c
        .query_typed_opt(
            "SELECT coalesce((SELECT version FROM fleet_days WHERE depot = $1 AND date = $2), 0),
                    coalesce((SELECT version FROM fleet_days WHERE depot = $3 AND date = $4), 0)",
            &[
                (&depot, Type::TEXT),
                (&date.to_string(), Type::TEXT),
                (&GENERATION.0, Type::TEXT),
                (&GENERATION.1, Type::TEXT),
            ],
        )
        .await
        .map_err(map_err)?;
    Ok(row.map_or((0, 0), |r| (r.get(0), r.get(1))))
}

async fn generation(c: &impl Sql) -> StoreResult<i64> {
    let row = c
        .query_typed_opt(
            "SELECT version FROM fleet_days WHERE depot = $1 AND date = $2",
            &[(&GENERATION.0, Type::TEXT), (&GENERATION.1, Type::TEXT)],
        )
        .await
        .map_err(map_err)?;
    Ok(row.map_or(0, |r| r.get(0)))
}

async fn drivers(c: &impl Sql, depot: &str) -> StoreResult<Vec<crate::StoredDriver>> {
    c.query_typed(
        &format!(
            "SELECT {}, created_at, updated_at FROM drivers WHERE deleted_at IS NULL AND depot = $1 ORDER BY id",
            crate::fleet::DRIVER_COLUMNS
        ),
        &[(&depot, Type::TEXT)],
    )
    .await
    .map_err(map_err)?
    .iter()
    .map(crate::fleet::postgres::stored)
    .collect()
}

async fn rows(c: &impl Sql, depot: &str, date: Date) -> StoreResult<Vec<Row>> {
    let date = date.to_string();
    let params = rows_params(depot, &date);
    let rows = c.query_typed(&ROWS, &crate::plans::postgres::texts(&params)).await.map_err(map_err)?;
    rows.iter()
        .map(|r| {
            Ok((
                get(r, 0)?,
                (get(r, 1)?, get(r, 2)?, get(r, 3)?, get(r, 4)?, get(r, 5)?, get(r, 6)?, get(r, 7)?),
                get(r, 8)?,
                get(r, 9)?,
            ))
        })
        .collect()
}

fn get<T: for<'a> tokio_postgres::types::FromSql<'a>>(r: &tokio_postgres::Row, i: usize) -> Result<T, StoreError> {
    crate::plans::postgres::get(r, i, "fleet stop")
}

/// A batch's stops on fleet depots, in its transaction, after its rows are written: day by
/// day in a fixed order, the day's version raised (its row held to the commit), its plan (kept,
/// or read anew) takes the stops, their rows are written. A stop that fits nowhere fails the
/// batch, which is written again order by order (each gets its own answer).
pub(crate) async fn reserve(
    c: &impl Sql,
    fleet: Option<&Fleet>,
    orders: &[(Scope, &NewOrder)],
    drop_off_ids: &[Vec<i64>],
) -> Result<(), CreateOrderError> {
    let placed =
        orders.iter().zip(drop_off_ids).enumerate().filter(|(_, ((s, _), _))| s.mode == crate::Mode::Live).flat_map(
            |(n, ((_, o), ids))| o.reservations.iter().filter_map(move |r| Some((r, *ids.get(r.drop_off?)?, n))),
        );
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
        let (version, mut plan, _) = lock_day(c, fleet, depot, date, &placing, false).await?;
        let changes = place(&mut plan, &visits).map_err(|(_, e)| e)?;
        write(c, depot, date, &changes).await?;
        fleet.keep(key, version, Arc::new(plan), true);
    }
    Ok(())
}

/// Raises a day's version (and holds its row to the commit); what it is now.
pub(crate) async fn raise(c: &impl Sql, depot: &str, date: Date) -> Result<i64, StoreError> {
    let row = c
        .query_typed(
            "INSERT INTO fleet_days (depot, date, version) VALUES ($1, $2, 1)
             ON CONFLICT (depot, date) DO UPDATE SET version = fleet_days.version + 1 RETURNING version",
            &[(&depot, Type::TEXT), (&date.to_string(), Type::TEXT)],
        )
        .await
        .map_err(map_err)?;
    row.first().map(|r| r.get(0)).ok_or_else(|| StoreError::Corrupt("fleet day: no version returned".into()))
}

async fn write(c: &impl Sql, depot: &str, date: Date, changes: &[Change]) -> Result<(), StoreError> {
    if changes.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = changes.iter().map(|ch| ch.id).collect();
    let drivers: Vec<&str> = changes.iter().map(|ch| ch.driver.as_str()).collect();
    let seqs: Vec<f64> = changes.iter().map(|ch| ch.seq).collect();
    c.execute_typed(
        "INSERT INTO fleet_stops (drop_off_shipment_id, depot, date, driver_id, seq)
         SELECT id, $4, $5, driver_id, seq FROM unnest($1::bigint[], $2::text[], $3::float8[]) AS u (id, driver_id, seq)
         ON CONFLICT (drop_off_shipment_id) DO UPDATE SET depot = excluded.depot, date = excluded.date,
            driver_id = excluded.driver_id, seq = excluded.seq",
        &[
            (&ids, Type::INT8_ARRAY),
            (&drivers, Type::TEXT_ARRAY),
            (&seqs, Type::FLOAT8_ARRAY),
            (&depot, Type::TEXT),
            (&date.to_string(), Type::TEXT),
        ],
    )
    .await
    .map_err(map_err)?;
    Ok(())
}

/// Drop-off `id`'s visit in the window `from..to` (Unix seconds).
pub(crate) async fn visit_of(c: &impl Sql, id: i64, from: i64, to: i64) -> Result<Visit, StoreError> {
    let r = c.query_typed_opt(&VISIT, &[(&id, Type::INT8)]).await.map_err(map_err)?;
    let r = r.ok_or_else(|| StoreError::Corrupt(format!("drop-off shipment {id} not found")))?;
    visit_from(id, (get(&r, 0)?, get(&r, 1)?, get(&r, 2)?), from, to)
}

/// Places one drop-off's stop in the plan of `depot` on `date`, in the caller's transaction
/// (the day's row held to the commit); false when it fits nowhere. As on `SQLite`.
pub(crate) async fn place_one(
    c: &impl Sql,
    fleet: &Fleet,
    depot: &str,
    date: Date,
    visit: Visit,
) -> Result<bool, StoreError> {
    leave(c, visit.id, depot, date).await?;
    let (version, mut plan, _) = lock_day(c, fleet, depot, date, &[visit.id], false).await?;
    let placed = match plan.insert(visit) {
        Ok((_, changes)) => {
            write(c, depot, date, &changes).await?;
            true
        }
        Err(_) => false,
    };
    fleet.keep((depot.to_string(), date), version, Arc::new(plan), true);
    Ok(placed)
}

/// The day drop-off `id` had a stop on, other than `depot` on `date`, is read anew everywhere.
pub(crate) async fn leave(c: &impl Sql, id: i64, depot: &str, date: Date) -> Result<(), StoreError> {
    c.execute_typed(
        "UPDATE fleet_days SET version = version + 1
         WHERE (depot, date) IN (SELECT depot, date FROM fleet_stops WHERE drop_off_shipment_id = $1)
           AND NOT (depot = $2 AND date = $3)",
        &[(&id, Type::INT8), (&depot, Type::TEXT), (&date.to_string(), Type::TEXT)],
    )
    .await
    .map_err(map_err)?;
    Ok(())
}

/// Reads the plan of fleet depot `depot` on `date` anew (the day's row held), leaving out
/// `exclude`; what fits no longer, with what bound. As on `SQLite`.
pub(crate) async fn replan(
    c: &impl Sql,
    fleet: &Fleet,
    depot: &str,
    date: Date,
    exclude: &[i64],
) -> Result<Vec<(Visit, Binding)>, StoreError> {
    let (version, plan, unplaced) = lock_day(c, fleet, depot, date, exclude, true).await?;
    fleet.keep((depot.to_string(), date), version, Arc::new(plan), true);
    Ok(unplaced)
}

/// The day's version raised (on `PostgreSQL` its row held to the commit: the orders of a depot
/// and date take their places one after another) and its plan: the kept one when nobody came
/// between (and not `anew`), else read anew leaving out `exclude` (the drop-offs the caller is
/// placing or taking out), its changed places written; with what fits it no longer.
async fn lock_day(
    c: &impl Sql,
    fleet: &Fleet,
    depot: &str,
    date: Date,
    exclude: &[i64],
    anew: bool,
) -> Result<crate::tentative::Locked, StoreError> {
    let day = raise(c, depot, date).await?;
    let version = (day, generation(c).await?);
    if !anew && let Some(kept) = fleet.take(&(depot.to_string(), date), (day - 1, version.1)) {
        return Ok((version, kept, Vec::new()));
    }
    let a = assemble(&fleet.rules, depot, date, &drivers(c, depot).await?, rows(c, depot, date).await?, exclude)?
        .ok_or_else(|| StoreError::Corrupt(format!("depot {depot} does not book on its fleet")))?;
    write(c, depot, date, &a.changes).await?;
    Ok((version, a.plan, a.unplaced))
}
