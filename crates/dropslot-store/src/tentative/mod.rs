//! tentative: the tentative plan of each fleet depot's date (`[capacity] mode = "fleet"`,
//! issue 45): every live drop-off booked for the date, on the routes of the drivers working it.
//! The rules are the core's (`dropslot_core::dispatch::tentative`); the backends load the rows,
//! take a stop's place in the order's own transaction, and persist each stop's route and order
//! key (`fleet_stops`, migration 0021).
//!
//! **The shared state.** `fleet_days` holds one version per (depot, date). An order's
//! transaction raises it first (an upsert: on `PostgreSQL` it holds the row until the commit, so
//! the orders of one depot and date, in any number of processes, take their places one after
//! another), then places its stops in the plan of the version before its own, and writes their
//! rows. Each process keeps the plans it has read with their versions ([`Fleet`]): when the
//! version it raised is one more than the one it keeps, no other writer came between and the
//! kept plan is current; otherwise it reads the plan anew inside the transaction. A refused or
//! rolled-back order leaves the kept version ahead of the stored one, which is read anew the
//! next time: never a plan with a stop the database lacks taken as current.
//!
//! A quote reads the kept plan ([`TentativeStore::tentative_plan`]), checking the stored
//! version at most once a second: another process's orders are seen within a second, this
//! process's at once; the order's transaction decides either way.

use crate::{CreateOrderError, StoreError, StoreResult};
use async_trait::async_trait;
use dropslot_core::dispatch::Candidate;
use dropslot_core::dispatch::tentative::{self, Assembled, Change, Rules, Tentative, Visit};
use dropslot_core::quote::capacity::Reservation;
use jiff::civil::Date;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a quote trusts a kept plan before checking its stored version.
pub(crate) const TRUSTED: Duration = Duration::from_secs(1);

pub(crate) use crate::fleet::GENERATION;

/// A plan's versions: its day's, and the fleet's generation it was read under.
pub type Versions = (i64, i64);

/// One kept plan.
struct Kept {
    version: Versions,
    checked: Instant,
    plan: Arc<Tentative>,
}

/// The tentative plans this process keeps, and the rules that build them. The service makes
/// one per store (its outbox hands it over, [`crate::Outbox::fleet`]).
pub struct Fleet {
    pub rules: Rules,
    kept: Mutex<HashMap<(String, Date), Kept>>,
}

