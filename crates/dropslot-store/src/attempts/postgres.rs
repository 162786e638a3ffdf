//! What follows a failed delivery on `PostgreSQL` (CONTRACT §15), as on `SQLite` (`sqlite.rs`).
//! Several processes change shipments at once, so every change is one transaction that locks
//! before it decides, in the order every unit of work locks (`lifecycle/postgres.rs`): the
//! shipment's pick-up leg, then the drop-off shipment, which is then loaded afresh with its
//! live parcels (a deletion locks the pick-up leg too). A place is taken in the first offered
//! slot with room: its `slot_fill` counter is raised (`INSERT … ON CONFLICT DO UPDATE`, whose
//! row lock serialises the bookings of one slot across processes until the commit) and read
//! back with the date's override, the core decides on what the slot held before, and the
//! counter is lowered again when the place does not fit. Status changes go through the
//! lifecycle's `apply` (their webhooks and messages); `same.shipment.rescheduled` goes to the
//! tenant's endpoints that take it, in the shipment's stream after its status events.

use crate::attempts::{
    ChangeOutcome, ChangeTarget, DeliveryChange, Facts, FailureLine, Failures, fits, merchant_cancel, reason_missing,
    return_cancelled, return_move,
};
use crate::capacity::counter_key;
use crate::outbox::postgres::Sink;
use crate::postgres::sql::Sql;
use crate::postgres::{PgStore, column, in_tx, map_err, narrow, status_column};
use crate::{AttemptStore, Fleet, Mode, MoveOutcome, Replanned, Rescheduled, Scope, SlotRef, StoreError, StoreResult};
use async_trait::async_trait;
use dropslot_core::attempts::{self, Changer, Offer, Policy};
use dropslot_core::quote::capacity::{Load, SlotKind};
use dropslot_core::shipments::{self, Actor, Leg, Move, NewEvent, ShipmentKind, Status};
use jiff::Timestamp;
use std::sync::LazyLock;
use tokio_postgres::Row;
use tokio_postgres::types::Type;

#[async_trait]
impl AttemptStore for PgStore {
    async fn attempt_policy(&self, scope: Scope) -> StoreResult<Option<Policy>> {
        stored_policy(&self.conn().await?, scope.client.0, scope.mode).await
    }

    async fn set_attempt_policy(&self, scope: Scope, policy: Policy, now: Timestamp) -> StoreResult<()> {
        self.conn()
            .await?
            .execute_typed(
                "INSERT INTO attempt_policies (client_id, mode, max_attempts, after_failure, max_return_attempts,
                    updated_at) VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (client_id, mode) DO UPDATE SET max_attempts = excluded.max_attempts,
                    after_failure = excluded.after_failure, max_return_attempts = excluded.max_return_attempts,
                    updated_at = excluded.updated_at",
                &[
                    (&scope.client.0, Type::INT8),
                    (&scope.mode.as_str(), Type::TEXT),
                    (&i64::from(policy.max_attempts), Type::INT8),
                    (&policy.after_failure.as_str(), Type::TEXT),
                    (&i64::from(policy.max_return_attempts), Type::INT8),
                    (&crate::postgres::utc_text(now), Type::TEXT),
                ],
            )
            .await
            .map_err(map_err)?;
        Ok(())
    }

    async fn replan_day(
        &self,
        depot: &str,
        date: jiff::civil::Date,
        unplace: Vec<String>,
        now: Timestamp,
    ) -> StoreResult<Replanned> {
        let mut sink = Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let done = in_tx!(self, |tx| replan_day(tx, &mut sink, depot, date, &unplace, now).await?);
        self.notify(sink.queued);
        self.notified(sink.notified);
        Ok(done)
    }

    async fn change_delivery(
        &self,
        target: ChangeTarget,
        change: DeliveryChange,
        by: Changer,
        now: Timestamp,
    ) -> StoreResult<ChangeOutcome> {
        let mut sink = Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let done = in_tx!(self, |tx| change_delivery(tx, &mut sink, &target, &change, by, now).await?);
        self.answer(&sink, done).await
    }

    async fn return_to_sender(&self, scope: Scope, unique_id: &str, now: Timestamp) -> StoreResult<ChangeOutcome> {
        let target = ChangeTarget::Tenant(scope, unique_id.to_string());
        let mut sink = Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let done = in_tx!(self, |tx| return_to_sender(tx, &mut sink, &target, now).await?);
        self.answer(&sink, done).await
    }

    async fn cancel_shipment(&self, scope: Scope, unique_id: &str, now: Timestamp) -> StoreResult<ChangeOutcome> {
        let target = ChangeTarget::Tenant(scope, unique_id.to_string());
        let mut sink = Sink { outbox: &*self.outbox, queued: 0, notified: 0 };
        let done = in_tx!(self, |tx| cancel(tx, &mut sink, &target, now).await?);
        self.answer(&sink, done).await
    }

    async fn failures(
        &self,
        depot: &str,
        from: Timestamp,
        to: Timestamp,
        date: jiff::civil::Date,
    ) -> StoreResult<Failures> {
        failures(&self.conn().await?, depot, from, to, date).await
    }
}

