use crate::postgres::sql::Sql;
use crate::postgres::{BUMP_EPOCH, PgStore, map_err, parsed, utc_text};
use crate::{
    AuthStore, Mode, NewPublishableKey, NewToken, Principal, PublishableKeyInfo, PublishablePrincipal, StoreResult,
    TokenHash, TokenInfo, TokenKind,
};
use async_trait::async_trait;
use dropslot_core::ids::ClientId;
use jiff::Timestamp;

#[async_trait]
impl AuthStore for PgStore {
    async fn create_client(&self, name: &str, now: Timestamp) -> StoreResult<ClientId> {
        let c = self.conn().await?;
        let row = c
            .query_one("INSERT INTO clients (name, created_at) VALUES ($1, $2) RETURNING id", &[&name, &now])
            .await
            .map_err(map_err)?;
        Ok(ClientId(row.get(0)))
    }

    async fn client_count(&self) -> StoreResult<i64> {
        let c = self.conn().await?;
        Ok(c.query_one("SELECT count(*) FROM clients", &[]).await.map_err(map_err)?.get(0))
    }

    async fn client_exists(&self, id: ClientId) -> StoreResult<bool> {
        let c = self.conn().await?;
        let row =
            c.query_one("SELECT EXISTS (SELECT 1 FROM clients WHERE id = $1)", &[&id.0]).await.map_err(map_err)?;
        Ok(row.get(0))
    }

    async fn set_client_settings(&self, id: ClientId, settings_json: Option<String>) -> StoreResult<bool> {
        let c = self.conn().await?;
        let row = c
            .query_one(
                &format!(
                    "WITH changed AS (UPDATE clients SET settings_json = $2 WHERE id = $1 RETURNING 1),
                     bump AS ({BUMP_EPOCH} AND EXISTS (SELECT 1 FROM changed))
                     SELECT count(*) FROM changed"
                ),
                &[&id.0, &settings_json],
            )
            .await
            .map_err(map_err)?;
        self.changed();
        Ok(row.get::<_, i64>(0) == 1)
    }

    async fn insert_token(&self, t: NewToken, now: Timestamp) -> StoreResult<()> {
        let c = self.conn().await?;
        c.execute(
            "INSERT INTO tokens (client_id, kind, hash, prefix, last4, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&t.client.0, &t.kind.as_str(), &&t.hash.0[..], &t.prefix, &t.last4, &now],
        )
        .await
        .map_err(map_err)?;
        Ok(())
    }

    async fn principal(&self, hash: &TokenHash) -> StoreResult<Option<Principal>> {
        // The epoch is read before the token (a change committed after this read bumps it).
        let epoch = self.epoch().await?;
        if let Some(cached) = self.principals.get(&hash.0, epoch) {
            return Ok(Some(cached));
        }
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT t.client_id, t.kind, c.settings_json FROM tokens t JOIN clients c ON c.id = t.client_id
                 WHERE t.hash = $1 AND t.revoked_at IS NULL",
                &[&&hash.0[..]],
            )
            .await
            .map_err(map_err)?;
        let found = row.as_ref().map(principal_row).transpose()?;
        // Only a token that exists is cached: unknown ones cannot fill the cache.
        if let Some(principal) = &found {
            self.principals.put(hash.0, epoch, principal.clone());
        }
        Ok(found)
    }

    async fn list_tokens(&self, client: ClientId) -> StoreResult<Vec<TokenInfo>> {
        let c = self.conn().await?;
        c.query(
            "SELECT prefix, last4, kind, created_at, revoked_at FROM tokens WHERE client_id = $1 ORDER BY id",
            &[&client.0],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| {
            Ok(TokenInfo {
                prefix: r.get(0),
                last4: r.get(1),
                kind: parsed(r.get(2), "token kind", TokenKind::parse)?,
                created_at: utc_text(r.get(3)),
                revoked_at: r.get::<_, Option<Timestamp>>(4).map(utc_text),
            })
        })
        .collect()
    }

    async fn revoke_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        let c = self.conn().await?;
        let row = c
            .query_one(
                &format!(
                    "WITH revoked AS (UPDATE tokens SET revoked_at = $2 WHERE prefix = $1 AND revoked_at IS NULL RETURNING 1),
                     bump AS ({BUMP_EPOCH} AND EXISTS (SELECT 1 FROM revoked))
                     SELECT count(*) FROM revoked"
                ),
                &[&prefix, &now],
            )
            .await
            .map_err(map_err)?;
        self.changed();
        Ok(row.get::<_, i64>(0) == 1)
    }

    async fn insert_publishable_key(&self, k: NewPublishableKey, now: Timestamp) -> StoreResult<()> {
        let c = self.conn().await?;
        c.execute(
            "INSERT INTO publishable_keys (client_id, mode, hash, prefix, last4, origins, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[&k.client.0, &k.mode.as_str(), &&k.hash.0[..], &k.prefix, &k.last4, &k.origins.join("\n"), &now],
        )
        .await
        .map_err(map_err)?;
        Ok(())
    }

    async fn publishable_principal(&self, hash: &TokenHash) -> StoreResult<Option<PublishablePrincipal>> {
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT client_id, mode, origins FROM publishable_keys WHERE hash = $1 AND revoked_at IS NULL",
                &[&&hash.0[..]],
            )
            .await
            .map_err(map_err)?;
        row.map(|r| {
            Ok(PublishablePrincipal {
                client: ClientId(r.get(0)),
                mode: parsed(r.get(1), "key mode", Mode::parse)?,
                origins: lines(r.get(2)),
            })
        })
        .transpose()
    }

    async fn list_publishable_keys(&self, client: ClientId) -> StoreResult<Vec<PublishableKeyInfo>> {
        let c = self.conn().await?;
        c.query(
            "SELECT prefix, last4, mode, origins, created_at, revoked_at FROM publishable_keys
             WHERE client_id = $1 ORDER BY id",
            &[&client.0],
        )
        .await
        .map_err(map_err)?
        .iter()
        .map(|r| {
            Ok(PublishableKeyInfo {
                prefix: r.get(0),
                last4: r.get(1),
                mode: parsed(r.get(2), "key mode", Mode::parse)?,
                origins: lines(r.get(3)),
                created_at: utc_text(r.get(4)),
                revoked_at: r.get::<_, Option<Timestamp>>(5).map(utc_text),
            })
        })
        .collect()
    }

    async fn revoke_publishable_key(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        let c = self.conn().await?;
        let n = c
            .execute(
                "UPDATE publishable_keys SET revoked_at = $2 WHERE prefix = $1 AND revoked_at IS NULL",
                &[&prefix, &now],
            )
            .await
            .map_err(map_err)?;
        Ok(n == 1)
    }

    async fn publishable_origin_listed(&self, origin: &str) -> StoreResult<bool> {
        let c = self.conn().await?;
        let row = c
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM publishable_keys WHERE revoked_at IS NULL
                 AND $1 = ANY (string_to_array(origins, E'\\n')))",
                &[&origin],
            )
            .await
            .map_err(map_err)?;
        Ok(row.get(0))
    }
}

/// A stored list, one item a line.
fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

/// A principal from a row whose first three columns are a token's client, its kind and the
/// client's settings.
pub(crate) fn principal_row(r: &tokio_postgres::Row) -> StoreResult<Principal> {
    Ok(Principal {
        client: ClientId(r.get(0)),
        kind: parsed(r.get(1), "token kind", TokenKind::parse)?,
        settings_json: r.get(2),
    })
}
