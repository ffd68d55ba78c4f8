//! The connection cap shared fairly between client addresses, on real
//! sockets: attackers on other loopback addresses than the API-server-like
//! clients (127.0.0.1). At the cap, the connection closed for a newcomer is
//! of the address holding the most, so neither busy connections from one
//! address nor a flood of silent ones from several ever close the API
//! server's persistent connection or keep its new ones from their review.

use crate::support::*;
use hyper::StatusCode;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const API_SERVER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// New API-server-like connections, one after another.
const PROBES: usize = 10;

fn attacker(i: usize) -> IpAddr {
    IpAddr::from([127, 0, 0, 2 + (i % 8) as u8])
}

/// Deadlines far past the test, so that only the cap closes connections.
const FLAGS: [&str; 10] = [
    "--shutdown-delay",
    "0s",
    "--max-connections",
    "8",
    "--idle-timeout",
    "600s",
    "--first-request-timeout",
    "600s",
    "--header-read-timeout",
    "600s",
];

/// A busy client on `source`: one connection reviewing back to back,
/// reconnecting when closed, until `stop`.
fn busy(
    addr: SocketAddr,
    ca: &str,
    source: IpAddr,
    review: Vec<u8>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
) {
    let ca = ca.to_string();
    tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            let Ok(config) = client_config(&ca, Http::H2) else {
                return;
            };
            let Ok(mut client) = Client::connect_from(Some(source), addr, config).await else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            while !stop.load(Ordering::Relaxed) && client.ready().await {
                match client.post_json("/mutate-pods", review.clone()).await {
                    Ok((StatusCode::OK, _)) => done.fetch_add(1, Ordering::Relaxed),
                    _ => break,
                };
            }
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_connections_of_one_address_never_close_the_api_server_s() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (server, ca) = start_self_signed(tmp.path(), &FLAGS).await?;
    let addr = server.local_addr();
    let (_, review) = sample_review()?;
    let mut api =
        Client::connect_from(Some(API_SERVER), addr, client_config(&ca, Http::H2)?).await?;
    let (status, _) = api.post_json("/mutate-pods", review.clone()).await?;
    ensure(status == StatusCode::OK, || {
        format!("first review: {status}")
    })?;
    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    // Seven busy connections fill the cap; then a new busy one every 50 ms.
    for _ in 0..7 {
        busy(
            addr,
            &ca,
            attacker(0),
            review.clone(),
            stop.clone(),
            done.clone(),
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let newcomers = {
        let (stop, done, ca, review) = (stop.clone(), done.clone(), ca.clone(), review.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                busy(
                    addr,
                    &ca,
                    attacker(0),
                    review.clone(),
                    stop.clone(),
                    done.clone(),
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let started = Instant::now();
    let mut reviews = 0;
    let result = async {
        while started.elapsed() < Duration::from_secs(3) {
            tokio::time::sleep(Duration::from_millis(250)).await;
            ensure(api.ready().await, || {
                format!("the API server's connection was closed after {reviews} reviews")
            })?;
            let (status, _) = api.post_json("/mutate-pods", review.clone()).await?;
            ensure(status == StatusCode::OK, || format!("review: {status}"))?;
            reviews += 1;
        }
        Ok::<_, Error>(())
    }
    .await;
    stop.store(true, Ordering::Relaxed);
    newcomers.await?;
    result?;
    let evicted = metric_now(
        server.admin_addr(),
        "kserve_injector_connection_evictions_total",
    )
    .await?;
    let refused = metric_now(
        server.admin_addr(),
        "kserve_injector_connections_refused_total",
    )
    .await?;
    eprintln!(
        "figure: 7+ busy connections from 127.0.0.2 ({} reviews), a new one every 50 ms: the \
         API server's connection answered {reviews} of {reviews}, never closed; {evicted} \
         evicted, {refused} refused",
        done.load(Ordering::Relaxed)
    );
    ensure(evicted + refused > 0.0, || {
        "the cap was never reached".into()
    })?;
    crate::support::stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_silent_connections_from_four_addresses_never_cuts_a_new_api_server_connection(
) -> TestResult {
    let tmp = tempfile::tempdir()?;
    // Sixteen slots for four attacking addresses: at the cap each holds
    // more than the two (the last one, closing, and the new one) of the
    // API server's address.
    let flags = ["--shutdown-delay", "0s", "--max-connections", "16"];
    let (server, ca) = start_self_signed(tmp.path(), &flags).await?;
    let addr = server.local_addr();
    let (_, review) = sample_review()?;
    let (stop, opened) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    for i in 0..16 {
        let (stop, opened) = (stop.clone(), opened.clone());
        tokio::spawn(async move {
            // Each keeps its last 32 connections open, silent.
            let mut held = std::collections::VecDeque::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(tcp) = tcp_from(Some(attacker(i % 4)), addr).await {
                    opened.fetch_add(1, Ordering::Relaxed);
                    held.push_back(tcp);
                    if held.len() > 32 {
                        held.pop_front();
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (mut answered, mut failed) = (0, Vec::new());
    for i in 0..PROBES {
        let call = async {
            let config = client_config(&ca, Http::H2)?;
            let mut client = Client::connect_from(Some(API_SERVER), addr, config).await?;
            // The moment between its handshake and its first request that a
            // busy API server may take: the attackers' connections arrive
            // meanwhile, and a connection that has sent no request is the
            // least productive of all.
            tokio::time::sleep(Duration::from_millis(300)).await;
            client.post_json("/mutate-pods", review.clone()).await
        };
        match tokio::time::timeout(Duration::from_secs(5), call).await {
            Ok(Ok((StatusCode::OK, _))) => answered += 1,
            Ok(Ok((status, _))) => failed.push(format!("{i}: {status}")),
            Ok(Err(e)) => failed.push(format!("{i}: {e}")),
            Err(_) => failed.push(format!("{i}: no answer within 5 s")),
        }
    }
    stop.store(true, Ordering::Relaxed);
    eprintln!(
        "figure: {} silent connections from 4 addresses at --max-connections 16: {answered}/{PROBES} \
         single-try API-server-like reviews answered",
        opened.load(Ordering::Relaxed)
    );
    ensure(failed.is_empty(), || format!("failed: {failed:?}"))?;
    let refused = metric_now(
        server.admin_addr(),
        "kserve_injector_connections_refused_total",
    )
    .await?;
    let evicted = metric_now(
        server.admin_addr(),
        "kserve_injector_connection_evictions_total",
    )
    .await?;
    ensure(refused + evicted > 0.0, || {
        "the cap was never reached".into()
    })?;
    crate::support::stop(server).await
}
