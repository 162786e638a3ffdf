//! Shipments (CONTRACT §4): their statuses, the transition table as data, who changed what
//! (events), and the rules that decide a change — pure, with no SQL and no HTTP.
//!
//! Files: this one holds the statuses, the table and the event record; `moves` decides every
//! change along the table (sandbox, ops, pick-up scans); `deletion` decides deletions.
//!
//! A change follows one pattern on every backend (docs/architecture.md, "Where the rules
//! live"): inside one transaction the backend loads a *snapshot* of the rows the rule needs,
//! a function here turns it into a *plan*, and the backend persists the plan. The `SQLite`
//! writer runs the three steps in one job (its single writer serialises them); `PostgreSQL`
//! runs them in one transaction that loads with `SELECT … FOR UPDATE`. No rule is applied to
//! data read outside the transaction that writes its outcome.

mod deletion;
mod moves;
mod scenario;

use serde::Serialize;

pub use deletion::*;
pub use moves::*;
pub use scenario::{ALREADY_MOVED, SANDBOX_FAILURE, SANDBOX_RECEIVER, Scenario};

/// A shipment's status. Drop-off shipments use all of them; pick-up shipments use
/// `scheduled → to_pick_up → picked_up` and `deleted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Scheduled,
    ToPickUp,
    PickedUp,
    Processing,
    InTransit,
    Delivered,
    Failed,
    ToAttempt,
    ReturnScheduled,
    Returned,
    Cancelled,
    Deleted,
}

impl Status {
    pub const ALL: [Status; 12] = [
        Status::Scheduled,
        Status::ToPickUp,
        Status::PickedUp,
        Status::Processing,
        Status::InTransit,
        Status::Delivered,
        Status::Failed,
        Status::ToAttempt,
        Status::ReturnScheduled,
        Status::Returned,
        Status::Cancelled,
        Status::Deleted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Scheduled => "scheduled",
            Status::ToPickUp => "to_pick_up",
            Status::PickedUp => "picked_up",
            Status::Processing => "processing",
            Status::InTransit => "in_transit",
            Status::Delivered => "delivered",
            Status::Failed => "failed",
            Status::ToAttempt => "to_attempt",
            Status::ReturnScheduled => "return_scheduled",
            Status::Returned => "returned",
            Status::Cancelled => "cancelled",
            Status::Deleted => "deleted",
        }
    }

    /// A stored or requested status; `None` for anything else (never a default).
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Final statuses never change again.
    pub fn is_final(self) -> bool {
        matches!(self, Status::Delivered | Status::Returned | Status::Cancelled | Status::Deleted)
    }

    /// Parcels can be deleted (and so the shipment with its last parcel) until pick-up.
    pub fn allows_parcel_deletion(self) -> bool {
        matches!(self, Status::Scheduled | Status::ToPickUp)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The two kinds of shipment an order has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShipmentKind {
    PickUp,
    DropOff,
}

impl ShipmentKind {
    pub const ALL: [ShipmentKind; 2] = [ShipmentKind::PickUp, ShipmentKind::DropOff];

    pub fn parse(s: &str) -> Option<ShipmentKind> {
        ShipmentKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ShipmentKind::PickUp => "pick_up",
            ShipmentKind::DropOff => "drop_off",
        }
    }
}

/// CONTRACT §4, drop-off shipments: from → the statuses it may move to. Anything else is a
/// conflict. (`failed → to_attempt` also needs attempts left: see [`allowed`].)
pub const DROP_OFF_TRANSITIONS: &[(Status, &[Status])] = &[
    (Status::Scheduled, &[Status::ToPickUp, Status::Deleted]),
    (Status::ToPickUp, &[Status::PickedUp, Status::Deleted]),
    (Status::PickedUp, &[Status::Processing]),
    (Status::Processing, &[Status::InTransit]),
    (Status::InTransit, &[Status::Delivered, Status::Failed]),
    (Status::Failed, &[Status::ToAttempt, Status::ReturnScheduled, Status::Cancelled]),
    // §15: the merchant may send a parcel back instead of the booked re-attempt.
    (Status::ToAttempt, &[Status::InTransit, Status::ReturnScheduled]),
    (Status::ReturnScheduled, &[Status::Returned, Status::Cancelled]),
];

