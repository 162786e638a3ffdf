//! What each trigger tells the recipient: the subject, the plain text and the HTML of an
//! e-mail (askama templates in `templates/notifications/`), and the SMS body, from the facts
//! stored with the message. Pure functions.

use askama::Template;
use dropslot_core::notifications::{Channel, Facts, Trigger};

use crate::eta::EtaWindow;

/// A message ready to send.
pub struct Texts {
    pub subject: String,
    pub text: String,
    pub html: String,
    pub sms: String,
}

/// `HH:MM` of an RFC 3339 local time (the text as given when it is not one).
fn clock(t: &str) -> String {
    t.get(11..16).map_or_else(|| t.to_string(), str::to_string)
}

/// The e-mail's plain-text part (`templates/notifications/email.txt`).
#[derive(askama::Template)]
#[template(path = "notifications/email.txt")]
struct EmailText<'a> {
    line: &'a str,
    sender: &'a str,
    tracking_url: &'a str,
    change_url: &'a str,
    change_label: &'a str,
    opt_out_url: &'a str,
}

/// The e-mail's HTML part (`templates/notifications/email.html`, escaped by askama).
#[derive(askama::Template)]
#[template(path = "notifications/email.html")]
struct EmailHtml<'a> {
    subject: &'a str,
    line: &'a str,
    sender: &'a str,
    tracking_url: &'a str,
    change_url: &'a str,
    change_label: &'a str,
    opt_out_url: &'a str,
}

/// A message's links: the tracking page, the change page (CONTRACT §15: in every message;
/// offered as a change while [`Facts::links_change`] holds for the trigger, else as the
/// delivery's page, which says why nothing can change) and the opt-out page.
pub struct Links<'a> {
    pub tracking: &'a str,
    pub change: &'a str,
    pub opt_out: &'a str,
}

/// The texts of one message. `sender` is the client's sender name, `eta` the window it tells
/// (out for delivery: the live one; a new time: the one decided; the slot is said instead when
/// there is none).
pub fn render(trigger: Trigger, facts: &Facts, sender: &str, eta: Option<&EtaWindow>, links: &Links<'_>) -> Texts {
    let Links { tracking: tracking_url, opt_out: opt_out_url, .. } = *links;
    let change_url = links.change;
    let change_label = if facts.links_change(trigger) {
        "Change the delivery time or leave an instruction"
    } else {
        "Your delivery's options"
    };
    let slot = format!("{} between {} and {}", facts.date, clock(&facts.start_at), clock(&facts.end_at));
    let (subject, line) = match trigger {
        Trigger::Scheduled => (
            format!("Your delivery from {sender} is scheduled"),
            format!("Your parcel from {sender} will be delivered on {slot}."),
        ),
        Trigger::OutForDelivery => (
            format!("Your parcel from {sender} is out for delivery"),
            match eta {
                Some(w) => format!(
                    "Your parcel from {sender} is on its way: the driver expects to arrive between {} and {}.",
                    clock(&w.from),
                    clock(&w.to)
                ),
                None => format!("Your parcel from {sender} is on its way today, within your slot ({slot})."),
            },
        ),
        Trigger::Delivered => (
            format!("Your parcel from {sender} was delivered"),
            match facts.receiver.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
                Some(name) => format!("Your parcel from {sender} was delivered and received by {name}."),
                None => format!("Your parcel from {sender} was delivered."),
            },
        ),
        Trigger::Rescheduled => (
            format!("Your delivery from {sender} has a new time"),
            format!(
                "Your parcel from {sender} could not be kept in its time slot: it will now be delivered on {slot}."
            ),
        ),
        Trigger::NewTime => (
            format!("A new arrival time for your parcel from {sender}"),
            match eta {
                Some(w) if w.late => format!(
                    "Your parcel from {sender} is running late: the driver now expects to arrive between {} and {}, \
                     after your slot ({slot}).",
                    clock(&w.from),
                    clock(&w.to)
                ),
                Some(w) => format!(
                    "Your parcel from {sender} has a new arrival time: the driver now expects to arrive between {} and {}.",
                    clock(&w.from),
                    clock(&w.to)
                ),
                None => format!("Your parcel from {sender} has a new arrival time today, within your slot ({slot})."),
            },
        ),
        Trigger::NextStop => (
            format!("You are the next stop for your parcel from {sender}"),
            match facts.minutes {
                Some(m) => format!("Your parcel from {sender}: you are the driver's next stop, in about {m} minutes."),
                None => format!("Your parcel from {sender}: you are the driver's next stop."),
            },
        ),
        Trigger::Failed => {
            let why = facts.reason.as_deref().map(str::trim).filter(|r| !r.is_empty());
            let why = why.map_or_else(String::new, |r| format!(" ({r})"));
            let next = match facts.another_attempt {
                Some(true) => format!(
                    "We will try again on {} ({}): you will hear from us when it is on its way.",
                    facts.date, facts.slot
                ),
                Some(false) => "The parcel goes back to the sender.".to_string(),
                None => format!("{sender} will decide what happens next."),
            };
            (
                format!("We could not deliver your parcel from {sender}"),
                format!("We could not deliver your parcel from {sender} today{why}. {next}"),
            )
        }
    };
    let text =
        EmailText { line: &line, sender, tracking_url, change_url, change_label, opt_out_url }.render().unwrap_or_else(
            |_| format!("{line}\n\nTrack your parcel: {tracking_url}\nTo stop these messages: {opt_out_url}\n"),
        );
    let html =
        EmailHtml { subject: &subject, line: &line, sender, tracking_url, change_url, change_label, opt_out_url }
            .render()
            .unwrap_or_default();
    let sms = format!("{line} Track: {tracking_url} Change: {change_url} Stop: {opt_out_url}");
    Texts { subject, text, html, sms }
}

