//! Day plans on `PostgreSQL` (CONTRACT §12). Several processes share the database: the
//! partial unique index `plans_one_open` lets one of two concurrent plan starts in (the other
//! inserts nothing), the version column refuses a write made on an older read, and the
//! primary key of `published_stops` keeps a shipment in at most one published route.

use crate::cache::PlanCache;
use crate::plans::{
    CandidateColumns, SaveError, board_params, candidate, candidate_params, keep_published, plan_candidates_sql,
    plan_json, plan_row,
};
use crate::postgres::sql::Sql;
use crate::postgres::{PgStore, in_tx, map_err};
use crate::{PlanStore, SaveOutcome, StoreError, StoreResult, StoredPlan};
use async_trait::async_trait;
use dropslot_core::dispatch::{Candidate, Candidate as PlanCandidate, Plan, PlanKind, PlanPhase, PlanStatus};
use jiff::civil::Date;
use std::sync::{Arc, LazyLock};
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

#[async_trait]
impl PlanStore for PgStore {
    async fn plan_candidates(
        &self,
        kind: PlanKind,
        depot: &str,
        date: Date,
        plan: Option<&str>,
    ) -> StoreResult<Vec<PlanCandidate>> {
        candidates(&self.conn().await?, kind, depot, date, plan.unwrap_or("")).await
    }

    async fn begin_plan(
        &self,
        id: &str,
        depot: &str,
        date: Date,
        kind: PlanKind,
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<bool> {
        Ok(in_tx!(self, |tx| begin(tx, id, depot, date, kind, now_ms, lease_ms).await?))
    }

    async fn abandon_plan(&self, id: &str) -> StoreResult<()> {
        abandon(&self.conn().await?, id).await
    }

    async fn finish_plan(&self, plan: &Plan) -> StoreResult<bool> {
        finish(&self.conn().await?, plan).await
    }

    async fn plan(&self, id: &str) -> StoreResult<Option<StoredPlan>> {
        plan_by_id(&self.conn().await?, id).await
    }

    async fn plans_on(&self, date: Date) -> StoreResult<Vec<StoredPlan>> {
        plans_of(&self.conn().await?, date).await
    }

    async fn board_counts(&self, depot: &str, date: Date) -> StoreResult<Vec<crate::BoardCount>> {
        let c = self.conn().await?;
        let date = date.to_string();
        let params = board_params(depot, &date);
        let rows = c.query_typed(&crate::plans::board_sql('$'), &texts(&params)).await.map_err(map_err)?;
        rows.iter().map(|r| crate::plans::board_row(r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))).collect()
    }

    async fn save_plan(&self, plan: &Plan, version: i64) -> StoreResult<SaveOutcome> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await.map_err(map_err)?;
        let saved = save(&tx, plan, version).await;
        if saved.is_ok() {
            tx.commit().await.map_err(map_err)?;
        }
        crate::plans::SaveError::outcome(saved)
    }

    async fn delete_plan(&self, id: &str, version: i64) -> StoreResult<bool> {
        delete(&self.conn().await?, id, version).await
    }

    async fn save_etas(
        &self,
        route_id: &str,
        etas: Vec<(String, crate::StoredEta)>,
        next_stops: Vec<(String, u32)>,
        now: jiff::Timestamp,
    ) -> StoreResult<usize> {
        let channels = self.outbox.channels();
        let n = in_tx!(self, |tx| {
            save_etas(tx, route_id, &etas, now.as_millisecond()).await?;
            crate::notifications::postgres::retell(tx, channels, route_id, &etas, &next_stops, now).await?
        });
        self.notified(n);
        Ok(n)
    }

    async fn route_etas(&self, route_id: &str) -> StoreResult<Vec<(String, crate::StoredEta)>> {
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT shipment_unique_id, arrival_ms, from_ms, to_ms, late, stops_before FROM stop_etas
                 WHERE route_id = $1 ORDER BY stops_before, shipment_unique_id",
                &[&route_id],
            )
            .await
            .map_err(map_err)?;
        rows.iter()
            .map(|r| {
                let late: i32 = crate::postgres::column(r, 4)?;
                let before: i32 = crate::postgres::column(r, 5)?;
                Ok((
                    crate::postgres::column(r, 0)?,
                    crate::StoredEta {
                        arrival_ms: crate::postgres::column(r, 1)?,
                        from_ms: crate::postgres::column(r, 2)?,
                        to_ms: crate::postgres::column(r, 3)?,
                        late: late != 0,
                        stops_before: u32::try_from(before).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    },
                ))
            })
            .collect()
    }
}

