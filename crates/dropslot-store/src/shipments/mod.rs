//! Records of the shipment lifecycle crossing the storage seam: what a sandbox scenario or an
//! ops move reports, and the orders, shipments and events read back for the client API and
//! the tracking page. Plain data.

use crate::{LabelKind, LabelSource, Mode, OrderFilter, Scope, StoreResult, StoredEta, StoredShipment};
use async_trait::async_trait;
use dropslot_core::ids::{CustomCode, OrderId};
use dropslot_core::shipments::Status;
use jiff::Timestamp;

/// Which shipments a read or a move may touch: one tenant's (a client token), or the live
/// shipments of every client (operations staff, the courier's own people).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    Tenant(Scope),
    Ops,
}

/// An order read back with its shipments (newest-first listing keeps `id` for the cursor).
#[derive(Debug, Clone)]
pub struct StoredOrder {
    pub id: OrderId,
    pub unique_id: String,
    pub created_at: String,
    pub shipments: Vec<StoredShipment>,
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
    /// The drop-off's secret label token: never shown, only the change page's token is derived
    /// from it (the page links to the change page while changes are open).
    pub label_token: String,
}

#[async_trait]
pub trait ShipmentStore: Send + Sync + 'static {
    async fn shipment(&self, visible: Visibility, unique_id: &str) -> StoreResult<Option<StoredShipment>>;
    /// Each live drop-off of `unique_ids` (tracking codes) that exists: its status, when it
    /// last changed (its newest event) and the delivery slot it is booked into now. What
    /// re-timing a route needs, in one read.
    async fn progress_of(&self, unique_ids: Vec<String>) -> StoreResult<Vec<crate::StoredProgress>>;
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
    /// A drop-off shipment by tracking code in either mode and of any client, with its mode
    /// (whose slots its place is counted in): the recipient's change page, which checks the
    /// change token derived from its label token before it shows or changes anything.
    async fn shipment_by_code(&self, code: &str) -> StoreResult<Option<(Mode, StoredShipment)>>;
    async fn label_source(&self, kind: LabelKind, token: &str) -> StoreResult<Option<LabelSource>>;
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: ShipmentStore> ShipmentStore for crate::trace::Traced<S> {
    async fn shipment(&self, visible: Visibility, unique_id: &str) -> StoreResult<Option<StoredShipment>> {
        self.trace.hit("ShipmentStore::shipment");
        self.inner.shipment(visible, unique_id).await
    }

    async fn progress_of(&self, unique_ids: Vec<String>) -> StoreResult<Vec<crate::StoredProgress>> {
        self.trace.hit("ShipmentStore::progress_of");
        self.inner.progress_of(unique_ids).await
    }

    async fn pick_up_members(&self, pick_up_unique_id: &str) -> StoreResult<Vec<String>> {
        self.trace.hit("ShipmentStore::pick_up_members");
        self.inner.pick_up_members(pick_up_unique_id).await
    }

    async fn order(&self, scope: Scope, unique_id: &str) -> StoreResult<Option<StoredOrder>> {
        self.trace.hit("ShipmentStore::order");
        self.inner.order(scope, unique_id).await
    }

    async fn orders(&self, scope: Scope, before: Option<i64>, limit: usize) -> StoreResult<Vec<StoredOrder>> {
        self.trace.hit("ShipmentStore::orders");
        self.inner.orders(scope, before, limit).await
    }

    async fn find_orders(
        &self,
        scope: Scope,
        filter: &OrderFilter,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<StoredOrder>> {
        self.trace.hit("ShipmentStore::find_orders");
        self.inner.find_orders(scope, filter, before, limit).await
    }

    async fn parcel_by_custom_code(
        &self,
        scope: Scope,
        code: &CustomCode,
    ) -> StoreResult<Option<(String, StoredShipment)>> {
        self.trace.hit("ShipmentStore::parcel_by_custom_code");
        self.inner.parcel_by_custom_code(scope, code).await
    }

    async fn tracking(&self, code: &str) -> StoreResult<Option<Tracking>> {
        self.trace.hit("ShipmentStore::tracking");
        self.inner.tracking(code).await
    }

    async fn shipment_by_code(&self, code: &str) -> StoreResult<Option<(Mode, StoredShipment)>> {
        self.trace.hit("ShipmentStore::shipment_by_code");
        self.inner.shipment_by_code(code).await
    }

    async fn label_source(&self, kind: LabelKind, token: &str) -> StoreResult<Option<LabelSource>> {
        self.trace.hit("ShipmentStore::label_source");
        self.inner.label_source(kind, token).await
    }
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
