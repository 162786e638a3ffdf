//! The shipment lifecycle on `PostgreSQL`: every status change is persisted by [`apply`] (status,
//! attempts and the numbered events, in the changing transaction), after the domain planned it
//! from a snapshot loaded in that same transaction. Several processes change shipments at once,
//! so a load a decision is based on locks its rows (`FOR UPDATE`) until the commit, always in
//! one order: pick-up legs, then drop-off shipments, then parcels, each by id (a deletion takes
//! the order's shipment orders first). Two changes of one pick-up then queue instead of
//! deadlocking. Statements are sent typed (`query_typed`): one round trip each, no prepare.

use std::collections::HashMap;

use jiff::Timestamp;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, Type};

use super::sql::Sql;

use super::map_err;
use super::outbox::{self, Sink};
use crate::{MoveOutcome, ScenarioResult, Scope, Selection, StoreError, StoredEvent, Visibility};
use dropslot_core::ids::DropOffShipmentId;
use dropslot_core::shipments::{self, Actor, Current, Leg, Move, NewEvent, Scenario, ShipmentKind, Status};

/// A column as its Rust type; a NULL or a type this code does not expect is an error, never a
/// panic (`Row::get` would panic).
pub(super) fn column<'a, T: FromSql<'a>>(r: &'a Row, i: usize) -> Result<T, StoreError> {
    r.try_get(i).map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))
}

/// A stored BIGINT narrowed to the type the domain counts in (attempts, an event number); a
/// value out of range is corrupt data, never wrapped.
pub(super) fn narrow<T: TryFrom<i64>>(value: i64, what: &str) -> Result<T, StoreError> {
    T::try_from(value).map_err(|_| StoreError::Corrupt(format!("stored {what} {value} is out of range")))
}

/// Records status changes in one statement, each with its shipment's next sequence number;
/// runs in the transaction that makes them. `max + 1` cannot race: the caller holds the row
/// lock of every shipment in `events` (a shipment created in this transaction is seen by no
/// one else). Returns the events as stored (id, number, and the instant as the column keeps
/// it, to the microsecond), in the order given, for the outbox.
pub(super) async fn record_events(
    c: &impl Sql,
    events: &[NewEvent],
    at: Timestamp,
) -> Result<Vec<StoredEvent>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let mut kinds = Vec::with_capacity(events.len());
    let mut shipments = Vec::with_capacity(events.len());
    let mut statuses = Vec::with_capacity(events.len());
    let mut previous = Vec::with_capacity(events.len());
    let mut actors = Vec::with_capacity(events.len());
    let mut reasons = Vec::with_capacity(events.len());
    let mut attempts = Vec::with_capacity(events.len());
    let mut proofs = Vec::with_capacity(events.len());
    for e in events {
        kinds.push(e.kind.as_str());
        shipments.push(e.shipment);
        statuses.push(e.to.as_str());
        previous.push(e.from.map(Status::as_str));
        actors.push(e.actor.as_str());
        reasons.push(e.reason.as_deref());
        attempts.push(e.attempt.map(i64::from));
        proofs.push(if e.proof.is_empty() { None } else { Some(super::to_json(&e.proof)?) });
    }
    // Numbered after the shipment's last stored event, then in the order given; the rows come
    // back joined on (shipment, number), as RETURNING promises no order.
    let rows = c
        .query_typed(
            "WITH new AS (
                SELECT n.ord, n.kind, n.shipment, n.status, n.previous, n.actor, n.reason, n.attempt, n.proof,
                    (SELECT coalesce(max(e.seq), 0) FROM shipment_events e
                     WHERE e.shipment_kind = n.kind AND e.shipment_id = n.shipment)
                    + row_number() OVER (PARTITION BY n.kind, n.shipment ORDER BY n.ord) AS seq
                FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[],
                        $8::text[])
                    WITH ORDINALITY AS n (kind, shipment, status, previous, actor, reason, attempt, proof, ord)
            ),
            stored AS (
                INSERT INTO shipment_events (shipment_kind, shipment_id, seq, status, previous_status, at, actor, reason,
                    attempt, proof_json)
                SELECT kind, shipment, seq, status, previous, $9, actor, reason, attempt, proof FROM new ORDER BY ord
                RETURNING id, shipment_kind, shipment_id, seq, at
            )
            SELECT s.id, s.seq, s.at FROM stored s
            JOIN new n ON n.kind = s.shipment_kind AND n.shipment = s.shipment_id AND n.seq = s.seq
            ORDER BY n.ord",
            &[
                (&kinds, Type::TEXT_ARRAY),
                (&shipments, Type::INT8_ARRAY),
                (&statuses, Type::TEXT_ARRAY),
                (&previous, Type::TEXT_ARRAY),
                (&actors, Type::TEXT_ARRAY),
                (&reasons, Type::TEXT_ARRAY),
                (&attempts, Type::INT8_ARRAY),
                (&proofs, Type::TEXT_ARRAY),
                (&at, Type::TIMESTAMPTZ),
            ],
        )
        .await
        .map_err(map_err)?;
    if rows.len() != events.len() {
        return Err(StoreError::Corrupt(format!("{} events recorded of {}", rows.len(), events.len())));
    }
    events
        .iter()
        .zip(&rows)
        .map(|(e, r)| {
            Ok(StoredEvent {
                id: column(r, 0)?,
                seq: narrow(column(r, 1)?, "event number")?,
                from: e.from,
                to: e.to,
                at: column(r, 2)?,
                actor: e.actor,
                reason: e.reason.clone(),
                attempt: e.attempt,
                proof: e.proof.clone(),
            })
        })
        .collect()
}

