//! The tentative plan of one depot and date (issue 45): every drop-off booked for that date on
//! the routes of the drivers working it, kept by insertion as orders come, so that a slot is
//! sold only while the fleet can still fit the stop in (`[capacity] mode = "fleet"`).
//!
//! It holds the same hard rules as a day plan (CONTRACT §12, [`super::timed`]): each stop
//! served inside its window (waiting allowed), each van within its parcels and grams, each route
//! leaving the depot no earlier than its driver's shift starts and back before it ends, the
//! service time of every stop, travel on the embedded road model. A booked set of shipments is
//! accepted only with a plan that routes it, so the plan is the proof that the booked set fits;
//! a day plan starts from it ([`Tentative::routes`]), and never places fewer.
//!
//! Pure: the store loads the rows and persists each change ([`Change`]); the quote asks
//! [`Tentative::fits`]. Each route caches its schedule both ways (earliest service start and
//! latest service start of every stop), so whether a stop fits between two others is O(1), and
//! only the positions whose times can meet the stop's window are tried.

use std::sync::Arc;

use jiff::civil::Date;
use jiff::tz::TimeZone;

use crate::config::{CapacitySettings, RoutingSettings, ServiceArea, Unplaced};
use crate::geo::distance::{LatLng, Spot};
use crate::routing::roads::{Leg, RoadModel};

use super::ServiceTime;

/// What a store needs to build a depot's tentative plans: the area (depots, zones, cities),
/// the road and service times, and which depots book on their fleet.
#[derive(Debug, Clone)]
pub struct Rules {
    pub area: Arc<ServiceArea>,
    pub routing: RoutingSettings,
    pub capacity: CapacitySettings,
    /// What happens to a booked drop-off the fleet can no longer route.
    pub unplaced: Unplaced,
}

/// One depot as its tentative plans see it.
#[derive(Debug, Clone)]
pub struct DepotRules {
    pub at: LatLng,
    pub model: RoadModel,
    pub service: ServiceTime,
    /// Its city's time zone: a driver's shift is local time there.
    pub tz: TimeZone,
}

impl Rules {
    /// Depot `code` when it books on its fleet (and so has coordinates and a zone).
    pub fn fleet_depot(&self, code: &str) -> Option<DepotRules> {
        if !self.capacity.fleet(code) {
            return None;
        }
        let (lat, lng) = self.area.depot(code)?.location?;
        let city = self.area.depot_zones(code).next().map(|z| self.area.city(z.city))?;
        Some(DepotRules {
            at: LatLng::new(lat, lng).ok()?,
            model: self.routing.roads_of(&city.code),
            service: ServiceTime {
                stop_seconds: i64::from(self.routing.stop_seconds),
                parcel_seconds: i64::from(self.routing.parcel_seconds),
            },
            tz: city.tz.clone(),
        })
    }

    /// The depot of zone `zone` when it books on its fleet.
    pub fn fleet_depot_of_zone(&self, zone: &str) -> Option<&str> {
        let z = self.area.zone(self.area.zone_by_code(zone)?);
        self.capacity.fleet(&z.warehouse).then_some(z.warehouse.as_str())
    }

    /// The codes of the depots that book on their fleet.
    pub fn fleet_depots(&self) -> impl Iterator<Item = &str> {
        self.area.depots().iter().map(|d| d.code.as_str()).filter(|c| self.capacity.fleet(c))
    }
}

/// Driver `id`'s van on `date` when they work that weekday: their shift as Unix seconds in
/// `tz` (a time a clock change skips moves later, as clocks do).
pub fn van(id: &str, d: &crate::fleet::Driver, date: Date, tz: &TimeZone) -> Option<Van> {
    if !d.weekdays.contains(date.weekday()) {
        return None;
    }
    let at = |minutes: u16| {
        let midnight = date.to_datetime(jiff::civil::Time::midnight());
        let local = midnight.checked_add(jiff::SignedDuration::from_mins(i64::from(minutes))).ok()?;
        local.to_zoned(tz.clone()).ok().map(|z| z.timestamp().as_second())
    };
    Some(Van {
        driver: id.to_string(),
        parcels: i64::from(d.vehicle.capacity_parcels),
        grams: i64::from(d.vehicle.capacity_kg) * 1000,
        start: at(d.shift.start)?,
        end: at(d.shift.end)?,
    })
}

/// A van of the date: its driver, capacities and shift (Unix seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Van {
    pub driver: String,
    pub parcels: i64,
    pub grams: i64,
    pub start: i64,
    pub end: i64,
}

pub use crate::quote::capacity::Visit;

/// Where a visit was put: route `lane` (index into the vans), at `position` among its visits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub lane: usize,
    pub position: usize,
    /// What it adds: seconds of travel × 2^24 + metres (the day plan's objective).
    pub cost: i64,
}

/// A stored visit's new route and order key, to persist.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub id: i64,
    pub driver: String,
    pub seq: f64,
}

