//! Live ETAs of a published route (CONTRACT §14): each drop-off's window is its predicted
//! arrival ± 15 minutes, clipped to its slot; a prediction past the slot's end is `late` and
//! left unclipped, so the window never leaves the slot without saying so.
//!
//! The prediction starts from where the driver is known to be — the last stop served, or a
//! newer reported position — and runs the rest of the route in its order over the road model,
//! waiting where a stop's window has not opened, with each stop's service time. A stop not
//! served yet is not reached before `now`.

use crate::geo::distance::LatLng;
use crate::routing::roads::Leg;

use super::{Route, StopKind};

/// Half the width of an ETA window, seconds.
pub const HALF_WINDOW_S: i64 = 15 * 60;

/// One shipment's ETA on its route, Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShipmentEta {
    pub shipment_unique_id: String,
    /// The predicted arrival at its stop.
    pub arrival: i64,
    pub from: i64,
    pub to: i64,
    /// The arrival is after the slot's end.
    pub late: bool,
    /// Stops of the route not served yet before this one.
    pub stops_before: u32,
}

/// The window shown for a predicted `arrival` in the slot `[slot_from, slot_to]`.
#[must_use]
pub fn window(arrival: i64, slot_from: i64, slot_to: i64) -> (i64, i64, bool) {
    let (from, to) = (arrival - HALF_WINDOW_S, arrival + HALF_WINDOW_S);
    if arrival > slot_to { (from, to, true) } else { (from.max(slot_from), to.min(slot_to), false) }
}

/// Where the prediction starts: a point and the time the driver was there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Origin {
    pub at: LatLng,
    pub time: i64,
}

/// The ETAs of the drop-offs of `route` not served yet. `served[i]` says whether visit `i`
/// (of [`Route::visits`]) is done; `origin` is where the driver was last known to be (`None`:
/// nothing is known yet, the plan's times stand); `legs(a, b)` is the road between points,
/// where point 0 is the origin and point `k` the `k`th remaining visit.
#[must_use]
pub fn live(
    route: &Route,
    served: &[bool],
    origin: Option<Origin>,
    now: i64,
    legs: impl Fn(usize, usize) -> Leg,
) -> Vec<ShipmentEta> {
    let remaining: Vec<&super::Stop> = route
        .visits()
        .iter()
        .enumerate()
        .filter(|(i, _)| !served.get(*i).copied().unwrap_or(false))
        .map(|(_, s)| s)
        .collect();
    let mut out = Vec::new();
    let mut time = origin.map_or(0, |o| o.time);
    for (k, s) in remaining.iter().enumerate() {
        let arrival = if origin.is_some() {
            let arrive = (time + legs(k, k + 1).seconds).max(now).max(s.from);
            time = arrive + s.service_s;
            arrive
        } else {
            // No progress known: the plan's time, but never before now.
            s.eta.max(now)
        };
        if s.kind == StopKind::DropOff {
            let (from, to, late) = window(arrival, s.from, s.to);
            for u in &s.shipment_unique_ids {
                out.push(ShipmentEta {
                    shipment_unique_id: u.clone(),
                    arrival,
                    from,
                    to,
                    late,
                    stops_before: u32::try_from(k).unwrap_or(u32::MAX),
                });
            }
        }
    }
    out
}

