//! A rotation whose notBefore is ahead of the webhook's clock (its
//! issuer's clock runs ahead, or the files land early) is pending: the
//! previous pair serves on, a WARN line and
//! `…_certificate_pending_not_before_timestamp_seconds` show it, and no
//! reload error is counted; at its notBefore it is loaded with no further
//! change on disk, within a poll interval. The real binary, for its log.

use crate::support::process::Serve;
use crate::support::*;
use serde_json::Value;
use std::time::Duration;
use time::OffsetDateTime;

const PENDING: &str =
    "kserve_injector_certificate_pending_not_before_timestamp_seconds{cert=\"serving\"}";
const RELOADS: &str = "kserve_injector_certificate_reloads_total{cert=\"serving\"}";
const ERRORS: &str = "kserve_injector_certificate_reload_errors_total{cert=\"serving\"}";
/// The poll interval `serve` runs with: the bound on how late the pending
/// pair may be served.
const POLL: Duration = Duration::from_secs(2);
/// How far ahead of the clock the new pair's notBefore is.
const AHEAD: time::Duration = time::Duration::seconds(5);

fn since(t: OffsetDateTime) -> f64 {
    (OffsetDateTime::now_utc() - t).as_seconds_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_not_valid_yet_is_served_within_a_poll_of_its_not_before() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let ca = Ca::new("pending CA")?;
    let old = ca.server("old")?;
    let mut dir = KubeletDir::create(&tmp.path().join("certs"), &as_refs(&cert_files(&old)))?;
    let cert_dir = dir.path.display().to_string();
    let mut serve = Serve::spawn(&[
        "--cert-dir",
        &cert_dir,
        "--cert-poll-interval",
        "2s",
        "--shutdown-delay",
        "0s",
    ])?;
    let (addr, admin) = (serve.addr, serve.admin);

    let now = OffsetDateTime::now_utc();
    // Whole seconds, as X.509 writes them.
    let not_before = (now + AHEAD).replace_nanosecond(0)?;
    let new = ca.server_valid("new", not_before, now + time::Duration::days(30))?;
    dir.swap(&as_refs(&cert_files(&new)))?;

    // Handshakes until the new pair is served: the previous one until its
    // notBefore (no handshake fails meanwhile), the new one after it.
    let mut gauge_seen = None;
    let served_at = loop {
        let leaf = served_cert(addr, &ca.pem).await?;
        if leaf == new.der {
            break since(not_before);
        }
        ensure(leaf == old.der, || "a third certificate served".into())?;
        let late = since(not_before);
        ensure(late < 15.0, || {
            format!("the previous pair still served {late:.1} s after the new one's notBefore")
        })?;
        if let Ok(value) = metric_now(admin, PENDING).await {
            if value > 0.0 {
                gauge_seen = Some(value);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "figure: a pair {AHEAD} ahead of the clock, --cert-poll-interval {POLL:?}: \
         served {served_at:.2} s after its notBefore"
    );
    ensure(served_at >= 0.0, || {
        format!("served {:.2} s before its notBefore", -served_at)
    })?;
    ensure(served_at < POLL.as_secs_f64(), || {
        format!("served {served_at:.2} s after its notBefore, more than a poll interval")
    })?;
    let valid_from = not_before.unix_timestamp() as f64;
    ensure(gauge_seen == Some(valid_from), || {
        format!("the pending gauge showed {gauge_seen:?} while pending, not {valid_from}")
    })?;
    for (series, want) in [(RELOADS, 1.0), (ERRORS, 0.0), (PENDING, 0.0)] {
        let value = metric_now(admin, series).await?;
        ensure(value == want, || format!("{series} = {value}, not {want}"))?;
    }

    let is_cert = |e: &Value| e["what"] == "serving certificate";
    let warned = serve.wait_for_log(PATIENCE, "the pending WARN line", |e| {
        is_cert(e)
            && e["level"] == "WARN"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("not valid yet"))
    })?;
    ensure(warned["valid_from"] == not_before.unix_timestamp(), || {
        format!("the WARN line: {warned}")
    })?;
    eprintln!("figure: the pending line: {warned}");
    let reloaded = serve.wait_for_log(PATIENCE, "the reloaded line", |e| {
        is_cert(e) && e["message"] == "reloaded"
    })?;
    eprintln!("figure: the reloaded line: {reloaded}");
    ensure(
        reloaded["late_s"]
            .as_i64()
            .is_some_and(|s| (0..2).contains(&s)),
        || format!("the reloaded line: {reloaded}"),
    )
}
