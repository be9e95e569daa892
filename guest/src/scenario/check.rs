//! Every member and rule of a scenario, checked once; the messages name the
//! bad member (by its path, such as `scenario.steps[0].fanout`) and end with
//! a hint.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Fallback, Fanout, Outcome, Plan, PlanStep, Step};

const HINT: &str = "see docs/runtime.md, \"Scenarios\", for the format";

const SCENARIO_FIELDS: &[&str] = &[
    "run_id",
    "seed",
    "now_ms",
    "config",
    "cancel_at_ms",
    "kill_after_calls",
    "recover",
    "steps",
];
const STEP_FIELDS: &[&str] = &[
    "id",
    "tool",
    "call",
    "target",
    "args",
    "side_effect",
    "idempotent",
    "checkpoint",
    "outcomes",
    "fallbacks",
    "compensation",
    "fanout",
    "replay_of",
];
const FALLBACK_FIELDS: &[&str] = &["target", "outcomes"];
const COMPENSATION_FIELDS: &[&str] = &["outcomes"];
const FANOUT_FIELDS: &[&str] = &["min_results", "branches"];

type Res<T> = Result<T, String>;

/// An object's members in the order written, each value's text kept.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<Members<'a>, M::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, &'de RawValue>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// A checked object: its members, where it is, and which member names it takes.
struct Obj<'a> {
    members: Vec<(String, &'a RawValue)>,
    at: String,
}

/// The value's text for a message, at most 80 characters.
fn shown(raw: &RawValue) -> String {
    raw.get().chars().take(80).collect()
}

fn is_null(raw: &RawValue) -> bool {
    raw.get() == "null"
}

impl<'a> Obj<'a> {
    /// `raw` as an object at `at` whose members are among `fields`, with `required` present.
    fn new(raw: &'a RawValue, at: String, fields: &[&str], required: &[&str]) -> Res<Self> {
        let members = match raw.get().as_bytes().first() {
            Some(b'{') => {
                serde_json::from_str::<Members<'a>>(raw.get())
                    .map_err(|e| format!("{at}: {e}; {HINT}"))?
                    .0
            }
            _ => {
                return Err(format!(
                    "{at}: expected an object, got {}; {HINT}",
                    shown(raw)
                ));
            }
        };
        let mut seen = BTreeSet::new();
        for (k, _) in &members {
            if !fields.contains(&k.as_str()) {
                let expected: Vec<String> = fields.iter().map(|f| format!("`{f}`")).collect();
                return Err(format!(
                    "{at}: unknown field `{k}`, expected one of {}; {HINT}",
                    expected.join(", ")
                ));
            }
            if !seen.insert(k.as_str()) {
                return Err(format!("{at}: duplicate field `{k}`; {HINT}"));
            }
        }
        for r in required {
            if !seen.contains(r) {
                return Err(format!("{at}: missing field `{r}`; {HINT}"));
            }
        }
        Ok(Obj { members, at })
    }

    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.members.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// A member that is absent or null.
    fn nullish(&self, key: &str) -> Option<&'a RawValue> {
        self.get(key).filter(|v| !is_null(v))
    }

    fn wrong(&self, key: &str, kind: &str, raw: &RawValue) -> String {
        format!(
            "{}: `{key}` must be {kind}, got {}; {HINT}",
            self.at,
            shown(raw)
        )
    }

    fn typed<T>(
        &self,
        raw: &RawValue,
        key: &str,
        kind: &str,
        f: impl Fn(&Value) -> Option<T>,
    ) -> Res<T> {
        serde_json::from_str::<Value>(raw.get())
            .ok()
            .as_ref()
            .and_then(f)
            .ok_or_else(|| self.wrong(key, kind, raw))
    }

    /// A string member; `None` when absent (or null, when `nullable`).
    fn string(&self, key: &str, nullable: bool) -> Res<Option<String>> {
        let raw = if nullable {
            self.nullish(key)
        } else {
            self.get(key)
        };
        raw.map(|r| self.typed(r, key, "a string", |v| v.as_str().map(str::to_owned)))
            .transpose()
    }

    fn boolean(&self, key: &str, nullable: bool) -> Res<Option<bool>> {
        let raw = if nullable {
            self.nullish(key)
        } else {
            self.get(key)
        };
        raw.map(|r| self.typed(r, key, "a boolean", Value::as_bool))
            .transpose()
    }

    fn u64(&self, key: &str, nullable: bool) -> Res<Option<u64>> {
        let raw = if nullable {
            self.nullish(key)
        } else {
            self.get(key)
        };
        raw.map(|r| self.typed(r, key, "u64", Value::as_u64))
            .transpose()
    }

    /// An array member's elements (their text); empty when absent.
    fn array(&self, key: &str) -> Res<Vec<&'a RawValue>> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(raw) if raw.get().starts_with('[') => serde_json::from_str(raw.get())
                .map_err(|e| format!("{}: `{key}`: {e}; {HINT}", self.at)),
            Some(raw) => Err(self.wrong(key, "an array", raw)),
        }
    }
}

