//! The `SQLite` backend: WAL mode, foreign keys on, synchronous=FULL (a commit is durable
//! before it is acknowledged). One writer thread with group commit; a small pool of read
//! connections used inline (point reads take microseconds).

pub mod backup;
mod capacity;
mod epoch;
mod fleet;
mod lifecycle;
mod notify;
mod orders;
mod outbox;
mod plans;
mod points;
mod proofs;
mod reads;
mod requests;
mod webhooks;
mod writer;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use jiff::Timestamp;
use jiff::civil::Date;
use rusqlite::{Connection, OptionalExtension, params};

use super::{
    AttemptRecord, Claimed, ClaimedRequest, CreateOrderError, CreatedOrder, DeleteOutcome, DriverUpdate, EndpointPatch,
    LabelKind, LabelSource, MoveOutcome, NewEndpoint, NewOrder, NewRequest, NewSession, NewStaffToken, NewToken,
    OrderFilter, Outbox, Principal, RenderFn, RequestEnd, ResendOutcome, SavedAddress, ScenarioResult, Scope,
    Selection, SessionRecord, StaffKind, StaffPrincipal, StaffTokenInfo, Store, StoreError, StoreResult,
    StoredDelivery, StoredDriver, StoredEndpoint, StoredOrder, StoredRequest, StoredResponse, StoredShipment,
    TokenHash, TokenInfo, TokenKind, Tracking, Visibility,
};
use crate::cache::EpochCache;
use crate::{SaveOutcome, StoredPlan};
use dropslot_core::dispatch::{Candidate as PlanCandidate, Plan, PlanKind};
use dropslot_core::fleet::Driver;
use dropslot_core::geo::points::{AddressPoint, Candidate, PointQuery};
use dropslot_core::ids::{ClientId, CustomCode, SavedAddressId};
use dropslot_core::quote::capacity::{Load, Override, SlotDate};
use outbox::Sink;
use writer::Writer;
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
];
const READERS: usize = 4;

pub struct SqliteStore {
    writer: Writer,
    readers: Arc<Readers>,
    outbox: Arc<dyn Outbox>,
    stats: Arc<super::StoreStats>,
    /// The read caches of every preview (`store/cache.rs`), valid under the epoch file
    /// (`epoch.rs`): principals by token hash, and the saved address (or none) of a pick-up text.
    epoch: epoch::Epoch,
    principals: EpochCache<[u8; 32], Principal>,
    saved_ids: EpochCache<(Scope, String), Option<SavedAddressId>>,
    /// Whether `address_points` holds any point: while it holds none, a preview looks up no
    /// point at all.
    points_present: EpochCache<(), bool>,
    /// Recent lookups' candidates: a merchant's pick-up address is looked up again and again.
    point_lookups: EpochCache<crate::cache::PointKey, Vec<Candidate>>,
    /// Today's published plans as driver calls read them, parsed once per version.
    driver_plans: Arc<crate::plans::PlanCache>,
}

/// The pooled read connections.
struct Readers {
    conns: Vec<Mutex<Connection>>,
    next: AtomicUsize,
    stats: Arc<super::StoreStats>,
}

