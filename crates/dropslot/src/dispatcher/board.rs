//! The day's board of a depot: its live shipments counted by zone and slot, how many are in
//! published routes, the plans of the date, and the form that makes a plan.

use askama::Template;
use axum::extract::{RawQuery, State};

use super::{Frame, OpsPosted, OpsSession, PageResult, fail, ok};
use crate::app::App;
use crate::dashboard::see_other;
use crate::error::Error;
use crate::plans::wire::PlanRequest;
use dropslot_core::dispatch::{PlanKind, PlanStatus};
use dropslot_core::shipments::Status;

#[derive(Template)]
#[template(path = "ops/board.html")]
struct BoardPage {
    frame: Option<Frame>,
    date: String,
    depot: String,
    depot_name: String,
    /// Every depot: (code, name).
    depots: Vec<(String, String)>,
    rows: Vec<CountRow>,
    total: Totals,
    plans: Vec<PlanRow>,
    /// The day's failed attempts, the re-attempts booked from the day on, the returns due
    /// (CONTRACT §15).
    failed: Vec<FailureRow>,
    reattempts: Vec<FailureRow>,
    returns: Vec<FailureRow>,
    /// A depot that books on its fleet: each van's use in the date's tentative plan, and the
    /// shipments held for the dispatcher (issue 45).
    fleet: bool,
    vans: Vec<VanRow>,
    held: Vec<HeldRow>,
}

/// One van in the tentative plan.
struct VanRow {
    /// The driver's name (empty for a driver deleted since the plan was made).
    name: String,
    driver: String,
    stops: usize,
    parcels: String,
    kg: String,
    shift: String,
    back: String,
}

/// A shipment the fleet could not route, waiting for the dispatcher.
struct HeldRow {
    code: String,
    reason: String,
}

/// One failure, re-attempt or return, linked to its shipment's tracking page.
struct FailureRow {
    code: String,
    status: &'static str,
    reason: String,
    at: String,
    next: String,
}

impl FailureRow {
    fn of(l: dropslot_store::FailureLine, tz: &jiff::tz::TimeZone) -> FailureRow {
        FailureRow {
            code: l.unique_id,
            status: l.status.as_str(),
            reason: l.reason.unwrap_or_default(),
            at: l.failed_at.map(|t| t.to_zoned(tz.clone()).strftime("%H:%M").to_string()).unwrap_or_default(),
            next: match (l.status, l.next_date, l.next_slot) {
                (Status::ToAttempt | Status::ReturnScheduled, Some(d), Some(s)) => format!("{d} · {s}"),
                (Status::Failed, _, _) => "awaiting the merchant's decision".into(),
                _ => "—".into(),
            },
        }
    }
}

struct CountRow {
    kind: &'static str,
    zone: String,
    slot: String,
    shipments: i64,
    published: i64,
    open: i64,
}

#[derive(Default)]
struct Totals {
    shipments: i64,
    published: i64,
    open: i64,
}

struct PlanRow {
    id: String,
    kind: &'static str,
    status: &'static str,
    routes_used: usize,
    assigned: usize,
    unassigned: usize,
}

fn kind_words(kind: PlanKind) -> &'static str {
    match kind {
        PlanKind::Delivery => "Delivery",
        PlanKind::PickUp => "Pick-up",
    }
}

