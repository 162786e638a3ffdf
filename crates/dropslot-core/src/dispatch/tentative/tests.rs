use super::*;
use crate::dispatch::{Depot, Driver, Stop, StopKind, timed};
use crate::routing::roads::RoadModel;

const SERVICE: ServiceTime = ServiceTime { stop_seconds: 180, parcel_seconds: 30 };
/// 09:00 of some day, in Unix seconds (the day itself does not matter).
const NINE: i64 = 1_800_000_000;

fn depot() -> LatLng {
    LatLng::new(43.6387, -79.4201).unwrap()
}

fn model() -> RoadModel {
    RoadModel { speed_kmh: 24.0, detour: 1.3 }
}

fn van(driver: &str, parcels: i64, kg: i64, hours: i64) -> Van {
    Van { driver: driver.into(), parcels, grams: kg * 1000, start: NINE, end: NINE + hours * 3600 }
}

/// A stop `i` somewhere within about 5 km of the depot, in the window `from..to` (hours after 09:00).
fn visit(i: i64, from_h: i64, to_h: i64, parcels: u32, kg: i64) -> Visit {
    // A fixed scatter: no randomness, so every run is the same.
    let a = (i * 7919 % 1000) as f64 / 1000.0 - 0.5;
    let b = (i * 104_729 % 1000) as f64 / 1000.0 - 0.5;
    Visit {
        id: i,
        at: LatLng::new(43.6387 + a * 0.08, -79.4201 + b * 0.11).unwrap(),
        from: NINE + from_h * 3600,
        to: NINE + to_h * 3600,
        parcels,
        grams: kg * 1000,
    }
}

/// The plan's routes checked by the day plan's own timing (`dispatch::timed`), which shares
/// nothing with the tentative plan's cached schedule: no rule broken.
fn check(plan: &Tentative) {
    assert!(plan.valid());
    let d = Depot { code: "D".into(), address: "depot".into(), at: depot() };
    for (van, lane) in plan.vans.iter().zip(&plan.lanes) {
        let driver = Driver {
            id: van.driver.clone(),
            capacity_parcels: van.parcels,
            capacity_grams: van.grams,
            shift_start: van.start,
            shift_end: van.end,
        };
        let stops: Vec<Stop> = lane
            .visits
            .iter()
            .map(|v| Stop {
                seq: 0,
                kind: StopKind::DropOff,
                shipment_unique_ids: vec![v.id.to_string()],
                address: String::new(),
                receiver: String::new(),
                phone: String::new(),
                lat: v.at.lat(),
                lng: v.at.lng(),
                from: v.from,
                to: v.to,
                eta: 0,
                parcels: v.parcels,
                grams: v.grams,
                loads: vec![(v.parcels, v.grams)],
                service_s: plan.service_of(v),
            })
            .collect();
        let points: Vec<LatLng> =
            std::iter::once(depot()).chain(lane.visits.iter().map(|v| v.at)).chain(std::iter::once(depot())).collect();
        let (_, broken) = timed("r".into(), &driver, &d, stops, |a, b| {
            if points[a] == points[b] { Leg::default() } else { model().leg(points[a], points[b]) }
        });
        assert!(broken.is_empty(), "{broken:?}");
    }
}

#[test]
fn a_slot_fills_and_every_accepted_stop_is_routed() {
    let mut plan = Tentative::new(depot(), model(), SERVICE, vec![van("A", 40, 200, 9), van("B", 40, 200, 9)]);
    let (mut accepted, mut refused) = (0, 0);
    for i in 1..=200 {
        let v = visit(i, 0, 4, 1, 2);
        let fits = plan.fits(&v);
        let inserted = plan.insert(v).is_ok();
        assert_eq!(fits, inserted, "fits and insert agree");
        if inserted {
            accepted += 1;
        } else {
            refused += 1;
        }
        check(&plan);
    }
    assert!(accepted > 10 && refused > 0, "{accepted} accepted, {refused} refused");
    assert_eq!(plan.len(), accepted);
    // Full: the room estimate says so, and says what binds.
    let room = plan.room(NINE, NINE + 4 * 3600, &visit(999, 0, 4, 1, 2));
    assert!(room.stops <= 3, "{room:?}");
}

