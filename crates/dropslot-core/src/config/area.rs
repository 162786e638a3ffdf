//! The service area as configured (regions, cities, zones, slots), validated and compiled
//! into lookup-friendly form: time zones resolved, holidays parsed, postal prefixes indexed.

use std::collections::BTreeSet;

use jiff::civil::{Date, Weekday};
use jiff::tz::TimeZone;
use serde::Deserialize;

use crate::money::TaxRate;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRegion {
    code: String,
    name: String,
    tax_bp: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCity {
    code: String,
    name: String,
    region: String,
    time_zone: String,
    weekdays: Vec<String>,
    #[serde(default)]
    holidays: Vec<String>,
    pick_up_slots: Vec<Slot>,
    /// The city's own embedded road model (`[routing]` gives the defaults).
    #[serde(default)]
    road_speed_kmh: Option<f64>,
    #[serde(default)]
    road_detour: Option<f64>,
}

impl RawCity {
    /// The code and the city's own road speed and detour, for `[routing]`.
    pub(super) fn roads(&self) -> (String, Option<f64>, Option<f64>) {
        (self.code.clone(), self.road_speed_kmh, self.road_detour)
    }
}

/// A warehouse (depot) of the area file (CONTRACT §12): where a zone's routes start and end.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWarehouse {
    code: String,
    name: String,
    address: String,
    lat: f64,
    lng: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawZone {
    code: String,
    city: String,
    warehouse: String,
    postal_prefixes: Vec<String>,
    drop_off_slots: Vec<Slot>,
}

/// A time slot: minutes after local midnight; bookable until `closing_margin` minutes before
/// its start.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Slot {
    pub code: String,
    pub name: String,
    pub from_time: u16,
    pub to_time: u16,
    #[serde(default)]
    pub closing_margin: u16,
    /// What the fleet can take in this slot on any one date (CONTRACT §10); absent =
    /// unlimited. Per-date overrides come through the admin API.
    #[serde(default)]
    pub capacity: Option<SlotCapacity>,
}

/// A slot's limits (`None` = unlimited): drop-off stops and parcels; a pick-up slot takes
/// stops only. The capacity rules use it as their `Limit`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct SlotCapacity {
    pub stops: Option<u32>,
    pub parcels: Option<u32>,
}

impl Slot {
    /// The configured limit (unlimited when no `capacity` is set).
    pub fn limit(&self) -> SlotCapacity {
        self.capacity.unwrap_or_default()
    }
}

#[derive(Debug, Clone)]
pub struct Region {
    pub code: String,
    pub name: String,
    pub tax: TaxRate,
}

/// Operating weekdays as a bit set (bit 0 = Monday).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weekdays(u8);

impl Weekdays {
    pub fn contains(self, d: Weekday) -> bool {
        self.0 & (1 << (d.to_monday_zero_offset())) != 0
    }
    #[must_use]
    pub fn without(self, d: Weekday) -> Weekdays {
        Weekdays(self.0 & !(1 << d.to_monday_zero_offset()))
    }
}

#[derive(Debug, Clone)]
pub struct City {
    pub code: String,
    pub name: String,
    pub region: usize,
    pub tz: TimeZone,
    pub weekdays: Weekdays,
    pub holidays: BTreeSet<Date>,
    /// Sorted by start.
    pub pick_up_slots: Vec<Slot>,
}

impl City {
    pub fn operates_on(&self, d: Date) -> bool {
        self.weekdays.contains(d.weekday()) && !self.holidays.contains(&d)
    }
}

#[derive(Debug, Clone)]
pub struct Zone {
    pub code: String,
    pub city: usize,
    pub warehouse: String,
    /// Sorted by start.
    pub drop_off_slots: Vec<Slot>,
}

/// A depot: a warehouse where a zone's drop-offs start from and its routes begin and end.
/// An area file without `[[warehouses]]` (written before depots had coordinates) still
/// names each zone's warehouse code: such a depot has its code as its name and neither an
/// address nor a location, and cannot be routed from until the file lists it.
#[derive(Debug, Clone)]
pub struct Depot {
    pub code: String,
    pub name: String,
    pub address: Option<String>,
    /// `(lat, lng)` in WGS84 degrees, each in range (`geo::distance::LatLng::new` takes them).
    pub location: Option<(f64, f64)>,
}

#[derive(Debug, Clone)]
pub struct ServiceArea {
    regions: Vec<Region>,
    cities: Vec<City>,
    zones: Vec<Zone>,
    /// The listed warehouses in file order, or (none listed) the zones' warehouse codes in
    /// order of first use.
    depots: Vec<Depot>,
    /// (upper-case prefix without spaces, zone index), longest prefix first.
    prefixes: Vec<(String, usize)>,
    /// How many days ahead a slot can be booked (`[booking] horizon_days`, CONTRACT §10).
    horizon_days: u16,
}

