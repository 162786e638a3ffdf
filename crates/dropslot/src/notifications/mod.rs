//! Recipient notifications (CONTRACT §14, docs/notifications.md): the messages a shipment's
//! changes enqueue in their own transaction (planned by `dropslot_core::notifications`), the
//! [`sender`] that sends each once, the client's settings and message list, and the public
//! opt-out page.

pub mod sender;
mod smtp;
pub mod text;
mod wire;

use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};

use crate::app::App;
use crate::auth::Caller;
use crate::error::{Envelope, Error, ErrorEnvelope, FieldErrors, Result, envelope};
use crate::http::{JsonBody, PathParam};
use dropslot_store::Visibility;
pub use wire::{NotificationList, NotificationSettings, NotificationView};

pub fn routes() -> axum::Router<App> {
    use axum::routing::get;
    axum::Router::new()
        .route(crate::http::api_path!("/notifications/settings"), get(read_settings).put(write_settings))
        .route(crate::http::api_path!("/shipments/{unique_id}/notifications"), get(list))
}

/// The public opt-out page (no token: the link's own token is the credential).
pub fn public_routes() -> axum::Router<App> {
    use axum::routing::get;
    axum::Router::new().route("/notifications/opt-out/{token}", get(opt_out_form).post(opt_out))
}

/// `GET /notifications/settings`.
#[utoipa::path(get, path = "/notifications/settings", tag = "Notifications", operation_id = "get_notification_settings",
    summary = "Read the recipient notification settings", security(("client_token" = [])),
    responses((status = 200, description = "The settings of the token's mode (all on by default).", body = Envelope<NotificationSettings>)))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn read_settings(State(app): State<App>, caller: Caller) -> Result<Response> {
    let s = NotificationSettings::from(app.store.notification_settings(caller.scope).await?);
    Ok(envelope(200, "Notification settings.", &s).into_response())
}

/// `PUT /notifications/settings`: replaces them whole.
#[utoipa::path(put, path = "/notifications/settings", tag = "Notifications", operation_id = "put_notification_settings",
    summary = "Replace the recipient notification settings", security(("client_token" = [])), request_body = NotificationSettings,
    responses(
        (status = 200, description = "The settings now.", body = Envelope<NotificationSettings>),
        (status = 400, description = "Not JSON, an unknown field.", body = ErrorEnvelope),
        (status = 422, description = "`sender_name`: 1 to 100 characters, no line breaks.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn write_settings(
    State(app): State<App>,
    caller: Caller,
    JsonBody(mut body, _): JsonBody<NotificationSettings>,
) -> Result<Response> {
    body.sender_name = body.sender_name.trim().to_string();
    let n = body.sender_name.chars().count();
    if n == 0 || n > 100 {
        return Err(Error::Validation(FieldErrors::single("sender_name", "Use 1 to 100 characters.")));
    }
    if body.sender_name.chars().any(char::is_control) {
        return Err(Error::Validation(FieldErrors::single(
            "sender_name",
            "Line breaks and control characters are not allowed.",
        )));
    }
    app.store.set_notification_settings(caller.scope, body.clone().into(), app.clock.now()).await?;
    Ok(envelope(200, "Notification settings saved.", &body).into_response())
}

/// The messages of one shipment of the caller, masked.
pub async fn views(app: &App, scope: dropslot_store::Scope, unique_id: &str) -> Result<Vec<NotificationView>> {
    Ok(app
        .store
        .shipment_notifications(scope, unique_id)
        .await?
        .into_iter()
        .map(|n| NotificationView {
            id: n.id,
            trigger: n.trigger.into(),
            channel: n.channel.into(),
            recipient: text::mask(n.channel, &n.recipient),
            state: n.state.as_str().to_string(),
            attempts: n.attempts,
            repeated_after_crash: n.repeated_after_crash,
            last_error: n.last_error,
            created_at: n.created_at,
            sent_at: n.sent_at,
        })
        .collect())
}

/// `GET /shipments/{unique_id}/notifications`.
#[utoipa::path(get, path = "/shipments/{unique_id}/notifications", tag = "Notifications", operation_id = "list_shipment_notifications",
    summary = "List a shipment's recipient messages", security(("client_token" = [])),
    params(("unique_id" = String, Path, description = "The drop-off shipment's tracking code.")),
    responses(
        (status = 200, description = "Its messages, oldest first; recipients masked.", body = Envelope<NotificationList>),
        (status = 404, description = "No shipment of yours in this mode has this id.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn list(State(app): State<App>, caller: Caller, PathParam(unique_id): PathParam<String>) -> Result<Response> {
    app.store.shipment(Visibility::Tenant(caller.scope), &unique_id).await?.ok_or(Error::NotFound)?;
    let notifications = views(&app, caller.scope, &unique_id).await?;
    Ok(envelope(200, "Notifications.", &NotificationList { notifications }).into_response())
}

fn page(title: &str, body: &str) -> Response {
    Html(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width\"><title>{title}</title></head><body><main><h1>{title}</h1>{body}</main></body></html>"
    ))
    .into_response()
}

/// `GET /notifications/opt-out/{token}`: a confirm form (a mail scanner following the link
/// opts nobody out).
#[utoipa::path(get, path = "/notifications/opt-out/{token}", tag = "Notifications", operation_id = "opt_out_form",
    summary = "The recipient's opt-out page",
    description = "Public (the token in the link of every message is the credential). A confirm form: following the link opts nobody out.",
    params(("token" = String, Path, description = "The recipient's opt-out token, from a message's link.")),
    responses(
        (status = 200, description = "The confirm form (or, once opted out, the confirmation).", content_type = "text/html", body = String),
        (status = 404, description = "No such token.", content_type = "text/html", body = String),
    ))]
async fn opt_out_form(State(app): State<App>, PathParam(token): PathParam<String>) -> Result<Response> {
    match app.store.opt_out_state(&token).await? {
        None => Ok((axum::http::StatusCode::NOT_FOUND, page("Link not found", "<p>This link is not valid.</p>"))
            .into_response()),
        Some(true) => Ok(page(
            "You are opted out",
            "<p>You will not receive more delivery messages at this address or number.</p>",
        )),
        Some(false) => Ok(page(
            "Stop delivery messages",
            "<p>Stop every later delivery message to this address or number?</p>\
             <form method=\"post\"><button type=\"submit\">Stop messages</button></form>",
        )),
    }
}

/// `POST /notifications/opt-out/{token}`: the form's button, or a mail client's RFC 8058
/// one-click request.
#[utoipa::path(post, path = "/notifications/opt-out/{token}", tag = "Notifications", operation_id = "opt_out",
    summary = "Opt a recipient out",
    description = "Public. Stops every later message to the address or number the token stands for (RFC 8058 one-click too). Taking it twice is the same as once.",
    params(("token" = String, Path, description = "The recipient's opt-out token, from a message's link.")),
    responses(
        (status = 200, description = "Opted out.", content_type = "text/html", body = String),
        (status = 404, description = "No such token.", content_type = "text/html", body = String),
    ))]
async fn opt_out(State(app): State<App>, PathParam(token): PathParam<String>) -> Result<Response> {
    if app.store.opt_out(&token, app.clock.now()).await? {
        tracing::info!("a recipient opted out of notifications");
        Ok(page("You are opted out", "<p>You will not receive more delivery messages at this address or number.</p>"))
    } else {
        Ok((axum::http::StatusCode::NOT_FOUND, page("Link not found", "<p>This link is not valid.</p>"))
            .into_response())
    }
}
