//! The single `SQLite` writer: one thread owns the write connection and commits whatever jobs
//! are queued together in one transaction (group commit), each inside its own savepoint so a
//! failing job rolls back alone. A reply is sent only after the COMMIT is durable.

use std::panic::AssertUnwindSafe;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::StoreError;

/// Jobs committed together at most; bounds the latency one batch adds.
const MAX_BATCH: usize = 256;
/// Jobs waiting at most; senders wait (asynchronously) beyond that.
const QUEUE: usize = 8192;

trait Job: Send {
    /// Runs inside the job's savepoint; `false` rolls the savepoint back.
    fn run(&mut self, conn: &Connection) -> bool;
    /// Called after the batch's COMMIT (or its failure).
    fn finish(self: Box<Self>, committed: Result<(), &str>);
}

struct TypedJob<T, E, F> {
    work: Option<F>,
    outcome: Option<Result<T, E>>,
    /// Taken when the answer is sent: at the commit, or (an unsynced job that succeeded) as
    /// soon as the job has run.
    reply: Option<oneshot::Sender<Result<T, E>>>,
    unsynced: bool,
}

impl<T, E, F> Job for TypedJob<T, E, F>
where
    T: Send,
    E: From<StoreError> + Send,
    F: FnOnce(&Connection) -> Result<T, E> + Send,
{
    fn run(&mut self, conn: &Connection) -> bool {
        let Some(work) = self.work.take() else { return false };
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| work(conn)))
            .unwrap_or_else(|_| Err(StoreError::Corrupt("a write job panicked".into()).into()));
        let ok = outcome.is_ok();
        if ok && self.unsynced {
            if let Some(reply) = self.reply.take() {
                let _ = reply.send(outcome);
            }
            return true;
        }
        self.outcome = Some(outcome);
        ok
    }

    fn finish(self: Box<Self>, committed: Result<(), &str>) {
        let this = *self;
        let Some(reply) = this.reply else { return };
        let result = match (committed, this.outcome) {
            (Ok(()), Some(outcome)) => outcome,
            // A failed job's error stands even if the batch failed too.
            (Err(_), Some(Err(e))) => Err(e),
            (Err(why), _) => Err(StoreError::Unavailable(format!("commit failed: {why}")).into()),
            (Ok(()), None) => Err(StoreError::Corrupt("write job did not run".into()).into()),
        };
        // The requester may have gone away; the data is committed either way.
        let _ = reply.send(result);
    }
}

#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<Box<dyn Job>>,
    stats: std::sync::Arc<crate::StoreStats>,
}

impl Writer {
    /// Starts the writer thread over `conn`; it stops when every `Writer` handle is dropped.
    pub fn start(conn: Connection, stats: std::sync::Arc<crate::StoreStats>) -> Writer {
        let (tx, rx) = mpsc::channel(QUEUE);
        let counted = stats.clone();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || run(conn, rx, &counted))
            .expect("spawn the SQLite writer thread");
        Writer { tx, stats }
    }

    /// Runs `work` in the next batch transaction; resolves after it is committed.
    pub async fn write<T, E, F>(&self, work: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    {
        self.submit(work, false).await
    }

    /// Runs `work` in the next batch transaction and resolves as soon as it has run, without
    /// waiting for the batch's COMMIT: what it wrote is seen by every later job (they run on
    /// this connection), but a crash or a failed commit may still undo it. Only for writes
    /// whose loss is harmless: the dispatcher's claims, whose lease only keeps other claims
    /// off a delivery in flight (lost, the delivery is sent again: at least once, as after a
    /// crash). A job that fails still answers after the commit, as `write` does.
    pub async fn write_unsynced<T, E, F>(&self, work: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    {
        self.submit(work, true).await
    }

    async fn submit<T, E, F>(&self, work: F, unsynced: bool) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let job: Box<dyn Job> = Box::new(TypedJob { work: Some(work), outcome: None, reply: Some(reply), unsynced });
        self.stats.queued.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.tx.send(job).await.is_err() {
            self.stats.queued.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            return Err(E::from(StoreError::Unavailable("the database writer has stopped".into())));
        }
        rx.await.map_err(|_| E::from(StoreError::Unavailable("the database writer has stopped".into())))?
    }
}

#[allow(clippy::needless_pass_by_value)] // the thread owns the connection
fn run(conn: Connection, mut rx: mpsc::Receiver<Box<dyn Job>>, stats: &crate::StoreStats) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        stats.batch(batch.len());
        commit_batch(&conn, &mut batch);
    }
}

