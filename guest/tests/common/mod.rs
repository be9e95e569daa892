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

/// Answers a `call`, a `decide`, a `sleep` or a `restore` at `now` as a
/// host does: a call takes 25 ms and ends with the next of `outcomes`
/// (`"ok"`, or an observation it failed with; none left: `{"hits":1}`), a
/// decision is the reference's, a sleep moves `now`, a restore succeeds.
/// `None`: another effect.
#[allow(dead_code)] // not every test that shares the store answers calls
pub fn answer(fx: &Value, now: &mut u64, outcomes: &mut Vec<Value>) -> Option<Value> {
    match fx["effect"].as_str().unwrap() {
        "call" => {
            *now += 25;
            let result = if outcomes.is_empty() {
                json!({"ok": {"hits": 1}})
            } else {
                match outcomes.remove(0) {
                    o if o == "ok" => json!("ok"),
                    obs => json!({ "failed": obs }),
                }
            };
            Some(json!({"input":"attempt","now_ms":*now,"result":result}))
        }
        "decide" => {
            let d = agent_recovery_policy::decide_json(
                fx["observation"].as_str().unwrap(),
                fx["context"].as_str().unwrap(),
            )
            .unwrap();
            Some(json!({"input":"decision","now_ms":*now,"decision":d}))
        }
        "sleep" => {
            *now += fx["ms"].as_u64().unwrap();
            Some(json!({"input":"slept","now_ms":*now}))
        }
        "restore" => Some(json!({"input":"restored","now_ms":*now,"ok":true})),
        _ => None,
    }
}
