//! `dropslot copy`: moves a `SQLite` database into a fresh `PostgreSQL` one, ids and all, so an
//! installation can change backends without its clients noticing (tokens, ids, tracking codes,
//! label links and idempotency keys keep working).
//!
//! The source is opened read-only and read in one transaction: a consistent snapshot, even if
//! something still wrote to it (the operator is told to stop the server first). The target is
//! migrated through the normal store path, must hold no data, and is filled in one transaction,
//! in foreign-key order, 1,000 rows per statement; its identity sequences then continue after
//! the copied ids. A failure anywhere leaves the target as migrated and empty.
//!
//! [`TABLES`] maps every column of the `SQLite` schema to its `PostgreSQL` column(s); the copy
//! refuses a source or target whose columns differ from it, so no column is silently dropped.
//! A value that does not convert is an error naming the table, the row and the column.

use std::collections::BTreeSet;
use std::sync::Arc;

use jiff::Timestamp;
use jiff::fmt::temporal::Pieces;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use tokio_postgres::NoTls;
use tokio_postgres::types::{ToSql, Type};

use dropslot_core::config::DatabaseUrl;

use super::{DeliveryState, Mode, Outbox, TokenKind};
use dropslot_core::config::{PostgresSettings, redact_url};
use dropslot_core::shipments::{Actor, ShipmentKind, Status};

/// Rows per read from `SQLite` and per `INSERT` into `PostgreSQL`.
const BATCH: usize = 1000;
/// The same for a table with large blobs (proof images, up to 5 MB each): at most 40 MB a
/// statement.
const BLOB_BATCH: usize = 8;

/// How long the copy waits for a lock on the target's tables (something else is using it).
const LOCK_TIMEOUT: &str = "10s";

