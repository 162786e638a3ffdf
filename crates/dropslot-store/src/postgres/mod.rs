//! The `PostgreSQL` backend (issue 10): tokio-postgres over a deadpool pool, so several
//! `dropslot serve` processes can share one database. Every unit of work is one transaction
//! on a pooled connection; the loads that decide a change lock their rows (`FOR UPDATE`),
//! uniqueness is the database's (unique indexes), and migrations run under an advisory lock
//! so processes may start at once.

use super::{Outbox, Principal, Scope, StoreError, StoreResult};
use crate::cache;
use crate::cache::{EpochCache, Stamp};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use dropslot_core::config::PostgresSettings;
use dropslot_core::geo::points::Candidate;
use dropslot_core::ids::SavedAddressId;
use jiff::Timestamp;
use jiff::tz::{Offset, TimeZone};
use sql::Sql;
use std::sync::Arc;
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

pub(crate) mod epoch;
pub(crate) mod sql;

/// The same versions and names as `SQLite`'s, one to one (a unit test compares them).
pub(crate) const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("../../migrations/postgres/0001_init.sql")),
    (2, "health_probe", include_str!("../../migrations/postgres/0002_health_probe.sql")),
    (3, "lifecycle", include_str!("../../migrations/postgres/0003_lifecycle.sql")),
    (4, "webhooks", include_str!("../../migrations/postgres/0004_webhooks.sql")),
    (5, "saved_address_uses", include_str!("../../migrations/postgres/0005_saved_address_uses.sql")),
    (6, "dashboard_sessions", include_str!("../../migrations/postgres/0006_dashboard_sessions.sql")),
    (7, "order_requests", include_str!("../../migrations/postgres/0007_order_requests.sql")),
    (8, "cache_epoch", include_str!("../../migrations/postgres/0008_cache_epoch.sql")),
    (9, "webhook_statistics", include_str!("../../migrations/postgres/0009_webhook_statistics.sql")),
    (10, "capacity", include_str!("../../migrations/postgres/0010_capacity.sql")),
    (11, "address_points", include_str!("../../migrations/postgres/0011_address_points.sql")),
    (12, "fleet", include_str!("../../migrations/postgres/0012_fleet.sql")),
    (13, "plans", include_str!("../../migrations/postgres/0013_plans.sql")),
    (14, "ops_sessions", include_str!("../../migrations/postgres/0014_ops_sessions.sql")),
    (15, "driver_requests", include_str!("../../migrations/postgres/0015_driver_requests.sql")),
    (16, "driver_positions", include_str!("../../migrations/postgres/0016_driver_positions.sql")),
    (17, "proofs", include_str!("../../migrations/postgres/0017_proofs.sql")),
    (18, "notifications", include_str!("../../migrations/postgres/0018_notifications.sql")),
    (19, "stop_etas", include_str!("../../migrations/postgres/0019_stop_etas.sql")),
    (20, "attempts", include_str!("../../migrations/postgres/0020_attempts.sql")),
    (21, "fleet_capacity", include_str!("../../migrations/postgres/0021_fleet_capacity.sql")),
    (22, "eta_windows", include_str!("../../migrations/postgres/0022_eta_windows.sql")),
    (23, "new_time", include_str!("../../migrations/postgres/0023_new_time.sql")),
    (24, "install_settings", include_str!("../../migrations/postgres/0024_install_settings.sql")),
    (25, "crash_repeats", include_str!("../../migrations/postgres/0025_crash_repeats.sql")),
    (26, "publishable_keys", include_str!("../../migrations/postgres/0026_publishable_keys.sql")),
    (27, "webhook_queue_keys", include_str!("../../migrations/postgres/0027_webhook_queue_keys.sql")),
];

/// The advisory lock every migrating process takes (any constant shared by all dropslot
/// binaries: "dropslot" in ASCII).
pub(crate) const MIGRATION_LOCK: i64 = 0x6472_6f70_736c_6f74;

