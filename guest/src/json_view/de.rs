//! [`View`] built by serde_json's own parser: a hand-written `Deserialize`
//! whose visitor borrows a string with no escape (`visit_borrowed_str`) and
//! owns any other, and mirrors serde_json's `Value` visitor in everything
//! else (numbers, `null` for a non-finite float, the `raw_value` token).

use super::{Obj, View};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Number;
use std::borrow::Cow;
use std::fmt;

impl<'de> Deserialize<'de> for View<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ViewVisitor)
    }
}

struct ViewVisitor;

impl<'de> Visitor<'de> for ViewVisitor {
    type Value = View<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The text of serde_json's own Value visitor.
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<View<'de>, E> {
        Ok(View::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<View<'de>, E> {
        Ok(View::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<View<'de>, E> {
        Ok(View::Number(n.into()))
    }

    fn visit_f64<E>(self, f: f64) -> Result<View<'de>, E> {
        Ok(Number::from_f64(f).map_or(View::Null, View::Number))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<View<'de>, E> {
        Ok(View::String(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<View<'de>, E> {
        Ok(View::String(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<View<'de>, E> {
        Ok(View::String(Cow::Owned(s)))
    }

    fn visit_none<E>(self) -> Result<View<'de>, E> {
        Ok(View::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<View<'de>, D::Error> {
        View::deserialize(d)
    }

    fn visit_unit<E>(self) -> Result<View<'de>, E> {
        Ok(View::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<View<'de>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(View::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<View<'de>, A::Error> {
        // serde_json gives no size hint; 8 members hold most objects without a regrowth.
        let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8).min(64));
        while let Some(Key(k)) = map.next_key()? {
            // serde_json's `raw_value` feature (on in this crate): an object whose
            // first key is its private token is the JSON text of its value.
            if out.is_empty() && k == RAW_VALUE_TOKEN {
                let RawText(text) = map.next_value()?;
                return View::parse(&text)
                    .map(View::into_owned)
                    .map_err(serde::de::Error::custom);
            }
            out.push((k, map.next_value()?));
        }
        Ok(View::Object(Obj(out)))
    }
}

/// An object key, borrowed when it had no escape.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(s)))
    }
}

/// The key serde_json's `Value` reads as "the value is raw JSON text".
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// The string after [`RAW_VALUE_TOKEN`] (errors as serde_json's own visitor).
struct RawText(String);

impl<'de> Deserialize<'de> for RawText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(RawTextVisitor)
    }
}

struct RawTextVisitor;

impl<'de> Visitor<'de> for RawTextVisitor {
    type Value = RawText;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("raw value")
    }

    fn visit_str<E>(self, s: &str) -> Result<RawText, E> {
        Ok(RawText(s.to_owned()))
    }
}
