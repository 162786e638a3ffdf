//! Ruin and recreate after Christiaens & Vanden Berghe's SISR (Transportation Science, 2020):
//! remove a few strings of customers near one another, put them back by cheapest feasible
//! insertion with blinks, and accept the result by simulated annealing.

use super::rng::Rng;
use super::route::Route;
use super::{Budget, Reason, Solution, alone_infeasible};
use crate::routing::instance::Instance;

/// Average number of customers removed per ruin (SISR's c̄).
const AVERAGE_REMOVED: f64 = 10.0;
/// Longest string removed from one route (SISR's L^max).
const MAX_STRING: f64 = 10.0;
/// Probability of skipping an insertion position (SISR's β).
const BLINK: f64 = 0.01;
/// Start and end temperatures as fractions of the first solution's average edge: a worse
/// solution by that much is accepted with probability 1/e. Measured on Solomon at 2 s: 1.0 →
/// 0.01 halves the gap on the long-route classes (C2, R2, RC2: 2.55 % → 1.18 %) against
/// 0.3 → 0.003, with the short-route classes unchanged (0.15 %).
const HOT: f64 = 1.0;
const COLD: f64 = 0.01;
/// Probability that a step also empties a whole route (the shortest) and forbids opening one:
/// annealing on distance alone rarely leaves a basin with one route too many (Solomon's C2
/// instances stay at four routes where the best known use three).
const ELIMINATE: f64 = 0.01;

#[derive(Clone)]
struct State {
    routes: Vec<Route>,
    unassigned: Vec<usize>,
    cost: i64,
}

impl State {
    fn objective(&self, penalty: i64) -> i64 {
        self.cost + penalty * self.unassigned.len() as i64
    }

    /// Moves every customer of the route with the fewest customers, of those with no fixed
    /// customer, to `unassigned`.
    fn empty_shortest_route(&mut self, pinned: &[bool]) {
        let free = (0..self.routes.len()).filter(|&r| !self.routes[r].visits.iter().any(|&c| pinned[c]));
        let Some(r) = free.min_by_key(|&r| self.routes[r].visits.len()) else { return };
        let route = self.routes.swap_remove(r);
        self.cost -= route.cost;
        self.unassigned.extend(route.visits);
    }

    /// Better for keeping as the answer: fewer customers left out, then shorter.
    fn better_than(&self, other: &State) -> bool {
        (self.unassigned.len(), self.cost) < (other.unassigned.len(), other.cost)
    }
}

pub struct Search<'a> {
    instance: &'a Instance,
    rng: Rng,
    /// For each customer, every other customer by increasing distance.
    neighbours: Vec<Vec<u32>>,
    /// What a customer left out costs in the annealing objective: more than any insertion,
    /// so assigning everyone always pays.
    penalty: i64,
    possible: Vec<usize>,
    impossible: Vec<(usize, Reason)>,
    /// Customers of the instance's fixed routes: never removed, never moved.
    pinned: Vec<bool>,
    /// Fixed routes that break a rule as given: kept as they are, out of the search.
    frozen: Vec<Route>,
    /// The vehicles of the frozen routes.
    taken: Vec<bool>,
}

impl<'a> Search<'a> {
    pub fn new(instance: &'a Instance, seed: u64) -> Self {
        let n = instance.nodes.len();
        let mut neighbours = vec![Vec::new(); n];
        for (c, list) in neighbours.iter_mut().enumerate().skip(1) {
            let mut others: Vec<u32> = (1..n as u32).filter(|&o| o as usize != c).collect();
            others.sort_by_key(|&o| (instance.travel(c, o as usize), o));
            *list = others;
        }
        let longest = (0..n).map(|a| (0..n).map(|b| instance.cost(a, b)).max().unwrap_or(0)).max().unwrap_or(0);
        let mut pinned = vec![false; n];
        for fixed in &instance.fixed {
            for &c in &fixed.visits {
                pinned[c] = true;
            }
        }
        let (mut possible, mut impossible) = (Vec::new(), Vec::new());
        for u in (1..n).filter(|&u| !pinned[u]) {
            match alone_infeasible(instance, u) {
                None => possible.push(u),
                Some(reason) => impossible.push((u, reason)),
            }
        }
        Self {
            instance,
            rng: Rng::new(seed),
            neighbours,
            penalty: 2 * longest + 1,
            possible,
            impossible,
            pinned,
            frozen: Vec::new(),
            taken: vec![false; instance.fleet_size()],
        }
    }

