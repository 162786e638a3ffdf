//! `DELETE /parcels/find/by-custom-code/{custom_code}` (CONTRACT §4): deletes a parcel while
//! its shipment awaits pick-up, re-prices the shipment, and deletes it with its last parcel.

use axum::extract::State;
use axum::response::Response;

use crate::app::App;
use crate::auth::Caller;
use crate::error::{EmptyObject, Envelope, Error, ErrorEnvelope, Result, envelope};
use crate::http::PathParam;
use dropslot_core::ids::CustomCode;
use dropslot_store::{DeleteOutcome, Scope};

#[utoipa::path(delete, path = "/parcels/find/by-custom-code/{custom_code}", tag = "Orders", operation_id = "delete_parcel",
    summary = "Delete a parcel by its custom code",
    description = "Allowed while its shipment is `scheduled` or `to_pick_up`. The shipment is re-priced; deleting its last parcel deletes the shipment too (the message says so).",
    security(("client_token" = [])), params(("custom_code" = String, Path, pattern = "^[A-Za-z0-9]{16,20}$", description = "The parcel's custom code: 16–20 letters or digits (else 422 at `path.custom_code`).")),
    responses(
        (status = 200, description = "Deleted; `object` is `{}`.", body = Envelope<EmptyObject>),
        (status = 404, description = "No live parcel of yours has this custom code.", body = ErrorEnvelope),
        (status = 409, description = "Its shipment is past `to_pick_up`: too late to delete.", body = ErrorEnvelope),
        (status = 422, description = "The code is not 16–20 letters or digits (`path.custom_code`).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
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
        DeleteOutcome::Deleted { shipment_deleted } => {
            // Its places are free again: the next quotes read the capacity anew.
            crate::capacity::forget(app);
            Ok(if shipment_deleted {
                "Parcel deleted; it was the last one, so its shipment is deleted too."
            } else {
                "Parcel deleted."
            })
        }
    }
}
