use super::*;

fn ring() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

fn names(policy: &TlsPolicy) -> Vec<&'static str> {
    policy.provider.cipher_suites.iter().map(name).collect()
}

#[test]
fn without_flags_every_suite_and_both_versions_are_served() {
    let all = policy(&ring(), TlsMinVersion::Tls12, &[]).expect("defaults");
    assert_eq!(all.provider.cipher_suites.len(), ring().cipher_suites.len());
    assert_eq!(all.versions.len(), 2);
    let only13 = policy(&ring(), TlsMinVersion::Tls13, &[]).expect("1.3");
    assert_eq!(only13.versions, vec![&rustls::version::TLS13]);
}

#[test]
fn kubernetes_names_keep_those_tls_1_2_suites_and_every_tls_1_3_one() {
    let asked = [
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        "TLS_AES_128_GCM_SHA256",
    ]
    .map(String::from);
    let kept = policy(&ring(), TlsMinVersion::Tls12, &asked).expect("known names");
    assert_eq!(
        names(&kept),
        [
            "TLS13_AES_256_GCM_SHA384",
            "TLS13_AES_128_GCM_SHA256",
            "TLS13_CHACHA20_POLY1305_SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        ]
    );
}

#[test]
fn unknown_names_and_suites_ring_does_not_offer_are_refused() {
    let unknown = policy(&ring(), TlsMinVersion::Tls12, &["TLS_BOGUS".into()]);
    assert_eq!(
        unknown.err(),
        Some(TlsPolicyError::Unknown("TLS_BOGUS".into()))
    );
    let cbc = policy(
        &ring(),
        TlsMinVersion::Tls12,
        &["TLS_RSA_WITH_AES_128_CBC_SHA".into()],
    );
    let message = cbc.expect_err("not offered").to_string();
    assert!(
        message.starts_with("--tls-cipher-suites: TLS_RSA_WITH_AES_128_CBC_SHA is not offered by the crypto provider (ring), which offers for TLS 1.2: TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"),
        "{message}"
    );
    let only13 = policy(
        &ring(),
        TlsMinVersion::Tls12,
        &["TLS_AES_128_GCM_SHA256".into()],
    );
    assert_eq!(only13.err(), Some(TlsPolicyError::NoTls12Suite));
    assert!(policy(
        &ring(),
        TlsMinVersion::Tls13,
        &["TLS_AES_128_GCM_SHA256".into()]
    )
    .is_ok());
    assert_eq!("VersionTLS13".parse(), Ok(TlsMinVersion::Tls13));
    assert!("1.1".parse::<TlsMinVersion>().is_err());
}
