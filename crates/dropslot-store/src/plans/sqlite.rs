//! Day plans on `SQLite` (CONTRACT §12). Writes go through the one writer thread, so two
//! writes never interleave; the partial unique index `plans_one_open` and the primary key of
//! `published_stops` still decide, so that two processes on one file agree too.

use crate::cache::PlanCache;
use crate::plans::{
    CandidateColumns, SaveError, board_params, candidate, candidate_params, keep_published, plan_candidates_sql,
    plan_json, plan_row, sqlite_placeholders,
};
use crate::sqlite::{SqliteStore, map_err};
use crate::{PlanStore, SaveOutcome, StoreError, StoreResult, StoredPlan};
use async_trait::async_trait;
use dropslot_core::dispatch::{Candidate, Candidate as PlanCandidate, Plan, PlanKind, PlanPhase, PlanStatus};
use jiff::civil::Date;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use std::sync::{Arc, LazyLock};

#[async_trait]
impl PlanStore for SqliteStore {
    async fn plan_candidates(
        &self,
        kind: PlanKind,
        depot: &str,
        date: Date,
        plan: Option<&str>,
    ) -> StoreResult<Vec<PlanCandidate>> {
        let (depot, plan) = (depot.to_string(), plan.unwrap_or("").to_string());
        candidates(self.read_blocking(move |c| candidate_rows(c, kind, &depot, date, &plan)).await?)
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
        let (id, depot) = (id.to_string(), depot.to_string());
        self.writer.write(move |c| begin(c, &id, &depot, date, kind, now_ms, lease_ms)).await
    }

    async fn abandon_plan(&self, id: &str) -> StoreResult<()> {
        let id = id.to_string();
        self.writer.write(move |c| abandon(c, &id)).await
    }

    async fn finish_plan(&self, plan: &Plan) -> StoreResult<bool> {
        let plan = plan.clone();
        self.writer.write(move |c| finish(c, &plan)).await
    }

    async fn plan(&self, id: &str) -> StoreResult<Option<StoredPlan>> {
        let id = id.to_string();
        match self.read_blocking(move |c| plan_by_id(c, &id)).await? {
            Some(row) => parsed(&row),
            None => Ok(None),
        }
    }

    async fn plans_on(&self, date: Date) -> StoreResult<Vec<StoredPlan>> {
        let rows = self.read_blocking(move |c| plans_of(c, date)).await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            out.extend(parsed(&row)?);
        }
        Ok(out)
    }

    async fn board_counts(&self, depot: &str, date: Date) -> StoreResult<Vec<crate::BoardCount>> {
        let depot = depot.to_string();
        let rows = self.read_blocking(move |c| board_rows(c, &depot, date)).await?;
        rows.into_iter().map(|(k, z, s, n, p)| crate::plans::board_row(&k, z, s, n, p)).collect()
    }

    async fn save_plan(&self, plan: &Plan, version: i64) -> StoreResult<SaveOutcome> {
        let plan = plan.clone();
        crate::plans::SaveError::outcome(self.writer.write(move |c| save(c, &plan, version)).await)
    }

    async fn delete_plan(&self, id: &str, version: i64) -> StoreResult<bool> {
        let id = id.to_string();
        self.writer.write(move |c| delete(c, &id, version)).await
    }

    async fn save_etas(
        &self,
        route_id: &str,
        etas: Vec<(String, crate::StoredEta)>,
        next_stops: Vec<(String, u32)>,
        now: jiff::Timestamp,
    ) -> StoreResult<usize> {
        let route_id = route_id.to_string();
        let channels = self.outbox.channels();
        let n = self
            .writer
            .write(move |c| {
                save_etas(c, &route_id, &etas, now.as_millisecond())?;
                crate::notifications::sqlite::retell(c, channels, &route_id, &etas, &next_stops, now)
            })
            .await?;
        if n > 0 {
            self.outbox.notified(n);
        }
        Ok(n)
    }

    async fn route_etas(&self, route_id: &str) -> StoreResult<Vec<(String, crate::StoredEta)>> {
        self.read(|c| {
            c.prepare_cached(
                "SELECT shipment_unique_id, arrival_ms, from_ms, to_ms, late, stops_before FROM stop_etas
                 WHERE route_id = ?1 ORDER BY stops_before, shipment_unique_id",
            )?
            .query_map([route_id], |r| {
                Ok((
                    r.get(0)?,
                    crate::StoredEta {
                        arrival_ms: r.get(1)?,
                        from_ms: r.get(2)?,
                        to_ms: r.get(3)?,
                        late: r.get(4)?,
                        stops_before: r.get(5)?,
                    },
                ))
            })?
            .collect()
        })
    }
}

pub(crate) fn candidate_rows(
    c: &Connection,
    kind: PlanKind,
    depot: &str,
    date: Date,
    plan: &str,
) -> rusqlite::Result<Vec<CandidateColumns>> {
    let date = date.to_string();
    c.prepare_cached(&sqlite_placeholders(&plan_candidates_sql(kind)))?
        .query_map(params_from_iter(candidate_params(kind, depot, &date, plan)), |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?))
        })?
        .collect()
}

