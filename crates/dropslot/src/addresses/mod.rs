//! Saved pick-up addresses (CONTRACT §3.4): saved by order creation, matched by preview,
//! listed, shown and deleted here, referenced in requests by `saved_address_id`. The import
//! of address points (CONTRACT §11) is `import`.

pub mod import;

use axum::extract::State;
use axum::response::Response;
use serde::Serialize;

use crate::app::App;
use crate::auth::Caller;
use crate::error::{EmptyObject, Envelope, Error, ErrorEnvelope, Result, envelope};
use crate::http::PathParam;
use dropslot_core::ids::SavedAddressId;

/// The saved-address endpoints, under the API prefix.
pub fn routes() -> axum::Router<App> {
    use axum::routing::get;
    axum::Router::new()
        .route(crate::http::api_path!("/saved-addresses"), get(list))
        .route(crate::http::api_path!("/saved-addresses/{id}"), get(show).delete(remove))
}

// A saved pick-up address as the API shows it (no doc comment: it would become the schema's
// description, which the published document does not have).
#[derive(Serialize, utoipa::ToSchema)]
struct SavedAddress {
    id: SavedAddressId,
    text: String,
    use_count: i64,
    created_at: String,
    last_used_at: String,
}

impl From<dropslot_store::SavedAddress> for SavedAddress {
    fn from(a: dropslot_store::SavedAddress) -> Self {
        SavedAddress {
            id: a.id,
            text: a.text,
            use_count: a.use_count,
            created_at: a.created_at,
            last_used_at: a.last_used_at,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct SavedAddressList {
    /// Most recently used first.
    saved_addresses: Vec<SavedAddress>,
}

#[utoipa::path(get, path = "/saved-addresses", tag = "Saved addresses", operation_id = "list_saved_addresses",
    summary = "List saved pick-up addresses",
    security(("client_token" = [])),
    responses((status = 200, description = "Most recently used first.", body = Envelope<SavedAddressList>)))]
async fn list(State(app): State<App>, caller: Caller) -> Result<Response> {
    let saved_addresses =
        app.store.list_saved_addresses(caller.scope).await?.into_iter().map(SavedAddress::from).collect();
    Ok(envelope(200, "Saved addresses listed.", &SavedAddressList { saved_addresses }))
}

#[utoipa::path(get, path = "/saved-addresses/{id}", tag = "Saved addresses", operation_id = "get_saved_address",
    summary = "Read a saved pick-up address",
    security(("client_token" = [])), params(("id" = i64, Path, description = "The saved address's id.")),
    responses(
        (status = 200, description = "The saved address.", body = Envelope<SavedAddress>),
        (status = 404, description = "No saved address of yours (in this mode) has this id, or the id is not a number.", body = ErrorEnvelope),
    ))]
async fn show(State(app): State<App>, caller: Caller, PathParam(id): PathParam<i64>) -> Result<Response> {
    let address = app.store.saved_address(caller.scope, SavedAddressId(id)).await?.ok_or(Error::NotFound)?;
    Ok(envelope(200, "Saved address found.", &SavedAddress::from(address)))
}

#[utoipa::path(delete, path = "/saved-addresses/{id}", tag = "Saved addresses", operation_id = "delete_saved_address",
    summary = "Delete a saved pick-up address",
    description = "Existing orders keep their pick-ups.",
    security(("client_token" = [])), params(("id" = i64, Path, description = "The saved address's id.")),
    responses(
        (status = 200, description = "Deleted; `object` is `{}`.", body = Envelope<EmptyObject>),
        (status = 404, description = "No saved address of yours (in this mode) has this id, or the id is not a number.", body = ErrorEnvelope),
    ))]
async fn remove(State(app): State<App>, caller: Caller, PathParam(id): PathParam<i64>) -> Result<Response> {
    if app.store.delete_saved_address(caller.scope, SavedAddressId(id)).await? {
        Ok(envelope(200, "Saved address deleted.", &EmptyObject {}))
    } else {
        Err(Error::NotFound)
    }
}
