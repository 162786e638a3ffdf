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
/// depot), visited in order from and back to the depot, route `r` by vehicle `r` (the
/// benchmark files' identical vehicles). See [`check_fleet`].
pub fn check(instance: &Instance, routes: &[Vec<usize>], left_out: &[usize]) -> Verdict {
    let vehicles: Vec<usize> = (0..routes.len()).collect();
    check_fleet(instance, routes, &vehicles, left_out)
}

/// Checks `routes`, route `r` driven by vehicle `vehicles[r]`. Rules: each customer exactly
/// once (or never, for the customers in `left_out`), each vehicle in at most one route and
/// at most the fleet's vehicles, a route's load within both of its vehicle's capacities,
/// every service starting inside its window (arriving early means waiting), leaving the
/// depot no earlier than the vehicle's start and back by its end, and every fixed route's
/// customers in their vehicle's route in their order. For a benchmark file the travel time
/// equals the truncated Euclidean distance, recomputed here from the coordinates; a road
/// instance's matrix is taken as given.
pub fn check_fleet(instance: &Instance, routes: &[Vec<usize>], vehicles: &[usize], left_out: &[usize]) -> Verdict {
    let nodes = &instance.nodes;
    let mut violations = Vec::new();
    let mut seen = vec![0_u32; nodes.len()];
    let mut cost = 0;
    let used = routes.iter().filter(|r| !r.is_empty()).count();
    if used > instance.fleet_size() {
        violations.push(format!("{used} routes, but only {} vehicles", instance.fleet_size()));
    }
    let mut driven = vec![0_u32; instance.fleet_size()];
    let leg = |a: usize, b: usize| -> (i64, i64) {
        if instance.has_roads() {
            let (t, d) = (instance.travel(a, b), instance.distance(a, b));
            (t, t * super::instance::TIME_OVER_DISTANCE + d)
        } else {
            let t = euclid_tenths(&nodes[a], &nodes[b]);
            (t, t)
        }
    };
    for (r, route) in routes.iter().enumerate().filter(|(_, r)| !r.is_empty()) {
        let Some(&v) = vehicles.get(r).filter(|&&v| v < instance.fleet_size()) else {
            violations.push(format!("route {r} has no vehicle of the fleet"));
            continue;
        };
        driven[v] += 1;
        if driven[v] == 2 {
            violations.push(format!("vehicle {v} drives more than one route"));
        }
        let vehicle = instance.vehicle(v);
        let mut time = vehicle.start;
        let mut load = [0, 0];
        let mut at = 0;
        for &c in route {
            let Some(node) = nodes.get(c).filter(|_| c != 0) else {
                violations.push(format!("route {r}: {c} is not a customer"));
                continue;
            };
            seen[c] += 1;
            let (t, k) = leg(at, c);
            cost += k;
            time = (time + nodes[at].service + t).max(node.ready);
            if time > node.due {
                violations.push(format!(
                    "route {r}: customer {} starts at {time} tenths, after its window closes at {}",
                    node.id, node.due
                ));
            }
            let demand = instance.demand(c);
            load = [load[0] + demand[0], load[1] + demand[1]];
            at = c;
        }
        let (t, k) = leg(at, 0);
        cost += k;
        let back = time + nodes[at].service + t;
        if back > vehicle.end {
            violations
                .push(format!("route {r}: back at the depot at {back} tenths, after it closes at {}", vehicle.end));
        }
        if load[0] > vehicle.capacity[0] {
            violations.push(format!("route {r}: load {} exceeds the capacity {}", load[0], vehicle.capacity[0]));
        }
        if load[1] > vehicle.capacity[1] {
            violations.push(format!("route {r}: weight {} exceeds the capacity {}", load[1], vehicle.capacity[1]));
        }
    }
    for fixed in &instance.fixed {
        let Some(r) = (0..routes.len()).find(|&r| vehicles.get(r) == Some(&fixed.vehicle)) else {
            if !fixed.visits.is_empty() {
                violations.push(format!("vehicle {}'s fixed route is gone", fixed.vehicle));
            }
            continue;
        };
        let kept: Vec<usize> = routes[r].iter().copied().filter(|c| fixed.visits.contains(c)).collect();
        if kept != fixed.visits {
            violations.push(format!("vehicle {}'s fixed customers are not kept in their order", fixed.vehicle));
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
