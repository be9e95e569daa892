//! Compact JSON text of the loop's state and effects: the bytes
//! `serde_json::to_writer` writes, with less work per byte.
//!
//! The state is written on every `advance` and a batch of effects too, so
//! their serialization is a large share of a call. This serializer writes
//! into a `Vec<u8>` directly (no `io::Write` in between), checks a string for
//! bytes to escape 8 at a time instead of one by one, and formats integers
//! without going through `fmt`. Whatever it does not handle itself (floats,
//! 128-bit integers, byte arrays, map keys that are not strings) makes it
//! give up, and [`write`] then writes the whole value with `serde_json`: the
//! text is `serde_json`'s either way (the tests compare both).

use serde::Serialize;
use serde::ser::{self, Impossible};

/// The struct name by which `serde_json` marks a value whose JSON text is
/// written as is (`RawValue`'s serialization).
pub(super) const RAW_TOKEN: &str = "$serde_json::private::RawValue";
/// The same for an arbitrary-precision number (`serde_json`'s feature of that name).
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Appends the JSON text of `value` to `out`: exactly what
/// `serde_json::to_writer(out, value)` appends, or its error.
pub fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), serde_json::Error> {
    let start = out.len();
    if value.serialize(Writer { out }).is_ok() {
        return Ok(());
    }
    out.truncate(start);
    serde_json::to_writer(out, value)
}

/// The JSON text of `value`, as `serde_json::to_string` writes it.
pub fn to_string<T: Serialize + ?Sized>(
    value: &T,
    capacity: usize,
) -> Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(capacity);
    write(&mut out, value)?;
    // Every byte written is a UTF-8 `str`'s, an ASCII escape or an ASCII number.
    String::from_utf8(out).map_err(<serde_json::Error as ser::Error>::custom)
}

/// Why [`Writer`] stopped: a value it leaves to `serde_json`, or an error
/// the value's own `Serialize` raised (`serde_json` then raises it again).
#[derive(Debug)]
pub struct GiveUp;

impl std::fmt::Display for GiveUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("left to serde_json")
    }
}

impl std::error::Error for GiveUp {}

impl ser::Error for GiveUp {
    fn custom<T: std::fmt::Display>(_msg: T) -> Self {
        GiveUp
    }
}

