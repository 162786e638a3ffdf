//! The sandbox (CONTRACT §6): test tokens drive their own test shipments to the six prepared
//! outcomes. The scenarios are data (`shipments::Scenario`); this handler selects, batches and
//! answers.

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::auth::Caller;
use crate::error::{Envelope, Error, ErrorEnvelope, FieldErrors, Result};
use crate::http::{JsonBody, PathParam};
use dropslot_core::shipments::{Scenario, Status};
use dropslot_store::{Mode, ScenarioResult, Selection};

/// Shipments moved per transaction: bounds the time one batch holds the writer.
const BATCH: usize = 200;
/// Ids per selector list.
const MAX_SELECTED: usize = 1000;

pub fn routes() -> axum::Router<App> {
    axum::Router::new().route(crate::http::api_path!("/sandbox/scenarios/{scenario}"), axum::routing::post(handle))
}

/// A caller with a test token: a live token gets 403 before its body is read.
pub struct TestCaller(Caller);

impl FromRequestParts<App> for TestCaller {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self> {
        let caller = Caller::from_request_parts(parts, app).await?;
        if caller.scope.mode == Mode::Test {
            Ok(TestCaller(caller))
        } else {
            Err(Error::Forbidden("Sandbox scenarios take test tokens only; a live token cannot run them."))
        }
    }
}

/// The request of endpoints 4–9: selectors, combined with OR; at least one is required.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"date": "2026-11-23"}))]
pub struct ScenarioRequest {
    /// Drop-off shipment `unique_id`s (tracking codes); at most 1000.
    #[serde(default)]
    #[schema(max_items = 1000)]
    drop_off_shipment_unique_ids: Option<Vec<String>>,
    /// Drop-off shipment ids; at most 1000.
    #[serde(default)]
    #[schema(max_items = 1000)]
    drop_off_shipment_ids: Option<Vec<i64>>,
    /// Every shipment of yours scheduled on this date, `YYYY-MM-DD`.
    #[serde(default)]
    #[schema(format = Date)]
    date: Option<String>,
}

/// A scenario's path segment: the six of `Scenario::ALL`, listed from it.
struct ScenarioSlug;

impl utoipa::PartialSchema for ScenarioSlug {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let slugs = Scenario::ALL.map(Scenario::slug);
        ObjectBuilder::new().schema_type(Type::String).enum_values(Some(slugs)).into()
    }
}

impl utoipa::ToSchema for ScenarioSlug {}

impl ScenarioRequest {
    /// The selectors, checked: at least one given, lists bounded, the date a real date.
    fn selection(self) -> Result<Selection> {
        let mut errors = FieldErrors::new();
        let unique_ids = self.drop_off_shipment_unique_ids.unwrap_or_default();
        let ids = self.drop_off_shipment_ids.unwrap_or_default();
        for (path, len) in [("drop_off_shipment_unique_ids", unique_ids.len()), ("drop_off_shipment_ids", ids.len())] {
            if len > MAX_SELECTED {
                errors.add(path, format!("At most {MAX_SELECTED} ids can be selected at once."));
            }
        }
        let date = self.date.as_deref().and_then(calendar_date);
        if self.date.is_some() && date.is_none() {
            errors.add("date", "The date must be a calendar date, YYYY-MM-DD.");
        }
        if errors.is_empty() && unique_ids.is_empty() && ids.is_empty() && date.is_none() {
            errors.add(
                "body",
                "Select shipments with at least one of drop_off_shipment_unique_ids, drop_off_shipment_ids or date.",
            );
        }
        errors.into_result()?;
        Ok(Selection { unique_ids, ids, date })
    }
}

/// `YYYY-MM-DD` exactly (jiff alone would also take other ISO 8601 forms).
fn calendar_date(text: &str) -> Option<jiff::civil::Date> {
    let b = text.as_bytes();
    (b.len() == 10 && b[4] == b'-' && b[7] == b'-').then(|| text.parse().ok()).flatten()
}

