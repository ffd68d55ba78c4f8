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
//! - `review`: one review over a new connection, read whole; exits 1
//!   unless the answer is a 200 AdmissionReview that allows the pod.
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
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

type Error = Box<dyn std::error::Error + Send + Sync>;

#[derive(Parser)]
struct Args {
    /// The webhook listener.
    #[arg(long)]
    addr: SocketAddr,
    /// The CA the serving certificate chains to (PEM).
    #[arg(long)]
    ca: PathBuf,
    /// The AdmissionReview to send.
    #[arg(long)]
    body: PathBuf,
    /// The name the serving certificate is checked against.
    #[arg(long, default_value = "localhost")]
    server_name: String,
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
    Review,
}

fn tls(ca: &PathBuf, alpn: &[u8]) -> Result<Arc<rustls::ClientConfig>, Error> {
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

async fn connect(
    target: &Target,
    config: &Arc<rustls::ClientConfig>,
) -> Result<TlsStream<TcpStream>, Error> {
    let tcp = TcpStream::connect(target.addr).await?;
    tcp.set_nodelay(true)?;
    let name = target.name.clone();
    let tls = TlsConnector::from(config.clone()).connect(name, tcp);
    Ok(tokio::time::timeout(Duration::from_secs(20), tls).await??)
}

fn request(body: &Bytes) -> Result<hyper::Request<()>, Error> {
    let req = hyper::Request::post("https://localhost/mutate-pods")
        .header("content-type", "application/json")
        .header("content-length", body.len())
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
}

impl Seen {
    fn report(&self, attack: &str, started: Instant) -> serde_json::Value {
        let n = |c: &AtomicUsize| c.load(Ordering::Relaxed);
        json!({
            "attack": attack,
            "seconds": started.elapsed().as_secs_f64(),
            "connected": n(&self.connected),
            "connect_errors": n(&self.connect_errors),
            "sent": n(&self.sent),
            "refused": n(&self.refused),
            "answered": n(&self.answered),
            "closed_by_server": n(&self.closed_by_server),
        })
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

/// One review on a new HTTP/2 connection, its answer checked.
async fn review(target: Target, config: Arc<rustls::ClientConfig>, body: Bytes) -> i32 {
    let started = Instant::now();
    let outcome = async {
        let tls = connect(&target, &config).await?;
        let (client, connection) = h2::client::handshake(tls).await?;
        tokio::spawn(connection);
        let mut ready = client.ready().await?;
        let (response, mut send) = ready.send_request(request(&body)?, false)?;
        send.send_data(body, true)?;
        let response = response.await?;
        let status = response.status();
        let mut answer = response.into_body();
        let mut text = Vec::new();
        while let Some(chunk) = answer.data().await {
            let chunk = chunk?;
            let _ = answer.flow_control().release_capacity(chunk.len());
            text.extend_from_slice(&chunk);
        }
        Ok::<_, Error>((status, text))
    };
    let limit = Duration::from_secs(20);
    let (status, allowed, error) = match tokio::time::timeout(limit, outcome).await {
        Ok(Ok((status, text))) => {
            let answer: serde_json::Value = serde_json::from_slice(&text).unwrap_or_default();
            let allowed = answer["response"]["allowed"] == true;
            (status.as_u16(), allowed, None)
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

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args = Args::parse();
    let target = Target {
        addr: args.addr,
        name: ServerName::try_from(args.server_name.clone())?,
    };
    let body = Bytes::from(std::fs::read(&args.body)?);
    let started = Instant::now();
    let seen = Arc::new(Seen::default());
    let (name, hold) = match args.attack {
        Attack::Review => {
            let code = review(target, tls(&args.ca, b"h2")?, body).await;
            std::process::exit(code);
        }
        Attack::H2Unread {
            connections,
            streams,
            hold,
        } => {
            let config = tls(&args.ca, b"h2")?;
            for _ in 0..connections {
                let (config, body, seen, target) =
                    (config.clone(), body.clone(), seen.clone(), target.clone());
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
            let config = tls(&args.ca, b"http/1.1")?;
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
            let config = tls(&args.ca, b"h2")?;
            let gate = Arc::new(tokio::sync::Semaphore::new(parallel));
            for _ in 0..connections {
                let permit = gate.clone().acquire_owned().await?;
                let (config, body, seen, target) =
                    (config.clone(), body.clone(), seen.clone(), target.clone());
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
    };
    tokio::time::sleep(hold).await;
    println!("{}", seen.report(name, started));
    std::process::exit(0);
}
