//! A certificate is proven before it serves: chains with a malformed,
//! truncated or empty block, a second certificate that did not sign the
//! first, a key of another certificate and an expired leaf are refused at
//! startup with their reason, and on reload keep the previous pair
//! serving (real TLS handshakes see it), count a reload error and leave
//! `/readyz` ok; a valid rotation after them is served.

use crate::support::process::serve_exit;
use crate::support::*;
use hyper::StatusCode;
use std::path::Path;

const SERVING_RELOADS: &str = "kserve_injector_certificate_reloads_total{cert=\"serving\"}";
const SERVING_ERRORS: &str = "kserve_injector_certificate_reload_errors_total{cert=\"serving\"}";

/// A `tls.crt` and `tls.key` that must be refused, and what the refusal says.
struct Bad {
    name: &'static str,
    cert: String,
    key: String,
    says: String,
}

impl Bad {
    fn files(&self) -> [(&'static str, &[u8]); 2] {
        [
            ("tls.crt", self.cert.as_bytes()),
            ("tls.key", self.key.as_bytes()),
        ]
    }
}

const EXTRA_BLOCK: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
const EMPTY_BLOCK: &str = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";

/// Every bad pair, made with `ca` (called `ca_name`).
fn bad_pairs(ca: &Ca, ca_name: &str) -> Result<Vec<Bad>, Error> {
    let (leaf, other) = (ca.server("bad")?, ca.server("other")?);
    let impostor = Ca::new(ca_name)?;
    let now = time::OffsetDateTime::now_utc();
    let expired = ca.server_valid(
        "expired",
        now - time::Duration::days(2),
        now - time::Duration::days(1),
    )?;
    let second = leaf.cert_pem.lines().count() + 1;
    let ca_lines: Vec<&str> = ca.pem.lines().collect();
    let half = ca_lines[..ca_lines.len() / 2].join("\n");
    let chain = |tail: &str| format!("{}{tail}", leaf.cert_pem);
    let bad = |name, cert: String, says: String| Bad {
        name,
        cert,
        key: leaf.key_pem.clone(),
        says,
    };
    Ok(vec![
        bad(
            "a malformed extra block",
            chain(EXTRA_BLOCK),
            format!("block 2 (line {second}) is not an X.509 certificate"),
        ),
        bad(
            "a truncated CA block",
            chain(&format!("{half}\n-----END CERTIFICATE-----\n")),
            format!("block 2 (line {second}) is not an X.509 certificate"),
        ),
        bad(
            "a CA block cut short",
            chain(&format!("{half}\n")),
            format!("block 2 (line {second}) has no END line"),
        ),
        bad(
            "an empty block",
            chain(EMPTY_BLOCK),
            format!("block 2 (line {second}) is empty"),
        ),
        bad(
            "a second certificate that did not sign the first",
            chain(&impostor.pem),
            "certificate 1 names certificate 2's subject".into(),
        ),
        Bad {
            name: "the key of another certificate",
            cert: leaf.cert_pem.clone(),
            key: other.key_pem.clone(),
            says: "do not form a usable pair".into(),
        },
        Bad {
            name: "an expired leaf",
            cert: expired.cert_pem.clone(),
            key: expired.key_pem.clone(),
            says: "the certificate is valid from".into(),
        },
    ])
}

async fn start_in(
    dir: &Path,
    flags: &[&str],
) -> Result<kserve_injector::server::RunningServer, Error> {
    let dir = dir.to_string_lossy().into_owned();
    let mut all = vec!["--cert-dir", dir.as_str(), "--shutdown-delay", "0s"];
    all.extend_from_slice(flags);
    start(&all).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_chain_is_refused_at_startup_with_its_reason() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let ca = Ca::new("startup CA")?;
    let mut wrong = Vec::new();
    for (n, bad) in bad_pairs(&ca, "startup CA")?.iter().enumerate() {
        let dir = KubeletDir::create(&tmp.path().join(format!("certs-{n}")), &bad.files())?;
        let err = match start_in(&dir.path, &[]).await {
            Ok(server) => {
                stop(server).await?;
                wrong.push(format!("{}: started", bad.name));
                continue;
            }
            Err(e) => e.to_string(),
        };
        let crt = dir.path.join("tls.crt").display().to_string();
        if !err.contains(&bad.says) || !err.contains(&crt) {
            wrong.push(format!(
                "{}: {err:?} does not say {:?} of {crt}",
                bad.name, bad.says
            ));
        }
    }
    ensure(wrong.is_empty(), || wrong.join("\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_exits_1_naming_the_bad_block() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let ca = Ca::new("binary CA")?;
    let leaf = ca.server("leaf")?;
    let cert = format!("{}{EXTRA_BLOCK}", leaf.cert_pem);
    let files = [
        ("tls.crt", cert.as_bytes()),
        ("tls.key", leaf.key_pem.as_bytes()),
    ];
    let dir = KubeletDir::create(&tmp.path().join("certs"), &files)?;
    let dir_flag = dir.path.to_string_lossy().into_owned();
    let (code, stderr) = serve_exit(&["--cert-dir", &dir_flag])?;
    ensure(code == Some(1), || format!("exit code {code:?}: {stderr}"))?;
    let second = leaf.cert_pem.lines().count() + 1;
    let want = format!(
        "error: {}: block 2 (line {second}) is not an X.509 certificate",
        dir.path.join("tls.crt").display()
    );
    ensure(stderr.starts_with(&want), || {
        format!("{stderr:?} does not start with {want:?}")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_reload_keeps_the_previous_pair_serving_and_a_valid_rotation_after_it_loads(
) -> TestResult {
    let tmp = tempfile::tempdir()?;
    let ca = Ca::new("reload CA")?;
    let (old, new) = (ca.server("old")?, ca.server("new")?);
    let mut dir = KubeletDir::create(&tmp.path().join("certs"), &as_refs(&cert_files(&old)))?;
    let server = start_in(&dir.path, &["--cert-poll-interval", "200ms"]).await?;
    let (addr, admin) = (server.local_addr(), server.admin_addr());
    let (_, review) = sample_review()?;
    let bad_pairs = bad_pairs(&ca, "reload CA")?;
    for (n, bad) in bad_pairs.iter().enumerate() {
        dir.swap(&bad.files())?;
        let want = (n + 1) as f64;
        eventually(
            PATIENCE,
            &format!("{}: the reload error to be counted", bad.name),
            || async move { (metric_now(admin, SERVING_ERRORS).await.ok()? >= want).then_some(()) },
        )
        .await?;
        let served = served_cert(addr, &ca.pem).await;
        ensure(served.as_ref().ok() == Some(&old.der), || {
            format!(
                "{}: after the refused reload, a handshake gave {served:?}",
                bad.name
            )
        })?;
        let (status, _) = Client::open(addr, &ca.pem, Http::H2)
            .await?
            .post_json("/mutate-pods", review.clone())
            .await?;
        ensure(status == StatusCode::OK, || {
            format!("{}: review {status}", bad.name)
        })?;
        let ready = admin_get(admin, "/readyz").await?;
        ensure(ready == (StatusCode::OK, "ok\n".into()), || {
            format!("{}: /readyz {ready:?}", bad.name)
        })?;
    }
    dir.swap(&as_refs(&cert_files(&new)))?;
    let ca_pem = ca.pem.clone();
    eventually(PATIENCE, "the valid rotation to be served", || {
        let (ca_pem, new) = (ca_pem.clone(), new.der.clone());
        async move { (served_cert(addr, &ca_pem).await.ok()? == new).then_some(()) }
    })
    .await?;
    let reloads = metric_now(admin, SERVING_RELOADS).await?;
    ensure(reloads == 1.0, || format!("reloads = {reloads}"))?;
    // At least one per bad pair: a poll that reads tls.crt just before a
    // swap and tls.key just after it sees one more (refused) mixture.
    let errors = metric_now(admin, SERVING_ERRORS).await?;
    ensure(errors >= bad_pairs.len() as f64, || {
        format!("errors = {errors}")
    })?;
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_client_certificates_required_a_rotation_is_proven_and_a_bad_one_refused() -> TestResult
{
    let tmp = tempfile::tempdir()?;
    let ca = Ca::new("mtls serving CA")?;
    let (old, new) = (ca.server("old")?, ca.server("new")?);
    let mut dir = KubeletDir::create(&tmp.path().join("certs"), &as_refs(&cert_files(&old)))?;
    let client_ca = Ca::new("apiserver client CA")?;
    let apiserver = client_ca.client("kube-apiserver")?;
    let ca_file = tmp.path().join("client-ca.crt");
    std::fs::write(&ca_file, format!("{}{EXTRA_BLOCK}", client_ca.pem))?;
    let ca_flag = ca_file.to_string_lossy().into_owned();
    let flags = [
        "--client-ca-file",
        ca_flag.as_str(),
        "--cert-poll-interval",
        "200ms",
    ];
    let refused = start_in(&dir.path, &flags)
        .await
        .err()
        .map(|e| e.to_string());
    let says = "block 2 (line";
    ensure(refused.as_ref().is_some_and(|e| e.contains(says)), || {
        format!("a client CA with a malformed block: {refused:?}")
    })?;
    std::fs::write(&ca_file, &client_ca.pem)?;
    let server = start_in(&dir.path, &flags).await?;
    let (addr, admin) = (server.local_addr(), server.admin_addr());
    let served = |ca_pem: String, apiserver: Leaf| async move {
        let config = tls_config(
            &ca_pem,
            Some(Http::H1),
            Some(&apiserver),
            rustls::DEFAULT_VERSIONS,
        )
        .ok()?;
        let stream = tls_connect(addr, config).await.ok()?;
        let leaf = stream.get_ref().1.peer_certificates()?.first()?.clone();
        Some(leaf.into_owned())
    };
    ensure(
        served(ca.pem.clone(), apiserver.clone()).await == Some(old.der.clone()),
        || "not serving the first pair".into(),
    )?;
    let bad = bad_pairs(&ca, "mtls serving CA")?;
    dir.swap(&bad[0].files())?;
    eventually(PATIENCE, "the bad pair's reload error", || async move {
        (metric_now(admin, SERVING_ERRORS).await.ok()? >= 1.0).then_some(())
    })
    .await?;
    dir.swap(&as_refs(&cert_files(&new)))?;
    eventually(PATIENCE, "the rotation under client certificates", || {
        let (ca_pem, apiserver, new) = (ca.pem.clone(), apiserver.clone(), new.der.clone());
        async move { (served(ca_pem, apiserver).await? == new).then_some(()) }
    })
    .await?;
    stop(server).await
}
