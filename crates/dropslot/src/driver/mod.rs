//! The driver app's API (CONTRACT §13), driver tokens only: today's published routes of the
//! driver, and what a scanned code is on them. A driver reaches only the stops of its own
//! published routes; anything else is a 404. Its moves go through the same state machine as
//! the ops API, each once per `Idempotency-Key`; a delivery attaches the proof images the
//! driver uploaded (`proofs.rs`: `POST /driver/proofs`; the rules in `crate::proofs`) in the
//! move's own transaction. The app that uses it is [`app`].

pub mod app;
pub(crate) mod proofs;
pub mod route;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::auth::staff::DriverCaller;
use crate::error::{Envelope, Error, ErrorEnvelope, Result, envelope};
use crate::http::{JsonBody, PathParam};
use crate::ops::TransitionRequest;
use dropslot_core::dispatch::StopKind;
use dropslot_core::shipments::{self, Actor, Move, Status};
use dropslot_store::{DriverKey, DriverMove, MoveOutcome};
use route::{DriverDay, DriverParcel, DriverShipment, planned_today, today};

pub fn routes() -> axum::Router<App> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route(crate::http::api_path!("/driver/route"), get(route))
        .route(crate::http::api_path!("/driver/scans"), post(scan))
        .route(crate::http::api_path!("/driver/shipments/{unique_id}/transitions"), post(transition))
        .route(crate::http::api_path!("/driver/route/start"), post(start))
        .route(crate::http::api_path!("/driver/positions"), post(position))
        .route(
            crate::http::api_path!("/driver/proofs"),
            // This route's own body limit: the image, not the service's 1 MiB for JSON.
            post(proofs::upload).layer(axum::extract::DefaultBodyLimit::max(crate::proofs::MAX_BYTES)),
        )
}

/// The `Idempotency-Key` every driver action carries (CONTRACT §13): required.
pub(crate) fn required_key(headers: &axum::http::HeaderMap) -> Result<String> {
    crate::orders::create::idempotency_key(headers)?.ok_or_else(|| {
        Error::invalid(
            "header.Idempotency-Key",
            "Every driver action needs an Idempotency-Key (1 to 255 printable characters).",
        )
    })
}

pub(crate) fn key_reused() -> Error {
    Error::Conflict("This Idempotency-Key was used for another action: send each action with its own key.".into())
}

/// The answer to a driver's replayed request: `Idempotent-Replayed: true`.
pub(crate) fn replayed(mut res: Response) -> Response {
    res.headers_mut().insert("idempotent-replayed", axum::http::HeaderValue::from_static("true"));
    res
}

