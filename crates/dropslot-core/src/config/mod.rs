//! Configuration: the embedded commented default, an optional file merged over it, then
//! environment variables and flags; validated once at start into `Settings`.

mod area;
mod attempts;
mod capacity;
mod notify;
mod routing;
#[cfg(feature = "openapi")]
mod schema;

use std::net::SocketAddr;
use std::time::Duration;

use jiff::Timestamp;
use serde::Deserialize;

pub use area::{City, Depot, Region, ServiceArea, Slot, SlotCapacity, Weekdays, Zone};
pub use attempts::{AfterFailure, MAX_ATTEMPTS_RANGE, Policy};
pub use capacity::{CapacityMode, CapacitySettings, DispatchSettings, Unplaced};
pub use notify::{Credentials, NotificationConfig, SmsSettings, SmtpSecurity, SmtpSettings};
pub use routing::{OsrmSettings, RoadModel, RoutingSettings};

use crate::money::Money;

pub const DEFAULT_TOML: &str = include_str!("default.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    server: RawServer,
    webhooks: RawWebhooks,
    async_orders: RawAsyncOrders,
    booking: RawBooking,
    routing: routing::RawRouting,
    #[serde(default)]
    notifications: notify::RawNotifications,
    #[serde(default)]
    attempts: Policy,
    #[serde(default)]
    capacity: capacity::RawCapacity,
    #[serde(default)]
    dispatch: DispatchSettings,
    #[serde(default)]
    demo: DemoSettings,
    postgres: RawPostgres,
    pricing: PriceList,
    limits: Limits,
    rate_limits: RateLimits,
    public_rate_limit: Bucket,
    regions: Vec<area::RawRegion>,
    cities: Vec<area::RawCity>,
    zones: Vec<area::RawZone>,
    #[serde(default)]
    warehouses: Vec<area::RawWarehouse>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    listen: String,
    database: String,
    base_url: String,
    body_limit: usize,
    shutdown_grace_seconds: u64,
    header_read_timeout_seconds: u64,
    body_read_timeout_seconds: u64,
    request_timeout_seconds: u64,
    idle_timeout_seconds: u64,
    max_connections: usize,
    #[serde(default)]
    admin_token: Option<String>,
    /// Serve `/metrics` on this address only (empty: on the main listener).
    #[serde(default)]
    metrics_listen: String,
    /// Count every HTTP request by route and status, with its latency (on by default).
    #[serde(default = "yes")]
    http_metrics: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebhooks {
    retry_schedule: String,
    allow_private: bool,
    timeout: String,
    disable_after: String,
    concurrency: usize,
    per_endpoint_concurrency: usize,
    drain: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPostgres {
    pool_size: usize,
    order_writers: usize,
    connect_timeout: String,
    statement_timeout: String,
}

/// The `PostgreSQL` backend's pool (`[postgres]`, docs/operations.md); unused on `SQLite`.
#[derive(Debug, Clone)]
pub struct PostgresSettings {
    /// Connections per process at most.
    pub pool_size: usize,
    /// Order batches written at once per process (each on a pooled connection).
    pub order_writers: usize,
    /// Connecting, and waiting for a free pooled connection, at most this long.
    pub connect_timeout: Duration,
    /// The server cancels a statement that runs longer.
    pub statement_timeout: Duration,
}

fn postgres_settings(raw: &RawPostgres) -> Result<PostgresSettings, ConfigError> {
    let invalid = |key: &str, e: String| ConfigError::Invalid(format!("postgres.{key}: {e}"));
    if !(1..=1000).contains(&raw.pool_size) {
        return Err(invalid("pool_size", "from 1 to 1000".into()));
    }
    if raw.order_writers < 1 || raw.order_writers >= raw.pool_size.max(2) {
        return Err(invalid("order_writers", "from 1 to pool_size - 1 (requests need connections too)".into()));
    }
    let connect_timeout = parse_duration(&raw.connect_timeout).map_err(|e| invalid("connect_timeout", e))?;
    let statement_timeout = parse_duration(&raw.statement_timeout).map_err(|e| invalid("statement_timeout", e))?;
    for (key, d) in [("connect_timeout", connect_timeout), ("statement_timeout", statement_timeout)] {
        if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
            return Err(invalid(key, "from 100ms to 1h".into()));
        }
    }
    Ok(PostgresSettings {
        pool_size: raw.pool_size,
        order_writers: raw.order_writers,
        connect_timeout,
        statement_timeout,
    })
}

/// `[booking]`: how far ahead slots are sold (CONTRACT §10).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBooking {
    horizon_days: u16,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAsyncOrders {
    lease: String,
    batch: usize,
}

/// The asynchronous order worker (`[async_orders]`, CONTRACT §3.5).
#[derive(Debug, Clone, Copy)]
pub struct AsyncOrderSettings {
    /// How long a claimed request is a worker's: after it, another worker (of any process)
    /// may take the request over. Longer than any order takes to write.
    pub lease: Duration,
    /// Requests claimed at once per process.
    pub batch: usize,
}

fn async_order_settings(raw: &RawAsyncOrders) -> Result<AsyncOrderSettings, ConfigError> {
    let lease = parse_duration(&raw.lease).map_err(|e| ConfigError::Invalid(format!("async_orders.lease: {e}")))?;
    if lease < Duration::from_millis(100) {
        return Err(ConfigError::Invalid("async_orders.lease: at least 100ms".into()));
    }
    if !(1..=256).contains(&raw.batch) {
        return Err(ConfigError::Invalid("async_orders.batch: 1 to 256".into()));
    }
    Ok(AsyncOrderSettings { lease, batch: raw.batch })
}

/// Webhook delivery (`[webhooks]`, docs/webhooks.md).
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// The delays before the 2nd, 3rd … attempt.
    pub retry_schedule: Vec<Duration>,
    pub allow_private: bool,
    pub timeout: Duration,
    pub disable_after: Duration,
    pub concurrency: usize,
    pub per_endpoint_concurrency: usize,
    pub drain: Duration,
}

