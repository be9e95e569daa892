//! Watching a policy file and swapping it in when it changes.
//!
//! # Why polling, and why two polls?
//!
//! Polling needs no platform notification API (no `notify` dependency, works
//! on network filesystems and in containers) and costs one `stat` per
//! interval. A file is loaded only once its size, modification time (and
//! inode, on Unix) are the same on two polls in a row, that is, after one
//! full interval without writes: that is the debounce, and it keeps a file
//! that is still being written from being read. Should a slow writer pause
//! longer than that, the half-written file fails validation, is refused (an
//! [`Event::Refused`](crate::Event::Refused)) and the active policy stays;
//! the file is tried again when it changes. Writing to a temporary file and
//! renaming it over the watched path avoids even that.
//!
//! A change is therefore picked up between one and two intervals after the
//! last write, plus the time to validate the candidate. A file whose bytes
//! are those of the active policy (a `touch`) is not swapped again, and a
//! deleted file leaves the active policy in place.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use crate::component::policy::hex;
use crate::error::{Error, ErrorKind, Result};
use crate::swap::candidate;
use crate::{PolicyHandle, SwapOptions};

/// Options for [`PolicyHandle::watch`].
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | [`interval`](Self::interval) | 500 ms |
/// | [`swap_options`](Self::swap_options) | [`SwapOptions::default()`] |
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchOptions {
    interval: Duration,
    swap: SwapOptions,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            interval: Duration::from_millis(500),
            swap: SwapOptions::default(),
        }
    }
}

impl WatchOptions {
    /// How often the file is checked: from 1 ms to 1 hour.
    ///
    /// ```
    /// use std::time::Duration;
    /// use agent_recovery::WatchOptions;
    /// assert!(WatchOptions::default().interval(Duration::from_millis(100)).is_ok());
    /// assert!(WatchOptions::default().interval(Duration::ZERO).is_err());
    /// ```
    pub fn interval(mut self, interval: Duration) -> Result<Self> {
        if interval < Duration::from_millis(1) || interval > Duration::from_secs(3600) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "invalid watch interval {interval:?}: expected 1 ms to 1 hour; 100 ms to 1 s is typical"
                ),
            ));
        }
        self.interval = interval;
        Ok(self)
    }

    /// The checks every new version of the file must pass.
    pub fn swap_options(mut self, options: SwapOptions) -> Self {
        self.swap = options;
        self
    }

    /// The poll interval.
    pub fn poll_interval(&self) -> Duration {
        self.interval
    }
}

/// A running file watcher; dropping it (or [`stop`](Self::stop)) ends it.
///
/// Ending waits for a swap in progress to finish.
#[derive(Debug)]
pub struct Watcher {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Stops watching and waits for the watcher thread to end.
    pub fn stop(mut self) {
        self.end();
    }

    fn end(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.end();
    }
}

impl PolicyHandle {
    /// Watches the component file at `path` on a background thread and swaps
    /// it in whenever it changes (see the module docs for when a change is
    /// picked up). The file as it is now is taken to be loaded already: build
    /// the handle from it first ([`HandleBuilder::file`](crate::HandleBuilder::file)).
    /// Swaps and refusals are reported as events, like any swap.
    pub fn watch(&self, path: impl Into<PathBuf>, options: WatchOptions) -> Result<Watcher> {
        let path = path.into();
        let (stop, stopped) = mpsc::channel();
        let handle = self.clone();
        // Taken now, not on the thread: a change made right after `watch`
        // returns must count as a change.
        let debounce = Debounce::new(stamp(&path));
        let thread = std::thread::Builder::new()
            .name("agent-recovery-watch".into())
            .spawn(move || poll(&handle, &path, &options, &stopped, debounce))
            .map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot start the watcher thread: {e}; the system is out of threads"),
                )
            })?;
        Ok(Watcher {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

/// What identifies one version of a file without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(Stamp {
        len: meta.len(),
        modified: meta.modified().ok(),
        inode,
    })
}