impl Fleet {
    pub fn new(rules: Rules) -> Fleet {
        Fleet { rules, kept: Mutex::new(HashMap::new()) }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<(String, Date), Kept>> {
        self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The kept plan of `key` if it was checked less than [`TRUSTED`] ago.
    pub(crate) fn fresh(&self, key: &(String, Date)) -> Option<(Versions, Arc<Tentative>)> {
        self.kept().get(key).filter(|k| k.checked.elapsed() < TRUSTED).map(|k| (k.version, k.plan.clone()))
    }

    /// For a quote: the kept plan of `key` if it is at least as new as the stored `version`
    /// (marked checked now), with the versions it is at. Ahead of the stored version, it holds
    /// stops the writer placed and has not committed yet (or that a rollback took back): a
    /// quote may count them (a place is never sold twice for it), and reading the day anew
    /// would only find less. Under load the writer is always ahead of what a reader sees.
    pub(crate) fn at_least(&self, key: &(String, Date), version: Versions) -> Option<(Versions, Arc<Tentative>)> {
        let mut kept = self.kept();
        let k = kept.get_mut(key).filter(|k| k.version.0 >= version.0 && k.version.1 == version.1)?;
        k.checked = Instant::now();
        Some((k.version, k.plan.clone()))
    }

    /// A copy of `key`'s kept plan if it is at `version`, for the writer to change (its routes
    /// are shared, so the copy is cheap, and a change copies only the route it changes). The
    /// kept one stays where quotes find it until the writer keeps the changed one back.
    pub(crate) fn take(&self, key: &(String, Date), version: Versions) -> Option<Tentative> {
        let kept = self.kept();
        let k = kept.get(key).filter(|k| k.version == version)?;
        Some(Tentative::clone(&k.plan))
    }

    /// Keeps `plan` as `key`'s at `version`, unless a later version is kept already (a quote
    /// that read an older one meanwhile must not replace it).
    pub(crate) fn keep(&self, key: (String, Date), version: Versions, plan: Arc<Tentative>, writer: bool) {
        let mut kept = self.kept();
        if !writer && kept.get(&key).is_some_and(|k| k.version > version) {
            return;
        }
        kept.insert(key, Kept { version, checked: Instant::now(), plan });
    }

    /// Has every kept plan checked against its stored versions at its next read (a quote about
    /// to refuse wants room as it is now, not as it was up to a second ago).
    pub fn recheck(&self) {
        let long_ago = Instant::now().checked_sub(TRUSTED).unwrap_or_else(Instant::now);
        for k in self.kept().values_mut() {
            k.checked = long_ago;
        }
    }

    /// Forgets every kept plan: this process changed the fleet (other processes see the
    /// generation move within a second).
    pub fn forget(&self) {
        self.kept().clear();
    }
}

/// One stop an order books: the visit, its drop-off's index in the order, the order's index
/// in the batch.
pub(crate) type Booking = (Visit, Option<usize>, usize);

/// A day's stops to place, by (depot, date).
pub(crate) type Days = BTreeMap<(String, Date), Vec<Booking>>;

/// A day locked for a change: the versions it is now at, its plan, and what fits it no longer.
pub(crate) type Locked = (Versions, Tentative, Vec<(Visit, tentative::Binding)>);

/// A row read: the visit, its stored place, its unique id.
pub(crate) type ReadRow = (Visit, Option<(String, f64)>, String);

/// The visits an order books on fleet depots, by (depot, date) in a fixed order (the order the
/// days' rows are locked in): each with its drop-off's index in the order and its row id.
pub(crate) fn by_day<'a>(reservations: impl IntoIterator<Item = (&'a Reservation, i64, usize)>) -> Days {
    let mut days: Days = BTreeMap::new();
    for (r, id, order) in reservations {
        if let Some(f) = &r.fleet {
            let visit = Visit { id, ..f.visit };
            days.entry((f.depot.clone(), r.at.date)).or_default().push((visit, r.drop_off, order));
        }
    }
    days
}

/// Places `visits` in `plan` in order; the first that fits nowhere refuses the order it
/// belongs to (its index among the batch's orders, and the drop-off).
pub(crate) fn place(plan: &mut Tentative, visits: &[Booking]) -> Result<Vec<Change>, (usize, CreateOrderError)> {
    let mut changes = Vec::new();
    for (v, drop_off, order) in visits {
        match plan.insert(*v) {
            Ok((_, mut c)) => changes.append(&mut c),
            Err(_) => return Err((*order, CreateOrderError::SlotFull { drop_off: *drop_off })),
        }
    }
    Ok(changes)
}

/// The rows of a day's tentative plan (`PostgreSQL`'s placeholders; `SQLite` reads them as
/// `?1`…): each live drop-off of the depot and date a delivery plan would take, with its route
/// and order key when it has one on this date. Parameters: depot, date, live mode, the stop
/// kind (bound), then the statuses left out.
pub(crate) fn rows_sql() -> String {
    let skipped = crate::plans::delivery_skipped();
    format!(
        "SELECT x.id, x.unique_id, x.start_at, x.end_at, x.address_json, {parcels}, $4, f.driver_id, f.seq
         FROM drop_off_shipments x
         LEFT JOIN fleet_stops f ON f.drop_off_shipment_id = x.id AND f.depot = $1 AND f.date = $2
         WHERE x.scheduled_date = $2 AND x.warehouse = $1 AND x.mode = $3 AND x.status NOT IN ({list})
         ORDER BY x.id",
        parcels = crate::plans::drop_off_parcels("x"),
        list = crate::plans::placeholders('$', 5, skipped.len()),
    )
}

