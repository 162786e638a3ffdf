//! The day as it runs (CONTRACT §16): one published route's progress (stops served, failed,
//! left), its predicted end and its alerts — a stop predicted past its slot, a driver silent
//! for [`SILENT_AFTER_S`] while the route runs, a stop taking over [`SLOW_FACTOR`] times its
//! service time. Pure: the caller passes what is stored and the clock's `now`.

use super::{Route, Stop, StopKind};
use crate::shipments::Status;

/// A running route's driver with no position for this long is an alert, seconds.
pub const SILENT_AFTER_S: i64 = 15 * 60;
/// A stop that takes over this many times its service time is an alert.
pub const SLOW_FACTOR: i64 = 3;

/// Whether a drop-off in `status` is done with for the day (served, or gone from the route).
#[must_use]
pub fn served(status: Status) -> bool {
    !matches!(
        status,
        Status::Scheduled
            | Status::ToPickUp
            | Status::PickedUp
            | Status::Processing
            | Status::InTransit
            | Status::ToAttempt
    )
}

/// Where one visit of the route stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// Every shipment of it delivered (or handed back), at this time (Unix seconds).
    Served(i64),
    /// Done without a delivery (failed, or moved off the route), at this time.
    Failed(i64),
    /// Still to do; its predicted arrival (Unix seconds) when one is stored.
    Left(Option<i64>),
}

/// What is known of the route now, beside the route itself.
#[derive(Debug, Clone)]
pub struct Known {
    /// One per visit of [`Route::visits`].
    pub visits: Vec<Visit>,
    /// When the route started (its van left the depot), if it did.
    pub started: Option<i64>,
    /// The driver's latest position's time, if any.
    pub last_position: Option<i64>,
    pub now: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alert {
    /// Visit `index` is predicted to arrive after its slot's end.
    PastSlot { index: usize, arrival: i64, slot_end: i64 },
    /// No position from the driver since `since` (the latest one, or the start).
    Silent { since: i64 },
    /// Visit `index` has taken since `since` (when the driver should have reached it), over
    /// [`SLOW_FACTOR`] times its service time.
    SlowStop { index: usize, since: i64, service_s: i64 },
}

/// A route's figures on the live board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub served: usize,
    pub failed: usize,
    pub left: usize,
    /// Started and not finished.
    pub running: bool,
    /// When the van is predicted back at the depot (Unix seconds).
    pub predicted_end: i64,
    pub alerts: Vec<Alert>,
}

/// The planned drive from the visit before `index` (or the depot) to it, seconds: its planned
/// arrival less the previous planned departure. Where the plan waits for a window to open this
/// is more than the drive, which only makes a slow stop alert later, never sooner.
fn planned_drive(visits: &[Stop], index: usize, route_start: i64) -> i64 {
    let departure = index.checked_sub(1).map_or(route_start, |p| visits[p].eta + visits[p].service_s);
    (visits[index].eta - departure).max(0)
}

