//! auth

use crate::{NewToken, Principal, StoreResult, TokenHash, TokenInfo};
use async_trait::async_trait;
use dropslot_core::ids::ClientId;
use jiff::Timestamp;

#[async_trait]
pub trait AuthStore: Send + Sync + 'static {
    async fn create_client(&self, name: &str, now: Timestamp) -> StoreResult<ClientId>;
    async fn client_count(&self) -> StoreResult<i64>;
    async fn client_exists(&self, id: ClientId) -> StoreResult<bool>;
    /// Replaces a client's negotiated terms (`None` = the configuration's); false if no client.
    async fn set_client_settings(&self, id: ClientId, settings_json: Option<String>) -> StoreResult<bool>;
    async fn insert_token(&self, token: NewToken, now: Timestamp) -> StoreResult<()>;
    async fn principal(&self, hash: &TokenHash) -> StoreResult<Option<Principal>>;
    async fn list_tokens(&self, client: ClientId) -> StoreResult<Vec<TokenInfo>>;
    /// Revokes the one live token with this display prefix; false if none matched.
    async fn revoke_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool>;
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
