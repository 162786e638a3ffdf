//! The day's report on the wire: JSON (one row type for every group) and the same rows as
//! CSV (RFC 4180: CRLF line ends, fields quoted when they hold a comma, a quote or a line end).

use std::collections::BTreeMap;
use std::fmt::Write;

use jiff::tz::TimeZone;
use serde::Serialize;

use super::Report;
use dropslot_core::reports::{DayReport, Figures};

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ReportView {
    pub depot: String,
    /// The first and the last date covered (equal for one day).
    #[schema(format = Date, example = "2026-11-23")]
    pub from: String,
    #[schema(format = Date, example = "2026-11-23")]
    pub to: String,
    /// Over every day of the range (`group` `range`, `key` the depot).
    pub totals: RowView,
    pub days: Vec<DayView>,
}

/// One day: its totals (`group` `day`) and its rows per route, driver, zone and slot.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DayView {
    #[schema(format = Date, example = "2026-11-23")]
    pub date: String,
    pub totals: RowView,
    pub routes: Vec<RowView>,
    pub drivers: Vec<RowView>,
    pub zones: Vec<RowView>,
    pub slots: Vec<RowView>,
    /// By the local hour of the attempt (`14:00`): attempted drop-offs only.
    pub hours: Vec<RowView>,
}

/// One row of the report; the CSV's columns are these fields in this order.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RowView {
    /// The day (`range`: `from..to`).
    pub date: String,
    /// `range`, `day`, `route`, `driver`, `zone`, `slot` or `hour`.
    pub group: &'static str,
    /// The route's id, the driver's id, the zone's code, the slot's local window
    /// (`09:00–12:00`), the local hour (`14:00`), or the depot's code for `day` and `range`.
    pub key: String,
    /// Drop-offs on the published routes.
    pub shipments: u32,
    pub delivered: u32,
    pub failed: u32,
    /// Failures by the driver's reason (`""` when none was given).
    pub failed_by_reason: BTreeMap<String, u32>,
    /// Handed back to the merchant since (a `returned` event).
    pub returned: u32,
    /// Attempted on the day (delivered or failed).
    pub served: u32,
    /// Attempted inside the stop's slot.
    pub on_time: u32,
    /// `on_time / served`; null when nothing was served.
    pub on_time_share: Option<f64>,
    /// Attempts with a window told at least 30 minutes before.
    pub eta_told: u32,
    /// Of those, the attempt inside that window.
    pub eta_kept: u32,
    /// `eta_kept / eta_told`; null when none.
    pub eta_kept_share: Option<f64>,
    /// The median distance of the attempt from the told window's middle, minutes (one decimal).
    pub eta_median_error_min: Option<f64>,
    /// Routes, drivers, days and ranges: planned against driven (metres, seconds); null for
    /// zones and slots. `driven_duration_s` is null while nothing shows the route ran.
    pub planned_distance_m: Option<i64>,
    pub driven_distance_m: Option<i64>,
    pub planned_duration_s: Option<i64>,
    pub driven_duration_s: Option<i64>,
    /// The first and last attempt, ISO 8601 with the depot's local offset.
    pub first_stop_at: Option<String>,
    pub last_stop_at: Option<String>,
}

impl RowView {
    fn new(date: &str, group: &'static str, key: &str, f: &Figures, tz: &TimeZone) -> RowView {
        let at = |ms: Option<i64>| {
            ms.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok()).map(|t| dropslot_core::time::local(t, tz))
        };
        RowView {
            date: date.into(),
            group,
            key: key.into(),
            shipments: f.shipments,
            delivered: f.delivered,
            failed: f.failed,
            failed_by_reason: f.failed_by_reason.clone(),
            returned: f.returned,
            served: f.served,
            on_time: f.on_time,
            on_time_share: f.on_time_share(),
            eta_told: f.eta_told,
            eta_kept: f.eta_kept,
            eta_kept_share: f.eta_kept_share(),
            eta_median_error_min: f.eta_median_error_min,
            planned_distance_m: f.distance.map(|d| d.planned_m),
            driven_distance_m: f.distance.map(|d| d.driven_m),
            planned_duration_s: f.distance.map(|d| d.planned_s),
            driven_duration_s: f.distance.and_then(|d| d.driven_s),
            first_stop_at: at(f.first_stop_ms),
            last_stop_at: at(f.last_stop_ms),
        }
    }
}

