//! The application state every handler shares: settings, store, clock, geocoder, metrics and
//! rate limits. It imports no domain: the composition root (`root.rs`) hands it the outbox.

use std::ops::Deref;
use std::sync::Arc;

use axum::extract::FromRef;
use dropslot_core::clock::Clock;
use dropslot_core::config::{PriceList, Settings};
use dropslot_core::geo::Geocoder;
use dropslot_core::quote::capacity::Capacity;
use dropslot_store::{DynStore, Outbox, StoreError};
use tokio::sync::watch;

use crate::http::BodyLimits;
use crate::metrics::{HttpMetrics, Metrics};
use crate::ratelimit::Limiters;

#[derive(Clone)]
pub struct App(Arc<AppInner>);

pub struct AppInner {
    pub settings: Settings,
    pub store: DynStore,
    pub clock: Clock,
    pub geocoder: Geocoder,
    pub default_prices: Arc<PriceList>,
    pub metrics: Arc<Metrics>,
    /// Rate limits' buckets (this process's own).
    pub limiters: Arc<Limiters>,
    /// Rung when an asynchronous order request is queued (wakes this process's worker).
    pub requests_queued: Arc<tokio::sync::Notify>,
    /// The slots' capacity as quotes see it, per mode and first date (kept one second:
    /// an order's own transaction decides; `capacity::snapshot`).
    pub capacity: dropslot_store::cache::Ttl<(dropslot_store::Mode, jiff::civil::Date), Arc<Capacity>>,
    /// Counts the recipient messages whose outcome (or `uncertain` turn) this process recorded:
    /// what waits on the sender (the tests, the benchmark) watches it instead of polling.
    pub notifications_recorded: watch::Sender<u64>,
    /// The published days this process knows, and its one late placement at a time (§16).
    pub late: LateDays,
    /// Turns true when the service is shutting down (`/readyz` answers 503 from then on).
    stopping: watch::Receiver<bool>,
}

/// The published delivery days this process knows, and its one late placement at a time
/// (CONTRACT §16; used by `plans::late`).
#[derive(Default)]
pub struct LateDays {
    pub(crate) published: std::sync::Mutex<std::collections::HashSet<(String, jiff::civil::Date)>>,
    pub(crate) placing: tokio::sync::Mutex<()>,
}

impl Deref for App {
    type Target = AppInner;
    fn deref(&self) -> &AppInner {
        &self.0
    }
}

impl App {
    /// Opens and migrates the store named by the settings, with the outbox that renders the
    /// webhook events its changes cause, and proves it takes writes: a database the process
    /// cannot write (read-only file or directory, full disk) stops the start instead of
    /// answering every order with an error.
    pub async fn build(
        settings: Settings,
        metrics: Arc<Metrics>,
        outbox: Arc<dyn Outbox>,
        stopping: watch::Receiver<bool>,
    ) -> Result<App, StoreError> {
        let store = dropslot_store::open(&settings.database, &settings.postgres, outbox).await?;
        metrics.attach_store(store.stats());
        store.migrate().await?;
        store.ping().await.map_err(|e| StoreError::Invalid(format!("cannot write to the database: {e}")))?;
        let clock = settings.now.map_or_else(Clock::system, Clock::pinned);
        let default_prices = Arc::new(settings.pricing.clone());
        let limiters = Arc::new(Limiters::new(clock.clone(), settings.public_rate_limit, metrics.clone()));
        Ok(App(Arc::new(AppInner {
            settings,
            store,
            clock,
            geocoder: Geocoder::embedded(),
            default_prices,
            metrics,
            limiters,
            requests_queued: Arc::new(tokio::sync::Notify::new()),
            capacity: dropslot_store::cache::Ttl::new(std::time::Duration::from_secs(1)),
            notifications_recorded: watch::Sender::new(0),
            late: LateDays::default(),
            stopping,
        })))
    }

    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }
}

/// What the HTTP toolkit's body extractor needs of the state.
impl FromRef<App> for BodyLimits {
    fn from_ref(app: &App) -> BodyLimits {
        BodyLimits { size: app.settings.body_limit, read_timeout: app.settings.net.body_read_timeout }
    }
}

/// The per-route request metrics, when they are on.
impl FromRef<App> for HttpMetrics {
    fn from_ref(app: &App) -> HttpMetrics {
        HttpMetrics(app.settings.http_metrics.then(|| app.metrics.clone()))
    }
}

/// The public URLs' rate limits.
impl FromRef<App> for Arc<Limiters> {
    fn from_ref(app: &App) -> Arc<Limiters> {
        app.limiters.clone()
    }
}
