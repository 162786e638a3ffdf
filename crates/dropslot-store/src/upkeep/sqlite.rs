use crate::sqlite::{SqliteStore, map_err, migrate, now_text};
use crate::{StoreError, StoreResult, UpkeepStore};
use async_trait::async_trait;
use jiff::Timestamp;
use std::sync::Arc;

#[async_trait]
impl UpkeepStore for SqliteStore {
    fn stats(&self) -> Arc<crate::StoreStats> {
        self.stats.clone()
    }

    async fn migrate(&self) -> StoreResult<Vec<i64>> {
        self.writer.write(|c| migrate(c).map_err(StoreError::Invalid)).await
    }

    async fn ping(&self) -> StoreResult<()> {
        // Through the writer, committed like any order: it fails exactly when orders would.
        let at = now_text(Timestamp::now());
        self.writer
            .write(move |c| {
                c.prepare_cached(
                    "INSERT INTO health_probe (id, checked_at) VALUES (1, ?1)
                     ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at",
                )
                .and_then(|mut s| s.execute([&at]))
                .map(drop)
                .map_err(map_err)
            })
            .await
    }

    async fn install_setting(&self, key: &str, if_absent: &str) -> StoreResult<String> {
        let (key, if_absent) = (key.to_string(), if_absent.to_string());
        self.writer
            .write(move |c| {
                c.prepare_cached(
                    "INSERT INTO install_settings (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
                )
                .and_then(|mut s| s.execute([&key, &if_absent]))
                .and_then(|_| {
                    c.prepare_cached("SELECT value FROM install_settings WHERE key = ?1")?
                        .query_row([&key], |r| r.get::<_, String>(0))
                })
                .map_err(map_err)
            })
            .await
    }
}
