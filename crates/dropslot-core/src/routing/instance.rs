//! A vehicle-routing instance with time windows (VRPTW) as the solver and the checker see it:
//! one depot, identical vehicles, and every time and distance in tenths (integers).

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

/// A VRPTW instance: `nodes[0]` is the depot, the rest are customers.
#[derive(Clone, Debug)]
pub struct Instance {
    pub name: String,
    pub format: Format,
    /// At most this many routes.
    pub vehicles: usize,
    pub capacity: i64,
    pub nodes: Vec<Node>,
    /// Row-major travel times (= distances) in tenths, `nodes.len()` squared.
    matrix: Vec<Tenths>,
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
        Self { name, format, vehicles, capacity, nodes, matrix }
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
