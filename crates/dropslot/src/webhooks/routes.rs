//! The webhook management API (CONTRACT §5): endpoints of the caller's client in the token's
//! mode (another client's or the other mode's endpoint is a 404), their secrets, test events
//! and the delivery log.

use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use serde::{Deserialize, Deserializer, Serialize};

use super::{event_kinds, payload, signing, target};
use crate::app::App;
use crate::auth::Caller;
use crate::error::{EmptyObject, Envelope, Error, ErrorEnvelope, FieldErrors, Result, envelope};
use crate::http::page::{cursor, page_query};
use crate::http::{JsonBody, PathParam};
use dropslot_store::{
    AuthHeader, DeliveryState, EndpointPatch, NewEndpoint, ResendOutcome, Scope, StoredAttempt, StoredDelivery,
    StoredEndpoint,
};

/// How long the previous secret keeps signing after a rotation.
const ROTATION_OVERLAP: Duration = Duration::from_secs(24 * 3600);
const MAX_DESCRIPTION: usize = 500;
const MAX_HEADER_VALUE: usize = 1000;
/// Headers the service sets itself; an endpoint's auth header may not replace them.
const RESERVED_HEADERS: &[&str] = &[
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "content-type",
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "host",
    "connection",
    "user-agent",
    "te",
    "upgrade",
];

pub fn routes() -> axum::Router<App> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route(crate::http::api_path!("/webhooks"), post(create).get(list))
        .route(crate::http::api_path!("/webhooks/{id}"), get(show).patch(update).delete(remove))
        .route(crate::http::api_path!("/webhooks/{id}/rotate-secret"), post(rotate))
        .route(crate::http::api_path!("/webhooks/{id}/test"), post(test))
        .route(crate::http::api_path!("/webhooks/{id}/deliveries"), get(deliveries))
        .route(crate::http::api_path!("/webhooks/deliveries/{id}/resend"), post(resend))
}

/// A header the service sends with every delivery to this endpoint.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuthHeaderBody {
    pub name: String,
    pub value: String,
}

/// Present-and-null (`Some(None)`) apart from absent (`None`).
#[allow(clippy::option_option)] // exactly the three cases of a PATCH field
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> std::result::Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A create or update of an endpoint, as the API's JSON or the dashboard's form gives it.
/// On an update, only the fields given change.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"url": "https://hooks.example.com/dropslot", "events": ["*"]}))]
pub(crate) struct EndpointBody {
    /// `http(s)`; internal (loopback, private, link-local) targets are refused unless the
    /// operator allows them. Required on create.
    #[serde(default)]
    pub url: Option<String>,
    /// Event kinds, or `["*"]` for all (the default on create).
    #[serde(default)]
    #[schema(schema_with = event_kind_list)]
    pub events: Option<Vec<String>>,
    /// `null` removes the header (update).
    #[serde(default, deserialize_with = "present")]
    #[allow(clippy::option_option)] // absent, null (remove), or a header
    #[schema(value_type = Option<AuthHeaderBody>)]
    pub auth_header: Option<Option<AuthHeaderBody>>,
    #[serde(default)]
    pub enabled: Option<bool>,
    /// At most 500 characters.
    #[serde(default)]
    pub description: Option<String>,
}

/// At least one event kind of [`event_kinds`], or `*` alone; `null` is the same as absent.
fn event_kind_list() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
    let mut kinds = vec!["*".to_string()];
    kinds.extend(event_kinds());
    let kind = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(kinds));
    let list = ArrayBuilder::new().items(kind).min_items(Some(1));
    OneOfBuilder::new().item(list).item(ObjectBuilder::new().schema_type(Type::Null)).into()
}

/// `POST /webhooks`'s body as the document shows it: [`EndpointBody`] with `url` required
/// (a schema only; a test holds its properties to `EndpointBody`'s).
#[derive(utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"url": "https://hooks.example.com/dropslot", "events": ["*"]}))]
#[allow(dead_code)]
struct NewEndpointBody {
    /// `http(s)`; internal (loopback, private, link-local) targets are refused unless the
    /// operator allows them.
    url: String,
    /// Event kinds, or `["*"]` for all (the default).
    #[schema(schema_with = event_kind_list)]
    events: Option<Vec<String>>,
    auth_header: Option<AuthHeaderBody>,
    enabled: Option<bool>,
    /// At most 500 characters.
    description: Option<String>,
}