/// [`rows_sql`]'s parameters.
pub(crate) fn rows_params<'a>(depot: &'a str, date: &'a str) -> Vec<&'a str> {
    [depot, date, crate::Mode::Live.as_str(), dropslot_core::dispatch::StopKind::DropOff.as_str()]
        .into_iter()
        .chain(crate::plans::delivery_skipped())
        .collect()
}

/// One drop-off's place and load (`PostgreSQL`'s placeholders): its address JSON, live parcels
/// and their weight in milligrams.
pub(crate) fn visit_sql() -> String {
    format!("SELECT x.address_json, {} FROM drop_off_shipments x WHERE x.id = $1", crate::plans::drop_off_parcels("x"))
}

/// A drop-off's visit in the window `from..to` from [`visit_sql`]'s columns.
pub(crate) fn visit_from(
    id: i64,
    (address, parcels, weight_mg): (String, i64, i64),
    from: i64,
    to: i64,
) -> Result<Visit, StoreError> {
    let a: crate::StoredDropOffAddress =
        serde_json::from_str(&address).map_err(|e| StoreError::Corrupt(format!("drop-off {id}: address: {e}")))?;
    let at = dropslot_core::geo::distance::LatLng::new(a.lat, a.lng)
        .map_err(|_| StoreError::Corrupt(format!("drop-off {id}: coordinates out of range")))?;
    let parcels = u32::try_from(parcels).map_err(|_| StoreError::Corrupt(format!("drop-off {id}: parcel count")))?;
    Ok(Visit { id, at, from, to, parcels, grams: (weight_mg.max(0) + 999) / 1000 })
}

/// One row: the drop-off's id, its candidate columns, and its route and order key.
pub(crate) type Row = (i64, crate::plans::CandidateColumns, Option<String>, Option<f64>);

/// A row as a visit and its stored place, and its unique id.
pub(crate) fn visit_row(row: Row) -> Result<ReadRow, StoreError> {
    let (id, columns, driver, seq) = row;
    let c: Candidate = crate::plans::candidate(columns)?;
    let visit = Visit { id, at: c.at, from: c.from, to: c.to, parcels: c.parcels, grams: c.grams };
    Ok((visit, driver.zip(seq), c.unique_id))
}

/// Builds a depot's plan of `date` from its drivers and rows, leaving out the drop-offs in
/// `placing` (the order being written places them itself). `None` when the depot does not
/// book on its fleet.
pub(crate) fn assemble(
    rules: &Rules,
    depot: &str,
    date: Date,
    drivers: &[crate::StoredDriver],
    rows: Vec<Row>,
    placing: &[i64],
) -> Result<Option<Assembled>, StoreError> {
    let Some(d) = rules.fleet_depot(depot) else { return Ok(None) };
    let vans = drivers.iter().filter_map(|s| tentative::van(&s.id, &s.driver, date, &d.tz)).collect();
    let mut visits = Vec::with_capacity(rows.len());
    for row in rows {
        let (v, at, _) = visit_row(row)?;
        if !placing.contains(&v.id) {
            visits.push((v, at));
        }
    }
    let assembled = Tentative::assemble(d.at, d.model, d.service, vans, visits);
    if !assembled.unplaced.is_empty() {
        tracing::warn!(
            depot,
            %date,
            unplaced = assembled.unplaced.len(),
            binds = ?assembled.unplaced.iter().map(|(_, b)| b.as_str()).collect::<Vec<_>>(),
            "booked drop-offs no longer fit the depot's fleet on this date"
        );
    }
    Ok(Some(assembled))
}

