//! The operations API (CONTRACT §6): the courier's own staff record the real progress of
//! live shipments of every client, through the same state machine as everything else.

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::app::App;
use crate::auth::{bearer, hash};
use crate::error::{Envelope, Error, ErrorEnvelope, FieldErrors, Result, envelope};
use crate::http::{JsonBody, PathParam};
use crate::orders::view::ShipmentView;
use dropslot_core::shipments::{self, Actor, Move, Proof, Refusal, Status};
use dropslot_store::{MoveOutcome, StoredShipment, TokenKind, Visibility};

/// Longest reason or proof value, in characters.
const MAX_TEXT: usize = 500;
const MAX_PROOFS: usize = 10;

pub fn routes() -> axum::Router<App> {
    use axum::routing::post;
    axum::Router::new()
        .route(crate::http::api_path!("/ops/shipments/{unique_id}/transitions"), post(transition))
        .route(crate::http::api_path!("/ops/parcels/{pick_up_code}/pick-up-scan"), post(scan))
}

/// A caller holding an `ops` token; any other token (an operator or driver token too) is a
/// 403. The fleet's routes take operator tokens instead (`auth::staff::OperatorCaller`).
pub struct OpsCaller;

impl FromRequestParts<App> for OpsCaller {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self> {
        crate::auth::publishable::refuse(parts, app).await?;
        if crate::auth::staff::principal(parts, app).await?.is_some() {
            return Err(Error::Forbidden("The operations API takes ops tokens only."));
        }
        let token = hash(bearer(parts)?);
        let principal = app.store.principal(&token).await?.ok_or(Error::Unauthorized)?;
        if principal.kind == TokenKind::Ops {
            crate::auth::limit(parts, app, &app.settings.rate_limits, &token)?;
            Ok(OpsCaller)
        } else {
            Err(Error::Forbidden("The operations API takes ops tokens only."))
        }
    }
}

/// One move of a live shipment through the CONTRACT §4 table.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"to": "delivered", "proof_of_delivery": [{"type": "signature", "value": "sig/123.png"}]}))]
pub struct TransitionRequest {
    /// The target status.
    #[schema(value_type = Status)]
    to: String,
    /// Free text, at most 500 characters; required for `failed`.
    #[serde(default)]
    reason: Option<String>,
    /// Required for `delivered`; allowed there and on `returned` (who took the parcels back,
    /// which the driver API requires); at most 10.
    #[serde(default)]
    #[schema(max_items = 10)]
    proof_of_delivery: Option<Vec<Proof>>,
}

impl TransitionRequest {
    /// The move, checked at the door: a known status, bounded texts, a proof for
    /// `delivered` and a reason for `failed`.
    pub(crate) fn into_move(self) -> Result<Move> {
        let mut errors = FieldErrors::new();
        let to = Status::parse(&self.to);
        if to.is_none() {
            let all: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
            errors.add("to", format!("Unknown status; one of: {}.", all.join(", ")));
        }
        let reason = self.reason.map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
        if reason.as_ref().is_some_and(|r| r.chars().count() > MAX_TEXT) {
            errors.add("reason", format!("The reason must be at most {MAX_TEXT} characters."));
        }
        let proof = self.proof_of_delivery.unwrap_or_default();
        if proof.len() > MAX_PROOFS {
            errors.add("proof_of_delivery", format!("At most {MAX_PROOFS} proofs."));
        }
        for (i, p) in proof.iter().enumerate() {
            let n = p.value.trim().chars().count();
            if n == 0 || n > MAX_TEXT {
                errors.add(
                    format!("proof_of_delivery.{i}.value"),
                    format!("The value must be 1 to {MAX_TEXT} characters."),
                );
            }
        }
        if to == Some(Status::Delivered) && proof.is_empty() {
            errors.add("proof_of_delivery", "A delivery needs a proof: a receiver_name, signature or photo.");
        }
        if to == Some(Status::Failed) && reason.is_none() {
            errors.add("reason", "A failed delivery needs a reason.");
        }
        if !to.is_some_and(shipments::carries_proof) && !proof.is_empty() {
            errors.add(
                "proof_of_delivery",
                "Only a delivery (or a return handed back, `returned`) carries a proof of delivery.",
            );
        }
        errors.into_result()?;
        Ok(Move { to: to.unwrap_or(Status::Scheduled), actor: Actor::Ops, reason, proof })
    }
}

