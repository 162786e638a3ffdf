//! The principal cache of the `SQLite` backend (issue 13): every authenticated request needs
//! its token's principal, and reading it was the largest single cost of a preview. A cached
//! principal stays valid only while the **auth epoch** is unchanged: the modification time of
//! a small file beside the database (`<database>-auth`), which every process that revokes a
//! token or changes a client's settings touches right after its commit. Reading the epoch
//! is one `stat`; any process on the machine sees a touch at once, so a revoked token fails
//! on the very next request in every process, as it did without the cache.
//!
//! - An entry is tagged with the epoch read *before* its database read: a revocation that
//!   commits after that read touches the file after it, so the entry is stale at once.
//! - Only principals that exist are cached (an unknown token always reads the database), so a
//!   hostile client cannot fill the cache; it is also bounded.
//! - An entry lives at most `MAX_AGE`, which bounds what a process killed between its commit
//!   and its touch, or a hand edit of the database, can leave stale.
//! - Nothing fails open: when the epoch cannot be read (the file is gone, the directory
//!   unreadable), nothing is cached or served from the cache.

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use crate::store::{Principal, StoreError, StoreResult, TokenHash};

/// The longest a cached principal is used without reading the database again.
const MAX_AGE: Duration = Duration::from_secs(1);
/// More distinct live tokens than this in one second of traffic: the cache starts over.
const CAPACITY: usize = 10_000;

pub(super) struct Principals {
    epoch_file: Option<PathBuf>,
    entries: Mutex<HashMap<[u8; 32], Entry>>,
}

struct Entry {
    epoch: SystemTime,
    read_at: Instant,
    principal: Principal,
}

impl Principals {
    /// The cache of the database at `path`, its epoch file created if missing. A database
    /// without a file of its own (`:memory:`), or an epoch file that cannot be created,
    /// leaves the cache off.
    pub(super) fn open(path: &str) -> Principals {
        let epoch_file = (!path.is_empty() && !path.starts_with(':') && !path.starts_with("file:"))
            .then(|| PathBuf::from(format!("{path}-auth")))
            .filter(|p| File::options().create(true).append(true).open(p).is_ok());
        Principals { epoch_file, entries: Mutex::new(HashMap::new()) }
    }

    /// The current epoch; `None` (cache off for this request) when it cannot be read.
    pub(super) fn epoch(&self) -> Option<SystemTime> {
        let path = self.epoch_file.as_ref()?;
        std::fs::metadata(path).and_then(|m| m.modified()).ok()
    }

    /// The cached principal of `hash`, if it was read in this epoch and recently.
    pub(super) fn get(&self, hash: &TokenHash, epoch: SystemTime) -> Option<Principal> {
        let entries = self.entries.lock().ok()?;
        let e = entries.get(&hash.0)?;
        (e.epoch == epoch && e.read_at.elapsed() < MAX_AGE).then(|| e.principal.clone())
    }

    /// Remembers a principal read from the database after `epoch` was read.
    pub(super) fn put(&self, hash: &TokenHash, epoch: SystemTime, principal: &Principal) {
        let Ok(mut entries) = self.entries.lock() else { return };
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert(hash.0, Entry { epoch, read_at: Instant::now(), principal: principal.clone() });
    }

    /// After a committed revocation or settings change: a new epoch for every process, and
    /// this process's entries dropped. An error when the file cannot be touched: the change
    /// is committed, but other processes may still serve it from their caches for up to
    /// `MAX_AGE`, and the caller must hear that.
    pub(super) fn invalidate(&self) -> StoreResult<()> {
        if let Ok(mut entries) = self.entries.lock() {
            entries.clear();
        }
        let Some(path) = &self.epoch_file else { return Ok(()) };
        let touched = File::options()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|f| f.set_modified(SystemTime::now()))
            .and_then(|()| std::fs::metadata(path).and_then(|m| m.modified()));
        touched.map(drop).map_err(|e| {
            StoreError::Unavailable(format!(
                "the change is committed, but the auth epoch file {} could not be touched ({e}); other processes may use their cached tokens for up to {} s",
                path.display(),
                MAX_AGE.as_secs()
            ))
        })
    }
}