/// What an escaped byte becomes after its backslash (0: written as is;
/// `u`: `\u00XX`), as in `serde_json`.
fn escape(b: u8) -> u8 {
    match b {
        0x08 => b'b',
        0x09 => b't',
        0x0a => b'n',
        0x0c => b'f',
        0x0d => b'r',
        0..=0x1f => b'u',
        b'"' => b'"',
        b'\\' => b'\\',
        _ => 0,
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `v` that is zero (exact as a whole: some
/// bit is set if and only if some byte is zero).
#[inline]
fn zero_bytes(v: u64) -> u64 {
    v.wrapping_sub(ONES) & !v & HIGHS
}

/// Whether any of the 8 bytes of `w` is below 0x20, `"` or `\`.
#[inline]
fn needs_escape(w: u64) -> bool {
    let below = w.wrapping_sub(ONES * 0x20) & !w & HIGHS;
    let quote = zero_bytes(w ^ (ONES * u64::from(b'"')));
    let slash = zero_bytes(w ^ (ONES * u64::from(b'\\')));
    (below | quote | slash) != 0
}

/// The 8 bytes of `bytes` from `at` as one word (none past the end).
#[inline]
fn word(bytes: &[u8], at: usize) -> Option<u64> {
    let mut w = [0u8; 8];
    w.copy_from_slice(bytes.get(at..at.checked_add(8)?)?);
    Some(u64::from_le_bytes(w))
}

/// Whether no byte of `bytes` (longer than 8) needs escaping, read 8 at a
/// time.
#[inline]
fn clean(bytes: &[u8]) -> bool {
    let n = bytes.len();
    let mut at = 0;
    while at + 8 < n {
        match word(bytes, at) {
            Some(w) if !needs_escape(w) => at += 8,
            _ => return false,
        }
    }
    // The last 8 bytes, overlapping the word before.
    n >= 8 && word(bytes, n - 8).is_some_and(|w| !needs_escape(w))
}

/// `s` as a JSON string, escaped as `serde_json` escapes it.
#[inline]
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    quoted(out, false, s, false);
}

/// A member's name: `,` first unless `first`, then `"key":`.
#[inline]
fn write_key(out: &mut Vec<u8>, first: bool, key: &str) {
    quoted(out, !first, key, true);
}

/// The longest string [`short`] writes.
const SHORT: usize = 16;

/// `,` when `comma`, `s` as a JSON string, `:` when `colon`. A string of
/// up to [`SHORT`] bytes with nothing to escape (a member's name, an id, a
/// phase) is read in two words and appended in one fixed-size copy, no
/// call to `memcpy` and one capacity check; a longer one is checked 8
/// bytes at a time and copied whole; one with bytes to escape is escaped
/// byte by byte.
#[inline]
fn quoted(out: &mut Vec<u8>, comma: bool, s: &str, colon: bool) {
    let bytes = s.as_bytes();
    let n = bytes.len();
    if n <= SHORT {
        let start = out.len();
        // Room for the longest, filled with commas (the first one kept
        // when `comma`), the string written over them, the rest cut off.
        out.extend_from_slice(&[b','; SHORT + 8]);
        let at = usize::from(comma);
        if out
            .get_mut(start + at..)
            .is_some_and(|room| short(room, bytes))
        {
            out.truncate(start + at + n + 2 + usize::from(colon));
            return;
        }
        out.truncate(start);
    } else if clean(bytes) {
        out.reserve(n + 4);
        if comma {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        if colon {
            out.push(b':');
        }
        return;
    }
    if comma {
        out.push(b',');
    }
    write_escaped(out, bytes);
    if colon {
        out.push(b':');
    }
}

/// Writes `"bytes":` at the start of `room` (at least [`SHORT`] + 3 bytes)
/// when `bytes` (at most [`SHORT`]) has nothing to escape; false if it has.
/// The string is read as two words (or its bytes when under 4), overlapping
/// when it is shorter than both together, and written in two copies (the
/// second over the overlap again, the same bytes): no call to `memcpy`.
#[inline]
fn short(room: &mut [u8], bytes: &[u8]) -> bool {
    let n = bytes.len();
    let w = if n >= 8 {
        let (Some(lo), Some(hi)) = (word(bytes, 0), word(bytes, n - 8)) else {
            return false;
        };
        if needs_escape(lo) {
            return false;
        }
        let Some(d) = room.get_mut(1..9) else {
            return false;
        };
        d.copy_from_slice(&lo.to_le_bytes());
        let Some(d) = room.get_mut(n - 7..n + 1) else {
            return false;
        };
        d.copy_from_slice(&hi.to_le_bytes());
        hi
    } else if n >= 4 {
        let four = |from: usize| -> Option<[u8; 4]> { bytes.get(from..from + 4)?.try_into().ok() };
        let (Some(lo), Some(hi)) = (four(0), four(n - 4)) else {
            return false;
        };
        let Some(d) = room.get_mut(1..5) else {
            return false;
        };
        d.copy_from_slice(&lo);
        let Some(d) = room.get_mut(n - 3..n + 1) else {
            return false;
        };
        d.copy_from_slice(&hi);
        u64::from(u32::from_le_bytes(lo)) | u64::from(u32::from_le_bytes(hi)) << 32
    } else {
        // 0 to 3 bytes, padded with `a`.
        let mut w = [b'a'; 8];
        for (i, &b) in bytes.iter().enumerate() {
            match (room.get_mut(1 + i), w.get_mut(i)) {
                (Some(d), Some(x)) => (*d, *x) = (b, b),
                _ => return false,
            }
        }
        u64::from_le_bytes(w)
    };
    if needs_escape(w) {
        return false;
    }
    let Some(close) = room.get_mut(n + 1..n + 3) else {
        return false;
    };
    close.copy_from_slice(b"\":");
    let Some(open) = room.first_mut() else {
        return false;
    };
    *open = b'"';
    true
}

/// A string with bytes to escape, byte by byte.
#[cold]
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() + 8);
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let e = escape(b);
        if e == 0 {
            continue;
        }
        out.extend_from_slice(bytes.get(start..i).unwrap_or_default());
        start = i + 1;
        if e == b'u' {
            let hex = |n: u8| if n < 10 { b'0' + n } else { b'a' + (n - 10) };
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', hex(b >> 4), hex(b & 0xf)]);
        } else {
            out.extend_from_slice(&[b'\\', e]);
        }
    }
    out.extend_from_slice(bytes.get(start..).unwrap_or_default());
    out.push(b'"');
}

