//! The storage seam: one async trait both backends (`SQLite`, `PostgreSQL`) implement,
//! chosen by the database URL's scheme. Every tenant-data method takes a `Scope`, so a query
//! that forgets the client and mode filter cannot be written against this trait.

pub mod cache;
pub mod copy;
mod labels;
pub mod postgres;
pub mod sqlite;
mod trace;
mod types;

// The domains: each folder holds its role trait and records (`mod.rs`) beside the trait's
// `SQLite` and `PostgreSQL` halves (`sqlite.rs`, `postgres.rs`).
mod attempts;
mod auth;
mod capacity;
mod driver;
mod fleet;
mod lifecycle;
pub mod notifications;
mod orders;
mod outbox;
mod plans;
mod points;
mod reports;
mod sessions;
mod shipments;
mod tentative;
mod upkeep;
mod webhooks;

use std::sync::Arc;

pub use attempts::*;
pub use auth::*;
pub use capacity::*;
pub use driver::*;
pub use fleet::*;
pub use lifecycle::*;
pub use notifications::*;
pub use orders::*;
pub use outbox::*;
pub use plans::*;
pub use points::*;
pub use reports::*;
pub use sessions::*;
pub use shipments::*;
pub use tentative::{Fleet, TentativeStore, Versions};
pub use types::*;
pub use upkeep::*;
pub use webhooks::*;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or is overloaded: a 503, safe to retry.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("stored data is inconsistent: {0}")]
    Corrupt(String),
    /// The database named cannot be used as given (a wrong URL, not a regular file): not
    /// retryable, the operator must change it.
    #[error("{0}")]
    Invalid(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// How the backend's writing and reading went, for `/metrics`: kept by the backend in
/// atomics, read at each scrape.
#[derive(Debug, Default)]
pub struct StoreStats {
    /// Write transactions that committed a batch of jobs (`SQLite`: the group-commit writer;
    /// `PostgreSQL`: the order batcher).
    pub batches: std::sync::atomic::AtomicU64,
    /// Jobs in those batches (their mean size is `batched_jobs / batches`).
    pub batched_jobs: std::sync::atomic::AtomicU64,
    /// Jobs waiting for the writer (or the order batcher) now.
    pub queued: std::sync::atomic::AtomicI64,
    /// Reads that had to wait for a connection (every pooled one was busy).
    pub read_waits: std::sync::atomic::AtomicU64,
}

impl StoreStats {
    /// One batch of `jobs` taken from the queue and written.
    pub fn batch(&self, jobs: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        self.batches.fetch_add(1, Relaxed);
        self.batched_jobs.fetch_add(jobs as u64, Relaxed);
        self.queued.fetch_sub(jobs as i64, Relaxed);
    }
}

/// Everything a backend stores: one role trait per domain (`<domain>/mod.rs`), each beside
/// its `SQLite` and `PostgreSQL` halves. The service holds one value of it.
pub trait Store:
    UpkeepStore
    + AttemptStore
    + AuthStore
    + SessionStore
    + FleetStore
    + OrderStore
    + LifecycleStore
    + ShipmentStore
    + PointStore
    + WebhookStore
    + CapacityStore
    + PlanStore
    + DriverStore
    + NotificationStore
    + TentativeStore
    + ReportStore
{
}

impl<
    T: UpkeepStore
        + AttemptStore
        + AuthStore
        + SessionStore
        + FleetStore
        + OrderStore
        + LifecycleStore
        + ShipmentStore
        + PointStore
        + WebhookStore
        + CapacityStore
        + PlanStore
        + DriverStore
        + NotificationStore
        + TentativeStore
        + ReportStore,
> Store for T
{
}

pub type DynStore = Arc<dyn Store>;

/// The queue's clock: Unix milliseconds on the system clock.
pub fn queue_now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// `text` for a `LIKE … ESCAPE '\'` pattern: its `%`, `_` and `\` match themselves.
pub(crate) fn like_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// The backend itself, or wrapped to record its operations (`trace.rs`).
fn traced<S: Store>(inner: S, trace: Option<trace::Trace>) -> DynStore {
    match trace {
        Some(trace) => Arc::new(trace::Traced { inner, trace }),
        None => Arc::new(inner),
    }
}

/// Opens the backend named by the URL's scheme (async: a network backend connects here),
/// with the outbox that renders the webhook events its changes cause.
/// `pg` sizes the `PostgreSQL` pool (unused on `SQLite`).
#[allow(clippy::unused_async)]
pub async fn open(
    url: &str,
    pg: &dropslot_core::config::PostgresSettings,
    outbox: Arc<dyn Outbox>,
) -> StoreResult<DynStore> {
    let trace = std::env::var_os("DROPSLOT_STORE_TRACE").filter(|f| !f.is_empty());
    let trace = trace.map(|folder| trace::Trace::new(std::path::Path::new(&folder))).transpose()?;
    match dropslot_core::config::DatabaseUrl::parse(url).map_err(StoreError::Invalid)? {
        dropslot_core::config::DatabaseUrl::Sqlite(path) => {
            Ok(traced(sqlite::SqliteStore::open(&path, outbox)?, trace))
        }
        dropslot_core::config::DatabaseUrl::Postgres(url) => {
            Ok(traced(postgres::PgStore::open(&url, pg, outbox)?, trace))
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Mode, StaffKind, TokenKind};
    use dropslot_core::dispatch::{PlanKind, PlanPhase};
    use dropslot_core::quote::capacity::SlotKind;
    use dropslot_core::requests::RequestStatus;
    use dropslot_core::shipments::{Actor, ShipmentKind, Status};
    use dropslot_core::webhooks::DeliveryState;
    use std::path::{Path, PathBuf};

    /// Every name a state, kind or mode column stores, from its enum: the core's `ALL` lists,
    /// and the store's own enums, whose variants are listed here until they move to the core.
    fn stored_names() -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Vec::new();
        names.extend(Status::ALL.map(Status::as_str));
        names.extend(ShipmentKind::ALL.map(ShipmentKind::as_str));
        names.extend(Actor::ALL.map(Actor::as_str));
        names.extend(SlotKind::ALL.map(SlotKind::as_str));
        names.extend(PlanKind::ALL.map(PlanKind::as_str));
        names.extend(PlanPhase::ALL.map(PlanPhase::as_str));
        names.extend(DeliveryState::ALL.map(DeliveryState::as_str));
        names.extend(RequestStatus::ALL.map(RequestStatus::as_str));
        names.extend(
            dropslot_core::notifications::MessageState::ALL.map(dropslot_core::notifications::MessageState::as_str),
        );
        names.extend(dropslot_core::notifications::Trigger::ALL.map(dropslot_core::notifications::Trigger::as_str));
        names.extend(dropslot_core::notifications::Channel::ALL.map(dropslot_core::notifications::Channel::as_str));
        names.extend([Mode::Test, Mode::Live].map(Mode::as_str));
        names.extend([TokenKind::Test, TokenKind::Live, TokenKind::Ops].map(TokenKind::as_str));
        names.extend([StaffKind::Operator, StaffKind::Driver].map(StaffKind::as_str));
        names.sort_unstable();
        names.dedup();
        names
    }

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The stored names `line` spells in quotes, unless it is a comment (comments may quote a
    /// partial index's condition).
    fn spelled<'n>(line: &str, names: &[&'n str]) -> Vec<&'n str> {
        if line.trim_start().starts_with("//") {
            return Vec::new();
        }
        names.iter().copied().filter(|n| line.contains(&format!("'{n}'"))).collect()
    }

    /// Issue 43: a state's name lives once, in its enum. The backends bind it, or, where a
    /// partial index needs the constant, build the statement's text once from the enum; no
    /// source of the store spells one in quotes. Read from the sources, so a new file is
    /// checked too.
    #[test]
    fn no_statement_spells_a_stored_name() {
        let names = stored_names();
        assert!(names.contains(&"pending") && names.contains(&"solving") && names.contains(&"live"));
        // The samples are built, so that this file spells no name either.
        let pending = DeliveryState::Pending.as_str();
        assert_eq!(spelled(&format!("WHERE d.state = '{pending}' AND"), &names), [pending]);
        assert!(spelled("WHERE d.state = '{pending}' AND", &names).is_empty());
        assert!(spelled(&format!("    // `state = '{pending}'`"), &names).is_empty());

        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        assert!(files.len() > 40 && files.iter().any(|f| f.ends_with("webhooks/sqlite.rs")), "{files:?}");
        let mut found = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            // A unit test's fixtures (below `#[cfg(test)]`) may write rows as they are stored.
            for (i, line) in text.lines().enumerate().take_while(|(_, l)| l.trim() != "#[cfg(test)]") {
                for name in spelled(line, &names) {
                    found.push(format!("{}:{}: '{name}'", file.strip_prefix(&src).unwrap().display(), i + 1));
                }
            }
        }
        assert!(found.is_empty(), "bind these names from their enums (or build the text from them): {found:#?}");
    }
}
