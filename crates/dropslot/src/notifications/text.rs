//! What each trigger tells the recipient: the subject, the plain text and the HTML of an
//! e-mail, and the SMS body, from the facts stored with the message. Pure functions.

use dropslot_store::Trigger;
use dropslot_store::notifications::Facts;

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

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// The texts of one message. `sender` is the client's sender name, `eta` the live window
/// (out for delivery only; the slot is said instead when there is none).
pub fn render(
    trigger: Trigger,
    facts: &Facts,
    sender: &str,
    eta: Option<&EtaWindow>,
    tracking_url: &str,
    opt_out_url: &str,
) -> Texts {
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
        Trigger::Failed => {
            let why = facts.reason.as_deref().map(str::trim).filter(|r| !r.is_empty());
            let why = why.map_or_else(String::new, |r| format!(" ({r})"));
            let next = if facts.another_attempt.unwrap_or(false) {
                "We will try again: you will hear from us when it is on its way."
            } else {
                "No attempts are left: the parcel goes back to the sender."
            };
            (
                format!("We could not deliver your parcel from {sender}"),
                format!("We could not deliver your parcel from {sender} today{why}. {next}"),
            )
        }
    };
    let text = format!(
        "{line}\n\nTrack it: {tracking_url}\n\n--\nSent for {sender} by its courier. To stop these messages: {opt_out_url}\n"
    );
    let html = format!(
        "<!doctype html><html><body style=\"font-family:sans-serif\"><p>{}</p>\
         <p><a href=\"{}\">Track your parcel</a></p>\
         <p style=\"color:#555;font-size:small\">Sent for {} by its courier. \
         <a href=\"{}\">Stop these messages</a></p></body></html>",
        escape(&line),
        escape(tracking_url),
        escape(sender),
        escape(opt_out_url)
    );
    let sms = format!("{line} Track: {tracking_url} Stop: {opt_out_url}");
    Texts { subject, text, html, sms }
}

/// The recipient as listed: `j•••@example.com`, `+1 •••• 0100`.
pub fn mask(channel: dropslot_store::Channel, recipient: &str) -> String {
    match channel {
        dropslot_store::Channel::Email => match recipient.split_once('@') {
            Some((local, domain)) => {
                let first: String = local.chars().take(1).collect();
                format!("{first}•••@{domain}")
            }
            None => "•••".into(),
        },
        dropslot_store::Channel::Sms => {
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

    #[test]
    fn masks() {
        assert_eq!(mask(dropslot_store::Channel::Email, "jane@example.com"), "j•••@example.com");
        assert_eq!(mask(dropslot_store::Channel::Sms, "+1 416 555 0100"), "+1 •••• 0100");
    }

    #[test]
    fn failed_says_what_next() {
        let f = Facts { another_attempt: Some(false), reason: Some("not at home".into()), ..Facts::default() };
        let t = render(Trigger::Failed, &f, "Shop", None, "http://t", "http://o");
        assert!(t.text.contains("goes back to the sender") && t.text.contains("not at home"));
        let t = render(Trigger::OutForDelivery, &Facts::default(), "Shop", None, "http://t", "http://o");
        assert!(t.text.contains("within your slot"));
    }
}
