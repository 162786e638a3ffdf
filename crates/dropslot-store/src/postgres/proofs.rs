//! Proof-of-delivery files on `PostgreSQL`. An upload runs in a transaction holding the
//! driver's advisory lock, so two uploads at once cannot both pass the per-driver count; a
//! move locks the proof rows it attaches before the shipment (always in that order).

use tokio_postgres::Row;

use super::map_err;
use super::sql::Sql;
use crate::{NewProof, ProofFile, ProofInfo, ProofSaved, StoreError, StoreResult};
use dropslot_core::ids::ClientId;

fn get<T: for<'a> tokio_postgres::types::FromSql<'a>>(r: &Row, i: usize) -> Result<T, StoreError> {
    r.try_get(i).map_err(|e| StoreError::Corrupt(format!("proof: {e}")))
}

pub(super) async fn save(c: &impl Sql, p: &NewProof, max_unattached: i64) -> StoreResult<ProofSaved> {
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

pub(super) async fn proof(c: &impl Sql, token: &str) -> StoreResult<Option<ProofInfo>> {
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

pub(super) async fn file(c: &impl Sql, token: &str) -> StoreResult<Option<ProofFile>> {
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

pub(super) async fn purge(c: &impl Sql, before_ms: i64) -> StoreResult<u64> {
    c.execute("DELETE FROM proofs WHERE shipment_unique_id IS NULL AND created_ms < $1", &[&before_ms])
        .await
        .map_err(map_err)
}

/// Locks `tokens`' rows (in token order, so two moves cannot deadlock on them) and returns
/// the first that driver `driver_id` may not attach to `unique_id`, if any.
pub(super) async fn unavailable(
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
                crate::proofs::attachable(&owner, at.as_deref(), driver_id, unique_id)
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
pub(super) async fn attach(c: &impl Sql, tokens: &[String], unique_id: &str) -> StoreResult<()> {
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
