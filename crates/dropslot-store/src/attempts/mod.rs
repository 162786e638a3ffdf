//! attempts: what follows a failed delivery (CONTRACT §15) — the clients' policies, the
//! follow-up decided in the failure's own transaction (`after_failure`, called by the
//! lifecycle's moves), and the changes the merchant and the recipient make. The rules are the
//! core's (`dropslot_core::attempts`); the backends load, take a place in a slot (§10), persist.

use crate::{Mode, Rescheduled, Scope, SlotRef, StoreError, StoreResult, StoredShipment};
use async_trait::async_trait;
use dropslot_core::attempts::{self, AfterFailure, Changer, Offer, Policy};
use dropslot_core::quote::capacity::{Load, Override, SlotKind};
use dropslot_core::shipments::{self, Actor, Leg, Move, NewEvent, Refusal, Status};
use jiff::Timestamp;

/// What a day's re-plan did (issue 45): the drop-offs rebooked, each with its new slot, and
/// those left waiting for the dispatcher, each with why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replanned {
    pub rebooked: Vec<(String, SlotRef)>,
    pub held: Vec<(String, String)>,
}

/// Why a drop-off a published plan left unassigned is rebooked or held.
pub(crate) const UNASSIGNED: &str = "no route of the published plan takes it";

impl Facts {
    /// The slots a re-plan of `date` may move this drop-off to, when it fits its day no
    /// longer: `None` when it is no longer one of that day's to deliver (moved, final, failed:
    /// nothing to do); none under `[dispatch] unplaced = "hold"` (it is held); else its zone's
    /// bookable slots after its own, in order (the first with room takes it; none with room,
    /// it is held).
    pub(crate) fn unplaced_offers(
        &self,
        date: jiff::civil::Date,
        policy: dropslot_core::config::Unplaced,
        rules: &attempts::Rules,
        now: Timestamp,
    ) -> StoreResult<Option<Vec<Offer>>> {
        if self.slot.date != date.to_string()
            || dropslot_core::dispatch::left_out_of_deliveries(self.leg.drop_off.status)
        {
            return Ok(None);
        }
        if policy == dropslot_core::config::Unplaced::Hold {
            return Ok(Some(Vec::new()));
        }
        let held: Timestamp = self.slot.start_at.parse().map_err(|e| {
            StoreError::Corrupt(format!("shipment {}: slot start {:?}: {e}", self.unique_id, self.slot.start_at))
        })?;
        Ok(Some(attempts::later_offers(&rules.area, &self.zone, held, jiff::civil::Date::MIN, now)))
    }
}

/// What a re-plan does with what fits its day no longer: `[dispatch] unplaced` (rebooked when
/// no depot books on its fleet: a published plan's unassigned shipment of a limits depot).
pub(crate) fn unplaced_policy(fleet: Option<&crate::Fleet>) -> dropslot_core::config::Unplaced {
    fleet.map_or(dropslot_core::config::Unplaced::Rebook, |f| f.rules.unplaced)
}

/// Whose shipment a change names: a client's (by its `unique_id`, in the token's mode), or the
/// recipient's (by tracking code, any mode: the service checked the change token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeTarget {
    Tenant(Scope, String),
    Code(String),
}

/// A change of a delivery: a new slot, an instruction (`Some("")` clears it), or both, made only
/// if the shipment is still in the slot the caller saw (`expect`: date and slot code).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeliveryChange {
    pub slot: Option<Offer>,
    pub instruction: Option<String>,
    pub expect: Option<(String, String)>,
}

/// How a change went; nothing is written unless it is `Changed`.
#[derive(Debug, Clone)]
pub enum ChangeOutcome {
    NotFound,
    /// The shipment's status no longer allows it (named).
    Closed(Status),
    /// The table refuses the move the change needs.
    Refused(Refusal),
    /// The slot asked for has no room left.
    Full,
    /// No slot with room within the horizon (a return's pick-up slots).
    NoRoom,
    /// Changed meanwhile by someone else: it is now in this (date, slot code).
    Stale(String, String),
    Changed(Box<StoredShipment>),
}

/// One line of the board's failures (CONTRACT §15): a drop-off shipment, its status now, the
/// reason of its latest failure and when, and the date and slot it is booked into next (a
/// delivery's, or a return's pick-up slot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureLine {
    pub unique_id: String,
    pub status: Status,
    pub reason: Option<String>,
    pub failed_at: Option<Timestamp>,
    pub next_date: Option<String>,
    pub next_slot: Option<String>,
}

