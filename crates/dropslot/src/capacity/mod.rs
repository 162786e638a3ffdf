//! Slot capacity and slot choice (CONTRACT §10): the capacity quotes book against, the admin
//! API that sets per-date limits and shows every slot's fill, and `GET /slots`, the bookable
//! slots of an address for a merchant's checkout. The rules live in
//! `dropslot_core::quote::{capacity, schedule}`; an order's reservation is decided by the
//! store, in the order's own transaction.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use jiff::civil::Date;
use serde::{Deserialize, Deserializer, Serialize};

use crate::app::App;
use crate::auth::admin::Admin;
use crate::auth::publishable::SlotsCaller;
use crate::error::{Envelope, Error, ErrorEnvelope, FieldErrors, Result, envelope};
use crate::http::JsonBody;
use dropslot_core::config::{ServiceArea, Slot};
use dropslot_core::geo::distance::LatLng;
use dropslot_core::quote::capacity::{Capacity, FleetRoom, Limit, Load, Override, Reservation, SlotDate, SlotKind};
use dropslot_core::quote::schedule::{self, Asked, Need};
use dropslot_core::time::iso;
use dropslot_store::Mode;

pub mod embed;

/// The admin capacity routes and `/slots`, under the API prefix.
pub fn routes() -> axum::Router<App> {
    use axum::routing::get;
    axum::Router::new()
        .route(crate::http::api_path!("/admin/capacity"), get(list).put(put))
        .route(crate::http::api_path!("/slots"), get(slots).options(slots_preflight))
}

/// Every slot of the area with a configured limit, as (kind, place, slot).
fn configured(area: &ServiceArea) -> Vec<(SlotKind, &str, &Slot)> {
    let pick_ups =
        area.cities().iter().flat_map(|c| c.pick_up_slots.iter().map(move |s| (SlotKind::PickUp, c.code.as_str(), s)));
    let drop_offs =
        area.zones().iter().flat_map(|z| z.drop_off_slots.iter().map(move |s| (SlotKind::DropOff, z.code.as_str(), s)));
    pick_ups.chain(drop_offs).collect()
}

/// The first and last dates any city can book from `now` (the horizon counted in every
/// time zone: a day either side of UTC's).
fn window(area: &ServiceArea, now: Timestamp) -> (Date, Date) {
    let today = now.to_zoned(jiff::tz::TimeZone::UTC).date();
    let from = today.yesterday().unwrap_or(today);
    let to = today.checked_add(jiff::Span::new().days(i64::from(area.horizon_days()) + 1)).unwrap_or(today);
    (from, to)
}

/// The capacity a quote in `mode` books against at `now`: the overrides of the horizon and
/// the fill of every slot that has a limit in it, read at most once a second per mode (an
/// order's own transaction decides; a quote may see a slot's last place taken up to a second
/// late, and the order then moves on or is refused). Empty, and read from nothing but the
/// overrides, while no slot is limited.
pub async fn snapshot(app: &App, mode: Mode, now: Timestamp) -> Result<Arc<Capacity>> {
    let area = &app.settings.area;
    let (from, to) = window(area, now);
    if let Some(kept) = app.capacity.get(&(mode, from)) {
        return Ok(kept);
    }
    let overrides = app.store.capacity_overrides(from, to).await?;
    let limited: Vec<(SlotKind, &str, &Slot)> =
        configured(area).into_iter().filter(|(_, _, s)| !s.limit().is_unlimited()).collect();
    let snapshot = if limited.is_empty() && overrides.is_empty() {
        Capacity::empty()
    } else {
        let mut slots: Vec<SlotDate> = overrides.keys().cloned().collect();
        let mut date = from;
        while date <= to {
            for (kind, place, slot) in &limited {
                slots.push(SlotDate { kind: *kind, place: (*place).to_string(), slot: slot.code.clone(), date });
            }
            date = date.tomorrow().map_err(|e| Error::Internal(format!("the booking window: {e}")))?;
        }
        slots.sort();
        slots.dedup();
        let used = app.store.slot_fill(mode, slots).await?;
        Capacity::new(overrides, used)
    };
    let snapshot = with_fleet(app, mode, snapshot, from, to).await?;
    app.capacity.put((mode, from), snapshot.clone());
    Ok(snapshot)
}

