//! `POST /requests/sync`: validates, quotes and writes a whole order atomically, answering
//! 201 with its ids, tracking codes and label links. `Idempotency-Key` replays a success.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use jiff::{SignedDuration, Timestamp};
use sha2::{Digest, Sha256};

use super::request::{Purpose, RequestPayload, normalize_address, trimmed};
use super::wire::{OrderObject, ShipmentObject};
use super::{Prepared, Terms, custom_code_taken};
use crate::app::App;
use crate::auth::Caller;
use crate::error::{Envelope, Error, ErrorEnvelope, Result, json_response};
use crate::http::JsonBody;
use dropslot_core::ids;
use dropslot_core::time::iso;
use dropslot_store::{
    CreateOrderError, IdempotencyClaim, NewDropOff, NewOrder, NewParcel, NewPickUp, NewShipment, RenderFn, Scope,
    StoredDropOffAddress, StoredPickUpAddress, WrittenOrder,
};

const IDEMPOTENCY_WINDOW: SignedDuration = SignedDuration::from_hours(24);
const CREATED: &str = "Order created.";

#[utoipa::path(post, path = "/requests/sync", tag = "Orders", operation_id = "create_order",
    summary = "Create an order (synchronous)",
    description = "Validates, quotes and writes the whole order atomically: the 201 carries ids, tracking codes and label links. With `Idempotency-Key`, a repeat of the same body within 24 h answers the original response again.",
    security(("client_token" = [])), request_body = RequestPayload,
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[ -~]{1,255}$", description = "1–255 printable ASCII characters; send it once. A repeat with the same body within 24 h replays the first answer.")),
    responses(
        (status = 201, description = "The order, as created (or as first created, on a replay).", body = Envelope<OrderObject>,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer to an earlier request with the same key."))),
        (status = 409, description = "The `Idempotency-Key` was used with another body, or is in use by a concurrent request.", body = ErrorEnvelope),
        (status = 422, description = "A rule broken, each at its path: an address that cannot be placed in the service area, more drop-offs or parcels than the limits, a unit, a weight, a phone, a custom code (malformed, repeated or taken), a malformed `Idempotency-Key` (`header.Idempotency-Key`).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
pub(super) async fn handle(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(payload, body): JsonBody<RequestPayload>,
) -> Result<Response> {
    let now = app.clock.now();
    let claim = match keyed(&app, caller.scope, &headers, || fingerprint(&body), now).await? {
        Keyed::Replay(replayed) => return Ok(replayed),
        Keyed::Fresh(claim) => claim,
    };
    let terms = caller.terms();
    let mut prepared = super::prepare(&app, &terms, payload, Purpose::Order, now).await?;
    let written = write_order(&app, &terms, &mut prepared, now, claim.clone(), |_| Ok(())).await?;
    match written {
        // Rendered here, on a request worker, unless the store needed the body in its
        // transaction: the single writer is the throughput bottleneck.
        Ok(created) => {
            app.metrics.orders_created.get_or_create(&crate::metrics::OrderLabels { kind: "sync" }).inc();
            let body = match created.body {
                Some(body) => body,
                None => render(&app.settings.base_url, &created.order)
                    .map_err(|e| Error::Internal(format!("the order response: {e}")))?,
            };
            Ok(json_response(201, body))
        }
        Err(CreateOrderError::CustomCodeTaken { drop_off, parcel }) => Err(custom_code_taken(drop_off, parcel)),
        Err(CreateOrderError::IdempotencyKeyTaken) => key_taken(&app, caller.scope, claim, now).await,
        Err(CreateOrderError::SlotFull { .. }) => Err(Error::Internal("a full slot after the requotes".into())),
        Err(CreateOrderError::Store(e)) => Err(e.into()),
    }
}

/// What an `Idempotency-Key` makes of an order request (`sync` or `async`): the stored
/// answer of an earlier request with the same key and body, or a fresh request, with the
/// claim its write takes when a key was sent.
pub(super) enum Keyed {
    Replay(Response),
    Fresh(Option<IdempotencyClaim>),
}

/// Reads the key; `request_hash` fingerprints the request only when there is one.
pub(super) async fn keyed(
    app: &App,
    scope: Scope,
    headers: &HeaderMap,
    request_hash: impl FnOnce() -> String,
    now: Timestamp,
) -> Result<Keyed> {
    let Some(key) = idempotency_key(headers)? else { return Ok(Keyed::Fresh(None)) };
    let request_hash = request_hash();
    if let Some(replayed) = replay(app, scope, &key, &request_hash, now).await? {
        return Ok(Keyed::Replay(replayed));
    }
    Ok(Keyed::Fresh(Some(IdempotencyClaim { key, request_hash, expired_before: now - IDEMPOTENCY_WINDOW, now })))
}

/// The write found its key taken: a concurrent request with the same key committed first.
/// Its answer when the body is the same, else a conflict.
pub(super) async fn key_taken(
    app: &App,
    scope: Scope,
    claim: Option<IdempotencyClaim>,
    now: Timestamp,
) -> Result<Response> {
    let claim = claim.ok_or_else(|| Error::Internal("idempotency conflict without a key".into()))?;
    replay(app, scope, &claim.key, &claim.request_hash, now)
        .await?
        .ok_or_else(|| Error::Conflict("The idempotency key is being used by another request.".into()))
}

/// The `Idempotency-Key` header: once at most, 1–255 printable ASCII characters (space to
/// `~`; a tab or any control character is refused).
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>> {
    static IDEMPOTENCY_KEY: axum::http::HeaderName = axum::http::HeaderName::from_static("idempotency-key");
    let Some(value) = crate::http::single(headers, &IDEMPOTENCY_KEY, "Idempotency-Key")? else { return Ok(None) };
    let bytes = value.as_bytes();
    if !bytes.iter().all(|b| (b' '..=b'~').contains(b)) {
        return Err(Error::invalid("header.Idempotency-Key", "The idempotency key must be printable ASCII."));
    }
    if bytes.is_empty() || bytes.len() > 255 {
        return Err(Error::invalid("header.Idempotency-Key", "The idempotency key must be 1 to 255 characters."));
    }
    Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
}

/// SHA-256 of the body's canonical JSON (keys sorted, no whitespace), computed from the very
/// value the request was read from: a body either parses for both or is refused.
pub(crate) fn fingerprint(body: &serde_json::Value) -> String {
    ids::hex(&Sha256::digest(crate::http::json::canonical(body).as_bytes()))
}

async fn replay(app: &App, scope: Scope, key: &str, request_hash: &str, now: Timestamp) -> Result<Option<Response>> {
    let Some(stored) = app.store.idempotent_response(scope, key, now - IDEMPOTENCY_WINDOW).await? else {
        return Ok(None);
    };
    if stored.request_hash != request_hash {
        return Err(Error::Conflict("The idempotency key was already used with a different request body.".into()));
    }
    let mut res = json_response(stored.status, stored.body);
    res.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
    Ok(Some(res))
}

/// Validates and quotes `payload` at `now` and turns it into the order to store, dated
/// `now`: the one instant a request read from the clock, for its slots and its `created_at`
/// alike.
#[cfg(test)]
pub(super) async fn order_at(
    app: &App,
    terms: &Terms,
    payload: RequestPayload,
    purpose: Purpose,
    now: Timestamp,
    claim: Option<IdempotencyClaim>,
) -> Result<NewOrder> {
    let prepared = super::prepare(app, terms, payload, purpose, now).await?;
    new_order(app, terms, &prepared, now, claim)
}

/// The 201 body of an order as the store wrote it, rendered by the same
/// `ShipmentObject::from_stored` as every read: a created order and the same order read back
/// cannot differ.
pub(super) fn render(base: &str, order: &WrittenOrder) -> serde_json::Result<String> {
    let shipments = order.shipments.iter().map(|s| ShipmentObject::from_stored(base, s)).collect();
    let object = OrderObject { unique_id: order.unique_id.clone(), created_at: iso(&order.created_at), shipments };
    Envelope::success(201, CREATED, &object).to_json()
}

/// How many times an order is quoted again when a slot it took filled before its write.
const REQUOTES: usize = 3;

/// Writes `prepared` as an order, with its reservations. When a slot it took filled meanwhile
/// (another order took the last place after this one was quoted), the capacity is read anew
/// and the order quoted again, up to [`REQUOTES`] times, as if it had come a moment later;
/// a slot the request asked for that filled is a 422 at its `time_slot_code`, and an order
/// that still finds no room one at its address. `finish` completes each order drafted (the
/// worker's request completion). The store's other refusals are the caller's to answer.
pub(super) async fn write_order(
    app: &App,
    terms: &Terms,
    prepared: &mut Prepared,
    now: Timestamp,
    claim: Option<IdempotencyClaim>,
    finish: impl Fn(&mut NewOrder) -> Result<()>,
) -> Result<std::result::Result<dropslot_store::CreatedOrder, CreateOrderError>> {
    let mut tries = 0;
    loop {
        let mut order = new_order(app, terms, prepared, now, claim.clone())?;
        finish(&mut order)?;
        let reservations = order.reservations.clone();
        match app.store.create_order(terms.scope, order, renderer(&app.settings.base_url)).await {
            Ok(created) => {
                crate::capacity::taken(app, terms.scope.mode, &reservations);
                // CONTRACT §16: a live drop-off for a published day goes into its routes now.
                if terms.scope.mode == dropslot_store::Mode::Live {
                    crate::plans::late::after_order(app, &created.order.shipments).await;
                }
                return Ok(Ok(created));
            }
            Err(CreateOrderError::SlotFull { drop_off }) => {
                crate::capacity::forget(app);
                let asked = drop_off.and_then(|i| prepared.request.drop_offs.get(i).map(|d| (i, d.asked.is_some())));
                if let Some((i, true)) = asked {
                    return Err(Error::invalid(
                        format!("drop_offs.{i}.time_slot_code"),
                        super::asked_problem(dropslot_core::quote::schedule::AskedProblem::Full),
                    ));
                }
                tries += 1;
                if tries > REQUOTES {
                    let path = drop_off
                        .map_or_else(|| "pick_up_address.text".to_string(), |i| format!("drop_offs.{i}.address.text"));
                    return Err(Error::invalid(
                        path,
                        "No slot with room is available for this address right now; please try again.",
                    ));
                }
                prepared.quote = super::quote_at(app, terms, &prepared.request, now).await?;
            }
            other => return Ok(other),
        }
    }
}

/// [`render`] for the store, which calls it in the order's transaction when the body must be
/// stored with it (an idempotency key, a completed request).
pub(super) fn renderer(base: &str) -> RenderFn {
    let base = base.to_string();
    std::sync::Arc::new(move |order: &WrittenOrder| render(&base, order).map_err(|e| e.to_string()))
}

/// The request as it is stored: built once, from the validated request and its quote.
fn new_order(
    app: &App,
    terms: &Terms,
    p: &Prepared,
    now: Timestamp,
    claim: Option<IdempotencyClaim>,
) -> Result<NewOrder> {
    let area = &app.settings.area;
    let city = area.city(p.quote.pick_up_city);
    let tax = area.region(city.region).tax;
    let created = now.to_zoned(city.tz.clone());
    let pu = &p.quote.pick_up;
    let pick_up_token = ids::url_token();
    let (a, l) = (&p.request.pick_up.address, &p.request.pick_up.location);
    let text = l.text.clone();
    let new_pick_up = NewPickUp {
        unique_id: ids::pick_up_unique_id(),
        label_token: pick_up_token,
        scheduled_date: pu.date,
        slot_code: pu.slot.code.clone(),
        slot_name: pu.slot.name.clone(),
        start: pu.start.clone(),
        end: pu.end.clone(),
        address: StoredPickUpAddress {
            text: l.text.clone(),
            postal_code: l.postal_code.clone(),
            city: city.name.clone(),
            lat: l.lat.clone(),
            lng: l.lng.clone(),
            person_name: trimmed(&a.person_name),
            person_phone: trimmed(&a.person_phone),
            description: trimmed(&a.description),
            saved_address_id: None,
            located_by: l.located_by,
        },
        saved_normalized: normalize_address(&text),
        saved_text: text,
    };
    let mut shipments = Vec::new();
    // The minimum price and tax apply once to the order, shared out over its shipment orders.
    let charges = p.quote.charges(&terms.prices, tax);
    for ((d, q), totals) in p.request.drop_offs.iter().zip(&p.quote.drop_offs).zip(charges) {
        let zone = area.zone(d.location.zone);
        let a = &d.address;
        // The dataset's coordinates are decimal text; one that does not parse is a bug in the
        // embedded data, never a 0.0 on a label.
        let coordinate = |v: &str| {
            v.parse::<f64>()
                .map_err(|_| Error::Internal(format!("postal dataset coordinate {v:?} for {}", d.location.lookup_key)))
        };
        let stored = StoredDropOffAddress {
            text: d.location.text.clone(),
            description: a.description.clone(),
            person_name: a.person_name.clone(),
            person_phone: a.person_phone.clone(),
            person_email: a.person_email.clone(),
            sender_person_name: a.sender_person_name.clone(),
            sender_person_phone: a.sender_person_phone.clone(),
            sender_person_email: a.sender_person_email.clone(),
            sender_name: a.sender_name.clone(),
            sender_address_text: a.sender_address_text.clone(),
            postal_code: d.location.postal_code.clone(),
            lat: coordinate(&d.location.lat)?,
            lng: coordinate(&d.location.lng)?,
            region: d.location.region.clone(),
            location_service_postal_code: d.location.lookup_key.clone(),
            located_by: d.location.located_by,
        };
        let parcels = d
            .parcels
            .iter()
            .zip(&q.parcel_prices)
            .map(|(parcel, price)| NewParcel {
                pick_up_code: ids::pick_up_code(),
                custom_code: parcel.custom_code.clone(),
                size_code: terms.prices.sizes[parcel.size].code.clone(),
                size_name: terms.prices.sizes[parcel.size].name.clone(),
                weight: parcel.weight,
                price: *price,
                label_token: ids::url_token(),
            })
            .collect();
        let drop_off = NewDropOff {
            unique_id: ids::tracking_code(),
            label_token: ids::url_token(),
            scheduled_date: q.booking.date,
            slot_code: q.booking.slot.code.clone(),
            slot_name: q.booking.slot.name.clone(),
            start: q.booking.start.clone(),
            end: q.booking.end.clone(),
            zone_code: zone.code.clone(),
            warehouse: zone.warehouse.clone(),
            city: area.city(zone.city).name.clone(),
            address: stored,
            max_attempts: terms.limits.max_delivery_attempts,
        };
        shipments.push(NewShipment {
            unique_id: ids::shipment_order_unique_id(),
            drop_off,
            parcels,
            min_price: terms.prices.min_price,
            tax_bp: tax.0,
            totals,
        });
    }
    let order = NewOrder {
        unique_id: ids::order_unique_id(),
        created_at: created,
        pick_up: new_pick_up,
        shipments,
        idempotency: claim,
        completes: None,
        reservations: p.quote.reservations(&p.request.quote_request(), area, &app.settings.capacity),
    };
    Ok(order)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use dropslot_core::config::{Overrides, Settings};
    use dropslot_core::ids::ClientId;
    use dropslot_store::Mode;

    /// An order is quoted and dated at the one instant its request read. The clock is pinned
    /// at 07:00 in Toronto, when the 09:00 pick-up slot is still open; an order drafted at
    /// 08:30, after that slot closed, is dated 08:30 and picked up at noon. (An end-to-end
    /// test cannot tell the reads apart: a pinned clock answers the same instant each time.)
    #[tokio::test]
    async fn an_order_is_quoted_and_dated_at_one_instant() {
        let dir = tempfile::tempdir().expect("tempdir");
        let overrides = Overrides {
            database: Some(format!("sqlite://{}", dir.path().join("dropslot.db").display())),
            now: Some("2026-11-23T12:00:00Z".into()),
            ..Overrides::default()
        };
        let settings = Settings::from_toml_fragment("", &overrides).expect("settings");
        let metrics = Arc::new(crate::metrics::Metrics::default());
        let outbox = Arc::new(crate::webhooks::Renderer::new(&settings, metrics.clone()));
        let (_stop, stopping) = tokio::sync::watch::channel(false);
        let app = App::build(settings, metrics, outbox, stopping).await.expect("app");
        let terms = Terms {
            scope: Scope { client: ClientId(1), mode: Mode::Test },
            prices: app.default_prices.clone(),
            limits: app.settings.limits,
        };
        let payload = crate::http::json::from_value(&serde_json::json!({
            "pick_up_address": {"text": "100 King St W, Toronto, ON M5X 1A9"},
            "drop_offs": [{"address": {"text": "290 Bremner Blvd, Toronto, ON M5V 3L9",
                "person_name": "Jane Doe", "person_phone": "+1 416 555 0100"},
                "parcels": [{"unit": "g", "values": 500}]}]
        }))
        .expect("payload");
        let now: Timestamp = "2026-11-23T13:30:00Z".parse().expect("instant");
        let order = order_at(&app, &terms, payload, Purpose::Order, now, None).await.expect("order");
        assert_eq!(order.created_at.timestamp(), now);
        assert_eq!(iso(&order.created_at), "2026-11-23T08:30:00-05:00");
        assert_eq!(
            iso(&order.pick_up.start),
            "2026-11-23T12:00:00-05:00",
            "quoted at 08:30, not at the clock's 07:00 (the 09:00 slot)"
        );
    }
}
