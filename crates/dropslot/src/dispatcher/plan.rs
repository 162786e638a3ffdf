//! A plan's page: its routes as tables and a drawn map, what is unassigned and why, and the
//! forms that move a stop, re-optimise and publish (the API's functions in `crate::plans`).

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::map::{self, Map};
use super::{Frame, OpsPosted, OpsSession, PageResult, clock, fail};
use crate::app::App;
use crate::dashboard::{field_list, page, see_other};
use crate::error::Error;
use crate::plans::wire::{MoveRequest, PlanView, StopView};
use dropslot_core::dispatch::StopKind;
use dropslot_store::StoredPlan;

#[derive(Template)]
#[template(path = "ops/plan.html")]
struct PlanPage {
    frame: Option<Frame>,
    plan: PlanView,
    draft: bool,
    /// When it was published, in the depot's local time (`2026-11-23 07:00`).
    published: Option<String>,
    distance_km: String,
    duration: String,
    routes: Vec<RouteBlock>,
    map: Option<Map>,
    /// Whether a route holds a return stop (the map's legend says how it is drawn).
    returns: bool,
    /// Every shipment of the plan, for the move form.
    shipments: Vec<String>,
    /// (route id, its letter and driver) for the move form.
    targets: Vec<(String, String)>,
    /// (driver id, name) of every driver of the depot, for the "driver out" forms.
    depot_drivers: Vec<(String, String)>,
    /// The move form as sent, after a refusal.
    sent: MoveForm,
    errors: Vec<(String, String)>,
}

#[derive(Default)]
struct MoveForm {
    shipment: String,
    route: String,
    position: String,
}

struct RouteBlock {
    letter: char,
    /// The route's colour as a class (`tone-N`): the CSP allows no inline style.
    tone: usize,
    driver: String,
    start: String,
    end: String,
    distance_km: String,
    duration: String,
    /// Where the driver's phone last reported it was, today (`14:05, ±12 m`).
    last_seen: Option<String>,
    stops: Vec<StopRow>,
}

struct StopRow {
    label: String,
    depot: bool,
    /// A return stop: the parcels of failed deliveries handed back to their merchant.
    ret: bool,
    window: String,
    eta: String,
    address: String,
    shipments: String,
    parcels: u32,
}

fn km(m: i64) -> String {
    format!("{:.1} km", m as f64 / 1000.0)
}

fn hours(s: i64) -> String {
    format!("{} h {:02} min", s / 3600, (s % 3600) / 60)
}

fn stop_row(letter: char, s: &StopView) -> StopRow {
    let depot = s.kind == "depot";
    StopRow {
        label: if depot { "Depot".into() } else { format!("{letter}{}", s.seq) },
        depot,
        ret: s.kind == StopKind::Return.as_str(),
        window: if depot { String::new() } else { format!("{}–{}", clock(&s.window.from), clock(&s.window.to)) },
        eta: clock(&s.eta),
        address: s.address.clone(),
        shipments: s.shipment_unique_ids.join(", "),
        parcels: s.parcels,
    }
}

