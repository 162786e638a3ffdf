//! The fleet depots' tentative plans improved in the background (issue 45): kept by insertion
//! as orders come, each day's plan is handed now and then to the day plan's solver, started
//! from its own routes, on the solver's thread and paced like a day plan (it steps aside while
//! the API is busy, `plans::pace`). A cheaper plan of the same drop-offs is written only if no
//! order, reschedule or fleet change came in between (`TentativeStore::improve_tentative`
//! compares the versions it was read at); otherwise it is dropped and the day tried again
//! later. Better routes leave more room for the orders still to come.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jiff::civil::Date;

use crate::app::App;
use crate::error::Result;
use dropslot_store::Versions;

/// How often the days are looked at; a day unchanged since its last look is skipped.
pub const EVERY: Duration = Duration::from_secs(30);
/// The search each day gets (paced: it counts while the solver steps aside).
pub const SECONDS: f64 = 2.0;
/// The largest day improved: the solver's road matrix grows with the square of the stops
/// (1,500 stops: 2.25 million legs, 36 MB, about 0.2 s to compute before the paced search
/// begins); a larger day is kept by insertion alone (a depot's day plans are made per depot
/// and rarely reach it: docs/performance.md, "Day-plan creation", plans 1,000 a depot).
pub const MAX_STOPS: usize = 1500;

/// Improves depot `depot`'s tentative plan of `date` once, with `seconds` of search; whether a
/// better plan was written.
///
/// # Errors
/// The store's, or the solver's thread failing to start.
pub async fn improve_day(app: &App, depot: &str, date: Date, seconds: f64) -> Result<bool> {
    let Some((at, plan)) = app.store.tentative_versioned(depot, date).await? else { return Ok(false) };
    if plan.len() < 2 || plan.len() > MAX_STOPS {
        return Ok(false);
    }
    // The same day at the same versions takes the same path.
    let seed = u64::try_from(at.0).unwrap_or(0).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::try_from(at.1).unwrap_or(0);
    let better = crate::plans::on_solver_thread(&app.metrics.solver_paused, Instant::now(), seconds, move |budget| {
        plan.improved(seed, budget)
    })
    .await?;
    match better {
        Some(plan) => Ok(app.store.improve_tentative(depot, date, at, plan).await?),
        None => Ok(false),
    }
}

/// Every [`EVERY`] until the service stops: each fleet depot's days of the booking horizon that
/// changed since their last look, improved one after the other.
pub async fn run(app: App, mut stopping: tokio::sync::watch::Receiver<bool>) {
    let area = &app.settings.area;
    let depots: Vec<String> =
        area.depots().iter().map(|d| d.code.clone()).filter(|c| app.settings.capacity.fleet(c)).collect();
    if depots.is_empty() {
        return;
    }
    let mut looked: HashMap<(String, Date), Versions> = HashMap::new();
    // The first look one period after the start: a day read before a fleet made elsewhere (the
    // CLI, another process) is not kept as the fleet's meanwhile.
    let mut every = tokio::time::interval_at(tokio::time::Instant::now() + EVERY, EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !*stopping.borrow() {
        tokio::select! {
            _ = every.tick() => {}
            _ = stopping.changed() => break,
        }
        let today = app.clock.now().to_zoned(jiff::tz::TimeZone::UTC).date().yesterday().unwrap_or(Date::MIN);
        looked.retain(|(_, date), _| *date >= today);
        for depot in &depots {
            let mut date = today;
            for _ in 0..=area.horizon_days() + 1 {
                if *stopping.borrow() {
                    return;
                }
                let key = (depot.clone(), date);
                match app.store.tentative_versioned(depot, date).await {
                    Ok(Some((at, _))) if looked.get(&key) != Some(&at) => {
                        match improve_day(&app, depot, date, SECONDS).await {
                            Ok(improved) => {
                                if improved {
                                    tracing::debug!(depot, %date, "tentative plan improved");
                                }
                                if let Ok(Some((now, _))) = app.store.tentative_versioned(depot, date).await {
                                    looked.insert(key, now);
                                }
                            }
                            Err(e) => tracing::warn!(depot, %date, error = %e, "improving a tentative plan failed"),
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(depot, %date, error = %e, "reading a tentative plan failed"),
                }
                let Ok(next) = date.tomorrow() else { break };
                date = next;
            }
        }
    }
}
