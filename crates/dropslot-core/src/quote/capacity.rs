//! Slot capacity (CONTRACT §10): what a slot may still take on a date. Pure: the service
//! loads the per-date overrides and the fill, the schedule asks [`Capacity::fits`], and the
//! store decides an order's reservation with the same function inside its transaction.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::civil::Date;

use crate::geo::distance::LatLng;

/// One booked drop-off (or one asked about) as a depot's tentative plan sees it: where, its
/// window (Unix seconds), its load. `id` is the drop-off shipment's row id (0 for a stop only
/// asked about, or not written yet).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Visit {
    pub id: i64,
    pub at: LatLng,
    pub from: i64,
    pub to: i64,
    pub parcels: u32,
    pub grams: i64,
}

/// A depot's tentative plan of a date as the quote asks it (`dispatch::tentative::Tentative`).
pub trait FleetPlan: std::fmt::Debug + Send + Sync {
    /// Whether every one of `visits` fits, together, in order.
    fn fits_all(&self, visits: &[Visit]) -> bool;
}

/// Which side of the trip a slot serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SlotKind {
    /// A city's pick-up slot: one stop per order.
    PickUp,
    /// A zone's drop-off slot: one stop and its parcels per drop-off shipment.
    DropOff,
}

impl SlotKind {
    pub const ALL: [SlotKind; 2] = [SlotKind::PickUp, SlotKind::DropOff];

    pub fn as_str(self) -> &'static str {
        match self {
            SlotKind::PickUp => "pick_up",
            SlotKind::DropOff => "drop_off",
        }
    }

    pub fn parse(s: &str) -> Option<SlotKind> {
        SlotKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One slot on one date: the city's (pick-up) or the zone's (drop-off) slot code.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SlotDate {
    pub kind: SlotKind,
    /// The city's code (pick-up) or the zone's code (drop-off).
    pub place: String,
    pub slot: String,
    pub date: Date,
}

/// What a slot holds or is asked to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Load {
    pub stops: u32,
    pub parcels: u32,
}

impl std::ops::Add for Load {
    type Output = Load;
    fn add(self, o: Load) -> Load {
        Load { stops: self.stops.saturating_add(o.stops), parcels: self.parcels.saturating_add(o.parcels) }
    }
}

/// A slot's limit on a date; `None` = unlimited (the configuration's `capacity` type).
pub use crate::config::SlotCapacity as Limit;

impl Limit {
    pub fn is_unlimited(self) -> bool {
        self.stops.is_none() && self.parcels.is_none()
    }

    /// Whether `want` more fits beside `used`.
    pub fn fits(self, used: Load, want: Load) -> bool {
        let within = |limit: Option<u32>, used: u32, want: u32| {
            limit.is_none_or(|l| u64::from(used) + u64::from(want) <= u64::from(l))
        };
        within(self.stops, used.stops, want.stops) && within(self.parcels, used.parcels, want.parcels)
    }

    /// What is left beside `used` (per limit; `None` where unlimited).
    pub fn remaining(self, used: Load) -> (Option<u32>, Option<u32>) {
        (self.stops.map(|l| l.saturating_sub(used.stops)), self.parcels.map(|l| l.saturating_sub(used.parcels)))
    }
}

/// A per-date override of a slot's configured limit: each part either inherits the
/// configuration (`None`) or replaces it (`Some(None)` = unlimited that date).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Override {
    pub stops: Option<Option<u32>>,
    pub parcels: Option<Option<u32>>,
}

impl Override {
    /// The limit that holds on the date: the override's parts over the configured ones.
    pub fn over(self, configured: Limit) -> Limit {
        Limit { stops: self.stops.unwrap_or(configured.stops), parcels: self.parcels.unwrap_or(configured.parcels) }
    }
}

