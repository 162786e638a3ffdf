//! The day as it runs (CONTRACT §16, issue 46): a drop-off that becomes plannable for a date
//! whose delivery plan is published (booked after the publish, re-attempted, rescheduled) goes
//! into the published route, not started yet, where it adds the least time without breaking a
//! hard rule; its route's ETAs are re-timed and its driver's app shows it at its next read.
//! Where no such route can take it (or every route has left the depot) it goes to the plan's
//! `unassigned` with the reason, and is rebooked or held like any unplaced shipment.
//!
//! Two ways in: the request that booked it (an order, a reschedule) places it before it
//! answers, when this process knows the day is published; and a sweep every [`EVERY`] over
//! today's and tomorrow's published plans catches the rest (another process's publish, a
//! re-attempt booked by a driver's failure). One placement at a time per process; a plan
//! changed meanwhile by another is read again (its version decides).

use std::collections::HashSet;
use std::time::Duration;

use jiff::civil::Date;

use super::{base, service_time};
use crate::app::App;
use crate::error::{Error, Result};
use crate::roads::Roads;
use dropslot_core::dispatch::late::{self, ALL_LEFT, NO_ROOM};
use dropslot_core::dispatch::{PlanKind, PlanStatus, StopKind, Unassigned};
use dropslot_store::{SaveOutcome, StoredShipment};

/// How often each process sweeps the published days for shipments no route holds yet.
pub const EVERY: Duration = Duration::from_secs(10);

/// Whether this process knows depot `depot`'s delivery plan of `date` to be published.
fn knows(app: &App, depot: &str, date: Date) -> bool {
    app.late.published.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&(depot.to_string(), date))
}

/// Depot `depot`'s delivery plan of `date` is published (this process published it, or the
/// sweep read it).
pub fn published(app: &App, depot: &str, date: Date) {
    app.late.published.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert((depot.to_string(), date));
}

/// What a placement did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Placed {
    /// Shipments put into a route.
    pub routed: Vec<String>,
    /// Shipments put in `unassigned` (then rebooked or held).
    pub unassigned: Vec<String>,
}

/// After an order's drop-offs were written, or a shipment moved to another slot: each one on
/// a day this process knows to be published goes into its plan before the request is
/// answered. Best effort: the booking stands whatever happens here, and the sweep tries again.
pub async fn after_booking(app: &App, booked: impl IntoIterator<Item = (&str, Date)>) {
    if !app.settings.dispatch.auto_insert {
        return;
    }
    let days: HashSet<(String, Date)> = booked
        .into_iter()
        .filter_map(|(zone, date)| {
            let zone = app.settings.area.zone_by_code(zone)?;
            let depot = app.settings.area.zones().get(zone)?.warehouse.clone();
            knows(app, &depot, date).then_some((depot, date))
        })
        .collect();
    for (depot, date) in days {
        if let Err(e) = place(app, &depot, date).await {
            tracing::warn!(%depot, %date, error = %e, "a late shipment was not placed in the published plan");
        }
    }
}

/// [`after_booking`] for an order's drop-off shipments.
pub async fn after_order(app: &App, shipments: &[StoredShipment]) {
    let booked =
        shipments.iter().filter_map(|s| Some((s.drop_off.zone_code.as_str(), s.drop_off.scheduled_date.parse().ok()?)));
    after_booking(app, booked).await;
}