fn commit_batch(conn: &Connection, batch: &mut Vec<Box<dyn Job>>) {
    let step = |sql: &str| conn.prepare_cached(sql).and_then(|mut s| s.execute([])).map(drop);
    if let Err(e) = step("BEGIN IMMEDIATE") {
        let why = e.to_string();
        for job in batch.drain(..) {
            job.finish(Err(&why));
        }
        return;
    }
    // The savepoint statements are prepared once (parsing them for every job was about 15 %
    // of the writer's samples under the webhook load, issue 33).
    for job in batch.iter_mut() {
        let ok = step("SAVEPOINT job").is_ok() && job.run(conn);
        let end = if ok { step("RELEASE job") } else { step("ROLLBACK TO job").and_then(|()| step("RELEASE job")) };
        if let Err(e) = end {
            tracing::error!(error = %e, "savepoint end failed");
        }
    }
    let committed = step("COMMIT").map_err(|e| e.to_string());
    if committed.is_err() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    let why = committed.as_ref().err().map(String::as_str);
    for job in batch.drain(..) {
        job.finish(why.map_or(Ok(()), Err));
    }
}

/// Maps a rusqlite error: busy, locked, read-only, full, I/O and permission errors →
/// unavailable (a 503: the request was fine, the database cannot take it now); the rest →
/// backend (a 500).
pub fn map_err(e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code() {
        Some(
            ErrorCode::DatabaseBusy
            | ErrorCode::DatabaseLocked
            | ErrorCode::SystemIoFailure
            | ErrorCode::DiskFull
            | ErrorCode::ReadOnly
            | ErrorCode::PermissionDenied
            | ErrorCode::CannotOpen,
        ) => StoreError::Unavailable(e.to_string()),
        _ => StoreError::Backend(Box::new(e)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc as std_mpsc;
    use std::time::Duration;

    use super::*;

    fn writer() -> Writer {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (v INTEGER)").unwrap();
        Writer::start(conn, std::sync::Arc::default())
    }

    /// An unsynced job answers while its batch is still open: the job after it in the same
    /// batch waits for that answer, which a job answered at the commit could never give.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unsynced_job_answers_before_its_batch_commits() {
        let w = writer();
        // A first batch held open until both jobs below are queued, so they share the next one.
        let (release, held) = std_mpsc::channel::<()>();
        let (running, started) = tokio::sync::oneshot::channel::<()>();
        let gate = tokio::spawn({
            let w = w.clone();
            async move {
                w.write(move |_| {
                    let _ = running.send(());
                    held.recv_timeout(Duration::from_secs(10)).map_err(|_| StoreError::Unavailable("gate".into()))
                })
                .await
            }
        });
        started.await.unwrap();
        let (answered, wait_answer) = std_mpsc::channel::<()>();
        // Each job is polled once here, which puts it in the queue (there is room, so the send
        // completes without waiting): the unsynced job is queued first, deterministically.
        let mut unsynced =
            Box::pin(w.write_unsynced(|c| c.execute("INSERT INTO t (v) VALUES (1)", []).map_err(map_err)));
        let mut after = Box::pin(w.write(move |c| {
            wait_answer
                .recv_timeout(Duration::from_secs(10))
                .map_err(|_| StoreError::Unavailable("the unsynced job's answer never came".into()))?;
            // It sees the unsynced job's row: the same transaction.
            c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)).map_err(map_err)
        }));
        std::future::poll_fn(|cx| {
            assert!(unsynced.as_mut().poll(cx).is_pending());
            assert!(after.as_mut().poll(cx).is_pending());
            std::task::Poll::Ready(())
        })
        .await;
        assert_eq!(w.stats.queued.load(std::sync::atomic::Ordering::Relaxed), 2);
        release.send(()).unwrap();
        gate.await.unwrap().unwrap();
        assert_eq!(unsynced.await.unwrap(), 1);
        answered.send(()).unwrap();
        assert_eq!(after.await.unwrap(), 1);
    }

    /// A failing unsynced job answers its own error (after the commit, as any job).
    #[tokio::test]
    async fn a_failing_unsynced_job_answers_its_error() {
        let w = writer();
        let r: Result<usize, StoreError> =
            w.write_unsynced(|c| c.execute("INSERT INTO missing (v) VALUES (1)", []).map_err(map_err)).await;
        assert!(r.is_err());
        let n: i64 =
            w.write(|c| c.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).map_err(map_err)).await.unwrap();
        assert_eq!(n, 0);
    }
}
