//! The application: settings, store, clock and geocoder shared by every handler, and the
//! server loop with graceful shutdown.

use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::TcpListener;

use crate::clock::Clock;
use crate::config::{PriceList, Settings};
use crate::geo::Geocoder;
use crate::ids::ClientId;
use crate::store::{DynStore, StoreError, TokenKind};

#[derive(Clone)]
pub struct App(Arc<AppInner>);

pub struct AppInner {
    pub settings: Settings,
    pub store: DynStore,
    pub clock: Clock,
    pub geocoder: Geocoder,
    pub default_prices: Arc<PriceList>,
    ready: AtomicBool,
}

impl Deref for App {
    type Target = AppInner;
    fn deref(&self) -> &AppInner {
        &self.0
    }
}

impl App {
    /// Opens and migrates the store named by the settings.
    pub async fn build(settings: Settings) -> Result<App, StoreError> {
        let store = crate::store::open(&settings.database).await?;
        store.migrate().await?;
        let clock = settings.now.map_or_else(Clock::system, Clock::pinned);
        Ok(App::with_store(settings, store, clock))
    }

    pub fn with_store(settings: Settings, store: DynStore, clock: Clock) -> App {
        let default_prices = Arc::new(settings.pricing.clone());
        App(Arc::new(AppInner {
            settings,
            store,
            clock,
            geocoder: Geocoder::embedded(),
            default_prices,
            ready: AtomicBool::new(true),
        }))
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
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

    /// Serves until `shutdown` resolves, then stops accepting, reports not-ready and lets
    /// in-flight requests finish for at most the configured grace period.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let grace = self.settings.shutdown_grace;
        let drained = Arc::new(tokio::sync::Notify::new());
        let signal = {
            let (app, drained) = (self.clone(), drained.clone());
            async move {
                shutdown.await;
                app.ready.store(false, Ordering::Relaxed);
                tracing::info!("shutting down: draining in-flight requests");
                drained.notify_one();
            }
        };
        let router = crate::http::router(self);
        let server = axum::serve(listener, router).with_graceful_shutdown(signal);
        tokio::select! {
            r = server => r,
            () = async { drained.notified().await; tokio::time::sleep(grace).await } => {
                tracing::warn!("grace period over; closing remaining connections");
                Ok(())
            }
        }
    }
}
