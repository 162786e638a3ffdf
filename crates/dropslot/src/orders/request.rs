//! The request payload shared by preview and order creation, and its validation: every rule
//! of the interface's Limits table and CONTRACT §3, each failure at its dotted field path.

use std::collections::HashSet;

use serde::Deserialize;

use crate::error::FieldErrors;
use dropslot_core::config::{Limits, PriceList, ServiceArea};
use dropslot_core::geo::distance::{CoordinateError, LatLng};
use dropslot_core::geo::{Geocoder, Location};
use dropslot_core::ids::CustomCode;
use dropslot_core::phone::valid_phone;
use dropslot_core::quote::schedule::Asked;
use dropslot_core::quote::{DropOffRequest, Milligrams, QuoteRequest, pricing};

/// The request payload of preview and order creation. The schema states the shapes; the
/// rules it cannot state (geocoding, limits, required receiver fields) answer 422 at a path.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(example = json!({
    "pick_up_address": {"text": "100 King St W, Toronto, ON M5X 1A9"},
    "drop_offs": [{
        "address": {"text": "290 Bremner Blvd, Toronto, ON M5V 3L9", "person_name": "Jane Doe", "person_phone": "+1 416 555 0100"},
        "parcels": [{"unit": "g", "values": 500}]
    }]
}))]
pub struct RequestPayload {
    #[schema(required = true, nullable = false)]
    pub pick_up_address: Option<AddressIn>,
    /// Order creation takes 1 (per-client limit), a preview up to 100.
    #[schema(required = true, nullable = false, min_items = 1)]
    pub drop_offs: Option<Vec<DropOffIn>>,
}

