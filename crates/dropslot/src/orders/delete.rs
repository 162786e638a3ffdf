//! `DELETE /parcels/find/by-custom-code/{custom_code}` (CONTRACT §4): deletes a parcel while
//! its shipment awaits pick-up, re-prices the shipment, and deletes it with its last parcel.

use axum::extract::State;
use axum::response::Response;

use crate::app::App;
use crate::auth::Caller;
use crate::error::{EmptyObject, Error, Result};
use crate::http::{PathParam, envelope};
use crate::ids::CustomCode;
use crate::store::{DeleteOutcome, Scope};

#[tracing::instrument(skip_all, err(level = "debug"))]
pub(super) async fn handle(
    State(app): State<App>,
    caller: Caller,
    PathParam(code): PathParam<String>,
) -> Result<Response> {
    let code = CustomCode::parse(&code).ok_or_else(|| Error::invalid("path.custom_code", CustomCode::RULE))?;
    let message = delete_parcel(&app, caller.scope, &code).await?;
    Ok(envelope(200, message, &EmptyObject {}))
}

/// Deletes the live parcel with this custom code while its shipment awaits pick-up; the
/// answer's message says whether its shipment went with it (the API and the dashboard).
pub async fn delete_parcel(app: &App, scope: Scope, code: &CustomCode) -> Result<&'static str> {
    match app.store.delete_parcel_by_custom_code(scope, code, app.clock.now()).await? {
        DeleteOutcome::NotFound => Err(Error::NotFound),
        DeleteOutcome::TooLate(status) => Err(Error::Conflict(format!(
            "The parcel can no longer be deleted: its shipment is {status}. Parcels can be deleted until pick-up."
        ))),
        DeleteOutcome::Deleted { shipment_deleted } => Ok(if shipment_deleted {
            "Parcel deleted; it was the last one, so its shipment is deleted too."
        } else {
            "Parcel deleted."
        }),
    }
}
