//! The server's slots granted for progress, never for promises, on real
//! sockets: a declared length holds nothing until its bytes come, a body
//! that falls behind its pace is answered 408 and frees its slot, one
//! connection holds at most its share of the requests in flight, and at the
//! connection cap the connection that completes no review gives its slot to
//! a new one, never the one that keeps completing reviews.

use crate::support::*;
use hyper::body::Bytes;
use hyper::StatusCode;
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An HTTP/2 connection of the h2 crate, so a test can hold a stream's
/// sending side without sending.
async fn raw_h2(
    addr: std::net::SocketAddr,
    ca: &str,
) -> Result<(h2::client::SendRequest<Bytes>, tokio::task::JoinHandle<()>), Error> {
    let tls = tls_connect(addr, client_config(ca, Http::H2)?).await?;
    let (client, connection) = h2::client::handshake(tls).await?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok((client, driver))
}

/// A stream declaring `declared` bytes of body that sends none: its
/// response future and its sending side (dropping it would reset the stream).
fn promise(
    client: &mut h2::client::SendRequest<Bytes>,
    declared: usize,
) -> Result<(h2::client::ResponseFuture, h2::SendStream<Bytes>), Error> {
    let request = hyper::Request::post("https://localhost/mutate-pods")
        .header("content-type", "application/json")
        .header("content-length", declared)
        .body(())?;
    Ok(client.send_request(request, false)?)
}

/// Opens streams that send nothing on `client` until the server lets no
/// more open (the client waits for a slot for `patience`), at most `most`.
async fn promises_until_refused(
    mut client: h2::client::SendRequest<Bytes>,
    most: usize,
    patience: Duration,
) -> Result<Vec<(h2::client::ResponseFuture, h2::SendStream<Bytes>)>, Error> {
    let mut held = Vec::new();
    while held.len() < most {
        match tokio::time::timeout(patience, client.clone().ready()).await {
            Ok(ready) => client = ready?,
            Err(_) => break,
        }
        held.push(promise(&mut client, 100)?);
    }
    Ok(held)
}

/// A valid review of about `bytes` (a big annotation: denied, but answered 200).
fn review_of(bytes: usize) -> Result<Vec<u8>, Error> {
    let (mut pod, _) = sample_review()?;
    pod["metadata"]["annotations"]["example.com/blob"] = Value::String("x".repeat(bytes));
    review_request(&pod, "admission.k8s.io/v1", "sized")
}

