//! Day plans (CONTRACT §12): a depot's shipments of one date and its drivers made into a road
//! instance for the solver, and its answer written as routes of stops with their ETAs;
//! moving a stop re-times its route by the same rules. Pure: road times come in as a matrix,
//! the time limit as a budget, ids and clocks from the caller.

use serde::{Deserialize, Serialize};

use crate::geo::distance::LatLng;
use crate::routing::roads::{Leg, Matrix};
use crate::routing::{Fixed, Instance, Node, Reason, Solution, Vehicle};
use crate::shipments::Status;

/// What a plan covers: pick-ups at merchants, or deliveries to receivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    PickUp,
    Delivery,
}

impl PlanKind {
    pub const ALL: [PlanKind; 2] = [Self::PickUp, Self::Delivery];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::PickUp => "pick_up",
            Self::Delivery => "delivery",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Draft,
    Published,
}

impl PlanStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Draft => "draft",
            Self::Published => "published",
        }
    }
}

/// Where a stored plan is: being solved (its row holds no plan yet), or solved with its
/// plan's status. The one list of a plan row's status names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanPhase {
    Solving,
    Solved(PlanStatus),
}

impl PlanPhase {
    pub const ALL: [PlanPhase; 3] =
        [Self::Solving, Self::Solved(PlanStatus::Draft), Self::Solved(PlanStatus::Published)];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Solving => "solving",
            Self::Solved(status) => status.as_str(),
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// What happens at a stop. A pick-up plan visits merchants to collect (`PickUp`) and to hand
/// back the parcels of a return (`Return`, CONTRACT §15); a delivery plan visits receivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopKind {
    PickUp,
    DropOff,
    Return,
    Depot,
}

impl StopKind {
    pub const ALL: [StopKind; 4] = [Self::PickUp, Self::DropOff, Self::Return, Self::Depot];

    /// The wire value (the plan JSON's and the driver API's `kind`, and the stored plan's).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PickUp => "pick_up",
            Self::DropOff => "drop_off",
            Self::Return => "return",
            Self::Depot => "depot",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Whether a delivery plan leaves out a drop-off shipment of its date that is `status` (its
/// other rule: not in another published route). Final ones are done; a `failed` one awaits
/// its follow-up (a re-attempt booked moves it `to_attempt`, which a plan of the new date
/// takes like any other); a `return_scheduled` one goes back to its merchant on a pick-up
/// route, as a return stop (CONTRACT §15).
pub fn left_out_of_deliveries(status: Status) -> bool {
    status.is_final() || matches!(status, Status::Failed | Status::ReturnScheduled)
}

/// The drop-off status whose shipments a pick-up plan visits as return stops, on their return
/// slot's date, at their order's pick-up address (CONTRACT §15).
pub const RETURNING: Status = Status::ReturnScheduled;

/// Whether a shipment of a published stop has left it since: the slot it is booked into now
/// (`window`, Unix seconds: its delivery slot at a drop-off, its return slot at a return stop)
/// is no longer the stop's. A change of slot takes a shipment off its published route (the
/// stores drop its published stop): the route's start must not carry it, and its driver is
/// shown where it went.
pub fn moved_off(stop: &Stop, window: (i64, i64)) -> bool {
    (stop.from, stop.to) != window
}

/// One shipment to place, as the store gives it. Times are Unix seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub unique_id: String,
    /// What its stop is: a drop-off, a pick-up, or a return to its merchant.
    pub kind: StopKind,
    pub at: LatLng,
    pub from: i64,
    pub to: i64,
    pub parcels: u32,
    pub grams: i64,
    pub address: String,
    pub receiver: String,
    pub phone: String,
}

/// A driver as a plan sees it: vehicle capacities and the shift on the plan's date.
#[derive(Debug, Clone, PartialEq)]
pub struct Driver {
    pub id: String,
    pub capacity_parcels: i64,
    pub capacity_grams: i64,
    pub shift_start: i64,
    pub shift_end: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Depot {
    pub code: String,
    pub address: String,
    pub at: LatLng,
}

/// Service time at a stop: `stop_seconds` + `parcel_seconds` a parcel (`[routing]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceTime {
    pub stop_seconds: i64,
    pub parcel_seconds: i64,
}

/// A stop as stored in a plan: times are Unix seconds; `eta` is when service starts (after
/// waiting, if the driver arrives early).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stop {
    pub seq: u32,
    pub kind: StopKind,
    pub shipment_unique_ids: Vec<String>,
    pub address: String,
    pub receiver: String,
    pub phone: String,
    pub lat: f64,
    pub lng: f64,
    pub from: i64,
    pub to: i64,
    pub eta: i64,
    pub parcels: u32,
    pub grams: i64,
    /// Parcels and grams of each shipment, in `shipment_unique_ids`' order.
    pub loads: Vec<(u32, i64)>,
    pub service_s: i64,
}

