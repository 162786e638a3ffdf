//! Signing in with an operator token, and out. Client and driver tokens are refused in words
//! that say which token to use.

use askama::Template;
use axum::extract::{FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;

use super::{Frame, OpsPosted, PageResult, SESSION_COOKIE, SIGN_IN_COOKIE, error_page, fail, set_cookie};
use crate::app::App;
use crate::auth::staff::is_staff;
use crate::dashboard::{cookie, page, random_value, read_form_or, same_secret, see_other};
use crate::error::Error;
use dropslot_store::{NewSession, StaffKind};

#[derive(Template)]
#[template(path = "ops/sign_in.html")]
struct SignInPage<'a> {
    frame: Option<Frame>,
    csrf: &'a str,
    error: Option<&'a str>,
}

/// The sign-in form, with a fresh double-submit CSRF value in a cookie and in the form.
fn form(app: &App, status: StatusCode, error: Option<&str>) -> Response {
    let csrf = random_value();
    let mut res = page(status, SignInPage { frame: None, csrf: &csrf, error }.render());
    res.headers_mut().insert(header::CONTENT_SECURITY_POLICY, header::HeaderValue::from_static(super::SIGN_IN_CSP));
    res.headers_mut().insert(header::SET_COOKIE, set_cookie(app, SIGN_IN_COOKIE, &csrf, Some(3600)));
    res
}

pub(super) async fn sign_in_page(State(app): State<App>) -> Response {
    form(&app, StatusCode::OK, None)
}

const UNKNOWN: &str = "That token is not valid or has been revoked.";
const CLIENT: &str = "That is a client's API token: it signs in to the merchant dashboard (/dashboard). The dispatcher's pages take an operator token (dropslot token create --kind operator).";
const DRIVER: &str =
    "That is a driver's token: it opens the driver app. The dispatcher's pages take an operator token.";

/// Signs in with an operator token: a new server-side session, its value in the cookie.
pub(super) async fn sign_in(State(app): State<App>, req: Request) -> Response {
    let expected = cookie(req.headers(), SIGN_IN_COOKIE).map(str::to_string);
    let fields = match read_form_or(req, &app, |e| error_page(None, e)).await {
        Ok(f) => f,
        Err(res) => return res,
    };
    let sent = fields.get("csrf").unwrap_or("");
    if !expected.is_some_and(|e| same_secret(&e, sent)) {
        return form(
            &app,
            StatusCode::FORBIDDEN,
            Some("This form has expired or did not come from the dispatcher's pages. Please sign in again."),
        );
    }
    let token = fields.get("token").unwrap_or("");
    if token.is_empty() || token.len() > 256 {
        return form(&app, StatusCode::UNAUTHORIZED, Some(UNKNOWN));
    }
    let hash = crate::auth::hash(token);
    let refused = if is_staff(token) {
        match app.store.staff_principal(&hash).await {
            Ok(Some(p)) if p.kind == StaffKind::Operator => None,
            Ok(Some(_)) => Some((StatusCode::FORBIDDEN, DRIVER)),
            Ok(None) => Some((StatusCode::UNAUTHORIZED, UNKNOWN)),
            Err(e) => return error_page(None, &Error::from(e)),
        }
    } else {
        match app.store.principal(&hash).await {
            Ok(Some(_)) => Some((StatusCode::FORBIDDEN, CLIENT)),
            Ok(None) => Some((StatusCode::UNAUTHORIZED, UNKNOWN)),
            Err(e) => return error_page(None, &Error::from(e)),
        }
    };
    if let Some((status, words)) = refused {
        return form(&app, status, Some(words));
    }
    let value = random_value();
    let session =
        NewSession { hash: crate::auth::hash(&value), csrf: random_value(), now_ms: app.clock.now().as_millisecond() };
    match app.store.create_ops_session(&hash, session).await {
        Ok(true) => {
            tracing::info!("dispatcher signed in");
            let mut res = see_other("/ops/board");
            let h = res.headers_mut();
            h.append(header::SET_COOKIE, set_cookie(&app, SESSION_COOKIE, &value, None));
            h.append(header::SET_COOKIE, set_cookie(&app, SIGN_IN_COOKIE, "", Some(0)));
            res
        }
        Ok(false) => form(&app, StatusCode::UNAUTHORIZED, Some(UNKNOWN)),
        Err(e) => error_page(None, &Error::from(e)),
    }
}

/// Ends the session and clears its cookie.
pub(super) async fn sign_out(State(app): State<App>, req: Request) -> PageResult {
    let value = cookie(req.headers(), SESSION_COOKIE).map(str::to_string);
    let OpsPosted { session, .. } = OpsPosted::from_request(req, &app).await?;
    if let Some(value) = value {
        app.store.end_ops_session(&crate::auth::hash(&value)).await.map_err(|e| fail(&session)(Error::from(e)))?;
    }
    let mut res = see_other("/ops/sign-in");
    res.headers_mut().insert(header::SET_COOKIE, set_cookie(&app, SESSION_COOKIE, "", Some(0)));
    Ok(res)
}