pub struct PgStore {
    pub(crate) pool: Connections,
    pub(crate) outbox: Arc<dyn Outbox>,
    /// Started by the first order (it needs the runtime).
    pub(crate) orders: crate::cache::Lazy,
    /// Ops moves, batched the same way (started with the first move).
    pub(crate) moves: crate::cache::Lazy,
    pub(crate) order_writers: usize,
    pub(crate) stats: Arc<super::StoreStats>,
    /// This store's identity in a request's kept epoch (`store::cache`).
    pub(crate) epoch_id: usize,
    pub(crate) epoch_reads: epoch::EpochReads,
    /// Principals by token hash, and saved-address ids by pick-up text ("none" too: an order
    /// that creates the address bumps the epoch), each valid while `cache_epoch.n` is unchanged.
    pub(crate) principals: EpochCache<[u8; 32], Principal>,
    pub(crate) saved_ids: EpochCache<(Scope, String), Option<SavedAddressId>>,
    /// Whether `address_points` holds any point: while it holds none, a preview looks up no
    /// point at all.
    pub(crate) points_present: EpochCache<(), bool>,
    /// Recent lookups' candidates: a merchant's pick-up address is looked up again and again.
    pub(crate) point_lookups: EpochCache<cache::PointKey, Vec<Candidate>>,
    /// Today's published plans as driver calls read them, parsed once per version.
    pub(crate) driver_plans: crate::cache::PlanCache,
}

/// The connection pool, and the server it connects to: every connection is taken here, so
/// every failure to get one names the server and its reason (`pool_error`).
#[derive(Clone)]
pub(crate) struct Connections {
    pool: Pool,
    /// `host:port` (never the URL: it may hold a password).
    server: Arc<str>,
}

impl Connections {
    pub(crate) async fn get(&self) -> StoreResult<deadpool_postgres::Object> {
        self.pool.get().await.map_err(|e| pool_error(e, &self.server))
    }
}

/// Bumps the cache epoch: a data-modifying CTE of the statement that makes the change (which
/// appends `AND EXISTS (…)`: only when something changed), so it commits with the change.
pub(crate) const BUMP_EPOCH: &str = "UPDATE cache_epoch SET n = n + 1 WHERE id = 1";

