//! lifecycle

use crate::{MoveOutcome, Scope, StoreResult, StoredShipment};
use async_trait::async_trait;
use dropslot_core::ids::DropOffShipmentId;
use dropslot_core::shipments::Status;
use jiff::Timestamp;
use jiff::civil::Date;

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

/// A driver action's idempotency record: whose, which key, and what request it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverKey {
    pub driver_id: String,
    pub key: String,
    /// SHA-256 of the request (its path and canonical body).
    pub request_hash: String,
}

/// How a driver's move went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverMove {
    /// Taken now (moved, refused, or not found).
    Done(crate::MoveOutcome),
    /// Taken before with this key and the same request: the shipment it moved.
    Replayed(String),
    /// This key was used for another request.
    KeyReused,
    /// The proof with this token is not the driver's, or is attached to another shipment:
    /// nothing was written.
    ProofUnavailable(String),
}

/// What the driver's key says before a move: a replay, a reuse, or nothing yet. `row` is the
/// stored (request hash, shipment) of the key.
pub(crate) fn recorded(key: &DriverKey, row: Option<(String, String)>) -> Option<DriverMove> {
    row.map(
        |(hash, shipment)| {
            if hash == key.request_hash { DriverMove::Replayed(shipment) } else { DriverMove::KeyReused }
        },
    )
}

#[async_trait]
pub trait LifecycleStore: Send + Sync + 'static {
    /// The caller's test drop-off shipments any selector matches, by row id, oldest first.
    async fn sandbox_candidates(&self, scope: Scope, selection: Selection) -> StoreResult<Vec<i64>>;
    /// Runs a scenario over one bounded batch of candidates, in one transaction.
    async fn run_scenario(
        &self,
        scope: Scope,
        ids: Vec<i64>,
        scenario: dropslot_core::shipments::Scenario,
        now: Timestamp,
    ) -> StoreResult<Vec<ScenarioResult>>;
    /// Operations staff move a live drop-off shipment (any client's), by tracking code; a
    /// move returns the shipment as it left it (what the answer shows).
    async fn ops_move(
        &self,
        unique_id: &str,
        m: dropslot_core::shipments::Move,
        now: Timestamp,
    ) -> StoreResult<MoveOutcome<Box<StoredShipment>>>;
    /// A driver's move of a live drop-off shipment (CONTRACT §13), taken once per idempotency
    /// key: the key's record is written in the move's transaction; a key already used for the
    /// same request replays, for another is refused. A move refused because a concurrent
    /// request with the same key took it first replays too. The proofs `attach` names (their
    /// tokens) are attached to the shipment and its client in the same transaction; one that
    /// is not this driver's, or is another shipment's, refuses the whole move
    /// (`DriverMove::ProofUnavailable`), before anything is written.
    async fn driver_move(
        &self,
        key: DriverKey,
        unique_id: &str,
        m: dropslot_core::shipments::Move,
        attach: Vec<String>,
        now: Timestamp,
    ) -> StoreResult<DriverMove>;
    /// A pick-up scan of a live parcel by its pick-up code.
    async fn pick_up_scan(&self, pick_up_code: &str, now: Timestamp) -> StoreResult<MoveOutcome>;
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: LifecycleStore> LifecycleStore for crate::trace::Traced<S> {
    async fn sandbox_candidates(&self, scope: Scope, selection: Selection) -> StoreResult<Vec<i64>> {
        self.trace.hit("LifecycleStore::sandbox_candidates");
        self.inner.sandbox_candidates(scope, selection).await
    }

    async fn run_scenario(
        &self,
        scope: Scope,
        ids: Vec<i64>,
        scenario: dropslot_core::shipments::Scenario,
        now: Timestamp,
    ) -> StoreResult<Vec<ScenarioResult>> {
        self.trace.hit("LifecycleStore::run_scenario");
        self.inner.run_scenario(scope, ids, scenario, now).await
    }

    async fn ops_move(
        &self,
        unique_id: &str,
        m: dropslot_core::shipments::Move,
        now: Timestamp,
    ) -> StoreResult<MoveOutcome<Box<StoredShipment>>> {
        self.trace.hit("LifecycleStore::ops_move");
        self.inner.ops_move(unique_id, m, now).await
    }

    async fn driver_move(
        &self,
        key: DriverKey,
        unique_id: &str,
        m: dropslot_core::shipments::Move,
        attach: Vec<String>,
        now: Timestamp,
    ) -> StoreResult<DriverMove> {
        self.trace.hit("LifecycleStore::driver_move");
        self.inner.driver_move(key, unique_id, m, attach, now).await
    }

    async fn pick_up_scan(&self, pick_up_code: &str, now: Timestamp) -> StoreResult<MoveOutcome> {
        self.trace.hit("LifecycleStore::pick_up_scan");
        self.inner.pick_up_scan(pick_up_code, now).await
    }
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
