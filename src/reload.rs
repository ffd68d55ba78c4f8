//! Adapter: the one reloader, for `serve`'s serving certificate, client CA
//! and config: load at startup (an error is fatal: better than serving with
//! nothing), then re-read on change and swap in what parses; what does not
//! parse is logged at ERROR and counted, and the last good value stays.
//!
//! Two triggers, because each misses cases the other catches: a watch on the
//! containing directories (which sees kubelet swapping its `..data` symlink,
//! where a watch on the file itself would stay on the old inode), and a
//! periodic re-read that compares bytes (for filesystems where inotify events
//! never arrive).
//!
//! Every read is bounded (see the `read` module): regular files only, at most 4 MiB
//! each, within [`read::READ_LIMIT`]; a source that cannot be read counts as a
//! failed reload like one that does not parse.
//!
//! A refused snapshot is remembered, so the same bytes are not parsed and
//! reported again at every poll; a read error is part of the snapshot, so
//! one that goes away (a full file table, a read that timed out) is a
//! change. One refusal is cured by time alone, not by a change: a
//! certificate whose notBefore is ahead of this clock (its issuer's clock
//! runs ahead, or the files landed early). That snapshot is pending: it is
//! parsed again at its notBefore (and at any poll after it, should the
//! clock jump), loaded then, and until then shown by a log line and the
//! source's pending gauge instead of counting as a failed reload.

mod read;

use crate::files::{LoadError, Snapshot};
use crate::log_text::bounded;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use read::Reader;
use std::collections::BTreeSet;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, info, warn};

/// Events come in bursts (kubelet writes a directory, then swaps a link);
/// waiting this long after the first reads the end state once.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// The longest a pending snapshot's timer waits before the clock is
/// looked at again (a notBefore can be years ahead; a timer that long is
/// not worth trusting).
const PENDING_RECHECK: Duration = Duration::from_secs(3600);

/// A reloaded source's success and failure counters, and the notBefore
/// (Unix seconds) of the snapshot waiting to become valid, 0 when none is.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReloadCounters {
    pub ok: Counter,
    pub failed: Counter,
    pub pending: Gauge,
}

/// Why a source's snapshot was not loaded, and whether time alone may cure
/// it.
pub(crate) trait Refusal: Display {
    /// The Unix second from which the same bytes may load (a certificate
    /// not valid yet); `None` when only a change of the files can help.
    fn valid_from(&self) -> Option<i64> {
        None
    }
}

/// A ConfigMap is data: the same bytes parse the same way at any time.
impl Refusal for LoadError {}

/// What became of one snapshot.
enum Outcome {
    Loaded,
    /// Refused until this Unix second, for the reason given.
    Pending(i64, String),
    Refused(String),
}

/// How to look for changes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Trigger {
    pub watch: bool,
    pub poll: Duration,
}

/// A reloaded source: what it is called in logs, the paths it reads, how to
/// look for changes, and its success and failure counters.
pub(crate) struct Source {
    pub what: &'static str,
    pub paths: Vec<PathBuf>,
    pub trigger: Trigger,
    pub counters: ReloadCounters,
}

/// A source loaded once, ready to be watched.
pub(crate) struct Loaded<P> {
    source: Source,
    reader: Reader,
    last: Snapshot,
    parse: P,
}

/// One bounded read of `paths` as `serve` reads them (for a file read once
/// at startup, such as `--config-file`).
pub(crate) fn read_once(paths: &[PathBuf]) -> Snapshot {
    Reader::new(paths).read_blocking()
}

impl Source {
    /// Reads and parses the source now; the caller builds its shared state
    /// from the value, then calls [`Loaded::watch`] with how to replace it.
    pub(crate) fn load<T, E, P>(self, parse: P) -> Result<(T, Loaded<P>), E>
    where
        P: Fn(&Snapshot) -> Result<T, E>,
    {
        let reader = Reader::new(&self.paths);
        let last = reader.read_blocking();
        let value = parse(&last)?;
        let source = self;
        Ok((
            value,
            Loaded {
                source,
                reader,
                last,
                parse,
            },
        ))
    }
}

