//! A borrowed JSON value: what classification reads, without a `Value` tree.
//!
//! [`View`] is built by serde_json's own parser (through the `Deserialize`
//! impl in `de.rs`), so numbers, error messages, the recursion limit and invalid
//! input behave exactly as for `serde_json::Value`. What differs is what the
//! parser builds: a string with no escape borrows from the input text, and an
//! object is a `Vec` of members in input order (small objects: a linear scan
//! beats a `BTreeMap`), with no allocation per key.
//!
//! The semantics are `serde_json::Value`'s without `preserve_order` (maps are
//! `BTreeMap`s): a duplicate key means the LAST value wins on lookup, and
//! whatever iterates an object sees the keys sorted with duplicates collapsed
//! ([`Obj::sorted`]). Parts of the input copied into an output go through
//! [`View::to_value`], which builds exactly the `Value` serde_json would have.

use serde_json::{Map, Number, Value};
use std::borrow::Cow;

/// A JSON value whose strings borrow from the input text when they can.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) enum View<'a> {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, exactly as serde_json parses it.
    Number(Number),
    /// A string: borrowed when it had no escape.
    String(Cow<'a, str>),
    /// An array.
    Array(Vec<View<'a>>),
    /// An object, members in input order (duplicates kept).
    Object(Obj<'a>),
}

/// An object's members in input order; lookups give the last of a duplicate key.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Obj<'a>(Vec<(Cow<'a, str>, View<'a>)>);

impl<'a> Obj<'a> {
    /// The value of `key` (the last one when the key is repeated).
    pub fn get(&self, key: &str) -> Option<&View<'a>> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Whether `key` is a member.
    pub fn contains_key(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    /// Remove every member named `key`; the last value, if any. One pass
    /// however many times the key is repeated (a hostile object with many
    /// duplicates between other members stays linear).
    pub fn remove(&mut self, key: &str) -> Option<View<'a>> {
        self.0
            .extract_if(.., |(k, _)| k == key)
            .last()
            .map(|(_, v)| v)
    }

    /// The keys, in input order (duplicates repeated).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }

    /// The members as a `BTreeMap` iterates them: sorted by key, a repeated
    /// key once, with its last value.
    pub fn sorted(&self) -> Vec<(&Cow<'a, str>, &View<'a>)> {
        let mut out: Vec<(&Cow<'a, str>, &View<'a>)> = self.0.iter().map(|(k, v)| (k, v)).collect();
        // Stable: equal keys keep input order, so the last of a run is the last given.
        out.sort_by(|a, b| a.0.cmp(b.0));
        let mut deduped: Vec<(&Cow<'a, str>, &View<'a>)> = Vec::with_capacity(out.len());
        for (k, v) in out {
            match deduped.last_mut() {
                Some(last) if last.0 == k => last.1 = v,
                _ => deduped.push((k, v)),
            }
        }
        deduped
    }

    fn into_owned(self) -> Obj<'static> {
        Obj(self
            .0
            .into_iter()
            .map(|(k, v)| (Cow::Owned(k.into_owned()), v.into_owned()))
            .collect())
    }
}

impl<'a> View<'a> {
    /// Parse JSON text, borrowing its unescaped strings; errors are serde_json's.
    pub fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// A view of a `Value`, borrowing its strings (no text round trip).
    pub fn from_value(v: &'a Value) -> Self {
        match v {
            Value::Null => View::Null,
            Value::Bool(b) => View::Bool(*b),
            Value::Number(n) => View::Number(n.clone()),
            Value::String(s) => View::String(Cow::Borrowed(s)),
            Value::Array(a) => View::Array(a.iter().map(View::from_value).collect()),
            Value::Object(m) => View::Object(Obj(m
                .iter()
                .map(|(k, v)| (Cow::Borrowed(k.as_str()), View::from_value(v)))
                .collect())),
        }
    }

    /// The `Value` serde_json would have parsed from the same text.
    pub fn to_value(&self) -> Value {
        match self {
            View::Null => Value::Null,
            View::Bool(b) => Value::Bool(*b),
            View::Number(n) => Value::Number(n.clone()),
            View::String(s) => Value::String(s.as_ref().to_owned()),
            View::Array(a) => Value::Array(a.iter().map(View::to_value).collect()),
            View::Object(o) => {
                let mut m = Map::new();
                for (k, v) in &o.0 {
                    m.insert(k.as_ref().to_owned(), v.to_value());
                }
                Value::Object(m)
            }
        }
    }

    /// The same value with every string owned.
    pub fn into_owned(self) -> View<'static> {
        match self {
            View::Null => View::Null,
            View::Bool(b) => View::Bool(b),
            View::Number(n) => View::Number(n),
            View::String(s) => View::String(Cow::Owned(s.into_owned())),
            View::Array(a) => View::Array(a.into_iter().map(View::into_owned).collect()),
            View::Object(o) => View::Object(o.into_owned()),
        }
    }

    /// The JSON type name, for error messages (as [`crate::json_kind`]).
    pub fn kind(&self) -> &'static str {
        match self {
            View::Null => "null",
            View::Bool(_) => "a boolean",
            View::Number(_) => "a number",
            View::String(_) => "a string",
            View::Array(_) => "an array",
            View::Object(_) => "an object",
        }
    }

    /// A member of an object (`None` for anything else).
    pub fn get(&self, key: &str) -> Option<&View<'a>> {
        self.as_object()?.get(key)
    }

    /// A JSON Pointer lookup, as `Value::pointer` (RFC 6901).
    pub fn pointer(&self, pointer: &str) -> Option<&View<'a>> {
        if pointer.is_empty() {
            return Some(self);
        }
        let rest = pointer.strip_prefix('/')?;
        let mut target = self;
        for raw in rest.split('/') {
            // Unescaped only when it has to be (`Value::pointer` always allocates).
            let token = if raw.contains('~') {
                Cow::Owned(raw.replace("~1", "/").replace("~0", "~"))
            } else {
                Cow::Borrowed(raw)
            };
            target = match target {
                View::Object(o) => o.get(&token)?,
                View::Array(a) => a.get(parse_index(&token)?)?,
                _ => return None,
            };
        }
        Some(target)
    }

    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Obj<'a>> {
        match self {
            View::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&Vec<View<'a>>> {
        match self {
            View::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            View::String(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            View::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The number, if this is one.
    pub fn as_number(&self) -> Option<&Number> {
        match self {
            View::Number(n) => Some(n),
            _ => None,
        }
    }

    /// A non-negative integer (not `429.0`), as `Value::as_u64`.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_number()?.as_u64()
    }

    /// An integer (not `429.0`), as `Value::as_i64`.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number()?.as_i64()
    }

    /// Any number as a float, as `Value::as_f64`.
    #[allow(dead_code)] // the full accessor set of `Value`, held to it by the tests
    pub fn as_f64(&self) -> Option<f64> {
        self.as_number()?.as_f64()
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, View::Null)
    }

    /// Whether this is a boolean.
    pub fn is_boolean(&self) -> bool {
        matches!(self, View::Bool(_))
    }

    /// Whether this is a string.
    pub fn is_string(&self) -> bool {
        matches!(self, View::String(_))
    }

    /// Whether this is an array.
    pub fn is_array(&self) -> bool {
        matches!(self, View::Array(_))
    }

    /// Whether this is an object.
    pub fn is_object(&self) -> bool {
        matches!(self, View::Object(_))
    }

    /// Whether this is a number.
    #[allow(dead_code)] // the full accessor set of `Value`, held to it by the tests
    pub fn is_number(&self) -> bool {
        matches!(self, View::Number(_))
    }

    /// Whether this is an integer that fits a `u64`.
    pub fn is_u64(&self) -> bool {
        self.as_number().is_some_and(Number::is_u64)
    }

    /// Whether this is an integer that fits an `i64`.
    pub fn is_i64(&self) -> bool {
        self.as_number().is_some_and(Number::is_i64)
    }

    /// Whether this is a number that is not an integer.
    #[allow(dead_code)] // the full accessor set of `Value`, held to it by the tests
    pub fn is_f64(&self) -> bool {
        self.as_number().is_some_and(Number::is_f64)
    }
}

/// An array index as `Value::pointer` reads it: digits, no leading `+` or zero.
fn parse_index(s: &str) -> Option<usize> {
    if s.starts_with('+') || (s.starts_with('0') && s.len() != 1) {
        return None;
    }
    s.parse().ok()
}

mod de;

#[cfg(test)]
mod tests;
