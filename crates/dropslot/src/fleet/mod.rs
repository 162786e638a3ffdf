//! The fleet (CONTRACT §12) for operator tokens: drivers with their depot, vehicle, shift and
//! weekdays, and each driver's sign-in link to the driver app (a driver token, shown once).

mod wire;

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;

use crate::app::App;
use crate::auth::staff::{self, OperatorCaller};
use crate::error::{EmptyObject, Envelope, Error, ErrorEnvelope, FieldErrors, Result, envelope};
use crate::http::{JsonBody, PathParam};
use dropslot_core::config::Settings;
use dropslot_core::fleet::{Driver, DriverFields};
use dropslot_store::{DriverUpdate, DynStore, StaffKind, StoredDriver};
pub use wire::{DriverBody, DriverList, DriverView, NewDriverBody, SignInLink};

/// How often a change is laid over a fresh read when another change won the race.
const UPDATE_TRIES: usize = 3;

pub fn routes() -> axum::Router<App> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route(crate::http::api_path!("/ops/drivers"), post(create).get(list))
        .route(crate::http::api_path!("/ops/drivers/{id}"), get(show).patch(update).delete(remove))
        .route(crate::http::api_path!("/ops/drivers/{id}/token"), post(reissue))
}

/// The core's verdict as field errors at the body's paths.
fn checked(fields: DriverFields, settings: &Settings) -> Result<Driver> {
    fields.check(&settings.area).map_err(|errors| {
        let mut out = FieldErrors::new();
        for (path, message) in errors {
            out.add(path, message);
        }
        Error::Validation(out)
    })
}

/// The link the driver signs in with: the driver app, the token in the URL's fragment (never
/// sent to a server in a request line).
fn sign_in_url(settings: &Settings, token: &str) -> String {
    format!("{}/driver#token={token}", settings.base_url)
}

/// Creates a driver and its first driver token: what `POST /ops/drivers` and `dropslot driver
/// create` both do. Returns the driver and its sign-in link.
pub async fn create_driver(
    store: &DynStore,
    settings: &Settings,
    fields: DriverFields,
    now: Timestamp,
) -> Result<(StoredDriver, String)> {
    let driver = checked(fields, settings)?;
    let minted = staff::mint(StaffKind::Driver);
    let id = dropslot_core::ids::driver_id();
    let stored = store.create_driver(&id, driver, minted.stored, now).await?;
    tracing::info!(driver_id = %stored.id, "driver created");
    replan(store, settings, &[&stored.driver.depot], now).await?;
    Ok((stored, sign_in_url(settings, &minted.secret)))
}

