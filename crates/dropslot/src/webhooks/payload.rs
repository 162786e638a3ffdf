//! Event bodies (CONTRACT §5): `{"event": "...", "data": {...}}`. Rendered once, inside the
//! transaction that causes the event; every attempt sends the same bytes.

use jiff::Timestamp;
use serde::Serialize;

use dropslot_core::config::ServiceArea;
use dropslot_core::shipments::{Actor, Proof, Status};
use dropslot_core::time::{city_zone, local};
use dropslot_store::{StoredEvent, StoredParcel, StoredShipment};

#[derive(Serialize)]
struct Body<'a, T: Serialize> {
    event: &'a str,
    data: T,
}

/// What renders a body needs from the configuration.
pub struct Context<'a> {
    pub base_url: &'a str,
    pub area: &'a ServiceArea,
}

#[derive(Serialize)]
struct ShipmentEvent<'a> {
    event_id: i64,
    sequence: u32,
    id: i64,
    unique_id: &'a str,
    tracking_code: &'a str,
    tracking_url: String,
    status: Status,
    previous_status: Option<Status>,
    trigger_datetime: String,
    actor: Actor,
    attempt: Option<u32>,
    max_attempts: u32,
    reason: Option<&'a str>,
    proof_of_delivery: &'a [Proof],
    order_unique_id: &'a str,
    shipment_order_id: i64,
    shipment_order_unique_id: &'a str,
    scheduled_date: &'a str,
    time_slot: TimeSlot<'a>,
    time_slot_datetime_start: &'a str,
    time_slot_datetime_end: &'a str,
    city: &'a str,
    pick_up_shipment: PickUp<'a>,
    parcels: Vec<Parcel<'a>>,
    /// The live ETA window while the shipment is on a published route and not served
    /// (CONTRACT §14); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    eta: Option<crate::eta::EtaWindow>,
}

#[derive(Serialize)]
struct TimeSlot<'a> {
    code: &'a str,
    name: &'a str,
}

#[derive(Serialize)]
struct PickUp<'a> {
    id: i64,
    unique_id: &'a str,
    scheduled_date: &'a str,
    time_slot_datetime_start: &'a str,
    time_slot_datetime_end: &'a str,
}

#[derive(Serialize)]
#[allow(clippy::struct_field_names)] // the interface's names
struct Parcel<'a> {
    pick_up_code: &'a str,
    custom_code: Option<&'a str>,
    parcel_size_code: &'a str,
}

/// `same.shipment.<status>`.
pub fn shipment_event(cx: &Context<'_>, s: &StoredShipment, e: &StoredEvent) -> Result<String, String> {
    let d = &s.drop_off;
    let tz = city_zone(cx.area, &d.city);
    let data = ShipmentEvent {
        event_id: e.id,
        sequence: e.seq,
        id: d.id.0,
        unique_id: &d.unique_id,
        tracking_code: &d.unique_id,
        tracking_url: crate::labels::tracking_url(cx.base_url, &d.unique_id),
        eta: crate::eta::shown(e.to, s.eta.as_ref(), &tz),
        status: e.to,
        previous_status: e.from,
        trigger_datetime: local(e.at, &tz),
        actor: e.actor,
        attempt: e.attempt,
        max_attempts: d.max_attempts,
        reason: e.reason.as_deref(),
        proof_of_delivery: &e.proof,
        order_unique_id: &s.order_unique_id,
        shipment_order_id: s.shipment_order.0,
        shipment_order_unique_id: &s.shipment_order_unique_id,
        scheduled_date: &d.scheduled_date,
        time_slot: TimeSlot { code: &d.slot_code, name: &d.slot_name },
        time_slot_datetime_start: &d.start_at,
        time_slot_datetime_end: &d.end_at,
        city: &d.city,
        pick_up_shipment: PickUp {
            id: s.pick_up.id.0,
            unique_id: &s.pick_up.unique_id,
            scheduled_date: &s.pick_up.scheduled_date,
            time_slot_datetime_start: &s.pick_up.start_at,
            time_slot_datetime_end: &s.pick_up.end_at,
        },
        parcels: s
            .parcels
            .iter()
            .map(|p| Parcel {
                pick_up_code: &p.pick_up_code,
                custom_code: p.custom_code.as_deref(),
                parcel_size_code: &p.size_code,
            })
            .collect(),
    };
    let kind = dropslot_core::webhooks::shipment_event(e.to);
    dropslot_core::json::to_string(&Body { event: &kind, data }, 1024).map_err(|e| e.to_string())
}

/// The interface's parcel payload (deprecated by the interface; shipment events are the
/// recommended ones).
#[derive(Serialize)]
struct ParcelCreated<'a> {
    parcel_size: &'a str,
    parcel_code: &'a str,
    pickup_code: &'a str,
    trigger_datetime: String,
    custom_code: Option<&'a str>,
    tracking_code: &'a str,
    request_date: String,
    pick_up: ParcelPickUp<'a>,
    drop_off: ParcelDropOff<'a>,
    extra_data: ExtraData,
}

#[derive(Serialize)]
struct ParcelPickUp<'a> {
    date: &'a str,
    picked_at: Option<String>,
    time_slot: &'a str,
    address: &'a str,
}

