//! Saved pick-up addresses (CONTRACT §3.4): saved by order creation, matched by preview,
//! listed, shown and deleted here, referenced in requests by `saved_address_id`.

use axum::extract::State;
use axum::response::Response;
use serde_json::json;

use crate::app::App;
use crate::auth::Caller;
use crate::error::{EmptyObject, Error, Result};
use crate::http::{PathParam, envelope};
use crate::ids::SavedAddressId;

/// The saved-address endpoints, under the API prefix.
pub fn routes() -> axum::Router<App> {
    use axum::routing::get;
    axum::Router::new().route("/saved-addresses", get(list)).route("/saved-addresses/{id}", get(show).delete(remove))
}

async fn list(State(app): State<App>, caller: Caller) -> Result<Response> {
    let addresses = app.store.list_saved_addresses(caller.scope).await?;
    Ok(envelope(200, "Saved addresses listed.", &json!({ "saved_addresses": addresses })))
}

async fn show(State(app): State<App>, caller: Caller, PathParam(id): PathParam<i64>) -> Result<Response> {
    let address = app.store.saved_address(caller.scope, SavedAddressId(id)).await?.ok_or(Error::NotFound)?;
    Ok(envelope(200, "Saved address found.", &address))
}

async fn remove(State(app): State<App>, caller: Caller, PathParam(id): PathParam<i64>) -> Result<Response> {
    if app.store.delete_saved_address(caller.scope, SavedAddressId(id)).await? {
        Ok(envelope(200, "Saved address deleted.", &EmptyObject {}))
    } else {
        Err(Error::NotFound)
    }
}
