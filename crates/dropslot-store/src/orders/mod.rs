//! Records of asynchronous order requests (CONTRACT §3.5) crossing the storage seam: what is
//! queued, what a worker claims, and how a request ends. Plain data.

use super::IdempotencyClaim;
use crate::{
    CreateOrderError, CreatedOrder, DeleteOutcome, NewOrder, RenderFn, SavedAddress, Scope, StoreResult, StoredResponse,
};
use async_trait::async_trait;
use dropslot_core::ids::{CustomCode, SavedAddressId};
pub use dropslot_core::requests::RequestStatus;
use jiff::Timestamp;

/// An accepted request, written with its idempotency record (holding the 202 `response`)
/// in one transaction before the 202 is sent.
#[derive(Debug, Clone)]
pub struct NewRequest {
    pub request_id: String,
    /// The body as accepted (canonical JSON).
    pub payload: String,
    /// The prices and limits it was validated under (`ClientSettings` JSON).
    pub terms: String,
    pub drop_offs_count: usize,
    /// ISO 8601 in the pick-up city's offset.
    pub created_at: String,
    /// When it is due (system clock, Unix ms).
    pub due_ms: i64,
    pub idempotency: Option<IdempotencyClaim>,
    /// The 202 body, stored with the idempotency record for replays.
    pub response: String,
}

/// The event a finished request queues to its client's subscribed endpoints.
pub const COMPLETED_EVENT: &str = "same.request.completed";

/// A request as `GET /requests/{request_id}` shows it.
#[derive(Debug, Clone)]
pub struct StoredRequest {
    pub request_id: String,
    pub status: RequestStatus,
    pub drop_offs_count: usize,
    pub created_at: String,
    pub completed_at: Option<String>,
    /// The created order's `unique_id`, once completed.
    pub order_unique_id: Option<String>,
    /// `{path: [messages]}`, once failed.
    pub errors_json: Option<String>,
}

/// A request a worker holds until its lease ends.
#[derive(Debug, Clone)]
pub struct ClaimedRequest {
    pub id: i64,
    /// The claim's random tag: only its holder may finish the request.
    pub claim: i64,
    pub scope: Scope,
    pub request_id: String,
    pub payload: String,
    pub terms: String,
    pub drop_offs_count: usize,
    pub created_at: String,
    /// The how-manieth claim this is (1 = the first).
    pub attempts: u32,
}

/// How a claimed request ends: the fields a finish writes, and the `same.request.completed`
/// body the outbox queues in the same transaction.
#[derive(Debug, Clone)]
pub struct RequestEnd {
    pub id: i64,
    pub claim: i64,
    pub completed_at: String,
    /// The same instant on the business clock (the webhook message's time).
    pub at: jiff::Timestamp,
    pub event_body: String,
}

/// Why finishing a request wrote nothing: another worker took it over after this one's
/// lease ended (and finishes it itself), or it is no longer there.
pub const LEASE_LOST: &str = "the order request was taken over by another worker after its lease ended";

