//! The composition root: the only place that starts the HTTP server and the background
//! workers, and the only module that names every domain (their routes, the outbox renderer).

use std::future::Future;
use std::sync::Arc;

use dropslot_core::config::Settings;
use dropslot_core::ids::ClientId;
use dropslot_store::{StoreError, TokenKind};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::app::App;
use crate::{
    addresses, attempts, auth, capacity, dashboard, dispatcher, driver, fleet, health, http, labels, metrics,
    notifications, openapi, ops, orders, plans, proofs, reports, sandbox, shipments, tracking, webhooks,
};

/// A started service: the application, the demo client's token when the database was empty,
/// and the server task, which ends once the shutdown future has resolved and the server has
/// drained.
pub struct Running {
    pub app: App,
    /// On an empty database: the demo client and its test token (shown once).
    pub demo: Option<(ClientId, String)>,
    server: tokio::task::JoinHandle<()>,
    dispatcher: tokio::task::JoinHandle<()>,
    /// The asynchronous order worker.
    requests: tokio::task::JoinHandle<()>,
    /// The recipient notification sender (finishes its claimed batch before it stops).
    notifications: tokio::task::JoinHandle<()>,
    /// The `/metrics` listener's server and address, when it has its own (`metrics_listen`).
    metrics: Option<tokio::task::JoinHandle<()>>,
    pub metrics_addr: Option<std::net::SocketAddr>,
}

impl Running {
    /// Waits until the server and the webhook dispatcher have stopped and drained.
    pub async fn finished(self) {
        let _ = self.server.await;
        let _ = self.dispatcher.await;
        let _ = self.requests.await;
        let _ = self.notifications.await;
        if let Some(metrics) = self.metrics {
            let _ = metrics.await;
        }
    }
}

/// The composition root: the only place that starts the HTTP server and the background
/// workers (the webhook dispatcher, the asynchronous order worker), under one stop signal.
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
    // A lingering close reads up to twice the largest body any route takes (a proof photo).
    let net = dropslot_core::config::NetLimits {
        linger_bytes: settings.body_limit.max(crate::proofs::MAX_BYTES).saturating_mul(2),
        ..settings.net
    };
    let server =
        tokio::spawn(http::server::serve(listener, net, slot.clone(), stopping.clone(), settings.shutdown_grace));
    let signal = tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down: draining in-flight requests");
        let _ = stop.send(true);
    });
    // The metrics listener is bound before anything else starts: a taken port stops the start.
    let metrics_listener = match settings.metrics_listen {
        None => None,
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .map_err(|e| StoreError::Invalid(format!("cannot listen for /metrics on {addr}: {e}")))?,
        ),
    };
    let metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
    let built = async {
        let metrics = Arc::new(metrics::Metrics::default());
        let outbox = Arc::new(webhooks::Renderer::new(&settings, metrics.clone()));
        let wake = outbox.wake();
        let notify_wake = outbox.notify_wake();
        let app = App::build(settings, metrics, outbox, stopping.clone()).await?;
        let demo = bootstrap_demo(&app).await?;
        let dispatcher = webhooks::dispatcher::Dispatcher::new(
            app.store.clone(),
            app.settings.webhooks.clone(),
            wake,
            app.metrics.clone(),
            app.clock.clone(),
        )
        .map_err(StoreError::Invalid)?;
        let sender = notifications::sender::Sender::new(app.clone(), notify_wake).map_err(StoreError::Invalid)?;
        Ok::<_, StoreError>((app, demo, (dispatcher, sender)))
    };
    match built.await {
        Ok((app, demo, (dispatcher, sender))) => {
            let own_metrics = metrics_listener.is_some();
            // One request, one view of the store's read caches (`dropslot_store::cache::request_scope`).
            let routed = http::router(app.clone(), api_routes(), root_routes(!own_metrics));
            let one_epoch = tower::util::MapFuture::new(routed, dropslot_store::cache::request_scope);
            let _ = slot.set(http::service(app.settings.body_limit, one_epoch));
            let metrics = metrics_listener.map(|listener| {
                let metrics_slot: http::server::RouterSlot = Arc::default();
                let routed = http::router(app.clone(), axum::Router::new(), health::metrics_routes());
                let _ = metrics_slot.set(http::service(app.settings.body_limit, routed));
                tokio::spawn(http::server::serve(
                    listener,
                    app.settings.net,
                    metrics_slot,
                    stopping.clone(),
                    app.settings.shutdown_grace,
                ))
            });
            let requests = tokio::spawn(orders::worker::run(app.clone(), stopping.clone()));
            tokio::spawn(upkeep(app.store.clone(), app.clock.clone(), stopping.clone()));
            let notifications = tokio::spawn(sender.run(stopping.clone()));
            // Issue 45: the fleet depots' tentative plans improved between orders.
            tokio::spawn(plans::improve::run(app.clone(), stopping.clone()));
            // Issue 46: what becomes plannable for a published day goes into its routes.
            tokio::spawn(plans::late::run(app.clone(), stopping.clone()));
            let dispatcher = tokio::spawn(dispatcher.run(stopping));
            Ok(Running { app, demo, server, dispatcher, requests, notifications, metrics, metrics_addr })
        }
        Err(e) => {
            signal.abort();
            server.abort();
            Err(e)
        }
    }
}

