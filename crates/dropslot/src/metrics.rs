//! Prometheus metrics (`GET /metrics`, text exposition format). One registry per process:
//! HTTP requests by route template and status with their latency, orders created, and the
//! webhook dispatcher's counters.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::{
    EncodeLabelSet, EncodeLabelValue, EncodeMetric, LabelValueEncoder, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
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

/// A recipient notification's attempt: its channel (`email`, `sms`) and how it ended
/// (`sent`, `retry`, `failed`, `uncertain`, `opted_out`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NotificationLabels {
    pub channel: String,
    pub outcome: String,
}

/// A depot, by its configured code (the area file bounds the series).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DepotLabels {
    pub depot: String,
}

/// Today's figures of the day's report per depot (CONTRACT §17), refreshed at a scrape at
/// most every [`DayGauges::EVERY`].
pub struct DayGauges {
    pub shipments: Family<DepotLabels, Gauge<f64, AtomicU64>>,
    pub delivered: Family<DepotLabels, Gauge<f64, AtomicU64>>,
    pub failed: Family<DepotLabels, Gauge<f64, AtomicU64>>,
    pub on_time: Family<DepotLabels, Gauge<f64, AtomicU64>>,
    pub eta_kept: Family<DepotLabels, Gauge<f64, AtomicU64>>,
    pub eta_error: Family<DepotLabels, Gauge<f64, AtomicU64>>,
    /// When they were last refreshed.
    pub refreshed: std::sync::Mutex<Option<std::time::Instant>>,
}

impl DayGauges {
    pub const EVERY: std::time::Duration = std::time::Duration::from_secs(15);

    fn register(registry: &mut Registry) -> DayGauges {
        let mut gauge = |name: &str, help: &str| {
            let g = Family::<DepotLabels, Gauge<f64, AtomicU64>>::default();
            registry.register(name, help, g.clone());
            g
        };
        DayGauges {
            shipments: gauge("report_shipments", "Today's drop-offs on published delivery routes, by depot"),
            delivered: gauge("report_delivered", "Today's drop-offs delivered, by depot"),
            failed: gauge("report_failed", "Today's failed delivery attempts, by depot"),
            on_time: gauge("report_on_time_ratio", "Today's attempts made inside their slot, of those made, by depot"),
            eta_kept: gauge(
                "report_eta_kept_ratio",
                "Today's attempts inside the window told at least 30 minutes before, of those told, by depot",
            ),
            eta_error: gauge(
                "report_eta_error_median_minutes",
                "Today's median distance of an attempt from its told window's middle, by depot",
            ),
            refreshed: std::sync::Mutex::new(None),
        }
    }

    /// Whether a refresh is due now (and, if so, it counts as done from now).
    pub fn due(&self) -> bool {
        let mut last = self.refreshed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = std::time::Instant::now();
        if last.is_some_and(|l| now.duration_since(l) < Self::EVERY) {
            return false;
        }
        *last = Some(now);
        true
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: Outcome,
}

/// A request by its method and route template (`/scheduled-service/api/v1/shipments/{unique_id}`,
/// never the id itself, so the series stay few), and its status.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub method: &'static str,
    pub route: &'static str,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: &'static str,
    pub route: &'static str,
}

/// A method as a label: the standard ones by name, anything else `other` (a client cannot
/// make new series).
pub fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// A route template as a label, interned: the templates are the router's (a few dozen), so
/// each is allocated once for the life of the process and a request allocates nothing. The
/// router hands every request of a route the same shared text, so each thread remembers the
/// label of the text at each address, checked against the text itself (an address a dropped
/// router freed may hold another template since): one comparison instead of a search under
/// a lock (issue 49).
pub fn route_label(template: &str) -> &'static str {
    thread_local! {
        static SEEN: std::cell::RefCell<HashMap<usize, &'static str, rustc_hash::FxBuildHasher>> =
            std::cell::RefCell::new(HashMap::default());
    }
    let at = template.as_ptr() as usize;
    if let Some(label) = SEEN.with_borrow(|seen| seen.get(&at).copied()).filter(|l| *l == template) {
        return label;
    }
    let label = intern_route(template);
    SEEN.with_borrow_mut(|seen| {
        // Bounded: a thread that met this many addresses starts over.
        if seen.len() >= 1024 {
            seen.clear();
        }
        seen.insert(at, label);
    });
    label
}

fn intern_route(template: &str) -> &'static str {
    static ROUTES: std::sync::RwLock<Vec<&'static str>> = std::sync::RwLock::new(Vec::new());
    // A poisoned list is still whole: a writer only ever pushes.
    if let Some(known) =
        ROUTES.read().unwrap_or_else(std::sync::PoisonError::into_inner).iter().find(|r| **r == template)
    {
        return known;
    }
    let mut routes = ROUTES.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(known) = routes.iter().find(|r| **r == template) {
        return known;
    }
    let interned: &'static str = Box::leak(template.to_owned().into_boxed_str());
    routes.push(interned);
    interned
}

