//! The server as a hostile client and a careless operator would try it, on
//! real sockets and real TLS: silent HTTP/2 connections, too many
//! connections, too many buffered bytes and requests, certificates outside
//! their validity window, a flood next to the probes, a drain under paced
//! load, and a second instance on a port already taken.

use crate::support::*;
use http_body_util::BodyExt;
use hyper::body::Bytes;
use hyper::StatusCode;
use kserve_injector::server::args::ServeArgs;
use kserve_injector::server::Server;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// Waits for the server to close a connection; returns how long it took.
async fn closed_within(
    mut stream: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    limit: Duration,
) -> Result<Duration, Error> {
    let started = Instant::now();
    let mut buf = [0u8; 256];
    tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await
    .map_err(|_| fail(format!("connection still open after {limit:?}")))?;
    Ok(started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_connections_without_a_preface_are_closed_at_the_first_request_deadline() -> TestResult
{
    let tmp = tempfile::tempdir()?;
    let flags = ["--shutdown-delay", "0s", "--first-request-timeout", "1s"];
    let (server, ca) = start_self_signed(tmp.path(), &flags).await?;
    let addr = server.local_addr();
    let mut silent = Vec::new();
    for _ in 0..40 {
        let stream = tls_connect(addr, client_config(&ca, Http::H2)?).await?;
        silent.push((stream, Instant::now()));
    }
    let (_, review) = sample_review()?;
    let (status, _) = Client::open(addr, &ca, Http::H2)
        .await?
        .post_json("/mutate-pods", review)
        .await?;
    ensure(status == StatusCode::OK, || {
        format!("a real request during the attack: {status}")
    })?;
    let mut waits = Vec::new();
    for (stream, opened) in silent {
        waits.push(tokio::spawn(async move {
            closed_within(stream, Duration::from_secs(10)).await?;
            Ok::<_, Error>(opened.elapsed())
        }));
    }
    let (mut first, mut last) = (Duration::MAX, Duration::ZERO);
    for wait in waits {
        let took = wait.await??;
        (first, last) = (first.min(took), last.max(took));
        ensure(took < Duration::from_secs(5), || {
            format!("closed only after {took:?}")
        })?;
    }
    eprintln!(
        "figure: 40 preface-less h2 connections, --first-request-timeout 1s: closed \
         {first:.2?} to {last:.2?} after their handshake; a real h2 request during the attack: {status}"
    );
    let closed = metric_now(
        server.admin_addr(),
        "kserve_injector_connection_deadlines_total",
    )
    .await?;
    ensure(closed >= 40.0, || format!("deadline closes = {closed}"))?;
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_give_their_slots_to_real_clients_at_the_cap() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let flags = [
        "--shutdown-delay",
        "0s",
        "--max-connections",
        "4",
        "--first-request-timeout",
        "60s",
        "--handshake-timeout",
        "60s",
    ];
    let (server, ca) = start_self_signed(tmp.path(), &flags).await?;
    let addr = server.local_addr();
    // Two that never start TLS, two that never send a request after it.
    let mut silent_tcp = Vec::new();
    for _ in 0..2 {
        silent_tcp.push(tokio::net::TcpStream::connect(addr).await?);
    }
    let mut silent_tls = Vec::new();
    for _ in 0..2 {
        silent_tls.push(tls_connect(addr, client_config(&ca, Http::H2)?).await?);
    }
    let (_, review) = sample_review()?;
    let started = Instant::now();
    let (status, _) = Client::open(addr, &ca, Http::H2)
        .await?
        .post_json("/mutate-pods", review)
        .await?;
    let took = started.elapsed();
    ensure(status == StatusCode::OK, || {
        format!("a real request at the cap: {status}")
    })?;
    // Not the 60 s deadlines: a silent one gives up its slot at the cap.
    ensure(took < Duration::from_secs(10), || {
        format!("the real request waited {took:?}")
    })?;
    eprintln!(
        "figure: --max-connections 4 held by 2 silent TCP and 2 silent TLS connections \
         (60 s deadlines): a real h2 request answered {status} after {took:.2?}"
    );
    // The real client took a silent one's slot (idle since its accept, so
    // the longest idle), or a silent one gave its slot up at the cap.
    let admin = server.admin_addr();
    let closed = metric_now(admin, "kserve_injector_connection_deadlines_total").await?;
    let evicted = metric_now(admin, "kserve_injector_connection_evictions_total").await?;
    ensure(closed + evicted >= 1.0, || {
        format!("deadline closes = {closed}, evictions = {evicted}")
    })?;
    drop((silent_tcp, silent_tls));
    stop(server).await
}

/// This process's resident set (server and test clients together), MiB.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:"));
    let kib = line.and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok());
    kib.unwrap_or(f64::NAN) / 1024.0
}

