//! The hostile clients of the red-team suite (`loadtest/redteam.py`), each
//! against a running `serve` over real TLS, holding what it holds until
//! `--hold` passes, then printing one JSON line of what it saw:
//!
//! - `h2-unread`: HTTP/2 with a stream window of 0, so no answer can be
//!   sent; `--streams` reviews per connection, never read.
//! - `h1-unread`: HTTP/1.1 connections that each send one review and never
//!   read the answer.
//! - `idle-h2`: HTTP/2 connections that each send one review, read its
//!   answer, then stay open and idle (answering the server's pings).
//! - `promise`: HTTP/2 streams that declare a body (`content-length`) and
//!   send none of it, each opened again as soon as it is answered.
//! - `busy`: HTTP/2 connections that each open a new stream every
//!   `--every` whose body never comes, so they always have one in flight.
//! - `trickle`: HTTP/2 streams whose body comes one byte every `--every`.
//! - `large`: clients each sending valid large reviews one after another,
//!   reading every answer, and waiting `Retry-After` when shed.
//!
//! - `reviewing`: HTTP/2 connections that each complete a small review
//!   every `--every`: busy clients, productive by any measure.
//! - `churn`: TCP connections opened as fast as the server takes them,
//!   never sending a byte (each task keeps its last 16 open).
//! - `admin-heads`: connections to the admin port (`--admin`) each sending
//!   a request head that never ends.
//! - `admin-idle`: connections to the admin port that send nothing.
//!
//! With `--source` (comma-separated addresses, such as 127.0.0.2,127.0.0.3),
//! the attacks' connections come from those addresses in turn: other
//! clients than the probes, which connect from the default address.
//!
//! The last three of the first list (and `promise`, `reviewing`, `churn`
//! and the admin attacks) reconnect whenever the server closes their
//! connection, as a determined attacker would. Besides the attacks:
//!
//! - `review`: one review over a new connection, read whole; exits 1
//!   unless the answer is a 200 AdmissionReview that allows the pod.
//! - `probes`: the two API-server-like probes of the red team, for
//!   `--duration`: a review every second on a new TLS connection (HTTP/2,
//!   retried after `Retry-After`, or 1 s, while its deadline allows), and a
//!   review every second on one persistent HTTP/2 connection, which the
//!   server must never close; with `--admin`, a kubelet-like readiness
//!   probe too (a new connection every second, `GET /readyz`, 1 s
//!   timeout); one JSON line of their figures.
//! - `cert-ahead`: a serving pair signed by an existing CA whose notBefore
//!   is `--ahead` from now, for the rotation the red team places.
//!
//! ```sh
//! cargo run --release --example attack_client -- --addr 127.0.0.1:9443 \
//!   --ca /tmp/kserve-injector-ca.crt --body big-oci.json h2-unread --streams 240
//! ```

use clap::{Parser, Subcommand};
use hyper::body::Bytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

type Error = Box<dyn std::error::Error + Send + Sync>;

#[derive(Parser)]
struct Args {
    /// The webhook listener.
    #[arg(long)]
    addr: Option<SocketAddr>,
    /// The CA the serving certificate chains to (PEM).
    #[arg(long)]
    ca: Option<PathBuf>,
    /// The AdmissionReview to send.
    #[arg(long)]
    body: Option<PathBuf>,
    /// The name the serving certificate is checked against.
    #[arg(long, default_value = "localhost")]
    server_name: String,
    /// The admin listener (the admin attacks, and the probes' /readyz).
    #[arg(long)]
    admin: Option<SocketAddr>,
    /// The addresses the attacks' connections come from, in turn.
    #[arg(long, value_delimiter = ',')]
    source: Vec<IpAddr>,
    #[command(subcommand)]
    attack: Attack,
}

