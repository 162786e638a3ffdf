//! dropslot: scheduled same-day parcel delivery. The service library: domain (quote, orders,
//! labels, geo), the HTTP edge and the storage backends; `main.rs` is only the CLI.

pub mod addresses;
pub mod app;
pub mod auth;
pub mod cli;
pub mod clock;
pub mod config;
pub mod dashboard;
pub mod error;
pub mod geo;
pub mod health;
pub mod http;
pub mod ids;
pub mod labels;
pub mod metrics;
pub mod money;
pub mod ops;
pub mod orders;
pub mod quote;
pub mod sandbox;
pub mod shipments;
pub mod store;
pub mod tracking;
pub mod webhooks;

use std::future::Future;
use std::sync::Arc;

pub use app::App;
pub use config::Settings;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::ids::ClientId;
use crate::store::StoreError;

/// A started service: the application, the demo client's token when the database was empty,
/// and the server task, which ends once the shutdown future has resolved and the server has
/// drained.
pub struct Running {
    pub app: App,
    /// On an empty database: the demo client and its test token (shown once).
    pub demo: Option<(ClientId, String)>,
    server: tokio::task::JoinHandle<()>,
    dispatcher: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Waits until the server and the webhook dispatcher have stopped and drained.
    pub async fn finished(self) {
        let _ = self.server.await;
        let _ = self.dispatcher.await;
    }
}

/// The composition root: the only place that starts the HTTP server and the background
/// workers (the webhook dispatcher), under one stop signal.
///
/// The port answers at once: 503 "starting" (with `Retry-After`) while the store is opened,
/// migrated and checked for writes; then the routes and the dispatcher. When `shutdown`
/// resolves, `/readyz` turns 503, the server stops accepting and in-flight requests get the
/// grace period; the dispatcher stops claiming and drains its in-flight deliveries.
pub async fn start(
    settings: Settings,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Running, StoreError> {
    let (stop, stopping) = watch::channel(false);
    let slot: http::server::RouterSlot = Arc::default();
    let server = tokio::spawn(http::server::serve(
        listener,
        settings.net,
        slot.clone(),
        stopping.clone(),
        settings.shutdown_grace,
    ));
    let signal = tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down: draining in-flight requests");
        let _ = stop.send(true);
    });
    let built = async {
        let app = App::build(settings, stopping.clone()).await?;
        let demo = app.bootstrap_demo().await?;
        let dispatcher = webhooks::dispatcher::Dispatcher::new(
            app.store.clone(),
            app.settings.webhooks.clone(),
            app.outbox.wake(),
            app.metrics.clone(),
            app.clock.clone(),
        )
        .map_err(StoreError::Invalid)?;
        Ok::<_, StoreError>((app, demo, dispatcher))
    };
    match built.await {
        Ok((app, demo, dispatcher)) => {
            let _ = slot.set(http::router(app.clone(), api_routes(), root_routes()));
            let dispatcher = tokio::spawn(dispatcher.run(stopping));
            Ok(Running { app, demo, server, dispatcher })
        }
        Err(e) => {
            signal.abort();
            server.abort();
            Err(e)
        }
    }
}

/// Every domain's routes under the API prefix.
fn api_routes() -> axum::Router<App> {
    axum::Router::new()
        .merge(orders::routes())
        .merge(shipments::routes())
        .merge(sandbox::routes())
        .merge(ops::routes())
        .merge(addresses::routes())
        .merge(webhooks::routes())
        .merge(auth::admin::routes())
}

/// Every domain's routes at the root: labels and icons, the tracking page, health, the
/// dashboard.
fn root_routes() -> axum::Router<App> {
    axum::Router::new()
        .merge(labels::routes())
        .merge(tracking::routes())
        .merge(health::routes())
        .merge(dashboard::routes())
}
