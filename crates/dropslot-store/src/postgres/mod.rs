//! The `PostgreSQL` backend (issue 10): tokio-postgres over a deadpool pool, so several
//! `dropslot serve` processes can share one database. Every unit of work is one transaction
//! on a pooled connection; the loads that decide a change lock their rows (`FOR UPDATE`),
//! uniqueness is the database's (unique indexes), and migrations run under an advisory lock
//! so processes may start at once.

mod batch;
mod capacity;
mod epoch;
mod fleet;
mod insert;
mod lifecycle;
mod moves;
mod notify;
mod orders;
mod outbox;
mod plans;
mod points;
mod proofs;
mod reads;
mod requests;
mod sql;
mod upkeep;
mod webhooks;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::{Offset, TimeZone};
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

use sql::Sql;

use super::{
    AttemptRecord, Claimed, ClaimedRequest, CreateOrderError, CreatedOrder, DeleteOutcome, DriverUpdate, EndpointPatch,
    LabelKind, LabelSource, MoveOutcome, NewEndpoint, NewOrder, NewRequest, NewSession, NewStaffToken, NewToken,
    OrderFilter, Outbox, Principal, RenderFn, RequestEnd, ResendOutcome, SavedAddress, ScenarioResult, Scope,
    Selection, SessionRecord, StaffKind, StaffPrincipal, StaffTokenInfo, Store, StoreError, StoreResult,
    StoredDelivery, StoredDriver, StoredEndpoint, StoredOrder, StoredRequest, StoredResponse, StoredShipment,
    TokenHash, TokenInfo, TokenKind, Tracking, Visibility,
};
use crate::cache::{self, EpochCache, Stamp};
use crate::{SaveOutcome, StoredPlan};
use dropslot_core::config::PostgresSettings;
use dropslot_core::dispatch::{Candidate as PlanCandidate, Plan, PlanKind};
use dropslot_core::fleet::Driver;
use dropslot_core::geo::points::{AddressPoint, Candidate, PointQuery};
use dropslot_core::ids::{ClientId, CustomCode, SavedAddressId};
use dropslot_core::quote::capacity::{Load, Override, SlotDate};

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
];

/// The advisory lock every migrating process takes (any constant shared by all dropslot
/// binaries: "dropslot" in ASCII).
const MIGRATION_LOCK: i64 = 0x6472_6f70_736c_6f74;

