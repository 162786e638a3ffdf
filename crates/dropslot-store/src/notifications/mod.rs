//! Recipient notifications crossing the storage seam (CONTRACT §14): what a shipment's change
//! enqueues (planned by the core's rule, keyed here, written by both backends in the change's
//! transaction), what the sender claims and reports, and a client's settings.

use super::{StoredEvent, StoredShipment};
use crate::{Mode, Scope, StoreError, StoreResult};
use async_trait::async_trait;
use dropslot_core::notifications::{Change, Moved, Retimed};
pub(crate) use dropslot_core::notifications::{Channel, Channels, MessageState, NotificationSettings, Trigger};
use jiff::Timestamp;
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

/// A message a change enqueues, planned by the core and given its ids by [`plan`]; written by
/// a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewNotification {
    pub drop_off_id: i64,
    pub shipment_unique_id: String,
    pub trigger: Trigger,
    pub channel: Channel,
    pub recipient: String,
    pub recipient_hash: String,
    pub state: MessageState,
    pub facts_json: String,
    pub message_id: String,
    /// With (shipment, trigger, channel), the row's key ([`dropslot_core::notifications::PlannedMessage::occasion`]).
    pub occasion: String,
}

/// The tenant facts a plan needs: the shipment's mode and its client's settings.
#[derive(Debug, Clone)]
pub struct NotifyTenant {
    pub client: i64,
    pub mode: String,
    pub settings: NotificationSettings,
}

/// The messages `events` of one drop-off shipment cause: the core's plan
/// ([`dropslot_core::notifications::plan`]) over the shipment as stored, each message given
/// its rows' keys (the opt-out hash, a Message-ID).
pub(crate) fn plan(
    tenant: &NotifyTenant,
    channels: Channels,
    shipment: &StoredShipment,
    events: &[StoredEvent],
    rescheduled: bool,
    retimed: Option<Retimed>,
) -> Vec<NewNotification> {
    let d = &shipment.drop_off;
    let change = Change {
        moves: events.iter().map(|e| Moved { to: e.to, proof: &e.proof, reason: e.reason.as_deref() }).collect(),
        attempts: d.attempts,
        max_attempts: d.max_attempts,
        date: &d.scheduled_date,
        slot: &d.slot_name,
        start_at: &d.start_at,
        end_at: &d.end_at,
        email: d.address.person_email.as_deref(),
        phone: d.address.person_phone.as_deref(),
        test_mode: tenant.mode == Mode::Test.as_str(),
        settings: &tenant.settings,
        channels,
        rescheduled,
        retimed,
    };
    dropslot_core::notifications::plan(&change)
        .into_iter()
        .map(|m| NewNotification {
            drop_off_id: d.id.0,
            shipment_unique_id: d.unique_id.clone(),
            trigger: m.trigger,
            channel: m.channel,
            recipient_hash: recipient_hash(m.channel, &m.recipient),
            recipient: m.recipient,
            state: m.state,
            facts_json: serde_json::to_string(&m.facts).unwrap_or_default(),
            message_id: new_message_id(),
            occasion: m.occasion,
        })
        .collect()
}

/// `state IN ('pending', 'sending')`, as SQL text built once from the core's names: the
/// condition of the partial index `notifications_due` (migrations 0018). A statement that reads
/// through that index must repeat it as a constant (a bound state cannot prove it: `SQLite`
/// never, `PostgreSQL` not in a cached statement's generic plan), so these names are the one
/// place where the backends put a state into SQL text rather than bind it.
pub(crate) static QUEUED_STATES: LazyLock<String> = LazyLock::new(|| {
    let names: Vec<String> = MessageState::QUEUED.iter().map(|s| format!("'{}'", s.as_str())).collect();
    format!("state IN ({})", names.join(", "))
});

/// A client's stored settings (`None`: none stored, the defaults); stored JSON that does not
/// read is corrupt data, never the defaults.
pub(crate) fn stored_settings(json: Option<&str>) -> StoreResult<NotificationSettings> {
    NotificationSettings::from_json(json).map_err(|e| StoreError::Corrupt(format!("notification settings: {e}")))
}

/// The opt-out key of an address or number: SHA-256 (hex) of its normal form (an e-mail
/// address lower-cased, a number's digits with its leading `+`).
pub fn recipient_hash(channel: Channel, recipient: &str) -> String {
    let normal = match channel {
        Channel::Email => format!("email:{}", recipient.trim().to_lowercase()),
        Channel::Sms => {
            let t = recipient.trim();
            let digits: String = t.chars().filter(char::is_ascii_digit).collect();
            format!("sms:{}{digits}", if t.starts_with('+') { "+" } else { "" })
        }
    };
    dropslot_core::ids::hex(&Sha256::digest(normal.as_bytes()))
}