impl PgStore {
    /// A committed change's answer: the outbox told what it queued, and the shipment read back
    /// with its events.
    async fn answer(&self, sink: &Sink<'_>, done: Result<i64, ChangeOutcome>) -> StoreResult<ChangeOutcome> {
        self.notify(sink.queued);
        self.notified(sink.notified);
        match done {
            Err(outcome) => Ok(outcome),
            Ok(id) => {
                let s = crate::shipments::postgres::shipments_with_events(&self.conn().await?, &[id])
                    .await?
                    .pop()
                    .ok_or_else(|| StoreError::Corrupt(format!("drop-off shipment {id} was not read back")))?;
                Ok(ChangeOutcome::Changed(Box::new(s)))
            }
        }
    }
}

/// The columns of [`Facts`] ([`facts_row`]), from `d` (the drop-off shipment) and `p` (its
/// pick-up leg).
macro_rules! facts_columns {
    () => {
        "d.id, d.unique_id, d.client_id, d.mode, d.status, d.attempts, d.max_attempts, d.zone_code,
            d.scheduled_date, d.slot_code, d.slot_name, d.start_at, d.end_at, p.id, p.status, p.slot_code,
            (SELECT count(*) FROM parcels x WHERE x.drop_off_shipment_id = d.id AND x.deleted_at IS NULL),
            d.return_attempts, d.return_date, d.return_slot_code, d.return_slot_name, d.return_start_at,
            d.return_end_at"
    };
}

fn facts_row(r: &Row) -> Result<Facts, StoreError> {
    let mode: &str = column(r, 3)?;
    let mode = crate::postgres::parsed(mode, "mode", Mode::parse)?;
    let ret = crate::StoredReturn::of([column(r, 18)?, column(r, 19)?, column(r, 20)?, column(r, 21)?, column(r, 22)?])
        .map_err(StoreError::Corrupt)?;
    Ok(Facts {
        leg: Leg::of(
            (
                column(r, 0)?,
                status_column(r, 4)?,
                narrow(column(r, 5)?, "attempts")?,
                narrow(column(r, 6)?, "max_attempts")?,
            ),
            (column(r, 13)?, status_column(r, 14)?),
        ),
        unique_id: column(r, 1)?,
        client: column(r, 2)?,
        mode,
        zone: column(r, 7)?,
        slot: SlotRef {
            date: column(r, 8)?,
            slot_code: column(r, 9)?,
            slot_name: column(r, 10)?,
            start_at: column(r, 11)?,
            end_at: column(r, 12)?,
        },
        pick_up_slot: column(r, 15)?,
        parcels: narrow(column(r, 16)?, "parcel count")?,
        return_attempts: narrow(column(r, 17)?, "return_attempts")?,
        ret: ret.map(SlotRef::from),
    })
}

/// The facts of a drop-off shipment whose pick-up leg the caller has locked (a new statement,
/// which reads what the leg's previous holder committed), with the shipment locked too (the
/// lifecycle's move locked it already: taking a lock again is free).
async fn facts_by_id(c: &impl Sql, id: i64) -> Result<Facts, StoreError> {
    let row = c
        .query_typed_opt(
            concat!(
                "SELECT ",
                facts_columns!(),
                " FROM drop_off_shipments d JOIN pick_up_shipments p ON p.id = d.pick_up_shipment_id
                 WHERE d.id = $1 FOR UPDATE OF p, d"
            ),
            &[(&id, Type::INT8)],
        )
        .await
        .map_err(map_err)?
        .ok_or_else(|| StoreError::Corrupt(format!("drop-off shipment {id} not found")))?;
    facts_row(&row)
}

/// The facts of the shipment a change names, locked: its pick-up leg first (the drop-off's
/// leg, tracking code, client and mode never change), then the drop-off shipment.
async fn facts_of(c: &impl Sql, target: &ChangeTarget) -> Result<Option<Facts>, StoreError> {
    let (code, client, mode) = match target {
        ChangeTarget::Tenant(scope, code) => (code.as_str(), Some(scope.client.0), Some(scope.mode.as_str())),
        ChangeTarget::Code(code) => (code.as_str(), None, None),
    };
    let found = c
        .query_typed_opt(
            "SELECT d.id FROM drop_off_shipments d JOIN pick_up_shipments p ON p.id = d.pick_up_shipment_id
             WHERE d.unique_id = $1 AND ($2::bigint IS NULL OR d.client_id = $2) AND ($3::text IS NULL OR d.mode = $3)
             FOR UPDATE OF p",
            &[(&code, Type::TEXT), (&client, Type::INT8), (&mode, Type::TEXT)],
        )
        .await
        .map_err(map_err)?;
    match found {
        None => Ok(None),
        Some(r) => Ok(Some(facts_by_id(c, column(&r, 0)?).await?)),
    }
}

