//! One JSON parser for every request body, and one canonical form.
//!
//! A body is parsed exactly once, into a `serde_json::Value`, by [`parse_value`]. That pass
//! refuses what a typed parse would silently skip inside unknown fields: numbers out of range
//! (`1e400`), nesting deeper than 128 levels, and duplicated object keys. The typed request is
//! then read from that value by [`from_value`], and the idempotency fingerprint is the value's
//! canonical text ([`canonical`]). So there is no body that parses for one purpose and not
//! the other: the fingerprint can never fail open.
//!
//! [`from_value`] reads through [`Strict`], a deserializer over `&Value` that refuses an array
//! where an object is expected (serde's derive would read it by position) and words every
//! type error in JSON terms ("must be an object, not an array"), never in Rust's.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::{Error, FieldErrors};

/// Parses a whole body into a value, or a 400 that names the failing path where there is one.
pub fn parse_value(bytes: &[u8]) -> Result<Value, Error> {
    let trail = RefCell::new(Trail::default());
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = DeserializeSeed::deserialize(Node { trail: &trail }, &mut de).and_then(|v| de.end().map(|()| v));
    parsed.map_err(|e| {
        let trail = trail.into_inner();
        let path = trail.path();
        if trail.duplicate {
            return bad("A key appears more than once in an object.", path, "This key appears more than once.");
        }
        let text = e.to_string();
        if text.starts_with("number out of range") {
            return bad("A number in the request body is out of range.", path, "The number is out of range.");
        }
        if text.starts_with("recursion limit exceeded") {
            return bad(
                "The request body is nested too deeply.",
                path,
                "Nested more than 128 levels of arrays and objects.",
            );
        }
        Error::BadRequest { message: format!("Malformed JSON: {e}."), errors: FieldErrors::new() }
    })
}

/// Reads a typed request from a parsed body; a type error is a 400 at its dotted path, a
/// value refused by the type's own rule ([`dropslot_core::rule::invalid_value`]) a 422 at its path.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, Error> {
    // Most bodies are valid: read them without tracking the path (the tracking wrapper was
    // about 1.5 % of a preview), and only a failing one again, with it, for its error's path.
    // The read is deterministic, so the second fails the same way.
    if let Ok(typed) = T::deserialize(Strict(value)) {
        return Ok(typed);
    }
    serde_path_to_error::deserialize(Strict(value)).map_err(|e| {
        let mut path = dotted(e.path());
        let mut message = e.inner().to_string();
        if let Some(rule) = dropslot_core::rule::broken(&message) {
            return Error::Validation(FieldErrors::single(path, rule));
        }
        // serde's derive words these itself, in Rust terms: say them in the client's.
        if let Some(field) = between(&message, "missing field `", "`") {
            path = join(&path, field);
            message = "This field is required.".into();
        } else if let Some(field) = between(&message, "unknown field `", "`") {
            // The path already ends at the unknown key when it was read as a map entry.
            if path != field && !path.ends_with(&format!(".{field}")) {
                path = join(&path, field);
            }
            message = "This field is not allowed here.".into();
        } else if let Some(variant) = between(&message, "unknown variant `", "`") {
            message = format!("{variant:?} is not one of the allowed values.");
        }
        if path.is_empty() {
            Error::BadRequest {
                message: "The request body must be a JSON object.".into(),
                errors: FieldErrors::single("body", message),
            }
        } else {
            Error::BadRequest {
                message: "A field has the wrong JSON type.".into(),
                errors: FieldErrors::single(path, message),
            }
        }
    })
}

/// The canonical text of a value: object keys sorted, no whitespace. Two bodies that differ
/// only in key order or formatting have the same canonical text.
pub fn canonical(value: &Value) -> String {
    // `serde_json::Map` is a BTreeMap here (no `preserve_order`), so keys serialise sorted.
    value.to_string()
}

fn between<'m>(message: &'m str, start: &str, end: &str) -> Option<&'m str> {
    message.strip_prefix(start)?.split(end).next()
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() { field.to_string() } else { format!("{path}.{field}") }
}

fn bad(message: &str, path: String, detail: &str) -> Error {
    let path = if path.is_empty() { "body".to_string() } else { path };
    Error::BadRequest { message: message.into(), errors: FieldErrors::single(path, detail) }
}

/// The path to a failure, collected innermost first as the error travels up.
#[derive(Default)]
struct Trail {
    segments: Vec<String>,
    duplicate: bool,
}

impl Trail {
    fn path(&self) -> String {
        self.segments.iter().rev().cloned().collect::<Vec<_>>().join(".")
    }
}