/// Parse and check a scenario (JSON text): the plan, or a message that names
/// the bad member or rule and ends with a hint.
pub fn parse(text: &str) -> Result<Plan, String> {
    let raw: &RawValue =
        serde_json::from_str(text).map_err(|e| format!("scenario: {e}; {HINT}"))?;
    let s = Obj::new(
        raw,
        "scenario".into(),
        SCENARIO_FIELDS,
        &["now_ms", "steps"],
    )?;
    let run_id = s.string("run_id", false)?.unwrap_or_default();
    let seed = s.u64("seed", true)?;
    let now_ms = s.u64("now_ms", false)?.unwrap_or_default();
    let config = s
        .nullish("config")
        .map_or_else(|| "{}".to_owned(), |r| r.get().to_owned());
    let cancel_at_ms = s.u64("cancel_at_ms", true)?;
    let kill_after_calls = s.u64("kill_after_calls", true)?;
    let recover = s.boolean("recover", false)?.unwrap_or(false);
    let mut steps = Vec::new();
    for (i, raw) in s.array("steps")?.into_iter().enumerate() {
        steps.push(step(raw, format!("scenario.steps[{i}]"))?);
    }
    let plan = Plan {
        run_id,
        seed,
        now_ms,
        config,
        cancel_at_ms,
        kill_after_calls,
        recover,
        steps: Vec::new(),
    };
    validate(plan, steps)
}

/// A step as written, before the rules that span steps.
struct Parsed {
    step: Step,
    /// Only `id` and `fanout` (the others absent or at their defaults).
    bare: bool,
    fanout: Option<(u32, Vec<Parsed>)>,
}

fn outcomes(o: &Obj<'_>, key: &str) -> Res<Vec<Outcome>> {
    Ok(o.array(key)?
        .into_iter()
        .map(|r| match r.get() {
            r#""ok""# => Outcome::Ok,
            t => Outcome::Observation(t.to_owned()),
        })
        .collect())
}

