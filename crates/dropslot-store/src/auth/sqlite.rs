use crate::sqlite::{SqliteStore, map_err, now_text, parsed};
use crate::{
    AuthStore, Mode, NewPublishableKey, NewToken, Principal, PublishableKeyInfo, PublishablePrincipal, StoreResult,
    TokenHash, TokenInfo, TokenKind,
};
use async_trait::async_trait;
use dropslot_core::ids::ClientId;
use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};

#[async_trait]
impl AuthStore for SqliteStore {
    async fn create_client(&self, name: &str, now: Timestamp) -> StoreResult<ClientId> {
        let name = name.to_string();
        self.writer
            .write(move |c| {
                c.execute("INSERT INTO clients (name, created_at) VALUES (?1, ?2)", params![name, now_text(now)])
                    .map_err(map_err)?;
                Ok(ClientId(c.last_insert_rowid()))
            })
            .await
    }

    async fn client_count(&self) -> StoreResult<i64> {
        self.read(|c| c.query_row("SELECT count(*) FROM clients", [], |r| r.get(0)))
    }

    async fn client_exists(&self, id: ClientId) -> StoreResult<bool> {
        self.read(|c| c.query_row("SELECT EXISTS (SELECT 1 FROM clients WHERE id = ?1)", [id.0], |r| r.get(0)))
    }

    async fn set_client_settings(&self, id: ClientId, settings_json: Option<String>) -> StoreResult<bool> {
        let changed = self
            .writer
            .write(move |c| {
                let n = c
                    .execute("UPDATE clients SET settings_json = ?2 WHERE id = ?1", params![id.0, settings_json])
                    .map_err(map_err)?;
                Ok(n == 1)
            })
            .await?;
        if changed {
            self.changed()?;
        }
        Ok(changed)
    }

    async fn insert_token(&self, t: NewToken, now: Timestamp) -> StoreResult<()> {
        self.writer
            .write(move |c| {
                c.execute(
                    "INSERT INTO tokens (client_id, kind, hash, prefix, last4, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![t.client.0, t.kind.as_str(), &t.hash.0[..], t.prefix, t.last4, now_text(now)],
                )
                .map_err(map_err)?;
                Ok(())
            })
            .await
    }

    async fn principal(&self, hash: &TokenHash) -> StoreResult<Option<Principal>> {
        // The epoch is read before the database (epoch.rs says why).
        let epoch = self.epoch.read();
        if let Some(cached) = epoch.and_then(|e| self.principals.get(&hash.0, e)) {
            return Ok(Some(cached));
        }
        let found = self.read(|c| {
            c.prepare_cached(
                "SELECT t.client_id, t.kind, c.settings_json FROM tokens t JOIN clients c ON c.id = t.client_id
                 WHERE t.hash = ?1 AND t.revoked_at IS NULL",
            )?
            .query_row([&hash.0[..]], principal_row)
            .optional()
        })?;
        // Only a token that exists is cached: unknown ones cannot fill the cache.
        if let (Some(epoch), Some(principal)) = (epoch, &found) {
            self.principals.put(hash.0, epoch, principal.clone());
        }
        Ok(found)
    }

    async fn list_tokens(&self, client: ClientId) -> StoreResult<Vec<TokenInfo>> {
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT prefix, last4, kind, created_at, revoked_at FROM tokens WHERE client_id = ?1 ORDER BY id",
            )?;
            st.query_map([client.0], |r| {
                Ok(TokenInfo {
                    prefix: r.get(0)?,
                    last4: r.get(1)?,
                    kind: parsed(r, 2, "token kind", TokenKind::parse)?,
                    created_at: r.get(3)?,
                    revoked_at: r.get(4)?,
                })
            })?
            .collect()
        })
    }

    async fn revoke_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        let prefix = prefix.to_string();
        let revoked = self
            .writer
            .write(move |c| {
                let n = c
                    .execute(
                        "UPDATE tokens SET revoked_at = ?2 WHERE prefix = ?1 AND revoked_at IS NULL",
                        params![prefix, now_text(now)],
                    )
                    .map_err(map_err)?;
                Ok(n == 1)
            })
            .await?;
        if revoked {
            // Every process's cached principal of this token is stale from here on.
            self.changed()?;
        }
        Ok(revoked)
    }

    async fn insert_publishable_key(&self, k: NewPublishableKey, now: Timestamp) -> StoreResult<()> {
        self.writer
            .write(move |c| {
                c.execute(
                    "INSERT INTO publishable_keys (client_id, mode, hash, prefix, last4, origins, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![
                        k.client.0,
                        k.mode.as_str(),
                        &k.hash.0[..],
                        k.prefix,
                        k.last4,
                        k.origins.join("\n"),
                        now_text(now)
                    ],
                )
                .map_err(map_err)?;
                Ok(())
            })
            .await
    }

    async fn publishable_principal(&self, hash: &TokenHash) -> StoreResult<Option<PublishablePrincipal>> {
        self.read(|c| {
            c.prepare_cached(
                "SELECT client_id, mode, origins FROM publishable_keys WHERE hash = ?1 AND revoked_at IS NULL",
            )?
            .query_row([&hash.0[..]], |r| {
                Ok(PublishablePrincipal {
                    client: ClientId(r.get(0)?),
                    mode: parsed(r, 1, "key mode", Mode::parse)?,
                    origins: lines(&r.get::<_, String>(2)?),
                })
            })
            .optional()
        })
    }

    async fn list_publishable_keys(&self, client: ClientId) -> StoreResult<Vec<PublishableKeyInfo>> {
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT prefix, last4, mode, origins, created_at, revoked_at FROM publishable_keys
                 WHERE client_id = ?1 ORDER BY id",
            )?;
            st.query_map([client.0], |r| {
                Ok(PublishableKeyInfo {
                    prefix: r.get(0)?,
                    last4: r.get(1)?,
                    mode: parsed(r, 2, "key mode", Mode::parse)?,
                    origins: lines(&r.get::<_, String>(3)?),
                    created_at: r.get(4)?,
                    revoked_at: r.get(5)?,
                })
            })?
            .collect()
        })
    }

    async fn revoke_publishable_key(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        let prefix = prefix.to_string();
        self.writer
            .write(move |c| {
                let n = c
                    .execute(
                        "UPDATE publishable_keys SET revoked_at = ?2 WHERE prefix = ?1 AND revoked_at IS NULL",
                        params![prefix, now_text(now)],
                    )
                    .map_err(map_err)?;
                Ok(n == 1)
            })
            .await
    }

    async fn publishable_origin_listed(&self, origin: &str) -> StoreResult<bool> {
        self.read(|c| {
            c.prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM publishable_keys WHERE revoked_at IS NULL
                 AND instr(char(10) || origins || char(10), char(10) || ?1 || char(10)) > 0)",
            )?
            .query_row([origin], |r| r.get(0))
        })
    }
}

/// A stored list, one item a line.
fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

/// A principal from a row whose first three columns are a token's client, its kind and the
/// client's settings.
pub(crate) fn principal_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Principal> {
    Ok(Principal {
        client: ClientId(r.get(0)?),
        kind: parsed(r, 1, "token kind", TokenKind::parse)?,
        settings_json: r.get(2)?,
    })
}
