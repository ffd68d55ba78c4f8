//! Certificates on real TLS sockets: rotation by kubelet's `..data` swap
//! (watched and polled) under traffic, a bad pair mid-run, client
//! certificates, protocol versions and ALPN, and clients that stall.

use crate::support::*;
use hyper::StatusCode;
use kserve_injector::server::args::ServeArgs;
use kserve_injector::server::RunningServer;
use std::path::Path;
use std::time::{Duration, Instant};

const SERVING_RELOADS: &str = "kserve_injector_certificate_reloads_total{cert=\"serving\"}";
const SERVING_ERRORS: &str = "kserve_injector_certificate_reload_errors_total{cert=\"serving\"}";

async fn start_with_certs(dir: &Path, flags: &[&str]) -> Result<RunningServer, Error> {
    let dir = dir.to_string_lossy().into_owned();
    let mut all = vec!["--cert-dir", dir.as_str(), "--shutdown-delay", "0s"];
    all.extend_from_slice(flags);
    start(&all).await
}

/// Swaps the certificate while requests flow and returns how long the new
/// one took to be served.
async fn rotate_under_load(flags: &[&str], limit: Duration) -> TestResult {
    let tmp = tempfile::tempdir()?;
    let ca = Ca::new("rotation CA")?;
    let (old, new) = (ca.server("old")?, ca.server("new")?);
    let mut dir = KubeletDir::create(&tmp.path().join("certs"), &as_refs(&cert_files(&old)))?;
    let server = start_with_certs(&dir.path, flags).await?;
    let addr = server.local_addr();
    ensure(served_cert(addr, &ca.pem).await? == old.der, || {
        "not serving the initial cert".into()
    })?;

    let mut established = Client::open(addr, &ca.pem, Http::H1).await?;
    let load = Load::start(addr, &ca.pem, 2)?;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let swapped = Instant::now();
    dir.swap(&as_refs(&cert_files(&new)))?;
    let ca_pem = ca.pem.clone();
    eventually(
        limit + Duration::from_secs(5),
        "the new certificate",
        || {
            let ca_pem = ca_pem.clone();
            let new = new.der.clone();
            async move { (served_cert(addr, &ca_pem).await.ok()? == new).then_some(()) }
        },
    )
    .await?;
    let took = swapped.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = load.finish().await?;

    ensure(took <= limit, || {
        format!("new certificate served after {took:?}, limit {limit:?}")
    })?;
    ensure(report.failures.is_empty(), || {
        format!("{} failed: {:?}", report.failures.len(), report.failures)
    })?;
    ensure(report.ok > 10, || {
        format!("only {} requests went through", report.ok)
    })?;
    let (_, review) = sample_review()?;
    let (status, _) = established.post_json("/mutate-pods", review).await?;
    ensure(status == StatusCode::OK, || {
        format!("pre-rotation connection: {status}")
    })?;
    let reloads = metric_now(server.admin_addr(), SERVING_RELOADS).await?;
    ensure(reloads == 1.0, || format!("reloads = {reloads}"))?;
    println!(
        "new certificate served {took:?} after the swap; {} requests, 0 failed",
        report.ok
    );
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_is_seen_by_the_directory_watch_within_two_seconds() -> TestResult {
    // An hour-long poll leaves only the watch to notice.
    rotate_under_load(&["--cert-poll-interval", "1h"], Duration::from_secs(2)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_is_seen_by_polling_when_the_watch_is_off() -> TestResult {
    // Poll interval plus slack for a busy two-core machine.
    rotate_under_load(
        &["--cert-watch=false", "--cert-poll-interval", "500ms"],
        Duration::from_millis(2000),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_pair_is_counted_and_the_old_certificate_keeps_serving() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let ca = Ca::new("bad-pair CA")?;
    let (old, new) = (ca.server("old")?, ca.server("new")?);
    let mut dir = KubeletDir::create(&tmp.path().join("certs"), &as_refs(&cert_files(&old)))?;
    let server = start_with_certs(&dir.path, &["--cert-poll-interval", "200ms"]).await?;
    let (addr, admin) = (server.local_addr(), server.admin_addr());
    let load = Load::start(addr, &ca.pem, 1)?;

    let mismatched = [
        ("tls.crt", new.cert_pem.as_bytes()),
        ("tls.key", old.key_pem.as_bytes()),
    ];
    let garbage = [
        ("tls.crt", &b"not a certificate"[..]),
        ("tls.key", old.key_pem.as_bytes()),
    ];
    for (round, files) in [&mismatched[..], &garbage[..]].into_iter().enumerate() {
        dir.swap(files)?;
        let want = (round + 1) as f64;
        eventually(PATIENCE, "the reload error to be counted", || async move {
            (metric_now(admin, SERVING_ERRORS).await.ok()? >= want).then_some(())
        })
        .await?;
        ensure(served_cert(addr, &ca.pem).await? == old.der, || {
            "the old certificate was dropped".into()
        })?;
    }
    dir.swap(&as_refs(&cert_files(&new)))?;
    let ca_pem = ca.pem.clone();
    eventually(PATIENCE, "the good pair to be served", || {
        let (ca_pem, new) = (ca_pem.clone(), new.der.clone());
        async move { (served_cert(addr, &ca_pem).await.ok()? == new).then_some(()) }
    })
    .await?;
    let report = load.finish().await?;
    ensure(report.failures.is_empty(), || {
        format!("{:?}", report.failures)
    })?;
    ensure(metric_now(admin, SERVING_RELOADS).await? == 1.0, || {
        "reloads != 1".into()
    })?;
    stop(server).await
}

async fn mtls_request(
    addr: std::net::SocketAddr,
    server_ca: &str,
    client: Option<&Leaf>,
    http: Http,
) -> Result<StatusCode, Error> {
    let config = tls_config(server_ca, Some(http), client, rustls::DEFAULT_VERSIONS)?;
    let mut conn = Client::connect(addr, config).await?;
    let (_, review) = sample_review()?;
    Ok(conn.post_json("/mutate-pods", review).await?.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_and_their_ca_reloads() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let serving_ca = Ca::new("serving CA")?;
    let dir = KubeletDir::create(
        &tmp.path().join("certs"),
        &as_refs(&cert_files(&serving_ca.server("webhook")?)),
    )?;
    let (apiserver_ca, other_ca) = (Ca::new("apiserver client CA")?, Ca::new("other CA")?);
    let (apiserver, stranger) = (
        apiserver_ca.client("kube-apiserver")?,
        other_ca.client("stranger")?,
    );
    let client_ca = tmp.path().join("client-ca").join("ca.crt");
    std::fs::create_dir_all(client_ca.parent().ok_or_else(|| fail("no parent"))?)?;
    std::fs::write(&client_ca, &apiserver_ca.pem)?;
    let client_ca_flag = client_ca.to_string_lossy().into_owned();
    let server = start_with_certs(
        &dir.path,
        &[
            "--client-ca-file",
            &client_ca_flag,
            "--cert-poll-interval",
            "200ms",
        ],
    )
    .await?;
    let addr = server.local_addr();
    let pem = serving_ca.pem.as_str();

    for http in Http::BOTH {
        let status = mtls_request(addr, pem, Some(&apiserver), http).await?;
        ensure(status == StatusCode::OK, || {
            format!("{http:?} good client: {status}")
        })?;
        let refused = mtls_request(addr, pem, None, http).await;
        ensure(refused.is_err(), || {
            format!("{http:?} no client cert: {refused:?}")
        })?;
        let refused = mtls_request(addr, pem, Some(&stranger), http).await;
        ensure(refused.is_err(), || {
            format!("{http:?} foreign client cert: {refused:?}")
        })?;
    }

    std::fs::write(&client_ca, &other_ca.pem)?;
    eventually(PATIENCE, "the new client CA", || {
        let stranger = stranger.clone();
        async move {
            mtls_request(addr, pem, Some(&stranger), Http::H2)
                .await
                .ok()
                .filter(|s| *s == StatusCode::OK)
        }
    })
    .await?;
    let refused = mtls_request(addr, pem, Some(&apiserver), Http::H2).await;
    ensure(refused.is_err(), || {
        format!("old CA still accepted: {refused:?}")
    })?;
    let series = "kserve_injector_certificate_reloads_total{cert=\"client_ca\"}";
    ensure(
        metric_now(server.admin_addr(), series).await? == 1.0,
        || series.into(),
    )?;
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls12_tls13_and_alpn_are_negotiated() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (server, ca) = start_self_signed(tmp.path(), &["--shutdown-delay", "0s"]).await?;
    let addr = server.local_addr();
    let cases = [
        (
            &rustls::version::TLS12,
            Some(Http::H2),
            rustls::ProtocolVersion::TLSv1_2,
            Some(&b"h2"[..]),
        ),
        (
            &rustls::version::TLS13,
            Some(Http::H2),
            rustls::ProtocolVersion::TLSv1_3,
            Some(&b"h2"[..]),
        ),
        (
            &rustls::version::TLS13,
            Some(Http::H1),
            rustls::ProtocolVersion::TLSv1_3,
            Some(&b"http/1.1"[..]),
        ),
        // No ALPN at all: HTTP/1.1, as RFC 9113 requires h2 over TLS to be negotiated.
        (
            &rustls::version::TLS12,
            None,
            rustls::ProtocolVersion::TLSv1_2,
            None,
        ),
    ];
    let (_, review) = sample_review()?;
    for (version, alpn, want_version, want_alpn) in cases {
        let config = tls_config(&ca, alpn, None, &[version])?;
        let stream = tls_connect(addr, config.clone()).await?;
        let (_, conn) = stream.get_ref();
        ensure(conn.protocol_version() == Some(want_version), || {
            format!("{:?}", conn.protocol_version())
        })?;
        ensure(conn.alpn_protocol() == want_alpn, || {
            format!("{:?}", conn.alpn_protocol())
        })?;
        drop(stream);
        let mut client = Client::connect(addr, config).await?;
        let (status, _) = client.post_json("/mutate-pods", review.clone()).await?;
        ensure(status == StatusCode::OK, || {
            format!("{want_version:?} {alpn:?}: {status}")
        })?;
    }
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_stall_are_disconnected() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (server, ca) = start_self_signed(
        tmp.path(),
        &[
            "--shutdown-delay",
            "0s",
            "--header-read-timeout",
            "1s",
            "--handshake-timeout",
            "1s",
        ],
    )
    .await?;
    let addr = server.local_addr();

    // A request head that never ends.
    let started = Instant::now();
    let answer = raw_exchange(
        addr,
        &ca,
        b"POST /mutate-pods HTTP/1.1\r\nhost: localhost\r\n",
        Duration::from_secs(15),
    )
    .await?;
    let took = started.elapsed();
    ensure(took >= Duration::from_millis(900), || {
        format!("closed too early ({took:?}): {answer}")
    })?;
    ensure(!answer.starts_with("HTTP/1.1 200"), || answer.clone())?;

    // A TCP connection that never starts the TLS handshake.
    let mut tcp = tokio::net::TcpStream::connect(addr).await?;
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(
        Duration::from_secs(15),
        tokio::io::AsyncReadExt::read(&mut tcp, &mut buf),
    )
    .await;
    ensure(matches!(read, Ok(Ok(0)) | Ok(Err(_))), || {
        format!("handshake-less connection not closed: {read:?}")
    })?;
    ensure(started.elapsed() >= Duration::from_millis(900), || {
        "closed before the timeout".into()
    })?;

    let errors = metric_now(
        server.admin_addr(),
        "kserve_injector_tls_handshake_errors_total",
    )
    .await?;
    ensure(errors >= 1.0, || format!("handshake errors = {errors}"))?;
    let (_, review) = sample_review()?;
    let (status, _) = Client::open(addr, &ca, Http::H1)
        .await?
        .post_json("/mutate-pods", review)
        .await?;
    ensure(status == StatusCode::OK, || {
        format!("a well-behaved client after them: {status}")
    })?;
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tls_policy_flags_set_the_versions_and_tls_1_2_suites_served() -> TestResult {
    let tmp = tempfile::tempdir()?;
    // The self-signed certificate's key is ECDSA P-256.
    let suite = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256";
    let flags = ["--shutdown-delay", "0s", "--tls-cipher-suites", suite];
    let (server, ca) = start_self_signed(tmp.path(), &flags).await?;
    let tls12 = tls_config(&ca, Some(Http::H2), None, &[&rustls::version::TLS12])?;
    let stream = tls_connect(server.local_addr(), tls12.clone()).await?;
    let negotiated = stream
        .get_ref()
        .1
        .negotiated_cipher_suite()
        .map(|s| s.suite());
    ensure(negotiated.and_then(|s| s.as_str()) == Some(suite), || {
        format!("TLS 1.2 negotiated {negotiated:?}")
    })?;
    let tls13 = tls_config(&ca, Some(Http::H2), None, &[&rustls::version::TLS13])?;
    tls_connect(server.local_addr(), tls13).await?;
    stop(server).await?;

    let flags = [
        "--shutdown-delay",
        "0s",
        "--tls-min-version",
        "VersionTLS13",
    ];
    let (server, ca) = start_self_signed(tmp.path(), &flags).await?;
    let tls12 = tls_config(&ca, Some(Http::H2), None, &[&rustls::version::TLS12])?;
    let tls13 = tls_config(&ca, Some(Http::H2), None, &[&rustls::version::TLS13])?;
    ensure(
        tls_connect(server.local_addr(), tls12).await.is_err(),
        || "a TLS 1.2 client was served under --tls-min-version 1.3".into(),
    )?;
    tls_connect(server.local_addr(), tls13).await?;
    stop(server).await?;

    for (flag, value, want) in [
        (
            "--tls-cipher-suites",
            "TLS_BOGUS",
            "unknown cipher suite \"TLS_BOGUS\"",
        ),
        (
            "--tls-cipher-suites",
            "TLS_RSA_WITH_AES_128_CBC_SHA",
            "TLS_RSA_WITH_AES_128_CBC_SHA is not offered by the crypto provider (ring)",
        ),
    ] {
        let refused = start_self_signed(tmp.path(), &[flag, value]).await;
        let error = refused.err().map(|e| e.to_string()).unwrap_or_default();
        ensure(error.contains(want), || {
            format!("{flag} {value}: {error:?}")
        })?;
    }
    let unknown = ServeArgs::try_parse_from(["--tls-min-version", "1.1"]);
    ensure(unknown.is_err(), || "--tls-min-version 1.1 parsed".into())
}
