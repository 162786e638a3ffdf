//! points

use crate::StoreResult;
use async_trait::async_trait;
use dropslot_core::geo::points::{AddressPoint, Candidate, PointQuery};

#[async_trait]
pub trait PointStore: Send + Sync + 'static {
    /// Adds a batch of points in one transaction; a point already stored with the same keys
    /// (number, street, unit, postal prefix, city) is left as it is, so a re-import adds
    /// nothing. Returns how many were new. Every process's lookups see them from the next
    /// request on (the cache epoch moves with the commit).
    async fn import_address_points(&self, points: Vec<AddressPoint>) -> StoreResult<u64>;
    /// Whether any point is stored: cached under the cache epoch, so a preview on an
    /// installation without points asks the database nothing (an import moves the epoch).
    async fn address_points_present(&self) -> StoreResult<bool>;
    /// For each query, the stored points with its number and street inside its search box
    /// (`PointQuery::choose` picks one). Recent lookups are cached under the cache epoch (an
    /// import moves it), so a merchant's repeated pick-up address costs no query.
    async fn address_point_candidates(&self, queries: &[PointQuery]) -> StoreResult<Vec<Vec<Candidate>>>;
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: PointStore> PointStore for crate::trace::Traced<S> {
    async fn import_address_points(&self, points: Vec<AddressPoint>) -> StoreResult<u64> {
        self.trace.hit("PointStore::import_address_points");
        self.inner.import_address_points(points).await
    }

    async fn address_points_present(&self) -> StoreResult<bool> {
        self.trace.hit("PointStore::address_points_present");
        self.inner.address_points_present().await
    }

    async fn address_point_candidates(&self, queries: &[PointQuery]) -> StoreResult<Vec<Vec<Candidate>>> {
        self.trace.hit("PointStore::address_point_candidates");
        self.inner.address_point_candidates(queries).await
    }
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
