//! Recipient notifications (CONTRACT §14): which messages a drop-off shipment's moves fire, on
//! which channel, to whom and in which state. Decided once here; both backends persist the plan.

use serde::{Deserialize, Serialize};

use crate::shipments::{Proof, ProofKind, Status};

pub mod new_time;

/// What a message tells the recipient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    Scheduled,
    OutForDelivery,
    Delivered,
    Failed,
    /// The service moved the delivery to another slot itself: the fleet could not route it in
    /// the one booked (issue 45, `[dispatch] unplaced = "rebook"`).
    Rescheduled,
    /// The live ETA window left the one the recipient was last told (CONTRACT §16,
    /// [`new_time`]): at most [`new_time::MAX_NEW_TIMES`] a shipment and day.
    NewTime,
    /// The stop before this one was served: "you are the next stop, in about N minutes"
    /// (off unless the client switches it on).
    NextStop,
}

impl Trigger {
    pub const ALL: [Trigger; 7] = [
        Trigger::Scheduled,
        Trigger::OutForDelivery,
        Trigger::Delivered,
        Trigger::Failed,
        Trigger::Rescheduled,
        Trigger::NewTime,
        Trigger::NextStop,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Scheduled => "scheduled",
            Trigger::OutForDelivery => "out_for_delivery",
            Trigger::Delivered => "delivered",
            Trigger::Failed => "failed",
            Trigger::Rescheduled => "rescheduled",
            Trigger::NewTime => "new_time",
            Trigger::NextStop => "next_stop",
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel {
    Email,
    Sms,
}

impl Channel {
    pub const ALL: [Channel; 2] = [Channel::Email, Channel::Sms];

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Email => "email",
            Channel::Sms => "sms",
        }
    }

    pub fn parse(s: &str) -> Option<Channel> {
        Channel::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// How many times in all a message left `sending` by a process that died while handing it
/// over is sent again (docs/notifications.md, "At least once across a crash"): once per such
/// crash, with its Message-ID, up to this many; a message cut off by one crash more becomes
/// `uncertain` for good (something in it may be what stops the process).
pub const CRASH_REPEATS: i64 = 3;

/// Where a message stands (docs/notifications.md). Planned as `pending` or as one of the
/// states it never leaves (`test_mode`, `disabled`, `not_configured`); the sender takes a
/// `pending` one through `sending` to `sent`, `failed`, `uncertain` or `opted_out`, or back to
/// `pending` for another attempt (after a retryable failure, or after a crash cut its
/// hand-over off: [`CRASH_REPEATS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageState {
    Pending,
    Sending,
    Sent,
    Failed,
    /// Handed over and the answer lost within a running process (a broken connection, a
    /// timeout), or cut off by more crashes than [`CRASH_REPEATS`]: it may have been
    /// delivered, and is not sent again.
    Uncertain,
    OptedOut,
    /// A test-mode shipment's message: recorded, never sent.
    TestMode,
    /// The client switched its trigger or channel off.
    Disabled,
    /// The operator configured no such channel.
    NotConfigured,
}

impl MessageState {
    pub const ALL: [MessageState; 9] = [
        MessageState::Pending,
        MessageState::Sending,
        MessageState::Sent,
        MessageState::Failed,
        MessageState::Uncertain,
        MessageState::OptedOut,
        MessageState::TestMode,
        MessageState::Disabled,
        MessageState::NotConfigured,
    ];

    /// The states the sender still has work in: due, or being handed over.
    pub const QUEUED: [MessageState; 2] = [MessageState::Pending, MessageState::Sending];

    pub fn as_str(self) -> &'static str {
        match self {
            MessageState::Pending => "pending",
            MessageState::Sending => "sending",
            MessageState::Sent => "sent",
            MessageState::Failed => "failed",
            MessageState::Uncertain => "uncertain",
            MessageState::OptedOut => "opted_out",
            MessageState::TestMode => "test_mode",
            MessageState::Disabled => "disabled",
            MessageState::NotConfigured => "not_configured",
        }
    }