#[derive(Subcommand)]
enum Attack {
    H2Unread {
        #[arg(long, default_value_t = 1)]
        connections: usize,
        #[arg(long, default_value_t = 240)]
        streams: usize,
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        hold: Duration,
    },
    H1Unread {
        #[arg(long, default_value_t = 40)]
        connections: usize,
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        hold: Duration,
    },
    IdleH2 {
        #[arg(long, default_value_t = 4300)]
        connections: usize,
        /// New connections opened at once.
        #[arg(long, default_value_t = 64)]
        parallel: usize,
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        hold: Duration,
    },
    Promise {
        #[arg(long, default_value_t = 1)]
        connections: usize,
        /// Streams kept open per connection (as many as the server allows).
        #[arg(long, default_value_t = 4)]
        streams: usize,
        /// The `content-length` each stream declares.
        #[arg(long, default_value_t = 2_883_584)]
        declared: u64,
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        hold: Duration,
    },
    Busy {
        #[arg(long, default_value_t = 96)]
        connections: usize,
        #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
        every: Duration,
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        hold: Duration,
    },
    Trickle {
        #[arg(long, default_value_t = 96)]
        connections: usize,
        #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
        every: Duration,
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        hold: Duration,
    },
    Large {
        #[arg(long, default_value_t = 200)]
        clients: usize,
        /// The reviews to send, each client taking them in turn (--body is the first).
        #[arg(long = "also")]
        also: Vec<PathBuf>,
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        hold: Duration,
    },
    Reviewing {
        #[arg(long, default_value_t = 64)]
        connections: usize,
        #[arg(long, default_value = "250ms", value_parser = humantime::parse_duration)]
        every: Duration,
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        hold: Duration,
    },
    Churn {
        /// Tasks connecting at once.
        #[arg(long, default_value_t = 16)]
        connections: usize,
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        hold: Duration,
    },
    AdminHeads {
        #[arg(long, default_value_t = 377)]
        connections: usize,
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        hold: Duration,
    },
    AdminIdle {
        #[arg(long, default_value_t = 2000)]
        connections: usize,
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        hold: Duration,
    },
    Review,
    Probes {
        #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
        duration: Duration,
        /// A review counts as answered when a 200 comes within this long
        /// of its first try (the webhook's shipped timeoutSeconds).
        #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
        deadline: Duration,
        #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
        every: Duration,
    },
    CertAhead {
        /// Holds ca.crt and ca.key.
        #[arg(long)]
        ca_dir: PathBuf,
        /// Where tls.crt and tls.key are written.
        #[arg(long)]
        out: PathBuf,
        /// notBefore is this far ahead of now.
        #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
        ahead: Duration,
    },
}

fn tls(ca: &Path, alpn: &[u8]) -> Result<Arc<rustls::ClientConfig>, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(Arc::new(config))
}

/// Where every attack connects, and as whom it checks the server.
#[derive(Clone)]
struct Target {
    addr: SocketAddr,
    name: ServerName<'static>,
}

/// The attacks' source addresses (`--source`), taken in turn.
static SOURCES: std::sync::OnceLock<Vec<IpAddr>> = std::sync::OnceLock::new();
static NEXT_SOURCE: AtomicUsize = AtomicUsize::new(0);

