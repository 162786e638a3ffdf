//! Records of webhooks crossing the storage seam: endpoints, the outbox's deliveries and
//! their attempts, and what the dispatcher claims and reports. Plain data; the rendering of
//! bodies is the `Outbox` a backend is opened with (implemented by `webhooks`).

use crate::{Scope, StoreResult};
use async_trait::async_trait;
use jiff::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthHeader {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone)]
pub struct NewEndpoint {
    pub url: String,
    pub events: Vec<String>,
    pub description: String,
    pub enabled: bool,
    pub auth_header: Option<AuthHeader>,
    pub secret: String,
}

/// A `PATCH`: absent fields stay; `auth_header: Some(None)` removes it.
#[derive(Debug, Clone, Default)]
pub struct EndpointPatch {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub description: Option<String>,
    pub enabled: Option<bool>,
    pub auth_header: Option<Option<AuthHeader>>,
}

/// An endpoint as the API shows it: the auth header's value only by its last 4 characters,
/// the secret only when created or rotated.
#[derive(Debug, Clone)]
pub struct StoredEndpoint {
    pub id: i64,
    pub url: String,
    pub events: Vec<String>,
    pub description: String,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub auth_header_name: Option<String>,
    pub auth_header_last4: Option<String>,
    pub secret: String,
    /// When the previous secret stops signing, during a rotation.
    pub previous_expires_ms: Option<i64>,
    pub failing_since_ms: Option<i64>,
    pub last_success_ms: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone)]
pub struct StoredDelivery {
    pub id: i64,
    pub endpoint_id: i64,
    pub webhook_id: String,
    pub event: String,
    pub state: DeliveryState,
    pub attempts: u32,
    pub next_attempt_ms: Option<i64>,
    pub queued_ms: i64,
    pub finished_ms: Option<i64>,
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    /// Oldest first.
    pub log: Vec<StoredAttempt>,
}

#[derive(Debug, Clone)]
pub struct StoredAttempt {
    pub attempt: u32,
    pub at: String,
    pub status: Option<u16>,
    pub latency_ms: i64,
    pub response: Option<String>,
    pub error: Option<String>,
}

/// A delivery claimed by one dispatcher until `lease_until_ms`: everything needed to send it.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub delivery_id: i64,
    /// The claim's random tag: an attempt is recorded against the claim that made it.
    pub claim: i64,
    pub endpoint_id: i64,
    /// The attempt this send is (1 = the first).
    pub attempt: u32,
    pub webhook_id: String,
    pub body: String,
    pub url: String,
    pub secret: String,
    /// The previous secret and when it stops signing (Unix ms), after a rotation.
    pub previous_secret: Option<(String, i64)>,
    pub auth_header: Option<AuthHeader>,
}

/// What one claim round took, and which of the leases it was asked to extend it extended.
#[derive(Debug, Clone, Default)]
pub struct Claims {
    pub claimed: Vec<Claimed>,
    /// The delivery ids of the `renew` pairs whose lease now ends at the round's lease.
    pub renewed: Vec<i64>,
}

pub use dropslot_core::webhooks::{AttemptOutcome, DeliveryState};

#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub delivery_id: i64,
    pub claim: i64,
    pub endpoint_id: i64,
    pub attempt: u32,
    pub at: Timestamp,
    pub status: Option<u16>,
    pub latency_ms: i64,
    pub response: Option<String>,
    pub error: Option<String>,
    pub outcome: AttemptOutcome,
    /// An endpoint failing without a success since this long ago (ms) is disabled.
    pub disable_after_ms: i64,
}

#[derive(Debug, Clone)]
pub enum ResendOutcome {
    NotFound,
    EndpointDisabled,
    Queued(StoredDelivery),
}

