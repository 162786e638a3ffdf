//! reports: what the day's report (CONTRACT §17) reads — a depot's published delivery plans
//! of a range of dates, their drop-offs' events and told ETA windows, and their drivers'
//! positions. It only loads rows; the rules are the core's (`dropslot_core::reports`).

use crate::StoreResult;
use async_trait::async_trait;
use dropslot_core::dispatch::Plan;
use dropslot_core::geo::distance::LatLng;
use dropslot_core::reports::{Event, Told};
use dropslot_core::shipments::Status;
use jiff::civil::Date;

/// Everything a report of a depot's dates is computed from.
#[derive(Debug, Clone, Default)]
pub struct ReportFacts {
    /// The published delivery plans, by date then id.
    pub plans: Vec<Plan>,
    /// Their live drop-offs (a shipment deleted since is absent).
    pub drop_offs: Vec<ReportDropOff>,
    /// The positions of their routes' drivers, oldest first per driver.
    pub positions: Vec<ReportPosition>,
}

/// A drop-off as the report reads it: its zone, its attempt-related events and the windows it
/// was told, each oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportDropOff {
    pub unique_id: String,
    pub zone: String,
    pub events: Vec<Event>,
    pub told: Vec<Told>,
}

/// A driver's reported position, Unix milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportPosition {
    pub driver_id: String,
    pub at_ms: i64,
    pub at: LatLng,
}

/// The statuses whose events a report reads: the route's start, the attempt and a return.
pub(crate) const REPORTED: [Status; 4] = [Status::InTransit, Status::Delivered, Status::Failed, Status::Returned];

#[async_trait]
pub trait ReportStore: Send + Sync + 'static {
    /// Depot `depot`'s published delivery plans dated `from..=to`, their drop-offs (live
    /// shipments: the plans cover nothing else) with their events and told windows, and their
    /// drivers' positions reported in `positions_ms` (`[from, to)`, Unix milliseconds).
    async fn report_facts(
        &self,
        depot: &str,
        from: Date,
        to: Date,
        positions_ms: (i64, i64),
    ) -> StoreResult<ReportFacts>;
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: ReportStore> ReportStore for crate::trace::Traced<S> {
    async fn report_facts(
        &self,
        depot: &str,
        from: Date,
        to: Date,
        positions_ms: (i64, i64),
    ) -> StoreResult<ReportFacts> {
        self.trace.hit("ReportStore::report_facts");
        self.inner.report_facts(depot, from, to, positions_ms).await
    }
}

/// The shipments and drivers of `plans`, each once and in order.
pub(crate) fn members(plans: &[Plan]) -> (Vec<String>, Vec<String>) {
    let mut shipments: Vec<String> =
        plans.iter().flat_map(|p| &p.routes).flat_map(|r| r.shipments().map(String::from)).collect();
    shipments.sort_unstable();
    shipments.dedup();
    let mut drivers: Vec<String> = plans.iter().flat_map(|p| &p.routes).map(|r| r.driver_id.clone()).collect();
    drivers.sort_unstable();
    drivers.dedup();
    (shipments, drivers)
}

/// A stored position's coordinates; ones out of range are corrupt, never dropped.
pub(crate) fn position(driver_id: String, at_ms: i64, lat: f64, lng: f64) -> StoreResult<ReportPosition> {
    let at = LatLng::new(lat, lng)
        .map_err(|_| crate::StoreError::Corrupt(format!("driver {driver_id}: position ({lat}, {lng}) out of range")))?;
    Ok(ReportPosition { driver_id, at_ms, at })
}

/// A stored event's status; an unknown one is corrupt.
pub(crate) fn event(status: &str, at_ms: i64, reason: Option<String>) -> StoreResult<Event> {
    let status = Status::parse(status)
        .ok_or_else(|| crate::StoreError::Corrupt(format!("shipment event: status {status:?}")))?;
    Ok(Event { status, at_ms, reason })
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
