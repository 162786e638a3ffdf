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
//! type error in JSON terms ("must be an object, not an array"), never in Rust's. A required
//! field left out is a 422 at its path, every one of them: a failed read is read again with
//! each such field as a hole until no fault is left or one is a 400.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
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

/// Reads a typed request from a parsed body. A wrong JSON type, an unknown field or value is
/// a 400 at its dotted path; a required field left out ("This field is required.") or a value
/// refused by the type's own rule ([`dropslot_core::rule::invalid_value`]) is a 422 at its
/// path, every one of them (up to [`MOST_INVALID`]) unless the body also has a 400's fault,
/// which comes first (JSON types are checked before validation, docs/api.md).
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, Error> {
    // Most bodies are valid: read them without tracking the path (the tracking wrapper was
    // about 1.5 % of a preview), and only a failing one again, with it, for its error's path.
    // The read is deterministic, so the second fails the same way.
    let mut holes = Holes::default();
    if let Ok(typed) = T::deserialize(Strict::new(value, &holes)) {
        return Ok(typed);
    }
    // serde stops at the first fault. A field left out or a value refused is read again as a
    // hole (an empty value of whatever type is asked), so the next read goes on past it and
    // finds the next fault, until none is left or one is a 400.
    let mut invalid = FieldErrors::new();
    loop {
        let e = match serde_path_to_error::deserialize::<_, T>(Strict::new(value, &holes)) {
            Ok(typed) if invalid.is_empty() => return Ok(typed),
            Ok(_) => return Err(Error::Validation(invalid)),
            Err(e) => e,
        };
        let message = e.inner().to_string();
        let Some(at) = resolve(value, e.path(), &holes) else {
            // A fault inside a hole is one of the hole's own making: the field's is reported.
            return Err(if invalid.is_empty() { wrong_shape(e.path(), message) } else { Error::Validation(invalid) });
        };
        if let Some(rule) = dropslot_core::rule::broken(&message) {
            invalid.add(dotted(e.path()), rule);
            holes.refused.insert(std::ptr::from_ref(at) as usize);
        } else if let (Some(field), Value::Object(object)) = (between(&message, "missing field `", "`"), at) {
            invalid.add(join(&dotted(e.path()), field), "This field is required.");
            holes.missing.entry(std::ptr::from_ref(object) as usize).or_default().push(field.to_string());
        } else {
            return Err(wrong_shape(e.path(), message));
        }
        if invalid.len_total() >= MOST_INVALID {
            return Err(Error::Validation(invalid));
        }
    }
}

/// At most this many faults of a body are looked for (each costs a read of the whole body).
const MOST_INVALID: usize = 32;

/// The 400 of a fault that is not a value's: its message says what the errors say.
fn wrong_shape(path: &serde_path_to_error::Path, message: String) -> Error {
    let mut path = dotted(path);
    let mut message = message;
    // serde's derive words these itself, in Rust terms: say them in the client's.
    let summary = if let Some(field) = between(&message, "unknown field `", "`") {
        // The path already ends at the unknown key when it was read as a map entry.
        if path != field && !path.ends_with(&format!(".{field}")) {
            path = join(&path, field);
        }
        message = "This field is not allowed here.".into();
        "A field is not one this request takes."
    } else if let Some(variant) = between(&message, "unknown variant `", "`") {
        message = format!("{variant:?} is not one of the allowed values.");
        "A field has a value that is not one of the allowed values."
    } else if message.starts_with("Must be a whole number from ") {
        "A number in the request body is out of range."
    } else {
        "A field has the wrong JSON type."
    };
    if path.is_empty() {
        Error::BadRequest {
            message: "The request body must be a JSON object.".into(),
            errors: FieldErrors::single("body", message),
        }
    } else {
        Error::BadRequest { message: summary.into(), errors: FieldErrors::single(path, message) }
    }
}

/// The value of the body at `path`, when it is one the client sent (not a hole, nor inside one).
fn resolve<'v>(value: &'v Value, path: &serde_path_to_error::Path, holes: &Holes) -> Option<&'v Value> {
    use serde_path_to_error::Segment;
    let mut at = value;
    for seg in path {
        if holes.is_hole(at) {
            return None;
        }
        at = match (seg, at) {
            (Segment::Map { key } | Segment::Enum { variant: key }, Value::Object(m)) => m.get(key.as_str())?,
            (Segment::Seq { index }, Value::Array(a)) => a.get(*index)?,
            _ => return None,
        };
    }
    (!holes.is_hole(at)).then_some(at)
}

