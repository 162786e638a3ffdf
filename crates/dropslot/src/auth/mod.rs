//! Bearer tokens (CONTRACT §1): random, shown once, stored as SHA-256, revocable; and the
//! `Caller` extractor that turns a request's token into its client, mode and price list.

pub mod admin;
pub mod publishable;
pub mod staff;
mod wire;

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use base64::Engine;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::app::App;
use crate::error::{Error, Result};
use dropslot_core::config::{Limits, PriceList};
use dropslot_core::ids::ClientId;
use dropslot_store::{NewToken, Principal, Scope, TokenHash, TokenKind};

/// A freshly minted token: the secret (shown once) and what is stored.
pub struct MintedToken {
    pub secret: String,
    pub stored: NewToken,
}

/// `ds_<kind>_` + 43 base64url characters (32 random bytes).
pub fn mint(client: ClientId, kind: TokenKind) -> MintedToken {
    let random = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(dropslot_core::ids::random_bytes::<32>());
    let secret = format!("ds_{}_{random}", kind.as_str());
    let prefix = secret[..secret.len() - random.len() + 8].to_string();
    let last4 = secret[secret.len() - 4..].to_string();
    MintedToken { stored: NewToken { client, kind, hash: hash(&secret), prefix, last4 }, secret }
}

pub fn hash(token: &str) -> TokenHash {
    TokenHash(Sha256::digest(token.as_bytes()).into())
}

/// A client's negotiated terms; absent fields fall back to the configuration.
#[derive(Debug, Default, Deserialize, serde::Serialize, PartialEq, utoipa::ToSchema)]
#[schema(example = json!({
    "pricing": {"min_price": "30.00", "payment_type": {"id": 2, "code": "card", "name": "Card"},
                "sizes": [{"code": "small", "name": "Small", "max_grams": 3000, "price": "7.50", "note": "Up to 3 kg"}]},
    "limits": {"order_drop_offs": 1, "order_parcels_per_drop_off": 10, "preview_drop_offs": 100, "preview_parcels_per_drop_off": 50},
    "rate_limits": {"preview": {"per_second": 20, "burst": 40}, "orders": {"per_second": 5, "burst": 10}, "other": {"per_second": 20, "burst": 40}}
}))]
#[serde(deny_unknown_fields)]
pub struct ClientSettings {
    #[serde(default)]
    pub pricing: Option<PriceList>,
    #[serde(default)]
    pub limits: Option<Limits>,
    #[serde(default)]
    pub rate_limits: Option<dropslot_core::config::RateLimits>,
}

impl ClientSettings {
    /// The rules the configuration's price list and limits follow, as a 422 at `pricing` or
    /// `limits`. Whatever passes here reads back through [`ClientSettings::load`].
    pub fn check(&self) -> Result<()> {
        if let Some(p) = &self.pricing {
            dropslot_core::config::validate_pricing(p).map_err(|m| Error::invalid("pricing", m))?;
        }
        if let Some(l) = &self.limits {
            dropslot_core::config::validate_limits(l).map_err(|m| Error::invalid("limits", m))?;
        }
        if let Some(r) = &self.rate_limits {
            dropslot_core::config::validate_rate_limits(r).map_err(|m| Error::invalid("rate_limits", m))?;
        }
        Ok(())
    }

    /// The stored form (`None` when nothing is negotiated).
    pub fn stored(&self) -> Result<Option<String>> {
        (self.pricing.is_some() || self.limits.is_some() || self.rate_limits.is_some())
            .then(|| serde_json::to_string(self))
            .transpose()
            .map_err(|e| Error::Internal(format!("client settings: {e}")))
    }

    /// Reads stored settings. Stored data that does not parse or no longer passes the rules
    /// is an error, never a default.
    pub fn load(json: &str) -> Result<ClientSettings, String> {
        let s: ClientSettings = serde_json::from_str(json).map_err(|e| e.to_string())?;
        s.check().map_err(|e| format!("{e:?}"))?;
        Ok(s)
    }
}

/// The authenticated caller of a client-API request: a test or live token (an ops or staff
/// token is refused here, before the body is read).
#[derive(Clone)]
pub struct Caller {
    pub principal: Principal,
    pub scope: Scope,
    pub prices: Arc<PriceList>,
    pub limits: Limits,
}

/// The token from `Authorization: Bearer <token>` (the scheme is case-insensitive, RFC 9110
/// §11.1). Missing or malformed → 401; the header sent twice → 400, never "the first one".
pub(crate) fn bearer(parts: &Parts) -> Result<&str> {
    let value = crate::http::single(&parts.headers, &AUTHORIZATION, "Authorization")?.ok_or(Error::Unauthorized)?;
    let value = value.to_str().map_err(|_| Error::Unauthorized)?;
    let (scheme, token) = value.split_once(' ').ok_or(Error::Unauthorized)?;
    let token = token.trim();
    if scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && token.len() <= 256 {
        Ok(token)
    } else {
        Err(Error::Unauthorized)
    }
}

