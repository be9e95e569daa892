//! `agent-recovery serve`: JSON Lines in, one decision (or error) line out per
//! line, a bad line never stops the stream, and `--watch` reloads the policy.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use agent_recovery::Policy;
use serde_json::Value;

use common::cli::{fails, path_str, run, scratch, stdout};
use common::fixtures::{CTX_409, OBS_409, hostile, payments_wasm};
use common::policy;

fn parse(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

#[test]
fn serve_answers_every_line_in_order_and_survives_bad_ones() {
    let wrapped = format!(r#"{{"observation":{OBS_409},"context":{CTX_409},"id":"a-1"}}"#);
    let mut input = Vec::new();
    for line in [
        wrapped.as_bytes(),
        b"not json",
        b"",
        br#"{"observation":{"source":"http","status":409},"context":{"atempt":1},"id":2}"#,
        b"\xff\xfe{}",
        b"[1,2]",
        br#"{"source":"http","status":503,"context":{"call":"llm","attempt":9}}"#,
    ] {
        input.extend_from_slice(line);
        input.push(b'\n');
    }
    input.extend_from_slice(br#"{"source":"network","code":"ECONNRESET"}"#); // no newline
    let out = run(&["serve"], &input);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("agent-recovery: serving agent-recovery-reference 0.1.0 sha256:"));

    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "one line per non-blank input line: {text}");

    let expected = policy().decide_json(OBS_409, CTX_409).unwrap();
    let prefix = format!(
        r#"{{"id":"a-1","policy":{{"name":"agent-recovery-reference","version":"0.1.0","sha256":"{}"}},"decision":"#,
        policy().sha256()
    );
    assert_eq!(
        lines[0],
        format!("{prefix}{expected}}}"),
        "the component's bytes"
    );

    let kinds: Vec<Value> = lines[1..5]
        .iter()
        .map(|l| parse(l)["error"]["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        [
            "policy/invalid-json",
            "policy/invalid-context",
            "invalid-utf8",
            "policy/invalid-observation"
        ]
    );
    assert_eq!(
        parse(lines[2])["id"],
        2,
        "the id comes back with an error too"
    );
    assert!(
        parse(lines[2])["error"]["message"]
            .as_str()
            .unwrap()
            .contains("atempt")
    );
    assert_eq!(
        parse(lines[5])["decision"]["attempt"],
        9,
        "an embedded context is used"
    );
    assert_eq!(
        parse(lines[6])["decision"]["envelope"]["code"],
        "tool.network.connection_reset"
    );
}

#[test]
fn serve_refuses_a_bad_policy_or_bad_flags_at_start() {
    let spin = hostile("spin");
    let err = fails(&run(&["serve", "--policy", path_str(&spin)], b""), 1);
    assert!(
        err.contains("refused at verify") && err.contains("ran out of fuel"),
        "{err}"
    );
    let err = fails(
        &run(&["serve", "--policy", path_str(&hostile("sneaky"))], b""),
        1,
    );
    assert!(
        err.contains("refused at load") && err.contains("wasi:filesystem"),
        "{err}"
    );

    let payments = payments_wasm();
    let wrong = policy().sha256();
    let err = fails(
        &run(
            &["serve", "--policy", path_str(&payments), "--sha256", &wrong],
            b"",
        ),
        2,
    );
    assert!(
        err.contains("refused at digest") && err.contains(&wrong),
        "{err}"
    );

    for (args, needle) in [
        (vec!["serve", "--watch"], "--watch needs --policy"),
        (vec!["serve", "--sha256", &wrong], "--sha256 needs --policy"),
        (
            vec!["serve", "--policy", "p.wasm", "--sha256", "abc"],
            "64 hex digits",
        ),
        (
            vec!["serve", "--on-failure", "open"],
            "possible values: closed, reference",
        ),
        (vec!["serve", "--poll-ms", "0"], "--poll-ms"),
        (vec!["serve", "--config", "c.json"], "context.config"),
        (vec!["serve", "extra"], "unexpected argument"),
    ] {
        let err = fails(&run(&args, b""), 2);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn serve_with_a_pinned_policy_and_fallback_answers_with_it() {
    let payments = payments_wasm();
    let sha = Policy::from_file(&payments).unwrap().sha256();
    let args = [
        "serve",
        "--policy",
        path_str(&payments),
        "--sha256",
        &sha,
        "--on-failure",
        "reference",
    ];
    let out = run(&args, format!("{OBS_409}\n").as_bytes());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = parse(stdout(&out).trim_end());
    assert_eq!(line["policy"]["name"], "payments-strict");
    assert_eq!(line["policy"]["sha256"], sha.as_str());
    assert_eq!(line["decision"]["action"], "fail");
    assert!(line.get("fallback").is_none());
}

/// A running `serve` with its output lines on channels.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
}

const DEADLINE: Duration = Duration::from_secs(60);

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agent-recovery"))
            .args(args)
            .env(
                "AGENT_RECOVERY_CACHE_DIR",
                concat!(env!("CARGO_TARGET_TMPDIR"), "/cli-cache"),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agent-recovery serve");
        let lines = |pipe: Box<dyn std::io::Read + Send>| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            rx
        };
        let stdout = lines(Box::new(child.stdout.take().expect("stdout")));
        let stderr = lines(Box::new(child.stderr.take().expect("stderr")));
        let stdin = child.stdin.take();
        Server {
            child,
            stdin,
            stdout,
            stderr,
        }
    }

    fn ask(&mut self, line: &str) -> Value {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .expect("write a line");
        parse(
            &self
                .stdout
                .recv_timeout(DEADLINE)
                .expect("an answer before the deadline"),
        )
    }

    /// Waits for a stderr line containing `needle`; returns it.
    fn log(&self, needle: &str) -> String {
        loop {
            let line = self
                .stderr
                .recv_timeout(DEADLINE)
                .unwrap_or_else(|e| panic!("no log line with {needle:?} before the deadline: {e}"));
            if line.contains(needle) {
                return line;
            }
        }
    }

    fn finish(mut self) -> Option<i32> {
        drop(self.stdin.take());
        self.child.wait().expect("serve exits").code()
    }
}

fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

#[test]
fn serve_with_watch_reloads_the_policy_file_when_it_changes() {
    let path = scratch("serve-watch.wasm", Policy::reference_bytes());
    let line = format!(r#"{{"observation":{OBS_409},"context":{CTX_409}}}"#);
    let mut server = Server::start(&[
        "serve",
        "--policy",
        path_str(&path),
        "--watch",
        "--poll-ms",
        "20",
    ]);
    server.log("serving agent-recovery-reference");
    let before = server.ask(&line);
    assert_eq!(before["policy"]["name"], "agent-recovery-reference");
    assert_eq!(before["decision"]["action"], "restore");

    replace(&path, &std::fs::read(payments_wasm()).unwrap());
    let swapped = server.log("swapped policy");
    assert!(
        swapped.contains(&policy().sha256()) && swapped.contains("payments-strict"),
        "{swapped}"
    );
    let after = server.ask(&line);
    assert_eq!(after["policy"]["name"], "payments-strict");
    assert_eq!(after["decision"]["action"], "fail");

    replace(&path, b"not a component");
    let refused = server.log("refused policy");
    assert!(
        refused.contains("still active: payments-strict"),
        "{refused}"
    );
    assert_eq!(server.ask(&line)["policy"]["name"], "payments-strict");
    assert_eq!(server.finish(), Some(0));
}
