//! What `serve` serves with: PEM files parsed and checked (a certificate
//! chain with its key, a client CA bundle), or `--self-signed`'s pair made
//! in memory, so trying the webhook locally needs no cert-manager and no
//! files besides the CA that `curl --cacert` reads.
//!
//! A chain is checked in the order a failure would show: every block is a
//! whole certificate with only whitespace around it (`pem`), the leaf and
//! each intermediate are inside their validity windows, each certificate
//! whose issuer is the next one verifies with that one's key (`chain`), and
//! the key is the leaf's.
//! The TLS configuration made of it is then proven by a handshake before
//! it serves (`handshake`, called where the configuration is built).

use super::chain::{check_signatures, ChainError};
use super::pem::{self, PemError};
use super::{Authority, Validity};
use crate::files::Snapshot;
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
    Read(#[from] crate::files::Unreadable),
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
    #[error(
        "{path}: {which} is valid from {not_before} to {not_after}, not now ({now}); refusing it"
    )]
    OutsideValidity {
        path: PathBuf,
        /// "the certificate" (the leaf), or which certificate of the chain
        /// (boxed: the error stays within clippy's size for a `Result`).
        which: Box<str>,
        not_before: String,
        not_after: String,
        now: String,
    },
    /// Not valid yet: the same files load from `valid_from` (Unix seconds).
    #[error(
        "{path}: {which} is valid from {not_before} to {not_after}, not now ({now}); refusing it"
    )]
    NotYetValid {
        path: PathBuf,
        which: Box<str>,
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
    /// The earliest notAfter in the chain below its root (the leaf's, unless
    /// an intermediate expires first), Unix seconds.
    pub not_after: i64,
}

fn x509_error(path: &Path, e: impl std::error::Error + Send + Sync + 'static) -> ServingCertError {
    ServingCertError::Unparsable {
        path: path.to_path_buf(),
        source: Box::new(e),
    }
}

/// Which certificate of a chain a validity check is about.
#[derive(Clone, Copy)]
enum Checked {
    /// A client CA bundle's: its notAfter read, its window not checked.
    NotChecked,
    /// The serving chain's certificate at this index (0: the leaf).
    Served(usize),
}