/// The points [`live`]'s `legs` are over: the origin, then each remaining visit in order.
#[must_use]
pub fn points(route: &Route, served: &[bool], origin: LatLng) -> Vec<LatLng> {
    std::iter::once(origin)
        .chain(
            route
                .visits()
                .iter()
                .enumerate()
                .filter(|(i, _)| !served.get(*i).copied().unwrap_or(false))
                .map(|(_, s)| LatLng::new(s.lat, s.lng).unwrap_or(origin)),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::Stop;

    fn stop(seq: u32, lng: f64, eta: i64) -> Stop {
        Stop {
            seq,
            kind: StopKind::DropOff,
            shipment_unique_ids: vec![format!("S{seq}")],
            address: String::new(),
            receiver: String::new(),
            phone: String::new(),
            lat: 43.65,
            lng,
            from: 1_000_000,
            to: 1_000_000 + 4 * 3600,
            eta,
            parcels: 1,
            grams: 1000,
            loads: vec![(1, 1000)],
            service_s: 180,
        }
    }

    fn route(n: u32) -> Route {
        let depot = Stop { kind: StopKind::Depot, shipment_unique_ids: vec![], ..stop(0, -79.40, 999_000) };
        let mut stops = vec![depot.clone()];
        stops.extend((1..=n).map(|i| stop(i, -79.40 + 0.01 * f64::from(i), 1_000_000 + i64::from(i) * 600)));
        stops.push(Stop { seq: n + 1, ..depot });
        Route {
            id: "P.D".into(),
            driver_id: "D".into(),
            capacity_parcels: 100,
            capacity_grams: 100_000,
            shift_start: 990_000,
            shift_end: 1_100_000,
            start: 999_000,
            end: 1_010_000,
            distance_m: 0,
            duration_s: 0,
            stops,
        }
    }

    /// Ten minutes between any two points.
    fn ten_minutes(_: usize, _: usize) -> Leg {
        Leg { metres: 1000, seconds: 600 }
    }

    #[test]
    fn a_window_is_the_arrival_give_or_take_15_minutes_inside_the_slot() {
        assert_eq!(window(5000, 0, 10_000), (4100, 5900, false));
        assert_eq!(window(300, 0, 10_000), (0, 1200, false), "clipped at the slot's start");
        assert_eq!(window(9_800, 0, 10_000), (8900, 10_000, false), "clipped at its end");
        assert_eq!(window(10_100, 0, 10_000), (9200, 11_000, true), "past the slot: late, said so");
    }

    #[test]
    fn without_progress_the_plan_stands_but_never_before_now() {
        let r = route(3);
        let etas = live(&r, &[false; 3], None, 0, ten_minutes);
        assert_eq!(etas.iter().map(|e| e.arrival).collect::<Vec<_>>(), [1_000_600, 1_001_200, 1_001_800]);
        assert_eq!(etas.iter().map(|e| e.stops_before).collect::<Vec<_>>(), [0, 1, 2]);
        let etas = live(&r, &[false; 3], None, 1_001_000, ten_minutes);
        assert_eq!(etas[0].arrival, 1_001_000);
    }

    #[test]
    fn a_driver_running_late_moves_every_later_window() {
        let r = route(10);
        let served = [true, true, false, false, false, false, false, false, false, false];
        // Stop 2 served at 11:00 instead of 10:20 (say): 40 minutes late.
        let origin = Origin { at: LatLng::new(43.65, -79.38).unwrap(), time: 1_000_000 + 2 * 600 + 2400 };
        let etas = live(&r, &served, Some(origin), origin.time, ten_minutes);
        assert_eq!(etas.len(), 8);
        assert_eq!(etas[0].shipment_unique_id, "S3");
        assert_eq!(etas[0].stops_before, 0);
        assert_eq!(etas[0].arrival, origin.time + 600);
        for w in etas.windows(2) {
            assert_eq!(w[1].arrival, w[0].arrival + 180 + 600, "service, then the next leg");
        }
        for (e, planned) in etas.iter().zip(r.visits()[2..].iter()) {
            assert!(e.arrival > planned.eta, "{} later than planned", e.shipment_unique_id);
        }
        // Late enough that the last stops fall past their slot: said so, never clipped away.
        let far = Origin { time: 1_000_000 + 4 * 3600 - 1200, ..origin };
        let etas = live(&r, &served, Some(far), far.time, ten_minutes);
        let last = etas.last().unwrap();
        assert!(last.late && last.from > 1_000_000 + 4 * 3600 - HALF_WINDOW_S, "{last:?}");
        assert!(etas.iter().all(|e| e.late || e.to <= 1_000_000 + 4 * 3600));
    }

    #[test]
    fn the_points_are_the_origin_then_the_remaining_stops() {
        let r = route(3);
        let o = LatLng::new(43.6, -79.5).unwrap();
        let p = points(&r, &[true, false, false], o);
        assert_eq!(p.len(), 3);
        assert_eq!(p[0], o);
        assert!((p[1].lng() - (-79.38)).abs() < 1e-9);
    }
}
