//! Webhook delivery rules (CONTRACT §5): what one attempt decides for its delivery and its
//! endpoint. Pure: both backends load the endpoint's health, call [`plan`], and persist
//! what it says, so the rule is written once.

/// What the dispatcher's attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptOutcome {
    Delivered,
    /// Try again at this instant (Unix ms).
    Retry(i64),
    /// Out of retries.
    Failed,
    /// The endpoint answered 410 Gone: disable it now.
    DisableEndpoint,
}

/// A delivery's stored state: the one list of its names, which both backends bind (and
/// their queries' partial indexes spell, see `migrations/*/0004_webhooks.sql`).
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
    pub const ALL: [DeliveryState; 4] =
        [DeliveryState::Waiting, DeliveryState::Pending, DeliveryState::Delivered, DeliveryState::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Waiting => "waiting",
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<DeliveryState> {
        DeliveryState::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// A new delivery's state: `waiting` when `behind` an unfinished one of its stream (the
    /// same shipment to the same endpoint), else `pending`.
    pub fn queued(behind: bool) -> DeliveryState {
        if behind { DeliveryState::Waiting } else { DeliveryState::Pending }
    }
}

/// What an attempt writes to its delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryWrite {
    Delivered,
    /// Still pending, due at this instant (Unix ms).
    Retry(i64),
    Failed,
}

impl DeliveryWrite {
    /// The state it leaves the delivery in.
    pub fn state(self) -> DeliveryState {
        match self {
            DeliveryWrite::Delivered => DeliveryState::Delivered,
            DeliveryWrite::Retry(_) => DeliveryState::Pending,
            DeliveryWrite::Failed => DeliveryState::Failed,
        }
    }

    /// When it is due again; `None` once it is finished (its stream's next one moves up).
    pub fn next_attempt_ms(self) -> Option<i64> {
        match self {
            DeliveryWrite::Retry(at) => Some(at),
            DeliveryWrite::Delivered | DeliveryWrite::Failed => None,
        }
    }

    /// Whether it moves its delivery whoever holds the delivery's claim now. An attempt moves
    /// its delivery only under the claim that made it: once that lease ran out and another
    /// dispatcher took the delivery over, the newer attempt decides. An answer is the
    /// exception: the receiver has the message, and whoever claims it now would only send it
    /// again (issue 47: a process whose recording was held up past its lease).
    pub fn settles_any_claim(self) -> bool {
        matches!(self, DeliveryWrite::Delivered)
    }
}

/// An endpoint's health as stored, read in the attempt's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Health {
    /// Since when it has failed without a success in between (Unix ms).
    pub failing_since_ms: Option<i64>,
    /// Its last success (Unix ms).
    pub last_success_ms: Option<i64>,
    /// Whether a last error is shown.
    pub has_error: bool,
}

impl Health {
    /// The health as it is stored once `write` (planned with this `error`) is persisted: how a
    /// backend that records several attempts of one endpoint together plans each one on the
    /// health the earlier ones left, as if each were read anew.
    #[must_use]
    pub fn after(self, write: &EndpointWrite, error: Option<&str>) -> Health {
        match write {
            EndpointWrite::Keep => self,
            EndpointWrite::Healthy { last_success_ms } => {
                Health { failing_since_ms: None, last_success_ms: Some(*last_success_ms), has_error: false }
            }
            EndpointWrite::Failing { failing_since_ms } | EndpointWrite::Disable { failing_since_ms, .. } => Health {
                failing_since_ms: Some(*failing_since_ms),
                has_error: error.is_some() || matches!(write, EndpointWrite::Disable { .. }),
                ..self
            },
        }
    }
}

/// What an attempt writes to its endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointWrite {
    /// Nothing: a healthy endpoint's row is rewritten at most once a second, not per delivery.
    Keep,
    /// Healthy again: no failing streak, no error, this success.
    Healthy { last_success_ms: i64 },
    /// Failing since this instant (the streak's start, kept), with this error.
    Failing { failing_since_ms: i64 },
    /// Disable it, for this reason (its unfinished deliveries fail with it).
    Disable { reason: String, failing_since_ms: i64 },
}

/// The whole decision of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptPlan {
    pub delivery: DeliveryWrite,
    pub endpoint: EndpointWrite,
}

/// The reason shown when an endpoint has failed for `disable_after` without a success.
pub const FAILING_TOO_LONG: &str = "no successful delivery for too long";

/// How often a healthy endpoint's last success is rewritten at most (ms).
pub const HEALTH_WRITE_EVERY_MS: i64 = 1000;

