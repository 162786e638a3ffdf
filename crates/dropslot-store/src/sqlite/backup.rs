//! `dropslot backup`: a consistent copy of a live `SQLite` database, taken with SQLite's online
//! backup API while the server keeps writing, made durable and checked before it is kept.
//!
//! A function of this backend, not a [`Store`](crate::Store) method: the trait is what the
//! running service asks of whichever backend it has, and both backends implement all of it.
//! A backup is an operator's act on one file. It needs none of a store's machinery (its writer
//! thread, its pooled readers, its outbox) and must not do what opening one does (switch the
//! journal mode, create the epoch file): it reads the source through one read-only
//! connection. On `PostgreSQL` the same job belongs to `pg_dump` and WAL archiving, so a
//! trait method would have one real implementation and one refusal.
//!
//! Consistency comes from one read transaction held across every step. In WAL mode that
//! transaction is a snapshot: the server's writer goes on committing beside it (readers never
//! block the writer), checkpoints stop at the snapshot until it ends, and the copy is the
//! database exactly as of its first read. Without it, each step would take a fresh snapshot,
//! and SQLite restarts a backup whenever another connection commits between two steps: under
//! a steady stream of orders it might never finish.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

/// Pages copied per step (4 MiB at the 4 KiB default page size). The snapshot is a WAL read,
/// so no step blocks the server's writer; steps keep each call into SQLite short, so that a
/// "busy" answer (a checkpoint resetting the WAL) is retried after a few milliseconds.
const PAGES_PER_STEP: i32 = 1024;

/// How long a step may keep answering "busy" (the server's writer switching the journal
/// mode, a checkpoint resetting the WAL) before the backup gives up: the store's busy timeout.
const BUSY_LIMIT: Duration = Duration::from_secs(5);

/// What a finished backup holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The copy's size on disk.
    pub bytes: u64,
    /// The pages copied (the source's page count at its snapshot).
    pub pages: u64,
}

/// Copies the `SQLite` database at `source` to `target`, online: a temporary file beside
/// `target` receives the copy, is converted to a single self-contained file (rollback
/// journal, no `-wal` to carry along), checked with `PRAGMA integrity_check`, fsynced,
/// renamed over `target` and its directory fsynced. `target` must not exist unless `force`.
/// On any failure the temporary file is removed and `target` is left as it was. Every error
/// is one line that says what went wrong.
pub fn run(source: &str, target: &Path, force: bool) -> Result<Taken, String> {
    let shown = target.display();
    let src_meta = std::fs::metadata(source).map_err(|e| format!("{source}: {e}; backup needs the database file"))?;
    if !src_meta.is_file() {
        return Err(format!("{source}: not a regular file; backup needs the database file"));
    }
    if target.exists() {
        if !force {
            return Err(format!("{shown} already exists; pass --force to replace it"));
        }
        if same_file(Path::new(source), target) {
            return Err(format!("{shown} is the database itself; back it up to another path"));
        }
    }
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target.file_name().ok_or_else(|| format!("{shown}: not a file path"))?;
    let temp = Temp(dir.join(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id())));
    // A leftover of a run killed midway under the same pid would otherwise be copied into.
    temp.remove();

    let pages = copy(source, &temp.0, || ())?;
    verify(&temp.0)?;
    File::open(&temp.0)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("{}: cannot sync the copy: {e}", temp.0.display()))?;
    // Checked again: the copy took a while, and `--force` was not given to replace a file
    // that appeared meanwhile.
    if !force && target.exists() {
        return Err(format!("{shown} appeared during the backup; pass --force to replace it"));
    }
    std::fs::rename(&temp.0, target).map_err(|e| format!("cannot move the copy to {shown}: {e}"))?;
    temp.keep();
    // The rename is durable once the directory is.
    File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| format!("{}: cannot sync: {e}", dir.display()))?;
    let bytes = std::fs::metadata(target).map_err(|e| format!("{shown}: {e}"))?.len();
    Ok(Taken { bytes, pages })
}

