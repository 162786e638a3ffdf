//! auth

use crate::{
    NewPublishableKey, NewToken, Principal, PublishableKeyInfo, PublishablePrincipal, StoreResult, TokenHash, TokenInfo,
};
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
    async fn insert_publishable_key(&self, key: NewPublishableKey, now: Timestamp) -> StoreResult<()>;
    /// The unrevoked publishable key with this hash.
    async fn publishable_principal(&self, hash: &TokenHash) -> StoreResult<Option<PublishablePrincipal>>;
    async fn list_publishable_keys(&self, client: ClientId) -> StoreResult<Vec<PublishableKeyInfo>>;
    /// Revokes the one live publishable key with this display prefix; false if none matched.
    async fn revoke_publishable_key(&self, prefix: &str, now: Timestamp) -> StoreResult<bool>;
    /// Whether some unrevoked publishable key lists this (normalised) origin: a CORS
    /// preflight carries no key, so it is answered for the origins some key allows.
    async fn publishable_origin_listed(&self, origin: &str) -> StoreResult<bool>;
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: AuthStore> AuthStore for crate::trace::Traced<S> {
    async fn create_client(&self, name: &str, now: Timestamp) -> StoreResult<ClientId> {
        self.trace.hit("AuthStore::create_client");
        self.inner.create_client(name, now).await
    }

    async fn client_count(&self) -> StoreResult<i64> {
        self.trace.hit("AuthStore::client_count");
        self.inner.client_count().await
    }

    async fn client_exists(&self, id: ClientId) -> StoreResult<bool> {
        self.trace.hit("AuthStore::client_exists");
        self.inner.client_exists(id).await
    }

    async fn set_client_settings(&self, id: ClientId, settings_json: Option<String>) -> StoreResult<bool> {
        self.trace.hit("AuthStore::set_client_settings");
        self.inner.set_client_settings(id, settings_json).await
    }

    async fn insert_token(&self, token: NewToken, now: Timestamp) -> StoreResult<()> {
        self.trace.hit("AuthStore::insert_token");
        self.inner.insert_token(token, now).await
    }

    async fn principal(&self, hash: &TokenHash) -> StoreResult<Option<Principal>> {
        self.trace.hit("AuthStore::principal");
        self.inner.principal(hash).await
    }

    async fn list_tokens(&self, client: ClientId) -> StoreResult<Vec<TokenInfo>> {
        self.trace.hit("AuthStore::list_tokens");
        self.inner.list_tokens(client).await
    }

    async fn revoke_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        self.trace.hit("AuthStore::revoke_token");
        self.inner.revoke_token(prefix, now).await
    }

    async fn insert_publishable_key(&self, key: NewPublishableKey, now: Timestamp) -> StoreResult<()> {
        self.trace.hit("AuthStore::insert_publishable_key");
        self.inner.insert_publishable_key(key, now).await
    }

    async fn publishable_principal(&self, hash: &TokenHash) -> StoreResult<Option<PublishablePrincipal>> {
        self.trace.hit("AuthStore::publishable_principal");
        self.inner.publishable_principal(hash).await
    }

    async fn list_publishable_keys(&self, client: ClientId) -> StoreResult<Vec<PublishableKeyInfo>> {
        self.trace.hit("AuthStore::list_publishable_keys");
        self.inner.list_publishable_keys(client).await
    }

    async fn revoke_publishable_key(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        self.trace.hit("AuthStore::revoke_publishable_key");
        self.inner.revoke_publishable_key(prefix, now).await
    }

    async fn publishable_origin_listed(&self, origin: &str) -> StoreResult<bool> {
        self.trace.hit("AuthStore::publishable_origin_listed");
        self.inner.publishable_origin_listed(origin).await
    }
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
