//! The rustls `ServerConfig` in use, rebuilt whole when the serving pair or
//! the client CA is reloaded: a handshake takes the config current when it
//! starts, established connections keep what they negotiated.

use super::error::CertError;
use crate::config_file::Snapshot;
use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tracing::error;

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

fn invalid(path: &Path, message: impl ToString) -> CertError {
    let (path, message) = (path.to_path_buf(), message.to_string());
    CertError::Invalid { path, message }
}

fn x509_error(path: &Path, e: impl std::fmt::Display) -> CertError {
    invalid(path, format!("cannot parse certificate: {e}"))
}

/// The certificate's notAfter (Unix seconds). With `check`, also that now
/// lies inside its validity window: an expired or not-yet-valid serving
/// certificate fails every handshake, so loading one is an error.
fn validity(der: &[u8], path: &Path, check: bool) -> Result<i64, CertError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| x509_error(path, e))?;
    let (validity, now) = (cert.validity(), x509_parser::time::ASN1Time::now());
    if check && (now < validity.not_before || now > validity.not_after) {
        return Err(CertError::OutsideValidity {
            path: path.to_path_buf(),
            not_before: validity.not_before.to_string(),
            not_after: validity.not_after.to_string(),
            now: now.to_string(),
        });
    }
    Ok(validity.not_after.timestamp())
}

/// The certificates of one file of the snapshot (at least one).
fn certs(snap: &Snapshot, path: &Path) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let pem = snap.file(path).map_err(CertError::Read)?;
    let certs = CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>();
    let certs = certs.map_err(|e| invalid(path, e))?;
    if certs.is_empty() {
        return Err(invalid(path, "no PEM certificate found"));
    }
    Ok(certs)
}

/// Parses a PEM chain and key, checks the leaf's validity window and that
/// the key matches it.
pub(crate) fn load_pair(
    snap: &Snapshot,
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<ServingPair, CertError> {
    let chain = certs(snap, cert_path)?;
    let key_pem = snap.file(key_path).map_err(CertError::Read)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => invalid(key_path, "no PEM private key found"),
        other => invalid(key_path, other),
    })?;
    let not_after = validity(&chain[0], cert_path, true)?;
    let key = CertifiedKey::from_der(chain, key, provider).map_err(|source| CertError::Pair {
        cert: cert_path.to_path_buf(),
        key: key_path.to_path_buf(),
        source,
    })?;
    let key = Arc::new(key);
    Ok(ServingPair { key, not_after })
}

pub(crate) type Verifier = Arc<dyn ClientCertVerifier>;

/// A client CA bundle as a verifier, with the earliest notAfter among its
/// certificates (when any of them expires, some clients stop verifying).
pub(crate) fn client_verifier(
    snap: &Snapshot,
    path: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<(Verifier, i64), CertError> {
    let mut earliest = i64::MAX;
    let mut roots = RootCertStore::empty();
    for cert in certs(snap, path)? {
        earliest = earliest.min(validity(&cert, path, false)?);
        roots.add(cert).map_err(|e| x509_error(path, e))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| x509_error(path, e))?;
    Ok((verifier, earliest))
}

/// The current parts and the config built from them.
pub(crate) struct Tls {
    provider: Arc<CryptoProvider>,
    parts: Mutex<(ServingPair, Option<Verifier>)>,
    not_after: AtomicI64,
    pub config: ArcSwap<ServerConfig>,
}

/// TLS 1.2 and 1.3 only; ALPN offers h2 first because the API server
/// speaks HTTP/2 when it can.
fn build(
    provider: &Arc<CryptoProvider>,
    pair: &ServingPair,
    client_ca: Option<&Verifier>,
) -> Result<ServerConfig, rustls::Error> {
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let builder = match client_ca {
        Some(verifier) => builder.with_client_cert_verifier(verifier.clone()),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(SingleCertAndKey::from(pair.key.clone())));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

impl Tls {
    pub(crate) fn new(
        provider: Arc<CryptoProvider>,
        pair: ServingPair,
        client_ca: Option<Verifier>,
    ) -> Result<Self, rustls::Error> {
        let config = build(&provider, &pair, client_ca.as_ref())?;
        Ok(Self {
            provider,
            not_after: AtomicI64::new(pair.not_after),
            parts: Mutex::new((pair, client_ca)),
            config: ArcSwap::from_pointee(config),
        })
    }

    /// Serving certificate's notAfter, Unix seconds (for `/readyz`).
    pub(crate) fn not_after(&self) -> i64 {
        self.not_after.load(Ordering::Relaxed)
    }

    pub(crate) fn set_pair(&self, pair: ServingPair) {
        self.update(|parts| parts.0 = pair);
    }

    pub(crate) fn set_client_ca(&self, verifier: Verifier) {
        self.update(|parts| parts.1 = Some(verifier));
    }

    fn update(&self, change: impl FnOnce(&mut (ServingPair, Option<Verifier>))) {
        let mut parts = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
        change(&mut parts);
        match build(&self.provider, &parts.0, parts.1.as_ref()) {
            Ok(config) => {
                self.config.store(Arc::new(config));
                self.not_after.store(parts.0.not_after, Ordering::Relaxed);
            }
            Err(e) => {
                error!(error = %e, "cannot build the TLS configuration; the previous one stays")
            }
        }
    }
}