/// A duration such as `500ms`, `5s`, `5m`, `2h` or `5d`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split =
        t.find(|c: char| !c.is_ascii_digit()).ok_or_else(|| format!("{text:?} needs a unit (ms, s, m, h, d)"))?;
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("{text:?} must start with a whole number"))?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        _ => return Err(format!("{text:?}: the unit must be ms, s, m, h or d")),
    };
    ms.filter(|&ms| ms <= 30 * 86_400_000)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is longer than 30 days"))
}

/// A comma-separated retry schedule: 0 to 20 delays.
pub fn parse_schedule(text: &str) -> Result<Vec<Duration>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let delays = text.split(',').map(parse_duration).collect::<Result<Vec<_>, _>>()?;
    if delays.len() > 20 {
        return Err("at most 20 retries".into());
    }
    Ok(delays)
}

fn webhook_settings(raw: &RawWebhooks, o: &Overrides) -> Result<WebhookSettings, ConfigError> {
    let invalid = |key: &str, e: String| ConfigError::Invalid(format!("{key}: {e}"));
    let schedule_text = o.webhook_retry_schedule.as_deref().unwrap_or(&raw.retry_schedule);
    let key =
        if o.webhook_retry_schedule.is_some() { "DROPSLOT_WEBHOOK_RETRY_SCHEDULE" } else { "webhooks.retry_schedule" };
    let retry_schedule = parse_schedule(schedule_text).map_err(|e| invalid(key, e))?;
    let allow_private = match o.webhooks_allow_private.as_deref() {
        None => raw.allow_private,
        Some("1" | "true") => true,
        Some("0" | "false") => false,
        Some(v) => return Err(invalid("DROPSLOT_WEBHOOKS_ALLOW_PRIVATE", format!("{v:?} must be 1 or 0"))),
    };
    let timeout = parse_duration(&raw.timeout).map_err(|e| invalid("webhooks.timeout", e))?;
    if timeout < Duration::from_millis(100) || timeout > Duration::from_secs(60) {
        return Err(invalid("webhooks.timeout", "from 100ms to 60s".into()));
    }
    let disable_after = parse_duration(&raw.disable_after).map_err(|e| invalid("webhooks.disable_after", e))?;
    let drain = parse_duration(&raw.drain).map_err(|e| invalid("webhooks.drain", e))?;
    if raw.concurrency == 0 || raw.per_endpoint_concurrency == 0 || raw.concurrency > 4096 {
        return Err(invalid("webhooks.concurrency", "1 to 4096, and per_endpoint_concurrency at least 1".into()));
    }
    Ok(WebhookSettings {
        retry_schedule,
        allow_private,
        timeout,
        disable_after,
        concurrency: raw.concurrency,
        per_endpoint_concurrency: raw.per_endpoint_concurrency.min(raw.concurrency),
        drain,
    })
}

