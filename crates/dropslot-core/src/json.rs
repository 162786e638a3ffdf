//! One JSON writer for every response and webhook body: the bytes `serde_json::to_vec`
//! writes, written faster.
//!
//! `serde_json` escapes a string one byte at a time, every object key included; that was 16 %
//! of a preview's instructions under callgrind (issue 49: a preview's body is 2 KB of mostly
//! keys and short values). This serializer checks a string eight bytes at a time and copies
//! it whole when nothing in it needs escaping (nearly always), and escapes the rest exactly as
//! `serde_json` does. Numbers, `null` and the escapes themselves are written by `serde_json`'s
//! own `CompactFormatter`, so they cannot differ either.
//!
//! What it does not write itself (a map key that is not a string, a character or an integer,
//! a byte array, `serde_json`'s private raw-value and number tokens) is an error here, and
//! [`to_vec`] then writes the whole value with `serde_json` instead: the output is
//! `serde_json`'s in every case, which a differential test holds it to.

use std::fmt::{self, Display};

use serde::ser::{self, Serialize};
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};

/// The compact JSON text of `value`, byte for byte `serde_json::to_vec`'s, into a buffer of
/// `capacity` bytes to start with.
pub fn to_vec<T: ?Sized + Serialize>(value: &T, capacity: usize) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(capacity);
    if value.serialize(Writer { out: &mut out }).is_ok() {
        return Ok(out);
    }
    out.clear();
    serde_json::to_writer(&mut out, value)?;
    Ok(out)
}

/// [`to_vec`] as text.
pub fn to_string<T: ?Sized + Serialize>(value: &T, capacity: usize) -> serde_json::Result<String> {
    let bytes = to_vec(value, capacity)?;
    // Both writers only ever write UTF-8 (escapes are ASCII, strings are copied whole).
    String::from_utf8(bytes).map_err(|e| ser::Error::custom(format!("the JSON writer wrote invalid UTF-8: {e}")))
}

/// Something this writer leaves to `serde_json` (or a value's own serialisation error).
#[derive(Debug)]
pub struct Unsupported(String);

impl Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: Display>(msg: T) -> Self {
        Unsupported(msg.to_string())
    }
}

type Result<T = ()> = std::result::Result<T, Unsupported>;

fn unsupported<T>(what: &str) -> Result<T> {
    Err(Unsupported(format!("{what}: written by serde_json")))
}

/// Writing to a `Vec` cannot fail; `serde_json`'s formatter takes an `io::Write` all the same.
fn io(r: std::io::Result<()>) -> Result {
    r.map_err(|e| Unsupported(e.to_string()))
}

/// Whether a byte of the eight in `x` must be escaped in a JSON string: a control character,
/// `"` or `\\` (what `serde_json` escapes; it leaves `/`, DEL and non-ASCII as they are). The
/// classic tests for a zero byte and for a byte below `n`, exact as a yes or no (Hacker's
/// Delight, "Find first 0-byte").
fn word_needs_escape(x: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS != 0;
    let below_space = x.wrapping_sub(ONES * 0x20) & !x & HIGHS != 0;
    below_space || has_zero(x ^ (ONES * u64::from(b'"'))) || has_zero(x ^ (ONES * u64::from(b'\\')))
}

/// Whether any byte of `bytes` must be escaped, eight bytes at a time as one word (most
/// strings of a response are a few words: too short for vector compares); the last few padded
/// with a letter.
fn needs_escape(bytes: &[u8]) -> bool {
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut eight = [0; 8];
        eight.copy_from_slice(word);
        if word_needs_escape(u64::from_le_bytes(eight)) {
            return true;
        }
    }
    let tail = words.remainder();
    let mut eight = [b'a'; 8];
    eight[..tail.len()].copy_from_slice(tail);
    word_needs_escape(u64::from_le_bytes(eight))
}

/// `value` as a JSON string, quotes included: copied whole when nothing in it needs escaping
/// (nearly always), else escaped as `serde_json` escapes.
fn write_str(out: &mut Vec<u8>, value: &str) -> Result {
    let bytes = value.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    if needs_escape(bytes) {
        write_escaped(out, bytes)?;
    } else {
        out.extend_from_slice(bytes);
    }
    out.push(b'"');
    Ok(())
}

