//! Re-reads files when they change. Two triggers, because each misses cases
//! the other catches: a watch on the containing directories (which sees
//! kubelet swapping its `..data` symlink, where a watch on the file itself
//! would stay on the old inode), and a periodic re-read that compares bytes
//! (for filesystems and setups where inotify events never arrive).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tracing::{debug, warn};

/// Events tend to come in bursts (kubelet writes a directory, then swaps a
/// link); waiting this long after the first reads the end state once.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// One read of every source: each file's bytes, or why it could not be read.
/// A directory source contributes its entries the way kubelet projects a
/// ConfigMap: regular files whose names do not start with a dot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub entries: Vec<(PathBuf, Result<Vec<u8>, String>)>,
}

impl Snapshot {
    pub(crate) fn read(sources: &[PathBuf]) -> Self {
        let mut entries = Vec::new();
        for source in sources {
            if source.is_dir() {
                match dir_files(source) {
                    Ok(files) => {
                        entries.extend(files.into_iter().map(|f| {
                            let bytes = read(&f);
                            (f, bytes)
                        }));
                    }
                    Err(e) => entries.push((source.clone(), Err(e))),
                }
            } else {
                entries.push((source.clone(), read(source)));
            }
        }
        Self { entries }
    }

    /// The bytes of one file source, or its read error as text.
    pub(crate) fn file(&self, path: &Path) -> Result<&[u8], String> {
        match self.entries.iter().find(|(p, _)| p == path) {
            Some((_, Ok(bytes))) => Ok(bytes),
            Some((_, Err(e))) => Err(e.clone()),
            None => Err(format!("{}: not read", path.display())),
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn dir_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let err = |e: std::io::Error| format!("cannot read {}: {e}", dir.display());
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') || !path.is_file() {
            continue;
        }
        files.push(path);
    }
    files.sort();
    Ok(files)
}

/// How to look for changes.
#[derive(Debug, Clone)]
pub(crate) struct Trigger {
    pub watch: bool,
    pub poll: Duration,
}

/// Calls `apply` with a fresh snapshot whenever the sources' bytes differ
/// from the last snapshot seen (`initial` is what startup loaded). A failed
/// apply is remembered too, so a bad file is reported once, not every poll.
pub(crate) fn spawn<F>(
    what: &'static str,
    sources: Vec<PathBuf>,
    initial: Snapshot,
    trigger: Trigger,
    mut stop: watch::Receiver<bool>,
    mut apply: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnMut(&Snapshot) + Send + 'static,
{
    tokio::spawn(async move {
        let changed = Arc::new(Notify::new());
        // Kept alive for as long as the loop runs; dropping it ends the watch.
        let _watcher = if trigger.watch {
            start_watch(what, &sources, changed.clone())
        } else {
            None
        };
        let mut poll = tokio::time::interval(trigger.poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        poll.tick().await;
        let mut last = initial;
        loop {
            tokio::select! {
                _ = super::until_set(&mut stop) => break,
                _ = changed.notified() => tokio::time::sleep(DEBOUNCE).await,
                _ = poll.tick() => {}
            }
            let sources = sources.clone();
            let snapshot = match tokio::task::spawn_blocking(move || Snapshot::read(&sources)).await
            {
                Ok(s) => s,
                Err(e) => {
                    warn!(what, error = %e, "re-reading files failed");
                    continue;
                }
            };
            if snapshot != last {
                debug!(what, "change detected");
                apply(&snapshot);
                last = snapshot;
            }
        }
    })
}

fn start_watch(
    what: &'static str,
    sources: &[PathBuf],
    changed: Arc<Notify>,
) -> Option<notify::RecommendedWatcher> {
    use notify::event::{AccessKind, AccessMode};
    use notify::{EventKind, RecursiveMode, Watcher};

    let handler = move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else {
            // An overflowed or failed watch may have lost an event: re-read.
            changed.notify_one();
            return;
        };
        // Opening and reading (including our own re-reads) changes nothing.
        let relevant = match event.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
            EventKind::Access(_) => false,
            _ => true,
        };
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
mod tests {
    use super::*;

    #[test]
    fn directory_snapshots_skip_kubelet_bookkeeping() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let version = dir.path().join("..2026_01_01_00_00_00.1");
        std::fs::create_dir(&version)?;
        std::fs::write(version.join("agent"), "{}")?;
        std::os::unix::fs::symlink("..2026_01_01_00_00_00.1", dir.path().join("..data"))?;
        std::os::unix::fs::symlink("..data/agent", dir.path().join("agent"))?;
        let snap = Snapshot::read(&[dir.path().to_path_buf()]);
        assert_eq!(snap.entries.len(), 1);
        assert_eq!(snap.file(&dir.path().join("agent")), Ok(&b"{}"[..]));
        let missing = Snapshot::read(&[dir.path().join("nope")]);
        assert!(missing.file(&dir.path().join("nope")).is_err());
        Ok(())
    }
}
