//! Staff tokens (CONTRACT §12): `operator` (bound to no client: the fleet and the day's plans)
//! and `driver` (bound to one driver: the driver app). They are stored apart from client
//! tokens (`staff_tokens`); their text starts `ds_operator_` or `ds_driver_`, which tells
//! authentication which table to look in. `OperatorCaller` admits operator tokens only.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use base64::Engine;

use crate::app::App;
use crate::error::{Error, Result};
use dropslot_store::{NewStaffToken, StaffKind, StaffPrincipal};

/// A freshly minted staff token: the secret (shown once) and what is stored.
pub struct MintedStaffToken {
    pub secret: String,
    pub stored: NewStaffToken,
}

/// `ds_<kind>_` + 43 base64url characters (32 random bytes); the prefix shown in listings is
/// the kind's and the first 8 random characters, as for client tokens.
pub fn mint(kind: StaffKind) -> MintedStaffToken {
    let random = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(dropslot_core::ids::random_bytes::<32>());
    let secret = format!("ds_{}_{random}", kind.as_str());
    let prefix = secret[..secret.len() - random.len() + 8].to_string();
    let last4 = secret[secret.len() - 4..].to_string();
    MintedStaffToken { stored: NewStaffToken { hash: super::hash(&secret), prefix, last4 }, secret }
}

/// Whether this text has a staff token's form (a listed prefix included): such a token is
/// looked up among staff tokens only, every other among client tokens only.
pub fn is_staff(token: &str) -> bool {
    [StaffKind::Operator, StaffKind::Driver]
        .iter()
        .any(|k| token.strip_prefix("ds_").and_then(|t| t.strip_prefix(k.as_str())).is_some_and(|t| t.starts_with('_')))
}

/// The staff principal of a request's bearer token (401 when it is unknown or revoked);
/// `None` when the token is not a staff token's form.
pub(crate) async fn principal(parts: &Parts, app: &App) -> Result<Option<StaffPrincipal>> {
    let token = super::bearer(parts)?;
    if !is_staff(token) {
        return Ok(None);
    }
    app.store.staff_principal(&super::hash(token)).await?.ok_or(Error::Unauthorized).map(Some)
}

/// A caller holding an `operator` token: the fleet (`/ops/drivers`) and the day's plans.
/// Every client token (`test`, `live`, `ops`) and a driver token is a 403; an unknown or
/// revoked token a 401.
pub struct OperatorCaller;

impl FromRequestParts<App> for OperatorCaller {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self> {
        const REFUSED: &str = "This endpoint takes operator tokens only (client and driver tokens cannot call it).";
        super::publishable::refuse(parts, app).await?;
        match principal(parts, app).await? {
            Some(p) if p.kind == StaffKind::Operator => {
                let token = super::hash(super::bearer(parts)?);
                super::limit(parts, app, &app.settings.rate_limits, &token)?;
                Ok(OperatorCaller)
            }
            Some(_) => Err(Error::Forbidden(REFUSED)),
            None => {
                // A client token: known → 403, unknown → 401.
                let token = super::hash(super::bearer(parts)?);
                app.store.principal(&token).await?.ok_or(Error::Unauthorized)?;
                Err(Error::Forbidden(REFUSED))
            }
        }
    }
}

/// A caller holding a `driver` token: the driver app's API (CONTRACT §13), for this driver's
/// own published routes only. Every other token is a 403 (client and operator tokens), an
/// unknown or revoked one a 401.
pub struct DriverCaller {
    pub driver_id: String,
}

impl FromRequestParts<App> for DriverCaller {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self> {
        const REFUSED: &str = "The driver API takes driver tokens only (sign in from the link your dispatcher sent).";
        super::publishable::refuse(parts, app).await?;
        match principal(parts, app).await? {
            Some(StaffPrincipal { kind: StaffKind::Driver, driver_id: Some(driver_id) }) => {
                let token = super::hash(super::bearer(parts)?);
                super::limit(parts, app, &app.settings.rate_limits, &token)?;
                Ok(DriverCaller { driver_id })
            }
            Some(_) => Err(Error::Forbidden(REFUSED)),
            None => {
                let token = super::hash(super::bearer(parts)?);
                app.store.principal(&token).await?.ok_or(Error::Unauthorized)?;
                Err(Error::Forbidden(REFUSED))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staff_tokens_are_long_prefixed_and_told_apart() {
        let t = mint(StaffKind::Operator);
        assert!(t.secret.starts_with("ds_operator_"));
        assert_eq!(t.secret.len(), 12 + 43);
        assert_eq!(t.stored.prefix.len(), 20);
        assert!(t.secret.starts_with(&t.stored.prefix) && t.secret.ends_with(&t.stored.last4));
        assert_eq!(t.stored.hash, crate::auth::hash(&t.secret));
        assert!(is_staff(&t.secret) && is_staff(&mint(StaffKind::Driver).secret));
        assert!(is_staff(&t.stored.prefix));
        for client in ["ds_test_abc", "ds_live_abc", "ds_ops_abc", "ds_operatorx_abc", "ds_driverabc", "operator"] {
            assert!(!is_staff(client), "{client}");
        }
    }
}