/// Where a read goes on past a fault: the fields an object lacks and the values a rule
/// refused, each read as a hole. Nodes are known by their address in the body being read
/// (never by their content, so no body can send a hole).
#[derive(Default)]
struct Holes {
    /// Object (by address) → the required fields it lacks.
    missing: HashMap<usize, Vec<String>>,
    /// Values (by address) a rule refused.
    refused: HashSet<usize>,
}

/// What a hole reads from: a value no body holds.
static HOLE: Value = Value::Null;

impl Holes {
    fn is_hole(&self, v: &Value) -> bool {
        std::ptr::eq(v, std::ptr::from_ref(&HOLE))
            || (!self.refused.is_empty() && self.refused.contains(&(std::ptr::from_ref(v) as usize)))
    }
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

/// A deserializer over a parsed value that accepts only the JSON type a field asks for. A
/// hole ([`Holes`]) reads as the empty value of whatever type is asked (`false`, `0`, `""`,
/// `[]`, no value, a struct of holes), so that a read goes on past it.
#[derive(Clone, Copy)]
struct Strict<'a> {
    value: &'a Value,
    holes: &'a Holes,
}

impl<'a> Strict<'a> {
    fn new(value: &'a Value, holes: &'a Holes) -> Self {
        Strict { value, holes }
    }
    fn hole(&self) -> bool {
        self.holes.is_hole(self.value)
    }
    fn fields(self, m: &'a Map<String, Value>) -> Fields<'a> {
        // A first read has no holes: no lookup on the path every valid body takes.
        let lacking = if self.holes.missing.is_empty() {
            &[][..]
        } else {
            self.holes.missing.get(&(std::ptr::from_ref(m) as usize)).map_or(&[][..], Vec::as_slice)
        };
        Fields { entries: Some(m.iter()), lacking: lacking.iter(), named: [].iter(), value: None, holes: self.holes }
    }
    fn seq(self, items: &'a [Value]) -> Seq<'a> {
        Seq { items: items.iter(), holes: self.holes }
    }
}

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
            if self.hole() {
                return v.$visit(0);
            }
            let n = self.value.$via().and_then(|n| <$t>::try_from(n).ok());
            match n.or_else(|| whole(self.value).and_then(|n| <$t>::try_from(n).ok())) {
                Some(n) => v.$visit(n),
                None if self.value.is_i64() || self.value.is_u64() || whole(self.value).is_some() => {
                    Err(de::Error::custom(format_args!("Must be a whole number from {} to {}.", <$t>::MIN, <$t>::MAX)))
                }
                None => Err(wrong("an integer", self.value)),
            }
        }
    };
}

