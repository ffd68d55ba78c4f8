//! Graceful shutdown: readiness goes 503 first, the server keeps answering
//! through the shutdown delay, then stops accepting and finishes what is in
//! flight. Once in-process (the shutdown handle), once with real signals to
//! the real binary.

use crate::support::*;
use http_body_util::BodyExt;
use hyper::body::Bytes;
use hyper::StatusCode;
use serde_json::Value;
use std::io::BufRead;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

async fn readyz(admin: SocketAddr) -> Option<StatusCode> {
    admin_get(admin, "/readyz")
        .await
        .ok()
        .map(|(status, _)| status)
}

async fn one_request(addr: SocketAddr, ca: &str) -> Result<StatusCode, Error> {
    let (_, review) = sample_review()?;
    Ok(Client::open(addr, ca, Http::H2)
        .await?
        .post_json("/mutate-pods", review)
        .await?
        .0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_withdraws_readiness_first_then_drains_in_flight_requests() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let delay = Duration::from_secs(2);
    let (server, ca) = start_self_signed(
        tmp.path(),
        // Bodies half sent for seconds: past the pace of a 1 KB body.
        &[
            "--shutdown-delay",
            "2s",
            "--drain-timeout",
            "15s",
            "--body-timeout",
            "30s",
        ],
    )
    .await?;
    let (addr, admin) = (server.local_addr(), server.admin_addr());
    let (pod, review) = sample_review()?;
    let half = review.len() / 2;

    // Requests whose bodies are still arriving when the listener closes.
    let mut in_flight = Vec::new();
    for http in Http::BOTH {
        let (mut tx, channel) = http_body_util::Channel::<Bytes, std::convert::Infallible>::new(1);
        tx.send_data(Bytes::copy_from_slice(&review[..half]))
            .await?;
        let mut client = Client::open(addr, &ca, http).await?;
        let req = post("/mutate-pods", Some("application/json"), channel.boxed())?;
        in_flight.push((
            http,
            tx,
            tokio::spawn(async move { client.call(req).await }),
        ));
    }
    eventually(
        PATIENCE,
        "both slow requests to be in flight",
        || async move {
            (metric_now(admin, "kserve_injector_requests_in_flight")
                .await
                .ok()?
                >= 2.0)
                .then_some(())
        },
    )
    .await?;

    let load = Load::start(addr, &ca, 1)?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let handle = server.shutdown_handle();
    let exited = tokio::spawn(server.wait());
    let requested = Instant::now();
    handle.shutdown();

    eventually(PATIENCE, "/readyz to report 503", || async move {
        (readyz(admin).await? == StatusCode::SERVICE_UNAVAILABLE).then_some(())
    })
    .await?;
    ensure(requested.elapsed() < delay, || {
        "readiness was withdrawn too late to matter".into()
    })?;
    let status = one_request(addr, &ca).await?;
    ensure(status == StatusCode::OK, || {
        format!("new connection during the delay: {status}")
    })?;
    // The endpoint is withdrawn: callers stop sending new requests.
    let report = load.finish().await?;
    ensure(report.failures.is_empty(), || {
        format!("{:?}", report.failures)
    })?;
    ensure(report.ok > 0, || "no load went through".into())?;

    eventually(PATIENCE, "the listener to close", || async move {
        tokio::net::TcpStream::connect(addr)
            .await
            .is_err()
            .then_some(())
    })
    .await?;
    let closed_after = requested.elapsed();
    ensure(closed_after >= delay, || {
        format!("listener closed after {closed_after:?}, before the {delay:?} delay")
    })?;

    for (http, mut tx, call) in in_flight {
        tx.send_data(Bytes::copy_from_slice(&review[half..]))
            .await?;
        drop(tx);
        let (status, body) = tokio::time::timeout(PATIENCE, call).await???;
        ensure(status == StatusCode::OK, || {
            format!("{http:?} in-flight request: {status} {body:?}")
        })?;
        let outcome = apply_response(&pod, &body, "admission.k8s.io/v1", "sample-uid")?;
        ensure(matches!(outcome, Outcome::Pod(_)), || {
            format!("{http:?}: {outcome:?}")
        })?;
    }
    tokio::time::timeout(PATIENCE, exited).await???;
    ensure(readyz(admin).await.is_none(), || {
        "admin listener still up after exit".into()
    })?;
    Ok(())
}

/// The real binary, with its JSON log read on a thread.
struct Process {
    child: Child,
    addr: SocketAddr,
    admin: SocketAddr,
    ca: String,
    log: std::sync::mpsc::Receiver<String>,
}

impl Process {
    fn spawn(dir: &std::path::Path, flags: &[&str]) -> Result<Self, Error> {
        let ca_file = dir.join("ca.crt");
        let mut child = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
            .args([
                "serve",
                "--self-signed",
                "--addr",
                "127.0.0.1:0",
                "--admin-addr",
                "127.0.0.1:0",
            ])
            .arg("--self-signed-ca-file")
            .arg(&ca_file)
            .args(flags)
            .env("RUST_LOG", "info")
            .env_remove("KSERVE_INJECTOR_LOG")
            .env_remove("KSERVE_INJECTOR_LOG_FORMAT")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| fail("no stdout"))?;
        let (tx, log) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + PATIENCE;
        let (addr, admin) = loop {
            let line = log
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .map_err(|_| fail("the server never logged \"listening\""))?;
            let event: Value = serde_json::from_str(&line)
                .map_err(|e| fail(format!("not a JSON log line ({e}): {line}")))?;
            if event["message"] == "listening" {
                let field = |k: &str| -> Result<SocketAddr, Error> {
                    Ok(event[k]
                        .as_str()
                        .ok_or_else(|| fail(format!("no {k} in {line}")))?
                        .parse()?)
                };
                break (field("addr")?, field("admin_addr")?);
            }
        };
        let ca = std::fs::read_to_string(&ca_file)?;
        Ok(Self {
            child,
            addr,
            admin,
            ca,
            log,
        })
    }

    fn signal(&self, name: &str) -> TestResult {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()?;
        ensure(status.success(), || format!("kill -{name} failed"))
    }

    async fn exit_code(&mut self, limit: Duration) -> Result<Option<i32>, Error> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status.code());
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                return Err(fail(format!("still running after {limit:?}")));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn logged(&self) -> Vec<String> {
        self.log.try_iter().collect()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_the_binary_and_exits_zero() -> TestResult {
    let tmp = tempfile::tempdir()?;
    // The request after /readyz turns 503 needs a new TLS connection inside
    // the delay; 5 s leaves room for a machine busy with other builds.
    let mut server = Process::spawn(
        tmp.path(),
        &["--shutdown-delay", "5s", "--drain-timeout", "10s"],
    )?;
    let (addr, admin) = (server.addr, server.admin);
    ensure(readyz(admin).await == Some(StatusCode::OK), || {
        "not ready".into()
    })?;
    ensure(
        one_request(addr, &server.ca).await? == StatusCode::OK,
        || "first request".into(),
    )?;

    server.signal("TERM")?;
    eventually(PATIENCE, "/readyz to report 503", || async move {
        (readyz(admin).await? == StatusCode::SERVICE_UNAVAILABLE).then_some(())
    })
    .await?;
    let status = one_request(addr, &server.ca).await?;
    ensure(status == StatusCode::OK, || {
        format!("request during the shutdown delay: {status}")
    })?;
    let code = server.exit_code(PATIENCE).await?;
    ensure(code == Some(0), || format!("exit code {code:?}"))?;
    let log = server.logged().join("\n");
    ensure(log.contains("shutdown complete"), || format!("log:\n{log}"))?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let mut server = Process::spawn(tmp.path(), &["--shutdown-delay", "60s"])?;
    let admin = server.admin;
    server.signal("INT")?;
    eventually(PATIENCE, "/readyz to report 503", || async move {
        (readyz(admin).await? == StatusCode::SERVICE_UNAVAILABLE).then_some(())
    })
    .await?;
    let signalled = Instant::now();
    server.signal("TERM")?;
    let code = server.exit_code(Duration::from_secs(15)).await?;
    ensure(code == Some(1), || format!("exit code {code:?}"))?;
    ensure(signalled.elapsed() < Duration::from_secs(15), || {
        "did not exit at once".into()
    })?;
    Ok(())
}
