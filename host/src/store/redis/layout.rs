//! The Redis key layout (`host/src/store/redis/README.md`), the same text in
//! Rust, Node and Python (`tests/store/redis-layout.json` pins it).
//!
//! Every entry and every stream has its own hash tag, `{P:<tag>}` with `<tag>`
//! the first 8 hex digits of the SHA-256 of its name, so a Redis Cluster
//! spreads them over its slots and every script touches one slot. The
//! store-wide keys (metadata, revision) share the tag `{P}`.

use sha2::{Digest, Sha256};

/// Builds the Redis keys of one store prefix.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    prefix: String,
}

impl Layout {
    pub(crate) fn new(prefix: &str) -> Self {
        Layout {
            prefix: prefix.to_owned(),
        }
    }

    /// `{P}:meta`: the store's metadata hash.
    pub(crate) fn meta(&self) -> String {
        format!("{{{}}}:meta", self.prefix)
    }

    /// `{P}:rev`: the store-wide revision counter.
    pub(crate) fn rev(&self) -> String {
        format!("{{{}}}:rev", self.prefix)
    }

    /// `{P:<tag>}:e:<key>`: one entry's hash.
    pub(crate) fn entry(&self, key: &str) -> String {
        format!("{{{}:{}}}:e:{key}", self.prefix, tag(key))
    }

    /// `{P:<tag>}:s:<stream>`: one stream.
    pub(crate) fn stream(&self, stream: &str) -> String {
        format!("{{{}:{}}}:s:{stream}", self.prefix, tag(stream))
    }

    /// The `SCAN MATCH` pattern of every entry whose key starts with `start`.
    pub(crate) fn entry_pattern(&self, start: &str) -> String {
        format!(
            "{{{}:????????}}:e:{}*",
            glob_escape(&self.prefix),
            glob_escape(start)
        )
    }

    /// The store key of an entry's Redis key (None when it is not one).
    pub(crate) fn key_of<'a>(&self, redis_key: &'a str) -> Option<&'a str> {
        let rest = redis_key
            .strip_prefix('{')?
            .strip_prefix(self.prefix.as_str())?;
        let rest = rest.strip_prefix(':')?;
        let (tag, key) = rest.split_at_checked(8)?;
        if !tag
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        key.strip_prefix("}:e:")
    }
}

/// The first 8 hex digits (lowercase) of the SHA-256 of `name`'s UTF-8 bytes.
pub(crate) fn tag(name: &str) -> String {
    let digest = Sha256::digest(name.as_bytes());
    digest[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// `name` with the glob characters of `SCAN MATCH` escaped.
fn glob_escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_key_maps_back_to_its_name() {
        let l = Layout::new("ar");
        let k = l.entry("breaker/a{b}");
        assert_eq!(l.key_of(&k), Some("breaker/a{b}"));
        assert_eq!(l.key_of(&l.stream("breaker/a")), None);
        assert_eq!(l.entry_pattern("a*b"), "{ar:????????}:e:a\\*b*");
    }

    /// The shared layout vectors (`tests/store/redis-layout.json`), also read
    /// by the Node and Python suites.
    #[test]
    fn builds_the_keys_of_the_shared_layout_vectors() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/store/redis-layout.json"
        );
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON");
        let cases = doc["cases"].as_array().expect("cases");
        assert!(cases.len() >= 10);
        for case in cases {
            let l = Layout::new(case["prefix"].as_str().expect("prefix"));
            let name = case["name"].as_str().unwrap_or("");
            let got = match case["kind"].as_str().expect("kind") {
                "entry" => l.entry(name),
                "stream" => l.stream(name),
                "meta" => l.meta(),
                "rev" => l.rev(),
                "entry_pattern" => l.entry_pattern(name),
                other => panic!("unknown kind {other}"),
            };
            assert_eq!(Some(got.as_str()), case["redis_key"].as_str(), "{case}");
            if case["kind"] == "entry" {
                assert_eq!(l.key_of(&got), Some(name));
            }
        }
    }
}
