use super::*;

/// Both versions the server serves by default.
const BOTH: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];
use crate::certs::{provider, Authority, Validity};
use rustls::server::WebPkiClientVerifier;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::RootCertStore;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

fn authority(name: &str) -> Authority {
    let validity = Validity::from(time::OffsetDateTime::now_utc(), 1);
    Authority::generate(name, validity).unwrap()
}

/// A leaf's certificate and its key as rustls loads them.
fn leaf(ca: &Authority) -> (CertificateDer<'static>, Arc<dyn rustls::sign::SigningKey>) {
    let validity = Validity::from(time::OffsetDateTime::now_utc(), 1);
    let leaf = ca
        .issue_serving("leaf", &["localhost".into()], validity)
        .unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key_pkcs8_der));
    let key = provider().key_provider.load_private_key(key).unwrap();
    (leaf.cert_der, key)
}

/// A server config as `serve` builds one, around any chain and key: the
/// file checks are bypassed, so only the handshake stands in the way.
fn config(
    chain: Vec<CertificateDer<'static>>,
    key: Arc<dyn rustls::sign::SigningKey>,
    client_ca: Option<&Authority>,
) -> Arc<ServerConfig> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .unwrap();
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            let der = crate::certs::pem::certificates(ca.cert_pem().as_bytes()).unwrap();
            roots.add(der[0].clone()).unwrap();
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
            builder.with_client_cert_verifier(verifier.build().unwrap())
        }
        None => builder.with_no_client_auth(),
    };
    let key = Arc::new(CertifiedKey::new(chain, key));
    let mut config = builder.with_cert_resolver(Arc::new(SingleCertAndKey::from(key)));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

#[test]
fn a_good_pair_is_proven_with_and_without_client_certificates() {
    let (ca, client_ca) = (authority("probe CA"), authority("client CA"));
    let (cert, key) = leaf(&ca);
    let ca_der = crate::certs::pem::certificates(ca.cert_pem().as_bytes()).unwrap();
    let chain = vec![cert, ca_der[0].clone()];
    prove(
        &config(chain.clone(), key.clone(), None),
        &provider(),
        BOTH,
        false,
    )
    .unwrap();
    prove(
        &config(chain, key, Some(&client_ca)),
        &provider(),
        BOTH,
        true,
    )
    .unwrap();
}

#[test]
fn a_missing_client_certificate_is_the_only_failure_forgiven() {
    let (ca, client_ca) = (authority("probe CA"), authority("client CA"));
    let (cert, key) = leaf(&ca);
    let config = config(vec![cert], key, Some(&client_ca));
    // Without being told client certificates are required, the refusal is a failure.
    let err = prove(&config, &provider(), BOTH, false)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("a TLS 1.3 handshake against the new TLS configuration failed (server: "),
        "{err}"
    );
}

#[test]
fn a_chain_with_a_block_no_client_parses_is_refused() {
    let (cert, key) = leaf(&authority("probe CA"));
    let chain = vec![cert, CertificateDer::from(vec![0u8, 0, 0])];
    let err = prove(&config(chain, key, None), &provider(), BOTH, false).unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("a TLS 1.3 handshake"), "{text}");
    assert!(
        text.contains("client: invalid peer certificate: BadEncoding"),
        "{text}"
    );
}

#[test]
fn a_key_that_is_not_the_certificates_is_refused() {
    let ca = authority("probe CA");
    let (cert, _) = leaf(&ca);
    let (_, other_key) = leaf(&ca);
    let err = prove(
        &config(vec![cert], other_key, None),
        &provider(),
        BOTH,
        false,
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("client: "), "{text}");
    assert!(text.to_lowercase().contains("signature"), "{text}");
}

#[test]
fn an_unparsable_leaf_is_refused_in_both_versions() {
    let (_, key) = leaf(&authority("probe CA"));
    let config = config(
        vec![CertificateDer::from(vec![0x30, 0x03, 1, 2, 3])],
        key,
        None,
    );
    let err = prove(&config, &provider(), BOTH, false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("client: invalid peer certificate"), "{err}");
}