impl<P> Loaded<P> {
    /// Until `stop`, parses every changed snapshot and applies what parses,
    /// on a task of `tasks`; `apply` may still refuse the value (the
    /// certificates' handshake), which counts as a failed reload. A
    /// snapshot that failed is remembered too, so a bad file is reported
    /// once, not at every poll; one refused until a time (see
    /// [`Refusal::valid_from`]) is parsed again then. `stop` ends the task
    /// at once, even in the middle of a read.
    pub(crate) fn watch<T, E, A, F>(
        mut self,
        stop: &CancellationToken,
        tasks: &TaskTracker,
        apply: A,
    ) where
        P: Fn(&Snapshot) -> Result<T, E> + Send + 'static,
        A: Fn(T) -> Result<(), F> + Send + 'static,
        E: Refusal,
        F: Display,
    {
        let stop = stop.clone();
        tasks.spawn(async move {
            let Source { what, trigger, .. } = self.source;
            let changed = Arc::new(Notify::new());
            // Kept alive as long as the loop runs; dropping it ends the watch.
            let _watcher = trigger
                .watch
                .then(|| start_watch(what, &self.source.paths, changed.clone()))
                .flatten();
            let mut poll = tokio::time::interval(trigger.poll);
            poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            poll.tick().await;
            let counters = self.source.counters.clone();
            // The notBefore of `self.last` while it is pending.
            let mut pending: Option<i64> = None;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = changed.notified() => tokio::time::sleep(DEBOUNCE).await,
                    _ = poll.tick() => {}
                    _ = until(pending) => {}
                }
                let snapshot = tokio::select! {
                    _ = stop.cancelled() => break,
                    s = self.reader.read() => s,
                };
                let due = pending.is_some_and(|from| unix_now() >= from);
                if snapshot == self.last && !due {
                    continue;
                }
                debug!(what, "change detected");
                let outcome = match (self.parse)(&snapshot) {
                    Ok(value) => match apply(value) {
                        Ok(()) => Outcome::Loaded,
                        Err(e) => Outcome::Refused(bounded(e).to_string()),
                    },
                    Err(e) => match e.valid_from() {
                        Some(from) => Outcome::Pending(from, bounded(e).to_string()),
                        None => Outcome::Refused(bounded(e).to_string()),
                    },
                };
                if !matches!(outcome, Outcome::Loaded) {
                    // What the refused parse built is freed by now;
                    // without this its pages stay with this thread.
                    crate::memory::give_back();
                }
                let reported = (snapshot == self.last).then_some(pending).flatten();
                pending = report(what, &counters, outcome, reported);
                self.last = snapshot;
            }
        });
    }
}

/// Logs and counts one snapshot's outcome; the pending notBefore after it.
/// `reported` is the notBefore already reported for these same bytes: a
/// pending snapshot parsed again before its time (a clock set back) is
/// not reported twice.
fn report(
    what: &'static str,
    counters: &ReloadCounters,
    outcome: Outcome,
    reported: Option<i64>,
) -> Option<i64> {
    match outcome {
        Outcome::Loaded => {
            counters.ok.inc();
            counters.pending.set(0);
            // How long after its notBefore a pending snapshot loaded.
            let late_s = reported.map(|from| unix_now() - from);
            info!(what, late_s, "reloaded");
            None
        }
        Outcome::Pending(from, e) => {
            counters.pending.set(from);
            if reported != Some(from) {
                let in_s = from - unix_now();
                warn!(
                    what,
                    valid_from = from,
                    in_s,
                    error = %e,
                    "not valid yet: it will be loaded at its notBefore; the previous one stays in use"
                );
            }
            Some(from)
        }
        Outcome::Refused(e) => {
            counters.failed.inc();
            counters.pending.set(0);
            error!(what, error = %e, "not reloaded; the previous one stays in use");
            None
        }
    }
}

/// Now, in Unix seconds (the unit of a certificate's validity).
fn unix_now() -> i64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH);
    since_epoch.map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Resolves when a pending snapshot's notBefore has come (a little after,
/// at least [`DEBOUNCE`] from now so a clock that disagrees cannot make
/// the loop spin); never without one.
async fn until(pending: Option<i64>) {
    let Some(from) = pending else {
        return std::future::pending().await;
    };
    let at = UNIX_EPOCH + Duration::from_secs(u64::try_from(from).unwrap_or(0));
    let left = at.duration_since(SystemTime::now()).unwrap_or_default();
    tokio::time::sleep(left.clamp(DEBOUNCE, PENDING_RECHECK)).await;
}

fn start_watch(
    what: &'static str,
    sources: &[PathBuf],
    changed: Arc<Notify>,
) -> Option<notify::RecommendedWatcher> {
    use notify::event::{AccessKind, AccessMode};
    use notify::{EventKind, RecursiveMode, Watcher};

    let handler = move |event: notify::Result<notify::Event>| {
        // An overflowed or failed watch may have lost an event: re-read.
        // Opening and reading (our own re-reads included) changes nothing.
        let relevant = event.map_or(true, |e| match e.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
            EventKind::Access(_) => false,
            _ => true,
        });
        if relevant {
            changed.notify_one();
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            warn!(what, error = %e, "cannot watch for changes; relying on polling");
            return None;
        }
    };
    let dirs: BTreeSet<PathBuf> = sources.iter().map(|p| watch_dir_of(p)).collect();
    for dir in dirs {
        if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
            warn!(what, dir = %dir.display(), error = %e, "cannot watch directory; relying on polling");
        }
    }
    Some(watcher)
}

/// The directory to watch for a file or directory source.
fn watch_dir_of(path: &Path) -> PathBuf {
    if path.is_dir() {
        return path.to_path_buf();
    }
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests;