#[async_trait]
pub trait TentativeStore: Send + Sync + 'static {
    /// The tentative plan of fleet depot `depot` on `date` (the drop-offs booked, on the
    /// routes of the drivers working it), as this process keeps it: checked against the
    /// stored version at most once a second. `None` when the depot does not book on its fleet.
    async fn tentative_plan(&self, depot: &str, date: Date) -> StoreResult<Option<Arc<Tentative>>>;
    /// As [`TentativeStore::tentative_plan`], with the versions it was read at (what
    /// [`TentativeStore::improve_tentative`] writes over).
    async fn tentative_versioned(&self, depot: &str, date: Date) -> StoreResult<Option<(Versions, Arc<Tentative>)>>;
    /// Writes `plan` (the same drop-offs on better routes, found by the solver from the plan
    /// read at `at`) as the day's tentative plan, if nothing changed the day or the fleet since
    /// `at`: every stop's row rewritten, the day's version raised. False when something did
    /// (nothing written).
    async fn improve_tentative(&self, depot: &str, date: Date, at: Versions, plan: Tentative) -> StoreResult<bool>;
    /// Has the kept plans checked against their stored versions at their next read.
    async fn recheck_tentative(&self);
    /// Its routes as (driver id, drop-off unique ids in order): where a day plan starts.
    async fn tentative_routes(&self, depot: &str, date: Date) -> StoreResult<Vec<(String, Vec<String>)>>;
    /// The live drop-offs of `depot` on `date` held for the dispatcher (the fleet could not
    /// route them and no later slot had room, or `[dispatch] unplaced = "hold"`): unique id,
    /// why, and since when (as stored), oldest first.
    async fn held(&self, depot: &str, date: Date) -> StoreResult<Vec<(String, String, String)>>;
}

/// [`TentativeStore::held`]'s statement (`PostgreSQL`'s placeholders): depot, date, live mode,
/// then the statuses left out.
pub(crate) fn held_sql() -> String {
    let skipped = crate::plans::delivery_skipped();
    format!(
        "SELECT unique_id, coalesce(unplaced_reason, ''), unplaced_at FROM drop_off_shipments
         WHERE warehouse = $1 AND scheduled_date = $2 AND mode = $3 AND unplaced_at IS NOT NULL
           AND status NOT IN ({}) ORDER BY unplaced_at, id",
        crate::plans::placeholders('$', 4, skipped.len())
    )
}

/// [`held_sql`]'s parameters.
pub(crate) fn held_params<'a>(depot: &'a str, date: &'a str) -> Vec<&'a str> {
    [depot, date, crate::Mode::Live.as_str()].into_iter().chain(crate::plans::delivery_skipped()).collect()
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: TentativeStore> TentativeStore for crate::trace::Traced<S> {
    async fn tentative_plan(&self, depot: &str, date: Date) -> StoreResult<Option<Arc<Tentative>>> {
        self.trace.hit("TentativeStore::tentative_plan");
        self.inner.tentative_plan(depot, date).await
    }

    async fn tentative_versioned(&self, depot: &str, date: Date) -> StoreResult<Option<(Versions, Arc<Tentative>)>> {
        self.trace.hit("TentativeStore::tentative_versioned");
        self.inner.tentative_versioned(depot, date).await
    }

    async fn improve_tentative(&self, depot: &str, date: Date, at: Versions, plan: Tentative) -> StoreResult<bool> {
        self.trace.hit("TentativeStore::improve_tentative");
        self.inner.improve_tentative(depot, date, at, plan).await
    }

    async fn recheck_tentative(&self) {
        self.trace.hit("TentativeStore::recheck_tentative");
        self.inner.recheck_tentative().await;
    }

    async fn tentative_routes(&self, depot: &str, date: Date) -> StoreResult<Vec<(String, Vec<String>)>> {
        self.trace.hit("TentativeStore::tentative_routes");
        self.inner.tentative_routes(depot, date).await
    }

    async fn held(&self, depot: &str, date: Date) -> StoreResult<Vec<(String, String, String)>> {
        self.trace.hit("TentativeStore::held");
        self.inner.held(depot, date).await
    }
}

/// The routes of `plan` by unique id, from the rows it was read from.
pub(crate) fn routes_by_unique_id(plan: &Tentative, rows: &[(i64, String)]) -> Vec<(String, Vec<String>)> {
    let ids: HashMap<i64, &String> = rows.iter().map(|(id, u)| (*id, u)).collect();
    plan.routes()
        .into_iter()
        .map(|(driver, visits)| (driver, visits.iter().filter_map(|id| ids.get(id).map(|u| (*u).clone())).collect()))
        .collect()
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
