//! The reloader's loop over real files, with a parse that says what to do
//! by the file's text: `ok:N` loads, `bad:N` is refused for good,
//! `from:T:N` is refused until Unix second T.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

#[derive(Debug)]
struct Refused(Option<i64>);

impl Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused until {:?}", self.0)
    }
}

impl Refusal for Refused {
    fn valid_from(&self) -> Option<i64> {
        self.0
    }
}

const POLL: Duration = Duration::from_millis(50);

struct Watched {
    path: PathBuf,
    parses: Arc<AtomicUsize>,
    applied: Arc<Mutex<Vec<String>>>,
    counters: ReloadCounters,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Watched {
    fn start(watch: bool, poll: Duration) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("source");
        std::fs::write(&path, "ok:0").unwrap();
        let counters = ReloadCounters::default();
        let source = Source {
            what: "test source",
            paths: vec![path.clone()],
            trigger: Trigger { watch, poll },
            counters: counters.clone(),
        };
        let parses = Arc::new(AtomicUsize::new(0));
        let (counted, file) = (parses.clone(), path.clone());
        let parse = move |snap: &Snapshot| {
            counted.fetch_add(1, Ordering::SeqCst);
            let text = String::from_utf8(snap.file(&file).unwrap().to_vec()).unwrap();
            match text.split(':').collect::<Vec<_>>()[..] {
                ["ok", _] => Ok(text),
                ["from", t, _] => {
                    let from: i64 = t.parse().unwrap();
                    if unix_now() < from {
                        Err(Refused(Some(from)))
                    } else {
                        Ok(text)
                    }
                }
                _ => Err(Refused(None)),
            }
        };
        let (first, loaded) = source.load(parse).unwrap();
        assert_eq!(first, "ok:0");
        let applied = Arc::new(Mutex::new(Vec::new()));
        let (stop, tasks) = (CancellationToken::new(), TaskTracker::new());
        let record = applied.clone();
        loaded.watch(&stop, &tasks, move |text: String| {
            record.lock().unwrap().push(text);
            Ok::<_, std::convert::Infallible>(())
        });
        Watched {
            path,
            parses,
            applied,
            counters,
            stop,
            _dir: dir,
        }
    }

    fn write(&self, text: &str) {
        let tmp = self.path.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &self.path).unwrap();
    }

    async fn wait_for(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done(self) {
            assert!(Instant::now() < deadline, "{what}: not within 20 s");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn parses(&self) -> usize {
        self.parses.load(Ordering::SeqCst)
    }

    fn applied(&self) -> Vec<String> {
        self.applied.lock().unwrap().clone()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_not_valid_yet_loads_at_its_time_without_a_change() {
    // The change seen by the watch, and polls far apart: what loads it at
    // its time is the timer.
    let w = Watched::start(true, Duration::from_secs(60));
    // Seconds ahead, so it is seen pending first.
    let from = unix_now() + 3;
    let text = format!("from:{from}:1");
    // Written again until seen: the watch starts on the reloader's task,
    // after the load, and misses what comes before it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while w.counters.pending.get() != from {
        assert!(Instant::now() < deadline, "pending: not within 20 s");
        w.write(&text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!((w.counters.ok.get(), w.counters.failed.get()), (0, 0));
    let parsed_when_pending = w.parses();
    w.wait_for("loaded", |w| w.applied() == [text.clone()])
        .await;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let late = now.saturating_sub(Duration::from_secs(from as u64));
    // Loaded by the timer at its notBefore, not by a poll's luck; parsed
    // once more for it, not at every poll while it waited.
    assert!(
        late < Duration::from_secs(10),
        "loaded {late:?} after its notBefore"
    );
    assert_eq!(w.parses(), parsed_when_pending + 1);
    assert_eq!(w.counters.ok.get(), 1);
    assert_eq!(w.counters.failed.get(), 0);
    assert_eq!(w.counters.pending.get(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_time_cannot_cure_is_parsed_once_and_a_pending_one_until_its_time() {
    let w = Watched::start(false, POLL);
    w.write("bad:1");
    w.wait_for("refused", |w| w.counters.failed.get() == 1)
        .await;
    let parsed = w.parses();
    tokio::time::sleep(POLL * 20).await;
    assert_eq!(w.parses(), parsed, "the same refused bytes parsed again");
    assert_eq!((w.counters.failed.get(), w.counters.pending.get()), (1, 0));

    // A day ahead: pending, parsed once, not counted as a failure.
    let from = unix_now() + 86_400;
    w.write(&format!("from:{from}:2"));
    w.wait_for("pending", |w| w.counters.pending.get() == from)
        .await;
    let parsed = w.parses();
    tokio::time::sleep(POLL * 20).await;
    assert_eq!(
        w.parses(),
        parsed,
        "a pending snapshot parsed before its time"
    );
    assert_eq!(w.counters.failed.get(), 1);

    // Replaced by a bad one: no longer pending, refused.
    w.write("bad:3");
    w.wait_for("the bad one refused", |w| w.counters.failed.get() == 2)
        .await;
    assert_eq!(w.counters.pending.get(), 0);
    // Then a good one loads.
    w.write("ok:4");
    w.wait_for("loaded", |w| w.applied() == ["ok:4"]).await;
    assert_eq!(w.counters.ok.get(), 1);
}
