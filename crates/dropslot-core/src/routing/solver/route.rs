//! One vehicle's route with its schedule cached both ways, so that whether a customer fits
//! between two stops, and at what extra distance, is answered in O(1).

use crate::routing::instance::{Instance, Tenths};

/// A route from the depot through `visits` and back. Invariant (kept by [`Route::refresh`]):
/// `start`, `latest`, `load`, `cost` and `feasible` describe `visits`.
#[derive(Clone, Debug, Default)]
pub struct Route {
    pub visits: Vec<usize>,
    /// Earliest service start at each visit (waiting when early).
    start: Vec<Tenths>,
    /// Latest service start at each visit that still lets every later stop, and the return
    /// to the depot, keep its window: the forward time slack, stored as a deadline.
    latest: Vec<Tenths>,
    pub load: i64,
    pub cost: Tenths,
    /// Every window, the capacity and the depot's closing time hold.
    pub feasible: bool,
}

impl Route {
    pub fn with(instance: &Instance, visits: Vec<usize>) -> Self {
        let mut r = Self { visits, ..Self::default() };
        r.refresh(instance);
        r
    }

    /// Recomputes the cached schedule after `visits` changed. Removing a customer usually
    /// keeps a route feasible, but not always: truncation can break the triangle inequality
    /// by a tenth, so `feasible` is recomputed rather than assumed.
    pub fn refresh(&mut self, instance: &Instance) {
        let nodes = &instance.nodes;
        let n = self.visits.len();
        self.start.resize(n, 0);
        self.latest.resize(n, 0);
        let (mut time, mut prev, mut cost, mut load) = (nodes[0].ready, 0, 0, 0);
        for (i, &c) in self.visits.iter().enumerate() {
            let leg = instance.travel(prev, c);
            cost += leg;
            time = (time + nodes[prev].service + leg).max(nodes[c].ready);
            self.start[i] = time;
            load += nodes[c].demand;
            prev = c;
        }
        cost += instance.travel(prev, 0);
        let (mut deadline, mut next) = (nodes[0].due, 0);
        for i in (0..n).rev() {
            let c = self.visits[i];
            deadline = nodes[c].due.min(deadline - instance.travel(c, next) - nodes[c].service);
            self.latest[i] = deadline;
            next = c;
        }
        self.load = load;
        self.cost = cost;
        self.feasible = load <= instance.capacity && self.start.iter().zip(&self.latest).all(|(s, l)| s <= l);
    }

    /// The best place for customer `u` in this route (its extra distance), skipping each
    /// position with probability `blink` (SISR's blinks), or `None` if it fits nowhere.
    pub fn best_insertion(
        &self,
        instance: &Instance,
        u: usize,
        mut blinked: impl FnMut() -> bool,
    ) -> Option<(usize, Tenths)> {
        let nodes = &instance.nodes;
        let node = &nodes[u];
        if self.load + node.demand > instance.capacity {
            return None;
        }
        let mut best: Option<(usize, Tenths)> = None;
        for p in 0..=self.visits.len() {
            let (prev, depart) = if p == 0 {
                (0, nodes[0].ready)
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
                if p == self.visits.len() { (0, nodes[0].due) } else { (self.visits[p], self.latest[p]) };
            let delta = instance.travel(prev, u) + instance.travel(u, next) - instance.travel(prev, next);
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