/// What keeps a visit out: the rule that bound in the van that came closest, checked in
/// this order (no van at all, then the load, then the shift, then the window).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Binding {
    /// No driver works from the depot that day.
    NoVan,
    /// Every van is full: parcels.
    Parcels,
    /// Every van is full: kilograms.
    Kilograms,
    /// The vans have room, but none can be back at the depot before its driver's shift ends.
    Shift,
    /// The vans have room, but none can reach the stop inside its window among its other stops.
    Window,
}

impl Binding {
    /// The wire name (`GET /admin/capacity`'s `binds`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoVan => "no_van",
            Self::Parcels => "vans_parcels",
            Self::Kilograms => "vans_kg",
            Self::Shift => "shift_hours",
            Self::Window => "window",
        }
    }

    /// In a dispatcher's words.
    pub fn describe(self) -> &'static str {
        match self {
            Self::NoVan => "no driver works from this depot on this date",
            Self::Parcels => "every van is full (parcels)",
            Self::Kilograms => "every van is full (kilograms)",
            Self::Shift => "no driver could be back at the depot before the end of the shift",
            Self::Window => "no van can reach it inside its window among its other stops",
        }
    }
}

/// The gap between two order keys of a route made from scratch.
const SEQ_STEP: f64 = 1024.0;

/// How many routes that can take a new stop an order compares (the nearest first): the
/// cheapest of them wins. Every route is compared only when fewer can take it; the solver's
/// improvement between orders makes up for the rest (docs/architecture.md, issue 45).
pub const NEAREST: usize = 3;

/// How many routes a placement picks nearest-first one at a time before it sorts the rest.
const PICKED: usize = 8;

/// One van's route: its visits in order with their schedule cached.
#[derive(Debug, Clone, Default)]
struct Lane {
    visits: Vec<Visit>,
    /// Each visit's position with its trigonometry done (legs are computed often).
    spots: Vec<Spot>,
    /// The road into each visit (from the one before, or the depot), and back to the depot
    /// from the last: a change of one place re-times the route without computing the others.
    into: Vec<Leg>,
    home: Leg,
    /// [`Lane::closed`]'s answers by (window start, window end, service): a route is shared by
    /// the plan's versions until it changes, so a route full for a window is known at a glance
    /// by every later order and quote. A changed route starts empty.
    closed: Closed,
    /// Order keys, increasing (persisted: a visit's place without rewriting its neighbours').
    seq: Vec<f64>,
    /// Earliest service start at each visit.
    start: Vec<i64>,
    /// Latest service start at each visit that keeps every later window and the shift's end.
    latest: Vec<i64>,
    parcels: i64,
    grams: i64,
    /// Seconds × 2^24 + metres over the route's legs.
    cost: i64,
    metres: i64,
    /// Where its stops are on average (the depot while it has none): which routes a new stop
    /// is tried in first.
    centre: (f64, f64),
    /// The longest time between leaving one stop (or the depot) and the latest start of the
    /// next (or the shift's end): a new stop needs at least its service time there, so a route
    /// with less is passed by without looking at its positions (a full day costs a look per
    /// route).
    widest: i64,
}

/// The tentative plan of one depot and date.
#[derive(Debug, Clone)]
pub struct Tentative {
    depot: LatLng,
    depot_spot: Spot,
    model: RoadModel,
    service: ServiceTime,
    /// Shared: a plan is cloned (a quote's copy, a request's several stops) without copying
    /// its routes; a change copies only the route it changes.
    vans: Arc<Vec<Van>>,
    lanes: Vec<Arc<Lane>>,
    /// Whether a stop of a window, service time and load could fit at all, wherever it is:
    /// answered once per plan (a day full for it is then passed in O(1) by every quote).
    open: Open,
}

/// [`Lane::closed`]'s memory; a copy (a route about to change) starts empty.
#[derive(Debug, Default)]
struct Closed(std::sync::Mutex<std::collections::HashMap<(i64, i64, i64), Option<Binding>>>);

impl Clone for Closed {
    fn clone(&self) -> Closed {
        Closed::default()
    }
}

impl Lane {
    /// What keeps any stop of the window `from..to` and service `service` out of this route,
    /// travel left out: no position whose gap holds the service inside the window (`depart(p)`
    /// is when the route leaves position `p - 1`, or the depot). Necessary, not sufficient;
    /// remembered while the route is unchanged.
    fn closed(&self, van: &Van, from: i64, to: i64, service: i64, depart: impl Fn(usize) -> i64) -> Option<Binding> {
        let key = (from, to, service);
        let mut memo = self.closed.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(&known) = memo.get(&key) {
            return known;
        }
        let n = self.visits.len();
        let first = self.latest.partition_point(|&t| t < from + service);
        let mut shift = false;
        let open = (first..=n).any(|p| {
            let d = depart(p);
            let latest = if p == n { van.end } else { self.latest[p] };
            let fits = d <= to && d.max(from) + service <= latest;
            shift |= !fits && p == n && d <= to;
            fits
        });
        let answer = if open {
            None
        } else if shift {
            Some(Binding::Shift)
        } else {
            Some(Binding::Window)
        };
        if memo.len() > 256 {
            memo.clear();
        }
        memo.insert(key, answer);
        answer
    }
}