fn step(raw: &RawValue, at: String) -> Res<Parsed> {
    let o = Obj::new(raw, at, STEP_FIELDS, &["id"])?;
    let id = o.string("id", false)?.unwrap_or_default();
    let tool = o.string("tool", false)?.unwrap_or_default();
    let call = o.string("call", true)?;
    let target = o.string("target", true)?;
    let side_effect = o.boolean("side_effect", false)?.unwrap_or(false);
    let idempotent = o.boolean("idempotent", true)?;
    let checkpoint = o.boolean("checkpoint", true)?;
    let first = outcomes(&o, "outcomes")?;
    let mut fallbacks = Vec::new();
    for (i, raw) in o.array("fallbacks")?.into_iter().enumerate() {
        let f = Obj::new(
            raw,
            format!("{}.fallbacks[{i}]", o.at),
            FALLBACK_FIELDS,
            &["target"],
        )?;
        fallbacks.push(Fallback {
            target: f.string("target", false)?.unwrap_or_default(),
            outcomes: outcomes(&f, "outcomes")?,
        });
    }
    let compensation = match o.nullish("compensation") {
        Some(raw) => {
            let c = Obj::new(
                raw,
                format!("{}.compensation", o.at),
                COMPENSATION_FIELDS,
                &[],
            )?;
            Some(outcomes(&c, "outcomes")?)
        }
        None => None,
    };
    let replay_of = match o.nullish("replay_of") {
        Some(raw) if raw.get().starts_with('{') => Some(raw.get().to_owned()),
        Some(raw) => return Err(o.wrong("replay_of", "an object", raw)),
        None => None,
    };
    let args = o.nullish("args").map(|r| r.get().to_owned());
    let fanout = match o.nullish("fanout") {
        Some(raw) => {
            let f = Obj::new(
                raw,
                format!("{}.fanout", o.at),
                FANOUT_FIELDS,
                &["min_results", "branches"],
            )?;
            let min = f.typed(
                f.get("min_results").unwrap_or(raw),
                "min_results",
                "u32",
                |v| v.as_u64().and_then(|n| u32::try_from(n).ok()),
            )?;
            let mut branches = Vec::new();
            for (i, raw) in f.array("branches")?.into_iter().enumerate() {
                branches.push(step(raw, format!("{}.branches[{i}]", f.at))?);
            }
            Some((min, branches))
        }
        None => None,
    };
    let bare = tool.is_empty()
        && call.is_none()
        && target.is_none()
        && args.is_none()
        && !side_effect
        && idempotent.is_none()
        && checkpoint.is_none()
        && first.is_empty()
        && fallbacks.is_empty()
        && compensation.is_none()
        && replay_of.is_none();
    Ok(Parsed {
        step: Step {
            id,
            tool,
            call,
            target,
            args,
            side_effect,
            idempotent,
            checkpoint,
            outcomes: first,
            fallbacks,
            compensation,
            replay_of,
        },
        bare,
        fanout,
    })
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// The rules that span members and steps, in this order.
fn validate(mut plan: Plan, steps: Vec<Parsed>) -> Res<Plan> {
    if plan.kill_after_calls == Some(0) {
        return Err(
            "scenario: `kill_after_calls` is 0; give the call number to kill at, from 1".into(),
        );
    }
    if plan.run_id.is_empty() && !plan.recover {
        return Err("scenario: `run_id` is empty; name the run".into());
    }
    if steps.is_empty() && !plan.recover {
        return Err("scenario: `steps` is empty; give at least one step".into());
    }
    let mut seen = BTreeSet::new();
    for p in steps {
        let id = quoted(&p.step.id);
        let one = match p.fanout {
            Some((min_results, branches)) => {
                if !p.bare {
                    return Err(format!(
                        "scenario step {id}: a fan-out step has only `id` and `fanout`; put tools and outcomes in its branches"
                    ));
                }
                if branches.iter().any(|b| b.fanout.is_some()) {
                    return Err(format!(
                        "scenario step {id}: a branch is itself a fan-out; fan-outs do not nest"
                    ));
                }
                unique(&mut seen, &p.step)?;
                let mut out = Vec::new();
                for b in branches {
                    unique(&mut seen, &b.step)?;
                    out.push(b.step);
                }
                PlanStep::Fanout(Fanout {
                    id: p.step.id,
                    min_results,
                    branches: out,
                })
            }
            None => {
                if p.step.tool.is_empty() {
                    return Err(format!(
                        "scenario step {id}: `tool` is missing or empty; name the tool (or give a `fanout`)"
                    ));
                }
                unique(&mut seen, &p.step)?;
                PlanStep::Step(p.step)
            }
        };
        plan.steps.push(one);
    }
    Ok(plan)
}

/// The step's id is new, and each of its outcomes is `"ok"` or an object.
fn unique(seen: &mut BTreeSet<String>, step: &Step) -> Res<()> {
    if !seen.insert(step.id.clone()) {
        return Err(format!(
            "scenario: step id {} is used twice; step ids are unique in a run",
            quoted(&step.id)
        ));
    }
    let all = step
        .outcomes
        .iter()
        .chain(step.fallbacks.iter().flat_map(|f| &f.outcomes))
        .chain(step.compensation.iter().flatten());
    for o in all {
        if let Outcome::Observation(text) = o
            && !text.starts_with('{')
        {
            let shown = serde_json::from_str::<Value>(text)
                .map(|v| v.to_string())
                .unwrap_or_else(|_| text.clone());
            return Err(format!(
                "scenario step {}: an outcome is {shown}; use \"ok\" or an observation object",
                quoted(&step.id)
            ));
        }
    }
    Ok(())
}
