//! The fleet on `PostgreSQL` (CONTRACT §12): drivers and staff tokens. A change that touches
//! two tables (a driver and its token, a deletion and its revocations) is one transaction,
//! with the driver's row locked, so two re-issues of one driver's token leave one live token.

use crate::fleet::{DRIVER_COLUMNS, DriverColumns, driver_row};
use crate::postgres::sql::Sql;
use crate::postgres::{PgStore, in_tx, map_err, parsed, utc_text};
use crate::{
    DriverUpdate, FleetStore, NewStaffToken, StaffKind, StaffPrincipal, StaffTokenInfo, StoreResult, StoredDriver,
    TokenHash,
};
use async_trait::async_trait;
use dropslot_core::fleet::Driver;
use jiff::Timestamp;
use tokio_postgres::Row;

#[async_trait]
impl FleetStore for PgStore {
    async fn insert_operator_token(&self, token: NewStaffToken, now: Timestamp) -> StoreResult<()> {
        let c = self.conn().await?;
        insert_token(&c, StaffKind::Operator, None, &token, now).await
    }

    async fn staff_principal(&self, hash: &TokenHash) -> StoreResult<Option<StaffPrincipal>> {
        let c = self.conn().await?;
        principal(&c, hash).await
    }

    async fn list_staff_tokens(&self, kind: StaffKind) -> StoreResult<Vec<StaffTokenInfo>> {
        let c = self.conn().await?;
        list_tokens(&c, kind).await
    }

    async fn revoke_staff_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        let c = self.conn().await?;
        revoke_token(&c, prefix, now).await
    }

    async fn create_driver(
        &self,
        id: &str,
        driver: Driver,
        token: NewStaffToken,
        now: Timestamp,
    ) -> StoreResult<StoredDriver> {
        let made = in_tx!(self, |tx| create_driver(tx, id, &driver, &token, now).await);
        self.fleet_changed();
        made
    }

    async fn driver(&self, id: &str) -> StoreResult<Option<StoredDriver>> {
        let c = self.conn().await?;
        driver(&c, id).await
    }

    async fn drivers(&self, depot: Option<&str>) -> StoreResult<Vec<StoredDriver>> {
        let c = self.conn().await?;
        drivers(&c, depot).await
    }

    async fn update_driver(&self, id: &str, version: i64, driver: Driver, now: Timestamp) -> StoreResult<DriverUpdate> {
        let c = self.conn().await?;
        let changed = update_driver(&c, id, version, &driver, now).await;
        self.fleet_changed();
        changed
    }

    async fn delete_driver(&self, id: &str, now: Timestamp) -> StoreResult<bool> {
        let deleted = in_tx!(self, |tx| delete_driver(tx, id, now).await);
        self.fleet_changed();
        deleted
    }

    async fn reissue_driver_token(&self, id: &str, token: NewStaffToken, now: Timestamp) -> StoreResult<bool> {
        in_tx!(self, |tx| reissue(tx, id, &token, now).await)
    }
}

type Tx<'a> = deadpool_postgres::Transaction<'a>;

impl PgStore {
    /// This process's kept tentative plans are read anew (the stored generation moved too).
    fn fleet_changed(&self) {
        if let Some(f) = self.outbox.fleet() {
            f.forget();
        }
    }
}

pub(crate) fn stored(r: &Row) -> StoreResult<StoredDriver> {
    let columns: DriverColumns = (
        r.get(0),
        r.get(1),
        r.get(2),
        r.get(3),
        r.get(4),
        r.get(5),
        r.get(6),
        r.get(7),
        r.get(8),
        r.get(9),
        r.get(10),
        utc_text(r.get(11)),
        utc_text(r.get(12)),
    );
    driver_row(columns)
}

pub(crate) async fn insert_token(
    c: &impl deadpool_postgres::GenericClient,
    kind: StaffKind,
    driver: Option<i64>,
    t: &NewStaffToken,
    now: Timestamp,
) -> StoreResult<()> {
    c.execute(
        "INSERT INTO staff_tokens (kind, driver_id, hash, prefix, last4, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        &[&kind.as_str(), &driver, &&t.hash.0[..], &t.prefix, &t.last4, &now],
    )
    .await
    .map(drop)
    .map_err(map_err)
}

