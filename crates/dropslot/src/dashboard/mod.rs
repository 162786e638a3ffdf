//! The merchant dashboard at `/dashboard` (issue 11, CONTRACT §8): server-rendered HTML from
//! askama templates and plain forms, on the same store and through the same domain functions
//! as the API. It has no SQL and no script of its own.
//!
//! - **Sessions** are server-side records (`Store::create_session`): the browser holds a
//!   random value in an `HttpOnly`, `SameSite=Strict` cookie (`Secure` when the base URL is
//!   https), and the store only its SHA-256. A session ends after [`IDLE`] without a request,
//!   on sign-out, and the moment its token is revoked.
//! - **CSRF.** Every form that changes something carries the session's CSRF token, and
//!   [`Posted`], the only way a dashboard handler reads a form, refuses a form without it.
//!   The sign-in form, which has no session yet, uses a double-submit cookie.
//! - **CSP.** No script at all: `default-src 'none'`, the one stylesheet the binary serves,
//!   forms to this origin only, no framing.
//! - **Scope.** A session speaks for its token's client and mode, exactly like a bearer
//!   token; another client's id in a URL is the same 404 page as an id that does not exist.

mod account;
mod attempts;
mod import;
mod orders;
mod slots;
mod spreadsheet;
mod webhooks;

use std::time::Duration;

use askama::Template;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

use crate::app::App;
use crate::error::{Error, FieldErrors, ServerError};
use dropslot_store::{Mode, Scope, TokenKind};

/// A session ends after this long without a request.
pub const IDLE: Duration = Duration::from_secs(30 * 60);
/// The largest form the dashboard reads.
const FORM_LIMIT: usize = 64 * 1024;
const SESSION_COOKIE: &str = "ds_session";
const SIGN_IN_COOKIE: &str = "ds_sign_in";
pub(crate) const CSS: &str = include_str!("../../templates/dashboard/dashboard.css");

/// No script, no frame, no foreign request: the dashboard's own stylesheet and images only.
const CSP: &str =
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

pub fn routes() -> axum::Router<App> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/dashboard", get(|| async { Redirect::to("/dashboard/orders") }))
        .route("/dashboard/static/dashboard.css", get(stylesheet))
        .route("/dashboard/sign-in", get(account::sign_in_page).post(account::sign_in))
        .route("/dashboard/sign-out", post(account::sign_out))
        .route("/dashboard/orders", get(orders::list))
        .route("/dashboard/orders.csv", get(spreadsheet::export))
        .route("/dashboard/shipments/{code}", get(orders::shipment))
        .route("/dashboard/proofs/{token}", get(orders::proof))
        .route("/dashboard/shipments/{code}/parcels/{custom_code}/delete", post(orders::delete_parcel))
        .route("/dashboard/shipments/{code}/scenarios/{scenario}", post(orders::scenario))
        .route("/dashboard/webhooks", get(webhooks::list).post(webhooks::create))
        .route("/dashboard/webhooks/{id}", get(webhooks::show).post(webhooks::update))
        .route("/dashboard/webhooks/{id}/enable", post(webhooks::enable))
        .route("/dashboard/webhooks/{id}/disable", post(webhooks::disable))
        .route("/dashboard/webhooks/{id}/delete", post(webhooks::delete))
        .route("/dashboard/webhooks/{id}/rotate-secret", post(webhooks::rotate))
        .route("/dashboard/webhooks/{id}/test", post(webhooks::test))
        .route("/dashboard/webhooks/{id}/deliveries/{delivery}/resend", post(webhooks::resend))
        .route("/dashboard/tokens", get(account::tokens).post(account::create_token))
        .route("/dashboard/tokens/{prefix}/revoke", post(account::revoke_token))
        .route("/dashboard/addresses", get(account::addresses))
        .route("/dashboard/slots", get(slots::list))
        .route("/dashboard/attempts", get(attempts::settings).post(attempts::save))
        .route("/dashboard/shipments/{code}/reschedule", post(attempts::reschedule))
        .route("/dashboard/shipments/{code}/return", post(attempts::send_back))
        .route("/dashboard/shipments/{code}/cancel", post(attempts::cancel))
        .route("/dashboard/addresses/{id}/delete", post(account::delete_address))
        .merge(import::routes())
}

