//! What the loop's native tests share: an in-memory store that carries out
//! the loop's store effects and answers them as a host's store does.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// A store: key -> (value text, version).
#[derive(Default)]
pub struct Store {
    pub kv: BTreeMap<String, (String, u64)>,
    next: u64,
}

impl Store {
    pub fn put(&mut self, key: &str, value: String) -> u64 {
        self.next += 1;
        self.kv.insert(key.to_owned(), (value, self.next));
        self.next
    }

    /// Carries out `fx` at `now` when it is a store effect (`write`,
    /// `delete`, `read`, `claim`, `swap`, `take`): `Some` of the input that
    /// answers it (none for a write or a delete). `None`: not a store effect.
    pub fn carry(&mut self, fx: &Value, now: u64) -> Option<Option<Value>> {
        let key = fx["key"].as_str().unwrap_or("");
        Some(match fx["effect"].as_str().unwrap() {
            "write" => {
                self.put(key, fx["value"].to_string());
                None
            }
            "delete" => {
                self.kv.remove(key);
                None
            }
            "read" => {
                let mut values = serde_json::Map::new();
                let mut versions = serde_json::Map::new();
                for k in fx["keys"].as_array().unwrap() {
                    let k = k.as_str().unwrap();
                    match self.kv.get(k) {
                        Some((v, n)) => {
                            values.insert(k.into(), serde_json::from_str(v).unwrap());
                            versions.insert(k.into(), json!(n));
                        }
                        None => {
                            values.insert(k.into(), Value::Null);
                        }
                    }
                }
                Some(json!({"input":"read","now_ms":now,"values":values,"versions":versions}))
            }
            "claim" => Some(match self.kv.get(key) {
                Some((v, _)) => json!({"input":"claimed","now_ms":now,"ok":false,
                    "current": serde_json::from_str::<Value>(v).unwrap()}),
                None => {
                    self.put(key, fx["value"].to_string());
                    json!({"input":"claimed","now_ms":now,"ok":true})
                }
            }),
            "swap" => {
                let found = self.kv.get(key).map(|(_, n)| *n);
                Some(if found == fx["expected"].as_u64() {
                    let v = self.put(key, fx["value"].to_string());
                    json!({"input":"swapped","now_ms":now,"ok":true,"version":v})
                } else {
                    let (v, n) = self.kv.get(key).cloned().unwrap();
                    json!({"input":"swapped","now_ms":now,"ok":false,
                        "current": serde_json::from_str::<Value>(&v).unwrap(),"version":n})
                })
            }
            _ => return None,
        })
    }
}
