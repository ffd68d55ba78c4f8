use super::*;
use rustls::client::danger::ServerCertVerifier;
use rustls_pki_types::{ServerName, UnixTime};
use std::sync::Arc;
use x509_parser::extensions::GeneralName;

fn now() -> OffsetDateTime {
    // A fixed instant: validity is computed from what the caller passes.
    OffsetDateTime::from_unix_timestamp(1_767_225_600).expect("valid timestamp")
}

fn names() -> Vec<String> {
    service_dns_names("kserve-injector", "models").expect("valid names")
}

/// Verifies `leaf` against `ca_pem` as a TLS client would, for `name`, at `at`.
fn verify(ca_pem: &str, leaf: &ServingCert, name: &str, at: OffsetDateTime) -> Result<(), String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(
            pem_certificate(ca_pem).map_err(|e| e.to_string())?,
        ))
        .map_err(|e| e.to_string())?;
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| e.to_string())?;
    let server_name = ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
    let at = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        u64::try_from(at.unix_timestamp()).map_err(|e| e.to_string())?,
    ));
    verifier
        .verify_server_cert(&leaf.cert_der, &[], &server_name, &[], at)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn service_names_cover_what_the_api_server_dials() {
    assert_eq!(
        names(),
        [
            "kserve-injector",
            "kserve-injector.models",
            "kserve-injector.models.svc",
            "kserve-injector.models.svc.cluster.local"
        ]
    );
}

#[test]
fn the_leaf_carries_exactly_the_requested_sans() -> Result<(), Box<dyn std::error::Error>> {
    let validity = Validity::from(now(), 30);
    let ca = Authority::generate("test CA", validity)?;
    let mut requested = names();
    requested.push("127.0.0.1".into());
    let leaf = ca.issue_serving("kserve-injector.models.svc", &requested, validity)?;
    let (_, cert) = x509_parser::parse_x509_certificate(&leaf.cert_der)?;
    let san = cert
        .subject_alternative_name()?
        .ok_or("no subjectAltName extension")?;
    let found: Vec<String> = san
        .value
        .general_names
        .iter()
        .map(|n| match n {
            GeneralName::DNSName(d) => d.to_string(),
            GeneralName::IPAddress(ip) => format!("ip:{ip:?}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        found,
        [
            "kserve-injector",
            "kserve-injector.models",
            "kserve-injector.models.svc",
            "kserve-injector.models.svc.cluster.local",
            "ip:[127, 0, 0, 1]"
        ]
    );
    assert!(!cert.is_ca());
    Ok(())
}

#[test]
fn the_ca_signs_the_leaf_and_another_ca_does_not() -> Result<(), Box<dyn std::error::Error>> {
    let validity = Validity::from(now(), 30);
    let ca = Authority::generate("test CA", validity)?;
    let other = Authority::generate("test CA", validity)?;
    let leaf = ca.issue_serving("x", &names(), validity)?;
    let at = now() + time::Duration::days(1);
    verify(ca.cert_pem(), &leaf, "kserve-injector.models.svc", at)?;
    let wrong_ca = verify(other.cert_pem(), &leaf, "kserve-injector.models.svc", at);
    assert!(
        wrong_ca.is_err(),
        "a different CA with the same name verified the leaf"
    );
    let wrong_name = verify(ca.cert_pem(), &leaf, "kserve-injector.other.svc", at);
    assert!(wrong_name.is_err(), "a name not in the SANs verified");
    Ok(())
}

#[test]
fn validity_is_the_requested_window() -> Result<(), Box<dyn std::error::Error>> {
    let validity = Validity::from(now(), 30);
    assert_eq!(validity.not_before, now() - time::Duration::hours(1));
    assert_eq!(validity.not_after, now() + time::Duration::days(30));
    let ca = Authority::generate("test CA", Validity::from(now(), 3650))?;
    let leaf = ca.issue_serving("x", &names(), validity)?;
    let (_, cert) = x509_parser::parse_x509_certificate(&leaf.cert_der)?;
    assert_eq!(
        cert.validity().not_before.timestamp(),
        validity.not_before.unix_timestamp()
    );
    assert_eq!(
        cert.validity().not_after.timestamp(),
        validity.not_after.unix_timestamp()
    );
    let name = "kserve-injector.models.svc";
    verify(ca.cert_pem(), &leaf, name, now())?;
    let expired = verify(ca.cert_pem(), &leaf, name, now() + time::Duration::days(31));
    assert!(expired.is_err(), "an expired leaf verified");
    let early = verify(ca.cert_pem(), &leaf, name, now() - time::Duration::hours(2));
    assert!(early.is_err(), "a not-yet-valid leaf verified");
    Ok(())
}

#[test]
fn a_ca_read_back_from_pem_signs_leaves_the_original_verifies(
) -> Result<(), Box<dyn std::error::Error>> {
    let validity = Validity::from(now(), 3650);
    let ca = Authority::generate("test CA", validity)?;
    let again = Authority::from_pem(ca.cert_pem(), &ca.key_pem())?;
    assert_eq!(
        again.not_after().unix_timestamp(),
        validity.not_after.unix_timestamp()
    );
    let leaf = again.issue_serving("x", &names(), Validity::from(now(), 30))?;
    verify(ca.cert_pem(), &leaf, "kserve-injector.models", now())?;
    Ok(())
}

#[test]
fn a_leaf_or_a_foreign_key_is_not_accepted_as_the_ca() -> Result<(), Box<dyn std::error::Error>> {
    let validity = Validity::from(now(), 30);
    let ca = Authority::generate("test CA", validity)?;
    let other = Authority::generate("test CA", validity)?;
    let leaf = ca.issue_serving("x", &names(), validity)?;
    assert!(matches!(
        Authority::from_pem(&leaf.cert_pem, &leaf.key_pem),
        Err(CertGenError::NotCa)
    ));
    assert!(matches!(
        Authority::from_pem(ca.cert_pem(), &other.key_pem()),
        Err(CertGenError::KeyMismatch)
    ));
    assert!(matches!(
        Authority::from_pem("not a pem", &ca.key_pem()),
        Err(CertGenError::Parse(_))
    ));
    Ok(())
}

#[test]
fn names_that_are_not_dns_labels_are_refused() {
    for (service, namespace) in [
        ("", "ns"),
        ("Svc", "ns"),
        ("svc", "-ns"),
        ("svc", "ns-"),
        ("svc", "a.b"),
        ("svc", &"n".repeat(64)),
    ] {
        let err = service_dns_names(service, namespace).expect_err(namespace);
        assert!(err.to_string().contains("must be a DNS label"), "{err}");
    }
    assert!(service_dns_names("a", &"n".repeat(63)).is_ok());
}
