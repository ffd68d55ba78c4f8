//! Reloaders cannot hang: a FIFO at the certificate path or at a
//! single-file `--config` is refused at once (logged at ERROR, counted),
//! the previous certificate and config serve on, a valid rotation later
//! is loaded, and SIGTERM ends the process within the shutdown delay and
//! drain timeout whatever the reloaders face. The real binary, for its log
//! and its exit.

use crate::support::process::Serve;
use crate::support::*;
use hyper::StatusCode;
use kserve_injector_core::config::Config;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const CERT_ERRORS: &str = "kserve_injector_certificate_reload_errors_total{cert=\"serving\"}";
const CONFIG_ERRORS: &str = "kserve_injector_config_reload_errors_total";
const CONFIG_RELOADS: &str = "kserve_injector_config_reloads_total";
const REFUSED: &str = "a FIFO where a regular file is required";

/// Replaces `path` by a regular file holding `bytes`, atomically.
fn write_file(path: &Path, bytes: &[u8]) -> TestResult {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

fn refusal_of(what: &'static str) -> impl Fn(&Value) -> bool {
    move |e: &Value| {
        e["level"] == "ERROR"
            && e["what"] == what
            && e["error"].as_str().is_some_and(|t| t.contains(REFUSED))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifos_at_the_certificate_and_config_paths_are_refused_and_a_later_rotation_loads(
) -> TestResult {
    let tmp = tempfile::tempdir()?;
    let ca = Ca::new("fifo CA")?;
    let (old, new) = (ca.server("old")?, ca.server("new")?);
    let mut certs = KubeletDir::create(&tmp.path().join("certs"), &as_refs(&cert_files(&old)))?;
    let config = tmp.path().join("inferenceservice-config.yaml");
    std::fs::write(&config, Config::default_manifest())?;
    let (cert_dir, config_flag) = (
        certs.path.display().to_string(),
        config.display().to_string(),
    );
    let mut serve = Serve::spawn(&[
        "--cert-dir",
        &cert_dir,
        "--config",
        &config_flag,
        "--cert-poll-interval",
        "200ms",
        "--config-poll-interval",
        "200ms",
        "--shutdown-delay",
        "1s",
        "--drain-timeout",
        "2s",
    ])?;
    let (addr, admin) = (serve.addr, serve.admin);

    let key = old.key_pem.as_bytes();
    certs.swap_with_fifo(&[("tls.key", key)], Some("tls.crt"))?;
    // Made aside and renamed over the config: no read sees it missing.
    let fifo = tmp.path().join("fifo");
    mkfifo(&fifo)?;
    std::fs::rename(&fifo, &config)?;
    for series in [CERT_ERRORS, CONFIG_ERRORS] {
        eventually(
            PATIENCE,
            &format!("{series} to count the FIFO"),
            || async move { (metric_now(admin, series).await.ok()? >= 1.0).then_some(()) },
        )
        .await?;
    }
    serve.wait_for_log(
        PATIENCE,
        "the certificate FIFO's ERROR line",
        refusal_of("serving certificate"),
    )?;
    serve.wait_for_log(
        PATIENCE,
        "the config FIFO's ERROR line",
        refusal_of("inferenceservice-config"),
    )?;
    ensure(served_cert(addr, &ca.pem).await? == old.der, || {
        "the previous certificate is not served".into()
    })?;
    let (_, review) = sample_review()?;
    let (status, _) = Client::open(addr, &ca.pem, Http::H1)
        .await?
        .post_json("/mutate-pods", review)
        .await?;
    ensure(status == StatusCode::OK, || {
        format!("review during the FIFOs: {status}")
    })?;
    ensure(
        admin_get(admin, "/readyz").await?.0 == StatusCode::OK,
        || "not ready".into(),
    )?;

    // Several polls later, with the FIFOs still there: reported once.
    let counted = (
        metric_now(admin, CERT_ERRORS).await?,
        metric_now(admin, CONFIG_ERRORS).await?,
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = (
        metric_now(admin, CERT_ERRORS).await?,
        metric_now(admin, CONFIG_ERRORS).await?,
    );
    ensure(later == counted, || {
        format!("the same FIFOs counted again: {counted:?}, then {later:?}")
    })?;
    certs.swap(&as_refs(&cert_files(&new)))?;
    std::fs::remove_file(&config)?;
    write_file(
        &config,
        format!("{}\n# rotated\n", Config::default_manifest()).as_bytes(),
    )?;
    let ca_pem = ca.pem.clone();
    eventually(PATIENCE, "the rotated certificate", || {
        let (ca_pem, new) = (ca_pem.clone(), new.der.clone());
        async move { (served_cert(addr, &ca_pem).await.ok()? == new).then_some(()) }
    })
    .await?;
    eventually(PATIENCE, "the rotated config", || async move {
        (metric_now(admin, CONFIG_RELOADS).await.ok()? == 1.0).then_some(())
    })
    .await?;

    serve.signal("TERM")?;
    // --shutdown-delay + --drain-timeout, and room for a busy machine.
    let code = serve.exit_code(Duration::from_secs(3 + 7)).await?;
    ensure(code == Some(0), || format!("exit code {code:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_process_while_fifos_sit_at_the_watched_paths() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let ca = Ca::new("fifo sigterm CA")?;
    let leaf = ca.server("leaf")?;
    let mut certs = KubeletDir::create(&tmp.path().join("certs"), &as_refs(&cert_files(&leaf)))?;
    let config = tmp.path().join("inferenceservice-config.yaml");
    std::fs::write(&config, Config::default_manifest())?;
    let (cert_dir, config_flag) = (
        certs.path.display().to_string(),
        config.display().to_string(),
    );
    let mut serve = Serve::spawn(&[
        "--cert-dir",
        &cert_dir,
        "--config",
        &config_flag,
        "--cert-poll-interval",
        "100ms",
        "--config-poll-interval",
        "100ms",
        "--shutdown-delay",
        "1s",
        "--drain-timeout",
        "1s",
    ])?;
    certs.swap_with_fifo(&[("tls.key", leaf.key_pem.as_bytes())], Some("tls.crt"))?;
    std::fs::remove_file(&config)?;
    mkfifo(&config)?;
    // Several polls, each meeting the FIFOs.
    tokio::time::sleep(Duration::from_secs(1)).await;
    serve.signal("TERM")?;
    let signalled = Instant::now();
    let code = serve.exit_code(Duration::from_secs(2 + 6)).await?;
    ensure(code == Some(0), || format!("exit code {code:?}"))?;
    println!(
        "figure: exited {:?} after SIGTERM (shutdown delay 1s + drain 1s)",
        signalled.elapsed()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_given_at_startup_is_refused_at_once() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let ca = Ca::new("fifo startup CA")?;
    let leaf = ca.server("leaf")?;
    let (cert, key) = (tmp.path().join("tls.crt"), tmp.path().join("tls.key"));
    std::fs::write(&cert, &leaf.cert_pem)?;
    std::fs::write(&key, &leaf.key_pem)?;
    let fifo = tmp.path().join("fifo");
    mkfifo(&fifo)?;
    let (cert, key, fifo) = (
        cert.display().to_string(),
        key.display().to_string(),
        fifo.display().to_string(),
    );
    let pair = [
        "--tls-cert-file",
        cert.as_str(),
        "--tls-key-file",
        key.as_str(),
    ];
    let cases: [(&str, Vec<&str>); 6] = [
        (
            "--tls-cert-file",
            vec!["--tls-cert-file", &fifo, "--tls-key-file", &key],
        ),
        (
            "--tls-key-file",
            vec!["--tls-cert-file", &cert, "--tls-key-file", &fifo],
        ),
        (
            "--client-ca-file",
            [&pair[..], &["--client-ca-file", &fifo]].concat(),
        ),
        ("--config", [&pair[..], &["--config", &fifo]].concat()),
        (
            "--config-file",
            [&pair[..], &["--config-file", &fifo]].concat(),
        ),
        ("--objects", [&pair[..], &["--objects", &fifo]].concat()),
    ];
    let mut wrong = Vec::new();
    for (flag, flags) in cases {
        match crate::support::process::serve_exit(&flags) {
            Err(e) => wrong.push(format!("{flag}: {e}")),
            Ok((code, stderr)) if code != Some(1) || !stderr.contains(REFUSED) => {
                wrong.push(format!("{flag}: exit {code:?}: {stderr}"));
            }
            Ok(_) => {}
        }
    }
    ensure(wrong.is_empty(), || wrong.join("\n"))
}