/// The checked parts of a create or update body.
struct Checked {
    url: Option<String>,
    events: Option<Vec<String>>,
    #[allow(clippy::option_option)] // absent, null (remove), or a header
    auth_header: Option<Option<AuthHeader>>,
    description: Option<String>,
}

impl EndpointBody {
    /// Every field's rules, each failure at its path; the URL's target resolved and refused
    /// when internal (unless private targets are allowed).
    async fn check(self, app: &App, creating: bool) -> Result<(Checked, Option<bool>)> {
        let mut errors = FieldErrors::new();
        let mut url = None;
        match self.url {
            None if creating => errors.add("url", "The url is required."),
            None => {}
            Some(text) => match target::parse(text.trim()) {
                Err(m) => errors.add("url", m),
                Ok(u) => match target::check(&u, app.settings.webhooks.allow_private).await {
                    Err(m) => errors.add("url", m),
                    Ok(()) => url = Some(u.to_string()),
                },
            },
        }
        let events = match self.events {
            None if creating => Some(vec!["*".to_string()]),
            None => None,
            Some(list) => check_events(list, &mut errors),
        };
        let auth_header = self.auth_header.map(|h| {
            h.and_then(|h| match check_header(&h) {
                Ok(()) => Some(AuthHeader { name: h.name.trim().to_string(), value: h.value }),
                Err(m) => {
                    errors.add("auth_header", m);
                    None
                }
            })
        });
        let description = self.description.map(|d| d.trim().to_string());
        if description.as_ref().is_some_and(|d| d.chars().count() > MAX_DESCRIPTION) {
            errors.add("description", format!("The description must be at most {MAX_DESCRIPTION} characters."));
        }
        errors.into_result()?;
        Ok((Checked { url, events, auth_header, description }, self.enabled))
    }
}

fn check_events(list: Vec<String>, errors: &mut FieldErrors) -> Option<Vec<String>> {
    if list.is_empty() {
        errors.add("events", "Subscribe to at least one event kind, or [\"*\"] for all.");
        return None;
    }
    let known = event_kinds();
    let mut out: Vec<String> = Vec::new();
    for (i, e) in list.into_iter().enumerate() {
        if e != "*" && !known.contains(&e) {
            errors.add(format!("events.{i}"), format!("Unknown event kind; one of \"*\", {}.", known.join(", ")));
        } else if !out.contains(&e) {
            out.push(e);
        }
    }
    if out.len() > 1 && out.iter().any(|e| e == "*") {
        errors.add("events", "\"*\" stands alone: it already means every event kind.");
    }
    Some(out)
}

fn check_header(h: &AuthHeaderBody) -> std::result::Result<(), String> {
    let name = h.name.trim();
    if axum::http::HeaderName::from_bytes(name.as_bytes()).is_err() || name.is_empty() || name.len() > 100 {
        return Err("The auth header's name must be a valid HTTP header name.".into());
    }
    if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(format!("The auth header cannot be {name}: the service sets it."));
    }
    if h.value.contains(['\r', '\n']) {
        return Err("The auth header's value may not contain line breaks.".into());
    }
    if h.value.is_empty() || h.value.len() > MAX_HEADER_VALUE || axum::http::HeaderValue::from_str(&h.value).is_err() {
        return Err(format!("The auth header's value must be 1 to {MAX_HEADER_VALUE} visible characters."));
    }
    Ok(())
}

#[derive(Serialize, utoipa::ToSchema)]
struct HeaderView<'a> {
    name: &'a str,
    /// The value's last 4 characters: the value itself is never shown.
    value_last4: &'a str,
}

#[derive(Serialize, utoipa::ToSchema)]
struct EndpointView<'a> {
    id: i64,
    url: &'a str,
    events: &'a [String],
    description: &'a str,
    enabled: bool,
    /// `enabled`, `disabled` (by the client) or `disabled_by_service` (410, or failing).
    status: &'static str,
    disabled_reason: Option<&'a str>,
    auth_header: Option<HeaderView<'a>>,
    /// Shown only when created and when rotated.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<&'a str>,
    previous_secret_expires_at: Option<String>,
    failing_since: Option<String>,
    last_success_at: Option<String>,
    last_error: Option<&'a str>,
    created_at: &'a str,
    updated_at: &'a str,
}

