//! An agent run under the recovery runtime: a fallback chain, a breaker, a
//! compensation and a dead letter, on a virtual clock (nothing sleeps).
//!
//! `cargo run --release -p agent-recovery --example runtime_agent`

use std::sync::Arc;

use agent_recovery::runtime::{Call, Outcome, Runtime, Step, VirtualClock};
use agent_recovery::store::{MemoryStore, Store};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = Arc::new(MemoryStore::new());
    let runtime = Runtime::builder()
        .clock(Arc::new(VirtualClock::new(1_767_225_600_000))) // SystemClock by default
        .store(store.clone()) // MemoryStore by default; SqliteStore to share breakers
        .seed(7) // reproducible jitter
        .breaker(3, 30_000) // seed 000: 3 consecutive failures open a target for 30 s
        .on_event(|e| println!("{e}"))
        .build()?;

    let mut run = runtime.run("order-1042")?;

    // A side effect with its undo.
    let reserved = run.step(
        Step::new("reserve", "inventory.reserve", |_: &Call| {
            Outcome::Ok(json!({"hold": "h_9"}))
        })
        .call("tool")
        .args(json!({"sku": "A-1", "qty": 1}))
        .side_effect(true)
        .compensate(|call: &Call| {
            println!("releasing the hold (key {})", &call.key[..12]);
            Outcome::Ok(json!(null))
        }),
    )?;
    assert_eq!(reserved.outcome, "ok");

    // A fallback chain: OpenAI is out of quota (a policy refusal), Anthropic answers.
    let answer = run.step(
        Step::new("answer", "llm.chat", |call: &Call| match call.target.as_str() {
            "openai" => Outcome::Response(
                r#"{"source":"http","status":429,"body":{"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"quota"}}}"#.into(),
            ),
            _ => Outcome::Ok(json!({"text": "Your order ships Monday."})),
        })
        .call("llm")
        .target("openai")
        .fallbacks(&["anthropic"]),
    )?;
    println!("answer: {:?} from the fallback", answer.result);

    // A target that keeps failing: retries, the breaker opens, the run's
    // budget runs out, the hold is released, the input is dead-lettered.
    let charged = run.step(
        Step::new("charge", "payments.charge", |_: &Call| {
            Outcome::Response(r#"{"source":"http","status":503}"#.into())
        })
        .call("tool")
        .target("api.pay")
        .args(json!({"amount": 1999})),
    )?;
    println!("charge: {}", charged.outcome);
    assert_eq!(charged.outcome, "dead_lettered");
    for (_, record) in store.read("agent-recovery/dead-letter", 0, 10)? {
        println!("dead letter: {record}");
    }
    Ok(())
}