    /// A stored state; `None` for anything else (never a default).
    pub fn parse(s: &str) -> Option<MessageState> {
        MessageState::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

/// Which triggers a client has on.
// One switch per trigger is the wire shape CONTRACT §14 fixes.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerSwitches {
    pub scheduled: bool,
    pub out_for_delivery: bool,
    pub delivered: bool,
    pub failed: bool,
    /// Settings stored before this trigger existed read as on.
    #[serde(default = "on")]
    pub rescheduled: bool,
    /// Settings stored before this trigger existed read as on.
    #[serde(default = "on")]
    pub new_time: bool,
    /// Off unless switched on (stored settings without it read as off).
    #[serde(default)]
    pub next_stop: bool,
}

fn on() -> bool {
    true
}

/// A client's notification settings in one mode (CONTRACT §14): all on by default. Stored as
/// this JSON (`notification_settings.settings_json`), so its keys are frozen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
            triggers: TriggerSwitches {
                scheduled: true,
                out_for_delivery: true,
                delivered: true,
                failed: true,
                rescheduled: true,
                new_time: true,
                next_stop: false,
            },
        }
    }
}

impl NotificationSettings {
    /// Stored settings, or the defaults when none are stored. Stored JSON that does not read
    /// is an error, never the defaults (they would switch every message back on).
    pub fn from_json(json: Option<&str>) -> Result<NotificationSettings, serde_json::Error> {
        json.map_or_else(|| Ok(NotificationSettings::default()), serde_json::from_str)
    }

    pub fn wants(&self, trigger: Trigger, channel: Channel) -> bool {
        let t = &self.triggers;
        let on = match trigger {
            Trigger::Scheduled => t.scheduled,
            Trigger::OutForDelivery => t.out_for_delivery,
            Trigger::Delivered => t.delivered,
            Trigger::Failed => t.failed,
            Trigger::Rescheduled => t.rescheduled,
            Trigger::NewTime => t.new_time,
            Trigger::NextStop => t.next_stop,
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

/// What the texts are rendered from at send time: the facts as of the change. Stored as this
/// JSON with the message, so its keys are frozen.
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
    /// For `new_time` and `next_stop`: the window told, Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_from_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_to_ms: Option<i64>,
    /// For `next_stop`: minutes until the predicted arrival.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes: Option<u32>,
}

impl Facts {
    /// Whether a message of `trigger` links to the recipient's change page (CONTRACT §15):
    /// while something is left to change when it is sent — the slot or an instruction before
    /// the delivery, a new slot after a failure that another attempt or the merchant's decision
    /// follows; not once delivered, nor when the parcel goes back to the sender.
    pub fn links_change(&self, trigger: Trigger) -> bool {
        match trigger {
            Trigger::Scheduled
            | Trigger::OutForDelivery
            | Trigger::Rescheduled
            | Trigger::NewTime
            | Trigger::NextStop => true,
            Trigger::Delivered => false,
            Trigger::Failed => self.another_attempt != Some(false),
        }
    }
}

/// One recorded move of the shipment, as far as a message reads it.
#[derive(Debug, Clone, Copy)]
pub struct Moved<'a> {
    pub to: Status,
    /// The move's proof: a `receiver_name` one names who took the parcel.
    pub proof: &'a [Proof],
    pub reason: Option<&'a str>,
}

/// What [`plan`] decides from: the moves of one drop-off shipment, what its messages say, who
/// receives them, and its tenant's and operator's choices.
#[derive(Debug, Clone)]
pub struct Change<'a> {
    pub moves: Vec<Moved<'a>>,
    /// Delivery attempts made so far, and allowed.
    pub attempts: u32,
    pub max_attempts: u32,
    pub date: &'a str,
    pub slot: &'a str,
    pub start_at: &'a str,
    pub end_at: &'a str,
    /// The recipient's e-mail address and phone number, as given.
    pub email: Option<&'a str>,
    pub phone: Option<&'a str>,
    /// A test-mode shipment: its messages are recorded, never sent.
    pub test_mode: bool,
    pub settings: &'a NotificationSettings,
    pub channels: Channels,
    /// The service moved the delivery to the change's date and slot itself (no move of state):
    /// a `rescheduled` message.
    pub rescheduled: bool,
    /// Its live window moved ([`new_time`]): a `new_time` or `next_stop` message.
    pub retimed: Option<Retimed>,
}