impl ServiceArea {
    pub(super) fn build(
        regions: Vec<RawRegion>,
        cities: Vec<RawCity>,
        zones: Vec<RawZone>,
        warehouses: Vec<RawWarehouse>,
        horizon_days: u16,
    ) -> Result<Self, String> {
        if !(1..=366).contains(&horizon_days) {
            return Err("booking.horizon_days: 1 to 366".into());
        }
        let regions: Vec<Region> =
            regions.into_iter().map(|r| Region { code: r.code, name: r.name, tax: TaxRate(r.tax_bp) }).collect();
        for (i, r) in regions.iter().enumerate() {
            if r.tax.0 > 10_000 {
                return Err(format!("regions.{i}.tax_bp: at most 10000 (100 %)"));
            }
        }
        let mut built_cities = Vec::with_capacity(cities.len());
        for (i, c) in cities.into_iter().enumerate() {
            let at = |f: &str| format!("cities.{i}.{f}");
            let region = regions
                .iter()
                .position(|r| r.code == c.region)
                .ok_or_else(|| format!("{}: unknown region {:?}", at("region"), c.region))?;
            let tz = TimeZone::get(&c.time_zone).map_err(|e| format!("{}: {e}", at("time_zone")))?;
            let mut bits = 0u8;
            for (j, w) in c.weekdays.iter().enumerate() {
                bits |= 1
                    << parse_weekday(w)
                        .ok_or_else(|| format!("{}: {w:?} is not mon..sun", at(&format!("weekdays.{j}"))))?;
            }
            let mut holidays = BTreeSet::new();
            for (j, h) in c.holidays.iter().enumerate() {
                holidays.insert(h.parse::<Date>().map_err(|e| format!("{}: {e}", at(&format!("holidays.{j}"))))?);
            }
            let pick_up_slots = check_slots(c.pick_up_slots, &at("pick_up_slots"))?;
            if let Some(j) = pick_up_slots.iter().position(|s| s.capacity.is_some_and(|c| c.parcels.is_some())) {
                return Err(format!(
                    "{}.{j}.capacity.parcels: a pick-up slot is limited in stops only",
                    at("pick_up_slots")
                ));
            }
            for (j, slot) in pick_up_slots.iter().enumerate() {
                if built_cities.iter().any(|other: &City| other.pick_up_slots.iter().any(|o| o.code == slot.code)) {
                    return Err(format!(
                        "{}.{j}.code: {:?} is already a pick-up slot of another city (a slot's capacity is counted by its code)",
                        at("pick_up_slots"),
                        slot.code
                    ));
                }
            }
            built_cities.push(City {
                code: c.code,
                name: c.name,
                region,
                tz,
                weekdays: Weekdays(bits),
                holidays,
                pick_up_slots,
            });
        }
        if built_cities.is_empty() {
            return Err("cities: at least one city".into());
        }
        let mut built_zones = Vec::with_capacity(zones.len());
        let mut prefixes = Vec::new();
        for (i, z) in zones.into_iter().enumerate() {
            let city = built_cities
                .iter()
                .position(|c| c.code == z.city)
                .ok_or_else(|| format!("zones.{i}.city: unknown city {:?}", z.city))?;
            let drop_off_slots = check_slots(z.drop_off_slots, &format!("zones.{i}.drop_off_slots"))?;
            for p in &z.postal_prefixes {
                let key: String = p.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_ascii_uppercase();
                if key.is_empty() {
                    return Err(format!("zones.{i}.postal_prefixes: empty prefix"));
                }
                if prefixes.iter().any(|(k, _)| *k == key) {
                    return Err(format!("zones.{i}.postal_prefixes: {p:?} is already used by another zone"));
                }
                prefixes.push((key, i));
            }
            built_zones.push(Zone { code: z.code, city, warehouse: z.warehouse, drop_off_slots });
        }
        if built_zones.is_empty() {
            return Err("zones: at least one zone".into());
        }
        prefixes.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        let depots = build_depots(warehouses, &built_zones)?;
        Ok(Self { regions, cities: built_cities, zones: built_zones, depots, prefixes, horizon_days })
    }

    /// Days ahead (today included) in which slots are booked.
    pub fn horizon_days(&self) -> u16 {
        self.horizon_days
    }

    /// The zone with this code.
    pub fn zone_by_code(&self, code: &str) -> Option<usize> {
        self.zones.iter().position(|z| z.code == code)
    }

    /// Every depot: the listed warehouses, or the zones' warehouse codes when none is listed.
    pub fn depots(&self) -> &[Depot] {
        &self.depots
    }

    /// The depot with this code.
    pub fn depot(&self, code: &str) -> Option<&Depot> {
        self.depots.iter().find(|d| d.code == code)
    }

