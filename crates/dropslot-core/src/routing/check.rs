//! The independent checker: given an instance and routes, says whether every hard rule holds
//! and what the routes cost. It shares nothing with the solver but the instance itself, so a
//! solver bug cannot hide behind its own bookkeeping.

use super::instance::{Instance, Tenths, euclid_tenths};

/// What the checker found: the cost (total distance, in tenths) and every broken rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub cost: Tenths,
    pub violations: Vec<String>,
}

impl Verdict {
    pub fn feasible(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Checks `routes`, each a list of customer indices into `instance.nodes` (never 0, the
/// depot), visited in order from and back to the depot. Rules: each customer exactly once
/// (or never, for the customers in `left_out`),
/// at most `instance.vehicles` non-empty routes, a route's demand within the capacity, every
/// service starting inside its window (arriving early means waiting), and the return to the
/// depot by its closing time. Travel time equals the truncated Euclidean distance, recomputed
/// here from the coordinates.
pub fn check(instance: &Instance, routes: &[Vec<usize>], left_out: &[usize]) -> Verdict {
    let nodes = &instance.nodes;
    let mut violations = Vec::new();
    let mut seen = vec![0_u32; nodes.len()];
    let mut cost = 0;
    let used = routes.iter().filter(|r| !r.is_empty()).count();
    if used > instance.vehicles {
        violations.push(format!("{used} routes, but only {} vehicles", instance.vehicles));
    }
    let depot = &nodes[0];
    for (r, route) in routes.iter().enumerate().filter(|(_, r)| !r.is_empty()) {
        let mut time = depot.ready;
        let mut load = 0;
        let mut at = depot;
        for &c in route {
            let Some(node) = nodes.get(c).filter(|_| c != 0) else {
                violations.push(format!("route {r}: {c} is not a customer"));
                continue;
            };
            seen[c] += 1;
            let leg = euclid_tenths(at, node);
            cost += leg;
            time = (time + at.service + leg).max(node.ready);
            if time > node.due {
                violations.push(format!(
                    "route {r}: customer {} starts at {time} tenths, after its window closes at {}",
                    node.id, node.due
                ));
            }
            load += node.demand;
            at = node;
        }
        let leg = euclid_tenths(at, depot);
        cost += leg;
        let back = time + at.service + leg;
        if back > depot.due {
            violations.push(format!("route {r}: back at the depot at {back} tenths, after it closes at {}", depot.due));
        }
        if load > instance.capacity {
            violations.push(format!("route {r}: load {load} exceeds the capacity {}", instance.capacity));
        }
    }
    for (c, &times) in seen.iter().enumerate().skip(1) {
        let expected = u32::from(!left_out.contains(&c));
        if times != expected {
            violations.push(format!("customer {} is visited {times} times, not {expected}", nodes[c].id));
        }
    }
    Verdict { cost, violations }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::instance::{Format, Node};

    fn node(id: u32, x: f64, demand: i64, ready: Tenths, due: Tenths) -> Node {
        Node { id, x, y: 0.0, demand, ready, due, service: 10 }
    }

    /// Depot at 0 open [0, 1000]; customers on a line at x = 1, 2 (10, 20 tenths away).
    fn line() -> Instance {
        let nodes = vec![node(0, 0.0, 0, 0, 1000), node(1, 1.0, 5, 0, 100), node(2, 2.0, 5, 50, 60)];
        Instance::new("line".into(), Format::Solomon, 2, 10, nodes)
    }

    #[test]
    fn a_good_route_costs_its_legs() {
        let v = check(&line(), &[vec![1, 2]], &[]);
        assert_eq!(v, Verdict { cost: 10 + 10 + 20, violations: vec![] });
    }

    #[test]
    fn waiting_is_allowed_but_lateness_is_not() {
        // 1 then 2: at 2 by 10 + 10 + 10 = 30, waits to 50: fine. 2 alone then 1: fine too.
        assert!(check(&line(), &[vec![2], vec![1]], &[]).feasible());
        let mut late = line();
        late.nodes[2].due = 25;
        let v = check(&late, &[vec![1, 2]], &[]);
        assert!(v.violations[0].contains("after its window closes"), "{v:?}");
    }

    #[test]
    fn capacity_depot_hours_visits_and_fleet_are_checked() {
        let mut i = line();
        i.capacity = 9;
        assert!(check(&i, &[vec![1, 2]], &[]).violations.iter().any(|v| v.contains("exceeds the capacity")));
        let mut i = line();
        i.nodes[0].due = 60;
        assert!(check(&i, &[vec![1, 2]], &[]).violations.iter().any(|v| v.contains("after it closes")));
        let v = check(&line(), &[vec![1]], &[]);
        assert!(v.violations.iter().any(|v| v.contains("customer 2 is visited 0 times, not 1")));
        let v = check(&line(), &[vec![1, 2, 1]], &[]);
        assert!(v.violations.iter().any(|v| v.contains("customer 1 is visited 2 times, not 1")));
        let mut i = line();
        i.vehicles = 1;
        assert!(check(&i, &[vec![1], vec![2]], &[]).violations[0].contains("only 1 vehicles"));
        assert!(check(&line(), &[vec![0, 1, 2]], &[]).violations[0].contains("not a customer"));
    }
}