/// The client's policy in a mode, if it set one.
async fn stored_policy(c: &impl Sql, client: i64, mode: Mode) -> Result<Option<Policy>, StoreError> {
    let row = c
        .query_typed_opt(
            "SELECT max_attempts, after_failure, max_return_attempts FROM attempt_policies
             WHERE client_id = $1 AND mode = $2",
            &[(&client, Type::INT8), (&mode.as_str(), Type::TEXT)],
        )
        .await
        .map_err(map_err)?;
    row.map(|r| {
        let max_attempts = narrow(column(&r, 0)?, "max_attempts")?;
        let max_return_attempts = narrow(column(&r, 2)?, "max_return_attempts")?;
        crate::attempts::policy_of(client, (max_attempts, column(&r, 1)?, max_return_attempts))
    })
    .transpose()
}

type Param<'a> = (&'a (dyn tokio_postgres::types::ToSql + Sync), Type);

/// A slot's fill counter (`slot_fill`): its mode and key (`crate::capacity::counter_key`),
/// and the load a change adds to it or takes from it.
struct Counter<'a> {
    mode: &'static str,
    kind: &'static str,
    place: &'a str,
    code: &'a str,
    date: String,
    stops: i64,
    parcels: i64,
}

impl<'a> Counter<'a> {
    fn of(mode: Mode, at: &'a dropslot_core::quote::capacity::SlotDate, l: Load) -> Counter<'a> {
        let (kind, place, code, date) = counter_key(at);
        Counter { mode: mode.as_str(), kind, place, code, date, stops: l.stops.into(), parcels: l.parcels.into() }
    }

    /// The parameters `$1`–`$7`: mode, kind, place, slot code, date, stops, parcels.
    fn params(&self) -> [Param<'_>; 7] {
        [
            (&self.mode, Type::TEXT),
            (&self.kind, Type::TEXT),
            (&self.place, Type::TEXT),
            (&self.code, Type::TEXT),
            (&self.date, Type::TEXT),
            (&self.stops, Type::INT8),
            (&self.parcels, Type::INT8),
        ]
    }
}

/// Which of `offers` have room for `want` as committed now, read without a lock in one
/// statement: the slots [`take`] need not lock. (A slot whose counter it raised stays locked
/// until the commit, in the offers' time order, while an order batch locks counters in key
/// order: raising only the slots that seem to have room keeps the two from crossing, except
/// when a place goes between this read and the raise.)
async fn with_room(c: &impl Sql, mode: Mode, offers: &[Offer], want: Load) -> Result<Vec<bool>, StoreError> {
    let counters: Vec<Counter<'_>> = offers.iter().map(|o| Counter::of(mode, &o.at, want)).collect();
    let kinds: Vec<&str> = counters.iter().map(|k| k.kind).collect();
    let places: Vec<&str> = counters.iter().map(|k| k.place).collect();
    let codes: Vec<&str> = counters.iter().map(|k| k.code).collect();
    let dates: Vec<&str> = counters.iter().map(|k| k.date.as_str()).collect();
    let named: Vec<&str> = offers.iter().map(|o| o.at.place.as_str()).collect();
    let rows = c
        .query_typed(
            "SELECT u.ord, coalesce(f.stops, 0), coalesce(f.parcels, 0), o.stops_set, o.stops, o.parcels_set, o.parcels
             FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
                WITH ORDINALITY AS u (kind, place, slot_code, date, named, ord)
             LEFT JOIN slot_fill f ON f.mode = $1 AND f.kind = u.kind AND f.place = u.place
                AND f.slot_code = u.slot_code AND f.date = u.date
             LEFT JOIN capacity_overrides o
                ON o.kind = u.kind AND o.place = u.named AND o.slot_code = u.slot_code AND o.date = u.date
             ORDER BY u.ord",
            &[
                (&mode.as_str(), Type::TEXT),
                (&kinds, Type::TEXT_ARRAY),
                (&places, Type::TEXT_ARRAY),
                (&codes, Type::TEXT_ARRAY),
                (&dates, Type::TEXT_ARRAY),
                (&named, Type::TEXT_ARRAY),
            ],
        )
        .await
        .map_err(map_err)?;
    if rows.len() != offers.len() {
        return Err(StoreError::Corrupt(format!("{} of {} slots read", rows.len(), offers.len())));
    }
    offers
        .iter()
        .zip(&rows)
        .map(|(o, r)| {
            let held: (i64, i64) = (column(r, 1)?, column(r, 2)?);
            let over = override_at(o, r, 3)?;
            fits(o, (held.0 + i64::from(want.stops), held.1 + i64::from(want.parcels)), over, want)
        })
        .collect()
}

/// The date's override of `o`'s slot from four columns from `first` on (none: no row).
fn override_at(
    o: &Offer,
    r: &Row,
    first: usize,
) -> Result<Option<dropslot_core::quote::capacity::Override>, StoreError> {
    let Some(stops_set) = column::<Option<bool>>(r, first)? else { return Ok(None) };
    let columns = (
        o.at.kind.as_str().to_string(),
        o.at.place.clone(),
        o.at.slot.clone(),
        o.at.date.to_string(),
        stops_set,
        column(r, first + 1)?,
        column(r, first + 2)?,
        column(r, first + 3)?,
    );
    Ok(Some(crate::capacity::override_row(columns)?.1))
}

/// Takes a place in the first of `offers` with room for `want`, in `mode`: its counter raised
/// (and its row locked until the commit) and read with the date's override, then checked by
/// the core's rule, and lowered again when it does not fit. Slots full as committed are
/// passed by without a lock ([`with_room`]).
///
/// A live drop-off (`stop`: the fleet, when any depot books on it, and the drop-off's id) whose
/// zone's depot books on its fleet also needs room in that date's tentative plan (issue 45).
async fn take<'a>(
    c: &impl Sql,
    mode: Mode,
    offers: &'a [Offer],
    want: Load,
    stop: (Option<&Fleet>, i64),
) -> Result<Option<&'a Offer>, StoreError> {
    let room = with_room(c, mode, offers, want).await?;
    for (o, _) in offers.iter().zip(room).filter(|(_, room)| *room) {
        let counter = Counter::of(mode, &o.at, want);
        // The override names the slot's city or zone (`o.at.place`, `$8`), the counter a
        // pick-up slot by its code alone.
        let mut params = counter.params().to_vec();
        params.push((&o.at.place, Type::TEXT));
        let row = c
            .query_typed_opt(
                "WITH up AS (
                    INSERT INTO slot_fill (mode, kind, place, slot_code, date, stops, parcels)
                    VALUES ($1, $2, $3, $4, $5, $6, $7)
                    ON CONFLICT (mode, kind, place, slot_code, date)
                    DO UPDATE SET stops = slot_fill.stops + excluded.stops,
                        parcels = slot_fill.parcels + excluded.parcels
                    RETURNING stops, parcels
                 )
                 SELECT up.stops, up.parcels, o.stops_set, o.stops, o.parcels_set, o.parcels
                 FROM up LEFT JOIN capacity_overrides o
                    ON o.kind = $2 AND o.place = $8 AND o.slot_code = $4 AND o.date = $5",
                &params,
            )
            .await
            .map_err(map_err)?
            .ok_or_else(|| StoreError::Corrupt(format!("slot counter {} {} not raised", o.at.slot, o.at.date)))?;
        let over = override_at(o, &row, 2)?;
        if fits(o, (column(&row, 0)?, column(&row, 1)?), over, want)? && on_fleet(c, mode, o, stop).await? {
            return Ok(Some(o));
        }
        lower(c, &counter).await?;
    }
    Ok(None)
}