async fn stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("text/css; charset=utf-8")),
            (header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300")),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        ],
        CSS,
    )
        .into_response()
}

/// A signed-in browser: the client and mode its token speaks for, and its CSRF token.
#[derive(Clone)]
pub struct Session {
    pub scope: Scope,
    /// Whose token it is, with the client's negotiated settings.
    pub principal: dropslot_store::Principal,
    pub kind: TokenKind,
    pub csrf: String,
    pub token_prefix: String,
}

/// What every page's frame shows: the mode, the navigation, the sign-out form.
pub(crate) struct Frame {
    pub mode: &'static str,
    pub test: bool,
    pub csrf: String,
    pub token_prefix: String,
    /// The navigation entry this page belongs to.
    pub section: &'static str,
}

impl Session {
    pub(crate) fn frame(&self, section: &'static str) -> Frame {
        Frame {
            mode: self.scope.mode.as_str(),
            test: self.scope.mode == Mode::Test,
            csrf: self.csrf.clone(),
            token_prefix: self.token_prefix.clone(),
            section,
        }
    }
}

/// The value of cookie `name`, if the request sent exactly one.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut found = None;
    for value in headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()) {
        for pair in value.split(';') {
            if let Some((k, v)) = pair.trim().split_once('=') {
                if k == name {
                    if found.is_some() {
                        return None;
                    }
                    found = Some(v);
                }
            }
        }
    }
    found.filter(|v| !v.is_empty() && v.len() <= 128)
}

/// A `Set-Cookie` value for `name`: `HttpOnly`, `SameSite=Strict`, the dashboard's path,
/// `Secure` behind https; `max_age` 0 deletes it.
fn set_cookie(app: &App, name: &str, value: &str, max_age: Option<u64>) -> HeaderValue {
    cookie_at(app, "/dashboard", name, value, max_age)
}

/// A `Set-Cookie` value for `name` under `path` (the dashboard's, or the dispatcher's
/// `/ops`), with the same flags.
pub(crate) fn cookie_at(app: &App, path: &str, name: &str, value: &str, max_age: Option<u64>) -> HeaderValue {
    let secure = if app.settings.base_url.starts_with("https://") { "; Secure" } else { "" };
    let age = max_age.map(|s| format!("; Max-Age={s}")).unwrap_or_default();
    HeaderValue::from_str(&format!("{name}={value}; Path={path}; HttpOnly; SameSite=Strict{secure}{age}"))
        .unwrap_or_else(|_| HeaderValue::from_static("ds_invalid=; Max-Age=0"))
}

/// 32 random bytes as base64url: session values and CSRF tokens.
pub(crate) fn random_value() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(dropslot_core::ids::random_bytes::<32>())
}

/// Equal in time independent of where they differ.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn to_sign_in(app: &App) -> Response {
    let mut res = Redirect::to("/dashboard/sign-in").into_response();
    res.headers_mut().insert(header::SET_COOKIE, set_cookie(app, SESSION_COOKIE, "", Some(0)));
    res
}

impl FromRequestParts<App> for Session {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, Response> {
        let Some(value) = cookie(&parts.headers, SESSION_COOKIE) else { return Err(to_sign_in(app)) };
        let now = app.clock.now().as_millisecond();
        let idle_since = now - IDLE.as_millis() as i64;
        match app.store.session(&crate::auth::hash(value), idle_since, now).await {
            Ok(Some(r)) => Ok(Session {
                scope: Scope { client: r.principal.client, mode: r.principal.kind.mode() },
                kind: r.principal.kind,
                principal: r.principal.clone(),
                csrf: r.csrf,
                token_prefix: r.token_prefix,
            }),
            Ok(None) => Err(to_sign_in(app)),
            Err(e) => Err(error_page(None, &Error::from(e))),
        }
    }
}

