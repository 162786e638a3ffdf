//! Publishable keys (`pk_test_…`, `pk_live_…`): a client's key for its checkout page. A
//! publishable key is meant to be read by anyone who opens the page, so it reaches `GET /slots`
//! and nothing else, and only from the origins listed with it (CORS). Keys are stored apart
//! from the other tokens (`publishable_keys`); their text starts `pk_`, which tells
//! authentication which table to look in. Every other extractor refuses one with a 403 that
//! says what the key is for ([`refuse`]).

use axum::http::HeaderValue;
use axum::http::header::ORIGIN;
use axum::http::request::Parts;
use base64::Engine;

use crate::app::App;
use crate::error::{Error, Result};
use dropslot_core::ids::ClientId;
use dropslot_store::{Mode, NewPublishableKey};

/// What a publishable key is for, said wherever one is refused.
pub const ONLY_SLOTS: &str = "A publishable key (pk_…) reaches GET /slots only, for a checkout page's slot picker; call this endpoint from your server with a secret token.";

/// A freshly minted key: the key (shown once) and what is stored.
pub struct MintedKey {
    pub key: String,
    pub stored: NewPublishableKey,
}

/// `pk_<mode>_` + 43 base64url characters (32 random bytes); the prefix shown in listings is
/// the mode's and the first 8 random characters, as for the other tokens. `origins` are
/// already normalised (`dropslot_core::origin`).
pub fn mint(client: ClientId, mode: Mode, origins: Vec<String>) -> MintedKey {
    let random = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(dropslot_core::ids::random_bytes::<32>());
    let key = format!("pk_{}_{random}", mode.as_str());
    let prefix = key[..key.len() - random.len() + 8].to_string();
    let last4 = key[key.len() - 4..].to_string();
    MintedKey { stored: NewPublishableKey { client, mode, hash: super::hash(&key), prefix, last4, origins }, key }
}

/// Whether this text has a publishable key's form (a listed prefix included).
pub fn is_publishable(token: &str) -> bool {
    token.starts_with("pk_")
}

/// Refuses a publishable key on a route that takes another kind of token: a known key is a
/// 403 saying what it is for, an unknown one a 401. Anything else passes.
pub(crate) async fn refuse(parts: &Parts, app: &App) -> Result<()> {
    let token = super::bearer(parts)?;
    if !is_publishable(token) {
        return Ok(());
    }
    match app.store.publishable_principal(&super::hash(token)).await? {
        Some(_) => Err(Error::Forbidden(ONLY_SLOTS)),
        None => Err(Error::Unauthorized),
    }
}

/// The caller of `GET /slots`: a client's secret token from its server, or a publishable key
/// from a page on one of the key's origins.
pub struct SlotsCaller {
    pub mode: Mode,
    /// The page's origin, to allow in the response's CORS headers (a publishable key's call).
    pub cors: Option<HeaderValue>,
}

impl axum::extract::FromRequestParts<App> for SlotsCaller {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self> {
        const SECRET_IN_BROWSER: &str = "A secret token must never be sent from a web page: anyone can read it there and use your account. Revoke this token, and give the page a publishable key (pk_…) instead.";
        const NOT_LISTED: &str = "This page's origin is not listed for this publishable key: add it to the key's origins (create a key with it).";
        const NO_ORIGIN: &str =
            "A publishable key is accepted from a web page on one of its origins: the request has no Origin header.";
        let origin = crate::http::single(&parts.headers, &ORIGIN, "Origin")?.cloned();
        let token = super::bearer(parts)?;
        if !is_publishable(token) {
            let caller = super::Caller::from_request_parts(parts, app).await?;
            if origin.is_some() {
                return Err(Error::Forbidden(SECRET_IN_BROWSER));
            }
            return Ok(SlotsCaller { mode: caller.scope.mode, cors: None });
        }
        let hash = super::hash(token);
        let key = app.store.publishable_principal(&hash).await?.ok_or(Error::Unauthorized)?;
        let origin = origin.ok_or(Error::Forbidden(NO_ORIGIN))?;
        let listed = origin.to_str().is_ok_and(|o| dropslot_core::origin::allowed(o, &key.origins));
        if !listed {
            return Err(Error::Forbidden(NOT_LISTED));
        }
        super::limit(parts, app, &app.settings.rate_limits, &hash)?;
        Ok(SlotsCaller { mode: key.mode, cors: Some(origin) })
    }
}

/// The CORS headers of a response to a page allowed by a publishable key.
pub fn allow(res: &mut axum::response::Response, origin: HeaderValue) {
    use axum::http::header::{ACCESS_CONTROL_ALLOW_ORIGIN, VARY};
    let headers = res.headers_mut();
    headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.append(VARY, HeaderValue::from_static("Origin"));
}

/// The answer to a CORS preflight of `GET /slots`: the CORS headers when the page's origin is
/// listed by some unrevoked publishable key (a preflight carries no key; the request that
/// follows is checked against its own key's origins), none otherwise, so the browser stops.
pub async fn preflight(app: &App, parts: &Parts) -> Result<axum::response::Response> {
    use axum::http::StatusCode;
    use axum::http::header::{
        ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_MAX_AGE,
        ACCESS_CONTROL_REQUEST_METHOD, ALLOW, VARY,
    };
    use axum::response::IntoResponse;
    let mut res = StatusCode::NO_CONTENT.into_response();
    res.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD, OPTIONS"));
    res.headers_mut().insert(VARY, HeaderValue::from_static("Origin"));
    let origin = crate::http::single(&parts.headers, &ORIGIN, "Origin")?;
    let method = crate::http::single(&parts.headers, &ACCESS_CONTROL_REQUEST_METHOD, "Access-Control-Request-Method")?;
    let (Some(origin), Some(method)) = (origin, method) else { return Ok(res) };
    let Ok(normalised) = origin.to_str().map(dropslot_core::origin::normalise) else { return Ok(res) };
    let Ok(normalised) = normalised else { return Ok(res) };
    if method.as_bytes() != b"GET" || !app.store.publishable_origin_listed(&normalised).await? {
        return Ok(res);
    }
    let headers = res.headers_mut();
    headers.insert(axum::http::header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    headers.insert(ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET"));
    headers.insert(ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("authorization"));
    headers.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishable_keys_are_long_prefixed_and_told_apart() {
        let k = mint(ClientId(1), Mode::Live, vec!["https://shop.example".into()]);
        assert!(k.key.starts_with("pk_live_"));
        assert_eq!(k.key.len(), 8 + 43);
        assert_eq!(k.stored.prefix.len(), 16);
        assert!(k.key.starts_with(&k.stored.prefix) && k.key.ends_with(&k.stored.last4));
        assert_eq!(k.stored.hash, crate::auth::hash(&k.key));
        assert!(is_publishable(&k.key) && is_publishable(&k.stored.prefix));
        assert!(!is_publishable("ds_test_abc") && !super::super::staff::is_staff(&k.key));
    }
}
