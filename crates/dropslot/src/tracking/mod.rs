//! The recipient's public pages: the tracking page `/track/{tracking_code}` (CONTRACT §8) and
//! the change page `/track/{tracking_code}/change/{token}` (§15), with their shared look.

pub(crate) mod change;
pub(crate) mod page;
pub mod token;
mod view;

pub(crate) use view::label;

pub fn routes() -> axum::Router<crate::app::App> {
    axum::Router::new().merge(page::routes()).merge(change::routes())
}
