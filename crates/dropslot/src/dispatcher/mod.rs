//! The dispatcher's pages at `/ops` (CONTRACT §12): the day's board per depot, a plan with its
//! routes as a table and a drawn map, moving a stop, publishing, and the drivers with their
//! sign-in links. Server-rendered like the dashboard, on the same domain functions as the API
//! (`crate::plans`, `crate::fleet`): one rule in one place.
//!
//! - **Sessions** are the dashboard's kind of server-side record, kept apart
//!   (`Store::create_ops_session`, table `ops_sessions`): they speak for an *operator* token,
//!   never a client's, in a cookie of their own under `/ops`. Idle expiry, revocation and the
//!   cookie's flags are the dashboard's.
//! - **CSRF.** Every form that changes something carries the session's token and is read
//!   through [`OpsPosted`]; the sign-in form uses a double-submit cookie.

mod board;
mod charts;
mod drivers;
mod live;
mod map;
mod plan;
mod reports;
mod sign_in;

use askama::Template;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

use crate::app::App;
use crate::dashboard::{Fields, IDLE, cookie, cookie_at, page, read_form_or, same_secret};
use crate::error::{Error, ServerError};

const SESSION_COOKIE: &str = "ds_ops_session";
const SIGN_IN_COOKIE: &str = "ds_ops_sign_in";
const CSS: &str = include_str!("../../templates/ops/ops.css");
/// The sign-in page's one script: a sign-in link's token, from the fragment, into the form.
const SIGN_IN_JS: &str = include_str!("../../templates/ops/sign-in.js");
/// The sign-in page's policy: the dashboard's, plus this binary's own script.
pub(super) const SIGN_IN_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

pub fn routes() -> axum::Router<App> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/ops", get(|| async { Redirect::to("/ops/board") }))
        .route("/ops/static/ops.css", get(stylesheet))
        .route("/ops/static/sign-in.js", get(sign_in_script))
        .route("/ops/sign-in", get(sign_in::sign_in_page).post(sign_in::sign_in))
        .route("/ops/sign-out", post(sign_in::sign_out))
        .route("/ops/board", get(board::show))
        .route("/ops/live", get(live::show))
        .route("/ops/plans", post(board::create_plan))
        .route("/ops/plans/{id}", get(plan::show))
        .route("/ops/plans/{id}/moves", post(plan::move_stop))
        .route("/ops/plans/{id}/publish", post(plan::publish))
        .route("/ops/plans/{id}/optimize", post(plan::optimize))
        .route("/ops/plans/{id}/reassign", post(plan::reassign))
        .route("/ops/plans/{id}/exclude", post(plan::exclude))
        .route("/ops/drivers", get(drivers::list).post(drivers::create))
        .route("/ops/drivers/{id}/token", post(drivers::reissue))
        .route("/ops/reports", get(reports::show))
}

async fn sign_in_script() -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("text/javascript; charset=utf-8")),
            (header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300")),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        ],
        SIGN_IN_JS,
    )
        .into_response()
}

/// The dashboard's stylesheet and the dispatcher's few rules after it (one file, one request).
async fn stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("text/css; charset=utf-8")),
            (header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300")),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        ],
        format!("{}\n{CSS}", crate::dashboard::CSS),
    )
        .into_response()
}

/// A signed-in dispatcher: the CSRF token its forms carry and its token's display prefix.
#[derive(Clone)]
pub struct OpsSession {
    pub csrf: String,
    pub token_prefix: String,
}

/// What every page's frame shows: the navigation and the sign-out form.
pub(crate) struct Frame {
    pub csrf: String,
    pub token_prefix: String,
    /// The navigation entry this page belongs to.
    pub section: &'static str,
}

impl OpsSession {
    pub(crate) fn frame(&self, section: &'static str) -> Frame {
        Frame { csrf: self.csrf.clone(), token_prefix: self.token_prefix.clone(), section }
    }
}

fn set_cookie(app: &App, name: &str, value: &str, max_age: Option<u64>) -> HeaderValue {
    cookie_at(app, "/ops", name, value, max_age)
}

fn to_sign_in(app: &App) -> Response {
    let mut res = Redirect::to("/ops/sign-in").into_response();
    res.headers_mut().insert(header::SET_COOKIE, set_cookie(app, SESSION_COOKIE, "", Some(0)));
    res
}

impl FromRequestParts<App> for OpsSession {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, Response> {
        let Some(value) = cookie(&parts.headers, SESSION_COOKIE) else { return Err(to_sign_in(app)) };
        let now = app.clock.now().as_millisecond();
        let idle_since = now - IDLE.as_millis() as i64;
        match app.store.ops_session(&crate::auth::hash(value), idle_since, now).await {
            Ok(Some(r)) => Ok(OpsSession { csrf: r.csrf, token_prefix: r.token_prefix }),
            Ok(None) => Err(to_sign_in(app)),
            Err(e) => Err(error_page(None, &Error::from(e))),
        }
    }
}

/// A form posted by a signed-in dispatcher, its CSRF token checked: the only way a handler
/// that changes something gets its input.
pub(crate) struct OpsPosted {
    pub session: OpsSession,
    pub fields: Fields,
}

impl FromRequest<App> for OpsPosted {
    type Rejection = Response;

    async fn from_request(req: Request, app: &App) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let session = OpsSession::from_request_parts(&mut parts, app).await?;
        let fields = read_form_or(Request::from_parts(parts, body), app, |e| error_page(Some(&session), e)).await?;
        if !fields.get("csrf").is_some_and(|t| same_secret(t, &session.csrf)) {
            return Err(error_page(
                Some(&session),
                &Error::Forbidden(
                    "This form has expired or did not come from the dispatcher's pages. Go back, reload the page and try again.",
                ),
            ));
        }
        Ok(OpsPosted { session, fields })
    }
}

#[derive(Template)]
#[template(path = "ops/message.html")]
struct MessagePage<'a> {
    frame: Option<Frame>,
    title: &'a str,
    message: &'a str,
    errors: Vec<(String, String)>,
}

/// An error as a page in the dispatcher's frame: the API's statuses and words, field errors
/// listed by their path.
pub(crate) fn error_page(session: Option<&OpsSession>, e: &Error) -> Response {
    let status = e.status();
    let (title, message, errors) =
        crate::dashboard::error_words(e, "There is nothing here: the plan or driver does not exist.");
    let frame = session.map(|s| s.frame(""));
    let mut res = page(status, MessagePage { frame, title, message: &message, errors }.render());
    if status.is_server_error() {
        // Logged with the request's id by `http::edge`.
        res.extensions_mut().insert(ServerError(format!("ops pages: {e:?}").into()));
    }
    res
}

/// The outcome of a handler: a page either way.
pub(crate) type PageResult = Result<Response, Response>;

/// Turns a domain error into the error page of this session.
pub(crate) fn fail(session: &OpsSession) -> impl Fn(Error) -> Response + '_ {
    move |e| error_page(Some(session), &e)
}

/// A page rendered with status 200.
pub(crate) fn ok(body: Result<String, askama::Error>) -> Response {
    page(StatusCode::OK, body)
}

/// `HH:MM` of an ISO 8601 instant in its own offset (`2026-11-23T14:05:00-05:00` → `14:05`).
pub(crate) fn clock(iso: &str) -> String {
    iso.get(11..16).unwrap_or(iso).to_string()
}
