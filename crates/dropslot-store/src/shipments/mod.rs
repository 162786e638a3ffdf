//! Records of the shipment lifecycle crossing the storage seam: what a sandbox scenario or an
//! ops move reports, and the orders, shipments and events read back for the client API and
//! the tracking page. Plain data.

use crate::StoredDropOffAddress;
use crate::{LabelKind, LabelSource, OrderFilter, Scope, StoreResult};
use async_trait::async_trait;
use dropslot_core::ids::{CustomCode, DropOffShipmentId, OrderId, PickUpShipmentId, ShipmentOrderId};
use dropslot_core::quote::Totals;
use dropslot_core::shipments::{Actor, Proof, Refusal, Status};
use jiff::Timestamp;
use jiff::civil::Date;

/// Which shipments a read or a move may touch: one tenant's (a client token), or the live
/// shipments of every client (operations staff, the courier's own people).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    Tenant(Scope),
    Ops,
}

/// The sandbox selectors, combined with OR (CONTRACT §6).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    pub unique_ids: Vec<String>,
    pub ids: Vec<i64>,
    pub date: Option<Date>,
}

/// What a scenario did to one selected shipment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScenarioResult {
    Affected { id: DropOffShipmentId, unique_id: String, from: Status, to: Status },
    Skipped { id: DropOffShipmentId, unique_id: String, status: Status, reason: String },
}

/// The outcome of an ops move or a pick-up scan: by default with the moved drop-off
/// shipment's tracking code (to read it back); an ops move returns the shipment itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveOutcome<T = String> {
    NotFound,
    Refused(Refusal),
    Moved(T),
}

/// An order read back with its shipments (newest-first listing keeps `id` for the cursor).
#[derive(Debug, Clone)]
pub struct StoredOrder {
    pub id: OrderId,
    pub unique_id: String,
    pub created_at: String,
    pub shipments: Vec<StoredShipment>,
}

#[derive(Debug, Clone)]
pub struct StoredPickUp {
    pub id: PickUpShipmentId,
    pub unique_id: String,
    pub label_token: String,
    pub scheduled_date: String,
    pub start_at: String,
    pub end_at: String,
    pub status: Status,
    /// The pick-up slot's display name and the address text (for webhook bodies).
    pub slot_name: String,
    pub address_text: String,
    /// How the pick-up address was located (its stored `located_by`).
    pub address_located_by: dropslot_core::geo::LocatedBy,
}

/// A drop-off shipment with its shipment order, pick-up leg, live parcels and events.
#[derive(Debug, Clone)]
pub struct StoredShipment {
    pub order_unique_id: String,
    /// Its position among its order's drop-off shipments (`drop_off_index` of its parcels).
    pub drop_off_index: usize,
    pub shipment_order: ShipmentOrderId,
    pub shipment_order_unique_id: String,
    pub totals: Totals,
    pub pick_up: StoredPickUp,
    pub drop_off: StoredDropOff,
    /// Live parcels, in their order in the request.
    pub parcels: Vec<StoredParcel>,
    /// The drop-off shipment's events, oldest first.
    pub events: Vec<StoredEvent>,
    /// Its live ETA, while it is on a published delivery route (CONTRACT §14).
    pub eta: Option<StoredEta>,
}

/// A drop-off's live ETA (CONTRACT §14), Unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredEta {
    pub arrival_ms: i64,
    pub from_ms: i64,
    pub to_ms: i64,
    /// The arrival is after the slot's end (the window is not clipped to it).
    pub late: bool,
    /// Stops of its route not served yet before its own.
    pub stops_before: u32,
}

#[derive(Debug, Clone)]
pub struct StoredDropOff {
    pub id: DropOffShipmentId,
    pub unique_id: String,
    pub label_token: String,
    pub scheduled_date: String,
    pub slot_code: String,
    pub slot_name: String,
    pub start_at: String,
    pub end_at: String,
    pub city: String,
    pub address: StoredDropOffAddress,
    pub status: Status,
    pub attempts: u32,
    pub max_attempts: u32,
}

#[derive(Debug, Clone)]
pub struct StoredParcel {
    pub pick_up_code: String,
    pub custom_code: Option<String>,
    pub size_code: String,
    /// The size's name in the price list the order was priced with: known only for a parcel
    /// just created (`WrittenOrder`), whose `same.parcel.created` shows it. The name is not
    /// stored, so a read leaves it `None`.
    pub size_name: Option<String>,
    pub label_token: String,
}

/// One recorded change: `id` is stable and global, `seq` numbers a shipment's events 1, 2,
/// 3 … with no gaps.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub id: i64,
    pub seq: u32,
    pub from: Option<Status>,
    pub to: Status,
    pub at: Timestamp,
    pub actor: Actor,
    pub reason: Option<String>,
    pub attempt: Option<u32>,
    pub proof: Vec<Proof>,
}

/// What the public tracking page may show: no names, phones or street addresses.
#[derive(Debug, Clone)]
pub struct Tracking {
    pub tracking_code: String,
    pub status: Status,
    pub scheduled_date: String,
    pub slot_name: String,
    pub city: String,
    /// (status, when), oldest first.
    pub events: Vec<(Status, Timestamp)>,
    pub eta: Option<StoredEta>,
}

#[async_trait]
pub trait ShipmentStore: Send + Sync + 'static {
    async fn shipment(&self, visible: Visibility, unique_id: &str) -> StoreResult<Option<StoredShipment>>;
    /// Each live drop-off of `unique_ids` (tracking codes) that exists: its status and when it
    /// last changed (its newest event). What re-timing a route needs, in one read.
    async fn progress_of(
        &self,
        unique_ids: Vec<String>,
    ) -> StoreResult<Vec<(String, dropslot_core::shipments::Status, Timestamp)>>;
    /// The live drop-off shipments a pick-up shipment collects, by tracking code, oldest
    /// first (deleted ones too: a driver sees that a merchant withdrew one).
    async fn pick_up_members(&self, pick_up_unique_id: &str) -> StoreResult<Vec<String>>;
    async fn order(&self, scope: Scope, unique_id: &str) -> StoreResult<Option<StoredOrder>>;
    /// Newest first, before the row id `before` (the cursor).
    async fn orders(&self, scope: Scope, before: Option<i64>, limit: usize) -> StoreResult<Vec<StoredOrder>>;
    /// Like [`Store::orders`], only the orders `filter` matches (the dashboard's search).
    async fn find_orders(
        &self,
        scope: Scope,
        filter: &OrderFilter,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<StoredOrder>>;
    /// The live parcel with this custom code (its pick-up code) and its shipment.
    async fn parcel_by_custom_code(
        &self,
        scope: Scope,
        code: &CustomCode,
    ) -> StoreResult<Option<(String, StoredShipment)>>;
    /// The public tracking page's facts, by tracking code; no scope (the code is public).
    async fn tracking(&self, code: &str) -> StoreResult<Option<Tracking>>;
    async fn label_source(&self, kind: LabelKind, token: &str) -> StoreResult<Option<LabelSource>>;
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
