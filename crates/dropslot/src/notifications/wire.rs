//! The notification endpoints' request and response shapes (CONTRACT §14), with the schema the
//! OpenAPI document shows; the rules and the stored forms are the core's.

use serde::{Deserialize, Serialize};

use dropslot_core::notifications as core;

/// What a message tells the recipient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Scheduled,
    OutForDelivery,
    Delivered,
    Failed,
    Rescheduled,
    NewTime,
    NextStop,
}

impl From<core::Trigger> for Trigger {
    fn from(t: core::Trigger) -> Self {
        match t {
            core::Trigger::Scheduled => Trigger::Scheduled,
            core::Trigger::OutForDelivery => Trigger::OutForDelivery,
            core::Trigger::Delivered => Trigger::Delivered,
            core::Trigger::Failed => Trigger::Failed,
            core::Trigger::Rescheduled => Trigger::Rescheduled,
            core::Trigger::NewTime => Trigger::NewTime,
            core::Trigger::NextStop => Trigger::NextStop,
        }
    }
}

impl From<Trigger> for core::Trigger {
    fn from(t: Trigger) -> Self {
        match t {
            Trigger::Scheduled => core::Trigger::Scheduled,
            Trigger::OutForDelivery => core::Trigger::OutForDelivery,
            Trigger::Delivered => core::Trigger::Delivered,
            Trigger::Failed => core::Trigger::Failed,
            Trigger::Rescheduled => core::Trigger::Rescheduled,
            Trigger::NewTime => core::Trigger::NewTime,
            Trigger::NextStop => core::Trigger::NextStop,
        }
    }
}

impl Trigger {
    /// Its name, the core's (the dashboard shows it).
    pub fn as_str(self) -> &'static str {
        core::Trigger::from(self).as_str()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Email,
    Sms,
}

impl From<core::Channel> for Channel {
    fn from(c: core::Channel) -> Self {
        match c {
            core::Channel::Email => Channel::Email,
            core::Channel::Sms => Channel::Sms,
        }
    }
}

impl From<Channel> for core::Channel {
    fn from(c: Channel) -> Self {
        match c {
            Channel::Email => core::Channel::Email,
            Channel::Sms => core::Channel::Sms,
        }
    }
}

impl Channel {
    /// Its name, the core's (the dashboard shows it).
    pub fn as_str(self) -> &'static str {
        core::Channel::from(self).as_str()
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
    /// The service moved the delivery to another slot itself (the fleet could not route it in
    /// the one booked). Optional: left out, it is on.
    #[serde(default = "on")]
    #[schema(default = true)]
    pub rescheduled: bool,
    /// The driver's predicted window left the one last told (at most two a shipment and day;
    /// docs/notifications.md). Optional: left out, it is on.
    #[serde(default = "on")]
    #[schema(default = true)]
    pub new_time: bool,
    /// "You are the next stop, in about N minutes" when the stop before is served. Optional:
    /// left out, it is off.
    #[serde(default)]
    #[schema(default = false)]
    pub next_stop: bool,
}

fn on() -> bool {
    true
}

/// A client's notification settings in one mode (CONTRACT §14): all on by default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(example = json!({"sender_name": "Maple Goods", "email": true, "sms": false,
    "triggers": {"scheduled": true, "out_for_delivery": true, "delivered": true, "failed": true}}))]
#[serde(deny_unknown_fields)]
pub struct NotificationSettings {
    /// The name the recipient sees as the sender (1–100 characters, no line breaks); empty
    /// means the configured `from` name.
    pub sender_name: String,
    pub email: bool,
    pub sms: bool,
    pub triggers: TriggerSwitches,
}

impl From<core::NotificationSettings> for NotificationSettings {
    fn from(s: core::NotificationSettings) -> Self {
        let t = s.triggers;
        NotificationSettings {
            sender_name: s.sender_name,
            email: s.email,
            sms: s.sms,
            triggers: TriggerSwitches {
                scheduled: t.scheduled,
                out_for_delivery: t.out_for_delivery,
                delivered: t.delivered,
                failed: t.failed,
                rescheduled: t.rescheduled,
                new_time: t.new_time,
                next_stop: t.next_stop,
            },
        }
    }
}

impl From<NotificationSettings> for core::NotificationSettings {
    fn from(s: NotificationSettings) -> Self {
        let t = s.triggers;
        core::NotificationSettings {
            sender_name: s.sender_name,
            email: s.email,
            sms: s.sms,
            triggers: core::TriggerSwitches {
                scheduled: t.scheduled,
                out_for_delivery: t.out_for_delivery,
                delivered: t.delivered,
                failed: t.failed,
                rescheduled: t.rescheduled,
                new_time: t.new_time,
                next_stop: t.next_stop,
            },
        }
    }
}

/// A message as listed: the recipient masked.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NotificationView {
    pub id: i64,
    pub trigger: Trigger,
    pub channel: Channel,
    /// `pending`, `sending`, `sent`, `failed`, `uncertain`, `opted_out`, `not_configured`,
    /// `test_mode` or `disabled` (docs/notifications.md).
    pub state: String,
    pub recipient: String,
    /// Hand-overs begun (a repeat after a crash counts).
    pub attempts: i64,
    /// How many times it was sent again, with the same Message-ID (an SMS: the same
    /// reference), because the service stopped while handing it over: at most one per such
    /// stop (docs/notifications.md).
    pub repeated_after_crash: i64,
    pub last_error: Option<String>,
    pub created_at: String,
    pub sent_at: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NotificationList {
    pub notifications: Vec<NotificationView>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire names are the core's stored names (a trigger or channel the API shows is the
    /// one the table holds).
    #[test]
    fn the_wire_names_are_the_core_names() {
        for t in core::Trigger::ALL {
            assert_eq!(serde_json::to_value(Trigger::from(t)).unwrap(), t.as_str());
            assert_eq!(Trigger::from(t).as_str(), t.as_str());
        }
        for c in core::Channel::ALL {
            assert_eq!(serde_json::to_value(Channel::from(c)).unwrap(), c.as_str());
            assert_eq!(Channel::from(c).as_str(), c.as_str());
        }
        let mut s = core::NotificationSettings::default();
        s.triggers.delivered = false;
        s.sender_name = "Shop".into();
        assert_eq!(core::NotificationSettings::from(NotificationSettings::from(s.clone())), s);
        assert_eq!(
            serde_json::to_value(NotificationSettings::from(s.clone())).unwrap(),
            serde_json::to_value(&s).unwrap()
        );
    }
}