/// How one `SQLite` column becomes `PostgreSQL` column(s).
#[derive(Debug, Clone, Copy)]
enum Conv {
    /// INTEGER → BIGINT.
    Int { null: bool },
    /// TEXT → TEXT, unchanged; `check` refuses a value the service could not read back.
    Text { null: bool, check: Check },
    /// BLOB → BYTEA (a token's SHA-256).
    Bytes,
    /// A large BLOB → BYTEA (a proof image): its table is copied [`BLOB_BATCH`] rows at a time.
    Blob,
    /// REAL → DOUBLE PRECISION (an address point's coordinates).
    Float,
    /// 0 or 1 → BOOLEAN.
    Bool,
    /// RFC 3339 text (any offset) → TIMESTAMPTZ.
    Instant { null: bool },
    /// RFC 3339 text shown in its local offset → TIMESTAMPTZ, and that offset in seconds east
    /// of UTC in the INTEGER column named (`PostgreSQL` shows the instant in it again).
    Zoned { offset: &'static str },
    /// Not copied: `PostgreSQL` derives it from other rows (a saved address's use count and
    /// last use, from its pick-ups: migration 0005).
    Derived,
}

/// What a text column must hold.
#[derive(Debug, Clone, Copy)]
enum Check {
    Any,
    Json,
    Mode,
    TokenKind,
    Status,
    ShipmentKind,
    Actor,
    DeliveryState,
}

impl Check {
    fn run(self, text: &str) -> Result<(), String> {
        let known = match self {
            Check::Any => true,
            Check::Json => {
                return serde_json::from_str::<serde::de::IgnoredAny>(text)
                    .map(drop)
                    .map_err(|e| format!("not JSON ({e}): {}", shown(text)));
            }
            Check::Mode => Mode::parse(text).is_some(),
            Check::TokenKind => TokenKind::parse(text).is_some(),
            Check::Status => Status::parse(text).is_some(),
            Check::ShipmentKind => ShipmentKind::parse(text).is_some(),
            Check::Actor => Actor::parse(text).is_some(),
            Check::DeliveryState => DeliveryState::parse(text).is_some(),
        };
        if known { Ok(()) } else { Err(format!("unknown value {}", shown(text))) }
    }
}

struct Column {
    name: &'static str,
    conv: Conv,
}

struct Table {
    name: &'static str,
    /// Whether `id` is an identity column (its sequence is moved past the copied ids).
    identity: bool,
    /// Every column of the `SQLite` table, in the order it is read.
    columns: &'static [Column],
}

const fn c(name: &'static str, conv: Conv) -> Column {
    Column { name, conv }
}

const fn text(check: Check) -> Conv {
    Conv::Text { null: false, check }
}

const INT: Conv = Conv::Int { null: false };
const INT_OR_NULL: Conv = Conv::Int { null: true };
const TEXT: Conv = text(Check::Any);
const TEXT_OR_NULL: Conv = Conv::Text { null: true, check: Check::Any };
const JSON: Conv = text(Check::Json);
const JSON_OR_NULL: Conv = Conv::Text { null: true, check: Check::Json };
const MODE: Conv = text(Check::Mode);
const STATUS: Conv = text(Check::Status);
const INSTANT: Conv = Conv::Instant { null: false };
const INSTANT_OR_NULL: Conv = Conv::Instant { null: true };
const ZONED: Conv = Conv::Zoned { offset: "created_offset" };

/// Every table the copy moves, parents before children (the foreign keys' order).
const TABLES: &[Table] = &[
    Table {
        name: "clients",
        identity: true,
        columns: &[c("id", INT), c("name", TEXT), c("settings_json", JSON_OR_NULL), c("created_at", INSTANT)],
    },
    Table {
        name: "tokens",
        identity: true,
        columns: &[
            c("id", INT),
            c("client_id", INT),
            c("kind", text(Check::TokenKind)),
            c("hash", Conv::Bytes),
            c("prefix", TEXT),
            c("last4", TEXT),
            c("created_at", INSTANT),
            c("revoked_at", INSTANT_OR_NULL),
        ],
    },
    Table {
        name: "saved_addresses",
        identity: true,
        columns: &[
            c("id", INT),
            c("client_id", INT),
            c("mode", MODE),
            c("text", TEXT),
            c("normalized", TEXT),
            c("use_count", Conv::Derived),
            c("created_at", ZONED),
            c("last_used_at", Conv::Derived),
        ],
    },
    Table {
        name: "orders",
        identity: true,
        columns: &[c("id", INT), c("unique_id", TEXT), c("client_id", INT), c("mode", MODE), c("created_at", ZONED)],
    },
    Table {
        name: "pick_up_shipments",
        identity: true,
        columns: &[
            c("id", INT),
            c("unique_id", TEXT),
            c("order_id", INT),
            c("client_id", INT),
            c("mode", MODE),
            c("saved_address_id", INT_OR_NULL),
            c("status", STATUS),
            c("scheduled_date", TEXT),
            c("slot_code", TEXT),
            c("slot_name", TEXT),
            c("start_at", TEXT),
            c("end_at", TEXT),
            c("address_json", JSON),
            c("label_token", TEXT),
        ],
    },
    Table {
        name: "shipment_orders",
        identity: true,
        columns: &[
            c("id", INT),
            c("unique_id", TEXT),
            c("order_id", INT),
            c("client_id", INT),
            c("mode", MODE),
            c("min_price", INT),
            c("tax_bp", INT),
            c("actual_total_price", INT),
            c("actual_total_tax", INT),
            c("actual_price_with_tax", INT),
            c("total_price", INT),
            c("total_tax", INT),
            c("price_with_tax", INT),
        ],
    },
    Table {
        name: "drop_off_shipments",
        identity: true,
        columns: &[
            c("id", INT),
            c("unique_id", TEXT),
            c("shipment_order_id", INT),
            c("pick_up_shipment_id", INT),
            c("client_id", INT),
            c("mode", MODE),
            c("status", STATUS),
            c("attempts", INT),
            c("scheduled_date", TEXT),
            c("slot_code", TEXT),
            c("slot_name", TEXT),
            c("start_at", TEXT),
            c("end_at", TEXT),
            c("zone_code", TEXT),
            c("warehouse", TEXT),
            c("city", TEXT),
            c("address_json", JSON),
            c("label_token", TEXT),
            c("max_attempts", INT),
            c("sandbox_moved", Conv::Bool),
            c("return_attempts", INT),
            c("return_date", TEXT_OR_NULL),
            c("return_slot_code", TEXT_OR_NULL),
            c("return_slot_name", TEXT_OR_NULL),
            c("return_start_at", TEXT_OR_NULL),
            c("return_end_at", TEXT_OR_NULL),
            c("instruction", TEXT_OR_NULL),
            c("unplaced_at", TEXT_OR_NULL),
            c("unplaced_reason", TEXT_OR_NULL),
        ],
    },
    Table {
        name: "parcels",
        identity: true,
        columns: &[
            c("id", INT),
            c("drop_off_shipment_id", INT),
            c("client_id", INT),
            c("mode", MODE),
            c("position", INT),
            c("pick_up_code", TEXT),
            c("custom_code", TEXT_OR_NULL),
            c("size_code", TEXT),
            c("weight_mg", INT),
            c("price", INT),
            c("label_token", TEXT),
            c("deleted_at", INSTANT_OR_NULL),
        ],
    },
    Table {
        name: "shipment_events",
        identity: true,
        columns: &[
            c("id", INT),
            c("shipment_kind", text(Check::ShipmentKind)),
            c("shipment_id", INT),
            c("status", STATUS),
            c("previous_status", Conv::Text { null: true, check: Check::Status }),
            c("at", INSTANT),
            c("actor", text(Check::Actor)),
            c("reason", TEXT_OR_NULL),
            c("proof_json", JSON_OR_NULL),
            c("seq", INT),
            c("attempt", INT_OR_NULL),
        ],
    },
    Table {
        name: "idempotency_keys",
        identity: false,
        columns: &[
            c("client_id", INT),
            c("mode", MODE),
            c("key", TEXT),
            c("request_hash", TEXT),
            c("status", INT),
            c("body", TEXT),
            // Unix seconds on both backends.
            c("created_at", INT),
        ],
    },
    Table {
        name: "webhook_endpoints",
        identity: true,
        columns: &[
            c("id", INT),
            c("client_id", INT),
            c("mode", MODE),
            c("url", TEXT),
            c("events_json", JSON),
            c("description", TEXT),
            c("enabled", Conv::Bool),
            c("disabled_reason", TEXT_OR_NULL),
            c("auth_header_name", TEXT_OR_NULL),
            c("auth_header_value", TEXT_OR_NULL),
            c("secret", TEXT),
            c("previous_secret", TEXT_OR_NULL),
            c("previous_expires_ms", INT_OR_NULL),
            c("failing_since_ms", INT_OR_NULL),
            c("last_success_ms", INT_OR_NULL),
            c("last_error", TEXT_OR_NULL),
            c("created_at", INSTANT),
            c("updated_at", INSTANT),
            c("deleted_at", INSTANT_OR_NULL),
        ],
    },
    Table {
        name: "webhook_messages",
        identity: true,
        columns: &[
            c("id", INT),
            c("webhook_id", TEXT),
            c("client_id", INT),
            c("mode", MODE),
            c("event", TEXT),
            c("body", TEXT),
            c("created_at", INSTANT),
        ],
    },
    Table {
        name: "webhook_deliveries",
        identity: true,
        columns: &[
            c("id", INT),
            c("message_id", INT),
            c("endpoint_id", INT),
            c("ordering_key", INT_OR_NULL),
            c("state", text(Check::DeliveryState)),
            c("attempts", INT),
            c("next_attempt_ms", INT),
            c("claim", INT_OR_NULL),
            c("queued_ms", INT),
            c("finished_ms", INT_OR_NULL),
            c("last_status", INT_OR_NULL),
            c("last_error", TEXT_OR_NULL),
        ],
    },
    Table {
        name: "webhook_attempts",
        identity: true,
        columns: &[
            c("id", INT),
            c("delivery_id", INT),
            c("attempt", INT),
            c("at", INSTANT),
            c("status", INT_OR_NULL),
            c("latency_ms", INT),
            c("response", TEXT_OR_NULL),
            c("error", TEXT_OR_NULL),
        ],
    },
    Table {
        name: "address_points",
        identity: false,
        columns: &[
            c("number", TEXT),
            c("street", TEXT),
            c("unit", TEXT),
            c("city", TEXT),
            c("postal_prefix", TEXT),
            c("lat", Conv::Float),
            c("lng", Conv::Float),
        ],
    },
    Table {
        name: "order_requests",
        identity: true,
        columns: &[
            c("id", INT),
            c("request_id", TEXT),
            c("client_id", INT),
            c("mode", MODE),
            c("status", TEXT),
            c("payload", JSON),
            c("terms", JSON),
            c("drop_offs_count", INT),
            // ISO 8601 text with the pick-up city's offset on both backends.
            c("created_at", TEXT),
            c("completed_at", TEXT_OR_NULL),
            c("next_attempt_ms", INT),
            c("claim", INT_OR_NULL),
            c("attempts", INT),
            c("order_id", INT_OR_NULL),
            c("errors_json", JSON_OR_NULL),
        ],
    },
    Table {
        name: "slot_fill",
        identity: false,
        columns: &[
            c("mode", MODE),
            c("kind", TEXT),
            c("place", TEXT),
            c("slot_code", TEXT),
            c("date", TEXT),
            c("stops", INT),
            c("parcels", INT),
        ],
    },
    Table {
        name: "capacity_overrides",
        identity: false,
        columns: &[
            c("kind", TEXT),
            c("place", TEXT),
            c("slot_code", TEXT),
            c("date", TEXT),
            c("stops_set", Conv::Bool),
            c("stops", INT_OR_NULL),
            c("parcels_set", Conv::Bool),
            c("parcels", INT_OR_NULL),
            c("updated_at", INSTANT),
        ],
    },
    Table {
        name: "drivers",
        identity: true,
        columns: &[
            c("id", INT),
            c("unique_id", TEXT),
            c("name", TEXT),
            c("phone", TEXT),
            c("depot", TEXT),
            c("vehicle_name", TEXT),
            c("capacity_parcels", INT),
            c("capacity_kg", INT),
            c("shift_start", INT),
            c("shift_end", INT),
            c("weekdays", TEXT),
            c("version", INT),
            c("created_at", INSTANT),
            c("updated_at", INSTANT),
            c("deleted_at", INSTANT_OR_NULL),
        ],
    },
    Table {
        name: "staff_tokens",
        identity: true,
        columns: &[
            c("id", INT),
            c("kind", TEXT),
            c("driver_id", INT_OR_NULL),
            c("hash", Conv::Bytes),
            c("prefix", TEXT),
            c("last4", TEXT),
            c("created_at", INSTANT),
            c("revoked_at", INSTANT_OR_NULL),
        ],
    },
    Table {
        name: "publishable_keys",
        identity: true,
        columns: &[
            c("id", INT),
            c("client_id", INT),
            c("mode", MODE),
            c("hash", Conv::Bytes),
            c("prefix", TEXT),
            c("last4", TEXT),
            c("origins", TEXT),
            c("created_at", INSTANT),
            c("revoked_at", INSTANT_OR_NULL),
        ],
    },
    Table {
        name: "plans",
        identity: false,
        columns: &[
            c("id", TEXT),
            c("depot", TEXT),
            c("date", TEXT),
            c("kind", TEXT),
            c("status", TEXT),
            c("version", INT),
            c("started_ms", INT),
            c("plan_json", JSON_OR_NULL),
        ],
    },
    Table {
        name: "published_routes",
        identity: false,
        columns: &[c("id", TEXT), c("plan_id", TEXT), c("driver_id", TEXT), c("date", TEXT)],
    },
    Table {
        name: "published_stops",
        identity: false,
        columns: &[c("shipment_unique_id", TEXT), c("route_id", TEXT), c("plan_id", TEXT)],
    },
    Table {
        name: "proofs",
        identity: false,
        columns: &[
            c("token", TEXT),
            c("driver_id", TEXT),
            c("key", TEXT),
            c("request_hash", TEXT),
            c("content_type", TEXT),
            c("bytes", Conv::Blob),
            c("size", INT),
            c("created_ms", INT),
            c("shipment_unique_id", TEXT_OR_NULL),
            c("client_id", INT_OR_NULL),
        ],
    },
    Table {
        name: "notifications",
        identity: true,
        columns: &[
            c("id", INT),
            c("client_id", INT),
            c("mode", MODE),
            c("drop_off_id", INT),
            c("shipment_unique_id", TEXT),
            c("trigger_kind", TEXT),
            c("channel", TEXT),
            c("recipient", TEXT),
            c("recipient_hash", TEXT),
            c("state", TEXT),
            c("facts_json", JSON),
            c("message_id", TEXT),
            c("attempts", INT),
            c("last_error", TEXT_OR_NULL),
            c("next_attempt_ms", INT),
            c("lease_until_ms", INT),
            c("created_at", TEXT),
            c("sent_at", TEXT_OR_NULL),
            c("occasion", TEXT),
            c("repeated_after_crash", INT),
        ],
    },
    // Opt-outs must survive a move: a recipient who opted out is never written to again.
    Table {
        name: "notification_recipients",
        identity: false,
        columns: &[c("recipient_hash", TEXT), c("opt_out_token", TEXT), c("opted_out_at", TEXT_OR_NULL)],
    },
    Table {
        name: "notification_settings",
        identity: false,
        columns: &[c("client_id", INT), c("mode", MODE), c("settings_json", JSON), c("updated_at", TEXT)],
    },
    Table {
        name: "attempt_policies",
        identity: false,
        columns: &[
            c("client_id", INT),
            c("mode", MODE),
            c("max_attempts", INT),
            c("after_failure", TEXT),
            c("max_return_attempts", INT),
            c("updated_at", TEXT),
        ],
    },
    // A fleet depot's tentative plans (issue 45): the days' versions and each booked
    // drop-off's place, so that the moved database sells the same room.
    Table { name: "fleet_days", identity: false, columns: &[c("depot", TEXT), c("date", TEXT), c("version", INT)] },
    Table {
        name: "fleet_stops",
        identity: false,
        columns: &[
            c("drop_off_shipment_id", INT),
            c("depot", TEXT),
            c("date", TEXT),
            c("driver_id", TEXT),
            c("seq", Conv::Float),
        ],
    },
    Table {
        name: "stop_etas",
        identity: false,
        columns: &[
            c("shipment_unique_id", TEXT),
            c("route_id", TEXT),
            c("arrival_ms", INT),
            c("from_ms", INT),
            c("to_ms", INT),
            c("late", INT),
            c("stops_before", INT),
            c("updated_ms", INT),
        ],
    },
    // The windows recipients were told (CONTRACT §17): the day's report reads them.
    Table {
        name: "eta_windows",
        identity: true,
        columns: &[c("id", INT), c("shipment_unique_id", TEXT), c("from_ms", INT), c("to_ms", INT), c("at_ms", INT)],
    },
    // What each recipient was last told (CONTRACT §16): without it a moved database would
    // take today's live windows as told and count its "new time" messages from none.
    Table {
        name: "told_etas",
        identity: false,
        columns: &[
            c("drop_off_id", INT),
            c("scheduled_date", TEXT),
            c("from_ms", INT),
            c("to_ms", INT),
            c("new_times", INT),
        ],
    },
    Table { name: "install_settings", identity: false, columns: &[c("key", TEXT), c("value", TEXT)] },
];

/// The `SQLite` tables the copy leaves behind, and why.
const NOT_COPIED: &[(&str, &str)] = &[
    ("schema_migrations", "the target records its own migrations"),
    ("health_probe", "the readiness probe's row, rewritten at every start"),
    ("dashboard_sessions", "browser sessions: after a move its users sign in again"),
    ("driver_positions", "where drivers were: kept 30 days for the day's map and ETAs, not history to move"),
    (
        "driver_requests",
        "the driver app's idempotency keys: a phone's retry after the move meets the state machine, which refuses a move already made",
    ),
    ("ops_sessions", "dispatchers' browser sessions: after a move they sign in again"),
];

/// The `PostgreSQL` columns a `SQLite` column becomes, with their array types (for `unnest`).
fn targets(column: &Column) -> Vec<(&'static str, Type)> {
    match column.conv {
        Conv::Int { .. } => vec![(column.name, Type::INT8_ARRAY)],
        Conv::Text { .. } => vec![(column.name, Type::TEXT_ARRAY)],
        Conv::Bytes | Conv::Blob => vec![(column.name, Type::BYTEA_ARRAY)],
        Conv::Float => vec![(column.name, Type::FLOAT8_ARRAY)],
        Conv::Bool => vec![(column.name, Type::BOOL_ARRAY)],
        Conv::Instant { .. } => vec![(column.name, Type::TIMESTAMPTZ_ARRAY)],
        Conv::Zoned { offset } => vec![(column.name, Type::TIMESTAMPTZ_ARRAY), (offset, Type::INT4_ARRAY)],
        Conv::Derived => Vec::new(),
    }
}

fn target_columns(table: &Table) -> Vec<(&'static str, Type)> {
    table.columns.iter().flat_map(targets).collect()
}

/// The columns read from `SQLite` (all but the derived ones).
fn read_columns(table: &Table) -> Vec<&'static Column> {
    let columns: &'static [Column] = table.columns;
    columns.iter().filter(|c| !matches!(c.conv, Conv::Derived)).collect()
}

