//! upkeep

use crate::{StoreResult, StoreStats};
use async_trait::async_trait;
use std::sync::Arc;

#[async_trait]
pub trait UpkeepStore: Send + Sync + 'static {
    /// The backend's write and read statistics (shared; updated as it works).
    fn stats(&self) -> Arc<StoreStats>;
    /// Brings the schema up to date; returns the versions applied now.
    async fn migrate(&self) -> StoreResult<Vec<i64>>;
    /// Proves the database takes writes: a small committed write (`/readyz`, and the check
    /// at start). Fails while the database is read-only, full, locked or unreachable.
    async fn ping(&self) -> StoreResult<()>;
    /// The install's setting `key`: the value stored, or `if_absent`, stored now in the same
    /// transaction (the first start that asks records it; every later one reads it, on any
    /// process). Never rewritten.
    async fn install_setting(&self, key: &str, if_absent: &str) -> StoreResult<String>;
    /// The tables' upkeep the database does not do by itself in time (`PostgreSQL`: analyse
    /// and vacuum the hot tables past their thresholds); the commands it ran. Called every
    /// few seconds by one task per process.
    async fn upkeep(&self) -> StoreResult<Vec<String>> {
        Ok(Vec::new())
    }
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: UpkeepStore> UpkeepStore for crate::trace::Traced<S> {
    fn stats(&self) -> Arc<StoreStats> {
        self.trace.hit("UpkeepStore::stats");
        self.inner.stats()
    }

    async fn migrate(&self) -> StoreResult<Vec<i64>> {
        self.trace.hit("UpkeepStore::migrate");
        self.inner.migrate().await
    }

    async fn ping(&self) -> StoreResult<()> {
        self.trace.hit("UpkeepStore::ping");
        self.inner.ping().await
    }

    async fn install_setting(&self, key: &str, if_absent: &str) -> StoreResult<String> {
        self.trace.hit("UpkeepStore::install_setting");
        self.inner.install_setting(key, if_absent).await
    }

    async fn upkeep(&self) -> StoreResult<Vec<String>> {
        self.trace.hit("UpkeepStore::upkeep");
        self.inner.upkeep().await
    }
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
