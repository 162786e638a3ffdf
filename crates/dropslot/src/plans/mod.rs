//! Day plans over the API (CONTRACT §12, operator tokens): create (solve), read, list, move a
//! stop, re-optimise with published stops kept, publish, delete a draft. The rules are the
//! core's (`dropslot_core::dispatch`, `routing`); road times come from `crate::roads`; the
//! store keeps one open plan per depot, date and kind.

pub mod improve;
pub mod late;
mod pace;
pub mod wire;

use std::time::Instant;

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use jiff::civil::Date;
use jiff::tz::TimeZone;

use crate::app::App;
use crate::auth::staff::OperatorCaller;
use crate::capacity::date_at;
use crate::error::{Envelope, Error, ErrorEnvelope, FieldErrors, Result, envelope};
use crate::http::{JsonBody, PathParam};
use crate::roads::{RoadError, Roads};
use dropslot_core::dispatch::{
    self, Broken, Depot, Driver, Plan, PlanKind, PlanStatus, Problem, ServiceTime, retime, route_points,
};
use dropslot_core::geo::distance::LatLng;
use dropslot_core::routing::{self, roads::RoadModel};
use dropslot_store::{SaveOutcome, StoredPlan};
use wire::{MoveRequest, OptimizeRequest, PlanList, PlanRequest, PlanView, ReassignRequest};

/// A plan left `solving` this long after its start was abandoned by a crashed process (the
/// longest solve is 60 s, plus its road times).
const SOLVING_LEASE_MS: i64 = 300_000;
const DEFAULT_TIME_LIMIT_S: i64 = 10;

pub fn routes() -> axum::Router<App> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route(crate::http::api_path!("/ops/plans"), post(create).get(list))
        .route(crate::http::api_path!("/ops/plans/{id}"), get(show).delete(remove))
        .route(crate::http::api_path!("/ops/plans/{id}/moves"), post(move_stop))
        .route(crate::http::api_path!("/ops/plans/{id}/optimize"), post(optimize))
        .route(crate::http::api_path!("/ops/plans/{id}/publish"), post(publish))
        .route(crate::http::api_path!("/ops/routes/{id}/sheet.pdf"), get(sheet))
        .route(crate::http::api_path!("/ops/routes/{id}/reassign"), post(reassign))
}

/// A depot a plan can start from: its coordinates and its city's time zone and road model.
struct Base {
    depot: Depot,
    tz: TimeZone,
    model: RoadModel,
}

fn base(app: &App, code: &str) -> Result<Base> {
    let area = &app.settings.area;
    let d = area.depot(code).ok_or_else(|| Error::invalid("depot", "No depot (warehouse) has this code."))?;
    let Some((lat, lng)) = d.location else {
        return Err(Error::invalid(
            "depot",
            "This depot has no coordinates in the area file ([[warehouses]] lat and lng): routes start from it.",
        ));
    };
    let at = LatLng::new(lat, lng).map_err(|e| Error::Internal(e.message().into()))?;
    let city = area
        .depot_zones(code)
        .next()
        .and_then(|z| area.cities().get(z.city))
        .ok_or_else(|| Error::invalid("depot", "No zone is served from this depot."))?;
    Ok(Base {
        depot: Depot { code: d.code.clone(), address: d.address.clone().unwrap_or_else(|| d.name.clone()), at },
        tz: city.tz.clone(),
        model: app.settings.routing.roads_of(&city.code),
    })
}

fn time_limit(given: Option<i64>, errors: &mut FieldErrors) -> f64 {
    let s = given.unwrap_or(DEFAULT_TIME_LIMIT_S);
    if !(1..=60).contains(&s) {
        errors.add("time_limit_s", "From 1 to 60 seconds.");
    }
    s.clamp(1, 60) as f64
}

/// Unix seconds of `minutes` after midnight of `date` in `tz`.
fn local_seconds(date: Date, minutes: u16, tz: &TimeZone) -> Result<i64> {
    let time = jiff::civil::Time::new(i8::try_from(minutes / 60).unwrap_or(0), (minutes % 60) as i8, 0, 0)
        .map_err(|e| Error::Internal(e.to_string()))?;
    date.to_datetime(time)
        .to_zoned(tz.clone())
        .map(|z| z.timestamp().as_second())
        .map_err(|e| Error::Internal(e.to_string()))
}

/// The drivers a plan of `depot` on `date` takes: those named (each of this depot), or every
/// driver of the depot who works that weekday.
async fn drivers(app: &App, depot: &str, date: Date, ids: Option<&[String]>, tz: &TimeZone) -> Result<Vec<Driver>> {
    let mut errors = FieldErrors::new();
    let stored = match ids {
        Some(ids) => {
            let mut found = Vec::with_capacity(ids.len());
            for (i, id) in ids.iter().enumerate() {
                if ids[..i].contains(id) {
                    errors.add(format!("driver_ids.{i}"), "This driver is named twice.");
                    continue;
                }
                match app.store.driver(id).await? {
                    Some(d) if d.driver.depot == depot => found.push(d),
                    Some(_) => errors.add(format!("driver_ids.{i}"), "This driver works from another depot."),
                    None => errors.add(format!("driver_ids.{i}"), "No driver has this id."),
                }
            }
            found
        }
        None => app
            .store
            .drivers(Some(depot))
            .await?
            .into_iter()
            .filter(|d| d.driver.weekdays.contains(date.weekday()))
            .collect(),
    };
    errors.into_result()?;
    if stored.is_empty() {
        return Err(Error::invalid(
            if ids.is_some() { "driver_ids" } else { "depot" },
            "No driver to plan for: none of this depot works on this date's weekday.",
        ));
    }
    stored.into_iter().map(|d| planned(d, date, tz)).collect()
}

