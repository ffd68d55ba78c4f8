//! Answers nobody reads, over real sockets: counted while they wait, new
//! requests refused past a connection's budget, the connection closed after
//! `--write-timeout`, and everything given back; HEAD answered without a body.

use crate::support::*;
use hyper::body::Bytes;
use serde_json::Value;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An HTTP/2 connection whose stream window is 0: the server may send
/// answer heads, never their bodies.
async fn unread_h2(
    addr: std::net::SocketAddr,
    ca: &str,
) -> Result<h2::client::SendRequest<Bytes>, Error> {
    windowed_h2(addr, ca, 0).await
}

/// An HTTP/2 connection whose streams' window is `window` bytes, never
/// opened further.
async fn windowed_h2(
    addr: std::net::SocketAddr,
    ca: &str,
    window: u32,
) -> Result<h2::client::SendRequest<Bytes>, Error> {
    let tls = tls_connect(addr, client_config(ca, Http::H2)?).await?;
    let (client, connection) = h2::client::Builder::new()
        .initial_window_size(window)
        .handshake::<_, Bytes>(tls)
        .await?;
    tokio::spawn(connection);
    Ok(client)
}

/// Sends `body` on a new stream and waits for the answer's head; the
/// answer's body is kept in `held`, unread (dropping it would reset the
/// stream).
async fn head_of(
    client: &mut h2::client::SendRequest<Bytes>,
    body: &[u8],
    held: &mut Vec<hyper::Response<h2::RecvStream>>,
) -> Result<Result<hyper::StatusCode, h2::Error>, Error> {
    let request = hyper::Request::post("https://localhost/mutate-pods")
        .header("content-type", "application/json")
        .body(())?;
    let ready = client.clone().ready().await?;
    *client = ready;
    let (response, mut send) = client.send_request(request, false)?;
    send.reserve_capacity(body.len());
    send.send_data(Bytes::copy_from_slice(body), true)?;
    let head = tokio::time::timeout(PATIENCE, response).await?;
    Ok(head.map(|r| {
        let status = r.status();
        held.push(r);
        status
    }))
}

/// The sample review with a storage URI of `uri_bytes`: its answer is about
/// four times that.
fn review_with_uri(uri_bytes: usize) -> Result<Vec<u8>, Error> {
    let (mut pod, _) = sample_review()?;
    pod["metadata"]["annotations"]["internal.serving.kserve.io/storage-initializer-sourceuri"] =
        Value::String(format!(
            "oci://registry.example.com/{}",
            "m".repeat(uri_bytes)
        ));
    review_request(&pod, "admission.k8s.io/v1", "big-uid")
}

