//! The sender: claims due messages with a lease, in batches; marks a batch's messages
//! `sending` in one write just before handing them to the SMTP server (`smtp.rs`) or the
//! SMS provider, at most `CONCURRENCY` at a time, and records how each ended in one write per
//! batch (per-message writes held the sender to ~230 messages/s: each waited for its own
//! commit). Errors are mapped to the integrator's words here: a recipient address never
//! reaches a log or a stored error (lettre's and reqwest's own texts can hold one, so they
//! are not kept).

use std::sync::Arc;
use std::time::Duration;

use lettre::Message;
use lettre::message::header::{HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart};
use tokio::sync::Notify;

use super::smtp::{Smtp, SmtpError};
use super::text::{Links, Texts, render};
use crate::app::App;
use crate::webhooks::{retry, target};
use dropslot_core::config::{SmsSettings, SmtpSettings};
use dropslot_core::notifications::{Channel, Facts, Trigger};
use dropslot_store::{ClaimedNotification, NotificationEnd, NotificationOutcome};

/// Every outbound step's limit.
const TIMEOUT: Duration = Duration::from_secs(15);
/// Messages claimed (and their outcomes recorded) together at most.
const BATCH: usize = 64;
/// Messages handed over at once at most (`smtp.rs` keeps as many idle SMTP connections).
const CONCURRENCY: usize = 16;

pub struct Sender {
    app: App,
    mailer: Option<(Smtp, SmtpSettings)>,
    sms: Option<(reqwest::Client, SmsSettings)>,
    wake: Arc<Notify>,
}

