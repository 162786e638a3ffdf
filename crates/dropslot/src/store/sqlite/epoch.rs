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
//! - Within one HTTP request (`request_scope`, installed by the router), the epoch is read
//!   once, at the request's first cache lookup, and its later lookups reuse it: the request
//!   sees the caches as of that instant, as if it had arrived then. A preview looked up the
//!   principal and then the saved address, two `fstat`s (6 % of its profile). The next
//!   request reads the epoch afresh, so a revocation still fails it.

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::File;
use std::hash::Hash;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use crate::store::{StoreError, StoreResult};

/// The longest a cached value is used without reading the database again.
pub(super) const MAX_AGE: Duration = Duration::from_secs(1);

tokio::task_local! {
    /// The epoch this request has read, and the `Epoch` it is of.
    static REQUEST_EPOCH: Cell<Option<(usize, SystemTime)>>;
}

/// Runs `request` so that its cache lookups read the epoch once (the router wraps every HTTP
/// request in it). Work outside it (workers, the dispatcher) reads the epoch at every lookup.
pub async fn request_scope<F: std::future::Future>(request: F) -> F::Output {
    REQUEST_EPOCH.scope(Cell::new(None), request).await
}

/// Tells `Epoch`s apart in `REQUEST_EPOCH`.
static NEXT_EPOCH_ID: AtomicUsize = AtomicUsize::new(0);

/// The epoch file of one database, kept open: reading the epoch is one `fstat` on it.
pub(super) struct Epoch {
    id: usize,
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
        let id = NEXT_EPOCH_ID.fetch_add(1, Ordering::Relaxed);
        Epoch { id, path: path.filter(|_| file.is_some()), file: RwLock::new(file) }
    }

    /// The current epoch, or the one this request already read; `None` (no cache for this
    /// read) when it cannot be read.
    pub(super) fn read(&self) -> Option<SystemTime> {
        let memo = REQUEST_EPOCH.try_with(Cell::get).ok().flatten();
        if let Some((_, epoch)) = memo.filter(|(id, _)| *id == self.id) {
            return Some(epoch);
        }
        let epoch = self.read_file()?;
        // Outside a request scope there is nowhere to keep it.
        let _ = REQUEST_EPOCH.try_with(|m| m.set(Some((self.id, epoch))));
        Some(epoch)
    }

    /// The epoch file's modification time.
    fn read_file(&self) -> Option<SystemTime> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn set_epoch(path: &std::path::Path, secs: u64) {
        let f = File::options().append(true).open(path).unwrap();
        f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)).unwrap();
    }

    #[tokio::test]
    async fn a_request_reads_the_epoch_once_and_the_next_request_reads_it_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let epoch = Epoch::open(db.to_str().unwrap());
        let file = dir.path().join("db-epoch");
        set_epoch(&file, 100);
        let (first, second) = request_scope(async {
            let first = epoch.read();
            set_epoch(&file, 200); // another process's change, while this request runs
            (first, epoch.read())
        })
        .await;
        let at = |secs| Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(first, at(100));
        assert_eq!(second, at(100), "one request sees one epoch");
        assert_eq!(request_scope(async { epoch.read() }).await, at(200), "the next request sees the change");
        set_epoch(&file, 300);
        assert_eq!(epoch.read(), at(300), "outside a request, every read is fresh");
        // Another database's epoch in the same request is its own.
        let other_db = dir.path().join("other");
        let other = Epoch::open(other_db.to_str().unwrap());
        set_epoch(&dir.path().join("other-epoch"), 400);
        let both = request_scope(async { (epoch.read(), other.read()) }).await;
        assert_eq!(both, (at(300), at(400)));
    }
}
