//! The admin API (CONTRACT §1, §12): clients, their tokens and operator tokens, guarded by the admin token from the
//! configuration (`DROPSLOT_ADMIN_TOKEN`); absent that setting, every admin route is a 404.

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::error::{EmptyObject, Envelope, Error, ErrorEnvelope, Result, envelope};
use crate::http::{JsonBody, PathParam};
use dropslot_core::ids::ClientId;
use dropslot_store::{Mode, StaffKind, TokenKind};

use super::wire;

/// What every admin operation can answer besides its own: the 404 when no admin token is
/// configured is in each operation's description.
const NO_ADMIN: &str = "When no admin token is configured, every admin route answers 404.";

/// The admin API, under the API prefix.
pub fn routes() -> axum::Router<App> {
    use axum::routing::{delete, post, put};
    axum::Router::new()
        .route(crate::http::api_path!("/admin/clients"), post(create_client))
        .route(crate::http::api_path!("/admin/clients/{id}/settings"), put(put_settings))
        .route(crate::http::api_path!("/admin/clients/{id}/tokens"), post(create_token).get(list_tokens))
        .route(crate::http::api_path!("/admin/tokens/{prefix}"), delete(revoke_token))
        .route(crate::http::api_path!("/admin/operator-tokens"), post(create_operator_token).get(list_operator_tokens))
}

/// Proof that the request carried the configured admin token.
pub struct Admin;

impl FromRequestParts<App> for Admin {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self> {
        let Some(expected) = app.settings.admin_token.as_deref() else { return Err(Error::NotFound) };
        let given = super::bearer(parts)?;
        if super::publishable::is_publishable(given) {
            super::publishable::refuse(parts, app).await?;
        }
        // Compare digests so the comparison time does not depend on the secret's prefix.
        if super::hash(given) == super::hash(expected) { Ok(Admin) } else { Err(Error::Unauthorized) }
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(example = json!({"name": "Acme"}))]
struct NewClient {
    /// 1–200 characters after trimming.
    #[schema(required = true, nullable = false, min_length = 1, max_length = 200, pattern = r"\S")]
    name: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct ClientCreated<'a> {
    id: ClientId,
    name: &'a str,
}

#[utoipa::path(post, path = "/admin/clients", tag = "Admin", operation_id = "create_client",
    summary = "Create a client", description = NO_ADMIN,
    security(("admin_token" = [])), request_body = NewClient,
    responses(
        (status = 201, description = "The client.", body = Envelope<ClientCreated>),
        (status = 404, description = "No admin token is configured.", body = ErrorEnvelope),
        (status = 422, description = "The name is not 1–200 characters (`name`).", body = ErrorEnvelope),
    ))]
async fn create_client(_: Admin, State(app): State<App>, JsonBody(body, _): JsonBody<NewClient>) -> Result<Response> {
    let name = body.name.ok_or_else(|| Error::invalid("name", "The name is required."))?;
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(Error::invalid("name", "The name must be 1 to 200 characters."));
    }
    let id = app.store.create_client(name, app.clock.now()).await?;
    Ok(envelope(201, "Client created.", &ClientCreated { id, name }))
}

/// `PUT /admin/clients/{id}/settings`: a client's negotiated price list and limits (each
/// optional; absent = the configuration's). Validated like the configuration, so a bad value
/// is a 422 here rather than a failing request later.
#[utoipa::path(put, path = "/admin/clients/{id}/settings", tag = "Admin", operation_id = "put_client_settings",
    summary = "Set a client's negotiated terms",
    description = "Price list, limits and rate limits, each optional (absent = the configuration's); validated like the configuration. When no admin token is configured, every admin route answers 404.",
    security(("admin_token" = [])), request_body = super::ClientSettings,
    params(("id" = i64, Path, description = "The client's id.")),
    responses(
        (status = 200, description = "The saved settings.", body = Envelope<super::ClientSettings>),
        (status = 404, description = "No such client (or no admin token is configured).", body = ErrorEnvelope),
        (status = 422, description = "A rule broken, at `pricing`, `limits`, `rate_limits` or an amount's own path.", body = ErrorEnvelope),
    ))]
