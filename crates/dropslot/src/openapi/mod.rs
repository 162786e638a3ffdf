//! The OpenAPI 3.1 document of every endpoint (issue 12), generated from the code: the wire
//! types derive `ToSchema`, each handler carries `#[utoipa::path]`, and the lists below name
//! the handlers. Served at `/openapi.json`, rendered at `/docs`, committed as `docs/openapi.json`.
//!
//! To document a new operation: annotate its handler with `#[utoipa::path(...)]` (path
//! relative to the API prefix, a `tag`, an `operation_id`, its `security`, its own success
//! and error answers) and add the handler's path to [`Api`] (or [`Root`] for a root route).
//! The answers every operation shares (400/401/403/408/413/415/422/429/500/503, `X-Request-Id`)
//! are added by [`responses::complete`] from the operation's security and request body.

mod names;
mod reference;
mod responses;

use std::sync::LazyLock;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

use crate::app::App;

/// Every operation under the API prefix (`/scheduled-service/api/v1`).
#[derive(OpenApi)]
#[openapi(
    paths(
        crate::orders::preview::handle,
        crate::orders::create::handle,
        crate::orders::asynchronous::accept,
        crate::orders::asynchronous::status,
        crate::orders::read::list,
        crate::orders::read::one,
        crate::orders::read::shipment,
        crate::orders::read::by_custom_code,
        crate::orders::delete::handle,
        crate::addresses::list,
        crate::addresses::show,
        crate::addresses::remove,
        crate::shipments::states,
        crate::sandbox::handle,
        crate::ops::transition,
        crate::ops::scan,
        crate::fleet::create,
        crate::fleet::list,
        crate::fleet::show,
        crate::fleet::update,
        crate::fleet::remove,
        crate::fleet::reissue,
        crate::plans::create,
        crate::plans::list,
        crate::plans::show,
        crate::plans::remove,
        crate::plans::move_stop,
        crate::plans::optimize,
        crate::plans::publish,
        crate::plans::reassign,
        crate::plans::sheet,
        crate::reports::day,
        crate::driver::route,
        crate::driver::scan,
        crate::driver::transition,
        crate::driver::start,
        crate::driver::position,
        crate::driver::proofs::upload,
        crate::proofs::serve,
        crate::webhooks::routes::create,
        crate::webhooks::routes::list,
        crate::webhooks::routes::show,
        crate::webhooks::routes::update,
        crate::webhooks::routes::remove,
        crate::webhooks::routes::rotate,
        crate::webhooks::routes::test,
        crate::webhooks::routes::deliveries,
        crate::webhooks::routes::resend,
        crate::notifications::read_settings,
        crate::notifications::write_settings,
        crate::notifications::list,
        crate::attempts::read_settings,
        crate::attempts::write_settings,
        crate::attempts::reschedule,
        crate::attempts::send_back,
        crate::attempts::cancel,
        crate::auth::admin::create_client,
        crate::auth::admin::put_settings,
        crate::auth::admin::create_token,
        crate::auth::admin::list_tokens,
        crate::auth::admin::revoke_token,
        crate::auth::admin::create_operator_token,
        crate::auth::admin::list_operator_tokens,
        crate::capacity::list,
        crate::capacity::put,
        crate::capacity::slots,
    ),
    components(schemas(crate::error::ErrorEnvelope))
)]
struct Api;

/// Every documented operation at the root. The dashboard (`/dashboard`) and the dispatcher's
/// pages (`/ops`), HTML forms behind a session cookie, are left out: they are browser UIs, not
/// an API (docs/api.md).
#[derive(OpenApi)]
#[openapi(paths(
    crate::labels::serve,
    crate::labels::icon,
    crate::tracking::page::page,
    crate::tracking::change::show,
    crate::tracking::change::apply,
    crate::notifications::opt_out_form,
    crate::notifications::opt_out,
    crate::health::healthz,
    crate::health::readyz,
    crate::health::metrics,
    openapi_json,
    reference::page,
))]
struct Root;

const DESCRIPTION: &str = "Scheduled same-day parcel delivery: rate preview, synchronous and asynchronous orders, \
parcel deletion by custom code, client reads, saved pick-up addresses, webhooks, recipient notifications, sandbox scenarios, \
the operations API, the fleet (drivers), day plans and the admin API.\n\n\
Every JSON answer is the envelope `{\"status\",\"code\",\"message\",\"object\"}`; an error adds \
`errors` (field path → messages) and its HTTP status equals `code`. Every response carries \
`X-Request-Id`. Besides the answers listed per operation: an unknown path is a 404, a known path \
with another method a 405 (with `Allow`), a URI over 65,534 bytes a 414, oversized headers a 431, \
all in the error envelope. The decisions behind every answer: docs/api.md.";

/// The whole document, in a stable order (so its JSON text is the same on every run).
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = Root::openapi().nest(crate::http::API, Api::openapi());
    doc.info = utoipa::openapi::InfoBuilder::new()
        .title("dropslot")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(DESCRIPTION))
        .license(Some(utoipa::openapi::LicenseBuilder::new().name("Apache-2.0").identifier(Some("Apache-2.0")).build()))
        .build();
    let components = doc.components.get_or_insert_with(Default::default);
    for (name, description) in [
        ("client_token", "A `test` or `live` API token of a client: `Authorization: Bearer ds_test_…`."),
        ("ops_token", "An `ops` token (the courier's own staff): `Authorization: Bearer ds_ops_…`."),
        (
            "operator_token",
            "An `operator` token (the courier's dispatchers, bound to no client): `Authorization: Bearer ds_operator_…`.",
        ),
        (
            "driver_token",
            "A `driver` token (one driver's, from its sign-in link): `Authorization: Bearer ds_driver_…`.",
        ),
        (
            "publishable_key",
            "A client's publishable key, for its checkout page: `Authorization: Bearer pk_test_…`. It reaches `GET /slots` only, from a page on one of the origins listed with it (CORS).",
        ),
        ("admin_token", "The admin token of the configuration (`DROPSLOT_ADMIN_TOKEN`)."),
    ] {
        let scheme = HttpBuilder::new().scheme(HttpAuthScheme::Bearer).description(Some(description)).build();
        components.add_security_scheme(name, SecurityScheme::Http(scheme));
    }
    responses::complete(&mut doc);
    doc
}

/// The document's JSON text, built once, with the schema names a person would write
/// (`names.rs`).
pub static JSON: LazyLock<String> = LazyLock::new(|| {
    let mut doc = document();
    let renames = names::readable(&mut doc);
    // Serialising plain maps and strings cannot fail; if it ever did, the answer says so.
    serde_json::to_string_pretty(&doc)
        .map_or_else(|e| format!("{{\"error\":\"{e}\"}}"), |text| names::retarget(text + "\n", &renames))
});

/// `/openapi.json` and the `/docs` page, at the root, without a token.
pub fn routes() -> axum::Router<App> {
    use axum::routing::get;
    axum::Router::new().route("/openapi.json", get(openapi_json)).route("/docs", get(reference::page))
}

#[utoipa::path(get, path = "/openapi.json", tag = "Service", operation_id = "openapi",
    summary = "This OpenAPI 3.1 document",
    responses((status = 200, description = "The document (also committed as docs/openapi.json).", content_type = "application/json", body = Object)))]
async fn openapi_json() -> Response {
    let mut res = crate::error::json_response(200, JSON.as_str());
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    res.into_response()
}
