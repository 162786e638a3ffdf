//! Proof-of-delivery files on `PostgreSQL`. An upload runs in a transaction holding the
//! driver's advisory lock, so two uploads at once cannot both pass the per-driver count; a
//! move locks the proof rows it attaches before the shipment (always in that order).

use crate::postgres::sql::Sql;
use crate::postgres::{PgStore, column, in_tx, map_err};
use crate::{DriverStore, NewProof, ProofFile, ProofInfo, ProofSaved, StoreError, StoreResult, StoredPlan};
use async_trait::async_trait;
use dropslot_core::ids::ClientId;
use jiff::civil::Date;
use std::sync::Arc;
use tokio_postgres::Row;

#[async_trait]
impl DriverStore for PgStore {
    async fn record_position(
        &self,
        driver_id: &str,
        key: &str,
        position: crate::Position,
        received_ms: i64,
    ) -> StoreResult<crate::PositionOutcome> {
        record_position(&self.conn().await?, driver_id, key, &position, received_ms).await
    }

    async fn latest_position(&self, driver_id: &str) -> StoreResult<Option<crate::Position>> {
        latest_position(&self.conn().await?, driver_id).await
    }

    async fn purge_positions(&self, before_ms: i64) -> StoreResult<u64> {
        purge_positions(&self.conn().await?, before_ms).await
    }

    async fn save_proof(&self, proof: crate::NewProof, max_unattached: i64) -> StoreResult<crate::ProofSaved> {
        Ok(in_tx!(self, |tx| save(tx, &proof, max_unattached).await?))
    }

    async fn proof(&self, token: &str) -> StoreResult<Option<crate::ProofInfo>> {
        proof(&self.conn().await?, token).await
    }

    async fn proof_file(&self, token: &str) -> StoreResult<Option<crate::ProofFile>> {
        file(&self.conn().await?, token).await
    }

    async fn purge_proofs(&self, before_ms: i64) -> StoreResult<u64> {
        purge(&self.conn().await?, before_ms).await
    }

    async fn driver_plans(&self, driver_id: &str, date: Date) -> StoreResult<Vec<Arc<StoredPlan>>> {
        crate::plans::postgres::plans_of_driver(&self.conn().await?, driver_id, date, &self.driver_plans).await
    }
}

fn get<T: for<'a> tokio_postgres::types::FromSql<'a>>(r: &Row, i: usize) -> Result<T, StoreError> {
    r.try_get(i).map_err(|e| StoreError::Corrupt(format!("proof: {e}")))
}

pub(crate) async fn save(c: &impl Sql, p: &NewProof, max_unattached: i64) -> StoreResult<ProofSaved> {
    c.execute("SELECT pg_advisory_xact_lock(hashtextextended('proofs:' || $1, 0))", &[&p.driver_id])
        .await
        .map_err(map_err)?;
    let earlier = c
        .query_opt("SELECT token, request_hash FROM proofs WHERE driver_id = $1 AND key = $2", &[&p.driver_id, &p.key])
        .await
        .map_err(map_err)?;
    if let Some(r) = earlier {
        let (token, hash): (String, String) = (get(&r, 0)?, get(&r, 1)?);
        return Ok(if hash == p.request_hash { ProofSaved::Replayed(token) } else { ProofSaved::KeyReused });
    }
    let unattached: i64 = c
        .query_one("SELECT count(*) FROM proofs WHERE driver_id = $1 AND shipment_unique_id IS NULL", &[&p.driver_id])
        .await
        .map_err(map_err)
        .and_then(|r| get(&r, 0))?;
    if unattached >= max_unattached {
        return Ok(ProofSaved::TooMany);
    }
    c.execute(
        "INSERT INTO proofs (token, driver_id, key, request_hash, content_type, bytes, size, created_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            &p.token,
            &p.driver_id,
            &p.key,
            &p.request_hash,
            &p.content_type,
            &p.bytes,
            &(p.bytes.len() as i64),
            &p.created_ms,
        ],
    )
    .await
    .map_err(map_err)?;
    Ok(ProofSaved::Saved)
}

fn info(r: &Row) -> StoreResult<ProofInfo> {
    Ok(ProofInfo {
        token: get(r, 0)?,
        driver_id: get(r, 1)?,
        content_type: get(r, 2)?,
        size: get(r, 3)?,
        created_ms: get(r, 4)?,
        shipment_unique_id: get(r, 5)?,
        client_id: get::<Option<i64>>(r, 6)?.map(ClientId),
    })
}

pub(crate) async fn proof(c: &impl Sql, token: &str) -> StoreResult<Option<ProofInfo>> {
    let row = c
        .query_opt(
            "SELECT token, driver_id, content_type, size, created_ms, shipment_unique_id, client_id
             FROM proofs WHERE token = $1",
            &[&token],
        )
        .await
        .map_err(map_err)?;
    row.as_ref().map(info).transpose()
}

