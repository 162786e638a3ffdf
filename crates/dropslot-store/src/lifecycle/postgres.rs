//! The shipment lifecycle on `PostgreSQL`: every status change is persisted by [`apply`] (status,
//! attempts and the numbered events, in the changing transaction), after the domain planned it
//! from a snapshot loaded in that same transaction. Several processes change shipments at once,
//! so a load a decision is based on locks its rows (`FOR UPDATE`) until the commit, always in
//! one order: pick-up legs, then drop-off shipments, then parcels, each by id (a deletion takes
//! the order's shipment orders first). Two changes of one pick-up then queue instead of
//! deadlocking. Statements are sent typed (`query_typed`): one round trip each, no prepare.
//! Concurrent ops moves share a transaction, as orders do (`batch.rs`): a process's moves queue
//! here, and `[postgres] order_writers` writer tasks each take every move waiting (up to a
//! bound) and make them in one unit of work of six round trips however many: BEGIN; one
//! statement that locks and loads them; each planned by the core; the status update and the
//! events' insert; the outbox's reads with the moved shipments read back for the answers;
//! the outbox's writes; COMMIT (two more when the client has webhook endpoints). Under load a
//! move's share of the round trips, statement start-ups and WAL flush is a fraction; with one
//! move waiting, a batch is that move (docs/performance.md, "Why PostgreSQL moves are batched").
//!
//! A batch never holds two moves of one drop-off shipment (the second waits for the writer's
//! next batch), so every webhook body and notification shows the shipment as its own move
//! left it. Moves of drop-offs sharing a pick-up leg are planned one after the other on that
//! leg's state. A failed batch is rolled back and each of its moves made alone, which gives
//! each its own answer. What follows a failure (CONTRACT §15: a re-attempt, a return, a
//! return booked again or cancelled) is planned in the batch with the failure, on its locked
//! rows; the slot counters it raises are taken in time order, as every failure takes them.

use crate::outbox::postgres::{Sink, apply, apply_and_read};
use crate::postgres::sql::Sql;
use crate::postgres::{Connections, PgStore, column, in_tx, map_err, narrow, status_column};
use crate::{
    LifecycleStore, Mode, MoveOutcome, Outbox, ScenarioResult, Scope, Selection, StoreError, StoreResult,
    StoredShipment, Visibility,
};
use async_trait::async_trait;
use dropslot_core::ids::DropOffShipmentId;
use dropslot_core::shipments;
use dropslot_core::shipments::{Actor, Leg, Move, Scenario, ShipmentKind, Status};
use jiff::Timestamp;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_postgres::Row;
use tokio_postgres::types::Type;

#[async_trait]
impl LifecycleStore for PgStore {
    async fn sandbox_candidates(&self, scope: Scope, selection: Selection) -> StoreResult<Vec<i64>> {
        sandbox_candidates(&self.conn().await?, scope, &selection).await
    }

    async fn run_scenario(
        &self,
        scope: Scope,
        ids: Vec<i64>,
        scenario: dropslot_core::shipments::Scenario,
        now: Timestamp,
    ) -> StoreResult<Vec<ScenarioResult>> {
        let mut sink = crate::outbox::postgres::Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let results = in_tx!(self, |tx| run_scenario(tx, &mut sink, scope, &ids, scenario, now).await?);
        self.notify(sink.queued);
        self.notified(sink.notified);
        Ok(results)
    }

    async fn ops_move(
        &self,
        unique_id: &str,
        m: dropslot_core::shipments::Move,
        now: Timestamp,
    ) -> StoreResult<MoveOutcome<Box<StoredShipment>>> {
        let movers = self.moves.get_or_init(|| Movers::start(&self.pool, &self.outbox, self.order_writers))?;
        movers.make(unique_id, m, now).await
    }

    async fn driver_move(
        &self,
        key: crate::DriverKey,
        unique_id: &str,
        m: dropslot_core::shipments::Move,
        attach: Vec<String>,
        now: Timestamp,
    ) -> StoreResult<crate::DriverMove> {
        let mut sink = crate::outbox::postgres::Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let outcome = in_tx!(self, |tx| driver_move(tx, &mut sink, &key, unique_id, &m, &attach, now).await?);
        self.notify(sink.queued);
        self.notified(sink.notified);
        Ok(outcome)
    }

