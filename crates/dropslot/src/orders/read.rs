//! Client reads (CONTRACT §8): one order, the orders newest first with an opaque cursor, one
//! drop-off shipment, and a parcel by its custom code. Tenant- and mode-scoped: another client's entity is a 404.

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::view::{OrderView, ShipmentView};
use crate::app::App;
use crate::auth::Caller;
use crate::error::{Envelope, Error, ErrorEnvelope, Result, envelope};
use crate::http::PathParam;
use crate::http::page::{cursor, page_query};
use dropslot_core::ids::CustomCode;
use dropslot_core::shipments::Status;
use dropslot_store::{StoredOrder, Visibility};

/// `GET /shipments/{unique_id}`: one of the caller's drop-off shipments.
#[utoipa::path(get, path = "/shipments/{unique_id}", tag = "Orders", operation_id = "get_shipment",
    summary = "Read a drop-off shipment",
    description = "The shipment in the order-creation shape, plus its status, attempts and events (oldest first).",
    security(("client_token" = [])), params(("unique_id" = String, Path, description = "The drop-off shipment's `unique_id` (its tracking code).")),
    responses(
        (status = 200, description = "The shipment.", body = Envelope<ShipmentView>),
        (status = 404, description = "No shipment of yours (in this mode) has this id.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
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
#[utoipa::path(get, path = "/orders/{unique_id}", tag = "Orders", operation_id = "get_order",
    summary = "Read an order",
    security(("client_token" = [])), params(("unique_id" = String, Path, description = "The order's `unique_id`.")),
    responses(
        (status = 200, description = "The order with its shipments.", body = Envelope<OrderView>),
        (status = 404, description = "No order of yours (in this mode) has this id.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
pub(super) async fn one(
    State(app): State<App>,
    caller: Caller,
    PathParam(unique_id): PathParam<String>,
) -> Result<Response> {
    let order = app.store.order(caller.scope, &unique_id).await?.ok_or(Error::NotFound)?;
    let view = OrderView::new(&app.settings.base_url, &app.settings.area, order);
    Ok(envelope(200, "Order found.", &view).into_response())
}

#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = OrderPage)]
struct Page {
    orders: Vec<OrderView>,
    /// Pass as `cursor` for the next (older) page; null on the last page.
    next_cursor: Option<String>,
}

/// `GET /orders?cursor=&limit=`: newest first. The cursor is the last order's position, so
/// orders created while a client pages are never skipped or repeated.
#[utoipa::path(get, path = "/orders", tag = "Orders", operation_id = "list_orders",
    summary = "List orders, newest first",
    description = "Cursor pagination: pass `next_cursor` as `cursor` for the next, older page. Orders created while paging never shift a page.",
    security(("client_token" = [])),
    params(
        ("cursor" = Option<String>, Query, description = "A `next_cursor` this API returned; empty or absent for the first page."),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Page size, 1–100 (default 20)."),
    ),
    responses(
        (status = 200, description = "A page of orders.", body = Envelope<Page>),
        (status = 422, description = "A bad query (`query.<name>`): a limit out of range, a cursor this API did not return, a parameter given twice or unknown.", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
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

#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = ParcelFound)]
struct ParcelView {
    pick_up_code: String,
    custom_code: String,
    tracking_code: String,
    order_unique_id: String,
    status: Status,
    shipment: ShipmentView,
}

/// `GET /parcels/find/by-custom-code/{custom_code}`: the live parcel with its shipment.
#[utoipa::path(get, path = "/parcels/find/by-custom-code/{custom_code}", tag = "Orders", operation_id = "get_parcel",
    summary = "Find a parcel by its custom code",
    security(("client_token" = [])), params(("custom_code" = String, Path, pattern = "^[A-Za-z0-9]{16,20}$", description = "The parcel's custom code: 16–20 letters or digits (else 422 at `path.custom_code`).")),
    responses(
        (status = 200, description = "The live parcel and its shipment.", body = Envelope<ParcelView>),
        (status = 404, description = "No live parcel of yours has this custom code.", body = ErrorEnvelope),
        (status = 422, description = "The code is not 16–20 letters or digits (`path.custom_code`).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
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
