//! Records of the fleet (CONTRACT §12) crossing the storage seam: drivers and the tokens of
//! the courier's own staff (`operator`, `driver`), which belong to no client.

use crate::{StoreError, StoreResult, TokenHash};
use async_trait::async_trait;
use dropslot_core::fleet::{Driver, Shift, Vehicle, WorkDays};
use jiff::Timestamp;

/// The kinds of staff token: an `operator` runs the fleet and the day's plans; a `driver`
/// token is bound to one driver (the driver app).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StaffKind {
    Operator,
    Driver,
}

impl StaffKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StaffKind::Operator => "operator",
            StaffKind::Driver => "driver",
        }
    }
    pub fn parse(s: &str) -> Option<StaffKind> {
        match s {
            "operator" => Some(StaffKind::Operator),
            "driver" => Some(StaffKind::Driver),
            _ => None,
        }
    }
}

/// A staff token to store: its hash and what listings show. Its kind is the method's: an
/// operator token by [`crate::Store::insert_operator_token`], a driver's with its driver.
#[derive(Debug, Clone)]
pub struct NewStaffToken {
    pub hash: TokenHash,
    /// `ds_operator_` or `ds_driver_` plus 8 characters.
    pub prefix: String,
    pub last4: String,
}

/// Who a valid staff token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaffPrincipal {
    pub kind: StaffKind,
    /// The driver's id (`DRV…`) of a driver token.
    pub driver_id: Option<String>,
}

/// A live dispatcher session (`/ops` pages): the CSRF token its forms carry and its operator
/// token's display prefix. A revoked token ends it.
#[derive(Debug, Clone)]
pub struct OpsSessionRecord {
    pub csrf: String,
    pub token_prefix: String,
}

/// A staff token as listed: never the token itself.
#[derive(Debug, Clone)]
pub struct StaffTokenInfo {
    /// The kind prefix and the first 8 random characters: identifies the token.
    pub prefix: String,
    pub last4: String,
    pub kind: StaffKind,
    /// The driver a driver token is bound to.
    pub driver_id: Option<String>,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

/// A driver as stored: its public id and the checked record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDriver {
    pub id: String,
    pub driver: Driver,
    /// Grows by one with every change (a change is written only over the version it read).
    pub version: i64,
    pub created_at: String,
    pub updated_at: String,
}

/// A `drivers` row as both backends read it: unique id, name, phone, depot, vehicle name,
/// capacities (parcels, kg), shift (start, end), weekdays, version, created, updated.
pub(crate) type DriverColumns =
    (String, String, String, String, String, i64, i64, i64, i64, String, i64, String, String);

/// The columns every driver read selects, in [`DriverColumns`]' order (`SQLite`'s instants
/// are text; `PostgreSQL` formats its own, see its backend).
pub(crate) const DRIVER_COLUMNS: &str = "unique_id, name, phone, depot, vehicle_name, capacity_parcels, capacity_kg, \
     shift_start, shift_end, weekdays, version";

/// A row back into a driver; a value the rules would refuse is stored data gone wrong.
pub(crate) fn driver_row(c: DriverColumns) -> StoreResult<StoredDriver> {
    let (id, name, phone, depot, vehicle_name, parcels, kg, start, end, weekdays, version, created_at, updated_at) = c;
    let corrupt = |what: &str| StoreError::Corrupt(format!("driver {id}: {what}"));
    let number = |v: i64, what: &str| u32::try_from(v).map_err(|_| corrupt(what));
    let minutes = |v: i64, what: &str| u16::try_from(v).map_err(|_| corrupt(what));
    let driver = Driver {
        name,
        phone,
        depot,
        vehicle: Vehicle {
            name: vehicle_name,
            capacity_parcels: number(parcels, "capacity_parcels")?,
            capacity_kg: number(kg, "capacity_kg")?,
        },
        shift: Shift { start: minutes(start, "shift_start")?, end: minutes(end, "shift_end")? },
        weekdays: WorkDays::parse_list(&weekdays).ok_or_else(|| corrupt("weekdays"))?,
    };
    Ok(StoredDriver { id, driver, version, created_at, updated_at })
}

/// What a driver's change did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverUpdate {
    Updated(StoredDriver),
    /// No such driver, or deleted.
    NotFound,
    /// The driver changed after the read the change was laid over: nothing written.
    Changed,
}

