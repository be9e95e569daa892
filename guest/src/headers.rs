//! HTTP headers, matched case-insensitively.

use crate::json_view::View;
use serde_json::Value;
use std::borrow::Cow;

/// Header pairs with lowercase names, in the order received.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Headers(HeaderList<'static>);

impl Headers {
    /// From name/value pairs (names are lowercased).
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: Into<String>,
    {
        Self(HeaderList(
            pairs
                .into_iter()
                .map(|(k, v)| {
                    (
                        Cow::Owned(k.as_ref().trim().to_ascii_lowercase()),
                        Cow::Owned(v.into()),
                    )
                })
                .collect(),
        ))
    }

    /// From a JSON object (`{"Retry-After": "5"}`, values may be strings, numbers
    /// or arrays of strings) or an array of `[name, value]` pairs.
    pub fn from_json(v: &Value) -> Result<Self, String> {
        HeaderList::from_view(&View::from_value(v)).map(|h| Self(h.into_owned()))
    }

    /// The first value of `name` (lowercase), trimmed.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name)
    }

    /// Whether any header name starts with `prefix`.
    pub fn any_prefix(&self, prefix: &str) -> bool {
        self.0.any_prefix(prefix)
    }

    /// True when the header is present and says `true`.
    pub fn flag(&self, name: &str) -> Option<bool> {
        self.0.flag(name)
    }

    /// The pairs, as classification reads them.
    pub(crate) fn list(&self) -> &HeaderList<'static> {
        &self.0
    }

    /// The owned headers of a borrowed list (same pairs, same order).
    pub(crate) fn from_list(list: HeaderList<'_>) -> Self {
        Self(list.into_owned())
    }
}

/// Header pairs with lowercase names, borrowed from the observation when a
/// name is already lowercase (what [`Headers`] holds, and what classification reads).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct HeaderList<'a>(Vec<(Cow<'a, str>, Cow<'a, str>)>);

impl<'a> HeaderList<'a> {
    /// From a JSON object or an array of `[name, value]` pairs, as
    /// [`Headers::from_json`]; an object is read in `BTreeMap` order (sorted
    /// names, a repeated name once with its last value), as a `Value` would be.
    pub fn from_view(v: &View<'a>) -> Result<Self, String> {
        match v {
            View::Null => Ok(Self::default()),
            View::Object(map) => {
                let members = map.sorted();
                let mut out = Vec::with_capacity(members.len());
                for (k, val) in members {
                    out.push((name(k), header_value(k, val)?));
                }
                Ok(Self(out))
            }
            View::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match item.as_array().map(Vec::as_slice) {
                        Some([View::String(k), val]) => out.push((name(k), header_value(k, val)?)),
                        _ => {
                            return Err(format!(
                                "headers array item {} is not a [name, value] pair; use {{\"name\": \"value\"}} or [[\"name\", \"value\"]]",
                                item.to_value()
                            ));
                        }
                    }
                }
                Ok(Self(out))
            }
            other => Err(format!(
                "headers must be an object or an array of pairs, got {}; use {{\"retry-after\": \"5\"}}",
                other.kind()
            )),
        }
    }

    /// The first value of `name` (lowercase), trimmed.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
    }

    /// Whether any header name starts with `prefix`.
    pub fn any_prefix(&self, prefix: &str) -> bool {
        self.0.iter().any(|(k, _)| k.starts_with(prefix))
    }

    /// True when the header is present and says `true`.
    pub fn flag(&self, name: &str) -> Option<bool> {
        let v = self.get(name)?;
        let says = |words: [&str; 3]| words.iter().any(|w| v.eq_ignore_ascii_case(w));
        if says(["true", "1", "yes"]) {
            Some(true)
        } else if says(["false", "0", "no"]) {
            Some(false)
        } else {
            None
        }
    }

    /// The same pairs, owned.
    pub fn into_owned(self) -> HeaderList<'static> {
        HeaderList(
            self.0
                .into_iter()
                .map(|(k, v)| (Cow::Owned(k.into_owned()), Cow::Owned(v.into_owned())))
                .collect(),
        )
    }
}

/// A header name trimmed and lowercased, borrowed when it already is.
fn name<'a>(k: &Cow<'a, str>) -> Cow<'a, str> {
    match k {
        Cow::Borrowed(b) if !b.bytes().any(|c| c.is_ascii_uppercase()) => Cow::Borrowed(b.trim()),
        _ => Cow::Owned(k.trim().to_ascii_lowercase()),
    }
}

fn header_value<'a>(name: &str, v: &View<'a>) -> Result<Cow<'a, str>, String> {
    match v {
        View::String(s) => Ok(s.clone()),
        View::Number(n) => Ok(Cow::Owned(n.to_string())),
        View::Bool(b) => Ok(Cow::Borrowed(if *b { "true" } else { "false" })),
        View::Array(items) => {
            let mut parts = Vec::with_capacity(items.len());
            for i in items {
                parts.push(header_value(name, i)?);
            }
            Ok(Cow::Owned(parts.join(", ")))
        }
        other => Err(format!(
            "header {name:?} has a {} value; header values are strings",
            other.kind()
        )),
    }
}
