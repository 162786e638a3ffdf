//! sessions

use crate::{NewSession, OpsSessionRecord, Principal, SessionRecord, StoreResult, TokenHash};
use async_trait::async_trait;

#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Starts a session for the unrevoked token whose hash is `token`; `None` (and nothing
    /// written) when the token is unknown or revoked.
    async fn create_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<Option<Principal>>;
    /// The session, if its token is still unrevoked and it was last seen at or after
    /// `idle_since_ms`; a session seen more than a minute before `now_ms` is marked seen now.
    async fn session(&self, session: &TokenHash, idle_since_ms: i64, now_ms: i64)
    -> StoreResult<Option<SessionRecord>>;
    /// Ends a session (sign-out); ending one that does not exist is not an error.
    async fn end_session(&self, session: &TokenHash) -> StoreResult<()>;
    /// Starts a session for the unrevoked operator token whose hash is `token`; false (and
    /// nothing written) when the token is unknown, revoked, or not an operator's.
    async fn create_ops_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<bool>;
    /// The session, if its operator token is still unrevoked and it was last seen at or after
    /// `idle_since_ms`; a session seen more than a minute before `now_ms` is marked seen now.
    async fn ops_session(
        &self,
        session: &TokenHash,
        idle_since_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<OpsSessionRecord>>;
    /// Ends a dispatcher session (sign-out); ending one that does not exist is not an error.
    async fn end_ops_session(&self, session: &TokenHash) -> StoreResult<()>;
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: SessionStore> SessionStore for crate::trace::Traced<S> {
    async fn create_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<Option<Principal>> {
        self.trace.hit("SessionStore::create_session");
        self.inner.create_session(token, session).await
    }

    async fn session(
        &self,
        session: &TokenHash,
        idle_since_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<SessionRecord>> {
        self.trace.hit("SessionStore::session");
        self.inner.session(session, idle_since_ms, now_ms).await
    }

    async fn end_session(&self, session: &TokenHash) -> StoreResult<()> {
        self.trace.hit("SessionStore::end_session");
        self.inner.end_session(session).await
    }

    async fn create_ops_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<bool> {
        self.trace.hit("SessionStore::create_ops_session");
        self.inner.create_ops_session(token, session).await
    }

    async fn ops_session(
        &self,
        session: &TokenHash,
        idle_since_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<OpsSessionRecord>> {
        self.trace.hit("SessionStore::ops_session");
        self.inner.ops_session(session, idle_since_ms, now_ms).await
    }

    async fn end_ops_session(&self, session: &TokenHash) -> StoreResult<()> {
        self.trace.hit("SessionStore::end_ops_session");
        self.inner.end_ops_session(session).await
    }
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
