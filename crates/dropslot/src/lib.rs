//! dropslot: scheduled same-day parcel delivery. The service library: domain (quote, orders,
//! labels, geo), the HTTP edge and the storage backends; `main.rs` is only the CLI.

pub mod addresses;
pub mod app;
pub mod auth;
pub mod cli;
pub mod clock;
pub mod config;
pub mod error;
pub mod geo;
pub mod http;
pub mod ids;
pub mod labels;
pub mod money;
pub mod orders;
pub mod quote;
pub mod store;

use std::future::Future;

pub use app::App;
pub use config::Settings;
use tokio::net::TcpListener;

/// Opens the store, migrates it and serves on `listener` until `shutdown` resolves.
pub async fn run(
    settings: Settings,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let app = App::build(settings).await?;
    app.serve(listener, shutdown).await?;
    Ok(())
}
