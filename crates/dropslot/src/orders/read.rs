//! Client reads (CONTRACT §8): one order, the orders newest first with an opaque cursor, one
//! drop-off shipment, and a parcel by its custom code. Tenant- and mode-scoped: another client's entity is a 404.

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Serialize;

use super::view::{OrderView, ShipmentView};
use crate::app::App;
use crate::auth::Caller;
use crate::error::{Error, FieldErrors, Result};
use crate::http::{PathParam, envelope};
use crate::ids::CustomCode;
use crate::shipments::Status;
use crate::store::{StoredOrder, Visibility};

const DEFAULT_LIMIT: usize = 20;
const MAX_LIMIT: usize = 100;

/// `GET /shipments/{unique_id}`: one of the caller's drop-off shipments.
#[tracing::instrument(skip_all, err(level = "debug"))]
pub(super) async fn shipment(
    State(app): State<App>,
    caller: Caller,
    PathParam(unique_id): PathParam<String>,
) -> Result<Response> {
    let stored = app.store.shipment(Visibility::Tenant(caller.scope), &unique_id).await?.ok_or(Error::NotFound)?;
    let view = ShipmentView::new(&app.settings.base_url, &app.settings.area, stored);
    Ok(envelope(200, "Shipment found.", &view).into_response())
}

/// `GET /orders/{unique_id}`.
#[tracing::instrument(skip_all, err(level = "debug"))]
pub(super) async fn one(
    State(app): State<App>,
    caller: Caller,
    PathParam(unique_id): PathParam<String>,
) -> Result<Response> {
    let order = app.store.order(caller.scope, &unique_id).await?.ok_or(Error::NotFound)?;
    let view = OrderView::new(&app.settings.base_url, &app.settings.area, order);
    Ok(envelope(200, "Order found.", &view).into_response())
}

#[derive(Serialize)]
struct Page {
    orders: Vec<OrderView>,
    /// Pass as `cursor` for the next (older) page; null on the last page.
    next_cursor: Option<String>,
}

/// `GET /orders?cursor=&limit=`: newest first. The cursor is the last order's position, so
/// orders created while a client pages are never skipped or repeated.
#[tracing::instrument(skip_all, err(level = "debug"))]
pub(super) async fn list(State(app): State<App>, caller: Caller, RawQuery(query): RawQuery) -> Result<Response> {
    let (before, limit) = page_query(query.as_deref().unwrap_or(""))?;
    // One extra row tells whether another page follows.
    let mut orders = app.store.orders(caller.scope, before, limit + 1).await?;
    let more = orders.len() > limit;
    orders.truncate(limit);
    let next_cursor = if more { orders.last().map(|o: &StoredOrder| cursor(o.id.0)) } else { None };
    let page = Page {
        orders: orders.into_iter().map(|o| OrderView::new(&app.settings.base_url, &app.settings.area, o)).collect(),
        next_cursor,
    };
    Ok(envelope(200, "Orders.", &page).into_response())
}

fn cursor(order_id: i64) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("o:{order_id}"))
}

fn parse_cursor(text: &str) -> Option<i64> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).ok()?;
    let id: i64 = std::str::from_utf8(&bytes).ok()?.strip_prefix("o:")?.parse().ok()?;
    (id > 0).then_some(id)
}

/// `cursor` and `limit`, each at most once; anything else is a 422 at `query.<name>`.
fn page_query(query: &str) -> Result<(Option<i64>, usize)> {
    let mut errors = FieldErrors::new();
    let (mut before, mut limit, mut seen) = (None, None, Vec::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if seen.contains(&key) {
            errors.add(format!("query.{key}"), "Give this parameter once.");
            continue;
        }
        seen.push(key);
        match key {
            "cursor" if value.is_empty() => {}
            "cursor" => match parse_cursor(value) {
                Some(id) => before = Some(id),
                None => errors.add("query.cursor", "The cursor must be a next_cursor this API returned."),
            },
            "limit" => match value.parse::<usize>() {
                Ok(n) if (1..=MAX_LIMIT).contains(&n) => limit = Some(n),
                _ => errors.add("query.limit", format!("The limit must be a whole number from 1 to {MAX_LIMIT}.")),
            },
            _ => errors.add(format!("query.{key}"), "Unknown parameter; use cursor and limit."),
        }
    }
    errors.into_result()?;
    Ok((before, limit.unwrap_or(DEFAULT_LIMIT)))
}

#[derive(Serialize)]
struct ParcelView {
    pick_up_code: String,
    custom_code: String,
    tracking_code: String,
    order_unique_id: String,
    status: Status,
    shipment: ShipmentView,
}

/// `GET /parcels/find/by-custom-code/{custom_code}`: the live parcel with its shipment.
#[tracing::instrument(skip_all, err(level = "debug"))]
pub(super) async fn by_custom_code(
    State(app): State<App>,
    caller: Caller,
    PathParam(code): PathParam<String>,
) -> Result<Response> {
    let code = CustomCode::parse(&code).ok_or_else(|| Error::invalid("path.custom_code", CustomCode::RULE))?;
    let (pick_up_code, shipment) =
        app.store.parcel_by_custom_code(caller.scope, &code).await?.ok_or(Error::NotFound)?;
    let view = ParcelView {
        pick_up_code,
        custom_code: code.as_str().to_string(),
        tracking_code: shipment.drop_off.unique_id.clone(),
        order_unique_id: shipment.order_unique_id.clone(),
        status: shipment.drop_off.status,
        shipment: ShipmentView::new(&app.settings.base_url, &app.settings.area, shipment),
    };
    Ok(envelope(200, "Parcel found.", &view).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_strangers_are_refused() {
        assert_eq!(parse_cursor(&cursor(42)), Some(42));
        assert_eq!(page_query("").unwrap(), (None, DEFAULT_LIMIT));
        assert_eq!(page_query(&format!("limit=5&cursor={}", cursor(9))).unwrap(), (Some(9), 5));
        for bad in ["limit=0", "limit=101", "limit=x", "cursor=abc", "limit=1&limit=2", "page=2", "cursor=bzow"] {
            assert!(page_query(bad).is_err(), "{bad}");
        }
    }
}
