//! When a delivery fails (CONTRACT §15): the attempts policy, what follows a failure, which
//! slots a re-attempt, a return or a reschedule may take, and who may change what when.
//! Pure: a backend loads the facts inside the failing (or changing) transaction, asks these
//! functions, and takes the first offer with room with the capacity rule (§10).

use jiff::Timestamp;
use jiff::civil::Date;
use serde::Serialize;

use crate::config::{City, ServiceArea, Slot};
use crate::quote::capacity::{Capacity, Limit, Load, SlotDate, SlotKind};
use crate::quote::schedule::{AskedProblem, open};
use crate::shipments::Status;

pub use crate::config::{AfterFailure, MAX_ATTEMPTS_RANGE, Policy};

/// What a failure leads to, decided in the failure's own transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowUp {
    Reattempt,
    Return,
    /// Stays `failed`: the merchant decides.
    Hold,
}

/// What follows a failed attempt, `attempts` being the attempts made (this one included):
/// the policy's choice while attempts are left; after the last one a return, unless the
/// policy holds for the merchant.
pub fn after_failure(policy: &Policy, attempts: u32) -> FollowUp {
    match policy.after_failure {
        AfterFailure::Hold => FollowUp::Hold,
        AfterFailure::Reattempt if attempts < policy.max_attempts => FollowUp::Reattempt,
        AfterFailure::Return | AfterFailure::Reattempt => FollowUp::Return,
    }
}

/// Whether a failed return attempt (`return_attempts` made, this one included) cancels the
/// shipment; otherwise the return is booked again.
pub fn return_exhausted(policy: &Policy, return_attempts: u32) -> bool {
    return_attempts >= policy.max_return_attempts
}

/// Who changed a shipment's date and slot (the `same.shipment.rescheduled` event's `changed_by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Changer {
    Merchant,
    Recipient,
    /// The service, rebooking a failed return.
    System,
}

impl Changer {
    pub fn as_str(self) -> &'static str {
        match self {
            Changer::Merchant => "merchant",
            Changer::Recipient => "recipient",
            Changer::System => "system",
        }
    }
}

/// The statuses from which a new delivery slot can be chosen (the merchant's reschedule and
/// the recipient's change page): until the shipment is out for delivery.
pub fn slot_change_open(status: Status) -> bool {
    matches!(
        status,
        Status::Scheduled
            | Status::ToPickUp
            | Status::PickedUp
            | Status::Processing
            | Status::Failed
            | Status::ToAttempt
    )
}

/// Whether the recipient may still leave a delivery instruction: until the stop is served.
pub fn instruction_open(status: Status) -> bool {
    !status.is_final() && status != Status::ReturnScheduled
}

/// Whether a move to `to` of a shipment that is `from` is a failed return stop (booked again
/// or cancelled, CONTRACT §15) rather than a move of the table.
pub fn failed_return(from: Status, to: Status) -> bool {
    from == Status::ReturnScheduled && to == Status::Failed
}

/// `POST /shipments/{id}/return` is allowed from these.
pub fn returnable(status: Status) -> bool {
    matches!(status, Status::Failed | Status::ToAttempt)
}

/// `POST /shipments/{id}/cancel` is allowed from these.
pub fn cancellable(status: Status) -> bool {
    matches!(status, Status::Failed | Status::ReturnScheduled)
}

/// Whether moving a shipment to another slot gives its current slot's place back: yes unless
/// its attempt there was made (a `failed` shipment's slot was used).
pub fn frees_current(status: Status) -> bool {
    status != Status::Failed
}

/// Why a window was closed to a change, in the recipient's and the merchant's words.
pub fn closed_because(status: Status) -> String {
    match status {
        Status::InTransit => "The parcel is already out for delivery: its time can no longer be changed.".into(),
        Status::Delivered => "The parcel has been delivered.".into(),
        Status::ReturnScheduled | Status::Returned => "The parcel is being returned to the sender.".into(),
        Status::Cancelled | Status::Deleted => "This delivery was cancelled.".into(),
        other => format!("A shipment that is {other} cannot be changed."),
    }
}

/// The longest delivery instruction.
pub const INSTRUCTION_MAX_CHARS: usize = 500;

