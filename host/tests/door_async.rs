//! The async door on the runtime's async driver, and the door's default
//! observation of I/O errors, through the real component and runtime, a
//! real SQLite store and real sockets on 127.0.0.1.
//!
//! The expectations come from the docs: a 503 is transient and retried
//! (`docs/observation.md`, `tests/vectors/http.json`); every attempt of a
//! call gets the call's idempotency key and each retry sleeps the
//! decision's `delay_ms`, announced by a `sleep` event (`docs/runtime.md`);
//! a network error code is read as libc names it (`ECONNREFUSED` is
//! `tool.network.connection_refused`, `ECONNRESET` / `EPIPE` / `EOF`
//! `tool.network.connection_reset`, an exception nobody knows
//! `tool.exception.unhandled`: `docs/errors.md`); a transient failure that
//! keeps failing ends the call with that failure's code.

use std::collections::BTreeMap;
use std::error::Error;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use agent_recovery::door::{BlockingRecoverable, Door, Recoverable};
use agent_recovery::runtime::{Call, VirtualClock};
use agent_recovery::store::{Cas, SqliteStore, Store, StoreError, Versioned};
use serde_json::Value;

const T0: u64 = 1_767_225_600_000;

fn http(status: &i32) -> String {
    format!(r#"{{"source":"http","status":{status}}}"#)
}

/// A port on 127.0.0.1 nothing listens on: connecting is refused.
fn refused_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    listener.local_addr().expect("local addr")
}

/// The `code` of every `decision` event (the envelope's code).
fn decision_codes(events: &Mutex<Vec<Value>>) -> Vec<String> {
    events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "decision")
        .map(|e| e["code"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn recording(events: &Arc<Mutex<Vec<Value>>>) -> impl Fn(&str) + Send + Sync + 'static {
    let events = Arc::clone(events);
    move |e: &str| {
        events
            .lock()
            .unwrap()
            .push(serde_json::from_str(e).unwrap())
    }
}

/// A real SQLite store that notes the thread of each call.
struct Noting {
    inner: SqliteStore,
    threads: Mutex<Vec<ThreadId>>,
}

impl Noting {
    fn note(&self) {
        self.threads
            .lock()
            .unwrap()
            .push(std::thread::current().id());
    }
}

impl Store for Noting {
    fn get(&self, key: &str, now_ms: u64) -> Result<Option<Versioned>, StoreError> {
        self.note();
        self.inner.get(key, now_ms)
    }
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<u64>,
        value: &str,
        ttl_ms: Option<u64>,
        now_ms: u64,
    ) -> Result<Cas, StoreError> {
        self.note();
        self.inner
            .compare_and_set(key, expected, value, ttl_ms, now_ms)
    }
    fn append(&self, stream: &str, record: &str, now_ms: u64) -> Result<u64, StoreError> {
        self.note();
        self.inner.append(stream, record, now_ms)
    }
    fn read(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        self.note();
        self.inner.read(stream, after, limit)
    }
    fn delete(&self, key: &str) -> Result<bool, StoreError> {
        self.note();
        self.inner.delete(key)
    }
    fn keys(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.note();
        self.inner.keys(prefix, now_ms)
    }
}

/// With the system clock, the retry sleeps are tokio's timer (here paused:
/// it jumps to the next timer when every task waits), and the calls of a
/// SQLite store run off the caller's thread, on tokio's blocking pool.
#[test]
fn sleeps_are_tokio_timers_and_sqlite_is_called_off_the_event_loop() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Noting {
        inner: SqliteStore::open(dir.path().join("door.sqlite")).unwrap(),
        threads: Mutex::new(Vec::new()),
    });
    let events = Arc::new(Mutex::new(Vec::new()));
    let door = Door::builder()
        .tool("search.get")
        .call("tool")
        .store(store.clone())
        // 20 concurrent failures of one target must not open its breaker.
        .breaker(100, 250)
        .on_event(recording(&events))
        .build()
        .unwrap();
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let keys = Arc::new(Mutex::new(BTreeMap::<usize, Vec<String>>::new()));
    let (answers, slept) = tokio.block_on(async {
        let start = tokio::time::Instant::now();
        let calls = (0..20).map(|i| {
            let keys = Arc::clone(&keys);
            (move |call: Call| {
                keys.lock().unwrap().entry(i).or_default().push(call.key);
                async move { if call.attempt == 1 { Err(503) } else { Ok(i) } }
            })
            .recover(&door)
            .observe(http)
        });
        let mut answers = Vec::new();
        let handles: Vec<_> = calls.map(|c| async move { c.await }).collect();
        let all = join_all(handles).await;
        answers.extend(all);
        (answers, start.elapsed())
    });
    for (i, answer) in answers.into_iter().enumerate() {
        assert_eq!(answer.unwrap(), i);
    }
    for (i, keys) in keys.lock().unwrap().iter() {
        assert_eq!(keys.len(), 2, "call {i}: {keys:?}");
        assert_eq!(keys[0], keys[1], "call {i}: one key on both attempts");
    }
    let delays: Vec<u64> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "sleep")
        .map(|e| e["delay_ms"].as_u64().unwrap())
        .collect();
    // A retry whose full-jitter delay is 0 calls at once, without a sleep.
    assert!(
        (1..=20).contains(&delays.len()),
        "at most one retry sleep per call: {delays:?}"
    );
    let longest = *delays.iter().max().unwrap();
    assert!(
        slept.as_millis() >= u128::from(longest),
        "tokio's clock moved {slept:?}: the sleeps (longest {longest} ms) were not on its timer"
    );
    let here = std::thread::current().id();
    let threads = store.threads.lock().unwrap();
    assert!(!threads.is_empty(), "the store was used");
    assert!(
        threads.iter().all(|t| *t != here),
        "a store call ran on the caller's thread"
    );
}