/// What the schedule knows of the slots' capacity when it books: the overrides and the fill
/// (of the request's mode) it was given. Slots it holds nothing for are empty and keep their
/// configured limit.
#[derive(Debug, Clone, Default)]
pub struct Capacity {
    overrides: HashMap<SlotDate, Override>,
    used: HashMap<SlotDate, Load>,
    fleet: Arc<FleetRoom>,
}

/// The fleet's side of the slots' room (`[capacity] mode = "fleet"`, issue 45): the depot of
/// each zone that books on its fleet, and the tentative plan of each of their dates in the
/// horizon. A date whose plan is not here has no room (a check that cannot be made refuses).
#[derive(Debug, Clone, Default)]
pub struct FleetRoom {
    /// Zone code → its depot's code, for the zones whose depot books on its fleet.
    pub zones: HashMap<String, String>,
    pub plans: HashMap<(String, Date), Arc<dyn FleetPlan>>,
}

/// A drop-off's stop in its depot's tentative plan: what an order books on the fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetVisit {
    pub depot: String,
    /// Its `id` is 0 until the store has written the shipment.
    pub visit: Visit,
}

impl Capacity {
    /// No fill and no override known: every slot has its configured limit and is empty.
    pub fn empty() -> Capacity {
        Capacity::default()
    }

    pub fn new(overrides: HashMap<SlotDate, Override>, used: HashMap<SlotDate, Load>) -> Capacity {
        Capacity { overrides, used, fleet: Arc::default() }
    }

    /// The same, with the fleet's room.
    #[must_use]
    pub fn with_fleet(self, fleet: Arc<FleetRoom>) -> Capacity {
        Capacity { fleet, ..self }
    }

    /// The fleet's room it books against.
    pub fn fleet(&self) -> &Arc<FleetRoom> {
        &self.fleet
    }

    /// The depot of `zone` when it books on its fleet.
    pub fn fleet_depot(&self, zone: &str) -> Option<&str> {
        self.fleet.zones.get(zone).map(String::as_str)
    }

    /// Whether `visits` (the request's earlier drop-offs there, then this one) all fit the
    /// tentative plan of `depot` on `date`; no plan known, no room.
    pub fn fleet_fits(&self, depot: &str, date: Date, visits: &[Visit]) -> bool {
        self.fleet.plans.get(&(depot.to_string(), date)).is_some_and(|p| p.fits_all(visits))
    }

    /// The limit on `at`, given the slot's configured one.
    pub fn limit(&self, configured: Limit, at: &SlotDate) -> Limit {
        self.overrides.get(at).map_or(configured, |o| o.over(configured))
    }

    /// What `at` holds already.
    pub fn used(&self, at: &SlotDate) -> Load {
        self.used.get(at).copied().unwrap_or_default()
    }

    /// Whether any slot has a fill or an override here (an empty capacity books on the
    /// configured limits of empty slots). The fleet's room is not counted: it is read anew.
    pub fn is_empty(&self) -> bool {
        self.overrides.is_empty() && self.used.is_empty()
    }

    /// Counts `load` more in `at` (an order this process has just written).
    pub fn add(&mut self, at: &SlotDate, load: Load) {
        if let Some(used) = self.used.get_mut(at) {
            *used = *used + load;
        }
    }

    /// Whether `want` (beside `also`, what the same request takes there already) fits in `at`.
    pub fn fits(&self, configured: Limit, at: &SlotDate, also: Load, want: Load) -> bool {
        self.limit(configured, at).fits(self.used(at) + also, want)
    }
}

/// One slot an order takes room in, as the store checks it in the order's transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub at: SlotDate,
    pub want: Load,
    /// The slot's configured limit (the store applies the date's override over it).
    pub configured: Limit,
    /// The drop-off (index in the request) it is for; `None` for the pick-up.
    pub drop_off: Option<usize>,
    /// Its stop on the depot's fleet, when the depot books on it.
    pub fleet: Option<FleetVisit>,
}