async fn in_flight(admin: std::net::SocketAddr) -> Result<f64, Error> {
    metric_now(admin, "kserve_injector_requests_in_flight").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_length_holds_nothing_until_its_bytes_arrive() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let budget = (8usize << 20).to_string();
    let flags = [
        "--shutdown-delay",
        "0s",
        "--max-buffered-bytes",
        budget.as_str(),
        "--body-timeout",
        "60s",
    ];
    let (server, ca) = start_self_signed(tmp.path(), &flags).await?;
    let (addr, admin) = (server.local_addr(), server.admin_addr());
    // Most of the 8 MiB budget promised, none of it sent.
    let (mut client, _driver) = raw_h2(addr, &ca).await?;
    client = client.ready().await?;
    let (promised, _sending) = promise(&mut client, 7_000_000)?;
    eventually(PATIENCE, "the promise in flight", || async {
        (in_flight(admin).await.ok()? == 1.0).then_some(())
    })
    .await?;
    // A 2 MiB review needs the budget beyond its connection's own bytes.
    let review = review_of(2 << 20)?;
    let started = Instant::now();
    let (status, body) = Client::open(addr, &ca, Http::H2)
        .await?
        .post_json("/mutate-pods", review)
        .await?;
    eprintln!(
        "figure: 7,000,000 bytes declared and none sent under --max-buffered-bytes 8 MiB: \
         a 2 MiB review got {status} in {:.2?}",
        started.elapsed()
    );
    ensure(status == StatusCode::OK, || {
        format!(
            "a 2 MiB review beside a 7 MB promise: {status} {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        )
    })?;
    // The promise is still in flight: not refused for what it declared.
    ensure(
        tokio::time::timeout(Duration::from_millis(100), promised)
            .await
            .is_err(),
        || "the promise was answered".into(),
    )?;
    stop(server).await
}

/// The head of a review declaring its whole length, and `sent` of its bytes.
async fn stalled_review(
    http: Http,
    addr: std::net::SocketAddr,
    ca: &str,
    review: &[u8],
    sent: usize,
) -> Result<
    (
        http_body_util::channel::Sender<Bytes>,
        tokio::task::JoinHandle<Result<(StatusCode, Bytes), Error>>,
    ),
    Error,
> {
    let (mut tx, channel) = http_body_util::Channel::<Bytes, std::convert::Infallible>::new(4);
    tx.send_data(Bytes::copy_from_slice(&review[..sent]))
        .await?;
    let mut client = Client::open(addr, ca, http).await?;
    let request = hyper::Request::post("https://localhost/mutate-pods")
        .header("content-type", "application/json")
        .header("content-length", review.len())
        .body(http_body_util::BodyExt::boxed(channel))?;
    Ok((tx, tokio::spawn(async move { client.call(request).await })))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_falls_behind_its_pace_is_answered_408_and_frees_its_slot() -> TestResult {
    let tmp = tempfile::tempdir()?;
    // The request timeout far away: only the pace can end these requests.
    let flags = [
        "--shutdown-delay",
        "0s",
        "--request-timeout",
        "60s",
        "--body-timeout",
        "1s",
    ];
    let (server, ca) = start_self_signed(tmp.path(), &flags).await?;
    let (addr, admin) = (server.local_addr(), server.admin_addr());
    let (_, review) = sample_review()?;
    for http in Http::BOTH {
        // Half a 1.5 KB review, then nothing: due 1 s after its head.
        let started = Instant::now();
        let (_tx, answer) = stalled_review(http, addr, &ca, &review, review.len() / 2).await?;
        let (status, body) = tokio::time::timeout(Duration::from_secs(8), answer)
            .await
            .map_err(|_| fail(format!("{http:?}: a stalled body held its slot for 8 s")))???;
        let took = started.elapsed();
        eprintln!("figure: {http:?}, half a review then nothing: {status} after {took:.2?}");
        ensure(status == StatusCode::REQUEST_TIMEOUT, || {
            format!("{http:?}: {status} {}", String::from_utf8_lossy(&body))
        })?;
        let error: Value = serde_json::from_slice(&body)?;
        ensure(
            error["error"]
                .as_str()
                .is_some_and(|e| e.contains("--body-timeout")),
            || format!("{http:?}: {error}"),
        )?;
        ensure(took >= Duration::from_millis(900), || {
            format!("{http:?}: answered 408 after only {took:?}")
        })?;

        // A byte every 300 ms: behind the pace once the second has passed.
        let started = Instant::now();
        let (mut tx, answer) = stalled_review(http, addr, &ca, &review, 1).await?;
        let trickle = tokio::spawn(async move {
            for _ in 0..100 {
                tokio::time::sleep(Duration::from_millis(300)).await;
                if tx.send_data(Bytes::from_static(b" ")).await.is_err() {
                    break;
                }
            }
        });
        let (status, _) = tokio::time::timeout(Duration::from_secs(8), answer)
            .await
            .map_err(|_| fail(format!("{http:?}: a trickled body held its slot for 8 s")))???;
        trickle.abort();
        let took = started.elapsed();
        eprintln!("figure: {http:?}, a byte every 300 ms: {status} after {took:.2?}");
        ensure(status == StatusCode::REQUEST_TIMEOUT, || {
            format!("{http:?}, trickled: {status}")
        })?;
    }
    eventually(PATIENCE, "the stalled requests' slots freed", || async {
        (in_flight(admin).await.ok()? == 0.0).then_some(())
    })
    .await?;
    let timeouts = metric_now(
        admin,
        "kserve_injector_requests_total{path=\"/mutate-pods\",code=\"408\"}",
    )
    .await?;
    ensure(timeouts == 4.0, || format!("408s counted: {timeouts}"))?;
    // A body that keeps its pace is answered as ever.
    let (status, _) = Client::open(addr, &ca, Http::H2)
        .await?
        .post_json("/mutate-pods", review)
        .await?;
    ensure(status == StatusCode::OK, || format!("after: {status}"))?;
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_holds_at_most_its_share_of_the_requests_in_flight() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let flags = ["--shutdown-delay", "0s", "--body-timeout", "60s"];
    let (server, ca) = start_self_signed(tmp.path(), &flags).await?;
    let (addr, admin) = (server.local_addr(), server.admin_addr());
    // Four connections each trying to hold 128 streams that never send
    // their bodies.
    let mut attackers = Vec::new();
    let mut advertised = Vec::new();
    for _ in 0..4 {
        let (client, driver) = raw_h2(addr, &ca).await?;
        let mut client = client.ready().await?;
        // The server's SETTINGS, once they came (a client may open streams
        // before, which a server refuses past its limit).
        for _ in 0..100 {
            if client.current_max_send_streams() != usize::MAX {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            client = client.ready().await?;
        }
        advertised.push(client.current_max_send_streams());
        let held = promises_until_refused(client, 128, Duration::from_millis(300)).await?;
        attackers.push((held, driver));
    }
    // As many in flight as the server let open, once they all arrived.
    let mut flying = -1.0;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = in_flight(admin).await?;
        if now == flying {
            break;
        }
        flying = now;
    }
    eprintln!(
        "figure: 4 connections each opening up to 128 streams that send nothing: \
         the server advertised {advertised:?} streams a connection, {flying} in flight"
    );
    ensure(advertised.iter().all(|n| *n <= 8), || {
        format!("streams a connection may open: {advertised:?}")
    })?;
    ensure(flying <= 32.0, || format!("{flying} in flight"))?;
    // A real review meanwhile: answered at once.
    let (_, review) = sample_review()?;
    let started = Instant::now();
    let (status, _) = Client::open(addr, &ca, Http::H2)
        .await?
        .post_json("/mutate-pods", review)
        .await?;
    ensure(status == StatusCode::OK, || {
        format!("a review beside {flying} stalled streams: {status}")
    })?;
    eprintln!(
        "figure: a review beside them: {status} in {:.2?}",
        started.elapsed()
    );
    stop(server).await
}

/// A review every `every` on one kept HTTP/2 connection until `stop`:
/// the reviews answered 200, and everything else that happened.
struct Productive {
    stop: Arc<std::sync::atomic::AtomicBool>,
    answered: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<Vec<String>>,
}

impl Productive {
    async fn start(addr: std::net::SocketAddr, ca: &str, every: Duration) -> Result<Self, Error> {
        let (_, review) = sample_review()?;
        let mut client = Client::open(addr, ca, Http::H2).await?;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let answered = Arc::new(AtomicUsize::new(0));
        let (stopped, count) = (stop.clone(), answered.clone());
        let task = tokio::spawn(async move {
            let mut trouble = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                let body = full(Bytes::from(review.clone()));
                let request = match post("/mutate-pods", Some("application/json"), body) {
                    Ok(request) => request,
                    Err(e) => return vec![e.to_string()],
                };
                match client.call_or_refused(request).await {
                    Ok(Some((StatusCode::OK, _))) => {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Some((status, _))) => trouble.push(format!("answered {status}")),
                    Ok(None) => {
                        trouble.push("closed by the server (GOAWAY)".into());
                        return trouble;
                    }
                    Err(e) => {
                        trouble.push(e.to_string());
                        return trouble;
                    }
                }
                tokio::time::sleep(every).await;
            }
            if !client.ready().await {
                trouble.push("closed by the server".into());
            }
            trouble
        });
        Ok(Self {
            stop,
            answered,
            task,
        })
    }

    async fn finish(self) -> Result<(usize, Vec<String>), Error> {
        self.stop.store(true, Ordering::Relaxed);
        let trouble = tokio::time::timeout(PATIENCE, self.task).await??;
        Ok((self.answered.load(Ordering::Relaxed), trouble))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_a_connection_that_completes_no_review_gives_its_slot_never_the_productive_one(
) -> TestResult {
    let tmp = tempfile::tempdir()?;
    // Deadlines far past the test: only eviction can free a slot.
    let flags = [
        "--shutdown-delay",
        "0s",
        "--max-connections",
        "4",
        "--idle-timeout",
        "600s",
        "--first-request-timeout",
        "600s",
        "--request-timeout",
        "600s",
        "--body-timeout",
        "600s",
    ];
    let (server, ca) = start_self_signed(tmp.path(), &flags).await?;
    let (addr, admin) = (server.local_addr(), server.admin_addr());
    let productive = Productive::start(addr, &ca, Duration::from_millis(100)).await?;
    // Three connections that each keep a request in flight whose body
    // never comes: never idle, never productive.
    let mut stalled = Vec::new();
    for _ in 0..3 {
        let (mut client, driver) = raw_h2(addr, &ca).await?;
        client = client.ready().await?;
        stalled.push((promise(&mut client, 1000)?, driver));
    }
    eventually(PATIENCE, "three stalled requests in flight", || async {
        (in_flight(admin).await.ok()? >= 3.0).then_some(())
    })
    .await?;
    let (_, review) = sample_review()?;
    let (mut waits, mut kept) = (Vec::new(), Vec::new());
    for i in 0..3 {
        // Each new connection at the cap is served at once: it takes the
        // slot of a connection that completed no review.
        let started = Instant::now();
        let mut client =
            tokio::time::timeout(Duration::from_secs(5), Client::open(addr, &ca, Http::H2))
                .await
                .map_err(|_| {
                    fail(format!(
                        "new connection {i} at the cap waited 5 s for a slot"
                    ))
                })??;
        let (status, _) = client.post_json("/mutate-pods", review.clone()).await?;
        let took = started.elapsed();
        waits.push(took);
        // Kept open, so the next one arrives at the cap too.
        kept.push(client);
        ensure(status == StatusCode::OK, || {
            format!("new connection {i}: {status}")
        })?;
        ensure(took < Duration::from_secs(3), || {
            format!("new connection {i} answered only after {took:?}")
        })?;
    }
    // The productive connection keeps completing reviews after the
    // evictions: it was never the one chosen.
    let count = productive.answered.clone();
    let before = count.load(Ordering::Relaxed);
    eventually(
        PATIENCE,
        "three more reviews on the productive connection",
        || {
            let count = count.clone();
            async move { (count.load(Ordering::Relaxed) >= before + 3).then_some(()) }
        },
    )
    .await?;
    // The stalled requests of the evicted connections were answered (503,
    // retry elsewhere) or their connections closed.
    for ((response, _sending), driver) in stalled {
        if let Ok(answer) = tokio::time::timeout(PATIENCE, response).await? {
            ensure(answer.status() == StatusCode::SERVICE_UNAVAILABLE, || {
                format!("an evicted stalled request: {}", answer.status())
            })?;
        }
        tokio::time::timeout(PATIENCE, driver).await??;
    }
    let (answered, trouble) = productive.finish().await?;
    eprintln!(
        "figure: --max-connections 4, one connection reviewing every 100 ms and three with a \
         stalled request each: 3 new connections answered in {waits:.2?}; the productive one \
         answered {answered} reviews, trouble {trouble:?}"
    );
    ensure(trouble.is_empty(), || {
        format!("the productive connection: {trouble:?}")
    })?;
    ensure(answered >= before + 3, || {
        format!("the productive connection answered {answered}")
    })?;
    let evicted = metric_now(admin, "kserve_injector_connection_evictions_total").await?;
    ensure(evicted == 3.0, || format!("evictions {evicted}"))?;
    stop(server).await
}