/// Polls every future to its end, on the caller's task.
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, out) in futures.iter_mut().zip(outs.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *out = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outs.into_iter().map(Option::unwrap).collect()
}

/// A refused connection, with no `observe`: the component reads it as
/// `network.connection_refused`, retries it, and the next attempt (to a
/// listening server) succeeds with the same key.
#[test]
fn a_refused_connection_is_observed_as_the_network_failure_it_is() {
    let clock = Arc::new(VirtualClock::new(T0));
    let events = Arc::new(Mutex::new(Vec::new()));
    let door = Door::builder()
        .tool("search.get")
        .call("tool")
        .clock(clock)
        .seed(7)
        .on_event(recording(&events))
        .build()
        .unwrap();
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dead = refused_port();
    let answer = tokio.block_on(async {
        let live = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let live_addr = live.local_addr().unwrap();
        tokio::spawn(async move { while live.accept().await.is_ok() {} });
        (move |call: Call| async move {
            let addr = if call.attempt == 1 { dead } else { live_addr };
            tokio::net::TcpStream::connect(addr)
                .await
                .map(|_| call.attempt)
        })
        .recover(&door)
        .await
    });
    assert_eq!(answer.unwrap(), 2);
    assert_eq!(decision_codes(&events), ["tool.network.connection_refused"]);
}

/// A server that resets every connection, called by the blocking twin:
/// `network.connection_reset`, retried until the attempt budget is spent;
/// the call ends with that code and the last `io::Error` as its cause.
#[test]
fn a_reset_connection_is_observed_as_a_reset() {
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Accepts, then closes with SO_LINGER 0: the peer gets a RST.
    let resets = std::thread::spawn(move || {
        for stream in server.incoming() {
            let Ok(stream) = stream else { return };
            let _guard = tokio.enter();
            stream.set_nonblocking(true).unwrap();
            let stream = tokio::net::TcpStream::from_std(stream).unwrap();
            stream.set_zero_linger().unwrap();
            drop(stream);
        }
    });
    let events = Arc::new(Mutex::new(Vec::new()));
    let door = Door::builder()
        .tool("erp.sync")
        .call("tool")
        .clock(Arc::new(VirtualClock::new(T0)))
        .seed(7)
        // Every attempt calls the server (3 failures would open the breaker).
        .breaker(100, 250)
        .on_event(recording(&events))
        .build()
        .unwrap();
    let sync = |_: Call| -> std::io::Result<()> {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(addr)?;
        let mut byte = [0u8; 1];
        // The RST ends the read (or the write, if it came first).
        stream.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")?;
        stream.read_exact(&mut byte)?;
        Ok(())
    };
    let err = sync.recover(&door).call().unwrap_err();
    let codes = decision_codes(&events);
    assert!(codes.len() > 1, "retried: {codes:?}");
    assert!(
        codes.iter().all(|c| c == "tool.network.connection_reset"),
        "{codes:?}"
    );
    assert_eq!(err.code(), "tool.network.connection_reset", "{err}");
    drop(resets);
}

