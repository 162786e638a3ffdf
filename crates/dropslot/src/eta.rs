//! A drop-off's live ETA window (CONTRACT §14): planned arrival ± 15 minutes, clipped to its
//! slot, moved as its driver completes stops or reports positions. The rule is the core's
//! (`dispatch::eta`); this module gathers what it needs — the route, which stops are served
//! and when, the driver's last position, the plan's road-time source — and stores the result
//! (`stop_etas`), which the tracking page, shipment reads and webhook payloads read.

use std::str::FromStr;

use jiff::tz::TimeZone;
use serde::Serialize;

use crate::app::App;
use crate::error::Result;
use crate::roads::Roads;
use dropslot_core::dispatch::eta::{self, Origin};
use dropslot_core::dispatch::{Plan, PlanKind, Route, StopKind};
use dropslot_core::geo::distance::LatLng;
use dropslot_core::shipments::Status;
use dropslot_store::{StoredEta, Visibility};

/// An ETA window as clients read it: local times with their offset (RFC 3339).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct EtaWindow {
    pub from: String,
    pub to: String,
    /// The expected arrival is after the slot's end: the window is not clipped to it.
    pub late: bool,
}

/// `e` in the time zone `tz`.
#[must_use]
pub fn view(e: &StoredEta, tz: &TimeZone) -> EtaWindow {
    let at = |ms: i64| {
        jiff::Timestamp::from_millisecond(ms).map_or_else(|_| String::new(), |t| dropslot_core::time::local(t, tz))
    };
    EtaWindow { from: at(e.from_ms), to: at(e.to_ms), late: e.late }
}

/// The current ETA window of the drop-off shipment `unique_id`, when it is on a published
/// delivery route (`None` otherwise).
pub async fn current(app: &App, unique_id: &str) -> Result<Option<EtaWindow>> {
    let Some(s) = app.store.shipment(Visibility::Ops, unique_id).await? else { return Ok(None) };
    let tz = dropslot_core::time::city_zone(&app.settings.area, &s.drop_off.city);
    Ok(shown(s.drop_off.status, s.eta.as_ref(), &tz))
}

/// The window `[from_ms, to_ms]` told to the recipient of drop-off `unique_id`, in its city's
/// time zone (`late` when it ends after the slot).
pub async fn told(app: &App, unique_id: &str, from_ms: i64, to_ms: i64) -> Result<Option<EtaWindow>> {
    let Some(s) = app.store.shipment(Visibility::Ops, unique_id).await? else { return Ok(None) };
    let tz = dropslot_core::time::city_zone(&app.settings.area, &s.drop_off.city);
    let slot_end = jiff::Timestamp::from_str(&s.drop_off.end_at).map(jiff::Timestamp::as_millisecond).ok();
    let late = slot_end.is_some_and(|end| to_ms > end);
    Ok(Some(view(&StoredEta { arrival_ms: (from_ms + to_ms) / 2, from_ms, to_ms, late, stops_before: 0 }, &tz)))
}

/// The ETA a drop-off in `status` shows: none once its stop is served (a stored window left
/// from before is stale).
#[must_use]
pub fn shown(status: Status, e: Option<&StoredEta>, tz: &TimeZone) -> Option<EtaWindow> {
    if served(status) { None } else { e.map(|e| view(e, tz)) }
}

/// Statuses after which a drop-off's stop is done for the day (the core's rule).
fn served(status: Status) -> bool {
    dropslot_core::dispatch::live::served(status)
}

/// Re-times the ETAs of every route of a published delivery plan (after publishing).
pub async fn refresh_plan(app: &App, plan: &Plan) -> Result<()> {
    if plan.kind != PlanKind::Delivery {
        return Ok(());
    }
    for route in &plan.routes {
        refresh(app, &plan.depot, route).await?;
    }
    Ok(())
}

/// Re-times the ETAs of `route` (of a published delivery plan of depot `depot`) from what is
/// known of its driver's progress: the latest served stop, or a newer position.
pub async fn refresh(app: &App, depot: &str, route: &Route) -> Result<()> {
    if !route.visits().iter().any(|s| s.kind == StopKind::DropOff) {
        return Ok(());
    }
    let now = app.clock.now();
    let ids: Vec<String> = route.visits().iter().flat_map(|s| s.shipment_unique_ids.iter().cloned()).collect();
    let progress: std::collections::HashMap<String, dropslot_store::StoredProgress> =
        app.store.progress_of(ids).await?.into_iter().map(|p| (p.unique_id.clone(), p)).collect();
    let mut served_stops = Vec::with_capacity(route.visits().len());
    let mut origin: Option<Origin> = None;
    for s in route.visits() {
        let mut done = s.kind == StopKind::DropOff;
        let mut last = None;
        for u in &s.shipment_unique_ids {
            // A shipment gone from the live ones (it cannot be, once published) holds nothing.
            let Some(p) = progress.get(u) else { continue };
            // Served, or gone from this stop since the route was published (CONTRACT §15: a
            // re-attempt or a reschedule books it into another slot): done for this route.
            done &= served(p.status) || dropslot_core::dispatch::moved_off(s, p.window);
            last = last.max(Some(p.at.as_second()));
        }
        if done
            && let (Some(time), Ok(at)) = (last, LatLng::new(s.lat, s.lng))
            && origin.is_none_or(|o| o.time < time)
        {
            origin = Some(Origin { at, time });
        }
        served_stops.push(done);
    }
    if let Some(p) = app.store.latest_position(&route.driver_id).await? {
        let time = p.at_ms.div_euclid(1000);
        // A position of this route's day, newer than the last stop served.
        let today = time >= route.start - 12 * 3600 && time <= route.end + 12 * 3600;
        if let (true, Ok(at)) = (today && origin.is_none_or(|o| o.time < time), LatLng::new(p.lat, p.lng)) {
            origin = Some(Origin { at, time });
        }
    }
    let points = origin.map(|o| eta::points(route, &served_stops, o.at));
    let matrix = match points {
        Some(points) => {
            let model = model(app, depot);
            Some(Roads::new(&app.settings.routing).matrix(model, points).await.map_err(crate::roads::error)?)
        }
        None => None,
    };
    let legs = |a: usize, b: usize| {
        matrix.as_ref().map_or(dropslot_core::routing::roads::Leg { metres: 0, seconds: 0 }, |m| m.leg(a, b))
    };
    let etas = eta::live(route, &served_stops, origin, now.as_second(), legs);
    // "You are the next stop" once a stop of the route is served (CONTRACT §16).
    let any_served = route.visits().iter().zip(&served_stops).any(|(s, done)| *done && s.kind == StopKind::DropOff);
    let next_stops = dropslot_core::notifications::new_time::next_stops(&etas, any_served, now.as_second());
    let rows = etas
        .into_iter()
        .map(|e| {
            let stored = StoredEta {
                arrival_ms: e.arrival * 1000,
                from_ms: e.from * 1000,
                to_ms: e.to * 1000,
                late: e.late,
                stops_before: e.stops_before,
            };
            (e.shipment_unique_id, stored)
        })
        .collect();
    app.store.save_etas(&route.id, rows, next_stops, now).await?;
    Ok(())
}

/// The road model of the city `depot` serves.
fn model(app: &App, depot: &str) -> dropslot_core::routing::roads::RoadModel {
    let area = &app.settings.area;
    let city = area.depot_zones(depot).next().and_then(|z| area.cities().get(z.city)).map(|c| c.code.clone());
    app.settings.routing.roads_of(city.as_deref().unwrap_or_default())
}