pub(crate) async fn principal(
    c: &impl deadpool_postgres::GenericClient,
    hash: &TokenHash,
) -> StoreResult<Option<StaffPrincipal>> {
    let row = c
        .query_opt(
            "SELECT s.kind, d.unique_id FROM staff_tokens s LEFT JOIN drivers d ON d.id = s.driver_id
             WHERE s.hash = $1 AND s.revoked_at IS NULL",
            &[&&hash.0[..]],
        )
        .await
        .map_err(map_err)?;
    row.map(|r| {
        Ok(StaffPrincipal { kind: parsed(r.get(0), "staff token kind", StaffKind::parse)?, driver_id: r.get(1) })
    })
    .transpose()
}

pub(crate) async fn list_tokens(
    c: &impl deadpool_postgres::GenericClient,
    kind: StaffKind,
) -> StoreResult<Vec<StaffTokenInfo>> {
    c.query(
        "SELECT s.prefix, s.last4, s.kind, d.unique_id, s.created_at, s.revoked_at
         FROM staff_tokens s LEFT JOIN drivers d ON d.id = s.driver_id WHERE s.kind = $1 ORDER BY s.id",
        &[&kind.as_str()],
    )
    .await
    .map_err(map_err)?
    .iter()
    .map(|r| {
        Ok(StaffTokenInfo {
            prefix: r.get(0),
            last4: r.get(1),
            kind: parsed(r.get(2), "staff token kind", StaffKind::parse)?,
            driver_id: r.get(3),
            created_at: utc_text(r.get(4)),
            revoked_at: r.get::<_, Option<Timestamp>>(5).map(utc_text),
        })
    })
    .collect()
}

pub(crate) async fn revoke_token(
    c: &impl deadpool_postgres::GenericClient,
    prefix: &str,
    now: Timestamp,
) -> StoreResult<bool> {
    let n = c
        .execute("UPDATE staff_tokens SET revoked_at = $2 WHERE prefix = $1 AND revoked_at IS NULL", &[&prefix, &now])
        .await
        .map_err(map_err)?;
    Ok(n == 1)
}

pub(crate) async fn create_driver(
    tx: &Tx<'_>,
    id: &str,
    d: &Driver,
    token: &NewStaffToken,
    now: Timestamp,
) -> StoreResult<StoredDriver> {
    let row = tx
        .query_one(
            &format!(
                "INSERT INTO drivers (unique_id, name, phone, depot, vehicle_name, capacity_parcels, capacity_kg,
                   shift_start, shift_end, weekdays, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
                 RETURNING {DRIVER_COLUMNS}, created_at, updated_at, id"
            ),
            &[
                &id,
                &d.name,
                &d.phone,
                &d.depot,
                &d.vehicle.name,
                &i64::from(d.vehicle.capacity_parcels),
                &i64::from(d.vehicle.capacity_kg),
                &i64::from(d.shift.start),
                &i64::from(d.shift.end),
                &d.weekdays.list(),
                &now,
            ],
        )
        .await
        .map_err(map_err)?;
    insert_token(tx, StaffKind::Driver, Some(row.get(13)), token, now).await?;
    fleet_changed(tx).await?;
    stored(&row)
}

pub(crate) async fn driver(c: &impl deadpool_postgres::GenericClient, id: &str) -> StoreResult<Option<StoredDriver>> {
    c.query_opt(
        &format!(
            "SELECT {DRIVER_COLUMNS}, created_at, updated_at FROM drivers WHERE unique_id = $1 AND deleted_at IS NULL"
        ),
        &[&id],
    )
    .await
    .map_err(map_err)?
    .as_ref()
    .map(stored)
    .transpose()
}

pub(crate) async fn drivers(
    c: &impl deadpool_postgres::GenericClient,
    depot: Option<&str>,
) -> StoreResult<Vec<StoredDriver>> {
    c.query(
        &format!(
            "SELECT {DRIVER_COLUMNS}, created_at, updated_at FROM drivers
             WHERE deleted_at IS NULL AND ($1::text IS NULL OR depot = $1) ORDER BY id"
        ),
        &[&depot],
    )
    .await
    .map_err(map_err)?
    .iter()
    .map(stored)
    .collect()
}