/// An error that wraps an `io::Error` (its `source`), boxed as `?` boxes
/// it: the chain is read to the refused connection.
#[test]
fn a_boxed_error_is_read_along_its_source_chain() {
    #[derive(Debug)]
    struct ClientError(std::io::Error);
    impl fmt::Display for ClientError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "the client failed")
        }
    }
    impl Error for ClientError {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }
    let dead = refused_port();
    let events = Arc::new(Mutex::new(Vec::new()));
    let door = Door::builder()
        .tool("search.get")
        .call("tool")
        .clock(Arc::new(VirtualClock::new(T0)))
        .seed(7)
        .breaker(100, 250)
        .on_event(recording(&events))
        .build()
        .unwrap();
    let connect = |_: Call| -> Result<(), Box<dyn Error + Send + Sync>> {
        std::net::TcpStream::connect(dead).map_err(ClientError)?;
        Ok(())
    };
    let err = connect.recover(&door).call().unwrap_err();
    assert_eq!(err.code(), "tool.network.connection_refused", "{err}");
    let codes = decision_codes(&events);
    assert!(!codes.is_empty());
    assert!(
        codes.iter().all(|c| c == "tool.network.connection_refused"),
        "{codes:?}"
    );
}

/// An error that is not an I/O error keeps the exception observation, and
/// an integer status still goes through `.observe`.
#[test]
fn other_errors_are_exceptions_and_statuses_go_through_observe() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let door = Door::builder()
        .tool("search.get")
        .call("tool")
        .clock(Arc::new(VirtualClock::new(T0)))
        .seed(7)
        .on_event(recording(&events))
        .build()
        .unwrap();
    let not_found = |_: Call| -> Result<(), std::io::Error> {
        std::fs::File::open("/nonexistent/agent-recovery").map(|_| ())
    };
    let err = not_found.recover(&door).call().unwrap_err();
    assert_eq!(err.code(), "tool.exception.unhandled", "{err}");
    let bad_request = |_: Call| Err::<(), i32>(400);
    let err = bad_request.recover(&door).observe(http).call().unwrap_err();
    assert_eq!(err.code(), "tool.http.400_bad_request");
}

/// A memory store where another worker claims each idempotency key right
/// before this one does: the race between a step's read and its claim.
struct Racing(agent_recovery::store::MemoryStore);

impl Store for Racing {
    fn get(&self, key: &str, now_ms: u64) -> Result<Option<Versioned>, StoreError> {
        self.0.get(key, now_ms)
    }
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<u64>,
        value: &str,
        ttl_ms: Option<u64>,
        now_ms: u64,
    ) -> Result<Cas, StoreError> {
        if key.starts_with("agent-recovery/idem/") && self.0.get(key, now_ms)?.is_none() {
            let mark = r#"{"since_ms":1,"status":"in_flight"}"#;
            self.0.compare_and_set(key, None, mark, None, now_ms)?;
        }
        self.0.compare_and_set(key, expected, value, ttl_ms, now_ms)
    }
    fn append(&self, stream: &str, record: &str, now_ms: u64) -> Result<u64, StoreError> {
        self.0.append(stream, record, now_ms)
    }
    fn read(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        self.0.read(stream, after, limit)
    }
    fn delete(&self, key: &str) -> Result<bool, StoreError> {
        self.0.delete(key)
    }
    fn keys(&self, prefix: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.0.keys(prefix, now_ms)
    }
    fn may_block(&self) -> bool {
        false
    }
}

/// docs/runtime.md, "A claim in the call's batch": the claim and the call
/// come in one batch, and a claim another worker won stops it there, on
/// both drivers: the operation is not called, nothing counts an attempt,
/// and the call ends `in_flight` (docs/runtime.md, "Step outcomes").
#[test]
fn a_claim_lost_in_the_call_batch_makes_no_call_blocking_or_awaited() {
    let store = Arc::new(Racing(agent_recovery::store::MemoryStore::new()));
    let door = Door::builder()
        .tool("search.get")
        .call("tool")
        .store(store.clone())
        .clock(Arc::new(VirtualClock::new(T0)))
        .seed(7)
        .build()
        .unwrap();
    let calls = Mutex::new(0);
    let op = |_: Call| {
        *calls.lock().unwrap() += 1;
        Ok::<u32, i32>(1)
    };
    let blocking = op.recover(&door).observe(http).call().unwrap_err();
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let awaited = tokio
        .block_on(async {
            (|_: Call| {
                *calls.lock().unwrap() += 1;
                async { Ok::<u32, i32>(1) }
            })
            .recover(&door)
            .observe(http)
            .await
        })
        .unwrap_err();
    for err in [blocking, awaited] {
        let agent_recovery::door::DoorError::Stopped { outcome, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!(outcome, "in_flight", "{err}");
    }
    assert_eq!(*calls.lock().unwrap(), 0);
    assert_eq!(
        store.keys("agent-recovery/attempts/", T0).unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        store.keys("agent-recovery/journal/", T0).unwrap(),
        Vec::<String>::new()
    );
}
