//! The outbox seam: what a change causes, rendered inside the change's transaction. Webhook
//! deliveries are planned here (rendered by the `Outbox` the backend is opened with, which the
//! service implements) and recipient messages are queued beside them; each backend's half
//! writes them (`Sink`), so every writing domain reaches both through one door.

use crate::{StoreError, StoredEvent, StoredParcel, StoredShipment, WrittenOrder};
use dropslot_core::shipments;
use dropslot_core::shipments::ShipmentKind;
use dropslot_core::webhooks;
use jiff::Timestamp;

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
        webhooks::subscribes(&self.events, event)
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
/// client's enabled endpoints in its mode), as the core's [`webhooks::fan_out`] plans them,
/// each body rendered by `outbox`. `busy[i]` says whether subscriber i's stream for this
/// shipment has an unfinished delivery (none, for a created one). Both backends write what
/// this returns.
pub(crate) fn plan_deliveries(
    outbox: &dyn Outbox,
    subscribers: &[Subscriber],
    busy: &mut [bool],
    shipment: &StoredShipment,
    events: &[StoredEvent],
    created: bool,
    now: Timestamp,
) -> Result<Vec<Queued>, StoreError> {
    let subscribed: Vec<&[String]> = subscribers.iter().map(|s| s.events.as_slice()).collect();
    let statuses: Vec<_> = events.iter().map(|e| e.to).collect();
    let at = events.first().map_or(now, |e| e.at);
    webhooks::fan_out(&subscribed, busy, &statuses, shipment.parcels.len(), created)
        .into_iter()
        .map(|fan| {
            let body = match fan.body {
                webhooks::Body::Event(i) => outbox.shipment_event(shipment, &events[i]),
                webhooks::Body::ParcelCreated(p) => outbox.parcel_created(shipment, &shipment.parcels[p], at),
            }
            .map_err(StoreError::Corrupt)?;
            let deliveries = fan.deliveries.into_iter().map(|(i, behind)| (subscribers[i].id, behind)).collect();
            Ok(Queued { event: fan.event, body, shipment: shipment.drop_off.id.0, deliveries })
        })
        .collect()
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
    /// The rules that decide what follows a failed delivery (CONTRACT §15), read in the
    /// failure's transaction; without them a failure stays `failed`.
    fn attempts(&self) -> Option<&dropslot_core::attempts::Rules> {
        None
    }
    /// The fleet depots' tentative plans and their rules (`[capacity] mode = "fleet"`, issue
    /// 45); without them no depot books on its fleet.
    fn fleet(&self) -> Option<&crate::tentative::Fleet> {
        None
    }
    /// The body of `same.shipment.rescheduled` for this drop-off shipment as the change left it.
    fn rescheduled(&self, shipment: &StoredShipment, change: &crate::Rescheduled) -> Result<String, String> {
        let _ = (shipment, change);
        Err("this outbox renders no rescheduled event".into())
    }
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
pub(crate) mod postgres;
pub(crate) mod sqlite;