/// Whether the drop-off's stop has room on its depot's fleet in `o` (placed there if so):
/// always where the depot does not book on its fleet, for a pick-up slot, and in the sandbox.
async fn on_fleet(c: &impl Sql, mode: Mode, o: &Offer, (fleet, id): (Option<&Fleet>, i64)) -> Result<bool, StoreError> {
    let Some(fleet) = fleet.filter(|_| mode == Mode::Live && o.at.kind == SlotKind::DropOff) else { return Ok(true) };
    let Some(depot) = fleet.rules.fleet_depot_of_zone(&o.at.place) else { return Ok(true) };
    let (from, to) = (o.start.timestamp().as_second(), o.end.timestamp().as_second());
    let visit = crate::tentative::postgres::visit_of(c, id, from, to).await?;
    crate::tentative::postgres::place_one(c, fleet, depot, o.at.date, visit).await
}

/// Takes the counter's load off it.
async fn lower(c: &impl Sql, counter: &Counter<'_>) -> Result<(), StoreError> {
    c.execute_typed(
        "UPDATE slot_fill SET stops = stops - $6, parcels = parcels - $7
         WHERE mode = $1 AND kind = $2 AND place = $3 AND slot_code = $4 AND date = $5",
        &counter.params(),
    )
    .await
    .map_err(map_err)?;
    Ok(())
}

/// Gives a delivery slot's place back (a reschedule away from a slot not yet attempted).
async fn free_delivery(c: &impl Sql, f: &Facts) -> Result<(), StoreError> {
    let l = f.delivery_load();
    let counter = Counter {
        mode: f.mode.as_str(),
        kind: SlotKind::DropOff.as_str(),
        place: &f.zone,
        code: &f.slot.slot_code,
        date: f.slot.date.clone(),
        stops: l.stops.into(),
        parcels: l.parcels.into(),
    };
    lower(c, &counter).await
}

/// Gives a return's pick-up stop back (a return cancelled, or booked again after a failure).
async fn free_return(c: &impl Sql, f: &Facts) -> Result<(), StoreError> {
    let Some(r) = &f.ret else { return Ok(()) };
    let l = attempts::want(SlotKind::PickUp, 0);
    let counter = Counter {
        mode: f.mode.as_str(),
        kind: SlotKind::PickUp.as_str(),
        place: "",
        code: &r.slot_code,
        date: r.date.clone(),
        stops: l.stops.into(),
        parcels: l.parcels.into(),
    };
    lower(c, &counter).await
}