async fn render(
    app: &App,
    session: &OpsSession,
    stored: &StoredPlan,
    tz: &jiff::tz::TimeZone,
    sent: MoveForm,
    errors: Vec<(String, String)>,
    status: StatusCode,
) -> PageResult {
    let plan = &stored.plan;
    let view = PlanView::new(plan, tz);
    let drivers = app.store.drivers(Some(&plan.depot)).await.map_err(|e| fail(session)(e.into()))?;
    let names: HashMap<&str, &str> = drivers.iter().map(|d| (d.id.as_str(), d.driver.name.as_str())).collect();
    let driver = |id: &str| names.get(id).map_or_else(|| id.to_string(), |n| format!("{n} ({id})"));
    // The drivers' last positions on a published plan, when measured on the plan's date.
    let mut seen: HashMap<String, dropslot_store::Position> = HashMap::new();
    if view.status == "published" {
        for r in &plan.routes {
            let last = app.store.latest_position(&r.driver_id).await.map_err(|e| fail(session)(e.into()))?;
            let on_date = |p: &dropslot_store::Position| {
                jiff::Timestamp::from_millisecond(p.at_ms)
                    .is_ok_and(|t| t.to_zoned(tz.clone()).date().to_string() == plan.date)
            };
            if let Some(p) = last.filter(on_date) {
                seen.insert(r.driver_id.clone(), p);
            }
        }
    }
    let last_seen = |driver_id: &str| {
        seen.get(driver_id).map(|p| {
            let at = jiff::Timestamp::from_millisecond(p.at_ms).map(|t| dropslot_core::time::local(t, tz));
            format!("{}, ±{:.0} m", clock(&at.unwrap_or_default()), p.accuracy_m)
        })
    };
    let routes: Vec<RouteBlock> = view
        .routes
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let letter = map::letter(i);
            RouteBlock {
                letter,
                tone: map::tone(i),
                driver: driver(&r.driver_id),
                start: clock(&r.start),
                end: clock(&r.end),
                distance_km: km(r.distance_m),
                duration: hours(r.duration_s),
                last_seen: last_seen(&r.driver_id),
                stops: r.stops.iter().map(|s| stop_row(letter, s)).collect(),
            }
        })
        .collect();
    let drawn: Vec<(usize, Vec<map::Spot>)> = plan
        .routes
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.visits().is_empty())
        .map(|(i, r)| (i, r.visits().iter().map(|s| ((s.lat, s.lng), s.kind == StopKind::Return)).collect()))
        .collect();
    let depot = plan.routes.first().and_then(|r| r.stops.first()).map(|s| (s.lat, s.lng));
    let positions: Vec<(usize, (f64, f64))> = plan
        .routes
        .iter()
        .enumerate()
        .filter_map(|(i, r)| seen.get(&r.driver_id).map(|p| (i, (p.lat, p.lng))))
        .collect();
    let map = depot.map(|d| map::draw(d, &drawn, &positions));
    let returns = drawn.iter().any(|(_, stops)| stops.iter().any(|(_, ret)| *ret));
    let mut shipments: Vec<String> = plan.routes.iter().flat_map(|r| r.shipments().map(String::from)).collect();
    shipments.extend(plan.unassigned.iter().map(|u| u.shipment_unique_id.clone()));
    let targets = plan
        .routes
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id.clone(), format!("{} · {}", map::letter(i), driver(&r.driver_id))))
        .collect();
    let depot_drivers = drivers.iter().map(|d| (d.id.clone(), driver(&d.id))).collect();
    let body = PlanPage {
        frame: Some(session.frame("board")),
        draft: view.status == "draft",
        published: view.published_at.as_deref().map(|t| format!("{} {}", t.get(..10).unwrap_or(t), clock(t))),
        distance_km: km(view.cost.distance_m),
        duration: hours(view.cost.duration_s),
        plan: view,
        routes,
        map,
        returns,
        shipments,
        targets,
        depot_drivers,
        sent,
        errors,
    };
    Ok(page(status, body.render()))
}

/// `GET /ops/plans/{id}`.
pub(super) async fn show(State(app): State<App>, session: OpsSession, Path(id): Path<String>) -> PageResult {
    let (stored, tz) = crate::plans::read_plan(&app, &id).await.map_err(fail(&session))?;
    render(&app, &session, &stored, &tz, MoveForm::default(), Vec::new(), StatusCode::OK).await
}