    /// The instance's start routes, each where it keeps every rule on a vehicle not taken
    /// yet and holds only customers still to place (a route that does not is left to the
    /// construction, customer by customer).
    fn seed(&mut self, current: &mut State) {
        let mut used: Vec<bool> = self.taken.clone();
        for r in &current.routes {
            used[r.vehicle] = true;
        }
        for start in self.instance.start.iter().filter(|s| !s.visits.is_empty()) {
            if used.get(start.vehicle).is_none_or(|u| *u)
                || !start.visits.iter().all(|c| current.unassigned.contains(c))
            {
                continue;
            }
            let route = Route::with(self.instance, start.vehicle, start.visits.clone());
            if route.feasible {
                used[start.vehicle] = true;
                current.unassigned.retain(|c| !start.visits.contains(c));
                current.cost += route.cost;
                current.routes.push(route);
            }
        }
    }

    pub fn run(mut self, budget: &mut dyn Budget) -> Solution {
        let mut current = State { routes: Vec::new(), unassigned: self.possible.clone(), cost: 0 };
        for fixed in self.instance.fixed.iter().filter(|f| !f.visits.is_empty()) {
            let route = Route::with(self.instance, fixed.vehicle, fixed.visits.clone());
            if route.feasible {
                current.cost += route.cost;
                current.routes.push(route);
            } else {
                self.taken[fixed.vehicle] = true;
                self.frozen.push(route);
            }
        }
        self.seed(&mut current);
        self.recreate(&mut current, true);
        let mut best = current.clone();
        let edges = (self.possible.len() + current.routes.len()).max(1) as f64;
        let edge = (current.cost as f64 / edges).max(1.0);
        let (hot, cold) = (HOT * edge, COLD * edge);
        let mut iterations = 0;
        loop {
            let spent = budget.spent(iterations);
            if spent >= 1.0 || self.possible.is_empty() {
                break;
            }
            iterations += 1;
            let temperature = hot * (cold / hot).powf(spent);
            let mut candidate = current.clone();
            let eliminate = current.unassigned.is_empty() && current.routes.len() > 1 && self.rng.chance(ELIMINATE);
            if eliminate {
                candidate.empty_shortest_route(&self.pinned);
            }
            self.ruin(&mut candidate);
            self.recreate(&mut candidate, !eliminate);
            if candidate.routes.iter().any(|r| !r.feasible) {
                continue;
            }
            let threshold = current.objective(self.penalty) as f64 - temperature * self.rng.unit().max(1e-300).ln();
            if (candidate.objective(self.penalty) as f64) < threshold {
                if candidate.better_than(&best) {
                    best = candidate.clone();
                }
                current = candidate;
            }
        }
        self.answer(best, iterations)
    }

    fn answer(self, best: State, iterations: u64) -> Solution {
        let mut unassigned = self.impossible;
        unassigned.extend(best.unassigned.iter().map(|&u| (u, Reason::NoVehicleLeft)));
        unassigned.sort_by_key(|(u, _)| *u);
        let cost = best.cost + self.frozen.iter().map(|r| r.cost).sum::<i64>();
        let (mut routes, mut vehicles) = (Vec::new(), Vec::new());
        for r in best.routes.into_iter().chain(self.frozen).filter(|r| !r.visits.is_empty()) {
            vehicles.push(r.vehicle);
            routes.push(r.visits);
        }
        Solution { routes, vehicles, unassigned, cost, iterations }
    }

    /// Removes strings of customers from routes near a random seed customer.
    fn ruin(&mut self, state: &mut State) {
        let assigned = self.possible.len() - state.unassigned.len();
        if assigned == 0 {
            return;
        }
        // Where each customer sits: (route, position); positions stay valid in any route not
        // yet ruined, and a route is ruined at most once.
        let mut place = vec![None; self.instance.nodes.len()];
        for (r, route) in state.routes.iter().enumerate() {
            for (p, &c) in route.visits.iter().enumerate() {
                place[c] = Some((r, p));
            }
        }
        let average = assigned as f64 / state.routes.len().max(1) as f64;
        let longest = MAX_STRING.min(average);
        let most_strings = 4.0 * AVERAGE_REMOVED / (1.0 + longest) - 1.0;
        let strings = (self.rng.unit() * most_strings).floor() as usize + 1;
        let seed = loop {
            let c = self.possible[self.rng.below(self.possible.len())];
            if place[c].is_some() {
                break c;
            }
        };
        let mut ruined = Vec::with_capacity(strings);
        let rng = &mut self.rng;
        for c in std::iter::once(seed as u32).chain(self.neighbours[seed].iter().copied()) {
            if ruined.len() >= strings {
                break;
            }
            let Some((r, p)) = place[c as usize] else { continue };
            if ruined.contains(&r) {
                continue;
            }
            let size = state.routes[r].visits.len();
            let most = (longest.min(size as f64)).max(1.0) as usize;
            let length = 1 + rng.below(most);
            remove_string(rng, state, r, p, length, &self.pinned);
            ruined.push(r);
        }
        for &r in &ruined {
            state.routes[r].refresh(self.instance);
        }
        state.routes.retain(|r| !r.visits.is_empty());
        state.cost = state.routes.iter().map(|r| r.cost).sum();
    }