async fn put_settings(
    _: Admin,
    State(app): State<App>,
    PathParam(client): PathParam<i64>,
    JsonBody(settings, _): JsonBody<super::ClientSettings>,
) -> Result<Response> {
    settings.check()?;
    if !app.store.set_client_settings(ClientId(client), settings.stored()?).await? {
        return Err(Error::NotFound);
    }
    Ok(envelope(200, "Client settings saved.", &settings))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[schema(example = json!({"kind": "publishable", "mode": "test", "origins": ["https://shop.example"]}))]
struct NewToken {
    #[schema(required = true, nullable = false, value_type = wire::TokenKind)]
    kind: Option<String>,
    /// A publishable key's mode, `test` (the default) or `live`; only with `publishable`
    /// (`null` counts as absent).
    #[schema(nullable = true, value_type = Option<String>, pattern = "^(test|live)$")]
    mode: Option<String>,
    /// A publishable key's origins (required with `publishable`, and only there): 1 to 20
    /// `http(s)://host[:port]`, the pages allowed to use the key (`null` counts as absent).
    #[schema(nullable = true, min_items = 1, max_items = 20)]
    origins: Option<Vec<String>>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct TokenCreated {
    /// The token itself: shown only here.
    token: String,
    prefix: String,
    kind: wire::TokenKind,
    /// A publishable key's mode; absent for the other kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    mode: Option<&'static str>,
    /// A publishable key's origins, normalised; absent for the other kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    origins: Option<Vec<String>>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct TokenList {
    tokens: Vec<wire::TokenInfo>,
}

#[utoipa::path(post, path = "/admin/clients/{id}/tokens", tag = "Admin", operation_id = "create_token",
    summary = "Create a token for a client", description = NO_ADMIN,
    security(("admin_token" = [])), request_body = NewToken,
    params(("id" = i64, Path, description = "The client's id.")),
    responses(
        (status = 201, description = "The token, shown this once.", body = Envelope<TokenCreated>),
        (status = 404, description = "No such client (or no admin token is configured).", body = ErrorEnvelope),
        (status = 422, description = "The kind is not test, live, ops or publishable (`kind`); a publishable key's mode or origins are bad or missing (`mode`, `origins`, `origins[i]`), or given with another kind.", body = ErrorEnvelope),
    ))]
async fn create_token(
    _: Admin,
    State(app): State<App>,
    PathParam(client): PathParam<i64>,
    JsonBody(body, _): JsonBody<NewToken>,
) -> Result<Response> {
    let kind = body
        .kind
        .as_deref()
        .ok_or_else(|| Error::invalid("kind", "The kind is required: test, live, ops or publishable."))?;
    if kind == "publishable" {
        return create_publishable_key(&app, ClientId(client), body).await;
    }
    let kind = TokenKind::parse(kind)
        .ok_or_else(|| Error::invalid("kind", "The kind must be one of test, live, ops, publishable."))?;
    if body.mode.is_some() {
        return Err(Error::invalid("mode", "Only a publishable key takes a mode (a token's kind is its mode)."));
    }
    if body.origins.is_some() {
        return Err(Error::invalid("origins", "Only a publishable key takes origins."));
    }
    let client = ClientId(client);
    if !app.store.client_exists(client).await? {
        return Err(Error::NotFound);
    }
    let minted = super::mint(client, kind);
    let prefix = minted.stored.prefix.clone();
    app.store.insert_token(minted.stored, app.clock.now()).await?;
    Ok(envelope(
        201,
        "Token created. It is shown only once.",
        &TokenCreated { token: minted.secret, prefix, kind: kind.into(), mode: None, origins: None },
    ))
}

/// A publishable key's mode and origins as given, checked (`dropslot_core::origin`).
pub fn publishable_terms(mode: Option<&str>, origins: &[String]) -> Result<(Mode, Vec<String>)> {
    let mode = match mode {
        None => Mode::Test,
        Some(m) => Mode::parse(m).ok_or_else(|| Error::invalid("mode", "The mode must be test or live."))?,
    };
    let origins = dropslot_core::origin::normalise_all(origins).map_err(|(at, message)| match at {
        Some(i) => Error::invalid(format!("origins[{i}]"), message),
        None => Error::invalid("origins", message),
    })?;
    Ok((mode, origins))
}

async fn create_publishable_key(app: &App, client: ClientId, body: NewToken) -> Result<Response> {
    let (mode, origins) = publishable_terms(body.mode.as_deref(), body.origins.as_deref().unwrap_or_default())?;
    if !app.store.client_exists(client).await? {
        return Err(Error::NotFound);
    }
    let minted = super::publishable::mint(client, mode, origins.clone());
    let prefix = minted.stored.prefix.clone();
    app.store.insert_publishable_key(minted.stored, app.clock.now()).await?;
    let created = TokenCreated {
        token: minted.key,
        prefix,
        kind: wire::TokenKind::Publishable,
        mode: Some(mode.as_str()),
        origins: Some(origins),
    };
    Ok(envelope(201, "Publishable key created. It is shown only once; it may go in your web pages.", &created))
}

