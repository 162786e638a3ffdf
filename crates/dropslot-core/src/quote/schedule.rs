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
        if let Some(b) = city.pick_up_slots.iter().find_map(|slot| open(date, slot, &city.tz, now)) {
            return Some(b);
        }
    }
    None
}

/// Why no booking exists within the horizon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unschedulable {
    /// The pick-up city has no bookable slot.
    PickUp,
    /// That drop-off (index) cannot be served on any day the pick-up can.
    DropOff(usize),
    /// Each drop-off can be served with the pick-up, but no single day serves them all.
    Together,
}

/// Books the pick-up and every drop-off together (shipment type SAME: all on one date).
///
/// The date is the earliest one, counted in the pick-up city, on which the pick-up city and
/// the city of every drop-off operate (operating weekday, not a holiday). The pick-up slot
/// is the earliest still-open slot that day for which every drop-off has an open slot too;
/// see [`drop_off`] for a drop-off's slot. A slot is open while `now` is before its start
/// minus its `closing_margin`, for pick-up and drop-off slots alike.
pub fn book(
    pick_up_city: &City,
    drop_offs: &[(&Zone, &City)],
    now: Timestamp,
) -> Result<(Booking, Vec<Booking>), Unschedulable> {
    if let Some(found) = search(pick_up_city, drop_offs, now) {
        return Ok(found);
    }
    if pick_up(pick_up_city, now).is_none() {
        return Err(Unschedulable::PickUp);
    }
    for (i, d) in drop_offs.iter().enumerate() {
        if search(pick_up_city, std::slice::from_ref(d), now).is_none() {
            return Err(Unschedulable::DropOff(i));
        }
    }
    Err(Unschedulable::Together)
}

fn search(pick_up_city: &City, drop_offs: &[(&Zone, &City)], now: Timestamp) -> Option<(Booking, Vec<Booking>)> {
    let today = now.to_zoned(pick_up_city.tz.clone()).date();
    for offset in 0..HORIZON_DAYS {
        let date = today.checked_add(jiff::Span::new().days(offset)).ok()?;
        if !pick_up_city.operates_on(date) || !drop_offs.iter().all(|(_, c)| c.operates_on(date)) {
            continue;
        }
        for slot in &pick_up_city.pick_up_slots {
            let Some(booking) = open(date, slot, &pick_up_city.tz, now) else { continue };
            let booked: Option<Vec<Booking>> = drop_offs.iter().map(|(z, c)| drop_off(z, c, &booking, now)).collect();
            if let Some(booked) = booked {
                return Some((booking, booked));
            }
        }
    }
    None
}

/// `slot` on `date`, if it can still be booked at `now`.
fn open(date: Date, slot: &Slot, tz: &jiff::tz::TimeZone, now: Timestamp) -> Option<Booking> {
    let start = at_minutes(date, slot.from_time, tz)?;
    let closes = start.timestamp() - SignedDuration::from_mins(i64::from(slot.closing_margin));
    if now >= closes {
        return None;
    }
    let end = at_minutes(date, slot.to_time, tz)?;
    Some(Booking { date, slot: slot.clone(), start, end })
}

/// The drop-off slot on the pick-up's date: the earliest open zone slot starting at or after
/// the pick-up slot ends, else the zone's last slot of the day if it is open.
pub fn drop_off(zone: &Zone, zone_city: &City, pick_up: &Booking, now: Timestamp) -> Option<Booking> {
    let date = pick_up.date;
    zone.drop_off_slots
        .iter()
        .filter(|s| s.from_time >= pick_up.slot.to_time)
        .find_map(|s| open(date, s, &zone_city.tz, now))
        .or_else(|| zone.drop_off_slots.last().and_then(|s| open(date, s, &zone_city.tz, now)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Overrides, Settings};
    use crate::time::iso;
    use jiff::civil::Weekday;

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
    fn drop_off_cities_and_closing_margins_are_respected() {
        let s = Settings::load(&Overrides::default()).unwrap();
        let pick_up_city = &s.area.cities()[0];
        let zone = s.area.zones()[0].clone();
        // A drop-off city that does not operate on Mondays: Monday's pick-up moves to Tuesday.
        let mut closed_mondays = pick_up_city.clone();
        closed_mondays.weekdays = closed_mondays.weekdays.without(Weekday::Monday);
        let (p, d) = super::book(pick_up_city, &[(&zone, &closed_mondays)], ts("2026-11-23T12:00:00Z")).unwrap();
        assert_eq!((p.date.to_string(), d[0].date.to_string()), ("2026-11-24".into(), "2026-11-24".into()));
        // A drop-off city's holiday is skipped the same way.
        let mut holiday = pick_up_city.clone();
        holiday.holidays.insert("2026-11-23".parse().unwrap());
        let (p, _) = super::book(pick_up_city, &[(&zone, &holiday)], ts("2026-11-23T12:00:00Z")).unwrap();
        assert_eq!(p.date.to_string(), "2026-11-24");
        // A copy of the city that operates only on `days`.
        let operating_on = |days: &[Weekday]| {
            let mut c = pick_up_city.clone();
            for d in 0..7 {
                let day = Weekday::from_monday_zero_offset(d).unwrap();
                if !days.contains(&day) {
                    c.weekdays = c.weekdays.without(day);
                }
            }
            c
        };
        // A drop-off city that never operates: that drop-off is unschedulable, named by index.
        let never = operating_on(&[]);
        assert_eq!(
            super::book(pick_up_city, &[(&zone, pick_up_city), (&zone, &never)], ts("2026-11-23T12:00:00Z")),
            Err(super::Unschedulable::DropOff(1))
        );
        // Two drop-off cities that each work with the pick-up but never on the same day.
        let only_monday = operating_on(&[Weekday::Monday]);
        let not_monday = operating_on(&[
            Weekday::Tuesday,
            Weekday::Wednesday,
            Weekday::Thursday,
            Weekday::Friday,
            Weekday::Saturday,
        ]);
        assert_eq!(
            super::book(pick_up_city, &[(&zone, &only_monday), (&zone, &not_monday)], ts("2026-11-23T12:00:00Z")),
            Err(super::Unschedulable::Together)
        );
        // A drop-off slot whose margin has passed is not booked; the next open one is.
        let mut tight = zone.clone();
        tight.drop_off_slots[0].closing_margin = 0;
        let first = tight.drop_off_slots.iter().position(|s| s.from_time >= 720).unwrap();
        tight.drop_off_slots[first].closing_margin = tight.drop_off_slots[first].from_time;
        let (_, d) = super::book(pick_up_city, &[(&tight, pick_up_city)], ts("2026-11-23T12:00:00Z")).unwrap();
        assert_ne!(d[0].slot.code, tight.drop_off_slots[first].code);
    }

    #[test]
    fn drop_off_follows_pick_up_slot() {
        let s = Settings::load(&Overrides::default()).unwrap();
        let city = &s.area.cities()[0];
        let zone = &s.area.zones()[0];
        let am = book("2026-11-23T12:00:00Z");
        let d = drop_off(zone, city, &am, ts("2026-11-23T12:00:00Z")).unwrap();
        assert_eq!((d.slot.code.as_str(), iso(&d.start).as_str()), ("TOR-DT-PM", "2026-11-23T14:00:00-05:00"));
        let pm = book("2026-11-23T14:00:00Z");
        // The PM pick-up ends at 15:00: the 14:00 drop-off slot starts too early, so 18:00.
        assert_eq!(drop_off(zone, city, &pm, ts("2026-11-23T14:00:00Z")).unwrap().slot.code, "TOR-DT-EV");
    }
}
