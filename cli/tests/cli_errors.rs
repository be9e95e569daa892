//! The `agent-recovery` binary on bad input and bad usage: exit status 2
//! and one clean line on stderr, never a panic.

mod common;

use serde_json::Value;

use common::cli::{OBS_429, fails, ok, path_str, run, scratch, stdout};

#[test]
fn bad_input_exits_2_with_one_line() {
    for (input, needle) in [
        (&b"{"[..], "not valid JSON"),
        (b"", "not valid JSON"),
        (br#"{"source":"http","status":"429"}"#, "status"),
        (b"[1,2,3]", ""),
        (
            b"{\"source\":\"http\",\"status\":4\xff29}",
            "input is not valid UTF-8 at byte 27;",
        ),
    ] {
        let err = fails(&run(&["classify"], input), 2);
        assert!(err.contains(needle), "{err}");
        assert!(
            err.starts_with("agent-recovery: stdin: "),
            "names the input: {err}"
        );
        fails(&run(&["decide", "--attempt", "1"], input), 2);
    }
    let bad_utf8 = scratch("bad-utf8.json", b"{\"a\":\"\xc3\x28\"}");
    let err = fails(&run(&["classify", path_str(&bad_utf8)], b""), 2);
    assert!(
        err.contains("bad-utf8.json: input is not valid UTF-8 at byte 6;"),
        "{err}"
    );
}

#[test]
fn deeply_nested_and_huge_inputs() {
    let nested = format!(
        r#"{{"source":"http","status":500,"body":{}{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let out = run(&["classify"], nested.as_bytes());
    match out.status.code() {
        Some(0) => assert!(stdout(&out).starts_with('{')),
        _ => {
            fails(&out, 2);
        }
    }
    let root = format!("{}1{}", r#"{"a":"#.repeat(100_000), "}".repeat(100_000));
    fails(&run(&["classify"], root.as_bytes()), 2);

    let ten_mb = format!(
        r#"{{"source":"http","status":503,"body":"{}"}}"#,
        "y".repeat(10 << 20)
    );
    let envelope: Value =
        serde_json::from_str(&ok(&run(&["classify"], ten_mb.as_bytes()))).unwrap();
    assert_eq!(envelope["upstream"]["status"], 503);

    let too_big = format!(
        r#"{{"source":"http","status":503,"body":"{}"}}"#,
        "y".repeat(17 << 20)
    );
    let err = fails(&run(&["classify"], too_big.as_bytes()), 2);
    assert!(
        err.contains("larger than the input limit of 16777216 bytes"),
        "{err}"
    );
    let file = scratch("too-big.json", too_big.as_bytes());
    let err = fails(&run(&["classify", path_str(&file)], b""), 2);
    assert!(err.contains("too-big.json"), "{err}");
}

#[test]
fn usage_errors_exit_2() {
    for (args, needle) in [
        (&["frobnicate"][..], "unrecognized subcommand 'frobnicate'"),
        (
            &["classify", "--attempt", "1"],
            "unexpected argument '--attempt' found",
        ),
        (
            &["classify", "a.json", "b.json"],
            "unexpected argument 'b.json'",
        ),
        (
            &["decide", "--attempt"],
            "a value is required for '--attempt <N>'",
        ),
        (
            &["decide", "--attempt", "one"],
            "invalid value 'one' for '--attempt <N>'",
        ),
        (
            &["decide", "--seed", "-1"],
            "invalid value '-1' for '--seed <S>'",
        ),
        (
            &["decide", "--call", "robot"],
            "possible values: tool, llm, agent",
        ),
        (
            &["backoff", "--attempt", "1"],
            "required arguments were not provided: --call",
        ),
        (
            &[
                "backoff",
                "--call",
                "tool",
                "--attempt",
                "1",
                "--attempt",
                "2",
            ],
            "cannot be used multiple times",
        ),
        (&["-x"], "unexpected argument '-x' found"),
        (&["classify", "/no/such/file.json"], "/no/such/file.json"),
    ] {
        let err = fails(&run(args, OBS_429.as_bytes()), 2);
        assert!(err.contains(needle), "{args:?}: {err}");
        if !needle.starts_with('/') {
            assert!(
                err.trim_end().ends_with("for usage"),
                "ends with a hint: {err}"
            );
        }
    }
}
