//! The public tracking page `/track/{tracking_code}` (CONTRACT §8): status timeline, date,
//! slot and city — never a name, phone, e-mail or street address — and, while something can
//! still be changed, the link to the recipient's change page (§15). HTML from templates, or
//! JSON with `Accept: application/json`.

use askama::Template;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::token;
use super::view::{CSS, Forms, clock, html, label, missing, plausible, secure};
use crate::app::App;
use crate::error::{Error, ErrorEnvelope, Result};
use crate::http::PathParam;
use dropslot_core::attempts;
use dropslot_core::shipments::Status;
use dropslot_core::time::{city_zone, local};
use dropslot_store::Tracking;

pub fn routes() -> axum::Router<App> {
    axum::Router::new().route("/track/{tracking_code}", axum::routing::get(page))
}

/// CONTRACT §8's JSON (bare, not in the envelope).
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Tracking)]
struct TrackingJson {
    tracking_code: String,
    status: Status,
    scheduled_date: String,
    time_slot: String,
    city: String,
    events: Vec<EventJson>,
    /// The live ETA window while the parcel is on a published delivery route and not
    /// delivered yet (CONTRACT §14); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    eta: Option<crate::eta::EtaWindow>,
    /// How many stops its driver makes before this one, with `eta`.
    #[serde(skip_serializing_if = "Option::is_none")]
    stops_before: Option<u32>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = TrackingEvent)]
struct EventJson {
    status: Status,
    at: String,
}

#[derive(Template)]
#[template(path = "track.html")]
struct Page<'a> {
    css: &'a str,
    tracking_code: &'a str,
    headline: &'static str,
    status: &'static str,
    status_label: &'static str,
    scheduled_date: &'a str,
    time_slot: &'a str,
    city: &'a str,
    events: Vec<PageEvent>,
    /// "14:20–14:50", with the stops before it and whether it is past the slot.
    eta: Option<(String, u32, bool)>,
    /// The change page's path, while the slot or the instruction can still be changed.
    change: Option<String>,
}

struct PageEvent {
    status: &'static str,
    label: &'static str,
    at: String,
    display: String,
}

fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|m| m.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"))
}

#[utoipa::path(get, path = "/track/{tracking_code}", tag = "Tracking", operation_id = "track",
    summary = "The public tracking page",
    description = "Public (no token). Status timeline, delivery date, time slot and city: never a name, phone or address. HTML by default; the JSON below with `Accept: application/json`. Rate limited per client address.",
    params(("tracking_code" = String, Path, description = "A drop-off shipment's `unique_id` (test or live).")),
    responses(
        (status = 200, description = "The shipment's tracking.",
            content((String = "text/html"), (TrackingJson = "application/json")),
            headers(("Cache-Control" = String, description = "`public, max-age=60`."), ("Vary" = String, description = "`Accept`."))),
        (status = 404, description = "No such tracking code: an HTML page, or the error envelope with `Accept: application/json`.",
            content((String = "text/html"), (ErrorEnvelope = "application/json"))),
        (status = 429, description = "Over the rate limit of this client address.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn page(
    State(app): State<App>,
    _: crate::ratelimit::PublicLimit,
    headers: HeaderMap,
    PathParam(code): PathParam<String>,
) -> Result<Response> {
    let json = wants_json(&headers);
    // Tracking codes are short ASCII: anything else cannot exist, so no lookup is made.
    let found = if plausible(&code) { app.store.tracking(&code).await? } else { None };
    let Some(t) = found else {
        return Ok(if json { secure(Error::NotFound.into_response(), "no-store", Forms::None) } else { missing() });
    };
    let tz = city_zone(&app.settings.area, &t.city);
    let res = if json { json_page(&t, &tz) } else { html_page(&t, &tz) };
    Ok(secure(res, "public, max-age=60", Forms::None))
}

fn json_page(t: &Tracking, tz: &jiff::tz::TimeZone) -> Response {
    let body = TrackingJson {
        tracking_code: t.tracking_code.clone(),
        status: t.status,
        scheduled_date: t.scheduled_date.clone(),
        time_slot: t.slot_name.clone(),
        city: t.city.clone(),
        events: t.events.iter().map(|(status, at)| EventJson { status: *status, at: local(*at, tz) }).collect(),
        eta: crate::eta::shown(t.status, t.eta.as_ref(), tz),
        stops_before: crate::eta::shown(t.status, t.eta.as_ref(), tz).and(t.eta.map(|e| e.stops_before)),
    };
    match dropslot_core::json::to_vec(&body, 1024) {
        Ok(text) => crate::error::json_response(200, text),
        Err(e) => Error::Internal(format!("tracking JSON: {e}")).into_response(),
    }
}

fn html_page(t: &Tracking, tz: &jiff::tz::TimeZone) -> Response {
    let (status_label, headline) = label(t.status);
    let eta = crate::eta::shown(t.status, t.eta.as_ref(), tz)
        .zip(t.eta)
        .map(|(w, e)| (format!("{}–{}", clock(&w.from), clock(&w.to)), e.stops_before, w.late));
    let page = Page {
        eta,
        change: attempts::instruction_open(t.status).then(|| token::change_path(&t.tracking_code, &t.label_token)),
        css: CSS,
        tracking_code: &t.tracking_code,
        headline,
        status: t.status.as_str(),
        status_label,
        scheduled_date: &t.scheduled_date,
        time_slot: &t.slot_name,
        city: &t.city,
        events: t
            .events
            .iter()
            .map(|(status, at)| {
                let zoned = at.to_zoned(tz.clone());
                PageEvent {
                    status: status.as_str(),
                    label: label(*status).0,
                    at: local(*at, tz),
                    display: zoned.strftime("%a %b %-d, %H:%M").to_string(),
                }
            })
            .collect(),
    };
    html(StatusCode::OK, page.render())
}