/// The numeric ids in a dashboard URL (`/dashboard/webhooks/{id}`), in order. A path whose
/// ids are not numbers is the 404 page, like an id that does not exist.
pub(crate) struct Ids<const N: usize>(pub [i64; N]);

impl<const N: usize> FromRequestParts<App> for Ids<N> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, Response> {
        let not_found = || error_page(None, &Error::NotFound);
        let params = axum::extract::RawPathParams::from_request_parts(parts, app).await.map_err(|_| not_found())?;
        let mut ids = [0; N];
        let mut count = 0;
        for (_, value) in &params {
            let slot = ids.get_mut(count).ok_or_else(not_found)?;
            *slot = value.parse().ok().filter(|&id: &i64| id > 0).ok_or_else(not_found)?;
            count += 1;
        }
        if count == N { Ok(Ids(ids)) } else { Err(not_found()) }
    }
}

/// A submitted form's fields, in order (a name may repeat: the event checkboxes).
pub(crate) struct Fields(Vec<(String, String)>);

impl Fields {
    /// The first value of `name`, trimmed.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.trim())
    }
    /// The value of `name`, or `None` when absent or blank.
    pub fn text(&self, name: &str) -> Option<String> {
        self.get(name).filter(|v| !v.is_empty()).map(str::to_string)
    }
    pub fn all(&self, name: &str) -> Vec<String> {
        self.0.iter().filter(|(k, _)| k == name).map(|(_, v)| v.clone()).collect()
    }
}

/// Reads an urlencoded form within the size and time limits.
async fn read_form(req: Request, app: &App) -> Result<Fields, Response> {
    read_form_or(req, app, |e| error_page(None, e)).await
}

/// Reads an urlencoded form within the size and time limits; `fail` renders a refusal.
pub(crate) async fn read_form_or(
    req: Request,
    app: &App,
    fail: impl Fn(&Error) -> Response,
) -> Result<Fields, Response> {
    let error_page = |_: Option<()>, e: &Error| fail(e);
    let content_type = crate::http::single(req.headers(), &header::CONTENT_TYPE, "Content-Type");
    let content_type = content_type.map_err(|e| error_page(None, &e))?;
    let form = content_type.and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"))
    });
    if !form {
        return Err(error_page(None, &Error::UnsupportedMediaType));
    }
    let limited = axum::body::to_bytes(req.into_body(), FORM_LIMIT);
    let bytes: Bytes = match tokio::time::timeout(app.settings.net.body_read_timeout, limited).await {
        Err(_) => return Err(error_page(None, &Error::BodyTimeout)),
        Ok(Err(_)) => return Err(error_page(None, &Error::PayloadTooLarge)),
        Ok(Ok(b)) => b,
    };
    Ok(Fields(url::form_urlencoded::parse(&bytes).into_owned().collect()))
}

/// A form posted by a signed-in browser, its CSRF token checked: the only way a dashboard
/// handler that changes something gets its input.
pub(crate) struct Posted {
    pub session: Session,
    pub fields: Fields,
}

impl FromRequest<App> for Posted {
    type Rejection = Response;

    async fn from_request(req: Request, app: &App) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let session = Session::from_request_parts(&mut parts, app).await?;
        let fields = read_form(Request::from_parts(parts, body), app).await?;
        if !fields.get("csrf").is_some_and(|t| same_secret(t, &session.csrf)) {
            return Err(error_page(
                Some(&session),
                &Error::Forbidden(
                    "This form has expired or did not come from the dashboard. Go back, reload the page and try again.",
                ),
            ));
        }
        Ok(Posted { session, fields })
    }
}

