//! What follows a failed delivery on `PostgreSQL` (CONTRACT §15): being written.

use crate::attempts::{ChangeOutcome, ChangeTarget, DeliveryChange, Failures};
use crate::postgres::PgStore;
use crate::{AttemptStore, Scope, StoreError, StoreResult};
use async_trait::async_trait;
use dropslot_core::attempts::{Changer, Policy};
use jiff::Timestamp;

fn pending() -> StoreError {
    StoreError::Unavailable("not written yet on PostgreSQL".into())
}

#[async_trait]
impl AttemptStore for PgStore {
    async fn attempt_policy(&self, _scope: Scope) -> StoreResult<Option<Policy>> {
        Err(pending())
    }
    async fn set_attempt_policy(&self, _scope: Scope, _policy: Policy, _now: Timestamp) -> StoreResult<()> {
        Err(pending())
    }
    async fn change_delivery(
        &self,
        _target: ChangeTarget,
        _change: DeliveryChange,
        _by: Changer,
        _now: Timestamp,
    ) -> StoreResult<ChangeOutcome> {
        Err(pending())
    }
    async fn return_to_sender(&self, _scope: Scope, _unique_id: &str, _now: Timestamp) -> StoreResult<ChangeOutcome> {
        Err(pending())
    }
    async fn cancel_shipment(&self, _scope: Scope, _unique_id: &str, _now: Timestamp) -> StoreResult<ChangeOutcome> {
        Err(pending())
    }
    async fn failures(
        &self,
        _depot: &str,
        _from: Timestamp,
        _to: Timestamp,
        _date: jiff::civil::Date,
    ) -> StoreResult<Failures> {
        Err(pending())
    }
}