/// A stored driver as a plan of `date` sees it: the van's capacities, the shift that day.
fn planned(d: dropslot_store::StoredDriver, date: Date, tz: &TimeZone) -> Result<Driver> {
    Ok(Driver {
        capacity_parcels: i64::from(d.driver.vehicle.capacity_parcels),
        capacity_grams: i64::from(d.driver.vehicle.capacity_kg) * 1000,
        shift_start: local_seconds(date, d.driver.shift.start, tz)?,
        shift_end: local_seconds(date, d.driver.shift.end, tz)?,
        id: d.id,
    })
}

fn roads_error(e: RoadError) -> Error {
    crate::roads::error(e)
}

/// The solver thread's name (what `top -H` and `/proc/PID/task/*/comm` show).
pub const SOLVER_THREAD: &str = "dropslot-solver";
/// The solver thread's nice value: the lowest priority. A solve keeps its core busy for its
/// whole time limit; at the default nice 0, two plans at once on a 2-core machine took the
/// API's p99 to 1.9–5.5× of idle (docs/performance.md, "The API beside two plans solving: the
/// pacer"; 1.1–1.5× at 19). On Linux the thread also takes the `SCHED_IDLE` policy (see
/// [`lower_priority`]), under which the nice value no longer counts; it stays as the fallback.
pub const SOLVER_NICE: i32 = 19;

/// Routes by (driver id, shipment unique ids in order).
type Routes = Vec<(String, Vec<String>)>;

/// Solves `problem` (fixed routes given by driver id) within `seconds`: the road matrix, then
/// the solver on a thread of its own at the lowest priority, so the API keeps serving ahead of
/// it. Returns the routes and the shipments left out, for plan `plan_id`.
async fn solve(
    paused: &prometheus_client::metrics::counter::Counter<f64, std::sync::atomic::AtomicU64>,
    roads: &Roads,
    model: RoadModel,
    problem: Problem,
    (fixed, start): (Routes, Routes),
    plan_id: String,
    seconds: f64,
) -> Result<(Vec<dispatch::Route>, Vec<dispatch::Unassigned>)> {
    let began = Instant::now();
    let matrix = roads.matrix(model, problem.points()).await.map_err(roads_error)?;
    on_solver_thread(paused, began, seconds, move |budget| {
        let mut instance = problem.instance(&matrix, &fixed).map_err(Error::Internal)?;
        instance.start = problem.starts(&start);
        let solution = routing::solve(&instance, seed(&plan_id), budget);
        Ok(problem.routes(&plan_id, &matrix, &solution))
    })
    .await?
}

/// Runs `work` on a thread of its own at the lowest priority ([`lower_priority`]) with a
/// [`pace::Pacer`] of `seconds` from `began` as its budget (it steps aside while the API is
/// busy): a day plan's solve, and the background improvement of the tentative plans (issue
/// 45). Not the blocking pool's thread: its priority cannot be raised back without
/// privileges, and the pool's threads run the store's reads afterwards.
pub(crate) async fn on_solver_thread<T: Send + 'static>(
    paused: &prometheus_client::metrics::counter::Counter<f64, std::sync::atomic::AtomicU64>,
    began: Instant,
    seconds: f64,
    work: impl FnOnce(&mut dyn routing::Budget) -> T + Send + 'static,
) -> Result<T> {
    let (done, answer) = tokio::sync::oneshot::channel();
    let paused = paused.clone();
    std::thread::Builder::new()
        .name(SOLVER_THREAD.into())
        .spawn(move || {
            lower_priority();
            // The limit counts from `began`, road times included; the solver asks after each
            // step, and steps aside while the API is busy (`pace.rs`).
            let mut budget = pace::Pacer::new(began, seconds);
            let out = work(&mut budget);
            paused.inc_by(budget.paused.as_secs_f64());
            // The caller may be gone (a plan's task is not): nothing to tell then.
            let _ = done.send(out);
        })
        .map_err(|e| Error::Internal(format!("the solver's thread did not start: {e}")))?;
    answer.await.map_err(|_| Error::Internal("the solver's thread failed".into()))
}

/// The calling thread (only it) to the `SCHED_IDLE` policy and [`SOLVER_NICE`]. Under
/// `SCHED_IDLE` the scheduler runs the thread only on a CPU nothing else wants, and a request's
/// thread that wakes takes the CPU from it at once. Priority alone did not keep the API's p99
/// within 2× of idle on a fast 2-vCPU machine (any busy thread doubles it there); the solver
/// also steps aside while the process is busy (`pace.rs`; docs/performance.md, "The API beside
/// two plans solving: the pacer"). Lowering one's own priority needs no privilege; should it
/// fail all the same, the solve runs at the normal priority.
/// Elsewhere than on Linux (where a nice value is a thread's own) it keeps the normal one.
fn lower_priority() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use thread_priority::{NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy};
        // First: setting the policy sets the nice value too (to the policy's own minimum, 0).
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        if let Err(e) = thread_priority::set_thread_priority_and_policy(
            thread_priority::thread_native_id(),
            ThreadPriority::Min,
            idle,
        ) {
            tracing::warn!(error = ?e, "the solver's thread keeps the normal scheduling policy");
        }
        if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), SOLVER_NICE) {
            tracing::warn!(error = %e, "the solver's thread keeps the normal priority");
        }
    }
}