/// One table's result: the rows copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub table: &'static str,
    pub rows: u64,
}

/// Copies the `SQLite` database `from` (`sqlite://PATH`) into the `PostgreSQL` database `to`
/// (`postgres://…`), which is migrated first (with `outbox`, as every store is opened) and
/// must hold no data. Returns the rows copied per table, in copy order. Every error is one
/// line that says what to do.
pub async fn run(from: &str, to: &str, pg: &PostgresSettings, outbox: Arc<dyn Outbox>) -> Result<Vec<Copied>, String> {
    let DatabaseUrl::Sqlite(path) = DatabaseUrl::parse(from)? else {
        return Err(format!("--from {}: the source must be a sqlite:// URL", redact_url(from)));
    };
    let DatabaseUrl::Postgres(target) = DatabaseUrl::parse(to)? else {
        return Err(format!("--to {}: the target must be a postgres:// URL", redact_url(to)));
    };
    let shown_target = redact_url(&target);

    let mut source = open_source(&path)?;
    // Deferred: the snapshot is taken by the first read (the checks just below) and holds
    // for every read after it, until this transaction ends.
    let snapshot = source
        .transaction_with_behavior(TransactionBehavior::Deferred)
        .map_err(|e| format!("{path}: cannot start a read transaction: {e}"))?;
    check_source(&snapshot, &path)?;

    // The target's schema, through the same path as `dropslot migrate`.
    let store = super::open(&target, pg, outbox).await.map_err(|e| format!("{shown_target}: {e}"))?;
    store.migrate().await.map_err(|e| format!("migrating {shown_target}: {e}"))?;
    drop(store);

    let mut config: tokio_postgres::Config =
        target.parse().map_err(|e| format!("{shown_target}: not a PostgreSQL URL: {e}"))?;
    config.connect_timeout(pg.connect_timeout);
    config.application_name("dropslot copy");
    let (mut client, connection) =
        config.connect(NoTls).await.map_err(|e| format!("cannot connect to {shown_target}: {}", pg_error(e)))?;
    // Driven until the client is dropped; a broken connection fails the client's next call.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let tx = client.transaction().await.map_err(|e| format!("{shown_target}: {}", pg_error(e)))?;
    prepare_target(&tx, &shown_target).await?;

    let mut copied = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        let rows = copy_table(&snapshot, &tx, table).await?;
        copied.push(Copied { table: table.name, rows });
    }
    for table in TABLES.iter().filter(|t| t.identity) {
        // After the copied ids; an empty table's sequence is left at its start.
        let t = table.name;
        tx.execute(&format!("SELECT setval(pg_get_serial_sequence('{t}', 'id'), max(id)) FROM {t}"), &[])
            .await
            .map_err(|e| format!("resetting the id sequence of {t}: {}", pg_error(e)))?;
    }
    tx.commit().await.map_err(|e| format!("committing the copy into {shown_target}: {}", pg_error(e)))?;
    // A read: ending it changes nothing.
    let _ = snapshot.rollback();
    Ok(copied)
}

