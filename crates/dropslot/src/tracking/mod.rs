//! The public tracking page `/track/{tracking_code}` (CONTRACT §8): status timeline, date,
//! slot and city — never a name, phone, e-mail or street address. HTML from templates, or
//! JSON with `Accept: application/json`.

use std::sync::LazyLock;

use askama::Template;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::app::App;
use crate::error::{Error, ErrorEnvelope, Result};
use crate::http::PathParam;
use dropslot_core::shipments::Status;
use dropslot_core::time::{city_zone, local};
use dropslot_store::Tracking;

const CSS: &str = include_str!("../../templates/track.css");

/// Nothing but the inline stylesheet, by its hash: no script, no frame, no form, no request.
static CSP: LazyLock<String> = LazyLock::new(|| {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(CSS.as_bytes()));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
});

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
}

struct PageEvent {
    status: &'static str,
    label: &'static str,
    at: String,
    display: String,
}

#[derive(Template)]
#[template(path = "track_missing.html")]
struct Missing<'a> {
    css: &'a str,
}

/// What a receiver reads for each status (the interface's event descriptions, in their words).
pub(crate) fn label(s: Status) -> (&'static str, &'static str) {
    match s {
        Status::Scheduled => ("Scheduled", "Your delivery is scheduled"),
        Status::ToPickUp => ("Ready for pick-up", "Your parcel is ready for pick-up"),
        Status::PickedUp => ("Picked up", "Your parcel is on its way to our sorting facility"),
        Status::Processing => ("At the sorting facility", "Your parcel is at our sorting facility"),
        Status::InTransit => ("Out for delivery", "Your parcel is out for delivery"),
        Status::Delivered => ("Delivered", "Your parcel has been delivered"),
        Status::Failed => ("Delivery attempt failed", "We could not deliver your parcel"),
        Status::ToAttempt => ("Delivery to be retried", "We will try to deliver your parcel again"),
        Status::ReturnScheduled => ("Return scheduled", "Your parcel will be returned to the sender"),
        Status::Returned => ("Returned to sender", "Your parcel was returned to the sender"),
        Status::Cancelled => ("Cancelled", "This delivery was cancelled"),
        Status::Deleted => ("Cancelled by the sender", "The sender cancelled this delivery"),
    }
}

fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|m| m.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"))
}

/// Headers every tracking answer carries: it differs by `Accept`, it is cacheable for a
/// minute when found, and a page may load nothing but its own inline style.
fn secure(mut res: Response, cache: &'static str) -> Response {
    let h = res.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    if let Ok(csp) = HeaderValue::from_str(&CSP) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    res
}

fn html(status: StatusCode, body: Result<String, askama::Error>) -> Response {
    match body {
        Ok(text) => (status, [(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"))], text)
            .into_response(),
        Err(e) => Error::Internal(format!("tracking template: {e}")).into_response(),
    }
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
    let found = if code.len() <= 64 && code.bytes().all(|b| b.is_ascii_alphanumeric()) {
        app.store.tracking(&code).await?
    } else {
        None
    };
    let Some(t) = found else {
        return Ok(if json {
            secure(Error::NotFound.into_response(), "no-store")
        } else {
            secure(html(StatusCode::NOT_FOUND, Missing { css: CSS }.render()), "no-store")
        });
    };
    let tz = city_zone(&app.settings.area, &t.city);
    let res = if json { json_page(&t, &tz) } else { html_page(&t, &tz) };
    Ok(secure(res, "public, max-age=60"))
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
    match serde_json::to_string(&body) {
        Ok(text) => crate::error::json_response(200, text),
        Err(e) => Error::Internal(format!("tracking JSON: {e}")).into_response(),
    }
}

fn html_page(t: &Tracking, tz: &jiff::tz::TimeZone) -> Response {
    let (status_label, headline) = label(t.status);
    let eta = crate::eta::shown(t.status, t.eta.as_ref(), tz).zip(t.eta).map(|(w, e)| {
        let hm = |iso: &str| iso.get(11..16).unwrap_or(iso).to_string();
        (format!("{}–{}", hm(&w.from), hm(&w.to)), e.stops_before, w.late)
    });
    let page = Page {
        eta,
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
