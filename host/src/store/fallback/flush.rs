//! The background side of a [`FallbackStore`](super::FallbackStore): the
//! probe of the primary, the flush of the spool back to it, and the local
//! mirror of the entries the loop relies on.

use serde_json::{Value, json};

use super::{
    Inner, LEASE_MS, MIRRORED_PREFIXES, PROBE_KEY, SPOOL_CURSOR, SPOOL_LEASE, SPOOL_STREAM,
};
use crate::store::{Cas, StoreError, StoreErrorKind};

/// How many times a flushed write retries on a conflict (last writer wins).
const SET_RETRIES: usize = 16;
/// Spool records a flush applies between two renewals of its lease.
const BATCH: usize = 256;
/// How many times a mirror write retries on a local conflict.
const MIRROR_RETRIES: usize = 4;

/// Whether entries under `key` are mirrored in the spool file and spooled
/// while degraded.
pub(super) fn mirrored(key: &str) -> bool {
    MIRRORED_PREFIXES.iter().any(|p| key.starts_with(p))
}

impl Inner {
    /// Copies a write the primary took into the local store, so it is seen
    /// while degraded. Best effort: a local failure never fails the call
    /// the primary answered.
    pub(super) fn mirror_set(&self, key: &str, value: &str, ttl_ms: Option<u64>, now: u64) {
        for _ in 0..MIRROR_RETRIES {
            let current = match self.local.get(key, now) {
                Ok(c) => c,
                Err(_) => return,
            };
            match self
                .local
                .compare_and_set(key, current.map(|c| c.version), value, ttl_ms, now)
            {
                Ok(Cas::Conflict { .. }) => {}
                _ => return,
            }
        }
    }

    /// Removes a mirrored entry the primary deleted.
    pub(super) fn mirror_delete(&self, key: &str) {
        let _ = self.local.delete(key);
    }

    /// Whether the spool has records after its cursor.
    pub(super) fn spool_pending(&self) -> bool {
        let after = self.cursor().map_or(0, |(seq, _)| seq);
        self.local
            .read(SPOOL_STREAM, after, 1)
            .is_ok_and(|r| !r.is_empty())
    }

    /// The last record's sequence number in the spool (0 when none is
    /// after the cursor): reads only.
    fn spool_last(&self) -> Result<u64, StoreError> {
        let mut last = self.cursor()?.0;
        loop {
            let batch = self.local.read(SPOOL_STREAM, last, 1024)?;
            match batch.last() {
                Some((n, _)) => last = *n,
                None => return Ok(last),
            }
        }
    }

    fn cursor(&self) -> Result<(u64, Option<u64>), StoreError> {
        Ok(match self.local.get(SPOOL_CURSOR, 0)? {
            None => (0, None),
            Some(v) => {
                let seq = serde_json::from_str::<Value>(&v.value)
                    .ok()
                    .and_then(|j| j.get("seq").and_then(Value::as_u64))
                    .unwrap_or(0);
                (seq, Some(v.version))
            }
        })
    }