/// The capacity with the fleet depots' tentative plans of `from..=to` (issue 45), as the
/// store keeps them (checked against their stored versions once a second), kept with the
/// limits for a second like them: a quote may see a place the last second's orders took, and
/// the order's own transaction decides (a refused order drops the kept capacity and is quoted
/// again). Live orders only: the sandbox has no fleet, and books on the limits alone.
async fn with_fleet(app: &App, mode: Mode, kept: Capacity, from: Date, to: Date) -> Result<Arc<Capacity>> {
    let area = &app.settings.area;
    let depots: Vec<&str> =
        area.depots().iter().map(|d| d.code.as_str()).filter(|c| app.settings.capacity.fleet(c)).collect();
    if mode != Mode::Live || depots.is_empty() {
        return Ok(Arc::new(kept));
    }
    let mut room = FleetRoom::default();
    for z in area.zones() {
        if depots.contains(&z.warehouse.as_str()) {
            room.zones.insert(z.code.clone(), z.warehouse.clone());
        }
    }
    for depot in depots {
        let mut date = from;
        while date <= to {
            if let Some(plan) = app.store.tentative_plan(depot, date).await? {
                room.plans
                    .insert((depot.to_string(), date), plan as Arc<dyn dropslot_core::quote::capacity::FleetPlan>);
            }
            date = date.tomorrow().map_err(|e| Error::Internal(format!("the booking window: {e}")))?;
        }
    }
    Ok(Arc::new(kept.with_fleet(Arc::new(room))))
}

/// Drops the kept capacity: the next quote reads it anew (after an override, a deletion, or
/// an order that found its slot full).
pub fn forget(app: &App) {
    app.capacity.clear();
}

/// Counts an order this process has just written in the kept capacity of its mode, so this
/// process's next quotes see its places taken at once (other processes' within a second).
pub fn taken(app: &App, mode: Mode, reservations: &[Reservation]) {
    app.capacity.modify(|(m, _), kept| {
        if *m == mode && !kept.is_empty() {
            let c = Arc::make_mut(kept);
            for r in reservations {
                c.add(&r.at, r.want);
            }
        }
    });
}

/// What a slot holds.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct Fill {
    pub stops: u32,
    pub parcels: u32,
}

impl From<Load> for Fill {
    fn from(l: Load) -> Fill {
        Fill { stops: l.stops, parcels: l.parcels }
    }
}

/// A slot on a date: its limits (`null` = unlimited) and what it holds.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = SlotCapacity)]
pub(crate) struct SlotView {
    /// The zone, for a drop-off slot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The city, for a pick-up slot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub city: Option<String>,
    pub time_slot_code: String,
    pub name: String,
    pub date: String,
    /// The stop limit that holds on the date (`null` = unlimited).
    pub stops: Option<u32>,
    /// The parcel limit that holds on the date (`null` = unlimited; always `null` for a pick-up slot).
    pub parcels: Option<u32>,
    /// Whether a per-date override sets either limit.
    pub overridden: bool,
    /// What live orders hold in it.
    pub fill: Fill,
    /// What test (sandbox) orders hold in it: the sandbox has the same limits, counted apart.
    pub test_fill: Fill,
    /// A drop-off slot of a depot that books on its fleet (`[capacity] mode = "fleet"`): its
    /// room as the depot's tentative plan of the date sees it (live orders).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetView>,
}

/// A slot's room as the fleet sees it: about how many more stops of the day's average load its
/// window can take on the routes of the drivers working that day, and what binds first when
/// none (`no_van`, `vans_parcels`, `vans_kg`, `shift_hours`, `window`). An estimate: whether a
/// stop fits depends on where it is, which the order's own check decides.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct FleetView {
    pub depot: String,
    pub stops: u32,
    pub binds: Option<&'static str>,
    /// The drivers working that day.
    pub vans: usize,
    /// The drop-offs the tentative plan holds that day, every slot.
    pub booked: usize,
}