/// `n` in decimal.
pub fn write_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut used = 0;
    for slot in buf.iter_mut().rev() {
        *slot = b'0' + u8::try_from(n % 10).unwrap_or(0);
        n /= 10;
        used += 1;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(buf.get(buf.len() - used..).unwrap_or_default());
}

/// `n` in decimal.
pub fn write_i64(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    write_u64(out, n.unsigned_abs());
}

/// The serializer: appends to `out`.
struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

/// An array or object being written; `first` until its first member.
pub struct Compound<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    /// `]` or `}`, and for a variant the `}` that closes its wrapper too.
    close: &'static [u8],
}

/// A `RawValue` (or an arbitrary-precision number): its text, as is.
pub struct Raw<'a> {
    out: &'a mut Vec<u8>,
}

/// A struct: an object, or a [`Raw`] text.
pub enum Struct<'a> {
    /// `{"field":value,...}`.
    Object(Compound<'a>),
    /// Text written as is.
    Raw(Raw<'a>),
}

impl<'a> Writer<'a> {
    fn open(self, open: u8, close: &'static [u8]) -> Compound<'a> {
        self.out.push(open);
        Compound {
            out: self.out,
            first: true,
            close,
        }
    }

    /// `{"variant":` then the value's opening.
    fn variant(self, variant: &str, open: u8, close: &'static [u8]) -> Compound<'a> {
        self.out.push(b'{');
        write_key(self.out, true, variant);
        self.out.push(open);
        Compound {
            out: self.out,
            first: true,
            close,
        }
    }
}

impl<'a> ser::Serializer for Writer<'a> {
    type Ok = ();
    type Error = GiveUp;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Struct<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), GiveUp> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), GiveUp> {
        write_i64(self.out, i64::from(v));
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result<(), GiveUp> {
        write_i64(self.out, i64::from(v));
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result<(), GiveUp> {
        write_i64(self.out, i64::from(v));
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<(), GiveUp> {
        write_i64(self.out, v);
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), GiveUp> {
        write_u64(self.out, u64::from(v));
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result<(), GiveUp> {
        write_u64(self.out, u64::from(v));
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result<(), GiveUp> {
        write_u64(self.out, u64::from(v));
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<(), GiveUp> {
        write_u64(self.out, v);
        Ok(())
    }
    fn serialize_f32(self, _v: f32) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_f64(self, _v: f64) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_char(self, v: char) -> Result<(), GiveUp> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), GiveUp> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), GiveUp> {
        Err(GiveUp)
    }
    fn serialize_none(self) -> Result<(), GiveUp> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), GiveUp> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), GiveUp> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), GiveUp> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), GiveUp> {
        write_str(self.out, variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), GiveUp> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), GiveUp> {
        self.out.push(b'{');
        write_key(self.out, true, variant);
        value.serialize(Writer {
            out: &mut *self.out,
        })?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>, GiveUp> {
        Ok(self.open(b'[', b"]"))
    }
    fn serialize_tuple(self, _len: usize) -> Result<Compound<'a>, GiveUp> {
        Ok(self.open(b'[', b"]"))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, GiveUp> {
        Ok(self.open(b'[', b"]"))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, GiveUp> {
        Ok(self.variant(variant, b'[', b"]}"))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a>, GiveUp> {
        Ok(self.open(b'{', b"}"))
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Struct<'a>, GiveUp> {
        if name == RAW_TOKEN || name == NUMBER_TOKEN {
            return Ok(Struct::Raw(Raw { out: self.out }));
        }
        Ok(Struct::Object(self.open(b'{', b"}")))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, GiveUp> {
        Ok(self.variant(variant, b'{', b"}}"))
    }
}

impl Compound<'_> {
    #[inline]
    fn comma(&mut self) {
        if self.first {
            self.first = false;
        } else {
            self.out.push(b',');
        }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GiveUp> {
        self.comma();
        value.serialize(Writer {
            out: &mut *self.out,
        })
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), GiveUp> {
        write_key(self.out, self.first, key);
        self.first = false;
        value.serialize(Writer {
            out: &mut *self.out,
        })
    }

    fn close(self) -> Result<(), GiveUp> {
        // One or two bytes: pushed, no call to `memcpy` for them.
        for &b in self.close {
            self.out.push(b);
        }
        Ok(())
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = GiveUp;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GiveUp> {
        self.element(value)
    }
    fn end(self) -> Result<(), GiveUp> {
        self.close()
    }
}

impl ser::SerializeTuple for Compound<'_> {
    type Ok = ();
    type Error = GiveUp;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GiveUp> {
        self.element(value)
    }
    fn end(self) -> Result<(), GiveUp> {
        self.close()
    }
}

impl ser::SerializeTupleStruct for Compound<'_> {
    type Ok = ();
    type Error = GiveUp;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GiveUp> {
        self.element(value)
    }
    fn end(self) -> Result<(), GiveUp> {
        self.close()
    }
}

impl ser::SerializeTupleVariant for Compound<'_> {
    type Ok = ();
    type Error = GiveUp;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GiveUp> {
        self.element(value)
    }
    fn end(self) -> Result<(), GiveUp> {
        self.close()
    }
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = GiveUp;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), GiveUp> {
        self.comma();
        key.serialize(Key {
            out: &mut *self.out,
        })?;
        self.out.push(b':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), GiveUp> {
        value.serialize(Writer {
            out: &mut *self.out,
        })
    }
    fn end(self) -> Result<(), GiveUp> {
        self.close()
    }
}

impl ser::SerializeStruct for Struct<'_> {
    type Ok = ();
    type Error = GiveUp;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), GiveUp> {
        match self {
            Struct::Object(c) => c.field(key, value),
            Struct::Raw(r) if key == RAW_TOKEN || key == NUMBER_TOKEN => {
                value.serialize(Raw { out: &mut *r.out })
            }
            Struct::Raw(_) => Err(GiveUp),
        }
    }
    fn end(self) -> Result<(), GiveUp> {
        match self {
            Struct::Object(c) => c.close(),
            Struct::Raw(_) => Ok(()),
        }
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = GiveUp;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), GiveUp> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), GiveUp> {
        self.close()
    }
}

