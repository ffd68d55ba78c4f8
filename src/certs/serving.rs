//! What `serve` serves with: PEM files parsed and checked (a certificate
//! chain with its key, a client CA bundle), or `--self-signed`'s pair made
//! in memory, so trying the webhook locally needs no cert-manager and no
//! files besides the CA that `curl --cacert` reads.
//!
//! A chain is checked in the order a failure would show: every block is a
//! whole certificate with only whitespace around it (`pem`), the leaf is
//! inside its validity window, each certificate whose issuer is the next
//! one verifies with that one's key (`chain`), and the key is the leaf's.
//! The TLS configuration made of it is then proven by a handshake before
//! it serves (`handshake`, called where the configuration is built).

use super::chain::{check_signatures, ChainError};
use super::pem::{self, PemError};
use super::{Authority, Validity};
use crate::config_file::Snapshot;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use time::OffsetDateTime;

/// Why a certificate, key or CA bundle could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ServingCertError {
    /// A file of the pair could not be read (the reader's message names it).
    #[error(transparent)]
    Read(#[from] crate::config_file::Unreadable),
    #[error("{path}: no PEM private key found")]
    NoKey { path: PathBuf },
    #[error("{path}: {source}")]
    Key {
        path: PathBuf,
        source: rustls_pki_types::pem::Error,
    },
    /// A certificate that x509-parser or rustls cannot read.
    #[error("{path}: cannot parse certificate: {source}")]
    Unparsable {
        path: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{path}: {source}")]
    Certificates { path: PathBuf, source: PemError },
    #[error("{path}: {source}")]
    Chain { path: PathBuf, source: ChainError },
    #[error("certificate {cert} and key {key} do not form a usable pair: {source}")]
    Pair {
        cert: PathBuf,
        key: PathBuf,
        source: rustls::Error,
    },
    #[error("{path}: the certificate is valid from {not_before} to {not_after}, not now ({now}); refusing it")]
    OutsideValidity {
        path: PathBuf,
        not_before: String,
        not_after: String,
        now: String,
    },
    /// Not valid yet: the same files load from `valid_from` (Unix seconds).
    #[error("{path}: the certificate is valid from {not_before} to {not_after}, not now ({now}); refusing it")]
    NotYetValid {
        path: PathBuf,
        not_before: String,
        not_after: String,
        now: String,
        valid_from: i64,
    },
    #[error("cannot generate the self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// The ring provider, chosen explicitly so no other provider compiled into
/// the dependency graph can be picked up by accident.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A serving certificate chain with its key, checked to belong together.
#[derive(Debug, Clone)]
pub struct ServingPair {
    pub key: Arc<CertifiedKey>,
    /// The leaf's notAfter, Unix seconds.
    pub not_after: i64,
}

fn x509_error(path: &Path, e: impl std::error::Error + Send + Sync + 'static) -> ServingCertError {
    ServingCertError::Unparsable {
        path: path.to_path_buf(),
        source: Box::new(e),
    }
}

/// The certificate's notAfter (Unix seconds). With `check`, also that now
/// lies inside its validity window: an expired or not-yet-valid serving
/// certificate fails every handshake, so loading one is an error.
fn validity(der: &[u8], path: &Path, check: bool) -> Result<i64, ServingCertError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| x509_error(path, e))?;
    let (validity, now) = (cert.validity(), x509_parser::time::ASN1Time::now());
    let (path, not_before, not_after) = (
        path.to_path_buf(),
        validity.not_before.to_string(),
        validity.not_after.to_string(),
    );
    if check && now > validity.not_after {
        let now = now.to_string();
        return Err(ServingCertError::OutsideValidity {
            path,
            not_before,
            not_after,
            now,
        });
    }
    if check && now < validity.not_before {
        let (now, valid_from) = (now.to_string(), validity.not_before.timestamp());
        return Err(ServingCertError::NotYetValid {
            path,
            not_before,
            not_after,
            now,
            valid_from,
        });
    }
    Ok(validity.not_after.timestamp())
}

