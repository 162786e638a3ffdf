//! Moving a shipment along the table (CONTRACT §4): the one function that decides every
//! change that is not a deletion — sandbox scenarios, the ops API and pick-up scans — and the
//! rule that the pick-up leg follows its drop-off shipments.

use serde::{Deserialize, Serialize};

use super::{Actor, NewEvent, ShipmentKind, Status, allowed, next};

/// A shipment as a change needs it, loaded in the changing transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Current {
    pub kind: ShipmentKind,
    pub id: i64,
    pub status: Status,
    /// Delivery attempts made (0 for the pick-up leg).
    pub attempts: u32,
    /// The maximum the shipment was ordered with.
    pub max_attempts: u32,
}

impl Current {
    /// A shipment before any delivery attempt (deletion happens before pick-up).
    pub fn new(kind: ShipmentKind, id: i64, status: Status) -> Current {
        Current { kind, id, status, attempts: 0, max_attempts: 0 }
    }

    /// The statuses it may move to now: the table's, less `to_attempt` once the attempts
    /// are used up.
    pub fn allowed_next(&self) -> Vec<Status> {
        next(self.kind, self.status)
            .iter()
            .copied()
            .filter(|to| allowed(self.kind, self.status, *to, self.attempts, self.max_attempts))
            .collect()
    }
}

/// A drop-off shipment and its pick-up leg.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leg {
    pub drop_off: Current,
    pub pick_up: Current,
}

impl Leg {
    /// From a drop-off shipment's (id, status, attempts made, most allowed) and its pick-up
    /// leg's (id, status), as the stores load them.
    pub fn of((id, status, attempts, max_attempts): (i64, Status, u32, u32), pick_up: (i64, Status)) -> Leg {
        Leg {
            drop_off: Current { kind: ShipmentKind::DropOff, id, status, attempts, max_attempts },
            pick_up: Current::new(ShipmentKind::PickUp, pick_up.0, pick_up.1),
        }
    }
}

/// One proof of delivery: who received it, a signature or a photo, by reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Proof {
    #[serde(rename = "type")]
    pub kind: ProofKind,
    /// The receiver's name, or a reference (URL, storage key) to the signature or photo.
    pub value: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ProofKind {
    ReceiverName,
    Signature,
    Photo,
}

/// Whether a move to `to` may carry proofs: a delivery (who received it, a signature, a photo)
/// and a return handed back to its merchant (who took the parcels, CONTRACT §15).
pub fn carries_proof(to: Status) -> bool {
    matches!(to, Status::Delivered | Status::Returned)
}

/// Whether `proof` names the person who took the parcels (a non-blank `receiver_name`): what a
/// driver's hand-back of a return must carry (CONTRACT §15).
pub fn names_receiver(proof: &[Proof]) -> bool {
    proof.iter().any(|p| p.kind == ProofKind::ReceiverName && !p.value.trim().is_empty())
}

/// A requested change and what it carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    pub to: Status,
    pub actor: Actor,
    pub reason: Option<String>,
    pub proof: Vec<Proof>,
}

impl Move {
    pub fn to(to: Status, actor: Actor) -> Move {
        Move { to, actor, reason: None, proof: Vec::new() }
    }
}

/// Why a move cannot be made; nothing is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{}", not_allowed(*.from, *.to, .allowed))]
    NotAllowed { from: Status, to: Status, allowed: Vec<Status> },
    #[error(
        "The shipment has used its {max} delivery attempt(s): from failed it can move to {}.",
        list(.allowed)
    )]
    NoAttemptsLeft { max: u32, allowed: Vec<Status> },
    #[error("A shipment is deleted by deleting its parcels, not by a move.")]
    Deletion,
    #[error("A delivered shipment needs a proof of delivery (receiver name, signature or photo).")]
    ProofRequired,
    #[error("A failed delivery needs a reason.")]
    ReasonRequired,
}

fn list(statuses: &[Status]) -> String {
    statuses.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
}

