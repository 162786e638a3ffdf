//! The `SQLite` backend: WAL mode, foreign keys on, synchronous=FULL (a commit is durable
//! before it is acknowledged). One writer thread with group commit; a small pool of read
//! connections used inline (point reads take microseconds).

use super::{Outbox, Principal, Scope, StoreError, StoreResult, TokenHash};
use crate::cache::EpochCache;
use dropslot_core::geo::points::Candidate;
use dropslot_core::ids::SavedAddressId;
use jiff::Timestamp;
use rusqlite::{Connection, params};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use writer::Writer;

pub mod backup;
pub(crate) mod epoch;
pub(crate) mod writer;

pub use writer::map_err;

pub(crate) const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("../../migrations/sqlite/0001_init.sql")),
    (2, "health_probe", include_str!("../../migrations/sqlite/0002_health_probe.sql")),
    (3, "lifecycle", include_str!("../../migrations/sqlite/0003_lifecycle.sql")),
    (4, "webhooks", include_str!("../../migrations/sqlite/0004_webhooks.sql")),
    (5, "saved_address_uses", include_str!("../../migrations/sqlite/0005_saved_address_uses.sql")),
    (6, "dashboard_sessions", include_str!("../../migrations/sqlite/0006_dashboard_sessions.sql")),
    (7, "order_requests", include_str!("../../migrations/sqlite/0007_order_requests.sql")),
    (8, "cache_epoch", include_str!("../../migrations/sqlite/0008_cache_epoch.sql")),
    (9, "webhook_statistics", include_str!("../../migrations/sqlite/0009_webhook_statistics.sql")),
    (10, "capacity", include_str!("../../migrations/sqlite/0010_capacity.sql")),
    (11, "address_points", include_str!("../../migrations/sqlite/0011_address_points.sql")),
    (12, "fleet", include_str!("../../migrations/sqlite/0012_fleet.sql")),
    (13, "plans", include_str!("../../migrations/sqlite/0013_plans.sql")),
    (14, "ops_sessions", include_str!("../../migrations/sqlite/0014_ops_sessions.sql")),
    (15, "driver_requests", include_str!("../../migrations/sqlite/0015_driver_requests.sql")),
    (16, "driver_positions", include_str!("../../migrations/sqlite/0016_driver_positions.sql")),
    (17, "proofs", include_str!("../../migrations/sqlite/0017_proofs.sql")),
    (18, "notifications", include_str!("../../migrations/sqlite/0018_notifications.sql")),
    (19, "stop_etas", include_str!("../../migrations/sqlite/0019_stop_etas.sql")),
    (20, "attempts", include_str!("../../migrations/sqlite/0020_attempts.sql")),
    (21, "fleet_capacity", include_str!("../../migrations/sqlite/0021_fleet_capacity.sql")),
    (22, "eta_windows", include_str!("../../migrations/sqlite/0022_eta_windows.sql")),
    (23, "new_time", include_str!("../../migrations/sqlite/0023_new_time.sql")),
    (24, "install_settings", include_str!("../../migrations/sqlite/0024_install_settings.sql")),
    (25, "crash_repeats", include_str!("../../migrations/sqlite/0025_crash_repeats.sql")),
    (26, "publishable_keys", include_str!("../../migrations/sqlite/0026_publishable_keys.sql")),
    (27, "webhook_queue_keys", include_str!("../../migrations/sqlite/0027_webhook_queue_keys.sql")),
];
pub(crate) const READERS: usize = 4;

pub struct SqliteStore {
    pub(crate) writer: Writer,
    pub(crate) readers: Arc<Readers>,
    pub(crate) outbox: Arc<dyn Outbox>,
    pub(crate) stats: Arc<super::StoreStats>,
    /// The read caches of every preview (`store/cache.rs`), valid under the epoch file
    /// (`epoch.rs`): principals by token hash, and the saved address (or none) of a pick-up text.
    pub(crate) epoch: epoch::Epoch,
    pub(crate) principals: EpochCache<[u8; 32], Principal>,
    pub(crate) saved_ids: EpochCache<(Scope, String), Option<SavedAddressId>>,
    /// Whether `address_points` holds any point: while it holds none, a preview looks up no
    /// point at all.
    pub(crate) points_present: EpochCache<(), bool>,
    /// Recent lookups' candidates: a merchant's pick-up address is looked up again and again.
    pub(crate) point_lookups: EpochCache<crate::cache::PointKey, Vec<Candidate>>,
    /// Today's published plans as driver calls read them, parsed once per version.
    pub(crate) driver_plans: Arc<crate::cache::PlanCache>,
}