#[async_trait]
pub trait WebhookStore: Send + Sync + 'static {
    async fn create_endpoint(&self, scope: Scope, e: NewEndpoint, now: Timestamp) -> StoreResult<StoredEndpoint>;
    async fn endpoints(&self, scope: Scope) -> StoreResult<Vec<StoredEndpoint>>;
    async fn endpoint(&self, scope: Scope, id: i64) -> StoreResult<Option<StoredEndpoint>>;
    /// Disabling an endpoint fails its unfinished deliveries; enabling replays nothing.
    async fn update_endpoint(
        &self,
        scope: Scope,
        id: i64,
        patch: EndpointPatch,
        now: Timestamp,
    ) -> StoreResult<Option<StoredEndpoint>>;
    async fn delete_endpoint(&self, scope: Scope, id: i64, now: Timestamp) -> StoreResult<bool>;
    /// A new signing secret; the previous one keeps signing until `previous_until_ms`.
    async fn rotate_secret(
        &self,
        scope: Scope,
        id: i64,
        secret: String,
        previous_until_ms: i64,
        now: Timestamp,
    ) -> StoreResult<Option<StoredEndpoint>>;
    /// Queues a test event (`event`, `body`) to one endpoint, whatever it subscribes to.
    async fn queue_test(
        &self,
        scope: Scope,
        id: i64,
        event: &str,
        body: String,
        now: Timestamp,
    ) -> StoreResult<Option<StoredDelivery>>;
    /// An endpoint's deliveries, newest first, before the delivery id `before` (the cursor);
    /// `None` when the endpoint is not the caller's.
    async fn deliveries(
        &self,
        scope: Scope,
        endpoint: i64,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Option<Vec<StoredDelivery>>>;
    /// Queues the delivery's message to its endpoint again, as a new delivery.
    async fn resend(&self, scope: Scope, delivery: i64) -> StoreResult<ResendOutcome>;
    /// Claims up to `limit` due deliveries until `lease_until_ms`, at most one per (endpoint,
    /// shipment) stream so order holds, and no more per endpoint than `per_endpoint` counting
    /// the claimer's `in_flight` (endpoint, count) pairs. First extends to `lease_until_ms` the
    /// lease of each `renew` (delivery, claim) pair still pending under that claim: deliveries
    /// the claimer holds answered and not yet recorded, which no other dispatcher may take
    /// over and send again meanwhile. A pair whose row another transaction holds is skipped
    /// (the claimer asks again at its next round).
    async fn claim_deliveries(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
        per_endpoint: usize,
        in_flight: Vec<(i64, usize)>,
        renew: Vec<(i64, i64)>,
    ) -> StoreResult<Claims>;
    /// Records attempts and moves their deliveries (and their streams, and their endpoints'
    /// health), all in one transaction: every one of them is committed, or none.
    async fn record_attempts(&self, attempts: Vec<AttemptRecord>) -> StoreResult<()>;
    /// When the next pending delivery falls due, if any.
    async fn next_due_ms(&self) -> StoreResult<Option<i64>>;
    /// Deliveries not yet delivered or failed.
    async fn queue_depth(&self) -> StoreResult<i64>;
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: WebhookStore> WebhookStore for crate::trace::Traced<S> {
    async fn create_endpoint(&self, scope: Scope, e: NewEndpoint, now: Timestamp) -> StoreResult<StoredEndpoint> {
        self.trace.hit("WebhookStore::create_endpoint");
        self.inner.create_endpoint(scope, e, now).await
    }

    async fn endpoints(&self, scope: Scope) -> StoreResult<Vec<StoredEndpoint>> {
        self.trace.hit("WebhookStore::endpoints");
        self.inner.endpoints(scope).await
    }

    async fn endpoint(&self, scope: Scope, id: i64) -> StoreResult<Option<StoredEndpoint>> {
        self.trace.hit("WebhookStore::endpoint");
        self.inner.endpoint(scope, id).await
    }

    async fn update_endpoint(
        &self,
        scope: Scope,
        id: i64,
        patch: EndpointPatch,
        now: Timestamp,
    ) -> StoreResult<Option<StoredEndpoint>> {
        self.trace.hit("WebhookStore::update_endpoint");
        self.inner.update_endpoint(scope, id, patch, now).await
    }

    async fn delete_endpoint(&self, scope: Scope, id: i64, now: Timestamp) -> StoreResult<bool> {
        self.trace.hit("WebhookStore::delete_endpoint");
        self.inner.delete_endpoint(scope, id, now).await
    }

    async fn rotate_secret(
        &self,
        scope: Scope,
        id: i64,
        secret: String,
        previous_until_ms: i64,
        now: Timestamp,
    ) -> StoreResult<Option<StoredEndpoint>> {
        self.trace.hit("WebhookStore::rotate_secret");
        self.inner.rotate_secret(scope, id, secret, previous_until_ms, now).await
    }

    async fn queue_test(
        &self,
        scope: Scope,
        id: i64,
        event: &str,
        body: String,
        now: Timestamp,
    ) -> StoreResult<Option<StoredDelivery>> {
        self.trace.hit("WebhookStore::queue_test");
        self.inner.queue_test(scope, id, event, body, now).await
    }

    async fn deliveries(
        &self,
        scope: Scope,
        endpoint: i64,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Option<Vec<StoredDelivery>>> {
        self.trace.hit("WebhookStore::deliveries");
        self.inner.deliveries(scope, endpoint, before, limit).await
    }

    async fn resend(&self, scope: Scope, delivery: i64) -> StoreResult<ResendOutcome> {
        self.trace.hit("WebhookStore::resend");
        self.inner.resend(scope, delivery).await
    }

    async fn claim_deliveries(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
        per_endpoint: usize,
        in_flight: Vec<(i64, usize)>,
        renew: Vec<(i64, i64)>,
    ) -> StoreResult<Claims> {
        self.trace.hit("WebhookStore::claim_deliveries");
        self.inner.claim_deliveries(now_ms, lease_until_ms, limit, per_endpoint, in_flight, renew).await
    }

    async fn record_attempts(&self, attempts: Vec<AttemptRecord>) -> StoreResult<()> {
        self.trace.hit("WebhookStore::record_attempts");
        self.inner.record_attempts(attempts).await
    }

    async fn next_due_ms(&self) -> StoreResult<Option<i64>> {
        self.trace.hit("WebhookStore::next_due_ms");
        self.inner.next_due_ms().await
    }

    async fn queue_depth(&self) -> StoreResult<i64> {
        self.trace.hit("WebhookStore::queue_depth");
        self.inner.queue_depth().await
    }
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
