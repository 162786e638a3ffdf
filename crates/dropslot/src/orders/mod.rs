//! Orders: preview (a quote with no writes), synchronous creation, parcel deletion and the
//! client's reads of orders and parcels.
//! Handlers parse, validate, quote, persist and answer; the rules live in `request` and
//! `dropslot_core::quote`.

pub mod asynchronous;
pub(crate) mod create;
pub mod delete;
pub(crate) mod preview;
pub(crate) mod read;
pub mod request;
pub mod view;
pub mod wire;
pub mod worker;

use std::sync::Arc;

use crate::app::App;
use crate::auth::Caller;
use crate::error::{Error, FieldErrors, Result};
use dropslot_core::config::{Limits, PriceList};
use dropslot_core::geo::Location;
use dropslot_core::geo::points::PointQuery;
use dropslot_core::ids::SavedAddressId;
use dropslot_core::quote::schedule::AskedProblem;
use dropslot_core::quote::{self, Quote, QuoteError};
use dropslot_store::Scope;
use jiff::Timestamp;
use request::{Purpose, RequestPayload, Rules, ValidRequest};

/// Preview, order creation and deletion by custom code, under the API prefix.
pub fn routes() -> axum::Router<App> {
    use axum::routing::{delete, get, post};
    axum::Router::new()
        .route(crate::http::api_path!("/requests/preview"), post(preview::handle))
        .route(crate::http::api_path!("/requests/sync"), post(create::handle))
        .route(crate::http::api_path!("/requests/async"), post(asynchronous::accept))
        .route(crate::http::api_path!("/requests/{request_id}"), get(asynchronous::status))
        .route(crate::http::api_path!("/orders"), get(read::list))
        .route(crate::http::api_path!("/orders/{unique_id}"), get(read::one))
        .route(crate::http::api_path!("/shipments/{unique_id}"), get(read::shipment))
        .route(
            crate::http::api_path!("/parcels/find/by-custom-code/{custom_code}"),
            delete(delete::handle).get(read::by_custom_code),
        )
}

/// What a request is validated and priced under: its tenant and the client's prices and
/// limits (a caller's now, or those an asynchronous request was accepted under).
#[derive(Clone)]
pub struct Terms {
    pub scope: Scope,
    pub prices: Arc<PriceList>,
    pub limits: Limits,
}

impl Caller {
    pub fn terms(&self) -> Terms {
        Terms { scope: self.scope, prices: self.prices.clone(), limits: self.limits }
    }
}

/// A validated, quoted request.
pub struct Prepared {
    pub request: ValidRequest,
    pub quote: Quote,
    /// Set when the pick-up was given by `saved_address_id`.
    pub saved_address: Option<SavedAddressId>,
}

/// Resolves a saved pick-up address, validates against the caller's limits and prices, and
/// quotes at `now`. A request reads the clock once and passes that instant here and to
/// whatever else it dates (an order's `created_at`), so the quote and the order agree.
pub async fn prepare(
    app: &App,
    terms: &Terms,
    mut payload: RequestPayload,
    purpose: Purpose,
    now: Timestamp,
) -> Result<Prepared> {
    let mut saved_address = None;
    if let Some(addr) = payload.pick_up_address.as_mut() {
        if let Some(id) = addr.saved_address_id {
            let saved = app.store.saved_address(terms.scope, SavedAddressId(id)).await?.ok_or_else(|| {
                Error::invalid("pick_up_address.saved_address_id", "There is no saved address with this id.")
            })?;
            addr.text = Some(saved.text);
            saved_address = Some(saved.id);
        }
    }
    let rules = Rules {
        purpose,
        prices: &terms.prices,
        limits: terms.limits,
        geocoder: &app.geocoder,
        area: &app.settings.area,
    };
    let mut request = request::validate(payload, &rules).map_err(Error::Validation)?;
    locate_at_points(app, &mut request).await?;
    let quote = quote_at(app, terms, &request, now).await?;
    Ok(Prepared { request, quote, saved_address })
}

