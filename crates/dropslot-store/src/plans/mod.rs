//! Day plans in storage (CONTRACT §12), shared by both backends: what a plan row reads as,
//! the shipments a plan may take, and the outcomes of a write. The rules are the core's
//! (`dropslot_core::dispatch`); this only loads and persists.

use crate::cache::PlanCache;
use crate::{Mode, StoreError, StoreResult, StoredDropOffAddress, StoredEta, StoredPickUpAddress, StoredPlan};
use async_trait::async_trait;
use dropslot_core::dispatch::{
    self, Candidate, Candidate as PlanCandidate, Plan, PlanKind, PlanPhase, PlanStatus, StopKind,
};
use dropslot_core::geo::distance::LatLng;
use dropslot_core::shipments::Status;
use jiff::civil::Date;
use std::sync::Arc;

/// A plan just loaded for a driver call, remembered in `cache` and given if it is still
/// published (it may have been withdrawn since its version was listed).
pub(crate) fn keep_published(cache: &PlanCache, loaded: Option<StoredPlan>) -> Option<Arc<StoredPlan>> {
    let plan = loaded.filter(|p| p.plan.status == PlanStatus::Published)?;
    let plan = Arc::new(plan);
    cache.put(&plan.plan.id, plan.version, Arc::clone(&plan));
    Some(plan)
}

/// How a plan write went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaveOutcome {
    /// Written; the new version.
    Saved(i64),
    /// The plan changed since it was read (or is gone): read it again.
    Stale,
    /// This shipment is already in a route of another published plan.
    Taken(String),
}

/// Errors inside a write's transaction that roll it back but are answers, not failures.
#[derive(Debug)]
pub(crate) enum SaveError {
    Store(StoreError),
    Stale,
    Taken(String),
}

impl From<StoreError> for SaveError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl SaveError {
    pub(crate) fn outcome(r: Result<i64, SaveError>) -> Result<SaveOutcome, StoreError> {
        match r {
            Ok(v) => Ok(SaveOutcome::Saved(v)),
            Err(SaveError::Stale) => Ok(SaveOutcome::Stale),
            Err(SaveError::Taken(s)) => Ok(SaveOutcome::Taken(s)),
            Err(SaveError::Store(e)) => Err(e),
        }
    }
}

/// A depot's day on the dispatcher's board: the live shipments of one kind, zone and slot
/// that a plan of that kind would take (not final; for deliveries, not `failed` nor being
/// returned: the board lists those apart), and how many of them are in a route of a published
/// plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardCount {
    pub kind: PlanKind,
    /// The drop-offs' zone; empty for pick-ups (they belong to the depot, not a zone).
    pub zone: String,
    pub slot: String,
    pub shipments: i64,
    pub published: i64,
}

/// The board's counts, written for `param`; its parameters are [`board_params`].
pub(crate) fn board_sql(param: char) -> String {
    let skipped = skipped_statuses(PlanKind::Delivery).len();
    let left_out = placeholders(param, 6, skipped);
    let finals = final_placeholders(param, 6 + skipped);
    let published = |alias: &str| {
        format!(
            "sum(CASE WHEN EXISTS (SELECT 1 FROM published_stops s WHERE s.shipment_unique_id = {alias}.unique_id) THEN 1 ELSE 0 END)"
        )
    };
    format!(
        "SELECT {p}4, d.zone_code, d.slot_code, count(*), {pd}
         FROM drop_off_shipments d
         WHERE d.scheduled_date = {p}2 AND d.warehouse = {p}1 AND d.mode = {p}3 AND d.status NOT IN ({left_out})
         GROUP BY d.zone_code, d.slot_code
         UNION ALL
         SELECT {p}5, '', u.slot_code, count(*), {pu}
         FROM pick_up_shipments u
         WHERE u.scheduled_date = {p}2 AND u.mode = {p}3 AND u.status NOT IN ({finals})
           AND (SELECT d.warehouse FROM drop_off_shipments d WHERE d.pick_up_shipment_id = u.id ORDER BY d.id LIMIT 1) = {p}1
         GROUP BY u.slot_code
         ORDER BY 1, 2, 3",
        pd = published("d"),
        pu = published("u"),
        p = param,
    )
}

