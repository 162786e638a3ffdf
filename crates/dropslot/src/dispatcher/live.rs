//! The live board of a depot's day (CONTRACT §16): each published delivery route with its
//! progress, its predicted end and its alerts, decided by the core (`dispatch::live`) from the
//! stored progress, ETAs and positions. Without script: a reload link, and on request
//! (`auto=1`) a `<meta http-equiv="refresh">`.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{RawQuery, State};
use jiff::tz::TimeZone;

use super::{Frame, OpsSession, PageResult, fail, ok};
use crate::app::App;
use crate::error::{Error, Result};
use dropslot_core::dispatch::live::{self, Alert, Known, Visit};
use dropslot_core::dispatch::{PlanKind, PlanStatus, Route, moved_off};
use dropslot_core::shipments::Status;

/// Seconds between the page's reloads.
const REFRESH_S: u32 = 60;

#[derive(Template)]
#[template(path = "ops/live.html")]
struct LivePage {
    frame: Option<Frame>,
    date: String,
    depot: String,
    depot_name: String,
    depots: Vec<(String, String)>,
    refresh_s: u32,
    /// Reload by itself (`auto=1`: chosen by the dispatcher, for a wall screen; a page that
    /// reloads unasked is an accessibility failure, WCAG 2.2.1).
    auto: bool,
    /// The clock's time, `HH:MM` local.
    now: String,
    routes: Vec<RouteRow>,
    alerts: Vec<AlertRow>,
}

struct RouteRow {
    id: String,
    plan: String,
    driver: String,
    served: usize,
    failed: usize,
    left: usize,
    state: &'static str,
    planned_end: String,
    predicted_end: String,
    alerts: usize,
}

struct AlertRow {
    route: String,
    driver: String,
    kind: &'static str,
    text: String,
}

fn hhmm(s: i64, tz: &TimeZone) -> String {
    jiff::Timestamp::from_second(s).map(|t| t.to_zoned(tz.clone()).strftime("%H:%M").to_string()).unwrap_or_default()
}

/// What is stored of `route` now, as the core's rule reads it.
async fn known(app: &App, route: &Route, now: i64) -> Result<Known> {
    let ids: Vec<String> = route.shipments().map(str::to_string).collect();
    let progress: HashMap<String, dropslot_store::StoredProgress> =
        app.store.progress_of(ids).await?.into_iter().map(|p| (p.unique_id.clone(), p)).collect();
    let etas: HashMap<String, dropslot_store::StoredEta> = app.store.route_etas(&route.id).await?.into_iter().collect();
    let mut visits = Vec::with_capacity(route.visits().len());
    let mut started: Option<i64> = None;
    for s in route.visits() {
        let (mut done, mut delivered, mut at, mut arrival) = (true, true, None, None);
        for u in &s.shipment_unique_ids {
            let Some(p) = progress.get(u) else { continue };
            let t = p.at.as_second();
            // Out of the depot: the rule late placement and re-planning use too.
            if dropslot_core::dispatch::late::on_the_road(p.status) {
                started = Some(started.map_or(t, |x: i64| x.min(t)));
            }
            if live::served(p.status) || moved_off(s, p.window) {
                at = at.max(Some(t));
                delivered &= matches!(p.status, Status::Delivered | Status::Returned);
            } else {
                done = false;
                arrival = etas.get(u).map(|e| e.arrival_ms.div_euclid(1000)).or(arrival);
            }
        }
        visits.push(match (done, at) {
            (true, Some(t)) if delivered => Visit::Served(t),
            (true, Some(t)) => Visit::Failed(t),
            _ => Visit::Left(arrival),
        });
    }
    let last_position = app.store.latest_position(&route.driver_id).await?.map(|p| p.at_ms.div_euclid(1000));
    Ok(Known { visits, started, last_position, now })
}