#[derive(Serialize)]
struct ParcelDropOff<'a> {
    date: &'a str,
    dropped_at: Option<String>,
    time_slot: &'a str,
    receiver_name: Option<&'a str>,
    receiver_phone: Option<&'a str>,
    receiver_address: &'a str,
    proof_of_delivery: [Proof; 0],
}

#[derive(Serialize)]
struct ExtraData {
    need_signature: bool,
}

/// `same.parcel.created`, for one parcel of a shipment just ordered at `at`.
pub fn parcel_created(cx: &Context<'_>, s: &StoredShipment, p: &StoredParcel, at: Timestamp) -> Result<String, String> {
    let d = &s.drop_off;
    let when = local(at, &city_zone(cx.area, &d.city));
    // The name in the price list the order was priced with (the client's own, or the
    // configuration's): only a parcel just created carries it.
    let size_name = p.size_name.as_deref().ok_or_else(|| format!("parcel {}: no size name", p.pick_up_code))?;
    let data = ParcelCreated {
        parcel_size: size_name,
        parcel_code: &p.size_code,
        pickup_code: &p.pick_up_code,
        trigger_datetime: when.clone(),
        custom_code: p.custom_code.as_deref(),
        tracking_code: &d.unique_id,
        request_date: when,
        pick_up: ParcelPickUp {
            date: &s.pick_up.scheduled_date,
            picked_at: None,
            time_slot: &s.pick_up.slot_name,
            address: &s.pick_up.address_text,
        },
        drop_off: ParcelDropOff {
            date: &d.scheduled_date,
            dropped_at: None,
            time_slot: &d.slot_name,
            receiver_name: d.address.person_name.as_deref(),
            receiver_phone: d.address.person_phone.as_deref(),
            receiver_address: &d.address.text,
            proof_of_delivery: [],
        },
        extra_data: ExtraData { need_signature: false },
    };
    dropslot_core::json::to_string(&Body { event: dropslot_core::webhooks::PARCEL_CREATED, data }, 1024)
        .map_err(|e| e.to_string())
}

/// A date and slot in `same.shipment.rescheduled`.
#[derive(Serialize)]
struct SlotShown<'a> {
    scheduled_date: &'a str,
    time_slot: TimeSlot<'a>,
    time_slot_datetime_start: &'a str,
    time_slot_datetime_end: &'a str,
}

impl<'a> SlotShown<'a> {
    fn of(r: &'a dropslot_store::SlotRef) -> SlotShown<'a> {
        SlotShown {
            scheduled_date: &r.date,
            time_slot: TimeSlot { code: &r.slot_code, name: &r.slot_name },
            time_slot_datetime_start: &r.start_at,
            time_slot_datetime_end: &r.end_at,
        }
    }
}

#[derive(Serialize)]
struct RescheduledEvent<'a> {
    id: i64,
    unique_id: &'a str,
    tracking_code: &'a str,
    tracking_url: String,
    status: Status,
    trigger_datetime: String,
    /// `delivery` (the drop-off's slot) or `return` (the return stop's pick-up slot).
    leg: &'static str,
    changed_by: dropslot_core::attempts::Changer,
    reason: Option<&'a str>,
    previous: SlotShown<'a>,
    new: SlotShown<'a>,
    order_unique_id: &'a str,
    shipment_order_unique_id: &'a str,
    city: &'a str,
    parcels: Vec<Parcel<'a>>,
}

/// `same.shipment.rescheduled` (CONTRACT §15: ours, beyond the interface's list).
pub fn rescheduled(cx: &Context<'_>, s: &StoredShipment, c: &dropslot_store::Rescheduled) -> Result<String, String> {
    let d = &s.drop_off;
    let tz = city_zone(cx.area, &d.city);
    let data = RescheduledEvent {
        id: d.id.0,
        unique_id: &d.unique_id,
        tracking_code: &d.unique_id,
        tracking_url: crate::labels::tracking_url(cx.base_url, &d.unique_id),
        status: d.status,
        trigger_datetime: local(c.at, &tz),
        leg: if c.ret { "return" } else { "delivery" },
        changed_by: c.by,
        reason: c.reason.as_deref(),
        previous: SlotShown::of(&c.from),
        new: SlotShown::of(&c.to),
        order_unique_id: &s.order_unique_id,
        shipment_order_unique_id: &s.shipment_order_unique_id,
        city: &d.city,
        parcels: s
            .parcels
            .iter()
            .map(|p| Parcel {
                pick_up_code: &p.pick_up_code,
                custom_code: p.custom_code.as_deref(),
                parcel_size_code: &p.size_code,
            })
            .collect(),
    };
    dropslot_core::json::to_string(&Body { event: dropslot_core::webhooks::RESCHEDULED, data }, 1024)
        .map_err(|e| e.to_string())
}

/// `same.webhook.test`: what `POST /webhooks/{id}/test` sends.
pub fn test_event(endpoint: i64, at: Timestamp) -> String {
    serde_json::json!({
        "event": TEST_EVENT,
        "data": {"endpoint_id": endpoint, "message": "A test event from dropslot.", "trigger_datetime": at.to_string()}
    })
    .to_string()
}

pub const TEST_EVENT: &str = "same.webhook.test";
