//! The day's report as a page (CONTRACT §17): a depot's day, its figures per route, driver,
//! zone and slot as tables, and three charts drawn on the server (on time by slot, failures
//! by reason, ETA error by hour). The figures are the API's (`crate::reports::compute`).

use askama::Template;
use axum::extract::{RawQuery, State};

use super::charts::{Bar, bars};
use super::{Frame, OpsSession, PageResult, fail, ok};
use crate::app::App;
use crate::error::Error;
use crate::reports::wire::{ReportView, RowView};

#[derive(Template)]
#[template(path = "ops/reports.html")]
struct ReportsPage {
    frame: Option<Frame>,
    date: String,
    depot: String,
    depot_name: String,
    depots: Vec<(String, String)>,
    totals: Cells,
    groups: Vec<Group>,
    on_time_chart: String,
    failures_chart: String,
    eta_chart: String,
}

/// A table of rows of one kind.
struct Group {
    id: &'static str,
    title: &'static str,
    key: &'static str,
    rows: Vec<Cells>,
}

/// A row's figures, written for reading.
struct Cells {
    key: String,
    shipments: u32,
    delivered: u32,
    failed: u32,
    returned: u32,
    on_time: String,
    eta_kept: String,
    eta_error: String,
    distance: String,
    duration: String,
    first: String,
    last: String,
}

fn share(part: u32, whole: u32, share: Option<f64>) -> String {
    share.map_or_else(|| "—".into(), |s| format!("{:.0}% ({part} of {whole})", s * 100.0))
}

#[allow(clippy::cast_precision_loss)]
fn km(m: i64) -> String {
    format!("{:.1}", m as f64 / 1000.0)
}

fn hm(s: i64) -> String {
    format!("{}h{:02}", s / 3600, (s % 3600) / 60)
}

impl Cells {
    fn of(r: &RowView) -> Cells {
        Cells {
            key: r.key.clone(),
            shipments: r.shipments,
            delivered: r.delivered,
            failed: r.failed,
            returned: r.returned,
            on_time: share(r.on_time, r.served, r.on_time_share),
            eta_kept: share(r.eta_kept, r.eta_told, r.eta_kept_share),
            eta_error: r.eta_median_error_min.map_or_else(|| "—".into(), |m| format!("{m:.1} min")),
            distance: match (r.planned_distance_m, r.driven_distance_m) {
                (Some(p), Some(d)) => format!("{} / {} km", km(p), km(d)),
                _ => "—".into(),
            },
            duration: match (r.planned_duration_s, r.driven_duration_s) {
                (Some(p), Some(d)) => format!("{} / {}", hm(p), hm(d)),
                (Some(p), None) => format!("{} / —", hm(p)),
                _ => "—".into(),
            },
            first: r.first_stop_at.as_deref().map_or_else(|| "—".into(), super::clock),
            last: r.last_stop_at.as_deref().map_or_else(|| "—".into(), super::clock),
        }
    }
}

/// `GET /ops/reports?depot=&date=`: the depot's day (the first depot and today by default).
pub(super) async fn show(State(app): State<App>, session: OpsSession, RawQuery(raw): RawQuery) -> PageResult {
    let mut q = crate::http::query_params(raw.as_deref(), &["date", "depot"]).map_err(fail(&session))?;
    let area = &app.settings.area;
    let depots: Vec<(String, String)> = area.depots().iter().map(|d| (d.code.clone(), d.name.clone())).collect();
    if q.get("depot").is_none_or(String::is_empty) {
        let first = depots.first().ok_or_else(|| fail(&session)(Error::NotFound))?;
        q.insert("depot", first.0.clone());
    }
    if q.get("date").is_none_or(String::is_empty) {
        let tz = crate::reports::depot_zone(&app, "query.depot", &q["depot"]).map_err(fail(&session))?;
        q.insert("date", app.clock.now().to_zoned(tz).date().to_string());
    }
    let span = crate::reports::span(&app, &q).map_err(fail(&session))?;
    let report = crate::reports::compute(&app, span).await.map_err(fail(&session))?;
    let view = ReportView::new(&report);
    let day =
        view.days.first().ok_or_else(|| fail(&session)(Error::Internal("a day's report without its day".into())))?;
    let on_time = day
        .slots
        .iter()
        .filter_map(|r| {
            let s = r.on_time_share?;
            Some(Bar { label: r.key.clone(), value: s * 100.0, text: share(r.on_time, r.served, Some(s)) })
        })
        .collect::<Vec<_>>();
    let failures = day
        .totals
        .failed_by_reason
        .iter()
        .map(|(reason, n)| Bar {
            label: if reason.is_empty() { "(no reason)".into() } else { reason.clone() },
            value: f64::from(*n),
            text: n.to_string(),
        })
        .collect::<Vec<_>>();
    let eta = day
        .hours
        .iter()
        .filter_map(|r| {
            let m = r.eta_median_error_min?;
            Some(Bar { label: r.key.clone(), value: m, text: format!("{m:.1} min ({} told)", r.eta_told) })
        })
        .collect::<Vec<_>>();
    let group = |id, title, key, rows: &[RowView]| Group { id, title, key, rows: rows.iter().map(Cells::of).collect() };
    let depot_name = area.depot(&view.depot).map(|d| d.name.clone()).unwrap_or_default();
    Ok(ok(ReportsPage {
        frame: Some(session.frame("reports")),
        date: day.date.clone(),
        depot: view.depot.clone(),
        depot_name,
        depots,
        totals: Cells::of(&day.totals),
        groups: vec![
            group("routes", "By route", "Route", &day.routes),
            group("drivers", "By driver", "Driver", &day.drivers),
            group("zones", "By zone", "Zone", &day.zones),
            group("slots", "By slot", "Slot", &day.slots),
        ],
        on_time_chart: bars(
            "chart-on-time",
            "On time by slot",
            "The share of attempts made inside their slot, per slot.",
            &on_time,
            100.0,
        ),
        failures_chart: bars(
            "chart-failures",
            "Failures by reason",
            "Failed attempts of the day, per reason the driver gave.",
            &failures,
            1.0,
        ),
        eta_chart: bars(
            "chart-eta",
            "ETA error by hour",
            "The median distance, in minutes, of each attempt from the middle of the window told to its recipient at least 30 minutes before, per hour of the attempt.",
            &eta,
            15.0,
        ),
    }
    .render()))
}