/// One board row: kind, zone, slot, shipments, of which in published routes.
pub(crate) type BoardColumns = (String, String, String, i64, i64);

pub(crate) fn board_rows(c: &Connection, depot: &str, date: Date) -> rusqlite::Result<Vec<BoardColumns>> {
    let date = date.to_string();
    c.prepare_cached(&crate::plans::board_sql('?'))?
        .query_map(params_from_iter(board_params(depot, &date)), |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?
        .collect()
}

pub(crate) fn candidates(rows: Vec<CandidateColumns>) -> Result<Vec<Candidate>, StoreError> {
    rows.into_iter().map(candidate).collect()
}

pub(crate) fn begin(
    c: &Connection,
    id: &str,
    depot: &str,
    date: Date,
    kind: PlanKind,
    now_ms: i64,
    lease_ms: i64,
) -> Result<bool, StoreError> {
    // Spelled, built once from the core's name, as on `PostgreSQL`, where it lets the open-plan
    // index (partial on `status IN ('solving', 'draft')`) find the row. `SQLite` does not infer
    // that condition from `=` and reads `plans_by_date` either way.
    static STALE: LazyLock<String> = LazyLock::new(|| {
        format!(
            "DELETE FROM plans WHERE depot = ?1 AND date = ?2 AND kind = ?3 AND status = '{}' AND started_ms < ?4",
            PlanPhase::Solving.as_str()
        )
    });
    let date = date.to_string();
    c.prepare_cached(&STALE)
        .and_then(|mut s| s.execute(params![depot, date, kind.as_str(), now_ms - lease_ms]))
        .map_err(map_err)?;
    let inserted = c
        .prepare_cached(
            "INSERT INTO plans (id, depot, date, kind, status, version, started_ms) VALUES (?1, ?2, ?3, ?4, ?6, 0, ?5)
             ON CONFLICT DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![id, depot, date, kind.as_str(), now_ms, PlanPhase::Solving.as_str()]))
        .map_err(map_err)?;
    Ok(inserted == 1)
}

pub(crate) fn abandon(c: &Connection, id: &str) -> Result<(), StoreError> {
    c.prepare_cached("DELETE FROM plans WHERE id = ?1 AND status = ?2")
        .and_then(|mut s| s.execute(params![id, PlanPhase::Solving.as_str()]))
        .map_err(map_err)?;
    Ok(())
}

pub(crate) fn finish(c: &Connection, plan: &Plan) -> Result<bool, StoreError> {
    let (json, status) = plan_json(plan)?;
    let n = c
        .prepare_cached("UPDATE plans SET status = ?2, plan_json = ?3, version = 1 WHERE id = ?1 AND status = ?4")
        .and_then(|mut s| s.execute(params![plan.id, status, json, PlanPhase::Solving.as_str()]))
        .map_err(map_err)?;
    Ok(n == 1)
}

type PlanColumns = (String, String, i64, Option<String>);

fn plan_columns(r: &rusqlite::Row<'_>) -> rusqlite::Result<PlanColumns> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
}

pub(crate) fn plan_by_id(c: &Connection, id: &str) -> rusqlite::Result<Option<PlanColumns>> {
    c.prepare_cached("SELECT id, status, version, plan_json FROM plans WHERE id = ?1")?
        .query_row(params![id], plan_columns)
        .optional()
}

pub(crate) fn plans_of(c: &Connection, date: Date) -> rusqlite::Result<Vec<PlanColumns>> {
    c.prepare_cached(
        "SELECT id, status, version, plan_json FROM plans WHERE date = ?1 AND status <> ?2 ORDER BY depot, kind, id",
    )?
    .query_map(params![date.to_string(), PlanPhase::Solving.as_str()], plan_columns)?
    .collect()
}

pub(crate) fn parsed(row: &PlanColumns) -> Result<Option<StoredPlan>, StoreError> {
    plan_row(&row.0, &row.1, row.2, row.3.as_deref())
}

/// The write of a plan over `version`, its published rows rewritten when it is published;
/// any refusal rolls back the writer's job.
pub(crate) fn save(c: &Connection, plan: &Plan, version: i64) -> Result<i64, SaveError> {
    let (json, status) = plan_json(plan)?;
    let n = c
        .prepare_cached(
            "UPDATE plans SET status = ?2, plan_json = ?3, version = version + 1
             WHERE id = ?1 AND version = ?4 AND status IN (?5, ?6)",
        )
        .and_then(|mut s| {
            let (draft, published) = (PlanStatus::Draft.as_str(), PlanStatus::Published.as_str());
            s.execute(params![plan.id, status, json, version, draft, published])
        })
        .map_err(map_err)?;
    if n != 1 {
        return Err(SaveError::Stale);
    }
    c.prepare_cached("DELETE FROM published_stops WHERE plan_id = ?1")
        .and_then(|mut s| s.execute(params![plan.id]))
        .map_err(map_err)?;
    c.prepare_cached("DELETE FROM published_routes WHERE plan_id = ?1")
        .and_then(|mut s| s.execute(params![plan.id]))
        .map_err(map_err)?;
    if plan.status == PlanStatus::Published {
        let mut route_row = c
            .prepare_cached("INSERT INTO published_routes (id, plan_id, driver_id, date) VALUES (?1, ?2, ?3, ?4)")
            .map_err(map_err)?;
        let mut stop_row = c
            .prepare_cached(
                "INSERT INTO published_stops (shipment_unique_id, route_id, plan_id) VALUES (?1, ?2, ?3)
                 ON CONFLICT DO NOTHING",
            )
            .map_err(map_err)?;
        for route in &plan.routes {
            route_row.execute(params![route.id, plan.id, route.driver_id, plan.date]).map_err(map_err)?;
            for shipment in route.shipments() {
                if stop_row.execute(params![shipment, route.id, plan.id]).map_err(map_err)? == 0 {
                    return Err(SaveError::Taken(shipment.to_string()));
                }
            }
        }
    }
    Ok(version + 1)
}

