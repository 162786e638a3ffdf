use crate::auth::postgres::principal_row;
use crate::postgres::sql::Sql;
use crate::postgres::{PgStore, map_err};
use crate::{NewSession, Principal, SessionRecord, SessionStore, StaffKind, StoreResult, TokenHash};
use async_trait::async_trait;

#[async_trait]
impl SessionStore for PgStore {
    async fn create_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<Option<Principal>> {
        let c = self.conn().await?;
        // One statement: the session is written only for an unrevoked token, and the answer
        // is that token's principal.
        let row = c
            .query_opt(
                "WITH t AS (
                   SELECT t.id, t.client_id, t.kind, c.settings_json FROM tokens t JOIN clients c ON c.id = t.client_id
                   WHERE t.hash = $1 AND t.revoked_at IS NULL),
                 ins AS (
                   INSERT INTO dashboard_sessions (hash, token_id, csrf, created_ms, last_seen_ms)
                   SELECT $2, id, $3, $4, $4 FROM t RETURNING token_id)
                 SELECT t.client_id, t.kind, t.settings_json FROM t JOIN ins ON ins.token_id = t.id",
                &[&&token.0[..], &&session.hash.0[..], &session.csrf, &session.now_ms],
            )
            .await
            .map_err(map_err)?;
        row.as_ref().map(principal_row).transpose()
    }

    async fn session(
        &self,
        session: &TokenHash,
        idle_since_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<SessionRecord>> {
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT t.client_id, t.kind, c.settings_json, s.csrf, t.prefix, s.last_seen_ms
                 FROM dashboard_sessions s JOIN tokens t ON t.id = s.token_id JOIN clients c ON c.id = t.client_id
                 WHERE s.hash = $1 AND t.revoked_at IS NULL AND s.last_seen_ms >= $2",
                &[&&session.0[..], &idle_since_ms],
            )
            .await
            .map_err(map_err)?;
        let Some(r) = row else { return Ok(None) };
        let record = SessionRecord { principal: principal_row(&r)?, csrf: r.get(3), token_prefix: r.get(4) };
        let last_seen: i64 = r.get(5);
        if dropslot_core::sessions::needs_touch(last_seen, now_ms) {
            c.execute(
                "UPDATE dashboard_sessions SET last_seen_ms = $2 WHERE hash = $1 AND last_seen_ms < $2",
                &[&&session.0[..], &now_ms],
            )
            .await
            .map_err(map_err)?;
        }
        Ok(Some(record))
    }

    async fn create_ops_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<bool> {
        let c = self.conn().await?;
        let n = c
            .execute(
                "INSERT INTO ops_sessions (hash, staff_token_id, csrf, created_ms, last_seen_ms)
                 SELECT $1, id, $2, $3, $3 FROM staff_tokens
                 WHERE hash = $4 AND kind = $5 AND revoked_at IS NULL",
                &[&&session.hash.0[..], &session.csrf, &session.now_ms, &&token.0[..], &StaffKind::Operator.as_str()],
            )
            .await
            .map_err(map_err)?;
        Ok(n == 1)
    }

    async fn ops_session(
        &self,
        session: &TokenHash,
        idle_since_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<crate::OpsSessionRecord>> {
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT s.csrf, t.prefix, s.last_seen_ms FROM ops_sessions s JOIN staff_tokens t ON t.id = s.staff_token_id
                 WHERE s.hash = $1 AND t.kind = $3 AND t.revoked_at IS NULL AND s.last_seen_ms >= $2",
                &[&&session.0[..], &idle_since_ms, &StaffKind::Operator.as_str()],
            )
            .await
            .map_err(map_err)?;
        let Some(r) = row else { return Ok(None) };
        let record = crate::OpsSessionRecord { csrf: r.get(0), token_prefix: r.get(1) };
        let last_seen: i64 = r.get(2);
        if dropslot_core::sessions::needs_touch(last_seen, now_ms) {
            c.execute(
                "UPDATE ops_sessions SET last_seen_ms = $2 WHERE hash = $1 AND last_seen_ms < $2",
                &[&&session.0[..], &now_ms],
            )
            .await
            .map_err(map_err)?;
        }
        Ok(Some(record))
    }

    async fn end_ops_session(&self, session: &TokenHash) -> StoreResult<()> {
        let c = self.conn().await?;
        c.execute("DELETE FROM ops_sessions WHERE hash = $1", &[&&session.0[..]]).await.map_err(map_err)?;
        Ok(())
    }

    async fn end_session(&self, session: &TokenHash) -> StoreResult<()> {
        let c = self.conn().await?;
        c.execute("DELETE FROM dashboard_sessions WHERE hash = $1", &[&&session.0[..]]).await.map_err(map_err)?;
        Ok(())
    }
}