/// How an order was created: `sync` (and `async` with issue 12's asynchronous requests).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OrderLabels {
    pub kind: &'static str,
}

/// A rate limit's class: `preview`, `orders`, `other`, `public`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClassLabels {
    pub class: &'static str,
}

/// The request latency buckets, in seconds (`+Inf` is added).
const LATENCY_BUCKETS: [f64; 13] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// A histogram every request observes without a lock: atomic bucket counts, the count, and
/// the sum in nanoseconds. (prometheus-client's `Histogram` takes a write lock per
/// observation, which requests on different threads then wait for.) It is encoded exactly
/// like one: non-cumulative bucket counts, the last bucket `+Inf`. A clone is a handle to
/// the same counts.
#[derive(Debug, Default, Clone)]
pub struct LatencyHistogram(std::sync::Arc<LatencyCounts>);

#[derive(Debug, Default)]
pub struct LatencyCounts {
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl LatencyHistogram {
    pub fn observe(&self, elapsed: std::time::Duration) {
        let seconds = elapsed.as_secs_f64();
        let i = LATENCY_BUCKETS.iter().position(|upper| seconds <= *upper).unwrap_or(LATENCY_BUCKETS.len());
        self.0.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.0.count.fetch_add(1, Ordering::Relaxed);
        self.0.sum_nanos.fetch_add(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS
            .iter()
            .copied()
            .chain(std::iter::once(f64::MAX))
            .zip(&self.0.buckets)
            .map(|(upper, n)| (upper, n.load(Ordering::Relaxed)))
            .collect();
        // The count is the buckets' sum, so a scrape during an observation stays consistent.
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = self.0.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// The store's statistics, read at each scrape (attached once the store is open).
#[derive(Debug, Default)]
struct StoreCollector(std::sync::OnceLock<std::sync::Arc<dropslot_store::StoreStats>>);

impl prometheus_client::collector::Collector for StoreCollector {
    fn encode(&self, mut encoder: prometheus_client::encoding::DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        use std::sync::atomic::Ordering::Relaxed;
        let Some(s) = self.0.get() else { return Ok(()) };
        let counters = [
            ("store_write_batches", "Write transactions committing a batch of jobs (group commit)", &s.batches),
            (
                "store_batched_jobs",
                "Jobs written in those batches: their mean size is this over the batches",
                &s.batched_jobs,
            ),
            (
                "store_connection_waits",
                "Database requests that waited because every pooled connection was busy",
                &s.read_waits,
            ),
        ];
        for (name, help, value) in counters {
            let c = ConstCounter::new(value.load(Relaxed));
            c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)?;
        }
        let g = ConstGauge::new(s.queued.load(Relaxed).max(0));
        g.encode(encoder.encode_descriptor(
            "store_write_queue_depth",
            "Jobs waiting for the writer now",
            None,
            g.metric_type(),
        )?)
    }
}

/// The per-route request metrics as the HTTP toolkit sees them: `None` when
/// `http_metrics` is off, so a request then costs nothing.
#[derive(Clone)]
pub struct HttpMetrics(pub Option<std::sync::Arc<Metrics>>);

pub struct Metrics {
    /// This instance among the process's (tests run several): what a thread's cached handles
    /// are kept under.
    id: u64,
    registry: Registry,
    store: std::sync::Arc<StoreCollector>,
    pub http_requests: Family<RequestLabels, Counter>,
    pub http_duration: Family<RouteLabels, LatencyHistogram>,
    pub orders_created: Family<OrderLabels, Counter>,
    pub rate_limited: Family<ClassLabels, Counter>,
    pub webhook_queued: Counter,
    pub notification_attempts: Family<NotificationLabels, Counter>,
    pub webhook_attempts: Family<OutcomeLabels, Counter>,
    pub webhook_latency: Histogram,
    pub webhook_queue_depth: Gauge,
    /// Seconds the plan solver stepped aside for the API (`plans/pace.rs`).
    pub solver_paused: Counter<f64, AtomicU64>,
    /// Today's report per depot (`crate::reports::refresh_gauges`).
    pub day: DayGauges,
}

/// Numbers the process's `Metrics` (`Metrics::id`).
static INSTANCES: AtomicU64 = AtomicU64::new(0);

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("dropslot");
        let store = std::sync::Arc::new(StoreCollector::default());
        registry.register_collector(Box::new(store.clone()));
        let http_requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route template and status",
            http_requests.clone(),
        );
        let http_duration = Family::<RouteLabels, LatencyHistogram>::default();
        registry.register(
            "http_request_duration_seconds",
            "Time from a request's head to its response head, by method and route template",
            http_duration.clone(),
        );
        let orders_created = Family::<OrderLabels, Counter>::default();
        registry.register("orders_created", "Orders committed, by how they were created", orders_created.clone());
        let rate_limited = Family::<ClassLabels, Counter>::default();
        registry.register("rate_limited", "Requests refused with 429, by rate-limit class", rate_limited.clone());
        let webhook_queued = Counter::default();
        registry.register(
            "webhook_deliveries_queued",
            "Webhook deliveries written to the outbox",
            webhook_queued.clone(),
        );
        let notification_attempts = Family::<NotificationLabels, Counter>::default();
        registry.register(
            "notification_attempts",
            "Recipient notification attempts by channel and outcome",
            notification_attempts.clone(),
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
        let solver_paused = Counter::<f64, AtomicU64>::default();
        registry.register(
            "plan_solver_paused_seconds",
            "Time the plan solver slept because the rest of the process was busy serving",
            solver_paused.clone(),
        );
        let day = DayGauges::register(&mut registry);
        Metrics {
            id: INSTANCES.fetch_add(1, Ordering::Relaxed),
            registry,
            store,
            http_requests,
            http_duration,
            orders_created,
            rate_limited,
            webhook_queued,
            notification_attempts,
            webhook_attempts,
            webhook_latency,
            webhook_queue_depth,
            solver_paused,
            day,
        }
    }
}

impl Metrics {
    pub fn attempt(&self, outcome: Outcome) {
        self.webhook_attempts.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// Reports the store's statistics from now on (once; later calls are ignored).
    pub fn attach_store(&self, stats: std::sync::Arc<dropslot_store::StoreStats>) {
        let _ = self.store.0.set(stats);
    }

    /// One answered request: its count and its latency, under its route template. Each thread
    /// keeps the handles of the series it counted (by instance, method, route and status:
    /// labels are interned, so their addresses name them), so a request takes neither of the
    /// families' locks nor hashes its labels twice (issue 49).
    pub fn request(&self, method: &'static str, route: &'static str, status: u16, elapsed: std::time::Duration) {
        type Key = (u64, usize, usize, u16);
        thread_local! {
            static SERIES: std::cell::RefCell<HashMap<Key, (Counter, LatencyHistogram), rustc_hash::FxBuildHasher>> =
                std::cell::RefCell::new(HashMap::default());
        }
        let key = (self.id, method.as_ptr() as usize, route.as_ptr() as usize, status);
        let hit = SERIES.with_borrow(|series| {
            series.get(&key).map(|(count, latency)| {
                latency.observe(elapsed);
                count.inc();
            })
        });
        if hit.is_some() {
            return;
        }
        let latency = self.http_duration.get_or_create(&RouteLabels { method, route }).clone();
        let count = self.http_requests.get_or_create(&RequestLabels { method, route, status }).clone();
        latency.observe(elapsed);
        count.inc();
        SERIES.with_borrow_mut(|series| {
            // Bounded (statuses are few, but a thread may outlive many instances in tests).
            if series.len() >= 4096 {
                series.clear();
            }
            series.insert(key, (count, latency));
        });
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The metrics in the format the scraper asked for.
    pub fn render_as(&self, format: Exposition) -> String {
        match format {
            Exposition::OpenMetrics => self.render(),
            Exposition::Classic => classic(&self.render()),
        }
    }
}

/// The two text formats a Prometheus scraper reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposition {
    /// `application/openmetrics-text; version=1.0.0`: what Prometheus asks for first.
    OpenMetrics,
    /// `text/plain; version=0.0.4`: the classic format, for scrapers that know no other.
    Classic,
}

impl Exposition {
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Exposition::Classic => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// The format an `Accept` header prefers: the classic one only when `text/plain` is
    /// acceptable with a higher quality than `OpenMetrics` (or `OpenMetrics` not at all);
    /// `OpenMetrics` without an `Accept`, for `*/*`, and on a tie.
    pub fn negotiate(accept: Option<&str>) -> Exposition {
        let Some(accept) = accept else { return Exposition::OpenMetrics };
        let (mut open, mut plain) = (0.0f32, 0.0f32);
        for item in accept.split(',') {
            let mut parts = item.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")))
                .find_map(|q| q.parse::<f32>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" | "*/*" | "application/*" => open = open.max(q),
                "text/plain" => plain = plain.max(q),
                _ => {}
            }
        }
        if plain > open { Exposition::Classic } else { Exposition::OpenMetrics }
    }
}

/// `OpenMetrics` text as the classic format: a counter's `# HELP` and `# TYPE` name its
/// samples (`x_total`, where `OpenMetrics` names the family `x`), and the `# UNIT` and `# EOF`
/// lines the classic format does not have are left out. Samples are the same in both.
fn classic(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .filter(|name| !name.ends_with("_total"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|tag| {
            let rest = line.strip_prefix(tag)?;
            let (name, tail) = rest.split_once(' ')?;
            counters.contains(name).then(|| format!("{tag}{name}_total {tail}"))
        });
        match renamed {
            Some(line) => out.push_str(&line),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}