impl Sender {
    /// Refuses (at start) an SMS URL the webhook target rules refuse.
    pub fn new(app: App, wake: Arc<Notify>) -> Result<Sender, String> {
        let n = &app.settings.notifications;
        let mailer = n.smtp.as_ref().map(|s| Smtp::new(s, TIMEOUT, CONCURRENCY).map(|m| (m, s.clone()))).transpose()?;
        let allow_private = app.settings.webhooks.allow_private;
        let sms = match &n.sms {
            None => None,
            Some(s) => {
                let url = target::parse(&s.url).map_err(|e| format!("notifications.sms.url: {e}"))?;
                target::check_literal(&url, allow_private).map_err(|e| format!("notifications.sms.url: {e}"))?;
                let client = reqwest::Client::builder()
                    .timeout(TIMEOUT)
                    .connect_timeout(Duration::from_secs(5))
                    .redirect(reqwest::redirect::Policy::none())
                    .no_proxy()
                    .dns_resolver(Arc::new(target::GuardedResolver { allow_private }))
                    .user_agent(concat!("dropslot-notifications/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|e| format!("notifications.sms: {e}"))?;
                Some((client, s.clone()))
            }
        };
        Ok(Sender { app, mailer, sms, wake })
    }

    /// Claims and sends until `stopping` turns true; a claimed batch is sent concurrently (each
    /// message within the lease), and finished before the next claim or the stop.
    pub async fn run(self, mut stopping: tokio::sync::watch::Receiver<bool>) {
        if self.mailer.is_none() && self.sms.is_none() {
            return;
        }
        let lease = self.app.settings.notifications.lease.as_millis() as i64;
        let me = Arc::new(self);
        while !*stopping.borrow() {
            let now = dropslot_store::queue_now_ms();
            let claimed = match me.app.store.claim_notifications(now, now + lease, BATCH).await {
                Ok(c) => {
                    if c.repeated > 0 {
                        tracing::warn!(
                            messages = c.repeated,
                            "notifications left sending past their lease (a process died handing them over) are sent again, with their Message-ID"
                        );
                    }
                    if c.uncertain > 0 {
                        tracing::warn!(
                            messages = c.uncertain,
                            "notifications left sending past their lease once more than they are repeated turned uncertain; they are not sent again"
                        );
                    }
                    me.app.notifications_recorded.send_modify(|n| *n += c.uncertain + c.repeated);
                    c.messages
                }
                Err(e) => {
                    tracing::warn!(error = %e, "claiming notifications failed; tried again shortly");
                    Vec::new()
                }
            };
            if !claimed.is_empty() {
                me.batch(claimed).await;
                continue;
            }
            let next = me.app.store.next_notification_due_ms().await.ok().flatten();
            let wait = next.map_or(Duration::from_secs(1), |at| {
                Duration::from_millis(u64::try_from(at - dropslot_store::queue_now_ms()).unwrap_or(0))
                    .min(Duration::from_secs(1))
            });
            tokio::select! {
                () = me.wake.notified() => {}
                () = tokio::time::sleep(wait.max(Duration::from_millis(20))) => {}
                _ = stopping.changed() => {}
            }
        }
    }

    /// One claimed batch: each message prepared (an end known before any hand-over is kept
    /// as it is), the rest marked `sending` in one write, handed over concurrently (at most
    /// `CONCURRENCY` at a time), and every outcome recorded in one write.
    async fn batch(self: &Arc<Self>, claimed: Vec<ClaimedNotification>) {
        let mut ended: Vec<(ClaimedNotification, NotificationEnd)> = Vec::with_capacity(claimed.len());
        let mut ready: Vec<(ClaimedNotification, Handover)> = Vec::with_capacity(claimed.len());
        for c in claimed {
            match self.prepare(&c).await {
                Ok(h) => ready.push((c, h)),
                Err(failure) => {
                    let end = self.end_of(&c, Err(failure));
                    ended.push((c, end));
                }
            }
        }
        if let Some((first, _)) = ready.first() {
            let lease = first.lease_until_ms;
            let ids = ready.iter().map(|(c, _)| c.id).collect();
            match self.app.store.notifications_sending(ids, lease).await {
                Ok(held) => {
                    let held: std::collections::HashSet<i64> = held.into_iter().collect();
                    let permits = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
                    let mut sends = tokio::task::JoinSet::new();
                    for (c, h) in ready {
                        if !held.contains(&c.id) {
                            let end = self.end_of(&c, Err(Failure::Lost));
                            ended.push((c, end));
                            continue;
                        }
                        let (me, permits) = (self.clone(), permits.clone());
                        sends.spawn(async move {
                            let _permit = permits.acquire_owned().await;
                            let sent = me.hand_over(h).await;
                            let end = me.end_of(&c, sent);
                            (c, end)
                        });
                    }
                    while let Some(done) = sends.join_next().await {
                        match done {
                            Ok(pair) => ended.push(pair),
                            // A send that panicked: its row stays `sending` and turns
                            // `uncertain` when the lease ends (it may have gone out).
                            Err(e) => tracing::error!(error = %e, "a notification hand-over task failed"),
                        }
                    }
                }
                Err(_) => {
                    for (c, _) in ready {
                        let failure = Failure::Transient("The database could not record the attempt.".into());
                        let end = self.end_of(&c, Err(failure));
                        ended.push((c, end));
                    }
                }
            }
        }
        self.record(ended).await;
    }

    /// Logs, counts and records the batch's outcomes in one write.
    async fn record(&self, ended: Vec<(ClaimedNotification, NotificationEnd)>) {
        let now = self.app.clock.now();
        let mut outcomes = Vec::with_capacity(ended.len());
        for (c, end) in ended {
            let state = match &end {
                NotificationEnd::Sent => "sent",
                NotificationEnd::Retry { .. } => "retry",
                NotificationEnd::Failed { .. } => "failed",
                NotificationEnd::Uncertain { .. } => "uncertain",
                NotificationEnd::OptedOut => "opted_out",
            };
            tracing::info!(
                notification_id = c.id,
                channel = c.channel.as_str(),
                trigger = c.trigger.as_str(),
                state,
                "notification attempt"
            );
            let labels =
                crate::metrics::NotificationLabels { channel: c.channel.as_str().into(), outcome: state.into() };
            self.app.metrics.notification_attempts.get_or_create(&labels).inc();
            outcomes.push(NotificationOutcome { id: c.id, lease_until_ms: c.lease_until_ms, end, now });
        }
        let n = outcomes.len() as u64;
        let ids: Vec<i64> = outcomes.iter().map(|o| o.id).collect();
        match self.app.store.finish_notifications(outcomes).await {
            Ok(written) if written.len() == ids.len() => {}
            Ok(written) => {
                for id in ids.iter().filter(|id| !written.contains(id)) {
                    tracing::warn!(notification_id = id, "notification claim lost before its outcome was recorded");
                }
            }
            Err(e) => tracing::warn!(messages = ids.len(), error = %e, "recording notification outcomes failed"),
        }
        self.app.notifications_recorded.send_modify(|c| *c += n);
    }

    /// What one message needs before it is handed over: rendered and built, the SMS target
    /// checked. An end known already (opted out, stored facts that do not parse, an address
    /// that is not one, no channel) is the error.
    async fn prepare(&self, c: &ClaimedNotification) -> Result<Handover, Failure> {
        if c.opted_out {
            return Err(Failure::OptedOut);
        }
        // Stored facts that do not parse are an error, never a message with blanks.
        let facts: Facts = serde_json::from_str(&c.facts_json)
            .map_err(|e| Failure::Permanent(format!("The stored message does not parse: {e}.")))?;
        let eta = match (c.trigger, facts.eta_from_ms, facts.eta_to_ms) {
            (Trigger::OutForDelivery, _, _) => {
                crate::eta::current(&self.app, &c.shipment_unique_id).await.ok().flatten()
            }
            // The window decided with the message (never the live one at send time: that is
            // what the next decision compares with).
            (Trigger::NewTime | Trigger::NextStop, Some(from), Some(to)) => {
                crate::eta::told(&self.app, &c.shipment_unique_id, from, to).await.ok().flatten()
            }
            _ => None,
        };
        let base = &self.app.settings.base_url;
        let tracking = crate::labels::tracking_url(base, &c.shipment_unique_id);
        let opt_out = format!("{base}/notifications/opt-out/{}", c.opt_out_token);
        let sender = self.sender_name(c);
        let change = crate::tracking::token::change_url(base, &c.shipment_unique_id, &c.label_token);
        let links = Links { tracking: &tracking, change: &change, opt_out: &opt_out };
        let texts = render(c.trigger, &facts, &sender, eta.as_ref(), &links);
        match c.channel {
            Channel::Email => {
                let Some((_, s)) = &self.mailer else {
                    return Err(Failure::Permanent("No SMTP server is configured.".into()));
                };
                Ok(Handover::Email(build_email(s, c, &sender, &texts, &opt_out)?))
            }
            Channel::Sms => {
                let Some((client, s)) = &self.sms else {
                    return Err(Failure::Permanent("No SMS provider is configured.".into()));
                };
                let url = target::parse(&s.url).map_err(Failure::Permanent)?;
                target::check(&url, self.app.settings.webhooks.allow_private).await.map_err(Failure::Transient)?;
                // The message's own reference, the same at every attempt (a repeat after a crash
                // too): in the `Idempotency-Key` header, and in the form field a provider that
                // takes a client reference names (`reference_field`).
                let reference = sms_reference(&c.message_id);
                let mut form = vec![("To", c.recipient.as_str()), ("From", s.from.as_str()), ("Body", &texts.sms)];
                if let Some(field) = &s.reference_field {
                    form.push((field.as_str(), reference));
                }
                let mut req = client.post(url).header("Idempotency-Key", reference).form(&form);
                if let Some(user) = &s.user {
                    req = req.basic_auth(user, s.password.as_deref());
                }
                Ok(Handover::Sms(req))
            }
        }
    }

    /// The hand-over itself (the row is `sending`).
    async fn hand_over(&self, h: Handover) -> Result<(), Failure> {
        match h {
            Handover::Email(message) => {
                let Some((mailer, _)) = &self.mailer else {
                    return Err(Failure::Permanent("No SMTP server is configured.".into()));
                };
                mailer.send(&message).await.map_err(|e| match e {
                    SmtpError::NotConnected(what) => Failure::Transient(format!("{what}; tried again later.")),
                    SmtpError::Send(e) => smtp_failure(&e),
                    SmtpError::TimedOut => Failure::Uncertain(
                        "The mail server stopped answering during the session; the message may have been delivered and is not sent again.".into(),
                    ),
                })
            }
            Handover::Sms(req) => match req.send().await {
                Ok(r) if r.status().is_success() => Ok(()),
                Ok(r) if r.status().as_u16() == 429 || r.status().is_server_error() => Err(Failure::Transient(
                    format!("The SMS provider answered {}; tried again later.", r.status().as_u16()),
                )),
                Ok(r) => {
                    Err(Failure::Permanent(format!("The SMS provider refused the message ({}).", r.status().as_u16())))
                }
                Err(e) if e.is_connect() => Err(Failure::Transient("The SMS provider could not be reached.".into())),
                Err(e) if e.is_timeout() => Err(Failure::Uncertain(
                    "The SMS provider did not answer in time; the message may have been sent and is not sent again."
                        .into(),
                )),
                Err(_) => Err(Failure::Uncertain(
                    "The connection to the SMS provider broke; the message may have been sent and is not sent again."
                        .into(),
                )),
            },
        }
    }

    /// How an attempt ends, in the store's terms.
    fn end_of(&self, c: &ClaimedNotification, sent: Result<(), Failure>) -> NotificationEnd {
        match sent {
            Ok(()) => NotificationEnd::Sent,
            Err(Failure::OptedOut) => NotificationEnd::OptedOut,
            Err(Failure::Permanent(error)) => NotificationEnd::Failed { error },
            Err(Failure::Uncertain(error)) => NotificationEnd::Uncertain { error },
            Err(Failure::Transient(error)) => {
                let attempts = u32::try_from(c.attempts + 1).unwrap_or(u32::MAX);
                match retry::next_delay(&self.app.settings.webhooks.retry_schedule, attempts, None, retry::unit()) {
                    Some(d) => {
                        NotificationEnd::Retry { error, next_ms: dropslot_store::queue_now_ms() + d.as_millis() as i64 }
                    }
                    None => NotificationEnd::Failed { error },
                }
            }
            Err(Failure::Lost) => NotificationEnd::Failed { error: "The claim on this message was lost.".into() },
        }
    }

    fn sender_name(&self, c: &ClaimedNotification) -> String {
        let configured = self
            .mailer
            .as_ref()
            .and_then(|(_, s)| s.from.split_once('<').map(|(name, _)| name.trim().trim_matches('"').to_string()))
            .filter(|n| !n.is_empty());
        Some(c.settings.sender_name.trim().to_string())
            .filter(|n| !n.is_empty())
            .or(configured)
            .unwrap_or_else(|| "your merchant".into())
    }
}

/// An SMS's reference: its Message-ID without the angle brackets (`n_…@dropslot`).
fn sms_reference(message_id: &str) -> &str {
    message_id.trim_start_matches('<').trim_end_matches('>')
}

/// A message ready to hand over.
enum Handover {
    Email(Message),
    Sms(reqwest::RequestBuilder),
}

enum Failure {
    /// The recipient opted out: nothing is sent.
    OptedOut,
    Permanent(String),
    Transient(String),
    /// The message went out and the answer was lost: never sent again.
    Uncertain(String),
    /// The claim ended (another process holds the message now).
    Lost,
}

/// The error in the integrator's words, with the SMTP code when there is one; never lettre's
/// text (it can quote an address). No connection, a TLS failure or a 4xx: not accepted, tried
/// again. A 5xx: refused for good. A connection broken or timed out once the session began:
/// the server may have accepted the message, so it is `uncertain` and never sent again (the
/// same rule as a crash while `sending`; docs/notifications.md).
fn smtp_failure(e: &lettre::transport::smtp::Error) -> Failure {
    let code = e.status().map(|c| c.to_string());
    // lettre tells a failed connect apart only in its text ("Connection error: …"); the text is
    // looked at here and never kept.
    let not_connected = e.to_string().starts_with("Connection error");
    if e.is_permanent() {
        Failure::Permanent(format!(
            "The mail server refused the message permanently (SMTP {}).",
            code.as_deref().unwrap_or("5xx")
        ))
    } else if e.is_transient() {
        Failure::Transient(format!(
            "The mail server deferred the message (SMTP {}); tried again later.",
            code.as_deref().unwrap_or("4xx")
        ))
    } else if not_connected {
        Failure::Transient("The mail server could not be reached; tried again later.".into())
    } else if e.is_tls() {
        Failure::Transient("The TLS handshake with the mail server failed; tried again later.".into())
    } else if e.is_timeout() {
        Failure::Uncertain("The mail server stopped answering during the session; the message may have been delivered and is not sent again.".into())
    } else {
        Failure::Uncertain("The connection to the mail server broke during the session; the message may have been delivered and is not sent again.".into())
    }
}

/// `List-Unsubscribe` (RFC 2369) with the opt-out URL.
#[derive(Clone)]
struct ListUnsubscribe(String);

impl lettre::message::header::Header for ListUnsubscribe {
    fn name() -> HeaderName {
        HeaderName::new_from_ascii_str("List-Unsubscribe")
    }
    fn parse(s: &str) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Ok(ListUnsubscribe(s.to_string()))
    }
    fn display(&self) -> HeaderValue {
        HeaderValue::new(Self::name(), format!("<{}>", self.0))
    }
}

/// `List-Unsubscribe-Post: List-Unsubscribe=One-Click` (RFC 8058).
#[derive(Clone)]
struct ListUnsubscribePost;

impl lettre::message::header::Header for ListUnsubscribePost {
    fn name() -> HeaderName {
        HeaderName::new_from_ascii_str("List-Unsubscribe-Post")
    }
    fn parse(_: &str) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Ok(ListUnsubscribePost)
    }
    fn display(&self) -> HeaderValue {
        HeaderValue::new(Self::name(), "List-Unsubscribe=One-Click".into())
    }
}

fn build_email(
    s: &SmtpSettings,
    c: &ClaimedNotification,
    sender: &str,
    t: &Texts,
    opt_out: &str,
) -> Result<Message, Failure> {
    let from: Mailbox = s.from.parse().map_err(|_| {
        Failure::Permanent("The configured sender address (notifications.smtp.from) is not valid.".into())
    })?;
    let to: lettre::Address = c.recipient.parse().map_err(|_| {
        Failure::Permanent("The recipient's e-mail address is not valid; the message was not sent.".into())
    })?;
    Message::builder()
        .from(Mailbox::new(Some(sender.to_string()), from.email))
        .to(Mailbox::new(None, to))
        .subject(t.subject.clone())
        .message_id(Some(c.message_id.clone()))
        .header(ListUnsubscribe(opt_out.to_string()))
        .header(ListUnsubscribePost)
        .multipart(MultiPart::alternative_plain_html(t.text.clone(), t.html.clone()))
        .map_err(|_| Failure::Permanent("The message could not be built (an invalid header).".into()))
}