/// The fleet's room in drop-off slot `slot` of zone `zone` on `date`, when its depot books on
/// its fleet.
async fn fleet_view(app: &App, zone: &str, slot: &Slot, date: Date) -> Result<Option<FleetView>> {
    let area = &app.settings.area;
    let Some(z) = area.zone_by_code(zone).map(|i| area.zone(i)) else { return Ok(None) };
    if !app.settings.capacity.fleet(&z.warehouse) {
        return Ok(None);
    }
    let Some(plan) = app.store.tentative_plan(&z.warehouse, date).await? else { return Ok(None) };
    let tz = &area.city(z.city).tz;
    let at = |m: u16| schedule::at_minutes(date, m, tz).map(|t| t.timestamp().as_second());
    let (Some(from), Some(to)) = (at(slot.from_time), at(slot.to_time)) else { return Ok(None) };
    let room = plan.room_in(from, to);
    Ok(Some(FleetView {
        depot: z.warehouse.clone(),
        stops: room.stops,
        binds: room.binds.map(dropslot_core::dispatch::tentative::Binding::as_str),
        vans: plan.vans().len(),
        booked: plan.len(),
    }))
}

/// Every slot of the area on `date` (or the one at `only`), with its limits and fill.
pub(crate) async fn views(app: &App, date: Date, only: Option<&SlotDate>) -> Result<Vec<SlotView>> {
    let overrides = app.store.capacity_overrides(date, date).await?;
    let slots: Vec<(SlotDate, Limit, &Slot)> = configured(&app.settings.area)
        .into_iter()
        .map(|(kind, place, slot)| {
            (SlotDate { kind, place: place.to_string(), slot: slot.code.clone(), date }, slot.limit(), slot)
        })
        .filter(|(at, _, _)| only.is_none_or(|o| o == at))
        .collect();
    let keys: Vec<SlotDate> = slots.iter().map(|(at, _, _)| at.clone()).collect();
    let live = app.store.slot_fill(Mode::Live, keys.clone()).await?;
    let test = app.store.slot_fill(Mode::Test, keys).await?;
    let mut fleet = Vec::with_capacity(slots.len());
    for (at, _, slot) in &slots {
        fleet.push(if at.kind == SlotKind::DropOff { fleet_view(app, &at.place, slot, at.date).await? } else { None });
    }
    Ok(slots
        .into_iter()
        .zip(fleet)
        .map(|((at, configured, slot), fleet)| {
            let o = overrides.get(&at);
            let limit = o.map_or(configured, |o| o.over(configured));
            let drop_off = at.kind == SlotKind::DropOff;
            SlotView {
                zone: drop_off.then(|| at.place.clone()),
                city: (!drop_off).then(|| at.place.clone()),
                time_slot_code: at.slot.clone(),
                name: slot.name.clone(),
                date: at.date.to_string(),
                stops: limit.stops,
                parcels: limit.parcels,
                overridden: o.is_some_and(|o| o.stops.is_some() || o.parcels.is_some()),
                fill: live.get(&at).copied().unwrap_or_default().into(),
                test_fill: test.get(&at).copied().unwrap_or_default().into(),
                fleet,
            }
        })
        .collect())
}

pub(crate) fn date_at(path: &str, value: &str) -> Result<Date> {
    value
        .parse::<Date>()
        .ok()
        .filter(|_| value.len() == 10)
        .ok_or_else(|| Error::invalid(path, "A date is written YYYY-MM-DD."))
}

#[derive(Serialize, utoipa::ToSchema)]
struct CapacityList {
    date: String,
    /// Every city's pick-up slots, then every zone's drop-off slots.
    slots: Vec<SlotView>,
}

/// `GET /admin/capacity?date=`: every slot's limits and fill on a date.
#[utoipa::path(get, path = "/admin/capacity", tag = "Admin", operation_id = "list_capacity",
    summary = "Every slot's limits and fill on a date",
    description = "Limits (configured, or the date's override) and what live and test orders hold in each slot. When no admin token is configured, every admin route answers 404.",
    security(("admin_token" = [])),
    params(("date" = String, Query, format = Date, description = "YYYY-MM-DD (required).")),
    responses(
        (status = 200, description = "The slots.", body = Envelope<CapacityList>),
        (status = 404, description = "No admin token is configured.", body = ErrorEnvelope),
        (status = 422, description = "A missing or malformed `query.date`, or another parameter.", body = ErrorEnvelope),
    ))]
