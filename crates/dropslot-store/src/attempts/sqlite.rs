//! What follows a failed delivery on `SQLite` (CONTRACT §15). Every change runs in one writer
//! job: the shipment is loaded, the core decides, a place is taken in the first offered slot
//! with room (its `slot_fill` counter raised and checked against the date's limit, lowered
//! again when it does not fit), and the status change, the new slot and the events are written
//! together. The one writer orders every change, so two reschedules of one shipment, or of one
//! slot, cannot overlap.

use crate::attempts::{
    ChangeOutcome, ChangeTarget, DeliveryChange, Facts, FailureLine, Failures, fits, merchant_cancel, reason_missing,
    return_cancelled, return_move,
};
use crate::capacity::counter_key;
use crate::outbox::sqlite::Sink;
use crate::sqlite::{SqliteStore, map_err, status_column};
use crate::{AttemptStore, Fleet, Mode, MoveOutcome, Replanned, Rescheduled, Scope, SlotRef, StoreError, StoreResult};
use async_trait::async_trait;
use dropslot_core::attempts::{self, Changer, Offer, Policy};
use dropslot_core::quote::capacity::{Load, SlotKind};
use dropslot_core::shipments::{self, Actor, Leg, Move, NewEvent, ShipmentKind, Status};
use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

#[async_trait]
impl AttemptStore for SqliteStore {
    async fn attempt_policy(&self, scope: Scope) -> StoreResult<Option<Policy>> {
        self.read_blocking(move |c| Ok(stored_policy(c, scope.client.0, scope.mode))).await?
    }

    async fn set_attempt_policy(&self, scope: Scope, policy: Policy, now: Timestamp) -> StoreResult<()> {
        self.writer
            .write(move |c| {
                c.prepare_cached(
                    "INSERT INTO attempt_policies (client_id, mode, max_attempts, after_failure, max_return_attempts,
                        updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (client_id, mode) DO UPDATE SET max_attempts = excluded.max_attempts,
                        after_failure = excluded.after_failure, max_return_attempts = excluded.max_return_attempts,
                        updated_at = excluded.updated_at",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        scope.client.0,
                        scope.mode.as_str(),
                        policy.max_attempts,
                        policy.after_failure.as_str(),
                        policy.max_return_attempts,
                        now.to_string()
                    ])
                })
                .map_err(map_err)?;
                Ok::<_, StoreError>(())
            })
            .await
    }

    async fn replan_day(
        &self,
        depot: &str,
        date: jiff::civil::Date,
        unplace: Vec<String>,
        now: Timestamp,
    ) -> StoreResult<Replanned> {
        let depot = depot.to_string();
        self.write_events(move |c, sink| replan_day(c, sink, &depot, date, &unplace, now)).await
    }

    async fn change_delivery(
        &self,
        target: ChangeTarget,
        change: DeliveryChange,
        by: Changer,
        now: Timestamp,
    ) -> StoreResult<ChangeOutcome> {
        let done = self.write_events(move |c, sink| change_delivery(c, sink, &target, &change, by, now)).await?;
        self.answer(done)
    }

    async fn return_to_sender(&self, scope: Scope, unique_id: &str, now: Timestamp) -> StoreResult<ChangeOutcome> {
        let target = ChangeTarget::Tenant(scope, unique_id.to_string());
        let done = self.write_events(move |c, sink| return_to_sender(c, sink, &target, now)).await?;
        self.answer(done)
    }

    async fn cancel_shipment(&self, scope: Scope, unique_id: &str, now: Timestamp) -> StoreResult<ChangeOutcome> {
        let target = ChangeTarget::Tenant(scope, unique_id.to_string());
        let done = self.write_events(move |c, sink| cancel(c, sink, &target, now)).await?;
        self.answer(done)
    }

    async fn failures(
        &self,
        depot: &str,
        from: Timestamp,
        to: Timestamp,
        date: jiff::civil::Date,
    ) -> StoreResult<Failures> {
        let depot = depot.to_string();
        self.read_blocking(move |c| Ok(failures(c, &depot, from, to, date))).await?
    }
}