/// A TCP connection to `addr` from the next `--source` (the default
/// address without one).
async fn attacker_tcp(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let sources = SOURCES.get().map(Vec::as_slice).unwrap_or_default();
    if sources.is_empty() {
        return TcpStream::connect(addr).await;
    }
    let source = sources[NEXT_SOURCE.fetch_add(1, Ordering::Relaxed) % sources.len()];
    let socket = match source {
        IpAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        IpAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.bind(SocketAddr::new(source, 0))?;
    socket.connect(addr).await
}

/// An attack's TLS connection, from the next `--source`.
async fn connect(
    target: &Target,
    config: &Arc<rustls::ClientConfig>,
) -> Result<TlsStream<TcpStream>, Error> {
    let tcp = attacker_tcp(target.addr).await?;
    tls_over(tcp, target, config).await
}

/// A probe's TLS connection, from the default address.
async fn probe_connect(
    target: &Target,
    config: &Arc<rustls::ClientConfig>,
) -> Result<TlsStream<TcpStream>, Error> {
    let tcp = TcpStream::connect(target.addr).await?;
    tls_over(tcp, target, config).await
}

async fn tls_over(
    tcp: TcpStream,
    target: &Target,
    config: &Arc<rustls::ClientConfig>,
) -> Result<TlsStream<TcpStream>, Error> {
    tcp.set_nodelay(true)?;
    let name = target.name.clone();
    let tls = TlsConnector::from(config.clone()).connect(name, tcp);
    Ok(tokio::time::timeout(Duration::from_secs(20), tls).await??)
}

fn request(body: &Bytes) -> Result<hyper::Request<()>, Error> {
    declaring(body.len() as u64)
}

/// A review's head declaring `len` bytes of body.
fn declaring(len: u64) -> Result<hyper::Request<()>, Error> {
    let req = hyper::Request::post("https://localhost/mutate-pods")
        .header("content-type", "application/json")
        .header("content-length", len)
        .body(())?;
    Ok(req)
}

/// Counters every attack reports.
#[derive(Default)]
struct Seen {
    connected: AtomicUsize,
    connect_errors: AtomicUsize,
    sent: AtomicUsize,
    refused: AtomicUsize,
    answered: AtomicUsize,
    closed_by_server: AtomicUsize,
    /// Answers by status (their count per code).
    statuses: Mutex<std::collections::BTreeMap<u16, usize>>,
}

impl Seen {
    fn report(&self, attack: &str, started: Instant) -> serde_json::Value {
        let n = |c: &AtomicUsize| c.load(Ordering::Relaxed);
        let statuses = self.statuses.lock().map(|s| s.clone()).unwrap_or_default();
        json!({
            "attack": attack,
            "seconds": started.elapsed().as_secs_f64(),
            "connected": n(&self.connected),
            "connect_errors": n(&self.connect_errors),
            "sent": n(&self.sent),
            "refused": n(&self.refused),
            "answered": n(&self.answered),
            "closed_by_server": n(&self.closed_by_server),
            "statuses": statuses,
        })
    }

    fn status(&self, code: u16) {
        if let Ok(mut statuses) = self.statuses.lock() {
            *statuses.entry(code).or_default() += 1;
        }
        let counter = if code == 200 {
            &self.answered
        } else {
            &self.refused
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// An HTTP/2 connection whose driver counts the server closing it.
async fn h2_connection(
    target: &Target,
    config: &Arc<rustls::ClientConfig>,
    seen: &Arc<Seen>,
) -> Result<(h2::client::SendRequest<Bytes>, tokio::task::JoinHandle<()>), Error> {
    let tls = match connect(target, config).await {
        Ok(tls) => tls,
        Err(e) => {
            seen.connect_errors.fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
    };
    seen.connected.fetch_add(1, Ordering::Relaxed);
    let (client, connection) = h2::client::handshake(tls).await?;
    let driver_seen = seen.clone();
    let driver = tokio::spawn(async move {
        let _ = connection.await;
        driver_seen.closed_by_server.fetch_add(1, Ordering::Relaxed);
    });
    Ok((client, driver))
}

/// Runs `attack` on a connection, again on a new one whenever the server
/// closes it (after a short pause, so a refused connect does not spin).
async fn reconnecting<F, Fut>(
    target: Target,
    config: Arc<rustls::ClientConfig>,
    seen: Arc<Seen>,
    attack: F,
) where
    F: Fn(h2::client::SendRequest<Bytes>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    loop {
        match h2_connection(&target, &config, &seen).await {
            Ok((client, driver)) => {
                tokio::select! {
                    _ = driver => {}
                    _ = attack(client) => {}
                }
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Streams whose answers the server may not send: SETTINGS_INITIAL_WINDOW_SIZE 0.
async fn h2_unread(
    target: Target,
    config: Arc<rustls::ClientConfig>,
    body: Bytes,
    streams: usize,
    seen: Arc<Seen>,
) -> Result<(), Error> {
    let tls = connect(&target, &config).await?;
    seen.connected.fetch_add(1, Ordering::Relaxed);
    let (client, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, Bytes>(tls)
        .await?;
    let driver_seen = seen.clone();
    tokio::spawn(async move {
        let _ = connection.await;
        driver_seen.closed_by_server.fetch_add(1, Ordering::Relaxed);
    });
    let mut held = Vec::new();
    for _ in 0..streams {
        let mut ready = match client.clone().ready().await {
            Ok(ready) => ready,
            Err(_) => break,
        };
        let Ok((response, mut send)) = ready.send_request(request(&body)?, false) else {
            break;
        };
        send.reserve_capacity(body.len());
        if send.send_data(body.clone(), true).is_err() {
            break;
        }
        seen.sent.fetch_add(1, Ordering::Relaxed);
        held.push((response, send));
    }
    // The heads arrive (HEADERS needs no window); the answers cannot.
    for (response, _) in &mut held {
        let head = tokio::time::timeout(Duration::from_millis(200), response).await;
        match head {
            Ok(Ok(r)) if r.status() == 200 => {
                seen.answered.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Ok(_)) => {
                seen.refused.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }
    std::future::pending::<()>().await;
    Ok(())
}

/// One review written, the answer never read.
async fn h1_unread(
    target: Target,
    config: Arc<rustls::ClientConfig>,
    body: Bytes,
    seen: Arc<Seen>,
) -> Result<(), Error> {
    let mut tls = connect(&target, &config).await?;
    seen.connected.fetch_add(1, Ordering::Relaxed);
    let head = format!(
        "POST /mutate-pods HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await?;
    tls.write_all(&body).await?;
    tls.flush().await?;
    seen.sent.fetch_add(1, Ordering::Relaxed);
    std::future::pending::<()>().await;
    Ok(())
}

/// One review answered and read, then the connection kept idle.
async fn idle_h2(
    target: Target,
    config: Arc<rustls::ClientConfig>,
    body: Bytes,
    seen: Arc<Seen>,
    opening: tokio::sync::OwnedSemaphorePermit,
) -> Result<(), Error> {
    let tls = connect(&target, &config).await?;
    seen.connected.fetch_add(1, Ordering::Relaxed);
    let (client, connection) = h2::client::handshake(tls).await?;
    let driver_seen = seen.clone();
    tokio::spawn(async move {
        let _ = connection.await;
        driver_seen.closed_by_server.fetch_add(1, Ordering::Relaxed);
    });
    let mut ready = client.ready().await?;
    let (response, mut send) = ready.send_request(request(&body)?, false)?;
    send.send_data(body, true)?;
    seen.sent.fetch_add(1, Ordering::Relaxed);
    let response = response.await?;
    let status = response.status();
    let mut answer = response.into_body();
    while let Some(chunk) = answer.data().await {
        let chunk = chunk?;
        let _ = answer.flow_control().release_capacity(chunk.len());
    }
    if status == 200 {
        seen.answered.fetch_add(1, Ordering::Relaxed);
    } else {
        seen.refused.fetch_add(1, Ordering::Relaxed);
    }
    // Open and answered: the next connection may start.
    drop(opening);
    std::future::pending::<()>().await;
    Ok(())
}

/// A stream declaring `declared` bytes whose body comes `trickle` (one
/// byte each `every` from `body`) or never; done when it is answered or
/// reset.
async fn promised_stream(
    mut client: h2::client::SendRequest<Bytes>,
    declared: u64,
    trickle: Option<(Bytes, Duration)>,
    seen: &Seen,
) -> Result<(), Error> {
    client = client.ready().await?;
    let (response, mut send) = client.send_request(declaring(declared)?, false)?;
    seen.sent.fetch_add(1, Ordering::Relaxed);
    let feed = async {
        match trickle {
            Some((body, every)) => {
                for i in 0..body.len() {
                    send.send_data(body.slice(i..i + 1), i + 1 == body.len())?;
                    tokio::time::sleep(every).await;
                }
                std::future::pending::<()>().await;
            }
            None => std::future::pending::<()>().await,
        }
        Ok::<_, Error>(())
    };
    tokio::select! {
        answer = response => {
            let status = answer?.status();
            seen.status(status.as_u16());
        }
        fed = feed => fed?,
    }
    Ok(())
}

/// `streams` streams declaring `declared` bytes each and sending nothing,
/// each opened again at once when it ends.
async fn promise(
    client: h2::client::SendRequest<Bytes>,
    streams: usize,
    declared: u64,
    seen: Arc<Seen>,
) {
    let mut all = Vec::new();
    for _ in 0..streams {
        let (client, seen) = (client.clone(), seen.clone());
        all.push(async move {
            while promised_stream(client.clone(), declared, None, &seen)
                .await
                .is_ok()
            {}
        });
    }
    futures::future::join_all(all).await;
}

/// A new stream every `every` whose 100-byte body never comes.
async fn busy(client: h2::client::SendRequest<Bytes>, every: Duration, seen: Arc<Seen>) {
    loop {
        let (client, seen) = (client.clone(), seen.clone());
        let stream = tokio::spawn(async move { promised_stream(client, 100, None, &seen).await });
        tokio::time::sleep(every).await;
        if stream.is_finished() && matches!(stream.await, Ok(Err(_))) {
            return;
        }
    }
}

/// One stream at a time whose body comes a byte every `every`.
async fn trickle(
    client: h2::client::SendRequest<Bytes>,
    body: Bytes,
    every: Duration,
    seen: Arc<Seen>,
) {
    let declared = body.len() as u64;
    while promised_stream(client.clone(), declared, Some((body.clone(), every)), &seen)
        .await
        .is_ok()
    {}
}

/// The status, the `Retry-After` seconds and the body of one review on `client`.
async fn exchange(
    client: h2::client::SendRequest<Bytes>,
    body: &Bytes,
) -> Result<(u16, Option<u64>, Vec<u8>), Error> {
    let mut ready = client.ready().await?;
    let (response, mut send) = ready.send_request(request(body)?, false)?;
    send.reserve_capacity(body.len());
    send_all(&mut send, body.clone()).await?;
    let response = response.await?;
    let status = response.status().as_u16();
    let retry = response.headers().get("retry-after");
    let retry = retry.and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let mut answer = response.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = answer.data().await {
        let chunk = chunk?;
        let _ = answer.flow_control().release_capacity(chunk.len());
        text.extend_from_slice(&chunk);
    }
    Ok((status, retry, text))
}

/// Sends `body` whole, as flow control allows.
async fn send_all(send: &mut h2::SendStream<Bytes>, mut body: Bytes) -> Result<(), Error> {
    while !body.is_empty() {
        send.reserve_capacity(body.len());
        let granted = std::future::poll_fn(|cx| send.poll_capacity(cx)).await;
        let granted = granted.ok_or("stream closed while sending")??;
        let chunk = body.split_to(granted.min(body.len()));
        send.send_data(chunk, body.is_empty())?;
    }
    Ok(())
}

/// Large reviews one after another on one connection, every answer read,
/// `Retry-After` honoured.
async fn large(
    client: h2::client::SendRequest<Bytes>,
    bodies: Arc<Vec<Bytes>>,
    first: usize,
    seen: Arc<Seen>,
) {
    for i in first.. {
        let body = &bodies[i % bodies.len()];
        seen.sent.fetch_add(1, Ordering::Relaxed);
        match exchange(client.clone(), body).await {
            Ok((status, retry, _)) => {
                seen.status(status);
                if status == 503 {
                    tokio::time::sleep(Duration::from_secs(retry.unwrap_or(1))).await;
                }
            }
            Err(_) => return,
        }
    }
}

/// One review on a new HTTP/2 connection, its answer checked.
async fn review(target: Target, config: Arc<rustls::ClientConfig>, body: Bytes) -> i32 {
    let started = Instant::now();
    let outcome = async {
        let tls = probe_connect(&target, &config).await?;
        let (client, connection) = h2::client::handshake(tls).await?;
        tokio::spawn(connection);
        let (status, _, text) = exchange(client, &body).await?;
        Ok::<_, Error>((status, text))
    };
    let limit = Duration::from_secs(20);
    let (status, allowed, error) = match tokio::time::timeout(limit, outcome).await {
        Ok(Ok((status, text))) => {
            let answer: serde_json::Value = serde_json::from_slice(&text).unwrap_or_default();
            let allowed = answer["response"]["allowed"] == true;
            (status, allowed, None)
        }
        Ok(Err(e)) => (0, false, Some(e.to_string())),
        Err(_) => (0, false, Some(format!("no answer within {limit:?}"))),
    };
    let report = json!({
        "attack": "review",
        "status": status,
        "allowed": allowed,
        "seconds": started.elapsed().as_secs_f64(),
        "error": error,
    });
    println!("{report}");
    i32::from(!(status == 200 && allowed))
}

/// A busy client's connection: a small review every `every`, each read.
async fn reviewing(
    client: h2::client::SendRequest<Bytes>,
    body: Bytes,
    every: Duration,
    seen: Arc<Seen>,
) {
    loop {
        match exchange(client.clone(), &body).await {
            Ok((status, _, _)) => seen.status(status),
            Err(_) => return,
        }
        tokio::time::sleep(every).await;
    }
}

/// TCP connections opened one after another, never sending, the last 16
/// kept open.
async fn churn(addr: SocketAddr, seen: Arc<Seen>) {
    let mut held = std::collections::VecDeque::new();
    loop {
        match attacker_tcp(addr).await {
            Ok(tcp) => {
                seen.connected.fetch_add(1, Ordering::Relaxed);
                held.push_back(tcp);
                if held.len() > 16 {
                    held.pop_front();
                }
            }
            Err(_) => {
                seen.connect_errors.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        tokio::task::yield_now().await;
    }
}

/// A request head to the admin port that never ends, again whenever the
/// server closes the connection.
async fn admin_head(admin: SocketAddr, seen: Arc<Seen>) {
    let chunk = vec![b'a'; 16 * 1024];
    loop {
        let Ok(mut tcp) = attacker_tcp(admin).await else {
            seen.connect_errors.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        seen.connected.fetch_add(1, Ordering::Relaxed);
        if tcp
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\nX-Pad: ")
            .await
            .is_err()
        {
            continue;
        }
        while tcp.write_all(&chunk).await.is_ok() {
            seen.sent.fetch_add(chunk.len(), Ordering::Relaxed);
        }
        seen.closed_by_server.fetch_add(1, Ordering::Relaxed);
    }
}

/// Connects in flight at once: more overflow the server's accept queue,
/// and the kernel drops their SYNs, to be sent again only seconds later.
static CONNECTING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(64);

/// An admin connection that sends nothing, again whenever it is closed.
async fn admin_idle(admin: SocketAddr, seen: Arc<Seen>) {
    let mut buf = [0u8; 256];
    loop {
        let connecting = CONNECTING.acquire().await;
        let connected = attacker_tcp(admin).await;
        drop(connecting);
        let Ok(mut tcp) = connected else {
            seen.connect_errors.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        seen.connected.fetch_add(1, Ordering::Relaxed);
        while matches!(tcp.read(&mut buf).await, Ok(n) if n > 0) {}
        seen.closed_by_server.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// kubelet's readiness probe, every second for `duration`: a new
/// connection, `GET /readyz`, 1 s for all of it.
async fn readyz_probe(admin: SocketAddr, duration: Duration) -> serde_json::Value {
    let started = Instant::now();
    let (mut tries, mut answered, mut in_a_row, mut most_in_a_row) = (0, 0, 0, 0);
    let (mut last_ok, mut longest_gap, mut seconds) = (started, Duration::ZERO, Vec::new());
    let mut failures = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while started.elapsed() < duration {
        tick.tick().await;
        tries += 1;
        let asked = Instant::now();
        let probe = async {
            let mut tcp = TcpStream::connect(admin).await?;
            let head = "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: kube-probe/1.33\r\n\
                        Accept: */*\r\nConnection: close\r\n\r\n";
            tcp.write_all(head.as_bytes()).await?;
            let mut answer = Vec::new();
            tcp.read_to_end(&mut answer).await?;
            Ok::<_, Error>(answer.starts_with(b"HTTP/1.1 200"))
        };
        match tokio::time::timeout(Duration::from_secs(1), probe).await {
            Ok(Ok(true)) => {
                answered += 1;
                in_a_row = 0;
                longest_gap = longest_gap.max(last_ok.elapsed());
                last_ok = Instant::now();
                seconds.push(asked.elapsed().as_secs_f64());
            }
            other => {
                in_a_row += 1;
                most_in_a_row = most_in_a_row.max(in_a_row);
                let why = match other {
                    Ok(Ok(_)) => "not 200".to_string(),
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => "no answer within 1 s".to_string(),
                };
                if failures.len() < 5 {
                    failures.push(format!(
                        "at {:.1} s: {why}",
                        started.elapsed().as_secs_f64()
                    ));
                }
            }
        }
    }
    longest_gap = longest_gap.max(last_ok.elapsed());
    seconds.sort_by(f64::total_cmp);
    json!({
        "tries": tries,
        "answered": answered,
        "failed_in_a_row": most_in_a_row,
        "longest_gap": longest_gap.as_secs_f64(),
        "p50": seconds.get(seconds.len() / 2),
        "max": seconds.last(),
        "failures": failures,
    })
}

/// One probe's reviews: how long each took to its 200, or why it failed.
#[derive(Default)]
struct Probed {
    seconds: Vec<f64>,
    failures: Vec<String>,
    tries: usize,
}

impl Probed {
    fn report(&self, deadline: Duration) -> serde_json::Value {
        let mut all = self.seconds.clone();
        // A failed review counts at the deadline for the percentiles.
        all.extend(self.failures.iter().map(|_| deadline.as_secs_f64()));
        all.sort_by(f64::total_cmp);
        let at = |q: f64| {
            all.get(((all.len().max(1) - 1) as f64 * q).round() as usize)
                .copied()
        };
        json!({
            "reviews": all.len(),
            "answered": self.seconds.len(),
            "tries": self.tries,
            "p50": at(0.5),
            "p99": at(0.99),
            "max": all.last(),
            "failures": self.failures.iter().take(5).collect::<Vec<_>>(),
        })
    }
}

/// Why a try failed, and whether another may follow (after `Retry-After`
/// or a second, as the API server's client would).
enum Try {
    Answered,
    Again(String, Duration),
}

fn outcome(result: Result<(u16, Option<u64>, Vec<u8>), Error>) -> Try {
    match result {
        Ok((200, _, text)) => {
            let answer: serde_json::Value = serde_json::from_slice(&text).unwrap_or_default();
            if answer["response"]["allowed"] == true {
                Try::Answered
            } else {
                Try::Again(
                    format!("200 without an allowance: {answer}"),
                    Duration::from_secs(1),
                )
            }
        }
        Ok((status, retry, text)) => {
            let text = String::from_utf8_lossy(&text[..text.len().min(200)]).into_owned();
            let wait = Duration::from_secs(retry.unwrap_or(1));
            Try::Again(format!("{status}: {text}"), wait)
        }
        Err(e) => {
            // Streams refused or above a GOAWAY were not processed: Go's
            // client retries them at once on another connection.
            let refused = e.downcast_ref::<h2::Error>().is_some_and(|h2| {
                h2.reason() == Some(h2::Reason::REFUSED_STREAM) || h2.is_go_away()
            });
            let wait = if refused {
                Duration::ZERO
            } else {
                Duration::from_secs(1)
            };
            Try::Again(e.to_string(), wait)
        }
    }
}

/// Retries `attempt` within `deadline` of the first try; the time to the
/// 200, or the last failure.
async fn within<F, Fut>(deadline: Duration, probed: &Mutex<Probed>, mut attempt: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(u16, Option<u64>, Vec<u8>), Error>>,
{
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let left = deadline.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        if let Ok(mut p) = probed.lock() {
            p.tries += 1;
        }
        let result = match tokio::time::timeout(left, attempt()).await {
            Ok(result) => outcome(result),
            Err(_) => Try::Again(format!("no answer within {deadline:?}"), Duration::ZERO),
        };
        match result {
            Try::Answered => {
                if let Ok(mut p) = probed.lock() {
                    p.seconds.push(started.elapsed().as_secs_f64());
                }
                return;
            }
            Try::Again(why, wait) => {
                last = why;
                if started.elapsed() + wait >= deadline {
                    break;
                }
                tokio::time::sleep(wait).await;
            }
        }
    }
    let at = started.elapsed().as_secs_f64();
    if let Ok(mut p) = probed.lock() {
        p.failures.push(format!("after {at:.2} s: {last}"));
    }
}

/// The persistent probe's connection: opened again only if the server
/// closes it, which counts as an eviction.
struct Persistent {
    target: Target,
    config: Arc<rustls::ClientConfig>,
    client: tokio::sync::Mutex<Option<h2::client::SendRequest<Bytes>>>,
    closed: Arc<AtomicUsize>,
    goaway: Arc<AtomicUsize>,
}

impl Persistent {
    async fn client(&self) -> Result<h2::client::SendRequest<Bytes>, Error> {
        let mut kept = self.client.lock().await;
        if let Some(client) = kept.as_ref() {
            return Ok(client.clone());
        }
        let tls = probe_connect(&self.target, &self.config).await?;
        let (client, connection) = h2::client::handshake(tls).await?;
        let (closed, goaway) = (self.closed.clone(), self.goaway.clone());
        tokio::spawn(async move {
            match connection.await {
                Err(e) if e.is_go_away() => goaway.fetch_add(1, Ordering::Relaxed),
                // A connection ended with GOAWAY(NO_ERROR) ends Ok.
                Ok(()) => goaway.fetch_add(1, Ordering::Relaxed),
                Err(_) => closed.fetch_add(1, Ordering::Relaxed),
            };
        });
        *kept = Some(client.clone());
        Ok(client)
    }

    /// Forgets a connection the server has closed.
    async fn forget_if_closed(&self, error: &Error) {
        let gone = error
            .downcast_ref::<h2::Error>()
            .is_some_and(|e| e.is_go_away() || e.is_io());
        if gone {
            *self.client.lock().await = None;
        }
    }
}

/// The red team's two API-server-like probes, for `duration`.
async fn probes(
    target: Target,
    config: Arc<rustls::ClientConfig>,
    body: Bytes,
    (duration, deadline, every): (Duration, Duration, Duration),
    admin: Option<SocketAddr>,
) {
    let started = Instant::now();
    let readyz = admin.map(|admin| tokio::spawn(readyz_probe(admin, duration)));
    let fresh = Arc::new(Mutex::new(Probed::default()));
    let kept = Arc::new(Mutex::new(Probed::default()));
    let persistent = Arc::new(Persistent {
        target: target.clone(),
        config: config.clone(),
        client: tokio::sync::Mutex::new(None),
        closed: Arc::default(),
        goaway: Arc::default(),
    });
    // Opened before the first review, as the API server keeps one open;
    // within the deadline (a server at its connection cap may never serve
    // the handshake), else the reviews open it.
    let opened = tokio::time::timeout(deadline, persistent.client()).await;
    let failed = match opened {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some(format!("not opened within {deadline:?}")),
    };
    if let (Some(why), Ok(mut p)) = (failed, kept.lock()) {
        p.failures.push(format!("the persistent connection: {why}"));
    }
    let mut tasks = Vec::new();
    let mut tick = tokio::time::interval(every);
    while started.elapsed() < duration {
        tick.tick().await;
        let (target, config, sent, fresh) =
            (target.clone(), config.clone(), body.clone(), fresh.clone());
        tasks.push(tokio::spawn(async move {
            within(deadline, &fresh, || async {
                let tls = probe_connect(&target, &config).await?;
                let (client, connection) = h2::client::handshake(tls).await?;
                tokio::spawn(connection);
                exchange(client, &sent).await
            })
            .await;
        }));
        let (persistent, sent, kept) = (persistent.clone(), body.clone(), kept.clone());
        tasks.push(tokio::spawn(async move {
            within(deadline, &kept, || async {
                let client = persistent.client().await?;
                let result = exchange(client, &sent).await;
                if let Err(e) = &result {
                    persistent.forget_if_closed(e).await;
                }
                result
            })
            .await;
        }));
    }
    futures::future::join_all(tasks).await;
    let readyz = match readyz {
        Some(readyz) => Some(readyz.await.unwrap_or_default()),
        None => None,
    };
    let (fresh, kept) = (fresh.lock(), kept.lock());
    let (Ok(fresh), Ok(kept)) = (fresh, kept) else {
        return;
    };
    let mut persistent_report = kept.report(deadline);
    persistent_report["goaway"] = json!(persistent.goaway.load(Ordering::Relaxed));
    persistent_report["closed"] = json!(persistent.closed.load(Ordering::Relaxed));
    let mut report = json!({
        "attack": "probes",
        "seconds": started.elapsed().as_secs_f64(),
        "new_connection": fresh.report(deadline),
        "persistent": persistent_report,
    });
    if let Some(readyz) = readyz {
        report["readyz"] = readyz;
    }
    println!("{report}");
}

/// Writes a serving pair signed by the CA of `ca_dir`, valid from `ahead`
/// from now, for the Service the red team's certificates name.
fn cert_ahead(ca_dir: &Path, out: &Path, ahead: Duration) -> Result<(), Error> {
    use kserve_injector::certs::{service_dns_names, Authority, Validity};
    let read = |name: &str| std::fs::read_to_string(ca_dir.join(name));
    let authority = Authority::from_pem(&read("ca.crt")?, &read("ca.key")?)?;
    let now = time::OffsetDateTime::now_utc();
    let not_before = now + time::Duration::try_from(ahead)?;
    let validity = Validity {
        not_before,
        not_after: not_before + time::Duration::days(30),
    };
    let names = service_dns_names("kserve-injector", "kserve")?;
    let pair = authority.issue_serving("kserve-injector.kserve.svc", &names, validity)?;
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("tls.crt"), &pair.cert_pem)?;
    std::fs::write(out.join("tls.key"), &pair.key_pem)?;
    println!(
        "{}",
        json!({"not_before_unix": not_before.unix_timestamp()})
    );
    Ok(())
}

/// Runs `count` copies of `attack`, each on connections of its own.
fn spawn_each<F, Fut>(count: usize, attack: F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    for i in 0..count {
        tokio::spawn(attack(i));
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args = Args::parse();
    if let Attack::CertAhead { ca_dir, out, ahead } = &args.attack {
        return cert_ahead(ca_dir, out, *ahead);
    }
    let (Some(addr), Some(ca), Some(body)) = (args.addr, args.ca.as_deref(), args.body.as_deref())
    else {
        return Err("--addr, --ca and --body are required".into());
    };
    let target = Target {
        addr,
        name: ServerName::try_from(args.server_name.clone())?,
    };
    let _ = SOURCES.set(args.source.clone());
    let admin = args.admin.ok_or("--admin is required");
    let body = Bytes::from(std::fs::read(body)?);
    let started = Instant::now();
    let seen = Arc::new(Seen::default());
    let h2 = tls(ca, b"h2")?;
    let (name, hold) = match args.attack {
        Attack::CertAhead { .. } => return Ok(()),
        Attack::Review => {
            let code = review(target, h2, body).await;
            std::process::exit(code);
        }
        Attack::Probes {
            duration,
            deadline,
            every,
        } => {
            let timing = (duration, deadline, every);
            probes(target, h2, body, timing, args.admin).await;
            std::process::exit(0);
        }
        Attack::H2Unread {
            connections,
            streams,
            hold,
        } => {
            for _ in 0..connections {
                let (config, body, seen, target) =
                    (h2.clone(), body.clone(), seen.clone(), target.clone());
                tokio::spawn(async move {
                    if h2_unread(target.clone(), config, body, streams, seen.clone())
                        .await
                        .is_err()
                    {
                        seen.connect_errors.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            ("h2-unread", hold)
        }
        Attack::H1Unread { connections, hold } => {
            let config = tls(ca, b"http/1.1")?;
            for _ in 0..connections {
                let (config, body, seen, target) =
                    (config.clone(), body.clone(), seen.clone(), target.clone());
                tokio::spawn(async move {
                    if h1_unread(target.clone(), config, body, seen.clone())
                        .await
                        .is_err()
                    {
                        seen.connect_errors.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            ("h1-unread", hold)
        }
        Attack::IdleH2 {
            connections,
            parallel,
            hold,
        } => {
            let gate = Arc::new(tokio::sync::Semaphore::new(parallel));
            for _ in 0..connections {
                let permit = gate.clone().acquire_owned().await?;
                let (config, body, seen, target) =
                    (h2.clone(), body.clone(), seen.clone(), target.clone());
                tokio::spawn(async move {
                    if idle_h2(target.clone(), config, body, seen.clone(), permit)
                        .await
                        .is_err()
                    {
                        seen.connect_errors.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            ("idle-h2", hold)
        }
        Attack::Promise {
            connections,
            streams,
            declared,
            hold,
        } => {
            spawn_each(connections, |_| {
                let seen = seen.clone();
                reconnecting(target.clone(), h2.clone(), seen.clone(), move |client| {
                    promise(client, streams, declared, seen.clone())
                })
            });
            ("promise", hold)
        }
        Attack::Busy {
            connections,
            every,
            hold,
        } => {
            spawn_each(connections, |_| {
                let seen = seen.clone();
                reconnecting(target.clone(), h2.clone(), seen.clone(), move |client| {
                    busy(client, every, seen.clone())
                })
            });
            ("busy", hold)
        }
        Attack::Trickle {
            connections,
            every,
            hold,
        } => {
            spawn_each(connections, |_| {
                let (seen, body) = (seen.clone(), body.clone());
                reconnecting(target.clone(), h2.clone(), seen.clone(), move |client| {
                    trickle(client, body.clone(), every, seen.clone())
                })
            });
            ("trickle", hold)
        }
        Attack::Reviewing {
            connections,
            every,
            hold,
        } => {
            spawn_each(connections, |_| {
                let (seen, body) = (seen.clone(), body.clone());
                reconnecting(target.clone(), h2.clone(), seen.clone(), move |client| {
                    reviewing(client, body.clone(), every, seen.clone())
                })
            });
            ("reviewing", hold)
        }
        Attack::Churn { connections, hold } => {
            spawn_each(connections, |_| churn(target.addr, seen.clone()));
            ("churn", hold)
        }
        Attack::AdminHeads { connections, hold } => {
            let admin = admin?;
            spawn_each(connections, |_| admin_head(admin, seen.clone()));
            ("admin-heads", hold)
        }
        Attack::AdminIdle { connections, hold } => {
            let admin = admin?;
            spawn_each(connections, |_| admin_idle(admin, seen.clone()));
            ("admin-idle", hold)
        }
        Attack::Large {
            clients,
            also,
            hold,
        } => {
            let mut bodies = vec![body.clone()];
            for path in &also {
                bodies.push(Bytes::from(std::fs::read(path)?));
            }
            let bodies = Arc::new(bodies);
            spawn_each(clients, |i| {
                let (seen, bodies) = (seen.clone(), bodies.clone());
                reconnecting(target.clone(), h2.clone(), seen.clone(), move |client| {
                    large(client, bodies.clone(), i, seen.clone())
                })
            });
            ("large", hold)
        }
    };
    tokio::time::sleep(hold).await;
    println!("{}", seen.report(name, started));
    std::process::exit(0);
}