    async fn pick_up_scan(&self, pick_up_code: &str, now: Timestamp) -> StoreResult<MoveOutcome> {
        let mut sink = crate::outbox::postgres::Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let outcome = in_tx!(self, |tx| pick_up_scan(tx, &mut sink, pick_up_code, now).await?);
        self.notify(sink.queued);
        self.notified(sink.notified);
        Ok(outcome)
    }
}

/// A drop-off shipment and its pick-up leg as the domain needs them, with its tracking code
/// and whether a scenario has moved it.
pub(crate) struct Loaded {
    pub leg: Leg,
    pub unique_id: String,
    sandbox_moved: bool,
}

/// The client (none: any) and mode a visibility allows.
fn tenant(visible: Visibility) -> (Option<i64>, &'static str) {
    match visible {
        Visibility::Tenant(s) => (Some(s.client.0), s.mode.as_str()),
        Visibility::Ops => (None, Mode::Live.as_str()),
    }
}

/// Locks the pick-up legs of the drop-off shipments selected by row id or tracking code (only
/// where `visible`), in id order, before any drop-off: every unit of work locks a pick-up leg
/// before its drop-offs, so changes that share one wait for each other instead of deadlocking,
/// and a batch that holds all its pick-up legs can take their drop-offs in any order. A
/// drop-off's pick-up leg never changes, so finding it needs no lock.
async fn lock_pick_ups(c: &impl Sql, visible: Visibility, ids: &[i64], unique_ids: &[&str]) -> Result<(), StoreError> {
    let (client, mode) = tenant(visible);
    c.query_typed(
        "SELECT p.id FROM pick_up_shipments p
         WHERE p.id IN (SELECT d.pick_up_shipment_id FROM drop_off_shipments d
                        WHERE (d.id = ANY($1) OR d.unique_id = ANY($2)) AND d.mode = $3
                            AND ($4::bigint IS NULL OR d.client_id = $4))
         ORDER BY p.id FOR UPDATE",
        &[(&ids, Type::INT8_ARRAY), (&unique_ids, Type::TEXT_ARRAY), (&mode, Type::TEXT), (&client, Type::INT8)],
    )
    .await
    .map_err(map_err)?;
    Ok(())
}

/// Loads by the drop-off's row id or tracking code, only where `visible`, and locks the
/// drop-off shipment and its pick-up leg until the commit, so the plan made from them cannot
/// be overtaken by another process. Callers lock the pick-up legs first ([`lock_pick_ups`]);
/// taking that lock again here is free, and keeps the load sound on its own.
async fn load(
    c: &impl Sql,
    visible: Visibility,
    id: Option<i64>,
    unique_id: Option<&str>,
) -> Result<Option<Loaded>, StoreError> {
    let (client, mode) = tenant(visible);
    let row = c
        .query_typed_opt(
            "SELECT d.id, d.unique_id, d.status, d.attempts, d.max_attempts, d.sandbox_moved, p.id, p.status
             FROM drop_off_shipments d JOIN pick_up_shipments p ON p.id = d.pick_up_shipment_id
             WHERE (d.id = $1 OR d.unique_id = $2) AND d.mode = $3 AND ($4::bigint IS NULL OR d.client_id = $4)
             FOR UPDATE OF p, d",
            &[(&id, Type::INT8), (&unique_id, Type::TEXT), (&mode, Type::TEXT), (&client, Type::INT8)],
        )
        .await
        .map_err(map_err)?;
    row.map(|r| loaded_row(&r)).transpose()
}

/// A row of [`load`]'s columns.
pub(crate) fn loaded_row(r: &Row) -> Result<Loaded, StoreError> {
    Ok(Loaded {
        leg: Leg::of(
            (
                column(r, 0)?,
                status_column(r, 2)?,
                narrow(column(r, 3)?, "attempts")?,
                narrow(column(r, 4)?, "max_attempts")?,
            ),
            (column(r, 6)?, status_column(r, 7)?),
        ),
        unique_id: column(r, 1)?,
        sandbox_moved: column(r, 5)?,
    })
}