/// Deserializes any JSON value, refusing duplicate keys; records the path of a failure.
#[derive(Clone, Copy)]
struct Node<'t> {
    trail: &'t RefCell<Trail>,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v).map(Value::Number).ok_or_else(|| E::custom("number out of range"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            match seq.next_element_seed(self) {
                Ok(Some(v)) => out.push(v),
                Ok(None) => return Ok(Value::Array(out)),
                Err(e) => {
                    self.trail.borrow_mut().segments.push(out.len().to_string());
                    return Err(e);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = match map.next_value_seed(self) {
                Ok(v) => v,
                Err(e) => {
                    self.trail.borrow_mut().segments.push(key);
                    return Err(e);
                }
            };
            if out.contains_key(&key) {
                let mut trail = self.trail.borrow_mut();
                trail.segments.push(key);
                trail.duplicate = true;
                return Err(de::Error::custom("duplicate key"));
            }
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// A deserializer over a parsed value that accepts only the JSON type a field asks for.
struct Strict<'a>(&'a Value);

/// "an array", "a string", …: how a JSON value is named in an error message.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a decimal number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn wrong(expected: &str, got: &Value) -> serde_json::Error {
    de::Error::custom(format_args!("Must be {expected}, not {}.", kind(got)))
}

/// A whole number written with a decimal point or an exponent (`48.0`, `1e3`): JSON has one
/// number type, and JSON Schema's `integer` (the OpenAPI document's) admits it, so it reads
/// as that integer. Only below 2^53, where every whole double is exact: an integer literal
/// too large for 64 bits is also held as a double, rounded, and must stay refused.
fn whole(n: &Value) -> Option<i64> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < EXACT).map(|f| f as i64)
}

macro_rules! integer {
    ($method:ident, $visit:ident, $t:ty, $via:ident) => {
        fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value, serde_json::Error> {
            let n = self.0.$via().and_then(|n| <$t>::try_from(n).ok());
            match n.or_else(|| whole(self.0).and_then(|n| <$t>::try_from(n).ok())) {
                Some(n) => v.$visit(n),
                None if self.0.is_i64() || self.0.is_u64() || whole(self.0).is_some() => {
                    Err(de::Error::custom(format_args!("Must be a whole number from {} to {}.", <$t>::MIN, <$t>::MAX)))
                }
                None => Err(wrong("an integer", self.0)),
            }
        }
    };
}

impl<'de> de::Deserializer<'de> for Strict<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => v.visit_unit(),
            Value::Bool(b) => v.visit_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => v.visit_u64(u),
                (_, Some(i), _) => v.visit_i64(i),
                (_, _, Some(f)) => v.visit_f64(f),
                _ => Err(de::Error::custom("Must be a number.")),
            },
            Value::String(s) => v.visit_borrowed_str(s),
            Value::Array(a) => v.visit_seq(Seq { items: a.iter() }),
            Value::Object(m) => v.visit_map(Fields { entries: m.iter(), value: None }),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Bool(b) => v.visit_bool(*b),
            other => Err(wrong("true or false", other)),
        }
    }

    integer!(deserialize_i8, visit_i8, i8, as_i64);
    integer!(deserialize_i16, visit_i16, i16, as_i64);
    integer!(deserialize_i32, visit_i32, i32, as_i64);
    integer!(deserialize_i64, visit_i64, i64, as_i64);
    integer!(deserialize_u8, visit_u8, u8, as_u64);
    integer!(deserialize_u16, visit_u16, u16, as_u64);
    integer!(deserialize_u32, visit_u32, u32, as_u64);
    integer!(deserialize_u64, visit_u64, u64, as_u64);

    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        self.deserialize_f64(v)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.0.as_f64() {
            Some(f) => v.visit_f64(f),
            None => Err(wrong("a number", self.0)),
        }
    }

    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        self.deserialize_str(v)
    }
    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::String(s) => v.visit_borrowed_str(s),
            other => Err(wrong("a string", other)),
        }
    }
    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        self.deserialize_str(v)
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        self.deserialize_str(v)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        self.deserialize_str(v)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => v.visit_none(),
            _ => v.visit_some(self),
        }
    }
    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => v.visit_unit(),
            other => Err(wrong("null", other)),
        }
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(self, _: &'static str, v: V) -> Result<V::Value, Self::Error> {
        self.deserialize_unit(v)
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, v: V) -> Result<V::Value, Self::Error> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Array(a) => v.visit_seq(Seq { items: a.iter() }),
            other => Err(wrong("an array", other)),
        }
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, v: V) -> Result<V::Value, Self::Error> {
        self.deserialize_seq(v)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        v: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_seq(v)
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Object(m) => v.visit_map(Fields { entries: m.iter(), value: None }),
            other => Err(wrong("an object", other)),
        }
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Self::Error> {
        // Never by position: serde's derive would read `["a", "b"]` as a struct.
        self.deserialize_map(v)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::String(s) => v.visit_enum(s.as_str().into_deserializer()),
            other => Err(wrong("a string", other)),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        self.deserialize_str(v)
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        v.visit_unit()
    }
}