async fn gauges_at_zero(admin: std::net::SocketAddr) -> Result<(), Error> {
    eventually(PATIENCE, "the waiting answers to be given back", || async {
        let answers = metric_now(admin, "kserve_injector_answers_waiting")
            .await
            .ok()?;
        let bytes = metric_now(admin, "kserve_injector_answer_bytes_waiting")
            .await
            .ok()?;
        (answers == 0.0 && bytes == 0.0).then_some(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_http2_answers_are_counted_refused_past_the_budget_and_closed() -> TestResult {
    let dir = tempfile::tempdir()?;
    // More streams than answers may wait, so the budget is what refuses.
    let flags = [
        "--write-timeout",
        "1s",
        "--http2-max-concurrent-streams",
        "16",
    ];
    let (server, ca) = start_self_signed(dir.path(), &flags).await?;
    let (_, body) = sample_review()?;
    let mut client = unread_h2(server.local_addr(), &ca).await?;
    let (mut answered, mut refused, mut held) = (0, 0, Vec::new());
    for _ in 0..12 {
        match head_of(&mut client, &body, &mut held).await {
            Ok(Ok(status)) => {
                ensure(status == 200, || format!("status {status}"))?;
                answered += 1;
            }
            Ok(Err(e)) if e.reason() == Some(h2::Reason::REFUSED_STREAM) => refused += 1,
            // The connection closed for the write timeout: every stream after it fails.
            Ok(Err(_)) | Err(_) => break,
        }
    }
    // Eight answers wait on one connection at most; the next streams are
    // refused unread, which clients retry elsewhere.
    ensure(answered == 8 && refused >= 1, || {
        format!("answered {answered}, refused {refused}")
    })?;
    let admin = server.admin_addr();
    let waiting = metric_now(admin, "kserve_injector_answers_waiting").await?;
    ensure(waiting == 8.0, || format!("answers_waiting {waiting}"))?;
    let bytes = metric_now(admin, "kserve_injector_answer_bytes_waiting").await?;
    ensure(bytes > 8.0 * 500.0, || {
        format!("answer_bytes_waiting {bytes}")
    })?;
    let in_flight = metric_now(admin, "kserve_injector_requests_in_flight").await?;
    ensure(in_flight == 0.0, || {
        format!("requests_in_flight {in_flight}")
    })?;

    // Within twice the write timeout the connection is closed and what it
    // held is given back.
    let started = Instant::now();
    eventually(
        Duration::from_secs(5),
        "the write timeout to close the connection",
        || {
            let client = client.clone();
            async move { client.ready().await.is_err().then_some(()) }
        },
    )
    .await?;
    gauges_at_zero(admin).await?;
    let closed = metric_now(admin, "kserve_injector_write_timeouts_total").await?;
    ensure(closed == 1.0, || format!("write_timeouts_total {closed}"))?;
    ensure(started.elapsed() < Duration::from_secs(4), || {
        format!("closed after {:?}", started.elapsed())
    })?;

    // A client that reads is answered as ever.
    let mut reader = Client::open(server.local_addr(), &ca, Http::H2).await?;
    let (status, _) = reader
        .call(post("/mutate-pods", Some("application/json"), full(body))?)
        .await?;
    ensure(status == 200, || format!("status {status}"))?;
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_that_lets_a_byte_through_keeps_the_answer_counted() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (server, ca) = start_self_signed(dir.path(), &["--write-timeout", "60s"]).await?;
    // An answer of about 8 KB, over what is handed to h2 whole.
    let body = review_with_uri(2 * 1024)?;
    // One byte of each answer may go out; h2 would hold the rest for a
    // client that never opens its window further.
    let mut client = windowed_h2(server.local_addr(), &ca, 1).await?;
    let mut held = Vec::new();
    for _ in 0..3 {
        let status = head_of(&mut client, &body, &mut held).await??;
        ensure(status == 200, || format!("status {status}"))?;
    }
    let admin = server.admin_addr();
    // Still counted, all three: an answer stops being counted only once all
    // of it but its last byte fits in the window the client granted.
    let waiting = eventually(PATIENCE, "three answers counted", || async {
        let n = metric_now(admin, "kserve_injector_answers_waiting")
            .await
            .ok()?;
        (n == 3.0).then_some(n)
    })
    .await;
    let now = metric_now(admin, "kserve_injector_answers_waiting").await?;
    let bytes = metric_now(admin, "kserve_injector_answer_bytes_waiting").await?;
    ensure(waiting.is_ok(), || {
        format!("{waiting:?}: {now} answers, {bytes} bytes")
    })?;
    drop((client, held));
    gauges_at_zero(admin).await?;
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_client_that_does_not_read_is_closed_after_the_write_timeout() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (server, ca) = start_self_signed(dir.path(), &["--write-timeout", "1s"]).await?;
    // About 1 MB of answer against a receive buffer of a few KiB: the
    // server's writes stop going out.
    let body = review_with_uri(250 * 1024)?;
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_recv_buffer_size(4096)?;
    let tcp = socket.connect(server.local_addr()).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost")?;
    let connector = tokio_rustls::TlsConnector::from(client_config(&ca, Http::H1)?);
    let mut tls = connector.connect(name, tcp).await?;
    let head = format!(
        "POST /mutate-pods HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await?;
    tls.write_all(&body).await?;
    let admin = server.admin_addr();
    eventually(PATIENCE, "the answer to wait", || async {
        let bytes = metric_now(admin, "kserve_injector_answer_bytes_waiting")
            .await
            .ok()?;
        (bytes > 500_000.0).then_some(())
    })
    .await?;
    // Not read for the write timeout: the connection is closed.
    eventually(Duration::from_secs(5), "the write timeout", || async {
        let closed = metric_now(admin, "kserve_injector_write_timeouts_total")
            .await
            .ok()?;
        (closed == 1.0).then_some(())
    })
    .await?;
    gauges_at_zero(admin).await?;
    // What the client reads now ends: the server's side is gone.
    let mut sink = vec![0u8; 64 * 1024];
    let drained = tokio::time::timeout(PATIENCE, async {
        loop {
            match tls.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    ensure(drained.is_ok(), || "the connection was not closed".into())?;
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_does_not_fit_the_byte_budget_is_shed() -> TestResult {
    let dir = tempfile::tempdir()?;
    let flags = [
        "--max-buffered-bytes",
        "7340032",
        "--max-connection-buffered-bytes",
        "67108864",
        "--write-timeout",
        "60s",
    ];
    let (server, ca) = start_self_signed(dir.path(), &flags).await?;
    // Sized so that after seven answers the eighth request's body still
    // fits in 7 MiB and its answer (about four times the URI) does not.
    let body = review_with_uri(235 * 1024)?;
    let mut client = unread_h2(server.local_addr(), &ca).await?;
    let (mut statuses, mut held) = (Vec::new(), Vec::new());
    // Eight: the answers one connection may have waiting.
    for _ in 0..8 {
        statuses.push(head_of(&mut client, &body, &mut held).await??);
    }
    // As many answers as fit in 7 MiB are answered, and the next is shed.
    let length = held[0].headers()["content-length"]
        .to_str()?
        .parse::<usize>()?;
    let fit = 7340032 / length;
    let want: Vec<u16> = (0..8).map(|i| if i < fit { 200 } else { 503 }).collect();
    let got: Vec<u16> = statuses.iter().map(|s| s.as_u16()).collect();
    ensure(fit < 8 && got == want, || {
        format!("{length} bytes each: {got:?}")
    })?;
    let shed = metric_now(server.admin_addr(), "kserve_injector_answers_shed_total").await?;
    ensure(shed == 1.0, || format!("answers_shed_total {shed}"))?;
    // Gone, the client takes its unread answers with it.
    drop((client, held));
    gauges_at_zero(server.admin_addr()).await?;
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_gets_its_status_and_headers_without_a_body() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (server, ca) = start_self_signed(dir.path(), &[]).await?;
    for http in Http::BOTH {
        let mut client = Client::open(server.local_addr(), &ca, http).await?;
        for (path, want) in [("/mutate-pods", 405), ("/elsewhere", 404)] {
            let request = hyper::Request::head(format!("https://localhost{path}"))
                .body(full(Bytes::new()))?;
            let (status, body) = client.call(request).await?;
            ensure(status == want && body.is_empty(), || {
                format!("{http:?} HEAD {path}: {status} with {} bytes", body.len())
            })?;
        }
        // The connection carries the next request.
        let (_, review) = sample_review()?;
        let (status, _) = client
            .call(post(
                "/mutate-pods",
                Some("application/json"),
                full(review),
            )?)
            .await?;
        ensure(status == 200, || format!("{http:?}: then {status}"))?;
    }
    stop(server).await
}
