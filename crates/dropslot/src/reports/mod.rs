//! The day's report over the API (CONTRACT §17, operator tokens): `GET /ops/reports/day`, as
//! JSON or, with `Accept: text/csv`, CSV. The rules are the core's (`dropslot_core::reports`);
//! the store loads the facts (`ReportStore`); this module parses, gathers and answers. The
//! dispatcher's page (`/ops/reports`) and the `/metrics` gauges use the same [`compute`].

pub mod wire;

use std::collections::HashMap;

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use jiff::civil::Date;
use jiff::tz::TimeZone;

use crate::app::App;
use crate::auth::staff::OperatorCaller;
use crate::capacity::date_at;
use crate::error::{Envelope, Error, ErrorEnvelope, FieldErrors, Result, envelope};
use dropslot_core::reports::{self, Day, DayReport, DropOff, Figures, MAX_DAYS, Route};
use dropslot_store::ReportFacts;
use wire::ReportView;

pub fn routes() -> axum::Router<App> {
    axum::Router::new().route(crate::http::api_path!("/ops/reports/day"), axum::routing::get(day))
}

/// What a report covers: a depot (and its city's time zone) and dates `from..=to`.
#[derive(Debug, Clone)]
pub struct Span {
    pub depot: String,
    pub tz: TimeZone,
    pub from: Date,
    pub to: Date,
}

/// A computed report: one per day, and the range's totals.
pub struct Report {
    pub span: Span,
    pub days: Vec<DayReport>,
    pub totals: Figures,
}

/// The depot's city's time zone; `path` names the field on an unknown depot.
pub fn depot_zone(app: &App, path: &str, code: &str) -> Result<TimeZone> {
    let area = &app.settings.area;
    if code.is_empty() {
        return Err(Error::invalid(path, "Give the depot's code."));
    }
    area.depot(code).ok_or_else(|| Error::invalid(path, "No depot (warehouse) has this code."))?;
    area.depot_zones(code)
        .next()
        .and_then(|z| area.cities().get(z.city))
        .map(|c| c.tz.clone())
        .ok_or_else(|| Error::invalid(path, "No zone is served from this depot."))
}

/// The span of a query: `depot` and `date`, or `from` and `to` (at most [`MAX_DAYS`] days);
/// every error at its `query.` path.
pub fn span<S: std::hash::BuildHasher>(app: &App, q: &HashMap<&str, String, S>) -> Result<Span> {
    let mut errors = FieldErrors::new();
    let get = |k: &str| q.get(k).map(String::as_str);
    let depot = get("depot").unwrap_or("");
    let tz = keep(&mut errors, depot_zone(app, "query.depot", depot));
    let dates = match (get("date"), get("from"), get("to")) {
        (Some(d), None, None) => keep(&mut errors, date_at("query.date", d).map(|d| (d, d))),
        (None, Some(f), Some(t)) => {
            let f = keep(&mut errors, date_at("query.from", f));
            let t = keep(&mut errors, date_at("query.to", t));
            match (f, t) {
                (Some(f), Some(t)) if t < f => {
                    errors.add("query.to", "The range ends before it starts.");
                    None
                }
                (Some(f), Some(t)) if (t - f).get_days() >= i32::try_from(MAX_DAYS).unwrap_or(i32::MAX) => {
                    errors.add("query.to", format!("A report covers at most {MAX_DAYS} days."));
                    None
                }
                (Some(f), Some(t)) => Some((f, t)),
                _ => None,
            }
        }
        (Some(_), _, _) => {
            errors.add("query.date", "Give either date, or from and to.");
            None
        }
        (None, None, None) => {
            errors.add("query.date", "Give the date (YYYY-MM-DD), or from and to for a range.");
            None
        }
        (None, Some(_), None) => {
            errors.add("query.to", "A range needs both from and to.");
            None
        }
        (None, None, Some(_)) => {
            errors.add("query.from", "A range needs both from and to.");
            None
        }
    };
    errors.into_result()?;
    match (tz, dates) {
        (Some(tz), Some((from, to))) => Ok(Span { depot: depot.to_string(), tz, from, to }),
        _ => Err(Error::Internal("a report's span was refused without a reason".into())),
    }
}