impl<'de> de::Deserializer<'de> for Strict<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        if self.hole() {
            return v.visit_unit();
        }
        match self.value {
            Value::Null => v.visit_unit(),
            Value::Bool(b) => v.visit_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => v.visit_u64(u),
                (_, Some(i), _) => v.visit_i64(i),
                (_, _, Some(f)) => v.visit_f64(f),
                _ => Err(de::Error::custom("Must be a number.")),
            },
            Value::String(s) => v.visit_borrowed_str(s),
            Value::Array(a) => v.visit_seq(self.seq(a)),
            Value::Object(m) => v.visit_map(self.fields(m)),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.value {
            _ if self.hole() => v.visit_bool(false),
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
        match self.value.as_f64() {
            _ if self.hole() => v.visit_f64(0.0),
            Some(f) => v.visit_f64(f),
            None => Err(wrong("a number", self.value)),
        }
    }

    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        self.deserialize_str(v)
    }
    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.value {
            _ if self.hole() => v.visit_borrowed_str(""),
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
        match self.value {
            _ if self.hole() => v.visit_none(),
            Value::Null => v.visit_none(),
            _ => v.visit_some(self),
        }
    }
    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.value {
            _ if self.hole() => v.visit_unit(),
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
        match self.value {
            _ if self.hole() => v.visit_seq(self.seq(&[])),
            Value::Array(a) => v.visit_seq(self.seq(a)),
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
        match self.value {
            _ if self.hole() => v.visit_map(Fields::holes(&[], self.holes)),
            Value::Object(m) => v.visit_map(self.fields(m)),
            other => Err(wrong("an object", other)),
        }
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Self::Error> {
        if self.hole() {
            return v.visit_map(Fields::holes(fields, self.holes));
        }
        // Never by position: serde's derive would read `["a", "b"]` as a struct.
        self.deserialize_map(v)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Self::Error> {
        match self.value {
            _ if self.hole() => {
                let first = variants.first().copied().unwrap_or_default();
                v.visit_enum(IntoDeserializer::<serde_json::Error>::into_deserializer(first))
            }
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
    holes: &'a Holes,
}

impl<'de> SeqAccess<'de> for Seq<'de> {
    type Error = serde_json::Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Self::Error> {
        match self.items.next() {
            None => Ok(None),
            Some(v) => seed.deserialize(Strict::new(v, self.holes)).map(Some),
        }
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// An object's entries, then the fields it lacks (each a hole); or a hole's struct: each of
/// its named fields a hole.
struct Fields<'a> {
    entries: Option<serde_json::map::Iter<'a>>,
    lacking: std::slice::Iter<'a, String>,
    named: std::slice::Iter<'static, &'static str>,
    value: Option<&'a Value>,
    holes: &'a Holes,
}

impl<'a> Fields<'a> {
    fn holes(named: &'static [&'static str], holes: &'a Holes) -> Self {
        Fields { entries: None, lacking: [].iter(), named: named.iter(), value: None, holes }
    }
}

impl<'de> MapAccess<'de> for Fields<'de> {
    type Error = serde_json::Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Self::Error> {
        let (key, value): (&'de str, &'de Value) = match self.entries.as_mut().and_then(Iterator::next) {
            Some((k, v)) => (k.as_str(), v),
            None => match self.lacking.next() {
                Some(k) => (k.as_str(), &HOLE),
                None => match self.named.next() {
                    Some(k) => (k, &HOLE),
                    None => return Ok(None),
                },
            },
        };
        self.value = Some(value);
        seed.deserialize(de::value::BorrowedStrDeserializer::new(key)).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Self::Error> {
        let v = self.value.take().ok_or_else(|| de::Error::custom("a value was read twice"))?;
        seed.deserialize(Strict::new(v, self.holes))
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

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct R {
        code: String,
        count: u8,
        inner: Vec<I>,
        note: Option<String>,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct I {
        at: String,
        shape: S,
        price: Option<dropslot_core::money::Money>,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct S {
        w: u32,
        h: u32,
    }

    fn required(body: &str) -> Result<R, Error> {
        from_value(&parse_value(body.as_bytes())?)
    }

    fn invalid(body: &str) -> Vec<(String, String)> {
        match required(body) {
            Err(Error::Validation(e)) => e.iter().map(|(p, m)| (p.to_string(), m.to_string())).collect(),
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn a_missing_field_is_a_422_at_its_path_and_every_one_is_named() {
        let req = |p: &str| (p.to_string(), "This field is required.".to_string());
        assert_eq!(invalid(r#"{"count":1,"inner":[]}"#), vec![req("code")]);
        assert_eq!(invalid("{}"), vec![req("code"), req("count"), req("inner")], "every one, not the first");
        // Inside arrays and nested objects, each at its own path; a hole's own fields are not
        // reported (a missing `shape` is one fault, not three).
        let body = r#"{"code":"c","count":1,"inner":[{"at":"x","shape":{"w":1,"h":2}},{"shape":{"w":1}},{"at":"y"}]}"#;
        assert_eq!(invalid(body), vec![req("inner.1.at"), req("inner.1.shape.h"), req("inner.2.shape")]);
        // A rule's refusal and a missing field are both validation: one 422 names both.
        let body = r#"{"code":"c","count":1,"inner":[{"at":"x","shape":{"w":1},"price":"1.234"}]}"#;
        let found = invalid(body);
        assert!(
            found.contains(&req("inner.0.shape.h")) && found.iter().any(|(p, _)| p == "inner.0.price"),
            "{found:?}"
        );
        // A field given is never reported missing (`null` is a value of the wrong type).
        assert!(required(r#"{"code":"c","count":1,"inner":[],"note":null}"#).is_ok());
    }

    #[test]
    fn a_wrong_type_comes_before_a_missing_field_and_every_message_says_what_its_errors_say() {
        // The wrong type is found after the missing field was read past: still the 400.
        let (m, e) = errors(required(r#"{"count":1,"inner":[{"at":"x"}],"note":5}"#).unwrap_err());
        assert_eq!(
            (m.as_str(), e),
            ("A field has the wrong JSON type.", FieldErrors::single("note", "Must be a string, not an integer."))
        );
        let (m, e) = errors(required(r#"{"code":"c","count":1,"inner":[],"x":1}"#).unwrap_err());
        assert_eq!(
            (m.as_str(), e),
            ("A field is not one this request takes.", FieldErrors::single("x", "This field is not allowed here."))
        );
        let (m, e) = errors(required(r#"{"code":"c","count":300,"inner":[]}"#).unwrap_err());
        assert_eq!(
            (m.as_str(), e),
            (
                "A number in the request body is out of range.",
                FieldErrors::single("count", "Must be a whole number from 0 to 255.")
            )
        );
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