struct Seq<'a> {
    items: std::slice::Iter<'a, Value>,
}

impl<'de> SeqAccess<'de> for Seq<'de> {
    type Error = serde_json::Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Self::Error> {
        match self.items.next() {
            None => Ok(None),
            Some(v) => seed.deserialize(Strict(v)).map(Some),
        }
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Fields<'a> {
    entries: serde_json::map::Iter<'a>,
    value: Option<&'a Value>,
}

impl<'de> MapAccess<'de> for Fields<'de> {
    type Error = serde_json::Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Self::Error> {
        match self.entries.next() {
            None => Ok(None),
            Some((k, v)) => {
                self.value = Some(v);
                seed.deserialize(de::value::BorrowedStrDeserializer::new(k)).map(Some)
            }
        }
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Self::Error> {
        let v = self.value.take().ok_or_else(|| de::Error::custom("a value was read twice"))?;
        seed.deserialize(Strict(v))
    }
}

fn dotted(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path {
        if !out.is_empty() {
            out.push('.');
        }
        match seg {
            Segment::Seq { index } => out.push_str(&index.to_string()),
            Segment::Map { key } => out.push_str(key),
            Segment::Enum { variant } => out.push_str(variant),
            Segment::Unknown => out.push('?'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct P {
        a: Option<Vec<Q>>,
        o: Option<Q>,
        n: Option<i64>,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Q {
        v: Option<f64>,
    }

    fn errors(e: Error) -> (String, FieldErrors) {
        match e {
            Error::BadRequest { message, errors } => (message, errors),
            other => panic!("{other:?}"),
        }
    }

    fn typed(body: &str) -> Result<P, Error> {
        from_value(&parse_value(body.as_bytes())?)
    }

    #[test]
    fn type_errors_carry_dotted_paths_and_json_words() {
        let (_, e) = errors(typed(r#"{"a":[{"v":1},{"v":"x"}]}"#).unwrap_err());
        assert_eq!(e, FieldErrors::single("a.1.v", "Must be a number, not a string."));
        let (_, e) = errors(typed(r#"{"o":["x"]}"#).unwrap_err());
        assert_eq!(e, FieldErrors::single("o", "Must be an object, not an array."), "never read by position");
        let (_, e) = errors(typed(r#"{"n":1.5}"#).unwrap_err());
        assert_eq!(e, FieldErrors::single("n", "Must be an integer, not a decimal number."));
        // A whole number is an integer however it is written (JSON Schema agrees).
        assert_eq!(typed(r#"{"n":48.0}"#).unwrap().n, Some(48));
        assert_eq!(typed(r#"{"n":1e3}"#).unwrap().n, Some(1000));
        for rounded in ["1e300", "9223372036854775808", "-9223372036854775809"] {
            let (_, e) = errors(typed(&format!(r#"{{"n":{rounded}}}"#)).unwrap_err());
            assert!(e.contains("n"), "{rounded}: {e:?}");
        }
        let (m, e) = errors(typed("[1]").unwrap_err());
        assert_eq!(
            (m.as_str(), e),
            (
                "The request body must be a JSON object.",
                FieldErrors::single("body", "Must be an object, not an array.")
            )
        );
    }

    #[test]
    fn what_a_typed_parse_would_skip_is_refused_at_its_path() {
        let (m, e) = errors(typed(r#"{"meta":{"x":[1, 1e400]}}"#).unwrap_err());
        assert!(e.contains("meta.x.1"), "{m} {e:?}");
        let deep = format!(r#"{{"meta":{}{}}}"#, "[".repeat(200), "]".repeat(200));
        let (_, e) = errors(typed(&deep).unwrap_err());
        assert_eq!(e.len_total(), 1);
        assert!(format!("{e:?}").contains("\"meta.0.0.0."), "{e:?}");
        let (m, e) = errors(typed(r#"{"a":[{"v":1,"v":2}]}"#).unwrap_err());
        assert_eq!(m, "A key appears more than once in an object.");
        assert!(e.contains("a.0.v"), "{e:?}");
        assert!(matches!(typed("{\"a\":"), Err(Error::BadRequest { .. })));
        assert!(matches!(typed("{} trailing"), Err(Error::BadRequest { .. })));
    }

    #[test]
    fn canonical_text_ignores_key_order_and_spacing_only() {
        let a = parse_value(br#"{"b": 1, "a": [2.0, "x"]}"#).unwrap();
        let b = parse_value(br#"{"a":[2.0,"x"],"b":1}"#).unwrap();
        let c = parse_value(br#"{"a":[2,"x"],"b":1}"#).unwrap();
        assert_eq!(canonical(&a), canonical(&b));
        assert_ne!(canonical(&a), canonical(&c), "500 and 500.0 are different bodies");
    }
}
