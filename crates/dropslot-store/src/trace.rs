//! The test hook that proves both backends are exercised whole (issue 43). When the
//! environment names a folder in `DROPSLOT_STORE_TRACE`, [`crate::open`] wraps the backend
//! in [`Traced`]: every operation of every role trait writes its name (`OrderStore::create_order`)
//! to `<folder>/<process id>` the first time the process calls it, then goes to the backend.
//! `scripts/store-trace.py` reads the folder after the end-to-end suite has run on a backend and
//! fails on any operation no test called. Unset (every installation), `open` returns the
//! backend itself and nothing is recorded.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A backend whose operations are recorded as they are called (the role traits' impls for it
/// are in each domain's `mod.rs`, beside the trait).
pub(crate) struct Traced<S> {
    pub(crate) inner: S,
    pub(crate) trace: Trace,
}

pub(crate) struct Trace {
    file: PathBuf,
    seen: Mutex<HashSet<&'static str>>,
}

impl Trace {
    pub(crate) fn new(folder: &Path) -> crate::StoreResult<Trace> {
        std::fs::create_dir_all(folder)
            .map_err(|e| crate::StoreError::Invalid(format!("DROPSLOT_STORE_TRACE={}: {e}", folder.display())))?;
        Ok(Trace { file: folder.join(std::process::id().to_string()), seen: Mutex::default() })
    }

    /// Records `operation` once per process. A write that fails leaves the name out, so the
    /// check after the suite reports it missing: the hook fails closed.
    /// The line is written whole by one `write` in append mode, under the lock: lines of
    /// threads and processes sharing the folder never interleave.
    pub(crate) fn hit(&self, operation: &'static str) {
        let Ok(mut seen) = self.seen.lock() else { return };
        if seen.insert(operation) {
            let line = format!("{operation}\n");
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.file)
                .and_then(|mut f| f.write_all(line.as_bytes()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both backends implement every role trait: `Store` is their sum, so this compiles only
    /// while each backend has each domain's half.
    #[test]
    fn both_backends_implement_every_role_and_a_trace_records_each_operation_once() {
        fn every_role<S: crate::Store>() {}
        every_role::<crate::sqlite::SqliteStore>();
        every_role::<crate::postgres::PgStore>();

        let dir = tempfile::tempdir().unwrap();
        let trace = Trace::new(&dir.path().join("trace")).unwrap();
        for op in ["OrderStore::create_order", "AuthStore::principal", "OrderStore::create_order"] {
            trace.hit(op);
        }
        let written = std::fs::read_to_string(dir.path().join("trace").join(std::process::id().to_string())).unwrap();
        assert_eq!(written.lines().collect::<Vec<_>>(), ["OrderStore::create_order", "AuthStore::principal"]);
    }
}
