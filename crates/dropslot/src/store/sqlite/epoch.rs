//! Read caches of the `SQLite` backend (issue 13) for what every preview reads and almost
//! never changes: a token's principal, and which saved address a pick-up text is. Reading
//! them was the largest single cost of a preview.
//!
//! A cached value stays valid only while the **epoch** is unchanged: the modification time of
//! a small file beside the database (`<database>-epoch`), which every process that changes
//! such data touches right after its commit (a token revoked, a client's terms changed, a
//! saved address created or deleted). Reading the epoch is one `fstat` of the open file; any
//! process on the machine sees a touch at once, so a revoked token fails on the very next request in every
//! process, as it did without the cache.
//!
//! - A value is tagged with the epoch read *before* its database read: a change that commits
//!   after that read touches the file after it, so the value is stale at once.
//! - A value lives at most `MAX_AGE`, which bounds what a process killed between its commit
//!   and its touch, or a hand edit of the database, can leave stale.
//! - Each cache is bounded; when full it starts over.
//! - Nothing fails open: when the epoch cannot be read (the file is gone, the directory is
//!   unreadable), nothing is cached or served from a cache.

use std::collections::HashMap;
use std::fs::File;
use std::hash::Hash;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use crate::store::{StoreError, StoreResult};

/// The longest a cached value is used without reading the database again.
pub(super) const MAX_AGE: Duration = Duration::from_secs(1);

/// The epoch file of one database, kept open: reading the epoch is one `fstat` on it.
pub(super) struct Epoch {
    path: Option<PathBuf>,
    file: RwLock<Option<File>>,
}

impl Epoch {
    /// The epoch of the database at `path`, its file created if missing. A database without
    /// a file of its own, or an epoch file that cannot be created, leaves the caches off.
    pub(super) fn open(path: &str) -> Epoch {
        let path = (!path.is_empty() && !path.starts_with(':') && !path.starts_with("file:"))
            .then(|| PathBuf::from(format!("{path}-epoch")));
        let file = path.as_ref().and_then(|p| File::options().create(true).append(true).open(p).ok());
        Epoch { path: path.filter(|_| file.is_some()), file: RwLock::new(file) }
    }

    /// The current epoch; `None` (no cache for this read) when it cannot be read.
    pub(super) fn read(&self) -> Option<SystemTime> {
        {
            let file = self.file.read().ok()?;
            let meta = file.as_ref()?.metadata().ok()?;
            // A file deleted (or replaced) since it was opened never changes again: open the
            // one at the path instead.
            if meta.nlink() > 0 {
                return meta.modified().ok();
            }
        }
        let reopened = File::options().create(true).append(true).open(self.path.as_ref()?).ok()?;
        let modified = reopened.metadata().and_then(|m| m.modified()).ok();
        *self.file.write().ok()? = Some(reopened);
        modified
    }

    /// After a committed change: a new epoch for every process. An error when the file cannot
    /// be touched: the change is committed, but other processes may still serve what they
    /// cached for up to `MAX_AGE`.
    pub(super) fn touch(&self) -> StoreResult<()> {
        let Some(path) = &self.path else { return Ok(()) };
        File::options().create(true).append(true).open(path).and_then(|f| f.set_modified(SystemTime::now())).map_err(
            |e| {
                StoreError::Unavailable(format!(
                    "the change is committed, but the epoch file {} could not be touched ({e}); other processes may use what they cached for up to {} s",
                    path.display(),
                    MAX_AGE.as_secs()
                ))
            },
        )
    }
}

/// Values by key, each valid in the epoch it was read in, for at most `MAX_AGE`.
pub(super) struct EpochCache<K, V> {
    capacity: usize,
    entries: Mutex<HashMap<K, Entry<V>>>,
}

struct Entry<V> {
    epoch: SystemTime,
    read_at: Instant,
    value: V,
}

impl<K: Eq + Hash, V: Clone> EpochCache<K, V> {
    pub(super) fn new(capacity: usize) -> Self {
        EpochCache { capacity, entries: Mutex::new(HashMap::new()) }
    }

    /// The value of `key`, if it was read in `epoch` and recently.
    pub(super) fn get(&self, key: &K, epoch: SystemTime) -> Option<V> {
        let entries = self.entries.lock().ok()?;
        let e = entries.get(key)?;
        (e.epoch == epoch && e.read_at.elapsed() < MAX_AGE).then(|| e.value.clone())
    }

    /// Remembers a value read from the database after `epoch` was read.
    pub(super) fn put(&self, key: K, epoch: SystemTime, value: V) {
        let Ok(mut entries) = self.entries.lock() else { return };
        if entries.len() >= self.capacity {
            entries.clear();
        }
        entries.insert(key, Entry { epoch, read_at: Instant::now(), value });
    }

    /// Drops every value (this process's own change; the touch tells the others).
    pub(super) fn clear(&self) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.clear();
        }
    }
}
