//! Recipient notifications crossing the storage seam (CONTRACT §14): what a shipment's change
//! enqueues (planned here once, written by both backends in the change's transaction), what
//! the sender claims and reports, and a client's settings.

use super::{StoredEvent, StoredShipment};
use crate::{Scope, StoreResult};
use async_trait::async_trait;
use dropslot_core::shipments::Status;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a message tells the recipient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Scheduled,
    OutForDelivery,
    Delivered,
    Failed,
}

impl Trigger {
    pub const ALL: [Trigger; 4] = [Trigger::Scheduled, Trigger::OutForDelivery, Trigger::Delivered, Trigger::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Scheduled => "scheduled",
            Trigger::OutForDelivery => "out_for_delivery",
            Trigger::Delivered => "delivered",
            Trigger::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Trigger> {
        Trigger::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The trigger a drop-off shipment's move to `status` fires, if any.
    pub fn of(status: Status) -> Option<Trigger> {
        match status {
            Status::Scheduled => Some(Trigger::Scheduled),
            Status::InTransit => Some(Trigger::OutForDelivery),
            Status::Delivered => Some(Trigger::Delivered),
            Status::Failed => Some(Trigger::Failed),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Email,
    Sms,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Email => "email",
            Channel::Sms => "sms",
        }
    }

    pub fn parse(s: &str) -> Option<Channel> {
        match s {
            "email" => Some(Channel::Email),
            "sms" => Some(Channel::Sms),
            _ => None,
        }
    }
}

/// Which triggers a client has on.
// One switch per trigger is the wire shape CONTRACT §14 fixes.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerSwitches {
    pub scheduled: bool,
    pub out_for_delivery: bool,
    pub delivered: bool,
    pub failed: bool,
}

/// A client's notification settings in one mode (CONTRACT §14): all on by default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NotificationSettings {
    /// The name the recipient sees as the sender (1–100 characters, no line breaks); empty
    /// means the configured `from` name.
    pub sender_name: String,
    pub email: bool,
    pub sms: bool,
    pub triggers: TriggerSwitches,
}

impl Default for NotificationSettings {
    fn default() -> Self {
        NotificationSettings {
            sender_name: String::new(),
            email: true,
            sms: true,
            triggers: TriggerSwitches { scheduled: true, out_for_delivery: true, delivered: true, failed: true },
        }
    }
}

impl NotificationSettings {
    /// Stored settings, or the defaults when none (or unreadable ones) are stored.
    pub fn from_json(json: Option<&str>) -> NotificationSettings {
        json.and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default()
    }

    pub fn wants(&self, trigger: Trigger, channel: Channel) -> bool {
        let t = &self.triggers;
        let on = match trigger {
            Trigger::Scheduled => t.scheduled,
            Trigger::OutForDelivery => t.out_for_delivery,
            Trigger::Delivered => t.delivered,
            Trigger::Failed => t.failed,
        };
        on && match channel {
            Channel::Email => self.email,
            Channel::Sms => self.sms,
        }
    }
}

/// Which channels the operator configured (an SMTP server, an SMS provider).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Channels {
    pub email: bool,
    pub sms: bool,
}

/// What the texts are rendered from at send time: the facts as of the change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    pub date: String,
    pub slot: String,
    pub start_at: String,
    pub end_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<String>,
    /// For `failed`: true when another attempt follows, false when the parcel goes back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub another_attempt: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A message a change enqueues, planned by [`plan`] and written by a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewNotification {
    pub drop_off_id: i64,
    pub shipment_unique_id: String,
    pub trigger: Trigger,
    pub channel: Channel,
    pub recipient: String,
    pub recipient_hash: String,
    pub state: &'static str,
    pub facts_json: String,
    pub message_id: String,
}

/// The tenant facts a plan needs: the shipment's mode and its client's settings.
#[derive(Debug, Clone)]
pub struct NotifyTenant {
    pub client: i64,
    pub mode: String,
    pub settings: NotificationSettings,
}

/// The messages `events` of one drop-off shipment cause: per trigger fired, one per channel
/// the recipient has an address for. The state is decided now where it can be: `test_mode`
/// (never sent), `disabled` (switched off by the client), `not_configured` (no such channel
/// configured); else `pending`. An opt-out is checked by the sender, when it sends.
pub fn plan(
    tenant: &NotifyTenant,
    channels: Channels,
    shipment: &StoredShipment,
    events: &[StoredEvent],
) -> Vec<NewNotification> {
    let d = &shipment.drop_off;
    let mut out = Vec::new();
    for e in events {
        let Some(trigger) = Trigger::of(e.to) else { continue };
        let facts = Facts {
            date: d.scheduled_date.clone(),
            slot: d.slot_name.clone(),
            start_at: d.start_at.clone(),
            end_at: d.end_at.clone(),
            receiver: e
                .proof
                .iter()
                .find(|p| p.kind == dropslot_core::shipments::ProofKind::ReceiverName)
                .map(|p| p.value.clone()),
            another_attempt: (trigger == Trigger::Failed).then_some(d.attempts < d.max_attempts),
            reason: e.reason.clone().filter(|_| trigger == Trigger::Failed),
        };
        let facts_json = serde_json::to_string(&facts).unwrap_or_default();
        let addresses = [
            (Channel::Email, d.address.person_email.as_deref(), channels.email),
            (Channel::Sms, d.address.person_phone.as_deref(), channels.sms),
        ];
        for (channel, address, configured) in addresses {
            let Some(recipient) = address.map(str::trim).filter(|a| !a.is_empty()) else { continue };
            let state = if tenant.mode == "test" {
                "test_mode"
            } else if !tenant.settings.wants(trigger, channel) {
                "disabled"
            } else if !configured {
                "not_configured"
            } else {
                "pending"
            };
            out.push(NewNotification {
                drop_off_id: d.id.0,
                shipment_unique_id: d.unique_id.clone(),
                trigger,
                channel,
                recipient: recipient.to_string(),
                recipient_hash: recipient_hash(channel, recipient),
                state,
                facts_json: facts_json.clone(),
                message_id: new_message_id(),
            });
        }
    }
    out
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
    pub state: String,
    pub attempts: i64,
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
}

