//! The day plans' wire types (CONTRACT §12): requests as a dispatcher sends them and the plan
//! as the API shows it, with instants in the depot city's offset.

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};

use dropslot_core::dispatch::{Plan, PlanStatus, Route, Stop};

/// `POST /ops/plans`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"date": "2026-11-27", "depot": "YYZ1", "kind": "delivery", "time_limit_s": 5}))]
pub struct PlanRequest {
    /// YYYY-MM-DD.
    #[schema(format = Date)]
    pub date: String,
    /// A depot's (warehouse's) code from the area file; it must have coordinates.
    pub depot: String,
    /// `delivery` (depot → drop-offs → depot) or `pick_up` (depot → merchants → depot: their
    /// pick-ups, and the returns due to them that day).
    #[schema(pattern = "^(pick_up|delivery)$")]
    pub kind: String,
    /// The drivers to plan for, each of this depot; default: every driver of the depot who
    /// works on the date's weekday.
    #[serde(default)]
    #[schema(max_items = 500)]
    pub driver_ids: Option<Vec<String>>,
    /// How long the solver may search, 1 to 60 seconds (default 10).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 60)]
    pub time_limit_s: Option<i64>,
}

/// `POST /ops/plans/{id}/moves`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"shipment_unique_id": "DOFF7M2Q9XR4TB", "to_route_id": "PLN….DRV…", "position": 1}))]
pub struct MoveRequest {
    pub shipment_unique_id: String,
    pub to_route_id: String,
    /// The stop's place among the route's stops, from 1 (the first after the depot).
    #[schema(minimum = 1)]
    pub position: i64,
}

/// `POST /ops/plans/{id}/optimize` (the body may be left out).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OptimizeRequest {
    /// 1 to 60 seconds (default 10).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 60)]
    pub time_limit_s: Option<i64>,
    /// Drivers out (CONTRACT §16): their routes not started yet are planned again without
    /// them (each of their stops goes to another route or to `unassigned` with a reason). A
    /// started route keeps its driver and its stops.
    #[serde(default)]
    #[schema(max_items = 500)]
    pub exclude_driver_ids: Vec<String>,
}

/// `POST /ops/routes/{id}/reassign`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"driver_id": "DRV01J9Z3K4M5N6P7Q8R9S0T1"}))]
pub struct ReassignRequest {
    /// Another driver of the plan's depot, working on the plan's date, with no stops in this
    /// plan yet.
    pub driver_id: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WindowView {
    pub from: String,
    pub to: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct StopView {
    pub seq: u32,
    /// `pick_up` (collect at a merchant), `drop_off` (deliver), `return` (hand a failed
    /// delivery's parcels back to its merchant, at the order's pick-up address, in a pick-up
    /// plan), or `depot` (the first and the last stop).
    #[schema(pattern = "^(pick_up|drop_off|return|depot)$")]
    pub kind: &'static str,
    pub shipment_unique_ids: Vec<String>,
    pub address: String,
    pub lat: f64,
    pub lng: f64,
    pub window: WindowView,
    /// When service starts (after waiting, if the driver arrives early); at the depot, when
    /// the route leaves and when it is back.
    pub eta: String,
    pub parcels: u32,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RouteView {
    pub id: String,
    pub driver_id: String,
    pub start: String,
    pub end: String,
    pub distance_m: i64,
    pub duration_s: i64,
    pub stops: Vec<StopView>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct UnassignedView {
    pub shipment_unique_id: String,
    pub reason: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CostView {
    /// The routes' driving time, waiting and service included.
    pub duration_s: i64,
    pub distance_m: i64,
    /// Routes with at least one stop.
    pub routes_used: usize,
    pub stops: usize,
    pub shipments_assigned: usize,
    pub shipments_unassigned: usize,
    /// Where the road times came from: `embedded` or `osrm`.
    pub roads: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PlanView {
    pub id: String,
    /// `draft` or `published`.
    pub status: &'static str,
    pub date: String,
    pub depot: String,
    pub kind: &'static str,
    pub routes: Vec<RouteView>,
    pub unassigned: Vec<UnassignedView>,
    pub cost: CostView,
    pub published_at: Option<String>,
}

/// `GET /ops/plans?date=`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PlanList {
    /// By depot, then kind.
    pub plans: Vec<PlanView>,
}

/// Unix seconds in `tz`, ISO 8601 with the offset.
fn at(seconds: i64, tz: &TimeZone) -> String {
    Timestamp::from_second(seconds).map_or_else(|_| String::new(), |t| dropslot_core::time::local(t, tz))
}

fn stop_view(s: &Stop, tz: &TimeZone) -> StopView {
    StopView {
        seq: s.seq,
        kind: s.kind.as_str(),
        shipment_unique_ids: s.shipment_unique_ids.clone(),
        address: s.address.clone(),
        lat: s.lat,
        lng: s.lng,
        window: WindowView { from: at(s.from, tz), to: at(s.to, tz) },
        eta: at(s.eta, tz),
        parcels: s.parcels,
    }
}

fn route_view(r: &Route, tz: &TimeZone) -> RouteView {
    RouteView {
        id: r.id.clone(),
        driver_id: r.driver_id.clone(),
        start: at(r.start, tz),
        end: at(r.end, tz),
        distance_m: r.distance_m,
        duration_s: r.duration_s,
        stops: r.stops.iter().map(|s| stop_view(s, tz)).collect(),
    }
}

impl PlanView {
    pub fn new(plan: &Plan, tz: &TimeZone) -> Self {
        let (duration_s, distance_m) = plan.totals();
        let used: Vec<&Route> = plan.routes.iter().filter(|r| !r.visits().is_empty()).collect();
        Self {
            id: plan.id.clone(),
            status: match plan.status {
                PlanStatus::Draft => "draft",
                PlanStatus::Published => "published",
            },
            date: plan.date.clone(),
            depot: plan.depot.clone(),
            kind: plan.kind.as_str(),
            routes: plan.routes.iter().map(|r| route_view(r, tz)).collect(),
            unassigned: plan
                .unassigned
                .iter()
                .map(|u| UnassignedView { shipment_unique_id: u.shipment_unique_id.clone(), reason: u.reason.clone() })
                .collect(),
            cost: CostView {
                duration_s,
                distance_m,
                routes_used: used.len(),
                stops: used.iter().map(|r| r.visits().len()).sum(),
                shipments_assigned: plan.routes.iter().map(|r| r.shipments().count()).sum(),
                shipments_unassigned: plan.unassigned.len(),
                roads: plan.roads.clone(),
            },
            published_at: plan.published_at.map(|s| at(s, tz)),
        }
    }
}