/// A check's value, its field errors kept with the others.
fn keep<T>(errors: &mut FieldErrors, checked: Result<T>) -> Option<T> {
    match checked {
        Ok(v) => Some(v),
        Err(Error::Validation(f)) => {
            errors.merge(f);
            None
        }
        Err(_) => None,
    }
}

/// `GET /ops/reports/day`.
#[utoipa::path(get, path = "/ops/reports/day", tag = "Dispatch", operation_id = "day_report",
    summary = "The day's report: the plan against the day",
    description = "A depot's published delivery routes of a date (or of each date `from`..`to`, at most 93 days, one day a row) against what happened: per route, driver, zone and slot, and in total, the shipments, delivered, failed by reason, returned; on time (the attempt — the `delivered` or `failed` event — inside the stop's slot); ETA kept (the arrival inside the window last told to the recipient at least 30 minutes before it) and the median distance of the arrival from that window's middle, in minutes; planned against driven distance (the great-circle length of the driver's reported positions from the route's start) and duration; the first and last stop. With `Accept: text/csv`, the same rows as CSV (one header line; `failed_by_reason` as `reason=n` pairs joined by `; `).",
    security(("operator_token" = [])),
    params(
        ("depot" = String, Query, description = "The depot's code (required)."),
        ("date" = Option<String>, Query, format = Date, description = "YYYY-MM-DD: one day."),
        ("from" = Option<String>, Query, format = Date, description = "YYYY-MM-DD: the range's first day (with `to`, instead of `date`)."),
        ("to" = Option<String>, Query, format = Date, description = "YYYY-MM-DD: the range's last day (at most 93 days)."),
    ),
    responses(
        (status = 200, description = "The report (JSON, or CSV with `Accept: text/csv`).", body = Envelope<ReportView>,
            content((Envelope<ReportView> = "application/json"), (String = "text/csv"))),
        (status = 422, description = "A missing or malformed `query.date`, `query.from`, `query.to` (a range over 93 days, or ending before it starts) or `query.depot` (unknown), or another parameter.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn day(
    State(app): State<App>,
    _: OperatorCaller,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Response> {
    let q = crate::http::query_params(raw.as_deref(), &["depot", "date", "from", "to"])?;
    let report = compute(&app, span(&app, &q)?).await?;
    let view = ReportView::new(&report);
    let csv = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.split(',').any(|m| m.trim().to_ascii_lowercase().starts_with("text/csv")));
    if csv {
        let name = format!(
            "attachment; filename=\"report-{}-{}-{}.csv\"",
            report.span.depot, report.span.from, report.span.to
        );
        return Ok((
            [
                (header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8")),
                (
                    header::CONTENT_DISPOSITION,
                    HeaderValue::from_str(&name).map_err(|e| Error::Internal(e.to_string()))?,
                ),
            ],
            view.csv(),
        )
            .into_response());
    }
    Ok(envelope(200, "Report.", &view).into_response())
}

/// The report of `span`: the store's facts, gathered per day and route for the core's rules.
pub async fn compute(app: &App, span: Span) -> Result<Report> {
    let bounds = |d: Date| -> Result<(i64, i64)> {
        let start = d.to_zoned(span.tz.clone()).map_err(|e| Error::Internal(e.to_string()))?;
        let end = d.tomorrow().and_then(|t| t.to_zoned(span.tz.clone())).map_err(|e| Error::Internal(e.to_string()))?;
        Ok((start.timestamp().as_millisecond(), end.timestamp().as_millisecond()))
    };
    let all = (bounds(span.from)?.0, bounds(span.to)?.1);
    let facts = app.store.report_facts(&span.depot, span.from, span.to, all).await?;
    let mut days = Vec::new();
    let mut d = span.from;
    while d <= span.to {
        days.push(gather(&facts, d, bounds(d)?, &span.tz));
        d = d.tomorrow().map_err(|e| Error::Internal(e.to_string()))?;
    }
    let (days, totals) = reports::range(&days);
    Ok(Report { span, days, totals })
}

/// One date's facts for the core: its plans' routes, each drop-off with its zone, its slot
/// (the stop's window, local `HH:MM–HH:MM`), its events and told windows, and each route's
/// driver's positions of the day. A shipment the store no longer has (deleted) is left out.
fn gather(facts: &ReportFacts, date: Date, bounds: (i64, i64), tz: &TimeZone) -> Day {
    let shipments: HashMap<&str, &dropslot_store::ReportDropOff> =
        facts.drop_offs.iter().map(|d| (d.unique_id.as_str(), d)).collect();
    let date_text = date.to_string();
    let routes = facts
        .plans
        .iter()
        .filter(|p| p.date == date_text)
        .flat_map(|p| &p.routes)
        .map(|r| Route {
            id: r.id.clone(),
            driver_id: r.driver_id.clone(),
            planned_start: r.start,
            planned_end: r.end,
            planned_distance_m: r.distance_m,
            drop_offs: r
                .visits()
                .iter()
                .flat_map(|stop| stop.shipment_unique_ids.iter().map(move |u| (stop, u)))
                .filter_map(|(stop, u)| {
                    let s = shipments.get(u.as_str())?;
                    Some(DropOff {
                        unique_id: u.clone(),
                        zone: s.zone.clone(),
                        slot: slot_label(stop.from, stop.to, tz),
                        window: (stop.from, stop.to),
                        events: s.events.clone(),
                        told: s.told.clone(),
                    })
                })
                .collect(),
            positions: facts
                .positions
                .iter()
                .filter(|p| p.driver_id == r.driver_id && p.at_ms >= bounds.0 && p.at_ms < bounds.1)
                .map(|p| (p.at_ms, p.at))
                .collect(),
        })
        .collect();
    Day { date: date_text, bounds, tz: tz.clone(), routes }
}

/// A slot as the dispatcher reads it: its local start and end, `09:00–12:00`.
pub fn slot_label(from: i64, to: i64, tz: &TimeZone) -> String {
    let hm = |s: i64| {
        jiff::Timestamp::from_second(s)
            .map_or_else(|_| "?".into(), |t| t.to_zoned(tz.clone()).strftime("%H:%M").to_string())
    };
    format!("{}–{}", hm(from), hm(to))
}

/// Today's report of every depot as the `/metrics` gauges (at most every
/// `DayGauges::EVERY`; a depot's failure is logged and leaves its figures as they were).
/// A share nothing was counted for is absent, not zero.
pub async fn refresh_gauges(app: &App) {
    let g = &app.metrics.day;
    if !g.due() {
        return;
    }
    for depot in app.settings.area.depots() {
        let Ok(tz) = depot_zone(app, "depot", &depot.code) else { continue };
        let today = app.clock.now().to_zoned(tz.clone()).date();
        let span = Span { depot: depot.code.clone(), tz, from: today, to: today };
        let totals = match compute(app, span).await {
            Ok(r) => r.totals,
            Err(e) => {
                tracing::warn!(depot = %depot.code, error = %e, "today's report for /metrics failed");
                continue;
            }
        };
        let label = crate::metrics::DepotLabels { depot: depot.code.clone() };
        g.shipments.get_or_create(&label).set(f64::from(totals.shipments));
        g.delivered.get_or_create(&label).set(f64::from(totals.delivered));
        g.failed.get_or_create(&label).set(f64::from(totals.failed));
        for (family, value) in [
            (&g.on_time, totals.on_time_share()),
            (&g.eta_kept, totals.eta_kept_share()),
            (&g.eta_error, totals.eta_median_error_min),
        ] {
            match value {
                Some(v) => {
                    family.get_or_create(&label).set(v);
                }
                None => {
                    family.remove(&label);
                }
            }
        }
    }
}