/// Quotes a valid request at `now` against the slots' capacity as last read for its mode
/// (`capacity::snapshot`).
pub async fn quote_at(app: &App, terms: &Terms, request: &ValidRequest, now: Timestamp) -> Result<Quote> {
    let horizon = app.settings.area.horizon_days();
    let capacity = crate::capacity::snapshot(app, terms.scope.mode, now).await?;
    let req = request.quote_request();
    let mut quoted = quote::quote(&req, &terms.prices, &app.settings.area, now, &capacity);
    if quoted.is_err() && !capacity.fleet().zones.is_empty() {
        // The fleet's room is kept for a second: a refusal is made on room read now (a driver
        // added, a plan improved, another process's deletion may have made some).
        crate::capacity::forget(app);
        app.store.recheck_tentative().await;
        let fresh = crate::capacity::snapshot(app, terms.scope.mode, now).await?;
        quoted = quote::quote(&req, &terms.prices, &app.settings.area, now, &fresh);
    }
    quoted.map_err(|e| match e {
        QuoteError::NoPickUpSlot => Error::invalid(
            "pick_up_address.text",
            format!("No pick-up slot is available for this address in the next {horizon} days."),
        ),
        QuoteError::NoDropOffSlot(i) => Error::invalid(
            format!("drop_offs.{i}.address.text"),
            format!("No drop-off slot is available for this address in the next {horizon} days on a day the pick-up can be made."),
        ),
        QuoteError::NoCommonDay => Error::invalid(
            "drop_offs",
            "No single day serves the pick-up and every drop-off; send them in separate requests.",
        ),
        QuoteError::AskedSlot(i, why) => Error::invalid(format!("drop_offs.{i}.time_slot_code"), asked_problem(why)),
        QuoteError::AskedDates(i) => Error::invalid(
            format!("drop_offs.{i}.scheduled_date"),
            "Every drop-off of a request is delivered on one date: ask for the same scheduled_date.",
        ),
    })
}

/// Why an asked-for slot cannot be booked, in the integrator's words.
pub fn asked_problem(why: AskedProblem) -> &'static str {
    match why {
        AskedProblem::Unknown => "This is not a drop-off time slot of the address's zone (GET /slots lists them).",
        AskedProblem::Closed => {
            "This time slot cannot be booked on that date: it is closed, past its booking time, on a day without service, or beyond the booking horizon."
        }
        AskedProblem::Full => "This time slot is full on that date.",
        AskedProblem::Unreachable => "No pick-up slot with room that day reaches this time slot; choose a later one.",
    }
}

/// CONTRACT §11: each address the request gave no coordinates for is placed at the address
/// point with its street number and name, when one matches (`PointQuery::choose`); else it
/// keeps its postal code's location. With no point imported this costs one cached answer
/// and no query (the store keeps whether any point exists under its cache epoch).
async fn locate_at_points(app: &App, request: &mut ValidRequest) -> Result<()> {
    if !app.store.address_points_present().await? {
        return Ok(());
    }
    let locations =
        std::iter::once(&mut request.pick_up.location).chain(request.drop_offs.iter_mut().map(|d| &mut d.location));
    let (queries, located): (Vec<PointQuery>, Vec<&mut Location>) =
        locations.filter_map(|l| PointQuery::for_location(l).map(|q| (q, l))).unzip();
    if queries.is_empty() {
        return Ok(());
    }
    let candidates = app.store.address_point_candidates(&queries).await?;
    for ((query, location), candidates) in queries.iter().zip(located).zip(candidates) {
        if let Some(at) = query.choose(&candidates) {
            location.at_point(at);
        }
    }
    Ok(())
}

/// Validation errors that only the database can find, at their field paths.
pub fn custom_code_taken(drop_off: usize, parcel: usize) -> Error {
    Error::Validation(FieldErrors::single(
        format!("drop_offs.{drop_off}.parcels.{parcel}.custom_code"),
        "The custom code is already used by another parcel.",
    ))
}