/// [`board_sql`]'s parameters in order, all text: the depot, the date, the live mode, the plan
/// kinds that tag its rows, the statuses a delivery plan leaves out, then the final statuses.
pub(crate) fn board_params<'a>(depot: &'a str, date: &'a str) -> Vec<&'a str> {
    [depot, date, Mode::Live.as_str(), PlanKind::Delivery.as_str(), PlanKind::PickUp.as_str()]
        .into_iter()
        .chain(skipped_statuses(PlanKind::Delivery))
        .chain(final_statuses())
        .collect()
}

/// A board row from its columns (kind, zone, slot, shipments, published).
pub(crate) fn board_row(
    kind: &str,
    zone: String,
    slot: String,
    shipments: i64,
    published: i64,
) -> Result<BoardCount, StoreError> {
    let kind = PlanKind::parse(kind).ok_or_else(|| StoreError::Corrupt(format!("board: kind {kind}")))?;
    Ok(BoardCount { kind, zone, slot, shipments, published })
}

/// The final statuses (the core's rule), bound for `NOT IN`.
fn final_statuses() -> Vec<&'static str> {
    Status::ALL.into_iter().filter(|s| s.is_final()).map(Status::as_str).collect()
}

/// `{param}first, …`: `count` numbered placeholders from `first`.
pub(crate) fn placeholders(param: char, first: usize, count: usize) -> String {
    (first..).take(count).map(|n| format!("{param}{n}")).collect::<Vec<_>>().join(", ")
}

/// A placeholder for each final status, numbered from `first`.
fn final_placeholders(param: char, first: usize) -> String {
    placeholders(param, first, final_statuses().len())
}

/// The statuses a plan of `kind` leaves out of its drop-off or pick-up shipments (the core's
/// rules), bound for `NOT IN`. Return stops are chosen by their one status instead.
/// The statuses a delivery plan (and a tentative plan) leaves out, by name.
pub(crate) fn delivery_skipped() -> Vec<&'static str> {
    skipped_statuses(PlanKind::Delivery)
}

fn skipped_statuses(kind: PlanKind) -> Vec<&'static str> {
    match kind {
        PlanKind::Delivery => {
            Status::ALL.into_iter().filter(|s| dispatch::left_out_of_deliveries(*s)).map(Status::as_str).collect()
        }
        PlanKind::PickUp => final_statuses(),
    }
}

/// A drop-off shipment's parcel columns (live parcels, their weight in milligrams), of the
/// shipment aliased `alias`.
pub(crate) fn drop_off_parcels(alias: &str) -> String {
    format!(
        "(SELECT count(*) FROM parcels p WHERE p.drop_off_shipment_id = {alias}.id AND p.deleted_at IS NULL),
         (SELECT CAST(coalesce(sum(p.weight_mg), 0) AS BIGINT) FROM parcels p
           WHERE p.drop_off_shipment_id = {alias}.id AND p.deleted_at IS NULL)"
    )
}