#[test]
fn a_heavy_stop_goes_to_the_van_that_carries_it_or_nowhere() {
    let mut plan = Tentative::new(depot(), model(), SERVICE, vec![van("SMALL", 50, 100, 9), van("BIG", 50, 800, 9)]);
    let (place, _) = plan.insert(visit(1, 0, 4, 2, 300)).unwrap();
    assert_eq!(plan.vans()[place.lane].driver, "BIG");
    plan.insert(visit(2, 0, 4, 2, 450)).unwrap();
    // 750 kg in the big van: another 300 kg fits in neither.
    assert_eq!(plan.insert(visit(3, 0, 4, 2, 300)), Err(Binding::Kilograms));
    assert!(plan.fits(&visit(4, 0, 4, 2, 90)));
}

#[test]
fn a_window_out_of_the_shift_binds_the_shift_or_the_window() {
    let plan = Tentative::new(depot(), model(), SERVICE, vec![van("A", 50, 500, 3)]);
    // 13:00–17:00 while the shift ends at 12:00.
    assert_eq!(plan.place(&visit(1, 4, 8, 1, 1), false), Err(Binding::Window).or(Err(Binding::Shift)));
    let none = Tentative::new(depot(), model(), SERVICE, Vec::new());
    assert_eq!(none.place(&visit(1, 0, 4, 1, 1), false), Err(Binding::NoVan));
    assert_eq!(none.room(NINE, NINE + 3600, &visit(1, 0, 1, 1, 1)).binds, Some(Binding::NoVan));
}

#[test]
fn assembled_from_rows_keeps_routes_and_reports_what_no_longer_fits() {
    let mut plan = Tentative::new(depot(), model(), SERVICE, vec![van("A", 30, 500, 9), van("B", 30, 500, 9)]);
    let mut keys: std::collections::HashMap<i64, (String, f64)> = std::collections::HashMap::new();
    for i in 1..=40 {
        if let Ok((_, changes)) = plan.insert(visit(i, 0, 8, 1, 5)) {
            for c in changes {
                keys.insert(c.id, (c.driver, c.seq));
            }
        }
    }
    let held = plan.len();
    let rows = |ids: &mut dyn Iterator<Item = i64>| -> Vec<(Visit, Option<(String, f64)>)> {
        ids.map(|i| (visit(i, 0, 8, 1, 5), keys.get(&i).cloned())).collect()
    };
    // The same rows and fleet: the same routes, nothing to write.
    let same = Tentative::assemble(
        depot(),
        model(),
        SERVICE,
        plan.vans().to_vec(),
        rows(&mut (1..=40).filter(|i| plan.holds(*i))),
    );
    assert_eq!(same.plan.routes(), plan.routes());
    assert!(same.changes.is_empty() && same.unplaced.is_empty());
    // Van B gone: its stops go to A while A has room; the rest are unplaced, with the rule.
    let smaller = Tentative::assemble(
        depot(),
        model(),
        SERVICE,
        vec![van("A", 30, 500, 9)],
        rows(&mut (1..=40).filter(|i| plan.holds(*i))),
    );
    check(&smaller.plan);
    assert_eq!(smaller.plan.len() + smaller.unplaced.len(), held);
    assert!(!smaller.unplaced.is_empty());
    assert!(smaller.unplaced.iter().all(|(_, b)| *b == Binding::Parcels), "{:?}", smaller.unplaced);
    assert!(smaller.changes.iter().all(|c| c.driver == "A"));
}

#[test]
fn order_keys_are_renumbered_when_no_room_is_left_between_two() {
    let mut plan = Tentative::new(depot(), model(), SERVICE, vec![van("A", 500, 5000, 12)]);
    // The same place again and again: each goes in somewhere; keys stay strictly increasing.
    let mut renumbered = false;
    for i in 1..=120 {
        let mut v = visit(1, 0, 11, 1, 1);
        v.id = i;
        let (_, changes) = plan.insert(v).unwrap();
        renumbered |= changes.len() > 1;
        let seq = &plan.lanes[0].seq;
        assert!(seq.windows(2).all(|w| w[0] < w[1]));
    }
    let _ = renumbered;
    check(&plan);
}

