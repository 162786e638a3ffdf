//! The hot tables' upkeep on `PostgreSQL`: each is analysed once enough of it has changed
//! since its last analyse, and vacuumed once enough of it is dead, by whichever process gets
//! there first (issue 27). Autovacuum does the same, but at most once a minute per database
//! by default, and not at all where it is turned off (this project's CI machines, some
//! managed plans' small instances): meanwhile every statement keeps the plan it was given on
//! the statistics of a much smaller table (`sql.rs`: one plan per statement and connection),
//! and the queue's indexes fill with dead rows that every claim reads past. Where autovacuum
//! keeps up, these thresholds are never reached and this reads one statistics view.

use crate::postgres::sql::Sql;
use crate::postgres::{Connections, PgStore, map_err, migrate};
use crate::{StoreError, StoreResult, UpkeepStore};
use async_trait::async_trait;
use jiff::Timestamp;
use std::sync::Arc;

#[async_trait]
impl UpkeepStore for PgStore {
    fn stats(&self) -> Arc<crate::StoreStats> {
        self.stats.clone()
    }

    async fn migrate(&self) -> StoreResult<Vec<i64>> {
        let mut c = self.conn().await?;
        migrate(&mut c).await
    }

    async fn ping(&self) -> StoreResult<()> {
        let c = self.conn().await?;
        c.execute(
            "INSERT INTO health_probe (id, checked_at) VALUES (1, $1)
             ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at",
            &[&Timestamp::now()],
        )
        .await
        .map(drop)
        .map_err(map_err)
    }

    async fn install_setting(&self, key: &str, if_absent: &str) -> StoreResult<String> {
        let c = self.conn().await?;
        // Inserted or not, the row is there after the first statement (two processes starting
        // at once: one inserts, the other's insert waits for it and does nothing).
        c.execute(
            "INSERT INTO install_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
            &[&key, &if_absent],
        )
        .await
        .map_err(map_err)?;
        let row = c.query_one("SELECT value FROM install_settings WHERE key = $1", &[&key]).await.map_err(map_err)?;
        row.try_get(0).map_err(map_err)
    }

    async fn upkeep(&self) -> StoreResult<Vec<String>> {
        round(&self.pool).await
    }
}

/// The tables looked after: (name, changes before the first analyse or vacuum). A table is
/// analysed when its changes since the last analyse pass this floor plus a tenth of its
/// rows, and vacuumed when its dead rows do. The floors match migration 0009's: below them
/// a table's statistics would choose sequential scans that its plans then keep as it grows.
/// After its first analyse a table is analysed again at most once every [`ANALYSE_EVERY`].
const TABLES: &[(&str, i64)] = &[
    ("webhook_deliveries", 6000),
    ("webhook_messages", 2000),
    ("webhook_attempts", 2000),
    ("drop_off_shipments", 2000),
    ("pick_up_shipments", 2000),
    ("shipment_orders", 2000),
    ("orders", 2000),
    ("parcels", 2000),
    ("shipment_events", 2000),
    ("order_requests", 2000),
];

/// A table analysed is not analysed again within this (autovacuum's own pace: one visit of a
/// database a minute by default). The first analyse is what a young table's plans need; a
/// growing table's later ones change no plan (the planner scales its row counts to the
/// table's current size) yet each read a sample of up to 30,000 rows and made every pooled
/// connection plan the table's statements again: at 4,600 orders/s, every 2 s, 1.4 s of the
/// server's CPU in 8 s (docs/performance.md, "Issue 49"). Vacuums are not paced: the
/// queue's dead rows are what every claim reads past.
const ANALYSE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// One process at a time (a session advisory lock: another process's round is skipped, not
/// waited for).
const UPKEEP_LOCK: i64 = 0x6472_6f70_6b65_6570; // "dropkeep"

/// One round: what it analysed and vacuumed, as the commands it ran.
pub(crate) async fn round(pool: &Connections) -> Result<Vec<String>, StoreError> {
    let c = pool.get().await?;
    let got: bool = c.query_one("SELECT pg_try_advisory_lock($1)", &[&UPKEEP_LOCK]).await.map_err(map_err)?.get(0);
    if !got {
        return Ok(Vec::new());
    }
    let done = async {
        let commands = due(&c).await?;
        for command in &commands {
            // Not in a transaction (VACUUM refuses one); the connection's statement timeout
            // bounds it.
            c.batch_execute(command).await.map_err(map_err)?;
        }
        Ok(commands)
    }
    .await;
    // The lock is the session's: given back whatever happened, or the pooled connection would
    // keep it and no other process would ever take a round.
    c.execute("SELECT pg_advisory_unlock($1)", &[&UPKEEP_LOCK]).await.map_err(map_err)?;
    done
}

/// The commands due now, by the tables' statistics.
async fn due(c: &impl Sql) -> Result<Vec<String>, StoreError> {
    let names: Vec<&str> = TABLES.iter().map(|(n, _)| *n).collect();
    let floors: Vec<i64> = TABLES.iter().map(|(_, f)| *f).collect();
    let rows = c
        .query(
            "SELECT s.relname::text,
                s.n_mod_since_analyze > t.floor + s.n_live_tup / 10
                    AND coalesce(greatest(s.last_analyze, s.last_autoanalyze) < now() - make_interval(secs => $3), true),
                s.n_dead_tup > t.floor + s.n_live_tup / 10
             FROM unnest($1::text[], $2::bigint[]) AS t (name, floor)
             JOIN pg_stat_user_tables s ON s.relname = t.name AND s.schemaname = current_schema()
             ORDER BY s.relname",
            &[&names, &floors, &ANALYSE_EVERY.as_secs_f64()],
        )
        .await
        .map_err(map_err)?;
    let mut commands = Vec::new();
    for r in &rows {
        let name: String = r.try_get(0).map_err(|e| StoreError::Corrupt(format!("upkeep: {e}")))?;
        // Only the names above come back, so the command is one of a fixed set.
        let Some((table, _)) = TABLES.iter().find(|(n, _)| *n == name) else { continue };
        let analyse: bool = r.try_get(1).map_err(|e| StoreError::Corrupt(format!("upkeep: {e}")))?;
        let vacuum: bool = r.try_get(2).map_err(|e| StoreError::Corrupt(format!("upkeep: {e}")))?;
        match (vacuum, analyse) {
            (true, true) => commands.push(format!("VACUUM (ANALYZE) {table}")),
            (true, false) => commands.push(format!("VACUUM {table}")),
            (false, true) => commands.push(format!("ANALYZE {table}")),
            (false, false) => {}
        }
    }
    Ok(commands)
}