/// The caller's test drop-off shipments matched by any selector, oldest first. Ids of other
/// clients or of live data match nothing. A read: the scenario locks what it moves.
pub(crate) async fn sandbox_candidates(c: &impl Sql, scope: Scope, s: &Selection) -> Result<Vec<i64>, StoreError> {
    let date = s.date.map(|d| d.to_string());
    c.query_typed(
        "SELECT id FROM drop_off_shipments
         WHERE client_id = $1 AND mode = $2 AND (id = ANY($3) OR unique_id = ANY($4) OR scheduled_date = $5)
         ORDER BY id",
        &[
            (&scope.client.0, Type::INT8),
            (&scope.mode.as_str(), Type::TEXT),
            (&s.ids, Type::INT8_ARRAY),
            (&s.unique_ids, Type::TEXT_ARRAY),
            (&date, Type::TEXT),
        ],
    )
    .await
    .map_err(map_err)?
    .iter()
    .map(|r| column(r, 0))
    .collect()
}

/// One bounded batch of a scenario, in this transaction: the batch's pick-up legs are locked,
/// then its drop-offs, each in id order, and loaded in one statement; each shipment is
/// planned and moved all the way or skipped; every move is applied at once. A racing scenario
/// waits on the locks, then sees the `sandbox_moved` mark.
pub(crate) async fn run_scenario(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    scope: Scope,
    ids: &[i64],
    scenario: Scenario,
    now: Timestamp,
) -> Result<Vec<ScenarioResult>, StoreError> {
    let visible = Visibility::Tenant(scope);
    lock_pick_ups(c, visible, ids, &[]).await?;
    let loaded = load_many(c, scope, ids).await?;
    let mut results = Vec::with_capacity(ids.len());
    let mut events = Vec::new();
    let mut moved = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for &id in ids {
        // An id given twice is one shipment, moved (or skipped) once.
        let Some(s) = loaded.get(&id).filter(|_| seen.insert(id)) else { continue };
        let (drop_off, status) = (DropOffShipmentId(s.leg.drop_off.id), s.leg.drop_off.status);
        match scenario.events_for(&s.leg, s.sandbox_moved) {
            Err(reason) => {
                results.push(ScenarioResult::Skipped { id: drop_off, unique_id: s.unique_id.clone(), status, reason });
            }
            Ok(mine) => {
                let to = mine.iter().rev().find(|e| e.kind == ShipmentKind::DropOff).map_or(status, |e| e.to);
                results.push(ScenarioResult::Affected {
                    id: drop_off,
                    unique_id: s.unique_id.clone(),
                    from: status,
                    to,
                });
                events.extend(mine);
                moved.push(id);
            }
        }
    }
    apply(c, sink, &events, now).await?;
    if !moved.is_empty() {
        c.execute_typed(
            "UPDATE drop_off_shipments SET sandbox_moved = TRUE WHERE id = ANY($1)",
            &[(&moved, Type::INT8_ARRAY)],
        )
        .await
        .map_err(map_err)?;
    }
    Ok(results)
}

/// [`load`] for many drop-off shipments of `scope` by row id, in one statement that locks the
/// drop-offs in id order (their pick-up legs are already locked); by id.
async fn load_many(c: &impl Sql, scope: Scope, ids: &[i64]) -> Result<HashMap<i64, Loaded>, StoreError> {
    let rows = c
        .query_typed(
            "SELECT d.id, d.unique_id, d.status, d.attempts, d.max_attempts, d.sandbox_moved, p.id, p.status
             FROM drop_off_shipments d JOIN pick_up_shipments p ON p.id = d.pick_up_shipment_id
             WHERE d.id = ANY($1) AND d.mode = $2 AND d.client_id = $3
             ORDER BY d.id
             FOR UPDATE OF p, d",
            &[(&ids, Type::INT8_ARRAY), (&scope.mode.as_str(), Type::TEXT), (&scope.client.0, Type::INT8)],
        )
        .await
        .map_err(map_err)?;
    rows.iter().map(|r| Ok((column(r, 0)?, loaded_row(r)?))).collect()
}

/// An ops move of a live drop-off shipment, by tracking code; its pick-up leg and then the
/// shipment are locked before the move is planned. A failure's follow-up (CONTRACT §15) is
/// made in the same transaction: a failed return stop is booked again or cancelled, a failed
/// delivery re-attempted, returned or held by the client's policy.
pub(crate) async fn ops_move(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    unique_id: &str,
    m: &Move,
    now: Timestamp,
) -> Result<MoveOutcome, StoreError> {
    lock_pick_ups(c, Visibility::Ops, &[], &[unique_id]).await?;
    let Some(s) = load(c, Visibility::Ops, None, Some(unique_id)).await? else {
        return Ok(MoveOutcome::NotFound);
    };
    if dropslot_core::attempts::failed_return(s.leg.drop_off.status, m.to) {
        return crate::attempts::postgres::return_failed(c, sink, s.leg.drop_off.id, m, now).await;
    }
    match shipments::plan_moves(&s.leg, std::slice::from_ref(m)) {
        Err(refusal) => Ok(MoveOutcome::Refused(refusal)),
        Ok(mut events) => {
            if m.to == Status::Failed {
                crate::attempts::postgres::follow_failure(c, sink, &mut events, now).await?;
            }
            apply(c, sink, &events, now).await?;
            Ok(MoveOutcome::Moved(s.unique_id))
        }
    }
}