impl PgStore {
    /// A pool over `url`; connects lazily, so a server that is down fails the first use
    /// (the start check's ping), not the parse.
    pub fn open(url: &str, settings: &PostgresSettings, outbox: Arc<dyn Outbox>) -> StoreResult<PgStore> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
            StoreError::Invalid(format!("{}: not a PostgreSQL URL: {e}", dropslot_core::config::redact_url(url)))
        })?;
        let server: Arc<str> = server_of(&config).into();
        config.connect_timeout(settings.connect_timeout);
        // Every statement is prepared once per connection (`sql.rs`); `force_generic_plan` plans
        // it once too. The server would otherwise plan each execution of a statement with an
        // array parameter anew (its custom plan for one element looks far cheaper than the
        // generic plan's guess of ten), about 2 ms of its CPU per ops move in issue 27's fan-out.
        // A generic plan made while a table is small (or never analysed) prices reading it
        // whole below looking ten keys up, and keeps that plan as the table grows: sequential
        // scans are therefore off for the service's sessions. Every statement it sends looks
        // rows up by key or by an indexed range; a table no index serves is still read whole.
        config.options(format!(
            "-c statement_timeout={} -c plan_cache_mode=force_generic_plan -c enable_seqscan=off",
            settings.statement_timeout.as_millis()
        ));
        config.application_name("dropslot");
        let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(settings.connect_timeout))
            .create_timeout(Some(settings.connect_timeout))
            .recycle_timeout(Some(settings.connect_timeout))
            .build()
            .map_err(|e| StoreError::Invalid(format!("the PostgreSQL pool: {e}")))?;
        let pool = Connections { pool, server };
        let epoch_reads = epoch::EpochReads::new(pool.clone());
        Ok(PgStore {
            pool,
            outbox,
            orders: crate::cache::Lazy::default(),
            moves: crate::cache::Lazy::default(),
            order_writers: settings.order_writers,
            stats: Arc::default(),
            epoch_id: cache::epoch_id(),
            epoch_reads,
            principals: EpochCache::new(10_000),
            saved_ids: EpochCache::new(4_096),
            points_present: EpochCache::new(1),
            point_lookups: EpochCache::new(16_384),
            driver_plans: crate::cache::PlanCache::new(crate::cache::PLAN_CACHE_PLANS),
        })
    }

    /// After this process committed a change of what the read caches hold (its statement bumped
    /// the epoch): its own caches dropped too, for the rest of the request that made the change,
    /// which keeps reading the epoch it read before (`store::cache::request_scope`).
    pub(crate) fn changed(&self) {
        self.principals.clear();
        self.saved_ids.clear();
        self.points_present.clear();
        self.point_lookups.clear();
    }

    /// The cache epoch: the one this request already read, else `cache_epoch.n`, read for
    /// this request and every other waiting with it (`epoch::EpochReads`).
    pub(crate) async fn epoch(&self) -> StoreResult<Stamp> {
        if let Some(epoch) = cache::request_epoch(self.epoch_id) {
            return Ok(epoch);
        }
        let epoch = self.epoch_reads.read().await?;
        cache::keep_request_epoch(self.epoch_id, epoch);
        Ok(epoch)
    }

    /// Tells the outbox how many deliveries a committed unit of work queued.
    pub(crate) fn notify(&self, queued: usize) {
        if queued > 0 {
            self.outbox.queued(queued);
        }
    }

    /// Tells the outbox how many recipient notifications a committed unit of work queued.
    pub(crate) fn notified(&self, n: usize) {
        if n > 0 {
            self.outbox.notified(n);
        }
    }

    pub(crate) async fn conn(&self) -> StoreResult<deadpool_postgres::Object> {
        // A get that takes over a millisecond waited: for a busy pool, or a connection to
        // open. (Asking the pool's status first would take its lock on every query.)
        let start = std::time::Instant::now();
        let got = self.pool.get().await;
        if start.elapsed() > std::time::Duration::from_millis(1) {
            self.stats.read_waits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        got
    }
}

/// Maps a driver error: connection loss, overload, shutdown, lock and serialisation failures
/// and timeouts → unavailable (503, retryable); the rest → backend (500).
#[allow(clippy::needless_pass_by_value, reason = "used as `.map_err(map_err)`")]
pub fn map_err(e: tokio_postgres::Error) -> StoreError {
    if e.is_closed() {
        return StoreError::Unavailable(describe(&e));
    }
    let Some(code) = e.code() else {
        // No SQLSTATE: an I/O or protocol error on the connection.
        return StoreError::Unavailable(describe(&e));
    };
    let retryable = [
        SqlState::T_R_SERIALIZATION_FAILURE,
        SqlState::T_R_DEADLOCK_DETECTED,
        SqlState::QUERY_CANCELED, // statement_timeout
        SqlState::LOCK_NOT_AVAILABLE,
        SqlState::TOO_MANY_CONNECTIONS,
        SqlState::ADMIN_SHUTDOWN,
        SqlState::CRASH_SHUTDOWN,
        SqlState::CANNOT_CONNECT_NOW,
        SqlState::DISK_FULL,
        SqlState::OUT_OF_MEMORY,
        SqlState::READ_ONLY_SQL_TRANSACTION,
    ];
    let class = &code.code()[..2];
    if retryable.contains(code) || matches!(class, "08" | "53" | "57") {
        StoreError::Unavailable(describe(&e))
    } else {
        StoreError::Backend(describe(&e).into())
    }
}

/// `host:port` of a configuration's first server (a socket directory shows as its path).
pub(crate) fn server_of(config: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}

