//! One vehicle's route with its schedule cached both ways, so that whether a customer fits
//! between two stops, and at what extra cost, is answered in O(1).

use crate::routing::instance::{Instance, Tenths};

/// A route of vehicle `vehicle` from the depot through `visits` and back. Invariant (kept by
/// [`Route::refresh`]): `start`, `latest`, `load`, `cost` and `feasible` describe `visits`.
#[derive(Clone, Debug, Default)]
pub struct Route {
    pub vehicle: usize,
    pub visits: Vec<usize>,
    /// Earliest service start at each visit (waiting when early).
    start: Vec<Tenths>,
    /// Latest service start at each visit that still lets every later stop, and the return
    /// to the depot, keep its window: the forward time slack, stored as a deadline.
    latest: Vec<Tenths>,
    pub load: [i64; 2],
    /// The sum of [`Instance::cost`] over its legs.
    pub cost: i64,
    /// Every window, both capacities and the vehicle's hours hold.
    pub feasible: bool,
}

impl Route {
    pub fn with(instance: &Instance, vehicle: usize, visits: Vec<usize>) -> Self {
        let mut r = Self { vehicle, visits, ..Self::default() };
        r.refresh(instance);
        r
    }

    /// Recomputes the cached schedule after `visits` changed. Removing a customer usually
    /// keeps a route feasible, but not always: truncation can break the triangle inequality
    /// by a tenth, so `feasible` is recomputed rather than assumed.
    pub fn refresh(&mut self, instance: &Instance) {
        let nodes = &instance.nodes;
        let vehicle = instance.vehicle(self.vehicle);
        let n = self.visits.len();
        self.start.resize(n, 0);
        self.latest.resize(n, 0);
        let (mut time, mut prev, mut cost, mut load) = (vehicle.start, 0, 0, [0, 0]);
        for (i, &c) in self.visits.iter().enumerate() {
            cost += instance.cost(prev, c);
            time = (time + nodes[prev].service + instance.travel(prev, c)).max(nodes[c].ready);
            self.start[i] = time;
            let demand = instance.demand(c);
            load = [load[0] + demand[0], load[1] + demand[1]];
            prev = c;
        }
        cost += instance.cost(prev, 0);
        let (mut deadline, mut next) = (vehicle.end, 0);
        for i in (0..n).rev() {
            let c = self.visits[i];
            deadline = nodes[c].due.min(deadline - instance.travel(c, next) - nodes[c].service);
            self.latest[i] = deadline;
            next = c;
        }
        self.load = load;
        self.cost = cost;
        self.feasible = load[0] <= vehicle.capacity[0]
            && load[1] <= vehicle.capacity[1]
            && self.start.iter().zip(&self.latest).all(|(s, l)| s <= l)
            && (n > 0 || vehicle.start <= vehicle.end);
    }

    /// The best place for customer `u` in this route (its extra cost), skipping each
    /// position with probability `blink` (SISR's blinks), or `None` if it fits nowhere.
    pub fn best_insertion(
        &self,
        instance: &Instance,
        u: usize,
        mut blinked: impl FnMut() -> bool,
    ) -> Option<(usize, i64)> {
        let nodes = &instance.nodes;
        let node = &nodes[u];
        let vehicle = instance.vehicle(self.vehicle);
        let demand = instance.demand(u);
        if self.load[0] + demand[0] > vehicle.capacity[0] || self.load[1] + demand[1] > vehicle.capacity[1] {
            return None;
        }
        let mut best: Option<(usize, i64)> = None;
        for p in 0..=self.visits.len() {
            let (prev, depart) = if p == 0 {
                (0, vehicle.start)
            } else {
                let a = self.visits[p - 1];
                (a, self.start[p - 1] + nodes[a].service)
            };
            let arrive = depart + instance.travel(prev, u);
            if arrive > node.due {
                // Later positions only depart later.
                break;
            }
            let (next, latest) =
                if p == self.visits.len() { (0, vehicle.end) } else { (self.visits[p], self.latest[p]) };
            let delta = instance.cost(prev, u) + instance.cost(u, next) - instance.cost(prev, next);
            if best.is_some_and(|(_, d)| d <= delta) {
                continue;
            }
            let begin = arrive.max(node.ready);
            if begin + node.service + instance.travel(u, next) > latest || blinked() {
                continue;
            }
            best = Some((p, delta));
        }
        best
    }

    pub fn insert(&mut self, instance: &Instance, position: usize, u: usize) {
        self.visits.insert(position, u);
        self.refresh(instance);
    }
}