#[test]
fn the_solver_improves_a_plan_kept_by_insertion_and_keeps_every_visit() {
    let mut plan = Tentative::new(depot(), model(), SERVICE, vec![van("A", 60, 500, 12), van("B", 60, 500, 12)]);
    for i in 1..=40 {
        plan.insert(visit(i, 0, 10, 1, 2)).unwrap();
    }
    let before = plan.totals().0;
    let better = plan.improved(7, &mut crate::routing::Iterations(2000)).expect("a cheaper plan");
    check(&better);
    assert!(better.totals().0 < before);
    let mut held: Vec<i64> = better.routes().into_iter().flat_map(|(_, ids)| ids).collect();
    held.sort_unstable();
    assert_eq!(held, (1..=40).collect::<Vec<_>>(), "every visit, once");
    assert_eq!(better.places().len(), 40);
    // Nothing to search: no answer, the plan stays.
    assert!(
        Tentative::new(depot(), model(), SERVICE, vec![van("A", 1, 1, 1)])
            .improved(1, &mut crate::routing::Iterations(10))
            .is_none()
    );
}

/// The plan's memory of which shapes fit is kept through its copies and changes: after every
/// insertion it answers exactly as a plan that remembers nothing (the routes' own memories
/// forgotten too) would, for shapes open, closed, and closed for different reasons.
#[test]
fn what_the_plan_remembers_of_a_shape_stays_true_through_its_changes() {
    let mut plan = Tentative::new(depot(), model(), SERVICE, vec![van("A", 30, 60, 5), van("B", 12, 500, 9)]);
    let shapes = [(0, 4, 1, 2), (0, 2, 1, 2), (3, 5, 2, 1), (0, 8, 1, 40), (6, 8, 3, 1)];
    let mut answers = std::collections::BTreeSet::new();
    for i in 1..=120 {
        let (from, to, parcels, kg) = shapes[(i % 5) as usize];
        let v = visit(i, from, to, parcels, kg);
        // A copy remembers what its original learnt.
        let copy = plan.clone();
        let _ = plan.insert(v);
        let mut forgetful = Tentative::clone(&plan);
        forgetful.open = Open::default();
        for l in &mut forgetful.lanes {
            let mut lane = Lane::clone(l);
            lane.closed = Closed::default();
            *l = Arc::new(lane);
        }
        for (k, &(from, to, parcels, kg)) in shapes.iter().enumerate() {
            // Asked at one place again and again (what did not fit there is remembered), and
            // at a place never asked before (the routes' own answers alone).
            let again = visit(1000 + k as i64, from, to, parcels, kg);
            let fresh = visit(2000 + 10 * i + k as i64, from, to, parcels, kg);
            assert_eq!(plan.lanes_for(&fresh), forgetful.lanes_for(&fresh), "shape {k} after stop {i}");
            let (fits, truth) = (plan.fits(&again), forgetful.fits(&again));
            assert_eq!(fits, truth, "shape {k} after stop {i}");
            assert_eq!(plan.place(&again, false).is_ok(), truth, "shape {k} after stop {i}");
            answers.insert(format!("{:?}", plan.place(&again, true).map(|_| ())));
        }
        assert!(copy.len() + 1 >= plan.len());
    }
    // The shapes went through open, and closed for more than one reason.
    assert!(answers.len() >= 3, "{answers:?}");
}

/// A route with a gap for a stop's window but too short a shift to drive there is passed by
/// for that place once it was tried: asked again, the stop still fits in the route that can
/// reach it, and a stop of the same shape near the depot still goes to the first route.
#[test]
fn a_route_that_cannot_reach_a_place_is_passed_by_for_that_place_alone() {
    let plan = Tentative::new(depot(), model(), SERVICE, vec![van("A", 30, 100, 1), van("B", 30, 100, 9)]);
    let far = Visit {
        id: 1,
        at: LatLng::new(43.6387 + 0.2, -79.4201).unwrap(),
        from: NINE,
        to: NINE + 9 * 3600,
        parcels: 1,
        grams: 1000,
    };
    for _ in 0..3 {
        assert_eq!(plan.place(&far, true).map(|p| p.lane), Ok(1), "only B reaches it");
    }
    let near = Visit { id: 2, at: LatLng::new(43.6390, -79.4200).unwrap(), ..far };
    assert_eq!(plan.place(&near, true).map(|p| p.lane), Ok(0), "A reaches this one");
}