/// What a scenario did: the shipments it moved, and those it could not move with why.
#[derive(Serialize, Default, utoipa::ToSchema)]
pub struct Outcome {
    pub affected: Vec<Affected>,
    pub skipped: Vec<Skipped>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Affected {
    pub id: i64,
    pub unique_id: String,
    pub from: Status,
    pub to: Status,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Skipped {
    pub id: i64,
    pub unique_id: String,
    pub status: Status,
    pub reason: String,
}

/// Runs `scenario` over the caller's test shipments that `selection` matches, in bounded
/// batches (the API's endpoints and the dashboard's buttons both come here).
pub async fn run(app: &App, scope: dropslot_store::Scope, scenario: Scenario, selection: Selection) -> Result<Outcome> {
    if scope.mode != Mode::Test {
        return Err(Error::Forbidden("Sandbox scenarios take test tokens only; a live token cannot run them."));
    }
    let now = app.clock.now();
    let candidates = app.store.sandbox_candidates(scope, selection).await?;
    let mut outcome = Outcome::default();
    for batch in candidates.chunks(BATCH) {
        for result in app.store.run_scenario(scope, batch.to_vec(), scenario, now).await? {
            match result {
                ScenarioResult::Affected { id, unique_id, from, to } => {
                    outcome.affected.push(Affected { id: id.0, unique_id, from, to });
                }
                ScenarioResult::Skipped { id, unique_id, status, reason } => {
                    outcome.skipped.push(Skipped { id: id.0, unique_id, status, reason });
                }
            }
        }
    }
    Ok(outcome)
}

#[utoipa::path(post, path = "/sandbox/scenarios/{scenario}", tag = "Sandbox", operation_id = "run_scenario",
    summary = "Run a sandbox scenario over your test shipments",
    description = "Test tokens only. Each selected drop-off shipment walks to the scenario's outcome, emitting every event on the way: `happy` → delivered; `reattempt` → failed, to_attempt, delivered; `fail` → failed, returned; `bundle-pick-up-shipments` → to_pick_up; `picked-pick-up-shipments` → picked_up; `delivering-drop-off-shipments` → in_transit. A shipment a scenario has moved is final for the sandbox.",
    security(("client_token" = [])), request_body = ScenarioRequest,
    params(("scenario" = inline(ScenarioSlug), Path, description = "One of the six scenarios.")),
    responses(
        (status = 200, description = "The shipments moved (`affected`) and those skipped with why.", body = Envelope<Outcome>),
        (status = 403, description = "A `live` or `ops` token: the sandbox takes test tokens only.", body = ErrorEnvelope),
        (status = 404, description = "No such scenario.", body = ErrorEnvelope),
        (status = 409, description = "Nothing could move: the envelope has `status` `error`, `errors` `{}`, and `object` says why (`skipped`).", body = Envelope<Outcome>),
        (status = 422, description = "No selector, a date that is not `YYYY-MM-DD`, or more than 1000 ids in a list.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, fields(scenario = %slug), err(level = "debug"))]
async fn handle(
    State(app): State<App>,
    PathParam(slug): PathParam<String>,
    TestCaller(caller): TestCaller,
    JsonBody(request, _): JsonBody<ScenarioRequest>,
) -> Result<Response> {
    let scenario = Scenario::from_slug(&slug).ok_or(Error::NotFound)?;
    let selection = request.selection()?;
    let outcome = run(&app, caller.scope, scenario, selection).await?;
    if outcome.affected.is_empty() {
        // Nothing could move: a conflict, with the reasons in `object` for the integrator.
        let message = if outcome.skipped.is_empty() {
            "No shipment of yours matches the selectors."
        } else {
            "None of the selected shipments could move; see object.skipped for why."
        };
        let none = FieldErrors::new();
        return Ok(
            Envelope { status: "error", code: 409, message, errors: Some(&none), object: &outcome }.into_response()
        );
    }
    Ok(Envelope::success(200, "Scenario applied.", &outcome).into_response())
}
