//! `POST /requests/async` and `GET /requests/{request_id}` (CONTRACT §3.5): an order of up
//! to 100 drop-offs, validated and priced at the door exactly as `sync` would, durable before
//! its 202, and written as one order by the background worker (`orders::worker`).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;

use super::create::{Keyed, fingerprint, key_taken, keyed};
use super::request::{Purpose, RequestPayload};
use super::wire::{OrderObject, ShipmentObject};
use super::{Prepared, Terms};
use crate::app::App;
use crate::auth::{Caller, ClientSettings};
use crate::error::{Envelope, Error, ErrorEnvelope, FieldErrors, Result, envelope, json_response};
use crate::http::{API, JsonBody, PathParam};
use dropslot_core::ids;
use dropslot_core::time::iso;
use dropslot_store::{CreateOrderError, NewRequest, RequestStatus, StoredRequest};

const ACCEPTED: &str = "Order request accepted; it is being processed.";

/// The 202's object.
#[derive(Serialize, utoipa::ToSchema)]
struct Accepted<'a> {
    /// The request's id, for `GET /requests/{request_id}` and in `same.request.completed`.
    request_id: &'a str,
    /// Always `queued`.
    #[schema(value_type = RequestState)]
    status: &'static str,
    drop_offs_count: usize,
    /// Where to follow it: `GET /requests/{request_id}`.
    status_url: &'a str,
}

/// Where an asynchronous order request is.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // a schema only: `RequestStatus::as_str` writes it
enum RequestState {
    Queued,
    Processing,
    Completed,
    Failed,
}

/// `GET /requests/{request_id}`'s object.
#[derive(Serialize, utoipa::ToSchema)]
struct RequestObject<'a> {
    request_id: &'a str,
    #[schema(value_type = RequestState)]
    status: &'static str,
    drop_offs_count: usize,
    /// When it was accepted, in the pick-up city's offset.
    created_at: &'a str,
    /// When processing ended (null until then).
    completed_at: Option<&'a str>,
    status_url: &'a str,
    /// The `POST /requests/sync` response's object, once completed (null until then, and
    /// when it failed).
    order: Option<OrderObject>,
    /// `{path: [messages]}` once failed (a custom code taken meanwhile), else `{}`.
    #[schema(value_type = std::collections::BTreeMap<String, Vec<String>>)]
    errors: Value,
}

/// How an asynchronous order request ended: the data of `same.request.completed`.
#[derive(Serialize)]
pub struct RequestFinished<'a> {
    pub request_id: &'a str,
    /// `completed` or `failed`.
    pub status: &'a str,
    /// The created order's `unique_id` (null when it failed).
    pub unique_id: Option<&'a str>,
    pub drop_offs_count: usize,
    pub created_at: &'a str,
    pub completed_at: &'a str,
    pub status_url: &'a str,
    /// `{path: [messages]}` when it failed, else `{}`.
    pub errors: &'a Value,
}

/// The `same.request.completed` body: `{"event": …, "data": …}`, like every event.
pub fn request_completed(data: &RequestFinished<'_>) -> serde_json::Result<String> {
    #[derive(Serialize)]
    struct Body<'a> {
        event: &'static str,
        data: &'a RequestFinished<'a>,
    }
    dropslot_core::json::to_string(&Body { event: dropslot_store::COMPLETED_EVENT, data }, 1024)
}

pub fn status_url(app: &App, request_id: &str) -> String {
    format!("{}{API}/requests/{request_id}", app.settings.base_url)
}