impl SqliteStore {
    /// A change's answer: the shipment read back on a reader after the commit.
    fn answer(&self, done: Result<i64, ChangeOutcome>) -> StoreResult<ChangeOutcome> {
        match done {
            Err(outcome) => Ok(outcome),
            Ok(id) => {
                let s = self.read(|c| crate::shipments::sqlite::shipment_by_row(c, id))?;
                Ok(ChangeOutcome::Changed(Box::new(s)))
            }
        }
    }
}

const FACTS: &str = "SELECT d.id, d.unique_id, d.client_id, d.mode, d.status, d.attempts, d.max_attempts, d.zone_code,
        d.scheduled_date, d.slot_code, d.slot_name, d.start_at, d.end_at, p.id, p.status, p.slot_code,
        (SELECT count(*) FROM parcels x WHERE x.drop_off_shipment_id = d.id AND x.deleted_at IS NULL),
        d.return_attempts, d.return_date, d.return_slot_code, d.return_slot_name, d.return_start_at, d.return_end_at
     FROM drop_off_shipments d JOIN pick_up_shipments p ON p.id = d.pick_up_shipment_id";

fn facts_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Facts> {
    let mode: String = r.get(3)?;
    let mode = Mode::parse(&mode).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, format!("mode {mode:?}").into())
    })?;
    let ret: [Option<String>; 5] = [r.get(18)?, r.get(19)?, r.get(20)?, r.get(21)?, r.get(22)?];
    let ret = crate::StoredReturn::of(ret)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(18, rusqlite::types::Type::Text, e.into()))?;
    Ok(Facts {
        leg: Leg::of((r.get(0)?, status_column(r, 4)?, r.get(5)?, r.get(6)?), (r.get(13)?, status_column(r, 14)?)),
        unique_id: r.get(1)?,
        client: r.get(2)?,
        mode,
        zone: r.get(7)?,
        slot: SlotRef {
            date: r.get(8)?,
            slot_code: r.get(9)?,
            slot_name: r.get(10)?,
            start_at: r.get(11)?,
            end_at: r.get(12)?,
        },
        pick_up_slot: r.get(15)?,
        parcels: r.get(16)?,
        return_attempts: r.get(17)?,
        ret: ret.map(SlotRef::from),
    })
}

pub(crate) fn facts_by_id(c: &Connection, id: i64) -> Result<Facts, StoreError> {
    c.prepare_cached(&format!("{FACTS} WHERE d.id = ?1"))
        .and_then(|mut s| s.query_row([id], facts_row))
        .map_err(map_err)
}

fn facts_of(c: &Connection, target: &ChangeTarget) -> Result<Option<Facts>, StoreError> {
    let (code, client, mode) = match target {
        ChangeTarget::Tenant(scope, code) => (code.as_str(), Some(scope.client.0), Some(scope.mode.as_str())),
        ChangeTarget::Code(code) => (code.as_str(), None, None),
    };
    c.prepare_cached(&format!(
        "{FACTS} WHERE d.unique_id = ?1 AND (?2 IS NULL OR d.client_id = ?2) AND (?3 IS NULL OR d.mode = ?3)"
    ))
    .and_then(|mut s| s.query_row(params![code, client, mode], facts_row).optional())
    .map_err(map_err)
}

fn stored_policy(c: &Connection, client: i64, mode: Mode) -> Result<Option<Policy>, StoreError> {
    let row: Option<(u32, String, u32)> = c
        .prepare_cached(
            "SELECT max_attempts, after_failure, max_return_attempts FROM attempt_policies
             WHERE client_id = ?1 AND mode = ?2",
        )
        .and_then(|mut s| {
            s.query_row(params![client, mode.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()
        })
        .map_err(map_err)?;
    row.map(|(max_attempts, after, max_return_attempts)| {
        crate::attempts::policy_of(client, (max_attempts, &after, max_return_attempts))
    })
    .transpose()
}

/// Takes a place in the first of `offers` with room for `want`, in `mode`: its counter raised,
/// then checked against the date's limit (the override over the configured one), and lowered
/// again when it does not fit.
///
/// A live drop-off (`stop`: the fleet, when any depot books on it, and the drop-off's id) whose
/// zone's depot books on its fleet also needs room in that date's tentative plan (issue 45):
/// its stop is placed there, or the slot is passed by like a full one.
fn take<'a>(
    c: &Connection,
    mode: Mode,
    offers: &'a [Offer],
    want: Load,
    stop: (Option<&Fleet>, i64),
) -> Result<Option<&'a Offer>, StoreError> {
    for o in offers {
        let (stops, parcels) = crate::capacity::sqlite::raise(c, mode, &o.at, want)?;
        let overrides = crate::capacity::sqlite::overrides_of(c, &[&o.at])?;
        if fits(o, (stops, parcels), overrides.get(&o.at).copied(), want)? && on_fleet(c, mode, o, stop)? {
            return Ok(Some(o));
        }
        let (kind, place, code, date) = counter_key(&o.at);
        lower(c, mode, kind, place, code, &date, want)?;
    }
    Ok(None)
}