async fn list(_: Admin, State(app): State<App>, RawQuery(raw): RawQuery) -> Result<Response> {
    let q = crate::http::query_params(raw.as_deref(), &["date"])?;
    let date = date_at("query.date", q.get("date").map_or("", String::as_str))?;
    let slots = views(&app, date, None).await?;
    Ok(envelope(200, "Slot capacity.", &CapacityList { date: date.to_string(), slots }).into_response())
}

/// A limit as a request gives it.
#[derive(Debug, Default, Clone, Copy)]
enum Given {
    /// Left out: the configured limit.
    #[default]
    Configured,
    /// `null`: unlimited that date.
    Unlimited,
    Limit(i64),
}

impl<'de> Deserialize<'de> for Given {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Given, D::Error> {
        Ok(Option::<i64>::deserialize(d)?.map_or(Given::Unlimited, Given::Limit))
    }
}

/// A per-date override of one slot's limits.
#[derive(Deserialize, utoipa::ToSchema)]
#[schema(example = json!({"zone": "TOR-DT", "time_slot_code": "TOR-DT-PM", "date": "2026-11-23", "stops": 3, "parcels": 10}))]
struct CapacityPut {
    /// A zone's code, for one of its drop-off slots (or give `city`).
    zone: Option<String>,
    /// A city's code, for one of its pick-up slots (or give `zone`).
    city: Option<String>,
    #[schema(required = true, nullable = false)]
    time_slot_code: Option<String>,
    /// YYYY-MM-DD.
    #[schema(required = true, nullable = false)]
    date: Option<String>,
    /// Stops that date: a whole number from 0, `null` for unlimited, absent for the configured limit.
    #[serde(default)]
    #[schema(value_type = Option<u32>, minimum = 0, maximum = 1_000_000)]
    stops: Given,
    /// Parcels that date (drop-off slots only): as `stops`.
    #[serde(default)]
    #[schema(value_type = Option<u32>, minimum = 0, maximum = 1_000_000)]
    parcels: Given,
}

/// The largest limit accepted.
const MAX_LIMIT: i64 = 1_000_000;

/// `PUT /admin/capacity`: sets one slot's limits on one date.
#[utoipa::path(put, path = "/admin/capacity", tag = "Admin", operation_id = "put_capacity",
    summary = "Set a slot's limits on a date",
    description = "Each limit: a number, `null` for unlimited that date, or absent for the configured limit. The answer shows the limits that now hold and the slot's fill. Orders already accepted stay: a limit below the fill only stops new ones. When no admin token is configured, every admin route answers 404.",
    security(("admin_token" = [])), request_body = CapacityPut,
    responses(
        (status = 200, description = "The slot on that date.", body = Envelope<SlotView>),
        (status = 404, description = "No admin token is configured.", body = ErrorEnvelope),
        (status = 422, description = "A rule broken, at its path: `zone` or `city` (one of them, known), `time_slot_code` (a slot of it), `date`, `stops`, `parcels` (0–1000000; none for a pick-up slot).", body = ErrorEnvelope),
    ))]