/// A request whose body is still arriving, and the sender to finish it.
async fn slow_request(
    addr: std::net::SocketAddr,
    ca: &str,
    http: Http,
    first_part: Vec<u8>,
) -> Result<
    (
        http_body_util::channel::Sender<Bytes>,
        tokio::task::JoinHandle<Result<(StatusCode, Bytes), Error>>,
    ),
    Error,
> {
    let (mut tx, channel) = http_body_util::Channel::<Bytes, std::convert::Infallible>::new(4);
    tx.send_data(Bytes::from(first_part)).await?;
    let mut client = Client::open(addr, ca, http).await?;
    let req = post("/mutate-pods", Some("application/json"), channel.boxed())?;
    Ok((tx, tokio::spawn(async move { client.call(req).await })))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffered_bytes_and_concurrent_requests_are_capped_with_503_and_retry_after() -> TestResult
{
    let tmp = tempfile::tempdir()?;
    let budget = (8usize << 20).to_string();
    let flags = [
        "--shutdown-delay",
        "0s",
        "--max-buffered-bytes",
        budget.as_str(),
        "--max-concurrent-requests",
        "2",
    ];
    let (server, ca) = start_self_signed(tmp.path(), &flags).await?;
    let (addr, admin) = (server.local_addr(), server.admin_addr());
    let in_flight = |n: f64| async move {
        let now = metric_now(admin, "kserve_injector_requests_in_flight")
            .await
            .ok()?;
        (now >= n).then_some(())
    };

    let rss_before = rss_mib();
    // 6 MiB held by one slow request: a 3 MiB one does not fit next to it.
    let (mut big_tx, big) = slow_request(addr, &ca, Http::H1, vec![b' '; 6 << 20]).await?;
    eventually(PATIENCE, "the big request in flight", || in_flight(1.0)).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // HTTP/2: refused before its body is read, the stream is reset and the
    // connection stays; HTTP/1 would have to close it mid-upload.
    let mut client = Client::open(addr, &ca, Http::H2).await?;
    let response = client
        .send(post(
            "/mutate-pods",
            Some("application/json"),
            full(vec![b' '; 3 << 20]),
        )?)
        .await?;
    ensure(response.status() == StatusCode::SERVICE_UNAVAILABLE, || {
        format!("over the byte budget: {}", response.status())
    })?;
    ensure(response.headers().get("retry-after").is_some(), || {
        "no Retry-After".into()
    })?;
    eprintln!(
        "figure: --max-buffered-bytes 8 MiB with 6 MiB held: a 3 MiB h2 request got {} \
         (Retry-After {:?}); test process RSS (server + clients) {rss_before:.0} -> {:.0} MiB",
        response.status(),
        response.headers().get("retry-after"),
        rss_mib()
    );

    // Two requests in flight: a third is shed.
    let (_, review) = sample_review()?;
    let half = review.len() / 2;
    let (mut slow_tx, slow) = slow_request(addr, &ca, Http::H2, review[..half].to_vec()).await?;
    eventually(PATIENCE, "two requests in flight", || in_flight(2.0)).await?;
    let mut client = Client::open(addr, &ca, Http::H2).await?;
    let response = client
        .send(post(
            "/mutate-pods",
            Some("application/json"),
            full(review.clone()),
        )?)
        .await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    ensure(status == StatusCode::SERVICE_UNAVAILABLE, || {
        format!("above the concurrency limit: {status}")
    })?;
    let error: Value = serde_json::from_slice(&body)?;
    ensure(error["error"].is_string(), || {
        format!("not a JSON error: {body:?}")
    })?;
    eprintln!(
        "figure: --max-concurrent-requests 2 with 2 in flight: a third got {status}: {}",
        error["error"]
    );

    big_tx.send_data(Bytes::from_static(b"{}")).await?;
    drop(big_tx);
    slow_tx
        .send_data(Bytes::copy_from_slice(&review[half..]))
        .await?;
    drop(slow_tx);
    let (big_status, _) = tokio::time::timeout(PATIENCE, big).await???;
    ensure(big_status == StatusCode::BAD_REQUEST, || {
        format!("the big request, once complete: {big_status}")
    })?;
    let (slow_status, _) = tokio::time::timeout(PATIENCE, slow).await???;
    ensure(slow_status == StatusCode::OK, || {
        format!("the slow request, once complete: {slow_status}")
    })?;
    let (status, _) = client.post_json("/mutate-pods", review).await?;
    ensure(status == StatusCode::OK, || {
        format!("after the load: {status}")
    })?;
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_outside_their_validity_window_are_refused() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let ca = Ca::new("validity CA")?;
    let now = time::OffsetDateTime::now_utc();
    let day = time::Duration::days(1);
    let expired = ca.server_valid("expired", now - day * 30, now - day)?;
    let future = ca.server_valid("future", now + day, now + day * 30)?;
    for (name, leaf) in [("expired", &expired), ("not yet valid", &future)] {
        let dir = tmp.path().join(name.replace(' ', "-"));
        KubeletDir::create(&dir, &as_refs(&cert_files(leaf)))?;
        let dir = dir.to_string_lossy().into_owned();
        match start(&["--cert-dir", dir.as_str()]).await {
            Ok(_) => return Err(fail(format!("started with an {name} certificate"))),
            Err(e) => {
                eprintln!("figure: startup refused ({name} certificate): {e}");
                ensure(e.to_string().contains("not now"), || {
                    format!("{name}: unclear error: {e}")
                })?
            }
        }
    }

    // Expiring in a few seconds: loads now, then /readyz fails once it expires.
    let short = ca.server_valid("short", now - day, now + time::Duration::seconds(8))?;
    let mut dir = KubeletDir::create(&tmp.path().join("live"), &as_refs(&cert_files(&short)))?;
    let path = dir.path.to_string_lossy().into_owned();
    let flags = ["--cert-dir", path.as_str(), "--cert-poll-interval", "200ms"];
    let server = start(&flags).await?;
    let (addr, admin) = (server.local_addr(), server.admin_addr());
    ensure(
        admin_get(admin, "/readyz").await?.0 == StatusCode::OK,
        || "not ready with a valid certificate".into(),
    )?;
    dir.swap(&as_refs(&cert_files(&expired)))?;
    let errors = "kserve_injector_certificate_reload_errors_total{cert=\"serving\"}";
    eventually(
        PATIENCE,
        "the refused reload to be counted",
        || async move { (metric_now(admin, errors).await.ok()? >= 1.0).then_some(()) },
    )
    .await?;
    // Not valid for a day: pending, not an error, until then.
    dir.swap(&as_refs(&cert_files(&future)))?;
    let pending =
        "kserve_injector_certificate_pending_not_before_timestamp_seconds{cert=\"serving\"}";
    let valid_from = (now + day).unix_timestamp() as f64;
    eventually(
        PATIENCE,
        "the not-yet-valid pair to be pending",
        || async move { (metric_now(admin, pending).await.ok()? == valid_from).then_some(()) },
    )
    .await?;
    ensure(served_cert(addr, &ca.pem).await? == short.der, || {
        "an invalid certificate replaced the valid one".into()
    })?;
    eprintln!(
        "figure: expired then not-yet-valid pair swapped in: reload errors {}, \
         pending until {valid_from}, the valid certificate still served",
        metric_now(admin, errors).await?
    );
    eventually(
        Duration::from_secs(25),
        "/readyz to fail once the certificate expired",
        || async move {
            let (status, body) = admin_get(admin, "/readyz").await.ok()?;
            (status == StatusCode::SERVICE_UNAVAILABLE && body.contains("expired")).then_some(())
        },
    )
    .await?;
    let lag = time::OffsetDateTime::now_utc() - (now + time::Duration::seconds(8));
    eprintln!("figure: /readyz 503 \"expired\" {lag:.1} after the certificate's notAfter");
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer_within_a_second_under_a_flood_of_expensive_reviews() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (server, ca) = start_self_signed(tmp.path(), &["--shutdown-delay", "0s"]).await?;
    let (addr, admin) = (server.local_addr(), server.admin_addr());
    let (mut pod, _) = sample_review()?;
    // Close to the body limit (reviewed on the blocking pool) and just under
    // the inline threshold (reviewed on the async workers).
    let mut reviews = Vec::new();
    for size in [6 << 20, 60 << 10] {
        pod["metadata"]["annotations"]["example.com/blob"] = Value::String("x".repeat(size));
        reviews.push(review_request(&pod, "admission.k8s.io/v1", "flood")?);
    }
    let stop_flood = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let mut flood = Vec::new();
    for i in 0..8 {
        let (ca, review) = (ca.clone(), reviews[i % 2].clone());
        let (stop_flood, answered) = (stop_flood.clone(), answered.clone());
        flood.push(tokio::spawn(async move {
            let http = if i % 4 < 2 { Http::H1 } else { Http::H2 };
            let mut client = Client::open(addr, &ca, http).await?;
            while !stop_flood.load(Ordering::Relaxed) {
                let (status, _) = client.post_json("/mutate-pods", review.clone()).await?;
                ensure(status == StatusCode::OK, || format!("flood: {status}"))?;
                answered.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, Error>(())
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut slowest = Duration::ZERO;
    let mut latencies = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(4) {
        for path in ["/healthz", "/readyz", "/metrics"] {
            let asked = Instant::now();
            let (status, _) = admin_get(admin, path).await?;
            slowest = slowest.max(asked.elapsed());
            latencies.push(asked.elapsed());
            ensure(status == StatusCode::OK, || format!("{path}: {status}"))?;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop_flood.store(true, Ordering::Relaxed);
    for task in flood {
        tokio::time::timeout(PATIENCE * 3, task).await???;
    }
    ensure(answered.load(Ordering::Relaxed) > 0, || {
        "the flood never got an answer".into()
    })?;
    latencies.sort();
    let p = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    eprintln!(
        "figure: 8 clients flooding 6 MiB and 60 KiB reviews ({} answered in ~4.5 s): \
         {} admin probes, p50 {:.1?}, p99 {:.1?}, slowest {slowest:.1?}",
        answered.load(Ordering::Relaxed),
        latencies.len(),
        p(0.5),
        p(0.99)
    );
    ensure(slowest < Duration::from_secs(1), || {
        format!("slowest probe under the flood: {slowest:?}")
    })?;
    stop(server).await
}

#[derive(Default)]
struct Tally {
    sent: AtomicU64,
    answered: AtomicU64,
    moved: AtomicU64,
    lost: std::sync::Mutex<Vec<String>>,
}

/// Paced requests on a kept connection; a new connection when the server
/// closes it; done when no connection can be opened (the listener closed).
async fn paced_client(addr: std::net::SocketAddr, ca: String, http: Http, tally: Arc<Tally>) {
    let Ok((_, review)) = sample_review() else {
        return;
    };
    let mut kept: Option<Client> = None;
    loop {
        let reusable = match kept.as_mut() {
            Some(c) => c.ready().await,
            None => false,
        };
        let mut client = match kept.take() {
            Some(c) if reusable => c,
            previous => {
                if previous.is_some() {
                    tally.moved.fetch_add(1, Ordering::Relaxed);
                }
                match Client::open(addr, &ca, http).await {
                    Ok(c) => c,
                    Err(_) => return,
                }
            }
        };
        let req = match post(
            "/mutate-pods",
            Some("application/json"),
            full(review.clone()),
        ) {
            Ok(req) => req,
            Err(e) => return tally.lost.lock().unwrap().push(e.to_string()),
        };
        let answer = match client.call_or_refused(req).await {
            // Not processed: a client retries it on a new connection.
            Ok(None) => {
                tally.moved.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Ok(Some(answer)) => Ok(answer),
            Err(e) => Err(e),
        };
        tally.sent.fetch_add(1, Ordering::Relaxed);
        match answer {
            Ok((StatusCode::OK, _)) => {
                tally.answered.fetch_add(1, Ordering::Relaxed);
                kept = Some(client);
            }
            Ok((status, _)) => tally
                .lost
                .lock()
                .unwrap()
                .push(format!("{http:?}: {status}")),
            Err(e) => tally.lost.lock().unwrap().push(format!("{http:?}: {e}")),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_answers_every_request_sent_over_http1_and_http2() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let flags = ["--shutdown-delay", "1s", "--drain-timeout", "10s"];
    let (server, ca) = start_self_signed(tmp.path(), &flags).await?;
    let addr = server.local_addr();
    let mut tallies = Vec::new();
    let mut clients = Vec::new();
    for http in Http::BOTH {
        let tally = Arc::new(Tally::default());
        for _ in 0..3 {
            clients.push(tokio::spawn(paced_client(
                addr,
                ca.clone(),
                http,
                tally.clone(),
            )));
        }
        tallies.push((http, tally));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let handle = server.shutdown_handle();
    let exited = tokio::spawn(server.wait());
    handle.shutdown();
    for client in clients {
        tokio::time::timeout(PATIENCE, client).await??;
    }
    tokio::time::timeout(PATIENCE, exited).await???;
    for (http, tally) in tallies {
        let lost = tally.lost.lock().unwrap().clone();
        let (sent, answered) = (
            tally.sent.load(Ordering::Relaxed),
            tally.answered.load(Ordering::Relaxed),
        );
        let moved = tally.moved.load(Ordering::Relaxed);
        eprintln!(
            "figure: drain (--shutdown-delay 1s), 3 paced {http:?} clients: {sent} sent, \
             {answered} answered, {} lost, {moved} reconnects when told to move",
            lost.len()
        );
        ensure(lost.is_empty() && sent == answered, || {
            format!("{http:?}: {sent} sent, {answered} answered, lost: {lost:?}")
        })?;
        ensure(answered > 0, || format!("{http:?}: nothing answered"))?;
        // Told to move during the delay: Connection: close or GOAWAY.
        ensure(tally.moved.load(Ordering::Relaxed) >= 3, || {
            format!("{http:?}: clients were not asked to reconnect")
        })?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_instance_on_a_taken_port_leaves_the_running_ca_alone() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (server, ca) = start_self_signed(tmp.path(), &["--shutdown-delay", "0s"]).await?;
    let ca_file = tmp.path().join("ca.crt");
    let (addr, ca_path) = (server.local_addr().to_string(), ca_file.to_string_lossy());
    let args = ServeArgs::try_parse_from([
        "--self-signed",
        "--self-signed-ca-file",
        &ca_path,
        "--addr",
        &addr,
        "--admin-addr",
        "127.0.0.1:0",
        "--cluster-lookups",
        "off",
    ])?;
    let second = Server::start(args).await;
    ensure(second.is_err(), || "the second instance started".into())?;
    if let Err(e) = &second {
        eprintln!("figure: a second --self-signed instance on a taken port: {e}");
    }
    ensure(std::fs::read_to_string(&ca_file)? == ca, || {
        "the second instance replaced the running one's CA".into()
    })?;
    eprintln!("figure: the running instance's CA file unchanged after the second one failed");
    let leftovers = std::fs::read_dir(tmp.path())?.count();
    ensure(leftovers == 1, || {
        format!("{leftovers} files in the CA directory")
    })?;
    let (_, review) = sample_review()?;
    let (status, _) = Client::open(server.local_addr(), &ca, Http::H1)
        .await?
        .post_json("/mutate-pods", review)
        .await?;
    ensure(status == StatusCode::OK, || format!("{status}"))?;
    stop(server).await
}