/// A delivery instruction as given (trimmed), or why not.
pub fn instruction(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.chars().count() > INSTRUCTION_MAX_CHARS {
        return Err(format!("At most {INSTRUCTION_MAX_CHARS} characters."));
    }
    if text.chars().any(char::is_control) {
        return Err("Control characters (line breaks, tabs …) are not allowed.".into());
    }
    Ok(text.to_string())
}

/// A slot a shipment may be booked into: where its place is counted, its limit, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    pub at: SlotDate,
    pub configured: Limit,
    pub name: String,
    /// In the city's time zone (stored and shown with its offset).
    pub start: jiff::Zoned,
    pub end: jiff::Zoned,
}

impl Offer {
    fn of(kind: SlotKind, place: &str, slot: &Slot, city: &City, date: Date, now: Timestamp) -> Option<Offer> {
        let b = open(date, slot, &city.tz, now)?;
        Some(Offer {
            at: SlotDate { kind, place: place.to_string(), slot: slot.code.clone(), date },
            configured: slot.limit(),
            name: slot.name.clone(),
            start: b.start,
            end: b.end,
        })
    }
}

/// The dates a city operates on within the booking horizon, from `first_offset` days after
/// today (counted in the city).
fn dates(area: &ServiceArea, city: &City, now: Timestamp, first_offset: i32) -> Vec<Date> {
    let today = now.to_zoned(city.tz.clone()).date();
    (first_offset..i32::from(area.horizon_days()).max(first_offset + 1))
        .filter_map(|d| today.checked_add(jiff::Span::new().days(d)).ok())
        .filter(|d| city.operates_on(*d))
        .collect()
}

/// A re-attempt's slots in order: the zone's drop-off slots from the next operating day on,
/// within the booking horizon, and after `failed_on` (the date of the attempt that failed, in
/// case it is recorded late). Empty when the zone is no longer in the area.
pub fn reattempt_offers(area: &ServiceArea, zone: &str, failed_on: Date, now: Timestamp) -> Vec<Offer> {
    let Some(z) = area.zone_by_code(zone).map(|i| area.zone(i)) else { return Vec::new() };
    let city = area.city(z.city);
    dates(area, city, now, 1)
        .into_iter()
        .filter(|d| *d > failed_on)
        .flat_map(|date| {
            z.drop_off_slots.iter().filter_map(move |s| Offer::of(SlotKind::DropOff, zone, s, city, date, now))
        })
        .collect()
}

/// A return's slots in order: the city's open pick-up slots, today's still open ones first.
pub fn return_offers(area: &ServiceArea, city: &str, now: Timestamp) -> Vec<Offer> {
    let Some(c) = area.city_by_code(city).map(|i| area.city(i)) else { return Vec::new() };
    dates(area, c, now, 0)
        .into_iter()
        .flat_map(|date| c.pick_up_slots.iter().filter_map(move |s| Offer::of(SlotKind::PickUp, city, s, c, date, now)))
        .collect()
}

/// The slot a reschedule asks for, if it can be booked at all (room is the store's to decide):
/// a drop-off slot of the shipment's zone, open now, on a day its city operates, within the
/// horizon, and not before `not_before` (the pick-up's date while the parcel is not picked up).
pub fn asked_offer(
    area: &ServiceArea,
    zone: &str,
    date: Date,
    slot: &str,
    not_before: Date,
    now: Timestamp,
) -> Result<Offer, AskedProblem> {
    let z = area.zone_by_code(zone).map(|i| area.zone(i)).ok_or(AskedProblem::Unknown)?;
    let s = z.drop_off_slots.iter().find(|s| s.code == slot).ok_or(AskedProblem::Unknown)?;
    let city = area.city(z.city);
    if date < not_before || !dates(area, city, now, 0).contains(&date) {
        return Err(AskedProblem::Closed);
    }
    Offer::of(SlotKind::DropOff, zone, s, city, date, now).ok_or(AskedProblem::Closed)
}

/// The bookable drop-off slots of a zone from today within the horizon (what a change page
/// offers before room is known), not before `not_before`.
pub fn change_offers(area: &ServiceArea, zone: &str, not_before: Date, now: Timestamp) -> Vec<Offer> {
    let Some(z) = area.zone_by_code(zone).map(|i| area.zone(i)) else { return Vec::new() };
    let city = area.city(z.city);
    dates(area, city, now, 0)
        .into_iter()
        .filter(|d| *d >= not_before)
        .flat_map(|date| {
            z.drop_off_slots.iter().filter_map(move |s| Offer::of(SlotKind::DropOff, zone, s, city, date, now))
        })
        .collect()
}