/// Parameters that are all text, typed: a name in a select list has no type to infer.
pub(crate) fn texts<'a>(values: &'a [&'a str]) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    values.iter().map(|v| (v as &(dyn ToSql + Sync), Type::TEXT)).collect()
}

pub(crate) fn get<T: for<'a> tokio_postgres::types::FromSql<'a>>(
    r: &Row,
    i: usize,
    what: &str,
) -> Result<T, StoreError> {
    r.try_get(i).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

pub(crate) async fn candidates(
    c: &impl Sql,
    kind: PlanKind,
    depot: &str,
    date: Date,
    plan: &str,
) -> StoreResult<Vec<Candidate>> {
    let date = date.to_string();
    let params = candidate_params(kind, depot, &date, plan);
    let rows = c.query_typed(&plan_candidates_sql(kind), &texts(&params)).await.map_err(map_err)?;
    rows.iter()
        .map(|r| {
            let columns: CandidateColumns = (
                get(r, 0, "shipment")?,
                get(r, 1, "shipment")?,
                get(r, 2, "shipment")?,
                get(r, 3, "shipment")?,
                get(r, 4, "shipment")?,
                get(r, 5, "shipment")?,
                get(r, 6, "shipment")?,
            );
            candidate(columns)
        })
        .collect()
}

pub(crate) async fn begin(
    c: &impl Sql,
    id: &str,
    depot: &str,
    date: Date,
    kind: PlanKind,
    now_ms: i64,
    lease_ms: i64,
) -> StoreResult<bool> {
    // Spelled, built once from the core's name: the open-plan index (partial on `status IN
    // ('solving', 'draft')`) finds the row only when the state proves that condition, and the
    // service's generic plans (`plan_cache_mode`) cannot prove it from a bound one.
    static STALE: LazyLock<String> = LazyLock::new(|| {
        format!(
            "DELETE FROM plans WHERE depot = $1 AND date = $2 AND kind = $3 AND status = '{}' AND started_ms < $4",
            PlanPhase::Solving.as_str()
        )
    });
    let date = date.to_string();
    c.execute(&STALE, &[&depot, &date, &kind.as_str(), &(now_ms - lease_ms)]).await.map_err(map_err)?;
    let inserted = c
        .execute(
            "INSERT INTO plans (id, depot, date, kind, status, version, started_ms) VALUES ($1, $2, $3, $4, $6, 0, $5)
             ON CONFLICT DO NOTHING",
            &[&id, &depot, &date, &kind.as_str(), &now_ms, &PlanPhase::Solving.as_str()],
        )
        .await
        .map_err(map_err)?;
    Ok(inserted == 1)
}

pub(crate) async fn abandon(c: &impl Sql, id: &str) -> StoreResult<()> {
    c.execute("DELETE FROM plans WHERE id = $1 AND status = $2", &[&id, &PlanPhase::Solving.as_str()])
        .await
        .map_err(map_err)?;
    Ok(())
}

pub(crate) async fn finish(c: &impl Sql, plan: &Plan) -> StoreResult<bool> {
    let (json, status) = plan_json(plan)?;
    let n = c
        .execute(
            "UPDATE plans SET status = $2, plan_json = $3, version = 1 WHERE id = $1 AND status = $4",
            &[&plan.id, &status, &json, &PlanPhase::Solving.as_str()],
        )
        .await
        .map_err(map_err)?;
    Ok(n == 1)
}

fn parsed(r: &Row) -> Result<Option<StoredPlan>, StoreError> {
    let (id, status, version, json): (String, String, i64, Option<String>) =
        (get(r, 0, "plan")?, get(r, 1, "plan")?, get(r, 2, "plan")?, get(r, 3, "plan")?);
    plan_row(&id, &status, version, json.as_deref())
}

/// Plan `id`'s row as `parsed` reads it.
async fn plan_row_by_id(c: &impl Sql, id: &str) -> StoreResult<Option<Row>> {
    c.query_opt("SELECT id, status, version, plan_json FROM plans WHERE id = $1", &[&id]).await.map_err(map_err)
}

pub(crate) async fn plan_by_id(c: &impl Sql, id: &str) -> StoreResult<Option<StoredPlan>> {
    match plan_row_by_id(c, id).await? {
        Some(r) => parsed(&r),
        None => Ok(None),
    }
}

pub(crate) async fn plans_of(c: &impl Sql, date: Date) -> StoreResult<Vec<StoredPlan>> {
    let rows = c
        .query(
            "SELECT id, status, version, plan_json FROM plans WHERE date = $1 AND status <> $2 ORDER BY depot, kind, id",
            &[&date.to_string(), &PlanPhase::Solving.as_str()],
        )
        .await
        .map_err(map_err)?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        out.extend(parsed(r)?);
    }
    Ok(out)
}