/// The board's view of a depot's failures: the day's failed attempts, the re-attempts booked
/// (any date from the day on) and the returns due.
#[derive(Debug, Clone, Default)]
pub struct Failures {
    pub failed: Vec<FailureLine>,
    pub reattempts: Vec<FailureLine>,
    pub returns: Vec<FailureLine>,
}

#[async_trait]
pub trait AttemptStore: Send + Sync + 'static {
    /// The client's policy in a mode, if it set one (else the `[attempts]` defaults hold).
    async fn attempt_policy(&self, scope: Scope) -> StoreResult<Option<Policy>>;
    /// Issue 45: re-plans fleet depot `depot`'s tentative plan of `date` with the fleet as it is
    /// now, and takes `unplace` (live drop-off unique ids a published plan left unassigned) out
    /// of it. Each drop-off that fits no longer is rebooked into the next slot with room
    /// (`[dispatch] unplaced = "rebook"`: `same.shipment.rescheduled`, changed by `system`, and a
    /// `rescheduled` message) or held for the dispatcher; one transaction.
    async fn replan_day(
        &self,
        depot: &str,
        date: jiff::civil::Date,
        unplace: Vec<String>,
        now: Timestamp,
    ) -> StoreResult<Replanned>;
    /// Sets (replaces) the client's policy in a mode.
    async fn set_attempt_policy(&self, scope: Scope, policy: Policy, now: Timestamp) -> StoreResult<()>;
    /// A new slot and/or instruction, in one transaction: the new slot takes a place (§10; none
    /// given back twice), a `failed` shipment goes `to_attempt`, and `same.shipment.rescheduled`
    /// is queued.
    async fn change_delivery(
        &self,
        target: ChangeTarget,
        change: DeliveryChange,
        by: Changer,
        now: Timestamp,
    ) -> StoreResult<ChangeOutcome>;
    /// The merchant sends a `failed` or `to_attempt` shipment back: `return_scheduled`, booked
    /// into the first pick-up slot with room of the order's city (`NoRoom` when none has).
    async fn return_to_sender(&self, scope: Scope, unique_id: &str, now: Timestamp) -> StoreResult<ChangeOutcome>;
    /// The merchant cancels a `failed` or `return_scheduled` shipment.
    async fn cancel_shipment(&self, scope: Scope, unique_id: &str, now: Timestamp) -> StoreResult<ChangeOutcome>;
    /// A depot's live failures: failed attempts in `from..to`, re-attempts booked from `date`
    /// on, returns due.
    async fn failures(
        &self,
        depot: &str,
        from: Timestamp,
        to: Timestamp,
        date: jiff::civil::Date,
    ) -> StoreResult<Failures>;
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: AttemptStore> AttemptStore for crate::trace::Traced<S> {
    async fn replan_day(
        &self,
        depot: &str,
        date: jiff::civil::Date,
        unplace: Vec<String>,
        now: Timestamp,
    ) -> StoreResult<Replanned> {
        self.trace.hit("AttemptStore::replan_day");
        self.inner.replan_day(depot, date, unplace, now).await
    }

    async fn attempt_policy(&self, scope: Scope) -> StoreResult<Option<Policy>> {
        self.trace.hit("AttemptStore::attempt_policy");
        self.inner.attempt_policy(scope).await
    }

    async fn set_attempt_policy(&self, scope: Scope, policy: Policy, now: Timestamp) -> StoreResult<()> {
        self.trace.hit("AttemptStore::set_attempt_policy");
        self.inner.set_attempt_policy(scope, policy, now).await
    }

    async fn change_delivery(
        &self,
        target: ChangeTarget,
        change: DeliveryChange,
        by: Changer,
        now: Timestamp,
    ) -> StoreResult<ChangeOutcome> {
        self.trace.hit("AttemptStore::change_delivery");
        self.inner.change_delivery(target, change, by, now).await
    }

    async fn return_to_sender(&self, scope: Scope, unique_id: &str, now: Timestamp) -> StoreResult<ChangeOutcome> {
        self.trace.hit("AttemptStore::return_to_sender");
        self.inner.return_to_sender(scope, unique_id, now).await
    }

    async fn cancel_shipment(&self, scope: Scope, unique_id: &str, now: Timestamp) -> StoreResult<ChangeOutcome> {
        self.trace.hit("AttemptStore::cancel_shipment");
        self.inner.cancel_shipment(scope, unique_id, now).await
    }

    async fn failures(
        &self,
        depot: &str,
        from: Timestamp,
        to: Timestamp,
        date: jiff::civil::Date,
    ) -> StoreResult<Failures> {
        self.trace.hit("AttemptStore::failures");
        self.inner.failures(depot, from, to, date).await
    }
}