/// The recipient as listed: `j•••@example.com`, `+1 •••• 0100`.
pub fn mask(channel: Channel, recipient: &str) -> String {
    match channel {
        Channel::Email => match recipient.split_once('@') {
            Some((local, domain)) => {
                let first: String = local.chars().take(1).collect();
                format!("{first}•••@{domain}")
            }
            None => "•••".into(),
        },
        Channel::Sms => {
            let digits: Vec<char> = recipient.chars().filter(char::is_ascii_digit).collect();
            let plus = if recipient.trim_start().starts_with('+') { "+" } else { "" };
            let first: String = digits.iter().take(1).collect();
            let last: String = digits.iter().skip(digits.len().saturating_sub(4)).collect();
            format!("{plus}{first} •••• {last}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINKS: Links<'static> = Links { tracking: "http://t", change: "http://c", opt_out: "http://o" };

    #[test]
    fn masks() {
        assert_eq!(mask(Channel::Email, "jane@example.com"), "j•••@example.com");
        assert_eq!(mask(Channel::Sms, "+1 416 555 0100"), "+1 •••• 0100");
    }

    #[test]
    fn the_html_part_is_escaped() {
        let t = render(Trigger::Delivered, &Facts::default(), "<b>Shop</b>", None, &LINKS);
        assert!(t.html.contains("&#60;b&#62;Shop") && !t.html.contains("<b>Shop"), "{}", t.html);
        assert!(t.text.contains("Sent for <b>Shop</b>") && t.text.contains("http://o"), "{}", t.text);
    }

    #[test]
    fn failed_says_what_next() {
        let f = Facts { another_attempt: Some(false), reason: Some("not at home".into()), ..Facts::default() };
        let t = render(Trigger::Failed, &f, "Shop", None, &LINKS);
        assert!(t.text.contains("goes back to the sender") && t.text.contains("not at home"));
        // Every message links the change page (CONTRACT §15); with nothing left to change it is
        // offered as the delivery's page, which says why.
        assert!(t.text.contains("Your delivery's options: http://c") && t.sms.contains("Change: http://c"));
        assert!(!t.text.contains("Change the delivery time"), "nothing left to change: {}", t.text);
        let t = render(Trigger::OutForDelivery, &Facts::default(), "Shop", None, &LINKS);
        assert!(t.text.contains("within your slot"));
        assert!(t.text.contains("http://c") && t.html.contains("http://c") && t.sms.contains("Change: http://c"));
    }

    #[test]
    fn a_new_time_says_the_window_and_the_next_stop_the_minutes() {
        let w =
            EtaWindow { from: "2026-11-23T15:10:00-05:00".into(), to: "2026-11-23T15:40:00-05:00".into(), late: false };
        let t = render(Trigger::NewTime, &Facts::default(), "Shop", Some(&w), &LINKS);
        assert!(t.text.contains("between 15:10 and 15:40") && t.sms.contains("15:10"), "{}", t.text);
        assert!(t.subject.contains("new arrival time"));
        let late = EtaWindow { late: true, ..w };
        assert!(render(Trigger::NewTime, &Facts::default(), "Shop", Some(&late), &LINKS).text.contains("running late"));
        let f = Facts { minutes: Some(9), ..Facts::default() };
        let t = render(Trigger::NextStop, &f, "Shop", None, &LINKS);
        assert!(t.text.contains("next stop, in about 9 minutes"), "{}", t.text);
    }

    /// The failed message names the next attempt's date and slot, and links the change page.
    #[test]
    fn failed_with_another_attempt_links_the_change_page() {
        let f = Facts {
            date: "2026-11-24".into(),
            slot: "Afternoon".into(),
            another_attempt: Some(true),
            ..Facts::default()
        };
        let t = render(Trigger::Failed, &f, "Shop", None, &LINKS);
        assert!(t.text.contains("We will try again on 2026-11-24 (Afternoon)"), "{}", t.text);
        for part in [&t.text, &t.html, &t.sms] {
            assert!(part.contains("http://c"), "{part}");
        }
        let t = render(Trigger::Delivered, &f, "Shop", None, &LINKS);
        assert!(t.text.contains("Your delivery's options: http://c") && t.html.contains("http://c"), "{}", t.text);
        assert!(!t.text.contains("Change the delivery time"), "delivered: nothing to change");
    }
}
