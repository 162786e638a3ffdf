//! The quote: a pure function of (request, client price list, service area, now) giving the
//! schedule and every price of a preview or an order. No I/O, no clock reads.

pub mod capacity;
pub mod pricing;
pub mod schedule;

use jiff::Timestamp;

use crate::config::{PriceList, ServiceArea};
use crate::money::Money;
pub use pricing::{Milligrams, Totals};
pub use schedule::Booking;

/// What the quote needs to know about one drop-off.
#[derive(Debug, Clone)]
pub struct DropOffRequest {
    pub zone: usize,
    /// Size class index of each parcel.
    pub sizes: Vec<usize>,
    /// The slot it asks for, if any (CONTRACT §10).
    pub asked: Option<schedule::Asked>,
    /// Where it is (a tentative plan places it; `None`: no place known, so no fleet room).
    pub at: Option<crate::geo::distance::LatLng>,
    /// Its parcels' weight in grams.
    pub grams: i64,
}

#[derive(Debug, Clone)]
pub struct QuoteRequest {
    pub pick_up_zone: usize,
    pub drop_offs: Vec<DropOffRequest>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DropOffQuote {
    pub booking: Booking,
    pub parcel_prices: Vec<Money>,
    pub parcels_price: Money,
    /// Priced options (signature, …): none are priced yet, so always zero.
    pub additional: Money,
    pub price: Money,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Quote {
    pub pick_up_city: usize,
    pub pick_up: Booking,
    pub drop_offs: Vec<DropOffQuote>,
    pub parcels_total: Money,
    pub additional_total: Money,
    pub drop_offs_total: Money,
    pub totals: Totals,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuoteError {
    /// The pick-up city has no open slot with room within the booking horizon.
    NoPickUpSlot,
    /// That drop-off cannot be served on any day the pick-up can within the horizon (its
    /// city does not operate then, or its zone has no open slot with room).
    NoDropOffSlot(usize),
    /// No single day serves the pick-up and every drop-off.
    NoCommonDay,
    /// That drop-off's asked-for slot cannot be booked.
    AskedSlot(usize, schedule::AskedProblem),
    /// That drop-off asks for another date than an earlier one.
    AskedDates(usize),
}

impl Quote {
    /// What each drop-off's shipment order is charged when this quote becomes an order: the
    /// order's totals (the preview's) shared out, so they add up to them exactly.
    pub fn charges(&self, prices: &PriceList, tax: crate::money::TaxRate) -> Vec<Totals> {
        let actuals: Vec<Option<Money>> = self.drop_offs.iter().map(|d| Some(d.price)).collect();
        pricing::allocate(&actuals, prices.min_price, tax)
    }
}

impl Quote {
    /// The room this quote takes when it becomes an order: one pick-up stop in the pick-up
    /// slot, one stop and its parcels in each drop-off's slot, each with its slot's configured
    /// limit (the store checks them, with the date's overrides, in the order's transaction),
    /// and each drop-off's stop on its depot's fleet where `fleet` says the depot books on it.
    pub fn reservations(
        &self,
        req: &QuoteRequest,
        area: &ServiceArea,
        fleet: &crate::config::CapacitySettings,
    ) -> Vec<capacity::Reservation> {
        use capacity::{FleetVisit, Load, Reservation, SlotDate, SlotKind};
        let city = area.city(self.pick_up_city);
        let mut out = Vec::with_capacity(1 + self.drop_offs.len());
        let pick_up = SlotDate {
            kind: SlotKind::PickUp,
            place: city.code.clone(),
            slot: self.pick_up.slot.code.clone(),
            date: self.pick_up.date,
        };
        let want = Load { stops: 1, parcels: 0 };
        out.push(Reservation { at: pick_up, want, configured: self.pick_up.slot.limit(), drop_off: None, fleet: None });
        for (i, (d, r)) in self.drop_offs.iter().zip(&req.drop_offs).enumerate() {
            let at = SlotDate {
                kind: SlotKind::DropOff,
                place: area.zone(r.zone).code.clone(),
                slot: d.booking.slot.code.clone(),
                date: d.booking.date,
            };
            let want = Load { stops: 1, parcels: u32::try_from(r.sizes.len()).unwrap_or(u32::MAX) };
            let depot = &area.zone(r.zone).warehouse;
            let fleet = r.at.filter(|_| fleet.fleet(depot)).map(|point| FleetVisit {
                depot: depot.clone(),
                visit: schedule::visit(&d.booking, point, want.parcels, r.grams),
            });
            out.push(Reservation { at, want, configured: d.booking.slot.limit(), drop_off: Some(i), fleet });
        }
        out
    }
}

/// Quotes `req` at `now`, booking against `capacity` (the overrides and fill of the slots it
/// may book, of the request's mode; [`capacity::Capacity::empty`] when none is limited).
pub fn quote(
    req: &QuoteRequest,
    prices: &PriceList,
    area: &ServiceArea,
    now: Timestamp,
    capacity: &capacity::Capacity,
) -> Result<Quote, QuoteError> {
    let pick_up_city = area.zone(req.pick_up_zone).city;
    let city = area.city(pick_up_city);
    let needs: Vec<schedule::Need<'_>> = req
        .drop_offs
        .iter()
        .map(|d| schedule::Need {
            zone: area.zone(d.zone),
            city: area.city(area.zone(d.zone).city),
            parcels: u32::try_from(d.sizes.len()).unwrap_or(u32::MAX),
            asked: d.asked.as_ref(),
            at: d.at,
            grams: d.grams,
        })
        .collect();
    let (pick_up, bookings) =
        schedule::book(city, &needs, now, area.horizon_days(), capacity).map_err(|e| match e {
            schedule::Unschedulable::PickUp => QuoteError::NoPickUpSlot,
            schedule::Unschedulable::DropOff(i) => QuoteError::NoDropOffSlot(i),
            schedule::Unschedulable::Together => QuoteError::NoCommonDay,
            schedule::Unschedulable::Asked(i, why) => QuoteError::AskedSlot(i, why),
            schedule::Unschedulable::AskedDates(i) => QuoteError::AskedDates(i),
        })?;
    let mut drop_offs = Vec::with_capacity(req.drop_offs.len());
    for (d, booking) in req.drop_offs.iter().zip(bookings) {
        let parcel_prices: Vec<Money> = d.sizes.iter().map(|&s| prices.sizes[s].price).collect();
        let parcels_price: Money = parcel_prices.iter().copied().sum();
        let additional = Money::ZERO;
        drop_offs.push(DropOffQuote {
            booking,
            parcel_prices,
            parcels_price,
            additional,
            price: parcels_price + additional,
        });
    }
    let parcels_total = drop_offs.iter().map(|d| d.parcels_price).sum();
    let additional_total = drop_offs.iter().map(|d| d.additional).sum();
    let drop_offs_total: Money = drop_offs.iter().map(|d| d.price).sum();
    let tax = area.region(city.region).tax;
    Ok(Quote {
        pick_up_city,
        pick_up,
        drop_offs,
        parcels_total,
        additional_total,
        drop_offs_total,
        totals: pricing::totals(drop_offs_total, prices.min_price, tax),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Overrides, Settings};
    use proptest::prelude::*;

    proptest! {
        /// Sums agree at every level and the charged amount never falls below the minimum;
        /// and what the order of any valid payload charges, summed over its shipment orders,
        /// is the preview's every total (CONTRACT §3.5): for `sync`'s one drop-off and for
        /// `async`'s up to 100, under any negotiated price list.
        #[test]
        fn sums_consistent_at_every_level(
            sizes in prop::collection::vec(prop::collection::vec(0usize..4, 1..6), 1..101),
            min_cents in 0i64..100_000,
            size_cents in prop::collection::vec(0i64..10_000, 4),
        ) {
            let mut s = Settings::load(&Overrides::default()).unwrap();
            s.pricing.min_price = Money(min_cents);
            for (size, cents) in s.pricing.sizes.iter_mut().zip(&size_cents) {
                size.price = Money(*cents);
            }
            let req = QuoteRequest {
                pick_up_zone: 0,
                drop_offs: sizes.iter().enumerate().map(|(i, v)| DropOffRequest { zone: i % s.area.zones().len(), sizes: v.clone(), asked: None, at: None, grams: 0 }).collect(),
            };
            let q = quote(&req, &s.pricing, &s.area, "2026-11-23T12:00:00Z".parse().unwrap(), &capacity::Capacity::empty()).unwrap();
            let mut sum = Money::ZERO;
            for (d, sz) in q.drop_offs.iter().zip(&sizes) {
                let expected: Money = sz.iter().map(|&i| s.pricing.sizes[i].price).sum();
                prop_assert_eq!(d.parcels_price, expected);
                prop_assert_eq!(d.price, d.parcels_price + d.additional);
                prop_assert_eq!(d.booking.date, q.pick_up.date);
                sum = sum + d.price;
            }
            prop_assert_eq!(q.drop_offs_total, sum);
            prop_assert_eq!(q.totals.actual_total_price, sum);
            prop_assert!(q.totals.total_price >= s.pricing.min_price);
            prop_assert_eq!(q.totals.price_with_tax, q.totals.total_price + q.totals.total_tax);
            // What the order of this payload charges, over its shipment orders, is the preview.
            let charges = q.charges(&s.pricing, s.area.region(s.area.city(q.pick_up_city).region).tax);
            let total = |f: fn(&Totals) -> Money| charges.iter().map(f).sum::<Money>();
            prop_assert_eq!(total(|t| t.actual_total_price), q.totals.actual_total_price);
            prop_assert_eq!(total(|t| t.actual_total_tax), q.totals.actual_total_tax);
            prop_assert_eq!(total(|t| t.total_price), q.totals.total_price);
            prop_assert_eq!(total(|t| t.total_tax), q.totals.total_tax);
            prop_assert_eq!(total(|t| t.price_with_tax), q.totals.price_with_tax);
        }
    }
}