/// The candidates of a plan of `kind`; its parameters are [`candidate_params`].
/// `PostgreSQL`'s placeholders; `SQLite` reads them as `?1`… ([`sqlite_placeholders`]).
/// A row's last column is its stop's kind (bound: the core's names).
pub(crate) fn plan_candidates_sql(kind: PlanKind) -> String {
    // Not in a route of another published plan.
    let unpublished = |alias: &str| {
        format!(
            "NOT EXISTS (SELECT 1 FROM published_stops s WHERE s.shipment_unique_id = {alias}.unique_id AND s.plan_id <> $3)"
        )
    };
    match kind {
        PlanKind::Delivery => format!(
            "SELECT x.unique_id, x.start_at, x.end_at, x.address_json, {parcels}, $5
             FROM drop_off_shipments x
             WHERE x.scheduled_date = $2 AND x.warehouse = $1 AND x.mode = $4 AND x.status NOT IN ({skipped})
               AND {free}
             ORDER BY x.id",
            parcels = drop_off_parcels("x"),
            skipped = placeholders('$', 6, skipped_statuses(kind).len()),
            free = unpublished("x"),
        ),
        // A pick-up belongs to the depot of its first drop-off's zone. A return stop is a
        // drop-off shipment of the depot going back to its merchant on its return slot's date,
        // at its order's pick-up address.
        PlanKind::PickUp => format!(
            "SELECT u.unique_id, u.start_at, u.end_at, u.address_json,
                (SELECT count(*) FROM parcels p JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id
                  WHERE d.pick_up_shipment_id = u.id AND p.deleted_at IS NULL),
                (SELECT CAST(coalesce(sum(p.weight_mg), 0) AS BIGINT) FROM parcels p
                  JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id
                  WHERE d.pick_up_shipment_id = u.id AND p.deleted_at IS NULL),
                $5
             FROM pick_up_shipments u
             WHERE u.scheduled_date = $2 AND u.mode = $4 AND u.status NOT IN ({skipped})
               AND (SELECT d.warehouse FROM drop_off_shipments d WHERE d.pick_up_shipment_id = u.id ORDER BY d.id LIMIT 1) = $1
               AND {pick_up_free}
             UNION ALL
             SELECT x.unique_id, x.return_start_at, x.return_end_at, r.address_json, {return_parcels}, $6
             FROM drop_off_shipments x JOIN pick_up_shipments r ON r.id = x.pick_up_shipment_id
             WHERE x.return_date = $2 AND x.warehouse = $1 AND x.mode = $4 AND x.status = $7
               AND {return_free}
             ORDER BY 7, 1",
            return_parcels = drop_off_parcels("x"),
            skipped = placeholders('$', 8, skipped_statuses(kind).len()),
            pick_up_free = unpublished("u"),
            return_free = unpublished("x"),
        ),
    }
}

/// [`plan_candidates_sql`]'s parameters in order, all text: the depot, the date, the plan whose
/// own published stops are still its candidates (`''` for a new plan), the live mode, the stop
/// kind of its rows (of a pick-up plan: then the return stops' kind and status), then the
/// statuses it leaves out.
pub(crate) fn candidate_params<'a>(kind: PlanKind, depot: &'a str, date: &'a str, plan: &'a str) -> Vec<&'a str> {
    let kinds: &[&'static str] = match kind {
        PlanKind::Delivery => &[StopKind::DropOff.as_str()],
        PlanKind::PickUp => &[StopKind::PickUp.as_str(), StopKind::Return.as_str(), dispatch::RETURNING.as_str()],
    };
    [depot, date, plan, Mode::Live.as_str()]
        .into_iter()
        .chain(kinds.iter().copied())
        .chain(skipped_statuses(kind))
        .collect()
}

/// `$1` → `?1`: the same numbered parameters in `SQLite`'s spelling (the SQL has no other `$`).
pub(crate) fn sqlite_placeholders(sql: &str) -> String {
    sql.replace('$', "?")
}

/// One candidate row: unique id, window start and end (ISO 8601), the address JSON (a
/// drop-off's, or a pick-up's for a pick-up or a return), live parcels, their weight in
/// milligrams, and the stop's kind.
pub(crate) type CandidateColumns = (String, String, String, String, i64, i64, String);