    /// The zones whose drop-offs start from this depot.
    pub fn depot_zones<'a>(&'a self, code: &'a str) -> impl Iterator<Item = &'a Zone> + 'a {
        self.zones.iter().filter(move |z| z.warehouse == code)
    }

    /// The city with this code.
    pub fn city_by_code(&self, code: &str) -> Option<usize> {
        self.cities.iter().position(|c| c.code == code)
    }

    pub fn regions(&self) -> &[Region] {
        &self.regions
    }
    pub fn cities(&self) -> &[City] {
        &self.cities
    }
    pub fn zones(&self) -> &[Zone] {
        &self.zones
    }
    pub fn zone(&self, i: usize) -> &Zone {
        &self.zones[i]
    }
    pub fn city(&self, i: usize) -> &City {
        &self.cities[i]
    }
    pub fn region(&self, i: usize) -> &Region {
        &self.regions[i]
    }

    /// The zone serving a postal code (upper-case, no spaces): the longest matching prefix.
    pub fn zone_for(&self, compact_postal: &str) -> Option<usize> {
        self.prefixes.iter().find(|(p, _)| compact_postal.starts_with(p.as_str())).map(|(_, z)| *z)
    }
}

/// The listed warehouses, checked (unique codes, coordinates in range, non-empty texts, every
/// zone's warehouse listed); with none listed, one depot without a location per warehouse
/// code the zones name.
fn build_depots(warehouses: Vec<RawWarehouse>, zones: &[Zone]) -> Result<Vec<Depot>, String> {
    if warehouses.is_empty() {
        let mut depots: Vec<Depot> = Vec::new();
        for z in zones {
            if !depots.iter().any(|d| d.code == z.warehouse) {
                depots.push(Depot {
                    code: z.warehouse.clone(),
                    name: z.warehouse.clone(),
                    address: None,
                    location: None,
                });
            }
        }
        return Ok(depots);
    }
    let mut depots: Vec<Depot> = Vec::with_capacity(warehouses.len());
    for (i, w) in warehouses.into_iter().enumerate() {
        let at = |f: &str| format!("warehouses.{i}.{f}");
        if w.code.trim().is_empty() || w.code.len() > 40 {
            return Err(format!("{}: 1 to 40 characters", at("code")));
        }
        if depots.iter().any(|d| d.code == w.code) {
            return Err(format!("{}: {:?} is listed twice", at("code"), w.code));
        }
        for (field, text) in [("name", &w.name), ("address", &w.address)] {
            if text.trim().is_empty() || text.chars().count() > 500 {
                return Err(format!("{}: 1 to 500 characters", at(field)));
            }
        }
        // The ranges of `geo::distance::LatLng` (which this module cannot name: geo reads the
        // area).
        if !w.lat.is_finite() || !(-90.0..=90.0).contains(&w.lat) {
            return Err(format!("{}: a latitude from -90 to 90", at("lat")));
        }
        if !w.lng.is_finite() || !(-180.0..=180.0).contains(&w.lng) {
            return Err(format!("{}: a longitude from -180 to 180", at("lng")));
        }
        depots.push(Depot { code: w.code, name: w.name, address: Some(w.address), location: Some((w.lat, w.lng)) });
    }
    for (i, z) in zones.iter().enumerate() {
        if !depots.iter().any(|d| d.code == z.warehouse) {
            return Err(format!("zones.{i}.warehouse: {:?} is not a code of [[warehouses]]", z.warehouse));
        }
    }
    Ok(depots)
}

fn parse_weekday(s: &str) -> Option<i8> {
    Some(match s.to_ascii_lowercase().as_str() {
        "mon" | "monday" => 0,
        "tue" | "tuesday" => 1,
        "wed" | "wednesday" => 2,
        "thu" | "thursday" => 3,
        "fri" | "friday" => 4,
        "sat" | "saturday" => 5,
        "sun" | "sunday" => 6,
        _ => return None,
    })
}

fn check_slots(mut slots: Vec<Slot>, at: &str) -> Result<Vec<Slot>, String> {
    if slots.is_empty() {
        return Err(format!("{at}: at least one slot"));
    }
    for (j, s) in slots.iter().enumerate() {
        if s.from_time >= s.to_time || s.to_time > 24 * 60 {
            return Err(format!("{at}.{j}: from_time < to_time <= 1440 (minutes after midnight)"));
        }
        if s.closing_margin > s.from_time + 24 * 60 {
            return Err(format!("{at}.{j}.closing_margin: too large"));
        }
        if slots[..j].iter().any(|o| o.code == s.code) {
            return Err(format!("{at}.{j}.code: {:?} is used twice", s.code));
        }
    }
    slots.sort_by_key(|s| s.from_time);
    Ok(slots)
}
