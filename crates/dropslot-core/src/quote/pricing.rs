//! Prices (CONTRACT §3.2): size class by weight, the client's price list, the minimum order
//! price and tax per amount, half-up to the cent. Integer minor units throughout.

use serde::Serialize;

use crate::config::PriceList;
use crate::money::{Money, TaxRate};

/// Weight in milligrams: fine enough that any unit conversion rounds well below a gram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Milligrams(pub u64);

/// Weight in micrograms: what a size limit is compared with, so that rounding to the
/// milligram can never carry a parcel just over a limit into the class below it.
pub type Micrograms = u64;

/// The smallest size class whose limit holds the weight; `None` above the largest.
pub fn size_for(prices: &PriceList, weight: Milligrams) -> Option<usize> {
    size_for_micrograms(prices, weight.0.saturating_mul(1000))
}

/// [`size_for`] to the microgram.
pub fn size_for_micrograms(prices: &PriceList, weight: Micrograms) -> Option<usize> {
    prices.sizes.iter().position(|s| weight <= u64::from(s.max_grams) * 1_000_000)
}

/// The order-level amounts of the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Totals {
    /// The caller's minimum order price.
    pub min_price: Money,
    /// The price without the minimum-price adjustment.
    pub actual_total_price: Money,
    pub actual_total_tax: Money,
    pub actual_price_with_tax: Money,
    /// `max(actual_total_price, min_price)`.
    pub total_price: Money,
    pub total_tax: Money,
    /// What is charged: `total_price` plus its tax.
    pub price_with_tax: Money,
}

/// `total_price` = max(actual, min); each amount taxed separately, half-up.
pub fn totals(actual: Money, min_price: Money, tax: TaxRate) -> Totals {
    let total = actual.max(min_price);
    let actual_tax = actual.tax(tax);
    let total_tax = total.tax(tax);
    Totals {
        min_price,
        actual_total_price: actual,
        actual_total_tax: actual_tax,
        actual_price_with_tax: actual + actual_tax,
        total_price: total,
        total_tax,
        price_with_tax: total + total_tax,
    }
}

/// Splits `total` in proportion to `weights` by largest remainder (ties go to the earlier
/// share), so the shares add up to `total` exactly. All weights zero: equal shares.
pub fn split(total: Money, weights: &[i64]) -> Vec<Money> {
    let n = weights.len();
    if n == 0 {
        return Vec::new();
    }
    let equal = weights.iter().all(|w| *w <= 0);
    let w: Vec<i128> = weights.iter().map(|w| if equal { 1 } else { i128::from((*w).max(0)) }).collect();
    let sum: i128 = w.iter().sum();
    let t = i128::from(total.0);
    let mut shares: Vec<i128> = w.iter().map(|w| t * w / sum).collect();
    let mut left = t - shares.iter().sum::<i128>();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(t * w[i] % sum), i));
    for &i in order.iter().cycle() {
        if left <= 0 {
            break;
        }
        shares[i] += 1;
        left -= 1;
    }
    shares.into_iter().map(|c| Money(c as i64)).collect()
}

