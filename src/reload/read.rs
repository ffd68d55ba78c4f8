//! Reading a source's files within a time bound, on a thread of the
//! reader's own. A read that never returns (a hung network filesystem, a
//! device that ignores `O_NONBLOCK`) costs that one thread: it is reported
//! like any unreadable file, it does not hold the reloader or the
//! shutdown, and no second read of the source starts until it returns, so
//! stuck threads cannot pile up. A thread of its own rather than tokio's
//! blocking pool, because the runtime waits for its blocking tasks when
//! it shuts down.

use crate::files::{Accept, Snapshot};
use kserve_injector_core::AnyError;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// How long one read of a source's files may take. Reading a few files
/// of at most 4 MiB each from a local or projected volume takes
/// milliseconds; a read still running after this is not going to finish.
pub(crate) const READ_LIMIT: Duration = Duration::from_secs(5);

type ReadFn = Arc<dyn Fn(&[PathBuf]) -> Snapshot + Send + Sync>;

/// Why a read gave no files.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReadStopped {
    #[error("cannot start a thread to read it: {0}")]
    NoThread(#[source] std::io::Error),
    #[error("the read ended without a result")]
    NoResult,
    #[error("the read did not finish within {}; abandoned", humantime::format_duration(*.0))]
    TimedOut(Duration),
}

/// Reads one source's paths as `serve` accepts them: regular files only.
pub(super) struct Reader {
    paths: Arc<[PathBuf]>,
    read: ReadFn,
    limit: Duration,
    /// A read that outlived `limit` and has not returned yet.
    stuck: Option<oneshot::Receiver<Snapshot>>,
}

impl Reader {
    pub(super) fn new(paths: &[PathBuf]) -> Self {
        let read: ReadFn = Arc::new(|paths| Snapshot::read(paths, Accept::RegularFile));
        Self::with(paths, read, READ_LIMIT)
    }

    fn with(paths: &[PathBuf], read: ReadFn, limit: Duration) -> Self {
        Self {
            paths: paths.into(),
            read,
            limit,
            stuck: None,
        }
    }

    /// Reads now, waiting on the calling thread (startup).
    pub(super) fn read_blocking(&self) -> Snapshot {
        let (done, result) = std::sync::mpsc::sync_channel(1);
        if let Err(e) = self.spawn(move |snap| drop(done.send(snap))) {
            return self.unreadable(ReadStopped::NoThread(e));
        }
        result
            .recv_timeout(self.limit)
            .unwrap_or_else(|_| self.timed_out())
    }

    /// Reads now, or reports the read still stuck from an earlier call.
    pub(super) async fn read(&mut self) -> Snapshot {
        if let Some(earlier) = &mut self.stuck {
            match earlier.try_recv() {
                // Reported when it timed out; the same report compares
                // equal, so it is not counted again.
                Err(oneshot::error::TryRecvError::Empty) => return self.timed_out(),
                // What it read is stale by now: read again.
                _ => self.stuck = None,
            }
        }
        let (done, mut result) = oneshot::channel();
        if let Err(e) = self.spawn(move |snap| drop(done.send(snap))) {
            return self.unreadable(ReadStopped::NoThread(e));
        }
        match tokio::time::timeout(self.limit, &mut result).await {
            Ok(Ok(snap)) => snap,
            Ok(Err(_)) => self.unreadable(ReadStopped::NoResult),
            Err(_) => {
                self.stuck = Some(result);
                self.timed_out()
            }
        }
    }

    fn spawn(&self, deliver: impl FnOnce(Snapshot) + Send + 'static) -> std::io::Result<()> {
        let (paths, read) = (self.paths.clone(), self.read.clone());
        std::thread::Builder::new()
            .name("kserve-injector-read".into())
            .spawn(move || deliver(read(&paths)))
            .map(drop)
    }

    fn timed_out(&self) -> Snapshot {
        self.unreadable(ReadStopped::TimedOut(self.limit))
    }

    fn unreadable(&self, why: ReadStopped) -> Snapshot {
        Snapshot::unreadable(&self.paths, AnyError::any(why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// A read that blocks until `release` is dropped, counting its calls.
    fn hanging() -> (ReadFn, Arc<AtomicUsize>, std::sync::mpsc::SyncSender<()>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let (release, gate) = std::sync::mpsc::sync_channel::<()>(0);
        let gate = Arc::new(Mutex::new(gate));
        let counted = calls.clone();
        let read: ReadFn = Arc::new(move |paths| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            if n == 0 {
                let _ = gate.lock().map(|g| g.recv());
            }
            let why = std::io::Error::other(format!("read {n}"));
            Snapshot::unreadable(paths, AnyError::any(why))
        });
        (read, calls, release)
    }

    #[tokio::test]
    async fn a_read_that_hangs_is_abandoned_reported_once_and_not_restarted_until_it_returns() {
        let paths = [PathBuf::from("/certs/tls.crt")];
        let (read, calls, release) = hanging();
        let mut reader = Reader::with(&paths, read, Duration::from_millis(50));
        let first = reader.read().await;
        let why = first.file(&paths[0]).unwrap_err().to_string();
        assert_eq!(
            why,
            "cannot read /certs/tls.crt: the read did not finish within 50ms; abandoned"
        );
        // Still stuck: the same report, and no second thread.
        assert_eq!(reader.read().await, first);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        drop(release);
        // Once the stuck thread has returned (soon, but later on a loaded
        // machine) the next read starts afresh; until then each read gets
        // the same report and starts nothing.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let fresh = loop {
            let snapshot = reader.read().await;
            if snapshot != first || std::time::Instant::now() > deadline {
                break snapshot;
            }
            assert_eq!(calls.load(Ordering::SeqCst), 1);
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert_eq!(
            fresh.file(&paths[0]).unwrap_err().to_string(),
            "cannot read /certs/tls.crt: read 1"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_startup_read_that_hangs_is_abandoned_after_the_limit() {
        let paths = [PathBuf::from("/config/cm.yaml")];
        let (read, _calls, release) = hanging();
        let reader = Reader::with(&paths, read, Duration::from_millis(50));
        let started = std::time::Instant::now();
        let snap = reader.read_blocking();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(snap
            .file(&paths[0])
            .unwrap_err()
            .to_string()
            .ends_with("abandoned"));
        drop(release);
    }
}
