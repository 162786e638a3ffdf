//! Response shapes of the interface, field for field and in its types (lat/lng are strings
//! in a preview and numbers in an order). Only serialisation lives here.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::labels::LabelLink;
use dropslot_store::StoredDropOffAddress;

use dropslot_core::config::PaymentType;
use dropslot_core::money::Money;
use dropslot_core::quote::Totals;

/// The only shipment type of the interface.
pub const SAME: &str = "SAME";

#[derive(Serialize, utoipa::ToSchema)]
pub struct PreviewObject<'a> {
    pub pick_ups: Vec<PickUpPreview<'a>>,
    pub payment_type: &'a PaymentType,
    #[serde(flatten)]
    pub totals: Totals,
}

#[derive(Serialize, Clone, utoipa::ToSchema)]
pub struct PickUpAddress {
    pub saved_address_id: Option<i64>,
    pub lat: String,
    pub lng: String,
    pub text: String,
    pub city: String,
    pub person_name: Option<String>,
    pub person_phone_country_code: Option<String>,
    pub person_phone: Option<String>,
    pub plate_number: Option<String>,
    pub unit_number: Option<String>,
    pub postal_code: String,
    pub description: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct PickUpPreview<'a> {
    pub address: PickUpAddress,
    pub scheduled_date: String,
    pub time_slot_code: &'a str,
    pub time_slot: PickUpSlot<'a>,
    pub time_slot_datetime_start: String,
    pub time_slot_datetime_end: String,
    pub drop_offs: Vec<DropOffPreview<'a>>,
    pub drop_offs_total_price: Money,
    pub parcels_total_price: Money,
    pub additional_parameters_total_price: Money,
    pub price: Money,
    pub total_price: Money,
    #[schema(inline)]
    pub parcel_summary: ParcelSummary,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct PickUpSlot<'a> {
    pub city: &'a str,
    pub code: &'a str,
    pub name: &'a str,
    pub closing_margin: u16,
    pub from_time: u16,
    pub to_time: u16,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DropOffPreviewAddress<'a> {
    pub text: &'a str,
    pub postal_code: &'a str,
    pub lat: &'a str,
    pub lng: &'a str,
    pub region: &'a str,
    pub city: &'a str,
    /// No Google lookup is made: always null (docs/api.md).
    pub google_place_id: Option<&'a str>,
    pub location_service_postal_code: &'a str,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ParcelPreview<'a> {
    pub unit: &'a str,
    pub values: f64,
    pub parcel_size_code: &'a str,
    pub price: Money,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DropOffPreview<'a> {
    pub address: DropOffPreviewAddress<'a>,
    pub parcels: Vec<ParcelPreview<'a>>,
    pub pick_up_shipment_type: &'static str,
    pub scheduled_date: String,
    pub pick_up_scheduled_date: String,
    pub time_slot_code: &'a str,
    pub time_slot: DropOffSlot<'a>,
    pub time_slot_datetime_start: String,
    pub time_slot_datetime_end: String,
    pub price: Money,
    #[schema(inline)]
    pub parcel_summary: ParcelSummary,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DropOffSlot<'a> {
    pub city: &'a str,
    pub code: &'a str,
    pub warehouse_service_zone_code: &'a str,
    pub closing_margin: u16,
    pub from_time: u16,
    pub to_time: u16,
}

/// `{"SAME": {size code: {code, note, icon_url, count}}}`. A struct rather than an alias, so
/// its entries are the named schema `SummaryEntry` (a generated client's model), not inlined.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(transparent)]
pub struct ParcelSummary(pub BTreeMap<&'static str, BTreeMap<String, SummaryEntry>>);

#[derive(Serialize, Clone, utoipa::ToSchema)]
pub struct SummaryEntry {
    pub code: String,
    pub note: String,
    pub icon_url: String,
    pub count: u32,
}

// ---- order creation -------------------------------------------------------------------

/// The order response's `drop_off_address`, from the stored address (no Google lookup is
/// made: `google_place_id` is always null).
impl From<&StoredDropOffAddress> for DropOffAddress {
    fn from(a: &StoredDropOffAddress) -> Self {
        DropOffAddress {
            text: a.text.clone(),
            description: a.description.clone(),
            person_name: a.person_name.clone(),
            person_phone: a.person_phone.clone(),
            person_email: a.person_email.clone(),
            sender_person_name: a.sender_person_name.clone(),
            sender_person_phone: a.sender_person_phone.clone(),
            sender_person_email: a.sender_person_email.clone(),
            sender_name: a.sender_name.clone(),
            sender_address_text: a.sender_address_text.clone(),
            postal_code: a.postal_code.clone(),
            lat: a.lat,
            lng: a.lng,
            region: a.region.clone(),
            google_place_id: None,
            location_service_postal_code: a.location_service_postal_code.clone(),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct OrderObject {
    pub unique_id: String,
    pub created_at: String,
    pub shipments: Vec<ShipmentObject>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ShipmentObject {
    pub shipment_order_id: i64,
    pub shipment_order_unique_id: String,
    pub pick_up_shipment: PickUpShipmentObject,
    pub drop_off_shipment: DropOffShipmentObject,
    pub drop_off_address: DropOffAddress,
    pub parcel_count: BTreeMap<&'static str, BTreeMap<String, u32>>,
    pub parcels: Vec<ParcelObject>,
    pub actual_total_price: Money,
    pub actual_total_tax: Money,
    pub actual_price_with_tax: Money,
    pub total_price: Money,
    pub total_tax: Money,
    pub price_with_tax: Money,
}

/// The submitted drop-off address plus what geocoding found (lat/lng as numbers here).
#[derive(Serialize, serde::Deserialize, Clone, Debug, Default, utoipa::ToSchema)]
pub struct DropOffAddress {
    pub text: String,
    pub description: Option<String>,
    pub person_name: Option<String>,
    pub person_phone: Option<String>,
    pub person_email: Option<String>,
    pub sender_person_name: Option<String>,
    pub sender_person_phone: Option<String>,
    pub sender_person_email: Option<String>,
    pub sender_name: Option<String>,
    pub sender_address_text: Option<String>,
    pub postal_code: String,
    pub lat: f64,
    pub lng: f64,
    pub region: String,
    pub google_place_id: Option<String>,
    pub location_service_postal_code: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct PickUpShipmentObject {
    pub scheduled_date: String,
    pub unique_id: String,
    pub id: i64,
    pub pick_up_label_urls: Vec<LabelLink>,
    pub label: String,
    pub time_slot_datetime_start: String,
    pub time_slot_datetime_end: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct SlotCode {
    pub code: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DropOffShipmentObject {
    pub scheduled_date: String,
    pub user_ref_id: Option<String>,
    pub unique_id: String,
    pub id: i64,
    pub pick_up_label_urls: Vec<LabelLink>,
    pub label: String,
    pub time_slot: SlotCode,
    pub time_slot_datetime_start: String,
    pub time_slot_datetime_end: String,
    pub tracking_url: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ParcelObject {
    pub pick_up_index: String,
    pub drop_off_index: usize,
    pub pick_up_code: String,
    pub custom_code: Option<String>,
    pub pick_up_label_urls: Vec<LabelLink>,
    pub parcel_size_code: String,
    pub label: String,
}

// ---- reading back ---------------------------------------------------------------------

impl ShipmentObject {
    /// A stored shipment in the order-creation shape (live parcels only: a deleted parcel
    /// leaves the shipment, as it leaves its labels).
    pub fn from_stored(base: &str, s: &dropslot_store::StoredShipment) -> ShipmentObject {
        use crate::labels;
        use dropslot_store::LabelKind;
        let (pick_up_links, pick_up_label) = labels::links(base, LabelKind::PickUp, &s.pick_up.label_token);
        let (drop_off_links, drop_off_label) = labels::links(base, LabelKind::DropOff, &s.drop_off.label_token);
        let mut counts: BTreeMap<String, u32> = BTreeMap::new();
        let parcels = s
            .parcels
            .iter()
            .map(|p| {
                *counts.entry(p.size_code.clone()).or_default() += 1;
                let (links, label) = labels::links(base, LabelKind::Parcel, &p.label_token);
                ParcelObject {
                    pick_up_index: "0".into(),
                    drop_off_index: s.drop_off_index,
                    pick_up_code: p.pick_up_code.clone(),
                    custom_code: p.custom_code.clone(),
                    pick_up_label_urls: links,
                    parcel_size_code: p.size_code.clone(),
                    label,
                }
            })
            .collect();
        let d = &s.drop_off;
        let t = &s.totals;
        ShipmentObject {
            shipment_order_id: s.shipment_order.0,
            shipment_order_unique_id: s.shipment_order_unique_id.clone(),
            pick_up_shipment: PickUpShipmentObject {
                scheduled_date: s.pick_up.scheduled_date.clone(),
                unique_id: s.pick_up.unique_id.clone(),
                id: s.pick_up.id.0,
                pick_up_label_urls: pick_up_links,
                label: pick_up_label,
                time_slot_datetime_start: s.pick_up.start_at.clone(),
                time_slot_datetime_end: s.pick_up.end_at.clone(),
            },
            drop_off_shipment: DropOffShipmentObject {
                scheduled_date: d.scheduled_date.clone(),
                user_ref_id: None,
                unique_id: d.unique_id.clone(),
                id: d.id.0,
                pick_up_label_urls: drop_off_links,
                label: drop_off_label,
                time_slot: SlotCode { code: d.slot_code.clone() },
                time_slot_datetime_start: d.start_at.clone(),
                time_slot_datetime_end: d.end_at.clone(),
                tracking_url: labels::tracking_url(base, &d.unique_id),
            },
            drop_off_address: DropOffAddress::from(&d.address),
            parcel_count: BTreeMap::from([(SAME, counts)]),
            parcels,
            actual_total_price: t.actual_total_price,
            actual_total_tax: t.actual_total_tax,
            actual_price_with_tax: t.actual_price_with_tax,
            total_price: t.total_price,
            total_tax: t.total_tax,
            price_with_tax: t.price_with_tax,
        }
    }
}
