//! `[routing]`: where a day plan's road times come from and how long a stop takes
//! (CONTRACT §12).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRouting {
    speed_kmh: f64,
    detour: f64,
    stop_seconds: u32,
    parcel_seconds: u32,
    #[serde(default)]
    osrm_url: String,
    osrm_timeout_seconds: u64,
    osrm_table_size: usize,
    osrm_concurrency: usize,
}

/// The embedded road model of one city: roads are `detour` times longer than the straight
/// line, driven at `speed_kmh` on average (stops, lights and turns included). How it drives
/// is `routing::roads`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoadModel {
    pub speed_kmh: f64,
    pub detour: f64,
}

impl RoadModel {
    /// A city's average driving speed must be a real speed, and a road is never shorter than
    /// the straight line (nor, in a city, more than three times longer).
    ///
    /// # Errors
    /// Which of the two is out of range, by its key.
    pub fn new(speed_kmh: f64, detour: f64) -> Result<Self, String> {
        if !(speed_kmh.is_finite() && (1.0..=200.0).contains(&speed_kmh)) {
            return Err(format!("speed_kmh: {speed_kmh} is not from 1 to 200 km/h"));
        }
        if !(detour.is_finite() && (1.0..=3.0).contains(&detour)) {
            return Err(format!("detour: {detour} is not from 1.0 to 3.0"));
        }
        Ok(Self { speed_kmh, detour })
    }
}

/// Road times and service times, validated.
#[derive(Debug, Clone)]
pub struct RoutingSettings {
    /// The embedded model of a city without its own.
    pub roads: RoadModel,
    /// City code → its own model (`road_speed_kmh`, `road_detour` in its `[[cities]]` entry).
    pub city_roads: BTreeMap<String, RoadModel>,
    /// Service time at a stop: `stop_seconds` plus `parcel_seconds` for each parcel.
    pub stop_seconds: u32,
    pub parcel_seconds: u32,
    /// When set, road times come from this OSRM server's `table` service.
    pub osrm: Option<OsrmSettings>,
}

#[derive(Debug, Clone)]
pub struct OsrmSettings {
    /// No trailing slash: `http://127.0.0.1:5000`.
    pub url: String,
    /// Each request, connecting included.
    pub timeout: Duration,
    /// Most sources (and most destinations) in one request: OSRM's `--max-table-size`, 100
    /// by default.
    pub table_size: usize,
    /// Requests in flight at once.
    pub concurrency: usize,
}

impl RoutingSettings {
    /// The embedded road model of the city with this code.
    pub fn roads_of(&self, city: &str) -> RoadModel {
        self.city_roads.get(city).copied().unwrap_or(self.roads)
    }

    /// Service time of a stop handing over or taking `parcels` parcels.
    pub fn service_seconds(&self, parcels: u32) -> i64 {
        i64::from(self.stop_seconds) + i64::from(self.parcel_seconds) * i64::from(parcels)
    }
}

/// `cities` are the `[[cities]]` entries' own `road_speed_kmh` and `road_detour`, by code.
pub(super) fn build(
    raw: &RawRouting,
    cities: &[(String, Option<f64>, Option<f64>)],
) -> Result<RoutingSettings, String> {
    let roads = RoadModel::new(raw.speed_kmh, raw.detour).map_err(|e| format!("routing.{e}"))?;
    let mut city_roads = BTreeMap::new();
    for (i, (code, speed, detour)) in cities.iter().enumerate() {
        if speed.is_none() && detour.is_none() {
            continue;
        }
        let model = RoadModel::new(speed.unwrap_or(roads.speed_kmh), detour.unwrap_or(roads.detour))
            .map_err(|e| format!("cities.{i}.road_{e}"))?;
        city_roads.insert(code.clone(), model);
    }
    if raw.stop_seconds > 3_600 || raw.parcel_seconds > 600 {
        return Err("routing.stop_seconds: at most 3600, routing.parcel_seconds: at most 600".into());
    }
    let osrm = if raw.osrm_url.is_empty() {
        None
    } else {
        let url = raw.osrm_url.trim_end_matches('/').to_string();
        let host = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")).unwrap_or("");
        if host.is_empty() || host.contains(['?', '#', ' ']) || host.starts_with('/') {
            return Err(format!("routing.osrm_url: {url:?} must be an http:// or https:// base URL without a query"));
        }
        if !(1..=300).contains(&raw.osrm_timeout_seconds) {
            return Err("routing.osrm_timeout_seconds: 1 to 300".into());
        }
        if !(1..=10_000).contains(&raw.osrm_table_size) {
            return Err("routing.osrm_table_size: 1 to 10000".into());
        }
        if !(1..=64).contains(&raw.osrm_concurrency) {
            return Err("routing.osrm_concurrency: 1 to 64".into());
        }
        Some(OsrmSettings {
            url,
            timeout: Duration::from_secs(raw.osrm_timeout_seconds),
            table_size: raw.osrm_table_size,
            concurrency: raw.osrm_concurrency,
        })
    };
    Ok(RoutingSettings { roads, city_roads, stop_seconds: raw.stop_seconds, parcel_seconds: raw.parcel_seconds, osrm })
}

#[cfg(test)]
mod tests {
    use crate::config::{Overrides, RoadModel, Settings};

    fn load(fragment: &str) -> Result<Settings, String> {
        Settings::from_toml_fragment(fragment, &Overrides::default()).map_err(|e| e.to_string())
    }

    #[test]
    fn each_city_drives_at_its_own_speed_or_the_default() {
        let s = load("[routing]\nspeed_kmh = 30.0\ndetour = 1.5\n").unwrap();
        assert_eq!(s.routing.roads_of("toronto"), RoadModel { speed_kmh: 24.0, detour: 1.3 }, "the demo city's own");
        assert_eq!(s.routing.roads_of("elsewhere"), RoadModel { speed_kmh: 30.0, detour: 1.5 });
        assert_eq!(s.routing.service_seconds(4), 180 + 4 * 30);
        assert!(s.routing.osrm.is_none());
    }

    #[test]
    fn bad_road_settings_are_refused_with_their_key() {
        let e = load("[routing]\nspeed_kmh = 0.0\n").unwrap_err();
        assert!(e.contains("routing.speed_kmh"), "{e}");
        let e = load("[routing]\nosrm_url = \"ftp://x\"\n").unwrap_err();
        assert!(e.contains("routing.osrm_url"), "{e}");
        let e = load("[routing]\nosrm_url = \"http://x:5000\"\nosrm_table_size = 0\n").unwrap_err();
        assert!(e.contains("routing.osrm_table_size"), "{e}");
        let city = "[[cities]]\ncode = \"c\"\nname = \"C\"\nregion = \"ON\"\ntime_zone = \"UTC\"\n\
                    weekdays = [\"mon\"]\nroad_detour = 0.5\n\
                    [[cities.pick_up_slots]]\ncode = \"P\"\nname = \"P\"\nfrom_time = 540\nto_time = 720\n\
                    [[zones]]\ncode = \"Z\"\ncity = \"c\"\nwarehouse = \"W\"\npostal_prefixes = [\"M5\"]\n\
                    [[zones.drop_off_slots]]\ncode = \"D\"\nname = \"D\"\nfrom_time = 840\nto_time = 1080\n";
        let e = load(city).unwrap_err();
        assert!(e.contains("cities.0.road_detour"), "{e}");
        let s = load("[routing]\nosrm_url = \"http://127.0.0.1:5000/\"\n").unwrap();
        assert_eq!(s.routing.osrm.unwrap().url, "http://127.0.0.1:5000");
    }
}