/// Decides an attempt made at `at_ms` with `outcome` (and its `error` text, if any) against
/// the endpoint's `health` before it. An endpoint that has failed, without a success, for
/// `disable_after_ms` or longer is disabled; a 410 disables it at once.
pub fn plan(
    outcome: AttemptOutcome,
    error: Option<&str>,
    health: Health,
    at_ms: i64,
    disable_after_ms: i64,
) -> AttemptPlan {
    let delivery = match outcome {
        AttemptOutcome::Delivered => DeliveryWrite::Delivered,
        AttemptOutcome::Retry(at) => DeliveryWrite::Retry(at),
        AttemptOutcome::Failed | AttemptOutcome::DisableEndpoint => DeliveryWrite::Failed,
    };
    let failing_since_ms = health.failing_since_ms.unwrap_or(at_ms);
    let endpoint = match outcome {
        AttemptOutcome::Delivered => {
            let unhealthy = health.failing_since_ms.is_some() || health.has_error;
            let stale = health.last_success_ms.is_none_or(|s| s < at_ms - HEALTH_WRITE_EVERY_MS);
            if unhealthy || stale { EndpointWrite::Healthy { last_success_ms: at_ms } } else { EndpointWrite::Keep }
        }
        AttemptOutcome::DisableEndpoint => {
            EndpointWrite::Disable { reason: error.unwrap_or("disabled").to_string(), failing_since_ms }
        }
        AttemptOutcome::Retry(_) | AttemptOutcome::Failed => {
            if at_ms - failing_since_ms >= disable_after_ms {
                EndpointWrite::Disable { reason: FAILING_TOO_LONG.to_string(), failing_since_ms }
            } else {
                EndpointWrite::Failing { failing_since_ms }
            }
        }
    };
    AttemptPlan { delivery, endpoint }
}

/// The event kind of `same.parcel.created`, sent once per parcel of a new shipment.
pub const PARCEL_CREATED: &str = "same.parcel.created";

/// The event kind of a change of a shipment's date and slot (CONTRACT §15): ours, beyond the
/// interface's list; sent to endpoints subscribed to it or to every event.
pub const RESCHEDULED: &str = "same.shipment.rescheduled";

/// The event kind a shipment's move to `status` sends: `same.shipment.<status>`.
pub fn shipment_event(status: crate::shipments::Status) -> String {
    format!("same.shipment.{}", status.as_str())
}

/// Whether an endpoint subscribed to `events` takes `kind` (`*` takes every kind).
pub fn subscribes(events: &[String], kind: &str) -> bool {
    events.iter().any(|e| e == "*" || e == kind)
}

/// What one queued message's body is rendered from: the shipment's event at this index of
/// the change's events, or its parcel at this index for `same.parcel.created`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    Event(usize),
    ParcelCreated(usize),
}

/// One message a change queues: its kind, what its body is rendered from, and the
/// subscribers it goes to as `(subscriber index, behind)`, `behind` when that subscriber's
/// stream for the shipment already had an unfinished delivery (it waits its turn).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fan {
    pub event: String,
    pub body: Body,
    pub deliveries: Vec<(usize, bool)>,
}