pub(crate) fn at_ms(ms: Option<i64>) -> Option<String> {
    ms.and_then(|ms| Timestamp::from_millisecond(ms).ok()).map(|t| t.to_string())
}

impl<'a> EndpointView<'a> {
    fn new(app: &App, e: &'a StoredEndpoint, show_secret: bool) -> EndpointView<'a> {
        EndpointView {
            id: e.id,
            url: &e.url,
            events: &e.events,
            description: &e.description,
            enabled: e.enabled,
            status: endpoint_status(e),
            disabled_reason: e.disabled_reason.as_deref(),
            auth_header: e
                .auth_header_name
                .as_deref()
                .map(|name| HeaderView { name, value_last4: e.auth_header_last4.as_deref().unwrap_or("") }),
            secret: show_secret.then_some(e.secret.as_str()),
            previous_secret_expires_at: at_ms(
                e.previous_expires_ms.filter(|&ms| ms > app.clock.now().as_millisecond()),
            ),
            failing_since: at_ms(e.failing_since_ms),
            last_success_at: at_ms(e.last_success_ms),
            last_error: e.last_error.as_deref(),
            created_at: &e.created_at,
            updated_at: &e.updated_at,
        }
    }
}

/// `POST /webhooks`: 201 with the endpoint and its signing secret (shown this once).
#[utoipa::path(post, path = "/webhooks", tag = "Webhooks", operation_id = "create_webhook",
    summary = "Create a webhook endpoint",
    description = "The endpoint belongs to the mode of the token (test or live) and receives only that mode's events. Its signing `secret` is shown in this answer only.",
    security(("client_token" = [])), request_body = NewEndpointBody,
    responses(
        (status = 201, description = "The endpoint with its signing `secret`.", body = Envelope<EndpointView>),
        (status = 422, description = "A rule broken at `url`, `events`, `events.N`, `auth_header` or `description` (an internal or unresolvable target included).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn create(State(app): State<App>, caller: Caller, JsonBody(body, _): JsonBody<EndpointBody>) -> Result<Response> {
    let e = create_endpoint(&app, caller.scope, body).await?;
    Ok(envelope(201, "Webhook endpoint created.", &EndpointView::new(&app, &e, true)).into_response())
}

// ---- what the API and the dashboard both do -------------------------------------------

/// Creates an endpoint from a checked body (every rule at its field path), with a new
/// signing secret.
pub(crate) async fn create_endpoint(app: &App, scope: Scope, body: EndpointBody) -> Result<StoredEndpoint> {
    let (checked, enabled) = body.check(app, true).await?;
    let new = NewEndpoint {
        url: checked.url.unwrap_or_default(),
        events: checked.events.unwrap_or_default(),
        description: checked.description.unwrap_or_default(),
        enabled: enabled.unwrap_or(true),
        auth_header: checked.auth_header.flatten(),
        secret: signing::new_secret(),
    };
    let e = app.store.create_endpoint(scope, new, app.clock.now()).await?;
    tracing::info!(endpoint_id = e.id, "webhook endpoint created");
    Ok(e)
}

/// Changes the fields given; disabling fails the endpoint's queued deliveries, enabling
/// replays nothing (resend does).
pub(crate) async fn update_endpoint(app: &App, scope: Scope, id: i64, body: EndpointBody) -> Result<StoredEndpoint> {
    app.store.endpoint(scope, id).await?.ok_or(Error::NotFound)?;
    let (checked, enabled) = body.check(app, false).await?;
    let patch = EndpointPatch {
        url: checked.url,
        events: checked.events,
        description: checked.description,
        enabled,
        auth_header: checked.auth_header,
    };
    app.store.update_endpoint(scope, id, patch, app.clock.now()).await?.ok_or(Error::NotFound)
}

/// Deletes an endpoint: its queued deliveries fail and its credentials are erased.
pub(crate) async fn delete_endpoint(app: &App, scope: Scope, id: i64) -> Result<()> {
    if app.store.delete_endpoint(scope, id, app.clock.now()).await? { Ok(()) } else { Err(Error::NotFound) }
}

/// A new secret; the previous one keeps signing for [`ROTATION_OVERLAP`].
pub(crate) async fn rotate_secret(app: &App, scope: Scope, id: i64) -> Result<StoredEndpoint> {
    let until = app.clock.now().as_millisecond() + ROTATION_OVERLAP.as_millis() as i64;
    app.store.rotate_secret(scope, id, signing::new_secret(), until, app.clock.now()).await?.ok_or(Error::NotFound)
}

/// Queues a `same.webhook.test` event to an enabled endpoint.
pub(crate) async fn send_test(app: &App, scope: Scope, id: i64) -> Result<StoredDelivery> {
    let e = app.store.endpoint(scope, id).await?.ok_or(Error::NotFound)?;
    if !e.enabled {
        return Err(Error::Conflict("The endpoint is disabled; enable it to send it events.".into()));
    }
    let body = payload::test_event(id, app.clock.now());
    app.store.queue_test(scope, id, payload::TEST_EVENT, body, app.clock.now()).await?.ok_or(Error::NotFound)
}

/// Queues a delivery's message (same `webhook-id`) again, as a new delivery.
pub(crate) async fn resend_delivery(app: &App, scope: Scope, id: i64) -> Result<StoredDelivery> {
    match app.store.resend(scope, id).await? {
        ResendOutcome::NotFound => Err(Error::NotFound),
        ResendOutcome::EndpointDisabled => {
            Err(Error::Conflict("The endpoint is disabled; enable it before resending.".into()))
        }
        ResendOutcome::Queued(d) => Ok(d),
    }
}

/// `enabled`, `disabled` (by the client) or `disabled_by_service` (410, or failing).
pub(crate) fn endpoint_status(e: &StoredEndpoint) -> &'static str {
    match (e.enabled, &e.disabled_reason) {
        (true, _) => "enabled",
        (false, None) => "disabled",
        (false, Some(_)) => "disabled_by_service",
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct EndpointList<'a> {
    webhooks: Vec<EndpointView<'a>>,
}

/// `GET /webhooks`.
#[utoipa::path(get, path = "/webhooks", tag = "Webhooks", operation_id = "list_webhooks",
    summary = "List your webhook endpoints", security(("client_token" = [])),
    responses((status = 200, description = "Oldest first; secrets are never shown here.", body = Envelope<EndpointList>)))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn list(State(app): State<App>, caller: Caller) -> Result<Response> {
    let all = app.store.endpoints(caller.scope).await?;
    let page = EndpointList { webhooks: all.iter().map(|e| EndpointView::new(&app, e, false)).collect() };
    Ok(envelope(200, "Webhook endpoints.", &page).into_response())
}

/// `GET /webhooks/{id}`.
#[utoipa::path(get, path = "/webhooks/{id}", tag = "Webhooks", operation_id = "get_webhook",
    summary = "Read a webhook endpoint", security(("client_token" = [])), params(("id" = i64, Path, description = "The endpoint's id.")),
    responses((status = 200, description = "The endpoint.", body = Envelope<EndpointView>), (status = 404, description = "No endpoint of yours in this mode has this id (or the id is not a number).", body = ErrorEnvelope)))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn show(State(app): State<App>, caller: Caller, PathParam(id): PathParam<i64>) -> Result<Response> {
    let e = app.store.endpoint(caller.scope, id).await?.ok_or(Error::NotFound)?;
    Ok(envelope(200, "Webhook endpoint.", &EndpointView::new(&app, &e, false)).into_response())
}