/// Connection timeouts and limits (`[server]`, docs/operations.md "Timeouts and limits").
#[derive(Debug, Clone, Copy)]
pub struct NetLimits {
    /// From a connection's first byte of a request to the end of its headers.
    pub header_read_timeout: Duration,
    /// From the end of the headers to the end of the body; a stall is a 408.
    pub body_read_timeout: Duration,
    /// From the end of the headers to the response (a 503 when exceeded).
    pub request_timeout: Duration,
    /// A kept-alive connection with no request in flight, and a new connection that sends
    /// nothing, are closed after this long.
    pub idle_timeout: Duration,
    /// Open connections at most; one more is answered 503 and closed.
    pub max_connections: usize,
    /// What a lingering close reads and discards at most after an early refusal: twice the
    /// largest body any route takes (`server.body_limit` here; the service raises it to its
    /// largest route's), so a refused body up to twice that still gets its answer.
    pub linger_bytes: usize,
}

/// A client's price list: size classes (smallest first), minimum price and payment type.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PriceList {
    pub min_price: Money,
    pub payment_type: PaymentType,
    pub sizes: Vec<SizeClass>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PaymentType {
    pub id: i64,
    pub code: String,
    pub name: String,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SizeClass {
    pub code: String,
    pub name: String,
    pub max_grams: u32,
    pub price: Money,
    pub note: String,
}

/// Per-request limits of the interface's Limits table (per client overridable).
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub order_drop_offs: usize,
    pub order_parcels_per_drop_off: usize,
    pub preview_drop_offs: usize,
    pub preview_parcels_per_drop_off: usize,
    /// The asynchronous endpoint's limits (CONTRACT §3.5: up to 100 drop-offs of 1–5
    /// parcels by default).
    #[serde(default = "default_async_drop_offs")]
    pub async_drop_offs: usize,
    #[serde(default = "default_async_parcels")]
    pub async_parcels_per_drop_off: usize,
    /// Delivery attempts before a failed shipment can only be returned or cancelled
    /// (CONTRACT §4; 1 to 10). Fixed on each shipment when it is ordered.
    #[serde(default = "default_max_attempts")]
    pub max_delivery_attempts: u32,
}

/// One token bucket: `per_second` requests a second on average, up to `burst` at once.
/// `per_second = 0` means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Bucket {
    pub per_second: u32,
    pub burst: u32,
}

/// Requests per token, separately for preview, order creation and everything else
/// (`[rate_limits]`; per client in its negotiated terms). Each process keeps its own buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimits {
    pub preview: Bucket,
    pub orders: Bucket,
    pub other: Bucket,
}

/// A bucket's rules: a limit has a burst of at least 1 (and at most a million a second).
pub fn validate_rate_limits(r: &RateLimits) -> Result<(), String> {
    for (name, b) in [("preview", r.preview), ("orders", r.orders), ("other", r.other)] {
        validate_bucket(b).map_err(|m| format!("rate_limits.{name}: {m}"))?;
    }
    Ok(())
}

fn validate_bucket(b: Bucket) -> Result<(), String> {
    if b.per_second > 1_000_000 {
        return Err("per_second must be at most 1000000 (0 = no limit)".into());
    }
    if b.per_second > 0 && !(1..=1_000_000).contains(&b.burst) {
        return Err("burst must be 1 to 1000000".into());
    }
    Ok(())
}

fn default_max_attempts() -> u32 {
    3
}

fn default_async_drop_offs() -> usize {
    100
}

fn default_async_parcels() -> usize {
    5
}

