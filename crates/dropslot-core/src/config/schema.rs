//! The OpenAPI schemas of the configuration's wire types (a client's terms: price list,
//! limits, rate limits). Each is a derived mirror written in the API's terms (amounts as
//! number or decimal text); the tests below serialise a real value and require its keys to
//! be the mirror's properties, so a field added there fails the suite.

use std::borrow::Cow;

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

/// `impl ToSchema for <real type>` by its mirror (same name, same schema).
macro_rules! mirrored {
    ($($real:ty => $mirror:ty),* $(,)?) => {$(
        impl PartialSchema for $real {
            fn schema() -> RefOr<Schema> {
                <$mirror as PartialSchema>::schema()
            }
        }
        impl ToSchema for $real {
            fn name() -> Cow<'static, str> {
                <$mirror as ToSchema>::name()
            }
            fn schemas(out: &mut Vec<(String, RefOr<Schema>)>) {
                <$mirror as ToSchema>::schemas(out);
            }
        }
    )*};
}

mirrored!(
    super::SizeClass => SizeClass,
    super::PriceList => PriceList,
    super::Limits => Limits,
    super::Bucket => Bucket,
    super::RateLimits => RateLimits,
);

/// A price-list amount: a JSON number or its decimal text ("12.34"), 0 to 1,000,000.00 with
/// at most two decimals (`Money`'s reader); the service writes numbers.
fn amount() -> Schema {
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Number).minimum(Some(0)).maximum(Some(1_000_000)))
        .item(ObjectBuilder::new().schema_type(Type::String).pattern(Some(r"^[0-9]+(\.[0-9]{1,2})?$")))
        .description(Some(crate::money::Money::RULE))
        .into()
}

/// A size class: parcels up to `max_grams` cost `price`.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SizeClass {
    #[schema(min_length = 1)]
    code: String,
    name: String,
    /// Grows with each class.
    #[schema(format = Int64, minimum = 1, maximum = 4_294_967_295_u64)]
    max_grams: u32,
    #[schema(schema_with = amount)]
    price: String,
    note: String,
}

/// A client's price list: size classes (smallest first), minimum price and payment type.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct PriceList {
    #[schema(schema_with = amount)]
    min_price: String,
    payment_type: super::PaymentType,
    /// Smallest first.
    #[schema(min_items = 1)]
    sizes: Vec<SizeClass>,
}

/// Per-request limits (the interface's Limits table).
/// A per-request limit: a whole number from 1 (read as an unsigned 64-bit integer).
fn limit() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(1))
        .maximum(Some(utoipa::Number::UInt(usize::MAX)))
        .into()
}

#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Limits {
    #[schema(schema_with = limit)]
    order_drop_offs: u64,
    #[schema(schema_with = limit)]
    order_parcels_per_drop_off: u64,
    #[schema(schema_with = limit)]
    preview_drop_offs: u64,
    #[schema(schema_with = limit)]
    preview_parcels_per_drop_off: u64,
    /// Drop-offs per asynchronous order; default 100.
    #[serde(default)]
    #[schema(schema_with = limit)]
    async_drop_offs: u64,
    /// Parcels per drop-off of an asynchronous order; default 5.
    #[serde(default)]
    #[schema(schema_with = limit)]
    async_parcels_per_drop_off: u64,
    /// Default 3.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10)]
    max_delivery_attempts: u32,
}

/// A token bucket: `per_second` on average (0 = no limit), up to `burst` at once.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Bucket {
    #[schema(format = Int64, minimum = 0, maximum = 1_000_000)]
    per_second: u32,
    /// 1 to 1,000,000 when `per_second` is not 0.
    #[schema(format = Int64, minimum = 0, maximum = 4_294_967_295_u64)]
    burst: u32,
}

/// Requests per token: preview, order creation, everything else.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct RateLimits {
    preview: Bucket,
    orders: Bucket,
    other: Bucket,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;
    use utoipa::PartialSchema;

    use crate::config::{Bucket, Limits, PaymentType, PriceList, RateLimits, SizeClass};
    use crate::money::Money;

    /// The property names of `T`'s schema.
    fn properties<T: PartialSchema>() -> BTreeSet<String> {
        let schema = serde_json::to_value(T::schema()).unwrap();
        schema["properties"].as_object().expect("an object schema").keys().cloned().collect()
    }

    fn keys(value: &impl serde::Serialize) -> BTreeSet<String> {
        match serde_json::to_value(value).unwrap() {
            Value::Object(map) => map.keys().cloned().collect(),
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn mirrors_have_the_real_types_fields() {
        let payment = PaymentType { id: 1, code: "invoice".into(), name: "Monthly invoice".into() };
        let size = SizeClass {
            code: "small".into(),
            name: "Small".into(),
            max_grams: 2000,
            price: Money(900),
            note: "n".into(),
        };
        let prices = PriceList { min_price: Money(4500), payment_type: payment.clone(), sizes: vec![size.clone()] };
        let limits = Limits {
            order_drop_offs: 1,
            order_parcels_per_drop_off: 5,
            preview_drop_offs: 100,
            preview_parcels_per_drop_off: 50,
            async_drop_offs: 100,
            async_parcels_per_drop_off: 5,
            max_delivery_attempts: 3,
        };
        let bucket = Bucket { per_second: 1, burst: 1 };
        let rates = RateLimits { preview: bucket, orders: bucket, other: bucket };
        assert_eq!(keys(&size), properties::<SizeClass>());
        assert_eq!(keys(&prices), properties::<PriceList>());
        assert_eq!(keys(&limits), properties::<Limits>());
        assert_eq!(keys(&bucket), properties::<Bucket>());
        assert_eq!(keys(&rates), properties::<RateLimits>());
    }
}