/// The messages one drop-off shipment's change sends (CONTRACT §5): for each new status in
/// `statuses` the `same.shipment.<status>` event, and for a newly `created` shipment each of
/// its `parcels` parcels' `same.parcel.created`, each to every subscriber that takes it
/// (`subscribed[i]` are subscriber i's kinds), in order. `busy[i]` says whether subscriber i's
/// stream of this shipment has an unfinished delivery; queueing one makes it busy, so the
/// next message to the same subscriber waits behind it. A kind nobody takes is not rendered.
pub fn fan_out(
    subscribed: &[&[String]],
    busy: &mut [bool],
    statuses: &[crate::shipments::Status],
    parcels: usize,
    created: bool,
) -> Vec<Fan> {
    let mut out = Vec::new();
    let mut queue = |event: String, body: Body| {
        let deliveries: Vec<(usize, bool)> = subscribed
            .iter()
            .zip(busy.iter_mut())
            .enumerate()
            .filter(|(_, (events, _))| subscribes(events, &event))
            .map(|(i, (_, busy))| (i, std::mem::replace(busy, true)))
            .collect();
        if !deliveries.is_empty() {
            out.push(Fan { event, body, deliveries });
        }
    };
    for (i, status) in statuses.iter().enumerate() {
        queue(shipment_event(*status), Body::Event(i));
    }
    if created {
        for p in 0..parcels {
            queue(PARCEL_CREATED.to_string(), Body::ParcelCreated(p));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const FIVE_DAYS: i64 = 5 * 24 * 3_600_000;

    fn outcome() -> impl Strategy<Value = AttemptOutcome> {
        prop_oneof![
            4 => Just(AttemptOutcome::Delivered),
            4 => (0..i64::from(u32::MAX)).prop_map(AttemptOutcome::Retry),
            2 => Just(AttemptOutcome::Failed),
            1 => Just(AttemptOutcome::DisableEndpoint),
        ]
    }

    proptest! {
        /// Any sequence of outcomes, at increasing instants: every delivery ends in a state the
        /// CONTRACT allows (delivered, pending with its due time, failed); the endpoint is
        /// disabled exactly when a 410 comes or its failing streak reaches the threshold, and
        /// a success ends the streak.
        #[test]
        fn every_sequence_ends_in_an_allowed_state_and_disables_at_the_threshold(
            steps in prop::collection::vec((outcome(), 0..FIVE_DAYS / 2), 1..40),
        ) {
            let mut health = Health::default();
            let mut at = 1_000_000;
            let mut streak_start: Option<i64> = None;
            for (outcome, gap) in steps {
                at += gap;
                let error = (outcome != AttemptOutcome::Delivered).then_some("HTTP 500");
                let p = plan(outcome, error, health, at, FIVE_DAYS);
                match (outcome, p.delivery) {
                    (AttemptOutcome::Delivered, DeliveryWrite::Delivered)
                    | (AttemptOutcome::Failed | AttemptOutcome::DisableEndpoint, DeliveryWrite::Failed) => {}
                    (AttemptOutcome::Retry(due), DeliveryWrite::Retry(planned)) => prop_assert_eq!(due, planned),
                    other => prop_assert!(false, "{other:?} is not an allowed move"),
                }
                prop_assert_eq!(p.delivery.next_attempt_ms().is_some(), p.delivery.state() == DeliveryState::Pending);
                if outcome == AttemptOutcome::Delivered {
                    streak_start = None;
                    let failing = matches!(p.endpoint, EndpointWrite::Failing { .. } | EndpointWrite::Disable { .. });
                    prop_assert!(!failing, "a success never marks the endpoint failing");
                } else {
                    let start = *streak_start.get_or_insert(at);
                    let disabled = matches!(p.endpoint, EndpointWrite::Disable { .. });
                    let due = outcome == AttemptOutcome::DisableEndpoint || at - start >= FIVE_DAYS;
                    prop_assert_eq!(disabled, due, "at {} with a streak from {}", at, start);
                    if disabled {
                        // A disabled endpoint takes no more attempts: the sequence ends here.
                        return Ok(());
                    }
                }
                health = health.after(&p.endpoint, error);
            }
        }
    }

    #[test]
    fn the_threshold_is_inclusive_and_a_success_resets_the_streak() {
        let failing = Health { failing_since_ms: Some(0), last_success_ms: None, has_error: true };
        let just_under = plan(AttemptOutcome::Failed, Some("e"), failing, FIVE_DAYS - 1, FIVE_DAYS);
        assert_eq!(just_under.endpoint, EndpointWrite::Failing { failing_since_ms: 0 });
        let at = plan(AttemptOutcome::Retry(9), Some("e"), failing, FIVE_DAYS, FIVE_DAYS);
        assert_eq!(at.endpoint, EndpointWrite::Disable { reason: FAILING_TOO_LONG.into(), failing_since_ms: 0 });
        let healed = plan(AttemptOutcome::Delivered, None, failing, FIVE_DAYS + 5, FIVE_DAYS);
        assert_eq!(healed.endpoint, EndpointWrite::Healthy { last_success_ms: FIVE_DAYS + 5 });
    }

    #[test]
    fn a_healthy_endpoint_is_rewritten_at_most_once_a_second() {
        let healthy = Health { failing_since_ms: None, last_success_ms: Some(10_000), has_error: false };
        assert_eq!(plan(AttemptOutcome::Delivered, None, healthy, 11_000, FIVE_DAYS).endpoint, EndpointWrite::Keep);
        assert_eq!(
            plan(AttemptOutcome::Delivered, None, healthy, 11_001, FIVE_DAYS).endpoint,
            EndpointWrite::Healthy { last_success_ms: 11_001 }
        );
        let gone = plan(AttemptOutcome::DisableEndpoint, Some("HTTP 410"), healthy, 12_000, FIVE_DAYS);
        assert_eq!(gone.endpoint, EndpointWrite::Disable { reason: "HTTP 410".into(), failing_since_ms: 12_000 });
        assert_eq!(gone.delivery, DeliveryWrite::Failed);
    }
}

#[cfg(test)]
mod fan_out_tests {
    use super::*;
    use crate::shipments::Status;

    #[test]
    fn each_event_goes_to_its_subscribers_in_order_behind_their_unfinished_ones() {
        let all = vec!["*".to_string()];
        let delivered = vec!["same.shipment.delivered".to_string()];
        let parcels = vec![PARCEL_CREATED.to_string()];
        let subscribed: [&[String]; 3] = [&all, &delivered, &parcels];
        // The second subscriber's stream already has an unfinished delivery.
        let mut busy = [false, true, false];
        let fans = fan_out(&subscribed, &mut busy, &[Status::InTransit, Status::Delivered], 2, true);
        let shown: Vec<_> = fans.iter().map(|f| (f.event.as_str(), f.body, f.deliveries.clone())).collect();
        assert_eq!(
            shown,
            [
                ("same.shipment.in_transit", Body::Event(0), vec![(0, false)]),
                ("same.shipment.delivered", Body::Event(1), vec![(0, true), (1, true)]),
                (PARCEL_CREATED, Body::ParcelCreated(0), vec![(0, true), (2, false)]),
                (PARCEL_CREATED, Body::ParcelCreated(1), vec![(0, true), (2, true)]),
            ]
        );
        assert_eq!(busy, [true, true, true]);
        // Nobody subscribed: nothing is planned (so nothing is rendered).
        assert!(fan_out(&[&delivered], &mut [false], &[Status::Failed], 1, false).is_empty());
    }
}