/// The interface's address object (request side); every field optional on the wire. An empty
/// or blank value counts as absent.
#[derive(Debug, Default, Clone, Deserialize, utoipa::ToSchema)]
pub struct AddressIn {
    /// Address text with a postal code the geocoder places inside the service area, 1–500
    /// characters. Required, except on a pick-up given by `saved_address_id`.
    pub text: Option<String>,
    /// At most 1000 characters.
    pub description: Option<String>,
    /// Drop-off receiver; required for order creation. At most 200 characters.
    pub person_name: Option<String>,
    /// Drop-off receiver; required for order creation. An optional `+`, then 7–15 digits.
    pub person_phone: Option<String>,
    pub person_email: Option<String>,
    pub sender_person_name: Option<String>,
    pub sender_person_phone: Option<String>,
    pub sender_person_email: Option<String>,
    pub sender_name: Option<String>,
    pub sender_address_text: Option<String>,
    /// Pick-up only: a saved address instead of `text` (CONTRACT §3.4).
    pub saved_address_id: Option<i64>,
    /// The stop's latitude (WGS84 degrees), with `lng`: both or neither. Must lie within
    /// 10 km of the location of the address's postal code; shown and stored instead of it.
    #[schema(minimum = -90, maximum = 90, example = 43.6419)]
    pub lat: Option<f64>,
    /// The stop's longitude (WGS84 degrees), with `lat`.
    #[schema(minimum = -180, maximum = 180, example = -79.386)]
    pub lng: Option<f64>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct DropOffIn {
    #[schema(required = true, nullable = false)]
    pub address: Option<AddressIn>,
    /// 1–5 for order creation, 1–50 for a preview (per-client limits).
    #[schema(required = true, nullable = false, min_items = 1)]
    pub parcels: Option<Vec<ParcelIn>>,
    /// With `time_slot_code` (both or neither): the date of the slot asked for, YYYY-MM-DD
    /// (`GET /slots` lists the bookable ones). Absent: the earliest slot with room.
    #[schema(format = Date, example = "2026-11-23")]
    pub scheduled_date: Option<String>,
    /// With `scheduled_date`: a drop-off slot of the address's zone. A slot that is closed,
    /// unknown for the zone or full is a 422 here.
    #[schema(example = "TOR-DT-EV")]
    pub time_slot_code: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct ParcelIn {
    #[schema(required = true, nullable = false, value_type = WeightUnit)]
    pub unit: Option<String>,
    /// The weight in `unit`; at most the largest size class (25 kg by default).
    #[schema(required = true, nullable = false, exclusive_minimum = 0)]
    pub values: Option<f64>,
    /// 16–20 ASCII letters or digits, unique among the client's live parcels (empty = none).
    #[schema(pattern = "^([A-Za-z0-9]{16,20})?$")]
    pub custom_code: Option<String>,
}

/// A parcel's weight unit, converted to grams (case-sensitive).
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // a schema only: `check_parcel` reads the unit
enum WeightUnit {
    G,
    Kg,
    Lb,
    Oz,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Preview,
    /// `POST /requests/sync`.
    Order,
    /// `POST /requests/async`: an order's rules with the asynchronous limits.
    AsyncOrder,
}

impl Purpose {
    /// Whether it creates an order (receivers' names and phones are required).
    pub fn orders(self) -> bool {
        matches!(self, Purpose::Order | Purpose::AsyncOrder)
    }
}

#[derive(Debug, Clone)]
pub struct ValidPickUp {
    pub address: AddressIn,
    pub location: Location,
}

#[derive(Debug, Clone)]
pub struct ValidDropOff {
    pub address: AddressIn,
    pub location: Location,
    pub parcels: Vec<ValidParcel>,
    /// The slot asked for, if any.
    pub asked: Option<Asked>,
}

#[derive(Debug, Clone)]
pub struct ValidParcel {
    /// As given (echoed back).
    pub unit: String,
    pub values: f64,
    pub weight: Milligrams,
    pub size: usize,
    pub custom_code: Option<CustomCode>,
}

#[derive(Debug, Clone)]
pub struct ValidRequest {
    pub pick_up: ValidPickUp,
    pub drop_offs: Vec<ValidDropOff>,
}

impl ValidRequest {
    pub fn quote_request(&self) -> QuoteRequest {
        QuoteRequest {
            pick_up_zone: self.pick_up.location.zone,
            drop_offs: self
                .drop_offs
                .iter()
                .map(|d| DropOffRequest {
                    zone: d.location.zone,
                    sizes: d.parcels.iter().map(|p| p.size).collect(),
                    asked: d.asked.clone(),
                    at: LatLng::parse(&d.location.lat, &d.location.lng),
                    // Grams, rounded up as a day plan counts them.
                    grams: d.parcels.iter().map(|p| i64::try_from(p.weight.0.div_ceil(1000)).unwrap_or(i64::MAX)).sum(),
                })
                .collect(),
        }
    }
}

pub struct Rules<'a> {
    pub purpose: Purpose,
    pub prices: &'a PriceList,
    pub limits: Limits,
    pub geocoder: &'a Geocoder,
    pub area: &'a ServiceArea,
}

const TEXT_MAX: usize = 500;
const NAME_MAX: usize = 200;
const NOTE_MAX: usize = 1000;

pub fn validate(req: RequestPayload, rules: &Rules<'_>) -> Result<ValidRequest, FieldErrors> {
    let mut errors = FieldErrors::new();
    let pick_up = match req.pick_up_address {
        None => {
            errors.add("pick_up_address", "The pick-up address is required.");
            None
        }
        Some(a) => check_address(a, "pick_up_address", false, rules, &mut errors),
    };
    let drop_offs = check_drop_offs(req.drop_offs, rules, &mut errors);
    match (pick_up, drop_offs) {
        (Some((address, location)), Some(drop_offs)) if errors.is_empty() => {
            Ok(ValidRequest { pick_up: ValidPickUp { address, location }, drop_offs })
        }
        _ => Err(errors),
    }
}

fn check_drop_offs(
    list: Option<Vec<DropOffIn>>,
    rules: &Rules<'_>,
    errors: &mut FieldErrors,
) -> Option<Vec<ValidDropOff>> {
    let (max_drop_offs, max_parcels) = match rules.purpose {
        Purpose::Order => (rules.limits.order_drop_offs, rules.limits.order_parcels_per_drop_off),
        Purpose::Preview => (rules.limits.preview_drop_offs, rules.limits.preview_parcels_per_drop_off),
        Purpose::AsyncOrder => (rules.limits.async_drop_offs, rules.limits.async_parcels_per_drop_off),
    };
    let Some(list) = list else {
        errors.add("drop_offs", "At least one drop-off is required.");
        return None;
    };
    if list.is_empty() {
        errors.add("drop_offs", "At least one drop-off is required.");
        return None;
    }
    if list.len() > max_drop_offs {
        let message = match rules.purpose {
            Purpose::Order => format!(
                "Order creation takes at most {max_drop_offs} drop-off(s) per request; use the asynchronous order endpoint for larger orders."
            ),
            Purpose::Preview => format!("A preview takes at most {max_drop_offs} drop-offs."),
            Purpose::AsyncOrder => format!("An asynchronous order takes at most {max_drop_offs} drop-offs."),
        };
        errors.add("drop_offs", message);
        return None;
    }
    // Custom codes seen in this request (case-sensitive, like the database index and barcodes).
    let mut seen: HashSet<CustomCode> = HashSet::new();
    let mut out = Vec::with_capacity(list.len());
    for (i, d) in list.into_iter().enumerate() {
        let at = format!("drop_offs.{i}");
        let address = match d.address {
            None => {
                errors.add(format!("{at}.address"), "The drop-off address is required.");
                None
            }
            Some(a) => check_address(a, &format!("{at}.address"), true, rules, errors),
        };
        let parcels = check_parcels(d.parcels, &at, max_parcels, rules, &mut seen, errors);
        let asked = check_asked(d.scheduled_date, d.time_slot_code, &at, errors);
        if let (Some((address, location)), Some(parcels), Ok(asked)) = (address, parcels, asked) {
            out.push(ValidDropOff { address, location, parcels, asked });
        }
    }
    Some(out)
}

/// A drop-off's asked-for slot: both fields or neither (blank counts as absent), the date as
/// YYYY-MM-DD. Whether the slot exists, is open and has room is the schedule's to say.
fn check_asked(
    date: Option<String>,
    code: Option<String>,
    at: &str,
    errors: &mut FieldErrors,
) -> Result<Option<Asked>, ()> {
    let date = date.filter(|d| !d.trim().is_empty());
    let code = code.map(|c| c.trim().to_string()).filter(|c| !c.is_empty());
    match (date, code) {
        (None, None) => Ok(None),
        (Some(_), None) => {
            errors.add(format!("{at}.time_slot_code"), "Give the time slot with its scheduled_date, or neither.");
            Err(())
        }
        (None, Some(_)) => {
            errors.add(format!("{at}.scheduled_date"), "Give the scheduled_date with its time slot, or neither.");
            Err(())
        }
        (Some(date), Some(slot)) => match date.trim().parse::<jiff::civil::Date>() {
            Ok(d) if date.trim().len() == 10 => Ok(Some(Asked { date: d, slot })),
            _ => {
                errors.add(format!("{at}.scheduled_date"), "A date is written YYYY-MM-DD.");
                Err(())
            }
        },
    }
}

fn check_parcels(
    list: Option<Vec<ParcelIn>>,
    at: &str,
    max: usize,
    rules: &Rules<'_>,
    seen: &mut HashSet<CustomCode>,
    errors: &mut FieldErrors,
) -> Option<Vec<ValidParcel>> {
    let list = list.unwrap_or_default();
    if list.is_empty() {
        errors.add(format!("{at}.parcels"), "At least one parcel is required.");
        return None;
    }
    if list.len() > max {
        errors.add(format!("{at}.parcels"), format!("A drop-off takes at most {max} parcels."));
        return None;
    }
    let mut out = Vec::with_capacity(list.len());
    let mut ok = true;
    for (j, p) in list.into_iter().enumerate() {
        let at = format!("{at}.parcels.{j}");
        match check_parcel(p, &at, rules, seen, errors) {
            Some(p) => out.push(p),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

fn check_parcel(
    p: ParcelIn,
    at: &str,
    rules: &Rules<'_>,
    seen: &mut HashSet<CustomCode>,
    errors: &mut FieldErrors,
) -> Option<ValidParcel> {
    let before = errors.len_total();
    let unit = p.unit.unwrap_or_default();
    let factor_mg = match unit.as_str() {
        "g" => Some(1_000.0),
        "kg" => Some(1_000_000.0),
        "lb" => Some(453_592.37),
        "oz" => Some(28_349.523_125),
        "" => {
            errors.add(format!("{at}.unit"), "The unit is required: g, kg, lb or oz.");
            None
        }
        _ => {
            errors.add(format!("{at}.unit"), "The unit must be one of g, kg, lb, oz.");
            None
        }
    };
    let values = p.values;
    let weight = match (values, factor_mg) {
        (None, _) => {
            errors.add(format!("{at}.values"), "The weight (values) is required.");
            None
        }
        (Some(v), _) if !v.is_finite() || v <= 0.0 => {
            errors.add(format!("{at}.values"), "The weight must be a positive number.");
            None
        }
        (Some(v), Some(f)) => {
            // Stored to the milligram; classified to the microgram (25000.0001 g is over 25 kg).
            // Anything past u64 is far above every size class anyway.
            let saturate = |x: f64| if x >= 1.8e19 { u64::MAX } else { x as u64 };
            Some((Milligrams(saturate((v * f).round()).max(1)), saturate((v * f * 1000.0).round()).max(1)))
        }
        (Some(_), None) => None,
    };
    let size = weight.and_then(|(_, ug)| {
        let size = pricing::size_for_micrograms(rules.prices, ug);
        if size.is_none() {
            let largest = rules.prices.sizes.last().map_or(0, |s| s.max_grams);
            errors.add(
                format!("{at}.values"),
                format!("The parcel is heavier than the largest size class ({} kg).", f64::from(largest) / 1000.0),
            );
        }
        size
    });
    let mut custom_code = None;
    if let Some(given) = p.custom_code.filter(|c| !c.is_empty()) {
        match CustomCode::parse(&given) {
            None => errors.add(format!("{at}.custom_code"), CustomCode::RULE),
            Some(code) if !seen.insert(code.clone()) => {
                errors.add(format!("{at}.custom_code"), "The custom code is used by another parcel of this request.");
            }
            Some(code) => custom_code = Some(code),
        }
    }
    if errors.len_total() != before {
        return None;
    }
    Some(ValidParcel { unit, values: values?, weight: weight?.0, size: size?, custom_code })
}

fn check_address(
    a: AddressIn,
    at: &str,
    drop_off: bool,
    rules: &Rules<'_>,
    errors: &mut FieldErrors,
) -> Option<(AddressIn, Location)> {
    let mut ok = true;
    let mut fail = |field: &str, msg: &str| {
        errors.add(format!("{at}.{field}"), msg);
        ok = false;
    };
    let text = a.text.as_deref().map_or("", str::trim);
    let mut location = if text.is_empty() {
        fail("text", "The address text is required.");
        None
    } else if text.chars().count() > TEXT_MAX {
        fail("text", "The address text must be at most 500 characters.");
        None
    } else {
        match rules.geocoder.locate(text, rules.area) {
            Ok(l) => Some(l),
            Err(e) => {
                fail("text", e.message());
                None
            }
        }
    };
    // CONTRACT §11: both or neither, in range, and near the postal code's location.
    let given = match (a.lat, a.lng) {
        (None, None) => None,
        (Some(_), None) => {
            fail("lng", "The longitude is required with a latitude: give lat and lng together, or neither.");
            None
        }
        (None, Some(_)) => {
            fail("lat", "The latitude is required with a longitude: give lat and lng together, or neither.");
            None
        }
        (Some(lat), Some(lng)) => match LatLng::new(lat, lng) {
            Ok(at) => Some(at),
            Err(e @ CoordinateError::Lat) => {
                fail("lat", e.message());
                None
            }
            Err(e @ CoordinateError::Lng) => {
                fail("lng", e.message());
                None
            }
        },
    };
    if let (Some(l), Some(at)) = (location.as_mut(), given) {
        if let Err(far) = l.give(at) {
            fail("lat", &far.message());
        }
    }
    let order = rules.purpose.orders();
    for (field, value, required, max) in [
        ("person_name", &a.person_name, drop_off && order, NAME_MAX),
        ("sender_person_name", &a.sender_person_name, false, NAME_MAX),
        ("sender_name", &a.sender_name, false, NAME_MAX),
        ("sender_address_text", &a.sender_address_text, false, TEXT_MAX),
        ("description", &a.description, false, NOTE_MAX),
    ] {
        let v = value.as_deref().map_or("", str::trim);
        if v.is_empty() && required {
            fail(field, "This field is required to create an order.");
        } else if v.chars().count() > max {
            fail(field, &format!("At most {max} characters."));
        }
    }
    for (field, value, required) in
        [("person_phone", &a.person_phone, drop_off && order), ("sender_person_phone", &a.sender_person_phone, false)]
    {
        match value.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
            None if required => fail(field, "This field is required to create an order."),
            Some(v) if !valid_phone(v) => {
                fail(field, "The phone number must have 7 to 15 digits, optionally starting with +.");
            }
            _ => {}
        }
    }
    for field in ["person_email", "sender_person_email"] {
        let value = if field == "person_email" { &a.person_email } else { &a.sender_person_email };
        if let Some(v) = value.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
            if !valid_email(v) {
                fail(field, "The e-mail address is not valid.");
            }
        }
    }
    let location = location?;
    ok.then_some((AddressIn { text: Some(text.to_string()), ..a }, location))
}

/// A pragmatic check: one `@`, a non-empty local part, a dotted domain, no spaces.
pub fn valid_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else { return false };
    s.len() <= 254
        && !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Saved-address identity: lower-case, every run of non-alphanumerics folded to one space.
pub fn normalize_address(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        if word.is_ascii() {
            let start = out.len();
            out.push_str(word);
            out[start..].make_ascii_lowercase();
        } else {
            out.extend(word.chars().flat_map(char::to_lowercase));
        }
    }
    out
}

/// An optional text field as shown and stored: trimmed, and absent when nothing is left.
pub fn trimmed(v: &Option<String>) -> Option<String> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dropslot_core::config::{Overrides, Settings};
    use proptest::prelude::*;

