//! Concurrent ops moves share a transaction, as orders do (`batch.rs`): a process's moves queue
//! here, and `[postgres] order_writers` writer tasks each take every move waiting (up to a
//! bound) and make them in one unit of work of six round trips however many: BEGIN; one
//! statement that locks and loads them; each planned by the core; the status update and the
//! events' insert; the outbox's reads with the moved shipments read back for the answers;
//! the outbox's writes; COMMIT (two more when the client has webhook endpoints). Under load a
//! move's share of the round trips, statement start-ups and WAL flush is a fraction; with one
//! move waiting, a batch is that move (docs/performance.md, "Issue 33: PostgreSQL ops moves").
//!
//! A batch never holds two moves of one drop-off shipment (the second waits for the writer's
//! next batch), so every webhook body and notification shows the shipment as its own move
//! left it. Moves of drop-offs sharing a pick-up leg are planned one after the other on that
//! leg's state. A failed batch is rolled back and each of its moves made alone, which gives
//! each its own answer.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_postgres::types::Type;

use super::lifecycle::{Loaded, apply_and_read, loaded_row};
use super::outbox::Sink;
use super::sql::Sql;
use super::{Connections, map_err};
use crate::{MoveOutcome, Outbox, StoreError, StoreResult, StoredShipment};
use dropslot_core::shipments::{self, Move, ShipmentKind};

/// Moves in one batch at most.
const MAX_MOVES: usize = 64;
/// Moves queued at most; a request finding it full waits for room.
const QUEUE: usize = 4_096;

pub(super) type Moved = MoveOutcome<Box<StoredShipment>>;

struct Job {
    unique_id: String,
    m: Move,
    now: Timestamp,
    reply: oneshot::Sender<StoreResult<Moved>>,
}

pub(super) struct Movers {
    queue: mpsc::Sender<Job>,
}

impl Movers {
    /// Starts the writers (on the current Tokio runtime); they stop when this is dropped and
    /// the queue is empty.
    pub(super) fn start(pool: &Connections, outbox: &Arc<dyn Outbox>, writers: usize) -> Movers {
        let (queue, jobs) = mpsc::channel(QUEUE);
        let jobs = Arc::new(Mutex::new(jobs));
        for _ in 0..writers {
            tokio::spawn(writer(jobs.clone(), pool.clone(), outbox.clone()));
        }
        Movers { queue }
    }

