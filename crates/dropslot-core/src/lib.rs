//! dropslot's pure core: the domain's types and rules as plain functions over plain data.
//! It names no HTTP type, no database driver and no store: Cargo refuses an upward import.

pub mod attempts;
pub mod clock;
pub mod config;
pub mod dispatch;
pub mod fleet;
pub mod geo;
pub mod ids;
pub mod json;
pub mod labels;
pub mod money;
pub mod notifications;
pub mod origin;
pub mod phone;
pub mod quote;
pub mod reports;
pub mod requests;
pub mod routing;
pub mod rule;
pub mod sessions;
pub mod shipments;
pub mod time;
pub mod webhooks;