pub(crate) fn delete(c: &Connection, id: &str, version: i64) -> Result<bool, StoreError> {
    let n = c
        .prepare_cached("DELETE FROM plans WHERE id = ?1 AND version = ?2 AND status = ?3")
        .and_then(|mut s| s.execute(params![id, version, PlanStatus::Draft.as_str()]))
        .map_err(map_err)?;
    Ok(n == 1)
}

/// The published plans of `date` in which `driver_id` has a route: their versions listed,
/// each taken from `cache` at that version or read and parsed here, on the reader's thread.
pub(crate) fn plans_of_driver(
    c: &Connection,
    driver_id: &str,
    date: Date,
    cache: &PlanCache,
) -> rusqlite::Result<Result<Vec<Arc<StoredPlan>>, StoreError>> {
    let listed: Vec<(String, i64)> = c
        .prepare_cached(
            "SELECT p.id, p.version FROM published_routes r JOIN plans p ON p.id = r.plan_id
             WHERE r.driver_id = ?1 AND r.date = ?2 AND p.status = ?3 ORDER BY p.id",
        )?
        .query_map(params![driver_id, date.to_string(), PlanStatus::Published.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut out = Vec::with_capacity(listed.len());
    for (id, version) in listed {
        if let Some(plan) = cache.get(&id, version) {
            out.push(plan);
            continue;
        }
        let loaded = match plan_by_id(c, &id)? {
            Some(row) => match parsed(&row) {
                Ok(plan) => plan,
                Err(e) => return Ok(Err(e)),
            },
            None => None,
        };
        out.extend(keep_published(cache, loaded));
    }
    Ok(Ok(out))
}

/// Replaces a route's live ETAs (the writer's transaction holds them together). A shipment no
/// longer on a published stop of the route (rebooked after its re-timing was computed: a
/// re-attempt, a reschedule) gets none.
pub(crate) fn save_etas(
    c: &Connection,
    route_id: &str,
    etas: &[(String, crate::StoredEta)],
    now_ms: i64,
) -> Result<(), StoreError> {
    // The history first, while `stop_etas` still holds what was told (CONTRACT §17): a window
    // is appended only when it differs from the shipment's last one.
    let mut told = c
        .prepare_cached(
            "INSERT INTO eta_windows (shipment_unique_id, from_ms, to_ms, at_ms)
             SELECT ?1, ?2, ?3, ?4
             WHERE EXISTS (SELECT 1 FROM published_stops WHERE shipment_unique_id = ?1 AND route_id = ?5)
               AND NOT EXISTS (SELECT 1 FROM (SELECT from_ms, to_ms FROM eta_windows WHERE shipment_unique_id = ?1
                    ORDER BY id DESC LIMIT 1) l WHERE l.from_ms = ?2 AND l.to_ms = ?3)",
        )
        .map_err(map_err)?;
    for (u, e) in etas {
        told.execute(params![u, e.from_ms, e.to_ms, now_ms, route_id]).map_err(map_err)?;
    }
    c.prepare_cached("DELETE FROM stop_etas WHERE route_id = ?1")
        .and_then(|mut s| s.execute([route_id]))
        .map_err(map_err)?;
    let mut insert = c
        .prepare_cached(
            "INSERT INTO stop_etas (shipment_unique_id, route_id, arrival_ms, from_ms, to_ms, late, stops_before, updated_ms)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8
             WHERE EXISTS (SELECT 1 FROM published_stops WHERE shipment_unique_id = ?1 AND route_id = ?2)
             ON CONFLICT (shipment_unique_id) DO UPDATE SET route_id = excluded.route_id, arrival_ms = excluded.arrival_ms,
                from_ms = excluded.from_ms, to_ms = excluded.to_ms, late = excluded.late,
                stops_before = excluded.stops_before, updated_ms = excluded.updated_ms",
        )
        .map_err(map_err)?;
    for (u, e) in etas {
        insert
            .execute(params![u, route_id, e.arrival_ms, e.from_ms, e.to_ms, i32::from(e.late), e.stops_before, now_ms])
            .map_err(map_err)?;
    }
    Ok(())
}
