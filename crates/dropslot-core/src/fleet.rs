//! The courier's fleet (CONTRACT §12): what a driver is (depot, vehicle, shift, weekdays) and
//! the rules a driver record obeys, checked here once for the API, the CLI and both backends.

use crate::config::ServiceArea;
use crate::phone::{RULE as PHONE_RULE, valid_phone};

/// Longest driver name and vehicle name, in characters.
pub const MAX_NAME: usize = 200;
/// Longest phone, in characters (separators included).
pub const MAX_PHONE: usize = 40;
/// The most parcels a vehicle may be said to carry.
pub const MAX_PARCELS: i64 = 10_000;
/// The most kilograms a vehicle may be said to carry.
pub const MAX_KG: i64 = 100_000;
/// The weekdays in order, as the API and the store write them.
pub const WEEKDAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// A driver's working hours on each of their days, in minutes after local midnight (the
/// depot's city's time): `start < end`, both within the day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shift {
    pub start: u16,
    pub end: u16,
}

/// `HH:MM`, 00:00 to 23:59, as minutes after midnight.
pub fn parse_hhmm(s: &str) -> Option<u16> {
    let (h, m) = s.split_once(':')?;
    if h.len() != 2 || m.len() != 2 || !h.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 60 + m)
}

/// Minutes after midnight as `HH:MM`.
pub fn hhmm(minutes: u16) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vehicle {
    pub name: String,
    /// 1 to [`MAX_PARCELS`].
    pub capacity_parcels: u32,
    /// 1 to [`MAX_KG`].
    pub capacity_kg: u32,
}

/// The days a driver works: a set of weekdays, bit 0 = Monday; never empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkDays(u8);

impl WorkDays {
    /// From their short names (`mon`..`sun`), each at most once.
    pub fn parse_list(text: &str) -> Option<WorkDays> {
        let mut bits = 0u8;
        for day in text.split(',') {
            let i = WEEKDAYS.iter().position(|d| *d == day.trim())?;
            if bits & (1 << i) != 0 {
                return None;
            }
            bits |= 1 << i;
        }
        (bits != 0).then_some(WorkDays(bits))
    }

    /// The short names, Monday first.
    pub fn names(self) -> Vec<&'static str> {
        WEEKDAYS.iter().enumerate().filter(|(i, _)| self.0 & (1 << i) != 0).map(|(_, d)| *d).collect()
    }

    /// `mon,tue,…`: the stored form, read back by [`WorkDays::parse_list`].
    pub fn list(self) -> String {
        self.names().join(",")
    }

    pub fn contains(self, day: jiff::civil::Weekday) -> bool {
        self.0 & (1 << day.to_monday_zero_offset()) != 0
    }
}

/// A driver as the rules accept it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Driver {
    pub name: String,
    pub phone: String,
    /// A depot code of the service area.
    pub depot: String,
    pub vehicle: Vehicle,
    pub shift: Shift,
    pub weekdays: WorkDays,
}

/// A driver's fields as given, each optional: a create needs every one, a change overlays the
/// ones it gives on the stored driver ([`DriverFields::overlay`]) and the whole is checked
/// again, so a shift's end is compared with its start whichever of the two changed.
#[derive(Debug, Clone, Default)]
pub struct DriverFields {
    pub name: Option<String>,
    pub phone: Option<String>,
    pub depot: Option<String>,
    pub vehicle_name: Option<String>,
    pub capacity_parcels: Option<i64>,
    pub capacity_kg: Option<i64>,
    pub shift_start: Option<String>,
    pub shift_end: Option<String>,
    pub weekdays: Option<Vec<String>>,
}

/// A broken rule: the field's dotted path in the API's body and what is wrong.
pub type FieldError = (String, String);

impl DriverFields {
    /// The fields of a stored driver (the base a change is laid over).
    pub fn of(d: &Driver) -> DriverFields {
        DriverFields {
            name: Some(d.name.clone()),
            phone: Some(d.phone.clone()),
            depot: Some(d.depot.clone()),
            vehicle_name: Some(d.vehicle.name.clone()),
            capacity_parcels: Some(i64::from(d.vehicle.capacity_parcels)),
            capacity_kg: Some(i64::from(d.vehicle.capacity_kg)),
            shift_start: Some(hhmm(d.shift.start)),
            shift_end: Some(hhmm(d.shift.end)),
            weekdays: Some(d.weekdays.names().into_iter().map(String::from).collect()),
        }
    }

