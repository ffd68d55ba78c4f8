//! Memory comes back: a config reload refused by the reader's budget, and
//! a serving certificate file far larger than any certificate, measured on
//! the real binary's resident set (/proc/PID/status), not on this test
//! process (whose other tests allocate at the same time). A reload of a
//! ConfigMap whose anchors nest stays within the budget, whether it fits
//! (and is loaded) or not (and is refused).

use crate::support::*;
#[path = "../shared/hostile_yaml.rs"]
mod hostile_yaml;
use hostile_yaml::{data_block, Nested};
use serde_json::Value;
use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// The binary serving with `flags`, and its admin address.
struct Served {
    child: Child,
    admin: SocketAddr,
}

impl Served {
    fn spawn(flags: &[&str]) -> Result<Self, Error> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
            .args(["serve", "--self-signed", "--addr", "127.0.0.1:0"])
            .args(["--admin-addr", "127.0.0.1:0", "--shutdown-delay", "0s"])
            .args(flags)
            .env("RUST_LOG", "info")
            .env_remove("KSERVE_INJECTOR_LOG")
            .env_remove("KSERVE_INJECTOR_LOG_FORMAT")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| fail("no stdout"))?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + PATIENCE;
        let admin = loop {
            let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            else {
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail("the server never logged \"listening\""));
            };
            let event: Value = serde_json::from_str(&line).unwrap_or_default();
            if event["message"] == "listening" {
                let addr = event["admin_addr"].as_str().unwrap_or_default().parse();
                break addr?;
            }
        };
        Ok(Self { child, admin })
    }

    /// A field of /proc/PID/status, in bytes.
    fn status(&self, field: &str) -> Result<u64, Error> {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kib = text
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
            .ok_or_else(|| fail(format!("no {field} in /proc status")))?;
        Ok(kib * 1024)
    }

    fn metric(&self, series: &str) -> Result<f64, Error> {
        let mut tcp = TcpStream::connect(self.admin)?;
        tcp.set_read_timeout(Some(PATIENCE))?;
        write!(
            tcp,
            "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
        )?;
        let mut text = String::new();
        tcp.read_to_string(&mut text)?;
        metric(&text, series).ok_or_else(|| fail(format!("no series {series}")))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// 125 KB of ConfigMap whose annotation holds one 64 KiB scalar and a list
/// of 20,000 aliases to it: 1.3 GB once expanded.
fn aliased_config() -> String {
    let mut text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inferenceservice-config\n  annotations:\n    big: &b {}\ndata: {{}}\nlist:\n",
        "x".repeat(64 << 10)
    );
    text.push_str(&"- *b\n".repeat(20_000));
    text
}

