//! Tokens as the admin API shows them (CONTRACT §1, §12), with the schema the OpenAPI document
//! shows; the store's records are plain data.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TokenKind {
    Test,
    Live,
    Ops,
    /// A publishable key (`pk_test_…`, `pk_live_…`): `GET /slots` only, from its origins.
    Publishable,
}

impl From<dropslot_store::TokenKind> for TokenKind {
    fn from(kind: dropslot_store::TokenKind) -> Self {
        match kind {
            dropslot_store::TokenKind::Test => TokenKind::Test,
            dropslot_store::TokenKind::Live => TokenKind::Live,
            dropslot_store::TokenKind::Ops => TokenKind::Ops,
        }
    }
}

/// A token as listed: never the token itself.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TokenInfo {
    /// The kind prefix and the first 8 random characters: identifies the token.
    pub prefix: String,
    pub last4: String,
    pub kind: TokenKind,
    /// A publishable key's mode (`test` or `live`); absent for the other kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub mode: Option<&'static str>,
    /// A publishable key's origins; absent for the other kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub origins: Option<Vec<String>>,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

impl From<dropslot_store::TokenInfo> for TokenInfo {
    fn from(t: dropslot_store::TokenInfo) -> Self {
        TokenInfo {
            prefix: t.prefix,
            last4: t.last4,
            kind: t.kind.into(),
            mode: None,
            origins: None,
            created_at: t.created_at,
            revoked_at: t.revoked_at,
        }
    }
}

impl From<dropslot_store::PublishableKeyInfo> for TokenInfo {
    fn from(k: dropslot_store::PublishableKeyInfo) -> Self {
        TokenInfo {
            prefix: k.prefix,
            last4: k.last4,
            kind: TokenKind::Publishable,
            mode: Some(k.mode.as_str()),
            origins: Some(k.origins),
            created_at: k.created_at,
            revoked_at: k.revoked_at,
        }
    }
}

/// The kinds of staff token: an `operator` runs the fleet and the day's plans; a `driver`
/// token is bound to one driver (the driver app).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum StaffKind {
    Operator,
    Driver,
}

impl From<dropslot_store::StaffKind> for StaffKind {
    fn from(kind: dropslot_store::StaffKind) -> Self {
        match kind {
            dropslot_store::StaffKind::Operator => StaffKind::Operator,
            dropslot_store::StaffKind::Driver => StaffKind::Driver,
        }
    }
}

/// A staff token as listed: never the token itself.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct StaffTokenInfo {
    /// The kind prefix and the first 8 random characters: identifies the token.
    pub prefix: String,
    pub last4: String,
    pub kind: StaffKind,
    /// The driver a driver token is bound to.
    pub driver_id: Option<String>,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

impl From<dropslot_store::StaffTokenInfo> for StaffTokenInfo {
    fn from(t: dropslot_store::StaffTokenInfo) -> Self {
        StaffTokenInfo {
            prefix: t.prefix,
            last4: t.last4,
            kind: t.kind.into(),
            driver_id: t.driver_id,
            created_at: t.created_at,
            revoked_at: t.revoked_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire names are the stored ones.
    #[test]
    fn the_wire_names_are_the_stored_names() {
        use dropslot_store::TokenKind as Stored;
        for kind in [Stored::Test, Stored::Live, Stored::Ops] {
            assert_eq!(serde_json::to_value(TokenKind::from(kind)).unwrap(), kind.as_str());
        }
        for kind in [dropslot_store::StaffKind::Operator, dropslot_store::StaffKind::Driver] {
            assert_eq!(serde_json::to_value(StaffKind::from(kind)).unwrap(), kind.as_str());
        }
    }
}