/// `GET /driver/route`.
#[utoipa::path(get, path = "/driver/route", tag = "Driver", operation_id = "driver_route",
    summary = "Today's routes of this driver",
    description = "The driver's published routes of today (in the depot's city), stops in order with their kind (`pick_up`, `drop_off`, `return`), window, ETA, address, receiver, navigation links and each shipment's parcels; at a drop-off each shipment's delivery instruction from its recipient (read anew at each call), and for a shipment moved to another day or slot since the route was published, where it went (`moved_to`).",
    security(("driver_token" = [])),
    responses(
        (status = 200, description = "Today's routes (none when no plan is published for this driver).", body = Envelope<DriverDay>),
        (status = 401, description = "No valid driver token.", body = ErrorEnvelope),
        (status = 403, description = "Another kind of token.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn route(State(app): State<App>, caller: DriverCaller) -> Result<Response> {
    let day = today(&app, &caller.driver_id).await?;
    Ok(envelope(200, "Today's routes.", &day).into_response())
}

/// `POST /driver/scans`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"code": "PK7M2Q9XR4TB"}))]
pub struct ScanRequest {
    /// What the camera read, or what was typed: a parcel's pick-up code or custom code (its
    /// label's barcode), or its label's QR code (the shipment's tracking URL; a shipment of
    /// one parcel only).
    #[schema(min_length = 1, max_length = 300)]
    pub code: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ScanResult {
    pub route_id: String,
    pub stop_seq: u32,
    pub shipment_unique_id: String,
    pub pick_up_code: String,
    pub custom_code: Option<String>,
}

#[utoipa::path(post, path = "/driver/scans", tag = "Driver", operation_id = "driver_scan",
    summary = "What a scanned code is on this driver's route",
    description = "The parcel and stop of today's routes of this driver that the code names: a pick-up code or custom code (the label's Code 128), or the label's QR code (the tracking URL) of a shipment of one parcel. Drop-offs and the parcels collected at pick-up stops.",
    security(("driver_token" = [])), request_body = ScanRequest,
    responses(
        (status = 200, description = "The parcel's stop.", body = Envelope<ScanResult>),
        (status = 404, description = "No parcel of this driver's routes today has this code.", body = ErrorEnvelope),
        (status = 422, description = "An empty or overlong code, or a QR code of a shipment of several parcels.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn scan(
    State(app): State<App>,
    caller: DriverCaller,
    JsonBody(request, _): JsonBody<ScanRequest>,
) -> Result<Response> {
    let code = request.code.trim();
    if code.is_empty() || code.chars().count() > 300 {
        return Err(Error::invalid(
            "code",
            "The code is 1 to 300 characters: a parcel's pick-up code or custom code, or a label's QR code.",
        ));
    }
    // A label's QR code is its shipment's tracking URL: the tracking code is its last segment.
    let tracking = code.rsplit_once("/track/").map(|(_, c)| c.trim_end_matches('/'));
    let day = today(&app, &caller.driver_id).await?;
    for r in &day.routes {
        for s in &r.stops {
            for sh in &s.shipments {
                let parcel = match tracking {
                    None => {
                        sh.parcels.iter().find(|p| p.pick_up_code == code || p.custom_code.as_deref() == Some(code))
                    }
                    Some(t) if t == sh.unique_id => match sh.parcels.as_slice() {
                        [one] => Some(one),
                        many => {
                            return Err(Error::invalid(
                                "code",
                                format!(
                                    "This QR code names shipment {t} of {} parcels: scan each parcel's barcode.",
                                    many.len()
                                ),
                            ));
                        }
                    },
                    Some(_) => None,
                };
                if let Some(p) = parcel {
                    let found = ScanResult {
                        route_id: r.id.clone(),
                        stop_seq: s.seq,
                        shipment_unique_id: sh.unique_id.clone(),
                        pick_up_code: p.pick_up_code.clone(),
                        custom_code: p.custom_code.clone(),
                    };
                    return Ok(envelope(200, "On your route.", &found).into_response());
                }
            }
        }
    }
    Err(Error::NotFound)
}

/// `POST /driver/shipments/{unique_id}/transitions`.
#[utoipa::path(post, path = "/driver/shipments/{unique_id}/transitions", tag = "Driver", operation_id = "driver_move",
    summary = "Record a stop's outcome",
    description = "The ops API's move (`to`, `reason`, `proof_of_delivery`) of a drop-off shipment on this driver's published route of today, through the same state machine (webhooks and tracking follow). At a return stop the driver hands the parcels back to the merchant: `to: returned` with a `receiver_name` proof naming who took them (required; 422 at `proof_of_delivery` without it), or `to: failed` with a reason, which books the return into the next pick-up slot with room or, after the last return attempt, cancels it. A delivery's `signature` and `photo` values are URLs that `POST /driver/proofs` answered this driver (at most one signature and three photos, 10 MB together; `receiver_name` is free text): the move attaches them to the shipment, and its merchant reads them. `to: picked_up` is the pick-up scan at a merchant: a drop-off collected at a pick-up stop of the driver's route goes `picked_up` (through `to_pick_up` when it was still `scheduled`). Taken once per `Idempotency-Key` (required): a repeat with the same key and body answers the same status with the shipment as it is, and `Idempotent-Replayed: true`.",
    security(("driver_token" = [])), request_body = TransitionRequest,
    params(
        ("unique_id" = String, Path, description = "The drop-off shipment's `unique_id` (tracking code)."),
        ("Idempotency-Key" = String, Header, pattern = "^[ -~]{1,255}$", description = "1–255 printable ASCII characters, one per action (required)."),
    ),
    responses(
        (status = 200, description = "Moved (or replayed): the shipment as a client reads it.", body = Envelope<crate::orders::view::ShipmentView>,
            headers(("Idempotent-Replayed" = String, description = "`true` when this answers an earlier request with the same key."))),
        (status = 404, description = "Not a shipment of this driver's route today (`returned`: not at a return stop of it).", body = ErrorEnvelope),
        (status = 409, description = "The state machine refuses this move, or the key was used for another request.", body = ErrorEnvelope),
        (status = 422, description = "A missing or malformed `Idempotency-Key`, an unknown status, a reason or proof rule broken (`returned` without a `receiver_name`) (a proof URL that is not one of this driver's uploads, or is another shipment's, at `proof_of_delivery.<i>.value`).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn transition(
    State(app): State<App>,
    caller: DriverCaller,
    PathParam(unique_id): PathParam<String>,
    headers: axum::http::HeaderMap,
    JsonBody(request, body): JsonBody<TransitionRequest>,
) -> Result<Response> {
    let key = required_key(&headers)?;
    let m = request.into_move()?;
    if m.to == Status::Returned && !shipments::names_receiver(&m.proof) {
        return Err(Error::invalid(
            "proof_of_delivery",
            "Handing the parcels back needs the name of who took them: a proof {\"type\": \"receiver_name\", \"value\": …}.",
        ));
    }
    let request_hash = crate::orders::create::fingerprint(&serde_json::json!({"shipment": unique_id, "body": body}));
    if m.to == Status::PickedUp {
        // A pick-up scan at the merchant: a drop-off collected at a pick-up stop of this
        // driver's routes, through `to_pick_up` when nobody had bundled it yet (recorded under
        // `KEY#to_pick_up`, so a retry finishes what a failure left half-way).
        let day = today(&app, &caller.driver_id).await?;
        let found = day
            .routes
            .iter()
            .flat_map(|r| &r.stops)
            .filter(|s| s.kind == "pick_up")
            .flat_map(|s| &s.shipments)
            .find(|sh| sh.unique_id == unique_id);
        let Some(found) = found else { return Err(Error::NotFound) };
        if found.status == Status::Scheduled.as_str() {
            let bundle = DriverKey {
                driver_id: caller.driver_id.clone(),
                key: format!("{key}#to_pick_up"),
                request_hash: crate::orders::create::fingerprint(&serde_json::json!({"bundle": unique_id})),
            };
            let to_pick_up = Move::to(Status::ToPickUp, Actor::Ops);
            match app.store.driver_move(bundle, &unique_id, to_pick_up, Vec::new(), app.clock.now()).await? {
                DriverMove::Done(MoveOutcome::Moved(_)) | DriverMove::Replayed(_) => {}
                DriverMove::Done(outcome) => return crate::ops::answer(&app, outcome).await,
                DriverMove::KeyReused => return Err(key_reused()),
                // Nothing to attach in a pick-up.
                DriverMove::ProofUnavailable(_) => return Err(Error::Internal("a pick-up attached a proof".into())),
            }
        }
    } else {
        // On a stop of this driver's routes; a hand-back only at a return stop (CONTRACT §15).
        let (_, _, planned) = planned_today(&app, &caller.driver_id).await?;
        let on_route = planned.iter().flat_map(|(_, r)| r.visits()).any(|s| {
            s.shipment_unique_ids.contains(&unique_id) && (m.to != Status::Returned || s.kind == StopKind::Return)
        });
        if !on_route {
            return Err(Error::NotFound);
        }
    }
    let attach = crate::proofs::to_attach(&app, &caller.driver_id, &unique_id, &m).await?;
    let driver_id = caller.driver_id.clone();
    let key = DriverKey { driver_id: caller.driver_id, key, request_hash };
    let proofs = m.proof.clone();
    let served = matches!(m.to, Status::Delivered | Status::Failed | Status::Returned);
    match app.store.driver_move(key, &unique_id, m, attach, app.clock.now()).await? {
        DriverMove::Done(MoveOutcome::Moved(moved)) => {
            if served {
                progress(&app, &driver_id, Some(&unique_id)).await;
            }
            crate::ops::answer(&app, MoveOutcome::Moved(moved)).await
        }
        DriverMove::Done(outcome) => crate::ops::answer(&app, outcome).await,
        DriverMove::Replayed(moved) => Ok(replayed(crate::ops::answer(&app, MoveOutcome::Moved(moved)).await?)),
        DriverMove::KeyReused => Err(key_reused()),
        DriverMove::ProofUnavailable(token) => Err(crate::proofs::unavailable(&app.settings.base_url, &proofs, &token)),
    }
}

/// Re-times the ETAs of the driver's routes of today (only the one holding `shipment`, when
/// given) after its progress: a stop served, a position (CONTRACT §14). The progress itself is
/// recorded already; a failure here (the routing engine down) is logged and leaves the
/// windows to the next progress.
async fn progress(app: &App, driver_id: &str, shipment: Option<&str>) {
    let result: Result<()> = async {
        let Some(driver) = app.store.driver(driver_id).await? else { return Ok(()) };
        let (_, _, planned) = planned_today(app, driver_id).await?;
        for (_, r) in planned.iter().filter(|(_, r)| shipment.is_none_or(|u| r.shipments().any(|s| s == u))) {
            crate::eta::refresh(app, &driver.driver.depot, r).await?;
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(driver = %driver_id, error = %e, "the route's ETAs were not re-timed");
    }
}

/// `POST /driver/route/start`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"scanned": ["PK7M2Q9XR4TB", "PK3W8N5D2KQM"]}))]
pub struct StartRequest {
    /// Every parcel's code scanned as loaded (pick-up or custom code): the route starts only
    /// when each parcel of its drop-offs and of the returns it hands back is among them.
    #[schema(max_items = 5000)]
    pub scanned: Vec<String>,
}

/// The statuses from which starting the route moves a drop-off on (`in_transit` is already there).
const LOADED: [&str; 2] = ["processing", "to_attempt"];

#[utoipa::path(post, path = "/driver/route/start", tag = "Driver", operation_id = "driver_start",
    summary = "Start today's route",
    description = "Once every parcel of the route's drop-offs and of its returns still to hand back (`return_scheduled`) is scanned as loaded, each drop-off at the depot (`processing`, or `to_attempt` after a failed attempt) goes `in_transit`, through the state machine (webhooks and tracking follow); a return stays `return_scheduled` until it is handed back. A shipment moved to another day or slot since the route was published (`moved_to` in `GET /driver/route`) is neither required nor moved: it stays for the plan of its new date. `Idempotency-Key` is required; each shipment's move is recorded under it, so a retry after a lost answer or a failure half-way completes the start without moving anything twice.",
    security(("driver_token" = [])), request_body = StartRequest,
    params(("Idempotency-Key" = String, Header, pattern = "^[ -~]{1,255}$", description = "1–255 printable ASCII characters (required).")),
    responses(
        (status = 200, description = "Started: today's routes as they are now.", body = Envelope<DriverDay>),
        (status = 404, description = "No published route of this driver today.", body = ErrorEnvelope),
        (status = 409, description = "A drop-off is not at the depot yet (its status is named); nothing was moved.", body = ErrorEnvelope),
        (status = 422, description = "A parcel not scanned (`scanned`, naming it), or a missing `Idempotency-Key`.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn start(
    State(app): State<App>,
    caller: DriverCaller,
    headers: axum::http::HeaderMap,
    JsonBody(request, _): JsonBody<StartRequest>,
) -> Result<Response> {
    let key = required_key(&headers)?;
    if request.scanned.len() > 5000 {
        return Err(Error::invalid("scanned", "At most 5,000 codes."));
    }
    let day = today(&app, &caller.driver_id).await?;
    if day.routes.is_empty() {
        return Err(Error::NotFound);
    }
    // What the van carries out: the drop-offs still on their stops (one moved to another day or
    // slot since the route was published stays at the depot) and the returns to hand back.
    let drop_offs: Vec<&DriverShipment> = day.on_stops(StopKind::DropOff).collect();
    let returns = day.on_stops(StopKind::Return).filter(|sh| sh.status == Status::ReturnScheduled.as_str());
    let scanned = |p: &DriverParcel| {
        request.scanned.iter().any(|c| c.trim() == p.pick_up_code || p.custom_code.as_deref() == Some(c.trim()))
    };
    let missing: Vec<&str> = drop_offs
        .iter()
        .copied()
        .chain(returns)
        .flat_map(|sh| &sh.parcels)
        .filter(|p| !scanned(p))
        .map(|p| p.pick_up_code.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(Error::invalid(
            "scanned",
            format!("Scan every parcel before starting: {} not scanned ({}).", missing.len(), missing.join(", ")),
        ));
    }
    let waiting: Vec<String> = drop_offs
        .iter()
        .filter(|sh| !LOADED.contains(&sh.status.as_str()) && sh.status != "in_transit")
        .map(|sh| format!("{} ({})", sh.unique_id, sh.status))
        .collect();
    if !waiting.is_empty() {
        return Err(Error::Conflict(format!(
            "These shipments are not at the depot to be loaded: {}. Nothing was moved.",
            waiting.join(", ")
        )));
    }
    let now = app.clock.now();
    for sh in drop_offs.iter().filter(|sh| LOADED.contains(&sh.status.as_str())) {
        let m = Move::to(Status::InTransit, Actor::Ops);
        let request_hash = crate::orders::create::fingerprint(&serde_json::json!({"start": sh.unique_id}));
        let record =
            DriverKey { driver_id: caller.driver_id.clone(), key: format!("{key}#{}", sh.unique_id), request_hash };
        match app.store.driver_move(record, &sh.unique_id, m, Vec::new(), now).await? {
            // Moved now or before; or deleted meanwhile by its merchant (nothing to carry).
            DriverMove::Done(MoveOutcome::Moved(_) | MoveOutcome::NotFound) | DriverMove::Replayed(_) => {}
            DriverMove::Done(MoveOutcome::Refused(r)) => {
                return Err(Error::Conflict(format!("{}: {r}", sh.unique_id)));
            }
            DriverMove::KeyReused => return Err(key_reused()),
            // Nothing to attach in a start.
            DriverMove::ProofUnavailable(_) => return Err(Error::Internal("a start attached a proof".into())),
        }
    }
    let day = today(&app, &caller.driver_id).await?;
    Ok(envelope(200, "Route started.", &day).into_response())
}

/// `POST /driver/positions`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"lat": 43.6452, "lng": -79.3806, "accuracy_m": 12.5, "at": "2026-11-23T19:05:00Z"}))]
pub struct PositionReport {
    /// WGS84 degrees.
    #[schema(minimum = -90, maximum = 90)]
    pub lat: f64,
    #[schema(minimum = -180, maximum = 180)]
    pub lng: f64,
    /// The phone's stated accuracy, metres (0 to 10,000).
    #[schema(minimum = 0, maximum = 10000)]
    pub accuracy_m: f64,
    /// When the phone measured it (RFC 3339): at most 5 minutes ahead of the service's clock and
    /// at most 24 hours old (a phone sends what it kept offline when it is back).
    #[schema(format = DateTime)]
    pub at: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PositionRecorded {
    pub at: String,
}

#[utoipa::path(post, path = "/driver/positions", tag = "Driver", operation_id = "driver_position",
    summary = "Report the phone's position",
    description = "While a route of today is published for this driver, the app reports where the phone is (with the driver's consent), at most one position every 30 s by the phone's clock; closer ones are a 429. Kept 30 days. `Idempotency-Key` is required: a replay records nothing twice and answers 201 again.",
    security(("driver_token" = [])), request_body = PositionReport,
    params(("Idempotency-Key" = String, Header, pattern = "^[ -~]{1,255}$", description = "1–255 printable ASCII characters (required).")),
    responses(
        (status = 201, description = "Recorded (or recorded before under this key).", body = Envelope<PositionRecorded>),
        (status = 404, description = "No published route of this driver today.", body = ErrorEnvelope),
        (status = 422, description = "Coordinates, accuracy or time out of range, at their path; a missing `Idempotency-Key`.", body = ErrorEnvelope),
        (status = 429, description = "Another position of this driver lies within 30 s of this one.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn position(
    State(app): State<App>,
    caller: DriverCaller,
    headers: axum::http::HeaderMap,
    JsonBody(report, _): JsonBody<PositionReport>,
) -> Result<Response> {
    let key = required_key(&headers)?;
    let now = app.clock.now();
    let mut errors = crate::error::FieldErrors::new();
    if let Err(e) = dropslot_core::geo::distance::LatLng::new(report.lat, report.lng) {
        let path = match e {
            dropslot_core::geo::distance::CoordinateError::Lat => "lat",
            dropslot_core::geo::distance::CoordinateError::Lng => "lng",
        };
        errors.add(path, e.message());
    }
    if !(report.accuracy_m.is_finite() && (0.0..=10_000.0).contains(&report.accuracy_m)) {
        errors.add("accuracy_m", "The accuracy is 0 to 10,000 metres.");
    }
    let at = report.at.parse::<jiff::Timestamp>().ok();
    let in_range = at.is_some_and(|t| {
        let age = now.as_millisecond() - t.as_millisecond();
        (-300_000..=86_400_000).contains(&age)
    });
    if !in_range {
        errors.add("at", "An RFC 3339 time at most 5 minutes ahead of now and at most 24 hours old.");
    }
    errors.into_result()?;
    let at = at.unwrap_or(now);
    if planned_today(&app, &caller.driver_id).await?.2.is_empty() {
        return Err(Error::NotFound);
    }
    let p = dropslot_store::Position {
        lat: report.lat,
        lng: report.lng,
        accuracy_m: report.accuracy_m,
        at_ms: at.as_millisecond(),
    };
    let outcome = app.store.record_position(&caller.driver_id, &key, p, now.as_millisecond()).await?;
    let body = PositionRecorded { at: at.to_string() };
    match outcome {
        dropslot_store::PositionOutcome::Recorded => {
            progress(&app, &caller.driver_id, None).await;
            Ok(envelope(201, "Position recorded.", &body).into_response())
        }
        dropslot_store::PositionOutcome::Replayed => {
            Ok(replayed(envelope(201, "Position recorded.", &body).into_response()))
        }
        dropslot_store::PositionOutcome::TooSoon => Err(Error::RateLimited {
            retry_after: 30,
            policy: "\"positions\";q=1;w=30".into(),
            limit: "\"positions\";r=0;t=30".into(),
        }),
    }
}
