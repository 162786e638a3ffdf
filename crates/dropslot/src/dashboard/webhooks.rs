//! The webhooks page: endpoints (create, edit, enable, disable, delete; event kinds), the
//! secret revealed once at creation and rotation, test events, and the delivery log with
//! every attempt and a resend button. Every action is the API's own function.

use askama::Template;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;

use super::{Fields, Frame, Ids, PageResult, Posted, Session, fail, field_list, ms_text, page, see_other};
use crate::app::App;
use crate::error::Error;
use crate::http::page::{cursor, parse_cursor};
use crate::webhooks::routes::{self as api, AuthHeaderBody, EndpointBody};
use dropslot_store::{DeliveryState, StoredDelivery, StoredEndpoint};

const LOG_PAGE: usize = 20;

struct EndpointRow {
    id: i64,
    url: String,
    description: String,
    events: String,
    status: &'static str,
    status_label: &'static str,
    disabled_reason: String,
    last_error: String,
    failing_since: String,
    last_success: String,
}

fn status_label(status: &str) -> &'static str {
    match status {
        "enabled" => "Enabled",
        "disabled" => "Disabled",
        _ => "Disabled by the service",
    }
}

impl EndpointRow {
    fn new(e: &StoredEndpoint) -> EndpointRow {
        let status = api::endpoint_status(e);
        EndpointRow {
            id: e.id,
            url: e.url.clone(),
            description: e.description.clone(),
            events: e.events.join(", "),
            status,
            status_label: status_label(status),
            disabled_reason: e.disabled_reason.clone().unwrap_or_default(),
            last_error: e.last_error.clone().unwrap_or_default(),
            failing_since: ms_text(e.failing_since_ms),
            last_success: ms_text(e.last_success_ms),
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/webhooks.html")]
struct ListPage {
    frame: Option<Frame>,
    endpoints: Vec<EndpointRow>,
    kinds: Vec<(String, bool)>,
    all_events: bool,
    url: String,
    description: String,
    header_name: String,
    errors: Vec<(String, String)>,
}

/// Every event kind a form can choose, and whether `chosen` has it.
fn kinds(chosen: &[String]) -> Vec<(String, bool)> {
    crate::webhooks::event_kinds().into_iter().map(|k| (k.clone(), chosen.contains(&k))).collect()
}

async fn list_page(app: &App, session: &Session, form: Option<(&Fields, &Error)>) -> PageResult {
    let endpoints = app.store.endpoints(session.scope).await.map_err(|e| fail(session)(e.into()))?;
    let (chosen, status, errors) = match form {
        Some((f, e)) => (f.all("events"), e.status(), errors_of(e)),
        None => (vec!["*".to_string()], StatusCode::OK, Vec::new()),
    };
    let field = |name: &str| form.and_then(|(f, _)| f.text(name)).unwrap_or_default();
    let body = ListPage {
        frame: Some(session.frame("webhooks")),
        endpoints: endpoints.iter().map(EndpointRow::new).collect(),
        all_events: chosen.iter().any(|e| e == "*"),
        kinds: kinds(&chosen),
        url: field("url"),
        description: field("description"),
        header_name: field("auth_header_name"),
        errors,
    };
    Ok(page(status, body.render()))
}

fn errors_of(e: &Error) -> Vec<(String, String)> {
    match e {
        Error::Validation(f) => field_list(f),
        other => vec![(String::new(), other.to_string())],
    }
}

/// The webhook endpoints of this client and mode, and the form to add one.
pub(super) async fn list(State(app): State<App>, session: Session) -> PageResult {
    list_page(&app, &session, None).await
}

/// The form's fields as the API's body: the checked boxes (or `*`), the auth header when
/// both its parts are given.
fn body_of(f: &Fields, creating: bool) -> EndpointBody {
    let mut events = f.all("events");
    if events.iter().any(|e| e == "*") {
        events = vec!["*".to_string()];
    }
    let header = match (f.text("auth_header_name"), f.get("auth_header_value").filter(|v| !v.is_empty())) {
        (Some(name), Some(value)) => Some(Some(AuthHeaderBody { name, value: value.to_string() })),
        (None, None) if f.get("remove_auth_header").is_some() => Some(None),
        (None, None) => None,
        // One part without the other: the API's own check names the problem.
        (name, value) => {
            Some(Some(AuthHeaderBody { name: name.unwrap_or_default(), value: value.unwrap_or_default().to_string() }))
        }
    };
    EndpointBody {
        url: f.text("url").or_else(|| creating.then(String::new)),
        events: Some(events),
        auth_header: header,
        enabled: None,
        description: Some(f.get("description").unwrap_or("").to_string()),
    }
}

/// Creates an endpoint and shows its secret, this once.
pub(super) async fn create(State(app): State<App>, Posted { session, fields }: Posted) -> PageResult {
    match api::create_endpoint(&app, session.scope, body_of(&fields, true)).await {
        Ok(e) => {
            endpoint_page(
                &app,
                &session,
                e,
                Shown { secret: Some("created"), notice: String::new() },
                None,
                StatusCode::CREATED,
            )
            .await
        }
        Err(e @ Error::Validation(_)) => list_page(&app, &session, Some((&fields, &e))).await,
        Err(e) => Err(fail(&session)(e)),
    }
}

#[derive(Template)]
#[template(path = "dashboard/endpoint.html")]
struct EndpointPage {
    frame: Option<Frame>,
    e: EndpointRow,
    header: String,
    kinds: Vec<(String, bool)>,
    all_events: bool,
    /// The secret, when just created or rotated (shown this once), and why.
    secret: Option<(String, &'static str)>,
    rotation_ends: String,
    deliveries: Vec<DeliveryRow>,
    next: Option<String>,
    notice: String,
}

struct DeliveryRow {
    id: i64,
    event: String,
    webhook_id: String,
    state: &'static str,
    attempts: u32,
    queued: String,
    next_retry: String,
    finished: String,
    last_status: String,
    last_error: String,
    attempts_log: Vec<AttemptRow>,
}

struct AttemptRow {
    attempt: u32,
    at: String,
    status: String,
    latency_ms: i64,
    response: String,
    error: String,
}

impl DeliveryRow {
    fn new(d: &StoredDelivery) -> DeliveryRow {
        DeliveryRow {
            id: d.id,
            event: d.event.clone(),
            webhook_id: d.webhook_id.clone(),
            state: d.state.as_str(),
            attempts: d.attempts,
            queued: ms_text(Some(d.queued_ms)),
            next_retry: if d.state == DeliveryState::Pending { ms_text(d.next_attempt_ms) } else { String::new() },
            finished: ms_text(d.finished_ms),
            last_status: d.last_status.map(|s| s.to_string()).unwrap_or_default(),
            last_error: d.last_error.clone().unwrap_or_default(),
            attempts_log: d
                .log
                .iter()
                .rev()
                .map(|a| AttemptRow {
                    attempt: a.attempt,
                    at: a.at.clone(),
                    status: a.status.map_or_else(|| "no answer".to_string(), |s| s.to_string()),
                    latency_ms: a.latency_ms,
                    response: a.response.clone().unwrap_or_default(),
                    error: a.error.clone().unwrap_or_default(),
                })
                .collect(),
        }
    }
}

/// What an endpoint page shows besides the endpoint: the secret (just created or rotated)
/// and a notice after an action.
struct Shown {
    secret: Option<&'static str>,
    notice: String,
}

async fn endpoint_page(
    app: &App,
    session: &Session,
    e: StoredEndpoint,
    shown: Shown,
    before: Option<i64>,
    status: StatusCode,
) -> PageResult {
    let mut log = app
        .store
        .deliveries(session.scope, e.id, before, LOG_PAGE + 1)
        .await
        .map_err(|e| fail(session)(e.into()))?
        .ok_or_else(|| fail(session)(Error::NotFound))?;
    let next = (log.len() > LOG_PAGE).then(|| {
        log.truncate(LOG_PAGE);
        log.last().map(|d| cursor("d", d.id))
    });
    let now = app.clock.now().as_millisecond();
    let body = EndpointPage {
        frame: Some(session.frame("webhooks")),
        header: e
            .auth_header_name
            .as_ref()
            .map(|n| format!("{n}: …{}", e.auth_header_last4.as_deref().unwrap_or("")))
            .unwrap_or_default(),
        all_events: e.events.iter().any(|k| k == "*"),
        kinds: kinds(&e.events),
        secret: shown.secret.map(|why| (e.secret.clone(), why)),
        rotation_ends: ms_text(e.previous_expires_ms.filter(|&ms| ms > now)),
        deliveries: log.iter().map(DeliveryRow::new).collect(),
        next: next.flatten(),
        notice: shown.notice,
        e: EndpointRow::new(&e),
    };
    Ok(page(status, body.render()))
}

async fn endpoint_of(app: &App, session: &Session, id: i64) -> Result<StoredEndpoint, axum::response::Response> {
    app.store
        .endpoint(session.scope, id)
        .await
        .map_err(|e| fail(session)(e.into()))?
        .ok_or_else(|| fail(session)(Error::NotFound))
}

/// One endpoint: its settings, its state, and its delivery log (newest first, paged).
pub(super) async fn show(
    State(app): State<App>,
    session: Session,
    Ids([id]): Ids<1>,
    RawQuery(query): RawQuery,
) -> PageResult {
    let e = endpoint_of(&app, &session, id).await?;
    let mut before = None;
    let mut notice = String::new();
    for (k, v) in url::form_urlencoded::parse(query.as_deref().unwrap_or("").as_bytes()) {
        match k.as_ref() {
            "cursor" => {
                before = Some(
                    parse_cursor(&v, "d")
                        .ok_or_else(|| fail(&session)(Error::invalid("cursor", "This page link is not valid.")))?,
                );
            }
            "done" => {
                notice = match v.as_ref() {
                    "updated" => "Endpoint updated.",
                    "enabled" => "Endpoint enabled. Nothing is replayed by itself: resend what you need below.",
                    "disabled" => "Endpoint disabled. Its queued deliveries were failed.",
                    "test" => "Test event queued.",
                    "resent" => "Delivery queued again.",
                    _ => "",
                }
                .to_string();
            }
            _ => {}
        }
    }
    endpoint_page(&app, &session, e, Shown { secret: None, notice }, before, StatusCode::OK).await
}

/// Saves the edit form (URL, description, event kinds, auth header).
pub(super) async fn update(
    State(app): State<App>,
    Ids([id]): Ids<1>,
    Posted { session, fields }: Posted,
) -> PageResult {
    api::update_endpoint(&app, session.scope, id, body_of(&fields, false)).await.map_err(fail(&session))?;
    Ok(see_other(&format!("/dashboard/webhooks/{id}?done=updated")))
}

async fn set_enabled(app: &App, session: &Session, id: i64, enabled: bool) -> PageResult {
    let body = EndpointBody { enabled: Some(enabled), ..EndpointBody::default() };
    api::update_endpoint(app, session.scope, id, body).await.map_err(fail(session))?;
    Ok(see_other(&format!("/dashboard/webhooks/{id}?done={}", if enabled { "enabled" } else { "disabled" })))
}

pub(super) async fn enable(State(app): State<App>, Ids([id]): Ids<1>, Posted { session, .. }: Posted) -> PageResult {
    set_enabled(&app, &session, id, true).await
}

pub(super) async fn disable(State(app): State<App>, Ids([id]): Ids<1>, Posted { session, .. }: Posted) -> PageResult {
    set_enabled(&app, &session, id, false).await
}

pub(super) async fn delete(State(app): State<App>, Ids([id]): Ids<1>, Posted { session, .. }: Posted) -> PageResult {
    api::delete_endpoint(&app, session.scope, id).await.map_err(fail(&session))?;
    Ok(see_other("/dashboard/webhooks"))
}

/// A new secret, shown this once; the old one keeps signing for 24 hours.
pub(super) async fn rotate(State(app): State<App>, Ids([id]): Ids<1>, Posted { session, .. }: Posted) -> PageResult {
    let e = api::rotate_secret(&app, session.scope, id).await.map_err(fail(&session))?;
    endpoint_page(&app, &session, e, Shown { secret: Some("rotated"), notice: String::new() }, None, StatusCode::OK)
        .await
}

pub(super) async fn test(State(app): State<App>, Ids([id]): Ids<1>, Posted { session, .. }: Posted) -> PageResult {
    api::send_test(&app, session.scope, id).await.map_err(fail(&session))?;
    Ok(see_other(&format!("/dashboard/webhooks/{id}?done=test")))
}

/// Sends a delivery's message again (same `webhook-id`), as a new delivery; back to the log
/// of the endpoint it went to.
pub(super) async fn resend(
    State(app): State<App>,
    Ids([_, delivery]): Ids<2>,
    Posted { session, .. }: Posted,
) -> PageResult {
    let d = api::resend_delivery(&app, session.scope, delivery).await.map_err(fail(&session))?;
    Ok(see_other(&format!("/dashboard/webhooks/{}?done=resent", d.endpoint_id)))
}