pub(crate) async fn update_driver(
    c: &impl deadpool_postgres::GenericClient,
    id: &str,
    version: i64,
    d: &Driver,
    now: Timestamp,
) -> StoreResult<DriverUpdate> {
    let row = c
        .query_opt(
            &format!(
                "UPDATE drivers SET name = $3, phone = $4, depot = $5, vehicle_name = $6, capacity_parcels = $7,
                   capacity_kg = $8, shift_start = $9, shift_end = $10, weekdays = $11, updated_at = $12,
                   version = version + 1
                 WHERE unique_id = $1 AND version = $2 AND deleted_at IS NULL
                 RETURNING {DRIVER_COLUMNS}, created_at, updated_at"
            ),
            &[
                &id,
                &version,
                &d.name,
                &d.phone,
                &d.depot,
                &d.vehicle.name,
                &i64::from(d.vehicle.capacity_parcels),
                &i64::from(d.vehicle.capacity_kg),
                &i64::from(d.shift.start),
                &i64::from(d.shift.end),
                &d.weekdays.list(),
                &now,
            ],
        )
        .await
        .map_err(map_err)?;
    if let Some(row) = row {
        // After the change (a statement of its own): a plan read between the two is read
        // again at the next check, since the version moves after it.
        fleet_changed(c).await?;
        return Ok(DriverUpdate::Updated(stored(&row)?));
    }
    Ok(if driver(c, id).await?.is_some() { DriverUpdate::Changed } else { DriverUpdate::NotFound })
}

/// The row id of the driver with this public id, unless deleted, its row locked.
async fn lock(tx: &Tx<'_>, id: &str) -> StoreResult<Option<i64>> {
    let row = tx
        .query_opt("SELECT id FROM drivers WHERE unique_id = $1 AND deleted_at IS NULL FOR UPDATE", &[&id])
        .await
        .map_err(map_err)?;
    Ok(row.map(|r| r.get(0)))
}

async fn revoke_driver_tokens(tx: &Tx<'_>, row: i64, now: Timestamp) -> StoreResult<()> {
    tx.execute("UPDATE staff_tokens SET revoked_at = $2 WHERE driver_id = $1 AND revoked_at IS NULL", &[&row, &now])
        .await
        .map(drop)
        .map_err(map_err)
}

pub(crate) async fn delete_driver(tx: &Tx<'_>, id: &str, now: Timestamp) -> StoreResult<bool> {
    let Some(row) = lock(tx, id).await? else { return Ok(false) };
    tx.execute("UPDATE drivers SET deleted_at = $2, updated_at = $2 WHERE id = $1", &[&row, &now])
        .await
        .map_err(map_err)?;
    revoke_driver_tokens(tx, row, now).await?;
    fleet_changed(tx).await?;
    Ok(true)
}

pub(crate) async fn reissue(tx: &Tx<'_>, id: &str, token: &NewStaffToken, now: Timestamp) -> StoreResult<bool> {
    let Some(row) = lock(tx, id).await? else { return Ok(false) };
    revoke_driver_tokens(tx, row, now).await?;
    insert_token(tx, StaffKind::Driver, Some(row), token, now).await?;
    Ok(true)
}

/// Raises the fleet's generation (a driver was added, changed or removed): every process
/// reads its plans anew, with the fleet as it is now.
pub(crate) async fn fleet_changed(c: &impl Sql) -> Result<(), crate::StoreError> {
    c.execute_typed(
        "INSERT INTO fleet_days (depot, date, version) VALUES ($1, $2, 1)
         ON CONFLICT (depot, date) DO UPDATE SET version = fleet_days.version + 1",
        &[
            (&crate::fleet::GENERATION.0, tokio_postgres::types::Type::TEXT),
            (&crate::fleet::GENERATION.1, tokio_postgres::types::Type::TEXT),
        ],
    )
    .await
    .map_err(map_err)?;
    Ok(())
}
