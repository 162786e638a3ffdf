//! Prices (CONTRACT §3.2): size class by weight, the client's price list, the minimum order
//! price and tax per amount, half-up to the cent. Integer minor units throughout.

use serde::Serialize;

use crate::config::PriceList;
use crate::money::{Money, TaxRate};

/// Weight in milligrams: fine enough that any unit conversion rounds well below a gram.
pub type Milligrams = u64;

/// The smallest size class whose limit holds the weight; `None` above the largest.
pub fn size_for(prices: &PriceList, weight: Milligrams) -> Option<usize> {
    prices.sizes.iter().position(|s| weight <= u64::from(s.max_grams) * 1000)
}

/// The order-level amounts of the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub min_price: Money,
    pub actual_total_price: Money,
    pub actual_total_tax: Money,
    pub actual_price_with_tax: Money,
    pub total_price: Money,
    pub total_tax: Money,
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
        assert_eq!(size_for(&p, 1), Some(0));
        assert_eq!(size_for(&p, 2_000_000), Some(0), "2 kg exactly is small");
        assert_eq!(size_for(&p, 2_000_001), Some(1));
        assert_eq!(size_for(&p, 5_000_000), Some(1));
        assert_eq!(size_for(&p, 10_000_000), Some(2));
        assert_eq!(size_for(&p, 25_000_000), Some(3));
        assert_eq!(size_for(&p, 25_000_001), None);
    }

    #[test]
    fn three_small_parcels_pay_the_minimum() {
        let t = totals(Money(2700), Money(4500), TaxRate(1300));
        assert_eq!(t.actual_total_tax, Money(351));
        assert_eq!(t.actual_price_with_tax, Money(3051));
        assert_eq!((t.total_price, t.total_tax, t.price_with_tax), (Money(4500), Money(585), Money(5085)));
    }

    proptest! {
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
