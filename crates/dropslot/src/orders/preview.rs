//! `POST /requests/preview`: the schedule and every price of a request, written nowhere.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::Response;

use super::request::{Purpose, RequestPayload, ValidRequest, normalize_address, trimmed};
use super::wire::{
    DropOffPreview, DropOffPreviewAddress, DropOffSlot, ParcelPreview, ParcelSummary, PickUpAddress, PickUpPreview,
    PickUpSlot, PreviewObject, SAME, SummaryEntry,
};
use crate::app::App;
use crate::auth::Caller;
use crate::error::{Envelope, ErrorEnvelope, Result, envelope};
use crate::http::JsonBody;
use dropslot_core::config::PriceList;
use dropslot_core::quote::Quote;
use dropslot_core::time::iso;

#[utoipa::path(post, path = "/requests/preview", tag = "Orders", operation_id = "preview",
    summary = "Preview the schedule and prices of a request",
    description = "The schedule (dates, time slots) and every price of a request, minimum price and tax included. Nothing is written.",
    security(("client_token" = [])), request_body = RequestPayload,
    responses(
        (status = 200, description = "The preview.", body = Envelope<PreviewObject>),
        (status = 422, description = "A rule broken, each at its path: an address that cannot be placed in the service area, a limit, a unit, a weight, an unknown `saved_address_id`.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
pub(super) async fn handle(
    State(app): State<App>,
    caller: Caller,
    JsonBody(payload, _): JsonBody<RequestPayload>,
) -> Result<Response> {
    let prepared = super::prepare(&app, &caller.terms(), payload, Purpose::Preview, app.clock.now()).await?;
    let saved = if let Some(id) = prepared.saved_address {
        Some(id.0)
    } else {
        let text = prepared.request.pick_up.address.text.as_deref().unwrap_or("");
        app.store.saved_address_id_by_text(caller.scope, &normalize_address(text)).await?.map(|id| id.0)
    };
    let object = build(&app, &caller.prices, &prepared.request, &prepared.quote, saved);
    Ok(envelope(200, "Preview calculated.", &object))
}

/// The pick-up address as the interface shows it back (also stored with an order).
pub fn pick_up_address(app: &App, req: &ValidRequest, quote: &Quote, saved: Option<i64>) -> PickUpAddress {
    let (a, l) = (&req.pick_up.address, &req.pick_up.location);
    PickUpAddress {
        saved_address_id: saved,
        lat: l.lat.clone(),
        lng: l.lng.clone(),
        text: l.text.clone(),
        city: app.settings.area.city(quote.pick_up_city).name.clone(),
        person_name: trimmed(&a.person_name),
        person_phone_country_code: None,
        person_phone: trimmed(&a.person_phone),
        plate_number: None,
        unit_number: None,
        postal_code: l.postal_code.clone(),
        description: trimmed(&a.description),
    }
}

fn build<'a>(
    app: &'a App,
    prices: &'a PriceList,
    req: &'a ValidRequest,
    quote: &'a Quote,
    saved: Option<i64>,
) -> PreviewObject<'a> {
    let area = &app.settings.area;
    let city = area.city(quote.pick_up_city);
    let pu = &quote.pick_up;
    let mut drop_offs = Vec::with_capacity(req.drop_offs.len());
    for (d, q) in req.drop_offs.iter().zip(&quote.drop_offs) {
        let zone = area.zone(d.location.zone);
        let zone_city = area.city(zone.city);
        drop_offs.push(DropOffPreview {
            address: DropOffPreviewAddress {
                text: &d.location.text,
                postal_code: &d.location.postal_code,
                lat: &d.location.lat,
                lng: &d.location.lng,
                region: &d.location.region,
                city: &zone_city.name,
                google_place_id: None,
                location_service_postal_code: &d.location.lookup_key,
            },
            parcels: d
                .parcels
                .iter()
                .zip(&q.parcel_prices)
                .map(|(p, price)| ParcelPreview {
                    unit: &p.unit,
                    values: p.values,
                    parcel_size_code: &prices.sizes[p.size].code,
                    price: *price,
                })
                .collect(),
            pick_up_shipment_type: SAME,
            scheduled_date: q.booking.date.to_string(),
            pick_up_scheduled_date: pu.date.to_string(),
            time_slot_code: &q.booking.slot.code,
            time_slot: DropOffSlot {
                city: &zone_city.name,
                code: &q.booking.slot.code,
                warehouse_service_zone_code: &zone.code,
                closing_margin: q.booking.slot.closing_margin,
                from_time: q.booking.slot.from_time,
                to_time: q.booking.slot.to_time,
            },
            time_slot_datetime_start: iso(&q.booking.start),
            time_slot_datetime_end: iso(&q.booking.end),
            price: q.price,
            parcel_summary: summary(app, prices, d.parcels.iter().map(|p| p.size)),
        });
    }
    let pick_up = PickUpPreview {
        address: pick_up_address(app, req, quote, saved),
        scheduled_date: pu.date.to_string(),
        time_slot_code: &pu.slot.code,
        time_slot: PickUpSlot {
            city: &city.name,
            code: &pu.slot.code,
            name: &pu.slot.name,
            closing_margin: pu.slot.closing_margin,
            from_time: pu.slot.from_time,
            to_time: pu.slot.to_time,
        },
        time_slot_datetime_start: iso(&pu.start),
        time_slot_datetime_end: iso(&pu.end),
        drop_offs,
        drop_offs_total_price: quote.drop_offs_total,
        parcels_total_price: quote.parcels_total,
        additional_parameters_total_price: quote.additional_total,
        price: quote.drop_offs_total,
        total_price: quote.drop_offs_total,
        parcel_summary: summary(app, prices, req.drop_offs.iter().flat_map(|d| d.parcels.iter().map(|p| p.size))),
    };
    PreviewObject { pick_ups: vec![pick_up], payment_type: &prices.payment_type, totals: quote.totals }
}

/// Parcel counts per size under `SAME`, with the size's note and the icon the service serves.
pub fn summary(app: &App, prices: &PriceList, sizes: impl Iterator<Item = usize>) -> ParcelSummary {
    let mut by_size: BTreeMap<String, SummaryEntry> = BTreeMap::new();
    for s in sizes {
        let class = &prices.sizes[s];
        by_size
            .entry(class.code.clone())
            .or_insert_with(|| SummaryEntry {
                code: class.code.clone(),
                note: class.note.clone(),
                icon_url: crate::labels::icon_url(&app.settings.base_url, &class.code),
                count: 0,
            })
            .count += 1;
    }
    ParcelSummary(BTreeMap::from([(SAME, by_size)]))
}