/// A candidate row read into the core's terms. A row that does not parse is an error.
pub(crate) fn candidate(row: CandidateColumns) -> Result<Candidate, StoreError> {
    let (unique_id, start_at, end_at, address_json, parcels, weight_mg, kind) = row;
    let corrupt = |what: &str| StoreError::Corrupt(format!("shipment {unique_id}: {what}"));
    let time = |t: &str| {
        t.parse::<jiff::Timestamp>().map(jiff::Timestamp::as_second).map_err(|e| corrupt(&format!("window {t:?}: {e}")))
    };
    let (from, to) = (time(&start_at)?, time(&end_at)?);
    let kind = StopKind::parse(&kind).ok_or_else(|| corrupt(&format!("stop kind {kind:?}")))?;
    let (text, at, receiver, phone) = match kind {
        StopKind::DropOff => {
            let a: StoredDropOffAddress =
                serde_json::from_str(&address_json).map_err(|e| corrupt(&format!("address: {e}")))?;
            let at = LatLng::new(a.lat, a.lng).map_err(|_| corrupt("coordinates out of range"))?;
            (a.text, at, a.person_name.unwrap_or_default(), a.person_phone.unwrap_or_default())
        }
        StopKind::PickUp | StopKind::Return => {
            let a: StoredPickUpAddress =
                serde_json::from_str(&address_json).map_err(|e| corrupt(&format!("address: {e}")))?;
            let at = LatLng::parse(&a.lat, &a.lng).ok_or_else(|| corrupt("coordinates"))?;
            (a.text, at, a.person_name.unwrap_or_default(), a.person_phone.unwrap_or_default())
        }
        StopKind::Depot => return Err(corrupt("a depot is no shipment's stop")),
    };
    let parcels = u32::try_from(parcels).map_err(|_| corrupt("parcel count"))?;
    Ok(Candidate {
        unique_id,
        kind,
        at,
        from,
        to,
        parcels,
        // Grams, rounded up: a vehicle's capacity is never exceeded by rounding.
        grams: (weight_mg.max(0) + 999) / 1000,
        address: text,
        receiver,
        phone,
    })
}

/// A plan row: id, status, version and JSON. A `solving` row has no plan yet (`None`).
pub(crate) fn plan_row(
    id: &str,
    status: &str,
    version: i64,
    json: Option<&str>,
) -> Result<Option<StoredPlan>, StoreError> {
    let expected = match PlanPhase::parse(status) {
        Some(PlanPhase::Solving) => return Ok(None),
        Some(PlanPhase::Solved(expected)) => expected,
        None => return Err(StoreError::Corrupt(format!("plan {id}: status {status:?}"))),
    };
    let json = json.ok_or_else(|| StoreError::Corrupt(format!("plan {id}: {status} without its routes")))?;
    let plan: Plan = serde_json::from_str(json).map_err(|e| StoreError::Corrupt(format!("plan {id}: {e}")))?;
    if plan.id != id || plan.status != expected {
        return Err(StoreError::Corrupt(format!("plan {id}: its row and its document disagree")));
    }
    Ok(Some(StoredPlan { plan, version }))
}

/// The plan's JSON and its status column.
pub(crate) fn plan_json(plan: &Plan) -> Result<(String, &'static str), StoreError> {
    let json = serde_json::to_string(plan).map_err(|e| StoreError::Corrupt(format!("plan {}: {e}", plan.id)))?;
    Ok((json, plan.status.as_str()))
}