/// The online copy into `dest` (a new file): the source's pages as of one snapshot, in steps,
/// with `between_steps` run after each step that left pages to copy (the tests write there).
/// Returns the page count.
fn copy(source: &str, dest: &Path, mut between_steps: impl FnMut()) -> Result<u64, String> {
    let src = Connection::open_with_flags(source, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| format!("{source}: cannot open it read-only: {e}"))?;
    src.busy_timeout(BUSY_LIMIT).map_err(|e| format!("{source}: {e}"))?;
    let shown = dest.display();
    let mut dst = Connection::open(dest).map_err(|e| format!("{shown}: cannot create the copy: {e}"))?;
    // The snapshot starts at the first read inside the transaction and holds until its end.
    let snapshot = src.unchecked_transaction().map_err(|e| format!("{source}: cannot start a read: {e}"))?;
    snapshot
        .query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))
        .map_err(|e| format!("{source}: cannot read it as a SQLite database: {e}"))?;
    let pages = {
        let backup = Backup::new(&snapshot, &mut dst).map_err(|e| format!("cannot start the backup: {e}"))?;
        let mut busy_since = None;
        loop {
            match backup.step(PAGES_PER_STEP).map_err(|e| format!("backing up {source}: {e}"))? {
                StepResult::Done => break,
                StepResult::More => {
                    busy_since = None;
                    between_steps();
                }
                // Transient; other results may be added by a later rusqlite.
                _ => {
                    let since = *busy_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > BUSY_LIMIT {
                        return Err(format!("backing up {source}: the database stayed busy for {BUSY_LIMIT:?}"));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        backup.progress().pagecount
    };
    // A read: ending it changes nothing.
    drop(snapshot);
    // The pages carry the source's WAL flag; a backup is one file, whatever journal the
    // server puts it in when it is restored.
    dst.query_row("PRAGMA journal_mode = DELETE", [], |_| Ok(()))
        .map_err(|e| format!("{shown}: cannot set the journal mode of the copy: {e}"))?;
    dst.close().map_err(|(_, e)| format!("{shown}: cannot close the copy: {e}"))?;
    Ok(u64::try_from(pages).unwrap_or_default())
}

/// `PRAGMA integrity_check` on the copy, read-only: anything but one row `ok` is an error
/// quoting the first problems it lists.
fn verify(copy: &Path) -> Result<(), String> {
    let shown = copy.display();
    let conn = Connection::open_with_flags(copy, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| format!("{shown}: cannot open the copy: {e}"))?;
    let rows: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| format!("{shown}: integrity check failed to run: {e}"))?;
    if rows != ["ok"] {
        let first: Vec<&str> = rows.iter().take(3).map(String::as_str).collect();
        return Err(format!("the copy failed its integrity check: {}", first.join("; ")));
    }
    Ok(())
}

/// Whether two existing paths name one file (through links or different spellings).
fn same_file(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

/// The temporary copy, with the journal its connection may leave behind, removed when
/// dropped unless it was kept.
struct Temp(PathBuf);

impl Temp {
    fn remove(&self) {
        let _ = std::fs::remove_file(&self.0);
        let mut journal = self.0.clone().into_os_string();
        journal.push("-journal");
        let _ = std::fs::remove_file(journal);
    }

    /// Renamed into place: nothing to remove.
    fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wal_db(path: &Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
             CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL);",
        )
        .unwrap();
        conn
    }

    /// Another connection commits between every two steps: the copy still finishes (it is not
    /// restarted by each commit) and holds exactly the rows of its first read.
    #[test]
    fn a_copy_is_the_snapshot_of_its_first_read_whatever_is_committed_between_steps() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("live.db");
        let conn = wal_db(&db);
        // About 2,600 pages: three steps.
        conn.execute_batch(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
             INSERT INTO t (v) SELECT printf('%.2000c', 'x') FROM n",
        )
        .unwrap();
        let copy_path = dir.path().join("copy.db");
        // Bounded, so that a backup restarted by each commit would end too, holding them.
        let mut commits = 0;
        let pages = copy(db.to_str().unwrap(), &copy_path, || {
            if commits < 20 {
                conn.execute("INSERT INTO t (v) VALUES ('committed during the copy')", []).unwrap();
                commits += 1;
            }
        })
        .unwrap();
        assert!(commits >= 2, "the copy took {commits} steps");
        assert!(pages > u64::try_from(2 * PAGES_PER_STEP).unwrap(), "{pages} pages");
        let copied = Connection::open(&copy_path).unwrap();
        let n: i64 = copied.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 5000, "only the rows of the snapshot");
        let mode: String = copied.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "delete", "one self-contained file");
        verify(&copy_path).unwrap();
    }

    #[test]
    fn an_existing_target_is_replaced_only_with_force_and_never_by_the_database_itself() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("live.db");
        let _conn = wal_db(&db);
        let target = dir.path().join("copy.db");
        std::fs::write(&target, b"keep me").unwrap();
        let err = run(db.to_str().unwrap(), &target, false).unwrap_err();
        assert!(err.contains("--force"), "{err}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        run(db.to_str().unwrap(), &target, true).unwrap();
        assert_ne!(std::fs::read(&target).unwrap(), b"keep me");
        let err = run(db.to_str().unwrap(), &db, true).unwrap_err();
        assert!(err.contains("the database itself"), "{err}");
    }
}