/// Time cures one refusal: a leaf whose notBefore is ahead of this clock.
/// An expired leaf stays expired, and every other check reads bytes only.
impl crate::reload::Refusal for ServingCertError {
    fn valid_from(&self) -> Option<i64> {
        match self {
            ServingCertError::NotYetValid { valid_from, .. } => Some(*valid_from),
            _ => None,
        }
    }
}

/// The certificates of one file of the snapshot (at least one), each a
/// whole X.509 certificate.
fn certs(snap: &Snapshot, path: &Path) -> Result<Vec<CertificateDer<'static>>, ServingCertError> {
    let bytes = snap.file(path).map_err(ServingCertError::Read)?;
    pem::certificates(bytes).map_err(|source| ServingCertError::Certificates {
        path: path.to_path_buf(),
        source,
    })
}

/// Parses a PEM chain and key, checks the leaf's validity window, the
/// chain's signatures and that the key matches the leaf.
pub fn load_pair(
    snap: &Snapshot,
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<ServingPair, ServingCertError> {
    let chain = certs(snap, cert_path)?;
    let key_pem = snap.file(key_path).map_err(ServingCertError::Read)?;
    let path = key_path.to_path_buf();
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => ServingCertError::NoKey { path },
        source => ServingCertError::Key { path, source },
    })?;
    let not_after = validity(&chain[0], cert_path, true)?;
    check_signatures(&chain).map_err(|source| ServingCertError::Chain {
        path: cert_path.to_path_buf(),
        source,
    })?;
    let key =
        CertifiedKey::from_der(chain, key, provider).map_err(|source| ServingCertError::Pair {
            cert: cert_path.to_path_buf(),
            key: key_path.to_path_buf(),
            source,
        })?;
    let key = Arc::new(key);
    Ok(ServingPair { key, not_after })
}

pub type Verifier = Arc<dyn ClientCertVerifier>;

/// A client CA bundle as a verifier, with the earliest notAfter among its
/// certificates (when any of them expires, some clients stop verifying).
pub fn client_verifier(
    snap: &Snapshot,
    path: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<(Verifier, i64), ServingCertError> {
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

#[derive(Debug)]
pub struct SelfSigned {
    pub pair: ServingPair,
    pub ca_pem: String,
    pub names: Vec<String>,
}

/// Always valid for localhost and the loopback addresses; `extra` adds names
/// such as a Service's DNS name for an in-cluster try-out.
pub fn self_signed(
    extra: &[String],
    provider: &CryptoProvider,
) -> Result<SelfSigned, ServingCertError> {
    let validity = Validity::from(OffsetDateTime::now_utc(), 365);
    let ca = Authority::generate("kserve-injector self-signed CA", validity)?;

    let mut names = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
    for name in extra {
        if !name.is_empty() && !names.contains(name) {
            names.push(name.clone());
        }
    }
    let leaf = ca.issue_serving("kserve-injector", &names, validity)?;

    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key_pkcs8_der));
    let key = CertifiedKey::from_der(vec![leaf.cert_der], key, provider).map_err(|source| {
        ServingCertError::Pair {
            cert: "(self-signed)".into(),
            key: "(self-signed)".into(),
            source,
        }
    })?;
    let pair = ServingPair {
        key: Arc::new(key),
        not_after: validity.not_after.unix_timestamp(),
    };
    Ok(SelfSigned {
        pair,
        ca_pem: ca.cert_pem().to_owned(),
        names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leaf_chains_to_the_printed_ca() -> Result<(), Box<dyn std::error::Error>> {
        let provider = provider();
        let made = self_signed(&["webhook.kserve.svc".into()], &provider)?;
        assert!(made.names.iter().any(|n| n == "webhook.kserve.svc"));
        let ca = CertificateDer::from_pem_slice(made.ca_pem.as_bytes())?;
        let mut roots = RootCertStore::empty();
        roots.add(ca)?;
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()?;
        let leaf = made.pair.key.end_entity_cert()?;
        for name in ["localhost", "127.0.0.1", "webhook.kserve.svc"] {
            let server_name = rustls_pki_types::ServerName::try_from(name)?;
            verifier.verify_server_cert(
                leaf,
                &[],
                &server_name,
                &[],
                rustls_pki_types::UnixTime::now(),
            )?;
        }
        Ok(())
    }

    use rustls::client::danger::ServerCertVerifier;
}
