//! Scheduling (CONTRACT §3.1): the earliest operating day whose pick-up slot is still open
//! in the city's time zone, and each drop-off's slot on that same day (shipment type SAME).

use jiff::civil::{Date, DateTime};
use jiff::{SignedDuration, Timestamp, Zoned};

use std::collections::HashMap;

use super::capacity::{Capacity, Load, SlotDate, SlotKind, Visit};
use crate::config::{City, Slot, Zone};
use crate::geo::distance::LatLng;

/// How far ahead [`pick_up`] looks for an operating day before giving up.
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

/// A drop-off's slot asked for by the request (CONTRACT §10): that date and that slot of
/// its zone, or a 422.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub date: Date,
    pub slot: String,
}

/// One drop-off as the schedule books it.
#[derive(Debug, Clone, Copy)]
pub struct Need<'a> {
    pub zone: &'a Zone,
    pub city: &'a City,
    /// Its parcels (the room it takes in a slot with a parcel limit).
    pub parcels: u32,
    pub asked: Option<&'a Asked>,
    /// Where it is, for a depot that books on its fleet (`None` there: no room).
    pub at: Option<LatLng>,
    /// Its parcels' weight in grams.
    pub grams: i64,
}

/// A drop-off booked into `booking` at `at` as its depot's tentative plan sees it.
pub fn visit(booking: &Booking, at: LatLng, parcels: u32, grams: i64) -> Visit {
    Visit {
        id: 0,
        at,
        from: booking.start.timestamp().as_second(),
        to: booking.end.timestamp().as_second(),
        parcels,
        grams,
    }
}

/// What a request's earlier drop-offs take: their load in each slot, and their stops in each
/// fleet depot's date.
#[derive(Debug, Default)]
struct Taken {
    loads: HashMap<SlotDate, Load>,
    visits: HashMap<(String, Date), Vec<Visit>>,
}

impl Need<'_> {
    /// Whether this drop-off's stop in `booking` fits its depot's fleet beside `earlier` (the
    /// request's stops there already): always where the depot does not book on its fleet.
    fn fleet_fits(&self, booking: &Booking, capacity: &Capacity, earlier: &[Visit]) -> Option<Vec<Visit>> {
        let Some(depot) = capacity.fleet_depot(&self.zone.code) else { return Some(Vec::new()) };
        let at = self.at?;
        let mut visits = earlier.to_vec();
        visits.push(visit(booking, at, self.parcels, self.grams));
        capacity.fleet_fits(depot, booking.date, &visits).then_some(visits)
    }
}

/// Why no booking exists within the horizon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unschedulable {
    /// The pick-up city has no open pick-up slot with room.
    PickUp,
    /// That drop-off (index) cannot be served on any day the pick-up can.
    DropOff(usize),
    /// Each drop-off can be served with the pick-up, but no single day serves them all.
    Together,
    /// That drop-off's asked-for slot cannot be booked, and why.
    Asked(usize, AskedProblem),
    /// That drop-off asks for another date than an earlier one: all are delivered on one date.
    AskedDates(usize),
}

/// Why an asked-for slot cannot be booked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskedProblem {
    /// Not a drop-off slot of the address's zone.
    Unknown,
    /// Not open on that date: past its closing time, a day the city does not operate, or
    /// outside the booking horizon.
    Closed,
    /// No room left for this drop-off.
    Full,
    /// Open with room, but no open pick-up slot with room that day reaches it.
    Unreachable,
}

