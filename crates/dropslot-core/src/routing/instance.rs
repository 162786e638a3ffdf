//! A vehicle-routing instance with time windows (VRPTW) as the solver and the checker see it:
//! one depot, identical vehicles and a Euclidean matrix for the benchmark files, every time
//! and distance in tenths (integers); or, for a day plan, a fleet of its own (two capacities
//! and a shift each), a road matrix of seconds and metres, and routes fixed in advance.

/// Times and distances are kept in tenths of the file's unit, as integers, so that the
/// DIMACS convention (Euclidean distance truncated to one decimal) is exact and every sum
/// is associative. `Tenths(8273)` is a cost of 827.3.
pub type Tenths = i64;

/// Which text format the instance came from (only names and reporting differ).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// VRPLIB (`NAME : …`, `NODE_COORD_SECTION`, …): the depot is usually node 1.
    Vrplib,
    /// Solomon's 1987 text table (`VEHICLE`, `CUST NO.` …): the depot is customer 0.
    Solomon,
}

/// A place to visit: the depot (index 0) or a customer.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The number the file gives it, reported back in solutions.
    pub id: u32,
    pub x: f64,
    pub y: f64,
    pub demand: i64,
    /// The window for the start of service (the depot's is its opening hours).
    pub ready: Tenths,
    pub due: Tenths,
    pub service: Tenths,
}

/// One vehicle of a fleet: what it carries (in the two units of `Node::demand` and
/// [`Instance::weight`]) and when it may leave and must be back at the depot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vehicle {
    pub capacity: [i64; 2],
    pub start: Tenths,
    pub end: Tenths,
}

/// A route given in advance (a published one): its vehicle keeps these customers in this
/// order; the search may add others around them but never moves them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fixed {
    pub vehicle: usize,
    pub visits: Vec<usize>,
}

/// How much one second of travel weighs against one unit of distance in a road instance's
/// objective: travel time first, then distance (no day's distance reaches 16,777 km).
pub const TIME_OVER_DISTANCE: i64 = 1 << 24;

/// A VRPTW instance: `nodes[0]` is the depot, the rest are customers.
#[derive(Clone, Debug)]
pub struct Instance {
    pub name: String,
    pub format: Format,
    /// At most this many routes (without a [`Instance::fleet`] of its own).
    pub vehicles: usize,
    pub capacity: i64,
    pub nodes: Vec<Node>,
    /// Row-major travel times (= distances) in tenths, `nodes.len()` squared.
    matrix: Vec<Tenths>,
    /// A road instance's distances, row-major like `matrix`; empty: distance is time.
    distances: Vec<i64>,
    /// A second demand per node (a parcel's weight); empty: none.
    weights: Vec<i64>,
    /// A fleet of its own; `None`: `vehicles` identical vehicles of `capacity`, open when the
    /// depot is.
    fleet: Option<Vec<Vehicle>>,
    /// Routes given in advance.
    pub fixed: Vec<Fixed>,
    /// Routes to start the search from (a tentative plan's, issue 45): not pinned, but the
    /// search begins with them where they keep every rule, so its answer never leaves out a
    /// customer they placed (the best answer is only ever replaced by one leaving out fewer,
    /// or as many and cheaper).
    pub start: Vec<Fixed>,
}

impl Instance {
    /// Builds the travel matrix with the DIMACS convention: Euclidean distance truncated to
    /// one decimal, travel time equal to distance. Classic Solomon files use the same
    /// integral matrix here, so costs compare with the DIMACS best-known solutions and with
    /// any other solver given this matrix.
    pub fn new(name: String, format: Format, vehicles: usize, capacity: i64, nodes: Vec<Node>) -> Self {
        let n = nodes.len();
        let mut matrix = vec![0; n * n];
        for (i, a) in nodes.iter().enumerate() {
            for (j, b) in nodes.iter().enumerate() {
                matrix[i * n + j] = euclid_tenths(a, b);
            }
        }
        Self {
            name,
            format,
            vehicles,
            capacity,
            nodes,
            matrix,
            distances: Vec::new(),
            weights: Vec::new(),
            fleet: None,
            fixed: Vec::new(),
            start: Vec::new(),
        }
    }

