//! `serve --kserve-version` (or the settings file's `kserveVersion`): the
//! release the config is loaded for, and the one startup warning when the config's
//! agent or storage-initializer image names another KServe release.

use serde_json::Value;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The JSON log lines `serve` writes up to "listening", then it is stopped.
fn startup_log(config: &str, flags: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, config).expect("config written");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .args(["serve", "--self-signed", "--cluster-lookups", "off"])
        .args(["--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"])
        .arg("--self-signed-ca-file")
        .arg(dir.path().join("ca.crt"))
        .arg("--config")
        .arg(&path)
        .args(flags)
        .env("RUST_LOG", "info")
        .env_remove("KSERVE_INJECTOR_LOG")
        .env_remove("KSERVE_INJECTOR_LOG_FORMAT")
        .env_remove("KSERVE_INJECTOR_KSERVE_VERSION")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut events = Vec::new();
    loop {
        let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) else {
            let _ = child.kill();
            panic!("the server never logged \"listening\": {events:?}");
        };
        let event: Value = serde_json::from_str(&line).expect("a JSON log line");
        let listening = event["message"] == "listening";
        events.push(event);
        if listening {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    events
}

fn image_warnings(events: &[Value]) -> Vec<&Value> {
    (events.iter())
        .filter(|e| {
            e["level"] == "WARN"
                && e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("names KServe"))
        })
        .collect()
}

#[test]
fn serve_warns_once_when_an_image_names_another_release() {
    let default = kserve_injector_core::config::Config::default_manifest();
    // The last agent image of KServe's ConfigMap is the `agent` key's.
    let at = default
        .rfind("kserve/agent:latest")
        .expect("an agent image");
    let v0_18_agent = format!(
        "{}kserve/agent:v0.18.0{}",
        &default[..at],
        &default[at + "kserve/agent:latest".len()..]
    );
    let events = startup_log(&v0_18_agent, &["--kserve-version", "v0.17"]);
    let warnings = image_warnings(&events);
    assert_eq!(warnings.len(), 1, "{events:?}");
    assert_eq!(warnings[0]["key"], "agent");
    assert_eq!(warnings[0]["image"], "kserve/agent:v0.18.0");
    let message = warnings[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("names KServe v0.18.0") && message.contains("v0.17.1"),
        "{message}"
    );
    let loaded = events
        .iter()
        .find(|e| e["message"] == "inferenceservice-config loaded");
    assert_eq!(
        loaded.map(|e| e["kserve_version"].clone()),
        Some("v0.17.1".into())
    );
    // The matching release, and `latest` tags, warn about nothing.
    let events = startup_log(&v0_18_agent, &["--kserve-version", "v0.18.0"]);
    assert!(image_warnings(&events).is_empty(), "{events:?}");
    let events = startup_log(default, &["--kserve-version", "v0.17"]);
    assert!(image_warnings(&events).is_empty(), "{events:?}");
}

/// The release the "inferenceservice-config loaded" line names.
fn loaded_release(events: &[Value]) -> Option<Value> {
    (events.iter())
        .find(|e| e["message"] == "inferenceservice-config loaded")
        .map(|e| e["kserve_version"].clone())
}

#[test]
fn serve_takes_the_release_from_the_settings_file_unless_the_flag_names_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = dir.path().join("settings.yaml");
    std::fs::write(&settings, "kserveVersion: v0.18\n").expect("settings written");
    let settings = settings.to_string_lossy().into_owned();
    let default = kserve_injector_core::config::Config::default_manifest();
    let events = startup_log(default, &["--config-file", &settings]);
    assert_eq!(
        loaded_release(&events),
        Some("v0.18.1".into()),
        "{events:?}"
    );
    let flags = ["--config-file", &settings, "--kserve-version", "v0.16"];
    let events = startup_log(default, &flags);
    assert_eq!(
        loaded_release(&events),
        Some("v0.16.0".into()),
        "{events:?}"
    );
    let events = startup_log(default, &[]);
    assert_eq!(loaded_release(&events), Some("head".into()), "{events:?}");
}

/// Without `--config`, `serve --kserve-version` starts from the ConfigMap
/// that release shipped: KServe v0.15.0's turns the modelcar off, so the
/// OCI fixture gets a storage-initializer, as its golden under
/// `fixtures/releases/v0.15.0/` says; v0.15.2's (also `v0.15`) and HEAD's
/// give a modelcar running as UID 1010.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_without_config_uses_the_releases_shipped_configmap() -> crate::support::TestResult {
    use crate::support::*;
    for (flags, golden_dir) in [
        (
            &["--kserve-version", "v0.15.0"][..],
            "fixtures/releases/v0.15.0/m3-modelcar-oci",
        ),
        (
            &["--kserve-version", "v0.15"][..],
            "fixtures/releases/v0.15.2/m3-modelcar-oci",
        ),
        (&[][..], "fixtures/m3-modelcar-oci"),
    ] {
        let tmp = tempfile::tempdir()?;
        let mut all = vec!["--shutdown-delay", "0s"];
        all.extend_from_slice(flags);
        let (server, ca) = start_self_signed(tmp.path(), &all).await?;
        let (pod, review) = sample_review()?;
        let mut client = Client::open(server.local_addr(), &ca, Http::H1).await?;
        let (status, body) = client.post_json("/mutate-pods", review).await?;
        stop(server).await?;
        ensure(status == hyper::StatusCode::OK, || {
            format!("{flags:?}: HTTP {status}")
        })?;
        let got = apply_response(&pod, &body, "admission.k8s.io/v1", "sample-uid")?;
        let want = golden(&repo_path(golden_dir))?;
        ensure(got == want, || {
            format!("{flags:?}: got {got:?}, golden {golden_dir} says {want:?}")
        })?;
    }
    Ok(())
}
