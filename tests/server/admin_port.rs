//! The admin port as an attacker tries it, against the real binary: many
//! connections sending request heads that never end, and many idle
//! connections (under `ulimit -n 256`, beside idle connections to the
//! webhook port), from other loopback addresses than the probes'. Through
//! every attack a kubelet-like readiness probe (a new connection from
//! 127.0.0.1, `GET /readyz`, 1 s timeout) is answered each time, an
//! API-server-like review on a new TLS connection is answered, and the
//! server's resident memory stays bounded.

use crate::support::process::{self_signed, under_nofile, Serve};
use crate::support::*;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MIB: u64 = 1 << 20;
const PROBE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
/// kubelet's probe timeout (`timeoutSeconds: 1`).
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// An attacker's source address: 127.0.0.2 to 127.0.0.9.
fn attacker(i: usize) -> IpAddr {
    IpAddr::from([127, 0, 0, 2 + (i % 8) as u8])
}

/// This test process opens about a thousand sockets: its soft open-file
/// limit raised to the hard one.
fn raise_own_nofile() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        },
    );
}

fn resident(pid: u32) -> Result<u64, Error> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = text
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
        .ok_or_else(|| fail("no VmRSS"))?;
    Ok(kib * 1024)
}

/// kubelet's readiness probe: a new connection, one GET, 1 s for all of it.
async fn readyz(admin: SocketAddr) -> Result<(), Error> {
    let probe = async {
        let mut tcp = tcp_from(Some(PROBE), admin).await?;
        let head = "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: kube-probe/1.33\r\n\
                    Accept: */*\r\nConnection: close\r\n\r\n";
        tcp.write_all(head.as_bytes()).await?;
        let mut answer = Vec::new();
        tcp.read_to_end(&mut answer).await?;
        let answer = String::from_utf8_lossy(&answer);
        ensure(answer.starts_with("HTTP/1.1 200"), || {
            format!("/readyz answered {:?}", answer.lines().next())
        })
    };
    tokio::time::timeout(PROBE_TIMEOUT, probe)
        .await
        .map_err(|_| fail("no /readyz answer within 1 s"))?
}

/// What the probes saw.
#[derive(Default, Debug)]
struct Probed {
    tries: u64,
    failed: Vec<String>,
    longest_gap: Duration,
    reviews: u64,
    reviews_failed: Vec<String>,
    peak_resident: u64,
    latencies: Vec<Duration>,
}

/// Probes `/readyz` every 100 ms (and, with `review`, an API-server-like
/// review on a new TLS connection every 500 ms) for `hold`, sampling the
/// server's resident memory.
async fn probe_for(
    serve: &Serve,
    hold: Duration,
    review: Option<(&str, Vec<u8>)>,
) -> Result<Probed, Error> {
    let mut seen = Probed::default();
    let (started, mut last_ok) = (Instant::now(), Instant::now());
    let mut next_review = Instant::now();
    while started.elapsed() < hold {
        seen.tries += 1;
        let asked = Instant::now();
        let answer = readyz(serve.admin).await;
        seen.latencies.push(asked.elapsed());
        match answer {
            Ok(()) => {
                // From one answer to the next (the first from the start).
                seen.longest_gap = seen.longest_gap.max(last_ok.elapsed());
                last_ok = Instant::now();
            }
            Err(e) => seen.failed.push(format!("{:.1?}: {e}", started.elapsed())),
        }
        if let Some((ca, body)) = &review {
            if Instant::now() >= next_review {
                next_review = Instant::now() + Duration::from_millis(500);
                seen.reviews += 1;
                let call = async {
                    let config = client_config(ca, Http::H2)?;
                    let mut client = Client::connect_from(Some(PROBE), serve.addr, config).await?;
                    let (status, _) = client.post_json("/mutate-pods", body.clone()).await?;
                    ensure(status == hyper::StatusCode::OK, || format!("{status}"))
                };
                match tokio::time::timeout(Duration::from_secs(5), call).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => seen.reviews_failed.push(e.to_string()),
                    Err(_) => seen.reviews_failed.push("no answer within 5 s".into()),
                }
            }
        }
        seen.peak_resident = seen.peak_resident.max(resident(serve.pid())?);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen.longest_gap = seen.longest_gap.max(last_ok.elapsed());
    Ok(seen)
}