/// A driver error with the server's own words (its SQLSTATE, message and detail).
fn pg_error(e: tokio_postgres::Error) -> String {
    super::postgres::map_err(e).to_string()
}

/// The source file, read-only: it must exist and be a regular file (a read-only open never
/// creates one).
fn open_source(path: &str) -> Result<Connection, String> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Err(format!("{path}: not a regular file; --from needs a SQLite database file")),
        Err(e) => return Err(format!("{path}: {e}; --from needs an existing SQLite database file")),
    }
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| format!("{path}: cannot open it read-only: {e}"))?;
    conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(|e| format!("{path}: {e}"))?;
    Ok(conn)
}

/// The source is a dropslot database migrated by exactly this binary's migrations, and holds
/// exactly the tables and columns [`TABLES`] maps.
fn check_source(c: &Connection, path: &str) -> Result<(), String> {
    let migrate_first = format!("run `dropslot migrate --database sqlite://{path}` with this binary first");
    let has_migrations: bool = c
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
            [],
            |r| r.get(0),
        )
        .map_err(|e| format!("{path}: cannot read it as a SQLite database: {e}"))?;
    if !has_migrations {
        return Err(format!("{path}: not a dropslot database (it has no schema_migrations table)"));
    }
    let applied: Vec<(i64, Option<String>)> = c
        .prepare("SELECT version, checksum FROM schema_migrations ORDER BY version")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(|e| format!("{path}: cannot read its migrations ({e}); {migrate_first}"))?;
    let shipped = super::sqlite::MIGRATIONS;
    if let Some((version, _)) = applied.iter().find(|(v, _)| !shipped.iter().any(|(s, _, _)| s == v)) {
        return Err(format!(
            "{path}: it has migration {version}, which this binary does not know (a newer dropslot migrated it); copy it with that version"
        ));
    }
    let missing: Vec<String> = shipped
        .iter()
        .filter(|(v, _, _)| !applied.iter().any(|(a, _)| a == v))
        .map(|(v, name, _)| format!("{v} ({name})"))
        .collect();
    if !missing.is_empty() {
        return Err(format!("{path}: not fully migrated (missing migration {}); {migrate_first}", missing.join(", ")));
    }
    for (version, recorded) in &applied {
        let Some((_, name, sql)) = shipped.iter().find(|(v, _, _)| v == version) else { continue };
        let expected = checksum(sql);
        match recorded {
            None => {
                return Err(format!("{path}: migration {version} ({name}) has no recorded checksum; {migrate_first}"));
            }
            Some(r) if *r != expected => {
                return Err(format!(
                    "{path}: migration {version} ({name}) differs from this binary's (checksum {r}, expected {expected}); it cannot be copied by this binary"
                ));
            }
            Some(_) => {}
        }
    }
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| format!("{path}: cannot list its tables: {e}"))?;
    for name in &tables {
        let known = TABLES.iter().any(|t| t.name == name) || NOT_COPIED.iter().any(|(t, _)| t == name);
        if !known {
            return Err(format!("{path}: it has a table {name:?} this binary does not know how to copy"));
        }
    }
    for table in TABLES {
        let found: BTreeSet<String> = c
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .and_then(|mut s| s.query_map([table.name], |r| r.get(0))?.collect())
            .map_err(|e| format!("{path}: cannot read the columns of {}: {e}", table.name))?;
        let expected: BTreeSet<String> = table.columns.iter().map(|c| c.name.to_string()).collect();
        if found != expected {
            return Err(format!(
                "{path}: table {} has the columns {found:?}; this binary copies {expected:?}",
                table.name
            ));
        }
    }
    Ok(())
}