/// Everything the server needs, validated.
#[derive(Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub database: String,
    /// No trailing slash.
    pub base_url: String,
    pub body_limit: usize,
    pub shutdown_grace: std::time::Duration,
    pub net: NetLimits,
    pub admin_token: Option<String>,
    /// When set, `/metrics` is served on this address only, not on `listen`.
    pub metrics_listen: Option<SocketAddr>,
    /// Whether `/metrics` counts HTTP requests (`server.http_metrics`).
    pub http_metrics: bool,
    /// Pins the clock (scheduling, timestamps): tests and demos.
    pub now: Option<Timestamp>,
    pub pricing: PriceList,
    pub limits: Limits,
    /// Per token, unless a client's terms set its own.
    pub rate_limits: RateLimits,
    /// Label and tracking URLs, per client IP address.
    pub public_rate_limit: Bucket,
    pub area: ServiceArea,
    pub webhooks: WebhookSettings,
    pub async_orders: AsyncOrderSettings,
    pub postgres: PostgresSettings,
    pub routing: RoutingSettings,
    pub notifications: NotificationConfig,
    /// The default attempts policy (`[attempts]`, CONTRACT §15): clients set their own.
    pub attempts: Policy,
    /// How each depot counts its slots' room (`[capacity]`, issue 45).
    pub capacity: CapacitySettings,
    /// What happens to a shipment the fleet cannot route (`[dispatch]`).
    pub dispatch: DispatchSettings,
    /// What the first start on a new database creates (`[demo]`).
    pub demo: DemoSettings,
}

/// `[demo]`: what the first start on a new database (no client yet) creates besides the demo
/// client and its test token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemoSettings {
    /// The demo client's live token, an operator token (printed as a sign-in link to `/ops`)
    /// and two drivers of each depot with coordinates (printed as their app links).
    pub fleet: bool,
}

impl Default for DemoSettings {
    fn default() -> Self {
        DemoSettings { fleet: true }
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("listen", &self.listen)
            .field("database", &redact_url(&self.database))
            .field("base_url", &self.base_url)
            .field("admin_token", &self.admin_token.as_ref().map(|_| "<hidden>"))
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// Hides a password in `scheme://user:password@host`.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => match url[s + 3..at].find(':') {
            Some(c) => format!("{}:***{}", &url[..s + 3 + c], &url[at..]),
            None => url.to_string(),
        },
        _ => url.to_string(),
    }
}

/// Overrides from flags and environment (flags win; clap merges both into one value).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub config_file: Option<std::path::PathBuf>,
    pub listen: Option<String>,
    pub database: Option<String>,
    pub base_url: Option<String>,
    pub now: Option<String>,
    pub admin_token: Option<String>,
    pub metrics_listen: Option<String>,
    pub webhook_retry_schedule: Option<String>,
    pub webhooks_allow_private: Option<String>,
    pub credentials: Credentials,
}

