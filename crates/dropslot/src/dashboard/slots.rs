//! The dashboard's slots page (issue 28): every pick-up and drop-off slot of the next days,
//! with its limits and what the signed-in mode's orders hold in it.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;

use super::{Frame, PageResult, Session, fail, page};
use crate::app::App;
use crate::capacity::{SlotView, views};
use dropslot_store::Mode;

/// Days shown, today included.
const DAYS: usize = 7;

/// One row: a slot on a date, its limits, and this mode's fill.
struct Row {
    date: String,
    place: String,
    code: String,
    name: String,
    stops: String,
    parcels: String,
    held_stops: u32,
    held_parcels: u32,
    full: bool,
    /// The fleet's room (live mode, a fleet depot): "about N stops" and what binds.
    fleet: Option<String>,
}

#[derive(Template)]
#[template(path = "dashboard/slots.html")]
struct SlotsPage {
    frame: Option<Frame>,
    rows: Vec<Row>,
}

fn limit(l: Option<u32>) -> String {
    l.map_or_else(|| "unlimited".to_string(), |n| n.to_string())
}

fn row(v: SlotView, mode: Mode) -> Row {
    let held = if mode == Mode::Live { v.fill } else { v.test_fill };
    let full = v.stops.is_some_and(|s| held.stops >= s) || v.parcels.is_some_and(|p| held.parcels >= p);
    let fleet = v.fleet.filter(|_| mode == Mode::Live).map(|f| match f.binds {
        Some(b) if f.stops == 0 => format!("full ({}) · {} vans", b.replace('_', " "), f.vans),
        _ => format!("about {} more stops · {} vans", f.stops, f.vans),
    });
    Row {
        date: v.date,
        place: v.zone.or(v.city).unwrap_or_default(),
        code: v.time_slot_code,
        name: v.name,
        stops: limit(v.stops),
        parcels: limit(v.parcels),
        held_stops: held.stops,
        held_parcels: held.parcels,
        full,
        fleet,
    }
}

/// `GET /dashboard/slots`.
pub(super) async fn list(State(app): State<App>, session: Session) -> PageResult {
    let mut date = app.clock.now().to_zoned(jiff::tz::TimeZone::UTC).date();
    let mut rows = Vec::new();
    for _ in 0..DAYS {
        let day = views(&app, date, None).await.map_err(fail(&session))?;
        rows.extend(day.into_iter().map(|v| row(v, session.scope.mode)));
        let Ok(next) = date.tomorrow() else { break };
        date = next;
    }
    Ok(page(StatusCode::OK, SlotsPage { frame: Some(session.frame("slots")), rows }.render()))
}
