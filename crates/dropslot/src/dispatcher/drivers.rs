//! The drivers: a list, a form that adds one, and a new sign-in link per driver (the fleet's
//! own functions; a link is shown once).

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::{Frame, OpsPosted, OpsSession, PageResult, fail};
use crate::app::App;
use crate::dashboard::page;
use crate::error::{Error, FieldErrors};
use dropslot_core::fleet::{DriverFields, WEEKDAYS, hhmm};

#[derive(Template)]
#[template(path = "ops/drivers.html")]
struct DriversPage {
    frame: Option<Frame>,
    drivers: Vec<DriverRow>,
    depots: Vec<(String, String)>,
    weekdays: [&'static str; 7],
    /// A sign-in link just made: (driver's name, link, whether it replaced an earlier one).
    link: Option<(String, String, bool)>,
}

struct DriverRow {
    id: String,
    name: String,
    depot: String,
    vehicle: String,
    shift: String,
    weekdays: String,
}

async fn render(
    app: &App,
    session: &OpsSession,
    link: Option<(String, String, bool)>,
    status: StatusCode,
) -> PageResult {
    let stored = app.store.drivers(None).await.map_err(|e| fail(session)(e.into()))?;
    let drivers = stored
        .iter()
        .map(|d| DriverRow {
            id: d.id.clone(),
            name: d.driver.name.clone(),
            depot: d.driver.depot.clone(),
            vehicle: format!(
                "{}: {} parcels, {} kg",
                d.driver.vehicle.name, d.driver.vehicle.capacity_parcels, d.driver.vehicle.capacity_kg
            ),
            shift: format!("{}–{}", hhmm(d.driver.shift.start), hhmm(d.driver.shift.end)),
            weekdays: d.driver.weekdays.names().join(", "),
        })
        .collect();
    let depots = app.settings.area.depots().iter().map(|d| (d.code.clone(), d.name.clone())).collect();
    let body = DriversPage { frame: Some(session.frame("drivers")), drivers, depots, weekdays: WEEKDAYS, link };
    Ok(page(status, body.render()))
}

/// `GET /ops/drivers`.
pub(super) async fn list(State(app): State<App>, session: OpsSession) -> PageResult {
    render(&app, &session, None, StatusCode::OK).await
}

/// A whole number from a form field, or a field error at `path`; blank is absent.
fn number(text: Option<&str>, path: &str, errors: &mut FieldErrors) -> Option<i64> {
    let text = text.filter(|t| !t.is_empty())?;
    text.parse().map_err(|_| errors.add(path, "A whole number.")).ok()
}

/// `POST /ops/drivers`: the fleet's `create_driver`; the new driver's link shown once.
pub(super) async fn create(State(app): State<App>, OpsPosted { session, fields }: OpsPosted) -> PageResult {
    let mut errors = FieldErrors::new();
    let capacity_parcels = number(fields.get("capacity_parcels"), "vehicle.capacity_parcels", &mut errors);
    let capacity_kg = number(fields.get("capacity_kg"), "vehicle.capacity_kg", &mut errors);
    errors.into_result().map_err(fail(&session))?;
    let driver = DriverFields {
        name: fields.text("name"),
        phone: fields.text("phone"),
        depot: fields.text("depot"),
        vehicle_name: fields.text("vehicle_name"),
        capacity_parcels,
        capacity_kg,
        shift_start: fields.text("shift_start"),
        shift_end: fields.text("shift_end"),
        weekdays: Some(fields.all("weekdays")),
    };
    let (stored, url) = crate::fleet::create_driver(&app.store, &app.settings, driver, app.clock.now())
        .await
        .map_err(fail(&session))?;
    render(&app, &session, Some((stored.driver.name, url, false)), StatusCode::CREATED).await
}

/// `POST /ops/drivers/{id}/token`: a new link; the driver's earlier ones stop working.
pub(super) async fn reissue(
    State(app): State<App>,
    Path(id): Path<String>,
    OpsPosted { session, .. }: OpsPosted,
) -> PageResult {
    let driver = app.store.driver(&id).await.map_err(|e| fail(&session)(e.into()))?;
    let driver = driver.ok_or_else(|| fail(&session)(Error::NotFound))?;
    let url =
        crate::fleet::reissue_sign_in(&app.store, &app.settings, &id, app.clock.now()).await.map_err(fail(&session))?;
    render(&app, &session, Some((driver.driver.name, url, true)), StatusCode::OK).await
}