    /// A road instance: `nodes` (coordinates unused), `weights` per node, its own `fleet`,
    /// and the matrix of `seconds` and `metres` (row-major, `nodes.len()` squared). Times are
    /// in seconds (the windows, service times and shifts too).
    ///
    /// # Errors
    /// When a matrix or the weights do not have the nodes' size, or the fleet is empty.
    pub fn roads(
        name: String,
        nodes: Vec<Node>,
        weights: Vec<i64>,
        fleet: Vec<Vehicle>,
        seconds: Vec<i64>,
        metres: Vec<i64>,
    ) -> Result<Self, String> {
        let n = nodes.len();
        if seconds.len() != n * n || metres.len() != n * n || weights.len() != n {
            return Err(format!("a matrix or the weights do not fit {n} nodes"));
        }
        if fleet.is_empty() || n == 0 {
            return Err("no vehicle or no depot".into());
        }
        Ok(Self {
            name,
            format: Format::Vrplib,
            vehicles: fleet.len(),
            capacity: fleet.iter().map(|v| v.capacity[0]).max().unwrap_or(0),
            nodes,
            matrix: seconds,
            distances: metres,
            weights,
            fleet: Some(fleet),
            fixed: Vec::new(),
            start: Vec::new(),
        })
    }

    /// How many vehicles there are.
    pub fn fleet_size(&self) -> usize {
        self.fleet.as_ref().map_or(self.vehicles, Vec::len)
    }

    /// Vehicle `v` (of [`Instance::fleet_size`]).
    #[inline]
    pub fn vehicle(&self, v: usize) -> Vehicle {
        match &self.fleet {
            Some(fleet) => fleet[v],
            None => Vehicle { capacity: [self.capacity, i64::MAX], start: self.nodes[0].ready, end: self.nodes[0].due },
        }
    }

    /// Node `u`'s demand in both units.
    #[inline]
    pub fn demand(&self, u: usize) -> [i64; 2] {
        [self.nodes[u].demand, self.weights.get(u).copied().unwrap_or(0)]
    }

    /// Distance from `a` to `b` (the travel time when the instance has no distances).
    #[inline]
    pub fn distance(&self, a: usize, b: usize) -> i64 {
        if self.distances.is_empty() { self.travel(a, b) } else { self.distances[a * self.nodes.len() + b] }
    }

    /// What the search minimises for the leg from `a` to `b`: the travel time, then the
    /// distance ([`TIME_OVER_DISTANCE`]); the travel time alone for a benchmark file.
    #[inline]
    pub fn cost(&self, a: usize, b: usize) -> i64 {
        if self.distances.is_empty() {
            self.travel(a, b)
        } else {
            self.travel(a, b) * TIME_OVER_DISTANCE + self.distances[a * self.nodes.len() + b]
        }
    }

    /// Whether this is a road instance (its own matrix, not computed from coordinates).
    pub fn has_roads(&self) -> bool {
        !self.distances.is_empty()
    }

    /// Travel time (and distance) from node `a` to node `b`, in tenths.
    #[inline]
    pub fn travel(&self, a: usize, b: usize) -> Tenths {
        self.matrix[a * self.nodes.len() + b]
    }

    /// Number of customers (nodes but the depot).
    pub fn customers(&self) -> usize {
        self.nodes.len() - 1
    }
}

/// `floor(10 · d)`: the distance truncated to one decimal, in tenths.
pub fn euclid_tenths(a: &Node, b: &Node) -> Tenths {
    let (dx, dy) = (a.x - b.x, a.y - b.y);
    ((dx * dx + dy * dy).sqrt() * 10.0).floor() as Tenths
}

/// A cost in tenths shown as the file's unit with one decimal (`8273` → `827.3`).
pub fn show_tenths(t: Tenths) -> String {
    let sign = if t < 0 { "-" } else { "" };
    format!("{sign}{}.{}", t.abs() / 10, t.abs() % 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(x: f64, y: f64) -> Node {
        Node { id: 0, x, y, demand: 0, ready: 0, due: 0, service: 0 }
    }

    #[test]
    fn distances_are_truncated_to_one_decimal() {
        // sqrt(2) = 1.414… → 1.4; 3-4-5 stays exact.
        assert_eq!(euclid_tenths(&at(0.0, 0.0), &at(1.0, 1.0)), 14);
        assert_eq!(euclid_tenths(&at(0.0, 0.0), &at(3.0, 4.0)), 50);
        // sqrt(8) = 2.828… → 2.8, not rounded up to 2.9.
        assert_eq!(euclid_tenths(&at(0.0, 0.0), &at(2.0, 2.0)), 28);
    }

    #[test]
    fn tenths_show_with_one_decimal() {
        assert_eq!(show_tenths(8273), "827.3");
        assert_eq!(show_tenths(50), "5.0");
        assert_eq!(show_tenths(0), "0.0");
    }
}
