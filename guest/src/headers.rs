//! HTTP headers, matched case-insensitively.

use serde_json::Value;

/// Header pairs with lowercase names, in the order received.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Headers(Vec<(String, String)>);

impl Headers {
    /// From name/value pairs (names are lowercased).
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: Into<String>,
    {
        Self(
            pairs
                .into_iter()
                .map(|(k, v)| (k.as_ref().trim().to_ascii_lowercase(), v.into()))
                .collect(),
        )
    }

    /// From a JSON object (`{"Retry-After": "5"}`, values may be strings, numbers
    /// or arrays of strings) or an array of `[name, value]` pairs.
    pub fn from_json(v: &Value) -> Result<Self, String> {
        match v {
            Value::Null => Ok(Self::default()),
            Value::Object(map) => {
                let mut out = Vec::with_capacity(map.len());
                for (k, val) in map {
                    out.push((k.clone(), header_value(k, val)?));
                }
                Ok(Self::from_pairs(out))
            }
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match item.as_array().map(Vec::as_slice) {
                        Some([Value::String(k), val]) => {
                            out.push((k.clone(), header_value(k, val)?))
                        }
                        _ => {
                            return Err(format!(
                                "headers array item {item} is not a [name, value] pair; use {{\"name\": \"value\"}} or [[\"name\", \"value\"]]"
                            ));
                        }
                    }
                }
                Ok(Self::from_pairs(out))
            }
            other => Err(format!(
                "headers must be an object or an array of pairs, got {}; use {{\"retry-after\": \"5\"}}",
                crate::json_kind(other)
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
        match self.get(name)?.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Some(true),
            "false" | "0" | "no" => Some(false),
            _ => None,
        }
    }
}

fn header_value(name: &str, v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Array(items) => {
            let mut parts = Vec::with_capacity(items.len());
            for i in items {
                parts.push(header_value(name, i)?);
            }
            Ok(parts.join(", "))
        }
        other => Err(format!(
            "header {name:?} has a {} value; header values are strings",
            crate::json_kind(other)
        )),
    }
}