/// The pick-up city of a return: the city whose pick-up slot the order was picked up in (a
/// pick-up slot's code names it in the whole area).
pub(crate) fn pick_up_city<'a>(area: &'a dropslot_core::config::ServiceArea, slot: &str) -> Option<&'a str> {
    area.cities().iter().find(|c| c.pick_up_slots.iter().any(|s| s.code == slot)).map(|c| c.code.as_str())
}

// What both backends share: the facts a change is decided on, and the pure steps between
// their loads and writes (each backend loads, takes its places and persists in its own way).

/// A drop-off shipment as a change needs it, loaded in the changing unit of work (on
/// `PostgreSQL` with its pick-up leg and its row locked).
pub(crate) struct Facts {
    pub leg: Leg,
    pub unique_id: String,
    pub client: i64,
    pub mode: Mode,
    pub zone: String,
    pub slot: SlotRef,
    pub pick_up_slot: String,
    pub parcels: u32,
    pub return_attempts: u32,
    pub ret: Option<SlotRef>,
}

impl Facts {
    pub(crate) fn scope(&self) -> Scope {
        Scope { client: dropslot_core::ids::ClientId(self.client), mode: self.mode }
    }

    /// What the shipment takes in a delivery slot.
    pub(crate) fn delivery_load(&self) -> Load {
        attempts::want(SlotKind::DropOff, self.parcels)
    }

    /// The table's refusal of a move of the drop-off to `to` from its status.
    pub(crate) fn refusal(&self, to: Status) -> Refusal {
        Refusal::NotAllowed { from: self.leg.drop_off.status, to, allowed: self.leg.drop_off.allowed_next() }
    }

    /// A return's slots: the pick-up slots of the city the order was picked up in, in order.
    pub(crate) fn return_offers(&self, rules: &attempts::Rules, now: Timestamp) -> Vec<Offer> {
        pick_up_city(&rules.area, &self.pick_up_slot)
            .map(|city| attempts::return_offers(&rules.area, city, now))
            .unwrap_or_default()
    }

    /// The facts as the failure `failed` (just planned, not yet written) leaves them.
    pub(crate) fn failed(&mut self, failed: &NewEvent) {
        self.leg.drop_off.status = failed.to;
        self.leg.drop_off.attempts = failed.attempts;
    }

    /// The policy a failure follows: the client's; without one, the defaults with the maximum
    /// the shipment was ordered with (`[limits]` or the client's negotiated terms). The
    /// shipment's maximum becomes the policy's: the new one when it changes, to write with
    /// the failure.
    pub(crate) fn follow(&mut self, stored: Option<Policy>, rules: &attempts::Rules) -> (Policy, Option<u32>) {
        let policy = stored.unwrap_or(Policy { max_attempts: self.leg.drop_off.max_attempts, ..rules.default });
        let changed = policy.max_attempts != self.leg.drop_off.max_attempts;
        self.leg.drop_off.max_attempts = policy.max_attempts;
        (policy, changed.then_some(policy.max_attempts))
    }

    /// What a failure leads to by `policy`: the slots to book, in order, and of which kind (a
    /// re-attempt's drop-off slots after the day that failed, or a return's pick-up slots);
    /// `None` when the shipment is held for the merchant.
    pub(crate) fn failure_offers(
        &self,
        policy: &Policy,
        rules: &attempts::Rules,
        now: Timestamp,
    ) -> StoreResult<Option<(Vec<Offer>, SlotKind)>> {
        Ok(match attempts::after_failure(policy, self.leg.drop_off.attempts) {
            attempts::FollowUp::Hold => None,
            attempts::FollowUp::Reattempt => {
                let failed_on = self.slot.date.parse().map_err(|e| {
                    StoreError::Corrupt(format!(
                        "drop-off shipment {}: scheduled date {:?}: {e}",
                        self.leg.drop_off.id, self.slot.date
                    ))
                })?;
                Some((attempts::reattempt_offers(&rules.area, &self.zone, failed_on, now), SlotKind::DropOff))
            }
            attempts::FollowUp::Return => Some((self.return_offers(rules, now), SlotKind::PickUp)),
        })
    }

