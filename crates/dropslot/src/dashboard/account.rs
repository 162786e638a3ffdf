//! Signing in and out, the client's tokens and its saved pick-up addresses.

use askama::Template;
use axum::extract::{FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;

use super::{
    Frame, Ids, PageResult, Posted, SESSION_COOKIE, SIGN_IN_COOKIE, Session, cookie, error_page, fail, page,
    random_value, read_form, same_secret, see_other, set_cookie,
};
use crate::app::App;
use crate::error::Error;
use crate::http::PathParam;
use dropslot_core::ids::SavedAddressId;
use dropslot_store::{Mode, NewSession, SavedAddress, TokenInfo, TokenKind};

#[derive(Template)]
#[template(path = "dashboard/sign_in.html")]
struct SignInPage<'a> {
    frame: Option<Frame>,
    csrf: &'a str,
    error: Option<&'a str>,
}

/// The sign-in form, with a fresh double-submit CSRF value in a cookie and in the form.
fn sign_in_form(app: &App, status: StatusCode, error: Option<&str>) -> Response {
    let csrf = random_value();
    let mut res = page(status, SignInPage { frame: None, csrf: &csrf, error }.render());
    res.headers_mut().insert(header::SET_COOKIE, set_cookie(app, SIGN_IN_COOKIE, &csrf, Some(3600)));
    res
}

pub(super) async fn sign_in_page(State(app): State<App>) -> Response {
    sign_in_form(&app, StatusCode::OK, None)
}

/// Signs in with an API token (test or live): a new server-side session, its value in the
/// cookie. An unknown, revoked or operations token is refused with the same words.
pub(super) async fn sign_in(State(app): State<App>, req: Request) -> Response {
    let expected = cookie(req.headers(), SIGN_IN_COOKIE).map(str::to_string);
    let fields = match read_form(req, &app).await {
        Ok(f) => f,
        Err(res) => return res,
    };
    let sent = fields.get("csrf").unwrap_or("");
    if !expected.is_some_and(|e| same_secret(&e, sent)) {
        return sign_in_form(
            &app,
            StatusCode::FORBIDDEN,
            Some("This form has expired or did not come from the dashboard. Please sign in again."),
        );
    }
    let refused = "That token is not valid, has been revoked, or cannot sign in here (use a test or live token).";
    let token = fields.get("token").unwrap_or("");
    if token.is_empty() || token.len() > 256 {
        return sign_in_form(&app, StatusCode::UNAUTHORIZED, Some(refused));
    }
    let hash = crate::auth::hash(token);
    match app.store.principal(&hash).await {
        Ok(Some(p)) if p.kind != TokenKind::Ops => {}
        Ok(_) => return sign_in_form(&app, StatusCode::UNAUTHORIZED, Some(refused)),
        Err(e) => return error_page(None, &Error::from(e)),
    }
    let value = random_value();
    let session =
        NewSession { hash: crate::auth::hash(&value), csrf: random_value(), now_ms: app.clock.now().as_millisecond() };
    match app.store.create_session(&hash, session).await {
        Ok(Some(_)) => {
            let mut res = see_other("/dashboard/orders");
            let h = res.headers_mut();
            h.append(header::SET_COOKIE, set_cookie(&app, SESSION_COOKIE, &value, None));
            h.append(header::SET_COOKIE, set_cookie(&app, SIGN_IN_COOKIE, "", Some(0)));
            res
        }
        Ok(None) => sign_in_form(&app, StatusCode::UNAUTHORIZED, Some(refused)),
        Err(e) => error_page(None, &Error::from(e)),
    }
}

/// Ends the session and clears its cookie.
pub(super) async fn sign_out(State(app): State<App>, req: Request) -> PageResult {
    let value = cookie(req.headers(), SESSION_COOKIE).map(str::to_string);
    let Posted { session, .. } = Posted::from_request(req, &app).await?;
    if let Some(value) = value {
        app.store.end_session(&crate::auth::hash(&value)).await.map_err(|e| fail(&session)(Error::from(e)))?;
    }
    let mut res = see_other("/dashboard/sign-in");
    res.headers_mut().insert(header::SET_COOKIE, set_cookie(&app, SESSION_COOKIE, "", Some(0)));
    Ok(res)
}

#[derive(Template)]
#[template(path = "dashboard/tokens.html")]
struct TokensPage<'a> {
    frame: Option<Frame>,
    /// Whether live tokens can be created here (a live session).
    live: bool,
    tokens: Vec<TokenRow<'a>>,
    /// A token just created: shown this once.
    created: Option<(&'a str, &'a str)>,
}