impl Overrides {
    /// Reads the CONTRACT §9 environment variables (used where no flag was given).
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Self {
            config_file: var("DROPSLOT_CONFIG").map(Into::into),
            listen: var("DROPSLOT_LISTEN"),
            database: var("DATABASE_URL"),
            base_url: var("DROPSLOT_BASE_URL"),
            now: var("DROPSLOT_NOW"),
            admin_token: var("DROPSLOT_ADMIN_TOKEN"),
            metrics_listen: var("DROPSLOT_METRICS_LISTEN"),
            webhook_retry_schedule: var("DROPSLOT_WEBHOOK_RETRY_SCHEDULE"),
            webhooks_allow_private: var("DROPSLOT_WEBHOOKS_ALLOW_PRIVATE"),
            credentials: Credentials {
                smtp_user: var("DROPSLOT_SMTP_USER"),
                smtp_password: var("DROPSLOT_SMTP_PASSWORD"),
                sms_user: var("DROPSLOT_SMS_USER"),
                sms_password: var("DROPSLOT_SMS_PASSWORD"),
            },
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("config file {path} is not valid TOML: {message}")]
    Toml { path: String, message: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl Settings {
    /// Embedded default, then the optional file, then overrides; validated.
    pub fn load(o: &Overrides) -> Result<Settings, ConfigError> {
        let mut merged: toml::Table = DEFAULT_TOML
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Toml { path: "<embedded>".into(), message: e.to_string() })?;
        if let Some(path) = &o.config_file {
            let shown = path.display().to_string();
            let text =
                std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: shown.clone(), source })?;
            let file: toml::Table = text
                .parse()
                .map_err(|e: toml::de::Error| ConfigError::Toml { path: shown.clone(), message: e.to_string() })?;
            merge_area_file(&mut merged, file);
        }
        Self::from_table(merged, o)
    }

    /// Loads the defaults with a TOML fragment merged over them (tests, embedding).
    pub fn from_toml_fragment(fragment: &str, o: &Overrides) -> Result<Settings, ConfigError> {
        let mut merged: toml::Table = DEFAULT_TOML
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Toml { path: "<embedded>".into(), message: e.to_string() })?;
        let extra: toml::Table = fragment
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Toml { path: "<fragment>".into(), message: e.to_string() })?;
        merge_area_file(&mut merged, extra);
        Self::from_table(merged, o)
    }

    fn from_table(table: toml::Table, o: &Overrides) -> Result<Settings, ConfigError> {
        let raw: RawConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid(crate::rule::plain(&e.to_string())))?;
        let listen_text = o.listen.clone().unwrap_or(raw.server.listen);
        let listen: SocketAddr = listen_text
            .parse()
            .map_err(|_| ConfigError::Invalid(format!("server.listen: {listen_text:?} is not an ADDR:PORT")))?;
        let database = o.database.clone().unwrap_or(raw.server.database);
        DatabaseUrl::parse(&database).map_err(|e| ConfigError::Invalid(format!("server.database: {e}")))?;
        let base_url = o.base_url.clone().unwrap_or(raw.server.base_url);
        let base_url = if base_url.is_empty() { format!("http://{listen}") } else { base_url };
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(ConfigError::Invalid(format!(
                "server.base_url: {base_url:?} must start with http:// or https://"
            )));
        }
        let now =
            match &o.now {
                None => None,
                Some(s) => Some(s.parse::<Timestamp>().map_err(|e| {
                    ConfigError::Invalid(format!("DROPSLOT_NOW: {s:?} is not an RFC 3339 timestamp: {e}"))
                })?),
            };
        let seconds = |key: &str, v: u64| {
            if (1..=86_400).contains(&v) {
                Ok(Duration::from_secs(v))
            } else {
                Err(ConfigError::Invalid(format!("server.{key}: from 1 to 86400 seconds")))
            }
        };
        let net = NetLimits {
            header_read_timeout: seconds("header_read_timeout_seconds", raw.server.header_read_timeout_seconds)?,
            body_read_timeout: seconds("body_read_timeout_seconds", raw.server.body_read_timeout_seconds)?,
            request_timeout: seconds("request_timeout_seconds", raw.server.request_timeout_seconds)?,
            idle_timeout: seconds("idle_timeout_seconds", raw.server.idle_timeout_seconds)?,
            max_connections: raw.server.max_connections,
            linger_bytes: raw.server.body_limit.saturating_mul(2),
        };
        if net.max_connections == 0 {
            return Err(ConfigError::Invalid("server.max_connections: at least 1".into()));
        }
        if raw.server.body_limit < 1024 {
            return Err(ConfigError::Invalid("server.body_limit: at least 1024 bytes".into()));
        }
        validate_pricing(&raw.pricing).map_err(ConfigError::Invalid)?;
        validate_limits(&raw.limits).map_err(ConfigError::Invalid)?;
        validate_rate_limits(&raw.rate_limits).map_err(ConfigError::Invalid)?;
        validate_bucket(raw.public_rate_limit).map_err(|m| ConfigError::Invalid(format!("public_rate_limit: {m}")))?;
        let city_roads: Vec<_> = raw.cities.iter().map(area::RawCity::roads).collect();
        let area = ServiceArea::build(raw.regions, raw.cities, raw.zones, raw.warehouses, raw.booking.horizon_days)
            .map_err(ConfigError::Invalid)?;
        let routing = routing::build(&raw.routing, &city_roads).map_err(ConfigError::Invalid)?;
        let capacity = capacity::build(raw.capacity, area.depots()).map_err(ConfigError::Invalid)?;
        let admin_token = o.admin_token.clone().or(raw.server.admin_token).filter(|t| !t.is_empty());
        if let Some(t) = &admin_token {
            if t.len() < 16 {
                return Err(ConfigError::Invalid("DROPSLOT_ADMIN_TOKEN: use at least 16 characters".into()));
            }
        }
        let metrics_text = o.metrics_listen.clone().unwrap_or(raw.server.metrics_listen);
        let metrics_listen = if metrics_text.is_empty() {
            None
        } else {
            Some(metrics_text.parse::<SocketAddr>().map_err(|_| {
                ConfigError::Invalid(format!("server.metrics_listen: {metrics_text:?} is not an ADDR:PORT"))
            })?)
        };
        let webhooks = webhook_settings(&raw.webhooks, o)?;
        let notifications = notify::build(raw.notifications, &o.credentials).map_err(ConfigError::Invalid)?;
        let postgres = postgres_settings(&raw.postgres)?;
        let async_orders = async_order_settings(&raw.async_orders)?;
        if let Some((path, m)) = raw.attempts.problems().into_iter().next() {
            return Err(ConfigError::Invalid(format!("attempts.{path}: {m}")));
        }
        Ok(Settings {
            attempts: raw.attempts,
            capacity,
            dispatch: raw.dispatch,
            demo: raw.demo,
            webhooks,
            async_orders,
            postgres,
            listen,
            database,
            base_url: base_url.trim_end_matches('/').to_string(),
            body_limit: raw.server.body_limit,
            shutdown_grace: std::time::Duration::from_secs(raw.server.shutdown_grace_seconds),
            net,
            admin_token,
            metrics_listen,
            http_metrics: raw.server.http_metrics,
            now,
            pricing: raw.pricing,
            limits: raw.limits,
            rate_limits: raw.rate_limits,
            public_rate_limit: raw.public_rate_limit,
            area,
            routing,
            notifications,
        })
    }
}