/// `PATCH /webhooks/{id}`: the fields given change; `auth_header: null` removes the header.
#[utoipa::path(patch, path = "/webhooks/{id}", tag = "Webhooks", operation_id = "update_webhook",
    summary = "Change a webhook endpoint",
    description = "The fields given change. `\"enabled\": false` fails its queued deliveries; `\"auth_header\": null` removes the header.",
    security(("client_token" = [])), params(("id" = i64, Path, description = "The endpoint's id.")), request_body = EndpointBody,
    responses(
        (status = 200, description = "The endpoint.", body = Envelope<EndpointView>), (status = 404, description = "No endpoint of yours in this mode has this id (or the id is not a number).", body = ErrorEnvelope),
        (status = 422, description = "A rule broken at `url`, `events`, `events.N`, `auth_header` or `description`.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn update(
    State(app): State<App>,
    caller: Caller,
    PathParam(id): PathParam<i64>,
    JsonBody(body, _): JsonBody<EndpointBody>,
) -> Result<Response> {
    let e = update_endpoint(&app, caller.scope, id, body).await?;
    Ok(envelope(200, "Webhook endpoint updated.", &EndpointView::new(&app, &e, false)).into_response())
}

/// `DELETE /webhooks/{id}`: its queued deliveries are failed and its credentials erased; its
/// delivery log stays in the database for the operator.
#[utoipa::path(delete, path = "/webhooks/{id}", tag = "Webhooks", operation_id = "delete_webhook",
    summary = "Delete a webhook endpoint", description = "Its queued deliveries are failed.",
    security(("client_token" = [])), params(("id" = i64, Path, description = "The endpoint's id.")),
    responses((status = 200, description = "Deleted; `object` is `{}`.", body = Envelope<EmptyObject>), (status = 404, description = "No endpoint of yours in this mode has this id (or the id is not a number).", body = ErrorEnvelope)))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn remove(State(app): State<App>, caller: Caller, PathParam(id): PathParam<i64>) -> Result<Response> {
    delete_endpoint(&app, caller.scope, id).await?;
    Ok(envelope(200, "Webhook endpoint deleted.", &EmptyObject {}).into_response())
}

