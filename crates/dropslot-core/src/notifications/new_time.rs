//! When the recipient hears that the time moved (CONTRACT §16): a drop-off's live window
//! against the window it was last told, at most two "new time" messages a shipment and day, and
//! "you are the next stop". Decided here; both backends persist the decision with the ETAs.
//!
//! The window last told is the live one until the parcel is out for delivery (the recipient
//! has heard only the slot; the out-for-delivery message says the live window), and from then
//! on the window of the last `new_time` message, or of the route's start when there was none.

use super::{Retimed, Trigger};
use crate::dispatch::eta::ShipmentEta;
use crate::shipments::Status;

/// `new_time` messages a shipment gets at most in one day.
pub const MAX_NEW_TIMES: u32 = 2;

/// The window a drop-off's recipient was last told for its day, Unix milliseconds, and how
/// many `new_time` messages told one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Told {
    pub from_ms: i64,
    pub to_ms: i64,
    pub new_times: u32,
}

/// Whether two windows share an instant (touching ends count: the recipient is there).
#[must_use]
pub fn overlaps(a: (i64, i64), b: (i64, i64)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

/// What one re-timing decides for one drop-off.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// The told window to store (`None`: unchanged).
    pub told: Option<Told>,
    /// The messages to enqueue.
    pub messages: Vec<Retimed>,
}

/// The decision for a drop-off in `status` whose live window is now `live` (ms), given what
/// it was `told` (`None`: nothing stored for its day yet); `next_in` is `Some(minutes)` when
/// the stop before it on the route was just served ([`next_stops`]).
#[must_use]
pub fn decide(told: Option<Told>, live: (i64, i64), status: Status, next_in: Option<u32>) -> Decision {
    let out = status == Status::InTransit;
    let follow = |n: u32| Told { from_ms: live.0, to_ms: live.1, new_times: n };
    let mut d = Decision::default();
    match told {
        None => d.told = Some(follow(0)),
        Some(t) if !out => {
            if (t.from_ms, t.to_ms) != live {
                d.told = Some(follow(t.new_times));
            }
        }
        Some(t) if overlaps((t.from_ms, t.to_ms), live) || t.new_times >= MAX_NEW_TIMES => {}
        Some(t) => {
            let n = t.new_times + 1;
            d.told = Some(follow(n));
            d.messages.push(Retimed {
                trigger: Trigger::NewTime,
                from_ms: live.0,
                to_ms: live.1,
                minutes: None,
                nth: n,
            });
        }
    }
    if let (true, Some(minutes)) = (out, next_in) {
        d.messages.push(Retimed {
            trigger: Trigger::NextStop,
            from_ms: live.0,
            to_ms: live.1,
            minutes: Some(minutes),
            nth: 0,
        });
    }
    d
}

/// The drop-offs that are now the route's next stop after a served one, with the minutes to
/// their predicted arrival (rounded up): the first remaining stop's, once any stop of the route
/// is served (`any_served`); none before (the van is still on its way from the depot).
#[must_use]
pub fn next_stops(etas: &[ShipmentEta], any_served: bool, now: i64) -> Vec<(String, u32)> {
    if !any_served {
        return Vec::new();
    }
    etas.iter()
        .filter(|e| e.stops_before == 0)
        .map(|e| {
            let s = (e.arrival - now).max(0);
            (e.shipment_unique_id.clone(), u32::try_from((s + 59) / 60).unwrap_or(u32::MAX))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    #[allow(clippy::unnecessary_wraps)] // what `decide` takes and gives
    fn told(from: i64, to: i64, n: u32) -> Option<Told> {
        Some(Told { from_ms: from, to_ms: to, new_times: n })
    }

    #[test]
    fn the_first_window_of_the_day_is_recorded_without_a_message() {
        let d = decide(None, (H, 2 * H), Status::InTransit, None);
        assert_eq!(d.told, told(H, 2 * H, 0));
        assert!(d.messages.is_empty());
    }

    #[test]
    fn before_the_parcel_is_out_the_told_window_follows_the_live_one_silently() {
        let d = decide(told(H, 2 * H, 0), (5 * H, 6 * H), Status::Scheduled, Some(3));
        assert_eq!(d.told, told(5 * H, 6 * H, 0));
        assert!(d.messages.is_empty(), "no new time, no next stop before it is out");
        assert_eq!(decide(told(H, 2 * H, 0), (H, 2 * H), Status::Scheduled, None), Decision::default());
    }

    #[test]
    fn a_window_that_no_longer_overlaps_is_one_new_time_at_most_twice() {
        // Overlapping, or touching: nothing.
        assert_eq!(decide(told(H, 2 * H, 0), (2 * H, 3 * H), Status::InTransit, None), Decision::default());
        let first = decide(told(H, 2 * H, 0), (2 * H + 1, 3 * H), Status::InTransit, None);
        assert_eq!(first.told, told(2 * H + 1, 3 * H, 1));
        assert_eq!(first.messages.len(), 1);
        assert_eq!((first.messages[0].trigger, first.messages[0].nth), (Trigger::NewTime, 1));
        assert_eq!((first.messages[0].from_ms, first.messages[0].to_ms), (2 * H + 1, 3 * H));
        // Replayed: the same window overlaps the one just told.
        assert_eq!(decide(first.told, (2 * H + 1, 3 * H), Status::InTransit, None), Decision::default());
        let second = decide(first.told, (4 * H, 5 * H), Status::InTransit, None);
        assert_eq!(second.messages[0].nth, 2);
        let third = decide(second.told, (7 * H, 8 * H), Status::InTransit, None);
        assert_eq!(third, Decision::default(), "two a day at most");
        // Earlier counts as moved too.
        assert_eq!(decide(told(5 * H, 6 * H, 0), (H, 2 * H), Status::InTransit, None).messages.len(), 1);
    }

    #[test]
    fn the_next_stop_is_told_once_out_with_its_minutes() {
        let d = decide(told(H, 2 * H, 0), (H, 2 * H), Status::InTransit, Some(7));
        assert_eq!(d.messages.len(), 1);
        assert_eq!((d.messages[0].trigger, d.messages[0].minutes), (Trigger::NextStop, Some(7)));
        assert!(decide(told(H, 2 * H, 0), (H, 2 * H), Status::Delivered, Some(7)).messages.is_empty());
    }

    fn eta(u: &str, arrival: i64, before: u32) -> ShipmentEta {
        ShipmentEta { shipment_unique_id: u.into(), arrival, from: 0, to: 0, late: false, stops_before: before }
    }

    #[test]
    fn the_next_stop_is_the_first_remaining_one_after_a_served_stop() {
        let etas = [eta("A", 1000 + 601, 0), eta("B", 3000, 1)];
        assert!(next_stops(&etas, false, 1000).is_empty(), "nothing served: the van left the depot");
        assert_eq!(next_stops(&etas, true, 1000), [("A".to_string(), 11)]);
        assert_eq!(next_stops(&[eta("A", 500, 0)], true, 1000), [("A".to_string(), 0)]);
    }
}
