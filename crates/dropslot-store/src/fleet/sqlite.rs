//! The fleet on `SQLite` (CONTRACT §12): drivers and staff tokens. Each change is one writer
//! job (one savepoint), so a driver and its token, or a deletion and its revocations, commit
//! together.

use crate::fleet::{DRIVER_COLUMNS, DriverColumns, driver_row};
use crate::sqlite::{SqliteStore, map_err, now_text, parsed};
use crate::{
    DriverUpdate, FleetStore, NewStaffToken, StaffKind, StaffPrincipal, StaffTokenInfo, StoreResult, StoredDriver,
    TokenHash,
};
use async_trait::async_trait;
use dropslot_core::fleet::Driver;
use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

#[async_trait]
impl FleetStore for SqliteStore {
    async fn insert_operator_token(&self, token: NewStaffToken, now: Timestamp) -> StoreResult<()> {
        self.writer.write(move |c| insert_token(c, StaffKind::Operator, None, &token, now)).await
    }

    async fn staff_principal(&self, hash: &TokenHash) -> StoreResult<Option<StaffPrincipal>> {
        self.read(|c| principal(c, hash))
    }

    async fn list_staff_tokens(&self, kind: StaffKind) -> StoreResult<Vec<StaffTokenInfo>> {
        self.read(|c| list_tokens(c, kind))
    }

    async fn revoke_staff_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        let prefix = prefix.to_string();
        self.writer.write(move |c| revoke_token(c, &prefix, now)).await
    }

    async fn create_driver(
        &self,
        id: &str,
        driver: Driver,
        token: NewStaffToken,
        now: Timestamp,
    ) -> StoreResult<StoredDriver> {
        let id = id.to_string();
        let made = self.writer.write(move |c| create_driver(c, &id, &driver, &token, now)).await;
        self.fleet_changed();
        made
    }

    async fn driver(&self, id: &str) -> StoreResult<Option<StoredDriver>> {
        self.read(|c| driver_columns(c, id))?.map(crate::fleet::driver_row).transpose()
    }

    async fn drivers(&self, depot: Option<&str>) -> StoreResult<Vec<StoredDriver>> {
        let depot = depot.map(str::to_string);
        let rows = self.read_blocking(move |c| drivers_columns(c, depot.as_deref())).await?;
        rows.into_iter().map(crate::fleet::driver_row).collect()
    }

    async fn update_driver(&self, id: &str, version: i64, driver: Driver, now: Timestamp) -> StoreResult<DriverUpdate> {
        let id = id.to_string();
        let changed = self.writer.write(move |c| update_driver(c, &id, version, &driver, now)).await;
        self.fleet_changed();
        changed
    }

    async fn delete_driver(&self, id: &str, now: Timestamp) -> StoreResult<bool> {
        let id = id.to_string();
        let deleted = self.writer.write(move |c| delete_driver(c, &id, now)).await;
        self.fleet_changed();
        deleted
    }

    async fn reissue_driver_token(&self, id: &str, token: NewStaffToken, now: Timestamp) -> StoreResult<bool> {
        let id = id.to_string();
        self.writer.write(move |c| reissue(c, &id, &token, now)).await
    }
}

impl SqliteStore {
    /// This process's kept tentative plans are read anew (the stored generation moved too).
    fn fleet_changed(&self) {
        if let Some(f) = self.outbox.fleet() {
            f.forget();
        }
    }
}

fn columns(r: &rusqlite::Row<'_>) -> rusqlite::Result<DriverColumns> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
        r.get(9)?,
        r.get(10)?,
        r.get(11)?,
        r.get(12)?,
    ))
}

pub(crate) fn insert_token(
    c: &Connection,
    kind: StaffKind,
    driver: Option<i64>,
    t: &NewStaffToken,
    now: Timestamp,
) -> StoreResult<()> {
    c.prepare_cached(
        "INSERT INTO staff_tokens (kind, driver_id, hash, prefix, last4, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| s.execute(params![kind.as_str(), driver, &t.hash.0[..], t.prefix, t.last4, now_text(now)]))
    .map(drop)
    .map_err(map_err)
}

pub(crate) fn principal(c: &Connection, hash: &TokenHash) -> rusqlite::Result<Option<StaffPrincipal>> {
    c.prepare_cached(
        "SELECT s.kind, d.unique_id FROM staff_tokens s LEFT JOIN drivers d ON d.id = s.driver_id
         WHERE s.hash = ?1 AND s.revoked_at IS NULL",
    )?
    .query_row([&hash.0[..]], |r| {
        Ok(StaffPrincipal { kind: parsed(r, 0, "staff token kind", StaffKind::parse)?, driver_id: r.get(1)? })
    })
    .optional()
}

pub(crate) fn list_tokens(c: &Connection, kind: StaffKind) -> rusqlite::Result<Vec<StaffTokenInfo>> {
    c.prepare_cached(
        "SELECT s.prefix, s.last4, s.kind, d.unique_id, s.created_at, s.revoked_at
         FROM staff_tokens s LEFT JOIN drivers d ON d.id = s.driver_id WHERE s.kind = ?1 ORDER BY s.id",
    )?
    .query_map([kind.as_str()], |r| {
        Ok(StaffTokenInfo {
            prefix: r.get(0)?,
            last4: r.get(1)?,
            kind: parsed(r, 2, "staff token kind", StaffKind::parse)?,
            driver_id: r.get(3)?,
            created_at: r.get(4)?,
            revoked_at: r.get(5)?,
        })
    })?
    .collect()
}

pub(crate) fn revoke_token(c: &Connection, prefix: &str, now: Timestamp) -> StoreResult<bool> {
    let n = c
        .execute(
            "UPDATE staff_tokens SET revoked_at = ?2 WHERE prefix = ?1 AND revoked_at IS NULL",
            params![prefix, now_text(now)],
        )
        .map_err(map_err)?;
    Ok(n == 1)
}

pub(crate) fn create_driver(
    c: &Connection,
    id: &str,
    d: &Driver,
    token: &NewStaffToken,
    now: Timestamp,
) -> StoreResult<StoredDriver> {
    let at = now_text(now);
    c.prepare_cached(
        "INSERT INTO drivers (unique_id, name, phone, depot, vehicle_name, capacity_parcels, capacity_kg,
           shift_start, shift_end, weekdays, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)",
    )
    .and_then(|mut s| {
        s.execute(params![
            id,
            d.name,
            d.phone,
            d.depot,
            d.vehicle.name,
            d.vehicle.capacity_parcels,
            d.vehicle.capacity_kg,
            d.shift.start,
            d.shift.end,
            d.weekdays.list(),
            at
        ])
    })
    .map_err(map_err)?;
    insert_token(c, StaffKind::Driver, Some(c.last_insert_rowid()), token, now)?;
    fleet_changed(c)?;
    Ok(StoredDriver { id: id.to_string(), driver: d.clone(), version: 1, created_at: at.clone(), updated_at: at })
}

