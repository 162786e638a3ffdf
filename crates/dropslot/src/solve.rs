//! `dropslot solve FILE`: the route solver on a benchmark instance (CONTRACT §12). Reads the
//! file, solves on the wall clock, has the independent checker judge the routes, prints JSON.

use std::path::Path;
use std::time::Instant;

use dropslot_core::routing::{self, Instance, Solution};

/// Solves the instance in `path` within `time_limit` seconds; the one JSON line on success,
/// otherwise the one-line reason (`FILE:LINE: …` for a malformed file).
pub fn run(path: &Path, time_limit: f64, seed: u64) -> Result<String, String> {
    let began = Instant::now();
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let instance = routing::parse(&text).map_err(|e| format!("{shown}:{}: {}", e.line, e.reason))?;
    // The limit counts from the start, reading included; the solver asks after each step.
    let mut budget = |_: u64| began.elapsed().as_secs_f64() / time_limit;
    let solution = routing::solve(&instance, seed, &mut budget);
    let seconds = began.elapsed().as_secs_f64();
    if let Some((u, reason)) = solution.unassigned.first() {
        return Err(format!(
            "{shown}: no feasible solution: {} customer(s) left out, first customer {} ({})",
            solution.unassigned.len(),
            instance.nodes[*u].id,
            reason.describe()
        ));
    }
    let verdict = routing::check(&instance, &solution.routes, &[]);
    if !verdict.feasible() || verdict.cost != solution.cost {
        // A solver bug: never print routes the checker refuses.
        return Err(format!("{shown}: the solver's routes fail the check: {}", verdict.violations.join("; ")));
    }
    Ok(line(&instance, &solution, seconds))
}

/// `{"routes":…,"cost":…,"seconds":…}` in the contract's key order.
fn line(instance: &Instance, solution: &Solution, seconds: f64) -> String {
    let routes: Vec<Vec<u32>> =
        solution.routes.iter().map(|r| r.iter().map(|&c| instance.nodes[c].id).collect()).collect();
    let routes = serde_json::to_string(&routes).unwrap_or_default();
    // Tenths to the file's unit with exactly one decimal: 8273 → 827.3.
    let cost = routing::show_tenths(solution.cost);
    format!("{{\"routes\":{routes},\"cost\":{cost},\"seconds\":{seconds:.3}}}")
}