/// The contents of a string that has something to escape, as `serde_json` escapes it.
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8]) -> Result {
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape = match b {
            b'"' => CharEscape::Quote,
            b'\\' => CharEscape::ReverseSolidus,
            0x08 => CharEscape::Backspace,
            0x09 => CharEscape::Tab,
            0x0A => CharEscape::LineFeed,
            0x0C => CharEscape::FormFeed,
            0x0D => CharEscape::CarriageReturn,
            0x00..=0x1F => CharEscape::AsciiControl(b),
            _ => continue,
        };
        // Escaped bytes are ASCII, so `start..i` never splits a character.
        out.extend_from_slice(&bytes[start..i]);
        io(CompactFormatter.write_char_escape(out, escape))?;
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    Ok(())
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

/// An array or object being written: whether an element was written yet (the comma).
pub struct Compound<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    /// Closed when it ends: `]` or `}`, and one more `}` around an enum variant's contents.
    close: &'static [u8],
}

impl Compound<'_> {
    fn separate(&mut self) {
        if self.first {
            self.first = false;
        } else {
            self.out.push(b',');
        }
    }

    fn element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result {
        self.separate();
        value.serialize(Writer { out: self.out })
    }

    fn field<T: ?Sized + Serialize>(&mut self, key: &str, value: &T) -> Result {
        self.separate();
        write_str(self.out, key)?;
        self.out.push(b':');
        value.serialize(Writer { out: self.out })
    }

    fn close(self) {
        self.out.extend_from_slice(self.close);
    }
}

