//! The day's report (CONTRACT §17): the plan against what happened, as pure rules over the
//! facts the store loads — on time, ETA kept and its median error, driven distance from
//! positions — grouped per route, driver, zone and slot. No clock, no I/O.

use crate::geo::distance::LatLng;
use crate::shipments::Status;
use std::collections::BTreeMap;

/// How long before the arrival a window must have been told to count (CONTRACT §17).
pub const TOLD_AHEAD_MS: i64 = 30 * 60 * 1000;

/// The longest range one report covers, in days (a bound on one request's work).
pub const MAX_DAYS: i64 = 93;

/// One status change of a shipment, as the report needs it. Times are Unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub status: Status,
    pub at_ms: i64,
    pub reason: Option<String>,
}

/// A window shown to the recipient, from `at_ms` on (until the next one): Unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Told {
    pub from_ms: i64,
    pub to_ms: i64,
    pub at_ms: i64,
}

/// A drop-off of a published route: where it belongs (zone, slot), the slot's window as the
/// plan had it (Unix seconds), its events and the windows it was told, each oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct DropOff {
    pub unique_id: String,
    pub zone: String,
    pub slot: String,
    pub window: (i64, i64),
    pub events: Vec<Event>,
    pub told: Vec<Told>,
}

/// A published delivery route of the day: its plan's figures (Unix seconds, metres), its
/// drop-offs and its driver's reported positions of the day (`at_ms`, oldest first).
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub id: String,
    pub driver_id: String,
    pub planned_start: i64,
    pub planned_end: i64,
    pub planned_distance_m: i64,
    pub drop_offs: Vec<DropOff>,
    pub positions: Vec<(i64, LatLng)>,
}

/// One date's facts: its routes and its local day's bounds `[from, to)`, Unix milliseconds
/// (what happens on the day is what the report counts of a shipment that was on two days).
#[derive(Debug, Clone, PartialEq)]
pub struct Day {
    pub date: String,
    pub bounds: (i64, i64),
    /// The depot's time zone: the hour of an attempt is its local hour.
    pub tz: jiff::tz::TimeZone,
    pub routes: Vec<Route>,
}

/// What became of one drop-off on its day.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// When service started: the day's first `delivered` or `failed` event.
    pub served_ms: Option<i64>,
    pub delivered: bool,
    /// The failure's reason (empty when it gave none).
    pub failed: Option<String>,
    /// Handed back to its merchant (a `returned` event, on any day since).
    pub returned: bool,
    /// Service started inside the slot (`None`: not served).
    pub on_time: Option<bool>,
    /// The window told at least [`TOLD_AHEAD_MS`] before the arrival: whether the arrival
    /// was inside it, and how far it was from the window's middle (ms, absolute).
    pub eta: Option<(bool, i64)>,
}

/// The rule, for one drop-off on the day `bounds`.
pub fn outcome(d: &DropOff, bounds: (i64, i64)) -> Outcome {
    let in_day = |e: &&Event| e.at_ms >= bounds.0 && e.at_ms < bounds.1;
    let served = d.events.iter().filter(in_day).find(|e| matches!(e.status, Status::Delivered | Status::Failed));
    let served_ms = served.map(|e| e.at_ms);
    let on_time = served_ms.map(|t| t >= d.window.0 * 1000 && t <= d.window.1 * 1000);
    let eta = served_ms.and_then(|t| {
        told_before(&d.told, t).map(|w| {
            let middle2 = w.from_ms + w.to_ms; // twice the middle: no rounding
            (t >= w.from_ms && t <= w.to_ms, (2 * t - middle2).abs() / 2)
        })
    });
    Outcome {
        served_ms,
        delivered: served.is_some_and(|e| e.status == Status::Delivered),
        failed: served.filter(|e| e.status == Status::Failed).map(|e| e.reason.clone().unwrap_or_default()),
        returned: d.events.iter().any(|e| e.status == Status::Returned),
        on_time,
        eta,
    }
}

/// The window last told at least [`TOLD_AHEAD_MS`] before `arrival_ms` (none was told by
/// then: `None`). `told` is oldest first.
pub fn told_before(told: &[Told], arrival_ms: i64) -> Option<Told> {
    told.iter().filter(|w| w.at_ms <= arrival_ms - TOLD_AHEAD_MS).max_by_key(|w| w.at_ms).copied()
}

