//! The application: settings, store, clock and geocoder shared by every handler, and the
//! server loop with graceful shutdown.

use std::ops::Deref;
use std::sync::Arc;

use tokio::sync::watch;

use crate::clock::Clock;
use crate::config::{PriceList, Settings};
use crate::geo::Geocoder;
use crate::ids::ClientId;
use crate::metrics::Metrics;
use crate::store::{DynStore, StoreError, TokenKind};
use crate::webhooks::Renderer;

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
    pub limiters: crate::ratelimit::Limiters,
    /// Renders webhook events into the store's transactions; wakes the dispatcher.
    pub outbox: Arc<Renderer>,
    /// Rung when an asynchronous order request is queued (wakes this process's worker).
    pub requests_queued: Arc<tokio::sync::Notify>,
    /// Turns true when the service is shutting down (`/readyz` answers 503 from then on).
    stopping: watch::Receiver<bool>,
}

impl Deref for App {
    type Target = AppInner;
    fn deref(&self) -> &AppInner {
        &self.0
    }
}

impl App {
    /// Opens and migrates the store named by the settings, and proves it takes writes: a
    /// database the process cannot write (read-only file or directory, full disk) stops the
    /// start instead of answering every order with an error.
    pub async fn build(settings: Settings, stopping: watch::Receiver<bool>) -> Result<App, StoreError> {
        let metrics = Arc::new(Metrics::default());
        let outbox = Arc::new(Renderer::new(&settings, metrics.clone()));
        let store = crate::store::open(&settings.database, &settings.postgres, outbox.clone()).await?;
        metrics.attach_store(store.stats());
        store.migrate().await?;
        store.ping().await.map_err(|e| StoreError::Invalid(format!("cannot write to the database: {e}")))?;
        let clock = settings.now.map_or_else(Clock::system, Clock::pinned);
        let default_prices = Arc::new(settings.pricing.clone());
        let limiters = crate::ratelimit::Limiters::new(clock.clone(), settings.public_rate_limit);
        Ok(App(Arc::new(AppInner {
            settings,
            store,
            clock,
            geocoder: Geocoder::embedded(),
            default_prices,
            metrics,
            limiters,
            outbox,
            requests_queued: Arc::new(tokio::sync::Notify::new()),
            stopping,
        })))
    }

    /// A rate-limit refusal as the 429 error, counted in `/metrics`.
    pub fn refuse(&self, r: crate::ratelimit::Refused) -> crate::error::Error {
        self.metrics.rate_limited.get_or_create(&crate::metrics::ClassLabels { class: r.class.name() }).inc();
        crate::error::Error::RateLimited {
            retry_after: r.retry_after_seconds(),
            policy: r.policy_header(),
            limit: r.limit_header(),
        }
    }

    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// On an empty database: a demo client and its test token (shown once).
    pub async fn bootstrap_demo(&self) -> Result<Option<(ClientId, String)>, StoreError> {
        if self.store.client_count().await? > 0 {
            return Ok(None);
        }
        let now = self.clock.now();
        let client = self.store.create_client("Demo Merchant", now).await?;
        let minted = crate::auth::mint(client, TokenKind::Test);
        self.store.insert_token(minted.stored, now).await?;
        Ok(Some((client, minted.secret)))
    }
}
