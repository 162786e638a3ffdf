//! When a delivery fails (CONTRACT §15, docs/api.md "Failed deliveries"): the client's attempts
//! policy, and the merchant's decisions — another slot, a return, a cancellation. The rules are
//! the core's (`dropslot_core::attempts`); each decision is one store transaction with its
//! events. The recipient's change page is in `crate::tracking`.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::app::App;
use crate::auth::Caller;
use crate::error::{Envelope, Error, ErrorEnvelope, FieldErrors, Result, envelope};
use crate::http::{JsonBody, PathParam};
use crate::orders::view::ShipmentView;
use dropslot_core::attempts::{self, Changer, Policy};
use dropslot_core::quote::schedule::AskedProblem;
use dropslot_store::{ChangeOutcome, ChangeTarget, DeliveryChange, StoredShipment, Visibility};

pub fn routes() -> axum::Router<App> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route(crate::http::api_path!("/attempts/settings"), get(read_settings).put(write_settings))
        .route(crate::http::api_path!("/shipments/{unique_id}/reschedule"), post(reschedule))
        .route(crate::http::api_path!("/shipments/{unique_id}/return"), post(send_back))
        .route(crate::http::api_path!("/shipments/{unique_id}/cancel"), post(cancel))
}

/// The client's policy in the token's mode, or the configured defaults.
pub async fn policy(app: &App, scope: dropslot_store::Scope) -> Result<Policy> {
    Ok(app.store.attempt_policy(scope).await?.unwrap_or(app.settings.attempts))
}

/// `GET /attempts/settings`.
#[utoipa::path(get, path = "/attempts/settings", tag = "Failed deliveries", operation_id = "get_attempt_settings",
    summary = "Read the attempts policy",
    description = "What follows a failed delivery attempt for this client in the token's mode (test and live each have their own): `reattempt` books the next slot with room from the next operating day, `return` sends the parcel back to the pick-up address, `hold` leaves the decision to you. Without a policy of its own a client has the service's defaults.",
    security(("client_token" = [])),
    responses((status = 200, description = "The policy in force.", body = Envelope<Policy>)))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
pub(crate) async fn read_settings(State(app): State<App>, caller: Caller) -> Result<Response> {
    let p = policy(&app, caller.scope).await?;
    Ok(envelope(200, "Attempts policy.", &p).into_response())
}