/// SHA-256 of a migration's SQL, hex, as the `SQLite` backend records it.
fn checksum(sql: &str) -> String {
    use sha2::{Digest, Sha256};
    dropslot_core::ids::hex(&Sha256::digest(sql.as_bytes()))
}

/// Locks the target's tables against writers for the whole copy, checks that their columns
/// are the ones [`TABLES`] fills, and that they hold no data.
async fn prepare_target(tx: &tokio_postgres::Transaction<'_>, shown: &str) -> Result<(), String> {
    let names: Vec<&str> = TABLES.iter().map(|t| t.name).collect();
    tx.batch_execute(&format!(
        "SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'; LOCK TABLE {} IN EXCLUSIVE MODE",
        names.join(", ")
    ))
    .await
    .map_err(|e| {
        format!("{shown}: cannot lock its tables ({}); stop every dropslot process using it and retry", pg_error(e))
    })?;
    let mut holding = Vec::new();
    for table in TABLES {
        let found: BTreeSet<String> = tx
            .query(
                "SELECT column_name::text FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name::text = $1::text",
                &[&table.name],
            )
            .await
            .map_err(|e| format!("{shown}: cannot read the columns of {}: {}", table.name, pg_error(e)))?
            .iter()
            .map(|r| r.try_get::<_, String>(0))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{shown}: the columns of {}: {e}", table.name))?;
        let expected: BTreeSet<String> = target_columns(table).iter().map(|(n, _)| (*n).to_string()).collect();
        if found != expected {
            return Err(format!(
                "{shown}: table {} has the columns {found:?}; this binary fills {expected:?}",
                table.name
            ));
        }
        let t = table.name;
        let rows = tx
            .query_one(&format!("SELECT EXISTS (SELECT 1 FROM {t})"), &[])
            .await
            .map_err(|e| format!("{shown}: cannot read {t}: {}", pg_error(e)))?;
        if rows.try_get::<_, bool>(0).map_err(|e| format!("{shown}: {t}: {e}"))? {
            holding.push(t);
        }
    }
    if !holding.is_empty() {
        return Err(format!(
            "{shown} already holds data (in {}); the target must be a fresh, empty database that no dropslot has served",
            holding.join(", ")
        ));
    }
    Ok(())
}