impl<'a> Writer<'a> {
    fn open(self, open: &[u8], close: &'static [u8]) -> Compound<'a> {
        self.out.extend_from_slice(open);
        Compound { out: self.out, first: true, close }
    }

    /// `{"variant":` before an enum variant's contents.
    fn variant(self, variant: &str, open: &[u8], close: &'static [u8]) -> Result<Compound<'a>> {
        self.out.push(b'{');
        write_str(self.out, variant)?;
        self.out.push(b':');
        Ok(self.open(open, close))
    }
}

/// The ten integer methods of a serializer: each runs `$body` with the serializer as `$this`
/// and `$write`, a closure that writes the number with `serde_json`'s formatter.
macro_rules! integers {
    (|$this:ident: Self, $write:ident| $body:expr) => {
        integers!(@each $this $write $body;
            serialize_i8 i8 write_i8, serialize_i16 i16 write_i16, serialize_i32 i32 write_i32,
            serialize_i64 i64 write_i64, serialize_i128 i128 write_i128, serialize_u8 u8 write_u8,
            serialize_u16 u16 write_u16, serialize_u32 u32 write_u32, serialize_u64 u64 write_u64,
            serialize_u128 u128 write_u128);
    };
    (@each $this:ident $write:ident $body:expr; $($method:ident $ty:ident $format:ident),*) => {
        $(
            fn $method(self, v: $ty) -> Result {
                let $this = self;
                let $write = |o: &mut Vec<u8>| CompactFormatter.$format(o, v);
                $body
            }
        )*
    };
}

impl<'a> ser::Serializer for Writer<'a> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result {
        io(CompactFormatter.write_bool(self.out, v))
    }
    integers!(|w: Self, write| io(write(w.out)));
    /// A NaN or an infinity is `null`, as `serde_json` writes it.
    fn serialize_f32(self, v: f32) -> Result {
        io(if v.is_finite() { CompactFormatter.write_f32(self.out, v) } else { CompactFormatter.write_null(self.out) })
    }
    fn serialize_f64(self, v: f64) -> Result {
        io(if v.is_finite() { CompactFormatter.write_f64(self.out, v) } else { CompactFormatter.write_null(self.out) })
    }
    fn serialize_char(self, v: char) -> Result {
        write_str(self.out, v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result {
        write_str(self.out, v)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result {
        unsupported("a byte array")
    }
    fn serialize_none(self) -> Result {
        io(CompactFormatter.write_null(self.out))
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result {
        io(CompactFormatter.write_null(self.out))
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result {
        io(CompactFormatter.write_null(self.out))
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result {
        write_str(self.out, variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, value: &T) -> Result {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result {
        self.out.push(b'{');
        write_str(self.out, variant)?;
        self.out.push(b':');
        value.serialize(Writer { out: self.out })?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a>> {
        Ok(self.open(b"[", b"]"))
    }
    fn serialize_tuple(self, _: usize) -> Result<Compound<'a>> {
        Ok(self.open(b"[", b"]"))
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Compound<'a>> {
        Ok(self.open(b"[", b"]"))
    }
    fn serialize_tuple_variant(self, _: &'static str, _: u32, variant: &'static str, _: usize) -> Result<Compound<'a>> {
        self.variant(variant, b"[", b"]}")
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'a>> {
        Ok(self.open(b"{", b"}"))
    }
    /// `serde_json`'s raw values and arbitrary-precision numbers are structs of private names
    /// (`$serde_json::private::…`) it writes its own way.
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Compound<'a>> {
        if name.starts_with("$serde_json") {
            return unsupported(name);
        }
        Ok(self.open(b"{", b"}"))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>> {
        self.variant(variant, b"{", b"}}")
    }
    fn collect_str<T: ?Sized + Display>(self, value: &T) -> Result {
        write_str(self.out, &value.to_string())
    }
}

/// The compound serializers, all one `Compound`: elements (`$method`) or named fields.
macro_rules! compounds {
    (elements: $($trait:ident::$method:ident),*; fields: $($named:ident),*) => {
        $(
            impl ser::$trait for Compound<'_> {
                type Ok = ();
                type Error = Unsupported;
                fn $method<T: ?Sized + Serialize>(&mut self, value: &T) -> Result {
                    self.element(value)
                }
                fn end(self) -> Result {
                    self.close();
                    Ok(())
                }
            }
        )*
        $(
            impl ser::$named for Compound<'_> {
                type Ok = ();
                type Error = Unsupported;
                fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result {
                    self.field(key, value)
                }
                fn end(self) -> Result {
                    self.close();
                    Ok(())
                }
            }
        )*
    };
}

compounds!(
    elements: SerializeSeq::serialize_element, SerializeTuple::serialize_element,
        SerializeTupleStruct::serialize_field, SerializeTupleVariant::serialize_field;
    fields: SerializeStruct, SerializeStructVariant
);

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result {
        self.separate();
        key.serialize(Key { out: self.out })?;
        self.out.push(b':');
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result {
        value.serialize(Writer { out: self.out })
    }
    fn end(self) -> Result {
        self.close();
        Ok(())
    }
}

/// A map's key: a string, a character or an integer (quoted, as `serde_json` writes it);
/// anything else is left to `serde_json` (which takes some, refuses others).
struct Key<'a> {
    out: &'a mut Vec<u8>,
}

impl Key<'_> {
    fn integer(self, write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Result {
        self.out.push(b'"');
        io(write(self.out))?;
        self.out.push(b'"');
        Ok(())
    }
}

impl ser::Serializer for Key<'_> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = ser::Impossible<(), Unsupported>;
    type SerializeTuple = ser::Impossible<(), Unsupported>;
    type SerializeTupleStruct = ser::Impossible<(), Unsupported>;
    type SerializeTupleVariant = ser::Impossible<(), Unsupported>;
    type SerializeMap = ser::Impossible<(), Unsupported>;
    type SerializeStruct = ser::Impossible<(), Unsupported>;
    type SerializeStructVariant = ser::Impossible<(), Unsupported>;

    fn serialize_str(self, v: &str) -> Result {
        write_str(self.out, v)
    }
    fn serialize_char(self, v: char) -> Result {
        write_str(self.out, v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result {
        write_str(self.out, variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, value: &T) -> Result {
        value.serialize(self)
    }
    integers!(|key: Self, write| key.integer(write));
    fn collect_str<T: ?Sized + Display>(self, value: &T) -> Result {
        write_str(self.out, &value.to_string())
    }

    fn serialize_bool(self, _: bool) -> Result {
        unsupported("a boolean key")
    }
    fn serialize_f32(self, _: f32) -> Result {
        unsupported("a number key")
    }
    fn serialize_f64(self, _: f64) -> Result {
        unsupported("a number key")
    }
    fn serialize_bytes(self, _: &[u8]) -> Result {
        unsupported("a byte-array key")
    }
    fn serialize_none(self) -> Result {
        unsupported("a null key")
    }
    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result {
        unsupported("an optional key")
    }
    fn serialize_unit(self) -> Result {
        unsupported("a null key")
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result {
        unsupported("a null key")
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result {
        unsupported("an enum key")
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq> {
        unsupported("an array key")
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple> {
        unsupported("an array key")
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct> {
        unsupported("an array key")
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        unsupported("an array key")
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap> {
        unsupported("an object key")
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct> {
        unsupported("an object key")
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant> {
        unsupported("an object key")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde::Serialize;
    use serde_json::Value;

    use super::to_vec;

    fn same<T: Serialize>(value: &T) {
        let ours = to_vec(value, 0).unwrap();
        let theirs = serde_json::to_vec(value).unwrap();
        assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&theirs));
    }

    /// Any JSON value: strings of any characters (controls, quotes, backslashes, non-ASCII),
    /// integers of both signs and sizes, floats, nesting.
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".*".prop_map(Value::String),
            proptest::collection::vec(any::<char>(), 0..40).prop_map(|c| Value::String(c.into_iter().collect())),
            proptest::collection::vec(0u8..0x80, 0..40)
                .prop_map(|b| Value::String(b.into_iter().map(char::from).collect())),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                proptest::collection::vec((".*", inner), 0..8).prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn writes_what_serde_json_writes(v in value()) {
            let ours = to_vec(&v, 0).unwrap();
            prop_assert_eq!(ours, serde_json::to_vec(&v).unwrap());
        }
    }

    #[derive(Serialize)]
    struct Inner {
        a: Option<u8>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
    }

    #[derive(Serialize)]
    struct Totals {
        total: f64,
        tax: f32,
    }

    #[derive(Serialize)]
    enum Kind {
        Unit,
        Newtype(i32),
        Tuple(u8, char),
        Struct { x: i128, y: u128 },
    }

    #[derive(Serialize)]
    struct Empty {}

    #[derive(Serialize)]
    struct Unit;

    #[derive(Serialize)]
    struct Wrapper(String);

    #[derive(Serialize)]
    struct Everything<'a> {
        text: &'a str,
        #[serde(rename = "quote\"d\u{1}")]
        odd_key: bool,
        inner: Inner,
        #[serde(flatten)]
        totals: Totals,
        kinds: Vec<Kind>,
        empty: Empty,
        unit: Unit,
        unit_value: (),
        wrapper: Wrapper,
        tuple: (u8, i16, &'a str),
        by_number: BTreeMap<i64, u32>,
        by_char: BTreeMap<char, u32>,
        nan: f64,
        infinite: f32,
        c: char,
        nothing: Option<String>,
    }

    /// Every kind of value the serde data model has that a response can hold, against
    /// `serde_json`, byte for byte.
    #[test]
    fn writes_every_serde_shape_as_serde_json_does() {
        let everything = Everything {
            text: "tab\there \"quoted\" back\\slash \u{7f} é 😀 \u{0}\u{1f} end/",
            odd_key: true,
            inner: Inner { a: None, skipped: None },
            totals: Totals { total: 18.0, tax: 2.34 },
            kinds: vec![
                Kind::Unit,
                Kind::Newtype(-7),
                Kind::Tuple(3, '"'),
                Kind::Struct { x: i128::MIN, y: u128::MAX },
            ],
            empty: Empty {},
            unit: Unit,
            unit_value: (),
            wrapper: Wrapper("w".into()),
            tuple: (1, -2, "three"),
            by_number: [(-1, 1), (2, 2)].into_iter().collect(),
            by_char: [('k', 1), ('\n', 2)].into_iter().collect(),
            nan: f64::NAN,
            infinite: f32::INFINITY,
            c: '\u{8}',
            nothing: None,
        };
        same(&everything);
        for f in [0.0, -0.0, 1.0, 0.1, 1e16, 1e-7, 123_456_789.125, f64::MAX, f64::MIN_POSITIVE, 5e-324] {
            same(&f);
        }
        for s in ["", "x", "0123456789abcdef", "0123456789abcde\"", "0123456789abcdef0123456789abcde\n"] {
            same(&s);
        }
    }

    /// The word test agrees with the byte rule for every byte at every position of a word.
    #[test]
    fn finds_every_byte_to_escape_at_every_position() {
        for b in 0..=255u8 {
            let must = b < 0x20 || b == b'"' || b == b'\\';
            for at in 0..8 {
                let mut word = [b'a'; 8];
                word[at] = b;
                assert_eq!(super::word_needs_escape(u64::from_le_bytes(word)), must, "byte {b:#x} at {at}");
            }
            for len in 1..=17 {
                for at in 0..len {
                    let mut text = vec![b'a'; len];
                    text[at] = b;
                    assert_eq!(super::needs_escape(&text), must, "byte {b:#x} at {at} of {len}");
                }
            }
        }
        assert!(!super::needs_escape(b""));
    }

    /// What this writer leaves to `serde_json` is still written, and as `serde_json` writes it.
    #[test]
    fn leaves_the_rest_to_serde_json() {
        let by_bool: BTreeMap<bool, u8> = [(false, 0), (true, 1)].into_iter().collect();
        same(&by_bool);
        same(&serde_bytes_like());
    }

    /// A byte slice serialised as bytes (what `serde_bytes` does).
    fn serde_bytes_like() -> impl Serialize {
        struct Bytes;
        impl Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(b"ab")
            }
        }
        Bytes
    }
}