/// `GET /ops/board?date=&depot=`: default the first depot, and today in its city.
pub(super) async fn show(State(app): State<App>, session: OpsSession, RawQuery(raw): RawQuery) -> PageResult {
    let q = crate::http::query_params(raw.as_deref(), &["date", "depot"]).map_err(fail(&session))?;
    let area = &app.settings.area;
    let depots: Vec<(String, String)> = area.depots().iter().map(|d| (d.code.clone(), d.name.clone())).collect();
    let depot = match q.get("depot").filter(|d| !d.is_empty()) {
        Some(code) => {
            area.depot(code).ok_or_else(|| fail(&session)(Error::invalid("query.depot", "No depot has this code.")))?
        }
        None => area.depots().first().ok_or_else(|| fail(&session)(Error::NotFound))?,
    };
    let tz = crate::plans::depot_tz(&app, &depot.code);
    let date = match q.get("date").filter(|d| !d.is_empty()) {
        Some(d) => crate::capacity::date_at("query.date", d).map_err(fail(&session))?,
        None => app.clock.now().to_zoned(tz.clone()).date(),
    };
    let counts = app.store.board_counts(&depot.code, date).await.map_err(|e| fail(&session)(e.into()))?;
    let mut total = Totals::default();
    let rows = counts
        .into_iter()
        .map(|c| {
            total.shipments += c.shipments;
            total.published += c.published;
            total.open += c.shipments - c.published;
            CountRow {
                kind: kind_words(c.kind),
                zone: if c.zone.is_empty() { "—".into() } else { c.zone },
                slot: c.slot,
                shipments: c.shipments,
                published: c.published,
                open: c.shipments - c.published,
            }
        })
        .collect();
    let day = |d: jiff::civil::Date| d.to_zoned(tz.clone()).map(|z| z.timestamp());
    let (Ok(from), Ok(to)) = (day(date), date.tomorrow().and_then(day)) else {
        return Err(fail(&session)(Error::invalid("query.date", "Out of range.")));
    };
    let failures = app.store.failures(&depot.code, from, to, date).await.map_err(|e| fail(&session)(e.into()))?;
    let rows_of = |lines: Vec<dropslot_store::FailureLine>| -> Vec<FailureRow> {
        lines.into_iter().map(|l| FailureRow::of(l, &tz)).collect()
    };
    let (failed, reattempts, returns) =
        (rows_of(failures.failed), rows_of(failures.reattempts), rows_of(failures.returns));
    let fleet = app.settings.capacity.fleet(&depot.code);
    let (mut vans, mut held) = (Vec::new(), Vec::new());
    if fleet {
        let clock = |s: i64| {
            jiff::Timestamp::from_second(s)
                .map(|t| t.to_zoned(tz.clone()).strftime("%H:%M").to_string())
                .unwrap_or_default()
        };
        let plan = app.store.tentative_plan(&depot.code, date).await.map_err(|e| fail(&session)(e.into()))?;
        let drivers = app.store.drivers(Some(&depot.code)).await.map_err(|e| fail(&session)(e.into()))?;
        for u in plan.map(|p| p.uses()).unwrap_or_default() {
            let name = drivers.iter().find(|d| d.id == u.driver).map(|d| d.driver.name.clone()).unwrap_or_default();
            vans.push(VanRow {
                name,
                driver: u.driver,
                stops: u.stops,
                parcels: format!("{} / {}", u.parcels, u.capacity_parcels),
                kg: format!("{:.1} / {}", u.grams as f64 / 1000.0, u.capacity_grams / 1000),
                shift: format!("{}–{}", clock(u.shift_start), clock(u.shift_end)),
                back: if u.stops == 0 { "—".into() } else { clock(u.back) },
            });
        }
        let lines = app.store.held(&depot.code, date).await.map_err(|e| fail(&session)(e.into()))?;
        held = lines.into_iter().map(|(code, reason, _)| HeldRow { code, reason }).collect();
    }
    let stored = app.store.plans_on(date).await.map_err(|e| fail(&session)(e.into()))?;
    let plans = stored
        .iter()
        .filter(|p| p.plan.depot == depot.code)
        .map(|p| PlanRow {
            id: p.plan.id.clone(),
            kind: kind_words(p.plan.kind),
            status: match p.plan.status {
                PlanStatus::Draft => "draft",
                PlanStatus::Published => "published",
            },
            routes_used: p.plan.routes.iter().filter(|r| !r.visits().is_empty()).count(),
            assigned: p.plan.routes.iter().map(|r| r.shipments().count()).sum(),
            unassigned: p.plan.unassigned.len(),
        })
        .collect();
    Ok(ok(BoardPage {
        frame: Some(session.frame("board")),
        date: date.to_string(),
        depot: depot.code.clone(),
        depot_name: depot.name.clone(),
        depots,
        rows,
        total,
        plans,
        failed,
        fleet,
        vans,
        held,
        reattempts,
        returns,
    }
    .render()))
}

/// `POST /ops/plans` (the board's form): the API's `create_plan`, then the plan's page.
pub(super) async fn create_plan(State(app): State<App>, OpsPosted { session, fields }: OpsPosted) -> PageResult {
    let time_limit_s = match fields.get("time_limit_s").filter(|t| !t.is_empty()) {
        None => None,
        Some(t) => Some(
            t.parse::<i64>()
                .map_err(|_| fail(&session)(Error::invalid("time_limit_s", "A whole number of seconds, 1 to 60.")))?,
        ),
    };
    let request = PlanRequest {
        date: fields.get("date").unwrap_or("").to_string(),
        depot: fields.get("depot").unwrap_or("").to_string(),
        kind: fields.get("kind").unwrap_or("").to_string(),
        driver_ids: None,
        time_limit_s,
    };
    let (plan, _) = crate::plans::create_plan(&app, &request).await.map_err(fail(&session))?;
    Ok(see_other(&format!("/ops/plans/{}", plan.id)))
}