fn not_allowed(from: Status, to: Status, allowed: &[Status]) -> String {
    if allowed.is_empty() {
        format!("The shipment is {from}, a final status: it cannot move to {to}.")
    } else {
        format!("A shipment that is {from} cannot move to {to}; it can move to {}.", list(allowed))
    }
}

/// Makes one move on `cur` and returns its event; `cur` is updated to the new state. The
/// one function every status change after creation passes through.
pub fn step(cur: &mut Current, m: &Move) -> Result<NewEvent, Refusal> {
    if !allowed(cur.kind, cur.status, m.to, cur.attempts, cur.max_attempts) {
        let allowed = cur.allowed_next();
        return Err(if next(cur.kind, cur.status).contains(&m.to) {
            Refusal::NoAttemptsLeft { max: cur.max_attempts, allowed }
        } else {
            Refusal::NotAllowed { from: cur.status, to: m.to, allowed }
        });
    }
    // Deletion is the client's (by custom code, re-priced: `plan_deletion`) and the
    // system's (a pick-up leg with its last drop-off); never a sandbox or ops move.
    if m.to == Status::Deleted && !matches!(m.actor, Actor::Client | Actor::System) {
        return Err(Refusal::Deletion);
    }
    if m.to == Status::Delivered && m.proof.is_empty() {
        return Err(Refusal::ProofRequired);
    }
    if m.to == Status::Failed && m.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
        return Err(Refusal::ReasonRequired);
    }
    let from = cur.status;
    // An attempt is made each time the shipment leaves `in_transit`.
    if from == Status::InTransit {
        cur.attempts += 1;
    }
    cur.status = m.to;
    let attempt = match m.to {
        Status::InTransit | Status::ToAttempt => Some(cur.attempts + 1),
        Status::Delivered | Status::Failed => Some(cur.attempts),
        _ => None,
    };
    Ok(NewEvent {
        kind: cur.kind,
        shipment: cur.id,
        from: Some(from),
        to: m.to,
        actor: m.actor,
        reason: m.reason.clone(),
        attempt,
        attempts: cur.attempts,
        proof: m.proof.clone(),
    })
}

/// The pick-up leg's own path.
const PICK_UP_PATH: [Status; 3] = [Status::Scheduled, Status::ToPickUp, Status::PickedUp];

/// Plans `moves` of the drop-off shipment, in order, with the pick-up leg following: it is
/// `to_pick_up` as soon as one of its drop-offs is, and `picked_up` as soon as one of its
/// drop-offs is picked up (the driver is at the pick-up address). All of the moves or none:
/// the first refusal refuses the whole plan.
pub fn plan_moves(leg: &Leg, moves: &[Move]) -> Result<Vec<NewEvent>, Refusal> {
    let (mut drop_off, mut pick_up) = (leg.drop_off, leg.pick_up);
    let mut events = Vec::with_capacity(moves.len() + 2);
    for m in moves {
        events.push(step(&mut drop_off, m)?);
        let at = PICK_UP_PATH.iter().position(|s| *s == pick_up.status);
        let target = PICK_UP_PATH.iter().position(|s| *s == m.to);
        if let (Some(at), Some(target)) = (at, target) {
            for to in PICK_UP_PATH.iter().take(target + 1).skip(at + 1) {
                let follow = Move {
                    to: *to,
                    actor: m.actor,
                    reason: Some("follows its drop-off shipment".into()),
                    proof: vec![],
                };
                events.push(step(&mut pick_up, &follow)?);
            }
        }
    }
    Ok(events)
}