/// A `new_time` or `next_stop` message decided by [`new_time`]'s rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retimed {
    pub trigger: Trigger,
    /// The window it tells, Unix milliseconds.
    pub from_ms: i64,
    pub to_ms: i64,
    /// `next_stop`: minutes until the arrival.
    pub minutes: Option<u32>,
    /// `new_time`: which one of the shipment's day it is (1 or 2).
    pub nth: u32,
}

/// A message [`plan`] decided: a backend gives it its ids and writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedMessage {
    pub trigger: Trigger,
    pub channel: Channel,
    /// The address or number, trimmed.
    pub recipient: String,
    pub state: MessageState,
    pub facts: Facts,
    /// What, beside (shipment, trigger, channel), keys the message so that it is written at
    /// most once: empty for the once-ever triggers, `{date}#{n}` for the `n`th `new_time` of a
    /// day, `{date}` for a day's `next_stop`.
    pub occasion: String,
}

/// Whether a failure in `moves` is followed by another attempt (`to_attempt`: true) or a
/// return (`return_scheduled`: false); `None` when it waits for a decision.
fn follows(moves: &[Moved<'_>]) -> Option<bool> {
    let after = moves.iter().skip_while(|m| m.to != Status::Failed).skip(1).map(|m| m.to);
    after.into_iter().find_map(|to| match to {
        Status::ToAttempt => Some(true),
        Status::ReturnScheduled | Status::Cancelled => Some(false),
        _ => None,
    })
}

/// The messages a change causes: per trigger fired, one per channel the recipient has an
/// address for. The state is decided now where it can be: `test_mode` (never sent),
/// `disabled` (switched off by the client), `not_configured` (no such channel configured);
/// else `pending`. An opt-out is checked by the sender, when it sends.
pub fn plan(change: &Change<'_>) -> Vec<PlannedMessage> {
    let mut out = Vec::new();
    let none = Moved { to: Status::Scheduled, proof: &[], reason: None };
    let fired = change
        .moves
        .iter()
        .filter_map(|m| Trigger::of(m.to).map(|t| (t, m)))
        .chain(change.rescheduled.then_some((Trigger::Rescheduled, &none)))
        .chain(change.retimed.map(|r| (r.trigger, &none)));
    for (trigger, moved) in fired {
        let failed = trigger == Trigger::Failed;
        let retimed = change.retimed.filter(|r| r.trigger == trigger);
        let occasion = match (trigger, retimed) {
            (Trigger::NewTime, Some(r)) => format!("{}#{}", change.date, r.nth),
            (Trigger::NextStop, _) => change.date.to_string(),
            _ => String::new(),
        };
        let facts = Facts {
            date: change.date.to_string(),
            slot: change.slot.to_string(),
            start_at: change.start_at.to_string(),
            end_at: change.end_at.to_string(),
            receiver: moved.proof.iter().find(|p| p.kind == ProofKind::ReceiverName).map(|p| p.value.clone()),
            // What followed the failure in the same change (CONTRACT §15): a re-attempt (the
            // change's date and slot are then the new ones), a return, or nothing yet (the
            // merchant decides).
            another_attempt: if failed { follows(&change.moves) } else { None },
            reason: moved.reason.filter(|_| failed).map(str::to_string),
            eta_from_ms: retimed.map(|r| r.from_ms),
            eta_to_ms: retimed.map(|r| r.to_ms),
            minutes: retimed.and_then(|r| r.minutes),
        };
        let addresses =
            [(Channel::Email, change.email, change.channels.email), (Channel::Sms, change.phone, change.channels.sms)];
        for (channel, address, configured) in addresses {
            let Some(recipient) = address.map(str::trim).filter(|a| !a.is_empty()) else { continue };
            let state = if change.test_mode {
                MessageState::TestMode
            } else if !change.settings.wants(trigger, channel) {
                MessageState::Disabled
            } else if !configured {
                MessageState::NotConfigured
            } else {
                MessageState::Pending
            };
            out.push(PlannedMessage {
                trigger,
                channel,
                recipient: recipient.to_string(),
                state,
                facts: facts.clone(),
                occasion: occasion.clone(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: Channels = Channels { email: true, sms: true };

    fn change<'a>(moves: Vec<Moved<'a>>, settings: &'a NotificationSettings) -> Change<'a> {
        Change {
            moves,
            attempts: 1,
            max_attempts: 3,
            date: "2026-11-23",
            slot: "Evening",
            start_at: "2026-11-23T14:00:00-05:00",
            end_at: "2026-11-23T18:00:00-05:00",
            email: Some("jane@example.com"),
            phone: Some("+1 416 555 0100"),
            test_mode: false,
            settings,
            channels: BOTH,
            rescheduled: false,
            retimed: None,
        }
    }

    #[test]
    fn a_rebooking_by_the_service_is_one_rescheduled_message_per_channel_with_the_new_slot() {
        let all_on = NotificationSettings::default();
        let planned = plan(&Change { rescheduled: true, ..change(Vec::new(), &all_on) });
        let got: Vec<(Trigger, Channel)> = planned.iter().map(|m| (m.trigger, m.channel)).collect();
        assert_eq!(got, [(Trigger::Rescheduled, Channel::Email), (Trigger::Rescheduled, Channel::Sms)]);
        assert_eq!(planned[0].facts.date, "2026-11-23");
        assert!(planned[0].facts.links_change(Trigger::Rescheduled));
        // Switched off by the client: recorded as disabled, never sent.
        let mut off = NotificationSettings::default();
        off.triggers.rescheduled = false;
        let planned = plan(&Change { rescheduled: true, ..change(Vec::new(), &off) });
        assert!(planned.iter().all(|m| m.state == MessageState::Disabled));
        // Settings stored before the trigger existed read it as on.
        let old: NotificationSettings = serde_json::from_str(
            r#"{"sender_name":"","email":true,"sms":true,"triggers":{"scheduled":true,"out_for_delivery":true,"delivered":true,"failed":false}}"#,
        )
        .unwrap();
        assert!(old.triggers.rescheduled && !old.triggers.failed);
        assert!(old.triggers.new_time && !old.triggers.next_stop, "new_time on, next_stop off");
    }

    #[test]
    fn a_retimed_message_carries_its_window_and_is_keyed_by_day_and_rank() {
        let mut all_on = NotificationSettings::default();
        let retimed = Retimed { trigger: Trigger::NewTime, from_ms: 1000, to_ms: 2000, minutes: None, nth: 2 };
        let planned = plan(&Change { retimed: Some(retimed), ..change(Vec::new(), &all_on) });
        assert_eq!(planned.iter().map(|m| m.trigger).collect::<Vec<_>>(), [Trigger::NewTime, Trigger::NewTime]);
        assert_eq!(planned[0].occasion, "2026-11-23#2");
        assert_eq!((planned[0].facts.eta_from_ms, planned[0].facts.eta_to_ms), (Some(1000), Some(2000)));
        assert!(planned.iter().all(|m| m.state == MessageState::Pending));
        let next = Retimed { trigger: Trigger::NextStop, minutes: Some(12), nth: 0, ..retimed };
        let planned = plan(&Change { retimed: Some(next), ..change(Vec::new(), &all_on) });
        assert_eq!((planned[0].occasion.as_str(), planned[0].facts.minutes), ("2026-11-23", Some(12)));
        assert!(planned.iter().all(|m| m.state == MessageState::Disabled), "next_stop is off by default");
        all_on.triggers.next_stop = true;
        let planned = plan(&Change { retimed: Some(next), ..change(Vec::new(), &all_on) });
        assert!(planned.iter().all(|m| m.state == MessageState::Pending));
        let once = plan(&change(vec![to(Status::Delivered)], &all_on));
        assert_eq!(once[0].occasion, "", "the once-ever triggers");
    }

    #[test]
    fn messages_link_the_change_page_while_something_is_left_to_change() {
        let f = Facts::default();
        assert!(f.links_change(Trigger::Scheduled) && f.links_change(Trigger::OutForDelivery));
        assert!(!f.links_change(Trigger::Delivered));
        assert!(Facts { another_attempt: Some(true), ..Facts::default() }.links_change(Trigger::Failed));
        assert!(f.links_change(Trigger::Failed), "held for the merchant: a new slot may still be chosen");
        assert!(!Facts { another_attempt: Some(false), ..Facts::default() }.links_change(Trigger::Failed));
    }

    fn to(status: Status) -> Moved<'static> {
        Moved { to: status, proof: &[], reason: None }
    }

    fn states(c: &Change<'_>) -> Vec<MessageState> {
        plan(c).iter().map(|m| m.state).collect()
    }

    #[test]
    fn four_statuses_fire_a_trigger_and_the_rest_none() {
        let fired: Vec<_> = Status::ALL.into_iter().filter_map(|s| Trigger::of(s).map(|t| (s, t))).collect();
        assert_eq!(
            fired,
            [
                (Status::Scheduled, Trigger::Scheduled),
                (Status::InTransit, Trigger::OutForDelivery),
                (Status::Delivered, Trigger::Delivered),
                (Status::Failed, Trigger::Failed),
            ]
        );
    }

    #[test]
    fn names_read_back() {
        assert!(Trigger::ALL.into_iter().all(|t| Trigger::parse(t.as_str()) == Some(t)));
        assert!(Channel::ALL.into_iter().all(|c| Channel::parse(c.as_str()) == Some(c)));
        assert!(MessageState::ALL.into_iter().all(|s| MessageState::parse(s.as_str()) == Some(s)));
        assert_eq!(MessageState::parse("Pending"), None, "no default, no case folding");
        assert_eq!(Trigger::parse(""), None);
    }

    #[test]
    fn settings_default_all_on_and_unreadable_ones_are_an_error() {
        let s = NotificationSettings::from_json(None).unwrap();
        let on_by_default = Trigger::ALL.into_iter().filter(|t| *t != Trigger::NextStop);
        assert!(on_by_default.into_iter().all(|t| s.wants(t, Channel::Email) && s.wants(t, Channel::Sms)));
        assert!(!s.wants(Trigger::NextStop, Channel::Email), "next_stop is off unless switched on");
        let mut off = s.clone();
        off.triggers.failed = false;
        assert!(!off.wants(Trigger::Failed, Channel::Email) && off.wants(Trigger::Delivered, Channel::Email));
        off.sms = false;
        assert!(!off.wants(Trigger::Delivered, Channel::Sms));
        let stored = serde_json::to_string(&off).unwrap();
        assert_eq!(NotificationSettings::from_json(Some(&stored)).unwrap(), off);
        assert!(NotificationSettings::from_json(Some("{")).is_err());
        assert!(NotificationSettings::from_json(Some(r#"{"email": true}"#)).is_err(), "a key missing");
    }

    #[test]
    fn each_trigger_plans_one_message_per_channel_with_an_address() {
        let all_on = NotificationSettings::default();
        let c = change(Status::ALL.into_iter().map(to).collect(), &all_on);
        let got: Vec<_> = plan(&c).iter().map(|m| (m.trigger, m.channel, m.state)).collect();
        // Every trigger but `rescheduled`, which no move of state fires (the service's own
        // rebooking does: `Change::rescheduled`).
        let want: Vec<_> = Trigger::ALL
            .into_iter()
            .filter(|t| !matches!(t, Trigger::Rescheduled | Trigger::NewTime | Trigger::NextStop))
            .flat_map(|t| Channel::ALL.map(|ch| (t, ch, MessageState::Pending)))
            .collect();
        assert_eq!(got, want, "to_pick_up and the others fire nothing");
        let rows = plan(&c);
        assert_eq!(rows[0].recipient, "jane@example.com");
        assert_eq!(rows[1].recipient, "+1 416 555 0100");

        let mut email_only = change(vec![to(Status::Delivered)], &all_on);
        email_only.phone = Some("  ");
        assert_eq!(plan(&email_only).iter().map(|m| m.channel).collect::<Vec<_>>(), [Channel::Email]);
        email_only.email = None;
        assert!(plan(&email_only).is_empty(), "no address, no message");
        let trimmed = Change { email: Some(" jane@example.com "), ..change(vec![to(Status::Delivered)], &all_on) };
        assert_eq!(plan(&trimmed)[0].recipient, "jane@example.com");
    }

    #[test]
    fn the_state_is_test_mode_then_disabled_then_not_configured_then_pending() {
        let all_on = NotificationSettings::default();
        let mut off = NotificationSettings::default();
        off.triggers.out_for_delivery = false;
        let sms_off = NotificationSettings { sms: false, ..NotificationSettings::default() };
        let out = || vec![to(Status::InTransit)];

        let live = change(out(), &all_on);
        assert_eq!(states(&live), [MessageState::Pending, MessageState::Pending]);
        let test = Change { test_mode: true, channels: Channels::default(), ..change(out(), &off) };
        assert_eq!(states(&test), [MessageState::TestMode, MessageState::TestMode], "test mode before all");
        let none = Channels::default();
        assert_eq!(
            states(&Change { channels: none, ..change(out(), &off) }),
            [MessageState::Disabled, MessageState::Disabled],
            "switched off before not configured"
        );
        assert_eq!(
            states(&Change { channels: Channels { email: true, sms: false }, ..change(out(), &all_on) }),
            [MessageState::Pending, MessageState::NotConfigured]
        );
        assert_eq!(
            states(&Change { channels: Channels { email: false, sms: true }, ..change(out(), &sms_off) }),
            [MessageState::NotConfigured, MessageState::Disabled]
        );
        let other_trigger = change(vec![to(Status::Delivered)], &off);
        assert_eq!(states(&other_trigger), [MessageState::Pending, MessageState::Pending], "only its own switch");
    }

    #[test]
    fn the_facts_are_the_change_as_of_now() {
        let all_on = NotificationSettings::default();
        let proof = [
            Proof { kind: ProofKind::Signature, value: "sig.png".into() },
            Proof { kind: ProofKind::ReceiverName, value: "J. Doe".into() },
        ];
        let delivered = Moved { to: Status::Delivered, proof: &proof, reason: Some("ignored") };
        let c = change(vec![delivered], &all_on);
        let facts = &plan(&c)[0].facts;
        assert_eq!(
            *facts,
            Facts {
                date: "2026-11-23".into(),
                slot: "Evening".into(),
                start_at: "2026-11-23T14:00:00-05:00".into(),
                end_at: "2026-11-23T18:00:00-05:00".into(),
                receiver: Some("J. Doe".into()),
                another_attempt: None,
                reason: None,
                eta_from_ms: None,
                eta_to_ms: None,
                minutes: None,
            },
            "a reason is kept for a failure only"
        );
        let scheduled = plan(&change(vec![to(Status::Scheduled)], &all_on));
        assert_eq!(scheduled[0].facts.receiver, None);
    }

    #[test]
    fn a_failure_says_whether_another_attempt_follows() {
        let all_on = NotificationSettings::default();
        let failed = Moved { to: Status::Failed, proof: &[], reason: Some("Nobody at home") };
        let then = |to: Status| Moved { to, proof: &[], reason: None };
        let facts = |moves: Vec<Moved<'static>>| -> Facts { plan(&change(moves, &all_on))[0].facts.clone() };
        assert_eq!(facts(vec![failed, then(Status::ToAttempt)]).another_attempt, Some(true));
        assert_eq!(facts(vec![failed, then(Status::ReturnScheduled)]).another_attempt, Some(false));
        assert_eq!(facts(vec![failed]).another_attempt, None, "held for the merchant");
        assert_eq!(facts(vec![failed]).reason.as_deref(), Some("Nobody at home"));
    }

    #[test]
    fn facts_keep_their_stored_keys() {
        let f = Facts { date: "d".into(), another_attempt: Some(false), ..Facts::default() };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"date":"d","slot":"","start_at":"","end_at":"","another_attempt":false}"#
        );
    }
}