    fn any_text() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            any::<String>().prop_map(Some),
            "[ -~]{0,40}( [A-Za-z][0-9][A-Za-z] ?[0-9][A-Za-z][0-9])?".prop_map(Some),
            Just(Some("M5V 2T6".to_string())),
        ]
    }

    proptest! {
        /// Whatever the content, validation answers Ok or field errors; it never panics.
        #[test]
        fn validation_never_panics(
            texts in prop::collection::vec(any_text(), 4),
            unit in prop_oneof![Just(None), Just(Some("g".to_string())), Just(Some("kg".to_string())), any::<String>().prop_map(Some)],
            values in prop_oneof![Just(None), any::<f64>().prop_map(Some), (0.0f64..1e12).prop_map(Some)],
            code in any_text(),
            parcels in 0usize..8,
            purpose in prop_oneof![Just(Purpose::Preview), Just(Purpose::Order), Just(Purpose::AsyncOrder)],
        ) {
            let s = Settings::load(&Overrides::default()).unwrap();
            let geocoder = Geocoder::embedded();
            let rules = Rules { purpose, prices: &s.pricing, limits: s.limits, geocoder: &geocoder, area: &s.area };
            let address = AddressIn { text: texts[1].clone(), person_name: texts[2].clone(), person_phone: texts[3].clone(), person_email: texts[0].clone(), ..AddressIn::default() };
            let req = RequestPayload {
                pick_up_address: Some(AddressIn { text: texts[0].clone(), ..AddressIn::default() }),
                drop_offs: Some(vec![DropOffIn {
                    address: Some(address),
                    parcels: Some((0..parcels).map(|_| ParcelIn { unit: unit.clone(), values, custom_code: code.clone() }).collect()),
                    scheduled_date: texts[1].clone(),
                    time_slot_code: texts[2].clone(),
                }]),
            };
            match validate(req, &rules) {
                Ok(v) => prop_assert!(v.drop_offs.iter().all(|d| !d.parcels.is_empty())),
                Err(e) => prop_assert!(!e.is_empty()),
            }
        }
    }

    #[test]
    fn phones_emails_and_normalisation() {
        assert!(valid_phone("+1 (416) 555-0100"));
        assert!(valid_phone("416.555.0100"));
        assert!(!valid_phone("555-01"));
        assert!(!valid_phone("+1 416 555 0100 ext 5"));
        assert!(!valid_phone("1234567890123456"));
        assert!(valid_email("jane@example.com"));
        assert!(!valid_email("jane@example"));
        assert!(!valid_email("jane doe@example.com"));
        assert!(!valid_email("@example.com"));
        assert_eq!(normalize_address("  100 King St. W,  Toronto  M5X 1A9 "), "100 king st w toronto m5x 1a9");
        assert_eq!(normalize_address("100 KING ST W TORONTO M5X1A9"), "100 king st w toronto m5x1a9");
    }
}