/// `PUT /attempts/settings`: replaces the policy whole.
#[utoipa::path(put, path = "/attempts/settings", tag = "Failed deliveries", operation_id = "put_attempt_settings",
    summary = "Replace the attempts policy", security(("client_token" = [])), request_body = Policy,
    description = "Takes effect at the next failure: the policy in force when an attempt fails decides what follows it (and is written to the shipment as its `max_attempts`).",
    responses(
        (status = 200, description = "The policy now.", body = Envelope<Policy>),
        (status = 400, description = "Not JSON, an unknown field, an unknown `after_failure`.", body = ErrorEnvelope),
        (status = 422, description = "`max_attempts` or `max_return_attempts` outside 1–10.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
pub(crate) async fn write_settings(
    State(app): State<App>,
    caller: Caller,
    JsonBody(body, _): JsonBody<Policy>,
) -> Result<Response> {
    let mut errors = FieldErrors::new();
    for (path, message) in body.problems() {
        errors.add(path, message);
    }
    errors.into_result()?;
    app.store.set_attempt_policy(caller.scope, body, app.clock.now()).await?;
    Ok(envelope(200, "Attempts policy saved.", &body).into_response())
}

/// `POST /shipments/{unique_id}/reschedule`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"scheduled_date": "2026-11-24", "time_slot_code": "TOR-DT-PM"}))]
pub struct RescheduleRequest {
    /// `YYYY-MM-DD`, in the drop-off city.
    #[schema(format = Date)]
    pub scheduled_date: String,
    /// A drop-off slot of the shipment's zone (`GET /slots` lists them with what is left).
    pub time_slot_code: String,
}

/// The shipment of the caller, or 404.
async fn mine(app: &App, caller: &Caller, unique_id: &str) -> Result<StoredShipment> {
    app.store.shipment(Visibility::Tenant(caller.scope), unique_id).await?.ok_or(Error::NotFound)
}

#[utoipa::path(post, path = "/shipments/{unique_id}/reschedule", tag = "Failed deliveries", operation_id = "reschedule_shipment",
    summary = "Move a delivery to another slot",
    description = "While the shipment is `scheduled`, `to_pick_up`, `picked_up`, `processing`, `failed` or `to_attempt`. The new slot takes a place (capacity, as when ordering) and the old one's is given back, unless its attempt was made (`failed`); a `failed` shipment goes `to_attempt` (attempts must be left). Emits `same.shipment.rescheduled` with `changed_by: merchant`. One transaction: if the recipient changes it at the same moment, one of you wins and the other gets a 409.",
    security(("client_token" = [])), request_body = RescheduleRequest,
    params(("unique_id" = String, Path, description = "The drop-off shipment's `unique_id` (tracking code).")),
    responses(
        (status = 200, description = "Rescheduled: the shipment as it is now.", body = Envelope<ShipmentView>),
        (status = 404, description = "No shipment of yours has this id.", body = ErrorEnvelope),
        (status = 409, description = "Its status no longer allows it, no attempts are left, or it was changed meanwhile (the message says which).", body = ErrorEnvelope),
        (status = 422, description = "`scheduled_date` not a date; `time_slot_code` unknown for the zone, closed, past, beyond the horizon, before the pick-up, or full.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
pub(crate) async fn reschedule(
    State(app): State<App>,
    caller: Caller,
    PathParam(unique_id): PathParam<String>,
    JsonBody(body, _): JsonBody<RescheduleRequest>,
) -> Result<Response> {
    let date: jiff::civil::Date =
        body.scheduled_date.parse().map_err(|_| Error::invalid("scheduled_date", "Use a date as YYYY-MM-DD."))?;
    let s = mine(&app, &caller, &unique_id).await?;
    if !attempts::slot_change_open(s.drop_off.status) {
        return Err(Error::Conflict(attempts::closed_because(s.drop_off.status)));
    }
    let offer = offer_for(&app, &s, date, body.time_slot_code.trim())?
        .map_err(|why| Error::invalid("time_slot_code", crate::orders::asked_problem(why)))?;
    let change = DeliveryChange {
        slot: Some(offer),
        instruction: None,
        expect: Some((s.drop_off.scheduled_date.clone(), s.drop_off.slot_code.clone())),
    };
    let target = ChangeTarget::Tenant(caller.scope, unique_id);
    let outcome = app.store.change_delivery(target, change, Changer::Merchant, app.clock.now()).await?;
    // CONTRACT §16: moved to a published day, it goes into a route not started yet.
    if caller.scope.mode == dropslot_store::Mode::Live {
        crate::plans::late::after_booking(&app, [(s.drop_off.zone_code.as_str(), date)]).await;
    }
    answer(&app, outcome, "Shipment rescheduled.")
}

/// The slot a change asks for, if it can be booked at all (room is the store's to decide): a
/// slot of the shipment's zone, open now, not before the pick-up while the parcel is not
/// picked up (the core's rules, `attempts::asked_offer`).
pub fn offer_for(
    app: &App,
    s: &StoredShipment,
    date: jiff::civil::Date,
    slot: &str,
) -> Result<std::result::Result<attempts::Offer, AskedProblem>> {
    let area = &app.settings.area;
    Ok(attempts::asked_offer(area, &s.drop_off.zone_code, date, slot, not_before(s)?, app.clock.now()))
}

/// The earliest date a delivery can move to (the core's rule: the pick-up's while the parcel is
/// not picked up).
pub fn not_before(s: &StoredShipment) -> Result<jiff::civil::Date> {
    Ok(attempts::not_before(s.drop_off.status, stored_date(&s.pick_up.scheduled_date)?))
}

/// A date as a shipment stores it; one that does not parse is corrupt, never a default.
pub fn stored_date(text: &str) -> Result<jiff::civil::Date> {
    text.parse().map_err(|e| Error::Internal(format!("a stored date {text:?}: {e}")))
}

/// The slots a change may take now (the change page's and the dashboard's choices): the
/// zone's, with room by the §10 fill and overrides of the shipment's mode (the slot it holds
/// kept), not before the pick-up while the parcel waits for it.
pub async fn offered(app: &App, mode: dropslot_store::Mode, s: &StoredShipment) -> Result<Vec<attempts::Offered>> {
    let (d, now) = (&s.drop_off, app.clock.now());
    let offers = attempts::change_offers(&app.settings.area, &d.zone_code, not_before(s)?, now);
    let capacity = crate::capacity::snapshot(app, mode, now).await?;
    let held = (stored_date(&d.scheduled_date)?, d.slot_code.as_str());
    let parcels = u32::try_from(s.parcels.len()).unwrap_or(u32::MAX);
    let want = attempts::want(dropslot_core::quote::capacity::SlotKind::DropOff, parcels);
    Ok(attempts::with_room(offers, &capacity, want, held))
}

#[utoipa::path(post, path = "/shipments/{unique_id}/return", tag = "Failed deliveries", operation_id = "return_shipment",
    summary = "Send a failed delivery back",
    description = "From `failed` or `to_attempt`: `return_scheduled`, booked as a return stop at the order's pick-up address in the city's next pick-up slot with room (a booked re-attempt gives its place back). No body is needed; one sent is ignored.",
    security(("client_token" = [])),
    params(("unique_id" = String, Path, description = "The drop-off shipment's `unique_id` (tracking code).")),
    responses(
        (status = 200, description = "Return booked: the shipment as it is now.", body = Envelope<ShipmentView>),
        (status = 404, description = "No shipment of yours has this id.", body = ErrorEnvelope),
        (status = 409, description = "Its status does not allow a return, or no pick-up slot has room within the booking horizon.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
pub(crate) async fn send_back(
    State(app): State<App>,
    caller: Caller,
    PathParam(unique_id): PathParam<String>,
) -> Result<Response> {
    let outcome = app.store.return_to_sender(caller.scope, &unique_id, app.clock.now()).await?;
    answer(&app, outcome, "Return booked.")
}

#[utoipa::path(post, path = "/shipments/{unique_id}/cancel", tag = "Failed deliveries", operation_id = "cancel_shipment",
    summary = "Cancel a failed delivery or a return",
    description = "From `failed` or `return_scheduled`: `cancelled` (final); a booked return gives its place back. No body is needed; one sent is ignored.",
    security(("client_token" = [])),
    params(("unique_id" = String, Path, description = "The drop-off shipment's `unique_id` (tracking code).")),
    responses(
        (status = 200, description = "Cancelled: the shipment as it is now.", body = Envelope<ShipmentView>),
        (status = 404, description = "No shipment of yours has this id.", body = ErrorEnvelope),
        (status = 409, description = "Its status does not allow a cancellation.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
pub(crate) async fn cancel(
    State(app): State<App>,
    caller: Caller,
    PathParam(unique_id): PathParam<String>,
) -> Result<Response> {
    let outcome = app.store.cancel_shipment(caller.scope, &unique_id, app.clock.now()).await?;
    answer(&app, outcome, "Shipment cancelled.")
}

/// Why a change was not made, in the integrator's words (`None` when it was).
pub fn refusal(outcome: &ChangeOutcome) -> Option<Error> {
    Some(match outcome {
        ChangeOutcome::Changed(_) => return None,
        ChangeOutcome::NotFound => Error::NotFound,
        ChangeOutcome::Closed(status) => Error::Conflict(attempts::closed_because(*status)),
        ChangeOutcome::Refused(r) => Error::Conflict(r.to_string()),
        ChangeOutcome::Full => Error::invalid("time_slot_code", crate::orders::asked_problem(AskedProblem::Full)),
        ChangeOutcome::NoRoom => Error::Conflict(
            "No pick-up slot of the order's city has room for the return within the booking horizon.".into(),
        ),
        ChangeOutcome::Stale(date, slot) => Error::Conflict(format!(
            "The delivery was changed meanwhile (it is now on {date}, slot {slot}): read it again before changing it."
        )),
    })
}

fn answer(app: &App, outcome: ChangeOutcome, message: &str) -> Result<Response> {
    if let Some(e) = refusal(&outcome) {
        return Err(e);
    }
    let ChangeOutcome::Changed(stored) = outcome else { return Err(Error::NotFound) };
    // The fill moved: the next quote reads it anew.
    crate::capacity::forget(app);
    let view = ShipmentView::new(&app.settings.base_url, &app.settings.area, *stored);
    Ok(envelope(200, message, &view).into_response())
}