/// The route's progress, predicted end and alerts.
#[must_use]
pub fn assess(route: &Route, known: &Known) -> Progress {
    let visits = route.visits();
    let (mut served, mut failed, mut left) = (0, 0, 0);
    let mut last_done: Option<i64> = None;
    for v in &known.visits {
        match *v {
            Visit::Served(at) => {
                served += 1;
                last_done = last_done.max(Some(at));
            }
            Visit::Failed(at) => {
                failed += 1;
                last_done = last_done.max(Some(at));
            }
            Visit::Left(_) => left += 1,
        }
    }
    let running = known.started.is_some() && left > 0;
    let mut alerts = Vec::new();
    // The drive back from the last visit, as planned.
    let back = visits.last().map_or(0, |l| (route.end - (l.eta + l.service_s)).max(0));
    let last_left = known.visits.iter().enumerate().rev().find_map(|(i, v)| match v {
        Visit::Left(a) => Some((i, *a)),
        _ => None,
    });
    let predicted_end = match last_left {
        Some((i, arrival)) => {
            let s = &visits[i];
            arrival.unwrap_or(s.eta).max(known.now) + s.service_s + back
        }
        None => last_done.map_or(route.end, |t| t + back),
    };
    for (i, (s, v)) in visits.iter().zip(&known.visits).enumerate() {
        if let (Visit::Left(Some(arrival)), StopKind::DropOff) = (v, s.kind)
            && *arrival > s.to
        {
            alerts.push(Alert::PastSlot { index: i, arrival: *arrival, slot_end: s.to });
        }
    }
    if let (true, Some(started)) = (running, known.started) {
        let since = known.last_position.map_or(started, |p| p.max(started));
        if known.now - since > SILENT_AFTER_S {
            alerts.push(Alert::Silent { since });
        }
        // The stop the driver is at or driving to: the first one left.
        if let Some(i) = known.visits.iter().position(|v| matches!(v, Visit::Left(_))) {
            let s = &visits[i];
            let from = last_done.map_or(started, |t| t.max(started));
            let since = (from + planned_drive(visits, i, route.start)).max(s.from);
            if s.service_s > 0 && known.now - since > SLOW_FACTOR * s.service_s {
                alerts.push(Alert::SlowStop { index: i, since, service_s: s.service_s });
            }
        }
    }
    Progress { served, failed, left, running, predicted_end, alerts }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stop(seq: u32, eta: i64) -> Stop {
        Stop {
            seq,
            kind: StopKind::DropOff,
            shipment_unique_ids: vec![format!("S{seq}")],
            address: String::new(),
            receiver: String::new(),
            phone: String::new(),
            lat: 43.65,
            lng: -79.4,
            from: 10_000,
            to: 10_000 + 4 * 3600,
            eta,
            parcels: 1,
            grams: 1000,
            loads: vec![(1, 1000)],
            service_s: 300,
        }
    }

    /// Three stops at 10 000, 11 000 and 12 000 (600 s drives, 300 s service), back at 13 000.
    fn route() -> Route {
        let depot = Stop { kind: StopKind::Depot, shipment_unique_ids: vec![], ..stop(0, 9_400) };
        Route {
            id: "P.D".into(),
            driver_id: "D".into(),
            capacity_parcels: 10,
            capacity_grams: 10_000,
            shift_start: 0,
            shift_end: 100_000,
            start: 9_400,
            end: 13_000,
            distance_m: 0,
            duration_s: 0,
            stops: vec![depot.clone(), stop(1, 10_000), stop(2, 10_900), stop(3, 11_800), Stop { seq: 4, ..depot }],
        }
    }

    fn known(visits: Vec<Visit>, started: Option<i64>, last_position: Option<i64>, now: i64) -> Known {
        Known { visits, started, last_position, now }
    }

    #[test]
    fn before_the_start_the_plan_stands_and_nothing_alerts() {
        let p = assess(&route(), &known(vec![Visit::Left(None); 3], None, None, 50_000));
        assert_eq!((p.served, p.failed, p.left, p.running), (0, 0, 3, false));
        assert!(p.alerts.is_empty(), "{p:?}");
    }

    #[test]
    fn progress_counts_and_the_end_follows_the_last_stop_left() {
        let v = vec![Visit::Served(10_300), Visit::Failed(11_500), Visit::Left(Some(12_400))];
        let p = assess(&route(), &known(v, Some(9_400), Some(12_000), 12_000));
        assert_eq!((p.served, p.failed, p.left, p.running), (1, 1, 1, true));
        // 600 s later than planned at the last stop: back 600 s later.
        assert_eq!(p.predicted_end, 13_600);
        assert!(p.alerts.is_empty(), "{p:?}");
        let done = vec![Visit::Served(10_300), Visit::Failed(11_500), Visit::Served(12_500)];
        let p = assess(&route(), &known(done, Some(9_400), None, 20_000));
        assert!(!p.running && p.alerts.is_empty(), "finished: no alerts: {p:?}");
        assert_eq!(p.predicted_end, 12_500 + 900);
    }

    #[test]
    fn a_stop_predicted_past_its_slot_alerts() {
        let end = 10_000 + 4 * 3600;
        let v = vec![Visit::Served(10_300), Visit::Left(Some(end - 10)), Visit::Left(Some(end + 60))];
        let p = assess(&route(), &known(v, Some(9_400), Some(11_000), 11_000));
        assert_eq!(p.alerts, [Alert::PastSlot { index: 2, arrival: end + 60, slot_end: end }]);
    }

    #[test]
    fn a_silent_driver_alerts_after_15_minutes_while_the_route_runs() {
        let v = || vec![Visit::Left(None); 3];
        let p = assess(&route(), &known(v(), Some(9_400), None, 9_400 + SILENT_AFTER_S));
        assert!(!p.alerts.iter().any(|a| matches!(a, Alert::Silent { .. })), "not yet: {p:?}");
        let p = assess(&route(), &known(v(), Some(9_400), None, 9_401 + SILENT_AFTER_S));
        assert!(p.alerts.contains(&Alert::Silent { since: 9_400 }), "{p:?}");
        let p = assess(&route(), &known(v(), Some(9_400), Some(10_000), 10_000 + SILENT_AFTER_S + 1));
        assert!(p.alerts.contains(&Alert::Silent { since: 10_000 }));
        let p = assess(&route(), &known(v(), None, None, 90_000));
        assert!(p.alerts.is_empty(), "not started: not running");
    }

    #[test]
    fn a_stop_over_three_times_its_service_alerts() {
        // Stop 2 served at 10 300; stop 2 reached 600 s later (10 900): slow after 900 s more.
        let v = || vec![Visit::Served(10_300), Visit::Left(None), Visit::Left(None)];
        let slow = |now: i64| {
            assess(&route(), &known(v(), Some(9_400), Some(now), now))
                .alerts
                .into_iter()
                .find(|a| matches!(a, Alert::SlowStop { .. }))
        };
        assert_eq!(slow(10_900 + 900), None);
        assert_eq!(slow(10_900 + 901), Some(Alert::SlowStop { index: 1, since: 10_900, service_s: 300 }));
        // Waiting for the first window to open is not slow: measured from the window.
        let first = |now: i64| {
            let p = assess(&route(), &known(vec![Visit::Left(None); 3], Some(5_000), Some(now), now));
            p.alerts.into_iter().any(|a| matches!(a, Alert::SlowStop { .. }))
        };
        assert!(!first(10_000 + 900) && first(10_000 + 901));
    }
}