/// Books the pick-up and every drop-off together (shipment type SAME: all on one date).
///
/// The date is the earliest one within `horizon` days (today included, counted in the
/// pick-up city) on which the pick-up city and the city of every drop-off operate (operating
/// weekday, not a holiday), or the date the drop-offs ask for. The pick-up slot is the
/// earliest open slot with room that day for which every drop-off has an open slot with room
/// too; see [`drop_off`] for a drop-off's slot. A slot is open while `now` is before its start
/// minus its `closing_margin`, for pick-up and drop-off slots alike; a full slot (`capacity`,
/// counting what the request's earlier drop-offs take) is skipped like a closed one.
pub fn book(
    pick_up_city: &City,
    drop_offs: &[Need<'_>],
    now: Timestamp,
    horizon: u16,
    capacity: &Capacity,
) -> Result<(Booking, Vec<Booking>), Unschedulable> {
    let mut date: Option<&Date> = None;
    for (i, d) in drop_offs.iter().enumerate() {
        let Some(asked) = d.asked else { continue };
        if !d.zone.drop_off_slots.iter().any(|s| s.code == asked.slot) {
            return Err(Unschedulable::Asked(i, AskedProblem::Unknown));
        }
        if **date.get_or_insert(&asked.date) != asked.date {
            return Err(Unschedulable::AskedDates(i));
        }
    }
    let within = Window { now, horizon, capacity };
    if let Some(found) = within.search(pick_up_city, drop_offs) {
        return Ok(found);
    }
    if within.search(pick_up_city, &[]).is_none() {
        return Err(Unschedulable::PickUp);
    }
    for (i, d) in drop_offs.iter().enumerate() {
        if within.search(pick_up_city, std::slice::from_ref(d)).is_some() {
            continue;
        }
        let Some(asked) = d.asked else { return Err(Unschedulable::DropOff(i)) };
        return Err(Unschedulable::Asked(i, within.why_not(pick_up_city, d, asked)));
    }
    Err(Unschedulable::Together)
}

/// The booking horizon from `now`, and the capacity it books against.
struct Window<'a> {
    now: Timestamp,
    horizon: u16,
    capacity: &'a Capacity,
}

impl Window<'_> {
    /// The dates of the horizon, counted in `city`'s zone.
    fn dates(&self, city: &City) -> impl Iterator<Item = Date> {
        let today = self.now.to_zoned(city.tz.clone()).date();
        (0..i32::from(self.horizon)).filter_map(move |offset| today.checked_add(jiff::Span::new().days(offset)).ok())
    }

    fn search(&self, pick_up_city: &City, drop_offs: &[Need<'_>]) -> Option<(Booking, Vec<Booking>)> {
        let asked = drop_offs.iter().find_map(|d| d.asked.map(|a| a.date));
        for date in self.dates(pick_up_city) {
            if asked.is_some_and(|a| a != date)
                || !pick_up_city.operates_on(date)
                || !drop_offs.iter().all(|d| d.city.operates_on(date))
            {
                continue;
            }
            for slot in &pick_up_city.pick_up_slots {
                let Some(booking) = self.pick_up_slot(pick_up_city, slot, date) else { continue };
                let mut taken = Taken::default();
                let booked: Option<Vec<Booking>> =
                    drop_offs.iter().map(|d| drop_off(d, &booking, self.now, self.capacity, &mut taken)).collect();
                if let Some(booked) = booked {
                    return Some((booking, booked));
                }
            }
        }
        None
    }

    /// `slot` on `date` if it is open and has room for one more pick-up.
    fn pick_up_slot(&self, city: &City, slot: &Slot, date: Date) -> Option<Booking> {
        let booking = open(date, slot, &city.tz, self.now)?;
        let at = SlotDate { kind: SlotKind::PickUp, place: city.code.clone(), slot: slot.code.clone(), date };
        self.capacity.fits(slot.limit(), &at, Load::default(), Load { stops: 1, parcels: 0 }).then_some(booking)
    }

    /// Why a drop-off's asked-for (known) slot cannot be booked alone with the pick-up.
    fn why_not(&self, pick_up_city: &City, d: &Need<'_>, asked: &Asked) -> AskedProblem {
        let in_horizon = self.dates(pick_up_city).any(|date| date == asked.date);
        let slot = d.zone.drop_off_slots.iter().find(|s| s.code == asked.slot);
        let Some(slot) =
            slot.filter(|_| in_horizon && d.city.operates_on(asked.date) && pick_up_city.operates_on(asked.date))
        else {
            return AskedProblem::Closed;
        };
        if open(asked.date, slot, &d.city.tz, self.now).is_none() {
            return AskedProblem::Closed;
        }
        let at =
            SlotDate { kind: SlotKind::DropOff, place: d.zone.code.clone(), slot: slot.code.clone(), date: asked.date };
        if !self.capacity.fits(slot.limit(), &at, Load::default(), Load { stops: 1, parcels: d.parcels }) {
            return AskedProblem::Full;
        }
        if let Some(booking) = open(asked.date, slot, &d.city.tz, self.now)
            && d.fleet_fits(&booking, self.capacity, &[]).is_none()
        {
            return AskedProblem::Full;
        }
        AskedProblem::Unreachable
    }
}