/// `POST /ops/plans/{id}/moves`: the API's move; a refused move is the plan page again, the
/// broken rule in words above the form.
pub(super) async fn move_stop(
    State(app): State<App>,
    Path(id): Path<String>,
    OpsPosted { session, fields }: OpsPosted,
) -> PageResult {
    let sent = MoveForm {
        shipment: fields.get("shipment_unique_id").unwrap_or("").to_string(),
        route: fields.get("to_route_id").unwrap_or("").to_string(),
        position: fields.get("position").unwrap_or("").to_string(),
    };
    let moved = match sent.position.parse::<i64>() {
        Ok(position) if position >= 1 => {
            let request =
                MoveRequest { shipment_unique_id: sent.shipment.clone(), to_route_id: sent.route.clone(), position };
            crate::plans::move_in_plan(&app, &id, &request).await.map(|_| ())
        }
        _ => Err(Error::invalid("position", "A whole number from 1 (the first stop after the depot).")),
    };
    match moved {
        Ok(()) => Ok(see_other(&format!("/ops/plans/{id}#routes"))),
        Err(Error::Validation(errors)) => {
            let (stored, tz) = crate::plans::read_plan(&app, &id).await.map_err(fail(&session))?;
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            render(&app, &session, &stored, &tz, sent, field_list(&errors), status).await
        }
        Err(e) => Err(fail(&session)(e)),
    }
}

/// `POST /ops/plans/{id}/publish`.
pub(super) async fn publish(
    State(app): State<App>,
    Path(id): Path<String>,
    OpsPosted { session, .. }: OpsPosted,
) -> PageResult {
    crate::plans::publish_plan(&app, &id).await.map_err(fail(&session))?;
    Ok(see_other(&format!("/ops/plans/{id}")))
}

/// `POST /ops/plans/{id}/optimize`: a short search (5 s), published stops kept.
pub(super) async fn optimize(
    State(app): State<App>,
    Path(id): Path<String>,
    OpsPosted { session, fields }: OpsPosted,
) -> PageResult {
    let seconds = fields.get("time_limit_s").and_then(|t| t.parse().ok()).unwrap_or(5);
    crate::plans::optimize_plan(&app, &id, Some(seconds), &[]).await.map_err(fail(&session))?;
    Ok(see_other(&format!("/ops/plans/{id}")))
}

/// A "driver out" form's outcome: back to the plan, or the plan page with the refusal's
/// field errors above the forms.
async fn after_driver_out(app: &App, session: &OpsSession, id: &str, done: Result<(), Error>) -> PageResult {
    match done {
        Ok(()) => Ok(see_other(&format!("/ops/plans/{id}#routes"))),
        Err(Error::Validation(errors)) => {
            let (stored, tz) = crate::plans::read_plan(app, id).await.map_err(fail(session))?;
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            render(app, session, &stored, &tz, MoveForm::default(), field_list(&errors), status).await
        }
        Err(e) => Err(fail(session)(e)),
    }
}

/// `POST /ops/plans/{id}/reassign`: a route handed to another driver before it starts (the
/// API's `POST /ops/routes/{id}/reassign`).
pub(super) async fn reassign(
    State(app): State<App>,
    Path(id): Path<String>,
    OpsPosted { session, fields }: OpsPosted,
) -> PageResult {
    let route = fields.get("route_id").unwrap_or("").to_string();
    let driver = fields.get("driver_id").unwrap_or("").to_string();
    let done = if route.starts_with(&format!("{id}.")) {
        crate::plans::reassign_route(&app, &route, &driver).await.map(|_| ())
    } else {
        Err(Error::invalid("route_id", "Choose a route of this plan."))
    };
    after_driver_out(&app, &session, &id, done).await
}

/// `POST /ops/plans/{id}/exclude`: the routes not started yet planned again without a driver
/// who is out (the API's `optimize` with `exclude_driver_ids`), a short search (5 s).
pub(super) async fn exclude(
    State(app): State<App>,
    Path(id): Path<String>,
    OpsPosted { session, fields }: OpsPosted,
) -> PageResult {
    let out = fields.all("driver_id");
    let done = crate::plans::optimize_plan(&app, &id, Some(5), &out).await.map(|_| ());
    after_driver_out(&app, &session, &id, done).await
}