async fn put(_: Admin, State(app): State<App>, JsonBody(body, _): JsonBody<CapacityPut>) -> Result<Response> {
    let area = &app.settings.area;
    let mut errors = FieldErrors::new();
    let place = match (body.zone.as_deref(), body.city.as_deref()) {
        (Some(_), Some(_)) | (None, None) => {
            errors.add("zone", "Give a zone (for a drop-off slot) or a city (for a pick-up slot).");
            None
        }
        (Some(z), None) => {
            let found = area.zone_by_code(z).map(|i| (SlotKind::DropOff, z, &area.zone(i).drop_off_slots));
            if found.is_none() {
                errors.add("zone", "There is no zone with this code.");
            }
            found
        }
        (None, Some(c)) => {
            let found = area.city_by_code(c).map(|i| (SlotKind::PickUp, c, &area.city(i).pick_up_slots));
            if found.is_none() {
                errors.add("city", "There is no city with this code.");
            }
            found
        }
    };
    let code = body.time_slot_code.as_deref().unwrap_or("");
    if body.time_slot_code.is_none() {
        errors.add("time_slot_code", "The time slot code is required.");
    } else if let Some((_, _, slots)) = place {
        if !slots.iter().any(|s| s.code == code) {
            errors.add("time_slot_code", "This is not a time slot of that zone or city.");
        }
    }
    let date = body.date.as_deref().and_then(|d| date_at("date", d).ok());
    match (&body.date, date) {
        (None, _) => errors.add("date", "The date is required (YYYY-MM-DD)."),
        (Some(_), None) => errors.add("date", "A date is written YYYY-MM-DD."),
        (Some(_), Some(_)) => {}
    }
    // The override's part: `None` inherits the configuration, `Some(None)` is unlimited.
    let mut part = |name: &str, v: Given| match v {
        Given::Configured => None,
        Given::Unlimited => Some(None),
        Given::Limit(n) => {
            let n = u32::try_from(n).ok().filter(|n| i64::from(*n) <= MAX_LIMIT);
            if n.is_none() {
                errors.add(name, format!("A limit is a whole number from 0 to {MAX_LIMIT}, or null for unlimited."));
            }
            n.map(Some)
        }
    };
    let stops = part("stops", body.stops);
    let parcels = part("parcels", body.parcels);
    if place.is_some_and(|(kind, _, _)| kind == SlotKind::PickUp) && !matches!(body.parcels, Given::Configured) {
        errors.add("parcels", "A pick-up slot is limited in stops only.");
    }
    errors.into_result()?;
    let (Some((kind, place, _)), Some(date)) = (place, date) else {
        return Err(Error::Internal("capacity: a validated request lost a field".into()));
    };
    let at = SlotDate { kind, place: place.to_string(), slot: code.to_string(), date };
    app.store.set_capacity_override(at.clone(), Override { stops, parcels }, app.clock.now()).await?;
    forget(&app);
    let view = views(&app, date, Some(&at)).await?.pop().ok_or(Error::NotFound)?;
    Ok(envelope(200, "Slot capacity saved.", &view).into_response())
}

/// What is left in a slot (`null` where unlimited).
#[derive(Serialize, utoipa::ToSchema)]
struct Remaining {
    stops: Option<u32>,
    parcels: Option<u32>,
}

/// A bookable drop-off slot.
#[derive(Serialize, utoipa::ToSchema)]
struct BookableSlot {
    scheduled_date: String,
    time_slot_code: String,
    name: String,
    time_slot_datetime_start: String,
    time_slot_datetime_end: String,
    /// What is left; `null` when the slot is unlimited.
    remaining: Option<Remaining>,
}

/// The bookable slots, earliest first.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(transparent)]
struct BookableSlots(Vec<BookableSlot>);

/// `GET /slots?text=&from=&days=`: the drop-off slots an address can be booked in.
#[utoipa::path(get, path = "/slots", tag = "Orders", operation_id = "list_slots",
    summary = "The bookable drop-off slots of an address",
    description = "For a checkout page: each open drop-off slot of the address's zone with room for one more drop-off, on each day the zone's city operates, from `from` for `days` days (within the booking horizon), with what remains. A slot is listed when a pick-up in the same city that day can reach it (CONTRACT §10); ask for it with `scheduled_date` and `time_slot_code` on the drop-off. Called from the merchant's server with its secret token, or from its checkout page with a publishable key (`pk_…`; the slot picker `/embed/slots.js` does this): the page's `Origin` must be one the key lists, and the answer then carries `Access-Control-Allow-Origin`; a preflight (`OPTIONS`) is answered for the origins some key lists.",
    security(("client_token" = []), ("publishable_key" = [])),
    params(
        ("text" = String, Query, min_length = 1, max_length = 500, description = "The address, or just its postal code (required)."),
        ("from" = Option<String>, Query, format = Date, description = "YYYY-MM-DD; default today in the address's city."),
        ("days" = Option<u32>, Query, minimum = 1, maximum = 14, description = "Days from `from`, 1 to the booking horizon (default the horizon, 14)."),
    ),
    responses(
        (status = 200, description = "The bookable slots, earliest first.", body = Envelope<BookableSlots>),
        (status = 403, description = "A publishable key from an origin it does not list, or without `Origin` (no CORS headers); a secret token sent from a web page (with `Origin`); an `ops`, `operator` or `driver` token.", body = ErrorEnvelope),
        (status = 422, description = "A bad query, at `query.<name>`: an address that cannot be placed in the service area, a malformed date, days out of range, a parameter given twice or unknown.", body = ErrorEnvelope),
    ))]
