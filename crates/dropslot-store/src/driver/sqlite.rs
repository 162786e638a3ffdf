//! Proof-of-delivery files on `SQLite`: uploads through the writer (which orders every write,
//! so the per-driver count and the key check hold), reads from the pool.

use crate::sqlite::{SqliteStore, map_err};
use crate::{DriverStore, NewProof, ProofFile, ProofInfo, ProofSaved, StoreError, StoreResult, StoredPlan};
use async_trait::async_trait;
use dropslot_core::ids::ClientId;
use jiff::civil::Date;
use rusqlite::{Connection, OptionalExtension, params};
use std::sync::Arc;

#[async_trait]
impl DriverStore for SqliteStore {
    async fn record_position(
        &self,
        driver_id: &str,
        key: &str,
        position: crate::Position,
        received_ms: i64,
    ) -> StoreResult<crate::PositionOutcome> {
        let (driver_id, key) = (driver_id.to_string(), key.to_string());
        self.writer.write(move |c| record_position(c, &driver_id, &key, &position, received_ms)).await
    }

    async fn latest_position(&self, driver_id: &str) -> StoreResult<Option<crate::Position>> {
        self.read(|c| latest_position(c, driver_id))
    }

    async fn purge_positions(&self, before_ms: i64) -> StoreResult<u64> {
        self.writer.write(move |c| purge_positions(c, before_ms)).await
    }

    async fn save_proof(&self, proof: crate::NewProof, max_unattached: i64) -> StoreResult<crate::ProofSaved> {
        self.writer.write(move |c| save(c, &proof, max_unattached)).await
    }

    async fn proof(&self, token: &str) -> StoreResult<Option<crate::ProofInfo>> {
        self.read(|c| proof(c, token))
    }

    async fn proof_file(&self, token: &str) -> StoreResult<Option<crate::ProofFile>> {
        let token = token.to_string();
        self.read_blocking(move |c| file(c, &token)).await
    }

    async fn purge_proofs(&self, before_ms: i64) -> StoreResult<u64> {
        self.writer.write(move |c| purge(c, before_ms)).await
    }

    async fn driver_plans(&self, driver_id: &str, date: Date) -> StoreResult<Vec<Arc<StoredPlan>>> {
        let driver_id = driver_id.to_string();
        let cache = Arc::clone(&self.driver_plans);
        self.read_blocking(move |c| crate::plans::sqlite::plans_of_driver(c, &driver_id, date, &cache)).await?
    }
}