/// What one claim took: the messages to send, and how many left `sending` by a process that
/// died with them it turned `uncertain` (they may have been delivered: never sent again).
#[derive(Debug, Clone, Default)]
pub struct NotificationClaim {
    pub messages: Vec<ClaimedNotification>,
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
    pub(crate) fn columns(&self) -> (&'static str, Option<&str>, Option<i64>, Option<String>) {
        match &self.end {
            NotificationEnd::Sent => ("sent", None, None, Some(self.now.to_string())),
            NotificationEnd::Retry { error, next_ms } => ("pending", Some(error), Some(*next_ms), None),
            NotificationEnd::Failed { error } => ("failed", Some(error), None, None),
            NotificationEnd::Uncertain { error } => ("uncertain", Some(error), None, None),
            NotificationEnd::OptedOut => ("opted_out", None, None, None),
        }
    }
}

/// What a crashed attempt's row says: the service stopped after handing the message over
/// and before hearing the answer, so it may have been delivered and is not sent again.
pub const UNCERTAIN_ERROR: &str = "The service stopped while this message was being handed over; it may have \
                                   been delivered and is not sent again (to avoid a second copy).";

#[cfg(test)]
mod tests {
    use super::*;

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
    fn settings_default_all_on() {
        let s = NotificationSettings::from_json(None);
        assert!(Trigger::ALL.iter().all(|&t| s.wants(t, Channel::Email) && s.wants(t, Channel::Sms)));
        let mut off = s.clone();
        off.triggers.failed = false;
        assert!(!off.wants(Trigger::Failed, Channel::Email));
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

    fn tenant(mode: &str, settings: NotificationSettings) -> NotifyTenant {
        NotifyTenant { client: 1, mode: mode.into(), settings }
    }

    #[test]
    fn plans_one_row_per_channel_with_its_state() {
        let both = Channels { email: true, sms: true };
        let s = shipment(Some("jane@example.com"), Some("+1 416 555 0100"), 1);
        let live = tenant("live", NotificationSettings::default());
        let rows = plan(&live, both, &s, &[event(Status::Scheduled, None), event(Status::ToPickUp, None)]);
        let got: Vec<_> = rows.iter().map(|n| (n.trigger, n.channel, n.state)).collect();
        assert_eq!(
            got,
            [(Trigger::Scheduled, Channel::Email, "pending"), (Trigger::Scheduled, Channel::Sms, "pending")],
            "to_pick_up fires nothing"
        );
        let states = |t: &NotifyTenant, c: Channels| -> Vec<&str> {
            plan(t, c, &s, &[event(Status::InTransit, None)]).iter().map(|n| n.state).collect()
        };
        assert_eq!(states(&tenant("test", NotificationSettings::default()), both), ["test_mode", "test_mode"]);
        assert_eq!(states(&live, Channels { email: true, sms: false }), ["pending", "not_configured"]);
        let mut off = NotificationSettings::default();
        off.triggers.out_for_delivery = false;
        assert_eq!(states(&tenant("live", off), both), ["disabled", "disabled"]);
        let nobody = shipment(None, Some("  "), 1);
        assert!(plan(&live, both, &nobody, &[event(Status::Delivered, None)]).is_empty(), "no address, no row");
    }

    #[test]
    fn a_failure_says_whether_another_attempt_follows() {
        let live = tenant("live", NotificationSettings::default());
        let email = Channels { email: true, sms: false };
        let facts = |attempts: u32| -> Facts {
            let s = shipment(Some("jane@example.com"), None, attempts);
            let rows = plan(&live, email, &s, &[event(Status::Failed, Some("Nobody at home"))]);
            serde_json::from_str(&rows[0].facts_json).unwrap()
        };
        assert_eq!(facts(1).another_attempt, Some(true));
        assert_eq!(facts(3).another_attempt, Some(false), "the third of three attempts failed: the return");
        assert_eq!(facts(1).reason.as_deref(), Some("Nobody at home"));
    }

    fn message_id_ok(id: &str) -> bool {
        id.starts_with("<n_") && id.ends_with("@dropslot>")
    }
}

#[async_trait]
pub trait NotificationStore: Send + Sync + 'static {
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
