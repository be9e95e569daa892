//! [`DecisionLog`]: where the decision log's lines go (docs/decision-logs.md).
//!
//! The component writes each line (one JSON object per decision) and hands
//! it over in a `log` effect; this module only appends the bytes and a
//! newline to a file, or passes the line to a callback.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use crate::component::gen_::runtime::typed::PolicyIdentity;
use crate::{PolicyHandle, PolicyId};

/// A file is rotated (renamed to `PATH.1`, replacing an older one) before a
/// line would take it past this size: 64 MiB.
pub const ROTATE_BYTES: u64 = 64 * 1024 * 1024;

type Callback = Arc<dyn Fn(&str) + Send + Sync>;

enum Sink {
    File(Mutex<FileSink>),
    Callback(Callback),
}

struct FileSink {
    path: PathBuf,
    file: Option<File>,
    size: u64,
}

impl FileSink {
    fn append(&mut self, line: &str) -> std::io::Result<()> {
        let bytes = line.len() as u64 + 1;
        if self.file.is_none() {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
            self.size = file.metadata()?.len();
            self.file = Some(file);
        }
        if self.size > 0 && self.size + bytes > ROTATE_BYTES {
            self.file = None;
            let mut old = self.path.clone().into_os_string();
            old.push(".1");
            std::fs::rename(&self.path, old)?;
            self.file = Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)?,
            );
            self.size = 0;
        }
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        if let Some(file) = self.file.as_mut() {
            file.write_all(&buf)?;
        }
        self.size += bytes;
        Ok(())
    }
}

/// Where a runtime's decision log goes, and what its lines keep: give it to
/// [`RuntimeBuilder::decision_log`](super::RuntimeBuilder::decision_log) (or
/// the door's builder). Off unless given.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use agent_recovery::runtime::{DecisionLog, Outcome, Runtime, Step, VirtualClock};
///
/// let lines = Arc::new(Mutex::new(Vec::<String>::new()));
/// let sink = Arc::clone(&lines);
/// let runtime = Runtime::builder()
///     .clock(Arc::new(VirtualClock::new(1_767_225_600_000)))
///     .seed(7)
///     .decision_log(DecisionLog::callback(move |line| sink.lock().unwrap().push(line.to_owned())))
///     .build()?;
/// let mut run = runtime.run("run-1")?;
/// run.step(Step::new("charge", "payments.charge", |call| match call.attempt {
///     1 => Outcome::Failed(r#"{"source":"http","status":503}"#.into()),
///     _ => Outcome::Ok(serde_json::Value::Null),
/// }))?;
/// let lines = lines.lock().unwrap();
/// assert_eq!(lines.len(), 1); // one decision: retry
/// let line: serde_json::Value = serde_json::from_str(&lines[0])?;
/// assert_eq!(line["action"], "retry");
/// assert_eq!(line["observation"]["status"], 503);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct DecisionLog {
    sink: Arc<Sink>,
    digest_only: bool,
    max_record_bytes: Option<u64>,
    failed: Arc<AtomicU64>,
}

impl std::fmt::Debug for DecisionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("DecisionLog");
        if let Sink::File(file) = &*self.sink {
            d.field(
                "path",
                &file.lock().unwrap_or_else(PoisonError::into_inner).path,
            );
        }
        d.field("digest_only", &self.digest_only)
            .field("max_record_bytes", &self.max_record_bytes)
            .finish_non_exhaustive()
    }
}

impl DecisionLog {
    /// Append each line to the file at `path` (created if absent), which is
    /// renamed to `PATH.1` before it would pass [`ROTATE_BYTES`].
    pub fn file(path: impl AsRef<Path>) -> Self {
        Self::new(Sink::File(Mutex::new(FileSink {
            path: path.as_ref().to_path_buf(),
            file: None,
            size: 0,
        })))
    }

    /// Call `f` with each line (no newline), on the thread of the run.
    pub fn callback(f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Self::new(Sink::Callback(Arc::new(f)))
    }

    fn new(sink: Sink) -> Self {
        DecisionLog {
            sink: Arc::new(sink),
            digest_only: false,
            max_record_bytes: None,
            failed: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Keep only the observation's sha256, not the observation (the
    /// run configuration's `decision_log.observation: "digest"`); such lines
    /// cannot be replayed.
    pub fn digest_only(mut self) -> Self {
        self.digest_only = true;
        self
    }

    /// The largest line (at least 16 384 bytes; default 65 536): a longer
    /// one drops its observation (keeping its digest), then its context.
    pub fn max_record_bytes(mut self, bytes: u64) -> Self {
        self.max_record_bytes = Some(bytes);
        self
    }

    /// Lines a file sink could not write (the run goes on without them).
    pub fn failed_writes(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// The run configuration's `decision_log` member.
    pub(super) fn config(&self) -> Value {
        let mut c = json!({"observation": if self.digest_only { "digest" } else { "full" }});
        if let Some(n) = self.max_record_bytes {
            c["max_record_bytes"] = json!(n);
        }
        c
    }

    /// Appends one line the component made.
    /// Whether lines go to a file (a write that may block on the disk).
    pub(super) fn is_file(&self) -> bool {
        matches!(&*self.sink, Sink::File(_))
    }

    pub(super) fn write(&self, line: &str) {
        match &*self.sink {
            Sink::Callback(f) => f(line),
            Sink::File(file) => {
                let written = file
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .append(line);
                if written.is_err() {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// Which policy decides, for the lines' `policy` member.
pub(super) enum LogPolicy {
    /// A custom decider: null.
    Unknown,
    /// One policy for the runtime's life.
    Fixed(PolicyIdentity),
    /// The handle's active policy at each decision.
    Handle(PolicyHandle),
}

impl LogPolicy {
    pub(super) fn fixed(id: &PolicyId) -> Self {
        LogPolicy::Fixed(identity(id))
    }

    /// The `policy` of a `decision` input, or None.
    pub(super) fn identity(&self) -> Option<PolicyIdentity> {
        match self {
            LogPolicy::Unknown => None,
            LogPolicy::Fixed(id) => Some(id.clone()),
            LogPolicy::Handle(h) => Some(identity(h.active().id())),
        }
    }
}

fn identity(id: &PolicyId) -> PolicyIdentity {
    PolicyIdentity {
        name: id.name.clone(),
        version: id.version.clone(),
        digest: format!("sha256:{}", id.sha256),
    }
}
