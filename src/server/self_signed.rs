//! `serve --self-signed`: a throwaway CA and a serving certificate made in
//! memory, so trying the webhook locally needs no cert-manager and no files
//! besides the CA that `curl --cacert` reads.

use super::error::{CertError, ServeError};
use super::tls::ServingPair;
use crate::certs::{Authority, Validity};
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::path::PathBuf;
use std::sync::Arc;
use time::OffsetDateTime;
use tracing::info;

#[derive(Debug)]
pub(crate) struct SelfSigned {
    pub pair: ServingPair,
    pub ca_pem: String,
    pub names: Vec<String>,
}

/// Always valid for localhost and the loopback addresses; `extra` adds names
/// such as a Service's DNS name for an in-cluster try-out.
pub(crate) fn generate(
    extra: &[String],
    provider: &CryptoProvider,
) -> Result<SelfSigned, CertError> {
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
        CertError::Pair {
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

/// Writes the CA where `curl --cacert` will read it: to a temporary file in
/// the same directory, then renamed over the target, so a reader never sees
/// half a file. Called only once both ports are bound, so an instance that
/// fails to start never replaces a running one's CA.
pub(crate) fn write_ca(path: PathBuf, pem: &str) -> Result<PathBuf, ServeError> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, pem)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .inspect_err(|_| drop(std::fs::remove_file(&tmp)))
        .map_err(|source| ServeError::Write {
            path: path.clone(),
            source,
        })?;
    info!(ca_file = %path.display(), "trust the self-signed certificate with: curl --cacert {}", path.display());
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leaf_chains_to_the_printed_ca() -> Result<(), Box<dyn std::error::Error>> {
        let provider = super::super::tls::provider();
        let made = generate(&["webhook.kserve.svc".into()], &provider)?;
        assert!(made.names.iter().any(|n| n == "webhook.kserve.svc"));
        let ca = rustls_pki_types::CertificateDer::from_pem_slice(made.ca_pem.as_bytes())?;
        let mut roots = rustls::RootCertStore::empty();
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
    use rustls_pki_types::pem::PemObject;
}