/// Persists planned changes: each shipment's status (and a drop-off's attempts) as its last
/// change leaves it, then every event in order, then queues the drop-off events' webhooks.
/// The one place a status column is written after creation. The caller has loaded the
/// shipments with their rows locked (the plan is only valid while they are).
pub(super) async fn apply(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    events: &[NewEvent],
    now: Timestamp,
) -> Result<(), StoreError> {
    apply_and_read(c, sink, events, now, &[]).await.map(drop)
}

/// [`apply`], then the drop-off shipments `answer` names as the change left them, with their
/// events, in that order: read in the outbox's round trip (`outbox::changes`).
pub(super) async fn apply_and_read(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    events: &[NewEvent],
    now: Timestamp,
    answer: &[i64],
) -> Result<Vec<crate::StoredShipment>, StoreError> {
    if events.is_empty() {
        return if answer.is_empty() { Ok(Vec::new()) } else { super::reads::shipments_with_events(c, answer).await };
    }
    // Within the transaction only the end state of each shipment is ever seen: one row each.
    let mut last: Vec<&NewEvent> = Vec::new();
    let mut at: HashMap<(&str, i64), usize> = HashMap::new();
    for e in events {
        if let Some(l) = at.get(&(e.kind.as_str(), e.shipment)).and_then(|&i| last.get_mut(i)) {
            *l = e;
        } else {
            at.insert((e.kind.as_str(), e.shipment), last.len());
            last.push(e);
        }
    }
    let kinds: Vec<&str> = last.iter().map(|e| e.kind.as_str()).collect();
    let ids: Vec<i64> = last.iter().map(|e| e.shipment).collect();
    let statuses: Vec<&str> = last.iter().map(|e| e.to.as_str()).collect();
    let attempts: Vec<i64> = last.iter().map(|e| i64::from(e.attempts)).collect();
    // The status update and the events' insert touch different tables: sent together, one
    // round trip (a shipment that vanished fails the change, which is rolled back).
    let (changed, stored) = tokio::try_join!(
        async {
            c.query_typed(
            "WITH n AS (
                SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[]) AS n (kind, id, status, attempts)
            ),
            p AS (
                UPDATE pick_up_shipments s SET status = n.status FROM n
                WHERE n.kind = 'pick_up' AND s.id = n.id RETURNING s.id
            ),
            d AS (
                UPDATE drop_off_shipments s SET status = n.status, attempts = n.attempts FROM n
                WHERE n.kind = 'drop_off' AND s.id = n.id RETURNING s.id
            )
            SELECT 'pick_up'::text, id FROM p UNION ALL SELECT 'drop_off'::text, id FROM d",
            &[
                (&kinds, Type::TEXT_ARRAY),
                (&ids, Type::INT8_ARRAY),
                (&statuses, Type::TEXT_ARRAY),
                (&attempts, Type::INT8_ARRAY),
            ],
        )
            .await
            .map_err(map_err)?
            .iter()
            .map(|r| Ok((column(r, 0)?, column(r, 1)?)))
            .collect::<Result<Vec<(String, i64)>, StoreError>>()
        },
        record_events(c, events, now),
    )?;
    if let Some(e) = last.iter().find(|e| !changed.iter().any(|(k, id)| k == e.kind.as_str() && *id == e.shipment)) {
        return Err(StoreError::Corrupt(format!("{} shipment {} vanished mid-change", e.kind.as_str(), e.shipment)));
    }
    let recorded: Vec<(i64, StoredEvent)> = events
        .iter()
        .zip(stored)
        .filter(|(e, _)| e.kind == ShipmentKind::DropOff)
        .map(|(e, s)| (e.shipment, s))
        .collect();
    outbox::changes(c, sink, &recorded, now, answer).await
}