/// A file merged over the embedded default ([`merge`]). The warehouses go with the zones:
/// a file that sets `[[zones]]` and no `[[warehouses]]` describes its own area, whose depots
/// have no coordinates (the embedded Toronto depots are not inherited).
fn merge_area_file(base: &mut toml::Table, over: toml::Table) {
    if over.contains_key("zones") && !over.contains_key("warehouses") {
        base.remove("warehouses");
    }
    merge(base, over);
}

/// Tables merge key by key; anything else in `over` replaces.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

pub fn validate_pricing(p: &PriceList) -> Result<(), String> {
    if p.sizes.is_empty() {
        return Err("pricing.sizes: at least one size class".into());
    }
    for (i, w) in p.sizes.windows(2).enumerate() {
        if w[1].max_grams <= w[0].max_grams {
            return Err(format!("pricing.sizes.{}: max_grams must grow with each class", i + 1));
        }
    }
    for (i, s) in p.sizes.iter().enumerate() {
        if s.code.is_empty() || s.max_grams == 0 {
            return Err(format!("pricing.sizes.{i}: code and max_grams are required"));
        }
    }
    Ok(())
}

pub fn validate_limits(l: &Limits) -> Result<(), String> {
    if [
        l.order_drop_offs,
        l.order_parcels_per_drop_off,
        l.preview_drop_offs,
        l.preview_parcels_per_drop_off,
        l.async_drop_offs,
        l.async_parcels_per_drop_off,
    ]
    .contains(&0)
    {
        return Err("limits: every limit must be at least 1".into());
    }
    if !(1..=10).contains(&l.max_delivery_attempts) {
        return Err("limits: max_delivery_attempts must be 1 to 10".into());
    }
    Ok(())
}

/// A parsed database URL: the one place the scheme and form are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// `sqlite://PATH` or `sqlite:PATH`; `sqlite:///abs/path.db` for an absolute path.
    Sqlite(String),
    Postgres(String),
}