    /// Makes one move in the next batch; its outcome once committed.
    pub(super) async fn make(&self, unique_id: &str, m: Move, now: Timestamp) -> StoreResult<Moved> {
        let stopped = || StoreError::Unavailable("the move writer has stopped".into());
        let (reply, answer) = oneshot::channel();
        let job = Job { unique_id: unique_id.to_string(), m, now, reply };
        self.queue.send(job).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn writer(jobs: Arc<Mutex<mpsc::Receiver<Job>>>, pool: Connections, outbox: Arc<dyn Outbox>) {
    // A move of a shipment already in the batch, kept for this writer's next one.
    let mut carried: Option<Job> = None;
    loop {
        // Never wait for the queue with a move in hand: another writer may be waiting in it
        // for work that will not come before this move is answered.
        let batch = if let Some(first) = carried.take() {
            match jobs.try_lock() {
                Ok(mut jobs) => fill(first, &mut jobs, &mut carried),
                Err(_) => vec![first],
            }
        } else {
            // One writer at a time waits for work and takes what is queued; the others write.
            let mut jobs = jobs.lock().await;
            let Some(first) = jobs.recv().await else { return };
            fill(first, &mut jobs, &mut carried)
        };
        write(&pool, &*outbox, batch).await;
    }
}

/// `first` and what else is queued, up to the bound, stopping at a second move of a shipment
/// already in the batch (kept in `carried`).
fn fill(first: Job, jobs: &mut mpsc::Receiver<Job>, carried: &mut Option<Job>) -> Vec<Job> {
    let mut codes = HashSet::from([first.unique_id.clone()]);
    let mut batch = vec![first];
    while batch.len() < MAX_MOVES {
        let Ok(job) = jobs.try_recv() else { break };
        if !codes.insert(job.unique_id.clone()) {
            *carried = Some(job);
            break;
        }
        batch.push(job);
    }
    batch
}

/// Makes a batch, or, when it fails, each of its moves alone; answers every move.
async fn write(pool: &Connections, outbox: &dyn Outbox, batch: Vec<Job>) {
    if batch.len() > 1 {
        let moves: Vec<(&str, &Move)> = batch.iter().map(|j| (j.unique_id.as_str(), &j.m)).collect();
        let now = batch.iter().map(|j| j.now).max().unwrap_or_else(Timestamp::now);
        if let Ok(outcomes) = commit(pool, outbox, &moves, now).await {
            for (job, outcome) in batch.into_iter().zip(outcomes) {
                let _ = job.reply.send(Ok(outcome));
            }
            return;
        }
    }
    for job in batch {
        let made = commit(pool, outbox, &[(job.unique_id.as_str(), &job.m)], job.now)
            .await
            .and_then(|mut o| o.pop().ok_or_else(|| StoreError::Corrupt("a move without an outcome".into())));
        // The requester may have gone (a closed connection); its move stands all the same.
        let _ = job.reply.send(made);
    }
}

/// `moves` in one transaction; their outcomes once committed.
async fn commit(
    pool: &Connections,
    outbox: &dyn Outbox,
    moves: &[(&str, &Move)],
    now: Timestamp,
) -> StoreResult<Vec<Moved>> {
    let mut conn = pool.get().await?;
    let tx = conn.transaction().await.map_err(map_err)?;
    let mut sink = Sink { outbox, queued: 0, notified: 0 };
    let outcomes = ops_moves(&tx, &mut sink, moves, now).await?;
    tx.commit().await.map_err(map_err)?;
    if sink.queued > 0 {
        outbox.queued(sink.queued);
    }
    if sink.notified > 0 {
        outbox.notified(sink.notified);
    }
    Ok(outcomes)
}

/// Ops moves of live drop-off shipments (distinct tracking codes), in this transaction, each
/// stamped `now`: every pick-up leg is locked, then every drop-off, each in id order, as every
/// unit of work locks them; each move is planned by the core on the rows as loaded (a pick-up
/// leg as the batch's earlier moves left it) and all are applied at once; the moved shipments
/// are read back, with their events, for the answers.
pub(super) async fn ops_moves(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    moves: &[(&str, &Move)],
    now: Timestamp,
) -> Result<Vec<Moved>, StoreError> {
    let codes: Vec<&str> = moves.iter().map(|(code, _)| *code).collect();
    let loaded = lock_and_load(c, &codes).await?;
    let mut pick_ups = HashMap::new();
    let mut events = Vec::new();
    let mut planned: Vec<MoveOutcome<i64>> = Vec::with_capacity(moves.len());
    for (code, m) in moves {
        let Some(s) = loaded.get(*code) else {
            planned.push(MoveOutcome::NotFound);
            continue;
        };
        let mut leg = s.leg;
        if let Some(&p) = pick_ups.get(&leg.pick_up.id) {
            leg.pick_up = p;
        }
        match shipments::plan_moves(&leg, std::slice::from_ref(*m)) {
            Err(refusal) => planned.push(MoveOutcome::Refused(refusal)),
            Ok(mine) => {
                if let Some(last) = mine.iter().rev().find(|e| e.kind == ShipmentKind::PickUp) {
                    pick_ups.insert(leg.pick_up.id, shipments::Current { status: last.to, ..leg.pick_up });
                }
                events.extend(mine);
                planned.push(MoveOutcome::Moved(leg.drop_off.id));
            }
        }
    }
    let ids: Vec<i64> =
        planned.iter().filter_map(|p| if let MoveOutcome::Moved(id) = p { Some(*id) } else { None }).collect();
    let mut read = apply_and_read(c, sink, &events, now, &ids).await?.into_iter();
    planned
        .into_iter()
        .map(|p| match p {
            MoveOutcome::NotFound => Ok(MoveOutcome::NotFound),
            MoveOutcome::Refused(r) => Ok(MoveOutcome::Refused(r)),
            MoveOutcome::Moved(id) => read
                .next()
                .filter(|s| s.drop_off.id.0 == id)
                .map(|s| MoveOutcome::Moved(Box::new(s)))
                .ok_or_else(|| StoreError::Corrupt(format!("drop-off shipment {id} was not read back"))),
        })
        .collect()
}

/// Locks the pick-up legs of the live drop-off shipments with these tracking codes, then the
/// drop-offs, each in id order (as every unit of work locks them, `lifecycle::lock_pick_ups`),
/// and loads them, in one statement; by code. The pick-up legs are a materialised CTE, read
/// whole before the outer query's `Sort` hands any drop-off to its `LockRows`; a drop-off
/// changed meanwhile is read again as committed (`FOR UPDATE` rechecks the row).
async fn lock_and_load(c: &impl Sql, codes: &[&str]) -> Result<HashMap<String, Loaded>, StoreError> {
    let rows = c
        .query_typed(
            "WITH p AS MATERIALIZED (
                SELECT p.id, p.status FROM pick_up_shipments p
                WHERE p.id IN (SELECT d.pick_up_shipment_id FROM drop_off_shipments d
                               WHERE d.unique_id = ANY($1) AND d.mode = 'live')
                ORDER BY p.id FOR UPDATE
             )
             SELECT d.id, d.unique_id, d.status, d.attempts, d.max_attempts, d.sandbox_moved, p.id, p.status
             FROM drop_off_shipments d JOIN p ON p.id = d.pick_up_shipment_id
             WHERE d.unique_id = ANY($1) AND d.mode = 'live'
             ORDER BY d.id
             FOR UPDATE OF d",
            &[(&codes, Type::TEXT_ARRAY)],
        )
        .await
        .map_err(map_err)?;
    rows.iter()
        .map(|r| {
            let l = loaded_row(r)?;
            Ok((l.unique_id.clone(), l))
        })
        .collect()
}
