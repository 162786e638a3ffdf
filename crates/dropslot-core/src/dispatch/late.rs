//! The day as it runs (CONTRACT §16), pure: which routes have left the depot, where a stop
//! booked after the publish goes in a route not started yet, and what a route handed to
//! another driver must keep. The service gathers statuses and road times; the store saves.

use super::{
    Broken, Candidate, Depot, Driver, PlanKind, Problem, Route, ServiceTime, Stop, retime, route_points, timed,
};
use crate::routing::roads::Matrix;
use crate::shipments::Status;

/// Why a late stop went to the plan's `unassigned` (the board shows it; it is then rebooked
/// or held like any unplaced shipment).
pub const ALL_LEFT: &str = "booked after every route of the plan had left the depot";
pub const NO_ROOM: &str = "no route not started yet can take it without breaking a rule";
pub const NO_DRIVER: &str = "no driver left to plan for: every route has started or its driver is out";

/// Whether a drop-off in `status` says its van has left the depot: on its way, or served
/// (delivered, failed, on its way back).
#[must_use]
pub fn on_the_road(status: Status) -> bool {
    matches!(
        status,
        Status::InTransit | Status::Delivered | Status::Failed | Status::ReturnScheduled | Status::Returned
    )
}

/// The stop of one shipment booked late, untimed.
#[must_use]
pub fn stop_for(depot: &Depot, service: ServiceTime, candidate: Candidate) -> Stop {
    let problem = Problem::ungrouped(PlanKind::Delivery, depot.clone(), Vec::new(), service, vec![candidate]);
    problem.stop(1)
}

/// The points of `route`'s matrix for a late stop: [`route_points`], then the stop's.
#[must_use]
pub fn points_with(route: &Route, depot: &Depot, stop: &Stop) -> Vec<crate::geo::distance::LatLng> {
    let mut points = route_points(route, depot);
    points.push(crate::geo::distance::LatLng::new(stop.lat, stop.lng).unwrap_or(depot.at));
    points
}

/// `route` re-timed with `stop` where it adds the least time (then distance), keeping every
/// hard rule (window, parcels, kilograms, shift); `None` when no position keeps them all.
/// `matrix` is over [`points_with`].
#[must_use]
pub fn insert_into(route: &Route, depot: &Depot, stop: &Stop, matrix: &Matrix) -> Option<Route> {
    let visits = route.visits();
    let n = visits.len();
    if matrix.size() != n + 2 {
        return None;
    }
    let driver = super::driver_of(route);
    let mut best: Option<Route> = None;
    for p in 0..=n {
        let mut order = visits.to_vec();
        order.insert(p, stop.clone());
        // Position k of the new order (0 and n + 2 the depot) to its point in the matrix.
        let point = |k: usize| match k {
            0 => 0,
            k if k > n + 1 => 0,
            k if k - 1 < p => k,
            k if k - 1 == p => n + 1,
            k => k - 1,
        };
        let (timed_route, broken) =
            timed(route.id.clone(), &driver, depot, order, |a, b| matrix.leg(point(a), point(b)));
        if broken.is_empty() && best.as_ref().is_none_or(|b| cost(&timed_route) < cost(b)) {
            best = Some(timed_route);
        }
    }
    best
}

/// What a route costs: its duration, then its distance.
#[must_use]
pub fn cost(route: &Route) -> (i64, i64) {
    (route.duration_s, route.distance_m)
}

