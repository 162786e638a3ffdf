//! attempts: what follows a failed delivery (CONTRACT §15) — the clients' policies, the
//! follow-up decided in the failure's own transaction (`after_failure`, called by the
//! lifecycle's moves), and the changes the merchant and the recipient make. The rules are the
//! core's (`dropslot_core::attempts`); the backends load, take a place in a slot (§10), persist.

use crate::{Scope, StoreResult, StoredShipment};
use async_trait::async_trait;
use dropslot_core::attempts::{Changer, Offer, Policy};
use dropslot_core::shipments::{Refusal, Status};
use jiff::Timestamp;

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

/// A date and slot, old or new, as the `same.shipment.rescheduled` event shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRef {
    pub date: String,
    pub slot_code: String,
    pub slot_name: String,
    pub start_at: String,
    pub end_at: String,
}

impl SlotRef {
    pub fn of(o: &Offer) -> SlotRef {
        SlotRef {
            date: o.at.date.to_string(),
            slot_code: o.at.slot.clone(),
            slot_name: o.name.clone(),
            start_at: dropslot_core::time::iso(&o.start),
            end_at: dropslot_core::time::iso(&o.end),
        }
    }
}

/// A change of date and slot (CONTRACT §15: `same.shipment.rescheduled`): a delivery's, or a
/// return's (`ret`), by whom, and why when the service made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rescheduled {
    pub from: SlotRef,
    pub to: SlotRef,
    pub by: Changer,
    pub ret: bool,
    pub reason: Option<String>,
    pub at: Timestamp,
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

pub(crate) mod postgres;
pub(crate) mod sqlite;