/// Why no connection could be had from the pool, in the words of the server or of the
/// operating system, with the server it was for: `database "x" does not exist`, `role "y"
/// does not exist`, `connection refused (127.0.0.1:5439)`. Never the URL (it may hold a
/// password). Always retryable: the server may come back, or the operator fix it.
#[allow(clippy::needless_pass_by_value, reason = "used as `.map_err(|e| pool_error(e, server))`")]
pub(crate) fn pool_error(e: deadpool_postgres::PoolError, server: &str) -> StoreError {
    use deadpool_postgres::{PoolError, TimeoutType};
    let why = match &e {
        PoolError::Backend(e) => connect_error(e),
        PoolError::Timeout(TimeoutType::Create | TimeoutType::Wait) => {
            "no connection within the connect timeout (server down, overloaded, or the pool exhausted)".to_string()
        }
        other => other.to_string(),
    };
    StoreError::Unavailable(format!("cannot connect to PostgreSQL at {server}: {why}"))
}

/// A connection attempt's failure: the server's message (`FATAL 3D000: database "x" does not
/// exist`), else the innermost cause (`connection refused`), lower-cased as a clause.
pub(crate) fn connect_error(e: &tokio_postgres::Error) -> String {
    if e.as_db_error().is_some() {
        return describe(e);
    }
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    if let Some(io) = cause.downcast_ref::<std::io::Error>() {
        let text = match io.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
            std::io::ErrorKind::TimedOut => "connection timed out".to_string(),
            _ => io.to_string(),
        };
        return text;
    }
    let text = cause.to_string();
    if text == e.to_string() { text } else { format!("{e}: {text}") }
}

/// The server's own words for a database error (`tokio_postgres` displays only "db error"):
/// its SQLSTATE, message and detail, for the operator's log.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let detail = db.detail().map(|d| format!(" ({d})")).unwrap_or_default();
            format!("{} {}: {}{detail}", db.severity(), db.code().code(), db.message())
        }
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

/// A column as its Rust type; a NULL or a type this code does not expect is an error, never a
/// panic (`Row::get` would panic).
pub(crate) fn column<'a, T: tokio_postgres::types::FromSql<'a>>(
    r: &'a tokio_postgres::Row,
    i: usize,
) -> Result<T, StoreError> {
    r.try_get(i).map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))
}

/// A stored BIGINT narrowed to the type the domain counts in (attempts, an event number); a
/// value out of range is corrupt data, never wrapped.
pub(crate) fn narrow<T: TryFrom<i64>>(value: i64, what: &str) -> Result<T, StoreError> {
    T::try_from(value).map_err(|_| StoreError::Corrupt(format!("stored {what} {value} is out of range")))
}

/// A status column (see `parsed`).
pub(crate) fn status_column(r: &tokio_postgres::Row, i: usize) -> Result<dropslot_core::shipments::Status, StoreError> {
    parsed(column(r, i)?, "status", dropslot_core::shipments::Status::parse)
}

/// A text column parsed into its type (a token kind, a status): a value this binary does not
/// know is an error, never a guess.
pub(crate) fn parsed<T>(text: &str, what: &str, parse: fn(&str) -> Option<T>) -> StoreResult<T> {
    parse(text).ok_or_else(|| StoreError::Corrupt(format!("unknown {what} {text:?}")))
}

/// A stored JSON column read into its storage struct; one that does not parse is an error.
pub(crate) fn json_column<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("stored {what} does not parse: {e}")))
}

/// A storage struct as a JSON column.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("cannot encode a stored value: {e}")))
}

/// An instant as the `SQLite` backend stores and returns it: RFC 3339 in UTC.
pub(crate) fn utc_text(at: Timestamp) -> String {
    at.to_string()
}

/// An instant shown in the offset it was recorded with (seconds east of UTC), as
/// `quote::schedule::iso` writes it: what `SQLite` keeps as text.
pub(crate) fn zoned_text(at: Timestamp, offset_seconds: i32) -> StoreResult<String> {
    let offset = Offset::from_seconds(offset_seconds)
        .map_err(|e| StoreError::Corrupt(format!("stored UTC offset {offset_seconds}: {e}")))?;
    Ok(at.to_zoned(TimeZone::fixed(offset)).timestamp().display_with_offset(offset).to_string())
}

/// SHA-256 of a migration's SQL, hex: recorded when it is applied, compared on every start.
pub(crate) fn checksum(sql: &str) -> String {
    use sha2::{Digest, Sha256};
    dropslot_core::ids::hex(&Sha256::digest(sql.as_bytes()))
}