/// A status column (see `parsed`).
pub(super) fn status_column(r: &Row, i: usize) -> Result<Status, StoreError> {
    super::parsed(column(r, i)?, "status", Status::parse)
}

/// A drop-off shipment and its pick-up leg as the domain needs them, with its tracking code
/// and whether a scenario has moved it.
pub(super) struct Loaded {
    pub leg: Leg,
    pub unique_id: String,
    sandbox_moved: bool,
}

/// The client (none: any) and mode a visibility allows.
fn tenant(visible: Visibility) -> (Option<i64>, &'static str) {
    match visible {
        Visibility::Tenant(s) => (Some(s.client.0), s.mode.as_str()),
        Visibility::Ops => (None, "live"),
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
pub(super) fn loaded_row(r: &Row) -> Result<Loaded, StoreError> {
    Ok(Loaded {
        leg: Leg {
            drop_off: Current {
                kind: ShipmentKind::DropOff,
                id: column(r, 0)?,
                status: status_column(r, 2)?,
                attempts: narrow(column(r, 3)?, "attempts")?,
                max_attempts: narrow(column(r, 4)?, "max_attempts")?,
            },
            pick_up: Current {
                kind: ShipmentKind::PickUp,
                id: column(r, 6)?,
                status: status_column(r, 7)?,
                attempts: 0,
                max_attempts: 0,
            },
        },
        unique_id: column(r, 1)?,
        sandbox_moved: column(r, 5)?,
    })
}

/// The caller's test drop-off shipments matched by any selector, oldest first. Ids of other
/// clients or of live data match nothing. A read: the scenario locks what it moves.
pub(super) async fn sandbox_candidates(c: &impl Sql, scope: Scope, s: &Selection) -> Result<Vec<i64>, StoreError> {
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
pub(super) async fn run_scenario(
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
/// shipment are locked before the move is planned.
pub(super) async fn ops_move(
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
    match shipments::plan_moves(&s.leg, std::slice::from_ref(m)) {
        Err(refusal) => Ok(MoveOutcome::Refused(refusal)),
        Ok(events) => {
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
pub(super) async fn driver_move(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    key: &crate::DriverKey,
    unique_id: &str,
    m: &Move,
    attach: &[String],
    now: Timestamp,
) -> Result<crate::DriverMove, StoreError> {
    if let Some(done) = crate::plans::recorded(key, driver_record(c, key).await?) {
        return Ok(done);
    }
    if let Some(token) = super::proofs::unavailable(c, attach, &key.driver_id, unique_id).await? {
        return Ok(crate::DriverMove::ProofUnavailable(token));
    }
    let outcome = ops_move(c, sink, unique_id, m, now).await?;
    match &outcome {
        MoveOutcome::Moved(moved) => {
            super::proofs::attach(c, attach, moved).await?;
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
            if let Some(done) = crate::plans::recorded(key, driver_record(c, key).await?) {
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
pub(super) async fn pick_up_scan(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    pick_up_code: &str,
    now: Timestamp,
) -> Result<MoveOutcome, StoreError> {
    let drop_off: Option<i64> = c
        .query_typed_opt(
            "SELECT drop_off_shipment_id FROM parcels WHERE pick_up_code = $1 AND mode = 'live' AND deleted_at IS NULL",
            &[(&pick_up_code, Type::TEXT)],
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