/// Where a drop-off the fleet cannot route in its slot may be booked instead (issue 45,
/// `[dispatch] unplaced = "rebook"`): the zone's bookable slots that start after the one it
/// holds (`held`: its start), not before `not_before`, in order.
pub fn later_offers(area: &ServiceArea, zone: &str, held: Timestamp, not_before: Date, now: Timestamp) -> Vec<Offer> {
    change_offers(area, zone, not_before, now).into_iter().filter(|o| o.start.timestamp() > held).collect()
}

/// The earliest date a new delivery slot may be on: the pick-up's date while the parcel is not
/// picked up yet (it cannot be delivered before it is collected), else any date (the offers
/// themselves start today).
pub fn not_before(status: Status, pick_up_date: Date) -> Date {
    if matches!(status, Status::Scheduled | Status::ToPickUp) { pick_up_date } else { Date::MIN }
}

/// A slot a change page offers: the slot, whether the shipment holds it now, and what remains
/// in it beside what it holds (`None` when unlimited).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offered {
    pub offer: Offer,
    pub current: bool,
    pub remaining: Option<(Option<u32>, Option<u32>)>,
}

/// The offers with room for `want` by the fill and overrides of `capacity` (§10): a full slot
/// is left out, except the one the shipment holds (`current`: date and slot code), whose place
/// is its own.
pub fn with_room(offers: Vec<Offer>, capacity: &Capacity, want: Load, current: (Date, &str)) -> Vec<Offered> {
    offers
        .into_iter()
        .filter_map(|offer| {
            let held = offer.at.date == current.0 && offer.at.slot == current.1;
            if !held && !capacity.fits(offer.configured, &offer.at, Load::default(), want) {
                return None;
            }
            let limit = capacity.limit(offer.configured, &offer.at);
            let remaining = (!limit.is_unlimited()).then(|| limit.remaining(capacity.used(&offer.at)));
            Some(Offered { offer, current: held, remaining })
        })
        .collect()
}

/// What a drop-off shipment takes in a slot; a return takes one pick-up stop.
pub fn want(kind: SlotKind, parcels: u32) -> Load {
    match kind {
        SlotKind::DropOff => Load { stops: 1, parcels },
        SlotKind::PickUp => Load { stops: 1, parcels: 0 },
    }
}

