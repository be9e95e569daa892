//! The components `tests/artifacts` built (a dev-dependency), and an
//! observation the reference and the payments policy decide differently.

use std::path::PathBuf;

use agent_recovery_test_artifacts as artifacts;

/// The payments policy makes a 409 permanent; the reference retries it.
pub const OBS_409: &str = r#"{"source":"http","status":409}"#;
pub const CTX_409: &str = r#"{"call":"tool","attempt":1,"seed":3}"#;

/// The payments policy (examples/payments-policy).
pub fn payments_wasm() -> PathBuf {
    PathBuf::from(artifacts::PAYMENTS)
}

/// A hostile fixture (tests/hostile/), by name (`spin`, `membomb`, ...).
pub fn hostile(name: &str) -> PathBuf {
    let path = match name {
        "spin" => artifacts::HOSTILE_SPIN,
        "membomb" => artifacts::HOSTILE_MEMBOMB,
        "panic" => artifacts::HOSTILE_PANIC,
        "sneaky" => artifacts::HOSTILE_SNEAKY,
        "garbage" => artifacts::HOSTILE_GARBAGE,
        "wrong-world" => artifacts::HOSTILE_WRONG_WORLD,
        other => panic!("no hostile fixture {other:?}"),
    };
    PathBuf::from(path)
}