/// `slot` on `date`, if it can still be booked at `now`.
pub fn open(date: Date, slot: &Slot, tz: &jiff::tz::TimeZone, now: Timestamp) -> Option<Booking> {
    let start = at_minutes(date, slot.from_time, tz)?;
    let closes = start.timestamp() - SignedDuration::from_mins(i64::from(slot.closing_margin));
    if now >= closes {
        return None;
    }
    let end = at_minutes(date, slot.to_time, tz)?;
    Some(Booking { date, slot: slot.clone(), start, end })
}

/// The drop-off slot on the pick-up's date: the earliest open zone slot with room starting at
/// or after the pick-up slot ends, else the zone's last slot of the day if it is open and has
/// room; only the asked-for slot when the drop-off asks for one. `taken` is what the
/// request's earlier drop-offs hold in each slot, and takes this one's room.
fn drop_off(
    d: &Need<'_>,
    pick_up: &Booking,
    now: Timestamp,
    capacity: &Capacity,
    taken: &mut Taken,
) -> Option<Booking> {
    let date = pick_up.date;
    let want = Load { stops: 1, parcels: d.parcels };
    let slots = &d.zone.drop_off_slots;
    let candidates = slots.iter().filter(|s| s.from_time >= pick_up.slot.to_time).chain(slots.last());
    for slot in candidates {
        if d.asked.is_some_and(|a| a.slot != slot.code) {
            continue;
        }
        let Some(booking) = open(date, slot, &d.city.tz, now) else { continue };
        let at = SlotDate { kind: SlotKind::DropOff, place: d.zone.code.clone(), slot: slot.code.clone(), date };
        let also = taken.loads.get(&at).copied().unwrap_or_default();
        if !capacity.fits(slot.limit(), &at, also, want) {
            continue;
        }
        let key = capacity.fleet_depot(&d.zone.code).map(|depot| (depot.to_string(), date));
        let earlier = key.as_ref().and_then(|k| taken.visits.get(k)).map_or(&[][..], Vec::as_slice);
        let Some(visits) = d.fleet_fits(&booking, capacity, earlier) else { continue };
        if let Some(key) = key {
            taken.visits.insert(key, visits);
        }
        taken.loads.insert(at, also + want);
        return Some(booking);
    }
    None
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
        let (p, d) = books(pick_up_city, &[(&zone, &closed_mondays)], ts("2026-11-23T12:00:00Z")).unwrap();
        assert_eq!((p.date.to_string(), d[0].date.to_string()), ("2026-11-24".into(), "2026-11-24".into()));
        // A drop-off city's holiday is skipped the same way.
        let mut holiday = pick_up_city.clone();
        holiday.holidays.insert("2026-11-23".parse().unwrap());
        let (p, _) = books(pick_up_city, &[(&zone, &holiday)], ts("2026-11-23T12:00:00Z")).unwrap();
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
            books(pick_up_city, &[(&zone, pick_up_city), (&zone, &never)], ts("2026-11-23T12:00:00Z")),
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
            books(pick_up_city, &[(&zone, &only_monday), (&zone, &not_monday)], ts("2026-11-23T12:00:00Z")),
            Err(super::Unschedulable::Together)
        );
        // A drop-off slot whose margin has passed is not booked; the next open one is.
        let mut tight = zone.clone();
        tight.drop_off_slots[0].closing_margin = 0;
        let first = tight.drop_off_slots.iter().position(|s| s.from_time >= 720).unwrap();
        tight.drop_off_slots[first].closing_margin = tight.drop_off_slots[first].from_time;
        let (_, d) = books(pick_up_city, &[(&tight, pick_up_city)], ts("2026-11-23T12:00:00Z")).unwrap();
        assert_ne!(d[0].slot.code, tight.drop_off_slots[first].code);
    }

    #[test]
    fn drop_off_follows_pick_up_slot() {
        let s = Settings::load(&Overrides::default()).unwrap();
        let city = &s.area.cities()[0];
        let zone = &s.area.zones()[0];
        let am = book("2026-11-23T12:00:00Z");
        let need = Need { zone, city, parcels: 1, asked: None, at: None, grams: 0 };
        let d = drop_off(&need, &am, ts("2026-11-23T12:00:00Z"), &Capacity::empty(), &mut Taken::default()).unwrap();
        assert_eq!((d.slot.code.as_str(), iso(&d.start).as_str()), ("TOR-DT-PM", "2026-11-23T14:00:00-05:00"));
        let pm = book("2026-11-23T14:00:00Z");
        // The PM pick-up ends at 15:00: the 14:00 drop-off slot starts too early, so 18:00.
        let d = drop_off(&need, &pm, ts("2026-11-23T14:00:00Z"), &Capacity::empty(), &mut Taken::default()).unwrap();
        assert_eq!(d.slot.code, "TOR-DT-EV");
    }

    /// `super::book` over (zone, city) pairs of one parcel each, nothing asked, no capacity.
    fn books(
        pick_up_city: &City,
        pairs: &[(&Zone, &City)],
        now: Timestamp,
    ) -> Result<(Booking, Vec<Booking>), Unschedulable> {
        let needs: Vec<Need<'_>> =
            pairs.iter().map(|(zone, city)| Need { zone, city, parcels: 1, asked: None, at: None, grams: 0 }).collect();
        super::book(pick_up_city, &needs, now, 366, &Capacity::empty())
    }

    fn limited(zone: &Zone, slot: usize, stops: u32, parcels: Option<u32>) -> Zone {
        let mut z = zone.clone();
        z.drop_off_slots[slot].capacity = Some(crate::config::SlotCapacity { stops: Some(stops), parcels });
        z
    }

    fn at(zone: &Zone, slot: usize, date: &str) -> SlotDate {
        SlotDate {
            kind: SlotKind::DropOff,
            place: zone.code.clone(),
            slot: zone.drop_off_slots[slot].code.clone(),
            date: date.parse().unwrap(),
        }
    }

    #[test]
    fn a_full_slot_is_skipped_like_a_closed_one() {
        let s = Settings::load(&Overrides::default()).unwrap();
        let city = &s.area.cities()[0];
        let zone = limited(&s.area.zones()[0], 0, 2, None);
        let now = ts("2026-11-23T12:00:00Z");
        let need = [Need { zone: &zone, city, parcels: 1, asked: None, at: None, grams: 0 }];
        let full =
            Capacity::new(HashMap::new(), HashMap::from([(at(&zone, 0, "2026-11-23"), Load { stops: 2, parcels: 0 })]));
        let (_, d) = super::book(city, &need, now, 14, &Capacity::empty()).unwrap();
        assert_eq!(d[0].slot.code, zone.drop_off_slots[0].code);
        let (p, d) = super::book(city, &need, now, 14, &full).unwrap();
        assert_eq!(
            (p.date.to_string(), d[0].slot.code.as_str()),
            ("2026-11-23".into(), zone.drop_off_slots[1].code.as_str())
        );
        // Two drop-offs of one request take two places: with one left, the second moves on.
        let one_left =
            Capacity::new(HashMap::new(), HashMap::from([(at(&zone, 0, "2026-11-23"), Load { stops: 1, parcels: 0 })]));
        let (_, d) = super::book(city, &[need[0], need[0]], now, 14, &one_left).unwrap();
        assert_ne!(d[0].slot.code, d[1].slot.code);
        // A parcel limit binds the same way.
        let parcels = limited(&s.area.zones()[0], 0, 100, Some(3));
        let heavy = [Need { zone: &parcels, city, parcels: 4, asked: None, at: None, grams: 0 }];
        assert_ne!(
            super::book(city, &heavy, now, 14, &Capacity::empty()).unwrap().1[0].slot.code,
            parcels.drop_off_slots[0].code
        );
        // Every slot full on every day of the horizon: nothing to book.
        let mut tiny = s.area.zones()[0].clone();
        for slot in &mut tiny.drop_off_slots {
            slot.capacity = Some(crate::config::SlotCapacity { stops: Some(0), parcels: None });
        }
        let none = [Need { zone: &tiny, city, parcels: 1, asked: None, at: None, grams: 0 }];
        assert_eq!(super::book(city, &none, now, 14, &Capacity::empty()), Err(Unschedulable::DropOff(0)));
    }

    #[test]
    fn an_asked_slot_is_booked_or_refused_with_its_reason() {
        let s = Settings::load(&Overrides::default()).unwrap();
        let city = &s.area.cities()[0];
        let zone = limited(&s.area.zones()[0], 1, 1, None);
        let now = ts("2026-11-23T12:00:00Z");
        let ask = |date: &str, slot: &str| Asked { date: date.parse().unwrap(), slot: slot.into() };
        let book = |asked: &Asked, capacity: &Capacity| {
            super::book(
                city,
                &[Need { zone: &zone, city, parcels: 1, asked: Some(asked), at: None, grams: 0 }],
                now,
                14,
                capacity,
            )
        };
        let ev = zone.drop_off_slots[1].code.clone();
        let (p, d) = book(&ask("2026-11-25", &ev), &Capacity::empty()).unwrap();
        assert_eq!((p.date.to_string(), d[0].slot.code.clone()), ("2026-11-25".into(), ev.clone()));
        assert_eq!(
            book(&ask("2026-11-25", "NOPE"), &Capacity::empty()),
            Err(Unschedulable::Asked(0, AskedProblem::Unknown))
        );
        // Sunday: the city does not operate; 2026-12-20 is past the 14 days; yesterday is gone.
        for date in ["2026-11-29", "2026-12-20", "2026-11-22"] {
            assert_eq!(
                book(&ask(date, &ev), &Capacity::empty()),
                Err(Unschedulable::Asked(0, AskedProblem::Closed)),
                "{date}"
            );
        }
        let full =
            Capacity::new(HashMap::new(), HashMap::from([(at(&zone, 1, "2026-11-25"), Load { stops: 1, parcels: 0 })]));
        assert_eq!(book(&ask("2026-11-25", &ev), &full), Err(Unschedulable::Asked(0, AskedProblem::Full)));
        // Two drop-offs asking two dates.
        let (a, b) = (ask("2026-11-24", &ev), ask("2026-11-25", &ev));
        let two = [
            Need { zone: &zone, city, parcels: 1, asked: Some(&a), at: None, grams: 0 },
            Need { zone: &zone, city, parcels: 1, asked: Some(&b), at: None, grams: 0 },
        ];
        assert_eq!(super::book(city, &two, now, 14, &Capacity::empty()), Err(Unschedulable::AskedDates(1)));
    }
}
