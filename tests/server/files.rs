//! File descriptors planned like memory, on the real binary started the
//! way a container's limits start it (`ulimit -n` before exec): the soft
//! limit is raised to the hard one, the connection cap derived from it,
//! and a --max-connections that cannot fit is refused with the arithmetic.

use crate::support::process::{exit_of, self_signed, under_nofile, Serve};
use crate::support::*;
use std::time::{Duration, Instant};

const SIZED: &str = "bounds sized to the memory limit (flags given win)";

#[test]
fn the_soft_open_file_limit_is_raised_to_the_hard_one_and_the_cap_fits_it() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let flags = self_signed(tmp.path());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    for (soft, hard, cap) in [
        (256, 4096, None),
        (256, 256, Some(104)),
        (1024, 1024, Some(802)),
    ] {
        let mut serve = Serve::spawn_command(under_nofile(soft, hard, &flags))?;
        let sized = serve.wait_for_log(PATIENCE, "the sizing line", |e| e["message"] == SIZED)?;
        ensure(sized["open_file_limit"] == hard, || {
            format!("soft {soft}, hard {hard}: {sized}")
        })?;
        if let Some(cap) = cap {
            // No memory limit here: the descriptors set the cap.
            let bound = sized["max_connections"].as_u64().unwrap_or(0);
            ensure(bound <= cap, || format!("ulimit -n {hard}: {sized}"))?;
        }
    }
    Ok(())
}

#[test]
fn connections_that_cannot_fit_the_open_file_limit_are_refused_with_the_arithmetic() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let mut flags = self_signed(tmp.path());
    flags.extend(["--max-connections".into(), "1000".into()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (code, stderr) = exit_of(under_nofile(256, 256, &flags))?;
    ensure(code == Some(1), || format!("exit code {code:?}: {stderr}"))?;
    let want =
        "error: invalid flags: the open-file limit (256, hard 256) is too low: 1000 webhook \
                connections (--max-connections) + 32 admin connections + 64 for the API client \
                + 32 for files, listeners and the runtime = 1128, plus a tenth as headroom = 1241 \
                file descriptors";
    ensure(stderr.starts_with(want), || {
        format!("{stderr:?} does not start with {want:?}")
    })?;
    // What fits is served.
    let mut fits = self_signed(tmp.path());
    fits.extend(["--max-connections".into(), "100".into()]);
    let fits: Vec<&str> = fits.iter().map(String::as_str).collect();
    let mut serve = Serve::spawn_command(under_nofile(256, 256, &fits))?;
    let sized = serve.wait_for_log(PATIENCE, "the sizing line", |e| e["message"] == SIZED)?;
    ensure(sized["max_connections"] == 100, || format!("{sized}"))
}

/// Serve's CPU time so far, in clock ticks (utime + stime of /proc/PID/stat).
fn cpu_ticks(pid: u32) -> Result<u64, Error> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name, which may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(tick(11) + tick(12))
}

/// Out of descriptors (the soft limit lowered under the running process to
/// what it holds): accepts fail with EMFILE, the listener backs off instead
/// of spinning on the readable socket, the established connection keeps
/// being served, and once descriptors are free again new connections are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_descriptors_the_listener_backs_off_and_established_connections_are_served(
) -> TestResult {
    use rustix::process::{prlimit, Pid, Resource, Rlimit};
    let tmp = tempfile::tempdir()?;
    let flags = self_signed(tmp.path());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let serve = Serve::spawn(&flags)?;
    let ca = std::fs::read_to_string(tmp.path().join("ca.crt"))?;
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let body = review_request(&pod, "admission.k8s.io/v1", "uid-1")?;
    let mut client = Client::open(serve.addr, &ca, Http::H2).await?;
    let (status, _) = client.post_json("/mutate-pods", body.clone()).await?;
    ensure(status == hyper::StatusCode::OK, || format!("{status}"))?;

    let pid = Pid::from_raw(serve.pid() as i32).ok_or_else(|| fail("no pid"))?;
    let held = std::fs::read_dir(format!("/proc/{}/fd", serve.pid()))?.count() as u64;
    // The hard limit stays (raising it is not ours to do): only the soft one moves.
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", serve.pid()))?;
    let hard = (limits.lines())
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(4))
        .and_then(|h| h.parse::<u64>().ok());
    let limit = |current| Rlimit {
        current: Some(current),
        maximum: hard,
    };
    let before = prlimit(Some(pid), Resource::Nofile, limit(held))?;
    // Connections the kernel completes and serve cannot accept.
    let mut waiting = Vec::new();
    for _ in 0..10 {
        waiting.push(tokio::net::TcpStream::connect(serve.addr).await?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (ticks, at) = (cpu_ticks(serve.pid())?, Instant::now());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = cpu_ticks(serve.pid())? - ticks;
    let (status, _) = client.post_json("/mutate-pods", body.clone()).await?;
    let served = status == hyper::StatusCode::OK;
    prlimit(Some(pid), Resource::Nofile, before)?;
    // Spinning on accept() would take the 2 s whole (200 ticks at 100 Hz).
    ensure(used < 40, || {
        format!(
            "{used} ticks of CPU in {:?} out of descriptors",
            at.elapsed()
        )
    })?;
    ensure(served, || {
        format!("the established connection got {status}")
    })?;
    drop(waiting);
    let (status, metrics) = admin_get(serve.admin, "/metrics").await?;
    ensure(status == hyper::StatusCode::OK, || {
        format!("/metrics: {status}")
    })?;
    let series = "kserve_injector_accept_errors_total{listener=\"webhook\",error=\"emfile\"}";
    let errors = metric(&metrics, series).unwrap_or(0.0);
    ensure(errors >= 1.0, || format!("{series} = {errors}"))?;
    let mut again = Client::open(serve.addr, &ca, Http::H2).await?;
    let (status, _) = again.post_json("/mutate-pods", body).await?;
    ensure(status == hyper::StatusCode::OK, || {
        format!("a new connection after: {status}")
    })
}