/// `POST /webhooks/{id}/rotate-secret`: a new secret, shown once; the old one also signs for
/// 24 hours, so receivers can switch without losing an event.
#[utoipa::path(post, path = "/webhooks/{id}/rotate-secret", tag = "Webhooks", operation_id = "rotate_webhook_secret",
    summary = "Rotate an endpoint's signing secret",
    description = "The new secret is shown in this answer only; the old one also signs for 24 hours.",
    security(("client_token" = [])), params(("id" = i64, Path, description = "The endpoint's id.")),
    responses((status = 200, description = "The endpoint with its new `secret`.", body = Envelope<EndpointView>), (status = 404, description = "No endpoint of yours in this mode has this id (or the id is not a number).", body = ErrorEnvelope)))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn rotate(State(app): State<App>, caller: Caller, PathParam(id): PathParam<i64>) -> Result<Response> {
    let e = rotate_secret(&app, caller.scope, id).await?;
    Ok(envelope(200, "Secret rotated.", &EndpointView::new(&app, &e, true)).into_response())
}

/// `POST /webhooks/{id}/test`: queues a `same.webhook.test` event to this endpoint.
#[utoipa::path(post, path = "/webhooks/{id}/test", tag = "Webhooks", operation_id = "test_webhook",
    summary = "Send a test event", security(("client_token" = [])), params(("id" = i64, Path, description = "The endpoint's id.")),
    responses(
        (status = 202, description = "The queued `same.webhook.test` delivery.", body = Envelope<DeliveryView>), (status = 404, description = "No endpoint of yours in this mode has this id (or the id is not a number).", body = ErrorEnvelope),
        (status = 409, description = "The endpoint is disabled.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn test(State(app): State<App>, caller: Caller, PathParam(id): PathParam<i64>) -> Result<Response> {
    let d = send_test(&app, caller.scope, id).await?;
    Ok(envelope(202, "Test event queued.", &DeliveryView::new(&d)).into_response())
}

#[derive(Serialize, utoipa::ToSchema)]
struct DeliveryView<'a> {
    id: i64,
    endpoint_id: i64,
    webhook_id: &'a str,
    event: &'a str,
    state: DeliveryStateName,
    attempts: u32,
    next_attempt_at: Option<String>,
    queued_at: Option<String>,
    finished_at: Option<String>,
    last_status: Option<u16>,
    last_error: Option<&'a str>,
    log: Vec<AttemptView<'a>>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(transparent)]
struct DeliveryStateName(&'static str);

#[derive(Serialize, utoipa::ToSchema)]
struct AttemptView<'a> {
    attempt: u32,
    at: &'a str,
    status: Option<u16>,
    latency_ms: i64,
    response: Option<&'a str>,
    error: Option<&'a str>,
}

impl<'a> DeliveryView<'a> {
    fn new(d: &'a StoredDelivery) -> DeliveryView<'a> {
        DeliveryView {
            id: d.id,
            endpoint_id: d.endpoint_id,
            webhook_id: &d.webhook_id,
            event: &d.event,
            state: DeliveryStateName(d.state.as_str()),
            attempts: d.attempts,
            next_attempt_at: if d.state == DeliveryState::Pending { at_ms(d.next_attempt_ms) } else { None },
            queued_at: at_ms(Some(d.queued_ms)),
            finished_at: at_ms(d.finished_ms),
            last_status: d.last_status,
            last_error: d.last_error.as_deref(),
            log: d.log.iter().map(AttemptView::new).collect(),
        }
    }
}

impl<'a> AttemptView<'a> {
    fn new(a: &'a StoredAttempt) -> AttemptView<'a> {
        AttemptView {
            attempt: a.attempt,
            at: &a.at,
            status: a.status,
            latency_ms: a.latency_ms,
            response: a.response.as_deref(),
            error: a.error.as_deref(),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct DeliveryPage<'a> {
    deliveries: Vec<DeliveryView<'a>>,
    next_cursor: Option<String>,
}

/// `GET /webhooks/{id}/deliveries?cursor=&limit=`: newest first, each with its attempts.
#[utoipa::path(get, path = "/webhooks/{id}/deliveries", tag = "Webhooks", operation_id = "list_webhook_deliveries",
    summary = "An endpoint's deliveries, newest first", security(("client_token" = [])),
    params(("id" = i64, Path, description = "The endpoint's id."),
        ("cursor" = Option<String>, Query, description = "A `next_cursor` this API returned; empty or absent for the first page."),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Page size, 1–100 (default 20)."),
    ),
    responses(
        (status = 200, description = "A page of deliveries, each with its attempt log.", body = Envelope<DeliveryPage>), (status = 404, description = "No endpoint of yours in this mode has this id (or the id is not a number).", body = ErrorEnvelope),
        (status = 422, description = "A bad query (`query.<name>`): a limit out of range, a cursor this API did not return, a parameter given twice or unknown.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn deliveries(
    State(app): State<App>,
    caller: Caller,
    PathParam(id): PathParam<i64>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let (before, limit) = page_query(query.as_deref().unwrap_or(""), "d")?;
    let mut list = app.store.deliveries(caller.scope, id, before, limit + 1).await?.ok_or(Error::NotFound)?;
    let more = list.len() > limit;
    list.truncate(limit);
    let next_cursor = if more { list.last().map(|d| cursor("d", d.id)) } else { None };
    let page = DeliveryPage { deliveries: list.iter().map(DeliveryView::new).collect(), next_cursor };
    Ok(envelope(200, "Deliveries.", &page).into_response())
}

/// `POST /webhooks/deliveries/{id}/resend`: the same message (same `webhook-id`) again, as a
/// new delivery at the back of its shipment's stream.
#[utoipa::path(post, path = "/webhooks/deliveries/{id}/resend", tag = "Webhooks", operation_id = "resend_webhook_delivery",
    summary = "Resend a delivery", description = "The same message (same `webhook-id`) again, as a new delivery.",
    security(("client_token" = [])), params(("id" = i64, Path, description = "The delivery's id.")),
    responses(
        (status = 202, description = "The new delivery.", body = Envelope<DeliveryView>),
        (status = 404, description = "No delivery of yours in this mode has this id (or the id is not a number).", body = ErrorEnvelope),
        (status = 409, description = "Its endpoint is disabled.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn resend(State(app): State<App>, caller: Caller, PathParam(id): PathParam<i64>) -> Result<Response> {
    let d = resend_delivery(&app, caller.scope, id).await?;
    Ok(envelope(202, "Delivery queued again.", &DeliveryView::new(&d)).into_response())
}

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;

    /// The create body's schema names exactly the fields the update body has.
    #[test]
    fn create_and_update_bodies_have_the_same_fields() {
        let fields = |schema: serde_json::Value| -> Vec<String> {
            schema["properties"].as_object().unwrap().keys().cloned().collect()
        };
        let create = serde_json::to_value(super::NewEndpointBody::schema()).unwrap();
        let update = serde_json::to_value(super::EndpointBody::schema()).unwrap();
        assert_eq!(fields(create.clone()), fields(update));
        assert_eq!(create["required"], serde_json::json!(["url"]));
    }
}
