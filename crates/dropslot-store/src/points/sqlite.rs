//! Address points on `SQLite` (CONTRACT §11): a batch inserted by the writer in one job, and
//! the candidates of many addresses read on one pooled connection.

use crate::sqlite::{SqliteStore, map_err};
use crate::{PointStore, StoreResult};
use async_trait::async_trait;
use dropslot_core::geo::distance::LatLng;
use dropslot_core::geo::points::{AddressPoint, Candidate, PointQuery};
use rusqlite::{Connection, params};

#[async_trait]
impl PointStore for SqliteStore {
    async fn import_address_points(&self, batch: Vec<AddressPoint>) -> StoreResult<u64> {
        let added = self.writer.write(move |c| insert(c, &batch).map_err(map_err)).await?;
        self.changed()?;
        Ok(added)
    }

    async fn address_points_present(&self) -> StoreResult<bool> {
        // The epoch is read before the table: an import committed after this read moves it.
        let epoch = self.epoch.read();
        if let Some(present) = epoch.and_then(|e| self.points_present.get(&(), e)) {
            return Ok(present);
        }
        let present = self.read(any)?;
        if let Some(epoch) = epoch {
            self.points_present.put((), epoch, present);
        }
        Ok(present)
    }

    async fn address_point_candidates(&self, queries: &[PointQuery]) -> StoreResult<Vec<Vec<Candidate>>> {
        let epoch = self.epoch.read();
        crate::cache::points_through(&self.point_lookups, epoch, queries, |missing| async move {
            self.read(|c| candidates(c, &missing))
        })
        .await
    }
}

/// Inserts the batch; the unique index skips the points already stored. The new rows.
pub(crate) fn insert(c: &Connection, points: &[AddressPoint]) -> rusqlite::Result<u64> {
    let mut st = c.prepare_cached(
        "INSERT INTO address_points (number, street, unit, city, postal_prefix, lat, lng)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (street, number, unit, postal_prefix, city) DO NOTHING",
    )?;
    let mut added = 0;
    for p in points {
        added += st.execute(params![p.number, p.street, p.unit, p.city, p.postal_prefix, p.at.lat(), p.at.lng()])?;
    }
    Ok(added as u64)
}

/// Whether the table holds any point (one step of its index).
pub(crate) fn any(c: &Connection) -> rusqlite::Result<bool> {
    c.prepare_cached("SELECT EXISTS (SELECT 1 FROM address_points)")?.query_row([], |r| r.get(0))
}

/// Every query's candidates. Several go in one read transaction: each statement outside a
/// transaction takes and releases the database's shared locks itself (`fcntl` calls), which
/// profiled at most of a lookup's cost. One goes alone: `BEGIN` and `COMMIT` would only add
/// two statements to the same locking.
pub(crate) fn candidates(c: &Connection, queries: &[PointQuery]) -> rusqlite::Result<Vec<Vec<Candidate>>> {
    if queries.len() <= 1 {
        return lookups(c, queries);
    }
    let tx = c.unchecked_transaction()?;
    let found = lookups(&tx, queries)?;
    tx.commit()?;
    Ok(found)
}

fn lookups(c: &Connection, queries: &[PointQuery]) -> rusqlite::Result<Vec<Vec<Candidate>>> {
    let mut st = c.prepare_cached(
        "SELECT lat, lng, postal_prefix, unit FROM address_points
         WHERE street = ?1 AND number = ?2 AND lat BETWEEN ?3 AND ?4 AND lng BETWEEN ?5 AND ?6",
    )?;
    queries
        .iter()
        .map(|q| {
            let (lat_min, lat_max, lng_min, lng_max) = q.search_box();
            st.query_map(params![q.street, q.number, lat_min, lat_max, lng_min, lng_max], |r| {
                let (lat, lng, postal_prefix, unit): (f64, f64, String, String) =
                    (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
                // A row edited out of range by hand is no candidate (never a panic).
                Ok(LatLng::new(lat, lng).ok().map(|at| Candidate { at, postal_prefix, unit }))
            })?
            .filter_map(Result::transpose)
            .collect()
        })
        .collect()
}