/// The write of a plan over `version` inside `tx`, its published rows rewritten when it is
/// published; the caller commits only on `Ok`.
pub(crate) async fn save(tx: &impl Sql, plan: &Plan, version: i64) -> Result<i64, SaveError> {
    let (json, status) = plan_json(plan)?;
    let n = tx
        .execute(
            "UPDATE plans SET status = $2, plan_json = $3, version = version + 1
             WHERE id = $1 AND version = $4 AND status IN ($5, $6)",
            &[&plan.id, &status, &json, &version, &PlanStatus::Draft.as_str(), &PlanStatus::Published.as_str()],
        )
        .await
        .map_err(map_err)?;
    if n != 1 {
        return Err(SaveError::Stale);
    }
    tx.execute("DELETE FROM published_stops WHERE plan_id = $1", &[&plan.id]).await.map_err(map_err)?;
    tx.execute("DELETE FROM published_routes WHERE plan_id = $1", &[&plan.id]).await.map_err(map_err)?;
    if plan.status == PlanStatus::Published {
        // Two statements whatever the plan's size (a plan of 320 drivers wrote 336 before:
        // a late stop's save on PostgreSQL, issue 46).
        let (ids, drivers): (Vec<&str>, Vec<&str>) =
            plan.routes.iter().map(|r| (r.id.as_str(), r.driver_id.as_str())).unzip();
        tx.execute(
            "INSERT INTO published_routes (id, plan_id, driver_id, date)
             SELECT r, $3, d, $4 FROM unnest($1::TEXT[], $2::TEXT[]) AS x(r, d)",
            &[&ids, &drivers, &plan.id, &plan.date],
        )
        .await
        .map_err(map_err)?;
        let (shipments, routes): (Vec<&str>, Vec<&str>) =
            plan.routes.iter().flat_map(|r| r.shipments().map(move |s| (s, r.id.as_str()))).unzip();
        if !shipments.is_empty() {
            let inserted = tx
                .query(
                    "INSERT INTO published_stops (shipment_unique_id, route_id, plan_id)
                     SELECT s, r, $3 FROM unnest($1::TEXT[], $2::TEXT[]) AS x(s, r)
                     ON CONFLICT DO NOTHING RETURNING shipment_unique_id",
                    &[&shipments, &routes, &plan.id],
                )
                .await
                .map_err(map_err)?;
            if inserted.len() != shipments.len() {
                let written: std::collections::HashSet<String> =
                    inserted.iter().filter_map(|r| r.try_get(0).ok()).collect();
                let taken = shipments.iter().find(|s| !written.contains(**s)).copied().unwrap_or_default();
                return Err(SaveError::Taken(taken.to_string()));
            }
        }
    }
    Ok(version + 1)
}

pub(crate) async fn delete(c: &impl Sql, id: &str, version: i64) -> StoreResult<bool> {
    let n = c
        .execute(
            "DELETE FROM plans WHERE id = $1 AND version = $2 AND status = $3",
            &[&id, &version, &PlanStatus::Draft.as_str()],
        )
        .await
        .map_err(map_err)?;
    Ok(n == 1)
}