/// Each route's answer to [`Tentative::lanes_for`], by shape (window start, window end,
/// service, parcels, grams). Kept by a copy of the plan and through its changes: a stop added
/// changes one route's answers, which are asked again at their next use ([`Open::changed`]),
/// and the others stand. A quote after each order then costs a lookup and a look at the
/// changed route, not a look at every route (issue 45's sync figure).
#[derive(Debug, Default)]
struct Open(std::sync::Mutex<std::collections::HashMap<Shape, Answers>>);

/// One shape's answers: for each route, `None` when it has a gap for the shape (travel left
/// out), else what bars it; and the routes changed since, to ask again. `missed`: by place
/// (many stops share one: an address without coordinates is placed at its postal code), the
/// routes where a place was looked for with travel and none found; a changed route is
/// looked at again.
#[derive(Debug, Clone)]
struct Answers {
    each: Vec<Option<Binding>>,
    changed: Vec<usize>,
    missed: std::collections::HashMap<(u64, u64), Vec<(usize, Binding)>>,
}

/// The key of a stop's place in [`Answers::missed`].
fn place_key(at: LatLng) -> (u64, u64) {
    (at.lat().to_bits(), at.lng().to_bits())
}

/// A stop's shape as far as [`Tentative::lanes_for`] asks: window start and end, service,
/// parcels, grams.
type Shape = (i64, i64, i64, u32, i64);

impl Clone for Open {
    fn clone(&self) -> Open {
        Open(std::sync::Mutex::new(self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()))
    }
}

impl Open {
    /// Route `lane` changed: each shape asks it again at its next use (a shape that has
    /// waited for many changes is forgotten instead).
    fn changed(&mut self, lane: usize) {
        let known = self.0.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        known.retain(|_, a| a.changed.len() < 64);
        for a in known.values_mut() {
            a.changed.push(lane);
        }
    }
}

/// A tentative plan assembled from stored rows, and what did not fit it.
#[derive(Debug)]
pub struct Assembled {
    pub plan: Tentative,
    /// Visits whose stored place changed (or that had none): persist them.
    pub changes: Vec<Change>,
    /// Visits that fit nowhere any more (a van removed or made smaller, a shift shortened),
    /// with what bound: they leave the plan (the caller rebooks or holds them).
    pub unplaced: Vec<(Visit, Binding)>,
}

fn weigh(leg: Leg) -> i64 {
    leg.seconds * crate::routing::instance::TIME_OVER_DISTANCE + leg.metres
}

impl Tentative {
    /// An empty plan over `vans` (the drivers working the date), from `depot`.
    pub fn new(depot: LatLng, model: RoadModel, service: ServiceTime, vans: Vec<Van>) -> Tentative {
        let mut plan = Tentative {
            depot,
            depot_spot: Spot::of(depot),
            model,
            service,
            vans: Arc::new(vans),
            lanes: Vec::new(),
            open: Open::default(),
        };
        plan.lanes = (0..plan.vans.len())
            .map(|lane| {
                let mut l = Lane::default();
                plan.refresh(lane, &mut l);
                Arc::new(l)
            })
            .collect();
        plan
    }

