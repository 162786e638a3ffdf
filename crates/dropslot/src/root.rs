//! The composition root: the only place that starts the HTTP server and the background
//! workers, and the only module that names every domain (their routes, the outbox renderer).

use std::future::Future;
use std::sync::Arc;

use dropslot_core::config::{CapacityMode, Settings};
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
    /// On an empty database with `[demo] fleet`: the operator's and the drivers' links.
    pub demo_fleet: Option<DemoFleet>,
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

/// What the first start on a new database made for the courier's side (`[demo] fleet`).
#[derive(Debug, Clone)]
pub struct DemoFleet {
    /// The demo client's live token: its orders are the ones the demo drivers deliver.
    pub live_token: String,
    /// `/ops/sign-in#token=…`: signs the dispatcher in.
    pub operator_link: String,
    /// Each demo driver: name, depot code and driver-app link.
    pub drivers: Vec<(String, String, String)>,
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
        let settings = settled(settings).await?;
        let metrics = Arc::new(metrics::Metrics::default());
        let outbox = Arc::new(webhooks::Renderer::new(&settings, metrics.clone()));
        let wake = outbox.wake();
        let notify_wake = outbox.notify_wake();
        let app = App::build(settings, metrics, outbox, stopping.clone()).await?;
        let (demo, demo_fleet) = bootstrap_demo(&app).await?;
        warn_of_empty_fleets(&app).await?;
        let dispatcher = webhooks::dispatcher::Dispatcher::new(
            app.store.clone(),
            app.settings.webhooks.clone(),
            wake,
            app.metrics.clone(),
            app.clock.clone(),
        )
        .map_err(StoreError::Invalid)?;
        let sender = notifications::sender::Sender::new(app.clone(), notify_wake).map_err(StoreError::Invalid)?;
        Ok::<_, StoreError>((app, (demo, demo_fleet), (dispatcher, sender)))
    };
    match built.await {
        Ok((app, (demo, demo_fleet), (dispatcher, sender))) => {
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
            Ok(Running { app, demo, demo_fleet, server, dispatcher, requests, notifications, metrics, metrics_addr })
        }
        Err(e) => {
            signal.abort();
            server.abort();
            Err(e)
        }
    }
}

/// `settings` with the install's defaults filled in from the database: the capacity mode of a
/// depot `[capacity]` leaves unset ([`CapacityMode::install_default`], recorded at the first
/// start that asks). Every store that serves, and its outbox, is built from settled settings;
/// settling opens (and migrates) the database once more for it.
pub async fn settled(mut settings: Settings) -> Result<Settings, StoreError> {
    let outbox = Arc::new(webhooks::Renderer::new(&settings, Arc::default()));
    let probe = dropslot_store::open(&settings.database, &settings.postgres, outbox).await?;
    probe.migrate().await?;
    let in_use = probe.client_count().await? > 0;
    let stored = probe.install_setting("capacity_mode", CapacityMode::install_default(in_use).as_str()).await?;
    let mode = CapacityMode::parse(&stored).ok_or_else(|| {
        StoreError::Corrupt(format!("install_settings.capacity_mode: {stored:?} is neither \"limits\" nor \"fleet\""))
    })?;
    settings.capacity.resolve(mode);
    Ok(settings)
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

/// On an empty database: a demo client and its test token (shown once); with `[demo] fleet`
/// also its live token, an operator token and two drivers of each depot that can be routed from, so a
/// newcomer can book, plan, publish and drive at once (README, "A tour").
async fn bootstrap_demo(app: &App) -> Result<(Option<(ClientId, String)>, Option<DemoFleet>), StoreError> {
    if app.store.client_count().await? > 0 {
        return Ok((None, None));
    }
    let now = app.clock.now();
    let client = app.store.create_client("Demo Merchant", now).await?;
    let minted = auth::mint(client, TokenKind::Test);
    app.store.insert_token(minted.stored, now).await?;
    let demo = Some((client, minted.secret));
    if !app.settings.demo.fleet {
        return Ok((demo, None));
    }
    let live = auth::mint(client, TokenKind::Live);
    app.store.insert_token(live.stored, now).await?;
    let operator = auth::staff::mint(dropslot_store::StaffKind::Operator);
    app.store.insert_operator_token(operator.stored, now).await?;
    let operator_link = format!("{}/ops/sign-in#token={}", app.settings.base_url, operator.secret);
    let mut drivers = Vec::new();
    for depot in app.settings.area.depots().iter().filter(|d| d.location.is_some()) {
        for n in 1..=2 {
            let name = format!("Demo driver {n} ({})", depot.code);
            let fields = dropslot_core::fleet::DriverFields {
                name: Some(name.clone()),
                phone: Some(format!("+1 416 555 01{n:02}")),
                depot: Some(depot.code.clone()),
                vehicle_name: Some("Demo van".into()),
                capacity_parcels: Some(80),
                capacity_kg: Some(600),
                shift_start: Some("12:00".into()),
                shift_end: Some("23:00".into()),
                weekdays: Some(["mon", "tue", "wed", "thu", "fri", "sat", "sun"].map(String::from).to_vec()),
            };
            let (_, link) = fleet::create_driver(&app.store, &app.settings, fields, now)
                .await
                .map_err(|e| StoreError::Invalid(format!("the demo driver {name}: {e}")))?;
            drivers.push((name, depot.code.clone(), link));
        }
    }
    Ok((demo, Some(DemoFleet { live_token: live.secret, operator_link, drivers })))
}

/// A depot on its fleet with no driver sells nothing: said at every start, with the way out.
async fn warn_of_empty_fleets(app: &App) -> Result<(), StoreError> {
    for depot in app.settings.area.depots().iter().filter(|d| app.settings.capacity.fleet(&d.code)) {
        if app.store.drivers(Some(&depot.code)).await?.is_empty() {
            tracing::warn!(
                depot = %depot.code,
                "this depot books on its fleet and has no driver: it sells no drop-off slot; add drivers \
                 (dropslot driver create, POST /ops/drivers) or set [capacity.depots] {} = \"limits\"",
                depot.code
            );
        }
    }
    Ok(())
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
        .merge(capacity::embed::routes())
}
