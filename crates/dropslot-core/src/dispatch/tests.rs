use super::*;
use crate::routing::roads::RoadModel;
use crate::routing::{Iterations, check_fleet, solve};

const MODEL: RoadModel = RoadModel { speed_kmh: 24.0, detour: 1.3 };
/// 2026-11-27 08:00 in Toronto (UTC-5), in Unix seconds.
const EIGHT: i64 = 1_795_784_400;
const HOUR: i64 = 3_600;

fn at(lat: f64, lng: f64) -> LatLng {
    LatLng::new(lat, lng).unwrap()
}

fn depot() -> Depot {
    Depot { code: "YYZ1".into(), address: "1 Depot Rd".into(), at: at(43.65, -79.40) }
}

fn driver(id: &str, parcels: i64) -> Driver {
    Driver {
        id: id.into(),
        capacity_parcels: parcels,
        capacity_grams: 500_000,
        shift_start: EIGHT,
        shift_end: EIGHT + 10 * HOUR,
    }
}

fn candidate(id: &str, lat: f64, lng: f64, from_h: i64, to_h: i64, parcels: u32) -> Candidate {
    Candidate {
        unique_id: id.into(),
        kind: StopKind::DropOff,
        at: at(lat, lng),
        from: EIGHT + from_h * HOUR,
        to: EIGHT + to_h * HOUR,
        parcels,
        grams: 2_000 * i64::from(parcels),
        address: format!("{id} Street"),
        receiver: format!("Receiver {id}"),
        phone: "+14165550100".into(),
    }
}

fn problem(drivers: Vec<Driver>) -> Problem {
    let candidates = vec![
        candidate("A", 43.66, -79.39, 6, 10, 2),
        candidate("B", 43.67, -79.38, 6, 10, 1),
        // C and D share an address and a window: one stop.
        candidate("C", 43.64, -79.41, 6, 8, 1),
        candidate("D", 43.64, -79.41, 6, 8, 3),
        candidate("E", 43.68, -79.42, 0, 4, 2),
        candidate("F", 43.63, -79.37, 0, 4, 1),
    ];
    Problem::new(
        PlanKind::Delivery,
        depot(),
        drivers,
        ServiceTime { stop_seconds: 180, parcel_seconds: 30 },
        candidates,
    )
}

fn plan(problem: &Problem) -> (Plan, Instance, Solution) {
    let matrix = MODEL.matrix(&problem.points());
    let instance = problem.instance(&matrix, &[]).unwrap();
    let solution = solve(&instance, 1, &mut Iterations(500));
    let (routes, unassigned) = problem.routes("pln_T", &matrix, &solution);
    let plan = Plan {
        id: "pln_T".into(),
        status: PlanStatus::Draft,
        date: "2026-11-27".into(),
        depot: "YYZ1".into(),
        kind: PlanKind::Delivery,
        roads: "embedded".into(),
        created_at: 0,
        published_at: None,
        routes,
        unassigned,
    };
    (plan, instance, solution)
}

/// Every rule of CONTRACT §12, judged from the plan alone.
fn judge(plan: &Plan, shipments: &[&str]) {
    let mut seen: Vec<&str> = plan.routes.iter().flat_map(Route::shipments).collect();
    seen.extend(plan.unassigned.iter().map(|u| u.shipment_unique_id.as_str()));
    seen.sort_unstable();
    assert_eq!(seen, shipments, "each shipment exactly once");
    for r in &plan.routes {
        let (first, last) = (&r.stops[0], r.stops.last().unwrap());
        assert_eq!((first.kind, last.kind), (StopKind::Depot, StopKind::Depot));
        assert!(r.start >= r.shift_start && r.end <= r.shift_end, "{}: within the shift", r.id);
        let mut load = (0, 0);
        for s in r.visits() {
            assert!(s.from <= s.eta && s.eta <= s.to, "{}: stop {} in its window", r.id, s.seq);
            load = (load.0 + i64::from(s.parcels), load.1 + s.grams);
        }
        assert!(load.0 <= r.capacity_parcels && load.1 <= r.capacity_grams, "{}: {load:?}", r.id);
        let seqs: Vec<u32> = r.stops.iter().map(|s| s.seq).collect();
        assert_eq!(seqs, (0..r.stops.len() as u32).collect::<Vec<_>>());
    }
}

#[test]
fn a_plan_keeps_every_window_capacity_and_shift_and_places_every_shipment_once() {
    let p = problem(vec![driver("drv_1", 20), driver("drv_2", 20)]);
    assert_eq!(p.stops.len(), 5, "C and D are one stop");
    let (plan, instance, solution) = plan(&p);
    let left: Vec<usize> = solution.unassigned.iter().map(|(u, _)| *u).collect();
    assert!(check_fleet(&instance, &solution.routes, &solution.vehicles, &left).feasible());
    assert!(plan.unassigned.is_empty(), "{:?}", plan.unassigned);
    judge(&plan, &["A", "B", "C", "D", "E", "F"]);
    let stop =
        plan.routes.iter().flat_map(Route::visits).find(|s| s.shipment_unique_ids.contains(&"C".into())).unwrap();
    assert_eq!((stop.shipment_unique_ids.len(), stop.parcels, stop.service_s), (2, 4, 180 + 4 * 30));
    // Both drivers have a route, used or not.
    assert_eq!(plan.routes.len(), 2);
    assert_eq!(plan.routes[0].id, "pln_T.drv_1");
}

