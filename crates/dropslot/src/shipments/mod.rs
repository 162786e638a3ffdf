//! Shipments (CONTRACT §4): their statuses, the transition table as data, who changed what
//! (events), and the rules that decide a change — pure, with no SQL and no HTTP.
//!
//! A change follows one pattern on every backend (docs/architecture.md, "Where the rules
//! live"): inside one transaction the backend loads a *snapshot* of the rows the rule needs,
//! a function here turns it into a *plan*, and the backend persists the plan. The `SQLite`
//! writer runs the three steps in one job (its single writer serialises them); `PostgreSQL` will
//! run them in one transaction that loads with `SELECT … FOR UPDATE`. No rule is applied to
//! data read outside the transaction that writes its outcome.

use serde::Serialize;

use crate::ids::{DropOffShipmentId, ParcelId, PickUpShipmentId, ShipmentOrderId};
use crate::money::{Money, TaxRate};
use crate::quote::{Totals, pricing};

/// A shipment's status. Drop-off shipments use all of them; pick-up shipments use
/// `scheduled → to_pick_up → picked_up` and `deleted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
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
    (Status::ToAttempt, &[Status::InTransit]),
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
#[serde(rename_all = "snake_case")]
pub enum Actor {
    /// The merchant, through the client API (order creation, deletion).
    Client,
    /// A sandbox scenario.
    Sandbox,
    /// Operations staff, through the ops API.
    Ops,
    /// The service itself (a pick-up deleted with its last drop-off).
    System,
}

impl Actor {
    pub fn as_str(self) -> &'static str {
        match self {
            Actor::Client => "client",
            Actor::Sandbox => "sandbox",
            Actor::Ops => "ops",
            Actor::System => "system",
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
    pub reason: Option<&'static str>,
}

/// The first event of every new shipment.
pub fn created(kind: ShipmentKind, shipment: i64) -> NewEvent {
    NewEvent { kind, shipment, from: None, to: Status::Scheduled, actor: Actor::Client, reason: None }
}

// ---- deleting a parcel by its custom code (CONTRACT §4) -------------------------------

/// What deleting a parcel needs to know, loaded in the deleting transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletionSnapshot {
    pub parcel: ParcelId,
    pub drop_off: DropOffShipmentId,
    pub drop_off_status: Status,
    /// Live parcels of the drop-off shipment, this one included.
    pub drop_off_live_parcels: usize,
    pub pick_up: PickUpShipmentId,
    pub pick_up_status: Status,
    /// Drop-off shipments of the pick-up that are not deleted, this one included.
    pub pick_up_live_drop_offs: usize,
    /// The shipment orders of the whole order with their live parcels' prices, the deleted
    /// parcel's shipment order without it.
    pub order: Vec<ChargeLine>,
    /// The terms the order was created with.
    pub min_price: Money,
    pub tax: TaxRate,
}

/// A shipment order and its live parcels' prices after the deletion.
#[derive(Debug, Clone, PartialEq)]
pub struct ChargeLine {
    pub shipment_order: ShipmentOrderId,
    pub live_parcel_prices: Vec<Money>,
}

/// What to write.
#[derive(Debug, Clone, PartialEq)]
pub enum DeletionPlan {
    /// The shipment is past pick-up: nothing changes (409 naming the status).
    TooLate(Status),
    Delete {
        parcel: ParcelId,
        /// The new charges of every shipment order of the order.
        charges: Vec<(ShipmentOrderId, Totals)>,
        /// Status changes, in order: the drop-off with its last parcel, then the pick-up
        /// with its last drop-off. Each is also the event to record.
        changes: Vec<NewEvent>,
    },
}

impl DeletionPlan {
    pub fn shipment_deleted(&self) -> bool {
        matches!(self, DeletionPlan::Delete { changes, .. } if !changes.is_empty())
    }
}

/// The deletion rule: allowed while the drop-off shipment awaits pick-up; the order is
/// re-priced on its own terms (`pricing::allocate`: the minimum once per order); the last
/// parcel deletes its drop-off shipment, and the last drop-off its pick-up shipment.
pub fn plan_deletion(s: &DeletionSnapshot) -> DeletionPlan {
    if !s.drop_off_status.allows_parcel_deletion() {
        return DeletionPlan::TooLate(s.drop_off_status);
    }
    let actuals: Vec<Option<Money>> = s
        .order
        .iter()
        .map(|line| (!line.live_parcel_prices.is_empty()).then(|| line.live_parcel_prices.iter().copied().sum()))
        .collect();
    let charges =
        s.order.iter().map(|l| l.shipment_order).zip(pricing::allocate(&actuals, s.min_price, s.tax)).collect();
    let mut changes = Vec::new();
    if s.drop_off_live_parcels <= 1 {
        changes.push(NewEvent {
            kind: ShipmentKind::DropOff,
            shipment: s.drop_off.0,
            from: Some(s.drop_off_status),
            to: Status::Deleted,
            actor: Actor::Client,
            reason: Some("the client deleted its last parcel"),
        });
        if s.pick_up_live_drop_offs <= 1 && s.pick_up_status != Status::Deleted {
            changes.push(NewEvent {
                kind: ShipmentKind::PickUp,
                shipment: s.pick_up.0,
                from: Some(s.pick_up_status),
                to: Status::Deleted,
                actor: Actor::System,
                reason: Some("all its drop-offs were deleted"),
            });
        }
    }
    DeletionPlan::Delete { parcel: s.parcel, charges, changes }
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

    fn snapshot(status: Status, parcels: usize, drop_offs: usize) -> DeletionSnapshot {
        DeletionSnapshot {
            parcel: ParcelId(7),
            drop_off: DropOffShipmentId(3),
            drop_off_status: status,
            drop_off_live_parcels: parcels,
            pick_up: PickUpShipmentId(2),
            pick_up_status: Status::Scheduled,
            pick_up_live_drop_offs: drop_offs,
            order: vec![ChargeLine {
                shipment_order: ShipmentOrderId(1),
                live_parcel_prices: vec![Money(900); parcels - 1],
            }],
            min_price: Money(4500),
            tax: TaxRate(1300),
        }
    }

    #[test]
    fn deletion_follows_the_contract() {
        assert_eq!(plan_deletion(&snapshot(Status::PickedUp, 2, 1)), DeletionPlan::TooLate(Status::PickedUp));
        let DeletionPlan::Delete { charges, changes, .. } = plan_deletion(&snapshot(Status::ToPickUp, 3, 1)) else {
            panic!()
        };
        assert!(changes.is_empty(), "not the last parcel");
        assert_eq!(charges[0].1.total_price, Money(4500), "re-priced with the minimum");
        let DeletionPlan::Delete { charges, changes, .. } = plan_deletion(&snapshot(Status::Scheduled, 1, 1)) else {
            panic!()
        };
        assert_eq!(charges[0].1.price_with_tax, Money::ZERO, "a deleted order is not charged");
        let to: Vec<_> = changes.iter().map(|c| (c.kind, c.to, c.actor)).collect();
        assert_eq!(
            to,
            [
                (ShipmentKind::DropOff, Status::Deleted, Actor::Client),
                (ShipmentKind::PickUp, Status::Deleted, Actor::System)
            ]
        );
        let DeletionPlan::Delete { changes, .. } = plan_deletion(&snapshot(Status::Scheduled, 1, 2)) else { panic!() };
        assert_eq!(changes.len(), 1, "the pick-up keeps its other drop-off");
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