struct TokenRow<'a> {
    /// Whether this session may revoke it.
    revocable: bool,
    prefix: &'a str,
    last4: &'a str,
    kind: &'static str,
    created_at: &'a str,
    revoked_at: Option<&'a str>,
    current: bool,
}

async fn tokens_page(app: &App, session: &Session, created: Option<(&str, &str)>, status: StatusCode) -> PageResult {
    let list: Vec<TokenInfo> =
        app.store.list_tokens(session.scope.client).await.map_err(|e| fail(session)(e.into()))?;
    let tokens = list
        .iter()
        .map(|t| TokenRow {
            revocable: t.revoked_at.is_none() && may_manage(session, t.kind),
            prefix: &t.prefix,
            last4: &t.last4,
            kind: t.kind.as_str(),
            created_at: &t.created_at,
            revoked_at: t.revoked_at.as_deref(),
            current: t.prefix == session.token_prefix,
        })
        .collect();
    Ok(page(
        status,
        TokensPage { frame: Some(session.frame("tokens")), live: session.scope.mode == Mode::Live, tokens, created }
            .render(),
    ))
}

/// The client's tokens, by prefix and last 4 characters (never the secret).
pub(super) async fn tokens(State(app): State<App>, session: Session) -> PageResult {
    tokens_page(&app, &session, None, StatusCode::OK).await
}

/// Whether this session may create or revoke a token of `kind`: a live session manages
/// test and live tokens; a test session only test tokens (a test token, often shared with
/// developers and CI, must not lead to live access); nobody manages ops tokens here.
fn may_manage(session: &Session, kind: TokenKind) -> bool {
    match kind {
        TokenKind::Test => true,
        TokenKind::Live => session.scope.mode == Mode::Live,
        TokenKind::Ops => false,
    }
}

/// Creates a test or live token and shows it once.
pub(super) async fn create_token(State(app): State<App>, Posted { session, fields }: Posted) -> PageResult {
    let kind = match fields.get("kind") {
        Some("test") => TokenKind::Test,
        Some("live") => TokenKind::Live,
        _ => return Err(fail(&session)(Error::invalid("kind", "Choose a test or a live token."))),
    };
    if !may_manage(&session, kind) {
        return Err(fail(&session)(Error::Forbidden("Sign in with a live token to create live tokens.")));
    }
    let minted = crate::auth::mint(session.scope.client, kind);
    let prefix = minted.stored.prefix.clone();
    app.store.insert_token(minted.stored, app.clock.now()).await.map_err(|e| fail(&session)(e.into()))?;
    tracing::info!(token_prefix = %prefix, "token created in the dashboard");
    tokens_page(&app, &session, Some((kind.as_str(), &minted.secret)), StatusCode::CREATED).await
}

/// Revokes one of the client's own tokens (another client's prefix is a 404). Revoking the
/// token this session signed in with ends the session at once.
pub(super) async fn revoke_token(
    State(app): State<App>,
    PathParam(prefix): PathParam<String>,
    Posted { session, .. }: Posted,
) -> PageResult {
    let own = app.store.list_tokens(session.scope.client).await.map_err(|e| fail(&session)(e.into()))?;
    let Some(token) = own.iter().find(|t| t.prefix == prefix && t.revoked_at.is_none()) else {
        return Err(fail(&session)(Error::NotFound));
    };
    if !may_manage(&session, token.kind) {
        return Err(fail(&session)(Error::Forbidden(
            "This session cannot revoke that token: sign in with a live token to manage live tokens.",
        )));
    }
    app.store.revoke_token(&prefix, app.clock.now()).await.map_err(|e| fail(&session)(e.into()))?;
    tracing::info!(token_prefix = %prefix, "token revoked in the dashboard");
    Ok(see_other(if prefix == session.token_prefix { "/dashboard/sign-in" } else { "/dashboard/tokens" }))
}

#[derive(Template)]
#[template(path = "dashboard/addresses.html")]
struct AddressesPage {
    frame: Option<Frame>,
    addresses: Vec<SavedAddress>,
}

/// The saved pick-up addresses of this client and mode.
pub(super) async fn addresses(State(app): State<App>, session: Session) -> PageResult {
    let addresses = app.store.list_saved_addresses(session.scope).await.map_err(|e| fail(&session)(e.into()))?;
    Ok(page(StatusCode::OK, AddressesPage { frame: Some(session.frame("addresses")), addresses }.render()))
}

pub(super) async fn delete_address(
    State(app): State<App>,
    Ids([id]): Ids<1>,
    Posted { session, .. }: Posted,
) -> PageResult {
    if app.store.delete_saved_address(session.scope, SavedAddressId(id)).await.map_err(|e| fail(&session)(e.into()))? {
        Ok(see_other("/dashboard/addresses"))
    } else {
        Err(fail(&session)(Error::NotFound))
    }
}