#[utoipa::path(post, path = "/requests/async", tag = "Orders", operation_id = "create_order_async",
    summary = "Create an order of up to 100 drop-offs (asynchronous)",
    description = "Validates the whole payload now, exactly as `sync` does but with the asynchronous limits (up to 100 drop-offs of 1–5 parcels), makes it durable, and answers 202. A background worker then writes it as one order, priced as the preview of the same payload prices it; follow it at `status_url`, or subscribe to `same.request.completed`. With `Idempotency-Key`, a repeat of the same body within 24 h answers the original 202 again and queues nothing.",
    security(("client_token" = [])), request_body = RequestPayload,
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[ -~]{1,255}$", description = "1–255 printable ASCII characters. A repeat with the same body within 24 h replays the first answer.")),
    responses(
        (status = 202, description = "Accepted and durable; it is being processed.", body = Envelope<Accepted>,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer to an earlier request with the same key."))),
        (status = 409, description = "The `Idempotency-Key` was used with another body (or with `sync`), or is in use by a concurrent request.", body = ErrorEnvelope),
        (status = 422, description = "A rule broken, each at its path (as for `sync`; `drop_offs` when there are more than 100); nothing is queued.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
pub(super) async fn accept(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(payload, body): JsonBody<RequestPayload>,
) -> Result<Response> {
    let now = app.clock.now();
    // Tagged, so one key sent to `sync` and to `async` with the same body is a conflict,
    // never the other endpoint's answer.
    let request_hash = || fingerprint(&serde_json::json!({"async": &body}));
    let claim = match keyed(&app, caller.scope, &headers, request_hash, now).await? {
        Keyed::Replay(replayed) => return Ok(replayed),
        Keyed::Fresh(claim) => claim,
    };
    let terms = caller.terms();
    let prepared = super::prepare(&app, &terms, payload, Purpose::AsyncOrder, now).await?;
    codes_free(&app, &terms, &prepared).await?;
    match enqueue(&app, &terms, prepared, body, claim.clone(), now).await? {
        Ok(queued) => Ok(json_response(202, queued.response)),
        Err(CreateOrderError::IdempotencyKeyTaken) => key_taken(&app, caller.scope, claim, now).await,
        Err(e) => Err(queue_error(e)),
    }
}

/// An order request made durable: its id and its 202 body.
pub struct Queued {
    pub request_id: String,
    pub response: String,
}

/// Queues a prepared (validated, priced) request whose codes are free, made from `body`, for
/// the worker, and wakes it: what `POST /requests/async` does after its checks, and what the
/// dashboard's spreadsheet import does for each of its requests.
pub async fn enqueue(
    app: &App,
    terms: &Terms,
    prepared: Prepared,
    body: Value,
    claim: Option<dropslot_store::IdempotencyClaim>,
    now: jiff::Timestamp,
) -> Result<std::result::Result<Queued, CreateOrderError>> {
    let request_id = ids::request_id();
    let url = status_url(app, &request_id);
    let drop_offs_count = prepared.request.drop_offs.len();
    let accepted = Accepted { request_id: &request_id, status: "queued", drop_offs_count, status_url: &url };
    let response = Envelope::success(202, ACCEPTED, &accepted)
        .to_json()
        .map_err(|e| Error::Internal(format!("the 202 response: {e}")))?;
    let city = app.settings.area.city(prepared.quote.pick_up_city);
    let stored_terms =
        ClientSettings { pricing: Some((*terms.prices).clone()), limits: Some(terms.limits), rate_limits: None }
            .stored()?
            .ok_or_else(|| Error::Internal("the request's terms".into()))?;
    let request = NewRequest {
        request_id: request_id.clone(),
        payload: crate::http::json::canonical(&body),
        terms: stored_terms,
        drop_offs_count,
        created_at: iso(&now.to_zoned(city.tz.clone())),
        due_ms: dropslot_store::queue_now_ms(),
        idempotency: claim,
        response: response.clone(),
    };
    // What the request was made from is all in `request` now: none of it waits for the
    // writer (8 requests of 100 drop-offs at once held about 1 MB each).
    drop((body, prepared));
    match app.store.queue_request(terms.scope, request).await {
        Ok(()) => {
            app.requests_queued.notify_one();
            Ok(Ok(Queued { request_id, response }))
        }
        Err(CreateOrderError::Store(e)) => Err(e.into()),
        Err(e) => Ok(Err(e)),
    }
}

/// A refusal of the queue as the API says it (the idempotency conflict is the caller's).
pub fn queue_error(e: CreateOrderError) -> Error {
    match e {
        CreateOrderError::CustomCodeTaken { drop_off, parcel } => super::custom_code_taken(drop_off, parcel),
        CreateOrderError::SlotFull { .. } => Error::Internal("a slot reserved by a queued request".into()),
        CreateOrderError::IdempotencyKeyTaken => Error::Conflict("The Idempotency-Key is in use.".into()),
        CreateOrderError::Store(e) => e.into(),
    }
}

/// A custom code already held by a live parcel is refused at the door (422 at its path), so
/// most conflicts never reach the queue; one taken between now and the worker's write fails
/// the request with the same path.
pub async fn codes_free(app: &App, terms: &Terms, prepared: &Prepared) -> Result<()> {
    let mut errors = FieldErrors::new();
    for (i, d) in prepared.request.drop_offs.iter().enumerate() {
        for (j, p) in d.parcels.iter().enumerate() {
            if let Some(code) = &p.custom_code {
                if app.store.parcel_by_custom_code(terms.scope, code).await?.is_some() {
                    errors.add(
                        format!("drop_offs.{i}.parcels.{j}.custom_code"),
                        "The custom code is already used by another parcel.",
                    );
                }
            }
        }
    }
    errors.into_result()
}

#[utoipa::path(get, path = "/requests/{request_id}", tag = "Orders", operation_id = "get_order_request",
    summary = "Follow an asynchronous order request",
    security(("client_token" = [])), params(("request_id" = String, Path, description = "The `request_id` of the 202.")),
    responses(
        (status = 200, description = "The request: `queued`, `processing`, `completed` with its order, or `failed` with its errors.", body = Envelope<RequestObject>),
        (status = 404, description = "No request of yours (in this mode) has this id.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
pub(super) async fn status(
    State(app): State<App>,
    caller: Caller,
    PathParam(request_id): PathParam<String>,
) -> Result<Response> {
    let r = app.store.order_request(caller.scope, &request_id).await?.ok_or(Error::NotFound)?;
    let url = status_url(&app, &r.request_id);
    let object = RequestObject {
        request_id: &r.request_id,
        status: r.status.as_str(),
        drop_offs_count: r.drop_offs_count,
        created_at: &r.created_at,
        completed_at: r.completed_at.as_deref(),
        status_url: &url,
        order: order_object(&app, caller.scope, &r).await?,
        errors: errors_object(&r)?,
    };
    Ok(envelope(200, "Order request status.", &object))
}

/// The created order in the shape `sync` answers it (`OrderObject`), once completed: read
/// from the store and rendered by the same `ShipmentObject::from_stored` as the 201, so it is
/// the 201's object (or, after a parcel was deleted since, the order as it is now). A
/// completed request whose order cannot be read is an error, never a missing order.
async fn order_object(app: &App, scope: dropslot_store::Scope, r: &StoredRequest) -> Result<Option<OrderObject>> {
    if r.status != RequestStatus::Completed {
        return Ok(None);
    }
    let missing = || Error::Internal(format!("request {} is completed without its order", r.request_id));
    let unique_id = r.order_unique_id.as_deref().ok_or_else(missing)?;
    let order = app.store.order(scope, unique_id).await?.ok_or_else(missing)?;
    let base = &app.settings.base_url;
    Ok(Some(OrderObject {
        unique_id: order.unique_id,
        created_at: order.created_at,
        shipments: order.shipments.iter().map(|s| ShipmentObject::from_stored(base, s)).collect(),
    }))
}

fn errors_object(r: &StoredRequest) -> Result<Value> {
    match (&r.status, &r.errors_json) {
        (RequestStatus::Failed, Some(json)) => serde_json::from_str(json)
            .map_err(|e| Error::Internal(format!("request {}'s errors do not parse: {e}", r.request_id))),
        (RequestStatus::Failed, None) => {
            Err(Error::Internal(format!("request {} failed without errors", r.request_id)))
        }
        _ => Ok(Value::Object(serde_json::Map::new())),
    }
}