pub(crate) fn save(c: &Connection, p: &NewProof, max_unattached: i64) -> Result<ProofSaved, StoreError> {
    let earlier: Option<(String, String)> = c
        .prepare_cached("SELECT token, request_hash FROM proofs WHERE driver_id = ?1 AND key = ?2")
        .and_then(|mut s| s.query_row(params![p.driver_id, p.key], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(map_err)?;
    if let Some((token, hash)) = earlier {
        return Ok(if hash == p.request_hash { ProofSaved::Replayed(token) } else { ProofSaved::KeyReused });
    }
    let unattached: i64 = c
        .prepare_cached("SELECT count(*) FROM proofs WHERE driver_id = ?1 AND shipment_unique_id IS NULL")
        .and_then(|mut s| s.query_row(params![p.driver_id], |r| r.get(0)))
        .map_err(map_err)?;
    if unattached >= max_unattached {
        return Ok(ProofSaved::TooMany);
    }
    c.prepare_cached(
        "INSERT INTO proofs (token, driver_id, key, request_hash, content_type, bytes, size, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .and_then(|mut s| {
        s.execute(params![
            p.token,
            p.driver_id,
            p.key,
            p.request_hash,
            p.content_type,
            p.bytes,
            p.bytes.len() as i64,
            p.created_ms
        ])
    })
    .map_err(map_err)?;
    Ok(ProofSaved::Saved)
}

const INFO: &str = "token, driver_id, content_type, size, created_ms, shipment_unique_id, client_id";

fn info(r: &rusqlite::Row<'_>) -> rusqlite::Result<ProofInfo> {
    Ok(ProofInfo {
        token: r.get(0)?,
        driver_id: r.get(1)?,
        content_type: r.get(2)?,
        size: r.get(3)?,
        created_ms: r.get(4)?,
        shipment_unique_id: r.get(5)?,
        client_id: r.get::<_, Option<i64>>(6)?.map(ClientId),
    })
}

pub(crate) fn proof(c: &Connection, token: &str) -> rusqlite::Result<Option<ProofInfo>> {
    c.prepare_cached(&format!("SELECT {INFO} FROM proofs WHERE token = ?1"))?.query_row([token], info).optional()
}

pub(crate) fn file(c: &Connection, token: &str) -> rusqlite::Result<Option<ProofFile>> {
    c.prepare_cached(&format!("SELECT {INFO}, bytes FROM proofs WHERE token = ?1"))?
        .query_row([token], |r| Ok(ProofFile { info: info(r)?, bytes: r.get(7)? }))
        .optional()
}

pub(crate) fn purge(c: &Connection, before_ms: i64) -> Result<u64, StoreError> {
    let n = c
        .prepare_cached("DELETE FROM proofs WHERE shipment_unique_id IS NULL AND created_ms < ?1")
        .and_then(|mut s| s.execute(params![before_ms]))
        .map_err(map_err)?;
    Ok(n as u64)
}

/// The first of `tokens` that driver `driver_id` may not attach to `unique_id` (unknown,
/// another driver's, another shipment's), if any. Read in the move's write transaction.
pub(crate) fn unavailable(
    c: &Connection,
    tokens: &[String],
    driver_id: &str,
    unique_id: &str,
) -> Result<Option<String>, StoreError> {
    for token in tokens {
        let row: Option<(String, Option<String>)> = c
            .prepare_cached("SELECT driver_id, shipment_unique_id FROM proofs WHERE token = ?1")
            .and_then(|mut s| s.query_row([token], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(map_err)?;
        let ok = row.is_some_and(|(owner, at)| crate::driver::attachable(&owner, at.as_deref(), driver_id, unique_id));
        if !ok {
            return Ok(Some(token.clone()));
        }
    }
    Ok(None)
}

/// Attaches `tokens` to the moved shipment and its client.
pub(crate) fn attach(c: &Connection, tokens: &[String], unique_id: &str) -> Result<(), StoreError> {
    for token in tokens {
        c.prepare_cached(
            "UPDATE proofs SET shipment_unique_id = ?2,
                    client_id = (SELECT client_id FROM drop_off_shipments WHERE unique_id = ?2)
             WHERE token = ?1",
        )
        .and_then(|mut s| s.execute(params![token, unique_id]))
        .map_err(map_err)?;
    }
    Ok(())
}

pub(crate) fn record_position(
    c: &Connection,
    driver_id: &str,
    key: &str,
    p: &crate::Position,
    received_ms: i64,
) -> Result<crate::PositionOutcome, StoreError> {
    let seen: bool = c
        .prepare_cached("SELECT count(*) > 0 FROM driver_positions WHERE driver_id = ?1 AND key = ?2")
        .and_then(|mut s| s.query_row(params![driver_id, key], |r| r.get(0)))
        .map_err(map_err)?;
    if seen {
        return Ok(crate::PositionOutcome::Replayed);
    }
    let near: bool = c
        .prepare_cached("SELECT count(*) > 0 FROM driver_positions WHERE driver_id = ?1 AND at_ms > ?2 AND at_ms < ?3")
        .and_then(|mut s| {
            s.query_row(
                params![
                    driver_id,
                    p.at_ms - dropslot_core::fleet::POSITION_EVERY_MS,
                    p.at_ms + dropslot_core::fleet::POSITION_EVERY_MS
                ],
                |r| r.get(0),
            )
        })
        .map_err(map_err)?;
    if near {
        return Ok(crate::PositionOutcome::TooSoon);
    }
    c.prepare_cached(
        "INSERT INTO driver_positions (driver_id, key, lat, lng, accuracy_m, at_ms, received_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut s| s.execute(params![driver_id, key, p.lat, p.lng, p.accuracy_m, p.at_ms, received_ms]))
    .map_err(map_err)?;
    Ok(crate::PositionOutcome::Recorded)
}

pub(crate) fn latest_position(c: &Connection, driver_id: &str) -> rusqlite::Result<Option<crate::Position>> {
    c.prepare_cached(
        "SELECT lat, lng, accuracy_m, at_ms FROM driver_positions WHERE driver_id = ?1 ORDER BY at_ms DESC LIMIT 1",
    )?
    .query_row(params![driver_id], |r| {
        Ok(crate::Position { lat: r.get(0)?, lng: r.get(1)?, accuracy_m: r.get(2)?, at_ms: r.get(3)? })
    })
    .optional()
}

pub(crate) fn purge_positions(c: &Connection, before_ms: i64) -> Result<u64, StoreError> {
    let n = c
        .prepare_cached("DELETE FROM driver_positions WHERE received_ms < ?1")
        .and_then(|mut s| s.execute(params![before_ms]))
        .map_err(map_err)?;
    Ok(n as u64)
}