/// Takes one request from the token's bucket for this route's class (before the body is
/// read): a 429 over it.
pub(crate) fn limit(
    parts: &Parts,
    app: &App,
    rates: &dropslot_core::config::RateLimits,
    token: &TokenHash,
) -> Result<()> {
    use crate::ratelimit::Class;
    let route = parts.extensions.get::<axum::extract::MatchedPath>().map_or("", axum::extract::MatchedPath::as_str);
    let class = Class::of_route(route);
    let bucket = match class {
        Class::Preview => rates.preview,
        Class::Orders => rates.orders,
        Class::Other | Class::Public => rates.other,
    };
    let allowed = app.limiters.check_token(class, bucket, token).map_err(|r| app.limiters.refuse(r))?;
    // The response, whatever it turns out to be, tells the client what is left.
    if let (Some(a), Some(slot)) = (allowed, parts.extensions.get::<crate::http::RateLimitHeaders>()) {
        slot.set(a.policy.clone(), a.limit_header());
    }
    Ok(())
}

/// A client's price list, limits and rate limits: its negotiated ones, else the configuration's.
pub fn client_terms(
    app: &App,
    principal: &Principal,
) -> Result<(Arc<PriceList>, Limits, dropslot_core::config::RateLimits)> {
    Ok(match &principal.settings_json {
        None => (app.default_prices.clone(), app.settings.limits, app.settings.rate_limits),
        Some(json) => {
            let s = ClientSettings::load(json)
                .map_err(|e| Error::Internal(format!("client {} settings: {e}", principal.client)))?;
            (
                s.pricing.map_or_else(|| app.default_prices.clone(), Arc::new),
                s.limits.unwrap_or(app.settings.limits),
                s.rate_limits.unwrap_or(app.settings.rate_limits),
            )
        }
    })
}

impl FromRequestParts<App> for Caller {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self> {
        publishable::refuse(parts, app).await?;
        if staff::principal(parts, app).await?.is_some() {
            return Err(Error::Forbidden("Operator and driver tokens cannot call the client API."));
        }
        let token = bearer(parts)?;
        let token_hash = hash(token);
        let principal = app.store.principal(&token_hash).await?.ok_or(Error::Unauthorized)?;
        if principal.kind == TokenKind::Ops {
            return Err(Error::Forbidden("Operations tokens cannot call the client API."));
        }
        let (prices, limits, rates) = client_terms(app, &principal)?;
        limit(parts, app, &rates, &token_hash)?;
        let scope = Scope { client: principal.client, mode: principal.kind.mode() };
        Ok(Caller { principal, scope, prices, limits })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn amount() -> impl Strategy<Value = serde_json::Value> {
        prop_oneof![
            (0u64..2_000_000_000).prop_map(|c| json!(format!("{}.{:02}", c / 100, c % 100))),
            "[0-9]{1,20}(\\.[0-9]{0,4})?".prop_map(|s| json!(s)),
            any::<u64>().prop_map(|n| json!(n)),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|f| json!(f)),
            (0u64..200_000_000).prop_map(|c| json!(c as f64 / 100.0)),
        ]
    }

    proptest! {
        /// Whatever `PUT /admin/clients/{id}/settings` accepts reads back, equal, on every
        /// later request: an accepted amount can never turn the client into 500s.
        #[test]
        fn accepted_settings_read_back(
            min in amount(),
            prices in prop::collection::vec(amount(), 1..4),
            grams in prop::collection::vec(any::<u32>(), 1..4),
            limit in any::<u64>(),
        ) {
            let sizes: Vec<_> = prices.iter().zip(&grams).enumerate().map(|(i, (p, g))| json!({
                "code": format!("s{i}"), "name": "S", "max_grams": g, "price": p, "note": "n"
            })).collect();
            let body = json!({
                "pricing": {"min_price": min, "payment_type": {"id": 1, "code": "c", "name": "n"}, "sizes": sizes},
                "limits": {"order_drop_offs": limit, "order_parcels_per_drop_off": 5, "preview_drop_offs": 100, "preview_parcels_per_drop_off": 50},
            });
            let bytes = serde_json::to_vec(&body).unwrap();
            let parsed = crate::http::json::parse_value(&bytes)
                .and_then(|v| crate::http::json::from_value::<ClientSettings>(&v))
                .and_then(|s| s.check().map(|()| s));
            if let Ok(accepted) = parsed {
                let stored = accepted.stored().unwrap().unwrap();
                prop_assert_eq!(ClientSettings::load(&stored), Ok(accepted));
            }
        }
    }

    #[test]
    fn settings_amounts_are_bounded_and_refused_at_their_path() {
        let body = json!({"pricing": {"min_price": "10000000000.03", "payment_type": {"id": 1, "code": "c", "name": "n"},
            "sizes": [{"code": "s", "name": "S", "max_grams": 1, "price": "90000000000000000", "note": ""}]}});
        let err = crate::http::json::from_value::<ClientSettings>(&body).unwrap_err();
        let Error::Validation(errors) = err else { panic!("{err:?}") };
        assert!(errors.contains("pricing.min_price"), "{errors:?}");
    }

    #[test]
    fn minted_tokens_are_long_prefixed_and_hashed() {
        let t = mint(ClientId(1), TokenKind::Live);
        assert!(t.secret.starts_with("ds_live_"));
        assert_eq!(t.secret.len(), 8 + 43);
        assert_eq!(t.stored.prefix.len(), 16);
        assert!(t.secret.starts_with(&t.stored.prefix));
        assert!(t.secret.ends_with(&t.stored.last4));
        assert_eq!(t.stored.hash, hash(&t.secret));
        assert_ne!(mint(ClientId(1), TokenKind::Live).secret, t.secret);
    }
}