/// The published plans of `date` in which `driver_id` has a route: their versions listed,
/// each taken from `cache` at that version or read and parsed (off the async workers).
pub(crate) async fn plans_of_driver(
    c: &impl Sql,
    driver_id: &str,
    date: Date,
    cache: &PlanCache,
) -> StoreResult<Vec<Arc<StoredPlan>>> {
    let rows = c
        .query(
            "SELECT p.id, p.version FROM published_routes r JOIN plans p ON p.id = r.plan_id
             WHERE r.driver_id = $1 AND r.date = $2 AND p.status = $3 ORDER BY p.id",
            &[&driver_id, &date.to_string(), &PlanStatus::Published.as_str()],
        )
        .await
        .map_err(map_err)?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let (id, version): (String, i64) = (get(r, 0, "plan")?, get(r, 1, "plan")?);
        if let Some(plan) = cache.get(&id, version) {
            out.push(plan);
            continue;
        }
        let loaded = match plan_row_by_id(c, &id).await? {
            Some(row) => tokio::task::spawn_blocking(move || parsed(&row))
                .await
                .map_err(|e| StoreError::Corrupt(format!("a plan's parse failed: {e}")))??,
            None => None,
        };
        out.extend(keep_published(cache, loaded));
    }
    Ok(out)
}

/// Replaces a route's live ETAs, in the caller's transaction: one statement for the rows. A
/// shipment no longer on a published stop of the route (rebooked after its re-timing was
/// computed: a re-attempt, a reschedule) gets none.
pub(crate) async fn save_etas(
    c: &impl Sql,
    route_id: &str,
    etas: &[(String, crate::StoredEta)],
    now_ms: i64,
) -> StoreResult<()> {
    let ids: Vec<&str> = etas.iter().map(|(u, _)| u.as_str()).collect();
    let arrival: Vec<i64> = etas.iter().map(|(_, e)| e.arrival_ms).collect();
    let from: Vec<i64> = etas.iter().map(|(_, e)| e.from_ms).collect();
    let to: Vec<i64> = etas.iter().map(|(_, e)| e.to_ms).collect();
    // The history first (CONTRACT §17): a window is appended only when it differs from the
    // shipment's last one (the caller's transaction holds the route's re-timing together).
    c.execute(
        "INSERT INTO eta_windows (shipment_unique_id, from_ms, to_ms, at_ms)
         SELECT u, f, t, $5
         FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS x (u, f, t)
         WHERE EXISTS (SELECT 1 FROM published_stops s WHERE s.shipment_unique_id = x.u AND s.route_id = $4)
           AND NOT EXISTS (SELECT 1 FROM (SELECT w.from_ms, w.to_ms FROM eta_windows w
                WHERE w.shipment_unique_id = x.u ORDER BY w.id DESC LIMIT 1) l WHERE l.from_ms = x.f AND l.to_ms = x.t)",
        &[&ids, &from, &to, &route_id, &now_ms],
    )
    .await
    .map_err(map_err)?;
    c.execute("DELETE FROM stop_etas WHERE route_id = $1", &[&route_id]).await.map_err(map_err)?;
    let late: Vec<i32> = etas.iter().map(|(_, e)| i32::from(e.late)).collect();
    let before: Vec<i32> = etas.iter().map(|(_, e)| i32::try_from(e.stops_before).unwrap_or(i32::MAX)).collect();
    c.execute(
        "INSERT INTO stop_etas (shipment_unique_id, route_id, arrival_ms, from_ms, to_ms, late, stops_before, updated_ms)
         SELECT u, $2, a, f, t, l, b, $8
         FROM unnest($1::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::int[], $7::int[]) AS x (u, a, f, t, l, b)
         WHERE EXISTS (SELECT 1 FROM published_stops s WHERE s.shipment_unique_id = x.u AND s.route_id = $2)
         ON CONFLICT (shipment_unique_id) DO UPDATE SET route_id = excluded.route_id, arrival_ms = excluded.arrival_ms,
            from_ms = excluded.from_ms, to_ms = excluded.to_ms, late = excluded.late,
            stops_before = excluded.stops_before, updated_ms = excluded.updated_ms",
        &[&ids, &route_id, &arrival, &from, &to, &late, &before, &now_ms],
    )
    .await
    .map_err(map_err)?;
    Ok(())
}