pub struct PgStore {
    pool: Connections,
    outbox: Arc<dyn Outbox>,
    /// Started by the first order (it needs the runtime).
    orders: std::sync::OnceLock<batch::Batcher>,
    /// Ops moves, batched the same way (started with the first move).
    moves: std::sync::OnceLock<moves::Movers>,
    order_writers: usize,
    stats: Arc<super::StoreStats>,
    /// This store's identity in a request's kept epoch (`store::cache`).
    epoch_id: usize,
    epoch_reads: epoch::EpochReads,
    /// Principals by token hash, and saved-address ids by pick-up text ("none" too: an order
    /// that creates the address bumps the epoch), each valid while `cache_epoch.n` is unchanged.
    principals: EpochCache<[u8; 32], Principal>,
    saved_ids: EpochCache<(Scope, String), Option<SavedAddressId>>,
    /// Whether `address_points` holds any point: while it holds none, a preview looks up no
    /// point at all.
    points_present: EpochCache<(), bool>,
    /// Recent lookups' candidates: a merchant's pick-up address is looked up again and again.
    point_lookups: EpochCache<cache::PointKey, Vec<Candidate>>,
    /// Today's published plans as driver calls read them, parsed once per version.
    driver_plans: crate::plans::PlanCache,
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
const BUMP_EPOCH: &str = "UPDATE cache_epoch SET n = n + 1 WHERE id = 1";

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
            orders: std::sync::OnceLock::new(),
            moves: std::sync::OnceLock::new(),
            order_writers: settings.order_writers,
            stats: Arc::default(),
            epoch_id: cache::epoch_id(),
            epoch_reads,
            principals: EpochCache::new(10_000),
            saved_ids: EpochCache::new(4_096),
            points_present: EpochCache::new(1),
            point_lookups: EpochCache::new(16_384),
            driver_plans: crate::plans::PlanCache::new(crate::plans::PLAN_CACHE_PLANS),
        })
    }

    /// After this process committed a change of what the read caches hold (its statement bumped
    /// the epoch): its own caches dropped too, for the rest of the request that made the change,
    /// which keeps reading the epoch it read before (`store::cache::request_scope`).
    fn changed(&self) {
        self.principals.clear();
        self.saved_ids.clear();
        self.points_present.clear();
        self.point_lookups.clear();
    }

    /// The cache epoch: the one this request already read, else `cache_epoch.n`, read for
    /// this request and every other waiting with it (`epoch::EpochReads`).
    async fn epoch(&self) -> StoreResult<Stamp> {
        if let Some(epoch) = cache::request_epoch(self.epoch_id) {
            return Ok(epoch);
        }
        let epoch = self.epoch_reads.read().await?;
        cache::keep_request_epoch(self.epoch_id, epoch);
        Ok(epoch)
    }

    /// Tells the outbox how many deliveries a committed unit of work queued.
    fn notify(&self, queued: usize) {
        if queued > 0 {
            self.outbox.queued(queued);
        }
    }

    /// Tells the outbox how many recipient notifications a committed unit of work queued.
    fn notified(&self, n: usize) {
        if n > 0 {
            self.outbox.notified(n);
        }
    }

    async fn conn(&self) -> StoreResult<deadpool_postgres::Object> {
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
fn describe(e: &tokio_postgres::Error) -> String {
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
fn utc_text(at: Timestamp) -> String {
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
fn checksum(sql: &str) -> String {
    use sha2::{Digest, Sha256};
    dropslot_core::ids::hex(&Sha256::digest(sql.as_bytes()))
}

/// Applies the missing migrations in one transaction under the advisory lock (a second
/// process waits, then finds them applied). Refuses an applied migration whose SQL changed,
/// and one this binary does not know.
async fn migrate(c: &mut deadpool_postgres::Object) -> StoreResult<Vec<i64>> {
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

fn saved_address_row(r: &tokio_postgres::Row) -> StoreResult<SavedAddress> {
    Ok(SavedAddress {
        id: SavedAddressId(r.get(0)),
        text: r.get(1),
        use_count: r.get(2),
        created_at: zoned_text(r.get(3), r.get(4))?,
        last_used_at: zoned_text(r.get(5), r.get(6))?,
    })
}

/// A saved address with its use count and last use, read from its pick-ups (the latest
/// pick-up's order gives the time); the `FROM` clause aliases the table `s`.
const SAVED_ADDRESS_COLUMNS: &str = "s.id, s.text,
        (SELECT count(*) FROM pick_up_shipments p WHERE p.saved_address_id = s.id),
        s.created_at, s.created_offset, coalesce(u.created_at, s.created_at), coalesce(u.created_offset, s.created_offset)
    FROM saved_addresses s
    LEFT JOIN LATERAL (
        SELECT o.created_at, o.created_offset FROM pick_up_shipments p JOIN orders o ON o.id = p.order_id
        WHERE p.saved_address_id = s.id ORDER BY p.id DESC LIMIT 1
    ) u ON true";

/// A principal from a row whose first three columns are a token's client, its kind and the
/// client's settings.
fn principal_row(r: &tokio_postgres::Row) -> StoreResult<Principal> {
    Ok(Principal {
        client: ClientId(r.get(0)),
        kind: parsed(r.get(1), "token kind", TokenKind::parse)?,
        settings_json: r.get(2),
    })
}

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

#[async_trait]
impl Store for PgStore {
    fn stats(&self) -> Arc<super::StoreStats> {
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

    async fn create_client(&self, name: &str, now: Timestamp) -> StoreResult<ClientId> {
        let c = self.conn().await?;
        let row = c
            .query_one("INSERT INTO clients (name, created_at) VALUES ($1, $2) RETURNING id", &[&name, &now])
            .await
            .map_err(map_err)?;
        Ok(ClientId(row.get(0)))
    }

    async fn client_count(&self) -> StoreResult<i64> {
        let c = self.conn().await?;
        Ok(c.query_one("SELECT count(*) FROM clients", &[]).await.map_err(map_err)?.get(0))
    }

    async fn client_exists(&self, id: ClientId) -> StoreResult<bool> {
        let c = self.conn().await?;
        let row =
            c.query_one("SELECT EXISTS (SELECT 1 FROM clients WHERE id = $1)", &[&id.0]).await.map_err(map_err)?;
        Ok(row.get(0))
    }

    async fn set_client_settings(&self, id: ClientId, settings_json: Option<String>) -> StoreResult<bool> {
        let c = self.conn().await?;
        let row = c
            .query_one(
                &format!(
                    "WITH changed AS (UPDATE clients SET settings_json = $2 WHERE id = $1 RETURNING 1),
                     bump AS ({BUMP_EPOCH} AND EXISTS (SELECT 1 FROM changed))
                     SELECT count(*) FROM changed"
                ),
                &[&id.0, &settings_json],
            )
            .await
            .map_err(map_err)?;
        self.changed();
        Ok(row.get::<_, i64>(0) == 1)
    }

    async fn insert_token(&self, t: NewToken, now: Timestamp) -> StoreResult<()> {
        let c = self.conn().await?;
        c.execute(
            "INSERT INTO tokens (client_id, kind, hash, prefix, last4, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&t.client.0, &t.kind.as_str(), &&t.hash.0[..], &t.prefix, &t.last4, &now],
        )
        .await
        .map_err(map_err)?;
        Ok(())
    }

    async fn principal(&self, hash: &TokenHash) -> StoreResult<Option<Principal>> {
        // The epoch is read before the token (a change committed after this read bumps it).
        let epoch = self.epoch().await?;
        if let Some(cached) = self.principals.get(&hash.0, epoch) {
            return Ok(Some(cached));
        }
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT t.client_id, t.kind, c.settings_json FROM tokens t JOIN clients c ON c.id = t.client_id
                 WHERE t.hash = $1 AND t.revoked_at IS NULL",
                &[&&hash.0[..]],
            )
            .await
            .map_err(map_err)?;
        let found = row.as_ref().map(principal_row).transpose()?;
        // Only a token that exists is cached: unknown ones cannot fill the cache.
        if let Some(principal) = &found {
            self.principals.put(hash.0, epoch, principal.clone());
        }
        Ok(found)
    }

    async fn list_tokens(&self, client: ClientId) -> StoreResult<Vec<TokenInfo>> {
        let c = self.conn().await?;
        c.query(
            "SELECT prefix, last4, kind, created_at, revoked_at FROM tokens WHERE client_id = $1 ORDER BY id",
            &[&client.0],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| {
            Ok(TokenInfo {
                prefix: r.get(0),
                last4: r.get(1),
                kind: parsed(r.get(2), "token kind", TokenKind::parse)?,
                created_at: utc_text(r.get(3)),
                revoked_at: r.get::<_, Option<Timestamp>>(4).map(utc_text),
            })
        })
        .collect()
    }

    async fn revoke_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        let c = self.conn().await?;
        let row = c
            .query_one(
                &format!(
                    "WITH revoked AS (UPDATE tokens SET revoked_at = $2 WHERE prefix = $1 AND revoked_at IS NULL RETURNING 1),
                     bump AS ({BUMP_EPOCH} AND EXISTS (SELECT 1 FROM revoked))
                     SELECT count(*) FROM revoked"
                ),
                &[&prefix, &now],
            )
            .await
            .map_err(map_err)?;
        self.changed();
        Ok(row.get::<_, i64>(0) == 1)
    }

    async fn insert_operator_token(&self, token: NewStaffToken, now: Timestamp) -> StoreResult<()> {
        let c = self.conn().await?;
        fleet::insert_token(&c, StaffKind::Operator, None, &token, now).await
    }

    async fn staff_principal(&self, hash: &TokenHash) -> StoreResult<Option<StaffPrincipal>> {
        let c = self.conn().await?;
        fleet::principal(&c, hash).await
    }

    async fn list_staff_tokens(&self, kind: StaffKind) -> StoreResult<Vec<StaffTokenInfo>> {
        let c = self.conn().await?;
        fleet::list_tokens(&c, kind).await
    }

    async fn revoke_staff_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        let c = self.conn().await?;
        fleet::revoke_token(&c, prefix, now).await
    }

    async fn create_driver(
        &self,
        id: &str,
        driver: Driver,
        token: NewStaffToken,
        now: Timestamp,
    ) -> StoreResult<StoredDriver> {
        in_tx!(self, |tx| fleet::create_driver(tx, id, &driver, &token, now).await)
    }

    async fn driver(&self, id: &str) -> StoreResult<Option<StoredDriver>> {
        let c = self.conn().await?;
        fleet::driver(&c, id).await
    }

    async fn drivers(&self, depot: Option<&str>) -> StoreResult<Vec<StoredDriver>> {
        let c = self.conn().await?;
        fleet::drivers(&c, depot).await
    }

    async fn update_driver(&self, id: &str, version: i64, driver: Driver, now: Timestamp) -> StoreResult<DriverUpdate> {
        let c = self.conn().await?;
        fleet::update_driver(&c, id, version, &driver, now).await
    }

    async fn delete_driver(&self, id: &str, now: Timestamp) -> StoreResult<bool> {
        in_tx!(self, |tx| fleet::delete_driver(tx, id, now).await)
    }

    async fn reissue_driver_token(&self, id: &str, token: NewStaffToken, now: Timestamp) -> StoreResult<bool> {
        in_tx!(self, |tx| fleet::reissue(tx, id, &token, now).await)
    }

    async fn create_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<Option<Principal>> {
        let c = self.conn().await?;
        // One statement: the session is written only for an unrevoked token, and the answer
        // is that token's principal.
        let row = c
            .query_opt(
                "WITH t AS (
                   SELECT t.id, t.client_id, t.kind, c.settings_json FROM tokens t JOIN clients c ON c.id = t.client_id
                   WHERE t.hash = $1 AND t.revoked_at IS NULL),
                 ins AS (
                   INSERT INTO dashboard_sessions (hash, token_id, csrf, created_ms, last_seen_ms)
                   SELECT $2, id, $3, $4, $4 FROM t RETURNING token_id)
                 SELECT t.client_id, t.kind, t.settings_json FROM t JOIN ins ON ins.token_id = t.id",
                &[&&token.0[..], &&session.hash.0[..], &session.csrf, &session.now_ms],
            )
            .await
            .map_err(map_err)?;
        row.as_ref().map(principal_row).transpose()
    }

    async fn session(
        &self,
        session: &TokenHash,
        idle_since_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<SessionRecord>> {
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT t.client_id, t.kind, c.settings_json, s.csrf, t.prefix, s.last_seen_ms
                 FROM dashboard_sessions s JOIN tokens t ON t.id = s.token_id JOIN clients c ON c.id = t.client_id
                 WHERE s.hash = $1 AND t.revoked_at IS NULL AND s.last_seen_ms >= $2",
                &[&&session.0[..], &idle_since_ms],
            )
            .await
            .map_err(map_err)?;
        let Some(r) = row else { return Ok(None) };
        let record = SessionRecord { principal: principal_row(&r)?, csrf: r.get(3), token_prefix: r.get(4) };
        let last_seen: i64 = r.get(5);
        if last_seen < now_ms - 60_000 {
            c.execute(
                "UPDATE dashboard_sessions SET last_seen_ms = $2 WHERE hash = $1 AND last_seen_ms < $2",
                &[&&session.0[..], &now_ms],
            )
            .await
            .map_err(map_err)?;
        }
        Ok(Some(record))
    }

    async fn create_ops_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<bool> {
        let c = self.conn().await?;
        let n = c
            .execute(
                "INSERT INTO ops_sessions (hash, staff_token_id, csrf, created_ms, last_seen_ms)
                 SELECT $1, id, $2, $3, $3 FROM staff_tokens
                 WHERE hash = $4 AND kind = 'operator' AND revoked_at IS NULL",
                &[&&session.hash.0[..], &session.csrf, &session.now_ms, &&token.0[..]],
            )
            .await
            .map_err(map_err)?;
        Ok(n == 1)
    }

    async fn ops_session(
        &self,
        session: &TokenHash,
        idle_since_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<crate::OpsSessionRecord>> {
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT s.csrf, t.prefix, s.last_seen_ms FROM ops_sessions s JOIN staff_tokens t ON t.id = s.staff_token_id
                 WHERE s.hash = $1 AND t.kind = 'operator' AND t.revoked_at IS NULL AND s.last_seen_ms >= $2",
                &[&&session.0[..], &idle_since_ms],
            )
            .await
            .map_err(map_err)?;
        let Some(r) = row else { return Ok(None) };
        let record = crate::OpsSessionRecord { csrf: r.get(0), token_prefix: r.get(1) };
        let last_seen: i64 = r.get(2);
        if last_seen < now_ms - 60_000 {
            c.execute(
                "UPDATE ops_sessions SET last_seen_ms = $2 WHERE hash = $1 AND last_seen_ms < $2",
                &[&&session.0[..], &now_ms],
            )
            .await
            .map_err(map_err)?;
        }
        Ok(Some(record))
    }

    async fn end_ops_session(&self, session: &TokenHash) -> StoreResult<()> {
        let c = self.conn().await?;
        c.execute("DELETE FROM ops_sessions WHERE hash = $1", &[&&session.0[..]]).await.map_err(map_err)?;
        Ok(())
    }

    async fn end_session(&self, session: &TokenHash) -> StoreResult<()> {
        let c = self.conn().await?;
        c.execute("DELETE FROM dashboard_sessions WHERE hash = $1", &[&&session.0[..]]).await.map_err(map_err)?;
        Ok(())
    }

    async fn saved_address_id_by_text(&self, scope: Scope, normalized: &str) -> StoreResult<Option<SavedAddressId>> {
        let epoch = self.epoch().await?;
        let key = (scope, normalized.to_string());
        if let Some(cached) = self.saved_ids.get(&key, epoch) {
            return Ok(cached);
        }
        let c = self.conn().await?;
        let row = c
            .query_typed(
                "SELECT id FROM saved_addresses WHERE client_id = $1 AND mode = $2 AND normalized = $3",
                &[(&scope.client.0, Type::INT8), (&scope.mode.as_str(), Type::TEXT), (&normalized, Type::TEXT)],
            )
            .await
            .map_err(map_err)?;
        let found = row.first().map(|r| lifecycle::column(r, 0).map(SavedAddressId)).transpose()?;
        // "None" too: an order that creates this address bumps the epoch in its statement.
        self.saved_ids.put(key, epoch, found);
        Ok(found)
    }

    async fn import_address_points(&self, batch: Vec<AddressPoint>) -> StoreResult<u64> {
        let c = self.conn().await?;
        let added = points::insert(&c, &batch).await?;
        self.changed();
        Ok(added)
    }

    async fn address_points_present(&self) -> StoreResult<bool> {
        // The epoch is read before the table: an import committed after this read moves it.
        let epoch = self.epoch().await?;
        if let Some(present) = self.points_present.get(&(), epoch) {
            return Ok(present);
        }
        let present = points::any(&self.conn().await?).await?;
        self.points_present.put((), epoch, present);
        Ok(present)
    }

    async fn address_point_candidates(&self, queries: &[PointQuery]) -> StoreResult<Vec<Vec<Candidate>>> {
        if queries.is_empty() {
            return Ok(Vec::new());
        }
        let epoch = self.epoch().await?;
        cache::points_through(&self.point_lookups, Some(epoch), queries, |missing| async move {
            points::candidates(&self.conn().await?, &missing).await
        })
        .await
    }

    async fn saved_address(&self, scope: Scope, id: SavedAddressId) -> StoreResult<Option<SavedAddress>> {
        let c = self.conn().await?;
        c.query_opt(
            &format!("SELECT {SAVED_ADDRESS_COLUMNS} WHERE s.client_id = $1 AND s.mode = $2 AND s.id = $3"),
            &[&scope.client.0, &scope.mode.as_str(), &id.0],
        )
        .await
        .map_err(map_err)?
        .as_ref()
        .map(saved_address_row)
        .transpose()
    }

    async fn list_saved_addresses(&self, scope: Scope) -> StoreResult<Vec<SavedAddress>> {
        let c = self.conn().await?;
        c.query(
            &format!(
                "SELECT {SAVED_ADDRESS_COLUMNS} WHERE s.client_id = $1 AND s.mode = $2 ORDER BY 6 DESC, s.id DESC"
            ),
            &[&scope.client.0, &scope.mode.as_str()],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(saved_address_row)
        .collect()
    }

    async fn delete_saved_address(&self, scope: Scope, id: SavedAddressId) -> StoreResult<bool> {
        let c = self.conn().await?;
        let row = c
            .query_one(
                &format!(
                    "WITH deleted AS (DELETE FROM saved_addresses WHERE client_id = $1 AND mode = $2 AND id = $3 RETURNING 1),
                     bump AS ({BUMP_EPOCH} AND EXISTS (SELECT 1 FROM deleted))
                     SELECT count(*) FROM deleted"
                ),
                &[&scope.client.0, &scope.mode.as_str(), &id.0],
            )
            .await
            .map_err(map_err)?;
        self.changed();
        Ok(row.get::<_, i64>(0) == 1)
    }

    async fn idempotent_response(
        &self,
        scope: Scope,
        key: &str,
        since: Timestamp,
    ) -> StoreResult<Option<StoredResponse>> {
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT request_hash, status, body FROM idempotency_keys
                 WHERE client_id = $1 AND mode = $2 AND key = $3 AND created_at >= $4",
                &[&scope.client.0, &scope.mode.as_str(), &key, &since.as_second()],
            )
            .await
            .map_err(map_err)?;
        row.map(|r| {
            let status: i64 = r.get(1);
            Ok(StoredResponse {
                request_hash: r.get(0),
                status: u16::try_from(status)
                    .map_err(|_| StoreError::Corrupt(format!("stored HTTP status {status}")))?,
                body: r.get(2),
            })
        })
        .transpose()
    }

    async fn create_order(
        &self,
        scope: Scope,
        order: NewOrder,
        render: RenderFn,
    ) -> Result<CreatedOrder, CreateOrderError> {
        // An order that completes a request is written alone: its transaction also holds and
        // finishes the request, which a batch's all-or-nothing retry would not keep apart.
        if order.idempotency.is_none() && order.completes.is_none() {
            let batcher = self
                .orders
                .get_or_init(|| batch::Batcher::start(&self.pool, &self.outbox, self.order_writers, &self.stats));
            let order = batcher.create(scope, order).await?;
            return Ok(CreatedOrder { order, body: None });
        }
        let mut sink = outbox::Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let created = in_tx!(self, |tx| insert::insert_order(tx, &mut sink, scope, &order, &render).await?);
        self.notify(sink.queued);
        self.notified(sink.notified);
        Ok(created)
    }

    async fn delete_parcel_by_custom_code(
        &self,
        scope: Scope,
        code: &CustomCode,
        now: Timestamp,
    ) -> StoreResult<DeleteOutcome> {
        let mut sink = outbox::Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let outcome = in_tx!(self, |tx| orders::delete_parcel(tx, &mut sink, scope, code, now).await?);
        self.notify(sink.queued);
        self.notified(sink.notified);
        Ok(outcome)
    }

    async fn queue_request(&self, scope: Scope, request: NewRequest) -> Result<(), CreateOrderError> {
        in_tx!(self, |tx| requests::queue(tx, scope, &request).await?);
        Ok(())
    }

    async fn order_request(&self, scope: Scope, request_id: &str) -> StoreResult<Option<StoredRequest>> {
        requests::get(&self.conn().await?, scope, request_id).await
    }

    async fn claim_requests(&self, now_ms: i64, lease_until_ms: i64, limit: usize) -> StoreResult<Vec<ClaimedRequest>> {
        let claimed = in_tx!(self, |tx| requests::claim(tx, now_ms, lease_until_ms, limit).await?);
        Ok(claimed)
    }

    async fn fail_request(&self, end: RequestEnd, errors_json: String) -> StoreResult<bool> {
        let mut sink = outbox::Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let failed = in_tx!(self, |tx| requests::fail(tx, &mut sink, &end, &errors_json).await?);
        self.notify(sink.queued);
        self.notified(sink.notified);
        Ok(failed)
    }

    async fn next_request_due_ms(&self) -> StoreResult<Option<i64>> {
        requests::next_due_ms(&self.conn().await?).await
    }

    async fn sandbox_candidates(&self, scope: Scope, selection: Selection) -> StoreResult<Vec<i64>> {
        lifecycle::sandbox_candidates(&self.conn().await?, scope, &selection).await
    }

    async fn run_scenario(
        &self,
        scope: Scope,
        ids: Vec<i64>,
        scenario: dropslot_core::shipments::Scenario,
        now: Timestamp,
    ) -> StoreResult<Vec<ScenarioResult>> {
        let mut sink = outbox::Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let results = in_tx!(self, |tx| lifecycle::run_scenario(tx, &mut sink, scope, &ids, scenario, now).await?);
        self.notify(sink.queued);
        self.notified(sink.notified);
        Ok(results)
    }

    async fn ops_move(
        &self,
        unique_id: &str,
        m: dropslot_core::shipments::Move,
        now: Timestamp,
    ) -> StoreResult<MoveOutcome<Box<StoredShipment>>> {
        let movers = self.moves.get_or_init(|| moves::Movers::start(&self.pool, &self.outbox, self.order_writers));
        movers.make(unique_id, m, now).await
    }

    async fn driver_move(
        &self,
        key: crate::DriverKey,
        unique_id: &str,
        m: dropslot_core::shipments::Move,
        attach: Vec<String>,
        now: Timestamp,
    ) -> StoreResult<crate::DriverMove> {
        let mut sink = outbox::Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let outcome =
            in_tx!(self, |tx| lifecycle::driver_move(tx, &mut sink, &key, unique_id, &m, &attach, now).await?);
        self.notify(sink.queued);
        self.notified(sink.notified);
        Ok(outcome)
    }

    async fn pick_up_scan(&self, pick_up_code: &str, now: Timestamp) -> StoreResult<MoveOutcome> {
        let mut sink = outbox::Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let outcome = in_tx!(self, |tx| lifecycle::pick_up_scan(tx, &mut sink, pick_up_code, now).await?);
        self.notify(sink.queued);
        self.notified(sink.notified);
        Ok(outcome)
    }

    async fn shipment(&self, visible: Visibility, unique_id: &str) -> StoreResult<Option<StoredShipment>> {
        reads::shipment(&self.conn().await?, visible, unique_id).await
    }

    async fn progress_of(
        &self,
        unique_ids: Vec<String>,
    ) -> StoreResult<Vec<(String, dropslot_core::shipments::Status, Timestamp)>> {
        reads::progress_of(&self.conn().await?, &unique_ids).await
    }

    async fn pick_up_members(&self, pick_up_unique_id: &str) -> StoreResult<Vec<String>> {
        reads::pick_up_members(&self.conn().await?, pick_up_unique_id).await
    }

    async fn order(&self, scope: Scope, unique_id: &str) -> StoreResult<Option<StoredOrder>> {
        reads::order(&self.conn().await?, scope, unique_id).await
    }

    async fn orders(&self, scope: Scope, before: Option<i64>, limit: usize) -> StoreResult<Vec<StoredOrder>> {
        reads::orders(&self.conn().await?, scope, before, limit).await
    }

    async fn find_orders(
        &self,
        scope: Scope,
        filter: &OrderFilter,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<StoredOrder>> {
        reads::find_orders(&self.conn().await?, scope, filter, before, limit).await
    }

    async fn parcel_by_custom_code(
        &self,
        scope: Scope,
        code: &CustomCode,
    ) -> StoreResult<Option<(String, StoredShipment)>> {
        reads::parcel_by_custom_code(&self.conn().await?, scope, code.as_str()).await
    }

    async fn tracking(&self, code: &str) -> StoreResult<Option<Tracking>> {
        reads::tracking(&self.conn().await?, code).await
    }

    async fn label_source(&self, kind: LabelKind, token: &str) -> StoreResult<Option<LabelSource>> {
        orders::label_rows(&self.conn().await?, kind, token).await?.map(crate::labels::assemble).transpose()
    }

    async fn create_endpoint(&self, scope: Scope, e: NewEndpoint, now: Timestamp) -> StoreResult<StoredEndpoint> {
        Ok(in_tx!(self, |tx| webhooks::create_endpoint(tx, scope, &e, now).await?))
    }

    async fn endpoints(&self, scope: Scope) -> StoreResult<Vec<StoredEndpoint>> {
        webhooks::endpoints(&self.conn().await?, scope).await
    }

    async fn endpoint(&self, scope: Scope, id: i64) -> StoreResult<Option<StoredEndpoint>> {
        webhooks::endpoint(&self.conn().await?, scope, id).await
    }

    async fn update_endpoint(
        &self,
        scope: Scope,
        id: i64,
        patch: EndpointPatch,
        now: Timestamp,
    ) -> StoreResult<Option<StoredEndpoint>> {
        Ok(in_tx!(self, |tx| webhooks::update_endpoint(tx, scope, id, &patch, now).await?))
    }

    async fn delete_endpoint(&self, scope: Scope, id: i64, now: Timestamp) -> StoreResult<bool> {
        Ok(in_tx!(self, |tx| webhooks::delete_endpoint(tx, scope, id, now).await?))
    }

    async fn rotate_secret(
        &self,
        scope: Scope,
        id: i64,
        secret: String,
        previous_until_ms: i64,
        now: Timestamp,
    ) -> StoreResult<Option<StoredEndpoint>> {
        Ok(in_tx!(self, |tx| webhooks::rotate_secret(tx, scope, id, &secret, previous_until_ms, now).await?))
    }

    async fn queue_test(
        &self,
        scope: Scope,
        id: i64,
        event: &str,
        body: String,
        now: Timestamp,
    ) -> StoreResult<Option<StoredDelivery>> {
        let queued = in_tx!(self, |tx| {
            match webhooks::queue_test(tx, scope, id, event, &body, now).await? {
                Some(d) => webhooks::delivery(tx, scope, d).await?,
                None => None,
            }
        });
        self.notify(usize::from(queued.is_some()));
        Ok(queued)
    }

    async fn deliveries(
        &self,
        scope: Scope,
        endpoint: i64,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Option<Vec<StoredDelivery>>> {
        webhooks::deliveries(&self.conn().await?, scope, endpoint, before, limit).await
    }

    async fn resend(&self, scope: Scope, delivery: i64) -> StoreResult<ResendOutcome> {
        let outcome = in_tx!(self, |tx| webhooks::resend(tx, scope, delivery).await?);
        self.notify(usize::from(matches!(outcome, ResendOutcome::Queued(_))));
        Ok(outcome)
    }

    async fn claim_deliveries(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
        per_endpoint: usize,
        in_flight: Vec<(i64, usize)>,
    ) -> StoreResult<Vec<Claimed>> {
        // A claim's commit does not wait for its WAL flush: lost in a crash, its lease goes with
        // the process holding it, and the delivery is sent again (at least once), as it would
        // be after the lease ran out. The sends start one flush earlier (issue 33).
        Ok(in_tx!(self, |tx| {
            tx.batch_execute("SET LOCAL synchronous_commit TO off").await.map_err(map_err)?;
            webhooks::claim(tx, now_ms, lease_until_ms, limit, per_endpoint, &in_flight).await?
        }))
    }

    async fn record_attempts(&self, attempts: Vec<AttemptRecord>) -> StoreResult<()> {
        in_tx!(self, |tx| webhooks::record_attempts(tx, &attempts).await?);
        Ok(())
    }

    async fn next_due_ms(&self) -> StoreResult<Option<i64>> {
        webhooks::next_due_ms(&self.conn().await?).await
    }

    async fn queue_depth(&self) -> StoreResult<i64> {
        webhooks::queue_depth(&self.conn().await?).await
    }

    async fn upkeep(&self) -> StoreResult<Vec<String>> {
        upkeep::round(&self.pool).await
    }

    async fn notification_settings(&self, scope: Scope) -> StoreResult<crate::NotificationSettings> {
        notify::settings(&self.conn().await?, scope).await
    }

    async fn set_notification_settings(
        &self,
        scope: Scope,
        settings: crate::NotificationSettings,
        now: Timestamp,
    ) -> StoreResult<()> {
        notify::set_settings(&self.conn().await?, scope, &settings, now).await
    }

    async fn shipment_notifications(
        &self,
        scope: Scope,
        unique_id: &str,
    ) -> StoreResult<Vec<crate::StoredNotification>> {
        notify::list(&self.conn().await?, scope, unique_id).await
    }

    async fn claim_notifications(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
    ) -> StoreResult<crate::NotificationClaim> {
        Ok(in_tx!(self, |tx| notify::claim(tx, now_ms, lease_until_ms, limit).await?))
    }

    async fn notifications_sending(&self, ids: Vec<i64>, lease_until_ms: i64) -> StoreResult<Vec<i64>> {
        notify::sending(&self.conn().await?, &ids, lease_until_ms).await
    }

    async fn finish_notifications(&self, outcomes: Vec<crate::NotificationOutcome>) -> StoreResult<Vec<i64>> {
        notify::finish(&self.conn().await?, &outcomes).await
    }

    async fn next_notification_due_ms(&self) -> StoreResult<Option<i64>> {
        notify::next_due_ms(&self.conn().await?).await
    }

    async fn opt_out_state(&self, token: &str) -> StoreResult<Option<bool>> {
        notify::opt_out_state(&self.conn().await?, token).await
    }

    async fn opt_out(&self, token: &str, now: Timestamp) -> StoreResult<bool> {
        notify::opt_out(&self.conn().await?, token, now).await
    }

    async fn capacity_overrides(&self, from: Date, to: Date) -> StoreResult<HashMap<SlotDate, Override>> {
        capacity::overrides_between(&self.conn().await?, from, to).await
    }

    async fn set_capacity_override(&self, at: SlotDate, o: Override, now: Timestamp) -> StoreResult<()> {
        capacity::set_override(&self.conn().await?, &at, o, now).await
    }

    async fn slot_fill(&self, mode: crate::Mode, slots: Vec<SlotDate>) -> StoreResult<HashMap<SlotDate, Load>> {
        capacity::fill(&self.conn().await?, mode, &slots).await
    }

    async fn plan_candidates(
        &self,
        kind: PlanKind,
        depot: &str,
        date: Date,
        plan: Option<&str>,
    ) -> StoreResult<Vec<PlanCandidate>> {
        plans::candidates(&self.conn().await?, kind, depot, date, plan.unwrap_or("")).await
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
        Ok(in_tx!(self, |tx| plans::begin(tx, id, depot, date, kind, now_ms, lease_ms).await?))
    }

    async fn abandon_plan(&self, id: &str) -> StoreResult<()> {
        plans::abandon(&self.conn().await?, id).await
    }

    async fn finish_plan(&self, plan: &Plan) -> StoreResult<bool> {
        plans::finish(&self.conn().await?, plan).await
    }

    async fn plan(&self, id: &str) -> StoreResult<Option<StoredPlan>> {
        plans::plan_by_id(&self.conn().await?, id).await
    }

    async fn plans_on(&self, date: Date) -> StoreResult<Vec<StoredPlan>> {
        plans::plans_of(&self.conn().await?, date).await
    }

    async fn board_counts(&self, depot: &str, date: Date) -> StoreResult<Vec<crate::BoardCount>> {
        let c = self.conn().await?;
        let rows = c.query(&crate::plans::board_sql('$'), &[&depot, &date.to_string()]).await.map_err(map_err)?;
        rows.iter().map(|r| crate::plans::board_row(r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))).collect()
    }

    async fn save_plan(&self, plan: &Plan, version: i64) -> StoreResult<SaveOutcome> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await.map_err(map_err)?;
        let saved = plans::save(&tx, plan, version).await;
        if saved.is_ok() {
            tx.commit().await.map_err(map_err)?;
        }
        crate::plans::SaveError::outcome(saved)
    }

    async fn delete_plan(&self, id: &str, version: i64) -> StoreResult<bool> {
        plans::delete(&self.conn().await?, id, version).await
    }

    async fn record_position(
        &self,
        driver_id: &str,
        key: &str,
        position: crate::Position,
        received_ms: i64,
    ) -> StoreResult<crate::PositionOutcome> {
        plans::record_position(&self.conn().await?, driver_id, key, &position, received_ms).await
    }

    async fn latest_position(&self, driver_id: &str) -> StoreResult<Option<crate::Position>> {
        plans::latest_position(&self.conn().await?, driver_id).await
    }

    async fn purge_positions(&self, before_ms: i64) -> StoreResult<u64> {
        plans::purge_positions(&self.conn().await?, before_ms).await
    }

    async fn save_etas(&self, route_id: &str, etas: Vec<(String, crate::StoredEta)>, now_ms: i64) -> StoreResult<()> {
        in_tx!(self, |tx| plans::save_etas(tx, route_id, &etas, now_ms).await?);
        Ok(())
    }

    async fn save_proof(&self, proof: crate::NewProof, max_unattached: i64) -> StoreResult<crate::ProofSaved> {
        Ok(in_tx!(self, |tx| proofs::save(tx, &proof, max_unattached).await?))
    }

    async fn proof(&self, token: &str) -> StoreResult<Option<crate::ProofInfo>> {
        proofs::proof(&self.conn().await?, token).await
    }

    async fn proof_file(&self, token: &str) -> StoreResult<Option<crate::ProofFile>> {
        proofs::file(&self.conn().await?, token).await
    }

    async fn purge_proofs(&self, before_ms: i64) -> StoreResult<u64> {
        proofs::purge(&self.conn().await?, before_ms).await
    }

    async fn driver_plans(&self, driver_id: &str, date: Date) -> StoreResult<Vec<Arc<StoredPlan>>> {
        plans::plans_of_driver(&self.conn().await?, driver_id, date, &self.driver_plans).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two backends' migrations match one to one, by version and name.
    #[test]
    fn migrations_match_sqlite_by_version_and_name() {
        let pg: Vec<(i64, &str)> = MIGRATIONS.iter().map(|(v, n, _)| (*v, *n)).collect();
        let sqlite: Vec<(i64, &str)> = crate::sqlite::MIGRATIONS.iter().map(|(v, n, _)| (*v, *n)).collect();
        assert_eq!(pg, sqlite);
    }

    #[test]
    fn zoned_text_writes_what_sqlite_stores() {
        let at: Timestamp = "2026-11-23T17:00:00Z".parse().unwrap();
        assert_eq!(zoned_text(at, -5 * 3600).unwrap(), "2026-11-23T12:00:00-05:00");
        assert!(zoned_text(at, 100_000).is_err());
    }
}