/// The pooled read connections.
pub(crate) struct Readers {
    conns: Vec<Mutex<Connection>>,
    next: AtomicUsize,
    stats: Arc<super::StoreStats>,
}

impl Readers {
    /// Runs a read on a free pooled connection (WAL readers never wait for the writer).
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> StoreResult<T> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..self.conns.len() {
            if let Ok(conn) = self.conns[(start + i) % self.conns.len()].try_lock() {
                return f(&conn).map_err(map_err);
            }
        }
        self.stats.read_waits.fetch_add(1, Ordering::Relaxed);
        let conn =
            self.conns[start % self.conns.len()].lock().map_err(|_| StoreError::Corrupt("reader poisoned".into()))?;
        f(&conn).map_err(map_err)
    }
}

pub(crate) fn connect(path: &str) -> StoreResult<Connection> {
    let conn = Connection::open(path).map_err(map_err)?;
    conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(map_err)?;
    // A fresh file starts in rollback-journal mode, and two processes switching it to WAL at
    // once can deadlock on its locks; SQLite then answers "busy" at once instead of calling the
    // busy handler. The switch is retried, bounded by the same 5 s.
    let started = std::time::Instant::now();
    loop {
        match conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = FULL;
             PRAGMA foreign_keys = ON;
             PRAGMA temp_store = MEMORY;",
        ) {
            Ok(()) => break,
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && started.elapsed() < std::time::Duration::from_secs(5) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => return Err(map_err(e)),
        }
    }
    // Room for every statement of a mixed load (about 150 in the code): one evicted is
    // prepared again at its next use.
    conn.set_prepared_statement_cache_capacity(256);
    Ok(conn)
}

/// A claim's `LIMIT`, written into its statement as a constant: `n` rounded up to a power of
/// two. SQLite prepares a statement with `ORDER BY … LIMIT ?` again at every execution (its
/// planner reads the bound value; `SQLITE_STMTSTATUS_REPREPARE` counted one a call), which was
/// 6.5 % of the writer's time under the webhook load (issue 33). A constant keeps the
/// statement prepared once, and the power of two bounds the variants cached (the caller keeps
/// the first `n` rows).
pub(super) fn limit_bucket(n: usize) -> usize {
    n.clamp(1, 1 << 16).next_power_of_two()
}

impl SqliteStore {
    /// Marks a session of `table` (`dashboard_sessions` or `ops_sessions`) seen at `now_ms`.
    pub(crate) async fn touch_session(&self, table: &'static str, hash: TokenHash, now_ms: i64) -> StoreResult<()> {
        self.writer
            .write(move |c| {
                let sql = format!("UPDATE {table} SET last_seen_ms = ?2 WHERE hash = ?1 AND last_seen_ms < ?2");
                c.execute(&sql, params![&hash.0[..], now_ms]).map_err(map_err)?;
                Ok(())
            })
            .await
    }
    pub fn open(path: &str, outbox: Arc<dyn Outbox>) -> StoreResult<SqliteStore> {
        // `/dev/null` or a directory would "open" and leave `-journal`/`-wal` files beside it.
        if let Ok(meta) = std::fs::metadata(path) {
            if !meta.is_file() {
                return Err(StoreError::Invalid(format!("{path}: not a regular file; sqlite needs a database file")));
            }
        }
        let stats = Arc::new(super::StoreStats::default());
        let writer = Writer::start(connect(path)?, stats.clone());
        let conns = (0..READERS).map(|_| connect(path).map(Mutex::new)).collect::<StoreResult<_>>()?;
        let readers = Arc::new(Readers { conns, next: AtomicUsize::new(0), stats: stats.clone() });
        let epoch = epoch::Epoch::open(path);
        let (principals, saved_ids) = (EpochCache::new(10_000), EpochCache::new(4_096));
        let (points_present, point_lookups) = (EpochCache::new(1), EpochCache::new(16_384));
        let driver_plans = Arc::new(crate::cache::PlanCache::new(crate::cache::PLAN_CACHE_PLANS));
        Ok(SqliteStore {
            writer,
            readers,
            outbox,
            stats,
            epoch,
            principals,
            saved_ids,
            points_present,
            point_lookups,
            driver_plans,
        })
    }

