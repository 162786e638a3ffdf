//! The `SQLite` backend: WAL mode, foreign keys on, synchronous=FULL (a commit is durable
//! before it is acknowledged). One writer thread with group commit; a small pool of read
//! connections used inline (point reads take microseconds).

mod orders;
mod writer;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

use super::{
    CreateOrderError, CreatedOrder, DeleteOutcome, LabelKind, LabelSource, NewOrder, NewToken, Principal, RenderFn,
    SavedAddress, Scope, Store, StoreError, StoreResult, StoredResponse, TokenHash, TokenInfo, TokenKind,
};
use crate::ids::{ClientId, SavedAddressId};
use writer::Writer;
pub use writer::map_err;

const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("../../../migrations/sqlite/0001_init.sql")),
    (2, "health_probe", include_str!("../../../migrations/sqlite/0002_health_probe.sql")),
];
const READERS: usize = 4;

pub struct SqliteStore {
    writer: Writer,
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
}

fn connect(path: &str) -> StoreResult<Connection> {
    let conn = Connection::open(path).map_err(map_err)?;
    conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(map_err)?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA foreign_keys = ON;
         PRAGMA temp_store = MEMORY;",
    )
    .map_err(map_err)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

impl SqliteStore {
    pub fn open(path: &str) -> StoreResult<SqliteStore> {
        // `/dev/null` or a directory would "open" and leave `-journal`/`-wal` files beside it.
        if let Ok(meta) = std::fs::metadata(path) {
            if !meta.is_file() {
                return Err(StoreError::Invalid(format!("{path}: not a regular file; sqlite needs a database file")));
            }
        }
        let writer = Writer::start(connect(path)?);
        let readers = (0..READERS).map(|_| connect(path).map(Mutex::new)).collect::<StoreResult<_>>()?;
        Ok(SqliteStore { writer, readers, next_reader: AtomicUsize::new(0) })
    }

    /// Runs a read on a free pooled connection (WAL readers never wait for the writer).
    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> StoreResult<T> {
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        for i in 0..self.readers.len() {
            if let Ok(conn) = self.readers[(start + i) % self.readers.len()].try_lock() {
                return f(&conn).map_err(map_err);
            }
        }
        let conn = self.readers[start % self.readers.len()]
            .lock()
            .map_err(|_| StoreError::Corrupt("reader poisoned".into()))?;
        f(&conn).map_err(map_err)
    }
}

fn now_text(now: Timestamp) -> String {
    now.to_string()
}

#[async_trait]
impl Store for SqliteStore {
    async fn migrate(&self) -> StoreResult<Vec<i64>> {
        self.writer
            .write(|c| {
                c.execute_batch(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (
                        version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
                )
                .map_err(map_err)?;
                let mut applied = Vec::new();
                for (version, name, sql) in MIGRATIONS {
                    let done: Option<i64> = c
                        .query_row("SELECT version FROM schema_migrations WHERE version = ?1", [version], |r| r.get(0))
                        .optional()
                        .map_err(map_err)?;
                    if done.is_none() {
                        c.execute_batch(sql).map_err(map_err)?;
                        c.execute(
                            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
                            params![version, name, now_text(Timestamp::now())],
                        )
                        .map_err(map_err)?;
                        applied.push(*version);
                    }
                }
                Ok(applied)
            })
            .await
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
        self.writer
            .write(move |c| {
                let n = c
                    .execute("UPDATE clients SET settings_json = ?2 WHERE id = ?1", params![id.0, settings_json])
                    .map_err(map_err)?;
                Ok(n == 1)
            })
            .await
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
        self.read(|c| {
            c.prepare_cached(
                "SELECT t.client_id, c.name, t.kind, c.settings_json FROM tokens t JOIN clients c ON c.id = t.client_id
                 WHERE t.hash = ?1 AND t.revoked_at IS NULL",
            )?
            .query_row([&hash.0[..]], |r| {
                let kind: String = r.get(2)?;
                Ok(Principal {
                    client: ClientId(r.get(0)?),
                    client_name: r.get(1)?,
                    kind: TokenKind::parse(&kind).unwrap_or(TokenKind::Test),
                    settings_json: r.get(3)?,
                })
            })
            .optional()
        })
    }

    async fn list_tokens(&self, client: ClientId) -> StoreResult<Vec<TokenInfo>> {
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT prefix, last4, kind, created_at, revoked_at FROM tokens WHERE client_id = ?1 ORDER BY id",
            )?;
            st.query_map([client.0], |r| {
                let kind: String = r.get(2)?;
                Ok(TokenInfo {
                    prefix: r.get(0)?,
                    last4: r.get(1)?,
                    kind: TokenKind::parse(&kind).unwrap_or(TokenKind::Test),
                    created_at: r.get(3)?,
                    revoked_at: r.get(4)?,
                })
            })?
            .collect()
        })
    }

    async fn revoke_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        let prefix = prefix.to_string();
        self.writer
            .write(move |c| {
                let n = c
                    .execute(
                        "UPDATE tokens SET revoked_at = ?2 WHERE prefix = ?1 AND revoked_at IS NULL",
                        params![prefix, now_text(now)],
                    )
                    .map_err(map_err)?;
                Ok(n == 1)
            })
            .await
    }

    async fn saved_address_by_text(&self, scope: Scope, normalized: &str) -> StoreResult<Option<SavedAddress>> {
        self.read(|c| {
            c.prepare_cached(
                "SELECT id, text, use_count, created_at, last_used_at FROM saved_addresses
                 WHERE client_id = ?1 AND mode = ?2 AND normalized = ?3",
            )?
            .query_row(params![scope.client.0, scope.mode.as_str(), normalized], saved_address_row)
            .optional()
        })
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
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT id, text, use_count, created_at, last_used_at FROM saved_addresses
                 WHERE client_id = ?1 AND mode = ?2 ORDER BY last_used_at DESC, id DESC",
            )?;
            st.query_map(params![scope.client.0, scope.mode.as_str()], saved_address_row)?.collect()
        })
    }

    async fn delete_saved_address(&self, scope: Scope, id: SavedAddressId) -> StoreResult<bool> {
        self.writer
            .write(move |c| {
                let n = c
                    .execute(
                        "DELETE FROM saved_addresses WHERE client_id = ?1 AND mode = ?2 AND id = ?3",
                        params![scope.client.0, scope.mode.as_str(), id.0],
                    )
                    .map_err(map_err)?;
                Ok(n == 1)
            })
            .await
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
        self.writer.write(move |c| orders::insert_order(c, scope, &order, &render)).await
    }

    async fn delete_parcel_by_custom_code(
        &self,
        scope: Scope,
        code: &str,
        now: Timestamp,
    ) -> StoreResult<DeleteOutcome> {
        let code = code.to_string();
        self.writer.write(move |c| orders::delete_parcel(c, scope, &code, now)).await
    }

    async fn label_source(&self, kind: LabelKind, token: &str) -> StoreResult<Option<LabelSource>> {
        self.read(|c| orders::label_source(c, kind, token))
    }
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