    /// These fields with the ones `change` gives in their place.
    #[must_use]
    pub fn overlay(self, change: DriverFields) -> DriverFields {
        DriverFields {
            name: change.name.or(self.name),
            phone: change.phone.or(self.phone),
            depot: change.depot.or(self.depot),
            vehicle_name: change.vehicle_name.or(self.vehicle_name),
            capacity_parcels: change.capacity_parcels.or(self.capacity_parcels),
            capacity_kg: change.capacity_kg.or(self.capacity_kg),
            shift_start: change.shift_start.or(self.shift_start),
            shift_end: change.shift_end.or(self.shift_end),
            weekdays: change.weekdays.or(self.weekdays),
        }
    }

    /// Every rule, each broken one at its path: names 1–200 characters (trimmed), a phone
    /// of 7–15 digits and at most 40 characters, a depot of `area`, capacities 1–10,000 parcels and 1–100,000 kg,
    /// a shift of two `HH:MM` with its end after its start, weekdays `mon`..`sun`, each once,
    /// at least one.
    pub fn check(self, area: &ServiceArea) -> Result<Driver, Vec<FieldError>> {
        let mut errors: Vec<FieldError> = Vec::new();
        let mut fail = |path: &str, message: String| errors.push((path.to_string(), message));
        let name = text(self.name, "name", "The name", &mut fail);
        let vehicle_name = text(self.vehicle_name, "vehicle.name", "The vehicle's name", &mut fail);
        match self.phone.as_deref().map(str::trim) {
            None => fail("phone", "The phone is required.".into()),
            Some(p) if !valid_phone(p) => fail("phone", PHONE_RULE.into()),
            Some(p) if p.chars().count() > MAX_PHONE => {
                fail("phone", format!("The phone must be at most {MAX_PHONE} characters."));
            }
            Some(_) => {}
        }
        match self.depot.as_deref().map(str::trim) {
            None => fail("depot", "The depot is required.".into()),
            Some(d) if area.depot(d).is_none() => {
                let known: Vec<&str> = area.depots().iter().map(|d| d.code.as_str()).collect();
                fail("depot", format!("Unknown depot; one of: {}.", known.join(", ")));
            }
            Some(_) => {}
        }
        let parcels = capacity(self.capacity_parcels, "vehicle.capacity_parcels", "parcels", MAX_PARCELS, &mut fail);
        let kg = capacity(self.capacity_kg, "vehicle.capacity_kg", "kilograms", MAX_KG, &mut fail);
        let start = time(self.shift_start.as_deref(), "shift.start", &mut fail);
        let end = time(self.shift_end.as_deref(), "shift.end", &mut fail);
        if let (Some(s), Some(e)) = (start, end) {
            if e <= s {
                fail("shift.end", "The shift must end after it starts.".into());
            }
        }
        let weekdays = days(self.weekdays.as_deref(), &mut fail);
        if !errors.is_empty() {
            return Err(errors);
        }
        // Every rule passed, so every field is present.
        let (Some(name), Some(vehicle_name), Some(parcels), Some(kg), Some(start), Some(end), Some(weekdays)) =
            (name, vehicle_name, parcels, kg, start, end, weekdays)
        else {
            return Err(vec![(String::new(), "The driver is incomplete.".into())]);
        };
        Ok(Driver {
            name,
            phone: self.phone.unwrap_or_default().trim().to_string(),
            depot: self.depot.unwrap_or_default().trim().to_string(),
            vehicle: Vehicle { name: vehicle_name, capacity_parcels: parcels, capacity_kg: kg },
            shift: Shift { start, end },
            weekdays,
        })
    }
}

/// A required text of 1 to [`MAX_NAME`] characters after trimming.
fn text(value: Option<String>, path: &str, what: &str, fail: &mut impl FnMut(&str, String)) -> Option<String> {
    let Some(value) = value else {
        fail(path, format!("{what} is required."));
        return None;
    };
    let value = value.trim();
    if value.is_empty() || value.chars().count() > MAX_NAME || value.chars().any(char::is_control) {
        fail(path, format!("{what} must be 1 to {MAX_NAME} characters, without control characters."));
        return None;
    }
    Some(value.to_string())
}

fn capacity(value: Option<i64>, path: &str, unit: &str, max: i64, fail: &mut impl FnMut(&str, String)) -> Option<u32> {
    match value {
        None => fail(path, "The capacity is required.".into()),
        Some(n) if (1..=max).contains(&n) => return u32::try_from(n).ok(),
        Some(_) => fail(path, format!("The capacity must be a whole number of {unit} from 1 to {max}.")),
    }
    None
}

