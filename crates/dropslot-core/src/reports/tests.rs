use super::*;

const H: i64 = 3_600_000;
const M: i64 = 60_000;

fn ev(status: Status, at_ms: i64, reason: Option<&str>) -> Event {
    Event { status, at_ms, reason: reason.map(String::from) }
}

/// A drop-off of slot 9:00–12:00 (hours as seconds of day 0), told `told`, with `events`.
fn drop_off(id: &str, zone: &str, events: Vec<Event>, told: Vec<Told>) -> DropOff {
    DropOff { unique_id: id.into(), zone: zone.into(), slot: "AM".into(), window: (9 * 3600, 12 * 3600), events, told }
}

#[test]
fn on_time_is_service_started_inside_the_slot_on_the_day() {
    let day = (0, 24 * H);
    let inside = drop_off("a", "Z", vec![ev(Status::Delivered, 12 * H, None)], vec![]);
    assert_eq!(outcome(&inside, day).on_time, Some(true), "the slot's end is inside");
    let late = drop_off("b", "Z", vec![ev(Status::Failed, 12 * H + 1, Some("absent"))], vec![]);
    let o = outcome(&late, day);
    assert_eq!((o.on_time, o.failed.as_deref(), o.delivered), (Some(false), Some("absent"), false));
    // An attempt of another day is not this day's.
    let other = drop_off("c", "Z", vec![ev(Status::Delivered, 25 * H, None)], vec![]);
    assert_eq!(outcome(&other, day).served_ms, None);
}

#[test]
fn eta_kept_uses_the_window_told_thirty_minutes_before() {
    let told = vec![
        Told { from_ms: 9 * H, to_ms: 9 * H + 30 * M, at_ms: 7 * H },
        // Told 20 minutes before the arrival: too late to count.
        Told { from_ms: 10 * H, to_ms: 10 * H + 30 * M, at_ms: 10 * H },
    ];
    let d = drop_off("a", "Z", vec![ev(Status::Delivered, 10 * H + 20 * M, None)], told);
    let o = outcome(&d, (0, 24 * H));
    // The middle of 9:00–9:30 is 9:15: 65 minutes off, outside.
    assert_eq!(o.eta, Some((false, 65 * M)));
    assert_eq!(told_before(&d.told, 10 * H + 30 * M).map(|w| w.at_ms), Some(10 * H), "exactly 30 minutes counts");
    assert_eq!(
        outcome(&drop_off("b", "Z", vec![ev(Status::Delivered, 7 * H + 10 * M, None)], d.told), (0, 24 * H)).eta,
        None
    );
}

#[test]
fn the_median_of_an_even_count_is_the_mean_of_its_middle_two() {
    assert_eq!(median(&mut [4, 1, 3, 2]), Some(2.5));
    assert_eq!(median(&mut [7]), Some(7.0));
    assert_eq!(median(&mut []), None);
    assert!((minutes(90_000.0) - 1.5).abs() < 1e-9);
}

#[test]
fn driven_distance_sums_positions_from_the_start() {
    let p = |t, lat| (t, LatLng::new(lat, -73.6).unwrap());
    let ps = vec![p(0, 45.0), p(10, 45.5), p(20, 45.51), p(30, 45.52)];
    let (m, span) = driven(&ps, 10, Some(25));
    let want = ps[1].1.distance_m(ps[2].1) + ps[2].1.distance_m(ps[3].1);
    assert_eq!(m, want.round() as i64);
    assert_eq!(span, Some(20));
    assert_eq!(driven(&[], 10, None), (0, None));
}

#[test]
fn a_day_groups_by_route_driver_zone_and_slot_and_a_range_adds_days() {
    let told = |from| vec![Told { from_ms: from, to_ms: from + 30 * M, at_ms: 0 }];
    let route = Route {
        id: "R1".into(),
        driver_id: "D1".into(),
        planned_start: 8 * 3600,
        planned_end: 13 * 3600,
        planned_distance_m: 10_000,
        drop_offs: vec![
            drop_off(
                "a",
                "Z1",
                vec![ev(Status::InTransit, 8 * H, None), ev(Status::Delivered, 10 * H, None)],
                told(10 * H),
            ),
            drop_off(
                "b",
                "Z2",
                vec![ev(Status::Failed, 13 * H, Some("absent")), ev(Status::Returned, 30 * H, None)],
                told(12 * H),
            ),
            drop_off("c", "Z1", vec![], vec![]),
        ],
        positions: vec![],
    };
    let d = Day { date: "2026-11-23".into(), bounds: (0, 24 * H), tz: jiff::tz::TimeZone::UTC, routes: vec![route] };
    let r = day(&d);
    let t = &r.totals;
    assert_eq!((t.shipments, t.delivered, t.failed, t.returned, t.served, t.on_time), (3, 1, 1, 1, 2, 1));
    assert_eq!(t.failed_by_reason.get("absent"), Some(&1));
    // Errors: |10:00 − 10:15| = 15 min, |13:00 − 12:15| = 45 min; kept: the first (10:00 is in 10:00–10:30).
    assert_eq!((t.eta_told, t.eta_kept, t.eta_median_error_min), (2, 1, Some(30.0)));
    assert_eq!(t.on_time_share(), Some(0.5));
    assert_eq!((t.first_stop_ms, t.last_stop_ms), (Some(10 * H), Some(13 * H)));
    let dist = t.distance.unwrap();
    assert_eq!((dist.planned_m, dist.planned_s, dist.driven_m, dist.driven_s), (10_000, 5 * 3600, 0, Some(5 * 3600)));
    assert_eq!(r.zones.iter().map(|(k, f)| (k.as_str(), f.shipments)).collect::<Vec<_>>(), [("Z1", 2), ("Z2", 1)]);
    assert_eq!(r.drivers[0].1.shipments, 3);
    let hours: Vec<(&str, u32)> = r.hours.iter().map(|(k, f)| (k.as_str(), f.served)).collect();
    assert_eq!(hours, [("10:00", 1), ("13:00", 1)]);
    let (days, totals) = range(&[d.clone(), d]);
    assert_eq!((days.len(), totals.shipments, totals.eta_told), (2, 6, 4));
    assert_eq!(totals.eta_median_error_min, Some(30.0));
}