/// What each shipment order of one order is charged (CONTRACT §3.2 and §3.5): the order is
/// priced as its preview is, with the minimum price and tax applied **once** to the order's
/// sum, and that is shared out so the shipment orders add up to it to the cent.
///
/// `actuals[i]` is shipment order `i`'s parcels total, `None` once it is deleted (a deleted
/// shipment is charged nothing; with every shipment deleted the order is charged nothing).
/// A shipment keeps its own `actual_total_price`; the minimum's top-up, both taxes and so the
/// totals are split in proportion to the actual prices (largest remainder). With one
/// shipment order this is exactly [`totals`] of its own price.
pub fn allocate(actuals: &[Option<Money>], min_price: Money, tax: TaxRate) -> Vec<Totals> {
    let live: Vec<usize> = (0..actuals.len()).filter(|&i| actuals[i].is_some()).collect();
    let zero = Totals { min_price, ..totals(Money::ZERO, Money::ZERO, tax) };
    let mut out = vec![zero; actuals.len()];
    if live.is_empty() {
        return out;
    }
    let prices: Vec<Money> = live.iter().map(|&i| actuals[i].unwrap_or(Money::ZERO)).collect();
    let order = totals(prices.iter().copied().sum(), min_price, tax);
    let weights: Vec<i64> = prices.iter().map(|m| m.0).collect();
    let actual_tax = split(order.actual_total_tax, &weights);
    let total = split(order.total_price, &weights);
    let total_tax = split(order.total_tax, &total.iter().map(|m| m.0).collect::<Vec<_>>());
    for (k, &i) in live.iter().enumerate() {
        out[i] = Totals {
            min_price,
            actual_total_price: prices[k],
            actual_total_tax: actual_tax[k],
            actual_price_with_tax: prices[k] + actual_tax[k],
            total_price: total[k],
            total_tax: total_tax[k],
            price_with_tax: total[k] + total_tax[k],
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Overrides, Settings};
    use proptest::prelude::*;

    fn prices() -> PriceList {
        Settings::load(&Overrides::default()).unwrap().pricing
    }

    #[test]
    fn size_class_boundaries() {
        let p = prices();
        assert_eq!(size_for(&p, Milligrams(1)), Some(0));
        assert_eq!(size_for(&p, Milligrams(2_000_000)), Some(0), "2 kg exactly is small");
        assert_eq!(size_for(&p, Milligrams(2_000_001)), Some(1));
        assert_eq!(size_for(&p, Milligrams(5_000_000)), Some(1));
        assert_eq!(size_for(&p, Milligrams(10_000_000)), Some(2));
        assert_eq!(size_for(&p, Milligrams(25_000_000)), Some(3));
        assert_eq!(size_for(&p, Milligrams(25_000_001)), None);
    }

    #[test]
    fn three_small_parcels_pay_the_minimum() {
        let t = totals(Money(2700), Money(4500), TaxRate(1300));
        assert_eq!(t.actual_total_tax, Money(351));
        assert_eq!(t.actual_price_with_tax, Money(3051));
        assert_eq!((t.total_price, t.total_tax, t.price_with_tax), (Money(4500), Money(585), Money(5085)));
    }

    #[test]
    fn two_shipments_share_one_minimum() {
        let t = allocate(&[Some(Money(900)), Some(Money(900))], Money(4500), TaxRate(1300));
        assert_eq!(t[0].total_price + t[1].total_price, Money(4500), "the minimum applies once");
        assert_eq!(t[0].total_tax + t[1].total_tax, Money(585));
        assert_eq!(t[0].actual_total_price, Money(900));
        let t = allocate(&[Some(Money(900)), None], Money(4500), TaxRate(1300));
        assert_eq!((t[0].total_price, t[1].total_price, t[1].price_with_tax), (Money(4500), Money::ZERO, Money::ZERO));
        assert!(allocate(&[None, None], Money(4500), TaxRate(1300)).iter().all(|t| t.price_with_tax == Money::ZERO));
    }

    proptest! {
        /// Shares add up to the whole and stay within a cent of the exact proportion.
        #[test]
        fn split_is_exact_and_proportional(total in 0i64..10_000_000, weights in prop::collection::vec(0i64..1_000_000, 1..20)) {
            let shares = split(Money(total), &weights);
            prop_assert_eq!(shares.iter().map(|m| m.0).sum::<i64>(), total);
            let sum: i64 = weights.iter().sum();
            if sum > 0 {
                for (s, w) in shares.iter().zip(&weights) {
                    let exact = i128::from(total) * i128::from(*w);
                    let diff = i128::from(s.0) * i128::from(sum) - exact;
                    prop_assert!(diff > -i128::from(sum) && diff < i128::from(sum), "share {} for weight {}", s.0, w);
                }
            }
        }

        /// The shipment orders of one order add up, field by field, to the order's totals, and
        /// one shipment order is priced exactly as `totals`.
        #[test]
        fn allocation_adds_up_to_the_order(actuals in prop::collection::vec(prop::option::weighted(0.8, 0i64..100_000), 1..12), min in 0i64..100_000, bp in 0u32..=3_000) {
            let shares = allocate(&actuals.iter().map(|a| a.map(Money)).collect::<Vec<_>>(), Money(min), TaxRate(bp));
            let live: Money = actuals.iter().flatten().map(|&a| Money(a)).sum();
            let order = if actuals.iter().any(Option::is_some) { totals(live, Money(min), TaxRate(bp)) } else { totals(Money::ZERO, Money::ZERO, TaxRate(bp)) };
            let sum = |f: fn(&Totals) -> Money| shares.iter().map(f).sum::<Money>();
            prop_assert_eq!(sum(|t| t.actual_total_price), order.actual_total_price);
            prop_assert_eq!(sum(|t| t.actual_total_tax), order.actual_total_tax);
            prop_assert_eq!(sum(|t| t.total_price), order.total_price);
            prop_assert_eq!(sum(|t| t.total_tax), order.total_tax);
            prop_assert_eq!(sum(|t| t.price_with_tax), order.price_with_tax);
            for t in &shares {
                prop_assert!(t.total_price >= t.actual_total_price);
            }
            if let [Some(a)] = actuals[..] {
                prop_assert_eq!(shares[0], totals(Money(a), Money(min), TaxRate(bp)));
            }
        }

        #[test]
        fn totals_are_consistent(actual in 0i64..10_000_000, min in 0i64..1_000_000, bp in 0u32..=10_000) {
            let t = totals(Money(actual), Money(min), TaxRate(bp));
            prop_assert!(t.total_price >= t.min_price);
            prop_assert!(t.total_price >= t.actual_total_price);
            prop_assert_eq!(t.price_with_tax, t.total_price + t.total_tax);
            prop_assert_eq!(t.actual_price_with_tax, t.actual_total_price + t.actual_total_tax);
            // Half-up: the tax is within half a cent of the exact product.
            let exact = i128::from(t.total_price.0) * i128::from(bp);
            let diff = i128::from(t.total_tax.0) * 10_000 - exact;
            prop_assert!((-5_000..5_000).contains(&diff) || diff == 5_000 || diff == -5_000);
            prop_assert!(diff > -5_000 && diff <= 5_000);
        }
    }
}
