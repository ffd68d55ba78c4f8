//! rustls pieces whose certificates can be replaced while the server runs:
//! new handshakes pick up the current pair, established connections keep
//! the one they negotiated.

use super::error::CertError;
use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// The ring provider, chosen explicitly so no other provider compiled into
/// the dependency graph can be picked up by accident.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A serving certificate chain with its key, checked to belong together.
#[derive(Debug, Clone)]
pub(crate) struct ServingPair {
    pub key: Arc<CertifiedKey>,
    /// The leaf's notAfter, Unix seconds.
    pub not_after: i64,
}

/// The leaf's notAfter (Unix seconds), after checking that now lies inside
/// its validity window: an expired or not-yet-valid certificate makes every
/// handshake fail, so loading one is an error, never a replacement.
pub(crate) fn check_validity(der: &[u8], path: &Path) -> Result<i64, CertError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| CertError::X509 {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let validity = cert.validity();
    let now = x509_parser::time::ASN1Time::now();
    if now < validity.not_before || now > validity.not_after {
        return Err(CertError::OutsideValidity {
            path: path.to_path_buf(),
            not_before: validity.not_before.to_string(),
            not_after: validity.not_after.to_string(),
            now: now.to_string(),
        });
    }
    Ok(validity.not_after.timestamp())
}

fn not_after(der: &[u8], path: &Path) -> Result<i64, CertError> {
    x509_parser::parse_x509_certificate(der)
        .map(|(_, cert)| cert.validity().not_after.timestamp())
        .map_err(|e| CertError::X509 {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
}

fn parse_certs(pem: &[u8], path: &Path) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertError::Pem {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(CertError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// Parses a PEM chain and key and checks that the key matches the leaf.
pub(crate) fn load_pair(
    cert_pem: &[u8],
    cert_path: &Path,
    key_pem: &[u8],
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<ServingPair, CertError> {
    let chain = parse_certs(cert_pem, cert_path)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => CertError::NoKey {
            path: key_path.to_path_buf(),
        },
        other => CertError::Pem {
            path: key_path.to_path_buf(),
            message: other.to_string(),
        },
    })?;
    let not_after = check_validity(&chain[0], cert_path)?;
    let key = CertifiedKey::from_der(chain, key, provider).map_err(|source| CertError::Pair {
        cert: cert_path.to_path_buf(),
        key: key_path.to_path_buf(),
        source,
    })?;
    Ok(ServingPair {
        key: Arc::new(key),
        not_after,
    })
}

/// Answers every handshake with the pair loaded last, and remembers its
/// expiry for `/readyz`.
#[derive(Debug)]
pub(crate) struct ServingCert {
    current: ArcSwap<CertifiedKey>,
    not_after: AtomicI64,
}

impl ServingCert {
    pub(crate) fn new(key: Arc<CertifiedKey>, not_after: i64) -> Self {
        Self {
            current: ArcSwap::new(key),
            not_after: AtomicI64::new(not_after),
        }
    }

    pub(crate) fn replace(&self, pair: ServingPair) {
        self.current.store(pair.key);
        self.not_after.store(pair.not_after, Ordering::Relaxed);
    }

    pub(crate) fn not_after(&self) -> i64 {
        self.not_after.load(Ordering::Relaxed)
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// A client CA bundle as a verifier, with the earliest notAfter among its
/// certificates (when any of them expires, some clients stop verifying).
pub(crate) fn client_verifier(
    pem: &[u8],
    path: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<(Arc<dyn ClientCertVerifier>, i64), CertError> {
    let certs = parse_certs(pem, path)?;
    let mut earliest = i64::MAX;
    let mut roots = RootCertStore::empty();
    for cert in certs {
        earliest = earliest.min(not_after(&cert, path)?);
        roots.add(cert).map_err(|e| CertError::ClientCa {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| CertError::ClientCa {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    Ok((verifier, earliest))
}

/// Requires a client certificate and checks it against the CA bundle loaded
/// last.
#[derive(Debug)]
pub(crate) struct ClientCaVerifier {
    /// `ArcSwap` needs a sized pointee, hence the inner `Arc<dyn ..>`.
    current: ArcSwap<Arc<dyn ClientCertVerifier>>,
}

impl ClientCaVerifier {
    pub(crate) fn new(verifier: Arc<dyn ClientCertVerifier>) -> Self {
        Self {
            current: ArcSwap::from_pointee(verifier),
        }
    }

    pub(crate) fn replace(&self, verifier: Arc<dyn ClientCertVerifier>) {
        self.current.store(Arc::new(verifier));
    }
}

impl ClientCertVerifier for ClientCaVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    /// The hints would have to borrow from the swappable bundle; an empty
    /// list is valid and tells clients to send whatever certificate they have.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current
            .load()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.current
            .load()
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.current
            .load()
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current.load().supported_verify_schemes()
    }
}

/// TLS 1.2 and 1.3 only; ALPN offers h2 first because the API server
/// speaks HTTP/2 when it can.
pub(crate) fn server_config(
    provider: Arc<CryptoProvider>,
    serving: Arc<ServingCert>,
    client_ca: Option<Arc<ClientCaVerifier>>,
) -> Result<ServerConfig, rustls::Error> {
    let builder = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let builder = match client_ca {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(serving);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn pair() -> Result<rcgen::CertifiedKey<rcgen::KeyPair>, rcgen::Error> {
        rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
    }

    #[test]
    fn a_matching_pair_loads_and_reports_its_expiry() -> TestResult {
        let p = pair()?;
        let loaded = load_pair(
            p.cert.pem().as_bytes(),
            Path::new("tls.crt"),
            p.signing_key.serialize_pem().as_bytes(),
            Path::new("tls.key"),
            &provider(),
        )?;
        assert!(loaded.not_after > 0);
        Ok(())
    }

    #[test]
    fn mismatched_or_garbage_pairs_are_refused() -> TestResult {
        let (a, b) = (pair()?, pair()?);
        let cert = a.cert.pem();
        let wrong_key = b.signing_key.serialize_pem();
        let load = |c: &[u8], k: &[u8]| {
            load_pair(c, Path::new("c"), k, Path::new("k"), &provider()).map(drop)
        };
        assert!(matches!(
            load(cert.as_bytes(), wrong_key.as_bytes()),
            Err(CertError::Pair { .. })
        ));
        assert!(matches!(
            load(b"", wrong_key.as_bytes()),
            Err(CertError::NoCertificate { .. })
        ));
        assert!(matches!(
            load(cert.as_bytes(), b"not a key"),
            Err(CertError::NoKey { .. })
        ));
        assert!(load(
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            wrong_key.as_bytes()
        )
        .is_err());
        Ok(())
    }

    #[test]
    fn certificates_outside_their_validity_window_are_refused() -> TestResult {
        let now = time::OffsetDateTime::now_utc();
        for (from, to) in [
            (
                now - time::Duration::days(30),
                now - time::Duration::days(1),
            ),
            (
                now + time::Duration::days(1),
                now + time::Duration::days(30),
            ),
        ] {
            let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()])?;
            params.not_before = from;
            params.not_after = to;
            let key = rcgen::KeyPair::generate()?;
            let cert = params.self_signed(&key)?;
            let loaded = load_pair(
                cert.pem().as_bytes(),
                Path::new("tls.crt"),
                key.serialize_pem().as_bytes(),
                Path::new("tls.key"),
                &provider(),
            );
            match loaded {
                Err(CertError::OutsideValidity { .. }) => {}
                other => panic!("expected OutsideValidity, got {other:?}"),
            }
        }
        Ok(())
    }
}