/// Whether the drop-off's stop has room on its depot's fleet in `o` (placed there if so):
/// always where the depot does not book on its fleet, for a pick-up slot, and in the sandbox.
fn on_fleet(c: &Connection, mode: Mode, o: &Offer, (fleet, id): (Option<&Fleet>, i64)) -> Result<bool, StoreError> {
    let Some(fleet) = fleet.filter(|_| mode == Mode::Live && o.at.kind == SlotKind::DropOff) else { return Ok(true) };
    let Some(depot) = fleet.rules.fleet_depot_of_zone(&o.at.place) else { return Ok(true) };
    let visit =
        crate::tentative::sqlite::visit_of(c, id, o.start.timestamp().as_second(), o.end.timestamp().as_second())?;
    crate::tentative::sqlite::place_one(c, fleet, depot, o.at.date, visit)
}

fn lower(
    c: &Connection,
    mode: Mode,
    kind: &str,
    place: &str,
    code: &str,
    date: &str,
    l: Load,
) -> Result<(), StoreError> {
    c.prepare_cached(
        "UPDATE slot_fill SET stops = stops - ?6, parcels = parcels - ?7
         WHERE mode = ?1 AND kind = ?2 AND place = ?3 AND slot_code = ?4 AND date = ?5",
    )
    .and_then(|mut s| s.execute(params![mode.as_str(), kind, place, code, date, l.stops, l.parcels]))
    .map_err(map_err)?;
    Ok(())
}

/// Gives a delivery slot's place back (a reschedule away from a slot not yet attempted).
fn free_delivery(c: &Connection, f: &Facts) -> Result<(), StoreError> {
    lower(c, f.mode, SlotKind::DropOff.as_str(), &f.zone, &f.slot.slot_code, &f.slot.date, f.delivery_load())
}

/// Gives a return's pick-up stop back (a return cancelled, or booked again after a failure).
fn free_return(c: &Connection, f: &Facts) -> Result<(), StoreError> {
    let Some(r) = &f.ret else { return Ok(()) };
    lower(c, f.mode, SlotKind::PickUp.as_str(), "", &r.slot_code, &r.date, attempts::want(SlotKind::PickUp, 0))
}

/// Moves the shipment's delivery into `o`; it leaves any published route and its ETA (the
/// next plan of the new date takes it).
fn set_delivery(c: &Connection, f: &Facts, o: &Offer) -> Result<(), StoreError> {
    let r = SlotRef::of(o);
    c.prepare_cached(
        "UPDATE drop_off_shipments SET scheduled_date = ?2, slot_code = ?3, slot_name = ?4, start_at = ?5, end_at = ?6
         WHERE id = ?1",
    )
    .and_then(|mut s| s.execute(params![f.leg.drop_off.id, r.date, r.slot_code, r.slot_name, r.start_at, r.end_at]))
    .map_err(map_err)?;
    off_routes(c, &f.unique_id)
}

fn off_routes(c: &Connection, unique_id: &str) -> Result<(), StoreError> {
    for sql in [
        "DELETE FROM published_stops WHERE shipment_unique_id = ?1",
        "DELETE FROM stop_etas WHERE shipment_unique_id = ?1",
    ] {
        c.prepare_cached(sql).and_then(|mut s| s.execute([unique_id])).map_err(map_err)?;
    }
    Ok(())
}