/// A plan's seed: from its id, so that the same plan re-solved on the same budget of
/// iterations would take the same path.
fn seed(plan_id: &str) -> u64 {
    plan_id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// `POST /ops/plans`: solves a new draft.
#[utoipa::path(post, path = "/ops/plans", tag = "Dispatch", operation_id = "create_plan",
    summary = "Plan a depot's day",
    description = "Solves the depot's live shipments of the date that are not in a published route: for `delivery`, its drop-offs not final, `failed` (awaiting their follow-up) or `return_scheduled` (a re-attempt, `to_attempt`, comes on its new date); for `pick_up`, its pick-ups not final and its returns due (`return_scheduled` drop-offs whose return slot is on the date: stops of kind `return` at the order's pick-up address, in the return slot, their parcels counted as load), over the drivers named or every driver of the depot working that weekday. Every stop is served inside its window, no vehicle is loaded beyond its capacities, and every route starts and ends at the depot within its driver's shift; a shipment that fits nowhere is in `unassigned` with its reason. One plan per depot, date and kind is open at a time (being solved, or a draft): another is a 409.",
    security(("operator_token" = [])), request_body = PlanRequest,
    responses(
        (status = 201, description = "The draft plan.", body = Envelope<PlanView>),
        (status = 409, description = "Another plan of this depot, date and kind is open (being solved, or a draft).", body = ErrorEnvelope),
        (status = 422, description = "A field is invalid (`date`, `depot`, `kind`, `driver_ids.N`, `time_limit_s`).", body = ErrorEnvelope),
        (status = 503, description = "The routing engine (OSRM) did not answer.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn create(
    State(app): State<App>,
    _: OperatorCaller,
    JsonBody(request, _): JsonBody<PlanRequest>,
) -> Result<Response> {
    let (plan, tz) = create_plan(&app, &request).await?;
    Ok(envelope(201, "Plan made.", &PlanView::new(&plan, &tz)).into_response())
}

/// Solves a new draft plan: what `POST /ops/plans` and the dispatcher's board both do.
/// Returns the plan and its depot's time zone.
pub(crate) async fn create_plan(app: &App, request: &PlanRequest) -> Result<(Plan, TimeZone)> {
    let mut errors = FieldErrors::new();
    let date = date_at("date", &request.date);
    let kind = PlanKind::parse(&request.kind);
    if kind.is_none() {
        errors.add("kind", "`delivery` or `pick_up`.");
    }
    let seconds = time_limit(request.time_limit_s, &mut errors);
    if request.driver_ids.as_ref().is_some_and(|d| d.len() > 500) {
        errors.add("driver_ids", "At most 500 drivers.");
    }
    let base = base(app, &request.depot);
    if let Err(Error::Validation(e)) = &date {
        errors.merge(e.clone());
    }
    if let Err(Error::Validation(e)) = &base {
        errors.merge(e.clone());
    }
    errors.into_result()?;
    let (date, base, kind) = (date?, base?, kind.unwrap_or(PlanKind::Delivery));
    let drivers = drivers(app, &base.depot.code, date, request.driver_ids.as_deref(), &base.tz).await?;
    let id = dropslot_core::ids::sortable_id("PLN", 10);
    let now = app.clock.now();
    let began = app.store.begin_plan(&id, &base.depot.code, date, kind, now.as_millisecond(), SOLVING_LEASE_MS).await?;
    if !began {
        return Err(Error::Conflict(
            "Another plan of this depot, date and kind is open (being solved, or a draft): publish or delete it first."
                .into(),
        ));
    }
    // Solved in a task of its own: a client that goes away does not leave the plan half made.
    let task = {
        let app = app.clone();
        let id = id.clone();
        tokio::spawn(async move {
            let made = make(&app, &id, &base, kind, date, drivers, seconds, now.as_second()).await;
            if made.is_err() {
                let _ = app.store.abandon_plan(&id).await;
            }
            made.map(|plan| (plan, base.tz))
        })
    };
    task.await.map_err(|e| Error::Internal(format!("the plan's task failed: {e}")))?
}

#[allow(clippy::too_many_arguments)]
async fn make(
    app: &App,
    id: &str,
    base: &Base,
    kind: PlanKind,
    date: Date,
    drivers: Vec<Driver>,
    seconds: f64,
    now: i64,
) -> Result<Plan> {
    let candidates = app.store.plan_candidates(kind, &base.depot.code, date, None).await?;
    let service = service_time(&app.settings.routing);
    // A depot that books on its fleet plans its deliveries from the tentative plan that sold
    // them (issue 45): the search starts from its routes, so it never places fewer.
    let (problem, start) = if kind == PlanKind::Delivery && app.settings.capacity.fleet(&base.depot.code) {
        let start = app.store.tentative_routes(&base.depot.code, date).await?;
        (Problem::ungrouped(kind, base.depot.clone(), drivers, service, candidates), start)
    } else {
        (Problem::new(kind, base.depot.clone(), drivers, service, candidates), Vec::new())
    };
    let roads = Roads::new(&app.settings.routing);
    let (routes, unassigned) =
        solve(&app.metrics.solver_paused, &roads, base.model, problem, (Vec::new(), start), id.to_string(), seconds)
            .await?;
    let plan = Plan {
        id: id.to_string(),
        status: PlanStatus::Draft,
        date: date.to_string(),
        depot: base.depot.code.clone(),
        kind,
        roads: roads.source().into(),
        created_at: now,
        published_at: None,
        routes,
        unassigned,
    };
    if !app.store.finish_plan(&plan).await? {
        return Err(Error::Conflict("The plan took too long and was abandoned; start it again.".into()));
    }
    Ok(plan)
}

fn service_time(r: &dropslot_core::config::RoutingSettings) -> ServiceTime {
    ServiceTime { stop_seconds: i64::from(r.stop_seconds), parcel_seconds: i64::from(r.parcel_seconds) }
}

/// The plan with this id (and its version) in its depot's time zone, or 404: the plan page.
pub(crate) async fn read_plan(app: &App, id: &str) -> Result<(StoredPlan, TimeZone)> {
    let (stored, base) = load(app, id).await?;
    Ok((stored, base.tz))
}

/// The time zone of a depot's city (UTC for a depot no longer in the area file).
pub(crate) fn depot_tz(app: &App, depot: &str) -> TimeZone {
    base(app, depot).map_or(TimeZone::UTC, |b| b.tz)
}

/// The plan with this id and its depot's time zone, or 404.
async fn load(app: &App, id: &str) -> Result<(StoredPlan, Base)> {
    let stored = app.store.plan(id).await?.ok_or(Error::NotFound)?;
    let base = base(app, &stored.plan.depot).map_err(|_| {
        Error::Conflict(format!(
            "The plan's depot {} is no longer in the area file with coordinates.",
            stored.plan.depot
        ))
    })?;
    Ok((stored, base))
}

fn saved(outcome: SaveOutcome) -> Result<()> {
    match outcome {
        SaveOutcome::Saved(_) => Ok(()),
        SaveOutcome::Stale => {
            Err(Error::Conflict("The plan changed while this request was made: read it again.".into()))
        }
        SaveOutcome::Taken(s) => Err(Error::Conflict(format!(
            "Shipment {s} is already in a route of another published plan: re-optimise this plan."
        ))),
    }
}

/// `GET /ops/plans?date=`.
#[utoipa::path(get, path = "/ops/plans", tag = "Dispatch", operation_id = "list_plans",
    summary = "The plans of a date",
    description = "Drafts and published plans of every depot on the date, by depot and kind.",
    security(("operator_token" = [])),
    params(("date" = String, Query, format = Date, description = "YYYY-MM-DD (required).")),
    responses(
        (status = 200, description = "The plans.", body = Envelope<PlanList>),
        (status = 422, description = "A missing or malformed `query.date`, or another parameter.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn list(State(app): State<App>, _: OperatorCaller, RawQuery(raw): RawQuery) -> Result<Response> {
    let q = crate::http::query_params(raw.as_deref(), &["date"])?;
    let date = date_at("query.date", q.get("date").map_or("", String::as_str))?;
    let mut views = Vec::new();
    for stored in app.store.plans_on(date).await? {
        let tz = depot_tz(&app, &stored.plan.depot);
        views.push(PlanView::new(&stored.plan, &tz));
    }
    Ok(envelope(200, "Plans.", &PlanList { plans: views }).into_response())
}

/// `GET /ops/plans/{id}`.
#[utoipa::path(get, path = "/ops/plans/{id}", tag = "Dispatch", operation_id = "get_plan",
    summary = "A plan", security(("operator_token" = [])),
    params(("id" = String, Path, description = "The plan's id.")),
    responses(
        (status = 200, description = "The plan.", body = Envelope<PlanView>),
        (status = 404, description = "No plan has this id.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn show(State(app): State<App>, _: OperatorCaller, PathParam(id): PathParam<String>) -> Result<Response> {
    let (stored, base) = load(&app, &id).await?;
    Ok(envelope(200, "Plan.", &PlanView::new(&stored.plan, &base.tz)).into_response())
}

/// `DELETE /ops/plans/{id}`: a draft only.
#[utoipa::path(delete, path = "/ops/plans/{id}", tag = "Dispatch", operation_id = "delete_plan",
    summary = "Delete a draft plan",
    description = "A published plan stays (its routes are with their drivers): 409.",
    security(("operator_token" = [])),
    params(("id" = String, Path, description = "The plan's id.")),
    responses(
        (status = 200, description = "Deleted.", body = Envelope<crate::error::EmptyObject>),
        (status = 404, description = "No plan has this id.", body = ErrorEnvelope),
        (status = 409, description = "The plan is published, or changed meanwhile.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn remove(State(app): State<App>, _: OperatorCaller, PathParam(id): PathParam<String>) -> Result<Response> {
    let (stored, _) = load(&app, &id).await?;
    if stored.plan.status == PlanStatus::Published {
        return Err(Error::Conflict("A published plan cannot be deleted: its routes are with their drivers.".into()));
    }
    if !app.store.delete_plan(&id, stored.version).await? {
        return Err(Error::Conflict("The plan changed while this request was made: read it again.".into()));
    }
    Ok(envelope(200, "Plan deleted.", &crate::error::EmptyObject {}).into_response())
}

/// The rules a change breaks, as a 422 at `field` (a move's `position`, a hand-over's
/// `driver_id`) naming each rule.
fn broken(field: &str, rules: &[Broken]) -> Error {
    let mut errors = FieldErrors::new();
    for b in rules {
        errors.add(field, format!("Rule `{}`: {}.", b.rule, b.message));
    }
    Error::Validation(errors)
}

/// `POST /ops/plans/{id}/moves`.
#[utoipa::path(post, path = "/ops/plans/{id}/moves", tag = "Dispatch", operation_id = "move_plan_stop",
    summary = "Move a shipment's stop",
    description = "Moves the shipment (out of its stop, which splits if it held others; or from `unassigned`) to `position` of route `to_route_id`, and re-times both routes. A move that breaks a hard rule is refused with a 422 naming the rule at `position`: `window`, `capacity_parcels`, `capacity_kg` or `shift`.",
    security(("operator_token" = [])), request_body = MoveRequest,
    params(("id" = String, Path, description = "The plan's id.")),
    responses(
        (status = 200, description = "The plan after the move.", body = Envelope<PlanView>),
        (status = 404, description = "No plan has this id.", body = ErrorEnvelope),
        (status = 409, description = "The plan changed meanwhile, or the shipment became final or went into another published route since it was planned.", body = ErrorEnvelope),
        (status = 422, description = "An unknown shipment or route, a position out of range, or a broken rule.", body = ErrorEnvelope),
        (status = 503, description = "The routing engine (OSRM) did not answer.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn move_stop(
    State(app): State<App>,
    _: OperatorCaller,
    PathParam(id): PathParam<String>,
    JsonBody(request, _): JsonBody<MoveRequest>,
) -> Result<Response> {
    let (next, tz) = move_in_plan(&app, &id, &request).await?;
    Ok(envelope(200, "Stop moved.", &PlanView::new(&next, &tz)).into_response())
}

/// Moves a shipment's stop and re-times the routes it touches: what `POST
/// /ops/plans/{id}/moves` and the plan page's move form both do. A broken rule is a 422 at
/// `position` naming the rule.
pub(crate) async fn move_in_plan(app: &App, id: &str, request: &MoveRequest) -> Result<(Plan, TimeZone)> {
    let (stored, base) = load(app, id).await?;
    let position = usize::try_from(request.position).unwrap_or(0);
    let (mut next, changed) =
        dispatch::place(&stored.plan, &request.shipment_unique_id, &request.to_route_id, position)
            .map_err(|(field, message)| Error::invalid(field, message))?;
    // The shipment must still be plannable: not final, in no other published route.
    let date: Date = stored.plan.date.parse().map_err(|_| Error::Internal(format!("plan {id}: its date")))?;
    let live = app.store.plan_candidates(stored.plan.kind, &stored.plan.depot, date, Some(id)).await?;
    if !live.iter().any(|c| c.unique_id == request.shipment_unique_id) {
        return Err(Error::Conflict(format!(
            "Shipment {} is final or in another published route since this plan was made: re-optimise the plan.",
            request.shipment_unique_id
        )));
    }
    let roads = Roads::new(&app.settings.routing);
    let mut rules = Vec::new();
    for r in changed {
        let points = route_points(&next.routes[r], &base.depot);
        let matrix = roads.matrix(base.model, points).await.map_err(roads_error)?;
        match retime(&next.routes[r], &base.depot, &matrix) {
            Ok(timed) => next.routes[r] = timed,
            Err(mut b) => rules.append(&mut b),
        }
    }
    if !rules.is_empty() {
        return Err(broken("position", &rules));
    }
    saved(app.store.save_plan(&next, stored.version).await?)?;
    Ok((next, base.tz))
}

/// `POST /ops/plans/{id}/optimize`.
#[utoipa::path(post, path = "/ops/plans/{id}/optimize", tag = "Dispatch", operation_id = "optimize_plan",
    summary = "Re-optimise a plan",
    description = "Solves the plan again over its drivers, with the depot's shipments as they are now (new ones in, final ones out). In a published plan every published stop stays on its route in its order; new shipments may be added around them.",
    security(("operator_token" = [])), request_body(content = Option<OptimizeRequest>, description = "Optional: it may be left out."),
    params(("id" = String, Path, description = "The plan's id.")),
    responses(
        (status = 200, description = "The plan, re-solved.", body = Envelope<PlanView>),
        (status = 404, description = "No plan has this id.", body = ErrorEnvelope),
        (status = 409, description = "The plan changed meanwhile.", body = ErrorEnvelope),
        (status = 422, description = "`time_limit_s` out of range.", body = ErrorEnvelope),
        (status = 503, description = "The routing engine (OSRM) did not answer.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn optimize(
    State(app): State<App>,
    _: OperatorCaller,
    PathParam(id): PathParam<String>,
    request: axum::extract::Request,
) -> Result<Response> {
    // The body may be left out: no Content-Type and nothing in it.
    let empty = !request.headers().contains_key(axum::http::header::CONTENT_TYPE)
        && request.headers().get(axum::http::header::CONTENT_LENGTH).is_none_or(|v| v.as_bytes() == b"0");
    let request: OptimizeRequest = if empty {
        OptimizeRequest::default()
    } else {
        // `null` is no body too.
        let JsonBody(r, _) =
            <JsonBody<Option<OptimizeRequest>> as axum::extract::FromRequest<App>>::from_request(request, &app).await?;
        r.unwrap_or_default()
    };
    let (next, tz) = optimize_plan(&app, &id, request.time_limit_s, &request.exclude_driver_ids).await?;
    Ok(envelope(200, "Plan re-optimised.", &PlanView::new(&next, &tz)).into_response())
}

/// Solves a plan again, published stops kept in place: what `POST /ops/plans/{id}/optimize`
/// and the plan page's button both do. In a published plan a route whose van has left the
/// depot is left as it is (no stop in or out: CONTRACT §16), and `exclude` names drivers out
/// whose routes not started yet are planned again without them.
pub(crate) async fn optimize_plan(
    app: &App,
    id: &str,
    time_limit_s: Option<i64>,
    exclude: &[String],
) -> Result<(Plan, TimeZone)> {
    let mut errors = FieldErrors::new();
    let seconds = time_limit(time_limit_s, &mut errors);
    let (stored, base) = load(app, id).await?;
    for (i, d) in exclude.iter().enumerate() {
        if exclude[..i].contains(d) {
            errors.add(format!("exclude_driver_ids.{i}"), "This driver is named twice.");
        } else if !stored.plan.routes.iter().any(|r| r.driver_id == *d) {
            errors.add(format!("exclude_driver_ids.{i}"), "No route of this plan has this driver.");
        }
    }
    errors.into_result()?;
    let plan = stored.plan;
    let date: Date = plan.date.parse().map_err(|_| Error::Internal(format!("plan {id}: its date")))?;
    let published = plan.status == PlanStatus::Published;
    let started = if published { late::started_routes(app, &plan).await? } else { vec![false; plan.routes.len()] };
    // Started routes stay as they are, whoever is excluded; the others are planned again,
    // without the excluded drivers.
    let kept: Vec<&dispatch::Route> = plan.routes.iter().zip(&started).filter(|(_, s)| **s).map(|(r, _)| r).collect();
    let on_kept: std::collections::HashSet<&str> = kept.iter().flat_map(|r| r.shipments()).collect();
    let replanned: Vec<&dispatch::Route> = plan
        .routes
        .iter()
        .zip(&started)
        .filter(|(r, s)| !**s && !exclude.contains(&r.driver_id))
        .map(|(r, _)| r)
        .collect();
    let drivers: Vec<Driver> = replanned.iter().map(|r| dispatch::driver_of(r)).collect();
    let routes: Vec<(String, Vec<String>)> =
        replanned.iter().map(|r| (r.driver_id.clone(), r.shipments().map(String::from).collect())).collect();
    // A published plan's routes are fixed; a draft's are where the search starts (so that
    // optimising never places fewer than the draft did).
    let (fixed, start) = if published { (routes, Vec::new()) } else { (Vec::new(), routes) };
    let candidates: Vec<_> = app
        .store
        .plan_candidates(plan.kind, &plan.depot, date, Some(&plan.id))
        .await?
        .into_iter()
        .filter(|c| !on_kept.contains(c.unique_id.as_str()))
        .collect();
    let service = service_time(&app.settings.routing);
    let roads = Roads::new(&app.settings.routing);
    let (mut routes, unassigned) = if drivers.is_empty() {
        // Nobody left to plan for: every shipment not on a started route waits, with the reason.
        let depot = &base.depot;
        let unassigned = candidates
            .into_iter()
            .map(|c| dispatch::Unassigned {
                shipment_unique_id: c.unique_id.clone(),
                reason: dispatch::late::NO_DRIVER.into(),
                stop: dispatch::late::stop_for(depot, service, c),
            })
            .collect();
        (Vec::new(), unassigned)
    } else {
        let problem = if plan.kind == PlanKind::Delivery && app.settings.capacity.fleet(&plan.depot) {
            Problem::ungrouped(plan.kind, base.depot.clone(), drivers, service, candidates)
        } else {
            Problem::new(plan.kind, base.depot.clone(), drivers, service, candidates)
        };
        solve(&app.metrics.solver_paused, &roads, base.model, problem, (fixed, start), plan.id.clone(), seconds).await?
    };
    routes.extend(kept.into_iter().cloned());
    routes.sort_by(|a, b| a.driver_id.cmp(&b.driver_id));
    let before: std::collections::HashSet<&str> =
        plan.unassigned.iter().map(|u| u.shipment_unique_id.as_str()).collect();
    let newly: Vec<String> = unassigned
        .iter()
        .filter(|u| !before.contains(u.shipment_unique_id.as_str()))
        .map(|u| u.shipment_unique_id.clone())
        .collect();
    let next = Plan { routes, unassigned, roads: roads.source().into(), ..plan };
    saved(app.store.save_plan(&next, stored.version).await?)?;
    if published {
        if let Err(e) = crate::eta::refresh_plan(app, &next).await {
            tracing::warn!(plan = %next.id, error = %e, "the re-planned routes' ETAs were not computed");
        }
        // What no route takes now is rebooked or held (`[dispatch] unplaced`), as at publish.
        if next.kind == PlanKind::Delivery && !newly.is_empty() {
            app.store.replan_day(&next.depot, date, newly, app.clock.now()).await?;
        }
    }
    Ok((next, base.tz))
}

/// `POST /ops/routes/{id}/reassign`.
#[utoipa::path(post, path = "/ops/routes/{id}/reassign", tag = "Dispatch", operation_id = "reassign_route",
    summary = "Hand a route to another driver",
    description = "CONTRACT §16: before a route starts (no drop-off of it has left the depot), the whole route goes to another driver of the depot who works on the plan's date and has no stops in this plan; it is re-timed for the new van and shift and takes the id `PLAN_ID.DRIVER_ID` of its new driver. The first driver keeps an empty route: their token no longer reaches its stops. A started route keeps its driver.",
    security(("operator_token" = [])), request_body = ReassignRequest,
    params(("id" = String, Path, description = "The route's id (`PLAN_ID.DRIVER_ID`).")),
    responses(
        (status = 200, description = "The plan after the change.", body = Envelope<PlanView>),
        (status = 404, description = "No route has this id.", body = ErrorEnvelope),
        (status = 409, description = "The route has started, the driver already has stops in this plan, or the plan changed meanwhile.", body = ErrorEnvelope),
        (status = 422, description = "`driver_id` unknown, of another depot, off that day, the same driver, or a rule the route breaks with the new van or shift (named).", body = ErrorEnvelope),
        (status = 503, description = "The routing engine (OSRM) did not answer.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn reassign(
    State(app): State<App>,
    _: OperatorCaller,
    PathParam(id): PathParam<String>,
    JsonBody(request, _): JsonBody<ReassignRequest>,
) -> Result<Response> {
    let (next, tz) = reassign_route(&app, &id, request.driver_id.trim()).await?;
    Ok(envelope(200, "Route handed over.", &PlanView::new(&next, &tz)).into_response())
}

/// Hands route `route_id` to driver `driver_id`: what `POST /ops/routes/{id}/reassign` and the
/// plan page's form both do.
pub(crate) async fn reassign_route(app: &App, route_id: &str, driver_id: &str) -> Result<(Plan, TimeZone)> {
    let plan_id = route_id.split_once('.').map(|(p, _)| p).ok_or(Error::NotFound)?;
    let (stored, base) = load(app, plan_id).await?;
    let plan = stored.plan;
    let r = plan.routes.iter().position(|x| x.id == route_id).ok_or(Error::NotFound)?;
    let route = &plan.routes[r];
    if driver_id == route.driver_id {
        return Err(Error::invalid("driver_id", "This driver has the route already."));
    }
    let date: Date = plan.date.parse().map_err(|_| Error::Internal(format!("plan {}: its date", plan.id)))?;
    let driver = match app.store.driver(driver_id).await? {
        Some(d) if d.driver.depot != plan.depot => {
            return Err(Error::invalid("driver_id", "This driver works from another depot."));
        }
        Some(d) if !d.driver.weekdays.contains(date.weekday()) => {
            return Err(Error::invalid("driver_id", "This driver does not work on the plan's date."));
        }
        Some(d) => planned(d, date, &base.tz)?,
        None => return Err(Error::invalid("driver_id", "No driver has this id.")),
    };
    if plan.status == PlanStatus::Published && late::started_routes(app, &plan).await?[r] {
        return Err(Error::Conflict(
            "This route has started: its parcels are on its van, so it keeps its driver.".into(),
        ));
    }
    let theirs = plan.routes.iter().position(|x| x.driver_id == driver_id);
    if let Some(j) = theirs
        && !plan.routes[j].visits().is_empty()
    {
        return Err(Error::Conflict(
            "This driver already has stops in this plan: move them, or choose another driver.".into(),
        ));
    }
    let roads = Roads::new(&app.settings.routing);
    let matrix = roads.matrix(base.model, dispatch::route_points(route, &base.depot)).await.map_err(roads_error)?;
    let moved = dispatch::late::hand_over(route, &plan.id, &driver, &base.depot, &matrix)
        .map_err(|rules| broken("driver_id", &rules))?;
    // The first driver keeps an empty route (a dispatcher may give them stops again).
    let first = dispatch::driver_of(route);
    let empty =
        dispatch::timed(route.id.clone(), &first, &base.depot, Vec::new(), |_, _| routing::roads::Leg::default()).0;
    let mut next = plan.clone();
    next.routes[r] = empty;
    if let Some(j) = theirs {
        next.routes.remove(j);
    }
    next.routes.push(moved);
    next.routes.sort_by(|a, b| a.driver_id.cmp(&b.driver_id));
    saved(app.store.save_plan(&next, stored.version).await?)?;
    if next.status == PlanStatus::Published
        && let Some(moved) = next.routes.iter().find(|x| x.driver_id == driver_id)
        && let Err(e) = crate::eta::refresh(app, &next.depot, moved).await
    {
        tracing::warn!(route = %moved.id, error = %e, "the handed-over route's ETAs were not re-timed");
    }
    Ok((next, base.tz))
}

/// `POST /ops/plans/{id}/publish`.
#[utoipa::path(post, path = "/ops/plans/{id}/publish", tag = "Dispatch", operation_id = "publish_plan",
    summary = "Publish a plan",
    description = "The routes go to their drivers and their ETAs are fixed; no shipment changes state. Publishing a published plan again answers it as it is.",
    security(("operator_token" = [])),
    params(("id" = String, Path, description = "The plan's id.")),
    responses(
        (status = 200, description = "The published plan.", body = Envelope<PlanView>),
        (status = 404, description = "No plan has this id.", body = ErrorEnvelope),
        (status = 409, description = "A shipment of the plan became final or went into another published route since it was planned (re-optimise), or the plan changed meanwhile.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn publish(State(app): State<App>, _: OperatorCaller, PathParam(id): PathParam<String>) -> Result<Response> {
    let (plan, tz) = publish_plan(&app, &id).await?;
    Ok(envelope(200, "Plan published.", &PlanView::new(&plan, &tz)).into_response())
}

/// Publishes a plan (a published one is answered as it is): what `POST
/// /ops/plans/{id}/publish` and the plan page's button both do.
pub(crate) async fn publish_plan(app: &App, id: &str) -> Result<(Plan, TimeZone)> {
    let (stored, base) = load(app, id).await?;
    if stored.plan.status == PlanStatus::Published {
        return Ok((stored.plan, base.tz));
    }
    let date: Date = stored.plan.date.parse().map_err(|_| Error::Internal(format!("plan {id}: its date")))?;
    // Every shipment must still be plannable: not final, in no other published route.
    let live = app.store.plan_candidates(stored.plan.kind, &stored.plan.depot, date, Some(id)).await?;
    for route in &stored.plan.routes {
        if let Some(gone) = route.shipments().find(|s| !live.iter().any(|c| c.unique_id == *s)) {
            return Err(Error::Conflict(format!(
                "Shipment {gone} is final or in another published route since this plan was made: re-optimise it first."
            )));
        }
    }
    let next = Plan { status: PlanStatus::Published, published_at: Some(app.clock.now().as_second()), ..stored.plan };
    saved(app.store.save_plan(&next, stored.version).await?)?;
    // The drop-offs' ETA windows (CONTRACT §14). The plan is published whatever happens here:
    // a failure (the routing engine down) leaves the windows to the driver's first progress.
    if let Err(e) = crate::eta::refresh_plan(app, &next).await {
        tracing::warn!(plan = %next.id, error = %e, "the published plan's ETAs were not computed");
    }
    if next.kind == PlanKind::Delivery {
        late::published(app, &next.depot, date);
    }
    // No sold shipment left behind (issue 45): what the published plan leaves unassigned is
    // rebooked into the next slot with room, or held for the dispatcher (`[dispatch] unplaced`).
    if next.kind == PlanKind::Delivery && !next.unassigned.is_empty() {
        let left: Vec<String> = next.unassigned.iter().map(|u| u.shipment_unique_id.clone()).collect();
        let r = app.store.replan_day(&next.depot, date, left, app.clock.now()).await?;
        tracing::info!(plan = %next.id, rebooked = r.rebooked.len(), held = r.held.len(), "unassigned shipments moved");
    }
    Ok((next, base.tz))
}

/// `HH:MM` of Unix seconds in `tz`.
fn clock(seconds: i64, tz: &TimeZone) -> String {
    jiff::Timestamp::from_second(seconds)
        .map(|t| t.to_zoned(tz.clone()).strftime("%H:%M").to_string())
        .unwrap_or_default()
}

/// `GET /ops/routes/{id}/sheet.pdf`: the route's run sheet.
#[utoipa::path(get, path = "/ops/routes/{id}/sheet.pdf", tag = "Dispatch", operation_id = "route_sheet",
    summary = "A route's run sheet (PDF)",
    description = "Printable, US Letter: the route's stops in order with their kinds (drop-off, pick-up, return), windows, ETAs, addresses and receivers, each drop-off's delivery instruction from its recipient, and the parcels carried (a drop-off's, a return's) each with its pick-up code as a Code 128 barcode (with its custom code, if any, beside it). Drafts print too.",
    security(("operator_token" = [])),
    params(("id" = String, Path, description = "The route's id (from its plan).")),
    responses(
        (status = 200, description = "The run sheet.", content((Vec<u8> = "application/pdf")),
            headers(("Content-Disposition" = String, description = "`inline`, with a file name."))),
        (status = 404, description = "No route has this id.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn sheet(State(app): State<App>, _: OperatorCaller, PathParam(id): PathParam<String>) -> Result<Response> {
    use dropslot_labels::{RunSheet, RunSheetParcel, RunSheetStop};
    let plan_id = dispatch::plan_of_route(&id).ok_or(Error::NotFound)?;
    let (stored, base) = load(&app, plan_id).await?;
    let route = stored.plan.routes.iter().find(|r| r.id == id).ok_or(Error::NotFound)?;
    let driver = app.store.driver(&route.driver_id).await?;
    let (driver_name, vehicle) = driver.map_or_else(
        || (route.driver_id.clone(), String::new()),
        |d| {
            (
                d.driver.name.clone(),
                format!(
                    "{} ({} parcels, {} kg)",
                    d.driver.vehicle.name, d.driver.vehicle.capacity_parcels, d.driver.vehicle.capacity_kg
                ),
            )
        },
    );
    let tz = &base.tz;
    let mut stops = Vec::with_capacity(route.stops.len());
    for stop in route.visits() {
        let mut parcels = Vec::new();
        let mut instructions = Vec::new();
        // A drop-off's and a return's parcels travel on the van: each is listed to scan.
        if matches!(stop.kind, dispatch::StopKind::DropOff | dispatch::StopKind::Return) {
            for unique_id in &stop.shipment_unique_ids {
                let Some(shipment) = app.store.shipment(dropslot_store::Visibility::Ops, unique_id).await? else {
                    continue;
                };
                for p in &shipment.parcels {
                    let label = match &p.custom_code {
                        Some(custom) => format!("{} · {custom} · {unique_id}", p.pick_up_code),
                        None => format!("{} · {unique_id}", p.pick_up_code),
                    };
                    parcels.push(RunSheetParcel { code: p.pick_up_code.clone(), label });
                }
                if stop.kind == dispatch::StopKind::DropOff
                    && let Some(text) = shipment.drop_off.instruction.as_deref().filter(|t| !t.trim().is_empty())
                {
                    instructions.push((unique_id.as_str(), text.to_string()));
                }
            }
        }
        // One shipment's instruction as it is; several name their shipment.
        let instruction = match instructions.as_slice() {
            [(_, text)] => text.clone(),
            many => many.iter().map(|(u, t)| format!("{u}: {t}")).collect::<Vec<_>>().join(" · "),
        };
        stops.push(RunSheetStop {
            seq: stop.seq,
            kind: match stop.kind {
                dispatch::StopKind::PickUp => "Pick-up",
                dispatch::StopKind::DropOff => "Drop-off",
                dispatch::StopKind::Return => "Return",
                dispatch::StopKind::Depot => "Depot",
            }
            .into(),
            window: format!("{}–{}", clock(stop.from, tz), clock(stop.to, tz)),
            eta: clock(stop.eta, tz),
            address: stop.address.clone(),
            receiver: stop.receiver.clone(),
            phone: stop.phone.clone(),
            note: stop.shipment_unique_ids.join(", "),
            instruction,
            parcels,
        });
    }
    let parcels: u32 = route.visits().iter().map(|s| s.parcels).sum();
    let summary = format!(
        "{} stops · {parcels} parcels · {:.1} km · {} h {:02} min · leave {} · back {}",
        route.visits().len(),
        route.distance_m as f64 / 1000.0,
        route.duration_s / 3600,
        route.duration_s % 3600 / 60,
        clock(route.start, tz),
        clock(route.end, tz),
    );
    let sheet = RunSheet {
        title: format!("Route · {driver_name}"),
        date: stored.plan.date.clone(),
        depot: format!("{} · {}", base.depot.code, base.depot.address),
        driver: driver_name,
        vehicle,
        summary,
        stops,
    };
    let pdf = tokio::task::spawn_blocking(move || dropslot_labels::render_run_sheet(&sheet))
        .await
        .map_err(|e| Error::Internal(format!("the run sheet's thread failed: {e}")))?;
    let file = format!("inline; filename=\"run-sheet-{}-{}.pdf\"", stored.plan.date, route.driver_id);
    Ok((
        [
            (axum::http::header::CONTENT_TYPE, "application/pdf".to_string()),
            (axum::http::header::CONTENT_DISPOSITION, file),
            // Names and phones of receivers: kept by no cache.
            (axum::http::header::CACHE_CONTROL, "no-store".to_string()),
        ],
        pdf,
    )
        .into_response())
}