#[test]
fn what_no_vehicle_can_carry_is_unassigned_with_its_reason() {
    let p = problem(vec![driver("drv_1", 2)]);
    // C (1 parcel) and D (3) share a place and a window, but 4 parcels fit no vehicle of 2:
    // two stops, so that C can still go.
    assert_eq!(p.stops.len(), 6);
    let (plan, _, _) = plan(&p);
    judge(&plan, &["A", "B", "C", "D", "E", "F"]);
    let d = plan.unassigned.iter().find(|u| u.shipment_unique_id == "D").expect("D is left out");
    assert_eq!(d.reason, "its parcels exceed the capacity of every vehicle");
    assert_eq!(d.stop.shipment_unique_ids, ["D"]);
    assert!(
        plan.unassigned.iter().all(|u| u.shipment_unique_id != "C" || u.reason != d.reason),
        "{:?}",
        plan.unassigned
    );
}

fn retimed(plan: &Plan, shipment: &str, route: &str, position: usize) -> Result<Plan, Vec<Broken>> {
    let (mut next, changed) = place(plan, shipment, route, position).unwrap();
    let mut broken = Vec::new();
    for r in changed {
        let matrix = MODEL.matrix(&route_points(&next.routes[r], &depot()));
        match retime(&next.routes[r], &depot(), &matrix) {
            Ok(t) => next.routes[r] = t,
            Err(mut b) => broken.append(&mut b),
        }
    }
    if broken.is_empty() { Ok(next) } else { Err(broken) }
}

#[test]
fn a_move_re_times_both_routes_and_a_broken_window_is_named() {
    let p = problem(vec![driver("drv_1", 20), driver("drv_2", 20)]);
    let (plan, _, _) = plan(&p);
    // E closes at noon: moved behind A (served from 14:00), it is late.
    let (ra, _) = plan.find("A").unwrap();
    let route = &plan.routes[ra];
    let end = route.visits().len() + usize::from(!route.shipments().any(|s| s == "E"));
    let broken = retimed(&plan, "E", &route.id, end).unwrap_err();
    assert!(broken.iter().any(|b| b.rule == "window" && b.message.contains("after its window closes")), "{broken:?}");

    // Moving B to the end of the other route keeps the rules and re-times both routes.
    let (rb, _) = plan.find("B").unwrap();
    let other = &plan.routes[1 - rb];
    let moved = retimed(&plan, "B", &other.id, other.visits().len() + 1).unwrap();
    judge(&moved, &["A", "B", "C", "D", "E", "F"]);
    let (r, p) = moved.find("B").unwrap();
    assert_eq!((moved.routes[r].id.as_str(), p), (other.id.as_str(), other.visits().len() + 1));
    assert_ne!(moved.routes[rb].stops, plan.routes[rb].stops, "the route B left is re-timed");

    // Splitting C off the C+D stop takes C's parcel along.
    let (rc, pc) = plan.find("C").unwrap();
    let before = plan.routes[rc].stops[pc].parcels;
    let split = retimed(&plan, "C", &plan.routes[rc].id, pc).unwrap();
    let (_, pd) = split.find("D").unwrap();
    let d = &split.routes[rc].stops[pd];
    assert_eq!((d.shipment_unique_ids.clone(), d.parcels), (vec!["D".to_string()], before - 1));
    judge(&split, &["A", "B", "C", "D", "E", "F"]);
}

#[test]
fn a_move_beyond_capacity_or_the_shift_names_its_rule_and_bad_requests_their_field() {
    let mut drivers = vec![driver("drv_1", 20), driver("drv_2", 2)];
    drivers[1].shift_end = EIGHT + 3 * HOUR;
    let p = problem(drivers);
    let (plan, _, _) = plan(&p);
    let small = plan.routes.iter().find(|r| r.driver_id == "drv_2").unwrap().id.clone();
    // D: 3 parcels, served from 14:00; the small van carries 2 and its driver stops at 11:00.
    let broken = retimed(&plan, "D", &small, 1).unwrap_err();
    let rules: Vec<&str> = broken.iter().map(|b| b.rule).collect();
    assert!(rules.contains(&"capacity_parcels") && rules.contains(&"shift"), "{broken:?}");
    assert_eq!(place(&plan, "Z", &small, 1).unwrap_err().0, "shipment_unique_id");
    assert_eq!(place(&plan, "A", "rte_nope", 1).unwrap_err().0, "to_route_id");
    assert_eq!(place(&plan, "A", &small, 99).unwrap_err().0, "position");
    assert_eq!(place(&plan, "A", &small, 0).unwrap_err().0, "position");
}