pub(crate) async fn file(c: &impl Sql, token: &str) -> StoreResult<Option<ProofFile>> {
    let row = c
        .query_opt(
            "SELECT token, driver_id, content_type, size, created_ms, shipment_unique_id, client_id, bytes
             FROM proofs WHERE token = $1",
            &[&token],
        )
        .await
        .map_err(map_err)?;
    row.map(|r| Ok(ProofFile { info: info(&r)?, bytes: get(&r, 7)? })).transpose()
}

pub(crate) async fn purge(c: &impl Sql, before_ms: i64) -> StoreResult<u64> {
    c.execute("DELETE FROM proofs WHERE shipment_unique_id IS NULL AND created_ms < $1", &[&before_ms])
        .await
        .map_err(map_err)
}

/// Locks `tokens`' rows (in token order, so two moves cannot deadlock on them) and returns
/// the first that driver `driver_id` may not attach to `unique_id`, if any.
pub(crate) async fn unavailable(
    c: &impl Sql,
    tokens: &[String],
    driver_id: &str,
    unique_id: &str,
) -> StoreResult<Option<String>> {
    let mut sorted: Vec<&String> = tokens.iter().collect();
    sorted.sort();
    let mut refused: Vec<&String> = Vec::new();
    for token in sorted {
        let row = c
            .query_opt("SELECT driver_id, shipment_unique_id FROM proofs WHERE token = $1 FOR UPDATE", &[token])
            .await
            .map_err(map_err)?;
        let ok = match row {
            Some(r) => {
                let (owner, at): (String, Option<String>) = (get(&r, 0)?, get(&r, 1)?);
                crate::driver::attachable(&owner, at.as_deref(), driver_id, unique_id)
            }
            None => false,
        };
        if !ok {
            refused.push(token);
        }
    }
    // The first refused in the request's order, as the caller names it.
    Ok(tokens.iter().find(|t| refused.contains(t)).cloned())
}

/// Attaches `tokens` (locked by [`unavailable`]) to the moved shipment and its client.
pub(crate) async fn attach(c: &impl Sql, tokens: &[String], unique_id: &str) -> StoreResult<()> {
    for token in tokens {
        c.execute(
            "UPDATE proofs SET shipment_unique_id = $2,
                    client_id = (SELECT client_id FROM drop_off_shipments WHERE unique_id = $2)
             WHERE token = $1",
            &[token, &unique_id],
        )
        .await
        .map_err(map_err)?;
    }
    Ok(())
}

pub(crate) async fn record_position(
    c: &impl Sql,
    driver_id: &str,
    key: &str,
    p: &crate::Position,
    received_ms: i64,
) -> StoreResult<crate::PositionOutcome> {
    let near: bool = c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM driver_positions WHERE driver_id = $1 AND at_ms > $2 AND at_ms < $3 AND key <> $4)",
            &[&driver_id, &(p.at_ms - dropslot_core::fleet::POSITION_EVERY_MS), &(p.at_ms + dropslot_core::fleet::POSITION_EVERY_MS), &key],
        )
        .await
        .map_err(map_err)
        .and_then(|r| column(&r, 0))?;
    let seen: bool = c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM driver_positions WHERE driver_id = $1 AND key = $2)",
            &[&driver_id, &key],
        )
        .await
        .map_err(map_err)
        .and_then(|r| column(&r, 0))?;
    if seen {
        return Ok(crate::PositionOutcome::Replayed);
    }
    if near {
        return Ok(crate::PositionOutcome::TooSoon);
    }
    let n = c
        .execute(
            "INSERT INTO driver_positions (driver_id, key, lat, lng, accuracy_m, at_ms, received_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
            &[&driver_id, &key, &p.lat, &p.lng, &p.accuracy_m, &p.at_ms, &received_ms],
        )
        .await
        .map_err(map_err)?;
    Ok(if n == 1 { crate::PositionOutcome::Recorded } else { crate::PositionOutcome::Replayed })
}

pub(crate) async fn latest_position(c: &impl Sql, driver_id: &str) -> StoreResult<Option<crate::Position>> {
    let row = c
        .query_opt(
            "SELECT lat, lng, accuracy_m, at_ms FROM driver_positions WHERE driver_id = $1 ORDER BY at_ms DESC LIMIT 1",
            &[&driver_id],
        )
        .await
        .map_err(map_err)?;
    row.map(|r| {
        Ok(crate::Position {
            lat: column(&r, 0)?,
            lng: column(&r, 1)?,
            accuracy_m: column(&r, 2)?,
            at_ms: column(&r, 3)?,
        })
    })
    .transpose()
}

pub(crate) async fn purge_positions(c: &impl Sql, before_ms: i64) -> StoreResult<u64> {
    c.execute("DELETE FROM driver_positions WHERE received_ms < $1", &[&before_ms]).await.map_err(map_err)
}