/// Decides a run of orders' reservations in order against the fill and overrides read in the
/// writing transaction: each order fits with everything before it, or it is the first that
/// does not, with the reservation that does not fit. One rule for both backends.
pub fn first_misfit<'a, S: std::hash::BuildHasher, T: std::hash::BuildHasher>(
    orders: impl IntoIterator<Item = &'a [Reservation]>,
    overrides: &HashMap<SlotDate, Override, S>,
    used: &HashMap<SlotDate, Load, T>,
) -> Option<(usize, &'a Reservation)> {
    let mut taken: HashMap<&SlotDate, Load> = HashMap::new();
    for (i, order) in orders.into_iter().enumerate() {
        let mut mine: HashMap<&SlotDate, Load> = HashMap::new();
        for r in order {
            let limit = overrides.get(&r.at).map_or(r.configured, |o| o.over(r.configured));
            let before = used.get(&r.at).copied().unwrap_or_default()
                + taken.get(&r.at).copied().unwrap_or_default()
                + mine.get(&r.at).copied().unwrap_or_default();
            if !limit.fits(before, r.want) {
                return Some((i, r));
            }
            let m = mine.entry(&r.at).or_default();
            *m = *m + r.want;
        }
        for (at, load) in mine {
            let t = taken.entry(at).or_default();
            *t = *t + load;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(slot: &str) -> SlotDate {
        SlotDate {
            kind: SlotKind::DropOff,
            place: "TOR-DT".into(),
            slot: slot.into(),
            date: "2026-11-23".parse().unwrap(),
        }
    }

    fn res(slot: &str, stops: u32, parcels: u32, limit: Limit) -> Reservation {
        Reservation { at: at(slot), want: Load { stops, parcels }, configured: limit, drop_off: Some(0), fleet: None }
    }

    #[test]
    fn limits_are_inclusive_and_unlimited_parts_never_bind() {
        let l = Limit { stops: Some(7), parcels: None };
        assert!(l.fits(Load { stops: 6, parcels: 900 }, Load { stops: 1, parcels: 50 }));
        assert!(!l.fits(Load { stops: 7, parcels: 0 }, Load { stops: 1, parcels: 0 }));
        assert!(Limit::default().fits(Load { stops: u32::MAX, parcels: u32::MAX }, Load { stops: 1, parcels: 1 }));
        assert_eq!(
            Limit { stops: Some(3), parcels: Some(10) }.remaining(Load { stops: 5, parcels: 4 }),
            (Some(0), Some(6))
        );
    }

    #[test]
    fn an_override_replaces_only_the_parts_it_sets() {
        let configured = Limit { stops: Some(10), parcels: Some(40) };
        let o = Override { stops: Some(Some(3)), parcels: None };
        assert_eq!(o.over(configured), Limit { stops: Some(3), parcels: Some(40) });
        let unlimited = Override { stops: Some(None), parcels: Some(None) };
        assert!(unlimited.over(configured).is_unlimited());
    }

    #[test]
    fn orders_are_decided_in_order_each_beside_the_ones_before() {
        let seven = Limit { stops: Some(7), parcels: None };
        let orders: Vec<Vec<Reservation>> = (0..10).map(|_| vec![res("PM", 1, 2, seven)]).collect();
        let used = HashMap::from([(at("PM"), Load { stops: 5, parcels: 0 })]);
        let misfit = first_misfit(orders.iter().map(Vec::as_slice), &HashMap::new(), &used);
        assert_eq!(misfit.map(|(i, _)| i), Some(2), "5 used + 2 orders = 7; the third does not fit");
        // A parcel limit binds too, within one order's drop-offs.
        let parcels = Limit { stops: None, parcels: Some(5) };
        let one = [res("EV", 1, 3, parcels), res("EV", 1, 3, parcels)];
        assert!(first_misfit([&one[..]], &HashMap::new(), &HashMap::new()).is_some());
        assert!(first_misfit([&one[..1]], &HashMap::new(), &HashMap::new()).is_none());
    }
}