/// Rows per batch of `table`: fewer where a row may hold megabytes.
fn batch_rows(table: &Table) -> usize {
    if table.columns.iter().any(|c| matches!(c.conv, Conv::Blob)) { BLOB_BATCH } else { BATCH }
}

/// Copies one table in batches of [`batch_rows`] rows, in rowid order; the rows copied.
async fn copy_table(source: &Connection, tx: &tokio_postgres::Transaction<'_>, table: &Table) -> Result<u64, String> {
    let t = table.name;
    let read = read_columns(table);
    let select = format!(
        "SELECT rowid, {} FROM {t} WHERE rowid > ?1 ORDER BY rowid LIMIT {}",
        read.iter().map(|c| c.name).collect::<Vec<_>>().join(", "),
        batch_rows(table)
    );
    let targets = target_columns(table);
    let insert = format!(
        "INSERT INTO {t} ({}) SELECT * FROM unnest({})",
        targets.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
        (1..=targets.len()).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
    );
    let types: Vec<Type> = targets.iter().map(|(_, ty)| ty.clone()).collect();
    let statement = tx.prepare_typed(&insert, &types).await.map_err(|e| format!("copying {t}: {}", pg_error(e)))?;
    let mut after = i64::MIN;
    let mut total = 0;
    loop {
        let batch = read_batch(source, table, &select, after)?;
        let Some(last) = batch.last_rowid else { break };
        let params: Vec<&(dyn ToSql + Sync)> = batch.columns.iter().flat_map(Out::params).collect();
        let inserted = tx
            .execute(&statement, &params)
            .await
            .map_err(|e| format!("copying {t} (the {} rows after rowid {after}): {}", batch.rows, pg_error(e)))?;
        if inserted != batch.rows as u64 {
            return Err(format!("copying {t}: {inserted} rows inserted of {}", batch.rows));
        }
        total += inserted;
        after = last;
        if batch.rows < batch_rows(table) {
            break;
        }
    }
    Ok(total)
}

/// Up to [`BATCH`] rows of a table, column by column as `PostgreSQL` takes them.
struct Batch {
    columns: Vec<Out>,
    rows: usize,
    last_rowid: Option<i64>,
}

fn read_batch(c: &Connection, table: &Table, select: &str, after: i64) -> Result<Batch, String> {
    let t = table.name;
    let read = read_columns(table);
    let mut columns: Vec<Out> = read.iter().map(|col| Out::new(col.conv)).collect();
    let mut st = c.prepare_cached(select).map_err(|e| format!("reading {t}: {e}"))?;
    let mut rows = st.query([after]).map_err(|e| format!("reading {t}: {e}"))?;
    let (mut n, mut last_rowid) = (0, None);
    while let Some(row) = rows.next().map_err(|e| format!("reading {t}: {e}"))? {
        let rowid: i64 = row.get(0).map_err(|e| format!("reading {t}: {e}"))?;
        // The row as an operator finds it: by id, or by rowid in the one table without one.
        let row_name = if table.identity { format!("id {rowid}") } else { format!("rowid {rowid}") };
        for (i, (column, out)) in read.iter().zip(&mut columns).enumerate() {
            let value = row.get_ref(i + 1).map_err(|e| format!("reading {t} row {row_name}: {e}"))?;
            out.push(value).map_err(|e| format!("{t} row {row_name}, column {}: {e}", column.name))?;
        }
        n += 1;
        last_rowid = Some(rowid);
    }
    Ok(Batch { columns, rows: n, last_rowid })
}

/// One read column's values, converted, with the rule that converts them.
enum Out {
    Int {
        null: bool,
        values: Vec<Option<i64>>,
    },
    Text {
        null: bool,
        check: Check,
        values: Vec<Option<String>>,
    },
    Bytes {
        values: Vec<Option<Vec<u8>>>,
    },
    Float {
        values: Vec<Option<f64>>,
    },
    Bool {
        values: Vec<Option<bool>>,
    },
    Instant {
        null: bool,
        values: Vec<Option<Timestamp>>,
    },
    Zoned {
        at: Vec<Option<Timestamp>>,
        offsets: Vec<Option<i32>>,
    },
    /// A derived column: nothing is read or written.
    None,
}

impl Out {
    fn new(conv: Conv) -> Out {
        match conv {
            Conv::Int { null } => Out::Int { null, values: Vec::new() },
            Conv::Text { null, check } => Out::Text { null, check, values: Vec::new() },
            Conv::Bytes | Conv::Blob => Out::Bytes { values: Vec::new() },
            Conv::Float => Out::Float { values: Vec::new() },
            Conv::Bool => Out::Bool { values: Vec::new() },
            Conv::Instant { null } => Out::Instant { null, values: Vec::new() },
            Conv::Zoned { .. } => Out::Zoned { at: Vec::new(), offsets: Vec::new() },
            Conv::Derived => Out::None,
        }
    }