    /// The background thread's work: probe the primary, flush the spool up
    /// to what this process had spooled, serve the primary again, drain what
    /// was spooled meanwhile, and report.
    pub(super) fn reconnect(&self, now: u64) {
        let outcome = self.primary.get(PROBE_KEY, now).and_then(|_| {
            // Degraded: up to what this machine's processes had spooled when
            // the flush began (calls served locally meanwhile cannot keep it
            // going). Not degraded (the machine's spool is): to its end.
            let (degraded, spool_end) = {
                let st = self.lock();
                (st.degraded.is_some(), st.spool_end)
            };
            let until = if degraded {
                Some(self.spool_last()?.max(spool_end))
            } else {
                None
            };
            self.flush(now, until)
        });
        let restored = match outcome {
            Err(e) => {
                self.startup_failed(now, &e);
                None
            }
            Ok(Some(flushed)) => self.lock().degraded.take().map(|s| (s, flushed)),
            // Another process is flushing: serve the primary again once it
            // has flushed this process's records (so every process of the
            // machine stops adding to the spool soon); until then degraded.
            Ok(None) => {
                let flushed_mine = self
                    .cursor()
                    .is_ok_and(|(seq, _)| seq >= self.lock().spool_end);
                let mut st = self.lock();
                if flushed_mine && !st.startup_spool {
                    st.degraded.take().map(|s| (s, 0))
                } else {
                    None
                }
            }
        };
        let startup = std::mem::take(&mut self.lock().startup_spool);
        if let Some((since, flushed)) = restored {
            self.options.listeners.emit(&json!({
                "event": "store_restored",
                "store": self.options.name,
                "at_ms": now,
                // A spool left by an earlier process: this one was never
                // degraded.
                "degraded_ms": if startup { 0 } else { now.saturating_sub(since) },
                "flushed": flushed,
            }));
            // Drain what the machine's processes spooled meanwhile, to the
            // end (they serve the primary again as the cursor passes their
            // last record; what is left waits for the next flush if the
            // primary went away again).
            let _ = self.flush(now, None);
        }
        self.lock().reconnecting = false;
    }

    /// A spool left by an earlier process could not be flushed: this process
    /// is degraded like any other, and says so.
    fn startup_failed(&self, now: u64, e: &StoreError) {
        if !std::mem::take(&mut self.lock().startup_spool) {
            return;
        }
        self.options.listeners.emit(&json!({
            "event": "store_degraded",
            "store": self.options.name,
            "at_ms": now,
            "kind": e.kind().as_str(),
            "message": e.message(),
        }));
    }

    /// Applies the spool after the cursor to the primary (up to record
    /// `until`, else to its end) under the spool lease; how many records it
    /// applied, or None when another process holds the lease.
    fn flush(&self, now: u64, until: Option<u64>) -> Result<Option<u64>, StoreError> {
        let lease = json!({"pid": std::process::id(), "at_ms": now}).to_string();
        let lease_version =
            match self
                .local
                .compare_and_set(SPOOL_LEASE, None, &lease, Some(LEASE_MS), now)?
            {
                Cas::Written { version } => version,
                Cas::Conflict { .. } => return Ok(None),
            };
        let mut lease_version = lease_version;
        let result = self.flush_held(until, &lease, &mut lease_version);
        let now = self.lock().last_now.max(now);
        if let Ok(Some(live)) = self.local.get(SPOOL_LEASE, now)
            && live.version == lease_version
        {
            let _ = self.local.delete(SPOOL_LEASE);
        }
        result.map(Some)
    }