    /// The follow-up's events once a place is taken in `o` (a slot of `kind`).
    pub(crate) fn follow_events(&self, o: &Offer, kind: SlotKind) -> StoreResult<Vec<NewEvent>> {
        let m = match kind {
            SlotKind::DropOff => reattempt_move(o),
            SlotKind::PickUp => return_move(o, Actor::System),
        };
        shipments::plan_moves(&self.leg, &[m]).map_err(|r| StoreError::Corrupt(format!("follow-up refused: {r}")))
    }

    /// A failed return stop's retry (its return attempts then made, and the slots to book it
    /// again into: none once the policy's are exhausted, which cancels it).
    pub(crate) fn return_retry(
        &self,
        rules: &attempts::Rules,
        policy: &Policy,
        now: Timestamp,
    ) -> StoreResult<(u32, Vec<Offer>)> {
        let made = self.return_attempts + 1;
        if attempts::return_exhausted(policy, made) {
            return Ok((made, Vec::new()));
        }
        let after = match &self.ret {
            None => None,
            Some(r) => Some(r.start_at.parse::<Timestamp>().map_err(|e| {
                StoreError::Corrupt(format!(
                    "drop-off shipment {}: return start {:?}: {e}",
                    self.leg.drop_off.id, r.start_at
                ))
            })?),
        };
        // Not the slot that just failed: the next ones.
        let offers =
            self.return_offers(rules, now).into_iter().filter(|o| after.is_none_or(|t| o.start.timestamp() > t));
        Ok((made, offers.collect()))
    }

    /// How `change` is made, decided before anything is written; why not (the slot seen is no
    /// longer the shipment's, its status closes what the change touches, or the table refuses
    /// a failed shipment's re-attempt).
    pub(crate) fn plan_change<'a>(
        &self,
        change: &'a DeliveryChange,
        by: Changer,
    ) -> Result<ChangePlan<'a>, ChangeOutcome> {
        let status = self.leg.drop_off.status;
        if let Some((date, slot)) = &change.expect {
            if *date != self.slot.date || *slot != self.slot.slot_code {
                return Err(ChangeOutcome::Stale(self.slot.date.clone(), self.slot.slot_code.clone()));
            }
        }
        let closed = (change.slot.is_some() && !attempts::slot_change_open(status))
            || (change.instruction.is_some() && !attempts::instruction_open(status));
        if closed {
            return Err(ChangeOutcome::Closed(status));
        }
        let slot = match &change.slot {
            None => None,
            Some(o) => {
                // A failed shipment goes `to_attempt` (the table decides: attempts must be left).
                let to_attempt = (status == Status::Failed).then(|| rescheduled_move(by));
                if let Some(m) = &to_attempt {
                    shipments::plan_moves(&self.leg, std::slice::from_ref(m)).map_err(ChangeOutcome::Refused)?;
                }
                let booked = o.at.date.to_string() == self.slot.date && o.at.slot == self.slot.slot_code;
                Some(SlotChange { take: (!booked).then_some(o), frees: attempts::frees_current(status), to_attempt })
            }
        };
        Ok(ChangePlan { slot, instruction: change.instruction.as_deref() })
    }
}

/// A change as it is made ([`Facts::plan_change`]).
pub(crate) struct ChangePlan<'a> {
    pub slot: Option<SlotChange<'a>>,
    /// The instruction to store, as given (empty: cleared, stored as none).
    pub instruction: Option<&'a str>,
}

/// A change's new slot.
pub(crate) struct SlotChange<'a> {
    /// The slot to take a place in (none: the shipment is booked there already), and
    /// whether the current slot's place is then given back (its attempt there not made).
    pub take: Option<&'a Offer>,
    pub frees: bool,
    /// A failed shipment's move `to_attempt`.
    pub to_attempt: Option<Move>,
}

impl From<crate::StoredReturn> for SlotRef {
    fn from(r: crate::StoredReturn) -> SlotRef {
        SlotRef { date: r.date, slot_code: r.slot_code, slot_name: r.slot_name, start_at: r.start_at, end_at: r.end_at }
    }
}

