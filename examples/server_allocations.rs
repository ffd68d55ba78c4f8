//! Allocations per request of `serve` and of the load benchmark's yardstick
//! (`examples/baseline_server.rs`), counted by a global allocator that wraps
//! mimalloc: each server runs in this process, h2load (a child process)
//! sends N requests and then 2N on a new connection, and the difference of
//! the two counts, over N, leaves the connection's set-up out. Counts, not
//! time: valid on a loaded machine.
//!
//! ```sh
//! cargo build --release --example server_allocations --example baseline_server
//! target/release/examples/baseline_server review fixtures/m3-modelcar-oci/input.yaml > review.json
//! target/release/kserve-injector mutate review.json > response.json
//! target/release/examples/server_allocations serve review.json 2000
//! target/release/examples/server_allocations baseline review.json 2000 response.json
//! ```
//!
//! Prints `allocations bytes` per request: calls to `alloc`, `alloc_zeroed`
//! and `realloc`, and the bytes they asked for (a `realloc`, its growth).

use std::alloc::{GlobalAlloc, Layout};
use std::net::SocketAddr;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicU64, Ordering};

#[allow(dead_code)]
#[path = "baseline_server.rs"]
mod baseline;

struct Counting;

static CALLS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to mimalloc unchanged; the counters are
// plain atomics and never allocate.
unsafe impl GlobalAlloc for Counting {
    // SAFETY (callers'): `layout` has a non-zero size.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        CALLS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    // SAFETY (callers'): as for `alloc`.
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        CALLS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }
    // SAFETY (callers'): `ptr` is a live block allocated with `layout`.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        CALLS.fetch_add(1, Ordering::Relaxed);
        let growth = new_size.saturating_sub(layout.size());
        BYTES.fetch_add(growth as u64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
    // SAFETY (callers'): `ptr` is a live block allocated with `layout`.
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Sends `n` requests over one connection; fails unless all are answered 2xx.
fn send(url: &str, body: &str, n: u64) -> Result<(), Error> {
    let out = Command::new("h2load")
        .args(["-H", "content-type: application/json", "-d", body])
        .args(["-c", "1", "-m", "1", "-n", &n.to_string(), url])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !text.contains(&format!("status codes: {n} 2xx")) {
        return Err(format!("h2load did not get {n} answers 2xx:\n{text}").into());
    }
    Ok(())
}

/// (calls, bytes) the server made while `n` requests were answered.
fn counted(url: &str, body: &str, n: u64) -> Result<(u64, u64), Error> {
    let (calls, bytes) = (CALLS.load(Ordering::SeqCst), BYTES.load(Ordering::SeqCst));
    send(url, body, n)?;
    Ok((
        CALLS.load(Ordering::SeqCst) - calls,
        BYTES.load(Ordering::SeqCst) - bytes,
    ))
}

fn measure(url: &str, body: &str, n: u64) -> Result<(), Error> {
    send(url, body, 200)?;
    let one = counted(url, body, n)?;
    let two = counted(url, body, 2 * n)?;
    let per = |a: u64, b: u64| b.saturating_sub(a) as f64 / n as f64;
    println!("{:.1} {:.0}", per(one.0, two.0), per(one.1, two.1));
    Ok(())
}

fn run(args: &[String]) -> Result<(), Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match args {
        [server, body, n] if server == "serve" => {
            let dir = std::env::temp_dir().join(format!("server-allocations-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let ca = dir.join("ca.crt").to_string_lossy().into_owned();
            let flags = [
                "--self-signed", "--self-signed-ca-file", &ca, "--addr", "127.0.0.1:0",
                "--admin-addr", "127.0.0.1:0", "--cluster-lookups", "off", "--shutdown-delay", "0s",
            ];
            let args = kserve_injector::server::args::ServeArgs::try_parse_from(flags)?;
            let server = runtime.block_on(kserve_injector::server::Server::start(args))?;
            let url = format!("https://{}/mutate-pods", server.local_addr());
            let measured = measure(&url, body, n.parse()?);
            let _ = std::fs::remove_dir_all(&dir);
            measured
        }
        [server, body, n, response] if server == "baseline" => {
            let fixed = hyper::body::Bytes::from(std::fs::read(response)?);
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            let addr: SocketAddr = listener.local_addr()?;
            drop(listener);
            runtime.spawn(async move {
                if let Err(e) = baseline::serve(addr, fixed).await {
                    eprintln!("baseline: {e}");
                }
            });
            let url = format!("https://{addr}/mutate-pods");
            for _ in 0..100 {
                if std::net::TcpStream::connect(addr).is_ok() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            measure(&url, body, n.parse()?)
        }
        _ => Err("usage: server_allocations serve REVIEW N | server_allocations baseline REVIEW N RESPONSE".into()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
