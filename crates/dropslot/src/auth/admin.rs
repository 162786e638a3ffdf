//! The admin API (CONTRACT §1): clients and tokens, guarded by the admin token from the
//! configuration (`DROPSLOT_ADMIN_TOKEN`); absent that setting, every admin route is a 404.

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use crate::app::App;
use crate::error::{Error, Result};
use crate::http::{JsonBody, PathParam, envelope};
use crate::ids::ClientId;
use crate::store::TokenKind;

/// The admin API, under the API prefix.
pub fn routes() -> axum::Router<App> {
    use axum::routing::{delete, post, put};
    axum::Router::new()
        .route("/admin/clients", post(create_client))
        .route("/admin/clients/{id}/settings", put(put_settings))
        .route("/admin/clients/{id}/tokens", post(create_token).get(list_tokens))
        .route("/admin/tokens/{prefix}", delete(revoke_token))
}

/// Proof that the request carried the configured admin token.
pub struct Admin;

impl FromRequestParts<App> for Admin {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self> {
        let Some(expected) = app.settings.admin_token.as_deref() else { return Err(Error::NotFound) };
        let given = super::bearer(parts)?;
        // Compare digests so the comparison time does not depend on the secret's prefix.
        if super::hash(given) == super::hash(expected) { Ok(Admin) } else { Err(Error::Unauthorized) }
    }
}

#[derive(Deserialize)]
struct NewClient {
    name: Option<String>,
}

async fn create_client(_: Admin, State(app): State<App>, JsonBody(body, _): JsonBody<NewClient>) -> Result<Response> {
    let name = body.name.unwrap_or_default();
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(Error::invalid("name", "The name must be 1 to 200 characters."));
    }
    let id = app.store.create_client(name, app.clock.now()).await?;
    Ok(envelope(201, "Client created.", &json!({"id": id, "name": name})))
}

/// `PUT /admin/clients/{id}/settings`: a client's negotiated price list and limits (each
/// optional; absent = the configuration's). Validated like the configuration, so a bad value
/// is a 422 here rather than a failing request later.
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

#[derive(Deserialize)]
struct NewToken {
    kind: Option<String>,
}

async fn create_token(
    _: Admin,
    State(app): State<App>,
    PathParam(client): PathParam<i64>,
    JsonBody(body, _): JsonBody<NewToken>,
) -> Result<Response> {
    let kind = body
        .kind
        .as_deref()
        .and_then(TokenKind::parse)
        .ok_or_else(|| Error::invalid("kind", "The kind must be one of test, live, ops."))?;
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
        &json!({"token": minted.secret, "prefix": prefix, "kind": kind}),
    ))
}

async fn list_tokens(_: Admin, State(app): State<App>, PathParam(client): PathParam<i64>) -> Result<Response> {
    let client = ClientId(client);
    if !app.store.client_exists(client).await? {
        return Err(Error::NotFound);
    }
    let tokens = app.store.list_tokens(client).await?;
    Ok(envelope(200, "Tokens listed.", &json!({"tokens": tokens})))
}

async fn revoke_token(_: Admin, State(app): State<App>, PathParam(prefix): PathParam<String>) -> Result<Response> {
    if app.store.revoke_token(&prefix, app.clock.now()).await? {
        Ok(envelope(200, "Token revoked.", &json!({})))
    } else {
        Err(Error::NotFound)
    }
}
