//! Records of webhooks crossing the storage seam: endpoints, the outbox's deliveries and
//! their attempts, and what the dispatcher claims and reports. Plain data; the rendering of
//! bodies is the `Outbox` a backend is opened with (implemented by `webhooks`).

use jiff::Timestamp;

use dropslot_core::shipments::{self, ShipmentKind};

use super::{StoreError, StoredEvent, StoredParcel, StoredShipment, WrittenOrder};

/// A change's recorded events `(drop-off shipment, event)` grouped by shipment, shipments
/// in the order they first appear and each one's events in order: one outbox call each.
pub fn by_shipment(events: &[(i64, StoredEvent)]) -> Vec<(i64, Vec<StoredEvent>)> {
    let mut groups: Vec<(i64, Vec<StoredEvent>)> = Vec::new();
    for (shipment, e) in events {
        match groups.iter_mut().find(|(s, _)| s == shipment) {
            Some((_, mine)) => mine.push(e.clone()),
            None => groups.push((*shipment, vec![e.clone()])),
        }
    }
    groups
}

/// An endpoint that may receive a shipment's events, as a backend's outbox reads it: its id,
/// the kinds it takes, and its tenant (the shipment's).
pub(crate) struct Subscriber {
    pub id: i64,
    pub events: Vec<String>,
    pub client: i64,
    pub mode: String,
}

impl Subscriber {
    pub fn wants(&self, event: &str) -> bool {
        self.events.iter().any(|e| e == "*" || e == event)
    }
}

/// A message a change queues, rendered, with the endpoints it goes to. Each delivery joins
/// the back of its (endpoint, shipment) stream: `behind` when the stream already has an
/// unfinished delivery (it is queued `waiting`), else `pending`.
pub(crate) struct Queued {
    pub event: String,
    pub body: String,
    /// The drop-off shipment: the stream's ordering key.
    pub shipment: i64,
    /// `(endpoint, behind)`, in the subscribers' order.
    pub deliveries: Vec<(i64, bool)>,
}

/// The messages one drop-off shipment's new `events` queue to its `subscribers` (the
/// client's enabled endpoints in its mode): each event a subscriber takes, and for a
/// `created` shipment each parcel's `same.parcel.created`, rendered by `outbox`. `busy[i]`
/// says whether subscriber i's stream for this shipment has an unfinished delivery (none,
/// for a created one); a queued delivery makes it busy. Both backends write what this plans.
pub(crate) fn plan(
    outbox: &dyn Outbox,
    subscribers: &[Subscriber],
    busy: &mut [bool],
    shipment: &StoredShipment,
    events: &[StoredEvent],
    created: bool,
    now: Timestamp,
) -> Result<Vec<Queued>, StoreError> {
    let mut queued = Vec::new();
    let mut queue = |event: String, body: String| {
        let deliveries = subscribers
            .iter()
            .zip(busy.iter_mut())
            .filter(|(s, _)| s.wants(&event))
            .map(|(s, busy)| (s.id, std::mem::replace(busy, true)))
            .collect();
        queued.push(Queued { event, body, shipment: shipment.drop_off.id.0, deliveries });
    };
    for e in events {
        let kind = format!("same.shipment.{}", e.to.as_str());
        if subscribers.iter().any(|s| s.wants(&kind)) {
            let body = outbox.shipment_event(shipment, e).map_err(StoreError::Corrupt)?;
            queue(kind, body);
        }
    }
    if created {
        let kind = "same.parcel.created";
        if subscribers.iter().any(|s| s.wants(kind)) {
            let at = events.first().map_or(now, |e| e.at);
            for p in &shipment.parcels {
                let body = outbox.parcel_created(shipment, p, at).map_err(StoreError::Corrupt)?;
                queue(kind.to_string(), body);
            }
        }
    }
    Ok(queued)
}

/// A new order's drop-off shipments, each with its first event (`scheduled`, stored with
/// the id `event_id` gives): what the creation's webhooks render. Both backends take them
/// from the order as written, never from a re-read.
pub(crate) fn created_events(
    written: &WrittenOrder,
    event_id: impl Fn(i64) -> Option<i64>,
) -> Result<Vec<(&StoredShipment, StoredEvent)>, StoreError> {
    let created = written.created_at.timestamp();
    written
        .shipments
        .iter()
        .map(|shipment| {
            let drop_off = shipment.drop_off.id.0;
            let id = event_id(drop_off).ok_or_else(|| {
                StoreError::Corrupt(format!("drop-off shipment {drop_off} was inserted without its first event"))
            })?;
            let e = shipments::created(ShipmentKind::DropOff, drop_off);
            let scheduled = StoredEvent {
                id,
                seq: 1,
                from: e.from,
                to: e.to,
                at: created,
                actor: e.actor,
                reason: e.reason,
                attempt: e.attempt,
                proof: e.proof,
            };
            Ok((shipment, scheduled))
        })
        .collect()
}

/// `msg_` + 22 base64url characters (16 random bytes): a message's stable `webhook-id`.
pub(crate) fn new_webhook_id() -> String {
    use base64::Engine;
    format!("msg_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(dropslot_core::ids::random_bytes::<16>()))
}

/// The queue's clock: Unix milliseconds on the system clock.
pub fn queue_now_ms() -> i64 {
    Timestamp::now().as_millisecond()
}

/// Renders event bodies inside the transaction that causes them, and hears, after the
/// commit, that deliveries were queued. A backend is opened with one.
pub trait Outbox: Send + Sync + 'static {
    /// The body of a `same.shipment.<status>` event of this drop-off shipment.
    fn shipment_event(&self, shipment: &StoredShipment, event: &StoredEvent) -> Result<String, String>;
    /// The body of `same.parcel.created` for one parcel of a new shipment.
    fn parcel_created(&self, shipment: &StoredShipment, parcel: &StoredParcel, at: Timestamp)
    -> Result<String, String>;
    /// Called after a commit that queued `n` deliveries (wakes the dispatcher).
    fn queued(&self, n: usize);
    /// Which notification channels are configured: a message for another is recorded
    /// `not_configured` (CONTRACT §14).
    fn channels(&self) -> crate::Channels {
        crate::Channels::default()
    }
    /// Called after a commit that queued `n` recipient notifications to send (wakes the sender).
    fn notified(&self, n: usize) {
        let _ = n;
    }
}

/// The optional header sent with every delivery.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryState {
    /// Behind an unfinished delivery of the same shipment to the same endpoint.
    Waiting,
    /// Due at `next_attempt_ms` (or in flight until then).
    Pending,
    Delivered,
    /// Out of retries, or its endpoint was disabled or deleted.
    Failed,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Waiting => "waiting",
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }
    pub fn parse(s: &str) -> Option<DeliveryState> {
        match s {
            "waiting" => Some(DeliveryState::Waiting),
            "pending" => Some(DeliveryState::Pending),
            "delivered" => Some(DeliveryState::Delivered),
            "failed" => Some(DeliveryState::Failed),
            _ => None,
        }
    }
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

pub use dropslot_core::webhooks::AttemptOutcome;

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