/// The median of `values` (the mean of the two middle ones for an even count).
#[allow(clippy::cast_precision_loss)]
pub fn median(values: &mut [i64]) -> Option<f64> {
    values.sort_unstable();
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2] as f64),
        _ => Some(f64::midpoint(values[n / 2 - 1] as f64, values[n / 2] as f64)),
    }
}

/// Milliseconds as minutes with one decimal.
#[allow(clippy::cast_precision_loss)]
pub fn minutes(ms: f64) -> f64 {
    (ms / 6_000.0).round() / 10.0
}

/// What a route drove: the great-circle length of its driver's positions from `start_ms` on,
/// in metres, and the span from `start_ms` to its last position or service (ms).
#[allow(clippy::cast_possible_truncation)]
pub fn driven(positions: &[(i64, LatLng)], start_ms: i64, last_service_ms: Option<i64>) -> (i64, Option<i64>) {
    let ps: Vec<&(i64, LatLng)> = positions.iter().filter(|(t, _)| *t >= start_ms).collect();
    let metres: f64 = ps.windows(2).map(|w| w[0].1.distance_m(w[1].1)).sum();
    let last = ps.last().map(|(t, _)| *t).into_iter().chain(last_service_ms).max();
    (metres.round() as i64, last.map(|l| l - start_ms))
}

/// The figures of a group of drop-offs (a route, a driver, a zone, a slot, a day, a range).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub shipments: u32,
    pub delivered: u32,
    pub failed: u32,
    /// Failures by reason (an empty reason is `""`).
    pub failed_by_reason: BTreeMap<String, u32>,
    pub returned: u32,
    /// Served (delivered or failed) on the day.
    pub served: u32,
    pub on_time: u32,
    /// Served with a window told at least 30 minutes before.
    pub eta_told: u32,
    pub eta_kept: u32,
    /// The median distance of the arrival from the told window's middle, in minutes.
    pub eta_median_error_min: Option<f64>,
    pub first_stop_ms: Option<i64>,
    pub last_stop_ms: Option<i64>,
    /// Routes only (and their sums for drivers, days and ranges).
    pub distance: Option<Distance>,
    errors: Vec<i64>,
}

/// Planned against driven: metres and seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Distance {
    pub planned_m: i64,
    pub driven_m: i64,
    pub planned_s: i64,
    /// `None` while nothing shows the route ran.
    pub driven_s: Option<i64>,
}

impl Figures {
    /// Share of served drop-offs that were on time (`None` when none was served).
    #[allow(clippy::cast_precision_loss)]
    pub fn on_time_share(&self) -> Option<f64> {
        (self.served > 0).then(|| f64::from(self.on_time) / f64::from(self.served))
    }

    /// Share of told arrivals inside their window.
    pub fn eta_kept_share(&self) -> Option<f64> {
        (self.eta_told > 0).then(|| f64::from(self.eta_kept) / f64::from(self.eta_told))
    }

    fn add(&mut self, o: &Outcome) {
        self.shipments += 1;
        self.delivered += u32::from(o.delivered);
        if let Some(reason) = &o.failed {
            self.failed += 1;
            *self.failed_by_reason.entry(reason.clone()).or_default() += 1;
        }
        self.returned += u32::from(o.returned);
        if let Some(t) = o.served_ms {
            self.served += 1;
            self.first_stop_ms = Some(self.first_stop_ms.map_or(t, |f| f.min(t)));
            self.last_stop_ms = Some(self.last_stop_ms.map_or(t, |l| l.max(t)));
        }
        self.on_time += u32::from(o.on_time == Some(true));
        if let Some((kept, error)) = o.eta {
            self.eta_told += 1;
            self.eta_kept += u32::from(kept);
            self.errors.push(error);
        }
    }

    fn add_distance(&mut self, d: Distance) {
        let s = self.distance.get_or_insert_with(Distance::default);
        s.planned_m += d.planned_m;
        s.driven_m += d.driven_m;
        s.planned_s += d.planned_s;
        s.driven_s = match (s.driven_s, d.driven_s) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
    }