    fn flush_held(
        &self,
        until: Option<u64>,
        lease: &str,
        lease_version: &mut u64,
    ) -> Result<u64, StoreError> {
        let (mut seq, mut cursor_version) = self.cursor()?;
        let mut flushed = 0;
        loop {
            if until.is_some_and(|u| seq >= u) {
                return Ok(flushed);
            }
            // Renew the lease (from the latest time a call passed in).
            let now = self.lock().last_now;
            let renew = |expected| {
                self.local
                    .compare_and_set(SPOOL_LEASE, expected, lease, Some(LEASE_MS), now)
            };
            let renewed = match renew(Some(*lease_version))? {
                // Expired and nobody took it: take it again.
                Cas::Conflict { current: None } => renew(None)?,
                other => other,
            };
            match renewed {
                Cas::Written { version } => *lease_version = version,
                Cas::Conflict { .. } => {
                    return Err(StoreError::new(
                        StoreErrorKind::Unavailable,
                        "the spool lease expired under this flush (another process took it); will probe again",
                    ));
                }
            }
            let batch = self.local.read(SPOOL_STREAM, seq, BATCH)?;
            if batch.is_empty() {
                return Ok(flushed);
            }
            // The batch's entry writes first, the last one per key (a run's
            // journal writes and delete are one delete, an idempotency claim
            // and its completion one write); then its appends in order, the
            // cursor after each (at least once: a crash repeats at most the
            // append it was applying).
            let last = batch.last().map_or(seq, |(n, _)| *n);
            let mut keyed: Vec<(String, Value)> = Vec::new();
            let mut steps: Vec<(u64, Option<Value>)> = Vec::new();
            for (n, record) in &batch {
                let mut op = parse(record)?;
                flushed += 1;
                match op.get("key").and_then(Value::as_str).map(str::to_owned) {
                    None => steps.push((*n, Some(op))),
                    Some(key) => {
                        if let Some(i) = keyed.iter().position(|(k, _)| *k == key) {
                            keyed.remove(i);
                            // After an earlier op on the key here: a write.
                            op["claim"] = Value::Bool(false);
                        }
                        keyed.push((key, op));
                    }
                }
            }
            for (_, op) in &keyed {
                self.apply(op)?;
            }
            if steps.last().is_none_or(|(n, _)| *n != last) {
                steps.push((last, None));
            }
            for (n, op) in steps {
                if let Some(op) = op {
                    self.apply(&op)?;
                }
                let value = json!({ "seq": n }).to_string();
                cursor_version = match self.local.compare_and_set(
                    SPOOL_CURSOR,
                    cursor_version,
                    &value,
                    None,
                    0,
                )? {
                    Cas::Written { version } => Some(version),
                    Cas::Conflict { .. } => {
                        return Err(StoreError::new(
                            StoreErrorKind::Unavailable,
                            "the spool cursor moved under this flush (another process flushed); will probe again",
                        ));
                    }
                };
                seq = n;
            }
        }
    }

    fn apply(&self, r: &Value) -> Result<(), StoreError> {
        let bad = || {
            StoreError::new(
                StoreErrorKind::Corrupt,
                format!("spool record {r} is not a spool operation; the spool file is damaged"),
            )
        };
        let s = |k: &str| r.get(k).and_then(Value::as_str).ok_or_else(bad);
        let now = r.get("now_ms").and_then(Value::as_u64).unwrap_or(0);
        match s("op")? {
            "append" => {
                self.primary.append(s("stream")?, s("record")?, now)?;
            }
            "delete" => {
                self.primary.delete(s("key")?)?;
            }
            "set" => {
                let key = s("key")?;
                let value = s("value")?;
                let ttl = r.get("ttl_ms").and_then(Value::as_u64);
                // A claim (a create-only write) never replaces an entry
                // the primary has: the earlier claim or the completed entry
                // there wins. Any other write replaces it (last writer wins).
                let claim = r.get("claim").and_then(Value::as_bool) == Some(true);
                // Create first: one round trip when absent.
                let mut expected = None;
                for _ in 0..SET_RETRIES {
                    match self
                        .primary
                        .compare_and_set(key, expected, value, ttl, now)?
                    {
                        Cas::Written { .. } => return Ok(()),
                        Cas::Conflict { .. } if claim => return Ok(()),
                        Cas::Conflict { current } => expected = current.map(|v| v.version),
                    }
                }
                return Err(StoreError::new(
                    StoreErrorKind::Unavailable,
                    format!(
                        "{key:?} kept changing while the spool was flushed; will try again at the next probe"
                    ),
                ));
            }
            _ => return Err(bad()),
        }
        Ok(())
    }
}

/// A spool record's operation (an object with a known `op`).
fn parse(record: &str) -> Result<Value, StoreError> {
    match serde_json::from_str::<Value>(record) {
        Ok(v)
            if matches!(
                v.get("op").and_then(Value::as_str),
                Some("append" | "set" | "delete")
            ) =>
        {
            Ok(v)
        }
        _ => Err(StoreError::new(
            StoreErrorKind::Corrupt,
            format!("spool record {record:?} is not a spool operation; the spool file is damaged"),
        )),
    }
}