/// One driver's route: depot, stops, depot. Times are Unix seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub id: String,
    pub driver_id: String,
    pub capacity_parcels: i64,
    pub capacity_grams: i64,
    pub shift_start: i64,
    pub shift_end: i64,
    pub start: i64,
    pub end: i64,
    pub distance_m: i64,
    pub duration_s: i64,
    /// The stops in order, the depot first and last.
    pub stops: Vec<Stop>,
}

impl Route {
    /// The stops between the two depot stops.
    pub fn visits(&self) -> &[Stop] {
        let n = self.stops.len();
        if n >= 2 { &self.stops[1..n - 1] } else { &[] }
    }

    /// Every shipment on the route, in visiting order.
    pub fn shipments(&self) -> impl Iterator<Item = &str> {
        self.visits().iter().flat_map(|s| s.shipment_unique_ids.iter().map(String::as_str))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unassigned {
    pub shipment_unique_id: String,
    pub reason: String,
    /// Its stop, untimed, so that a dispatcher can move it onto a route.
    pub stop: Stop,
}

/// A whole plan, as stored (its JSON keys are frozen: rows written today must read later).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub id: String,
    pub status: PlanStatus,
    pub date: String,
    pub depot: String,
    pub kind: PlanKind,
    /// `embedded` or `osrm`: where the road times came from.
    pub roads: String,
    pub created_at: i64,
    pub published_at: Option<i64>,
    pub routes: Vec<Route>,
    pub unassigned: Vec<Unassigned>,
}

impl Plan {
    /// Total driving time and distance of every route.
    pub fn totals(&self) -> (i64, i64) {
        self.routes.iter().fold((0, 0), |(d, m), r| (d + r.duration_s, m + r.distance_m))
    }

    /// The route holding `shipment` and its stop's index in `stops`.
    pub fn find(&self, shipment: &str) -> Option<(usize, usize)> {
        self.routes.iter().enumerate().find_map(|(r, route)| {
            route.stops.iter().position(|s| s.shipment_unique_ids.iter().any(|u| u == shipment)).map(|p| (r, p))
        })
    }
}

/// A route id: the plan's id and the driver's (`PLN….DRV…`), so it stays the same when the
/// plan is re-optimised and tells which plan it belongs to.
pub fn route_id(plan_id: &str, driver_id: &str) -> String {
    format!("{plan_id}.{driver_id}")
}

/// The plan id a route id belongs to.
pub fn plan_of_route(route_id: &str) -> Option<&str> {
    route_id.split_once('.').filter(|(p, d)| !p.is_empty() && !d.is_empty()).map(|(p, _)| p)
}

/// Why a shipment is in no route, in a dispatcher's words.
pub fn describe(reason: &Reason) -> &'static str {
    match reason {
        Reason::OverCapacity => "its parcels exceed the capacity of every vehicle",
        Reason::WindowUnreachable => "its window closes before any driver can reach it from the depot",
        Reason::DepotCloses => "no driver can serve it and be back at the depot before the shift ends",
        Reason::NoVehicleLeft => "no driver has room for it in this plan",
    }
}

/// The day's problem: stops (shipments at one place and window, grouped) and drivers.
#[derive(Debug, Clone)]
pub struct Problem {
    pub kind: PlanKind,
    pub depot: Depot,
    pub drivers: Vec<Driver>,
    pub service: ServiceTime,
    /// Grouped shipments; `stops[i]` is node `i + 1` of the instance.
    pub stops: Vec<Group>,
    /// Unix seconds that are time 0 of the instance.
    pub origin: i64,
}

/// Shipments at the same place with the same window: one stop.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub shipments: Vec<Candidate>,
}

