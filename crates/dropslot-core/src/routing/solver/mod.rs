//! The VRPTW solver: greedy insertion, then ruin-and-recreate with slack-induced string
//! removals (SISR) under simulated annealing. Pure: the time limit comes in as a [`Budget`].

mod rng;
mod route;
mod sisr;

use crate::routing::instance::Instance;

/// How much of its budget the solver has spent; it asks after every iteration. The CLI
/// answers from the wall clock; tests and benchmarks can count iterations, which makes a run
/// fully deterministic for a seed (under a wall-clock limit the same seed follows the same
/// path, but how far it gets depends on the machine).
pub trait Budget {
    /// The fraction spent, from 0.0; the solver stops at 1.0 or more. `iterations` is the
    /// number of ruin-and-recreate steps done so far.
    fn spent(&mut self, iterations: u64) -> f64;
}

/// A budget of a fixed number of iterations.
pub struct Iterations(pub u64);

impl Budget for Iterations {
    fn spent(&mut self, iterations: u64) -> f64 {
        if self.0 == 0 { 1.0 } else { iterations as f64 / self.0 as f64 }
    }
}

impl<F: FnMut(u64) -> f64> Budget for F {
    fn spent(&mut self, iterations: u64) -> f64 {
        self(iterations)
    }
}

/// Why a customer is in no route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Its demand alone exceeds a vehicle's capacity.
    OverCapacity,
    /// A vehicle leaving the depot when it opens arrives after the customer's window closes.
    WindowUnreachable,
    /// Serving it, a vehicle could not be back before the depot closes.
    DepotCloses,
    /// It fits a vehicle on its own, but every vehicle is in use and none had room for it in
    /// the best solution found.
    NoVehicleLeft,
}

impl Reason {
    pub fn describe(&self) -> &'static str {
        match self {
            Self::OverCapacity => "its demand exceeds a vehicle's capacity",
            Self::WindowUnreachable => "its window closes before a vehicle from the depot can reach it",
            Self::DepotCloses => "a vehicle serving it cannot be back before the depot closes",
            Self::NoVehicleLeft => "no vehicle is left with room for it",
        }
    }
}

/// The solver's answer: routes of customer indices into `instance.nodes`, each with its
/// vehicle, the customers left out with their reasons, and the total cost ([`Instance::cost`]:
/// for a benchmark file, the distance = travel time in tenths).
#[derive(Clone, Debug)]
pub struct Solution {
    pub routes: Vec<Vec<usize>>,
    /// The vehicle of each route, in `routes`' order.
    pub vehicles: Vec<usize>,
    pub unassigned: Vec<(usize, Reason)>,
    pub cost: i64,
    pub iterations: u64,
}

impl Solution {
    /// Every customer is in a route.
    pub fn is_complete(&self) -> bool {
        self.unassigned.is_empty()
    }
}

/// Why `u` can be in no route of vehicle `v`, even alone.
pub fn alone_infeasible_in(instance: &Instance, v: usize, u: usize) -> Option<Reason> {
    let (depot, node, vehicle) = (&instance.nodes[0], &instance.nodes[u], instance.vehicle(v));
    let demand = instance.demand(u);
    if demand[0] > vehicle.capacity[0] || demand[1] > vehicle.capacity[1] {
        return Some(Reason::OverCapacity);
    }
    let arrive = vehicle.start + depot.service + instance.travel(0, u);
    if arrive > node.due {
        return Some(Reason::WindowUnreachable);
    }
    if arrive.max(node.ready) + node.service + instance.travel(u, 0) > vehicle.end {
        return Some(Reason::DepotCloses);
    }
    None
}

/// Why `u` can be in no route at all, even alone in any vehicle (the reason of the vehicle
/// that comes closest: the depot closing before a window out of reach before a capacity).
pub fn alone_infeasible(instance: &Instance, u: usize) -> Option<Reason> {
    let mut worst: Option<Reason> = None;
    for v in 0..instance.fleet_size() {
        let reason = alone_infeasible_in(instance, v, u)?;
        if worst.as_ref().is_none_or(|w| closeness(&reason) > closeness(w)) {
            worst = Some(reason);
        }
    }
    worst
}

fn closeness(reason: &Reason) -> u8 {
    match reason {
        Reason::OverCapacity => 0,
        Reason::WindowUnreachable => 1,
        Reason::DepotCloses => 2,
        Reason::NoVehicleLeft => 3,
    }
}

/// Solves `instance` within `budget`, its choices drawn from `seed`. Returns the best
/// solution found: the cheapest with every possible customer assigned if one was found,
/// otherwise the one leaving out the fewest. The instance's fixed routes are in it as given,
/// with customers perhaps added around theirs.
pub fn solve(instance: &Instance, seed: u64, budget: &mut dyn Budget) -> Solution {
    sisr::Search::new(instance, seed).run(budget)
}

#[cfg(test)]
mod tests;