/// Places every live drop-off of depot `depot` on `date` that its published delivery plan
/// holds nowhere yet (see the module's text).
///
/// # Errors
/// The store's, or the routing engine's.
pub async fn place(app: &App, depot: &str, date: Date) -> Result<Placed> {
    let _one = app.late.placing.lock().await;
    for _ in 0..5 {
        let Some(stored) = app.store.plans_on(date).await?.into_iter().find(|p| {
            p.plan.depot == depot && p.plan.kind == PlanKind::Delivery && p.plan.status == PlanStatus::Published
        }) else {
            return Ok(Placed::default());
        };
        published(app, depot, date);
        let plan = &stored.plan;
        let held: HashSet<&str> = plan
            .routes
            .iter()
            .flat_map(dropslot_core::dispatch::Route::shipments)
            .chain(plan.unassigned.iter().map(|u| u.shipment_unique_id.as_str()))
            .collect();
        let new: Vec<_> = app
            .store
            .plan_candidates(PlanKind::Delivery, depot, date, Some(&plan.id))
            .await?
            .into_iter()
            .filter(|c| c.kind == StopKind::DropOff && !held.contains(c.unique_id.as_str()))
            .collect();
        if new.is_empty() {
            return Ok(Placed::default());
        }
        let started = started_routes(app, plan).await?;
        let b = base(app, depot)?;
        let roads = Roads::new(&app.settings.routing);
        let service = service_time(&app.settings.routing);
        let mut next = plan.clone();
        let mut changed = HashSet::new();
        let mut done = Placed::default();
        for c in new {
            let id = c.unique_id.clone();
            let stop = late::stop_for(&b.depot, service, c);
            let mut best: Option<(usize, (i64, i64), dropslot_core::dispatch::Route)> = None;
            for (r, route) in next.routes.iter().enumerate() {
                if started[r] {
                    continue;
                }
                let matrix = roads
                    .matrix(b.model, late::points_with(route, &b.depot, &stop))
                    .await
                    .map_err(crate::roads::error)?;
                if let Some(with) = late::insert_into(route, &b.depot, &stop, &matrix) {
                    let (before, after) = (late::cost(route), late::cost(&with));
                    let added = (after.0 - before.0, after.1 - before.1);
                    if best.as_ref().is_none_or(|(_, a, _)| added < *a) {
                        best = Some((r, added, with));
                    }
                }
            }
            if let Some((r, _, with)) = best {
                next.routes[r] = with;
                changed.insert(r);
                done.routed.push(id);
            } else {
                let reason = if started.iter().all(|s| *s) { ALL_LEFT } else { NO_ROOM };
                next.unassigned.push(Unassigned { shipment_unique_id: id.clone(), reason: reason.into(), stop });
                done.unassigned.push(id);
            }
        }
        match app.store.save_plan(&next, stored.version).await? {
            SaveOutcome::Saved(_) => {}
            SaveOutcome::Stale => continue,
            SaveOutcome::Taken(s) => {
                return Err(Error::Conflict(format!("shipment {s} is in another published route")));
            }
        }
        tracing::info!(plan = %next.id, routed = done.routed.len(), unassigned = done.unassigned.len(), "late shipments placed");
        for r in changed {
            if let Err(e) = crate::eta::refresh(app, depot, &next.routes[r]).await {
                tracing::warn!(route = %next.routes[r].id, error = %e, "the route's ETAs were not re-timed");
            }
        }
        if !done.unassigned.is_empty() {
            app.store.replan_day(depot, date, done.unassigned.clone(), app.clock.now()).await?;
        }
        return Ok(done);
    }
    Err(Error::Conflict("the published plan kept changing; the next sweep places what is left".into()))
}

/// Which of `plan`'s routes have left the depot: a drop-off of theirs is on its way or served.
///
/// # Errors
/// The store's.
pub async fn started_routes(app: &App, plan: &dropslot_core::dispatch::Plan) -> Result<Vec<bool>> {
    let ids: Vec<String> = plan.routes.iter().flat_map(|r| r.shipments().map(String::from)).collect();
    let on_the_road: HashSet<String> = app
        .store
        .progress_of(ids)
        .await?
        .into_iter()
        .filter(|p| late::on_the_road(p.status))
        .map(|p| p.unique_id)
        .collect();
    Ok(plan.routes.iter().map(|r| r.shipments().any(|s| on_the_road.contains(s))).collect())
}

/// Every [`EVERY`] until the service stops: today's and tomorrow's published delivery plans
/// (in each depot's city) get what no route holds yet.
pub async fn run(app: App, mut stopping: tokio::sync::watch::Receiver<bool>) {
    if !app.settings.dispatch.auto_insert {
        return;
    }
    loop {
        tokio::select! {
            () = tokio::time::sleep(EVERY) => {}
            _ = stopping.changed() => return,
        }
        if let Err(e) = sweep(&app).await {
            tracing::warn!(error = %e, "the late-shipment sweep failed");
        }
    }
}

/// One sweep (see [`run`]).
///
/// # Errors
/// The store's.
pub async fn sweep(app: &App) -> Result<usize> {
    let today = app.clock.now().to_zoned(jiff::tz::TimeZone::UTC).date();
    let mut placed = 0;
    for date in [today.yesterday().unwrap_or(today), today, today.tomorrow().unwrap_or(today)] {
        let days: Vec<String> = app
            .store
            .plans_on(date)
            .await?
            .into_iter()
            .filter(|p| p.plan.kind == PlanKind::Delivery && p.plan.status == PlanStatus::Published)
            .map(|p| p.plan.depot)
            .collect();
        for depot in days {
            published(app, &depot, date);
            match place(app, &depot, date).await {
                Ok(p) => placed += p.routed.len() + p.unassigned.len(),
                Err(e) => tracing::warn!(%depot, %date, error = %e, "late shipments were not placed"),
            }
        }
    }
    Ok(placed)
}
