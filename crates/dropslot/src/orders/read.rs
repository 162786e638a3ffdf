//! Client reads (CONTRACT §8): one order, the orders newest first with an opaque cursor, one
//! drop-off shipment, and a parcel by its custom code. Tenant- and mode-scoped: another client's entity is a 404.

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::view::{OrderView, ShipmentView};
use crate::app::App;
use crate::auth::Caller;
use crate::error::{Error, Result};
use crate::http::page::{cursor, page_query};
use crate::http::{PathParam, envelope};
use crate::ids::CustomCode;
use crate::shipments::Status;
use crate::store::{StoredOrder, Visibility};

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
    let (before, limit) = page_query(query.as_deref().unwrap_or(""), "o")?;
    // One extra row tells whether another page follows.
    let mut orders = app.store.orders(caller.scope, before, limit + 1).await?;
    let more = orders.len() > limit;
    orders.truncate(limit);
    let next_cursor = if more { orders.last().map(|o: &StoredOrder| cursor("o", o.id.0)) } else { None };
    let page = Page {
        orders: orders.into_iter().map(|o| OrderView::new(&app.settings.base_url, &app.settings.area, o)).collect(),
        next_cursor,
    };
    Ok(envelope(200, "Orders.", &page).into_response())
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
