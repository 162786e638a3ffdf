//! How instants are shown on the wire: ISO 8601 in the offset of the city they happen in.
//! Shared by order reads, tracking, webhooks and the dashboard.

use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};

use crate::config::ServiceArea;

/// ISO 8601 with the local offset and no zone name: `2026-11-23T09:00:00-05:00`.
pub fn iso(z: &Zoned) -> String {
    z.timestamp().display_with_offset(z.offset()).to_string()
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
