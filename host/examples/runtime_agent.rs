//! A trip-booking agent under the recovery runtime, with simulated tools (no
//! network), a virtual clock (nothing sleeps) and the real component.
//!
//! `cargo run --release -p agent-recovery --example runtime_agent`
//!
//! Two runs, by two workers sharing one SQLite store file in a temp dir:
//!
//! 1. `trip-1` charges the card, reserves a seat through a fallback chain
//!    (airline A refuses with a 402, airline B has the seat), then books the
//!    hotel, whose API is down: retries, the `hotels` breaker opens after 3
//!    consecutive failures, the probe fails, the run's retry budget runs out,
//!    so the seat and then the charge are compensated (reverse order) and the
//!    input is dead-lettered.
//! 2. `trip-2`, a second worker on the same file a second later: its hotel
//!    call is short-circuited by the breaker `trip-1` opened (the API is not
//!    called), then the probe goes through once the breaker's 30 s are over,
//!    succeeds and closes it.

use std::error::Error;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use agent_recovery::runtime::{Call, Outcome, Runtime, Step, StepReport, VirtualClock};
use agent_recovery::store::{SqliteStore, Store};
use serde_json::{Value, json};

/// Where the virtual clock starts (2026-01-01T00:00:00Z).
const START_MS: u64 = 1_767_225_600_000;

/// The timeline: tool lines and event lines, in the order they happened.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn say(&self, line: String) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
    }
    fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What happened, for `host/tests/runtime_agent.rs`.
#[derive(Debug)]
pub struct Trips {
    /// The hotel step's outcome in `trip-1`, then in `trip-2`.
    pub hotel: [String; 2],
    /// The steps compensated, in the order their compensations ran.
    pub compensated: Vec<String>,
    /// Calls that reached the hotel API, in `trip-1` and in `trip-2`.
    pub hotel_calls: [u32; 2],
    /// Dead-letter records in the shared store after both runs.
    pub dead_letters: Vec<Value>,
    /// The events of each run, as the component printed them.
    pub events: [Vec<Value>; 2],
    /// The printed timeline.
    pub timeline: Vec<String>,
}

fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let trips = book_trips(dir.path())?;
    for line in &trips.timeline {
        println!("{line}");
    }
    Ok(())
}

