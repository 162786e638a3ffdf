//! The six prepared outcomes (CONTRACT §6) as data: the statuses each walks, and the moves
//! that take a shipment from where it is to the end of that walk. Pure.

use super::{Actor, Leg, Move, NewEvent, Proof, ProofKind, Status};

/// One of the interface's endpoints 4–9.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    Happy,
    Reattempt,
    Fail,
    BundlePickUpShipments,
    PickedPickUpShipments,
    DeliveringDropOffShipments,
}

const TO_TRANSIT: [Status; 5] =
    [Status::Scheduled, Status::ToPickUp, Status::PickedUp, Status::Processing, Status::InTransit];

/// Why a scenario skips a shipment that a previous scenario moved.
pub const ALREADY_MOVED: &str = "A scenario has already moved this shipment; sandbox shipments are final after one.";

/// The failure reason and the proof the sandbox records.
pub const SANDBOX_FAILURE: &str = "Sandbox: the receiver was not available.";
pub const SANDBOX_RECEIVER: &str = "Sandbox Receiver";

impl Scenario {
    pub const ALL: [Scenario; 6] = [
        Scenario::Happy,
        Scenario::Reattempt,
        Scenario::Fail,
        Scenario::BundlePickUpShipments,
        Scenario::PickedPickUpShipments,
        Scenario::DeliveringDropOffShipments,
    ];

    /// The path segment under `/sandbox/scenarios/`.
    pub fn slug(self) -> &'static str {
        match self {
            Scenario::Happy => "happy",
            Scenario::Reattempt => "reattempt",
            Scenario::Fail => "fail",
            Scenario::BundlePickUpShipments => "bundle-pick-up-shipments",
            Scenario::PickedPickUpShipments => "picked-pick-up-shipments",
            Scenario::DeliveringDropOffShipments => "delivering-drop-off-shipments",
        }
    }

    pub fn from_slug(slug: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.slug() == slug)
    }

    /// Every status the scenario walks through, from `scheduled`.
    pub fn path(self) -> Vec<Status> {
        let mut path = TO_TRANSIT.to_vec();
        match self {
            Scenario::Happy => path.push(Status::Delivered),
            Scenario::Reattempt => {
                path.extend([Status::Failed, Status::ToAttempt, Status::InTransit, Status::Delivered]);
            }
            Scenario::Fail => path.extend([Status::Failed, Status::ReturnScheduled, Status::Returned]),
            Scenario::BundlePickUpShipments => path.truncate(2),
            Scenario::PickedPickUpShipments => path.truncate(3),
            Scenario::DeliveringDropOffShipments => {}
        }
        path
    }

    /// What this scenario does to a loaded shipment (`moved`: a scenario already moved it):
    /// its events, or why it is skipped. Both backends call this under their locks.
    pub fn events_for(self, leg: &Leg, moved: bool) -> Result<Vec<NewEvent>, String> {
        if moved {
            return Err(ALREADY_MOVED.to_string());
        }
        let moves = self.moves(leg.drop_off.status)?;
        super::plan_moves(leg, &moves).map_err(|r| r.to_string())
    }

    /// The moves from `from` to the end of the path, or why there are none.
    pub fn moves(self, from: Status) -> Result<Vec<Move>, String> {
        let path = self.path();
        let Some(at) = path.iter().position(|s| *s == from) else {
            return Err(if from.is_final() {
                format!("The shipment is {from}, a final status.")
            } else {
                format!("A shipment that is {from} is not on the {} scenario's path.", self.slug())
            });
        };
        if at + 1 == path.len() {
            return Err(format!("The shipment is already {from}."));
        }
        let reason = format!("sandbox scenario {}", self.slug());
        Ok(path[at + 1..]
            .iter()
            .map(|to| Move {
                to: *to,
                actor: Actor::Sandbox,
                reason: Some(if *to == Status::Failed { SANDBOX_FAILURE.to_string() } else { reason.clone() }),
                proof: if *to == Status::Delivered {
                    vec![Proof { kind: ProofKind::ReceiverName, value: SANDBOX_RECEIVER.into() }]
                } else {
                    vec![]
                },
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shipments::{Current, Leg, ShipmentKind, plan_moves};

    #[test]
    fn every_scenario_plans_cleanly_from_scheduled_and_ends_where_the_contract_says() {
        let ends = [
            (Scenario::Happy, Status::Delivered, 1),
            (Scenario::Reattempt, Status::Delivered, 2),
            (Scenario::Fail, Status::Returned, 1),
            (Scenario::BundlePickUpShipments, Status::ToPickUp, 0),
            (Scenario::PickedPickUpShipments, Status::PickedUp, 0),
            (Scenario::DeliveringDropOffShipments, Status::InTransit, 0),
        ];
        for (scenario, end, attempts) in ends {
            assert_eq!(Scenario::from_slug(scenario.slug()), Some(scenario));
            let leg = Leg {
                drop_off: Current {
                    kind: ShipmentKind::DropOff,
                    id: 1,
                    status: Status::Scheduled,
                    attempts: 0,
                    max_attempts: 3,
                },
                pick_up: Current {
                    kind: ShipmentKind::PickUp,
                    id: 1,
                    status: Status::Scheduled,
                    attempts: 0,
                    max_attempts: 0,
                },
            };
            let events = plan_moves(&leg, &scenario.moves(Status::Scheduled).unwrap()).unwrap();
            let last = events.iter().rev().find(|e| e.kind == ShipmentKind::DropOff).unwrap();
            assert_eq!((last.to, last.attempts), (end, attempts), "{}", scenario.slug());
        }
        assert!(Scenario::Happy.moves(Status::Deleted).unwrap_err().contains("final"));
        assert!(Scenario::BundlePickUpShipments.moves(Status::ToPickUp).unwrap_err().contains("already"));
    }
}
