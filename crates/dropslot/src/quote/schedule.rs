//! Scheduling (CONTRACT §3.1): the earliest operating day whose pick-up slot is still open
//! in the city's time zone, and each drop-off's slot on that same day (shipment type SAME).

use jiff::civil::{Date, DateTime};
use jiff::{SignedDuration, Timestamp, Zoned};

use crate::config::{City, Slot, Zone};

/// How far ahead to look for an operating day before giving up.
const HORIZON_DAYS: i32 = 366;

#[derive(Debug, Clone, PartialEq)]
pub struct Booking {
    pub date: Date,
    pub slot: Slot,
    pub start: Zoned,
    pub end: Zoned,
}

/// Local wall time `minutes` after midnight of `date`, DST-correct (a time skipped by a
/// spring-forward gap moves later, as clocks do).
pub fn at_minutes(date: Date, minutes: u16, tz: &jiff::tz::TimeZone) -> Option<Zoned> {
    let dt: DateTime = date.to_datetime(jiff::civil::Time::midnight());
    let dt = dt.checked_add(SignedDuration::from_mins(i64::from(minutes))).ok()?;
    dt.to_zoned(tz.clone()).ok()
}

/// The earliest open pick-up slot at or after `now`: `None` only if the city never operates.
pub fn pick_up(city: &City, now: Timestamp) -> Option<Booking> {
    let today = now.to_zoned(city.tz.clone()).date();
    for offset in 0..HORIZON_DAYS {
        let date = today.checked_add(jiff::Span::new().days(offset)).ok()?;
        if !city.operates_on(date) {
            continue;
        }
        for slot in &city.pick_up_slots {
            let start = at_minutes(date, slot.from_time, &city.tz)?;
            let closes = start.timestamp() - SignedDuration::from_mins(i64::from(slot.closing_margin));
            if now < closes {
                let end = at_minutes(date, slot.to_time, &city.tz)?;
                return Some(Booking { date, slot: slot.clone(), start, end });
            }
        }
    }
    None
}

/// The drop-off slot on the pick-up's date: the earliest zone slot starting at or after the
/// pick-up slot ends, else the zone's last slot of the day.
pub fn drop_off(zone: &Zone, zone_city: &City, pick_up: &Booking) -> Option<Booking> {
    let slot = zone
        .drop_off_slots
        .iter()
        .find(|s| s.from_time >= pick_up.slot.to_time)
        .or_else(|| zone.drop_off_slots.last())?;
    let start = at_minutes(pick_up.date, slot.from_time, &zone_city.tz)?;
    let end = at_minutes(pick_up.date, slot.to_time, &zone_city.tz)?;
    Some(Booking { date: pick_up.date, slot: slot.clone(), start, end })
}

/// ISO 8601 with the local offset and no zone name: `2026-11-23T09:00:00-05:00`.
pub fn iso(z: &Zoned) -> String {
    z.timestamp().display_with_offset(z.offset()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Overrides, Settings};

    fn toronto() -> City {
        Settings::load(&Overrides::default()).unwrap().area.cities()[0].clone()
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn book(now: &str) -> Booking {
        pick_up(&toronto(), ts(now)).unwrap()
    }

    #[test]
    fn earliest_open_slot_respects_closing_margin() {
        // Monday 2026-11-23, 07:59 local (EST, -05:00): the 09:00 slot closes at 08:00.
        let b = book("2026-11-23T12:59:59Z");
        assert_eq!((b.date.to_string(), b.slot.code.as_str()), ("2026-11-23".into(), "TOR-PU-AM"));
        assert_eq!(iso(&b.start), "2026-11-23T09:00:00-05:00");
        assert_eq!(iso(&b.end), "2026-11-23T12:00:00-05:00");
        // Exactly at the cut-off the AM slot is closed: the PM slot.
        let b = book("2026-11-23T13:00:00Z");
        assert_eq!(b.slot.code, "TOR-PU-PM");
        // 10:59:59 local: PM (12:00, margin 60) still open; 11:00 it closes → next day.
        assert_eq!(book("2026-11-23T15:59:59Z").slot.code, "TOR-PU-PM");
        let b = book("2026-11-23T16:00:00Z");
        assert_eq!((b.date.to_string(), b.slot.code.as_str()), ("2026-11-24".into(), "TOR-PU-AM"));
    }

    #[test]
    fn skips_sundays_and_holidays() {
        // Saturday 2026-11-28 after cut-off → Sunday closed → Monday 30th.
        assert_eq!(book("2026-11-28T20:00:00Z").date.to_string(), "2026-11-30");
        // Thursday 2026-12-24 evening → 25th and 26th are holidays, 27th Sunday → Monday 28th.
        assert_eq!(book("2026-12-24T23:00:00Z").date.to_string(), "2026-12-28");
    }

    #[test]
    fn dst_spring_forward_week_of_2026() {
        // Sunday 8 March 2026 02:00 EST → 03:00 EDT. Saturday 7 March evening books Monday 9th,
        // whose slot is on daylight time (-04:00).
        let b = book("2026-03-07T23:00:00Z");
        assert_eq!(b.date.to_string(), "2026-03-09");
        assert_eq!(iso(&b.start), "2026-03-09T09:00:00-04:00");
        // Friday 6 March is still standard time.
        assert_eq!(iso(&book("2026-03-06T05:00:00Z").start), "2026-03-06T09:00:00-05:00");
        // Cut-off on Monday 9 March: 08:00 EDT = 12:00 UTC.
        assert_eq!(book("2026-03-09T11:59:59Z").slot.code, "TOR-PU-AM");
        assert_eq!(book("2026-03-09T12:00:00Z").slot.code, "TOR-PU-PM");
    }

    #[test]
    fn dst_fall_back_week_of_2026() {
        // Sunday 1 November 2026 02:00 EDT → 01:00 EST. Saturday 31 Oct (EDT) cut-off is
        // 08:00 EDT = 12:00 UTC; Monday 2 Nov (EST) cut-off is 08:00 EST = 13:00 UTC.
        assert_eq!(book("2026-10-31T11:59:59Z").slot.code, "TOR-PU-AM");
        assert_eq!(iso(&book("2026-10-31T11:59:59Z").start), "2026-10-31T09:00:00-04:00");
        let monday = book("2026-11-01T12:00:00Z");
        assert_eq!(monday.date.to_string(), "2026-11-02");
        assert_eq!(iso(&monday.start), "2026-11-02T09:00:00-05:00");
        assert_eq!(book("2026-11-02T12:30:00Z").slot.code, "TOR-PU-AM", "12:30 UTC is 07:30 EST");
        assert_eq!(book("2026-11-02T13:00:00Z").slot.code, "TOR-PU-PM");
    }

    #[test]
    fn drop_off_follows_pick_up_slot() {
        let s = Settings::load(&Overrides::default()).unwrap();
        let city = &s.area.cities()[0];
        let zone = &s.area.zones()[0];
        let am = book("2026-11-23T12:00:00Z");
        let d = drop_off(zone, city, &am).unwrap();
        assert_eq!((d.slot.code.as_str(), iso(&d.start).as_str()), ("TOR-DT-PM", "2026-11-23T14:00:00-05:00"));
        let pm = book("2026-11-23T14:00:00Z");
        // The PM pick-up ends at 15:00: the 14:00 drop-off slot starts too early, so 18:00.
        assert_eq!(drop_off(zone, city, &pm).unwrap().slot.code, "TOR-DT-EV");
    }
}