/// Connections from attacker addresses, each writing a request head that
/// never ends, reconnecting whenever one is closed, until `stop`.
fn endless_heads(admin: SocketAddr, count: usize, stop: &Arc<AtomicBool>, sent: &Arc<AtomicU64>) {
    for i in 0..count {
        let (stop, sent) = (stop.clone(), sent.clone());
        tokio::spawn(async move {
            let chunk = vec![b'a'; 16 * 1024];
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut tcp) = tcp_from(Some(attacker(i)), admin).await else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                let head = b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Pad: ";
                if tcp.write_all(head).await.is_err() {
                    continue;
                }
                while !stop.load(Ordering::Relaxed) {
                    let write = tokio::time::timeout(Duration::from_secs(1), tcp.write_all(&chunk));
                    match write.await {
                        Ok(Ok(())) => sent.fetch_add(chunk.len() as u64, Ordering::Relaxed),
                        Ok(Err(_)) => break,
                        Err(_) => continue,
                    };
                }
            }
        });
    }
}

/// Connections from attacker addresses that send nothing, each reopened as
/// soon as the server closes it, until `stop`.
fn idle(addr: SocketAddr, count: usize, stop: &Arc<AtomicBool>, opened: &Arc<AtomicU64>) {
    for i in 0..count {
        let (stop, opened) = (stop.clone(), opened.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut tcp) = tcp_from(Some(attacker(i)), addr).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                opened.fetch_add(1, Ordering::Relaxed);
                let mut buf = [0u8; 64];
                // Until the server closes it (or the test ends).
                while !stop.load(Ordering::Relaxed) {
                    let read = tokio::time::timeout(Duration::from_millis(200), tcp.read(&mut buf));
                    match read.await {
                        Ok(Ok(0)) | Ok(Err(_)) => break,
                        _ => {}
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
    }
}

fn report(what: &str, seen: &Probed, base: u64) -> TestResult {
    let mut latencies = seen.latencies.clone();
    latencies.sort();
    let p50 = latencies
        .get(latencies.len() / 2)
        .copied()
        .unwrap_or_default();
    let max = latencies.last().copied().unwrap_or_default();
    eprintln!(
        "figure: {what}: /readyz {}/{} answered within 1 s (p50 {p50:.2?}, max {max:.2?}), \
         longest gap {:.2?}; reviews {}/{}; resident {} MiB at rest, peak {} MiB",
        seen.tries - seen.failed.len() as u64,
        seen.tries,
        seen.longest_gap,
        seen.reviews - seen.reviews_failed.len() as u64,
        seen.reviews,
        base / MIB,
        seen.peak_resident / MIB,
    );
    ensure(seen.failed.is_empty(), || {
        format!("{what}: /readyz failed: {:?}", seen.failed)
    })?;
    ensure(seen.reviews_failed.is_empty(), || {
        format!("{what}: reviews failed: {:?}", seen.reviews_failed)
    })?;
    ensure(seen.peak_resident < base + 32 * MIB, || {
        format!(
            "{what}: resident memory grew from {} to {} MiB",
            base / MIB,
            seen.peak_resident / MIB
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_heads_that_never_end_neither_take_memory_nor_keep_the_probes_waiting() -> TestResult
{
    raise_own_nofile();
    let tmp = tempfile::tempdir()?;
    let flags = self_signed(tmp.path());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let serve = Serve::spawn(&flags)?;
    readyz(serve.admin).await?;
    let base = resident(serve.pid())?;
    let (stop, sent) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    // Hyper's default head buffer (about 400 KiB) for each: 125 MiB.
    endless_heads(serve.admin, 320, &stop, &sent);
    let seen = probe_for(&serve, Duration::from_secs(6), None).await;
    stop.store(true, Ordering::Relaxed);
    let seen = seen?;
    eprintln!(
        "figure: 320 endless heads: {} MiB sent",
        sent.load(Ordering::Relaxed) / MIB
    );
    report("320 endless admin heads", &seen, base)?;
    let closed = metric_now(
        serve.admin,
        "kserve_injector_admin_connection_deadlines_total",
    )
    .await?;
    ensure(closed > 0.0, || "no admin head refused".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_admin_and_webhook_connections_under_ulimit_256_leave_the_probes_answered(
) -> TestResult {
    raise_own_nofile();
    let tmp = tempfile::tempdir()?;
    let flags = self_signed(tmp.path());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let serve = Serve::spawn_command(under_nofile(256, 256, &flags))?;
    let ca = std::fs::read_to_string(tmp.path().join("ca.crt"))?;
    let (_, review) = sample_review()?;
    readyz(serve.admin).await?;
    let base = resident(serve.pid())?;
    let (stop, opened) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    // Far more than 256 descriptors: every one of them, were they kept.
    idle(serve.admin, 600, &stop, &opened);
    idle(serve.addr, 300, &stop, &opened);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen = probe_for(&serve, Duration::from_secs(8), Some((&ca, review))).await;
    stop.store(true, Ordering::Relaxed);
    let seen = seen?;
    eprintln!(
        "figure: 600 idle admin + 300 idle webhook connections under ulimit -n 256: {} opened",
        opened.load(Ordering::Relaxed)
    );
    report("idle connections under ulimit -n 256", &seen, base)
}
