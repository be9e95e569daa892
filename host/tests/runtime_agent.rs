//! The example agent (`host/examples/runtime_agent.rs`) does what its docs
//! say, checked against the runtime's rules (docs/runtime.md).

#[allow(dead_code)]
#[path = "../examples/runtime_agent.rs"]
mod agent;

use serde_json::Value;

/// The events named `name` (with their index in the run).
fn find<'a>(events: &'a [Value], name: &str) -> Vec<(usize, &'a Value)> {
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["event"] == name)
        .collect()
}

#[test]
fn the_trips_fall_back_trip_the_breaker_and_compensate_in_reverse_order() {
    let dir = tempfile::tempdir().unwrap();
    let trips = agent::book_trips(dir.path()).unwrap();
    let [first, second] = &trips.events;

    // trip-1: the seat falls back from airline-a (402) to airline-b.
    let fallbacks = find(first, "fallback");
    assert_eq!(fallbacks.len(), 1);
    assert_eq!(fallbacks[0].1["target"], "airline-b");

    // The hotel breaker opens after 3 consecutive 503s, and a call
    // while it is open is a short_circuit, not an attempt.
    let opened = find(first, "breaker")
        .into_iter()
        .find(|(_, e)| e["state"] == "open")
        .unwrap();
    let attempts_before: Vec<_> = find(first, "attempt")
        .into_iter()
        .filter(|(i, e)| *i < opened.0 && e["step"] == "hotel")
        .collect();
    assert_eq!(attempts_before.len(), 3);
    assert!(!find(first, "short_circuit").is_empty());

    // Exhausted with two side effects done: compensations run in reverse order
    // (seat before charge), then the dead letter, which records them.
    assert_eq!(trips.hotel[0], "dead_lettered");
    assert_eq!(trips.compensated, ["seat", "charge"]);
    let compensate: Vec<&Value> = find(first, "compensate")
        .into_iter()
        .map(|(_, e)| &e["step"])
        .collect();
    assert_eq!(compensate, ["seat", "charge"]);
    assert!(find(first, "dead_letter")[0].0 > find(first, "compensate")[1].0);
    assert_eq!(trips.dead_letters.len(), 1);
    let record = &trips.dead_letters[0];
    assert_eq!(record["run_id"], "trip-1");
    assert_eq!(record["step_id"], "hotel");
    let order: Vec<&Value> = record["compensations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["step"])
        .collect();
    assert_eq!(order, ["seat", "charge"]);

    // trip-1 called the hotel 5 times (3 failures, then two failed probes
    // 250 ms apart, up to the attempt budget of 5). trip-2, another worker on
    // the same store file a second later: the breaker's 250 ms window is
    // over, so its first hotel call is the probe, which closes it.
    assert_eq!(trips.hotel_calls, [5, 1]);
    let hotel: Vec<(&Value, &Value)> = second
        .iter()
        .filter(|e| e["step"] == "hotel")
        .map(|e| (&e["event"], &e["state"]))
        .filter(|(event, _)| *event != "decision" && *event != "sleep")
        .collect();
    assert_eq!(
        hotel,
        [
            (&"breaker".into(), &"half_open".into()),
            (&"attempt".into(), &Value::Null),
            (&"ok".into(), &Value::Null),
            (&"breaker".into(), &"closed".into()),
            (&"outcome".into(), &"ok".into()),
        ]
    );
    assert_eq!(trips.hotel[1], "ok");

    // The printed timeline says so too.
    let text = trips.timeline.join("\n");
    assert!(text.contains("short_circuit hotel"), "{text}");
    assert!(text.contains("compensations seat=ok, charge=ok"), "{text}");
}

#[test]
fn the_timeline_is_the_same_every_time() {
    // A virtual clock and a seed: same store contents, same events, same text.
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = agent::book_trips(a.path()).unwrap();
    let second = agent::book_trips(b.path()).unwrap();
    assert_eq!(first.timeline, second.timeline);
    assert_eq!(first.events, second.events);
}