/// Applies the missing migrations in one transaction under the advisory lock (a second
/// process waits, then finds them applied). Refuses an applied migration whose SQL changed,
/// and one this binary does not know.
pub(crate) async fn migrate(c: &mut deadpool_postgres::Object) -> StoreResult<Vec<i64>> {
    let tx = c.transaction().await.map_err(map_err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(map_err)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL, checksum TEXT NOT NULL)",
    )
    .await
    .map_err(map_err)?;
    let applied: Vec<(i64, String, String)> = tx
        .query("SELECT version, name, checksum FROM schema_migrations ORDER BY version", &[])
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    for (version, name, recorded) in &applied {
        let Some((_, _, sql)) = MIGRATIONS.iter().find(|(v, _, _)| v == version) else {
            return Err(StoreError::Invalid(format!(
                "the database has migration {version} ({name}), which this binary does not know: it was migrated by a newer dropslot"
            )));
        };
        let shipped = checksum(sql);
        if *recorded != shipped {
            return Err(StoreError::Invalid(format!(
                "migration {version} ({name}) has changed since it was applied to this database (checksum {recorded}, this binary has {shipped}); applied migrations must never be edited"
            )));
        }
    }
    let mut done = Vec::new();
    for (version, name, sql) in MIGRATIONS {
        if applied.iter().any(|(v, _, _)| v == version) {
            continue;
        }
        tx.batch_execute(sql).await.map_err(map_err)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, applied_at, checksum) VALUES ($1, $2, $3, $4)",
            &[version, name, &Timestamp::now(), &checksum(sql)],
        )
        .await
        .map_err(map_err)?;
        done.push(*version);
    }
    tx.commit().await.map_err(map_err)?;
    Ok(done)
}

/// A saved address with its use count and last use, read from its pick-ups (the latest
/// pick-up's order gives the time); the `FROM` clause aliases the table `s`.
pub(crate) const SAVED_ADDRESS_COLUMNS: &str = "s.id, s.text,
        (SELECT count(*) FROM pick_up_shipments p WHERE p.saved_address_id = s.id),
        s.created_at, s.created_offset, coalesce(u.created_at, s.created_at), coalesce(u.created_offset, s.created_offset)
    FROM saved_addresses s
    LEFT JOIN LATERAL (
        SELECT o.created_at, o.created_offset FROM pick_up_shipments p JOIN orders o ON o.id = p.order_id
        WHERE p.saved_address_id = s.id ORDER BY p.id DESC LIMIT 1
    ) u ON true";

/// Runs `$body` (which uses `$tx`, a `&tokio_postgres::Transaction`) in one transaction on a
/// pooled connection, and commits it; an error rolls it back (the transaction is dropped).
macro_rules! in_tx {
    ($self:ident, |$tx:ident| $body:expr) => {{
        let mut conn = $self.conn().await?;
        let owned = conn.transaction().await.map_err(map_err)?;
        let $tx: &deadpool_postgres::Transaction<'_> = &owned;
        let out = $body;
        owned.commit().await.map_err(map_err)?;
        out
    }};
}
pub(crate) use in_tx;

#[cfg(test)]
mod tests {
    use super::*;

    /// The two backends' migrations match one to one, by version and name.
    #[test]
    pub(crate) fn migrations_match_sqlite_by_version_and_name() {
        let pg: Vec<(i64, &str)> = MIGRATIONS.iter().map(|(v, n, _)| (*v, *n)).collect();
        let sqlite: Vec<(i64, &str)> = crate::sqlite::MIGRATIONS.iter().map(|(v, n, _)| (*v, *n)).collect();
        assert_eq!(pg, sqlite);
    }

    #[test]
    pub(crate) fn zoned_text_writes_what_sqlite_stores() {
        let at: Timestamp = "2026-11-23T17:00:00Z".parse().unwrap();
        assert_eq!(zoned_text(at, -5 * 3600).unwrap(), "2026-11-23T12:00:00-05:00");
        assert!(zoned_text(at, 100_000).is_err());
    }
}