    /// After a committed change of what the read caches hold: this process's caches dropped,
    /// and the epoch touched for every other process.
    pub(crate) fn changed(&self) -> StoreResult<()> {
        self.principals.clear();
        self.saved_ids.clear();
        self.points_present.clear();
        self.point_lookups.clear();
        self.epoch.touch()
    }

    /// A point read (an indexed row or two: microseconds), run inline on the caller's thread.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> StoreResult<T> {
        self.readers.read(f)
    }

    /// A read whose size grows with the data (a list, a label's whole order): run on the
    /// blocking pool, so a large one cannot stall a runtime worker thread.
    pub(crate) async fn read_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreResult<T> {
        let readers = self.readers.clone();
        tokio::task::spawn_blocking(move || readers.read(f))
            .await
            .map_err(|e| StoreError::Corrupt(format!("a read task failed: {e}")))?
    }
}

/// SHA-256 of a migration's SQL, hex: recorded when it is applied, compared on every start.
pub(crate) fn checksum(sql: &str) -> String {
    use sha2::{Digest, Sha256};
    dropslot_core::ids::hex(&Sha256::digest(sql.as_bytes()))
}

/// Applies the missing migrations, each recorded with its checksum. Refuses to go on when an
/// applied migration's SQL has changed since, or the database has one this binary does not
/// know (it was migrated by a newer binary).
pub(crate) fn migrate(c: &Connection) -> Result<Vec<i64>, String> {
    let db = |e: rusqlite::Error| e.to_string();
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL, checksum TEXT)",
    )
    .map_err(db)?;
    // Databases migrated before checksums existed lack the column: add it, and record the
    // checksums of what this binary ships for the versions already applied.
    let has_checksum: bool = c
        .query_row("SELECT count(*) > 0 FROM pragma_table_info('schema_migrations') WHERE name = 'checksum'", [], |r| {
            r.get(0)
        })
        .map_err(db)?;
    if !has_checksum {
        c.execute_batch("ALTER TABLE schema_migrations ADD COLUMN checksum TEXT").map_err(db)?;
    }
    let applied: Vec<(i64, String, Option<String>)> = c
        .prepare("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect())
        .map_err(db)?;
    for (version, name, recorded) in &applied {
        let Some((_, _, sql)) = MIGRATIONS.iter().find(|(v, _, _)| v == version) else {
            return Err(format!(
                "the database has migration {version} ({name}), which this binary does not know: it was migrated by a newer dropslot"
            ));
        };
        let shipped = checksum(sql);
        match recorded {
            Some(r) if *r != shipped => {
                return Err(format!(
                    "migration {version} ({name}) has changed since it was applied to this database (checksum {r}, this binary has {shipped}); applied migrations must never be edited"
                ));
            }
            Some(_) => {}
            None => {
                c.execute("UPDATE schema_migrations SET checksum = ?2 WHERE version = ?1", params![version, shipped])
                    .map_err(db)?;
            }
        }
    }
    let mut done = Vec::new();
    for (version, name, sql) in MIGRATIONS {
        if applied.iter().any(|(v, _, _)| v == version) {
            continue;
        }
        c.execute_batch(sql).map_err(db)?;
        c.execute(
            "INSERT INTO schema_migrations (version, name, applied_at, checksum) VALUES (?1, ?2, ?3, ?4)",
            params![version, name, now_text(Timestamp::now()), checksum(sql)],
        )
        .map_err(db)?;
        done.push(*version);
    }
    Ok(done)
}

pub(crate) fn now_text(now: Timestamp) -> String {
    now.to_string()
}

/// The unique indexes whose violation a caller turns into a field error, by name, with the
/// columns `SQLite` names in its message for each (it reports columns, not index names).
pub(crate) const UNIQUE_INDEXES: &[(&str, &str)] =
    &[("parcels_live_custom_code", "parcels.client_id, parcels.mode, parcels.custom_code")];

/// The name of the unique index a write violated, if it is one of [`UNIQUE_INDEXES`].
pub(crate) fn violated_constraint(e: &rusqlite::Error) -> Option<&'static str> {
    let rusqlite::Error::SqliteFailure(f, Some(msg)) = e else { return None };
    if f.extended_code != rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE {
        return None;
    }
    let columns = msg.strip_prefix("UNIQUE constraint failed: ")?;
    UNIQUE_INDEXES.iter().find(|(_, cols)| *cols == columns).map(|(name, _)| *name)
}

