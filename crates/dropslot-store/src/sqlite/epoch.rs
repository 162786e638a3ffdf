//! The `SQLite` backend's cache epoch (`store/cache.rs` has the caches): the modification time
//! of a small file beside the database (`<database>-epoch`), which every process that changes
//! what the caches hold touches right after its commit (a token revoked, a client's terms
//! changed, a saved address created or deleted). Reading it is one `fstat` of the open file;
//! any process on the machine sees a touch at once, so a revoked token fails on the very next
//! request in every process.
//!
//! - A value is tagged with the epoch read *before* its database read: a change that commits
//!   after that read touches the file after it, so the value is stale at once.
//! - A process killed between its commit and its touch leaves others' values stale for at
//!   most `cache::MAX_AGE`.
//! - Nothing fails open: when the epoch cannot be read (the file is gone, the directory is
//!   unreadable), nothing is cached or served from a cache.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::RwLock;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::cache::{self, MAX_AGE, Stamp};
use crate::{StoreError, StoreResult};

/// The epoch file of one database, kept open: reading the epoch is one `fstat` on it.
pub(crate) struct Epoch {
    id: usize,
    path: Option<PathBuf>,
    file: RwLock<Option<File>>,
}

impl Epoch {
    /// The epoch of the database at `path`, its file created if missing. A database without
    /// a file of its own, or an epoch file that cannot be created, leaves the caches off.
    pub(crate) fn open(path: &str) -> Epoch {
        let path = (!path.is_empty() && !path.starts_with(':') && !path.starts_with("file:"))
            .then(|| PathBuf::from(format!("{path}-epoch")));
        let file = path.as_ref().and_then(|p| File::options().create(true).append(true).open(p).ok());
        let id = cache::epoch_id();
        Epoch { id, path: path.filter(|_| file.is_some()), file: RwLock::new(file) }
    }

    /// The current epoch, or the one this request already read; `None` (no cache for this
    /// read) when it cannot be read.
    pub(crate) fn read(&self) -> Option<Stamp> {
        if let Some(epoch) = cache::request_epoch(self.id) {
            return Some(epoch);
        }
        let modified = self.read_file()?;
        // A time before 1970 cannot be an epoch we wrote: no cache.
        let epoch = modified.duration_since(UNIX_EPOCH).ok()?.as_nanos();
        cache::keep_request_epoch(self.id, epoch);
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
    pub(crate) fn touch(&self) -> StoreResult<()> {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cache::request_scope;

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
        let at = |secs: u64| Some(Duration::from_secs(secs).as_nanos());
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
