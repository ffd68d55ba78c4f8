//! A serving chain checked the way a client walks it, before it serves:
//! where certificate N names certificate N+1's subject as its issuer, N+1's
//! key must have signed N. A chain assembled from a CA regenerated under
//! the same name (its old certificate left in `tls.crt`) parses, loads and
//! fails every client; this catches it on load. A next certificate that is
//! not named as the issuer is left alone: clients pick the certificates
//! they need from what was sent, so an unrelated extra one costs nothing.

use rustls_pki_types::CertificateDer;
use x509_parser::certificate::X509Certificate;
use x509_parser::error::X509Error;

/// Why certificate `issued` (1-based) does not verify with the key of the
/// certificate after it.
#[derive(Debug, thiserror::Error)]
#[error("certificate {issued} names certificate {issuer}'s subject ({name}) as its issuer, but its signature does not verify with that certificate's key: {source}")]
pub struct ChainError {
    pub issued: usize,
    pub issuer: usize,
    pub name: String,
    pub source: X509Error,
}

/// Checks the signature of every certificate whose issuer is the next one.
/// The certificates have been parsed already (see `pem`); one that does
/// not parse here is left to that check's error.
pub(super) fn check_signatures(chain: &[CertificateDer<'_>]) -> Result<(), ChainError> {
    let parsed: Vec<X509Certificate<'_>> = chain
        .iter()
        .filter_map(|der| x509_parser::parse_x509_certificate(der).ok())
        .map(|(_, cert)| cert)
        .collect();
    for (n, pair) in parsed.windows(2).enumerate() {
        let (issued, issuer) = (&pair[0], &pair[1]);
        if issued.issuer().as_raw() != issuer.subject().as_raw() {
            continue;
        }
        issued
            .verify_signature(Some(issuer.public_key()))
            .map_err(|source| ChainError {
                issued: n + 1,
                issuer: n + 2,
                name: issuer.subject().to_string(),
                source,
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::{Authority, Validity};

    fn der(pem: &str) -> CertificateDer<'static> {
        crate::certs::pem::certificates(pem.as_bytes()).unwrap()[0].clone()
    }

    #[test]
    fn a_same_named_ca_that_did_not_sign_the_leaf_is_refused() {
        let validity = Validity::from(time::OffsetDateTime::now_utc(), 1);
        let ca = Authority::generate("chain test CA", validity).unwrap();
        let impostor = Authority::generate("chain test CA", validity).unwrap();
        let other = Authority::generate("another CA", validity).unwrap();
        let leaf = ca
            .issue_serving("leaf", &["localhost".into()], validity)
            .unwrap();
        let leaf = leaf.cert_der;
        check_signatures(&[leaf.clone(), der(ca.cert_pem())]).unwrap();
        // Not named as the issuer: not checked.
        check_signatures(&[leaf.clone(), der(other.cert_pem())]).unwrap();
        let err = check_signatures(&[leaf, der(impostor.cert_pem())]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "certificate 1 names certificate 2's subject (CN=chain test CA) as its issuer, \
             but its signature does not verify with that certificate's key: \
             signature verification error"
        );
    }
}