    /// Converts and keeps one value; a value that does not convert is an error, never a
    /// default.
    fn push(&mut self, v: ValueRef<'_>) -> Result<(), String> {
        match self {
            Out::Int { null, values } => values.push(nullable(v, *null, |v| match v {
                ValueRef::Integer(i) => Ok(i),
                other => Err(format!("not an integer: {}", describe(other))),
            })?),
            Out::Text { null, check, values } => values.push(nullable(v, *null, |v| {
                let s = utf8(v)?;
                check.run(s)?;
                Ok(s.to_string())
            })?),
            Out::Bytes { values } => values.push(Some(match v {
                ValueRef::Blob(b) => b.to_vec(),
                other => return Err(format!("not a blob: {}", describe(other))),
            })),
            Out::Float { values } => values.push(Some(match v {
                ValueRef::Real(f) if f.is_finite() => f,
                // SQLite keeps a whole REAL as an integer.
                ValueRef::Integer(i) => i as f64,
                other => return Err(format!("not a finite number: {}", describe(other))),
            })),
            Out::Bool { values } => values.push(Some(match v {
                ValueRef::Integer(0) => false,
                ValueRef::Integer(1) => true,
                other => return Err(format!("not a boolean (0 or 1): {}", describe(other))),
            })),
            Out::Instant { null, values } => values.push(nullable(v, *null, |v| instant(utf8(v)?))?),
            Out::Zoned { at, offsets } => {
                let s = utf8(v)?;
                let offset = Pieces::parse(s)
                    .ok()
                    .and_then(|p| p.to_numeric_offset())
                    .ok_or_else(|| format!("not an RFC 3339 instant with a UTC offset: {}", shown(s)))?;
                let instant = instant(s)?;
                at.push(Some(instant));
                offsets.push(Some(offset.seconds()));
            }
            Out::None => {}
        }
        Ok(())
    }

    /// The column's arrays, in [`targets`]' order.
    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        match self {
            Out::Int { values, .. } => vec![values as &(dyn ToSql + Sync)],
            Out::Text { values, .. } => vec![values as &(dyn ToSql + Sync)],
            Out::Bytes { values } => vec![values as &(dyn ToSql + Sync)],
            Out::Float { values } => vec![values as &(dyn ToSql + Sync)],
            Out::Bool { values } => vec![values as &(dyn ToSql + Sync)],
            Out::Instant { values, .. } => vec![values as &(dyn ToSql + Sync)],
            Out::Zoned { at, offsets } => vec![at as &(dyn ToSql + Sync), offsets as &(dyn ToSql + Sync)],
            Out::None => Vec::new(),
        }
    }
}

/// NULL where the column allows it, else the converted value.
fn nullable<T>(
    v: ValueRef<'_>,
    null: bool,
    convert: impl FnOnce(ValueRef<'_>) -> Result<T, String>,
) -> Result<Option<T>, String> {
    match v {
        ValueRef::Null if null => Ok(None),
        ValueRef::Null => Err("NULL in a column that must have a value".into()),
        v => convert(v).map(Some),
    }
}

/// A text value as `PostgreSQL` TEXT can hold it.
fn utf8(v: ValueRef<'_>) -> Result<&str, String> {
    let ValueRef::Text(bytes) = v else { return Err(format!("not text: {}", describe(v))) };
    let s = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8 text ({e})"))?;
    if s.contains('\0') {
        return Err(format!("text with a NUL character, which PostgreSQL cannot store: {}", shown(s)));
    }
    Ok(s)
}

/// An RFC 3339 instant with its offset. `PostgreSQL` keeps it to the microsecond (the driver
/// drops finer digits, as for every instant the `PostgreSQL` backend writes).
fn instant(s: &str) -> Result<Timestamp, String> {
    s.parse::<Timestamp>().map_err(|e| format!("not an RFC 3339 instant ({e}): {}", shown(s)))
}

/// A stored value as an error message shows it.
fn describe(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => "NULL".into(),
        ValueRef::Integer(i) => format!("the integer {i}"),
        ValueRef::Real(f) => format!("the real number {f}"),
        ValueRef::Text(t) => format!("the text {}", shown(&String::from_utf8_lossy(t))),
        ValueRef::Blob(b) => format!("a blob of {} bytes", b.len()),
    }
}