    /// Builds the plan from stored rows: each visit with the driver and order key it had, or
    /// none. Visits keep their routes and order where the route still keeps every rule; the
    /// rest (their van gone, a route now breaking a rule from its last visit back, new ones)
    /// are put in by cheapest insertion, in their given order; what fits nowhere is unplaced.
    pub fn assemble(
        depot: LatLng,
        model: RoadModel,
        service: ServiceTime,
        vans: Vec<Van>,
        rows: Vec<(Visit, Option<(String, f64)>)>,
    ) -> Assembled {
        let mut plan = Tentative::new(depot, model, service, vans);
        let mut placed: Vec<Vec<(f64, Visit)>> = vec![Vec::new(); plan.vans.len()];
        let mut loose = Vec::new();
        for (visit, at) in rows {
            match at.and_then(|(driver, seq)| plan.vans.iter().position(|v| v.driver == driver).map(|l| (l, seq))) {
                Some((lane, seq)) if seq.is_finite() => placed[lane].push((seq, visit)),
                _ => loose.push(visit),
            }
        }
        for (lane, mut visits) in placed.into_iter().enumerate() {
            visits.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.id.cmp(&b.1.id)));
            // Keys must increase strictly: two equal keys (a corrupt or concurrent write) are
            // renumbered below by re-inserting the later one.
            let mut kept: Vec<(f64, Visit)> = Vec::with_capacity(visits.len());
            for (seq, v) in visits {
                if kept.last().is_some_and(|(s, _)| *s >= seq) {
                    loose.push(v);
                } else {
                    kept.push((seq, v));
                }
            }
            // A route that breaks a rule as stored loses its last visits until it keeps them all.
            while !kept.is_empty() {
                let l = plan.lane_of(lane, &kept);
                if plan.keeps(lane, &l) {
                    plan.lanes[lane] = Arc::new(l);
                    break;
                }
                if let Some((_, v)) = kept.pop() {
                    loose.insert(0, v);
                }
            }
        }
        // Routes were replaced whole: nothing asked before stands.
        plan.open = Open::default();
        let mut changes = Vec::new();
        let mut unplaced = Vec::new();
        for v in loose {
            match plan.insert(v) {
                Ok((_, mut c)) => changes.append(&mut c),
                Err(b) => unplaced.push((v, b)),
            }
        }
        Assembled { plan, changes, unplaced }
    }

    pub fn vans(&self) -> &[Van] {
        &self.vans
    }

    /// Every van's visits in order, as (driver, drop-off ids): where a day plan starts.
    pub fn routes(&self) -> Vec<(String, Vec<i64>)> {
        self.vans
            .iter()
            .zip(&self.lanes)
            .map(|(v, l)| (v.driver.clone(), l.visits.iter().map(|x| x.id).collect()))
            .collect()
    }

    /// How many visits the plan holds.
    pub fn len(&self) -> usize {
        self.lanes.iter().map(|l| l.visits.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the plan holds drop-off `id`.
    pub fn holds(&self, id: i64) -> bool {
        self.lanes.iter().any(|l| l.visits.iter().any(|v| v.id == id))
    }

    /// Service time at `v`.
    pub fn service_of(&self, v: &Visit) -> i64 {
        self.service.stop_seconds + self.service.parcel_seconds * i64::from(v.parcels)
    }

    fn leg(&self, a: LatLng, b: LatLng) -> Leg {
        if a == b { Leg::default() } else { self.model.leg(a, b) }
    }

    /// [`Tentative::leg`] between spots: the same road, its trigonometry done once per point.
    fn leg_s(&self, a: &Spot, b: &Spot) -> Leg {
        if a.at() == b.at() { Leg::default() } else { self.model.leg_spots(a, b) }
    }

    /// A lane made of `visits` in order for van `lane`, its schedule computed.
    fn lane_of(&self, lane: usize, visits: &[(f64, Visit)]) -> Lane {
        let mut l = Lane {
            visits: visits.iter().map(|(_, v)| *v).collect(),
            seq: visits.iter().map(|(s, _)| *s).collect(),
            ..Lane::default()
        };
        self.refresh(lane, &mut l);
        l
    }

    /// Recomputes a lane's roads, schedule, load and cost from its visits.
    fn refresh(&self, lane: usize, l: &mut Lane) {
        l.spots = l.visits.iter().map(|v| Spot::of(v.at)).collect();
        let mut prev = self.depot_spot;
        l.into = l
            .spots
            .iter()
            .map(|s| {
                let leg = self.leg_s(&prev, s);
                prev = *s;
                leg
            })
            .collect();
        l.home = self.leg_s(&prev, &self.depot_spot);
        self.retime(lane, l);
    }

    /// Re-times a lane from its visits and the roads it keeps (`into`, `home`).
    fn retime(&self, lane: usize, l: &mut Lane) {
        l.closed = Closed::default();
        let van = &self.vans[lane];
        let n = l.visits.len();
        l.start.resize(n, 0);
        l.latest.resize(n, 0);
        let (mut time, mut cost, mut metres, mut parcels, mut grams) = (van.start, 0, 0, 0, 0);
        for (i, v) in l.visits.iter().enumerate() {
            let leg = l.into[i];
            cost += weigh(leg);
            metres += leg.metres;
            time = (time + leg.seconds).max(v.from);
            l.start[i] = time;
            time += self.service_of(v);
            parcels += i64::from(v.parcels);
            grams += v.grams;
        }
        cost += weigh(l.home);
        metres += l.home.metres;
        let mut deadline = van.end;
        for i in (0..n).rev() {
            let v = &l.visits[i];
            let out = if i + 1 == n { l.home } else { l.into[i + 1] };
            deadline = v.to.min(deadline - out.seconds - self.service_of(v));
            l.latest[i] = deadline;
        }
        l.parcels = parcels;
        l.grams = grams;
        l.cost = cost;
        l.metres = metres;
        l.widest = (0..=n)
            .map(|p| {
                let depart = if p == 0 { van.start } else { l.start[p - 1] + self.service_of(&l.visits[p - 1]) };
                let latest = if p == n { van.end } else { l.latest[p] };
                latest - depart
            })
            .max()
            .unwrap_or(0);
        l.centre = if n == 0 {
            (self.depot.lat(), self.depot.lng())
        } else {
            let (la, lo) = l.visits.iter().fold((0.0, 0.0), |(a, o), v| (a + v.at.lat(), o + v.at.lng()));
            (la / n as f64, lo / n as f64)
        };
    }

    /// When route `l` of `van` leaves position `p - 1` (the depot at `p == 0`).
    fn depart(&self, l: &Lane, van: &Van, p: usize) -> i64 {
        if p == 0 { van.start } else { l.start[p - 1] + self.service_of(&l.visits[p - 1]) }
    }

    /// Whether a lane keeps every rule for van `lane`.
    fn keeps(&self, lane: usize, l: &Lane) -> bool {
        let van = &self.vans[lane];
        l.parcels <= van.parcels && l.grams <= van.grams && l.start.iter().zip(&l.latest).all(|(s, t)| s <= t)
    }

    /// Where `v` goes in van `lane` at the least cost (or, with `first`, the first place found),
    /// or what bars it from that van.
    fn best_in(
        &self,
        lane: usize,
        v: &Visit,
        u: &Spot,
        home: (Leg, Leg),
        first: bool,
    ) -> Result<(usize, i64), Binding> {
        let van = &self.vans[lane];
        let l = &self.lanes[lane];
        if l.parcels + i64::from(v.parcels) > van.parcels {
            return Err(Binding::Parcels);
        }
        if l.grams + v.grams > van.grams {
            return Err(Binding::Kilograms);
        }
        let service = self.service_of(v);
        if l.widest < service {
            return Err(Binding::Window);
        }
        let n = l.visits.len();
        // Alone from the depot: if even that misses the window or the shift, no position will.
        let (out, back) = home;
        let earliest = (van.start + out.seconds).max(v.from);
        if earliest > v.to {
            return Err(Binding::Window);
        }
        if earliest + service + back.seconds > van.end {
            return Err(Binding::Shift);
        }
        // (What `Lane::closed` rules out the caller has left out already: `lanes_for`.)
        // A position before the first visit whose latest start leaves room for this one's
        // service cannot work (latest starts only grow along a route).
        let from = l.latest.partition_point(|&t| t < v.from + service);
        let mut best: Option<(usize, i64)> = None;
        let mut shift_bound = false;
        for p in from..=n {
            let (prev, depart) = if p == 0 {
                (&self.depot_spot, van.start)
            } else {
                (&l.spots[p - 1], l.start[p - 1] + self.service_of(&l.visits[p - 1]))
            };
            if depart > v.to {
                break; // it arrives later still, and later positions only depart later
            }
            let (next, latest) = if p == n { (&self.depot_spot, van.end) } else { (&l.spots[p], l.latest[p]) };
            // No room even with no travel at all: the legs need not be computed.
            if depart.max(v.from) + service > latest {
                shift_bound |= p == n;
                continue;
            }
            // The depot's legs are known already, and the road from `prev` to `next` is the
            // route's own.
            let to_u = if p == 0 { out } else { self.leg_s(prev, u) };
            let arrive = depart + to_u.seconds;
            if arrive > v.to {
                break;
            }
            let begin = arrive.max(v.from);
            let from_u = if p == n { back } else { self.leg_s(u, next) };
            if begin + service + from_u.seconds > latest {
                shift_bound |= p == n;
                continue;
            }
            if first {
                best = Some((p, 0));
                break;
            }
            let delta = weigh(to_u) + weigh(from_u) - weigh(if p == n { l.home } else { l.into[p] });
            if best.is_none_or(|(_, d)| delta < d) {
                best = Some((p, delta));
            }
        }
        best.ok_or(if shift_bound { Binding::Shift } else { Binding::Window })
    }

    /// Where `v` would go: the routes are tried nearest first (by where their stops are on
    /// average); the cheapest place among the first [`NEAREST`] routes that can take it, or
    /// (with `first`) the first place found; else what bound in the van that came closest.
    /// A stop that fits nowhere is told so only after every route was tried.
    pub fn place(&self, v: &Visit, first: bool) -> Result<Place, Binding> {
        let each = self.lanes_for(v);
        let Some(open) = each.iter().position(Option::is_none) else {
            return Err(each.iter().flatten().copied().max().unwrap_or(Binding::NoVan));
        };
        let u = Spot::of(v.at);
        let home = (self.leg_s(&self.depot_spot, &u), self.leg_s(&u, &self.depot_spot));
        // Any place answers a quote: the first route known to have a gap for the shape is
        // tried first (on a day filling up, the nearest routes are the full ones).
        let mut missed = Vec::new();
        if first {
            match self.best_in(open, v, &u, home, true) {
                Ok((position, cost)) => return Ok(Place { lane: open, position, cost }),
                Err(b) => missed.push((open, b)),
            }
        }
        let cos = v.at.lat().to_radians().cos();
        let far = |l: &Lane| {
            let (dy, dx) = (l.centre.0 - v.at.lat(), (l.centre.1 - v.at.lng()) * cos);
            dy * dy + dx * dx
        };
        // Only the routes with a gap are looked at; the others say what bars them.
        let mut why = each.iter().flatten().copied().max().unwrap_or(Binding::NoVan);
        let mut order: Vec<(f64, usize)> = each
            .iter()
            .enumerate()
            .filter(|&(i, b)| b.is_none() && missed.first().is_none_or(|&(m, _)| m != i))
            .map(|(i, _)| (far(&self.lanes[i]), i))
            .collect();
        let (mut best, mut found): (Option<Place>, usize) = (None, 0);
        // The nearest routes picked one at a time (a place is usually found in the first few),
        // the rest sorted only when that many were tried.
        let mut tried = 0;
        while !order.is_empty() {
            let next = if tried < PICKED {
                let i = (0..order.len())
                    .min_by(|&a, &b| order[a].0.total_cmp(&order[b].0).then(order[a].1.cmp(&order[b].1)));
                order.swap_remove(i.unwrap_or(0)).1
            } else {
                if tried == PICKED {
                    order.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
                }
                order.pop().map_or(0, |(_, lane)| lane)
            };
            tried += 1;
            match self.best_in(next, v, &u, home, first) {
                Ok((position, cost)) => {
                    found += 1;
                    if best.is_none_or(|b| cost < b.cost) {
                        best = Some(Place { lane: next, position, cost });
                    }
                    if first || found >= NEAREST {
                        break;
                    }
                }
                Err(b) => {
                    why = why.max(b);
                    missed.push((next, b));
                }
            }
        }
        self.missed(v, missed);
        best.ok_or(why)
    }

    /// What keeps a stop like `v` (its window, service time and load) out of route `lane`, if
    /// anything: no room for its load, or no position whose gap, travel left out, holds its
    /// service inside its window. `None` is necessary, not sufficient (travel is what the
    /// places check).
    fn lane_bound(&self, lane: usize, v: &Visit, service: i64) -> Option<Binding> {
        let (van, l) = (&self.vans[lane], &self.lanes[lane]);
        if l.parcels + i64::from(v.parcels) > van.parcels {
            Some(Binding::Parcels)
        } else if l.grams + v.grams > van.grams {
            Some(Binding::Kilograms)
        } else if l.widest < service {
            Some(Binding::Window)
        } else {
            l.closed(van, v.from, v.to, service, |p| self.depart(l, van, p))
        }
    }

    /// [`Tentative::lane_bound`] of every route for a stop like `v`, remembered per plan and
    /// kept through its changes, so a day full for such stops, or open for them, costs a
    /// lookup.
    fn lanes_for(&self, v: &Visit) -> Vec<Option<Binding>> {
        let service = self.service_of(v);
        let key = (v.from, v.to, service, v.parcels, v.grams);
        let mut open = self.open.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(a) = open.get_mut(&key) {
            for lane in std::mem::take(&mut a.changed) {
                a.each[lane] = self.lane_bound(lane, v, service);
                for missed in a.missed.values_mut() {
                    missed.retain(|&(l, _)| l != lane);
                }
            }
            let mut each = a.each.clone();
            for &(lane, why) in a.missed.get(&place_key(v.at)).into_iter().flatten() {
                each[lane] = Some(why);
            }
            return each;
        }
        if open.len() > 1024 {
            open.clear();
        }
        let each: Vec<Option<Binding>> = (0..self.lanes.len()).map(|lane| self.lane_bound(lane, v, service)).collect();
        open.insert(key, Answers { each: each.clone(), changed: Vec::new(), missed: std::collections::HashMap::new() });
        each
    }

    /// Remembers the routes where a stop like `v`, at its place, found no place with travel
    /// ([`Tentative::lanes_for`] leaves them out until they change).
    fn missed(&self, v: &Visit, lanes: Vec<(usize, Binding)>) {
        if lanes.is_empty() {
            return;
        }
        let key = (v.from, v.to, self.service_of(v), v.parcels, v.grams);
        let mut open = self.open.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(a) = open.get_mut(&key) {
            if a.missed.len() > 256 {
                a.missed.clear();
            }
            a.missed.entry(place_key(v.at)).or_default().extend(lanes);
        }
    }

    /// Whether `v` fits beside what the plan holds (the first place found).
    pub fn fits(&self, v: &Visit) -> bool {
        self.place(v, true).is_ok()
    }

    /// Whether every one of `vs` fits, together, in order.
    pub fn fits_all(&self, vs: &[Visit]) -> bool {
        match vs {
            [] => true,
            [one] => self.fits(one),
            _ => {
                let mut plan = self.clone();
                vs.iter().all(|v| plan.insert(*v).is_ok())
            }
        }
    }

    /// Puts `v` at its cheapest place; returns it with the order keys to persist.
    ///
    /// # Errors
    /// What bound, when it fits nowhere (the plan is unchanged).
    pub fn insert(&mut self, v: Visit) -> Result<(Place, Vec<Change>), Binding> {
        let place = self.place(&v, false)?;
        Ok((place, self.insert_at(place, v)))
    }

    /// Puts `v` at `place` (found by [`Tentative::place`] on this plan); the order keys to
    /// persist: its own, or the whole route's when the keys around it had no room left.
    pub fn insert_at(&mut self, place: Place, v: Visit) -> Vec<Change> {
        let Place { lane, position, .. } = place;
        let mut l = Arc::unwrap_or_clone(std::mem::take(&mut self.lanes[lane]));
        let below = if position == 0 { 0.0 } else { l.seq[position - 1] };
        let above = l.seq.get(position).copied().unwrap_or(below + 2.0 * SEQ_STEP);
        let mid = below + (above - below) / 2.0;
        let u = Spot::of(v.at);
        let prev = if position == 0 { self.depot_spot } else { l.spots[position - 1] };
        let next = l.spots.get(position).copied().unwrap_or(self.depot_spot);
        let (to_u, from_u) = (self.leg_s(&prev, &u), self.leg_s(&u, &next));
        if position == l.visits.len() {
            l.home = from_u;
        } else {
            l.into[position] = from_u;
        }
        l.into.insert(position, to_u);
        l.spots.insert(position, u);
        l.visits.insert(position, v);
        let driver = &self.vans[lane].driver;
        let changes = if mid > below && mid < above {
            l.seq.insert(position, mid);
            vec![Change { id: v.id, driver: driver.clone(), seq: mid }]
        } else {
            l.seq = (1..=l.visits.len()).map(|i| i as f64 * SEQ_STEP).collect();
            l.visits.iter().zip(&l.seq).map(|(x, s)| Change { id: x.id, driver: driver.clone(), seq: *s }).collect()
        };
        self.retime(lane, &mut l);
        self.lanes[lane] = Arc::new(l);
        self.open.changed(lane);
        changes
    }

    /// Whether every route keeps every rule (the plan is the proof: tests assert it).
    pub fn valid(&self) -> bool {
        (0..self.lanes.len()).all(|i| self.keeps(i, &self.lanes[i]))
    }

    /// Total cost (seconds × 2^24 + metres) and distance in metres of the routes.
    pub fn totals(&self) -> (i64, i64) {
        self.lanes.iter().fold((0, 0), |(c, m), l| (c + l.cost, m + l.metres))
    }

    /// Each van's use: (driver, stops, parcels, grams, first service start, back at the depot).
    pub fn uses(&self) -> Vec<VanUse> {
        self.vans
            .iter()
            .zip(&self.lanes)
            .map(|(van, l)| {
                let back = match (l.visits.last(), l.start.last()) {
                    (Some(v), Some(s)) => s + self.service_of(v) + self.leg(v.at, self.depot).seconds,
                    _ => van.start,
                };
                VanUse {
                    driver: van.driver.clone(),
                    stops: l.visits.len(),
                    parcels: l.parcels,
                    grams: l.grams,
                    capacity_parcels: van.parcels,
                    capacity_grams: van.grams,
                    shift_start: van.start,
                    shift_end: van.end,
                    back,
                }
            })
            .collect()
    }

    /// [`Tentative::room`] for a stop of the plan's average load at the depot: what a slot's
    /// window `from..to` can still take as `GET /admin/capacity` and the dashboard show it.
    pub fn room_in(&self, from: i64, to: i64) -> Room {
        let n = self.len() as i64;
        let (parcels, grams) = self.lanes.iter().fold((0_i64, 0_i64), |(p, g), l| (p + l.parcels, g + l.grams));
        let probe = Visit {
            id: 0,
            at: self.depot,
            from,
            to,
            parcels: if n > 0 { u32::try_from((parcels + n - 1) / n).unwrap_or(1).max(1) } else { 1 },
            grams: if n > 0 { (grams / n).max(1) } else { 1000 },
        };
        self.room(from, to, &probe)
    }

    /// About how many more stops like `probe` (its load and place) the window `from..to` can
    /// take, and what binds. An estimate for the people who watch the day (whether a stop fits
    /// depends on where it is, which only [`Tentative::fits`] answers): for each van, the stops
    /// its remaining parcels and kilograms allow, and those its free time inside the window and
    /// the shift allows (the window's span less the service and an average leg of each stop it
    /// serves there, at the probe's service and an average leg each); the smaller of the two,
    /// summed over the vans.
    pub fn room(&self, from: i64, to: i64, probe: &Visit) -> Room {
        if self.vans.is_empty() {
            return Room { stops: 0, binds: Some(Binding::NoVan) };
        }
        let service = self.service_of(probe);
        let (seconds, legs) = self.lanes.iter().fold((0, 0), |(s, n), l| {
            let legs = if l.visits.is_empty() { 0 } else { l.visits.len() as i64 + 1 };
            (s + (l.cost >> 24), n + legs)
        });
        // With no stop yet, the leg out from the depot stands for an average one.
        let leg = if legs > 0 { seconds / legs } else { self.leg(self.depot, probe.at).seconds };
        let per_stop = (service + leg).max(1);
        let (mut total, mut load_bound, mut time_left, mut shift_open) = (0_i64, None, false, false);
        for (van, l) in self.vans.iter().zip(&self.lanes) {
            let by_parcels =
                if probe.parcels == 0 { i64::MAX } else { (van.parcels - l.parcels).max(0) / i64::from(probe.parcels) };
            let by_grams = if probe.grams <= 0 { i64::MAX } else { (van.grams - l.grams).max(0) / probe.grams };
            let open_from = from.max(van.start + self.leg(self.depot, probe.at).seconds);
            let open_to = to.min(van.end - self.leg(probe.at, self.depot).seconds - service);
            shift_open |= open_to >= open_from || to < van.start;
            let mut free = open_to - open_from;
            for (i, v) in l.visits.iter().enumerate() {
                if (open_from..=open_to).contains(&l.start[i]) {
                    free -= self.service_of(v) + leg;
                }
            }
            let by_time = if free >= 0 { free / per_stop + 1 } else { 0 };
            time_left |= by_time > 0;
            let load = by_parcels.min(by_grams);
            if load == 0 && by_time > 0 {
                load_bound = Some(if by_parcels == 0 { Binding::Parcels } else { Binding::Kilograms });
            }
            total = total.saturating_add(load.min(by_time));
        }
        let binds = match total {
            0 if time_left => load_bound.or(Some(Binding::Parcels)),
            0 if !shift_open => Some(Binding::Shift),
            0 => Some(Binding::Window),
            _ => None,
        };
        Room { stops: u32::try_from(total).unwrap_or(u32::MAX), binds }
    }
}

impl Tentative {
    /// The same visits on better routes, found by the day plan's solver started from these
    /// routes (`seed` and `budget` as for a day plan), when it finds a cheaper plan that keeps
    /// every rule and every visit; `None` otherwise (the plan as it is stays).
    pub fn improved(&self, seed: u64, budget: &mut dyn crate::routing::Budget) -> Option<Tentative> {
        use super::{Candidate, Depot, Driver, PlanKind, Problem, StopKind};
        let visits: Vec<Visit> = self.lanes.iter().flat_map(|l| l.visits.iter().copied()).collect();
        if visits.len() < 2 || self.vans.is_empty() {
            return None;
        }
        let drivers = self
            .vans
            .iter()
            .map(|v| Driver {
                id: v.driver.clone(),
                capacity_parcels: v.parcels,
                capacity_grams: v.grams,
                shift_start: v.start,
                shift_end: v.end,
            })
            .collect();
        let candidates = visits
            .iter()
            .map(|v| Candidate {
                unique_id: v.id.to_string(),
                kind: StopKind::DropOff,
                at: v.at,
                from: v.from,
                to: v.to,
                parcels: v.parcels,
                grams: v.grams,
                address: String::new(),
                receiver: String::new(),
                phone: String::new(),
            })
            .collect();
        let depot = Depot { code: String::new(), address: String::new(), at: self.depot };
        let problem = Problem::ungrouped(PlanKind::Delivery, depot, drivers, self.service, candidates);
        let mut matrix = crate::routing::roads::Matrix::zero(problem.points().len());
        let points = problem.points();
        for (a, &pa) in points.iter().enumerate() {
            for (b, &pb) in points.iter().enumerate() {
                matrix.set(a, b, self.leg(pa, pb));
            }
        }
        let mut instance = problem.instance(&matrix, &[]).ok()?;
        let routes: Vec<(String, Vec<String>)> =
            self.routes().into_iter().map(|(driver, ids)| (driver, ids.iter().map(i64::to_string).collect())).collect();
        instance.start = problem.starts(&routes);
        let solution = crate::routing::solve(&instance, seed, budget);
        if !solution.unassigned.is_empty() {
            return None;
        }
        let mut rows = Vec::with_capacity(visits.len());
        for (nodes, &vehicle) in solution.routes.iter().zip(&solution.vehicles) {
            let driver = &self.vans.get(vehicle)?.driver;
            for (k, &node) in nodes.iter().enumerate() {
                let v = *visits.get(node.checked_sub(1)?)?;
                rows.push((v, Some((driver.clone(), (k + 1) as f64 * SEQ_STEP))));
            }
        }
        let next = Tentative::assemble(self.depot, self.model, self.service, self.vans.to_vec(), rows);
        let kept = next.unplaced.is_empty() && next.changes.is_empty() && next.plan.len() == visits.len();
        (kept && next.plan.valid() && next.plan.totals().0 < self.totals().0).then_some(next.plan)
    }

    /// Every visit's route and order key, to persist a plan written whole.
    pub fn places(&self) -> Vec<Change> {
        self.vans
            .iter()
            .zip(&self.lanes)
            .flat_map(|(van, l)| {
                l.visits.iter().zip(&l.seq).map(|(v, s)| Change { id: v.id, driver: van.driver.clone(), seq: *s })
            })
            .collect()
    }
}

impl crate::quote::capacity::FleetPlan for Tentative {
    fn fits_all(&self, visits: &[Visit]) -> bool {
        Tentative::fits_all(self, visits)
    }
}

/// A van's use in a tentative plan (the board's "vans" row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VanUse {
    pub driver: String,
    pub stops: usize,
    pub parcels: i64,
    pub grams: i64,
    pub capacity_parcels: i64,
    pub capacity_grams: i64,
    pub shift_start: i64,
    pub shift_end: i64,
    /// When its route is back at the depot (the shift's start when it has no stop).
    pub back: i64,
}

/// What a slot can still take, as the fleet sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// About how many more stops of an average size.
    pub stops: u32,
    /// What binds when it is full (or nearly: no stop more fits the estimate).
    pub binds: Option<Binding>,
}

#[cfg(test)]
mod tests;