/// Takes the shipment off any published route and its ETA (the next plan of its new date
/// takes it).
async fn off_routes(c: &impl Sql, unique_id: &str) -> Result<(), StoreError> {
    c.execute_typed(
        "WITH stops AS (DELETE FROM published_stops WHERE shipment_unique_id = $1)
         DELETE FROM stop_etas WHERE shipment_unique_id = $1",
        &[(&unique_id, Type::TEXT)],
    )
    .await
    .map_err(map_err)?;
    Ok(())
}

/// Moves the shipment's delivery into `o`, off its route (sent together: one round trip).
async fn set_delivery(c: &impl Sql, f: &Facts, o: &Offer) -> Result<(), StoreError> {
    let r = SlotRef::of(o);
    let update = async {
        c.execute_typed(
            "UPDATE drop_off_shipments SET scheduled_date = $2, slot_code = $3, slot_name = $4, start_at = $5,
                end_at = $6
             WHERE id = $1",
            &[
                (&f.leg.drop_off.id, Type::INT8),
                (&r.date, Type::TEXT),
                (&r.slot_code, Type::TEXT),
                (&r.slot_name, Type::TEXT),
                (&r.start_at, Type::TEXT),
                (&r.end_at, Type::TEXT),
            ],
        )
        .await
        .map_err(map_err)
    };
    tokio::try_join!(update, off_routes(c, &f.unique_id))?;
    Ok(())
}

/// Books the return into `o` (or clears it), with the failed return attempts so far; off its
/// route (one round trip).
async fn set_return(c: &impl Sql, f: &Facts, o: Option<&Offer>, return_attempts: u32) -> Result<(), StoreError> {
    let r = o.map(SlotRef::of);
    let update = async {
        c.execute_typed(
            "UPDATE drop_off_shipments SET return_date = $2, return_slot_code = $3, return_slot_name = $4,
                return_start_at = $5, return_end_at = $6, return_attempts = $7
             WHERE id = $1",
            &[
                (&f.leg.drop_off.id, Type::INT8),
                (&r.as_ref().map(|r| &r.date), Type::TEXT),
                (&r.as_ref().map(|r| &r.slot_code), Type::TEXT),
                (&r.as_ref().map(|r| &r.slot_name), Type::TEXT),
                (&r.as_ref().map(|r| &r.start_at), Type::TEXT),
                (&r.as_ref().map(|r| &r.end_at), Type::TEXT),
                (&i64::from(return_attempts), Type::INT8),
            ],
        )
        .await
        .map_err(map_err)
    };
    tokio::try_join!(update, off_routes(c, &f.unique_id))?;
    Ok(())
}

/// Queues `same.shipment.rescheduled` to the tenant's endpoints that take it, in the
/// shipment's stream (after its status events).
async fn rescheduled(c: &impl Sql, sink: &mut Sink<'_>, f: &Facts, change: &Rescheduled) -> Result<(), StoreError> {
    const EVENT: &str = dropslot_core::webhooks::RESCHEDULED;
    let endpoints = crate::outbox::postgres::tenant_subscribers(c, f.scope(), EVENT).await?;
    if endpoints.is_empty() {
        return Ok(());
    }
    let id = f.leg.drop_off.id;
    let shipment = crate::shipments::postgres::shipments_without_events(c, &[id])
        .await?
        .pop()
        .ok_or_else(|| StoreError::Corrupt(format!("drop-off shipment {id} not found")))?;
    let body = sink.outbox.rescheduled(&shipment, change).map_err(StoreError::Corrupt)?;
    let tenant = (f.client, f.mode.as_str());
    sink.queued +=
        crate::outbox::postgres::enqueue(c, tenant, EVENT, &body, Some(id), &endpoints, change.at).await?.len();
    Ok(())
}

/// Makes `m` on the shipment (planned by the core from `leg`, locked) and persists it.
async fn moved(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    leg: &Leg,
    m: &Move,
    now: Timestamp,
) -> Result<Result<(), shipments::Refusal>, StoreError> {
    match shipments::plan_moves(leg, std::slice::from_ref(m)) {
        Err(r) => Ok(Err(r)),
        Ok(events) => {
            crate::outbox::postgres::apply(c, sink, &events, now).await?;
            Ok(Ok(()))
        }
    }
}

