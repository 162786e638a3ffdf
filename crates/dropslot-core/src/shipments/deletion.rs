//! Deleting a parcel by its custom code (CONTRACT §4): allowed until pick-up, re-prices the
//! order, and deletes the shipments it empties.

use super::{Actor, Current, Move, NewEvent, ShipmentKind, Status, step};
use crate::ids::{DropOffShipmentId, ParcelId, PickUpShipmentId, ShipmentOrderId};
use crate::money::{Money, TaxRate};
use crate::quote::{Totals, pricing};

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

impl ChargeLine {
    /// The lines of an order from its rows in shipment-order order: one (shipment order,
    /// live parcel price) pair per parcel, with `None` for a shipment order without one.
    pub fn group(rows: impl IntoIterator<Item = (ShipmentOrderId, Option<Money>)>) -> Vec<ChargeLine> {
        let mut lines: Vec<ChargeLine> = Vec::new();
        for (shipment_order, price) in rows {
            if lines.last().is_none_or(|l| l.shipment_order != shipment_order) {
                lines.push(ChargeLine { shipment_order, live_parcel_prices: Vec::new() });
            }
            if let (Some(price), Some(line)) = (price, lines.last_mut()) {
                line.live_parcel_prices.push(price);
            }
        }
        lines
    }
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
        // The status changes go through the one move planner, like every other change.
        let deletion =
            |actor, reason: &str| Move { reason: Some(reason.to_string()), ..Move::to(Status::Deleted, actor) };
        let mut drop_off = Current::new(ShipmentKind::DropOff, s.drop_off.0, s.drop_off_status);
        match step(&mut drop_off, &deletion(Actor::Client, "the client deleted its last parcel")) {
            Ok(event) => changes.push(event),
            Err(_) => return DeletionPlan::TooLate(s.drop_off_status),
        }
        // The last drop-off takes its pick-up leg with it, unless the table forbids that
        // (a leg already picked up for another drop-off stays as it is).
        let mut pick_up = Current::new(ShipmentKind::PickUp, s.pick_up.0, s.pick_up_status);
        if s.pick_up_live_drop_offs <= 1 {
            if let Ok(event) = step(&mut pick_up, &deletion(Actor::System, "all its drop-offs were deleted")) {
                changes.push(event);
            }
        }
    }
    DeletionPlan::Delete { parcel: s.parcel, charges, changes }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let picked = DeletionSnapshot { pick_up_status: Status::PickedUp, ..snapshot(Status::Scheduled, 1, 1) };
        let DeletionPlan::Delete { changes, .. } = plan_deletion(&picked) else { panic!() };
        assert_eq!(changes.len(), 1, "a leg picked up for another drop-off is never deleted");
    }
}