async fn slots(State(app): State<App>, caller: SlotsCaller, RawQuery(raw): RawQuery) -> Response {
    let mut res = bookable(&app, caller.mode, raw.as_deref()).await.into_response();
    if let Some(origin) = caller.cors {
        crate::auth::publishable::allow(&mut res, origin);
    }
    res
}

/// `OPTIONS /slots`: a browser's CORS preflight (`auth::publishable::preflight`).
async fn slots_preflight(State(app): State<App>, req: axum::extract::Request) -> Result<Response> {
    let (parts, _) = req.into_parts();
    crate::auth::publishable::preflight(&app, &parts).await
}

/// The bookable slots of `GET /slots` in `mode`.
async fn bookable(app: &App, mode: Mode, raw: Option<&str>) -> Result<Response> {
    let area = &app.settings.area;
    let q = crate::http::query_params(raw, &["text", "from", "days"])?;
    let text = q.get("text").map_or("", |t| t.trim());
    if text.is_empty() || text.chars().count() > 500 {
        return Err(Error::invalid("query.text", "The address text is required (1 to 500 characters)."));
    }
    let location = app.geocoder.locate(text, area).map_err(|e| Error::invalid("query.text", e.message()))?;
    let zone = area.zone(location.zone);
    let city = area.city(zone.city);
    let now = app.clock.now();
    let today = now.to_zoned(city.tz.clone()).date();
    let horizon = area.horizon_days();
    let from = match q.get("from") {
        Some(f) => date_at("query.from", f)?,
        None => today,
    };
    let days = match q.get("days") {
        Some(d) => d.parse::<u16>().ok().filter(|n| (1..=horizon).contains(n)).ok_or_else(|| {
            Error::invalid("query.days", format!("Days is a whole number from 1 to {horizon} (the booking horizon)."))
        })?,
        None => horizon,
    };
    let capacity = snapshot(app, mode, now).await?;
    let mut out = Vec::new();
    let mut date = from;
    for _ in 0..days {
        for slot in &zone.drop_off_slots {
            let asked = Asked { date, slot: slot.code.clone() };
            let need = Need {
                zone,
                city,
                parcels: 1,
                asked: Some(&asked),
                at: LatLng::parse(&location.lat, &location.lng),
                grams: 0,
            };
            let Ok((_, booked)) = schedule::book(city, &[need], now, horizon, &capacity) else { continue };
            let Some(b) = booked.first() else { continue };
            let at = SlotDate { kind: SlotKind::DropOff, place: zone.code.clone(), slot: slot.code.clone(), date };
            let limit = capacity.limit(slot.limit(), &at);
            let (stops, parcels) = limit.remaining(capacity.used(&at));
            out.push(BookableSlot {
                scheduled_date: date.to_string(),
                time_slot_code: slot.code.clone(),
                name: slot.name.clone(),
                time_slot_datetime_start: iso(&b.start),
                time_slot_datetime_end: iso(&b.end),
                remaining: (!limit.is_unlimited()).then_some(Remaining { stops, parcels }),
            });
        }
        let Ok(next) = date.tomorrow() else { break };
        date = next;
    }
    Ok(envelope(200, "Bookable slots.", &BookableSlots(out)).into_response())
}