impl Readers {
    /// Runs a read on a free pooled connection (WAL readers never wait for the writer).
    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> StoreResult<T> {
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

fn connect(path: &str) -> StoreResult<Connection> {
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
    async fn touch_session(&self, table: &'static str, hash: TokenHash, now_ms: i64) -> StoreResult<()> {
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
        let driver_plans = Arc::new(crate::plans::PlanCache::new(crate::plans::PLAN_CACHE_PLANS));
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

    /// A write that may cause webhook events: `work` renders them through the outbox into
    /// its own transaction; once committed, the outbox hears how many deliveries it queued.
    async fn write_events<T, E, F>(&self, work: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(&Connection, &mut Sink<'_>) -> Result<T, E> + Send + 'static,
    {
        let outbox = self.outbox.clone();
        let (value, queued, notified) = self
            .writer
            .write(move |c| {
                let mut sink = Sink { outbox: &*outbox, queued: 0, notified: 0 };
                let value = work(c, &mut sink)?;
                Ok::<_, E>((value, sink.queued, sink.notified))
            })
            .await?;
        if queued > 0 {
            self.outbox.queued(queued);
        }
        if notified > 0 {
            self.outbox.notified(notified);
        }
        Ok(value)
    }

    /// After a committed change of what the read caches hold: this process's caches dropped,
    /// and the epoch touched for every other process.
    fn changed(&self) -> StoreResult<()> {
        self.principals.clear();
        self.saved_ids.clear();
        self.points_present.clear();
        self.point_lookups.clear();
        self.epoch.touch()
    }

    /// A point read (an indexed row or two: microseconds), run inline on the caller's thread.
    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> StoreResult<T> {
        self.readers.read(f)
    }

    /// A read whose size grows with the data (a list, a label's whole order): run on the
    /// blocking pool, so a large one cannot stall a runtime worker thread.
    async fn read_blocking<T: Send + 'static>(
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
fn checksum(sql: &str) -> String {
    use sha2::{Digest, Sha256};
    dropslot_core::ids::hex(&Sha256::digest(sql.as_bytes()))
}

/// Applies the missing migrations, each recorded with its checksum. Refuses to go on when an
/// applied migration's SQL has changed since, or the database has one this binary does not
/// know (it was migrated by a newer binary).
fn migrate(c: &Connection) -> Result<Vec<i64>, String> {
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

fn now_text(now: Timestamp) -> String {
    now.to_string()
}

#[async_trait]
impl Store for SqliteStore {
    fn stats(&self) -> Arc<super::StoreStats> {
        self.stats.clone()
    }

    async fn migrate(&self) -> StoreResult<Vec<i64>> {
        self.writer.write(|c| migrate(c).map_err(StoreError::Invalid)).await
    }

    async fn ping(&self) -> StoreResult<()> {
        // Through the writer, committed like any order: it fails exactly when orders would.
        let at = now_text(Timestamp::now());
        self.writer
            .write(move |c| {
                c.prepare_cached(
                    "INSERT INTO health_probe (id, checked_at) VALUES (1, ?1)
                     ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at",
                )
                .and_then(|mut s| s.execute([&at]))
                .map(drop)
                .map_err(map_err)
            })
            .await
    }

    async fn create_client(&self, name: &str, now: Timestamp) -> StoreResult<ClientId> {
        let name = name.to_string();
        self.writer
            .write(move |c| {
                c.execute("INSERT INTO clients (name, created_at) VALUES (?1, ?2)", params![name, now_text(now)])
                    .map_err(map_err)?;
                Ok(ClientId(c.last_insert_rowid()))
            })
            .await
    }

    async fn client_count(&self) -> StoreResult<i64> {
        self.read(|c| c.query_row("SELECT count(*) FROM clients", [], |r| r.get(0)))
    }

    async fn client_exists(&self, id: ClientId) -> StoreResult<bool> {
        self.read(|c| c.query_row("SELECT EXISTS (SELECT 1 FROM clients WHERE id = ?1)", [id.0], |r| r.get(0)))
    }

    async fn set_client_settings(&self, id: ClientId, settings_json: Option<String>) -> StoreResult<bool> {
        let changed = self
            .writer
            .write(move |c| {
                let n = c
                    .execute("UPDATE clients SET settings_json = ?2 WHERE id = ?1", params![id.0, settings_json])
                    .map_err(map_err)?;
                Ok(n == 1)
            })
            .await?;
        if changed {
            self.changed()?;
        }
        Ok(changed)
    }

    async fn insert_token(&self, t: NewToken, now: Timestamp) -> StoreResult<()> {
        self.writer
            .write(move |c| {
                c.execute(
                    "INSERT INTO tokens (client_id, kind, hash, prefix, last4, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![t.client.0, t.kind.as_str(), &t.hash.0[..], t.prefix, t.last4, now_text(now)],
                )
                .map_err(map_err)?;
                Ok(())
            })
            .await
    }

    async fn principal(&self, hash: &TokenHash) -> StoreResult<Option<Principal>> {
        // The epoch is read before the database (epoch.rs says why).
        let epoch = self.epoch.read();
        if let Some(cached) = epoch.and_then(|e| self.principals.get(&hash.0, e)) {
            return Ok(Some(cached));
        }
        let found = self.read(|c| {
            c.prepare_cached(
                "SELECT t.client_id, t.kind, c.settings_json FROM tokens t JOIN clients c ON c.id = t.client_id
                 WHERE t.hash = ?1 AND t.revoked_at IS NULL",
            )?
            .query_row([&hash.0[..]], principal_row)
            .optional()
        })?;
        // Only a token that exists is cached: unknown ones cannot fill the cache.
        if let (Some(epoch), Some(principal)) = (epoch, &found) {
            self.principals.put(hash.0, epoch, principal.clone());
        }
        Ok(found)
    }

    async fn list_tokens(&self, client: ClientId) -> StoreResult<Vec<TokenInfo>> {
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT prefix, last4, kind, created_at, revoked_at FROM tokens WHERE client_id = ?1 ORDER BY id",
            )?;
            st.query_map([client.0], |r| {
                Ok(TokenInfo {
                    prefix: r.get(0)?,
                    last4: r.get(1)?,
                    kind: parsed(r, 2, "token kind", TokenKind::parse)?,
                    created_at: r.get(3)?,
                    revoked_at: r.get(4)?,
                })
            })?
            .collect()
        })
    }

    async fn revoke_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        let prefix = prefix.to_string();
        let revoked = self
            .writer
            .write(move |c| {
                let n = c
                    .execute(
                        "UPDATE tokens SET revoked_at = ?2 WHERE prefix = ?1 AND revoked_at IS NULL",
                        params![prefix, now_text(now)],
                    )
                    .map_err(map_err)?;
                Ok(n == 1)
            })
            .await?;
        if revoked {
            // Every process's cached principal of this token is stale from here on.
            self.changed()?;
        }
        Ok(revoked)
    }

    async fn insert_operator_token(&self, token: NewStaffToken, now: Timestamp) -> StoreResult<()> {
        self.writer.write(move |c| fleet::insert_token(c, StaffKind::Operator, None, &token, now)).await
    }

    async fn staff_principal(&self, hash: &TokenHash) -> StoreResult<Option<StaffPrincipal>> {
        self.read(|c| fleet::principal(c, hash))
    }

    async fn list_staff_tokens(&self, kind: StaffKind) -> StoreResult<Vec<StaffTokenInfo>> {
        self.read(|c| fleet::list_tokens(c, kind))
    }

    async fn revoke_staff_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        let prefix = prefix.to_string();
        self.writer.write(move |c| fleet::revoke_token(c, &prefix, now)).await
    }

    async fn create_driver(
        &self,
        id: &str,
        driver: Driver,
        token: NewStaffToken,
        now: Timestamp,
    ) -> StoreResult<StoredDriver> {
        let id = id.to_string();
        self.writer.write(move |c| fleet::create_driver(c, &id, &driver, &token, now)).await
    }

    async fn driver(&self, id: &str) -> StoreResult<Option<StoredDriver>> {
        self.read(|c| fleet::driver_columns(c, id))?.map(crate::fleet::driver_row).transpose()
    }

    async fn drivers(&self, depot: Option<&str>) -> StoreResult<Vec<StoredDriver>> {
        let depot = depot.map(str::to_string);
        let rows = self.read_blocking(move |c| fleet::drivers_columns(c, depot.as_deref())).await?;
        rows.into_iter().map(crate::fleet::driver_row).collect()
    }

    async fn update_driver(&self, id: &str, version: i64, driver: Driver, now: Timestamp) -> StoreResult<DriverUpdate> {
        let id = id.to_string();
        self.writer.write(move |c| fleet::update_driver(c, &id, version, &driver, now)).await
    }

    async fn delete_driver(&self, id: &str, now: Timestamp) -> StoreResult<bool> {
        let id = id.to_string();
        self.writer.write(move |c| fleet::delete_driver(c, &id, now)).await
    }

    async fn reissue_driver_token(&self, id: &str, token: NewStaffToken, now: Timestamp) -> StoreResult<bool> {
        let id = id.to_string();
        self.writer.write(move |c| fleet::reissue(c, &id, &token, now)).await
    }

    async fn create_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<Option<Principal>> {
        let token = *token;
        self.writer
            .write(move |c| {
                let found = c
                    .prepare_cached(
                        "SELECT t.client_id, t.kind, c.settings_json, t.id FROM tokens t JOIN clients c ON c.id = t.client_id
                         WHERE t.hash = ?1 AND t.revoked_at IS NULL",
                    )
                    .and_then(|mut st| {
                        st.query_row([&token.0[..]], |r| Ok((r.get::<_, i64>(3)?, principal_row(r)?))).optional()
                    })
                    .map_err(map_err)?;
                let Some((token_id, principal)) = found else { return Ok(None) };
                c.prepare_cached(
                    "INSERT INTO dashboard_sessions (hash, token_id, csrf, created_ms, last_seen_ms)
                     VALUES (?1, ?2, ?3, ?4, ?4)",
                )
                .and_then(|mut st| {
                    st.execute(params![&session.hash.0[..], token_id, session.csrf, session.now_ms])
                })
                .map_err(map_err)?;
                Ok(Some(principal))
            })
            .await
    }

    async fn session(
        &self,
        session: &TokenHash,
        idle_since_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<SessionRecord>> {
        let found = self.read(|c| {
            c.prepare_cached(
                "SELECT t.client_id, t.kind, c.settings_json, s.csrf, t.prefix, s.last_seen_ms
                 FROM dashboard_sessions s JOIN tokens t ON t.id = s.token_id JOIN clients c ON c.id = t.client_id
                 WHERE s.hash = ?1 AND t.revoked_at IS NULL AND s.last_seen_ms >= ?2",
            )?
            .query_row(params![&session.0[..], idle_since_ms], |r| {
                Ok((
                    SessionRecord { principal: principal_row(r)?, csrf: r.get(3)?, token_prefix: r.get(4)? },
                    r.get::<_, i64>(5)?,
                ))
            })
            .optional()
        })?;
        let Some((record, last_seen)) = found else { return Ok(None) };
        if last_seen < now_ms - 60_000 {
            self.touch_session("dashboard_sessions", *session, now_ms).await?;
        }
        Ok(Some(record))
    }

    async fn create_ops_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<bool> {
        let token = *token;
        self.writer
            .write(move |c| {
                let n = c
                    .prepare_cached(
                        "INSERT INTO ops_sessions (hash, staff_token_id, csrf, created_ms, last_seen_ms)
                         SELECT ?1, id, ?2, ?3, ?3 FROM staff_tokens
                         WHERE hash = ?4 AND kind = 'operator' AND revoked_at IS NULL",
                    )
                    .and_then(|mut st| {
                        st.execute(params![&session.hash.0[..], session.csrf, session.now_ms, &token.0[..]])
                    })
                    .map_err(map_err)?;
                Ok(n == 1)
            })
            .await
    }

    async fn ops_session(
        &self,
        session: &TokenHash,
        idle_since_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<crate::OpsSessionRecord>> {
        let found = self.read(|c| {
            c.prepare_cached(
                "SELECT s.csrf, t.prefix, s.last_seen_ms FROM ops_sessions s JOIN staff_tokens t ON t.id = s.staff_token_id
                 WHERE s.hash = ?1 AND t.kind = 'operator' AND t.revoked_at IS NULL AND s.last_seen_ms >= ?2",
            )?
            .query_row(params![&session.0[..], idle_since_ms], |r| {
                Ok((crate::OpsSessionRecord { csrf: r.get(0)?, token_prefix: r.get(1)? }, r.get::<_, i64>(2)?))
            })
            .optional()
        })?;
        let Some((record, last_seen)) = found else { return Ok(None) };
        if last_seen < now_ms - 60_000 {
            self.touch_session("ops_sessions", *session, now_ms).await?;
        }
        Ok(Some(record))
    }

    async fn end_ops_session(&self, session: &TokenHash) -> StoreResult<()> {
        let hash = *session;
        self.writer
            .write(move |c| {
                c.execute("DELETE FROM ops_sessions WHERE hash = ?1", [&hash.0[..]]).map_err(map_err)?;
                Ok(())
            })
            .await
    }

    async fn end_session(&self, session: &TokenHash) -> StoreResult<()> {
        let hash = *session;
        self.writer
            .write(move |c| {
                c.execute("DELETE FROM dashboard_sessions WHERE hash = ?1", [&hash.0[..]]).map_err(map_err)?;
                Ok(())
            })
            .await
    }

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

    async fn import_address_points(&self, batch: Vec<AddressPoint>) -> StoreResult<u64> {
        let added = self.writer.write(move |c| points::insert(c, &batch).map_err(map_err)).await?;
        self.changed()?;
        Ok(added)
    }

    async fn address_points_present(&self) -> StoreResult<bool> {
        // The epoch is read before the table: an import committed after this read moves it.
        let epoch = self.epoch.read();
        if let Some(present) = epoch.and_then(|e| self.points_present.get(&(), e)) {
            return Ok(present);
        }
        let present = self.read(points::any)?;
        if let Some(epoch) = epoch {
            self.points_present.put((), epoch, present);
        }
        Ok(present)
    }

    async fn address_point_candidates(&self, queries: &[PointQuery]) -> StoreResult<Vec<Vec<Candidate>>> {
        let epoch = self.epoch.read();
        crate::cache::points_through(&self.point_lookups, epoch, queries, |missing| async move {
            self.read(|c| points::candidates(c, &missing))
        })
        .await
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
            self.write_events(move |c, sink| orders::insert_order(c, sink, scope, &order, &render)).await?;
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
        self.write_events(move |c, sink| orders::delete_parcel(c, sink, scope, &code, now)).await
    }

    async fn queue_request(&self, scope: Scope, request: NewRequest) -> Result<(), CreateOrderError> {
        self.writer.write(move |c| requests::queue(c, scope, &request)).await
    }

    async fn order_request(&self, scope: Scope, request_id: &str) -> StoreResult<Option<StoredRequest>> {
        self.read(|c| requests::get(c, scope, request_id))
    }

    async fn claim_requests(&self, now_ms: i64, lease_until_ms: i64, limit: usize) -> StoreResult<Vec<ClaimedRequest>> {
        self.writer.write(move |c| requests::claim(c, now_ms, lease_until_ms, limit)).await
    }

    async fn fail_request(&self, end: RequestEnd, errors_json: String) -> StoreResult<bool> {
        self.write_events(move |c, sink| requests::fail(c, sink, &end, &errors_json)).await
    }

    async fn next_request_due_ms(&self) -> StoreResult<Option<i64>> {
        self.read(requests::next_due_ms)
    }

    async fn sandbox_candidates(&self, scope: Scope, selection: Selection) -> StoreResult<Vec<i64>> {
        self.read_blocking(move |c| lifecycle::sandbox_candidates(c, scope, &selection)).await
    }

    async fn run_scenario(
        &self,
        scope: Scope,
        ids: Vec<i64>,
        scenario: dropslot_core::shipments::Scenario,
        now: Timestamp,
    ) -> StoreResult<Vec<ScenarioResult>> {
        self.write_events(move |c, sink| lifecycle::run_scenario(c, sink, scope, &ids, scenario, now)).await
    }

    async fn ops_move(
        &self,
        unique_id: &str,
        m: dropslot_core::shipments::Move,
        now: Timestamp,
    ) -> StoreResult<MoveOutcome<Box<StoredShipment>>> {
        let code = unique_id.to_string();
        let outcome = self.write_events(move |c, sink| lifecycle::ops_move(c, sink, &code, &m, now)).await?;
        // Read back on a reader, after the writer's commit (the writer stays on writes).
        Ok(match outcome {
            MoveOutcome::NotFound => MoveOutcome::NotFound,
            MoveOutcome::Refused(r) => MoveOutcome::Refused(r),
            MoveOutcome::Moved(moved) => match self.read(|c| reads::shipment(c, Visibility::Ops, &moved))? {
                // Deleted meanwhile by its merchant.
                None => MoveOutcome::NotFound,
                Some(s) => MoveOutcome::Moved(Box::new(s)),
            },
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
        self.write_events(move |c, sink| lifecycle::driver_move(c, sink, &key, &unique_id, &m, &attach, now)).await
    }

    async fn pick_up_scan(&self, pick_up_code: &str, now: Timestamp) -> StoreResult<MoveOutcome> {
        let code = pick_up_code.to_string();
        self.write_events(move |c, sink| lifecycle::pick_up_scan(c, sink, &code, now)).await
    }

    async fn shipment(&self, visible: Visibility, unique_id: &str) -> StoreResult<Option<StoredShipment>> {
        self.read(|c| reads::shipment(c, visible, unique_id))
    }

    async fn progress_of(
        &self,
        unique_ids: Vec<String>,
    ) -> StoreResult<Vec<(String, dropslot_core::shipments::Status, Timestamp)>> {
        self.read(|c| reads::progress_of(c, &unique_ids))
    }

    async fn pick_up_members(&self, pick_up_unique_id: &str) -> StoreResult<Vec<String>> {
        self.read(|c| reads::pick_up_members(c, pick_up_unique_id))
    }

    async fn order(&self, scope: Scope, unique_id: &str) -> StoreResult<Option<StoredOrder>> {
        let unique_id = unique_id.to_string();
        self.read_blocking(move |c| reads::order(c, scope, &unique_id)).await
    }

    async fn orders(&self, scope: Scope, before: Option<i64>, limit: usize) -> StoreResult<Vec<StoredOrder>> {
        self.read_blocking(move |c| reads::orders(c, scope, before, limit)).await
    }

    async fn find_orders(
        &self,
        scope: Scope,
        filter: &OrderFilter,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<StoredOrder>> {
        let filter = filter.clone();
        self.read_blocking(move |c| reads::find_orders(c, scope, &filter, before, limit)).await
    }

    async fn parcel_by_custom_code(
        &self,
        scope: Scope,
        code: &CustomCode,
    ) -> StoreResult<Option<(String, StoredShipment)>> {
        self.read(|c| reads::parcel_by_custom_code(c, scope, code.as_str()))
    }

    async fn tracking(&self, code: &str) -> StoreResult<Option<Tracking>> {
        self.read(|c| reads::tracking(c, code))
    }

    async fn label_source(&self, kind: LabelKind, token: &str) -> StoreResult<Option<LabelSource>> {
        let token = token.to_string();
        self.read_blocking(move |c| orders::label_rows(c, kind, &token)).await?.map(crate::labels::assemble).transpose()
    }

    async fn create_endpoint(&self, scope: Scope, e: NewEndpoint, now: Timestamp) -> StoreResult<StoredEndpoint> {
        self.writer.write(move |c| webhooks::create_endpoint(c, scope, &e, now)).await
    }

    async fn endpoints(&self, scope: Scope) -> StoreResult<Vec<StoredEndpoint>> {
        self.read_blocking(move |c| webhooks::endpoints(c, scope)).await
    }

    async fn endpoint(&self, scope: Scope, id: i64) -> StoreResult<Option<StoredEndpoint>> {
        self.read(|c| webhooks::endpoint(c, scope, id))
    }

    async fn update_endpoint(
        &self,
        scope: Scope,
        id: i64,
        patch: EndpointPatch,
        now: Timestamp,
    ) -> StoreResult<Option<StoredEndpoint>> {
        self.writer.write(move |c| webhooks::update_endpoint(c, scope, id, &patch, now)).await
    }

    async fn delete_endpoint(&self, scope: Scope, id: i64, now: Timestamp) -> StoreResult<bool> {
        self.writer.write(move |c| webhooks::delete_endpoint(c, scope, id, now)).await
    }

    async fn rotate_secret(
        &self,
        scope: Scope,
        id: i64,
        secret: String,
        previous_until_ms: i64,
        now: Timestamp,
    ) -> StoreResult<Option<StoredEndpoint>> {
        self.writer.write(move |c| webhooks::rotate_secret(c, scope, id, &secret, previous_until_ms, now)).await
    }

    async fn queue_test(
        &self,
        scope: Scope,
        id: i64,
        event: &str,
        body: String,
        now: Timestamp,
    ) -> StoreResult<Option<StoredDelivery>> {
        let event = event.to_string();
        let queued = self
            .write_events(move |c, sink| {
                let Some(d) = webhooks::queue_test(c, scope, id, &event, &body, now)? else { return Ok(None) };
                sink.queued += 1;
                webhooks::delivery(c, scope, d).map_err(map_err)
            })
            .await?;
        Ok(queued)
    }

    async fn deliveries(
        &self,
        scope: Scope,
        endpoint: i64,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Option<Vec<StoredDelivery>>> {
        self.read_blocking(move |c| webhooks::deliveries(c, scope, endpoint, before, limit)).await
    }

    async fn resend(&self, scope: Scope, delivery: i64) -> StoreResult<ResendOutcome> {
        self.write_events(move |c, sink| {
            let outcome = webhooks::resend(c, scope, delivery)?;
            if matches!(outcome, ResendOutcome::Queued(_)) {
                sink.queued += 1;
            }
            Ok(outcome)
        })
        .await
    }

    async fn claim_deliveries(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
        per_endpoint: usize,
        in_flight: Vec<(i64, usize)>,
    ) -> StoreResult<Vec<Claimed>> {
        // Answered before its batch commits (see `Writer::write_unsynced`): the claim's sends
        // start one fsync earlier, which bounded the fan-out while events arrived (issue 33).
        self.writer
            .write_unsynced(move |c| webhooks::claim(c, now_ms, lease_until_ms, limit, per_endpoint, &in_flight))
            .await
    }

    async fn record_attempts(&self, attempts: Vec<AttemptRecord>) -> StoreResult<()> {
        self.writer.write(move |c| attempts.iter().try_for_each(|a| webhooks::record_attempt(c, a))).await
    }

    async fn next_due_ms(&self) -> StoreResult<Option<i64>> {
        self.read(webhooks::next_due_ms)
    }

    async fn queue_depth(&self) -> StoreResult<i64> {
        self.read_blocking(webhooks::queue_depth).await
    }

    async fn notification_settings(&self, scope: Scope) -> StoreResult<crate::NotificationSettings> {
        self.read(|c| notify::settings(c, scope))
    }

    async fn set_notification_settings(
        &self,
        scope: Scope,
        settings: crate::NotificationSettings,
        now: Timestamp,
    ) -> StoreResult<()> {
        self.writer.write(move |c| notify::set_settings(c, scope, &settings, now)).await
    }

    async fn shipment_notifications(
        &self,
        scope: Scope,
        unique_id: &str,
    ) -> StoreResult<Vec<crate::StoredNotification>> {
        let unique_id = unique_id.to_string();
        self.read_blocking(move |c| notify::list(c, scope, &unique_id)).await
    }

    async fn claim_notifications(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
    ) -> StoreResult<crate::NotificationClaim> {
        self.writer.write(move |c| notify::claim(c, now_ms, lease_until_ms, limit)).await
    }

    async fn notifications_sending(&self, ids: Vec<i64>, lease_until_ms: i64) -> StoreResult<Vec<i64>> {
        self.writer.write(move |c| notify::sending(c, &ids, lease_until_ms)).await
    }

    async fn finish_notifications(&self, outcomes: Vec<crate::NotificationOutcome>) -> StoreResult<Vec<i64>> {
        self.writer.write(move |c| notify::finish(c, &outcomes)).await
    }

    async fn next_notification_due_ms(&self) -> StoreResult<Option<i64>> {
        self.read(notify::next_due_ms)
    }

    async fn opt_out_state(&self, token: &str) -> StoreResult<Option<bool>> {
        self.read(|c| notify::opt_out_state(c, token))
    }

    async fn opt_out(&self, token: &str, now: Timestamp) -> StoreResult<bool> {
        let token = token.to_string();
        self.writer.write(move |c| notify::opt_out(c, &token, now)).await
    }

    async fn capacity_overrides(&self, from: Date, to: Date) -> StoreResult<HashMap<SlotDate, Override>> {
        capacity::parsed(self.read(|c| capacity::override_rows(c, from, to))?)
    }

    async fn set_capacity_override(&self, at: SlotDate, o: Override, now: Timestamp) -> StoreResult<()> {
        self.writer.write(move |c| capacity::set_override(c, &at, o, now)).await
    }

    async fn slot_fill(&self, mode: crate::Mode, slots: Vec<SlotDate>) -> StoreResult<HashMap<SlotDate, Load>> {
        capacity::loaded(self.read_blocking(move |c| capacity::fill(c, mode, &slots)).await?)
    }

    async fn plan_candidates(
        &self,
        kind: PlanKind,
        depot: &str,
        date: Date,
        plan: Option<&str>,
    ) -> StoreResult<Vec<PlanCandidate>> {
        let (depot, plan) = (depot.to_string(), plan.unwrap_or("").to_string());
        plans::candidates(kind, self.read_blocking(move |c| plans::candidate_rows(c, kind, &depot, date, &plan)).await?)
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
        self.writer.write(move |c| plans::begin(c, &id, &depot, date, kind, now_ms, lease_ms)).await
    }

    async fn abandon_plan(&self, id: &str) -> StoreResult<()> {
        let id = id.to_string();
        self.writer.write(move |c| plans::abandon(c, &id)).await
    }

    async fn finish_plan(&self, plan: &Plan) -> StoreResult<bool> {
        let plan = plan.clone();
        self.writer.write(move |c| plans::finish(c, &plan)).await
    }

    async fn plan(&self, id: &str) -> StoreResult<Option<StoredPlan>> {
        let id = id.to_string();
        match self.read_blocking(move |c| plans::plan_by_id(c, &id)).await? {
            Some(row) => plans::parsed(&row),
            None => Ok(None),
        }
    }

    async fn plans_on(&self, date: Date) -> StoreResult<Vec<StoredPlan>> {
        let rows = self.read_blocking(move |c| plans::plans_of(c, date)).await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            out.extend(plans::parsed(&row)?);
        }
        Ok(out)
    }

    async fn board_counts(&self, depot: &str, date: Date) -> StoreResult<Vec<crate::BoardCount>> {
        let depot = depot.to_string();
        let rows = self.read_blocking(move |c| plans::board_rows(c, &depot, date)).await?;
        rows.into_iter().map(|(k, z, s, n, p)| crate::plans::board_row(&k, z, s, n, p)).collect()
    }

    async fn save_plan(&self, plan: &Plan, version: i64) -> StoreResult<SaveOutcome> {
        let plan = plan.clone();
        crate::plans::SaveError::outcome(self.writer.write(move |c| plans::save(c, &plan, version)).await)
    }

    async fn delete_plan(&self, id: &str, version: i64) -> StoreResult<bool> {
        let id = id.to_string();
        self.writer.write(move |c| plans::delete(c, &id, version)).await
    }

    async fn record_position(
        &self,
        driver_id: &str,
        key: &str,
        position: crate::Position,
        received_ms: i64,
    ) -> StoreResult<crate::PositionOutcome> {
        let (driver_id, key) = (driver_id.to_string(), key.to_string());
        self.writer.write(move |c| plans::record_position(c, &driver_id, &key, &position, received_ms)).await
    }

    async fn latest_position(&self, driver_id: &str) -> StoreResult<Option<crate::Position>> {
        self.read(|c| plans::latest_position(c, driver_id))
    }

    async fn purge_positions(&self, before_ms: i64) -> StoreResult<u64> {
        self.writer.write(move |c| plans::purge_positions(c, before_ms)).await
    }

    async fn save_etas(&self, route_id: &str, etas: Vec<(String, crate::StoredEta)>, now_ms: i64) -> StoreResult<()> {
        let route_id = route_id.to_string();
        self.writer.write(move |c| plans::save_etas(c, &route_id, &etas, now_ms)).await
    }

    async fn save_proof(&self, proof: crate::NewProof, max_unattached: i64) -> StoreResult<crate::ProofSaved> {
        self.writer.write(move |c| proofs::save(c, &proof, max_unattached)).await
    }

    async fn proof(&self, token: &str) -> StoreResult<Option<crate::ProofInfo>> {
        self.read(|c| proofs::proof(c, token))
    }

    async fn proof_file(&self, token: &str) -> StoreResult<Option<crate::ProofFile>> {
        let token = token.to_string();
        self.read_blocking(move |c| proofs::file(c, &token)).await
    }

    async fn purge_proofs(&self, before_ms: i64) -> StoreResult<u64> {
        self.writer.write(move |c| proofs::purge(c, before_ms)).await
    }

    async fn driver_plans(&self, driver_id: &str, date: Date) -> StoreResult<Vec<Arc<StoredPlan>>> {
        let driver_id = driver_id.to_string();
        let cache = Arc::clone(&self.driver_plans);
        self.read_blocking(move |c| plans::plans_of_driver(c, &driver_id, date, &cache)).await?
    }
}

/// The unique indexes whose violation a caller turns into a field error, by name, with the
/// columns `SQLite` names in its message for each (it reports columns, not index names).
const UNIQUE_INDEXES: &[(&str, &str)] =
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

/// A principal from a row whose first three columns are a token's client, its kind and the
/// client's settings.
fn principal_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Principal> {
    Ok(Principal {
        client: ClientId(r.get(0)?),
        kind: parsed(r, 1, "token kind", TokenKind::parse)?,
        settings_json: r.get(2)?,
    })
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

fn saved_address_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SavedAddress> {
    Ok(SavedAddress {
        id: SavedAddressId(r.get(0)?),
        text: r.get(1)?,
        use_count: r.get(2)?,
        created_at: r.get(3)?,
        last_used_at: r.get(4)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why the claims write their `LIMIT` as a constant: with `ORDER BY … LIMIT ?` SQLite
    /// prepares the statement again at every execution; with the bucketed constant, never.
    #[test]
    fn a_constant_limit_keeps_a_claim_prepared_once() {
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
    fn lifecycle_migration_numbers_existing_events() {
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
                "INSERT INTO shipment_events (shipment_kind, shipment_id, status, at, actor) VALUES (?1, ?2, ?3, 'x', 'client')",
                params![kind, id, status],
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
            c.execute("INSERT INTO shipment_events (shipment_kind, shipment_id, seq, status, at, actor) VALUES ('drop_off', 1, 2, 's', 'x', 'ops')", [])
                .is_err()
        );
    }
}