/// CONTRACT §4, the pick-up leg: `scheduled → to_pick_up → picked_up`; deleted when all its
/// drop-offs are.
pub const PICK_UP_TRANSITIONS: &[(Status, &[Status])] = &[
    (Status::Scheduled, &[Status::ToPickUp, Status::Deleted]),
    (Status::ToPickUp, &[Status::PickedUp, Status::Deleted]),
];

/// The statuses a shipment of `kind` may move to from `from`.
pub fn next(kind: ShipmentKind, from: Status) -> &'static [Status] {
    let table = match kind {
        ShipmentKind::PickUp => PICK_UP_TRANSITIONS,
        ShipmentKind::DropOff => DROP_OFF_TRANSITIONS,
    };
    table.iter().find(|(f, _)| *f == from).map_or(&[], |(_, to)| *to)
}

/// Whether the table allows `from → to`; `failed → to_attempt` only while `attempts` is
/// below `max_attempts`.
pub fn allowed(kind: ShipmentKind, from: Status, to: Status, attempts: u32, max_attempts: u32) -> bool {
    next(kind, from).contains(&to) && !(from == Status::Failed && to == Status::ToAttempt && attempts >= max_attempts)
}

/// Who made a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Actor {
    /// The merchant, through the client API (order creation, deletion).
    Client,
    /// A sandbox scenario.
    Sandbox,
    /// Operations staff, through the ops API.
    Ops,
    /// The service itself (a pick-up deleted with its last drop-off, what follows a failure).
    System,
    /// The recipient, on the change page (CONTRACT §15).
    Recipient,
}

impl Actor {
    pub const ALL: [Actor; 5] = [Actor::Client, Actor::Sandbox, Actor::Ops, Actor::System, Actor::Recipient];

    pub fn parse(s: &str) -> Option<Actor> {
        Actor::ALL.into_iter().find(|a| a.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Actor::Client => "client",
            Actor::Sandbox => "sandbox",
            Actor::Ops => "ops",
            Actor::System => "system",
            Actor::Recipient => "recipient",
        }
    }
}

/// One status change, recorded in the same transaction as the change itself.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub kind: ShipmentKind,
    /// The row id of the pick-up or drop-off shipment.
    pub shipment: i64,
    pub from: Option<Status>,
    pub to: Status,
    pub actor: Actor,
    pub reason: Option<String>,
    /// The delivery attempt the event concerns: the one under way (`in_transit`), just made
    /// (`delivered`, `failed`) or next (`to_attempt`).
    pub attempt: Option<u32>,
    /// The shipment's delivery attempts after the change (its `attempts` column).
    pub attempts: u32,
    /// Proof of delivery (`delivered` only).
    pub proof: Vec<Proof>,
}

/// The first event of every new shipment.
pub fn created(kind: ShipmentKind, shipment: i64) -> NewEvent {
    NewEvent {
        kind,
        shipment,
        from: None,
        to: Status::Scheduled,
        actor: Actor::Client,
        reason: None,
        attempt: None,
        attempts: 0,
        proof: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn statuses_round_trip_and_finals_have_no_way_out() {
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(s));
            if s.is_final() {
                assert!(next(ShipmentKind::DropOff, s).is_empty(), "{s} is final");
            }
        }
        assert_eq!(Status::parse("Scheduled"), None);
        assert!(allowed(ShipmentKind::DropOff, Status::Failed, Status::ToAttempt, 2, 3));
        assert!(!allowed(ShipmentKind::DropOff, Status::Failed, Status::ToAttempt, 3, 3));
        assert!(!allowed(ShipmentKind::PickUp, Status::PickedUp, Status::Processing, 0, 3));
    }

    proptest! {
        /// Whatever sequence of transitions is requested, following the table never leaves
        /// it, and a final status never changes.
        #[test]
        fn requested_transitions_never_leave_the_table(requests in prop::collection::vec(0usize..12, 0..40), max in 1u32..5) {
            let mut status = Status::Scheduled;
            let mut attempts = 0;
            for r in requests {
                let to = Status::ALL[r];
                if allowed(ShipmentKind::DropOff, status, to, attempts, max) {
                    prop_assert!(!status.is_final());
                    prop_assert!(next(ShipmentKind::DropOff, status).contains(&to));
                    if status == Status::InTransit {
                        attempts += 1;
                    }
                    status = to;
                }
                prop_assert!(attempts <= max, "at most {max} attempts, got {attempts}");
            }
        }
    }
}