/// A rendered page with the dashboard's headers: HTML, never cached, no script, no framing.
pub(crate) fn page(status: StatusCode, body: Result<String, askama::Error>) -> Response {
    let mut res = match body {
        Ok(text) => (status, text).into_response(),
        Err(e) => {
            // Logged with the request's id by `http::edge`.
            let mut res = (StatusCode::INTERNAL_SERVER_ERROR, "Internal server error.").into_response();
            res.extensions_mut().insert(ServerError(format!("dashboard template: {e}").into()));
            res
        }
    };
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    res
}

/// After a change: back to a page with a GET (so a reload does not post again).
pub(crate) fn see_other(to: &str) -> Response {
    Redirect::to(to).into_response()
}

#[derive(Template)]
#[template(path = "dashboard/message.html")]
struct MessagePage<'a> {
    frame: Option<Frame>,
    title: &'a str,
    message: &'a str,
    errors: Vec<(String, String)>,
}

/// An error in a page's words (the dashboard's and the dispatcher's): its title, message and
/// field errors by path, as the API's envelope says them; `not_found` is what a 404 means there.
pub(crate) fn error_words(e: &Error, not_found: &str) -> (&'static str, String, Vec<(String, String)>) {
    let (title, message) = match e {
        Error::NotFound => ("Not found", not_found.to_string()),
        Error::Validation(_) => ("Please check the form", "Some fields need a change.".to_string()),
        Error::Forbidden(m) => ("Not allowed", (*m).to_string()),
        Error::Conflict(m) | Error::Upstream(m) => ("Not possible now", m.clone()),
        Error::Store(_) | Error::Internal(_) | Error::Unavailable(_) => {
            ("Something went wrong", "The service could not complete this. Try again in a moment.".to_string())
        }
        other => ("Request refused", other.to_string()),
    };
    let errors = match e {
        Error::Validation(f) | Error::BadRequest { errors: f, .. } => field_list(f),
        _ => Vec::new(),
    };
    (title, message, errors)
}

/// An error as a page in the dashboard's frame: the same statuses and words as the API's
/// envelope, field errors listed by their path.
pub(crate) fn error_page(session: Option<&Session>, e: &Error) -> Response {
    let status = e.status();
    let (title, message, errors) = error_words(e, "There is nothing here, or it belongs to another account.");
    let frame = session.map(|s| s.frame(""));
    let mut res = page(status, MessagePage { frame, title, message: &message, errors }.render());
    if status.is_server_error() {
        // Logged with the request's id by `http::edge`.
        res.extensions_mut().insert(ServerError(format!("dashboard: {e:?}").into()));
    }
    res
}

/// Field errors as (path, message) lines.
pub(crate) fn field_list(f: &FieldErrors) -> Vec<(String, String)> {
    f.iter().map(|(p, m)| (p.to_string(), m.to_string())).collect()
}

/// The outcome of a dashboard handler: a page either way.
pub(crate) type PageResult = Result<Response, Response>;

/// Turns a domain error into the error page of this session.
pub(crate) fn fail(session: &Session) -> impl Fn(Error) -> Response + '_ {
    move |e| error_page(Some(session), &e)
}

/// Unix ms as UTC text for people (`2026-11-23 12:00 UTC`).
pub(crate) fn ms_text(ms: Option<i64>) -> String {
    ms.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_read_once_and_strictly() {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_static("a=1; ds_session=abc; b=2"));
        assert_eq!(cookie(&h, "ds_session"), Some("abc"));
        assert_eq!(cookie(&h, "ds_sign_in"), None);
        h.append(header::COOKIE, HeaderValue::from_static("ds_session=other"));
        assert_eq!(cookie(&h, "ds_session"), None, "two values: neither is trusted");
    }

    #[test]
    fn secrets_compare_exactly() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
        assert!(!same_secret("", "a"));
    }
}
