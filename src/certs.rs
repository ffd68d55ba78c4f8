//! The one certificate generator (rcgen): a CA, and serving certificates it
//! signs. `serve --self-signed` keeps the pair in memory (see `serving`,
//! which also parses and checks the certificate files `serve` reads, with
//! `pem` and `chain`; `handshake` proves the TLS configuration made of
//! them before it serves);
//! `kserve-injector certs` writes it for the `static-certs` install (see
//! `files`). Pure apart from key generation's randomness: the caller passes
//! the validity window, so no clock is read here.

mod chain;
mod files;
mod handshake;
mod pem;
mod serving;

pub use chain::ChainError;
pub(crate) use files::{write_ca, write_certs, CertsRequest};
pub(crate) use handshake::prove as prove_handshake;
pub use handshake::HandshakeError;
pub use pem::{certificates, PemError};
pub(crate) use serving::{client_verifier, load_pair, Verifier};
pub use serving::{provider, self_signed, SelfSigned, ServingCertError, ServingPair};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData,
};
use rustls_pki_types::CertificateDer;
use time::{Duration, OffsetDateTime};

/// Why a CA or a serving certificate could not be made or loaded.
#[derive(Debug, thiserror::Error)]
pub enum CertGenError {
    #[error(transparent)]
    Generate(#[from] rcgen::Error),
    /// Not PEM, not X.509, or a notAfter out of range.
    #[error("the CA certificate cannot be parsed: {0}")]
    Parse(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the CA certificate is not a CA (basicConstraints CA:TRUE is missing)")]
    NotCa,
    #[error("the CA key does not belong to the CA certificate")]
    KeyMismatch,
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{present} exists but {missing} does not: keep both (to reuse the CA) or remove both")]
    HalfCa {
        present: std::path::PathBuf,
        missing: std::path::PathBuf,
    },
    #[error("the CA in {path} expires at {ca_not_after}, before the new certificate would ({not_after}); pass --new-ca or fewer --days")]
    CaExpiresFirst {
        path: std::path::PathBuf,
        ca_not_after: OffsetDateTime,
        not_after: OffsetDateTime,
    },
    #[error("invalid {what} {value:?}: must be a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)")]
    BadLabel { what: &'static str, value: String },
}

/// When a certificate is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

impl Validity {
    /// Valid for `days` from `now`, backdated an hour so that a peer whose
    /// clock is slightly behind still accepts it.
    pub fn from(now: OffsetDateTime, days: u32) -> Self {
        Validity {
            not_before: now - Duration::hours(1),
            not_after: now + Duration::days(i64::from(days)),
        }
    }
}

/// A CA that signs serving certificates.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    not_after: OffsetDateTime,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

/// A serving certificate and its private key (PKCS#8).
#[derive(Debug)]
pub struct ServingCert {
    pub cert_der: CertificateDer<'static>,
    pub cert_pem: String,
    pub key_pkcs8_der: Vec<u8>,
    pub key_pem: String,
}

impl Authority {
    /// A new self-signed CA (ECDSA P-256) that may sign leaves only.
    pub fn generate(common_name: &str, validity: Validity) -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.not_before = validity.not_before;
        params.not_after = validity.not_after;
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Authority {
            cert_pem: cert.pem(),
            not_after: params.not_after,
            issuer: Issuer::new(params, key),
        })
    }

    /// An existing CA, from its PEM certificate and PEM private key, so that
    /// a renewed serving certificate keeps the same CA (and the webhook's
    /// `caBundle` does not change).
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, CertGenError> {
        let key = KeyPair::from_pem(key_pem)?;
        let der = pem_certificate(cert_pem)?;
        let (_, cert) =
            x509_parser::parse_x509_certificate(&der).map_err(|e| CertGenError::Parse(e.into()))?;
        if !cert.is_ca() {
            return Err(CertGenError::NotCa);
        }
        if cert.public_key().raw != key.subject_public_key_info().as_slice() {
            return Err(CertGenError::KeyMismatch);
        }
        let not_after = OffsetDateTime::from_unix_timestamp(cert.validity().not_after.timestamp())
            .map_err(|e| CertGenError::Parse(e.into()))?;
        let issuer = Issuer::from_ca_cert_der(&CertificateDer::from(der.clone()), key)?;
        Ok(Authority {
            issuer,
            cert_pem: cert_pem.to_owned(),
            not_after,
        })
    }

    /// The CA certificate: what the webhook's `caBundle` carries (base64).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// When the CA certificate expires.
    pub fn not_after(&self) -> OffsetDateTime {
        self.not_after
    }

    /// The CA's private key, PEM (PKCS#8).
    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// A serving certificate for `names` (DNS names or IP addresses), server
    /// authentication only, with a fresh ECDSA P-256 key.
    pub fn issue_serving(
        &self,
        common_name: &str,
        names: &[String],
        validity: Validity,
    ) -> Result<ServingCert, rcgen::Error> {
        let mut params = CertificateParams::new(names.to_vec())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.use_authority_key_identifier_extension = true;
        params.not_before = validity.not_before;
        params.not_after = validity.not_after;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(ServingCert {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            key_pkcs8_der: key.serialize_der(),
            key_pem: key.serialize_pem(),
        })
    }
}

fn pem_certificate(cert_pem: &str) -> Result<Vec<u8>, CertGenError> {
    use rustls_pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(cert_pem.as_bytes())
        .map(|der| der.to_vec())
        .map_err(|e| CertGenError::Parse(e.into()))
}

/// The names clients use for a Service: the API server calls a webhook at
/// `<service>.<namespace>.svc`; the others cover in-cluster clients.
pub fn service_dns_names(service: &str, namespace: &str) -> Result<Vec<String>, CertGenError> {
    check_label("service name", service)?;
    check_label("namespace", namespace)?;
    Ok(vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ])
}

/// Service names and namespaces are RFC 1123 labels.
fn check_label(what: &'static str, value: &str) -> Result<(), CertGenError> {
    let bytes = value.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-';
    if ok {
        Ok(())
    } else {
        Err(CertGenError::BadLabel {
            what,
            value: value.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests;