    fn merge(&mut self, other: &Figures) {
        self.shipments += other.shipments;
        self.delivered += other.delivered;
        self.failed += other.failed;
        for (r, n) in &other.failed_by_reason {
            *self.failed_by_reason.entry(r.clone()).or_default() += n;
        }
        self.returned += other.returned;
        self.served += other.served;
        self.on_time += other.on_time;
        self.eta_told += other.eta_told;
        self.eta_kept += other.eta_kept;
        self.errors.extend_from_slice(&other.errors);
        self.first_stop_ms = self.first_stop_ms.into_iter().chain(other.first_stop_ms).min();
        self.last_stop_ms = self.last_stop_ms.into_iter().chain(other.last_stop_ms).max();
        if let Some(d) = other.distance {
            self.add_distance(d);
        }
    }

    fn finish(mut self) -> Figures {
        self.eta_median_error_min = median(&mut self.errors).map(minutes);
        self
    }
}

/// A day's report: its totals and its groups, each keyed and in key order.
#[derive(Debug, Clone, PartialEq)]
pub struct DayReport {
    pub date: String,
    pub totals: Figures,
    pub routes: Vec<(String, Figures)>,
    pub drivers: Vec<(String, Figures)>,
    pub zones: Vec<(String, Figures)>,
    pub slots: Vec<(String, Figures)>,
    /// By the local hour the attempt was made (`14:00`): served drop-offs only.
    pub hours: Vec<(String, Figures)>,
}

/// The report of one day.
pub fn day(d: &Day) -> DayReport {
    let (mut routes, mut drivers, mut zones, mut slots, mut hours) = (
        BTreeMap::new(),
        BTreeMap::<String, Figures>::new(),
        BTreeMap::<String, Figures>::new(),
        BTreeMap::new(),
        BTreeMap::new(),
    );
    let mut totals = Figures::default();
    for r in &d.routes {
        let mut f = Figures::default();
        let mut started = None::<i64>;
        for drop in &r.drop_offs {
            let o = outcome(drop, d.bounds);
            f.add(&o);
            zones.entry(drop.zone.clone()).or_insert_with(Figures::default).add(&o);
            slots.entry(drop.slot.clone()).or_insert_with(Figures::default).add(&o);
            if let Some(hour) = o.served_ms.and_then(|t| hour_of(t, &d.tz)) {
                hours.entry(hour).or_insert_with(Figures::default).add(&o);
            }
            let start = drop
                .events
                .iter()
                .filter(|e| e.status == Status::InTransit && e.at_ms >= d.bounds.0 && e.at_ms < d.bounds.1)
                .map(|e| e.at_ms)
                .min();
            started = started.into_iter().chain(start).min();
        }
        // The route ran from its start (its drop-offs went in transit), else as planned.
        let ran = started.or(f.first_stop_ms).is_some();
        let from = started.unwrap_or(r.planned_start * 1000);
        let (driven_m, driven_ms) = if ran { driven(&r.positions, from, f.last_stop_ms) } else { (0, None) };
        f.add_distance(Distance {
            planned_m: r.planned_distance_m,
            driven_m,
            planned_s: r.planned_end - r.planned_start,
            driven_s: driven_ms.map(|ms| ms / 1000),
        });
        drivers.entry(r.driver_id.clone()).or_default().merge(&f);
        totals.merge(&f);
        routes.insert(r.id.clone(), f);
    }
    let done = |m: BTreeMap<String, Figures>| m.into_iter().map(|(k, f)| (k, f.finish())).collect();
    DayReport {
        date: d.date.clone(),
        totals: totals.finish(),
        routes: done(routes),
        drivers: done(drivers),
        zones: done(zones),
        slots: done(slots),
        hours: done(hours),
    }
}

/// The local hour of `ms`, `14:00`.
fn hour_of(ms: i64, tz: &jiff::tz::TimeZone) -> Option<String> {
    let t = jiff::Timestamp::from_millisecond(ms).ok()?.to_zoned(tz.clone());
    Some(format!("{:02}:00", t.hour()))
}

/// A range's report: one row a day and the range's totals (its median over every day's told
/// arrivals, not a median of medians).
pub fn range(days: &[Day]) -> (Vec<DayReport>, Figures) {
    let mut totals = Figures::default();
    let reports = days
        .iter()
        .map(|d| {
            let r = day(d);
            // The totals need every error, which `finish` keeps.
            totals.merge(&r.totals);
            r
        })
        .collect();
    (reports, totals.finish())
}

#[cfg(test)]
mod tests;
