//! What a driver's day reads as (CONTRACT §13): today's published routes of the driver, each
//! stop with its shipments as they are now — their parcels, the recipient's instruction, and
//! where a shipment went when its slot changed after the route was published.

use jiff::tz::TimeZone;
use serde::Serialize;

use crate::app::App;
use crate::error::{Error, Result};
use dropslot_core::dispatch::{self, Route, Stop, StopKind};
use dropslot_store::{StoredShipment, Visibility};

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DriverParcel {
    pub pick_up_code: String,
    pub custom_code: Option<String>,
}

/// Where a shipment went after its route was published: the slot it is booked into now (a
/// delivery's, or a return's pick-up slot). It is no longer this stop's: the route's start
/// leaves it at the depot, and a plan of its new date (or slot) takes it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DriverMoved {
    /// YYYY-MM-DD: the route's date when only its slot changed.
    #[schema(format = Date)]
    pub date: String,
    /// The slot's name (`14:00 - 18:00`).
    pub slot: String,
    pub window: DriverWindow,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DriverShipment {
    pub unique_id: String,
    /// Its state now (CONTRACT §4).
    pub status: String,
    /// The merchant's delivery note for the driver (the drop-off address's `description`).
    pub note: Option<String>,
    /// At a drop-off stop: the recipient's delivery instruction (safe place, door code; CONTRACT
    /// §15), as it is at this read; null when none, and at other stops.
    pub instruction: Option<String>,
    /// Set when the shipment left this stop after the route was published (rescheduled to
    /// another day or slot, a re-attempt or a return booked again): where it went.
    pub moved_to: Option<DriverMoved>,
    /// Its live parcels.
    pub parcels: Vec<DriverParcel>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DriverWindow {
    pub from: String,
    pub to: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Navigation {
    /// `geo:` URI for the phone's maps app.
    pub geo: String,
    /// Directions on OpenStreetMap.
    pub maps: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DriverStop {
    pub seq: u32,
    /// `pick_up` (collect at a merchant), `drop_off` (deliver), or `return` (hand a failed
    /// delivery's parcels back to its merchant: `to: returned` with who took them).
    #[schema(pattern = "^(pick_up|drop_off|return)$")]
    pub kind: &'static str,
    pub window: DriverWindow,
    pub eta: String,
    pub address: String,
    /// The receiver; at a pick-up or a return, the merchant's contact.
    pub receiver: String,
    /// `tel:` link text: the receiver's phone as given.
    pub phone: String,
    pub lat: f64,
    pub lng: f64,
    pub navigation: Navigation,
    pub parcels: u32,
    /// At a drop-off, its shipments; at a pick-up, the drop-off shipments collected there
    /// (each parcel to scan as picked up); at a return, the drop-off shipments handed back.
    pub shipments: Vec<DriverShipment>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DriverRoute {
    pub id: String,
    pub plan_id: String,
    pub start: String,
    pub end: String,
    pub distance_m: i64,
    /// The stops in order, the depot left out.
    pub stops: Vec<DriverStop>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DriverDay {
    /// Today in the driver's depot's city.
    pub date: String,
    pub routes: Vec<DriverRoute>,
}

impl DriverDay {
    /// Every shipment of the day's stops of `kind` still on them (not moved elsewhere).
    pub(crate) fn on_stops(&self, kind: StopKind) -> impl Iterator<Item = &DriverShipment> {
        self.routes
            .iter()
            .flat_map(|r| &r.stops)
            .filter(move |s| s.kind == kind.as_str())
            .flat_map(|s| &s.shipments)
            .filter(|sh| sh.moved_to.is_none())
    }
}

pub(crate) fn at(seconds: i64, tz: &TimeZone) -> String {
    jiff::Timestamp::from_second(seconds).map_or_else(|_| String::new(), |t| dropslot_core::time::local(t, tz))
}

/// The driver's depot's time zone (UTC if the depot left the area file).
async fn zone_of(app: &App, driver_id: &str) -> Result<TimeZone> {
    let driver = app.store.driver(driver_id).await?.ok_or(Error::Unauthorized)?;
    let area = &app.settings.area;
    Ok(area
        .depot_zones(&driver.driver.depot)
        .next()
        .and_then(|z| area.cities().get(z.city))
        .map_or(TimeZone::UTC, |c| c.tz.clone()))
}

/// Today's published routes of this driver, each stop with its shipments as they are now.
pub(crate) async fn today(app: &App, driver_id: &str) -> Result<DriverDay> {
    let (date, tz, planned) = planned_today(app, driver_id).await?;
    let mut routes = Vec::with_capacity(planned.len());
    for (plan_id, r) in &planned {
        routes.push(route_view(app, plan_id, r, &tz).await?);
    }
    Ok(DriverDay { date: date.to_string(), routes })
}

/// Today's published routes of this driver as their plans hold them (plan id, route), with
/// the date and its zone: what a membership check needs, without reading each shipment.
pub(crate) async fn planned_today(
    app: &App,
    driver_id: &str,
) -> Result<(jiff::civil::Date, TimeZone, Vec<(String, Route)>)> {
    let tz = zone_of(app, driver_id).await?;
    let date = app.clock.now().to_zoned(tz.clone()).date();
    let mut routes = Vec::new();
    for stored in app.store.driver_plans(driver_id, date).await? {
        let plan_id = &stored.plan.id;
        routes.extend(
            stored.plan.routes.iter().filter(|r| r.driver_id == driver_id).map(|r| (plan_id.clone(), r.clone())),
        );
    }
    Ok((date, tz, routes))
}

/// Unix seconds of a stored ISO 8601 instant.
fn seconds(at: &str) -> Option<i64> {
    at.parse::<jiff::Timestamp>().ok().map(jiff::Timestamp::as_second)
}

/// Where `sh`, listed at `stop`, is booked now if that is no longer the stop's slot: its
/// delivery slot at a drop-off, its return slot at a return (the core's rule, `moved_off`).
fn moved(stop: &Stop, sh: &StoredShipment) -> Option<DriverMoved> {
    let d = &sh.drop_off;
    let (date, slot, from, to) = match stop.kind {
        StopKind::DropOff => (&d.scheduled_date, &d.slot_name, &d.start_at, &d.end_at),
        StopKind::Return => {
            let r = d.return_slot.as_ref()?;
            (&r.date, &r.slot_name, &r.start_at, &r.end_at)
        }
        StopKind::PickUp | StopKind::Depot => return None,
    };
    let window = (seconds(from)?, seconds(to)?);
    dispatch::moved_off(stop, window).then(|| DriverMoved {
        date: date.clone(),
        slot: slot.clone(),
        window: DriverWindow { from: from.clone(), to: to.clone() },
    })
}

fn shipment_view(stop: &Stop, unique_id: String, found: Option<StoredShipment>) -> DriverShipment {
    let Some(sh) = found else {
        return DriverShipment {
            unique_id,
            status: String::new(),
            note: None,
            instruction: None,
            moved_to: None,
            parcels: Vec::new(),
        };
    };
    let text = |t: &Option<String>| t.clone().filter(|n| !n.trim().is_empty());
    DriverShipment {
        unique_id,
        status: sh.drop_off.status.as_str().into(),
        note: text(&sh.drop_off.address.description),
        instruction: if stop.kind == StopKind::DropOff { text(&sh.drop_off.instruction) } else { None },
        moved_to: moved(stop, &sh),
        parcels: sh
            .parcels
            .iter()
            .map(|p| DriverParcel { pick_up_code: p.pick_up_code.clone(), custom_code: p.custom_code.clone() })
            .collect(),
    }
}

async fn route_view(app: &App, plan_id: &str, r: &Route, tz: &TimeZone) -> Result<DriverRoute> {
    let mut stops = Vec::with_capacity(r.visits().len());
    for s in r.visits() {
        // A drop-off or a return stop lists its shipments; a pick-up stop the drop-offs its
        // pick-ups collect (what the driver scans at the merchant).
        let mut members = Vec::with_capacity(s.shipment_unique_ids.len());
        for unique_id in &s.shipment_unique_ids {
            match s.kind {
                StopKind::DropOff | StopKind::Return => members.push(unique_id.clone()),
                StopKind::PickUp => members.extend(app.store.pick_up_members(unique_id).await?),
                StopKind::Depot => {}
            }
        }
        let mut shipments = Vec::with_capacity(members.len());
        for unique_id in members {
            let found = app.store.shipment(Visibility::Ops, &unique_id).await?;
            shipments.push(shipment_view(s, unique_id, found));
        }
        let (lat, lng) = (s.lat, s.lng);
        stops.push(DriverStop {
            seq: s.seq,
            kind: s.kind.as_str(),
            window: DriverWindow { from: at(s.from, tz), to: at(s.to, tz) },
            eta: at(s.eta, tz),
            address: s.address.clone(),
            receiver: s.receiver.clone(),
            phone: s.phone.clone(),
            lat,
            lng,
            navigation: Navigation {
                geo: format!("geo:{lat},{lng}?q={lat},{lng}"),
                maps: format!("https://www.openstreetmap.org/directions?to={lat}%2C{lng}"),
            },
            parcels: s.parcels,
            shipments,
        });
    }
    Ok(DriverRoute {
        id: r.id.clone(),
        plan_id: plan_id.to_string(),
        start: at(r.start, tz),
        end: at(r.end, tz),
        distance_m: r.distance_m,
        stops,
    })
}
