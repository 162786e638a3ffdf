//! lifecycle

use crate::{DriverKey, DriverMove, MoveOutcome, ScenarioResult, Scope, Selection, StoreResult, StoredShipment};
use async_trait::async_trait;
use jiff::Timestamp;

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

pub(crate) mod postgres;
pub(crate) mod sqlite;