#[async_trait]
pub trait PlanStore: Send + Sync + 'static {
    /// The live shipments of `kind` for depot `depot` on `date` that are not final and not in
    /// a route of a published plan other than `plan`, oldest first.
    async fn plan_candidates(
        &self,
        kind: PlanKind,
        depot: &str,
        date: Date,
        plan: Option<&str>,
    ) -> StoreResult<Vec<PlanCandidate>>;
    /// Opens plan `id` for solving. False when another plan of the same depot, date and kind
    /// is open: a draft, or one being solved that started less than `lease_ms` ago (an older
    /// one was left by a crashed process and is taken over). One wins a race, across
    /// processes too.
    async fn begin_plan(
        &self,
        id: &str,
        depot: &str,
        date: Date,
        kind: PlanKind,
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<bool>;
    /// Drops a plan that is still being solved (its solving failed).
    async fn abandon_plan(&self, id: &str) -> StoreResult<()>;
    /// Writes a solved draft over its `solving` row, as version 1. False when the row is gone
    /// (taken over after its lease).
    async fn finish_plan(&self, plan: &Plan) -> StoreResult<bool>;
    async fn plan(&self, id: &str) -> StoreResult<Option<StoredPlan>>;
    /// Every solved plan of `date`, drafts and published.
    async fn plans_on(&self, date: Date) -> StoreResult<Vec<StoredPlan>>;
    /// The depot's live shipments of `date` that are not final, counted by kind, zone and
    /// slot, with how many are in a published route (the dispatcher's board).
    async fn board_counts(&self, depot: &str, date: Date) -> StoreResult<Vec<BoardCount>>;
    /// Writes `plan` over version `version`. A published plan's routes and stops are
    /// rewritten in the same transaction; a shipment in another published plan's route
    /// refuses the whole write.
    async fn save_plan(&self, plan: &Plan, version: i64) -> StoreResult<SaveOutcome>;
    /// Deletes a draft at `version`; false when it is not a draft at that version.
    async fn delete_plan(&self, id: &str, version: i64) -> StoreResult<bool>;
    /// Replaces the live ETAs of route `route_id` with `etas` (shipment, ETA), in one
    /// transaction (CONTRACT §14), and in it what the re-timing tells the recipients (CONTRACT
    /// §16): the window each was last told, and the `new_time` messages, with a `next_stop`
    /// one for each of `next_stops` (shipment, minutes to its arrival). How many messages are
    /// pending.
    async fn save_etas(
        &self,
        route_id: &str,
        etas: Vec<(String, StoredEta)>,
        next_stops: Vec<(String, u32)>,
        now: jiff::Timestamp,
    ) -> StoreResult<usize>;
    /// The live ETAs of `route_id`'s drop-offs not served yet (the live board).
    async fn route_etas(&self, route_id: &str) -> StoreResult<Vec<(String, StoredEta)>>;
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: PlanStore> PlanStore for crate::trace::Traced<S> {
    async fn plan_candidates(
        &self,
        kind: PlanKind,
        depot: &str,
        date: Date,
        plan: Option<&str>,
    ) -> StoreResult<Vec<PlanCandidate>> {
        self.trace.hit("PlanStore::plan_candidates");
        self.inner.plan_candidates(kind, depot, date, plan).await
    }

    async fn begin_plan(
        &self,
        id: &str,
        depot: &str,
        date: Date,
        kind: PlanKind,
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<bool> {
        self.trace.hit("PlanStore::begin_plan");
        self.inner.begin_plan(id, depot, date, kind, now_ms, lease_ms).await
    }

    async fn abandon_plan(&self, id: &str) -> StoreResult<()> {
        self.trace.hit("PlanStore::abandon_plan");
        self.inner.abandon_plan(id).await
    }

    async fn finish_plan(&self, plan: &Plan) -> StoreResult<bool> {
        self.trace.hit("PlanStore::finish_plan");
        self.inner.finish_plan(plan).await
    }

    async fn plan(&self, id: &str) -> StoreResult<Option<StoredPlan>> {
        self.trace.hit("PlanStore::plan");
        self.inner.plan(id).await
    }

    async fn plans_on(&self, date: Date) -> StoreResult<Vec<StoredPlan>> {
        self.trace.hit("PlanStore::plans_on");
        self.inner.plans_on(date).await
    }

    async fn board_counts(&self, depot: &str, date: Date) -> StoreResult<Vec<BoardCount>> {
        self.trace.hit("PlanStore::board_counts");
        self.inner.board_counts(depot, date).await
    }

    async fn save_plan(&self, plan: &Plan, version: i64) -> StoreResult<SaveOutcome> {
        self.trace.hit("PlanStore::save_plan");
        self.inner.save_plan(plan, version).await
    }

    async fn delete_plan(&self, id: &str, version: i64) -> StoreResult<bool> {
        self.trace.hit("PlanStore::delete_plan");
        self.inner.delete_plan(id, version).await
    }

    async fn save_etas(
        &self,
        route_id: &str,
        etas: Vec<(String, StoredEta)>,
        next_stops: Vec<(String, u32)>,
        now: jiff::Timestamp,
    ) -> StoreResult<usize> {
        self.trace.hit("PlanStore::save_etas");
        self.inner.save_etas(route_id, etas, next_stops, now).await
    }

    async fn route_etas(&self, route_id: &str) -> StoreResult<Vec<(String, StoredEta)>> {
        self.trace.hit("PlanStore::route_etas");
        self.inner.route_etas(route_id).await
    }
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