impl Rescheduled {
    /// A delivery moved from the shipment's slot into `o` by `by`.
    pub(crate) fn delivery(f: &Facts, o: &Offer, by: Changer, at: Timestamp) -> Rescheduled {
        Rescheduled { from: f.slot.clone(), to: SlotRef::of(o), by, ret: false, reason: None, at }
    }

    /// A delivery the fleet could not route moved into `o` by the service, for `why`.
    pub(crate) fn unplaced(f: &Facts, o: &Offer, why: &str, at: Timestamp) -> Rescheduled {
        Rescheduled {
            from: f.slot.clone(),
            to: SlotRef::of(o),
            by: Changer::System,
            ret: false,
            reason: Some(why.into()),
            at,
        }
    }

    /// A failed return booked again into `o` by the service, for `reason` (the failure's).
    pub(crate) fn return_again(f: &Facts, o: &Offer, reason: Option<String>, at: Timestamp) -> Rescheduled {
        let from = f.ret.clone().unwrap_or_else(|| f.slot.clone());
        Rescheduled { from, to: SlotRef::of(o), by: Changer::System, ret: true, reason, at }
    }
}

/// A stored policy from its columns (max attempts, after failure, max return attempts); an
/// `after_failure` this binary does not know is corrupt, never a default.
pub(crate) fn policy_of(
    client: i64,
    (max_attempts, after, max_return_attempts): (u32, &str, u32),
) -> StoreResult<Policy> {
    let after_failure = AfterFailure::parse(after)
        .ok_or_else(|| StoreError::Corrupt(format!("attempt policy of client {client}: after_failure {after:?}")))?;
    Ok(Policy { max_attempts, after_failure, max_return_attempts })
}

/// Whether a place just taken in `o` fits: `raised` is the slot's counter (stops, parcels)
/// with `want` added, `over` the date's override of the slot, if any. The core's rule decides
/// on what the slot held before (`raised` less `want`).
pub(crate) fn fits(o: &Offer, raised: (i64, i64), over: Option<Override>, want: Load) -> StoreResult<bool> {
    let before = Load {
        stops: crate::capacity::count(raised.0, "stops")?.saturating_sub(want.stops),
        parcels: crate::capacity::count(raised.1, "parcels")?.saturating_sub(want.parcels),
    };
    let limit = over.map_or(o.configured, |ov| ov.over(o.configured));
    Ok(limit.fits(before, want))
}

/// The follow-up's re-attempt, booked into `o`.
pub(crate) fn reattempt_move(o: &Offer) -> Move {
    Move {
        reason: Some(format!("re-attempt booked for {} ({})", o.at.date, o.name)),
        ..Move::to(Status::ToAttempt, Actor::System)
    }
}

/// A return to the sender booked into `o`, by `actor`.
pub(crate) fn return_move(o: &Offer, actor: Actor) -> Move {
    Move {
        reason: Some(format!("return to the sender booked for {} ({})", o.at.date, o.name)),
        ..Move::to(Status::ReturnScheduled, actor)
    }
}

/// A `failed` shipment given a new slot goes `to_attempt`, moved by whoever changed it.
fn rescheduled_move(by: Changer) -> Move {
    let actor = match by {
        Changer::Recipient => Actor::Recipient,
        Changer::Merchant => Actor::Client,
        Changer::System => Actor::System,
    };
    Move { reason: Some("rescheduled".into()), ..Move::to(Status::ToAttempt, actor) }
}

/// A return that failed `made` times, the last for `failed`'s reason, is cancelled.
pub(crate) fn return_cancelled(made: u32, failed: &Move) -> Move {
    Move {
        reason: Some(format!("return failed {made} time(s): {}", failed.reason.as_deref().unwrap_or_default())),
        ..Move::to(Status::Cancelled, failed.actor)
    }
}

/// The merchant's cancellation.
pub(crate) fn merchant_cancel() -> Move {
    Move { reason: Some("cancelled by the merchant".into()), ..Move::to(Status::Cancelled, Actor::Client) }
}

/// Whether a failed move lacks its reason (a failed return stop needs one, as any failure).
pub(crate) fn reason_missing(m: &Move) -> bool {
    m.reason.as_deref().is_none_or(|r| r.trim().is_empty())
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