fn time(value: Option<&str>, path: &str, fail: &mut impl FnMut(&str, String)) -> Option<u16> {
    let Some(value) = value else {
        fail(path, "The time is required (HH:MM).".into());
        return None;
    };
    let minutes = parse_hhmm(value.trim());
    if minutes.is_none() {
        fail(path, "The time must be HH:MM, from 00:00 to 23:59.".into());
    }
    minutes
}

fn days(value: Option<&[String]>, fail: &mut impl FnMut(&str, String)) -> Option<WorkDays> {
    let Some(list) = value else {
        fail("weekdays", "The weekdays are required.".into());
        return None;
    };
    if list.is_empty() {
        fail("weekdays", "At least one weekday.".into());
        return None;
    }
    let mut bits = 0u8;
    let mut ok = true;
    for (i, day) in list.iter().enumerate() {
        let path = format!("weekdays.{i}");
        match WEEKDAYS.iter().position(|d| *d == day.trim().to_ascii_lowercase()) {
            None => {
                fail(&path, format!("Unknown weekday; one of: {}.", WEEKDAYS.join(", ")));
                ok = false;
            }
            Some(j) if bits & (1 << j) != 0 => {
                fail(&path, format!("{} is given twice.", WEEKDAYS[j]));
                ok = false;
            }
            Some(j) => bits |= 1 << j,
        }
    }
    ok.then_some(WorkDays(bits))
}

/// Positions of one driver closer than this are refused (at most one every 30 s).
pub const POSITION_EVERY_MS: i64 = 30_000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Overrides, Settings};

    fn full() -> DriverFields {
        DriverFields {
            name: Some(" Sam Driver ".into()),
            phone: Some("+1 416 555 0199".into()),
            depot: Some("YYZ1".into()),
            vehicle_name: Some("Van 3".into()),
            capacity_parcels: Some(120),
            capacity_kg: Some(800),
            shift_start: Some("08:00".into()),
            shift_end: Some("18:00".into()),
            weekdays: Some(vec!["fri".into(), "mon".into()]),
        }
    }

    fn paths(r: Result<Driver, Vec<FieldError>>) -> Vec<String> {
        r.unwrap_err().into_iter().map(|(p, _)| p).collect()
    }

    #[test]
    fn a_driver_is_checked_field_by_field() {
        let area = Settings::load(&Overrides::default()).unwrap().area;
        let d = full().check(&area).unwrap();
        assert_eq!(d.name, "Sam Driver");
        assert_eq!((d.shift.start, d.shift.end), (480, 1080));
        assert_eq!(d.weekdays.list(), "mon,fri");
        assert_eq!(WorkDays::parse_list(&d.weekdays.list()), Some(d.weekdays));
        assert_eq!(DriverFields::of(&d).check(&area).unwrap(), d, "a stored driver checks again");
        assert_eq!(
            paths(DriverFields::default().check(&area)),
            [
                "name",
                "vehicle.name",
                "phone",
                "depot",
                "vehicle.capacity_parcels",
                "vehicle.capacity_kg",
                "shift.start",
                "shift.end",
                "weekdays"
            ]
        );
        let bad = DriverFields {
            name: Some("  ".into()),
            phone: Some("555".into()),
            depot: Some("YYZ9".into()),
            capacity_parcels: Some(10_001),
            capacity_kg: Some(0),
            shift_start: Some("8:00".into()),
            weekdays: Some(vec!["mon".into(), "funday".into(), "mon".into()]),
            ..full()
        };
        assert_eq!(
            paths(bad.check(&area)),
            [
                "name",
                "phone",
                "depot",
                "vehicle.capacity_parcels",
                "vehicle.capacity_kg",
                "shift.start",
                "weekdays.1",
                "weekdays.2"
            ]
        );
        let late = full().overlay(DriverFields { shift_start: Some("18:00".into()), ..DriverFields::default() });
        assert_eq!(paths(late.check(&area)), ["shift.end"]);
        assert_eq!(
            paths(full().overlay(DriverFields { weekdays: Some(vec![]), ..DriverFields::default() }).check(&area)),
            ["weekdays"]
        );
        assert_eq!(parse_hhmm("23:59"), Some(1439));
        assert_eq!(parse_hhmm("24:00"), None);
        assert_eq!(hhmm(485), "08:05");
    }
}