#[async_trait]
pub trait FleetStore: Send + Sync + 'static {
    async fn insert_operator_token(&self, token: NewStaffToken, now: Timestamp) -> StoreResult<()>;
    /// The unrevoked staff token with this hash (a deleted driver's tokens are revoked).
    async fn staff_principal(&self, hash: &TokenHash) -> StoreResult<Option<StaffPrincipal>>;
    /// Every staff token of this kind, oldest first.
    async fn list_staff_tokens(&self, kind: StaffKind) -> StoreResult<Vec<StaffTokenInfo>>;
    /// Revokes the one live staff token with this display prefix; false if none matched.
    async fn revoke_staff_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool>;
    /// Writes a new driver (`id` is its `DRV…` id) and its first driver token together.
    async fn create_driver(
        &self,
        id: &str,
        driver: Driver,
        token: NewStaffToken,
        now: Timestamp,
    ) -> StoreResult<StoredDriver>;
    /// The driver with this id, unless deleted.
    async fn driver(&self, id: &str) -> StoreResult<Option<StoredDriver>>;
    /// The drivers not deleted, of one depot or all, oldest first.
    async fn drivers(&self, depot: Option<&str>) -> StoreResult<Vec<StoredDriver>>;
    /// Replaces a driver's record with `driver` (the core checked it as a whole, the change
    /// laid over the record read at `version`), if the driver is still at that version.
    async fn update_driver(&self, id: &str, version: i64, driver: Driver, now: Timestamp) -> StoreResult<DriverUpdate>;
    /// Deletes a driver (the row stays, invisible) and revokes its tokens; false if none.
    async fn delete_driver(&self, id: &str, now: Timestamp) -> StoreResult<bool>;
    /// Revokes every token of the driver and stores `token` as its only live one, together;
    /// false (nothing written) when no such driver.
    async fn reissue_driver_token(&self, id: &str, token: NewStaffToken, now: Timestamp) -> StoreResult<bool>;
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: FleetStore> FleetStore for crate::trace::Traced<S> {
    async fn insert_operator_token(&self, token: NewStaffToken, now: Timestamp) -> StoreResult<()> {
        self.trace.hit("FleetStore::insert_operator_token");
        self.inner.insert_operator_token(token, now).await
    }

    async fn staff_principal(&self, hash: &TokenHash) -> StoreResult<Option<StaffPrincipal>> {
        self.trace.hit("FleetStore::staff_principal");
        self.inner.staff_principal(hash).await
    }

    async fn list_staff_tokens(&self, kind: StaffKind) -> StoreResult<Vec<StaffTokenInfo>> {
        self.trace.hit("FleetStore::list_staff_tokens");
        self.inner.list_staff_tokens(kind).await
    }

    async fn revoke_staff_token(&self, prefix: &str, now: Timestamp) -> StoreResult<bool> {
        self.trace.hit("FleetStore::revoke_staff_token");
        self.inner.revoke_staff_token(prefix, now).await
    }

    async fn create_driver(
        &self,
        id: &str,
        driver: Driver,
        token: NewStaffToken,
        now: Timestamp,
    ) -> StoreResult<StoredDriver> {
        self.trace.hit("FleetStore::create_driver");
        self.inner.create_driver(id, driver, token, now).await
    }

    async fn driver(&self, id: &str) -> StoreResult<Option<StoredDriver>> {
        self.trace.hit("FleetStore::driver");
        self.inner.driver(id).await
    }

    async fn drivers(&self, depot: Option<&str>) -> StoreResult<Vec<StoredDriver>> {
        self.trace.hit("FleetStore::drivers");
        self.inner.drivers(depot).await
    }

    async fn update_driver(&self, id: &str, version: i64, driver: Driver, now: Timestamp) -> StoreResult<DriverUpdate> {
        self.trace.hit("FleetStore::update_driver");
        self.inner.update_driver(id, version, driver, now).await
    }

    async fn delete_driver(&self, id: &str, now: Timestamp) -> StoreResult<bool> {
        self.trace.hit("FleetStore::delete_driver");
        self.inner.delete_driver(id, now).await
    }

    async fn reissue_driver_token(&self, id: &str, token: NewStaffToken, now: Timestamp) -> StoreResult<bool> {
        self.trace.hit("FleetStore::reissue_driver_token");
        self.inner.reissue_driver_token(id, token, now).await
    }
}

/// The row of `fleet_days` whose version counts the changes of the fleet itself (a driver
/// added, changed or removed): every kept plan was read under one.
pub(crate) const GENERATION: (&str, &str) = ("", "");

pub(crate) mod postgres;
pub(crate) mod sqlite;