/// The rules a backend needs to decide what follows a failure: the area (for the slots) and
/// the default policy (`[attempts]`) for clients that set none.
#[derive(Debug, Clone)]
pub struct Rules {
    pub area: std::sync::Arc<ServiceArea>,
    pub default: Policy,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Overrides, Settings};

    fn area() -> ServiceArea {
        Settings::load(&Overrides::default()).unwrap().area
    }

    #[test]
    fn a_failure_follows_the_policy_and_the_last_one_returns() {
        let p = Policy::default();
        assert_eq!(after_failure(&p, 1), FollowUp::Reattempt);
        assert_eq!(after_failure(&p, 2), FollowUp::Reattempt);
        assert_eq!(after_failure(&p, 3), FollowUp::Return);
        let hold = Policy { after_failure: AfterFailure::Hold, ..p };
        assert_eq!(after_failure(&hold, 3), FollowUp::Hold);
        let ret = Policy { after_failure: AfterFailure::Return, ..p };
        assert_eq!(after_failure(&ret, 1), FollowUp::Return);
        assert!(!return_exhausted(&p, 1));
        assert!(return_exhausted(&p, 2));
        assert_eq!(Policy { max_attempts: 0, ..p }.problems()[0].0, "max_attempts");
        for a in AfterFailure::ALL {
            assert_eq!(AfterFailure::parse(a.as_str()), Some(a));
        }
    }

    #[test]
    fn instructions_are_short_and_have_no_control_characters() {
        assert_eq!(instruction("  Leave at the back door, code 4412 ").unwrap(), "Leave at the back door, code 4412");
        assert!(instruction(&"é".repeat(500)).is_ok());
        assert!(instruction(&"é".repeat(501)).is_err());
        assert!(instruction("ring\nbell").is_err());
        assert!(instruction("a\u{7f}b").is_err());
    }

    #[test]
    fn a_reattempt_starts_on_the_next_operating_day_and_a_return_may_be_today() {
        let area = area();
        let zone = &area.zones()[0];
        let city = area.city(zone.city);
        // A Monday morning in Toronto.
        let now: Timestamp = "2026-11-23T13:00:00Z".parse().unwrap();
        let today = now.to_zoned(city.tz.clone()).date();
        let offers = reattempt_offers(&area, &zone.code, today, now);
        assert!(!offers.is_empty());
        assert!(offers.iter().all(|o| o.at.date > today && o.at.kind == SlotKind::DropOff));
        assert!(offers.windows(2).all(|w| w[0].start <= w[1].start), "in time order");
        let returns = return_offers(&area, &city.code, now);
        assert!(returns.iter().all(|o| o.at.kind == SlotKind::PickUp && o.at.date >= today));
        assert!(reattempt_offers(&area, "NOPE", today, now).is_empty());
        let late = offers[offers.len() - 1].at.date;
        assert!(
            reattempt_offers(&area, &zone.code, late, now).iter().all(|o| o.at.date > late),
            "after the failed day"
        );
        let first = &offers[0];
        assert_eq!(asked_offer(&area, &zone.code, first.at.date, &first.at.slot, today, now), Ok(first.clone()));
        assert_eq!(asked_offer(&area, &zone.code, first.at.date, "NOPE", today, now), Err(AskedProblem::Unknown));
        let past = today.checked_sub(jiff::Span::new().days(1)).unwrap();
        assert_eq!(asked_offer(&area, &zone.code, past, &first.at.slot, past, now), Err(AskedProblem::Closed));
        assert_eq!(
            asked_offer(&area, &zone.code, first.at.date, &first.at.slot, first.at.date.tomorrow().unwrap(), now),
            Err(AskedProblem::Closed),
            "not before the pick-up"
        );
    }

    #[test]
    fn a_change_page_offers_slots_with_room_and_keeps_the_one_held() {
        let area = area();
        let zone = &area.zones()[0];
        let now: Timestamp = "2026-11-23T13:00:00Z".parse().unwrap();
        let today = now.to_zoned(area.city(zone.city).tz.clone()).date();
        let offers = change_offers(&area, &zone.code, today, now);
        let (first, second) = (offers[0].clone(), offers[1].clone());
        let full = crate::quote::capacity::Override { stops: Some(Some(1)), parcels: None };
        let used = Load { stops: 1, parcels: 2 };
        let capacity = Capacity::new(
            [(first.at.clone(), full), (second.at.clone(), full)].into(),
            [(first.at.clone(), used), (second.at.clone(), used)].into(),
        );
        let want = want(SlotKind::DropOff, 1);
        let shown = with_room(offers.clone(), &capacity, want, (second.at.date, &second.at.slot));
        assert!(shown.iter().all(|o| o.offer != first), "a full slot is not offered");
        let held = shown.iter().find(|o| o.offer == second).expect("the slot held stays, full or not");
        assert!(held.current && held.remaining == Some((Some(0), None)));
        assert!(shown.iter().filter(|o| o.offer != second).all(|o| !o.current && o.remaining.is_none()));
        assert_eq!(shown.len(), offers.len() - 1);
        let pick_up = today.tomorrow().unwrap();
        assert_eq!(not_before(Status::ToPickUp, pick_up), pick_up, "not before the pick-up");
        assert_eq!(not_before(Status::Processing, pick_up), Date::MIN, "picked up: any date from today");
    }

    #[test]
    fn windows_to_change() {
        assert!(slot_change_open(Status::ToAttempt) && slot_change_open(Status::Failed));
        assert!(!slot_change_open(Status::InTransit));
        assert!(instruction_open(Status::InTransit) && !instruction_open(Status::Delivered));
        assert!(!frees_current(Status::Failed) && frees_current(Status::ToAttempt));
        assert!(returnable(Status::ToAttempt) && !returnable(Status::InTransit));
        assert!(cancellable(Status::ReturnScheduled) && !cancellable(Status::ToAttempt));
        assert!(failed_return(Status::ReturnScheduled, Status::Failed));
        assert!(
            !failed_return(Status::InTransit, Status::Failed)
                && !failed_return(Status::ReturnScheduled, Status::Returned)
        );
    }
}