/// Books the return into `o` (or clears it), with the failed return attempts so far.
fn set_return(c: &Connection, f: &Facts, o: Option<&Offer>, return_attempts: u32) -> Result<(), StoreError> {
    let r = o.map(SlotRef::of);
    c.prepare_cached(
        "UPDATE drop_off_shipments SET return_date = ?2, return_slot_code = ?3, return_slot_name = ?4,
            return_start_at = ?5, return_end_at = ?6, return_attempts = ?7 WHERE id = ?1",
    )
    .and_then(|mut s| {
        s.execute(params![
            f.leg.drop_off.id,
            r.as_ref().map(|r| &r.date),
            r.as_ref().map(|r| &r.slot_code),
            r.as_ref().map(|r| &r.slot_name),
            r.as_ref().map(|r| &r.start_at),
            r.as_ref().map(|r| &r.end_at),
            return_attempts
        ])
    })
    .map_err(map_err)?;
    off_routes(c, &f.unique_id)
}

/// Queues `same.shipment.rescheduled` to the tenant's endpoints that take it, in the
/// shipment's stream (after its status events).
fn rescheduled(c: &Connection, sink: &mut Sink<'_>, f: &Facts, change: &Rescheduled) -> Result<(), StoreError> {
    const EVENT: &str = dropslot_core::webhooks::RESCHEDULED;
    let endpoints = crate::outbox::sqlite::tenant_subscribers(c, f.scope(), EVENT)?;
    if endpoints.is_empty() {
        return Ok(());
    }
    let shipment = crate::shipments::sqlite::shipment_without_events(c, f.leg.drop_off.id).map_err(map_err)?;
    let body = sink.outbox.rescheduled(&shipment, change).map_err(StoreError::Corrupt)?;
    let at = change.at;
    let id = f.leg.drop_off.id;
    sink.queued +=
        crate::outbox::sqlite::enqueue(c, (f.client, f.mode.as_str()), EVENT, &body, Some(id), &endpoints, at)?.len();
    Ok(())
}

/// Makes `moves` on the shipment (planned by the core from `leg`) and persists them.
fn moved(
    c: &Connection,
    sink: &mut Sink<'_>,
    leg: &Leg,
    moves: &[Move],
    now: Timestamp,
) -> Result<Result<Leg, shipments::Refusal>, StoreError> {
    match shipments::plan_moves(leg, moves) {
        Err(r) => Ok(Err(r)),
        Ok(events) => {
            crate::outbox::sqlite::apply(c, sink, &events, now)?;
            let mut after = *leg;
            for e in &events {
                let cur = match e.kind {
                    ShipmentKind::DropOff => &mut after.drop_off,
                    ShipmentKind::PickUp => &mut after.pick_up,
                };
                cur.status = e.to;
                cur.attempts = e.attempts;
            }
            Ok(Ok(after))
        }
    }
}

