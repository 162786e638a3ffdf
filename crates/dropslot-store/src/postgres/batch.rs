//! Concurrent orders share a transaction: a process's order requests queue here, and
//! `[postgres] order_writers` writer tasks each take every order waiting (up to a bound) and
//! write them with one statement and one COMMIT (`insert::insert_orders`). Under load, the cost of a round
//! trip, a plan's start-up and a WAL flush is shared by the whole batch; with one order
//! waiting, a batch is that order. Each order is answered only after its COMMIT.
//!
//! A batch stands or falls as a whole, so one order cannot fail its neighbours: when a batch
//! fails (a custom code taken, a deadlock with another process's batch, anything), it is
//! rolled back and each of its orders is written again in a transaction of its own, which
//! gives each its own answer. Orders with an `Idempotency-Key` do not come here (their key
//! is claimed first, in their own transaction).

use std::sync::Arc;

use super::Connections;
use tokio::sync::{Mutex, mpsc, oneshot};

use super::insert::insert_orders;
use super::map_err;
use super::outbox::Sink;
use crate::{CreateOrderError, NewOrder, Outbox, Scope, StoreError, WrittenOrder};

/// Orders in one batch at most, and drop-offs (a batch stops growing at either).
const MAX_ORDERS: usize = 64;
const MAX_DROP_OFFS: usize = 1_000;
/// Orders queued at most; a request finding it full waits for room.
const QUEUE: usize = 4_096;

struct Job {
    scope: Scope,
    order: NewOrder,
    reply: oneshot::Sender<Result<WrittenOrder, CreateOrderError>>,
}

pub(super) struct Batcher {
    queue: mpsc::Sender<Job>,
    stats: Arc<crate::StoreStats>,
}

impl Batcher {
    /// Starts the writers (on the current Tokio runtime); they stop when the batcher is
    /// dropped and the queue is empty.
    pub(super) fn start(
        pool: &Connections,
        outbox: &Arc<dyn Outbox>,
        writers: usize,
        stats: &Arc<crate::StoreStats>,
    ) -> Batcher {
        let (queue, jobs) = mpsc::channel(QUEUE);
        let jobs = Arc::new(Mutex::new(jobs));
        for _ in 0..writers {
            tokio::spawn(writer(jobs.clone(), pool.clone(), outbox.clone(), stats.clone()));
        }
        Batcher { queue, stats: stats.clone() }
    }

    /// Writes one order in the next batch; its ids once committed.
    pub(super) async fn create(&self, scope: Scope, order: NewOrder) -> Result<WrittenOrder, CreateOrderError> {
        let stopped = || StoreError::Unavailable("the order writer has stopped".into());
        let (reply, answer) = oneshot::channel();
        self.stats.queued.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.queue.send(Job { scope, order, reply }).await.is_err() {
            self.stats.queued.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            return Err(stopped().into());
        }
        answer.await.map_err(|_| stopped())?
    }
}

async fn writer(
    jobs: Arc<Mutex<mpsc::Receiver<Job>>>,
    pool: Connections,
    outbox: Arc<dyn Outbox>,
    stats: Arc<crate::StoreStats>,
) {
    loop {
        // One writer at a time waits for work and takes what is queued; the others write.
        let batch = {
            let mut jobs = jobs.lock().await;
            let Some(first) = jobs.recv().await else { return };
            let mut drop_offs = first.order.shipments.len();
            let mut batch = vec![first];
            while batch.len() < MAX_ORDERS && drop_offs < MAX_DROP_OFFS {
                let Ok(job) = jobs.try_recv() else { break };
                drop_offs += job.order.shipments.len();
                batch.push(job);
            }
            batch
        };
        stats.batch(batch.len());
        write(&pool, &*outbox, batch).await;
    }
}

/// Writes a batch, or, when it fails, each of its orders alone; answers every order.
async fn write(pool: &Connections, outbox: &dyn Outbox, batch: Vec<Job>) {
    if batch.len() > 1 {
        let orders: Vec<(Scope, &NewOrder)> = batch.iter().map(|j| (j.scope, &j.order)).collect();
        if let Ok(ids) = commit(pool, outbox, &orders).await {
            for (job, ids) in batch.into_iter().zip(ids) {
                let _ = job.reply.send(Ok(ids));
            }
            return;
        }
    }
    for job in batch {
        let written = commit(pool, outbox, &[(job.scope, &job.order)]).await.and_then(|mut ids| {
            ids.pop().ok_or_else(|| StoreError::Corrupt("the order insert returned no order".into()).into())
        });
        // The requester may have gone (a closed connection); its order stands all the same.
        let _ = job.reply.send(written);
    }
}

/// `orders` in one transaction; their ids once committed.
async fn commit(
    pool: &Connections,
    outbox: &dyn Outbox,
    orders: &[(Scope, &NewOrder)],
) -> Result<Vec<WrittenOrder>, CreateOrderError> {
    let mut conn = pool.get().await?;
    let tx = conn.transaction().await.map_err(map_err)?;
    let mut sink = Sink { outbox, queued: 0, notified: 0 };
    let written = insert_orders(&tx, &mut sink, orders).await?;
    tx.commit().await.map_err(map_err)?;
    if sink.queued > 0 {
        outbox.queued(sink.queued);
    }
    if sink.notified > 0 {
        outbox.notified(sink.notified);
    }
    Ok(written)
}