/// A text column parsed into its type (a token kind, a status): a value this binary does not
/// know is an error, never a guess.
pub(crate) fn parsed<T>(
    r: &rusqlite::Row<'_>,
    i: usize,
    what: &str,
    parse: fn(&str) -> Option<T>,
) -> rusqlite::Result<T> {
    let text: String = r.get(i)?;
    parse(&text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            i,
            rusqlite::types::Type::Text,
            format!("unknown {what} {text:?}").into(),
        )
    })
}

/// A status column (see `parsed`).
pub(crate) fn status_column(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<dropslot_core::shipments::Status> {
    parsed(r, i, "status", dropslot_core::shipments::Status::parse)
}

/// A stored JSON column read into its storage struct; one that does not parse is an error.
pub(crate) fn json_column<T: serde::de::DeserializeOwned>(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<T> {
    let text: String = r.get(i)?;
    serde_json::from_str(&text)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
}

/// A storage struct as a JSON column.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> rusqlite::Result<String> {
    serde_json::to_string(value).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dropslot_core::shipments::{Actor, ShipmentKind};

    /// Why the claims write their `LIMIT` as a constant: with `ORDER BY … LIMIT ?` SQLite
    /// prepares the statement again at every execution; with the bucketed constant, never.
    #[test]
    pub(crate) fn a_constant_limit_keeps_a_claim_prepared_once() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t (a INTEGER); CREATE INDEX t_a ON t (a); INSERT INTO t VALUES (1), (2), (3);")
            .unwrap();
        let reprepares = |sql: &str, bound: usize| {
            for _ in 0..4 {
                let mut st = c.prepare_cached(sql).unwrap();
                let n: Vec<i64> = if bound == 2 {
                    st.query_map(params![5, 2], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap()
                } else {
                    st.query_map(params![5], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap()
                };
                assert!(!n.is_empty());
            }
            c.prepare_cached(sql).unwrap().get_status(rusqlite::StatementStatus::RePrepare)
        };
        assert!(reprepares("SELECT a FROM t WHERE a <= ?1 ORDER BY a LIMIT ?2", 2) >= 4);
        let sql = format!("SELECT a FROM t WHERE a <= ?1 ORDER BY a LIMIT {}", limit_bucket(2));
        assert_eq!(reprepares(&sql, 1), 0);
        assert_eq!((limit_bucket(0), limit_bucket(1), limit_bucket(5), limit_bucket(1024)), (1, 1, 8, 1024));
    }

    /// Migration 0003 numbers the events a database already holds, per shipment, in order.
    #[test]
    pub(crate) fn lifecycle_migration_numbers_existing_events() {
        let c = Connection::open_in_memory().unwrap();
        for (_, _, sql) in &MIGRATIONS[..2] {
            c.execute_batch(sql).unwrap();
        }
        for (kind, id, status) in [
            ("drop_off", 1, "scheduled"),
            ("pick_up", 1, "scheduled"),
            ("drop_off", 1, "deleted"),
            ("drop_off", 2, "scheduled"),
        ] {
            c.execute(
                "INSERT INTO shipment_events (shipment_kind, shipment_id, status, at, actor) VALUES (?1, ?2, ?3, 'x', ?4)",
                params![kind, id, status, Actor::Client.as_str()],
            )
            .unwrap();
        }
        c.execute_batch(MIGRATIONS[2].2).unwrap();
        let seqs: Vec<(String, i64, i64)> = c
            .prepare("SELECT shipment_kind, shipment_id, seq FROM shipment_events ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let expected = [("drop_off", 1, 1), ("pick_up", 1, 1), ("drop_off", 1, 2), ("drop_off", 2, 1)];
        assert_eq!(seqs, expected.map(|(k, i, s)| (k.to_string(), i, s)));
        // The unique index guards the numbering from now on.
        assert!(
            c.execute(
                "INSERT INTO shipment_events (shipment_kind, shipment_id, seq, status, at, actor) VALUES (?1, 1, 2, 's', 'x', ?2)",
                params![ShipmentKind::DropOff.as_str(), Actor::Ops.as_str()],
            )
            .is_err()
        );
    }
}