#[test]
fn a_reload_refused_by_the_budget_gives_its_memory_back() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let config = tmp.path().join("inferenceservice-config.yaml");
    std::fs::write(
        &config,
        kserve_injector_core::config::Config::default_manifest(),
    )?;
    let config_flag = config.to_string_lossy().into_owned();
    let served = Served::spawn(&["--config", &config_flag, "--config-poll-interval", "100ms"])?;
    // Settled: the start-up allocations are done once metrics answer.
    served.metric("kserve_injector_config_reload_errors_total")?;
    let before = served.status("VmRSS")?;

    std::fs::write(&config, aliased_config())?;
    let deadline = Instant::now() + PATIENCE;
    while served.metric("kserve_injector_config_reload_errors_total")? < 1.0 {
        ensure(Instant::now() < deadline, || {
            "the refused reload was never counted".into()
        })?;
        std::thread::sleep(Duration::from_millis(50));
    }
    let peak = served.status("VmHWM")?;
    // The budget (64 MiB of text, charged as the aliases expand) bounds
    // the reload, twice over for the buffers that grow by doubling.
    ensure(peak <= before + 192 * MIB, || {
        format!(
            "peak {} MiB during the reload, {} MiB before",
            peak / MIB,
            before / MIB
        )
    })?;
    // And it is given back: the resident set returns near where it was.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = served.status("VmRSS")?;
        eprintln!(
            "figure: refused reload: RSS {} MiB before, peak {} MiB, {} MiB after",
            before / MIB,
            peak / MIB,
            now / MIB
        );
        if now <= before + 16 * MIB {
            return Ok(());
        }
        ensure(Instant::now() < deadline, || {
            format!(
                "RSS stayed at {} MiB after the refused reload ({} MiB before)",
                now / MIB,
                before / MIB
            )
        })?;
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until `series` reaches `at_least`.
fn counted(served: &Served, series: &str, at_least: f64) -> TestResult {
    let deadline = Instant::now() + PATIENCE;
    while served.metric(series)? < at_least {
        ensure(Instant::now() < deadline, || {
            format!("{series} never reached {at_least}")
        })?;
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

#[test]
fn a_reload_of_nested_anchors_stays_within_the_budget() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let config = tmp.path().join("inferenceservice-config.yaml");
    let manifest = kserve_injector_core::config::Config::default_manifest();
    std::fs::write(&config, manifest)?;
    let config_flag = config.to_string_lossy().into_owned();
    let served = Served::spawn(&["--config", &config_flag, "--config-poll-interval", "100ms"])?;
    served.metric("kserve_injector_config_reload_errors_total")?;
    let before = served.status("VmRSS")?;
    // What a ConfigMap manifest's budget lets it cost (4 MiB of text,
    // `config::MANIFEST_BUDGET`, and the 64 MiB of the rule of
    // tests/cli/budget.rs): a reader that kept a copy of every anchored node
    // held 1.8 GiB for a 100 KB one.
    let bound = before + 68 * MIB;
    let data = data_block(manifest);
    let steps = [
        // 100 KB that expands to 3 MiB: fits, and is loaded.
        (
            "kserve_injector_config_reloads_total",
            1.0,
            Nested::expanding(100_000, 29, None, false, 3 << 20),
        ),
        // 100 KB that expands to 58 MiB: past the budget, refused.
        (
            "kserve_injector_config_reload_errors_total",
            1.0,
            Nested::sized(100_000, 29, None, false),
        ),
        // 3.85 MB, under the 4 MiB file cap: refused.
        (
            "kserve_injector_config_reload_errors_total",
            2.0,
            Nested::sized(3_850_000, 29, Some(1_000_000), true),
        ),
    ];
    for (series, at_least, nested) in steps {
        std::fs::write(&config, nested.config_map(&data))?;
        counted(&served, series, at_least)?;
        let peak = served.status("VmHWM")?;
        eprintln!(
            "figure: nested-anchor reload ({} levels, {} KB, expands to {} MiB): RSS {} MiB before, peak {} MiB",
            nested.levels,
            nested.config_map(&data).len() / 1000,
            nested.expands_to() >> 20,
            before / MIB,
            peak / MIB
        );
        ensure(peak <= bound, || {
            format!(
                "peak {} MiB during a nested-anchor reload, {} MiB before",
                peak / MIB,
                before / MIB
            )
        })?;
    }
    Ok(())
}

#[test]
fn the_server_runs_on_small_pages() -> TestResult {
    let served = Served::spawn(&[])?;
    let text = std::fs::read_to_string(format!("/proc/{}/status", served.child.id()))?;
    // Kernels before 5.0 do not report the flag; every kernel CI runs on does.
    let Some(flag) = text.lines().find_map(|l| l.strip_prefix("THP_enabled:")) else {
        return Ok(());
    };
    ensure(flag.trim() == "0", || {
        format!(
            "THP_enabled: {} (transparent huge pages left on)",
            flag.trim()
        )
    })
}

#[test]
fn a_certificate_file_over_the_cap_is_refused_without_reading_it_all() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let ca = Ca::new("cap CA")?;
    let leaf = ca.server("capped")?;
    let [(cert_name, cert), (key_name, key)] = cert_files(&leaf);
    // A valid PEM, then 120 MB of junk (sparse: no disk is used).
    let cert_path = tmp.path().join(cert_name);
    std::fs::write(&cert_path, &cert)?;
    let file = std::fs::OpenOptions::new().append(true).open(&cert_path)?;
    file.set_len(120_000_000)?;
    let key_path = tmp.path().join(key_name);
    std::fs::write(&key_path, &key)?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
        ])
        .arg("--tls-cert-file")
        .arg(&cert_path)
        .arg("--tls-key-file")
        .arg(&key_path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail("serving with a 120 MB certificate file"));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        pipe.read_to_string(&mut stderr)?;
    }
    ensure(!status.success(), || format!("exit 0: {stderr}"))?;
    ensure(stderr.contains("larger than 4194304 bytes"), || {
        stderr.clone()
    })
}
