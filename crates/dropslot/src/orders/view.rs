//! How a shipment reads back (CONTRACT §8, issue 8 item 5): the order-creation shape plus
//! `status`, `attempts` and the events, with every time in its city's offset.

use jiff::tz::TimeZone;
use serde::Serialize;

use super::wire::ShipmentObject;
use dropslot_core::config::ServiceArea;
use dropslot_core::geo::LocatedBy;
use dropslot_core::shipments::{Actor, Proof, Status};
use dropslot_core::time::{city_zone, local};
use dropslot_store::{StoredEvent, StoredOrder, StoredShipment};

#[derive(Serialize, utoipa::ToSchema)]
pub struct ShipmentView {
    #[serde(flatten)]
    pub shipment: ShipmentObject,
    pub status: Status,
    /// The pick-up leg's status (it follows its drop-offs: docs/api.md).
    pub pick_up_status: Status,
    /// Delivery attempts made, and the most this shipment allows.
    pub attempts: u32,
    pub max_attempts: u32,
    /// How each address got its coordinates (CONTRACT §11).
    pub located_by: LocatedByView,
    /// Oldest first.
    pub events: Vec<EventView>,
    /// The live ETA window while it is on a published delivery route and not served yet
    /// (CONTRACT §14); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eta: Option<crate::eta::EtaWindow>,
    /// The recipient's delivery instruction (CONTRACT §15: safe place, door code); absent when
    /// none was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    /// Where and when the parcel goes back to the pick-up address (CONTRACT §15); absent unless
    /// a return was booked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub return_stop: Option<ReturnView>,
}

/// A return stop: a pick-up slot of the order's city, and the failed return attempts so far.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ReturnView {
    pub scheduled_date: String,
    pub time_slot_code: String,
    pub time_slot_name: String,
    pub time_slot_datetime_start: String,
    pub time_slot_datetime_end: String,
    pub failed_attempts: u32,
}

/// `point` (an imported address point matched the street number and name), `given` (the
/// request's `lat`/`lng`) or `postal_code` (the postal code's location: the fallback, and
/// what every address ordered before this field existed reads as).
#[derive(Serialize, utoipa::ToSchema)]
pub struct LocatedByView {
    pub pick_up_address: LocatedBy,
    pub drop_off_address: LocatedBy,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct EventView {
    /// Stable and global; `seq` numbers the shipment's events 1, 2, 3 … without gaps.
    pub id: i64,
    pub seq: u32,
    pub status: Status,
    pub previous_status: Option<Status>,
    pub at: String,
    pub actor: Actor,
    pub reason: Option<String>,
    pub attempt: Option<u32>,
    pub proof_of_delivery: Vec<Proof>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct OrderView {
    pub unique_id: String,
    pub created_at: String,
    pub shipments: Vec<ShipmentView>,
}

impl ShipmentView {
    pub fn new(base: &str, area: &ServiceArea, s: StoredShipment) -> ShipmentView {
        let tz = city_zone(area, &s.drop_off.city);
        ShipmentView {
            shipment: ShipmentObject::from_stored(base, &s),
            status: s.drop_off.status,
            pick_up_status: s.pick_up.status,
            attempts: s.drop_off.attempts,
            max_attempts: s.drop_off.max_attempts,
            located_by: LocatedByView {
                pick_up_address: s.pick_up.address_located_by,
                drop_off_address: s.drop_off.address.located_by,
            },
            eta: crate::eta::shown(s.drop_off.status, s.eta.as_ref(), &tz),
            instruction: s.drop_off.instruction.clone(),
            return_stop: s.drop_off.return_slot.as_ref().map(|r| ReturnView {
                scheduled_date: r.date.clone(),
                time_slot_code: r.slot_code.clone(),
                time_slot_name: r.slot_name.clone(),
                time_slot_datetime_start: r.start_at.clone(),
                time_slot_datetime_end: r.end_at.clone(),
                failed_attempts: s.drop_off.return_attempts,
            }),
            events: s.events.into_iter().map(|e| EventView::new(e, &tz)).collect(),
        }
    }
}

impl EventView {
    fn new(e: StoredEvent, tz: &TimeZone) -> EventView {
        EventView {
            id: e.id,
            seq: e.seq,
            status: e.to,
            previous_status: e.from,
            at: local(e.at, tz),
            actor: e.actor,
            reason: e.reason,
            attempt: e.attempt,
            proof_of_delivery: e.proof,
        }
    }
}

impl OrderView {
    pub fn new(base: &str, area: &ServiceArea, o: StoredOrder) -> OrderView {
        OrderView {
            unique_id: o.unique_id,
            created_at: o.created_at,
            shipments: o.shipments.into_iter().map(|s| ShipmentView::new(base, area, s)).collect(),
        }
    }
}
