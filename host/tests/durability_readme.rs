//! The durability example of docs/durability.md compiles and runs as written:
//! the body of `quickstart` below (between `// README:` markers) is the page's
//! code, which a test checks.

type Fallible = Result<(), Box<dyn std::error::Error>>;

fn quickstart() -> Fallible {
    // README: Example
    use agent_recovery::runtime::{
        Call, ListOptions, Operations, Outcome, RecoverOptions, Runtime, Step,
    };
    use agent_recovery::store::SqliteStore;
    use serde_json::{Value, json};
    use std::sync::Arc;

    let path =
        std::env::temp_dir().join(format!("agent-recovery-readme-{}.db", std::process::id()));
    let runtime = Runtime::builder()
        .store(Arc::new(SqliteStore::open(&path)?)) // survives the process
        .dead_letter(
            Some("travel-oncall"),
            Some("https://runbooks.example/dlq#trips"),
            Some(10),
        )
        .attempt_budget(2)
        .seed(7)
        .build()?;

    // The tools by name: what recover and replay call (a step's operation, undo, checkpoint).
    let book_ok = |_: &Call| Outcome::Ok(json!({"pnr": "X7"}));
    let operations = Operations::new()
        .with(
            Step::new("_", "cards.charge", |_: &Call| {
                Outcome::Ok(json!({"id": "ch_1"}))
            })
            .compensate(|_: &Call| Outcome::Ok(Value::Null)),
        )
        .with(Step::new("_", "flights.book", book_ok));

    // At start-up: finish the runs a dead worker left in the journal (0: no other worker is alive).
    for report in runtime.recover(&operations, RecoverOptions::older_than_ms(0))? {
        println!(
            "{} ended {} (dead letter {:?})",
            report.run_id, report.outcome, report.dead_letter_id
        );
    }

    // A run: the charge succeeds, the booking keeps failing: the charge is refunded, the
    // booking dead-lettered. A run that ends ok is ended (dropping it ends it too).
    let mut run = runtime.run("trip-7")?;
    let charge = Step::new("charge", "cards.charge", |_: &Call| {
        Outcome::Ok(json!({"id": "ch_1"}))
    })
    .side_effect(true)
    .compensate(|_: &Call| Outcome::Ok(Value::Null));
    assert_eq!(run.step(charge)?.outcome, "ok");
    let book = Step::new("book", "flights.book", |_: &Call| {
        Outcome::Failed(r#"{"source":"http","status":503}"#.into())
    })
    .side_effect(true);
    assert_eq!(run.step(book)?.outcome, "dead_lettered");

    // The dead-letter queue: list, then replay once the airline is back (a new run, a new key).
    let dlq = runtime.dead_letters();
    let open = dlq.list(&ListOptions::default())?;
    let item = open.last().ok_or("no record")?;
    assert_eq!(item.record["owner"], "travel-oncall");
    let replay = dlq.replay(&item.id, &operations)?;
    assert_eq!(
        (replay.run_id.as_str(), replay.outcome.as_deref()),
        ("trip-7/replay/1", Some("ok"))
    );
    assert_eq!(dlq.show(&item.id)?.status, "replayed");
    // README: end
    std::fs::remove_file(&path)?;
    Ok(())
}

#[test]
fn the_durability_quickstart_runs() {
    quickstart().unwrap();
}

/// The code between `// README: <title>` and `// README: end` in this file,
/// without the function's indentation.
fn marked(title: &str) -> String {
    let source = include_str!("durability_readme.rs");
    let start = format!("    // README: {title}\n");
    let from = source.find(&start).unwrap() + start.len();
    let len = source[from..].find("    // README: end\n").unwrap();
    source[from..from + len]
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first ```rust block after the heading `## <title>` in docs/durability.md.
fn page_block(title: &str) -> String {
    let page = include_str!("../../docs/durability.md");
    let heading = format!("\n## {title}\n");
    let at = page
        .find(&heading)
        .unwrap_or_else(|| panic!("docs/durability.md has no heading {heading:?}"));
    let rest = &page[at..];
    let from = rest.find("```rust\n").unwrap() + "```rust\n".len();
    let len = rest[from..].find("```\n").unwrap();
    rest[from..from + len].trim_end().to_owned()
}

#[test]
fn the_page_shows_exactly_the_code_that_runs() {
    let (shown, tested) = (page_block("Example"), marked("Example"));
    assert!(
        shown == tested.trim_end(),
        "docs/durability.md, section \"Example\", differs from host/tests/durability_readme.rs; \
         copy one to the other\n--- docs/durability.md\n{shown}\n--- test\n{tested}"
    );
}
