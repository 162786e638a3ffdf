//! dropslot's service: the HTTP edge, authentication, the domains' handlers, the pages and
//! the CLI, over the pure core (`dropslot-core`) and the storage (`dropslot-store`).
//! `root.rs` is the composition root; `main.rs` is only the CLI.

pub mod addresses;
pub mod app;
pub mod attempts;
pub mod auth;
pub mod capacity;
pub mod cli;
pub mod dashboard;
pub mod dispatcher;
pub mod driver;
pub mod error;
pub mod eta;
pub mod fleet;
pub mod health;
pub mod http;
pub mod labels;
pub mod metrics;
pub mod notifications;
pub mod openapi;
pub mod ops;
pub mod orders;
pub mod plans;
pub mod proofs;
pub mod ratelimit;
pub mod reports;
pub mod roads;
pub mod root;
pub mod sandbox;
pub mod shipments;
pub mod solve;
pub mod tracking;
pub mod webhooks;

pub use app::App;
pub use dropslot_core::config::Settings;
pub use root::{DemoFleet, Running, settled, start};