/// `<n_…@dropslot>`: a message's stable Message-ID, fixed when enqueued (every attempt sends it).
pub fn new_message_id() -> String {
    use base64::Engine;
    let random = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(dropslot_core::ids::random_bytes::<16>());
    format!("<n_{random}@dropslot>")
}

/// An unguessable opt-out token (24 random bytes, base64url).
pub fn new_opt_out_token() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(dropslot_core::ids::random_bytes::<24>())
}

/// A message as listed (`GET /shipments/{id}/notifications`, the dashboard).
#[derive(Debug, Clone)]
pub struct StoredNotification {
    pub id: i64,
    pub trigger: Trigger,
    pub channel: Channel,
    pub recipient: String,
    pub state: MessageState,
    pub attempts: i64,
    /// How many times it was sent again because a crash cut its hand-over off.
    pub repeated_after_crash: i64,
    pub last_error: Option<String>,
    pub created_at: String,
    pub sent_at: Option<String>,
}

/// A message the sender claimed, with what it needs to send it.
#[derive(Debug, Clone)]
pub struct ClaimedNotification {
    pub id: i64,
    pub client: i64,
    pub shipment_unique_id: String,
    pub trigger: Trigger,
    pub channel: Channel,
    pub recipient: String,
    pub facts_json: String,
    pub message_id: String,
    pub attempts: i64,
    pub lease_until_ms: i64,
    /// The recipient's opt-out token (made when first claimed for this recipient).
    pub opt_out_token: String,
    pub opted_out: bool,
    pub settings: NotificationSettings,
    /// The drop-off's secret label token, from which the link to its change page is derived
    /// (never shown itself).
    pub label_token: String,
}

/// What one claim took: the messages to send, and of those left `sending` by a process that
/// died handing them over, how many it made due again (sent again with their Message-ID:
/// at least once) and how many it turned `uncertain` (cut off by more crashes than
/// [`dropslot_core::notifications::CRASH_REPEATS`]: never sent again).
#[derive(Debug, Clone, Default)]
pub struct NotificationClaim {
    pub messages: Vec<ClaimedNotification>,
    pub repeated: u64,
    pub uncertain: u64,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotificationEnd {
    Sent,
    /// Not sent; tried again at `next_ms`.
    Retry {
        error: String,
        next_ms: i64,
    },
    /// Not sent, and never will be.
    Failed {
        error: String,
    },
    /// Handed over, and the answer lost (a broken connection or a timeout after the message
    /// went out): it may have been delivered, so it is not sent again.
    Uncertain {
        error: String,
    },
    OptedOut,
}

/// The end of one claimed attempt, recorded only while the claim (its lease) holds.
#[derive(Debug, Clone)]
pub struct NotificationOutcome {
    pub id: i64,
    pub lease_until_ms: i64,
    pub end: NotificationEnd,
    pub now: jiff::Timestamp,
}

impl NotificationOutcome {
    /// What the outcome writes on either backend: state, error, next attempt, sent at.
    pub(crate) fn columns(&self) -> (MessageState, Option<&str>, Option<i64>, Option<String>) {
        match &self.end {
            NotificationEnd::Sent => (MessageState::Sent, None, None, Some(self.now.to_string())),
            NotificationEnd::Retry { error, next_ms } => (MessageState::Pending, Some(error), Some(*next_ms), None),
            NotificationEnd::Failed { error } => (MessageState::Failed, Some(error), None, None),
            NotificationEnd::Uncertain { error } => (MessageState::Uncertain, Some(error), None, None),
            NotificationEnd::OptedOut => (MessageState::OptedOut, None, None, None),
        }
    }
}

/// What a crashed attempt's row says while it is sent again: the service stopped while
/// handing the message over, before hearing the answer; the repeat carries the same
/// Message-ID, so a copy that did arrive is recognised as the same message.
pub const REPEAT_ERROR: &str = "The service stopped while this message was being handed over; it is sent again \
                                with the same Message-ID (a copy that did arrive is the same message).";

/// What a crashed attempt's row says once crashes cut it off more often than it is repeated
/// ([`dropslot_core::notifications::CRASH_REPEATS`]): it may have been delivered, and is not
/// sent again.
pub const UNCERTAIN_ERROR: &str = "The service stopped while handing this message over more often than it is \
                                   sent again; it may have been delivered and is not sent again.";

#[cfg(test)]
mod tests {
    use super::*;
    use dropslot_core::notifications::Facts;
    use dropslot_core::shipments::Status;

