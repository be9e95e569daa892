//! `agent-recovery dlq ...` and `agent-recovery recover`: the real binary on
//! store files written by `simulate --store` (the real runtime and loop).
//! JSON lines, the human table, and clean errors (exit 2, one line).

mod common;

use serde_json::Value;

use common::cli::{fails, ok, path_str, run, scratch};

/// Every call fails (503), one attempt allowed: the run is dead-lettered.
fn dead_lettering(run_id: &str) -> String {
    format!(
        r#"{{"run_id": "{run_id}", "seed": 7, "now_ms": 1767225600000,
            "config": {{"attempt_budget": 1, "dead_letter": {{"owner": "ops", "runbook": "https://runbooks.example/dlq"}}}},
            "steps": [{{"id": "sync", "tool": "erp.sync", "args": {{"batch": 3}},
                        "outcomes": [{{"source": "http", "status": 503}}]}}]}}"#
    )
}

/// A fresh store file with `n` dead-letter records (runs d1..dn).
fn store_with(name: &str, n: usize) -> std::path::PathBuf {
    let store =
        std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("dlq-{name}.db"));
    let _ = std::fs::remove_file(&store);
    for i in 1..=n {
        let scenario = scratch(
            &format!("dlq-{name}-{i}.json"),
            dead_lettering(&format!("d{i}")).as_bytes(),
        );
        let out = ok(&run(
            &[
                "simulate",
                path_str(&scenario),
                "--store",
                path_str(&store),
                "--json",
            ],
            b"",
        ));
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["outcome"], "dead_lettered");
    }
    store
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn list_show_replay_purge_and_depth_as_json() {
    let store = store_with("json", 2);
    let s = path_str(&store);
    let items = json_lines(&ok(&run(&["dlq", "list", "--store", s, "--json"], b"")));
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["id"], "1");
    assert_eq!(items[0]["status"], "open");
    assert_eq!(items[0]["replays"], serde_json::json!([]));
    let rec = &items[1]["record"];
    assert_eq!(rec["run_id"], "d2");
    assert_eq!(rec["owner"], "ops");
    assert_eq!(rec["runbook"], "https://runbooks.example/dlq");
    assert_eq!(rec["input"]["args"], serde_json::json!({"batch": 3}));

    let shown: Value =
        serde_json::from_str(&ok(&run(&["dlq", "show", "2", "--store", s], b""))).unwrap();
    assert_eq!(shown, items[1]);
    assert_eq!(
        ok(&run(&["dlq", "depth", "--store", s], b"")),
        r#"{"depth":2}"#
    );

    let ticket: Value =
        serde_json::from_str(&ok(&run(&["dlq", "replay", "1", "--store", s], b""))).unwrap();
    assert_eq!(ticket["n"], 1);
    assert_eq!(ticket["run_id"], "d1/replay/1");
    assert_eq!(ticket["outcome"], Value::Null);
    assert_eq!(ticket["key"].as_str().unwrap().len(), 64);
    let again = fails(&run(&["dlq", "replay", "1", "--store", s], b""), 2);
    assert!(again.contains("a replay request is pending"), "{again}");
    let pending = json_lines(&ok(&run(&["recover", "--store", s, "--json"], b"")));
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (&pending[0]["kind"], &pending[0]["id"], &pending[0]["key"]),
        (&Value::from("replay"), &Value::from("1"), &ticket["key"])
    );

    let purged: Value =
        serde_json::from_str(&ok(&run(&["dlq", "purge", "2", "--store", s], b""))).unwrap();
    assert_eq!(purged["status"], "purged");
    assert!(purged["purged_ms"].is_u64());
    assert_eq!(
        ok(&run(&["dlq", "depth", "--store", s], b"")),
        r#"{"depth":1}"#
    );
    let listed = json_lines(&ok(&run(&["dlq", "list", "--store", s], b"")));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["status"], "replay_requested");
    let all = json_lines(&ok(&run(&["dlq", "list", "--all", "--store", s], b"")));
    assert_eq!(all.len(), 2);
}

#[test]
fn the_human_table_names_each_record() {
    let store = store_with("human", 1);
    let table = ok(&run(
        &[
            "dlq",
            "list",
            "--store",
            path_str(&store),
            "--human",
            "--color",
            "never",
        ],
        b"",
    ));
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].split_whitespace().eq([
        "id", "status", "outcome", "run", "step", "tool", "n", "code"
    ]));
    assert!(lines[1].split_whitespace().eq([
        "1",
        "open",
        "dead_lettered",
        "d1",
        "sync",
        "erp.sync",
        "1",
        "runtime.budget.attempts_exhausted"
    ]));
    assert_eq!(lines[2], "1 record(s)");
    let show = ok(&run(
        &[
            "dlq",
            "show",
            "1",
            "--store",
            path_str(&store),
            "--human",
            "--color",
            "never",
        ],
        b"",
    ));
    assert!(show.starts_with("record 1 open\n"), "{show}");
    assert!(
        show.contains("runbook          https://runbooks.example/dlq"),
        "{show}"
    );
    let coloured = ok(&run(
        &[
            "dlq",
            "list",
            "--store",
            path_str(&store),
            "--human",
            "--color",
            "always",
        ],
        b"",
    ));
    assert!(coloured.contains("\u{1b}["));
}

