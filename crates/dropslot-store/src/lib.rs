//! The storage seam: one async trait both backends (`SQLite`, `PostgreSQL`) implement,
//! chosen by the database URL's scheme. Every tenant-data method takes a `Scope`, so a query
//! that forgets the client and mode filter cannot be written against this trait.

pub mod cache;
mod capacity;
pub mod copy;
mod fleet;
mod labels;
mod lifecycle;
pub mod notifications;
mod plans;
pub mod postgres;
mod proofs;
mod requests;
pub mod sqlite;
mod types;
mod webhooks;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use jiff::Timestamp;
use jiff::civil::Date;

pub use fleet::{NewStaffToken, OpsSessionRecord, StaffKind, StaffPrincipal, StaffTokenInfo, StoredDriver};
pub use lifecycle::*;
pub use notifications::{
    Channel, Channels, ClaimedNotification, NotificationClaim, NotificationEnd, NotificationOutcome,
    NotificationSettings, StoredNotification, Trigger, TriggerSwitches,
};
pub use plans::{
    BoardCount, DriverKey, DriverMove, POSITION_EVERY_MS, Position, PositionOutcome, SaveOutcome, StoredPlan,
};
pub use proofs::{NewProof, ProofFile, ProofInfo, ProofSaved};
pub use requests::*;
pub use types::*;
pub use webhooks::*;