/// What follows a drop-off's failure (CONTRACT §15), planned in the failure's own job before
/// anything is written: by the client's policy, a re-attempt booked into the first slot with
/// room from the next operating day (`to_attempt`), a return booked into the city's first
/// pick-up slot with room (`return_scheduled`), or nothing (the merchant decides). The booking
/// is written to the shipment's row and the follow-up's events are added to `events`, so the
/// failure's webhooks and recipient message, rendered when they are applied, show what comes
/// next. With no slot with room within the horizon the shipment stays `failed`.
pub(crate) fn follow_failure(
    c: &Connection,
    sink: &Sink<'_>,
    events: &mut Vec<NewEvent>,
    now: Timestamp,
) -> Result<(), StoreError> {
    let Some(rules) = sink.outbox.attempts() else { return Ok(()) };
    let Some(failed) = events.iter().rev().find(|e| e.kind == ShipmentKind::DropOff && e.to == Status::Failed).cloned()
    else {
        return Ok(());
    };
    let mut f = facts_by_id(c, failed.shipment)?;
    f.failed(&failed);
    let (policy, max) = f.follow(stored_policy(c, f.client, f.mode)?, rules);
    if let Some(max) = max {
        c.prepare_cached("UPDATE drop_off_shipments SET max_attempts = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![failed.shipment, max]))
            .map_err(map_err)?;
    }
    let Some((offers, kind)) = f.failure_offers(&policy, rules, now)? else { return Ok(()) };
    let stop = (sink.outbox.fleet(), f.leg.drop_off.id);
    let Some(o) = take(c, f.mode, &offers, attempts::want(kind, f.parcels), stop)? else { return Ok(()) };
    match kind {
        SlotKind::DropOff => set_delivery(c, &f, o)?,
        SlotKind::PickUp => set_return(c, &f, Some(o), 0)?,
    }
    events.extend(f.follow_events(o, kind)?);
    Ok(())
}

/// Books the return into the first of `offers` with room and moves the shipment
/// `return_scheduled`; `false` when no slot has room (nothing written).
fn book_return_into(
    c: &Connection,
    sink: &mut Sink<'_>,
    f: &Facts,
    offers: &[Offer],
    actor: Actor,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let Some(o) = take(c, f.mode, offers, attempts::want(SlotKind::PickUp, 0), (None, f.leg.drop_off.id))? else {
        return Ok(false);
    };
    set_return(c, f, Some(o), 0)?;
    moved(c, sink, &f.leg, &[return_move(o, actor)], now)?
        .map_err(|r| StoreError::Corrupt(format!("return refused: {r}")))?;
    Ok(true)
}

/// A driver's (or ops') failure of a return stop: booked again into the next pick-up slot with
/// room (`same.shipment.rescheduled`), or `cancelled` after `max_return_attempts`.
pub(crate) fn return_failed(
    c: &Connection,
    sink: &mut Sink<'_>,
    drop_off: i64,
    m: &Move,
    now: Timestamp,
) -> Result<MoveOutcome, StoreError> {
    let f = facts_by_id(c, drop_off)?;
    let Some(rules) = sink.outbox.attempts().cloned() else {
        return Ok(MoveOutcome::Refused(f.refusal(m.to)));
    };
    if reason_missing(m) {
        return Ok(MoveOutcome::Refused(shipments::Refusal::ReasonRequired));
    }
    let policy = stored_policy(c, f.client, f.mode)?.unwrap_or(rules.default);
    let (made, offers) = f.return_retry(&rules, &policy, now)?;
    free_return(c, &f)?;
    if let Some(o) = take(c, f.mode, &offers, attempts::want(SlotKind::PickUp, 0), (None, f.leg.drop_off.id))? {
        set_return(c, &f, Some(o), made)?;
        rescheduled(c, sink, &f, &Rescheduled::return_again(&f, o, m.reason.clone(), now))?;
        return Ok(MoveOutcome::Moved(f.unique_id));
    }
    set_return(c, &f, None, made)?;
    match moved(c, sink, &f.leg, &[return_cancelled(made, m)], now)? {
        Ok(_) => Ok(MoveOutcome::Moved(f.unique_id)),
        Err(r) => Ok(MoveOutcome::Refused(r)),
    }
}

/// The merchant's or the recipient's change (a new slot, an instruction, or both).
fn change_delivery(
    c: &Connection,
    sink: &mut Sink<'_>,
    target: &ChangeTarget,
    change: &DeliveryChange,
    by: Changer,
    now: Timestamp,
) -> Result<Result<i64, ChangeOutcome>, StoreError> {
    let Some(f) = facts_of(c, target)? else { return Ok(Err(ChangeOutcome::NotFound)) };
    let plan = match f.plan_change(change, by) {
        Ok(plan) => plan,
        Err(refused) => return Ok(Err(refused)),
    };
    if let Some(slot) = &plan.slot {
        if let Some(o) = slot.take {
            let stop = (sink.outbox.fleet(), f.leg.drop_off.id);
            let Some(o) = take(c, f.mode, std::slice::from_ref(o), f.delivery_load(), stop)? else {
                return Ok(Err(ChangeOutcome::Full));
            };
            if slot.frees {
                free_delivery(c, &f)?;
            }
            set_delivery(c, &f, o)?;
        }
        if let Some(m) = &slot.to_attempt {
            moved(c, sink, &f.leg, std::slice::from_ref(m), now)?
                .map_err(|r| StoreError::Corrupt(format!("reschedule refused: {r}")))?;
        }
        if let Some(o) = slot.take {
            rescheduled(c, sink, &f, &Rescheduled::delivery(&f, o, by, now))?;
        }
    }
    if let Some(text) = plan.instruction {
        c.prepare_cached("UPDATE drop_off_shipments SET instruction = NULLIF(?2, '') WHERE id = ?1")
            .and_then(|mut s| s.execute(params![f.leg.drop_off.id, text]))
            .map_err(map_err)?;
    }
    Ok(Ok(f.leg.drop_off.id))
}

fn return_to_sender(
    c: &Connection,
    sink: &mut Sink<'_>,
    target: &ChangeTarget,
    now: Timestamp,
) -> Result<Result<i64, ChangeOutcome>, StoreError> {
    let Some(f) = facts_of(c, target)? else { return Ok(Err(ChangeOutcome::NotFound)) };
    let status = f.leg.drop_off.status;
    if !attempts::returnable(status) {
        return Ok(Err(ChangeOutcome::Refused(f.refusal(Status::ReturnScheduled))));
    }
    let offers = sink.outbox.attempts().map(|rules| f.return_offers(rules, now)).unwrap_or_default();
    let offers = offers.as_slice();
    // The delivery slot's place is given back only once the return is booked: the job
    // commits whatever it answers, and a return with no room must write nothing.
    if !book_return_into(c, sink, &f, offers, Actor::Client, now)? {
        return Ok(Err(ChangeOutcome::NoRoom));
    }
    if attempts::frees_current(status) {
        free_delivery(c, &f)?;
    }
    Ok(Ok(f.leg.drop_off.id))
}

fn cancel(
    c: &Connection,
    sink: &mut Sink<'_>,
    target: &ChangeTarget,
    now: Timestamp,
) -> Result<Result<i64, ChangeOutcome>, StoreError> {
    let Some(f) = facts_of(c, target)? else { return Ok(Err(ChangeOutcome::NotFound)) };
    if !attempts::cancellable(f.leg.drop_off.status) {
        return Ok(Err(ChangeOutcome::Refused(f.refusal(Status::Cancelled))));
    }
    free_return(c, &f)?;
    if f.ret.is_some() {
        set_return(c, &f, None, f.return_attempts)?;
    }
    match moved(c, sink, &f.leg, &[merchant_cancel()], now)? {
        Ok(_) => Ok(Ok(f.leg.drop_off.id)),
        Err(r) => Ok(Err(ChangeOutcome::Refused(r))),
    }
}

/// The board's failures of a depot (live shipments only).
fn failures(
    c: &Connection,
    depot: &str,
    from: Timestamp,
    to: Timestamp,
    date: jiff::civil::Date,
) -> Result<Failures, StoreError> {
    let line = |r: &rusqlite::Row<'_>| -> rusqlite::Result<FailureLine> {
        let at: Option<String> = r.get(3)?;
        Ok(FailureLine {
            unique_id: r.get(0)?,
            status: status_column(r, 1)?,
            reason: r.get(2)?,
            // A stored instant that does not parse is corrupt, never "no failure".
            failed_at: at
                .map(|t| {
                    t.parse::<Timestamp>().map_err(|e| {
                        rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, e.to_string().into())
                    })
                })
                .transpose()?,
            next_date: r.get(4)?,
            next_slot: r.get(5)?,
        })
    };
    let live = Mode::Live.as_str();
    let failed_status = Status::Failed.as_str();
    let failed = c
        .prepare_cached(
            "SELECT d.unique_id, d.status, e.reason, e.at,
                CASE WHEN d.return_date IS NOT NULL THEN d.return_date ELSE d.scheduled_date END,
                CASE WHEN d.return_date IS NOT NULL THEN d.return_slot_name ELSE d.slot_name END
             FROM shipment_events e JOIN drop_off_shipments d ON d.id = e.shipment_id
             WHERE e.shipment_kind = ?1 AND e.status = ?2 AND e.at >= ?3 AND e.at < ?4
               AND d.warehouse = ?5 AND d.mode = ?6
             ORDER BY e.at, e.id",
        )
        .and_then(|mut s| {
            s.query_map(
                params![ShipmentKind::DropOff.as_str(), failed_status, from.to_string(), to.to_string(), depot, live],
                line,
            )?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(map_err)?;
    let pending = |status: Status, date_column: &str, slot_column: &str| -> Result<Vec<FailureLine>, StoreError> {
        c.prepare_cached(&format!(
            "SELECT d.unique_id, d.status,
                (SELECT e.reason FROM shipment_events e WHERE e.shipment_kind = ?1 AND e.shipment_id = d.id
                    AND e.status = ?2 ORDER BY e.seq DESC LIMIT 1),
                (SELECT e.at FROM shipment_events e WHERE e.shipment_kind = ?1 AND e.shipment_id = d.id
                    AND e.status = ?2 ORDER BY e.seq DESC LIMIT 1),
                d.{date_column}, d.{slot_column}
             FROM drop_off_shipments d
             WHERE d.status = ?3 AND d.warehouse = ?4 AND d.mode = ?5 AND d.{date_column} >= ?6
             ORDER BY d.{date_column}, d.id"
        ))
        .and_then(|mut s| {
            s.query_map(
                params![ShipmentKind::DropOff.as_str(), failed_status, status.as_str(), depot, live, date.to_string()],
                line,
            )?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(map_err)
    };
    Ok(Failures {
        failed,
        reattempts: pending(Status::ToAttempt, "scheduled_date", "slot_name")?,
        returns: pending(Status::ReturnScheduled, "return_date", "return_slot_name")?,
    })
}

/// The drop-off row id of `unique_id` (live), if any.
fn live_id(c: &Connection, unique_id: &str) -> Result<Option<i64>, StoreError> {
    c.prepare_cached("SELECT id FROM drop_off_shipments WHERE unique_id = ?1 AND mode = ?2")
        .and_then(|mut s| s.query_row(params![unique_id, Mode::Live.as_str()], |r| r.get(0)).optional())
        .map_err(map_err)
}

/// Issue 45's "no sold shipment left behind", in one writer job: the day's tentative plan read
/// anew with the fleet as it is (a fleet depot), and each drop-off that fits it no longer, or
/// that `unplace` names (a published plan left it unassigned), rebooked or held by
/// `[dispatch] unplaced`.
fn replan_day(
    c: &Connection,
    sink: &mut Sink<'_>,
    depot: &str,
    date: jiff::civil::Date,
    unplace: &[String],
    now: Timestamp,
) -> Result<Replanned, StoreError> {
    let mut out: Vec<(i64, String)> = Vec::new();
    for u in unplace {
        if let Some(id) = live_id(c, u)? {
            out.push((id, crate::attempts::UNASSIGNED.into()));
        }
    }
    let fleet = sink.outbox.fleet();
    if let Some(fleet) = fleet.filter(|f| f.rules.fleet_depot(depot).is_some()) {
        let exclude: Vec<i64> = out.iter().map(|(id, _)| *id).collect();
        for (v, bound) in crate::tentative::sqlite::replan(c, fleet, depot, date, &exclude)? {
            out.push((v.id, bound.describe().into()));
        }
    }
    let Some(rules) = sink.outbox.attempts().cloned() else { return Ok(Replanned::default()) };
    let policy = crate::attempts::unplaced_policy(fleet);
    let mut done = Replanned::default();
    for (id, why) in out {
        let f = facts_by_id(c, id)?;
        let Some(offers) = f.unplaced_offers(date, policy, &rules, now)? else { continue };
        let rebooked = match take(c, f.mode, &offers, f.delivery_load(), (fleet, id))? {
            Some(o) => {
                free_delivery(c, &f)?;
                set_delivery(c, &f, o)?;
                set_unplaced(c, id, None)?;
                let change = Rescheduled::unplaced(&f, o, &why, now);
                rescheduled(c, sink, &f, &change)?;
                sink.notified += crate::notifications::sqlite::enqueue_rescheduled(c, sink.outbox.channels(), id, now)?;
                done.rebooked.push((f.unique_id.clone(), change.to));
                true
            }
            None => false,
        };
        if !rebooked {
            set_unplaced(c, id, Some((now, &why)))?;
            done.held.push((f.unique_id.clone(), why));
        }
    }
    Ok(done)
}

/// Marks a drop-off as waiting for the dispatcher (when, and why), or clears it.
fn set_unplaced(c: &Connection, id: i64, held: Option<(Timestamp, &str)>) -> Result<(), StoreError> {
    c.prepare_cached("UPDATE drop_off_shipments SET unplaced_at = ?2, unplaced_reason = ?3 WHERE id = ?1")
        .and_then(|mut s| {
            s.execute(params![id, held.map(|(at, _)| at.to_string()), held.map(|(_, why)| why.to_string())])
        })
        .map_err(map_err)?;
    Ok(())
}