/// Takes only a string: a map key (others are left to `serde_json`, which
/// quotes numbers and refuses the rest), or a raw text.
struct Key<'a> {
    out: &'a mut Vec<u8>,
}

macro_rules! give_up {
    ($($f:ident($($t:ty),*)),* $(,)?) => {
        $(fn $f(self, $(_: $t),*) -> Result<(), GiveUp> { Err(GiveUp) })*
    };
}

macro_rules! only_strings {
    () => {
        type Ok = ();
        type Error = GiveUp;
        type SerializeSeq = Impossible<(), GiveUp>;
        type SerializeTuple = Impossible<(), GiveUp>;
        type SerializeTupleStruct = Impossible<(), GiveUp>;
        type SerializeTupleVariant = Impossible<(), GiveUp>;
        type SerializeMap = Impossible<(), GiveUp>;
        type SerializeStruct = Impossible<(), GiveUp>;
        type SerializeStructVariant = Impossible<(), GiveUp>;

        give_up!(
            serialize_bool(bool),
            serialize_i8(i8),
            serialize_i16(i16),
            serialize_i32(i32),
            serialize_i64(i64),
            serialize_u8(u8),
            serialize_u16(u16),
            serialize_u32(u32),
            serialize_u64(u64),
            serialize_f32(f32),
            serialize_f64(f64),
            serialize_char(char),
            serialize_bytes(&[u8]),
            serialize_none(),
            serialize_unit(),
            serialize_unit_struct(&'static str),
            serialize_unit_variant(&'static str, u32, &'static str),
        );
        fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), GiveUp> {
            Err(GiveUp)
        }
        fn serialize_newtype_struct<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: &T,
        ) -> Result<(), GiveUp> {
            Err(GiveUp)
        }
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<(), GiveUp> {
            Err(GiveUp)
        }
        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, GiveUp> {
            Err(GiveUp)
        }
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, GiveUp> {
            Err(GiveUp)
        }
        fn serialize_tuple_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleStruct, GiveUp> {
            Err(GiveUp)
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, GiveUp> {
            Err(GiveUp)
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, GiveUp> {
            Err(GiveUp)
        }
        fn serialize_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStruct, GiveUp> {
            Err(GiveUp)
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, GiveUp> {
            Err(GiveUp)
        }
    };
}

impl ser::Serializer for Key<'_> {
    only_strings!();
    fn serialize_str(self, v: &str) -> Result<(), GiveUp> {
        write_str(self.out, v);
        Ok(())
    }
}

impl ser::Serializer for Raw<'_> {
    only_strings!();
    fn serialize_str(self, v: &str) -> Result<(), GiveUp> {
        self.out.extend_from_slice(v.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn same<T: serde::Serialize + ?Sized>(v: &T) {
        let mut out = Vec::new();
        super::write(&mut out, v).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            serde_json::to_string(v).unwrap()
        );
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut all = String::new();
        for c in (0u32..0x90).filter_map(char::from_u32) {
            all.push(c);
        }
        all.push_str("é€😀\u{2028}");
        same(&all);
        for n in 0..all.len() {
            // Every position of an escape in and across 8-byte words.
            if let Some(s) = all.get(n..) {
                same(s);
            }
            if let Some(s) = all.get(..n) {
                same(s);
            }
        }
        for s in [
            "",
            "a",
            "\"",
            "abcdefgh\"",
            "abcdefghi\\",
            "0123456\n",
            "\u{7f}x\u{1f}",
        ] {
            same(s);
        }
    }

    #[test]
    fn values_are_written_as_serde_json_writes_them() {
        for n in [
            0u64,
            9,
            10,
            99,
            100,
            101,
            12345,
            1_767_225_600_000,
            u64::MAX,
        ] {
            same(&n);
        }
        for n in [0i64, -1, -10, i64::MIN, i64::MAX] {
            same(&n);
        }
        same(
            &json!({"a": [1, -2, 2.5, 1e300, null, true, false, "x\ny"], "b": {}, "c": [],
            "\u{1}k": {"z": 1, "a": [{}]}}),
        );
        same(&(
            1u8,
            'c',
            "s",
            Some(3u32),
            None::<u32>,
            f32::NAN,
            f64::INFINITY,
            1u128,
        ));
        let raw =
            serde_json::value::RawValue::from_string(r#"{ "kept" : [1, 2] }"#.into()).unwrap();
        same(&raw);
        same(&vec![Some(raw.clone()), None]);
        let mut keyed = std::collections::BTreeMap::new();
        keyed.insert(3u32, "three");
        same(&keyed);
        same(&Value::from(serde_json::Number::from_f64(0.1).unwrap()));
    }

    #[test]
    fn member_names_are_written_as_serde_json_writes_them() {
        // Names of every length around the short path's (16 bytes), and
        // ones with bytes to escape, first and later in their object.
        #[derive(serde::Serialize)]
        struct Names {
            a: u8,
            abc: u8,
            abcd: u8,
            abcdefg: u8,
            abcdefgh: u8,
            abcdefghijklmnop: u8,
            abcdefghijklmnopq: u8,
            #[serde(rename = "q\"")]
            quote: u8,
            #[serde(rename = "abcdefghijklmno\\")]
            slash: u8,
            #[serde(rename = "abcdefghijklmnopq\n")]
            newline: u8,
            #[serde(rename = "")]
            empty: u8,
        }
        #[derive(serde::Serialize)]
        struct First {
            #[serde(rename = "\u{1}")]
            control: Names,
        }
        #[derive(serde::Serialize)]
        enum V {
            #[serde(rename = "v\"")]
            Odd { x: u8 },
            #[serde(rename = "abcdefghijklmnopqr")]
            Long(u8),
        }
        let names = Names {
            a: 1,
            abc: 2,
            abcd: 3,
            abcdefg: 4,
            abcdefgh: 5,
            abcdefghijklmnop: 6,
            abcdefghijklmnopq: 7,
            quote: 8,
            slash: 9,
            newline: 10,
            empty: 11,
        };
        same(&First { control: names });
        same(&[V::Odd { x: 1 }, V::Long(2)]);
    }

    #[test]
    fn enums_are_written_as_serde_json_writes_them() {
        #[derive(serde::Serialize)]
        enum E {
            Unit,
            New(u32),
            Tuple(u32, String),
            Struct { a: u32, b: Vec<u8> },
        }
        #[derive(serde::Serialize)]
        #[serde(tag = "kind")]
        enum Tagged {
            A { x: u32 },
            B,
        }
        same(&[E::Unit, E::New(1), E::Tuple(2, "t".into())]);
        same(&E::Struct {
            a: 1,
            b: vec![1, 2],
        });
        same(&E::Struct { a: 1, b: vec![] });
        same(&[Tagged::A { x: 1 }, Tagged::B]);
    }
}