/// `route` handed to `driver` (another of the depot's drivers), re-timed with the new van's
/// capacities and shift over `matrix` (over [`route_points`]); its id follows the driver.
///
/// # Errors
/// The rules the route breaks with that driver.
pub fn hand_over(
    route: &Route,
    plan_id: &str,
    driver: &Driver,
    depot: &Depot,
    matrix: &Matrix,
) -> Result<Route, Vec<Broken>> {
    let moved = Route {
        id: super::route_id(plan_id, &driver.id),
        driver_id: driver.id.clone(),
        capacity_parcels: driver.capacity_parcels,
        capacity_grams: driver.capacity_grams,
        shift_start: driver.shift_start,
        shift_end: driver.shift_end,
        ..route.clone()
    };
    retime(&moved, depot, matrix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::{StopKind, timed};
    use crate::geo::distance::LatLng;
    use crate::routing::roads::{Leg, RoadModel};

    const NINE: i64 = 1_800_000_000;

    fn depot() -> Depot {
        Depot { code: "D".into(), address: "depot".into(), at: LatLng::new(43.6387, -79.4201).unwrap() }
    }

    fn candidate(id: &str, lat: f64, from_h: i64, to_h: i64, parcels: u32) -> Candidate {
        Candidate {
            unique_id: id.into(),
            kind: StopKind::DropOff,
            at: LatLng::new(lat, -79.4201).unwrap(),
            from: NINE + from_h * 3600,
            to: NINE + to_h * 3600,
            parcels,
            grams: 1000,
            address: id.into(),
            receiver: String::new(),
            phone: String::new(),
        }
    }

    const SERVICE: ServiceTime = ServiceTime { stop_seconds: 180, parcel_seconds: 30 };
    const MODEL: RoadModel = RoadModel { speed_kmh: 24.0, detour: 1.3 };

    fn matrix(points: &[LatLng]) -> Matrix {
        let mut m = Matrix::zero(points.len());
        for (a, &pa) in points.iter().enumerate() {
            for (b, &pb) in points.iter().enumerate() {
                m.set(a, b, if a == b { Leg::default() } else { MODEL.leg(pa, pb) });
            }
        }
        m
    }

    fn route(driver: &Driver, stops: Vec<Stop>) -> Route {
        let d = depot();
        let mut points = vec![d.at];
        points.extend(stops.iter().map(|s| LatLng::new(s.lat, s.lng).unwrap()));
        let m = matrix(&points);
        let n = stops.len();
        timed("P.A".into(), driver, &d, stops, |a, b| m.leg(if a > n { 0 } else { a }, if b > n { 0 } else { b })).0
    }

    fn driver(parcels: i64, hours: i64) -> Driver {
        Driver {
            id: "A".into(),
            capacity_parcels: parcels,
            capacity_grams: 100_000,
            shift_start: NINE,
            shift_end: NINE + hours * 3600,
        }
    }

    #[test]
    fn a_late_stop_goes_where_it_adds_least_and_keeps_every_rule() {
        let d = depot();
        let stops = [(43.65, 0), (43.67, 0), (43.69, 0)]
            .iter()
            .enumerate()
            .map(|(i, &(lat, _))| stop_for(&d, SERVICE, candidate(&format!("S{i}"), lat, 0, 4, 1)))
            .collect();
        let r = route(&driver(10, 8), stops);
        // Between the first and the second stop on the way out: the cheapest place.
        let late = stop_for(&d, SERVICE, candidate("L", 43.66, 0, 4, 1));
        let m = matrix(&points_with(&r, &d, &late));
        let next = insert_into(&r, &d, &late, &m).expect("it fits");
        let order: Vec<&str> = next.shipments().collect();
        assert_eq!(order, ["S0", "L", "S1", "S2"]);
        assert!(cost(&next) > cost(&r));
        // A window the route can no longer reach, a load over the van, a shift too short: nowhere.
        let closed = stop_for(&d, SERVICE, candidate("W", 43.66, 0, 0, 1));
        assert!(insert_into(&r, &d, &closed, &matrix(&points_with(&r, &d, &closed))).is_none());
        let heavy = stop_for(&d, SERVICE, candidate("H", 43.66, 0, 4, 8));
        assert!(insert_into(&r, &d, &heavy, &matrix(&points_with(&r, &d, &heavy))).is_none());
        let short = route(&driver(10, 1), Vec::new());
        let far = stop_for(&d, SERVICE, candidate("F", 43.95, 0, 4, 1));
        assert!(insert_into(&short, &d, &far, &matrix(&points_with(&short, &d, &far))).is_none());
    }

    #[test]
    fn a_route_handed_over_takes_the_new_drivers_id_and_rules() {
        let d = depot();
        let stops = (0..3).map(|i| stop_for(&d, SERVICE, candidate(&format!("S{i}"), 43.65, 0, 4, 2))).collect();
        let r = route(&driver(10, 8), stops);
        let m = matrix(&route_points(&r, &d));
        let b = Driver { id: "B".into(), ..driver(10, 8) };
        let moved = hand_over(&r, "P", &b, &d, &m).expect("same van");
        assert_eq!((moved.id.as_str(), moved.driver_id.as_str()), ("P.B", "B"));
        assert_eq!(moved.shipments().collect::<Vec<_>>(), r.shipments().collect::<Vec<_>>());
        let small = Driver { id: "C".into(), ..driver(5, 8) };
        let broken = hand_over(&r, "P", &small, &d, &m).expect_err("6 parcels in a 5-parcel van");
        assert!(broken.iter().any(|b| b.rule == "capacity_parcels"));
    }

    #[test]
    fn a_van_is_on_the_road_once_a_drop_off_left_the_depot() {
        assert!(!on_the_road(Status::Processing));
        assert!(!on_the_road(Status::ToAttempt));
        assert!(on_the_road(Status::InTransit));
        assert!(on_the_road(Status::Delivered));
        assert!(on_the_road(Status::Failed));
    }
}