#[test]
fn recover_lists_a_killed_run_from_the_journal() {
    let store = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dlq-recover.db");
    let _ = std::fs::remove_file(&store);
    let s = path_str(&store);
    let scenario = scratch(
        "dlq-killed.json",
        br#"{"run_id": "k1", "seed": 7, "now_ms": 1767225600000, "kill_after_calls": 2,
             "steps": [{"id": "a", "tool": "t.a", "side_effect": true, "outcomes": ["ok"], "compensation": {"outcomes": ["ok"]}},
                       {"id": "b", "tool": "t.b", "side_effect": true, "outcomes": ["ok"]}]}"#,
    );
    let out: Value = serde_json::from_str(&ok(&run(
        &["simulate", path_str(&scenario), "--store", s, "--json"],
        b"",
    )))
    .unwrap();
    assert_eq!(out["outcome"], "killed");
    // The entry was written on the virtual clock (2026-01-01): old enough for the default age.
    let lines = json_lines(&ok(&run(&["recover", "--store", s, "--json"], b"")));
    assert_eq!(lines.len(), 1);
    assert_eq!(
        (
            &lines[0]["kind"],
            &lines[0]["run_id"],
            &lines[0]["step"],
            &lines[0]["phase"]
        ),
        (
            &Value::from("run"),
            &Value::from("k1"),
            &Value::from("b"),
            &Value::from("calling")
        )
    );
    assert_eq!(lines[0]["written_ms"], 1767225600000u64);
    // Younger than a huge age: nothing listed.
    let none = run(
        &[
            "recover",
            "--store",
            s,
            "--json",
            "--older-than-ms",
            "18446744073709551615",
        ],
        b"",
    );
    assert_eq!(none.status.code(), Some(0));
    assert!(none.stdout.is_empty() && none.stderr.is_empty());
    let table = ok(&run(
        &["recover", "--store", s, "--human", "--color", "never"],
        b"",
    ));
    assert!(
        table
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .take(4)
            .eq(["run", "k1", "b", "calling"])
    );

    // A recovery scenario (no run_id: it recovers what the journal holds)
    // finishes it: b is called again, a compensated, the run dead-lettered.
    let recovery = scratch(
        "dlq-recovery.json",
        br#"{"now_ms": 1767225700000, "recover": true,
             "steps": [{"id": "a", "tool": "t.a", "compensation": {"outcomes": ["ok"]}},
                       {"id": "b", "tool": "t.b", "outcomes": ["ok"]}]}"#,
    );
    let out: Value = serde_json::from_str(&ok(&run(
        &["simulate", path_str(&recovery), "--store", s, "--json"],
        b"",
    )))
    .unwrap();
    assert_eq!(out["outcome"], "interrupted");
    assert_eq!(out["dead_letters"][0]["recovered"], true);
    let none = run(
        &["recover", "--store", s, "--json", "--older-than-ms", "0"],
        b"",
    );
    assert!(none.stdout.is_empty() && none.status.code() == Some(0));
    let items = json_lines(&ok(&run(&["dlq", "list", "--store", s], b"")));
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["record"]["outcome"], "interrupted");
}

#[test]
fn errors_are_one_line_with_exit_2() {
    let store = store_with("errors", 1);
    let s = path_str(&store);
    let not_a_store = scratch("dlq-not-a-store.db", b"hello, not sqlite");
    let missing = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dlq-missing.db");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["dlq", "show", "7", "--store", s],
            "no dead-letter record has id 7",
        ),
        (
            vec!["dlq", "show", "x1", "--store", s],
            "is not a record id",
        ),
        (
            vec!["dlq", "purge", "0", "--store", s],
            "is not a record id",
        ),
        (
            vec!["dlq", "replay", "99", "--store", s],
            "no dead-letter record has id 99",
        ),
        (
            vec!["dlq", "list", "--store", path_str(&not_a_store)],
            "not an SQLite database",
        ),
        (
            vec!["dlq", "depth", "--store", path_str(&missing)],
            "no such file",
        ),
        (
            vec!["recover", "--store", path_str(&missing)],
            "no such file",
        ),
        (
            vec![
                "dlq",
                "list",
                "--store",
                "redis://localhost:6379?colour=red",
            ],
            "unknown option \"colour\"; the known options are prefix, timeout_ms",
        ),
        (
            vec!["dlq", "list", "--store", "rediss://u:secret@localhost:6379"],
            "rediss:// (TLS) is not supported",
        ),
        (vec!["dlq", "list"], "--store"),
        (vec!["dlq", "show", "--store", s], "ID"),
    ];
    for (args, expect) in cases {
        let line = fails(&run(&args, b""), 2);
        assert!(line.contains(expect), "{args:?}: {line}");
    }
    assert!(!missing.exists(), "a missing store is not created");
    // Purged records cannot be replayed.
    ok(&run(&["dlq", "purge", "1", "--store", s], b""));
    let line = fails(&run(&["dlq", "replay", "1", "--store", s], b""), 2);
    assert!(line.contains("is purged"), "{line}");
}