/// The CSV's header: [`RowView`]'s fields.
const COLUMNS: [&str; 21] = [
    "date",
    "group",
    "key",
    "shipments",
    "delivered",
    "failed",
    "failed_by_reason",
    "returned",
    "served",
    "on_time",
    "on_time_share",
    "eta_told",
    "eta_kept",
    "eta_kept_share",
    "eta_median_error_min",
    "planned_distance_m",
    "driven_distance_m",
    "planned_duration_s",
    "driven_duration_s",
    "first_stop_at",
    "last_stop_at",
];

impl DayView {
    fn new(d: &DayReport, depot: &str, tz: &TimeZone) -> DayView {
        let rows = |group, rows: &[(String, Figures)]| {
            rows.iter().map(|(k, f)| RowView::new(&d.date, group, k, f, tz)).collect::<Vec<_>>()
        };
        DayView {
            date: d.date.clone(),
            totals: RowView::new(&d.date, "day", depot, &d.totals, tz),
            routes: rows("route", &d.routes),
            drivers: rows("driver", &d.drivers),
            zones: rows("zone", &d.zones),
            slots: rows("slot", &d.slots),
            hours: rows("hour", &d.hours),
        }
    }
}

impl ReportView {
    pub fn new(r: &Report) -> ReportView {
        let s = &r.span;
        let (from, to) = (s.from.to_string(), s.to.to_string());
        ReportView {
            totals: RowView::new(&format!("{from}..{to}"), "range", &s.depot, &r.totals, &s.tz),
            days: r.days.iter().map(|d| DayView::new(d, &s.depot, &s.tz)).collect(),
            depot: s.depot.clone(),
            from,
            to,
        }
    }

    /// Every row in the order of the CSV: each day's totals, routes, drivers, zones and
    /// slots and hours, then the range's totals.
    pub fn rows(&self) -> impl Iterator<Item = &RowView> {
        self.days
            .iter()
            .flat_map(|d| {
                std::iter::once(&d.totals)
                    .chain(&d.routes)
                    .chain(&d.drivers)
                    .chain(&d.zones)
                    .chain(&d.slots)
                    .chain(&d.hours)
            })
            .chain(std::iter::once(&self.totals))
    }

    /// The rows as CSV, with a header line.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        line(&mut out, COLUMNS.iter().map(|c| (*c).to_string()));
        for r in self.rows() {
            let n = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
            // Numbers as the JSON writes them (`0.0`, `0.6666666666666666`).
            let f = |v: Option<f64>| v.map(|v| serde_json::Value::from(v).to_string()).unwrap_or_default();
            let reasons = r.failed_by_reason.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ");
            line(
                &mut out,
                [
                    r.date.clone(),
                    r.group.to_string(),
                    r.key.clone(),
                    r.shipments.to_string(),
                    r.delivered.to_string(),
                    r.failed.to_string(),
                    reasons,
                    r.returned.to_string(),
                    r.served.to_string(),
                    r.on_time.to_string(),
                    f(r.on_time_share),
                    r.eta_told.to_string(),
                    r.eta_kept.to_string(),
                    f(r.eta_kept_share),
                    f(r.eta_median_error_min),
                    n(r.planned_distance_m),
                    n(r.driven_distance_m),
                    n(r.planned_duration_s),
                    n(r.driven_duration_s),
                    r.first_stop_at.clone().unwrap_or_default(),
                    r.last_stop_at.clone().unwrap_or_default(),
                ]
                .into_iter(),
            );
        }
        out
    }
}

/// One CSV record, CRLF-terminated.
fn line(out: &mut String, fields: impl Iterator<Item = String>) {
    for (i, field) in fields.enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{}", quoted(&field));
    }
    out.push_str("\r\n");
}

/// A field as RFC 4180 has it: as is, or in double quotes with its quotes doubled when it
/// holds a comma, a quote or a line end (or starts with a space a reader might trim).
pub fn quoted(field: &str) -> std::borrow::Cow<'_, str> {
    if field.contains([',', '"', '\r', '\n']) || field.starts_with(' ') || field.ends_with(' ') {
        format!("\"{}\"", field.replace('"', "\"\"")).into()
    } else {
        field.into()
    }
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn fields_are_quoted_as_rfc_4180_says() {
        assert_eq!(quoted("plain"), "plain");
        assert_eq!(quoted("a,b"), "\"a,b\"");
        assert_eq!(quoted("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(quoted("two\nlines"), "\"two\nlines\"");
        assert_eq!(quoted(""), "");
    }
}