/// What follows a drop-off's failure (CONTRACT §15), planned in the failure's own transaction
/// before anything is written (the caller holds the shipment's lock): by the client's policy, a
/// re-attempt or a return takes its place and rebooks the row, and its events join `events`,
/// so the failure's webhooks and recipient message show what comes next. Held, or no slot
/// with room within the horizon: the shipment stays `failed`.
pub(crate) async fn follow_failure(
    c: &impl Sql,
    sink: &Sink<'_>,
    events: &mut Vec<NewEvent>,
    now: Timestamp,
) -> Result<(), StoreError> {
    let Some(rules) = sink.outbox.attempts() else { return Ok(()) };
    let Some(failed) = events.iter().rev().find(|e| e.kind == ShipmentKind::DropOff && e.to == Status::Failed).cloned()
    else {
        return Ok(());
    };
    let mut f = facts_by_id(c, failed.shipment).await?;
    f.failed(&failed);
    let (policy, max) = f.follow(stored_policy(c, f.client, f.mode).await?, rules);
    if let Some(max) = max {
        c.execute_typed(
            "UPDATE drop_off_shipments SET max_attempts = $2 WHERE id = $1",
            &[(&failed.shipment, Type::INT8), (&i64::from(max), Type::INT8)],
        )
        .await
        .map_err(map_err)?;
    }
    let Some((offers, kind)) = f.failure_offers(&policy, rules, now)? else { return Ok(()) };
    let stop = (sink.outbox.fleet(), f.leg.drop_off.id);
    let Some(o) = take(c, f.mode, &offers, attempts::want(kind, f.parcels), stop).await? else { return Ok(()) };
    match kind {
        SlotKind::DropOff => set_delivery(c, &f, o).await?,
        SlotKind::PickUp => set_return(c, &f, Some(o), 0).await?,
    }
    events.extend(f.follow_events(o, kind)?);
    Ok(())
}

/// Books the return into the first of `offers` with room and moves the shipment
/// `return_scheduled`; `false` when no slot has room (nothing written).
async fn book_return_into(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    f: &Facts,
    offers: &[Offer],
    actor: Actor,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let stop = (None, f.leg.drop_off.id);
    let Some(o) = take(c, f.mode, offers, attempts::want(SlotKind::PickUp, 0), stop).await? else { return Ok(false) };
    set_return(c, f, Some(o), 0).await?;
    moved(c, sink, &f.leg, &return_move(o, actor), now)
        .await?
        .map_err(|r| StoreError::Corrupt(format!("return refused: {r}")))?;
    Ok(true)
}

/// A driver's (or ops') failure of a return stop, in its transaction (the caller holds the
/// shipment's locks): booked again into the next pick-up slot with room
/// (`same.shipment.rescheduled`), or `cancelled` after `max_return_attempts`.
pub(crate) async fn return_failed(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    drop_off: i64,
    m: &Move,
    now: Timestamp,
) -> Result<MoveOutcome, StoreError> {
    let f = facts_by_id(c, drop_off).await?;
    let Some(rules) = sink.outbox.attempts().cloned() else {
        return Ok(MoveOutcome::Refused(f.refusal(m.to)));
    };
    if reason_missing(m) {
        return Ok(MoveOutcome::Refused(shipments::Refusal::ReasonRequired));
    }
    let policy = stored_policy(c, f.client, f.mode).await?.unwrap_or(rules.default);
    let (made, offers) = f.return_retry(&rules, &policy, now)?;
    free_return(c, &f).await?;
    if let Some(o) = take(c, f.mode, &offers, attempts::want(SlotKind::PickUp, 0), (None, f.leg.drop_off.id)).await? {
        set_return(c, &f, Some(o), made).await?;
        rescheduled(c, sink, &f, &Rescheduled::return_again(&f, o, m.reason.clone(), now)).await?;
        return Ok(MoveOutcome::Moved(f.unique_id));
    }
    set_return(c, &f, None, made).await?;
    match moved(c, sink, &f.leg, &return_cancelled(made, m), now).await? {
        Ok(()) => Ok(MoveOutcome::Moved(f.unique_id)),
        Err(r) => Ok(MoveOutcome::Refused(r)),
    }
}

/// The merchant's or the recipient's change (a new slot, an instruction, or both).
async fn change_delivery(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    target: &ChangeTarget,
    change: &DeliveryChange,
    by: Changer,
    now: Timestamp,
) -> Result<Result<i64, ChangeOutcome>, StoreError> {
    let Some(f) = facts_of(c, target).await? else { return Ok(Err(ChangeOutcome::NotFound)) };
    let plan = match f.plan_change(change, by) {
        Ok(plan) => plan,
        Err(refused) => return Ok(Err(refused)),
    };
    if let Some(slot) = &plan.slot {
        if let Some(o) = slot.take {
            let stop = (sink.outbox.fleet(), f.leg.drop_off.id);
            let Some(o) = take(c, f.mode, std::slice::from_ref(o), f.delivery_load(), stop).await? else {
                return Ok(Err(ChangeOutcome::Full));
            };
            if slot.frees {
                free_delivery(c, &f).await?;
            }
            set_delivery(c, &f, o).await?;
        }
        if let Some(m) = &slot.to_attempt {
            moved(c, sink, &f.leg, m, now)
                .await?
                .map_err(|r| StoreError::Corrupt(format!("reschedule refused: {r}")))?;
        }
        if let Some(o) = slot.take {
            rescheduled(c, sink, &f, &Rescheduled::delivery(&f, o, by, now)).await?;
        }
    }
    if let Some(text) = plan.instruction {
        c.execute_typed(
            "UPDATE drop_off_shipments SET instruction = NULLIF($2, '') WHERE id = $1",
            &[(&f.leg.drop_off.id, Type::INT8), (&text, Type::TEXT)],
        )
        .await
        .map_err(map_err)?;
    }
    Ok(Ok(f.leg.drop_off.id))
}