/// The certificate's notAfter (Unix seconds). For a served certificate,
/// also that now lies inside its validity window: an expired or
/// not-yet-valid serving certificate, or intermediate under it, fails every
/// handshake (a client checks each certificate of the chain it builds), so
/// loading one is an error. A self-issued certificate (a root sent along)
/// is not checked: a client verifies up to the root it trusts, which may be
/// a renewed one under the same name and key.
fn validity(der: &[u8], path: &Path, checked: Checked) -> Result<i64, ServingCertError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| x509_error(path, e))?;
    let (validity, now) = (cert.validity(), x509_parser::time::ASN1Time::now());
    let which = match checked {
        Checked::NotChecked => return Ok(validity.not_after.timestamp()),
        Checked::Served(0) => Box::from("the certificate"),
        Checked::Served(_) if cert.subject().as_raw() == cert.issuer().as_raw() => {
            return Ok(i64::MAX)
        }
        Checked::Served(n) => {
            format!("certificate {} of the chain ({})", n + 1, cert.subject()).into()
        }
    };
    let (path, not_before, not_after) = (
        path.to_path_buf(),
        validity.not_before.to_string(),
        validity.not_after.to_string(),
    );
    if now > validity.not_after {
        let now = now.to_string();
        return Err(ServingCertError::OutsideValidity {
            path,
            which,
            not_before,
            not_after,
            now,
        });
    }
    if now < validity.not_before {
        let (now, valid_from) = (now.to_string(), validity.not_before.timestamp());
        return Err(ServingCertError::NotYetValid {
            path,
            which,
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

/// Parses a PEM chain and key, checks the validity window of the leaf and
/// of each intermediate, the chain's signatures and that the key matches
/// the leaf.
pub(crate) fn load_pair(
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
    // The chain serves until its first certificate expires; one not valid
    // yet is the first refusal, as for the leaf (its notBefore, a retry).
    let mut not_after = i64::MAX;
    for (n, cert) in chain.iter().enumerate() {
        not_after = not_after.min(validity(cert, cert_path, Checked::Served(n))?);
    }
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

pub(crate) type Verifier = Arc<dyn ClientCertVerifier>;

/// A client CA bundle as a verifier, with the earliest notAfter among its
/// certificates (when any of them expires, some clients stop verifying).
pub(crate) fn client_verifier(
    snap: &Snapshot,
    path: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<(Verifier, i64), ServingCertError> {
    let mut earliest = i64::MAX;
    let mut roots = RootCertStore::empty();
    for cert in certs(snap, path)? {
        earliest = earliest.min(validity(&cert, path, Checked::NotChecked)?);
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

    /// A CA, an intermediate valid from `from` to `to` under it, and a leaf
    /// valid for a year under that, written as `tls.crt` (leaf,
    /// intermediate, then the CA when `with_root`) and `tls.key`, then
    /// loaded as `serve` loads them.
    fn load_with_intermediate(
        from: OffsetDateTime,
        to: OffsetDateTime,
        with_root: Option<(OffsetDateTime, OffsetDateTime)>,
    ) -> Result<ServingPair, ServingCertError> {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
        let ca_params = |cn: &str, window: (OffsetDateTime, OffsetDateTime)| {
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("no names");
            params.distinguished_name.push(DnType::CommonName, cn);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            (params.not_before, params.not_after) = window;
            params
        };
        let now = OffsetDateTime::now_utc();
        let year = (
            now - time::Duration::days(1),
            now + time::Duration::days(365),
        );
        let root_window = with_root.unwrap_or(year);
        let root = CertifiedIssuer::self_signed(
            ca_params("test root", root_window),
            KeyPair::generate()?,
        )?;
        let key = KeyPair::generate()?;
        let middle = CertifiedIssuer::signed_by(
            ca_params("test intermediate", (from, to)),
            KeyPair::generate()?,
            &root,
        )?;
        let mut leaf = CertificateParams::new(vec!["localhost".to_string()])?;
        (leaf.not_before, leaf.not_after) = year;
        let leaf = leaf.signed_by(&key, &middle)?;
        let mut chain = leaf.pem() + &middle.pem();
        if with_root.is_some() {
            chain += &root.pem();
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert_path, chain).expect("written");
        std::fs::write(&key_path, key.serialize_pem()).expect("written");
        let snap = Snapshot::read(
            &[cert_path.clone(), key_path.clone()],
            crate::files::Accept::RegularFile,
        );
        load_pair(&snap, &cert_path, &key_path, &provider())
    }

    #[test]
    fn an_intermediate_outside_its_validity_is_refused_like_the_leaf() {
        let now = OffsetDateTime::now_utc();
        let day = time::Duration::days(1);
        let expired = load_with_intermediate(now - 30 * day, now - day, None).unwrap_err();
        assert!(
            matches!(expired, ServingCertError::OutsideValidity { .. })
                && expired
                    .to_string()
                    .contains("certificate 2 of the chain (CN=test intermediate) is valid from"),
            "{expired}"
        );
        let ahead = now + day;
        let pending = load_with_intermediate(ahead, now + 30 * day, None).unwrap_err();
        // Time cures it: the reloader loads the same files at its notBefore.
        assert_eq!(
            crate::reload::Refusal::valid_from(&pending),
            Some(ahead.unix_timestamp()),
            "{pending}"
        );
        // The chain serves until its intermediate expires, before the leaf.
        let soon = now + 10 * day;
        let pair = load_with_intermediate(now - day, soon, None).expect("a valid chain");
        assert_eq!(pair.not_after, soon.unix_timestamp());
        // A root sent along is not the client's trust anchor: not checked.
        let old_root = Some((now - 30 * day, now - day));
        let pair = load_with_intermediate(now - day, soon, old_root).expect("the root is skipped");
        assert_eq!(pair.not_after, soon.unix_timestamp());
    }
}