impl DatabaseUrl {
    pub fn parse(url: &str) -> Result<DatabaseUrl, String> {
        if let Some(path) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
            if path.contains(['?', '#']) {
                // Silently making a file named `d.db?mode=ro` would be worse than refusing.
                return Err(format!(
                    "{url:?}: a sqlite URL takes a file path only, without a query string or fragment"
                ));
            }
            if path.is_empty() || path == ":memory:" {
                return Err(format!("{url:?}: sqlite needs a file path (sqlite://PATH)"));
            }
            Ok(DatabaseUrl::Sqlite(path.to_string()))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(DatabaseUrl::Postgres(url.to_string()))
        } else {
            Err(format!("{:?} must be sqlite://PATH or postgres://…", redact_url(url)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_is_valid() {
        let s = Settings::load(&Overrides::default()).unwrap();
        assert_eq!(s.pricing.min_price, Money(4500));
        assert_eq!(s.base_url, "http://127.0.0.1:8080");
        assert_eq!(s.area.cities().len(), 1);
    }

    /// The Debian package installs this very file as `/etc/dropslot/dropslot.toml` (scripts/deb.sh),
    /// and the unit passes it with `--config`: merged over itself it must change nothing, arrays
    /// (which replace) included.
    #[test]
    fn the_default_given_as_the_file_changes_nothing() {
        let default: toml::Table = DEFAULT_TOML.parse().unwrap();
        let mut merged = default.clone();
        merge_area_file(&mut merged, default.clone());
        assert_eq!(merged, default);
        let path = std::env::temp_dir().join(format!("dropslot-default-{}.toml", std::process::id()));
        std::fs::write(&path, DEFAULT_TOML).unwrap();
        let from_file = Settings::load(&Overrides { config_file: Some(path.clone()), ..Overrides::default() });
        std::fs::remove_file(&path).unwrap();
        // Settings are a function of the merged table, so the equality above is the proof; the
        // load shows that the file, read from disk, passes validation as it is.
        let (from_file, without) = (from_file.unwrap(), Settings::load(&Overrides::default()).unwrap());
        assert_eq!(format!("{from_file:?}"), format!("{without:?}"));
        assert_eq!(from_file.area.cities().len(), without.area.cities().len());
        assert_eq!(from_file.pricing.sizes.len(), without.pricing.sizes.len());
    }

    #[test]
    fn file_merges_over_default_and_bad_values_are_named() {
        let s = Settings::from_toml_fragment("[pricing]\nmin_price = \"30\"", &Overrides::default()).unwrap();
        assert_eq!(s.pricing.min_price, Money(3000));
        assert_eq!(s.pricing.sizes.len(), 4, "tables merge, untouched keys stay");
        let e = Settings::from_toml_fragment("[server]\nlisten = \"nope\"", &Overrides::default()).unwrap_err();
        assert!(e.to_string().contains("server.listen"), "{e}");
        let o = Overrides { now: Some("yesterday".into()), ..Overrides::default() };
        assert!(Settings::load(&o).unwrap_err().to_string().contains("DROPSLOT_NOW"));
    }

    #[test]
    fn webhook_durations_and_schedule() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5d"), Ok(Duration::from_secs(5 * 86_400)));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5w").is_err());
        assert!(parse_duration("99999d").is_err());
        let s = Settings::load(&Overrides::default()).unwrap();
        let minutes: Vec<u64> = s.webhooks.retry_schedule.iter().map(Duration::as_secs).collect();
        assert_eq!(minutes, [5, 300, 1800, 7200, 18_000, 36_000, 36_000]);
        let o = Overrides { webhook_retry_schedule: Some("1s, 2s".into()), ..Overrides::default() };
        assert_eq!(Settings::load(&o).unwrap().webhooks.retry_schedule.len(), 2);
        let o = Overrides { webhook_retry_schedule: Some("soon".into()), ..Overrides::default() };
        assert!(Settings::load(&o).unwrap_err().to_string().contains("DROPSLOT_WEBHOOK_RETRY_SCHEDULE"));
    }

