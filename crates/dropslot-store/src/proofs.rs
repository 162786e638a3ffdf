//! Proof-of-delivery files (CONTRACT §13) as the store keeps them: an upload taken once per
//! driver and `Idempotency-Key`, and the rule both backends apply when a move attaches it.

use dropslot_core::ids::ClientId;

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
