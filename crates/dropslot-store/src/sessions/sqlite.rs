use crate::auth::sqlite::principal_row;
use crate::sqlite::{SqliteStore, map_err};
use crate::{NewSession, Principal, SessionRecord, SessionStore, StaffKind, StoreResult, TokenHash};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

#[async_trait]
impl SessionStore for SqliteStore {
    async fn create_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<Option<Principal>> {
        let token = *token;
        self.writer
            .write(move |c| {
                let found = c
                    .prepare_cached(
                        "SELECT t.client_id, t.kind, c.settings_json, t.id FROM tokens t JOIN clients c ON c.id = t.client_id
                         WHERE t.hash = ?1 AND t.revoked_at IS NULL",
                    )
                    .and_then(|mut st| {
                        st.query_row([&token.0[..]], |r| Ok((r.get::<_, i64>(3)?, principal_row(r)?))).optional()
                    })
                    .map_err(map_err)?;
                let Some((token_id, principal)) = found else { return Ok(None) };
                c.prepare_cached(
                    "INSERT INTO dashboard_sessions (hash, token_id, csrf, created_ms, last_seen_ms)
                     VALUES (?1, ?2, ?3, ?4, ?4)",
                )
                .and_then(|mut st| {
                    st.execute(params![&session.hash.0[..], token_id, session.csrf, session.now_ms])
                })
                .map_err(map_err)?;
                Ok(Some(principal))
            })
            .await
    }

    async fn session(
        &self,
        session: &TokenHash,
        idle_since_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<SessionRecord>> {
        let found = self.read(|c| {
            c.prepare_cached(
                "SELECT t.client_id, t.kind, c.settings_json, s.csrf, t.prefix, s.last_seen_ms
                 FROM dashboard_sessions s JOIN tokens t ON t.id = s.token_id JOIN clients c ON c.id = t.client_id
                 WHERE s.hash = ?1 AND t.revoked_at IS NULL AND s.last_seen_ms >= ?2",
            )?
            .query_row(params![&session.0[..], idle_since_ms], |r| {
                Ok((
                    SessionRecord { principal: principal_row(r)?, csrf: r.get(3)?, token_prefix: r.get(4)? },
                    r.get::<_, i64>(5)?,
                ))
            })
            .optional()
        })?;
        let Some((record, last_seen)) = found else { return Ok(None) };
        if dropslot_core::sessions::needs_touch(last_seen, now_ms) {
            self.touch_session("dashboard_sessions", *session, now_ms).await?;
        }
        Ok(Some(record))
    }

    async fn create_ops_session(&self, token: &TokenHash, session: NewSession) -> StoreResult<bool> {
        let token = *token;
        self.writer
            .write(move |c| {
                let n = c
                    .prepare_cached(
                        "INSERT INTO ops_sessions (hash, staff_token_id, csrf, created_ms, last_seen_ms)
                         SELECT ?1, id, ?2, ?3, ?3 FROM staff_tokens
                         WHERE hash = ?4 AND kind = ?5 AND revoked_at IS NULL",
                    )
                    .and_then(|mut st| {
                        let operator = StaffKind::Operator.as_str();
                        st.execute(params![&session.hash.0[..], session.csrf, session.now_ms, &token.0[..], operator])
                    })
                    .map_err(map_err)?;
                Ok(n == 1)
            })
            .await
    }

    async fn ops_session(
        &self,
        session: &TokenHash,
        idle_since_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<crate::OpsSessionRecord>> {
        let found = self.read(|c| {
            c.prepare_cached(
                "SELECT s.csrf, t.prefix, s.last_seen_ms FROM ops_sessions s JOIN staff_tokens t ON t.id = s.staff_token_id
                 WHERE s.hash = ?1 AND t.kind = ?3 AND t.revoked_at IS NULL AND s.last_seen_ms >= ?2",
            )?
            .query_row(params![&session.0[..], idle_since_ms, StaffKind::Operator.as_str()], |r| {
                Ok((crate::OpsSessionRecord { csrf: r.get(0)?, token_prefix: r.get(1)? }, r.get::<_, i64>(2)?))
            })
            .optional()
        })?;
        let Some((record, last_seen)) = found else { return Ok(None) };
        if dropslot_core::sessions::needs_touch(last_seen, now_ms) {
            self.touch_session("ops_sessions", *session, now_ms).await?;
        }
        Ok(Some(record))
    }

    async fn end_ops_session(&self, session: &TokenHash) -> StoreResult<()> {
        let hash = *session;
        self.writer
            .write(move |c| {
                c.execute("DELETE FROM ops_sessions WHERE hash = ?1", [&hash.0[..]]).map_err(map_err)?;
                Ok(())
            })
            .await
    }

    async fn end_session(&self, session: &TokenHash) -> StoreResult<()> {
        let hash = *session;
        self.writer
            .write(move |c| {
                c.execute("DELETE FROM dashboard_sessions WHERE hash = ?1", [&hash.0[..]]).map_err(map_err)?;
                Ok(())
            })
            .await
    }
}