#[test]
fn fixed_routes_keep_their_shipments_in_order_when_re_solved() {
    let p = problem(vec![driver("drv_1", 20), driver("drv_2", 20)]);
    let (plan, _, _) = plan(&p);
    let fixed: Vec<(String, Vec<String>)> =
        plan.routes.iter().map(|r| (r.driver_id.clone(), r.shipments().map(String::from).collect())).collect();
    let matrix = MODEL.matrix(&p.points());
    let instance = p.instance(&matrix, &fixed).unwrap();
    let again = solve(&instance, 7, &mut Iterations(300));
    let (routes, _) = p.routes("pln_T", &matrix, &again);
    for (driver, shipments) in &fixed {
        let route = routes.iter().find(|r| r.driver_id == *driver).unwrap();
        let kept: Vec<String> =
            route.shipments().filter(|s| shipments.contains(&(*s).to_string())).map(String::from).collect();
        assert_eq!(&kept, shipments);
    }
}

#[test]
fn route_ids_carry_their_plan() {
    assert_eq!(route_id("PLNABC", "DRVXYZ"), "PLNABC.DRVXYZ");
    assert_eq!(plan_of_route("PLNABC.DRVXYZ"), Some("PLNABC"));
    assert_eq!(plan_of_route("nope"), None);
    assert_eq!(plan_of_route(".DRVXYZ"), None);
}

#[test]
fn a_stored_plan_reads_back_and_unknown_keys_are_refused() {
    let (plan, _, _) = plan(&problem(vec![driver("drv_1", 20)]));
    let json = serde_json::to_string(&plan).unwrap();
    assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), plan);
    let extra = json.replacen("{\"id\"", "{\"surprise\":1,\"id\"", 1);
    assert!(serde_json::from_str::<Plan>(&extra).is_err());
}

#[test]
fn a_return_at_a_merchant_is_a_stop_of_its_own_and_counts_as_load() {
    // A pick-up and a return at one merchant in one window: two stops, each of its kind.
    let mut pick_up = candidate("P", 43.66, -79.39, 1, 4, 2);
    pick_up.kind = StopKind::PickUp;
    let mut ret = candidate("R", 43.66, -79.39, 1, 4, 3);
    ret.kind = StopKind::Return;
    let mut later = candidate("Q", 43.66, -79.39, 1, 4, 1);
    later.kind = StopKind::PickUp;
    let service = ServiceTime { stop_seconds: 180, parcel_seconds: 30 };
    let p = Problem::new(PlanKind::PickUp, depot(), vec![driver("drv_1", 6)], service, vec![ret, pick_up, later]);
    let kinds: Vec<(StopKind, Vec<&str>)> = p
        .stops
        .iter()
        .map(|g| (g.shipments[0].kind, g.shipments.iter().map(|c| c.unique_id.as_str()).collect()))
        .collect();
    assert_eq!(kinds, [(StopKind::PickUp, vec!["P", "Q"]), (StopKind::Return, vec!["R"])]);
    let matrix = MODEL.matrix(&p.points());
    let solution = solve(&p.instance(&matrix, &[]).unwrap(), 1, &mut Iterations(200));
    let (routes, unassigned) = p.routes("pln_R", &matrix, &solution);
    // 3 parcels picked up and 3 handed back fill a van of 6; a return's parcels are load.
    assert!(unassigned.is_empty(), "{unassigned:?}");
    let kinds: Vec<StopKind> = routes[0].visits().iter().map(|s| s.kind).collect();
    assert!(kinds.contains(&StopKind::Return) && kinds.contains(&StopKind::PickUp), "{kinds:?}");
    let mut big = candidate("R2", 43.67, -79.38, 1, 4, 1);
    big.kind = StopKind::Return;
    let p = Problem::new(
        PlanKind::PickUp,
        depot(),
        vec![driver("drv_1", 6)],
        service,
        vec![candidate("P", 43.66, -79.39, 1, 4, 6), big],
    );
    let matrix = MODEL.matrix(&p.points());
    let solution = solve(&p.instance(&matrix, &[]).unwrap(), 1, &mut Iterations(200));
    assert_eq!(p.routes("pln_R", &matrix, &solution).1.len(), 1, "7 parcels do not fit a van of 6");
}

#[test]
fn stop_kinds_round_trip_and_deliveries_leave_out_failures_and_returns() {
    for k in StopKind::ALL {
        assert_eq!(StopKind::parse(k.as_str()), Some(k));
        assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
    }
    for status in Status::ALL {
        let out = left_out_of_deliveries(status);
        assert_eq!(out, status.is_final() || status == Status::Failed || status == RETURNING, "{status}");
    }
    assert!(!left_out_of_deliveries(Status::ToAttempt));
    let (plan, _, _) = plan(&problem(vec![driver("drv_1", 20)]));
    let stop = &plan.routes[0].visits()[0];
    assert!(!moved_off(stop, (stop.from, stop.to)));
    assert!(moved_off(stop, (stop.from + 86_400, stop.to + 86_400)), "another day");
    assert!(moved_off(stop, (stop.from, stop.to + 3_600)), "another slot");
}
