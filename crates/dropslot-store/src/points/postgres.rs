//! Address points on `PostgreSQL` (CONTRACT §11): a batch inserted by one statement (its
//! columns as arrays through `unnest`), and the candidates of many addresses read by one.

use crate::postgres::sql::Sql;
use crate::postgres::{BUMP_EPOCH, PgStore, map_err};
use crate::{PointStore, StoreResult, cache};
use async_trait::async_trait;
use dropslot_core::geo::distance::LatLng;
use dropslot_core::geo::points::{AddressPoint, Candidate, PointQuery};
use tokio_postgres::types::Type;

#[async_trait]
impl PointStore for PgStore {
    async fn import_address_points(&self, batch: Vec<AddressPoint>) -> StoreResult<u64> {
        let c = self.conn().await?;
        let added = insert(&c, &batch).await?;
        self.changed();
        Ok(added)
    }

    async fn address_points_present(&self) -> StoreResult<bool> {
        // The epoch is read before the table: an import committed after this read moves it.
        let epoch = self.epoch().await?;
        if let Some(present) = self.points_present.get(&(), epoch) {
            return Ok(present);
        }
        let present = any(&self.conn().await?).await?;
        self.points_present.put((), epoch, present);
        Ok(present)
    }

    async fn address_point_candidates(&self, queries: &[PointQuery]) -> StoreResult<Vec<Vec<Candidate>>> {
        if queries.is_empty() {
            return Ok(Vec::new());
        }
        let epoch = self.epoch().await?;
        cache::points_through(&self.point_lookups, Some(epoch), queries, |missing| async move {
            candidates(&self.conn().await?, &missing).await
        })
        .await
    }
}

/// Inserts the batch and, when any point is new, moves the cache epoch in the same
/// statement; the unique index skips the points already stored. The new rows.
pub(crate) async fn insert(c: &impl Sql, points: &[AddressPoint]) -> StoreResult<u64> {
    let column = |f: fn(&AddressPoint) -> &str| points.iter().map(f).collect::<Vec<&str>>();
    let (number, street, unit, city, prefix) = (
        column(|p| &p.number),
        column(|p| &p.street),
        column(|p| &p.unit),
        column(|p| &p.city),
        column(|p| &p.postal_prefix),
    );
    let lat: Vec<f64> = points.iter().map(|p| p.at.lat()).collect();
    let lng: Vec<f64> = points.iter().map(|p| p.at.lng()).collect();
    let row = c
        .query_typed(
            &format!(
                "WITH new AS (
                    INSERT INTO address_points (number, street, unit, city, postal_prefix, lat, lng)
                    SELECT * FROM unnest($1, $2, $3, $4, $5, $6, $7)
                    ON CONFLICT (street, number, unit, postal_prefix, city) DO NOTHING
                    RETURNING 1),
                 bump AS ({BUMP_EPOCH} AND EXISTS (SELECT 1 FROM new))
                 SELECT count(*) FROM new"
            ),
            &[
                (&number, Type::TEXT_ARRAY),
                (&street, Type::TEXT_ARRAY),
                (&unit, Type::TEXT_ARRAY),
                (&city, Type::TEXT_ARRAY),
                (&prefix, Type::TEXT_ARRAY),
                (&lat, Type::FLOAT8_ARRAY),
                (&lng, Type::FLOAT8_ARRAY),
            ],
        )
        .await
        .map_err(map_err)?;
    let added: i64 = row.first().map_or(0, |r| r.get(0));
    Ok(added as u64)
}

/// Whether the table holds any point (one step of its index).
pub(crate) async fn any(c: &impl Sql) -> StoreResult<bool> {
    let row = c.query_one("SELECT EXISTS (SELECT 1 FROM address_points)", &[]).await.map_err(map_err)?;
    Ok(row.get(0))
}

pub(crate) async fn candidates(c: &impl Sql, queries: &[PointQuery]) -> StoreResult<Vec<Vec<Candidate>>> {
    let index: Vec<i32> = (0..queries.len()).map(|i| i as i32).collect();
    let street: Vec<&str> = queries.iter().map(|q| q.street.as_str()).collect();
    let number: Vec<&str> = queries.iter().map(|q| q.number.as_str()).collect();
    let boxes: Vec<(f64, f64, f64, f64)> = queries.iter().map(PointQuery::search_box).collect();
    let (lat_min, lat_max): (Vec<f64>, Vec<f64>) = boxes.iter().map(|b| (b.0, b.1)).unzip();
    let (lng_min, lng_max): (Vec<f64>, Vec<f64>) = boxes.iter().map(|b| (b.2, b.3)).unzip();
    let rows = c
        .query_typed(
            "SELECT q.i, p.lat, p.lng, p.postal_prefix, p.unit
             FROM unnest($1, $2, $3, $4, $5, $6, $7) AS q(i, street, number, lat_min, lat_max, lng_min, lng_max)
             JOIN address_points p ON p.street = q.street AND p.number = q.number
              AND p.lat BETWEEN q.lat_min AND q.lat_max AND p.lng BETWEEN q.lng_min AND q.lng_max",
            &[
                (&index, Type::INT4_ARRAY),
                (&street, Type::TEXT_ARRAY),
                (&number, Type::TEXT_ARRAY),
                (&lat_min, Type::FLOAT8_ARRAY),
                (&lat_max, Type::FLOAT8_ARRAY),
                (&lng_min, Type::FLOAT8_ARRAY),
                (&lng_max, Type::FLOAT8_ARRAY),
            ],
        )
        .await
        .map_err(map_err)?;
    let mut out: Vec<Vec<Candidate>> = queries.iter().map(|_| Vec::new()).collect();
    for r in &rows {
        let i: i32 = r.try_get(0).map_err(map_err)?;
        let (lat, lng): (f64, f64) = (r.try_get(1).map_err(map_err)?, r.try_get(2).map_err(map_err)?);
        // A row edited out of range by hand is no candidate (never a panic).
        if let (Some(slot), Ok(at)) = (out.get_mut(i as usize), LatLng::new(lat, lng)) {
            slot.push(Candidate {
                at,
                postal_prefix: r.try_get(3).map_err(map_err)?,
                unit: r.try_get(4).map_err(map_err)?,
            });
        }
    }
    Ok(out)
}
