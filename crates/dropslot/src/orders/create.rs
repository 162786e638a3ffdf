//! `POST /requests/sync`: validates, quotes and writes a whole order atomically, answering
//! 201 with its ids, tracking codes and label links. `Idempotency-Key` replays a success.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use jiff::{SignedDuration, Timestamp};
use sha2::{Digest, Sha256};

use super::request::{Purpose, RequestPayload, normalize_address};
use super::wire::{OrderObject, ShipmentObject};
use super::{Prepared, Terms, custom_code_taken};
use crate::app::App;
use crate::auth::Caller;
use crate::error::{Envelope, Error, ErrorEnvelope, Result, json_response};
use crate::http::JsonBody;
use dropslot_core::ids;
use dropslot_core::time::iso;
use dropslot_store::{
    CreateOrderError, IdempotencyClaim, NewDropOff, NewOrder, NewParcel, NewPickUp, NewShipment, OrderIds, Scope,
    StoredDropOffAddress, StoredPickUpAddress, StoredShipment,
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
    let prepared = super::prepare(&app, &terms, payload, Purpose::Order).await?;
    let (order, draft) = assemble(&app, &terms, &prepared, now, claim.clone())?;
    let (draft, render) = draft.shared();
    match app.store.create_order(caller.scope, order, render).await {
        // Rendered here, on a request worker, unless the store needed the body in its
        // transaction: the single writer is the throughput bottleneck.
        Ok(created) => {
            app.metrics.orders_created.get_or_create(&crate::metrics::OrderLabels { kind: "sync" }).inc();
            let body = match created.body {
                Some(body) => body,
                None => draft.render(&created.ids).map_err(|e| Error::Internal(format!("the order response: {e}")))?,
            };
            Ok(json_response(201, body))
        }
        Err(CreateOrderError::CustomCodeTaken { drop_off, parcel }) => Err(custom_code_taken(drop_off, parcel)),
        Err(CreateOrderError::IdempotencyKeyTaken) => key_taken(&app, caller.scope, claim, now).await,
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
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>> {
    let mut values = headers.get_all("idempotency-key").iter();
    let Some(value) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(crate::http::repeated_header("Idempotency-Key"));
    }
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
pub(super) fn fingerprint(body: &serde_json::Value) -> String {
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

/// The order's rows and the response waiting for its row ids.
pub(super) fn assemble(
    app: &App,
    terms: &Terms,
    p: &Prepared,
    now: Timestamp,
    claim: Option<IdempotencyClaim>,
) -> Result<(NewOrder, Draft)> {
    let area = &app.settings.area;
    let base = &app.settings.base_url;
    let city = area.city(p.quote.pick_up_city);
    let tax = area.region(city.region).tax;
    let created = now.to_zoned(city.tz.clone());
    let pu = &p.quote.pick_up;
    let pick_up_token = ids::url_token();
    let pick_up_address = super::preview::pick_up_address(app, &p.request, &p.quote, None);
    let text = p.request.pick_up.location.text.clone();
    let new_pick_up = NewPickUp {
        unique_id: ids::pick_up_unique_id(),
        label_token: pick_up_token,
        scheduled_date: pu.date,
        slot_code: pu.slot.code.clone(),
        slot_name: pu.slot.name.clone(),
        start: pu.start.clone(),
        end: pu.end.clone(),
        address: StoredPickUpAddress {
            text: pick_up_address.text.clone(),
            postal_code: pick_up_address.postal_code.clone(),
            city: pick_up_address.city.clone(),
            lat: pick_up_address.lat.clone(),
            lng: pick_up_address.lng.clone(),
            person_name: pick_up_address.person_name.clone(),
            person_phone: pick_up_address.person_phone.clone(),
            description: pick_up_address.description.clone(),
            saved_address_id: None,
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
        };
        let parcels = d
            .parcels
            .iter()
            .zip(&q.parcel_prices)
            .map(|(parcel, price)| NewParcel {
                pick_up_code: ids::pick_up_code(),
                custom_code: parcel.custom_code.clone(),
                size_code: terms.prices.sizes[parcel.size].code.clone(),
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
    };
    let draft = Draft::new(base, &order);
    Ok((order, draft))
}

/// The response body, complete but for the row ids the store assigns: the new rows as a
/// read would load them, rendered by the same `ShipmentObject::from_stored` as every read,
/// so a created order and the same order read back cannot differ.
pub(super) struct Draft {
    base: String,
    unique_id: String,
    created_at: String,
    shipments: Vec<StoredShipment>,
}

impl Draft {
    fn new(base: &str, o: &NewOrder) -> Draft {
        Draft {
            base: base.to_string(),
            unique_id: o.unique_id.clone(),
            created_at: iso(&o.created_at),
            shipments: o.stored_shipments(None),
        }
    }

    /// The draft shared with the store's render callback.
    pub(super) fn shared(self) -> (std::sync::Arc<Draft>, dropslot_store::RenderFn) {
        let draft = std::sync::Arc::new(self);
        let shared = draft.clone();
        (draft, std::sync::Arc::new(move |ids: &OrderIds| shared.render(ids).map_err(|e| e.to_string())))
    }

    pub(super) fn render(&self, ids: &OrderIds) -> serde_json::Result<String> {
        let shipments = self
            .shipments
            .iter()
            .zip(&ids.shipments)
            .map(|(s, assigned)| {
                let mut object = ShipmentObject::from_stored(&self.base, s);
                object.shipment_order_id = assigned.shipment_order.0;
                object.pick_up_shipment.id = ids.pick_up.0;
                object.drop_off_shipment.id = assigned.drop_off.0;
                object
            })
            .collect();
        let object = OrderObject { unique_id: self.unique_id.clone(), created_at: self.created_at.clone(), shipments };
        Envelope::success(201, CREATED, &object).to_json()
    }
}