pub(crate) fn driver_columns(c: &Connection, id: &str) -> rusqlite::Result<Option<DriverColumns>> {
    c.prepare_cached(&format!(
        "SELECT {DRIVER_COLUMNS}, created_at, updated_at FROM drivers WHERE unique_id = ?1 AND deleted_at IS NULL"
    ))?
    .query_row([id], columns)
    .optional()
}

fn driver(c: &Connection, id: &str) -> StoreResult<Option<StoredDriver>> {
    driver_columns(c, id).map_err(map_err)?.map(driver_row).transpose()
}

pub(crate) fn drivers_columns(c: &Connection, depot: Option<&str>) -> rusqlite::Result<Vec<DriverColumns>> {
    c.prepare_cached(&format!(
        "SELECT {DRIVER_COLUMNS}, created_at, updated_at FROM drivers
         WHERE deleted_at IS NULL AND (?1 IS NULL OR depot = ?1) ORDER BY id"
    ))?
    .query_map([depot], columns)?
    .collect()
}

pub(crate) fn update_driver(
    c: &Connection,
    id: &str,
    version: i64,
    d: &Driver,
    now: Timestamp,
) -> StoreResult<DriverUpdate> {
    let n = c
        .prepare_cached(
            "UPDATE drivers SET name = ?3, phone = ?4, depot = ?5, vehicle_name = ?6, capacity_parcels = ?7,
               capacity_kg = ?8, shift_start = ?9, shift_end = ?10, weekdays = ?11, updated_at = ?12,
               version = version + 1
             WHERE unique_id = ?1 AND version = ?2 AND deleted_at IS NULL",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                version,
                d.name,
                d.phone,
                d.depot,
                d.vehicle.name,
                d.vehicle.capacity_parcels,
                d.vehicle.capacity_kg,
                d.shift.start,
                d.shift.end,
                d.weekdays.list(),
                now_text(now)
            ])
        })
        .map_err(map_err)?;
    if n == 1 {
        fleet_changed(c)?;
    }
    Ok(match (n, driver(c, id)?) {
        (1, Some(stored)) => DriverUpdate::Updated(stored),
        (_, None) => DriverUpdate::NotFound,
        (_, Some(_)) => DriverUpdate::Changed,
    })
}

/// The row id of the driver with this public id, unless deleted.
fn row_id(c: &Connection, id: &str) -> StoreResult<Option<i64>> {
    c.prepare_cached("SELECT id FROM drivers WHERE unique_id = ?1 AND deleted_at IS NULL")
        .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
        .map_err(map_err)
}

fn revoke_driver_tokens(c: &Connection, row: i64, now: Timestamp) -> StoreResult<()> {
    c.prepare_cached("UPDATE staff_tokens SET revoked_at = ?2 WHERE driver_id = ?1 AND revoked_at IS NULL")
        .and_then(|mut s| s.execute(params![row, now_text(now)]))
        .map(drop)
        .map_err(map_err)
}

pub(crate) fn delete_driver(c: &Connection, id: &str, now: Timestamp) -> StoreResult<bool> {
    let Some(row) = row_id(c, id)? else { return Ok(false) };
    c.execute("UPDATE drivers SET deleted_at = ?2, updated_at = ?2 WHERE id = ?1", params![row, now_text(now)])
        .map_err(map_err)?;
    revoke_driver_tokens(c, row, now)?;
    fleet_changed(c)?;
    Ok(true)
}

pub(crate) fn reissue(c: &Connection, id: &str, token: &NewStaffToken, now: Timestamp) -> StoreResult<bool> {
    let Some(row) = row_id(c, id)? else { return Ok(false) };
    revoke_driver_tokens(c, row, now)?;
    insert_token(c, StaffKind::Driver, Some(row), token, now)?;
    Ok(true)
}

/// Raises the fleet's generation (a driver was added, changed or removed): every process
/// reads its plans anew, with the fleet as it is now.
pub(crate) fn fleet_changed(c: &Connection) -> Result<(), crate::StoreError> {
    c.prepare_cached(
        "INSERT INTO fleet_days (depot, date, version) VALUES (?1, ?2, 1)
         ON CONFLICT (depot, date) DO UPDATE SET version = version + 1",
    )
    .and_then(|mut s| s.execute(params![crate::fleet::GENERATION.0, crate::fleet::GENERATION.1]))
    .map_err(map_err)?;
    Ok(())
}
