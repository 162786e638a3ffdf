//! Money in integer minor units (cents) end to end; a JSON number with at most two decimals
//! only at the wire. Tax is a rate in basis points applied half-up to the cent.

use serde::{Deserialize, Serialize, Serializer};

/// An amount in minor units (cents). Never a float inside the service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Money(pub i64);

impl Money {
    pub const ZERO: Money = Money(0);
    /// The largest amount a price list may hold (1,000,000.00): far above any parcel price,
    /// and small enough that every sum of a request stays exact on the wire.
    pub const MAX: Money = Money(100_000_000);
    /// What [`Money::parse`] accepts, in words.
    pub const RULE: &'static str = "The amount must be a decimal from 0 to 1000000.00 with at most two decimals.";

    pub fn cents(self) -> i64 {
        self.0
    }

    #[must_use]
    /// Tax at `rate` rounded half-up to the cent (amounts are never negative here).
    pub fn tax(self, rate: TaxRate) -> Money {
        let product = i128::from(self.0) * i128::from(rate.0);
        Money(((product + 5_000) / 10_000) as i64)
    }

    /// Parses "45", "45.5", "45.00" (config and price lists); rejects more than 2 decimals,
    /// signs, exponents and anything above [`Money::MAX`].
    pub fn parse(s: &str) -> Option<Money> {
        let s = s.trim();
        let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
        if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) || frac.len() > 2 {
            return None;
        }
        if !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let whole: i64 = whole.parse().ok()?;
        let frac: i64 = format!("{frac:0<2}").parse().ok()?;
        whole.checked_mul(100)?.checked_add(frac).map(Money).filter(|m| *m <= Money::MAX)
    }
}

impl std::ops::Add for Money {
    type Output = Money;
    fn add(self, rhs: Money) -> Money {
        Money(self.0 + rhs.0)
    }
}

impl std::iter::Sum for Money {
    fn sum<I: Iterator<Item = Money>>(iter: I) -> Money {
        iter.fold(Money::ZERO, |a, b| a + b)
    }
}

impl std::fmt::Display for Money {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

/// On the wire a JSON number: cents / 100 is the double nearest the decimal, which the
/// shortest-round-trip printer writes back as that decimal (e.g. 50.85, 45.0).
impl Serialize for Money {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0 as f64 / 100.0)
    }
}

/// Reads an amount from its decimal text, never by float arithmetic: a string ("12.34") or an
/// integer as written, or a JSON number through its shortest round-trip text (what the
/// wire writes: `45.0`, `12.34`), which for at most two decimals below [`Money::MAX`] is
/// exactly the decimal the client typed. Then [`Money::parse`] with its bound.
impl<'de> Deserialize<'de> for Money {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Amount;
        impl serde::de::Visitor<'_> for Amount {
            type Value = Money;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an amount such as \"12.34\"")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Money, E> {
                Money::parse(s).ok_or_else(|| crate::rule::invalid_value(Money::RULE))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Money, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Money, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Money, E> {
                // Rust prints the shortest text that reads back as `v`, never in exponent form.
                self.visit_str(&v.to_string())
            }
        }
        d.deserialize_any(Amount)
    }
}

/// In the OpenAPI document: the JSON number the service writes (the serialiser above).
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for Money {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::Number)
            .minimum(Some(0))
            .description(Some("An amount with at most two decimals, in the currency of the price list (45.0, 50.85)."))
            .examples([serde_json::json!(50.85)])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for Money {}

/// A tax rate in basis points (1300 = 13 %).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaxRate(pub u32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tax_rounds_half_up_per_amount() {
        assert_eq!(Money(4500).tax(TaxRate(1300)), Money(585));
        assert_eq!(Money(2700).tax(TaxRate(1300)), Money(351));
        // 0.5 cent rounds up: 50 * 13 % = 6.5 → 7
        assert_eq!(Money(50).tax(TaxRate(1300)), Money(7));
        assert_eq!(Money(49).tax(TaxRate(1300)), Money(6));
    }

    #[test]
    fn parses_and_prints() {
        assert_eq!(Money::parse("45"), Some(Money(4500)));
        assert_eq!(Money::parse("9.5"), Some(Money(950)));
        assert_eq!(Money::parse("12.34"), Some(Money(1234)));
        assert_eq!(Money::parse("1.234"), None);
        assert_eq!(Money::parse("-1"), None);
        assert_eq!(Money::parse("abc"), None);
        assert_eq!(Money(5085).to_string(), "50.85");
        assert_eq!(serde_json::to_string(&Money(5085)).unwrap(), "50.85");
        assert_eq!(serde_json::to_string(&Money(4500)).unwrap(), "45.0");
        assert_eq!(serde_json::to_string(&Money(1)).unwrap(), "0.01");
        for m in [Money(0), Money(1), Money(4500), Money(5085), Money(99_999_999), Money::MAX] {
            let back: Money = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
            assert_eq!(back, m, "round trip");
        }
        assert_eq!(serde_json::from_str::<Money>("\"9.50\"").unwrap(), Money(950));
        assert!(serde_json::from_str::<Money>("1.234").is_err());
        assert!(serde_json::from_str::<Money>("-1.5").is_err());
        assert_eq!(serde_json::from_str::<Money>("1000000.00").unwrap(), Money::MAX);
        assert_eq!(serde_json::from_str::<Money>("999999.99").unwrap(), Money(99_999_999));
        for too_big in ["\"10000000000.03\"", "90000000000000000", "\"1000000.01\"", "1e300"] {
            assert!(serde_json::from_str::<Money>(too_big).is_err(), "{too_big}");
        }
    }
}