    /// A slot's `capacity` is read from the area file; a pick-up slot takes stops only, a
    /// pick-up slot code names one slot in the whole area, and the horizon is checked.
    #[test]
    fn slot_capacity_and_the_booking_horizon() {
        let city = |code: &str, slot: &str, capacity: &str| {
            format!(
                "[[cities]]\ncode = \"{code}\"\nname = \"{code}\"\nregion = \"ON\"\ntime_zone = \"America/Toronto\"\n\
                 weekdays = [\"mon\"]\n[[cities.pick_up_slots]]\ncode = \"{slot}\"\nname = \"AM\"\nfrom_time = 540\n\
                 to_time = 720\n{capacity}\n"
            )
        };
        let zone = "[[zones]]\ncode = \"Z\"\ncity = \"a\"\nwarehouse = \"W\"\npostal_prefixes = [\"M5\"]\n\
                    [[zones.drop_off_slots]]\ncode = \"Z-PM\"\nname = \"PM\"\nfrom_time = 840\nto_time = 1080\n\
                    capacity = { stops = 7, parcels = 20 }\n";
        let s = Settings::from_toml_fragment(
            &format!("{}{zone}", city("a", "A-AM", "capacity = { stops = 3 }")),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(s.area.horizon_days(), 14);
        let limit = s.area.zones()[0].drop_off_slots[0].limit();
        assert_eq!((limit.stops, limit.parcels), (Some(7), Some(20)));
        assert_eq!(s.area.cities()[0].pick_up_slots[0].limit().stops, Some(3));
        let e = Settings::from_toml_fragment(
            &format!("{}{zone}", city("a", "A-AM", "capacity = { parcels = 3 }")),
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("pick_up_slots.0.capacity.parcels"), "{e}");
        let twice = format!("{}{}{zone}", city("a", "A-AM", ""), city("b", "A-AM", ""));
        let e = Settings::from_toml_fragment(&twice, &Overrides::default()).unwrap_err();
        assert!(e.to_string().contains("another city"), "{e}");
        let e = Settings::from_toml_fragment("[booking]\nhorizon_days = 0", &Overrides::default()).unwrap_err();
        assert!(e.to_string().contains("booking.horizon_days"), "{e}");
    }

    /// Depots (CONTRACT §12): the embedded ones have coordinates and know their zones; a
    /// listed warehouse is checked; a file with zones and no warehouses still loads.
    #[test]
    fn warehouses_are_checked_and_optional() {
        let s = Settings::load(&Overrides::default()).unwrap();
        let yyz1 = s.area.depot("YYZ1").expect("YYZ1");
        assert!(yyz1.location.is_some() && yyz1.address.is_some(), "{yyz1:?}");
        let zones: Vec<&str> = s.area.depot_zones("YYZ1").map(|z| z.code.as_str()).collect();
        assert_eq!(zones, ["TOR-DT", "TOR-W"]);
        assert!(s.area.depot("YYZ9").is_none());
        let zone = |warehouse: &str| {
            format!(
                "[[zones]]\ncode = \"Z\"\ncity = \"toronto\"\nwarehouse = \"{warehouse}\"\npostal_prefixes = [\"M5\"]\n\
                 [[zones.drop_off_slots]]\ncode = \"Z-PM\"\nname = \"PM\"\nfrom_time = 840\nto_time = 1080\n"
            )
        };
        let warehouse = |code: &str, lat: f64, lng: f64| {
            format!("[[warehouses]]\ncode = \"{code}\"\nname = \"N\"\naddress = \"A\"\nlat = {lat}\nlng = {lng}\n")
        };
        // Zones without warehouses: the zones' codes, without coordinates.
        let old = Settings::from_toml_fragment(&zone("W9"), &Overrides::default()).unwrap();
        let depots: Vec<(&str, bool)> =
            old.area.depots().iter().map(|d| (d.code.as_str(), d.location.is_some())).collect();
        assert_eq!(depots, [("W9", false)]);
        let ok = format!("{}{}", warehouse("W9", 43.6, -79.4), zone("W9"));
        let s = Settings::from_toml_fragment(&ok, &Overrides::default()).unwrap();
        assert_eq!(s.area.depot("W9").and_then(|d| d.location), Some((43.6, -79.4)));
        for (fragment, path) in [
            (format!("{}{}", warehouse("W1", 43.6, -79.4), zone("W9")), "zones.0.warehouse"),
            (format!("{}{}", warehouse("W9", 91.0, -79.4), zone("W9")), "warehouses.0.lat"),
            (format!("{}{}", warehouse("W9", 43.6, -181.0), zone("W9")), "warehouses.0.lng"),
            (
                format!("{}{}{}", warehouse("W9", 43.6, -79.4), warehouse("W9", 43.7, -79.4), zone("W9")),
                "warehouses.1.code",
            ),
            // The embedded zones name YYZ1 and YYZ2: a warehouse list without them is refused.
            (warehouse("W9", 43.6, -79.4), "zones.0.warehouse"),
        ] {
            let e = Settings::from_toml_fragment(&fragment, &Overrides::default()).unwrap_err();
            assert!(e.to_string().contains(path), "{path}: {e}");
        }
    }

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact_url("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact_url("sqlite://x.db"), "sqlite://x.db");
    }
}
