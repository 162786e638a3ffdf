//! The cache epoch (`cache_epoch.n`), read once for every request waiting at that moment.
//!
//! Every request's first cache lookup needs the epoch, and on `PostgreSQL` that is a round
//! trip. Requests ask one reader task: it takes every request queued, sends one
//! `SELECT`, and answers them all with its result. Requests that arrive while a read is on
//! the wire wait for the next one, never for the one in flight: a read is sent only after
//! every request it answers had asked, so its snapshot holds every change committed before
//! any of them arrived. A token revoked before a request was sent still fails that request,
//! in any process, as with one read per request; under load a read answers many.

use std::sync::OnceLock;

use super::Connections;
use tokio::sync::{mpsc, oneshot};

use super::map_err;
use super::sql::Sql;
use crate::cache::Stamp;
use crate::{StoreError, StoreResult};

type Reply = oneshot::Sender<StoreResult<Stamp>>;

pub(crate) struct EpochReads {
    pool: Connections,
    /// The reader's queue, started by the first read (it needs the runtime). The reader
    /// stops when this is dropped.
    queue: OnceLock<mpsc::UnboundedSender<Reply>>,
}

impl EpochReads {
    pub(crate) fn new(pool: Connections) -> EpochReads {
        EpochReads { pool, queue: OnceLock::new() }
    }

    /// `cache_epoch.n` as of a moment after this call began.
    pub(crate) async fn read(&self) -> StoreResult<Stamp> {
        let stopped = || StoreError::Unavailable("the cache-epoch reader has stopped".into());
        let queue = self.queue.get_or_init(|| {
            let (queue, waiting) = mpsc::unbounded_channel();
            tokio::spawn(reader(self.pool.clone(), waiting));
            queue
        });
        let (reply, answer) = oneshot::channel();
        queue.send(reply).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn reader(pool: Connections, mut waiting: mpsc::UnboundedReceiver<Reply>) {
    let mut batch = Vec::new();
    while waiting.recv_many(&mut batch, usize::MAX).await > 0 {
        // Every request in `batch` asked before this read is sent.
        let read = read_once(&pool).await;
        for reply in batch.drain(..) {
            let _ = reply.send(match &read {
                Ok(epoch) => Ok(*epoch),
                Err(e) => Err(copy(e)),
            });
        }
    }
}

async fn read_once(pool: &Connections) -> StoreResult<Stamp> {
    let c = pool.get().await?;
    // Through the connection's statement cache (`Sql`): parsed and planned once per connection.
    // `try_get`: a column edited into another type is an error, never a panic that would
    // stop the reader for every later request.
    let n: i64 = c
        .query_opt("SELECT n FROM cache_epoch WHERE id = 1", &[])
        .await
        .map_err(map_err)?
        .ok_or_else(|| StoreError::Corrupt("cache_epoch has no row".into()))?
        .try_get(0)
        .map_err(|e| StoreError::Corrupt(format!("cache_epoch.n: {e}")))?;
    // The counter only grows from 0: a negative one was edited by hand, an error like any
    // stored value that does not parse.
    Stamp::try_from(n).map_err(|_| StoreError::Corrupt(format!("cache_epoch.n is {n}")))
}

/// The same error for each request of a failed read.
fn copy(e: &StoreError) -> StoreError {
    match e {
        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
        StoreError::Backend(b) => StoreError::Backend(b.to_string().into()),
        StoreError::Corrupt(m) => StoreError::Corrupt(m.clone()),
        StoreError::Invalid(m) => StoreError::Invalid(m.clone()),
    }
}
