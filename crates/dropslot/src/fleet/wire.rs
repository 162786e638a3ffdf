//! The fleet's request and response shapes. A body's fields are each optional here (a change
//! gives some); the core's `DriverFields::check` says what is missing or wrong, at its path.

use serde::{Deserialize, Serialize};

use dropslot_core::fleet::{DriverFields, hhmm};
use dropslot_store::StoredDriver;

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VehicleBody {
    /// 1–200 characters.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub name: Option<String>,
    /// 1 to 10,000.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10_000)]
    pub capacity_parcels: Option<i64>,
    /// 1 to 100,000.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100_000)]
    pub capacity_kg: Option<i64>,
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShiftBody {
    /// `HH:MM`, local time of the depot's city.
    #[serde(default)]
    #[schema(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    pub start: Option<String>,
    /// `HH:MM`, after `start`.
    #[serde(default)]
    #[schema(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    pub end: Option<String>,
}

/// A driver's fields; on a change, only those given change (inside `vehicle` and `shift`
/// too). `null` is the same as absent.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"phone": "+1 416 555 0199", "shift": {"end": "17:00"}}))]
pub struct DriverBody {
    /// 1–200 characters.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub name: Option<String>,
    /// 7–15 digits, optionally starting with `+`; spaces, dashes, dots and parentheses between.
    #[serde(default)]
    #[schema(max_length = 40, pattern = r"^\+?[ .()\-]*([0-9][ .()\-]*){7,15}$")]
    pub phone: Option<String>,
    /// A depot (warehouse) code of the service area.
    #[serde(default)]
    #[schema(example = "YYZ1")]
    pub depot: Option<String>,
    #[serde(default)]
    pub vehicle: Option<VehicleBody>,
    #[serde(default)]
    pub shift: Option<ShiftBody>,
    /// `mon`..`sun`, each at most once, at least one.
    #[serde(default)]
    #[schema(schema_with = weekday_list)]
    pub weekdays: Option<Vec<String>>,
}

/// `mon`..`sun`, each at most once, at least one; `null` is the same as absent.
fn weekday_list() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
    let day = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(dropslot_core::fleet::WEEKDAYS));
    let list = ArrayBuilder::new().items(day).min_items(Some(1)).max_items(Some(7)).unique_items(true);
    OneOfBuilder::new().item(list).item(ObjectBuilder::new().schema_type(Type::Null)).into()
}

impl DriverBody {
    /// The fields given, for the core to check (alone, or laid over a stored driver).
    pub fn fields(&self) -> DriverFields {
        let vehicle = self.vehicle.as_ref();
        let shift = self.shift.as_ref();
        DriverFields {
            name: self.name.clone(),
            phone: self.phone.clone(),
            depot: self.depot.clone(),
            vehicle_name: vehicle.and_then(|v| v.name.clone()),
            capacity_parcels: vehicle.and_then(|v| v.capacity_parcels),
            capacity_kg: vehicle.and_then(|v| v.capacity_kg),
            shift_start: shift.and_then(|s| s.start.clone()),
            shift_end: shift.and_then(|s| s.end.clone()),
            weekdays: self.weekdays.clone(),
        }
    }
}

/// `POST /ops/drivers`'s body as the document shows it: every field required (a schema only;
/// the handler reads [`DriverBody`] and the core names what is missing).
#[derive(utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
#[schema(example = json!({"name": "Sam Rivera", "phone": "+1 416 555 0199", "depot": "YYZ1",
    "vehicle": {"name": "Van 3", "capacity_parcels": 120, "capacity_kg": 800},
    "shift": {"start": "08:00", "end": "18:00"}, "weekdays": ["mon", "tue", "wed", "thu", "fri"]}))]
pub struct NewDriverBody {
    /// 1–200 characters.
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    name: String,
    /// 7–15 digits, optionally starting with `+`; spaces, dashes, dots and parentheses between.
    #[schema(max_length = 40, pattern = r"^\+?[ .()\-]*([0-9][ .()\-]*){7,15}$")]
    phone: String,
    /// A depot (warehouse) code of the service area.
    #[schema(example = "YYZ1")]
    depot: String,
    vehicle: NewVehicle,
    shift: NewShift,
    /// `mon`..`sun`, each at most once, at least one.
    #[schema(schema_with = weekday_list_required)]
    weekdays: Vec<String>,
}

#[derive(utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct NewVehicle {
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    name: String,
    #[schema(minimum = 1, maximum = 10_000)]
    capacity_parcels: i64,
    #[schema(minimum = 1, maximum = 100_000)]
    capacity_kg: i64,
}

#[derive(utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct NewShift {
    /// `HH:MM`, local time of the depot's city.
    #[schema(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    start: String,
    /// `HH:MM`, after `start`.
    #[schema(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    end: String,
}

fn weekday_list_required() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let day = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(dropslot_core::fleet::WEEKDAYS));
    ArrayBuilder::new().items(day).min_items(Some(1)).max_items(Some(7)).unique_items(true).into()
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct VehicleView<'a> {
    name: &'a str,
    capacity_parcels: u32,
    capacity_kg: u32,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ShiftView {
    /// `HH:MM`, local time of the depot's city.
    start: String,
    end: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DriverView<'a> {
    /// `DRV` and 20 characters.
    id: &'a str,
    name: &'a str,
    phone: &'a str,
    depot: &'a str,
    vehicle: VehicleView<'a>,
    shift: ShiftView,
    /// Monday first.
    weekdays: Vec<&'static str>,
    created_at: &'a str,
    updated_at: &'a str,
    /// The driver app's link with the driver's token in its fragment: only when the driver
    /// is created.
    #[serde(skip_serializing_if = "Option::is_none")]
    sign_in_url: Option<String>,
}

impl<'a> DriverView<'a> {
    pub fn new(d: &'a StoredDriver, sign_in_url: Option<String>) -> DriverView<'a> {
        let v = &d.driver.vehicle;
        DriverView {
            id: &d.id,
            name: &d.driver.name,
            phone: &d.driver.phone,
            depot: &d.driver.depot,
            vehicle: VehicleView { name: &v.name, capacity_parcels: v.capacity_parcels, capacity_kg: v.capacity_kg },
            shift: ShiftView { start: hhmm(d.driver.shift.start), end: hhmm(d.driver.shift.end) },
            weekdays: d.driver.weekdays.names(),
            created_at: &d.created_at,
            updated_at: &d.updated_at,
            sign_in_url,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DriverList<'a> {
    drivers: Vec<DriverView<'a>>,
}

impl<'a> DriverList<'a> {
    pub fn new(drivers: Vec<DriverView<'a>>) -> DriverList<'a> {
        DriverList { drivers }
    }
}

/// A re-issued sign-in link (shown only here).
#[derive(Serialize, utoipa::ToSchema)]
pub struct SignInLink {
    pub sign_in_url: String,
}