/// The merchant sends a `failed` or `to_attempt` shipment back. The delivery slot's place is
/// given back only once the return is booked: a return with no room writes nothing.
async fn return_to_sender(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    target: &ChangeTarget,
    now: Timestamp,
) -> Result<Result<i64, ChangeOutcome>, StoreError> {
    let Some(f) = facts_of(c, target).await? else { return Ok(Err(ChangeOutcome::NotFound)) };
    let status = f.leg.drop_off.status;
    if !attempts::returnable(status) {
        return Ok(Err(ChangeOutcome::Refused(f.refusal(Status::ReturnScheduled))));
    }
    let offers = sink.outbox.attempts().map(|rules| f.return_offers(rules, now)).unwrap_or_default();
    if !book_return_into(c, sink, &f, &offers, Actor::Client, now).await? {
        return Ok(Err(ChangeOutcome::NoRoom));
    }
    if attempts::frees_current(status) {
        free_delivery(c, &f).await?;
    }
    Ok(Ok(f.leg.drop_off.id))
}

/// The merchant cancels a `failed` or `return_scheduled` shipment (a return's place given back).
async fn cancel(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    target: &ChangeTarget,
    now: Timestamp,
) -> Result<Result<i64, ChangeOutcome>, StoreError> {
    let Some(f) = facts_of(c, target).await? else { return Ok(Err(ChangeOutcome::NotFound)) };
    if !attempts::cancellable(f.leg.drop_off.status) {
        return Ok(Err(ChangeOutcome::Refused(f.refusal(Status::Cancelled))));
    }
    free_return(c, &f).await?;
    if f.ret.is_some() {
        set_return(c, &f, None, f.return_attempts).await?;
    }
    match moved(c, sink, &f.leg, &merchant_cancel(), now).await? {
        Ok(()) => Ok(Ok(f.leg.drop_off.id)),
        Err(r) => Ok(Err(ChangeOutcome::Refused(r))),
    }
}

/// A board line from (unique id, status, reason, failed at, next date, next slot name).
fn line(r: &Row) -> Result<FailureLine, StoreError> {
    Ok(FailureLine {
        unique_id: column(r, 0)?,
        status: status_column(r, 1)?,
        reason: column(r, 2)?,
        failed_at: column(r, 3)?,
        next_date: column(r, 4)?,
        next_slot: column(r, 5)?,
    })
}

/// The board's pending shipments of one status, booked from a date on, with their latest
/// failure: re-attempts by their delivery's date and slot, returns by their return's.
fn pending_sql(date: &str, slot: &str) -> String {
    format!(
        "SELECT d.unique_id, d.status, e.reason, e.at, d.{date}, d.{slot}
         FROM drop_off_shipments d
         LEFT JOIN LATERAL (
            SELECT e.reason, e.at FROM shipment_events e
            WHERE e.shipment_kind = $1 AND e.shipment_id = d.id AND e.status = $2
            ORDER BY e.seq DESC LIMIT 1
         ) e ON true
         WHERE d.status = $3 AND d.warehouse = $4 AND d.mode = $5 AND d.{date} >= $6
         ORDER BY d.{date}, d.id"
    )
}

static REATTEMPTS: LazyLock<String> = LazyLock::new(|| pending_sql("scheduled_date", "slot_name"));
static RETURNS: LazyLock<String> = LazyLock::new(|| pending_sql("return_date", "return_slot_name"));

