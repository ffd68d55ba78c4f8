//! `serve --modelcar-mode native-sidecar` against the 1.20 API server: with
//! cluster lookups on, the server asks the API server its version and
//! refuses to start (native sidecars need 1.29), naming the version; with
//! lookups off it trusts the flag and starts.

use crate::harness::*;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// This test's own work dir.
const WORK_DIR: &str = "/tmp/kapi-23-native-sidecar";
const PATIENCE: Duration = Duration::from_secs(60);

/// `serve` in native-sidecar mode; its log (stdout) goes to `log`.
fn serve(work_dir: &Path, log: &Path, extra: &[&str]) -> Child {
    let log = std::fs::File::create(log).expect("log file");
    Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .arg("serve")
        .args(["--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"])
        .arg("--self-signed")
        .arg("--self-signed-ca-file")
        .arg(work_dir.join("injector-ca.crt"))
        .args(["--modelcar-mode", "native-sidecar", "--log-format", "text"])
        .args(extra)
        .stdout(log)
        .stderr(Stdio::piped())
        .spawn()
        .expect("kserve-injector starts")
}

/// The exit status, or `None` if it still runs after `limit`.
fn exited_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Some(status) = child.try_wait().expect("waitable") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

fn stderr_of(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut text);
    }
    text
}

#[test]
fn native_sidecar_mode_refuses_an_api_server_older_than_1_29() {
    let server = ApiServer::new(WORK_DIR);
    if !present(&server) {
        return;
    }
    let kubeconfig = server.start_clean();
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();

    let log = server.work_dir.join("injector.log");
    let mut refused = serve(
        &server.work_dir,
        &log,
        &["--cluster-lookups", "on", "--kubeconfig", &kubeconfig],
    );
    let status = exited_within(&mut refused, PATIENCE);
    if status.is_none() {
        let _ = refused.kill();
    }
    let stderr = stderr_of(&mut refused);
    let status = status.unwrap_or_else(|| panic!("still running after {PATIENCE:?}: {stderr}"));
    assert!(!status.success(), "started on a 1.20 API server: {stderr}");
    assert!(
        stderr.contains("the API server is v1.20") && stderr.contains("1.29 or newer"),
        "the refusal names neither the version nor the requirement: {stderr}"
    );

    eprintln!("refused as expected: {}", stderr.trim());

    // Without lookups there is no API server to ask: the flag is trusted.
    let mut trusted = serve(&server.work_dir, &log, &["--cluster-lookups", "off"]);
    let status = exited_within(&mut trusted, Duration::from_secs(3));
    let _ = trusted.kill();
    let _ = trusted.wait();
    let stderr = stderr_of(&mut trusted);
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        status.is_none(),
        "with lookups off it exited ({status:?}): {stderr}{logged}"
    );
    assert!(logged.contains("listening"), "{logged}");
}