#[utoipa::path(get, path = "/admin/clients/{id}/tokens", tag = "Admin", operation_id = "list_tokens",
    summary = "List a client's tokens", description = NO_ADMIN,
    security(("admin_token" = [])), params(("id" = i64, Path, description = "The client's id.")),
    responses(
        (status = 200, description = "Prefixes and last 4 characters; never a token.", body = Envelope<TokenList>),
        (status = 404, description = "No such client (or no admin token is configured).", body = ErrorEnvelope),
    ))]
async fn list_tokens(_: Admin, State(app): State<App>, PathParam(client): PathParam<i64>) -> Result<Response> {
    let client = ClientId(client);
    if !app.store.client_exists(client).await? {
        return Err(Error::NotFound);
    }
    let mut tokens: Vec<wire::TokenInfo> =
        app.store.list_tokens(client).await?.into_iter().map(wire::TokenInfo::from).collect();
    tokens.extend(app.store.list_publishable_keys(client).await?.into_iter().map(wire::TokenInfo::from));
    Ok(envelope(200, "Tokens listed.", &TokenList { tokens }))
}

#[utoipa::path(delete, path = "/admin/tokens/{prefix}", tag = "Admin", operation_id = "revoke_token",
    summary = "Revoke a token by its prefix",
    description = "Any token: a client's (`ds_test_…`, `ds_live_…`, `ds_ops_…`, `pk_test_…`, `pk_live_…`) or a staff token (`ds_operator_…`, `ds_driver_…`). When no admin token is configured, every admin route answers 404.",
    security(("admin_token" = [])), params(("prefix" = String, Path, description = "The token's prefix (as listed).")),
    responses(
        (status = 200, description = "Revoked; `object` is `{}`.", body = Envelope<EmptyObject>),
        (status = 404, description = "No active token has this prefix (or no admin token is configured).", body = ErrorEnvelope),
    ))]
async fn revoke_token(_: Admin, State(app): State<App>, PathParam(prefix): PathParam<String>) -> Result<Response> {
    let now = app.clock.now();
    let revoked = if super::staff::is_staff(&prefix) {
        app.store.revoke_staff_token(&prefix, now).await?
    } else if super::publishable::is_publishable(&prefix) {
        app.store.revoke_publishable_key(&prefix, now).await?
    } else {
        app.store.revoke_token(&prefix, now).await?
    };
    if revoked { Ok(envelope(200, "Token revoked.", &EmptyObject {})) } else { Err(Error::NotFound) }
}

#[derive(Serialize, utoipa::ToSchema)]
struct OperatorTokenCreated {
    /// The token itself: shown only here.
    token: String,
    prefix: String,
    kind: wire::StaffKind,
}

#[derive(Serialize, utoipa::ToSchema)]
struct StaffTokenList {
    tokens: Vec<wire::StaffTokenInfo>,
}

/// `POST /admin/operator-tokens`: an operator token (CONTRACT §12), bound to no client.
#[utoipa::path(post, path = "/admin/operator-tokens", tag = "Admin", operation_id = "create_operator_token",
    summary = "Create an operator token",
    description = "An `operator` token for the courier's dispatchers: bound to no client, it reaches the fleet (`/ops/drivers`) and nothing of the client API. No body is needed; one sent is ignored. When no admin token is configured, every admin route answers 404.",
    security(("admin_token" = [])),
    responses(
        (status = 201, description = "The token, shown this once.", body = Envelope<OperatorTokenCreated>),
        (status = 404, description = "No admin token is configured.", body = ErrorEnvelope),
    ))]
async fn create_operator_token(_: Admin, State(app): State<App>) -> Result<Response> {
    let minted = super::staff::mint(StaffKind::Operator);
    let prefix = minted.stored.prefix.clone();
    app.store.insert_operator_token(minted.stored, app.clock.now()).await?;
    let created = OperatorTokenCreated { token: minted.secret, prefix, kind: StaffKind::Operator.into() };
    Ok(envelope(201, "Operator token created. It is shown only once.", &created))
}

#[utoipa::path(get, path = "/admin/operator-tokens", tag = "Admin", operation_id = "list_operator_tokens",
    summary = "List the operator tokens", description = NO_ADMIN,
    security(("admin_token" = [])),
    responses(
        (status = 200, description = "Prefixes and last 4 characters; never a token.", body = Envelope<StaffTokenList>),
        (status = 404, description = "No admin token is configured.", body = ErrorEnvelope),
    ))]
async fn list_operator_tokens(_: Admin, State(app): State<App>) -> Result<Response> {
    let tokens =
        app.store.list_staff_tokens(StaffKind::Operator).await?.into_iter().map(wire::StaffTokenInfo::from).collect();
    Ok(envelope(200, "Operator tokens listed.", &StaffTokenList { tokens }))
}