/// How often the store's upkeep runs (`Store::upkeep`).
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Drivers' positions are kept this long (CONTRACT §13: 30 days), and purged (with the proof
/// images no delivery named within `proofs::UNATTACHED_KEPT_MS`) this often.
const POSITIONS_KEPT_MS: i64 = 30 * 86_400_000;
const PURGE_EVERY: std::time::Duration = std::time::Duration::from_secs(3_600);

/// The store's upkeep, every `UPKEEP_EVERY` until the service stops, and the purge of old
/// positions and unattached proofs every hour (the first at start); what it did is logged.
async fn upkeep(
    store: dropslot_store::DynStore,
    clock: dropslot_core::clock::Clock,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let mut every = tokio::time::interval(UPKEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut purged: Option<std::time::Instant> = None;
    while !*stopping.borrow() {
        tokio::select! {
            _ = every.tick() => {}
            _ = stopping.changed() => break,
        }
        if purged.is_none_or(|at| at.elapsed() >= PURGE_EVERY) {
            purged = Some(std::time::Instant::now());
            match store.purge_positions(clock.now().as_millisecond() - POSITIONS_KEPT_MS).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "drivers' positions older than 30 days deleted"),
                Err(e) => tracing::warn!(error = %e, "purging old positions failed; tried again later"),
            }
            match store.purge_proofs(clock.now().as_millisecond() - proofs::UNATTACHED_KEPT_MS).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "proof images no delivery named within 2 days deleted"),
                Err(e) => tracing::warn!(error = %e, "purging unattached proofs failed; tried again later"),
            }
        }
        match store.upkeep().await {
            Ok(done) => {
                for command in done {
                    tracing::info!(command, "database upkeep");
                }
            }
            Err(e) => tracing::warn!(error = %e, "database upkeep failed; tried again later"),
        }
    }
}

/// On an empty database: a demo client and its test token (shown once).
async fn bootstrap_demo(app: &App) -> Result<Option<(ClientId, String)>, StoreError> {
    if app.store.client_count().await? > 0 {
        return Ok(None);
    }
    let now = app.clock.now();
    let client = app.store.create_client("Demo Merchant", now).await?;
    let minted = auth::mint(client, TokenKind::Test);
    app.store.insert_token(minted.stored, now).await?;
    Ok(Some((client, minted.secret)))
}

/// Every domain's routes under the API prefix.
fn api_routes() -> axum::Router<App> {
    axum::Router::new()
        .merge(orders::routes())
        .merge(shipments::routes())
        .merge(sandbox::routes())
        .merge(ops::routes())
        .merge(fleet::routes())
        .merge(plans::routes())
        .merge(reports::routes())
        .merge(driver::routes())
        .merge(proofs::routes())
        .merge(addresses::routes())
        .merge(webhooks::routes())
        .merge(auth::admin::routes())
        .merge(capacity::routes())
        .merge(notifications::routes())
        .merge(attempts::routes())
}

/// Every domain's routes at the root: labels and icons, the tracking page, health (with
/// `/metrics` unless it has its own listener), the dashboard, the dispatcher's pages and the
/// driver app.
fn root_routes(with_metrics: bool) -> axum::Router<App> {
    axum::Router::new()
        .merge(labels::routes())
        .merge(tracking::routes())
        .merge(health::routes(with_metrics))
        .merge(openapi::routes())
        .merge(dashboard::routes())
        .merge(dispatcher::routes())
        .merge(driver::app::routes())
        .merge(notifications::public_routes())
}