/// A pick-up scan of one parcel: its drop-off shipment (and so its pick-up leg) is picked up,
/// through `to_pick_up` when no one had bundled it yet.
pub fn pick_up_scan(leg: &Leg, actor: Actor) -> Result<Vec<NewEvent>, Refusal> {
    let moves: Vec<Move> = match leg.drop_off.status {
        Status::Scheduled => vec![Move::to(Status::ToPickUp, actor), Move::to(Status::PickedUp, actor)],
        _ => vec![Move::to(Status::PickedUp, actor)],
    };
    plan_moves(leg, &moves)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn leg(status: Status, attempts: u32, max: u32) -> Leg {
        Leg {
            drop_off: Current { kind: ShipmentKind::DropOff, id: 1, status, attempts, max_attempts: max },
            pick_up: Current {
                kind: ShipmentKind::PickUp,
                id: 2,
                status: Status::Scheduled,
                attempts: 0,
                max_attempts: 0,
            },
        }
    }

    #[test]
    fn the_pick_up_leg_follows_and_attempts_are_counted() {
        let events = pick_up_scan(&leg(Status::Scheduled, 0, 3), Actor::Ops).unwrap();
        let seen: Vec<_> = events.iter().map(|e| (e.kind, e.to)).collect();
        assert_eq!(
            seen,
            [
                (ShipmentKind::DropOff, Status::ToPickUp),
                (ShipmentKind::PickUp, Status::ToPickUp),
                (ShipmentKind::DropOff, Status::PickedUp),
                (ShipmentKind::PickUp, Status::PickedUp),
            ]
        );
        let failed = Move { reason: Some("not at home".into()), ..Move::to(Status::Failed, Actor::Ops) };
        let e = plan_moves(&leg(Status::InTransit, 2, 3), std::slice::from_ref(&failed)).unwrap();
        assert_eq!((e[0].attempt, e[0].attempts), (Some(3), 3));
        let refused = plan_moves(&leg(Status::Failed, 3, 3), &[Move::to(Status::ToAttempt, Actor::Ops)]).unwrap_err();
        assert_eq!(
            refused,
            Refusal::NoAttemptsLeft { max: 3, allowed: vec![Status::ReturnScheduled, Status::Cancelled] }
        );
        assert_eq!(
            plan_moves(&leg(Status::InTransit, 0, 3), &[Move::to(Status::Delivered, Actor::Ops)]),
            Err(Refusal::ProofRequired)
        );
        assert_eq!(
            plan_moves(&leg(Status::InTransit, 0, 3), &[Move::to(Status::Failed, Actor::Ops)]),
            Err(Refusal::ReasonRequired)
        );
        let final_ = plan_moves(&leg(Status::Delivered, 1, 3), &[Move::to(Status::InTransit, Actor::Ops)]).unwrap_err();
        assert!(final_.to_string().contains("final"), "{final_}");
        let wrong = plan_moves(&leg(Status::Scheduled, 0, 3), &[Move::to(Status::Processing, Actor::Ops)]).unwrap_err();
        assert_eq!(
            wrong.to_string(),
            "A shipment that is scheduled cannot move to processing; it can move to to_pick_up, deleted."
        );
    }

    fn any_move() -> impl Strategy<Value = Move> {
        (0usize..12, any::<bool>(), any::<bool>()).prop_map(|(i, reason, proof)| Move {
            to: Status::ALL[i],
            actor: Actor::Ops,
            reason: reason.then(|| "r".into()),
            proof: if proof { vec![Proof { kind: ProofKind::Photo, value: "p".into() }] } else { vec![] },
        })
    }

    proptest! {
        /// Whatever moves are requested, one by one: every event is an edge of the table,
        /// finals never change, attempts never pass the maximum, and a refused move writes
        /// nothing (the state is unchanged).
        #[test]
        fn no_requested_move_leaves_the_table(moves in prop::collection::vec(any_move(), 0..60), max in 1u32..5) {
            let mut state = leg(Status::Scheduled, 0, max);
            for m in moves {
                let before = state;
                if let Ok(events) = plan_moves(&state, std::slice::from_ref(&m)) {
                    {
                        for e in &events {
                            let from = e.from.expect("a move has a from");
                            prop_assert!(!from.is_final(), "{from} is final");
                            prop_assert!(next(e.kind, from).contains(&e.to));
                            let cur = match e.kind { ShipmentKind::DropOff => &mut state.drop_off, ShipmentKind::PickUp => &mut state.pick_up };
                            prop_assert_eq!(cur.status, from, "events chain");
                            cur.status = e.to;
                            cur.attempts = e.attempts;
                        }
                        prop_assert!(state.drop_off.attempts <= max);
                    }
                } else {
                    prop_assert_eq!(state, before);
                }
            }
        }
    }
}