/// The debounce: which version of the file was handled last, and a change
/// waiting to hold still for one more poll.
#[derive(Debug)]
struct Debounce {
    handled: Option<Stamp>,
    pending: Option<Option<Stamp>>,
}

impl Debounce {
    /// Starts with the file as it is now taken as handled.
    fn new(now: Option<Stamp>) -> Self {
        Debounce {
            handled: now,
            pending: None,
        }
    }

    /// Feeds one poll's stamp; true when the file should be loaded now: it
    /// exists, differs from what was handled, and did not change since the
    /// previous poll. It is then taken as handled.
    fn ready(&mut self, now: Option<Stamp>) -> bool {
        if now == self.handled {
            self.pending = None;
            return false;
        }
        if self.pending != Some(now) {
            self.pending = Some(now);
            return false;
        }
        self.pending = None;
        self.handled = now;
        now.is_some()
    }

    /// Forgets what was handled, so the next stable version is loaded.
    fn forget(&mut self) {
        self.handled = None;
    }
}

/// The watcher thread: poll until the [`Watcher`] is dropped.
fn poll(
    handle: &PolicyHandle,
    path: &Path,
    options: &WatchOptions,
    stopped: &mpsc::Receiver<()>,
    mut debounce: Debounce,
) {
    loop {
        match stopped.recv_timeout(options.interval) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = stamp(path);
        if debounce.ready(now) && !load(handle, path, options, now) {
            debounce.forget();
        }
    }
}

/// Reads the file and swaps it in (unless it is the active policy already).
/// False when the file changed while it was read: it is left for later polls.
fn load(handle: &PolicyHandle, path: &Path, options: &WatchOptions, seen: Option<Stamp>) -> bool {
    let bytes = match candidate::read(path) {
        Ok(bytes) => bytes,
        Err(error) => {
            handle.refuse(error);
            return true;
        }
    };
    if stamp(path) != seen {
        return false;
    }
    let sha256 = hex(&Sha256::digest(&bytes).into());
    if sha256 != handle.active().id().sha256 {
        match candidate::read_signature(path, &options.swap) {
            Ok(sig) => {
                let label = path.display().to_string();
                let _ = handle.swap_signed(&bytes, sig.as_deref(), &label, &options.swap);
            }
            Err(error) => handle.refuse(error),
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(len: u64) -> Option<Stamp> {
        Some(Stamp {
            len,
            modified: None,
            inode: 1,
        })
    }

    #[test]
    fn a_change_is_loaded_once_it_holds_still_for_one_poll() {
        let mut d = Debounce::new(version(1));
        assert!(!d.ready(version(1)), "unchanged");
        assert!(!d.ready(version(2)), "changed: wait one poll");
        assert!(d.ready(version(2)), "still the same: load");
        assert!(!d.ready(version(2)), "handled: not again");
    }

    #[test]
    fn a_file_that_keeps_changing_is_never_loaded() {
        let mut d = Debounce::new(version(1));
        for len in 2..50 {
            assert!(!d.ready(version(len)), "growing to {len}");
        }
        assert!(d.ready(version(49)), "then it holds still");
    }

    #[test]
    fn a_change_back_to_the_handled_version_is_nothing_to_do() {
        let mut d = Debounce::new(version(1));
        assert!(!d.ready(version(2)));
        assert!(!d.ready(version(1)));
        assert!(!d.ready(version(1)));
    }

    #[test]
    fn a_missing_file_is_not_loaded_and_its_return_is() {
        let mut d = Debounce::new(version(1));
        assert!(!d.ready(None));
        assert!(!d.ready(None), "gone: nothing to load");
        assert!(!d.ready(version(1)), "back: wait one poll");
        assert!(d.ready(version(1)), "back and stable: load it");
    }

    #[test]
    fn a_forgotten_version_is_loaded_again_once_stable() {
        let mut d = Debounce::new(None);
        assert!(!d.ready(version(3)));
        assert!(d.ready(version(3)));
        d.forget();
        assert!(!d.ready(version(3)));
        assert!(d.ready(version(3)));
    }
}
