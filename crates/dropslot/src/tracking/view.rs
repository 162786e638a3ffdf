//! What the recipient's pages share: the stylesheet and the headers that keep them script-free
//! and private, the status in words, and the one "not found" page (an unknown code and a wrong
//! change token look the same).

use std::sync::LazyLock;

use askama::Template;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::error::Error;
use dropslot_core::shipments::Status;

pub(super) const CSS: &str = include_str!("../../templates/track.css");

/// Nothing but the inline stylesheet, by its hash: no script, no frame, no request; a form
/// may post only to the page's own origin (the change page), or nowhere (the tracking page).
fn csp(form_action: &str) -> HeaderValue {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(CSS.as_bytes()));
    let text = format!(
        "default-src 'none'; style-src 'sha256-{hash}'; img-src 'self'; base-uri 'none'; form-action {form_action}; frame-ancestors 'none'"
    );
    HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("default-src 'none'"))
}

static READ_ONLY: LazyLock<HeaderValue> = LazyLock::new(|| csp("'none'"));
static WITH_FORM: LazyLock<HeaderValue> = LazyLock::new(|| csp("'self'"));

/// Whether a page posts a form.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Forms {
    None,
    ToItself,
}

/// Headers every answer of these pages carries: it differs by `Accept`, caching as given, no
/// referrer (the change page's address holds its token), and a page may load nothing but its
/// own inline style.
pub(super) fn secure(mut res: Response, cache: &'static str, forms: Forms) -> Response {
    let h = res.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    let csp = match forms {
        Forms::None => &*READ_ONLY,
        Forms::ToItself => &*WITH_FORM,
    };
    h.insert(header::CONTENT_SECURITY_POLICY, csp.clone());
    res
}

pub(super) fn html(status: StatusCode, body: Result<String, askama::Error>) -> Response {
    match body {
        Ok(text) => (status, [(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"))], text)
            .into_response(),
        Err(e) => Error::Internal(format!("tracking template: {e}")).into_response(),
    }
}

#[derive(Template)]
#[template(path = "track_missing.html")]
struct Missing<'a> {
    css: &'a str,
}

/// The 404 page of an unknown tracking code (and of a wrong change token), never cached.
pub(super) fn missing() -> Response {
    secure(html(StatusCode::NOT_FOUND, Missing { css: CSS }.render()), "no-store", Forms::None)
}

/// Whether `code` can be a tracking code at all (short ASCII): anything else is not looked up.
pub(super) fn plausible(code: &str) -> bool {
    code.len() <= 64 && code.bytes().all(|b| b.is_ascii_alphanumeric())
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

/// `HH:MM` of an RFC 3339 local time (the text as given when it is not one).
pub(super) fn clock(iso: &str) -> &str {
    iso.get(11..16).unwrap_or(iso)
}
