//! `GET /shipment-states`: the transition table as data, public, for integrators. (A client
//! reads its shipments through `orders`, which owns the order-creation shape.)

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use serde::Serialize;

use crate::app::App;
use crate::error::{Envelope, envelope};
use dropslot_core::shipments::{DROP_OFF_TRANSITIONS, PICK_UP_TRANSITIONS, Status};

pub fn routes() -> axum::Router<App> {
    use axum::routing::get;
    axum::Router::new().route(crate::http::api_path!("/shipment-states"), get(states))
}

#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = ShipmentStates)]
struct Table {
    statuses: Vec<StatusInfo>,
    drop_off: Machine,
    pick_up: Machine,
    attempts: Attempts,
}

#[derive(Serialize, utoipa::ToSchema)]
struct StatusInfo {
    status: Status,
    #[serde(rename = "final")]
    is_final: bool,
    event: String,
}

#[derive(Serialize, utoipa::ToSchema)]
struct Machine {
    initial: Status,
    transitions: Vec<Edge>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct Edge {
    from: Status,
    #[schema(value_type = Vec<Status>)]
    to: &'static [Status],
}

#[derive(Serialize, utoipa::ToSchema)]
struct Attempts {
    default_max: u32,
    rule: &'static str,
}

fn machine(table: &'static [(Status, &'static [Status])]) -> Machine {
    Machine {
        initial: Status::Scheduled,
        transitions: table.iter().map(|(from, to)| Edge { from: *from, to }).collect(),
    }
}

/// `GET /shipment-states`: the CONTRACT §4 table as data. Public and cacheable: it changes
/// only with a release.
#[utoipa::path(get, path = "/shipment-states", tag = "Shipments", operation_id = "shipment_states",
    summary = "The shipment statuses and their transition table",
    description = "Public (no token) and cacheable for an hour: it changes only with a release.",
    responses((status = 200, description = "Every status, the drop-off and pick-up transition tables, the attempts rule.", body = Envelope<Table>)))]
async fn states(State(app): State<App>) -> Response {
    let table = Table {
        statuses: Status::ALL
            .into_iter()
            .map(|s| StatusInfo { status: s, is_final: s.is_final(), event: format!("same.shipment.{s}") })
            .collect(),
        drop_off: machine(DROP_OFF_TRANSITIONS),
        pick_up: machine(PICK_UP_TRANSITIONS),
        attempts: Attempts {
            default_max: app.settings.limits.max_delivery_attempts,
            rule: "attempts rises by one each time a shipment leaves in_transit; failed -> to_attempt only while attempts < max_attempts",
        },
    };
    let mut res = envelope(200, "Shipment states and transitions.", &table);
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=3600"));
    res
}