    /// Puts every unassigned customer back at its cheapest feasible place (skipping each
    /// place with probability [`BLINK`]), opening a route while vehicles remain if `open`.
    fn recreate(&mut self, state: &mut State, open: bool) {
        let mut pending = std::mem::take(&mut state.unassigned);
        self.order(&mut pending);
        let instance = self.instance;
        let mut used = self.taken.clone();
        for route in &state.routes {
            used[route.vehicle] = true;
        }
        for u in pending {
            let mut best: Option<(usize, usize, i64)> = None;
            for (r, route) in state.routes.iter().enumerate() {
                if !route.feasible {
                    continue;
                }
                let rng = &mut self.rng;
                if let Some((p, delta)) = route.best_insertion(instance, u, || rng.chance(BLINK))
                    && best.is_none_or(|(_, _, d)| delta < d)
                {
                    best = Some((r, p, delta));
                }
            }
            match best {
                Some((r, p, delta)) => {
                    state.routes[r].insert(instance, p, u);
                    state.cost += delta;
                }
                None => match open.then(|| self.open_route(&used, u)).flatten() {
                    Some(route) => {
                        used[route.vehicle] = true;
                        state.cost += route.cost;
                        state.routes.push(route);
                    }
                    None => state.unassigned.push(u),
                },
            }
        }
    }

    /// A new route for `u` alone in the unused vehicle where it costs least (the first such
    /// vehicle when several tie, as identical vehicles do), if one can take it.
    fn open_route(&self, used: &[bool], u: usize) -> Option<Route> {
        let mut best: Option<Route> = None;
        let mut tried: Vec<crate::routing::instance::Vehicle> = Vec::new();
        for v in (0..used.len()).filter(|&v| !used[v]) {
            let vehicle = self.instance.vehicle(v);
            if tried.contains(&vehicle) {
                continue;
            }
            tried.push(vehicle);
            let route = Route::with(self.instance, v, vec![u]);
            if route.feasible && best.as_ref().is_none_or(|b| route.cost < b.cost) {
                best = Some(route);
            }
        }
        best
    }

    /// SISR's orders for reinsertion: random, largest demand first, farthest from the depot
    /// first, nearest first (weights 4, 4, 2, 1), plus earliest window end first for VRPTW.
    fn order(&mut self, pending: &mut [usize]) {
        let nodes = &self.instance.nodes;
        let instance = self.instance;
        match self.rng.below(13) {
            0..=3 => {
                for i in (1..pending.len()).rev() {
                    pending.swap(i, self.rng.below(i + 1));
                }
            }
            4..=7 => pending.sort_by_key(|&u| std::cmp::Reverse(nodes[u].demand)),
            8..=9 => pending.sort_by_key(|&u| std::cmp::Reverse(instance.travel(0, u))),
            10 => pending.sort_by_key(|&u| instance.travel(0, u)),
            _ => pending.sort_by_key(|&u| nodes[u].due),
        }
    }
}

/// Removes `length` consecutive customers of route `r` around position `p` or, half the time,
/// a longer string around `p` minus a kept run inside it (SISR's split string; the kept run's
/// length is geometric with ratio 1/2, our choice).
fn remove_string(rng: &mut Rng, state: &mut State, r: usize, p: usize, length: usize, pinned: &[bool]) {
    let visits = &mut state.routes[r].visits;
    let size = visits.len();
    let mut kept = 0;
    if length < size && rng.chance(0.5) {
        kept = 1;
        while length + kept < size && rng.chance(0.5) {
            kept += 1;
        }
    }
    let span = length + kept;
    // The string [first, first + span) holds position p.
    let lowest = (p + 1).saturating_sub(span);
    let highest = p.min(size - span);
    let first = lowest + rng.below(highest - lowest + 1);
    let keep_from = first + if kept > 0 { rng.below(length + 1) } else { span };
    let mut i = 0;
    visits.retain(|&c| {
        let inside = (first..first + span).contains(&i) && !(keep_from..keep_from + kept).contains(&i) && !pinned[c];
        i += 1;
        if inside {
            state.unassigned.push(c);
        }
        !inside
    });
}