impl Group {
    fn first(&self) -> &Candidate {
        &self.shipments[0]
    }
    pub fn parcels(&self) -> u32 {
        self.shipments.iter().map(|c| c.parcels).sum()
    }
    pub fn grams(&self) -> i64 {
        self.shipments.iter().map(|c| c.grams).sum()
    }
}

impl Problem {
    /// Groups `candidates` into stops (same kind, same coordinates, same window, within the
    /// largest vehicle's capacities), in a stable order.
    ///
    /// Every stop's parcels count as load, a return's too: a van leaves the depot with the
    /// returns it hands back and comes back with what it collected, so its true peak load is
    /// at most that sum (docs/architecture.md, "Return stops"). Conservative, and exact for a
    /// route of pick-ups only.
    pub fn new(
        kind: PlanKind,
        depot: Depot,
        drivers: Vec<Driver>,
        service: ServiceTime,
        mut candidates: Vec<Candidate>,
    ) -> Self {
        candidates.sort_by(|a, b| {
            (a.at.lat(), a.at.lng(), a.from, a.to, a.kind.as_str(), &a.unique_id)
                .partial_cmp(&(b.at.lat(), b.at.lng(), b.from, b.to, b.kind.as_str(), &b.unique_id))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        // A stop never holds more than the largest vehicle carries: a merchant's forty parcels
        // become as many stops as it takes, so that several vans can share them.
        let most = (
            drivers.iter().map(|d| d.capacity_parcels).max().unwrap_or(0),
            drivers.iter().map(|d| d.capacity_grams).max().unwrap_or(0),
        );
        let mut stops: Vec<Group> = Vec::new();
        for c in candidates {
            match stops.last_mut() {
                Some(g)
                    if g.first().kind == c.kind
                        && g.first().at == c.at
                        && (g.first().from, g.first().to) == (c.from, c.to)
                        && i64::from(g.parcels() + c.parcels) <= most.0
                        && g.grams() + c.grams <= most.1 =>
                {
                    g.shipments.push(c);
                }
                _ => stops.push(Group { shipments: vec![c] }),
            }
        }
        let origin =
            drivers.iter().map(|d| d.shift_start).chain(stops.iter().map(|g| g.first().from)).min().unwrap_or(0);
        Self { kind, depot, drivers, service, stops, origin }
    }

    /// One stop per shipment, in the candidates' order: the problem of a depot that books on
    /// its fleet, whose tentative plan (one visit per shipment) is where the search starts
    /// ([`Problem::starts`]); grouping could put the shipments of one stop on two routes.
    pub fn ungrouped(
        kind: PlanKind,
        depot: Depot,
        drivers: Vec<Driver>,
        service: ServiceTime,
        candidates: Vec<Candidate>,
    ) -> Self {
        let stops: Vec<Group> = candidates.into_iter().map(|c| Group { shipments: vec![c] }).collect();
        let origin =
            drivers.iter().map(|d| d.shift_start).chain(stops.iter().map(|g| g.first().from)).min().unwrap_or(0);
        Self { kind, depot, drivers, service, stops, origin }
    }

    /// Routes given by (driver id, shipment ids in order) as the solver's start routes: each
    /// on its driver's vehicle, its shipments' stops in order (a shipment not in this problem,
    /// or a driver not planned, is left out).
    pub fn starts(&self, routes: &[(String, Vec<String>)]) -> Vec<Fixed> {
        let node: std::collections::HashMap<&str, usize> = self
            .stops
            .iter()
            .enumerate()
            .flat_map(|(i, g)| g.shipments.iter().map(move |c| (c.unique_id.as_str(), i + 1)))
            .collect();
        let mut out = Vec::new();
        for (driver, shipments) in routes {
            let Some(vehicle) = self.drivers.iter().position(|d| d.id == *driver) else { continue };
            let mut visits: Vec<usize> = Vec::new();
            for s in shipments {
                if let Some(&n) = node.get(s.as_str())
                    && !visits.contains(&n)
                {
                    visits.push(n);
                }
            }
            out.push(Fixed { vehicle, visits });
        }
        out
    }

    /// The depot, then every stop: the points of the road matrix.
    pub fn points(&self) -> Vec<LatLng> {
        std::iter::once(self.depot.at).chain(self.stops.iter().map(|g| g.first().at)).collect()
    }

    fn service_of(&self, g: &Group) -> i64 {
        self.service.stop_seconds + self.service.parcel_seconds * i64::from(g.parcels())
    }

    /// The road instance for the solver, with `fixed` routes (driver id → shipment ids in
    /// order) pinned. `matrix` is over [`Problem::points`].
    ///
    /// # Errors
    /// When there is no driver, or the matrix does not fit the points.
    pub fn instance(&self, matrix: &Matrix, fixed: &[(String, Vec<String>)]) -> Result<Instance, String> {
        let n = self.stops.len() + 1;
        if matrix.size() != n {
            return Err(format!("a road matrix of {} points for {n}", matrix.size()));
        }
        let horizon = self.drivers.iter().map(|d| d.shift_end).max().unwrap_or(self.origin) - self.origin;
        let mut nodes = vec![Node { id: 0, x: 0.0, y: 0.0, demand: 0, ready: 0, due: horizon.max(0), service: 0 }];
        let mut weights = vec![0];
        for (i, g) in self.stops.iter().enumerate() {
            let c = g.first();
            nodes.push(Node {
                id: i as u32 + 1,
                x: 0.0,
                y: 0.0,
                demand: i64::from(g.parcels()),
                ready: (c.from - self.origin).max(0),
                due: (c.to - self.origin).max(0),
                service: self.service_of(g),
            });
            weights.push(g.grams());
        }
        let fleet = self
            .drivers
            .iter()
            .map(|d| Vehicle {
                capacity: [d.capacity_parcels, d.capacity_grams],
                start: d.shift_start - self.origin,
                end: d.shift_end - self.origin,
            })
            .collect();
        let (mut seconds, mut metres) = (Vec::with_capacity(n * n), Vec::with_capacity(n * n));
        for a in 0..n {
            for b in 0..n {
                let leg = matrix.leg(a, b);
                seconds.push(leg.seconds);
                metres.push(leg.metres);
            }
        }
        let mut instance = Instance::roads("plan".into(), nodes, weights, fleet, seconds, metres)?;
        for (driver, shipments) in fixed {
            let Some(vehicle) = self.drivers.iter().position(|d| d.id == *driver) else { continue };
            let mut visits: Vec<usize> = Vec::new();
            for s in shipments {
                if let Some(i) = self.stops.iter().position(|g| g.shipments.iter().any(|c| c.unique_id == *s))
                    && !visits.contains(&(i + 1))
                {
                    visits.push(i + 1);
                }
            }
            instance.fixed.push(Fixed { vehicle, visits });
        }
        Ok(instance)
    }

    /// The solver's answer as routes with ETAs, and the shipments left out with reasons.
    pub fn routes(&self, plan_id: &str, matrix: &Matrix, solution: &Solution) -> (Vec<Route>, Vec<Unassigned>) {
        let mut routes = Vec::new();
        for (visits, &vehicle) in solution.routes.iter().zip(&solution.vehicles) {
            let driver = &self.drivers[vehicle];
            let stops = visits.iter().map(|&node| self.stop(node)).collect();
            let legs = |a: usize, b: usize| {
                let node = |p: usize| if p == 0 || p > visits.len() { 0 } else { visits[p - 1] };
                matrix.leg(node(a), node(b))
            };
            // The solver kept every rule; timing it again is the same arithmetic.
            let (route, _) = timed(route_id(plan_id, &driver.id), driver, &self.depot, stops, legs);
            routes.push(route);
        }
        // Every planned driver has a route, empty if unused: a dispatcher may move stops to it.
        for (v, driver) in self.drivers.iter().enumerate() {
            if !solution.vehicles.contains(&v) {
                let empty =
                    timed(route_id(plan_id, &driver.id), driver, &self.depot, Vec::new(), |_, _| Leg::default());
                routes.push(empty.0);
            }
        }
        routes.sort_by(|a, b| a.driver_id.cmp(&b.driver_id));
        let mut unassigned = Vec::new();
        for (node, reason) in &solution.unassigned {
            let stop = self.stop(*node);
            for (i, c) in self.stops[node - 1].shipments.iter().enumerate() {
                unassigned.push(Unassigned {
                    shipment_unique_id: c.unique_id.clone(),
                    reason: describe(reason).into(),
                    stop: single(&stop, i),
                });
            }
        }
        (routes, unassigned)
    }

    /// Node `node`'s stop, not yet timed.
    pub(crate) fn stop(&self, node: usize) -> Stop {
        let g = &self.stops[node - 1];
        let c = g.first();
        Stop {
            seq: 0,
            kind: c.kind,
            shipment_unique_ids: g.shipments.iter().map(|c| c.unique_id.clone()).collect(),
            address: c.address.clone(),
            receiver: c.receiver.clone(),
            phone: c.phone.clone(),
            lat: c.at.lat(),
            lng: c.at.lng(),
            from: c.from,
            to: c.to,
            eta: 0,
            parcels: g.parcels(),
            grams: g.grams(),
            loads: g.shipments.iter().map(|c| (c.parcels, c.grams)).collect(),
            service_s: self.service_of(g),
        }
    }
}

/// Shipment `i` of `stop` as a stop of its own (its load only; the service time stays the
/// stop's, an upper bound).
fn single(stop: &Stop, i: usize) -> Stop {
    let (parcels, grams) = stop.loads.get(i).copied().unwrap_or((0, 0));
    Stop {
        shipment_unique_ids: vec![stop.shipment_unique_ids[i].clone()],
        parcels,
        grams,
        loads: vec![(parcels, grams)],
        ..stop.clone()
    }
}

/// A hard rule a route breaks (CONTRACT §12), named for the 422 that reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub rule: &'static str,
    pub message: String,
}

/// Times `visits` as driver `driver`'s route from and back to `depot`: leaves as late as
/// the first stop allows (never before the shift starts), waits where early, and checks
/// every hard rule. `legs(a, b)` is the road between positions `a` and `b` of the route,
/// where 0 and `visits.len() + 1` are the depot. Returns the route, timed whatever it
/// breaks, and every rule it breaks.
pub fn timed(
    id: String,
    driver: &Driver,
    depot: &Depot,
    visits: Vec<Stop>,
    legs: impl Fn(usize, usize) -> Leg,
) -> (Route, Vec<Broken>) {
    let n = visits.len();
    let mut broken = Vec::new();
    // Forward from the shift's start, then leave later by the first stop's wait.
    let mut time = driver.shift_start;
    let mut etas = Vec::with_capacity(n);
    for (i, s) in visits.iter().enumerate() {
        let arrive = time + legs(i, i + 1).seconds;
        let eta = arrive.max(s.from);
        etas.push(eta);
        time = eta + s.service_s;
    }
    let start = match visits.first() {
        Some(_) => (etas[0] - legs(0, 1).seconds).max(driver.shift_start),
        None => driver.shift_start,
    };
    let end = time + legs(n, n + 1).seconds;
    let distance_m: i64 = (0..=n).map(|i| legs(i, i + 1).metres).sum();
    let (mut parcels, mut grams) = (0_i64, 0_i64);
    let mut stops = Vec::with_capacity(n + 2);
    let depot_stop = |seq: u32, eta: i64| Stop {
        seq,
        kind: StopKind::Depot,
        shipment_unique_ids: Vec::new(),
        address: depot.address.clone(),
        receiver: String::new(),
        phone: String::new(),
        lat: depot.at.lat(),
        lng: depot.at.lng(),
        from: driver.shift_start,
        to: driver.shift_end,
        eta,
        parcels: 0,
        grams: 0,
        loads: Vec::new(),
        service_s: 0,
    };
    stops.push(depot_stop(0, start));
    for (i, (mut s, eta)) in visits.into_iter().zip(etas).enumerate() {
        s.seq = i as u32 + 1;
        s.eta = eta;
        if eta > s.to {
            broken.push(Broken {
                rule: "window",
                message: format!(
                    "stop {} ({}) would be served {} after its window closes",
                    s.seq,
                    s.address,
                    minutes(eta - s.to)
                ),
            });
        }
        parcels += i64::from(s.parcels);
        grams += s.grams;
        stops.push(s);
    }
    stops.push(depot_stop(n as u32 + 1, end));
    if parcels > driver.capacity_parcels {
        broken.push(Broken {
            rule: "capacity_parcels",
            message: format!("{parcels} parcels exceed the vehicle's {} parcels", driver.capacity_parcels),
        });
    }
    if grams > driver.capacity_grams {
        broken.push(Broken {
            rule: "capacity_kg",
            message: format!(
                "{:.1} kg exceed the vehicle's {} kg",
                grams as f64 / 1000.0,
                driver.capacity_grams / 1000
            ),
        });
    }
    if end > driver.shift_end {
        broken.push(Broken {
            rule: "shift",
            message: format!("the route would end {} after the driver's shift", minutes(end - driver.shift_end)),
        });
    }
    let route = Route {
        id,
        driver_id: driver.id.clone(),
        capacity_parcels: driver.capacity_parcels,
        capacity_grams: driver.capacity_grams,
        shift_start: driver.shift_start,
        shift_end: driver.shift_end,
        start,
        end,
        distance_m,
        duration_s: end - start,
        stops,
    };
    (route, broken)
}

/// `95` → "2 min" (rounded up: a rule broken by a second is still broken).
fn minutes(seconds: i64) -> String {
    let m = (seconds + 59) / 60;
    if m < 60 { format!("{m} min") } else { format!("{} h {:02} min", m / 60, m % 60) }
}

/// The driver a route was planned for, from the route itself.
pub fn driver_of(route: &Route) -> Driver {
    Driver {
        id: route.driver_id.clone(),
        capacity_parcels: route.capacity_parcels,
        capacity_grams: route.capacity_grams,
        shift_start: route.shift_start,
        shift_end: route.shift_end,
    }
}

/// The points of a route for its road matrix: the depot, then each stop between the depot
/// stops (the return leg goes to point 0 again).
pub fn route_points(route: &Route, depot: &Depot) -> Vec<LatLng> {
    std::iter::once(depot.at)
        .chain(route.visits().iter().map(|s| LatLng::new(s.lat, s.lng).unwrap_or(depot.at)))
        .collect()
}

/// Re-times `route` on `matrix`, which is over [`route_points`].
///
/// # Errors
/// The rules the route breaks.
pub fn retime(route: &Route, depot: &Depot, matrix: &Matrix) -> Result<Route, Vec<Broken>> {
    let visits = route.visits().to_vec();
    let n = visits.len();
    let point = |p: usize| if p > n { 0 } else { p };
    let (route, broken) =
        timed(route.id.clone(), &driver_of(route), depot, visits, |a, b| matrix.leg(point(a), point(b)));
    if broken.is_empty() { Ok(route) } else { Err(broken) }
}

/// Moves `shipment` (in a route or unassigned) to `position` (1-based among the stops) of
/// route `to_route`: out of its stop (a stop of several shipments splits), into the target.
/// Returns the plan with the stops in place, not yet re-timed, and the indices of the routes
/// that changed (to re-time with [`retime`]).
///
/// # Errors
/// The field of the request that is wrong, and why.
pub fn place(
    plan: &Plan,
    shipment: &str,
    to_route: &str,
    position: usize,
) -> Result<(Plan, Vec<usize>), (&'static str, String)> {
    let Some(target) = plan.routes.iter().position(|r| r.id == to_route) else {
        return Err(("to_route_id", "No route of this plan has this id.".into()));
    };
    let mut next = plan.clone();
    let mut changed = vec![target];
    let moved = if let Some((r, p)) = plan.find(shipment) {
        let stop = &mut next.routes[r].stops[p];
        let i = stop.shipment_unique_ids.iter().position(|u| u == shipment).unwrap_or(0);
        let alone = single(stop, i);
        if stop.shipment_unique_ids.len() == 1 {
            next.routes[r].stops.remove(p);
        } else {
            stop.shipment_unique_ids.remove(i);
            let (parcels, grams) = if i < stop.loads.len() { stop.loads.remove(i) } else { (0, 0) };
            stop.parcels = stop.parcels.saturating_sub(parcels);
            stop.grams -= grams;
        }
        if r != target {
            changed.push(r);
        }
        alone
    } else if let Some(i) = plan.unassigned.iter().position(|u| u.shipment_unique_id == shipment) {
        next.unassigned.remove(i).stop
    } else {
        return Err(("shipment_unique_id", "This shipment is not in this plan.".into()));
    };
    let last = next.routes[target].visits().len() + 1;
    if position == 0 || position > last {
        return Err(("position", format!("From 1 to {last}: the stop's place among the route's stops.")));
    }
    next.routes[target].stops.insert(position, moved);
    Ok((next, changed))
}

pub mod eta;
pub mod late;
pub mod live;
pub mod tentative;
#[cfg(test)]
mod tests;