/// The board's failures of a depot (live shipments only): its three reads sent together.
async fn failures(
    c: &impl Sql,
    depot: &str,
    from: Timestamp,
    to: Timestamp,
    date: jiff::civil::Date,
) -> Result<Failures, StoreError> {
    let (kind, failed_status, live) = (ShipmentKind::DropOff.as_str(), Status::Failed.as_str(), Mode::Live.as_str());
    let date = date.to_string();
    let failed = async {
        c.query_typed(
            "SELECT d.unique_id, d.status, e.reason, e.at,
                CASE WHEN d.return_date IS NOT NULL THEN d.return_date ELSE d.scheduled_date END,
                CASE WHEN d.return_date IS NOT NULL THEN d.return_slot_name ELSE d.slot_name END
             FROM shipment_events e JOIN drop_off_shipments d ON d.id = e.shipment_id
             WHERE e.shipment_kind = $1 AND e.status = $2 AND e.at >= $3 AND e.at < $4
               AND d.warehouse = $5 AND d.mode = $6
             ORDER BY e.at, e.id",
            &[
                (&kind, Type::TEXT),
                (&failed_status, Type::TEXT),
                (&from, Type::TIMESTAMPTZ),
                (&to, Type::TIMESTAMPTZ),
                (&depot, Type::TEXT),
                (&live, Type::TEXT),
            ],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(line)
        .collect::<Result<Vec<_>, StoreError>>()
    };
    let pending = |sql: &'static LazyLock<String>, status: Status| {
        let date = &date;
        async move {
            c.query_typed(
                sql,
                &[
                    (&kind, Type::TEXT),
                    (&failed_status, Type::TEXT),
                    (&status.as_str(), Type::TEXT),
                    (&depot, Type::TEXT),
                    (&live, Type::TEXT),
                    (date, Type::TEXT),
                ],
            )
            .await
            .map_err(map_err)?
            .iter()
            .map(line)
            .collect::<Result<Vec<_>, StoreError>>()
        }
    };
    let (failed, reattempts, returns) =
        tokio::try_join!(failed, pending(&REATTEMPTS, Status::ToAttempt), pending(&RETURNS, Status::ReturnScheduled))?;
    Ok(Failures { failed, reattempts, returns })
}

/// The drop-off row id of `unique_id` (live), locked with its pick-up leg, if any.
async fn live_id(c: &impl Sql, unique_id: &str) -> Result<Option<i64>, StoreError> {
    let row = c
        .query_typed_opt(
            "SELECT d.id FROM drop_off_shipments d JOIN pick_up_shipments p ON p.id = d.pick_up_shipment_id
             WHERE d.unique_id = $1 AND d.mode = $2 FOR UPDATE OF p",
            &[(&unique_id, Type::TEXT), (&Mode::Live.as_str(), Type::TEXT)],
        )
        .await
        .map_err(map_err)?;
    row.map(|r| column(&r, 0)).transpose()
}

/// Issue 45's "no sold shipment left behind", in one transaction (as on `SQLite`): the day's
/// tentative plan read anew with the fleet as it is (the day's row held), and each drop-off
/// that fits it no longer, or that `unplace` names, rebooked or held by `[dispatch] unplaced`.
async fn replan_day(
    c: &impl Sql,
    sink: &mut Sink<'_>,
    depot: &str,
    date: jiff::civil::Date,
    unplace: &[String],
    now: Timestamp,
) -> Result<Replanned, StoreError> {
    let mut out: Vec<(i64, String)> = Vec::new();
    for u in unplace {
        if let Some(id) = live_id(c, u).await? {
            out.push((id, crate::attempts::UNASSIGNED.into()));
        }
    }
    let fleet = sink.outbox.fleet();
    if let Some(fleet) = fleet.filter(|f| f.rules.fleet_depot(depot).is_some()) {
        let exclude: Vec<i64> = out.iter().map(|(id, _)| *id).collect();
        for (v, bound) in crate::tentative::postgres::replan(c, fleet, depot, date, &exclude).await? {
            out.push((v.id, bound.describe().into()));
        }
    }
    let Some(rules) = sink.outbox.attempts().cloned() else { return Ok(Replanned::default()) };
    let policy = crate::attempts::unplaced_policy(fleet);
    let mut done = Replanned::default();
    let mut notify = crate::notifications::postgres::Planned::default();
    for (id, why) in out {
        let f = facts_by_id(c, id).await?;
        let Some(offers) = f.unplaced_offers(date, policy, &rules, now)? else { continue };
        let rebooked = match take(c, f.mode, &offers, f.delivery_load(), (fleet, id)).await? {
            Some(o) => {
                free_delivery(c, &f).await?;
                set_delivery(c, &f, o).await?;
                set_unplaced(c, id, None).await?;
                let change = Rescheduled::unplaced(&f, o, &why, now);
                rescheduled(c, sink, &f, &change).await?;
                notify.add_rescheduled_of(c, sink.outbox.channels(), id).await?;
                done.rebooked.push((f.unique_id.clone(), change.to));
                true
            }
            None => false,
        };
        if !rebooked {
            set_unplaced(c, id, Some((now, &why))).await?;
            done.held.push((f.unique_id.clone(), why));
        }
    }
    sink.notified += notify.write(c, now).await?;
    Ok(done)
}

/// Marks a drop-off as waiting for the dispatcher (when, and why), or clears it.
async fn set_unplaced(c: &impl Sql, id: i64, held: Option<(Timestamp, &str)>) -> Result<(), StoreError> {
    let at = held.map(|(at, _)| at.to_string());
    let why = held.map(|(_, why)| why.to_string());
    c.execute_typed(
        "UPDATE drop_off_shipments SET unplaced_at = $2, unplaced_reason = $3 WHERE id = $1",
        &[(&id, Type::INT8), (&at, Type::TEXT), (&why, Type::TEXT)],
    )
    .await
    .map_err(map_err)?;
    Ok(())
}