#[async_trait]
pub trait OrderStore: Send + Sync + 'static {
    /// The id of the saved address with this normalised text (a preview's `saved_address_id`).
    async fn saved_address_id_by_text(&self, scope: Scope, normalized: &str) -> StoreResult<Option<SavedAddressId>>;
    async fn saved_address(&self, scope: Scope, id: SavedAddressId) -> StoreResult<Option<SavedAddress>>;
    async fn list_saved_addresses(&self, scope: Scope) -> StoreResult<Vec<SavedAddress>>;
    async fn delete_saved_address(&self, scope: Scope, id: SavedAddressId) -> StoreResult<bool>;
    async fn idempotent_response(
        &self,
        scope: Scope,
        key: &str,
        since: Timestamp,
    ) -> StoreResult<Option<StoredResponse>>;
    /// Writes the whole order in one transaction with its saved address, its first events
    /// and the idempotency record (whose body `render` produces from the new row ids).
    async fn create_order(
        &self,
        scope: Scope,
        order: NewOrder,
        render: RenderFn,
    ) -> Result<CreatedOrder, CreateOrderError>;
    async fn delete_parcel_by_custom_code(
        &self,
        scope: Scope,
        code: &CustomCode,
        now: Timestamp,
    ) -> StoreResult<DeleteOutcome>;
    /// Writes an accepted request (and its idempotency record) before the 202.
    async fn queue_request(&self, scope: Scope, request: NewRequest) -> Result<(), CreateOrderError>;
    async fn order_request(&self, scope: Scope, request_id: &str) -> StoreResult<Option<StoredRequest>>;
    /// Claims up to `limit` due requests (queued, or processing with an ended lease) until
    /// `lease_until_ms`, oldest first; each is `processing` from then on.
    async fn claim_requests(&self, now_ms: i64, lease_until_ms: i64, limit: usize) -> StoreResult<Vec<ClaimedRequest>>;
    /// Ends a claimed request as failed with `errors_json`, queueing its webhook; false when
    /// the claim was lost meanwhile (nothing written).
    async fn fail_request(&self, end: RequestEnd, errors_json: String) -> StoreResult<bool>;
    /// When the next unfinished request falls due, if any.
    async fn next_request_due_ms(&self) -> StoreResult<Option<i64>>;
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: OrderStore> OrderStore for crate::trace::Traced<S> {
    async fn saved_address_id_by_text(&self, scope: Scope, normalized: &str) -> StoreResult<Option<SavedAddressId>> {
        self.trace.hit("OrderStore::saved_address_id_by_text");
        self.inner.saved_address_id_by_text(scope, normalized).await
    }

    async fn saved_address(&self, scope: Scope, id: SavedAddressId) -> StoreResult<Option<SavedAddress>> {
        self.trace.hit("OrderStore::saved_address");
        self.inner.saved_address(scope, id).await
    }

    async fn list_saved_addresses(&self, scope: Scope) -> StoreResult<Vec<SavedAddress>> {
        self.trace.hit("OrderStore::list_saved_addresses");
        self.inner.list_saved_addresses(scope).await
    }

    async fn delete_saved_address(&self, scope: Scope, id: SavedAddressId) -> StoreResult<bool> {
        self.trace.hit("OrderStore::delete_saved_address");
        self.inner.delete_saved_address(scope, id).await
    }

    async fn idempotent_response(
        &self,
        scope: Scope,
        key: &str,
        since: Timestamp,
    ) -> StoreResult<Option<StoredResponse>> {
        self.trace.hit("OrderStore::idempotent_response");
        self.inner.idempotent_response(scope, key, since).await
    }

    async fn create_order(
        &self,
        scope: Scope,
        order: NewOrder,
        render: RenderFn,
    ) -> Result<CreatedOrder, CreateOrderError> {
        self.trace.hit("OrderStore::create_order");
        self.inner.create_order(scope, order, render).await
    }

    async fn delete_parcel_by_custom_code(
        &self,
        scope: Scope,
        code: &CustomCode,
        now: Timestamp,
    ) -> StoreResult<DeleteOutcome> {
        self.trace.hit("OrderStore::delete_parcel_by_custom_code");
        self.inner.delete_parcel_by_custom_code(scope, code, now).await
    }

    async fn queue_request(&self, scope: Scope, request: NewRequest) -> Result<(), CreateOrderError> {
        self.trace.hit("OrderStore::queue_request");
        self.inner.queue_request(scope, request).await
    }

    async fn order_request(&self, scope: Scope, request_id: &str) -> StoreResult<Option<StoredRequest>> {
        self.trace.hit("OrderStore::order_request");
        self.inner.order_request(scope, request_id).await
    }

    async fn claim_requests(&self, now_ms: i64, lease_until_ms: i64, limit: usize) -> StoreResult<Vec<ClaimedRequest>> {
        self.trace.hit("OrderStore::claim_requests");
        self.inner.claim_requests(now_ms, lease_until_ms, limit).await
    }

    async fn fail_request(&self, end: RequestEnd, errors_json: String) -> StoreResult<bool> {
        self.trace.hit("OrderStore::fail_request");
        self.inner.fail_request(end, errors_json).await
    }

    async fn next_request_due_ms(&self) -> StoreResult<Option<i64>> {
        self.trace.hit("OrderStore::next_request_due_ms");
        self.inner.next_request_due_ms().await
    }
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