/// The stored (request hash, shipment) of a driver's key.
async fn driver_record(c: &impl Sql, key: &crate::DriverKey) -> Result<Option<(String, String)>, StoreError> {
    let row = c
        .query_opt(
            "SELECT request_hash, shipment_unique_id FROM driver_requests WHERE driver_id = $1 AND key = $2",
            &[&key.driver_id, &key.key],
        )
        .await
        .map_err(map_err)?;
    row.map(|r| {
        Ok((
            r.try_get(0).map_err(|e| StoreError::Corrupt(format!("driver request: {e}")))?,
            r.try_get(1).map_err(|e| StoreError::Corrupt(format!("driver request: {e}")))?,
        ))
    })
    .transpose()
}

/// A driver's move with its idempotency record, in one transaction. Two requests with one key
/// at once: the second waits on the shipment's lock, then finds the move refused (it was
/// taken) and the first's record committed: it replays.
pub(crate) async fn driver_move(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    key: &crate::DriverKey,
    unique_id: &str,
    m: &Move,
    attach: &[String],
    now: Timestamp,
) -> Result<crate::DriverMove, StoreError> {
    if let Some(done) = crate::lifecycle::recorded(key, driver_record(c, key).await?) {
        return Ok(done);
    }
    if let Some(token) = crate::driver::postgres::unavailable(c, attach, &key.driver_id, unique_id).await? {
        return Ok(crate::DriverMove::ProofUnavailable(token));
    }
    let outcome = ops_move(c, sink, unique_id, m, now).await?;
    match &outcome {
        MoveOutcome::Moved(moved) => {
            crate::driver::postgres::attach(c, attach, moved).await?;
            let n = c
                .execute(
                    "INSERT INTO driver_requests (driver_id, key, request_hash, shipment_unique_id, created_at)
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                    &[&key.driver_id, &key.key, &key.request_hash, moved, &now],
                )
                .await
                .map_err(map_err)?;
            if n == 0 {
                // Another request with this key committed meanwhile: this one must not count.
                return Err(StoreError::Unavailable("a concurrent request with this key; retry".into()));
            }
        }
        MoveOutcome::Refused(_) => {
            if let Some(done) = crate::lifecycle::recorded(key, driver_record(c, key).await?) {
                return Ok(done);
            }
        }
        MoveOutcome::NotFound => {}
    }
    Ok(crate::DriverMove::Done(outcome))
}

/// A pick-up scan of a live parcel, by its pick-up code. The parcel is found unlocked, then
/// its pick-up leg, drop-off shipment and the parcel itself are locked in that order, and the
/// parcel is checked again: a deletion that committed meanwhile (it locks the pick-up leg
/// too) leaves nothing to scan.
pub(crate) async fn pick_up_scan(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    pick_up_code: &str,
    now: Timestamp,
) -> Result<MoveOutcome, StoreError> {
    let drop_off: Option<i64> = c
        .query_typed_opt(
            "SELECT drop_off_shipment_id FROM parcels WHERE pick_up_code = $1 AND mode = $2 AND deleted_at IS NULL",
            &[(&pick_up_code, Type::TEXT), (&Mode::Live.as_str(), Type::TEXT)],
        )
        .await
        .map_err(map_err)?
        .map(|r| column(&r, 0))
        .transpose()?;
    let Some(id) = drop_off else { return Ok(MoveOutcome::NotFound) };
    lock_pick_ups(c, Visibility::Ops, &[id], &[]).await?;
    let Some(s) = load(c, Visibility::Ops, Some(id), None).await? else {
        return Ok(MoveOutcome::NotFound);
    };
    let live = c
        .query_typed_opt(
            "SELECT id FROM parcels WHERE pick_up_code = $1 AND drop_off_shipment_id = $2 AND deleted_at IS NULL
             FOR UPDATE",
            &[(&pick_up_code, Type::TEXT), (&id, Type::INT8)],
        )
        .await
        .map_err(map_err)?;
    if live.is_none() {
        return Ok(MoveOutcome::NotFound);
    }
    match shipments::pick_up_scan(&s.leg, Actor::Ops) {
        Err(refusal) => Ok(MoveOutcome::Refused(refusal)),
        Ok(events) => {
            apply(c, sink, &events, now).await?;
            Ok(MoveOutcome::Moved(s.unique_id))
        }
    }
}