    #[test]
    fn hashes_normal_forms() {
        assert_eq!(
            recipient_hash(Channel::Email, " Jane@Example.com"),
            recipient_hash(Channel::Email, "jane@example.com")
        );
        assert_eq!(recipient_hash(Channel::Sms, "+1 555 0100"), recipient_hash(Channel::Sms, "+15550100"));
        assert_ne!(recipient_hash(Channel::Sms, "15550100"), recipient_hash(Channel::Sms, "+15550100"));
    }

    #[test]
    fn the_queued_states_are_the_partial_index_condition() {
        let migration = include_str!("../../migrations/sqlite/0018_notifications.sql");
        assert!(migration.contains(&format!("WHERE {};", *QUEUED_STATES)), "{}", *QUEUED_STATES);
        let migration = include_str!("../../migrations/postgres/0018_notifications.sql");
        assert!(migration.contains(&format!("WHERE {};", *QUEUED_STATES)), "{}", *QUEUED_STATES);
    }

    #[test]
    fn stored_settings_that_do_not_read_are_corrupt() {
        assert_eq!(stored_settings(None).unwrap(), NotificationSettings::default());
        assert!(matches!(stored_settings(Some("{\"sms\": 1}")), Err(StoreError::Corrupt(_))));
        assert!(message_id_ok(&new_message_id()));
    }

    fn shipment(email: Option<&str>, phone: Option<&str>, attempts: u32) -> StoredShipment {
        use dropslot_core::ids::{DropOffShipmentId, PickUpShipmentId, ShipmentOrderId};
        use dropslot_core::money::{Money, TaxRate};
        let mut address: crate::StoredDropOffAddress = serde_json::from_value(serde_json::json!({
            "text": "290 Bremner Blvd", "postal_code": "M5V 3L9", "lat": 43.64, "lng": -79.39,
            "region": "ON", "location_service_postal_code": "M5V"
        }))
        .unwrap();
        address.person_email = email.map(str::to_string);
        address.person_phone = phone.map(str::to_string);
        let zero = Money::default();
        StoredShipment {
            eta: None,
            order_unique_id: "ORD".into(),
            drop_off_index: 0,
            shipment_order: ShipmentOrderId(1),
            shipment_order_unique_id: "SO".into(),
            totals: dropslot_core::quote::pricing::totals(zero, zero, TaxRate(0)),
            pick_up: crate::StoredPickUp {
                id: PickUpShipmentId(1),
                unique_id: "PU".into(),
                label_token: "t".into(),
                scheduled_date: "2026-11-23".into(),
                start_at: "2026-11-23T09:00:00-05:00".into(),
                end_at: "2026-11-23T12:00:00-05:00".into(),
                status: Status::Scheduled,
                slot_name: "Morning".into(),
                address_text: "100 King St W".into(),
                address_located_by: dropslot_core::geo::LocatedBy::default(),
            },
            drop_off: crate::StoredDropOff {
                id: DropOffShipmentId(7),
                unique_id: "DROP7".into(),
                label_token: "t".into(),
                scheduled_date: "2026-11-23".into(),
                slot_code: "EV".into(),
                slot_name: "Evening".into(),
                start_at: "2026-11-23T14:00:00-05:00".into(),
                end_at: "2026-11-23T18:00:00-05:00".into(),
                city: "Toronto".into(),
                address,
                status: Status::Scheduled,
                attempts,
                max_attempts: 3,
                zone_code: "TOR-DT".into(),
                instruction: None,
                return_attempts: 0,
                return_slot: None,
            },
            parcels: Vec::new(),
            events: Vec::new(),
        }
    }

    fn event(to: Status, reason: Option<&str>) -> StoredEvent {
        StoredEvent {
            id: 1,
            seq: 1,
            from: None,
            to,
            at: jiff::Timestamp::UNIX_EPOCH,
            actor: dropslot_core::shipments::Actor::Ops,
            reason: reason.map(str::to_string),
            attempt: None,
            proof: Vec::new(),
        }
    }

    fn tenant(mode: Mode) -> NotifyTenant {
        NotifyTenant { client: 1, mode: mode.as_str().into(), settings: NotificationSettings::default() }
    }