/// `GET /ops/live?date=&depot=&auto=`: default the first depot, and today in its city.
pub(super) async fn show(State(app): State<App>, session: OpsSession, RawQuery(raw): RawQuery) -> PageResult {
    let q = crate::http::query_params(raw.as_deref(), &["date", "depot", "auto"]).map_err(fail(&session))?;
    let area = &app.settings.area;
    let depots: Vec<(String, String)> = area.depots().iter().map(|d| (d.code.clone(), d.name.clone())).collect();
    let depot = match q.get("depot").filter(|d| !d.is_empty()) {
        Some(code) => {
            area.depot(code).ok_or_else(|| fail(&session)(Error::invalid("query.depot", "No depot has this code.")))?
        }
        None => area.depots().first().ok_or_else(|| fail(&session)(Error::NotFound))?,
    };
    let tz = crate::plans::depot_tz(&app, &depot.code);
    let now = app.clock.now();
    let date = match q.get("date").filter(|d| !d.is_empty()) {
        Some(d) => crate::capacity::date_at("query.date", d).map_err(fail(&session))?,
        None => now.to_zoned(tz.clone()).date(),
    };
    let plans = app.store.plans_on(date).await.map_err(|e| fail(&session)(e.into()))?;
    let mut drivers: HashMap<String, String> = HashMap::new();
    let (mut routes, mut alerts) = (Vec::new(), Vec::new());
    let published = plans
        .iter()
        .map(|p| &p.plan)
        .filter(|p| p.depot == depot.code && p.kind == PlanKind::Delivery && p.status == PlanStatus::Published);
    for plan in published {
        for route in plan.routes.iter().filter(|r| !r.visits().is_empty()) {
            let k = known(&app, route, now.as_second()).await.map_err(fail(&session))?;
            let p = live::assess(route, &k);
            if !drivers.contains_key(&route.driver_id) {
                let name = app.store.driver(&route.driver_id).await.map_err(|e| fail(&session)(e.into()))?;
                drivers
                    .insert(route.driver_id.clone(), name.map_or_else(|| route.driver_id.clone(), |d| d.driver.name));
            }
            let driver = drivers[&route.driver_id].clone();
            for a in &p.alerts {
                let stop = |i: usize| route.visits().get(i).map_or(0, |s| s.seq);
                let (kind, text) = match *a {
                    Alert::PastSlot { index, arrival, slot_end } => (
                        "past-slot",
                        format!(
                            "Stop {} is predicted at {}, after its slot's end at {}.",
                            stop(index),
                            hhmm(arrival, &tz),
                            hhmm(slot_end, &tz)
                        ),
                    ),
                    Alert::Silent { since } => (
                        "no-position",
                        format!("No position from the driver since {} while the route runs.", hhmm(since, &tz)),
                    ),
                    Alert::SlowStop { index, since, service_s } => (
                        "slow-stop",
                        format!(
                            "Stop {} has taken since {}, over three times its {} min of service.",
                            stop(index),
                            hhmm(since, &tz),
                            service_s.div_euclid(60).max(1)
                        ),
                    ),
                };
                alerts.push(AlertRow { route: route.id.clone(), driver: driver.clone(), kind, text });
            }
            routes.push(RouteRow {
                id: route.id.clone(),
                plan: plan.id.clone(),
                driver,
                served: p.served,
                failed: p.failed,
                left: p.left,
                state: match (p.running, p.left) {
                    (true, _) => "running",
                    (false, 0) => "finished",
                    (false, _) => "not started",
                },
                planned_end: hhmm(route.end, &tz),
                predicted_end: hhmm(p.predicted_end, &tz),
                alerts: p.alerts.len(),
            });
        }
    }
    Ok(ok(LivePage {
        frame: Some(session.frame("live")),
        date: date.to_string(),
        depot: depot.code.clone(),
        depot_name: depot.name.clone(),
        depots,
        refresh_s: REFRESH_S,
        auto: q.get("auto").is_some_and(|a| a == "1"),
        now: now.to_zoned(tz.clone()).strftime("%H:%M").to_string(),
        routes,
        alerts,
    }
    .render()))
}