/// Moves in one batch at most.
const MAX_MOVES: usize = 64;
/// Moves queued at most; a request finding it full waits for room.
const QUEUE: usize = 4_096;

pub(crate) type Moved = MoveOutcome<Box<StoredShipment>>;

struct Job {
    unique_id: String,
    m: Move,
    now: Timestamp,
    reply: oneshot::Sender<StoreResult<Moved>>,
}

pub(crate) struct Movers {
    queue: mpsc::Sender<Job>,
}

impl Movers {
    /// Starts the writers (on the current Tokio runtime); they stop when this is dropped and
    /// the queue is empty.
    pub(crate) fn start(pool: &Connections, outbox: &Arc<dyn Outbox>, writers: usize) -> Movers {
        let (queue, jobs) = mpsc::channel(QUEUE);
        let jobs = Arc::new(Mutex::new(jobs));
        for _ in 0..writers {
            tokio::spawn(writer(jobs.clone(), pool.clone(), outbox.clone()));
        }
        Movers { queue }
    }

    /// Makes one move in the next batch; its outcome once committed.
    pub(crate) async fn make(&self, unique_id: &str, m: Move, now: Timestamp) -> StoreResult<Moved> {
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
pub(crate) async fn ops_moves(
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
        // A return stop that fails is booked again or cancelled (CONTRACT §15), in the batch's
        // transaction; its shipment is read back with the others.
        if dropslot_core::attempts::failed_return(leg.drop_off.status, m.to) {
            planned.push(match crate::attempts::postgres::return_failed(c, sink, leg.drop_off.id, m, now).await? {
                MoveOutcome::Moved(_) => MoveOutcome::Moved(leg.drop_off.id),
                MoveOutcome::Refused(r) => MoveOutcome::Refused(r),
                MoveOutcome::NotFound => MoveOutcome::NotFound,
            });
            continue;
        }
        match shipments::plan_moves(&leg, std::slice::from_ref(*m)) {
            Err(refusal) => planned.push(MoveOutcome::Refused(refusal)),
            Ok(mut mine) => {
                // What follows a failure is planned with it (its rows are locked above).
                if m.to == Status::Failed {
                    crate::attempts::postgres::follow_failure(c, sink, &mut mine, now).await?;
                }
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
/// drop-offs, each in id order (as every unit of work locks them, `lock_pick_ups`),
/// and loads them, in one statement; by code. The pick-up legs are a materialised CTE, read
/// whole before the outer query's `Sort` hands any drop-off to its `LockRows`; a drop-off
/// changed meanwhile is read again as committed (`FOR UPDATE` rechecks the row).
async fn lock_and_load(c: &impl Sql, codes: &[&str]) -> Result<HashMap<String, Loaded>, StoreError> {
    // A batch's first statement: its text kept as measured, as [`APPLY`]'s, the mode built once
    // from its name rather than bound.
    static LOCK_AND_LOAD: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH p AS MATERIALIZED (
                SELECT p.id, p.status FROM pick_up_shipments p
                WHERE p.id IN (SELECT d.pick_up_shipment_id FROM drop_off_shipments d
                               WHERE d.unique_id = ANY($1) AND d.mode = '{live}')
                ORDER BY p.id FOR UPDATE
             )
             SELECT d.id, d.unique_id, d.status, d.attempts, d.max_attempts, d.sandbox_moved, p.id, p.status
             FROM drop_off_shipments d JOIN p ON p.id = d.pick_up_shipment_id
             WHERE d.unique_id = ANY($1) AND d.mode = '{live}'
             ORDER BY d.id
             FOR UPDATE OF d",
            live = Mode::Live.as_str(),
        )
    });
    let rows = c.query_typed(&LOCK_AND_LOAD, &[(&codes, Type::TEXT_ARRAY)]).await.map_err(map_err)?;
    rows.iter()
        .map(|r| {
            let l = loaded_row(r)?;
            Ok((l.unique_id.clone(), l))
        })
        .collect()
}