/// `POST /ops/shipments/{unique_id}/transitions`.
#[utoipa::path(post, path = "/ops/shipments/{unique_id}/transitions", tag = "Operations", operation_id = "move_shipment",
    summary = "Record a live shipment's progress",
    description = "One move per request through the transition table (`GET /shipment-states`), for the live shipments of every client.",
    security(("ops_token" = [])), request_body = TransitionRequest,
    params(("unique_id" = String, Path, description = "The drop-off shipment's `unique_id` (tracking code).")),
    responses(
        (status = 200, description = "Moved: the shipment as a client reads it.", body = Envelope<ShipmentView>),
        (status = 404, description = "No live drop-off shipment has this id (test shipments are the sandbox's).", body = ErrorEnvelope),
        (status = 409, description = "The table forbids this move (the message names the allowed next states).", body = ErrorEnvelope),
        (status = 422, description = "An unknown status, a reason or proof rule broken (at `to`, `reason`, `proof_of_delivery`).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn transition(
    State(app): State<App>,
    _ops: OpsCaller,
    PathParam(unique_id): PathParam<String>,
    JsonBody(request, _): JsonBody<TransitionRequest>,
) -> Result<Response> {
    let m = request.into_move()?;
    let outcome = app.store.ops_move(&unique_id, m, app.clock.now()).await?;
    shown(&app, outcome)
}

/// `POST /ops/parcels/{pick_up_code}/pick-up-scan`: the driver scanned the parcel at the
/// pick-up address; its shipment (and the pick-up leg) is picked up.
#[utoipa::path(post, path = "/ops/parcels/{pick_up_code}/pick-up-scan", tag = "Operations", operation_id = "pick_up_scan",
    summary = "Scan a parcel at pick-up",
    description = "Its drop-off shipment becomes `picked_up` (from `scheduled` through `to_pick_up`). No body is needed; one sent is ignored.",
    security(("ops_token" = [])),
    params(("pick_up_code" = String, Path, description = "The parcel's `pick_up_code`.")),
    responses(
        (status = 200, description = "Moved: the shipment as a client reads it.", body = Envelope<ShipmentView>),
        (status = 404, description = "No live, undeleted parcel has this code.", body = ErrorEnvelope),
        (status = 409, description = "Its shipment is past `to_pick_up` (a second scan, for one).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn scan(State(app): State<App>, _ops: OpsCaller, PathParam(code): PathParam<String>) -> Result<Response> {
    let outcome = app.store.pick_up_scan(&code, app.clock.now()).await?;
    answer(&app, outcome).await
}

/// 200 with the shipment as a client reads it (read back by its tracking code), 404, or the
/// refusal.
pub(crate) async fn answer(app: &App, outcome: MoveOutcome) -> Result<Response> {
    let outcome = match outcome {
        MoveOutcome::NotFound => MoveOutcome::NotFound,
        MoveOutcome::Refused(refusal) => MoveOutcome::Refused(refusal),
        MoveOutcome::Moved(unique_id) => {
            let stored = app.store.shipment(Visibility::Ops, &unique_id).await?.ok_or(Error::NotFound)?;
            MoveOutcome::Moved(Box::new(stored))
        }
    };
    shown(app, outcome)
}

/// 200 with the moved shipment as a client reads it, 404, or the refusal.
fn shown(app: &App, outcome: MoveOutcome<Box<StoredShipment>>) -> Result<Response> {
    match outcome {
        MoveOutcome::NotFound => Err(Error::NotFound),
        MoveOutcome::Refused(Refusal::ProofRequired) => {
            Err(Error::invalid("proof_of_delivery", Refusal::ProofRequired.to_string()))
        }
        MoveOutcome::Refused(Refusal::ReasonRequired) => {
            Err(Error::invalid("reason", Refusal::ReasonRequired.to_string()))
        }
        MoveOutcome::Refused(refusal) => Err(Error::Conflict(refusal.to_string())),
        MoveOutcome::Moved(stored) => {
            let view = ShipmentView::new(&app.settings.base_url, &app.settings.area, *stored);
            Ok(envelope(200, "Shipment moved.", &view).into_response())
        }
    }
}
