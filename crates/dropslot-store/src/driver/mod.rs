//! Proof-of-delivery files (CONTRACT §13) as the store keeps them: an upload taken once per
//! driver and `Idempotency-Key`, and the rule both backends apply when a move attaches it.

use crate::{StoreResult, StoredPlan};
use async_trait::async_trait;
use dropslot_core::ids::ClientId;
use jiff::civil::Date;
use std::sync::Arc;

/// An uploaded image, checked by the service, to be stored unattached.
#[derive(Debug, Clone)]
pub struct NewProof {
    /// The unguessable last part of the proof's URL.
    pub token: String,
    pub driver_id: String,
    /// The upload's `Idempotency-Key`, and the SHA-256 of its bytes.
    pub key: String,
    pub request_hash: String,
    pub content_type: String,
    pub bytes: Vec<u8>,
    /// Unix milliseconds.
    pub created_ms: i64,
}

/// How an upload went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProofSaved {
    Saved,
    /// This key was used before for the same bytes: the proof's token then.
    Replayed(String),
    /// This key was used for other bytes.
    KeyReused,
    /// The driver already holds the most unattached proofs allowed: nothing written.
    TooMany,
}

/// A stored proof without its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProofInfo {
    pub token: String,
    pub driver_id: String,
    pub content_type: String,
    pub size: i64,
    pub created_ms: i64,
    /// Set, with the client, by the move that names it.
    pub shipment_unique_id: Option<String>,
    pub client_id: Option<ClientId>,
}

/// A stored proof with its bytes.
#[derive(Debug, Clone)]
pub struct ProofFile {
    pub info: ProofInfo,
    pub bytes: Vec<u8>,
}

/// Whether a driver's move of `unique_id` may attach a proof uploaded by `owner` and attached
/// to `attached` so far: the driver's own, free, or already this shipment's (a replay).
pub(crate) fn attachable(owner: &str, attached: Option<&str>, driver_id: &str, unique_id: &str) -> bool {
    owner == driver_id && attached.is_none_or(|s| s == unique_id)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_drivers_own_free_proofs_attach() {
        assert!(super::attachable("D1", None, "D1", "S1"));
        assert!(super::attachable("D1", Some("S1"), "D1", "S1"));
        assert!(!super::attachable("D1", Some("S2"), "D1", "S1"));
        assert!(!super::attachable("D2", None, "D1", "S1"));
    }
}

/// A phone's reported position (CONTRACT §13).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Position {
    pub lat: f64,
    pub lng: f64,
    pub accuracy_m: f64,
    /// When the phone measured it, Unix milliseconds.
    pub at_ms: i64,
}

/// How a position report went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PositionOutcome {
    Recorded,
    /// This key was recorded before: nothing written.
    Replayed,
    /// Another position of this driver lies within 30 s of this one.
    TooSoon,
}

#[async_trait]
pub trait DriverStore: Send + Sync + 'static {
    /// Records a driver's position under its idempotency key, unless another of its
    /// positions lies within [`dropslot_core::fleet::POSITION_EVERY_MS`] of it.
    async fn record_position(
        &self,
        driver_id: &str,
        key: &str,
        position: Position,
        received_ms: i64,
    ) -> StoreResult<PositionOutcome>;
    /// The driver's latest position (by the phone's time), if any.
    async fn latest_position(&self, driver_id: &str) -> StoreResult<Option<Position>>;
    /// Deletes the positions received before `before_ms`; how many.
    async fn purge_positions(&self, before_ms: i64) -> StoreResult<u64>;
    /// Stores a driver's proof upload under its idempotency key, unless the driver already
    /// holds `max_unattached` unattached proofs.
    async fn save_proof(&self, proof: NewProof, max_unattached: i64) -> StoreResult<ProofSaved>;
    /// The proof with this token, without its bytes.
    async fn proof(&self, token: &str) -> StoreResult<Option<ProofInfo>>;
    /// The proof with this token, with its bytes.
    async fn proof_file(&self, token: &str) -> StoreResult<Option<ProofFile>>;
    /// Deletes the unattached proofs uploaded before `before_ms`; how many.
    async fn purge_proofs(&self, before_ms: i64) -> StoreResult<u64>;
    /// The published plans of `date` in which driver `driver_id` has a route.
    /// Each is parsed once per version and shared (`PlanCache`): a driver call reads the
    /// plans' versions, and a plan's document only when it changed.
    async fn driver_plans(&self, driver_id: &str, date: Date) -> StoreResult<Vec<Arc<StoredPlan>>>;
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: DriverStore> DriverStore for crate::trace::Traced<S> {
    async fn record_position(
        &self,
        driver_id: &str,
        key: &str,
        position: Position,
        received_ms: i64,
    ) -> StoreResult<PositionOutcome> {
        self.trace.hit("DriverStore::record_position");
        self.inner.record_position(driver_id, key, position, received_ms).await
    }

    async fn latest_position(&self, driver_id: &str) -> StoreResult<Option<Position>> {
        self.trace.hit("DriverStore::latest_position");
        self.inner.latest_position(driver_id).await
    }

    async fn purge_positions(&self, before_ms: i64) -> StoreResult<u64> {
        self.trace.hit("DriverStore::purge_positions");
        self.inner.purge_positions(before_ms).await
    }

    async fn save_proof(&self, proof: NewProof, max_unattached: i64) -> StoreResult<ProofSaved> {
        self.trace.hit("DriverStore::save_proof");
        self.inner.save_proof(proof, max_unattached).await
    }

    async fn proof(&self, token: &str) -> StoreResult<Option<ProofInfo>> {
        self.trace.hit("DriverStore::proof");
        self.inner.proof(token).await
    }

    async fn proof_file(&self, token: &str) -> StoreResult<Option<ProofFile>> {
        self.trace.hit("DriverStore::proof_file");
        self.inner.proof_file(token).await
    }

    async fn purge_proofs(&self, before_ms: i64) -> StoreResult<u64> {
        self.trace.hit("DriverStore::purge_proofs");
        self.inner.purge_proofs(before_ms).await
    }

    async fn driver_plans(&self, driver_id: &str, date: Date) -> StoreResult<Vec<Arc<StoredPlan>>> {
        self.trace.hit("DriverStore::driver_plans");
        self.inner.driver_plans(driver_id, date).await
    }
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
