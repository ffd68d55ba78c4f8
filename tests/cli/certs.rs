//! The real binary's `certs` subcommand: the files the static-certs overlay
//! reads, their permissions, CA reuse on renewal and clear errors.

use std::path::Path;
use std::process::{Command, Output};

fn certs(out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .args([
            "certs",
            "--service",
            "kserve-injector",
            "--namespace",
            "models",
        ])
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .expect("the binary runs")
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn sans(cert_pem: &str) -> Vec<String> {
    use rustls_pki_types::pem::PemObject;
    let der = rustls_pki_types::CertificateDer::from_pem_slice(cert_pem.as_bytes()).expect("PEM");
    let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("X.509");
    let san = cert
        .subject_alternative_name()
        .expect("one SAN extension")
        .expect("a SAN extension");
    san.value
        .general_names
        .iter()
        .map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(d) => format!("DNSName({d})"),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn writes_a_ca_and_a_serving_pair_for_the_service() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("certs");
    let run = certs(&out, &["--days", "90"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(String::from_utf8_lossy(&run.stderr).contains("(new)"));
    for name in ["ca.crt", "ca.key", "tls.crt", "tls.key"] {
        assert!(out.join(name).is_file(), "{name} missing");
    }
    // Nothing else: no temporary file is left behind.
    let mut left: Vec<String> = std::fs::read_dir(&out)
        .expect("read the output directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["ca.crt", "ca.key", "tls.crt", "tls.key"]);
    assert_eq!(
        sans(&read(&out, "tls.crt")),
        [
            "DNSName(kserve-injector)",
            "DNSName(kserve-injector.models)",
            "DNSName(kserve-injector.models.svc)",
            "DNSName(kserve-injector.models.svc.cluster.local)"
        ]
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for (name, mode) in [("tls.key", 0o600), ("ca.key", 0o600), ("tls.crt", 0o644)] {
            let meta = std::fs::metadata(out.join(name)).expect("metadata");
            assert_eq!(meta.permissions().mode() & 0o777, mode, "{name}");
        }
    }
}

#[test]
fn a_second_run_renews_the_leaf_under_the_same_ca() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(certs(dir.path(), &[]).status.success());
    let (ca, leaf) = (read(dir.path(), "ca.crt"), read(dir.path(), "tls.crt"));

    let again = certs(dir.path(), &[]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("(reused)"));
    assert_eq!(read(dir.path(), "ca.crt"), ca, "the CA changed");
    assert_ne!(
        read(dir.path(), "tls.crt"),
        leaf,
        "the leaf was not renewed"
    );

    assert!(certs(dir.path(), &["--new-ca"]).status.success());
    assert_ne!(read(dir.path(), "ca.crt"), ca, "--new-ca kept the CA");
}

#[test]
fn bad_names_half_a_ca_and_bad_days_exit_2_with_a_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .args([
            "certs",
            "--service",
            "Web_Hook",
            "--namespace",
            "ns",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("invalid service name \"Web_Hook\""),
        "{stderr}"
    );
    assert!(!dir.path().join("tls.crt").exists());

    std::fs::write(dir.path().join("ca.crt"), "x").expect("write");
    let half = certs(dir.path(), &[]);
    assert_eq!(half.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&half.stderr);
    assert!(stderr.contains("ca.key does not"), "{stderr}");

    let days = certs(dir.path(), &["--days", "0"]);
    assert_eq!(days.status.code(), Some(2), "clap's usage error");
}

#[test]
fn a_ca_that_expires_before_the_leaf_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(certs(dir.path(), &[]).status.success());
    // The CA lives 3650 days from now; a leaf of 3650 days from a later run
    // would outlive it by the seconds between the runs.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let long = certs(dir.path(), &["--days", "3650"]);
    assert_eq!(long.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&long.stderr).contains("pass --new-ca"));
}