/// `POST /ops/drivers`.
#[utoipa::path(post, path = "/ops/drivers", tag = "Fleet", operation_id = "create_driver",
    summary = "Add a driver",
    description = "A driver of a depot, with a vehicle, a daily shift (local time of the depot's city) and working weekdays. The answer carries `sign_in_url`, the driver app's link holding the driver's token in its fragment: shown only here and when re-issued.",
    security(("operator_token" = [])), request_body = NewDriverBody,
    responses(
        (status = 201, description = "The driver with its `sign_in_url`.", body = Envelope<DriverView>),
        (status = 422, description = "A rule broken, at its path: `name`, `phone`, `depot` (not a depot of the service area), `vehicle.name`, `vehicle.capacity_parcels` (1–10,000), `vehicle.capacity_kg` (1–100,000), `shift.start`/`shift.end` (HH:MM, the end after the start), `weekdays` or `weekdays.N` (mon–sun, each once, at least one).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn create(
    State(app): State<App>,
    _: OperatorCaller,
    JsonBody(body, _): JsonBody<DriverBody>,
) -> Result<Response> {
    let (stored, url) = create_driver(&app.store, &app.settings, body.fields(), app.clock.now()).await?;
    Ok(envelope(201, "Driver created. The sign-in link is shown only once.", &DriverView::new(&stored, Some(url)))
        .into_response())
}

/// `GET /ops/drivers?depot=`.
#[utoipa::path(get, path = "/ops/drivers", tag = "Fleet", operation_id = "list_drivers",
    summary = "List the drivers", security(("operator_token" = [])),
    params(("depot" = Option<String>, Query, description = "Only this depot's drivers.")),
    responses(
        (status = 200, description = "Oldest first; deleted drivers are not shown.", body = Envelope<DriverList>),
        (status = 422, description = "An unknown parameter, or one given twice (`query.<name>`).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn list(State(app): State<App>, _: OperatorCaller, RawQuery(raw): RawQuery) -> Result<Response> {
    let q = crate::http::query_params(raw.as_deref(), &["depot"])?;
    let drivers = app.store.drivers(q.get("depot").map(String::as_str)).await?;
    let drivers = drivers.iter().map(|d| DriverView::new(d, None)).collect();
    Ok(envelope(200, "Drivers.", &DriverList::new(drivers)).into_response())
}

/// `GET /ops/drivers/{id}`.
#[utoipa::path(get, path = "/ops/drivers/{id}", tag = "Fleet", operation_id = "get_driver",
    summary = "Read a driver", security(("operator_token" = [])),
    params(("id" = String, Path, description = "The driver's id (`DRV…`).")),
    responses(
        (status = 200, description = "The driver.", body = Envelope<DriverView>),
        (status = 404, description = "No driver has this id (or it was deleted).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn show(State(app): State<App>, _: OperatorCaller, PathParam(id): PathParam<String>) -> Result<Response> {
    let d = app.store.driver(&id).await?.ok_or(Error::NotFound)?;
    Ok(envelope(200, "Driver.", &DriverView::new(&d, None)).into_response())
}

/// `PATCH /ops/drivers/{id}`: the fields given change (in `vehicle` and `shift` too, field by
/// field); the driver as a whole is checked again.
#[utoipa::path(patch, path = "/ops/drivers/{id}", tag = "Fleet", operation_id = "update_driver",
    summary = "Change a driver",
    description = "The fields given change, inside `vehicle` and `shift` too; the others keep their values. The result obeys the same rules as a new driver (a new `shift.start` after the stored end is refused at `shift.end`).",
    security(("operator_token" = [])), request_body = DriverBody,
    params(("id" = String, Path, description = "The driver's id (`DRV…`).")),
    responses(
        (status = 200, description = "The driver.", body = Envelope<DriverView>),
        (status = 404, description = "No driver has this id (or it was deleted).", body = ErrorEnvelope),
        (status = 409, description = "Other changes to this driver kept winning; read it again and retry.", body = ErrorEnvelope),
        (status = 422, description = "A rule broken, at its path (as for a new driver).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn update(
    State(app): State<App>,
    _: OperatorCaller,
    PathParam(id): PathParam<String>,
    JsonBody(body, _): JsonBody<DriverBody>,
) -> Result<Response> {
    let d = update_driver(&app, &id, &body).await?;
    Ok(envelope(200, "Driver changed.", &DriverView::new(&d, None)).into_response())
}

/// The change laid over the stored driver and written only over the version it read; lost
/// races are retried on a fresh read (a change names fields, so it still means the same).
async fn update_driver(app: &App, id: &str, body: &DriverBody) -> Result<StoredDriver> {
    for _ in 0..UPDATE_TRIES {
        let stored = app.store.driver(id).await?.ok_or(Error::NotFound)?;
        let driver = checked(DriverFields::of(&stored.driver).overlay(body.fields()), &app.settings)?;
        match app.store.update_driver(id, stored.version, driver, app.clock.now()).await? {
            DriverUpdate::Updated(d) => {
                replan(&app.store, &app.settings, &[&stored.driver.depot, &d.driver.depot], app.clock.now()).await?;
                return Ok(d);
            }
            DriverUpdate::NotFound => return Err(Error::NotFound),
            DriverUpdate::Changed => {}
        }
    }
    Err(Error::Conflict("The driver kept changing meanwhile; read it again and retry.".into()))
}

/// `DELETE /ops/drivers/{id}`.
#[utoipa::path(delete, path = "/ops/drivers/{id}", tag = "Fleet", operation_id = "delete_driver",
    summary = "Remove a driver",
    description = "The driver's tokens are revoked at once; the driver is gone from every read (a 404 from now on).",
    security(("operator_token" = [])),
    params(("id" = String, Path, description = "The driver's id (`DRV…`).")),
    responses(
        (status = 200, description = "Removed; `object` is `{}`.", body = Envelope<EmptyObject>),
        (status = 404, description = "No driver has this id (or it was deleted).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn remove(State(app): State<App>, _: OperatorCaller, PathParam(id): PathParam<String>) -> Result<Response> {
    let depot = app.store.driver(&id).await?.ok_or(Error::NotFound)?.driver.depot;
    if !app.store.delete_driver(&id, app.clock.now()).await? {
        return Err(Error::NotFound);
    }
    tracing::info!(driver_id = %id, "driver deleted");
    replan(&app.store, &app.settings, &[&depot], app.clock.now()).await?;
    Ok(envelope(200, "Driver removed; its tokens are revoked.", &EmptyObject {}).into_response())
}

/// The fleet of `depots` changed (issue 45): each fleet depot's tentative plans of the booking
/// horizon are read anew with the drivers as they are now, and what fits no longer is rebooked
/// or held (`[dispatch] unplaced`, the store's [`dropslot_store::AttemptStore::replan_day`]).
pub async fn replan(store: &DynStore, settings: &Settings, depots: &[&str], now: Timestamp) -> Result<()> {
    let area = &settings.area;
    let mut done: Vec<&str> = Vec::new();
    for &depot in depots {
        if done.contains(&depot) || !settings.capacity.fleet(depot) {
            continue;
        }
        done.push(depot);
        let Some(city) = area.depot_zones(depot).next().map(|z| area.city(z.city)) else { continue };
        let mut date = now.to_zoned(city.tz.clone()).date();
        for _ in 0..=area.horizon_days() {
            let r = store.replan_day(depot, date, Vec::new(), now).await?;
            if !r.rebooked.is_empty() || !r.held.is_empty() {
                tracing::info!(depot, %date, rebooked = r.rebooked.len(), held = r.held.len(), "the fleet changed: shipments moved");
            }
            date = date.tomorrow().map_err(|e| Error::Internal(format!("the booking window: {e}")))?;
        }
    }
    Ok(())
}

/// `POST /ops/drivers/{id}/token`.
#[utoipa::path(post, path = "/ops/drivers/{id}/token", tag = "Fleet", operation_id = "reissue_driver_token",
    summary = "Re-issue a driver's sign-in link",
    description = "A new driver token in a new `sign_in_url` (shown only here); every earlier token of the driver is revoked. No body is needed; one sent is ignored.",
    security(("operator_token" = [])),
    params(("id" = String, Path, description = "The driver's id (`DRV…`).")),
    responses(
        (status = 200, description = "The new link.", body = Envelope<SignInLink>),
        (status = 404, description = "No driver has this id (or it was deleted).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
async fn reissue(State(app): State<App>, _: OperatorCaller, PathParam(id): PathParam<String>) -> Result<Response> {
    let link = SignInLink { sign_in_url: reissue_sign_in(&app.store, &app.settings, &id, app.clock.now()).await? };
    Ok(envelope(200, "Sign-in link re-issued; the earlier ones no longer work.", &link).into_response())
}

/// A new driver token for driver `id`, every earlier one revoked: what `POST
/// /ops/drivers/{id}/token` and the drivers page both do. Returns the new sign-in link.
pub async fn reissue_sign_in(store: &DynStore, settings: &Settings, id: &str, now: Timestamp) -> Result<String> {
    let minted = staff::mint(StaffKind::Driver);
    if !store.reissue_driver_token(id, minted.stored, now).await? {
        return Err(Error::NotFound);
    }
    tracing::info!(driver_id = %id, "driver sign-in link re-issued");
    Ok(sign_in_url(settings, &minted.secret))
}