/// Runs both trips against a store file in `dir`.
pub fn book_trips(dir: &Path) -> Result<Trips, Box<dyn Error>> {
    let db = dir.join("recovery.sqlite");
    let clock = Arc::new(VirtualClock::new(START_MS));
    let log = Log::default();
    let compensated = Arc::new(Mutex::new(Vec::new()));

    log.say(
        "== trip-1, worker 1: charge, seat (airline-a, else airline-b), hotel (its API is down)"
            .into(),
    );
    let worker1 = worker(&db, &clock, &log)?;
    let mut run = worker1.run("trip-1")?;
    let first = [
        run.step(charge(&log, &compensated, "trip-1"))?,
        run.step(seat(&log, &compensated))?,
    ];
    let hotel_calls_1 = Arc::new(Mutex::new(0));
    let hotel_1 = run.step(hotel(&log, &hotel_calls_1, false))?;
    summary(&log, "trip-1", first.iter().chain([&hotel_1]));
    let events_1 = parsed(run.events());

    clock.advance(1_000);
    log.say(String::new());
    log.say("== trip-2, worker 2 (its own handle on the same store file), 1 s later".into());
    let worker2 = worker(&db, &clock, &log)?;
    let mut run = worker2.run("trip-2")?;
    let second = [
        run.step(charge(&log, &compensated, "trip-2"))?,
        run.step(seat(&log, &compensated))?,
    ];
    let hotel_calls_2 = Arc::new(Mutex::new(0));
    let hotel_2 = run.step(hotel(&log, &hotel_calls_2, true))?;
    summary(&log, "trip-2", second.iter().chain([&hotel_2]));
    let events_2 = parsed(run.events());
    run.end()?; // a completed run leaves no journal entry (a dead-lettered one has none)

    let store = SqliteStore::open(&db)?;
    let dead_letters: Vec<Value> = store
        .read("agent-recovery/dead-letter", 0, 100)?
        .into_iter()
        .filter_map(|(_, record)| serde_json::from_str(&record).ok())
        .collect();
    log.say(String::new());
    for record in &dead_letters {
        log.say(format!(
            "dead letter: run {} step {} after {} attempts, last error {}, compensations {}",
            record["run_id"].as_str().unwrap_or("?"),
            record["step_id"].as_str().unwrap_or("?"),
            record["attempts"],
            record["last_envelope"]["code"].as_str().unwrap_or("?"),
            record["compensations"]
                .as_array()
                .map(|c| c
                    .iter()
                    .map(|c| format!(
                        "{}={}",
                        c["step"].as_str().unwrap_or("?"),
                        c["outcome"].as_str().unwrap_or("?")
                    ))
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default(),
        ));
    }
    let count = |calls: &Arc<Mutex<u32>>| *calls.lock().unwrap_or_else(PoisonError::into_inner);
    Ok(Trips {
        hotel: [hotel_1.outcome, hotel_2.outcome],
        compensated: compensated
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone(),
        hotel_calls: [count(&hotel_calls_1), count(&hotel_calls_2)],
        dead_letters,
        events: [events_1, events_2],
        timeline: log.lines(),
    })
}

/// One worker: its own runtime and its own handle on the shared store file.
fn worker(db: &Path, clock: &Arc<VirtualClock>, log: &Log) -> Result<Runtime, Box<dyn Error>> {
    let log = log.clone();
    Ok(Runtime::builder()
        .clock(clock.clone()) // SystemClock by default
        .store(Arc::new(SqliteStore::open(db)?)) // MemoryStore by default
        .seed(7) // reproducible jitter
        // A step whose target is open waits for the probe (the default, "fail",
        // ends it at once with runtime.circuit.open).
        .config_json(json!({"on_open": "wait"}))
        .on_event(move |event| log.say(timeline_line(event)))
        .build()?)
}

/// Charge the card (a side effect, refunded on compensation).
fn charge<'a>(log: &Log, compensated: &Arc<Mutex<Vec<String>>>, trip: &str) -> Step<'a> {
    let (log, undo_log, done) = (log.clone(), log.clone(), compensated.clone());
    Step::new("charge", "payments.charge", move |call: &Call| {
        log.say(format!(
            "  {}: charged 1299.00 EUR (key {}..)",
            call.target,
            &call.key[..12]
        ));
        Outcome::Ok(json!({"charge": "ch_1"}))
    })
    .call("tool")
    .target("payments")
    .args(json!({"trip": trip, "amount": 129_900, "currency": "eur"}))
    .side_effect(true)
    .compensate(move |call: &Call| {
        undo_log.say(format!(
            "  {}: refunded 1299.00 EUR (key {}..)",
            call.target,
            &call.key[..12]
        ));
        done.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push("charge".into());
        Outcome::Ok(Value::Null)
    })
}

/// Reserve a seat: airline A is out of credit with us (a 402, a policy
/// failure: fall back), airline B has one.
fn seat<'a>(log: &Log, compensated: &Arc<Mutex<Vec<String>>>) -> Step<'a> {
    let (log, undo_log, done) = (log.clone(), log.clone(), compensated.clone());
    Step::new("seat", "airline.reserve", move |call: &Call| {
        match call.target.as_str() {
            "airline-a" => {
                log.say(format!("  {}: 402 payment required", call.target));
                Outcome::Response(r#"{"source":"http","status":402}"#.into())
            }
            _ => {
                log.say(format!("  {}: seat 14C held", call.target));
                Outcome::Ok(json!({"seat": "14C", "provider": call.target}))
            }
        }
    })
    .call("tool")
    .target("airline-a")
    .fallbacks(&["airline-b"])
    .args(json!({"flight": "LH1234", "date": "2026-02-14"}))
    .side_effect(true)
    .compensate(move |call: &Call| {
        undo_log.say(format!("  {}: seat 14C released", call.target));
        done.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push("seat".into());
        Outcome::Ok(Value::Null)
    })
}

/// Book the hotel; its API answers 503 until it is `up`.
fn hotel<'a>(log: &Log, calls: &Arc<Mutex<u32>>, up: bool) -> Step<'a> {
    let (log, calls) = (log.clone(), calls.clone());
    Step::new("hotel", "hotel.book", move |call: &Call| {
        *calls.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        if up {
            log.say(format!("  {}: room booked", call.target));
            Outcome::Ok(json!({"room": "412"}))
        } else {
            log.say(format!("  {}: 503 service unavailable", call.target));
            Outcome::Response(r#"{"source":"http","status":503}"#.into())
        }
    })
    .call("tool")
    .target("hotels")
    .args(json!({"city": "Lisbon", "nights": 3}))
}

fn summary<'s>(log: &Log, run: &str, reports: impl Iterator<Item = &'s StepReport>) {
    let outcomes: Vec<&str> = reports.map(|r| r.outcome.as_str()).collect();
    log.say(format!(
        "-- {run}: charge, seat, hotel ended {}",
        outcomes.join(", ")
    ));
}

fn parsed(events: &[String]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| serde_json::from_str(e).ok())
        .collect()
}

/// One event as a line: `t_ms event step target n details`.
fn timeline_line(event: &str) -> String {
    let Ok(e) = serde_json::from_str::<Value>(event) else {
        return event.to_owned();
    };
    let text = |name: &str| e[name].as_str().unwrap_or("").to_owned();
    let mut detail = Vec::new();
    for name in ["call", "action", "code", "delay_ms", "state"] {
        match &e[name] {
            Value::Null => {}
            Value::String(s) => detail.push(format!("{name}={s}")),
            other => detail.push(format!("{name}={other}")),
        }
    }
    format!(
        "{:>8} ms  {:<13} {:<7} {:<10} {:>2}  {}",
        e["t_ms"].as_u64().unwrap_or(0),
        text("event"),
        text("step"),
        text("target"),
        e["attempt"]
            .as_u64()
            .map(|n| n.to_string())
            .unwrap_or_default(),
        detail.join(" ")
    )
}