use dropslot_core::dispatch::{Candidate as PlanCandidate, Plan, PlanKind};
use dropslot_core::fleet::Driver;
use dropslot_core::geo::points::{AddressPoint, Candidate, PointQuery};
use dropslot_core::ids::{ClientId, CustomCode, SavedAddressId};
use dropslot_core::quote::capacity::{Load, Override, SlotDate};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or is overloaded: a 503, safe to retry.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("stored data is inconsistent: {0}")]
    Corrupt(String),
    /// The database named cannot be used as given (a wrong URL, not a regular file): not
    /// retryable, the operator must change it.
    #[error("{0}")]
    Invalid(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// How the backend's writing and reading went, for `/metrics`: kept by the backend in
/// atomics, read at each scrape.
#[derive(Debug, Default)]
pub struct StoreStats {
    /// Write transactions that committed a batch of jobs (`SQLite`: the group-commit writer;
    /// `PostgreSQL`: the order batcher).
    pub batches: std::sync::atomic::AtomicU64,
    /// Jobs in those batches (their mean size is `batched_jobs / batches`).
    pub batched_jobs: std::sync::atomic::AtomicU64,
    /// Jobs waiting for the writer (or the order batcher) now.
    pub queued: std::sync::atomic::AtomicI64,
    /// Reads that had to wait for a connection (every pooled one was busy).
    pub read_waits: std::sync::atomic::AtomicU64,
}

impl StoreStats {
    /// One batch of `jobs` taken from the queue and written.
    pub fn batch(&self, jobs: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        self.batches.fetch_add(1, Relaxed);
        self.batched_jobs.fetch_add(jobs as u64, Relaxed);
        self.queued.fetch_sub(jobs as i64, Relaxed);
    }
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The backend's write and read statistics (shared; updated as it works).
    fn stats(&self) -> Arc<StoreStats>;
    /// Brings the schema up to date; returns the versions applied now.
    async fn migrate(&self) -> StoreResult<Vec<i64>>;
    /// Proves the database takes writes: a small committed write (`/readyz`, and the check
    /// at start). Fails while the database is read-only, full, locked or unreachable.
    async fn ping(&self) -> StoreResult<()>;

    // Clients and tokens (CONTRACT §1).
    async fn create_client(&self, name: &str, now: Timestamp) -> StoreResult<ClientId>;
    async fn client_count(&self) -> StoreResult<i64>;
    async fn client_exists(&self, id: ClientId) -> StoreResult<bool>;
    /// Replaces a client's negotiated terms (`None` = the configuration's); false if no client.
    async fn set_client_settings(&self, id: ClientId, settings_json: Option<String>) -> StoreResult<bool>;
    async fn insert_token(&self, token: NewToken, now: Timestamp) -> StoreResult<()>;
    async fn principal(&self, hash: &TokenHash) -> StoreResult<Option<Principal>>;
    async fn list_tokens(&self, client: ClientId) -> StoreResult<Vec<TokenInfo>>;
    /// Revokes the one live token with this display prefix; false if none matched.
    async fn revoke_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool>;

    // Staff tokens and drivers (CONTRACT §12): the courier's own, of no client.
    async fn insert_operator_token(&self, token: NewStaffToken, now: Timestamp) -> StoreResult<()>;
    /// The unrevoked staff token with this hash (a deleted driver's tokens are revoked).
    async fn staff_principal(&self, hash: &TokenHash) -> StoreResult<Option<StaffPrincipal>>;
    /// Every staff token of this kind, oldest first.
    async fn list_staff_tokens(&self, kind: StaffKind) -> StoreResult<Vec<StaffTokenInfo>>;
    /// Revokes the one live staff token with this display prefix; false if none matched.
    async fn revoke_staff_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool>;
    /// Writes a new driver (`id` is its `DRV…` id) and its first driver token together.
    async fn create_driver(
        &self,
        id: &str,
        driver: Driver,
        token: NewStaffToken,
        now: Timestamp,
    ) -> StoreResult<StoredDriver>;
    /// The driver with this id, unless deleted.
    async fn driver(&self, id: &str) -> StoreResult<Option<StoredDriver>>;
    /// The drivers not deleted, of one depot or all, oldest first.
    async fn drivers(&self, depot: Option<&str>) -> StoreResult<Vec<StoredDriver>>;
    /// Replaces a driver's record with `driver` (the core checked it as a whole, the change
    /// laid over the record read at `version`), if the driver is still at that version.
    async fn update_driver(&self, id: &str, version: i64, driver: Driver, now: Timestamp) -> StoreResult<DriverUpdate>;
    /// Deletes a driver (the row stays, invisible) and revokes its tokens; false if none.
    async fn delete_driver(&self, id: &str, now: Timestamp) -> StoreResult<bool>;
    /// Revokes every token of the driver and stores `token` as its only live one, together;
    /// false (nothing written) when no such driver.
    async fn reissue_driver_token(&self, id: &str, token: NewStaffToken, now: Timestamp) -> StoreResult<bool>;

    // Dashboard sessions (issue 11): server-side records keyed by the cookie's SHA-256.
    /// Starts a session for the unrevoked token whose hash is `token`; `None` (and nothing
    /// written) when the token is unknown or revoked.
    async fn create_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<Option<Principal>>;
    /// The session, if its token is still unrevoked and it was last seen at or after
    /// `idle_since_ms`; a session seen more than a minute before `now_ms` is marked seen now.
    async fn session(&self, session: &TokenHash, idle_since_ms: i64, now_ms: i64)
    -> StoreResult<Option<SessionRecord>>;
    /// Ends a session (sign-out); ending one that does not exist is not an error.
    async fn end_session(&self, session: &TokenHash) -> StoreResult<()>;

    // Dispatcher sessions (`/ops` pages, CONTRACT §12): the same records, over operator tokens.
    /// Starts a session for the unrevoked operator token whose hash is `token`; false (and
    /// nothing written) when the token is unknown, revoked, or not an operator's.
    async fn create_ops_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<bool>;
    /// The session, if its operator token is still unrevoked and it was last seen at or after
    /// `idle_since_ms`; a session seen more than a minute before `now_ms` is marked seen now.
    async fn ops_session(
        &self,
        session: &TokenHash,
        idle_since_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<OpsSessionRecord>>;
    /// Ends a dispatcher session (sign-out); ending one that does not exist is not an error.
    async fn end_ops_session(&self, session: &TokenHash) -> StoreResult<()>;

    // Saved pick-up addresses (CONTRACT §3.4).
    /// The id of the saved address with this normalised text (a preview's `saved_address_id`).
    async fn saved_address_id_by_text(&self, scope: Scope, normalized: &str) -> StoreResult<Option<SavedAddressId>>;
    async fn saved_address(&self, scope: Scope, id: SavedAddressId) -> StoreResult<Option<SavedAddress>>;
    async fn list_saved_addresses(&self, scope: Scope) -> StoreResult<Vec<SavedAddress>>;
    async fn delete_saved_address(&self, scope: Scope, id: SavedAddressId) -> StoreResult<bool>;

    // Orders (CONTRACT §3.3) and parcels (§4).
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

    // Asynchronous order requests (CONTRACT §3.5). A request is completed by `create_order`
    // with `NewOrder::completes`: the order and the completion commit together.
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

    // The shipment lifecycle (CONTRACT §4, §6): every change is planned by `shipments` from
    // rows loaded in the changing transaction and persisted with its numbered events.
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

    // Reads.
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

    // Address points (CONTRACT §11): reference data of no client, loaded by the operator.
    /// Adds a batch of points in one transaction; a point already stored with the same keys
    /// (number, street, unit, postal prefix, city) is left as it is, so a re-import adds
    /// nothing. Returns how many were new. Every process's lookups see them from the next
    /// request on (the cache epoch moves with the commit).
    async fn import_address_points(&self, points: Vec<AddressPoint>) -> StoreResult<u64>;
    /// Whether any point is stored: cached under the cache epoch, so a preview on an
    /// installation without points asks the database nothing (an import moves the epoch).
    async fn address_points_present(&self) -> StoreResult<bool>;
    /// For each query, the stored points with its number and street inside its search box
    /// (`PointQuery::choose` picks one). Recent lookups are cached under the cache epoch (an
    /// import moves it), so a merchant's repeated pick-up address costs no query.
    async fn address_point_candidates(&self, queries: &[PointQuery]) -> StoreResult<Vec<Vec<Candidate>>>;

    // Labels: looked up by their unguessable token, no scope (the token is the credential).
    async fn label_source(&self, kind: LabelKind, token: &str) -> StoreResult<Option<LabelSource>>;

    // Webhook endpoints (CONTRACT §5), scoped like every tenant row.
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

    // ---- Day plans (CONTRACT §12) ----
    /// The live shipments of `kind` for depot `depot` on `date` that are not final and not in
    /// a route of a published plan other than `plan`, oldest first.
    async fn plan_candidates(
        &self,
        kind: PlanKind,
        depot: &str,
        date: Date,
        plan: Option<&str>,
    ) -> StoreResult<Vec<PlanCandidate>>;
    /// Opens plan `id` for solving. False when another plan of the same depot, date and kind
    /// is open: a draft, or one being solved that started less than `lease_ms` ago (an older
    /// one was left by a crashed process and is taken over). One wins a race, across
    /// processes too.
    async fn begin_plan(
        &self,
        id: &str,
        depot: &str,
        date: Date,
        kind: PlanKind,
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<bool>;
    /// Drops a plan that is still being solved (its solving failed).
    async fn abandon_plan(&self, id: &str) -> StoreResult<()>;
    /// Writes a solved draft over its `solving` row, as version 1. False when the row is gone
    /// (taken over after its lease).
    async fn finish_plan(&self, plan: &Plan) -> StoreResult<bool>;
    async fn plan(&self, id: &str) -> StoreResult<Option<StoredPlan>>;
    /// Every solved plan of `date`, drafts and published.
    async fn plans_on(&self, date: Date) -> StoreResult<Vec<StoredPlan>>;
    /// The depot's live shipments of `date` that are not final, counted by kind, zone and
    /// slot, with how many are in a published route (the dispatcher's board).
    async fn board_counts(&self, depot: &str, date: Date) -> StoreResult<Vec<BoardCount>>;
    /// Writes `plan` over version `version`. A published plan's routes and stops are
    /// rewritten in the same transaction; a shipment in another published plan's route
    /// refuses the whole write.
    async fn save_plan(&self, plan: &Plan, version: i64) -> StoreResult<SaveOutcome>;
    /// Deletes a draft at `version`; false when it is not a draft at that version.
    async fn delete_plan(&self, id: &str, version: i64) -> StoreResult<bool>;
    /// Records a driver's position under its idempotency key, unless another of its
    /// positions lies within [`POSITION_EVERY_MS`] of it.
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
    /// Replaces the live ETAs of route `route_id` with `etas` (shipment, ETA), in one
    /// transaction (CONTRACT §14).
    async fn save_etas(&self, route_id: &str, etas: Vec<(String, StoredEta)>, now_ms: i64) -> StoreResult<()>;
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

    // The dispatcher (system clock, Unix ms).
    /// Claims up to `limit` due deliveries until `lease_until_ms`, at most one per (endpoint,
    /// shipment) stream so order holds, and no more per endpoint than `per_endpoint` counting
    /// the claimer's `in_flight` (endpoint, count) pairs.
    async fn claim_deliveries(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
        per_endpoint: usize,
        in_flight: Vec<(i64, usize)>,
    ) -> StoreResult<Vec<Claimed>>;
    /// Records attempts and moves their deliveries (and their streams, and their endpoints'
    /// health), all in one transaction: every one of them is committed, or none.
    async fn record_attempts(&self, attempts: Vec<AttemptRecord>) -> StoreResult<()>;
    /// When the next pending delivery falls due, if any.
    async fn next_due_ms(&self) -> StoreResult<Option<i64>>;
    /// Deliveries not yet delivered or failed.
    async fn queue_depth(&self) -> StoreResult<i64>;
    /// The per-date capacity overrides of every slot on the dates `from..=to` (CONTRACT §10).
    async fn capacity_overrides(&self, from: Date, to: Date) -> StoreResult<HashMap<SlotDate, Override>>;
    /// Sets (replaces) a slot's override on a date.
    async fn set_capacity_override(&self, at: SlotDate, o: Override, now: Timestamp) -> StoreResult<()>;
    /// What each of `slots` holds in `mode`: its drop-off shipments (stops) and their parcels,
    /// or its pick-up shipments, deleted ones not counted. Every slot asked for is answered.
    async fn slot_fill(&self, mode: Mode, slots: Vec<SlotDate>) -> StoreResult<HashMap<SlotDate, Load>>;

    // Recipient notifications (CONTRACT §14).
    /// The client's settings in the scope's mode (the defaults when none are stored).
    async fn notification_settings(&self, scope: Scope) -> StoreResult<NotificationSettings>;
    async fn set_notification_settings(
        &self,
        scope: Scope,
        settings: NotificationSettings,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// The messages of the scope's drop-off shipment `unique_id`, oldest first.
    async fn shipment_notifications(&self, scope: Scope, unique_id: &str) -> StoreResult<Vec<StoredNotification>>;
    /// Claims up to `limit` due messages until `lease_until_ms` (each recipient gets its
    /// opt-out token here); a message left `sending` past its lease becomes `uncertain`.
    async fn claim_notifications(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
    ) -> StoreResult<NotificationClaim>;
    /// Marks claimed messages `sending` (one attempt more each) just before they are handed
    /// over, in one write; the ids whose claim still held (the others were lost).
    async fn notifications_sending(&self, ids: Vec<i64>, lease_until_ms: i64) -> StoreResult<Vec<i64>>;
    /// Records how claimed attempts ended, in one write; the ids whose claim still held (for
    /// the others nothing was written).
    async fn finish_notifications(&self, outcomes: Vec<NotificationOutcome>) -> StoreResult<Vec<i64>>;
    /// When the next message falls due (or a `sending` one's lease ends), if any.
    async fn next_notification_due_ms(&self) -> StoreResult<Option<i64>>;
    /// Whether the opt-out token is known (`Some`), and whether it has opted out already.
    async fn opt_out_state(&self, token: &str) -> StoreResult<Option<bool>>;
    /// Opts the token's recipient out of every later message; false if the token is unknown.
    async fn opt_out(&self, token: &str, now: Timestamp) -> StoreResult<bool>;

    /// The tables' upkeep the database does not do by itself in time (`PostgreSQL`: analyse
    /// and vacuum the hot tables past their thresholds); the commands it ran. Called every
    /// few seconds by one task per process.
    async fn upkeep(&self) -> StoreResult<Vec<String>> {
        Ok(Vec::new())
    }
}

pub type DynStore = Arc<dyn Store>;

/// What a driver's change did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverUpdate {
    Updated(StoredDriver),
    /// No such driver, or deleted.
    NotFound,
    /// The driver changed after the read the change was laid over: nothing written.
    Changed,
}

/// `text` for a `LIKE … ESCAPE '\'` pattern: its `%`, `_` and `\` match themselves.
pub(crate) fn like_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// Opens the backend named by the URL's scheme (async: a network backend connects here),
/// with the outbox that renders the webhook events its changes cause.
/// `pg` sizes the `PostgreSQL` pool (unused on `SQLite`).
#[allow(clippy::unused_async)]
pub async fn open(
    url: &str,
    pg: &dropslot_core::config::PostgresSettings,
    outbox: Arc<dyn Outbox>,
) -> StoreResult<DynStore> {
    match dropslot_core::config::DatabaseUrl::parse(url).map_err(StoreError::Invalid)? {
        dropslot_core::config::DatabaseUrl::Sqlite(path) => Ok(Arc::new(sqlite::SqliteStore::open(&path, outbox)?)),
        dropslot_core::config::DatabaseUrl::Postgres(url) => Ok(Arc::new(postgres::PgStore::open(&url, pg, outbox)?)),
    }
}