/// A stored text, quoted and cut at 80 characters.
fn shown(s: &str) -> String {
    let cut: String = s.chars().take(80).collect();
    if cut.len() < s.len() { format!("{cut:?}…") } else { format!("{cut:?}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn migrated() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        for (_, _, sql) in crate::sqlite::MIGRATIONS {
            c.execute_batch(sql).unwrap();
        }
        c
    }

    /// Every table the `SQLite` migrations create is copied or deliberately left, with every
    /// column mapped.
    #[test]
    fn the_mapping_covers_every_sqlite_table_and_column() {
        let c = migrated();
        let tables: BTreeSet<String> = c
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        // schema_migrations is made by migrate(); the rest of NOT_COPIED by migrations.
        let left = NOT_COPIED.iter().map(|(t, _)| (*t).to_string()).filter(|t| t != "schema_migrations");
        let mapped: BTreeSet<String> = TABLES.iter().map(|t| t.name.to_string()).chain(left).collect();
        assert_eq!(tables, mapped, "schema_migrations is made by migrate(), not by a migration");
        for table in TABLES {
            let columns: BTreeSet<String> = c
                .prepare("SELECT name FROM pragma_table_info(?1)")
                .unwrap()
                .query_map([table.name], |r| r.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            let expected: BTreeSet<String> = table.columns.iter().map(|c| c.name.to_string()).collect();
            assert_eq!(columns, expected, "{}", table.name);
        }
    }

    /// `PostgreSQL` tables with no `SQLite` counterpart, and why.
    const POSTGRES_ONLY: &[(&str, &str)] = &[(
        "cache_epoch",
        "the read caches' counter (SQLite keeps its epoch in a file); its one row is the migration's",
    )];

    /// The columns the copy fills are those the `PostgreSQL` migrations leave (read from their
    /// SQL: each `CREATE TABLE` column, less those a later `DROP COLUMN` removes, plus those an
    /// `ADD COLUMN` adds).
    #[test]
    fn the_mapping_fills_every_postgres_column() {
        let mut schema: std::collections::BTreeMap<String, BTreeSet<String>> = std::collections::BTreeMap::new();
        for (_, _, sql) in crate::postgres::MIGRATIONS {
            let sql: String = sql.lines().map(|l| l.split("--").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
            for statement in sql.split(';') {
                let words: Vec<&str> = statement.split_whitespace().collect();
                match words.as_slice() {
                    ["CREATE", "TABLE", name, ..] => {
                        let body = &statement[statement.find('(').unwrap() + 1..];
                        let mut columns = BTreeSet::new();
                        for line in body.lines().map(str::trim) {
                            let first = line.split_whitespace().next().unwrap_or("");
                            if !first.is_empty() && !["PRIMARY", "CHECK", ")", ");"].contains(&first) {
                                columns.insert(first.to_string());
                            }
                        }
                        schema.insert((*name).to_string(), columns);
                    }
                    ["ALTER", "TABLE", name, ..] => {
                        let columns = schema.get_mut(*name).unwrap();
                        for clause in statement.split(',') {
                            let w: Vec<&str> = clause.split_whitespace().collect();
                            if let Some(i) = w.iter().position(|x| *x == "COLUMN") {
                                if w.contains(&"ADD") {
                                    columns.insert(w[i + 1].to_string());
                                } else if w.contains(&"DROP") {
                                    columns.remove(w[i + 1]);
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        for table in TABLES {
            let filled: BTreeSet<String> = target_columns(table).iter().map(|(n, _)| (*n).to_string()).collect();
            assert_eq!(schema.get(table.name), Some(&filled), "{}", table.name);
        }
        for (left, _) in NOT_COPIED.iter().filter(|(t, _)| *t != "schema_migrations").chain(POSTGRES_ONLY) {
            assert!(schema.contains_key(*left), "{left}");
        }
        assert_eq!(schema.len(), TABLES.len() + NOT_COPIED.len() - 1 + POSTGRES_ONLY.len());
    }

    #[test]
    fn values_convert_or_fail_naming_the_problem() {
        let mut zoned = Out::new(ZONED);
        zoned.push(ValueRef::Text(b"2026-11-23T07:00:00-05:00")).unwrap();
        let Out::Zoned { at, offsets } = &zoned else { panic!() };
        assert_eq!(at[0], Some("2026-11-23T12:00:00Z".parse().unwrap()));
        assert_eq!(offsets[0], Some(-5 * 3600));
        assert!(zoned.push(ValueRef::Text(b"2026-11-23T07:00:00")).unwrap_err().contains("offset"));

        let mut flag = Out::new(Conv::Bool);
        flag.push(ValueRef::Integer(1)).unwrap();
        assert!(flag.push(ValueRef::Integer(2)).unwrap_err().contains("0 or 1"));
        let mut at = Out::new(INSTANT_OR_NULL);
        at.push(ValueRef::Null).unwrap();
        assert!(at.push(ValueRef::Text(b"yesterday")).unwrap_err().contains("RFC 3339"));
        assert!(Out::new(INSTANT).push(ValueRef::Null).unwrap_err().contains("NULL"));
        assert!(Out::new(INT).push(ValueRef::Text(b"12")).unwrap_err().contains("not an integer"));
        assert!(Out::new(STATUS).push(ValueRef::Text(b"teleported")).unwrap_err().contains("unknown value"));
        assert!(Out::new(JSON).push(ValueRef::Text(b"{")).unwrap_err().contains("not JSON"));
        assert!(Out::new(TEXT).push(ValueRef::Text(b"a\0b")).unwrap_err().contains("NUL"));
    }

    /// A stored value that does not convert stops the read, naming the table, row and column.
    #[test]
    fn a_bad_row_is_named() {
        let c = migrated();
        c.execute("INSERT INTO clients (id, name, created_at) VALUES (7, 'Acme', 'last tuesday')", []).unwrap();
        let table = &TABLES[0];
        let select = "SELECT rowid, id, name, settings_json, created_at FROM clients WHERE rowid > ?1 ORDER BY rowid";
        let Err(e) = read_batch(&c, table, select, i64::MIN) else { panic!("read") };
        assert!(e.starts_with("clients row id 7, column created_at: not an RFC 3339 instant"), "{e}");
    }

    #[test]
    fn a_source_that_is_not_fully_migrated_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let path = path.to_str().unwrap();
        let c = Connection::open(path).unwrap();
        c.execute_batch(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL,
                checksum TEXT)",
        )
        .unwrap();
        let (v, name, sql) = crate::sqlite::MIGRATIONS[0];
        c.execute_batch(sql).unwrap();
        c.execute(
            "INSERT INTO schema_migrations VALUES (?1, ?2, '2026-01-01T00:00:00Z', ?3)",
            rusqlite::params![v, name, checksum(sql)],
        )
        .unwrap();
        let e = check_source(&open_source(path).unwrap(), path).unwrap_err();
        assert!(e.contains("not fully migrated (missing migration 2 (health_probe)"), "{e}");
        assert!(e.contains("dropslot migrate"), "{e}");
        assert!(open_source(dir.path().join("absent.db").to_str().unwrap()).is_err());
        assert!(open_source(dir.path().to_str().unwrap()).unwrap_err().contains("not a regular file"));
    }
}
