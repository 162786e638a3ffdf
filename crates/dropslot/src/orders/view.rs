//! How a shipment reads back (CONTRACT §8, issue 8 item 5): the order-creation shape plus
//! `status`, `attempts` and the events, with every time in its city's offset.

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::Serialize;

use super::wire::ShipmentObject;
use crate::config::ServiceArea;
use crate::quote::schedule::iso;
use crate::shipments::{Actor, Proof, Status};
use crate::store::{StoredEvent, StoredOrder, StoredShipment};

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
    /// Oldest first.
    pub events: Vec<EventView>,
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

/// The time zone of a configured city by name; UTC if the city has left the configuration
/// (the instant stays right, only its offset is generic).
pub fn city_zone(area: &ServiceArea, city: &str) -> TimeZone {
    area.cities().iter().find(|c| c.name == city).map_or(TimeZone::UTC, |c| c.tz.clone())
}

/// An instant shown with its city's offset.
pub fn local(at: Timestamp, tz: &TimeZone) -> String {
    iso(&at.to_zoned(tz.clone()))
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
