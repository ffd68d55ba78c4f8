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
//! each, within [`READ_LIMIT`]; a source that cannot be read counts as a
//! failed reload like one that does not parse.

mod read;

pub use read::READ_LIMIT;

use crate::config_file::Snapshot;
use prometheus_client::metrics::counter::Counter;
use read::Reader;
use std::collections::BTreeSet;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, info, warn};

/// Events come in bursts (kubelet writes a directory, then swaps a link);
/// waiting this long after the first reads the end state once.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// A reloaded source's success and failure counters.
#[derive(Debug, Clone, Default)]
pub struct ReloadCounters {
    pub ok: Counter,
    pub failed: Counter,
}

/// How to look for changes.
#[derive(Debug, Clone, Copy)]
pub struct Trigger {
    pub watch: bool,
    pub poll: Duration,
}

/// A reloaded source: what it is called in logs, the paths it reads, how to
/// look for changes, and its success and failure counters.
pub struct Source {
    pub what: &'static str,
    pub paths: Vec<PathBuf>,
    pub trigger: Trigger,
    pub counters: ReloadCounters,
}

/// A source loaded once, ready to be watched.
pub struct Loaded<P> {
    source: Source,
    reader: Reader,
    last: Snapshot,
    parse: P,
}

/// One bounded read of `paths` as `serve` reads them (for a file read once
/// at startup, such as `--config-file`).
pub fn read_once(paths: &[PathBuf]) -> Snapshot {
    Reader::new(paths).read_blocking()
}

impl Source {
    /// Reads and parses the source now; the caller builds its shared state
    /// from the value, then calls [`Loaded::watch`] with how to replace it.
    pub fn load<T, E, P>(self, parse: P) -> Result<(T, Loaded<P>), E>
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
    /// once, not at every poll. `stop` ends the task at once, even in the
    /// middle of a read.
    pub fn watch<T, E, A, F>(mut self, stop: &CancellationToken, tasks: &TaskTracker, apply: A)
    where
        P: Fn(&Snapshot) -> Result<T, E> + Send + 'static,
        A: Fn(T) -> Result<(), F> + Send + 'static,
        E: Display,
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
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = changed.notified() => tokio::time::sleep(DEBOUNCE).await,
                    _ = poll.tick() => {}
                }
                let snapshot = tokio::select! {
                    _ = stop.cancelled() => break,
                    s = self.reader.read() => s,
                };
                if snapshot == self.last {
                    continue;
                }
                debug!(what, "change detected");
                let applied = match (self.parse)(&snapshot) {
                    Ok(value) => apply(value).map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                match applied {
                    Ok(()) => {
                        self.source.counters.ok.inc();
                        info!(what, "reloaded");
                    }
                    Err(e) => {
                        // What the refused parse built is freed by now;
                        // without this its pages stay with this thread.
                        crate::memory::give_back();
                        self.source.counters.failed.inc();
                        error!(what, error = %e, "not reloaded; the previous one stays in use");
                    }
                }
                self.last = snapshot;
            }
        });
    }
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
