//! The slot picker a merchant embeds in its checkout page: `/embed/slots.js`, one script with
//! no dependencies, served from the binary. It calls `GET /slots` with the page's publishable
//! key (`auth::publishable`) and hands the choice to the page's form.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::app::App;

/// The script (docs/api.md, "The slot picker", says how to use it).
pub const SCRIPT: &str = include_str!("../../templates/embed/slots.js");

pub fn routes() -> axum::Router<App> {
    axum::Router::new().route("/embed/slots.js", axum::routing::get(script))
}

/// Loaded by `<script src>` from any merchant's page: cached for five minutes, so a new
/// version reaches pages soon after an upgrade.
async fn script() -> Response {
    let mut res = SCRIPT.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/javascript; charset=utf-8"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    res
}

#[cfg(test)]
mod tests {
    /// The bound: the picker stays small.
    #[test]
    fn the_script_is_under_15_kb() {
        assert!(super::SCRIPT.len() < 15 * 1024, "{} bytes", super::SCRIPT.len());
    }
}
