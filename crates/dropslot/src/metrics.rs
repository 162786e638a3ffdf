//! Prometheus metrics (`GET /metrics`, text exposition format). One registry per process;
//! the webhook dispatcher's counters now, the HTTP and order metrics with issue 12.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// How a delivery attempt ended (label values `delivered`, `retried`, `failed`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx: the delivery is done.
    Delivered,
    /// Failed; another attempt is scheduled.
    Retried,
    /// Failed with no retry left (or its endpoint disabled).
    Failed,
}

impl EncodeLabelValue for Outcome {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        let text = match self {
            Outcome::Delivered => "delivered",
            Outcome::Retried => "retried",
            Outcome::Failed => "failed",
        };
        EncodeLabelValue::encode(&text, encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: Outcome,
}

pub struct Metrics {
    registry: Registry,
    pub webhook_queued: Counter,
    pub webhook_attempts: Family<OutcomeLabels, Counter>,
    pub webhook_latency: Histogram,
    pub webhook_queue_depth: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("dropslot");
        let webhook_queued = Counter::default();
        registry.register(
            "webhook_deliveries_queued",
            "Webhook deliveries written to the outbox",
            webhook_queued.clone(),
        );
        let webhook_attempts = Family::<OutcomeLabels, Counter>::default();
        registry.register("webhook_attempts", "Webhook delivery attempts by outcome", webhook_attempts.clone());
        let webhook_latency = Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0]);
        registry.register(
            "webhook_attempt_duration_seconds",
            "Time from sending a webhook to its answer (or failure)",
            webhook_latency.clone(),
        );
        let webhook_queue_depth = Gauge::default();
        registry.register(
            "webhook_queue_depth",
            "Webhook deliveries not yet delivered or failed (sampled by the dispatcher)",
            webhook_queue_depth.clone(),
        );
        Metrics { registry, webhook_queued, webhook_attempts, webhook_latency, webhook_queue_depth }
    }
}

impl Metrics {
    pub fn attempt(&self, outcome: Outcome) {
        self.webhook_attempts.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
