//! Running the `agent-recovery` binary in tests.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

pub const OBS_429: &str = r#"{"source":"http","status":429,"headers":{"retry-after":"2"}}"#;

/// Runs the binary with `args`, feeding `stdin`.
pub fn run(args: &[&str], stdin: &[u8]) -> Output {
    let cache = concat!(env!("CARGO_TARGET_TMPDIR"), "/cli-cache");
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-recovery"))
        .args(args)
        .env("AGENT_RECOVERY_CACHE_DIR", cache)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agent-recovery");
    let mut pipe = child.stdin.take().expect("stdin");
    let input = stdin.to_vec();
    // Write from another thread so a child that exits early cannot block us.
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("writer");
    out
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 stdout")
}

/// Asserts success and returns stdout without its one trailing newline.
pub fn ok(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.is_empty(), "stderr: {stderr}");
    let text = stdout(out);
    assert!(
        text.ends_with('\n') && !text.ends_with("\n\n"),
        "one trailing newline"
    );
    text.trim_end_matches('\n').to_string()
}

/// Asserts exit `code` with one clean line on stderr, and returns it.
pub fn fails(out: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert!(out.stdout.is_empty(), "nothing on stdout: {}", stdout(out));
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.starts_with("agent-recovery: "), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
    stderr
}

/// A file in this test binary's scratch directory.
pub fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{name}"));
    std::fs::write(&path, bytes).expect("write scratch file");
    path
}

pub fn path_str(path: &std::path::Path) -> &str {
    path.to_str().expect("UTF-8 path")
}
