//! Watching a policy file: a change is validated and swapped in, a bad file
//! is refused (and retried when it changes again), a file being written is
//! never activated half-way. Waits are for events, with a deadline.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use agent_recovery::{Event, Policy, PolicyHandle, SwapOptions, SwapStage, WatchOptions};

use common::handle::payments_wasm;

const INTERVAL: Duration = Duration::from_millis(20);
const DEADLINE: Duration = Duration::from_secs(60);

fn scratch_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("watch-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Writes `bytes` to a temporary file and renames it over `path`.
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

/// A handle started from `path`, its events on a channel.
fn watched(path: &Path) -> (PolicyHandle, Receiver<Event>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let handle = PolicyHandle::builder()
        .on_event(move |e| {
            let _ = tx.lock().map(|tx| tx.send(e.clone()));
        })
        .file(path, &SwapOptions::default())
        .expect("the first file is valid");
    (handle, rx)
}

/// The next event, or a panic after the deadline.
#[track_caller]
fn next(rx: &Receiver<Event>) -> Event {
    let at = std::panic::Location::caller();
    rx.recv_timeout(DEADLINE)
        .unwrap_or_else(|e| panic!("no event before the deadline at {at}: {e}"))
}

#[test]
fn a_changed_file_is_swapped_in_and_a_bad_one_refused_then_retried() {
    let dir = scratch_dir("change");
    let path = dir.join("policy.wasm");
    let reference = Policy::reference_bytes();
    let payments = std::fs::read(payments_wasm()).unwrap();
    std::fs::write(&path, reference).unwrap();
    let (handle, rx) = watched(&path);
    let options = WatchOptions::default().interval(INTERVAL).unwrap();
    let watcher = handle.watch(&path, options).unwrap();

    replace(&path, &payments);
    match next(&rx) {
        Event::Swapped { from, to } => {
            assert_eq!(from.name, "agent-recovery-reference");
            assert_eq!(to.name, "payments-strict");
        }
        other => panic!("expected a swap, got {other}"),
    }
    assert_eq!(handle.active().id().name, "payments-strict");

    // Not a component: refused, the payments policy stays.
    replace(&path, b"not a component");
    match next(&rx) {
        Event::Refused { active, error } => {
            assert_eq!(active.name, "payments-strict");
            assert_eq!(error.stage(), SwapStage::Load);
        }
        other => panic!("expected a refusal, got {other}"),
    }
    // Changed again, still bad: refused again (retried on every change).
    replace(&path, b"still not a component");
    assert!(matches!(next(&rx), Event::Refused { .. }));

    // The same bytes as the active policy: nothing to do. Then the reference:
    // the next event is that swap, so the identical file caused none.
    replace(&path, &payments);
    replace(&path, reference);
    match next(&rx) {
        Event::Swapped { from, to } => {
            assert_eq!(from.name, "payments-strict");
            assert_eq!(to.name, "agent-recovery-reference");
        }
        other => panic!("expected a swap back, got {other}"),
    }
    watcher.stop();
    let stats = handle.stats();
    assert_eq!((stats.swaps, stats.refusals), (2, 2), "{stats:?}");
}

#[test]
fn a_file_written_slowly_in_place_is_never_activated_half_way() {
    let dir = scratch_dir("slow");
    let path = dir.join("policy.wasm");
    std::fs::write(&path, Policy::reference_bytes()).unwrap();
    let (handle, rx) = watched(&path);
    let payments = std::fs::read(payments_wasm()).unwrap();
    let payments_sha = Policy::from_bytes(&payments).unwrap().sha256();
    let options = WatchOptions::default().interval(INTERVAL).unwrap();
    let _watcher = handle.watch(&path, options).unwrap();

    // A writer that writes in place, in 16 chunks: the pauses simulate a slow
    // writer; whatever the timing, no partial file may become active.
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&path).unwrap();
        for chunk in payments.chunks(payments.len().div_ceil(16)) {
            file.write_all(chunk).unwrap();
            file.flush().unwrap();
            std::thread::sleep(INTERVAL / 4);
        }
    }
    let deadline = Instant::now() + DEADLINE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx
            .recv_timeout(left)
            .expect("the complete file is swapped in")
        {
            Event::Swapped { to, .. } => {
                assert_eq!(
                    to.sha256, payments_sha,
                    "only the complete file is activated"
                );
                break;
            }
            // A pause longer than the interval (a loaded machine) may let the
            // watcher read a partial file: it must be refused, never activated.
            Event::Refused { active, .. } => assert_eq!(active.name, "agent-recovery-reference"),
            other => panic!("unexpected event {other}"),
        }
    }
    assert_eq!(handle.active().id().sha256, payments_sha);
}