    /// The adapter hands the shipment as stored to the core's rule (covered there) and gives
    /// each message its keys.
    #[test]
    fn plans_rows_from_the_stored_shipment() {
        let both = Channels { email: true, sms: true };
        let s = shipment(Some(" Jane@example.com"), Some("+1 416 555 0100"), 3);
        let rows = plan(&tenant(Mode::Live), both, &s, &[event(Status::Failed, Some("Nobody at home"))], false, None);
        let got: Vec<_> = rows.iter().map(|n| (n.trigger, n.channel, n.recipient.as_str(), n.state)).collect();
        assert_eq!(
            got,
            [
                (Trigger::Failed, Channel::Email, "Jane@example.com", MessageState::Pending),
                (Trigger::Failed, Channel::Sms, "+1 416 555 0100", MessageState::Pending)
            ]
        );
        let n = &rows[0];
        assert_eq!((n.drop_off_id, n.shipment_unique_id.as_str()), (7, "DROP7"));
        assert_eq!(n.recipient_hash, recipient_hash(Channel::Email, "jane@example.com"));
        assert!(message_id_ok(&n.message_id) && n.message_id != rows[1].message_id);
        let facts: Facts = serde_json::from_str(&n.facts_json).unwrap();
        // The failure alone: what follows it is not in this change (held for the merchant).
        assert_eq!((facts.slot.as_str(), facts.another_attempt), ("Evening", None));
        assert_eq!(facts.reason.as_deref(), Some("Nobody at home"));
        let test = plan(&tenant(Mode::Test), both, &s, &[event(Status::Delivered, None)], false, None);
        assert!(test.iter().all(|n| n.state == MessageState::TestMode));
    }

    fn message_id_ok(id: &str) -> bool {
        id.starts_with("<n_") && id.ends_with("@dropslot>")
    }
}

#[async_trait]
pub trait NotificationStore: Send + Sync + 'static {
    /// The client's settings in the scope's mode (the defaults when none are stored; stored
    /// ones that do not read are [`StoreError::Corrupt`]).
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
    /// opt-out token here). First, a message left `sending` past its lease (its process died
    /// handing it over) is due again, one repeat more, while it has had fewer than
    /// [`dropslot_core::notifications::CRASH_REPEATS`]; past that it becomes `uncertain`.
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
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: NotificationStore> NotificationStore for crate::trace::Traced<S> {
    async fn notification_settings(&self, scope: Scope) -> StoreResult<NotificationSettings> {
        self.trace.hit("NotificationStore::notification_settings");
        self.inner.notification_settings(scope).await
    }

    async fn set_notification_settings(
        &self,
        scope: Scope,
        settings: NotificationSettings,
        now: Timestamp,
    ) -> StoreResult<()> {
        self.trace.hit("NotificationStore::set_notification_settings");
        self.inner.set_notification_settings(scope, settings, now).await
    }

    async fn shipment_notifications(&self, scope: Scope, unique_id: &str) -> StoreResult<Vec<StoredNotification>> {
        self.trace.hit("NotificationStore::shipment_notifications");
        self.inner.shipment_notifications(scope, unique_id).await
    }

    async fn claim_notifications(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: usize,
    ) -> StoreResult<NotificationClaim> {
        self.trace.hit("NotificationStore::claim_notifications");
        self.inner.claim_notifications(now_ms, lease_until_ms, limit).await
    }

    async fn notifications_sending(&self, ids: Vec<i64>, lease_until_ms: i64) -> StoreResult<Vec<i64>> {
        self.trace.hit("NotificationStore::notifications_sending");
        self.inner.notifications_sending(ids, lease_until_ms).await
    }

    async fn finish_notifications(&self, outcomes: Vec<NotificationOutcome>) -> StoreResult<Vec<i64>> {
        self.trace.hit("NotificationStore::finish_notifications");
        self.inner.finish_notifications(outcomes).await
    }

    async fn next_notification_due_ms(&self) -> StoreResult<Option<i64>> {
        self.trace.hit("NotificationStore::next_notification_due_ms");
        self.inner.next_notification_due_ms().await
    }

    async fn opt_out_state(&self, token: &str) -> StoreResult<Option<bool>> {
        self.trace.hit("NotificationStore::opt_out_state");
        self.inner.opt_out_state(token).await
    }

    async fn opt_out(&self, token: &str, now: Timestamp) -> StoreResult<bool> {
        self.trace.hit("NotificationStore::opt_out");
        self.inner.opt_out(token, now).await
    }
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
