//! What `check` concludes about the webhook's certificates: whether the
//! caBundle verifies the serving certificate the pods mount, whether its
//! names cover the host the API server dials, and how long it has left.
//! Pure: the PEM bytes and the time come from the caller. The chain is
//! verified by rustls' WebPKI verifier, as a TLS client verifies it.

use super::report::Line;
use crate::certs::{certificates, provider};
use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::{CertificateError, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use std::net::IpAddr;
use std::sync::Arc;
use x509_parser::extensions::GeneralName;

/// Below this many days left, a warning (the alert's default warning).
pub(super) const WARNING_DAYS: i64 = 7;

/// The caBundle's certificates, or the failing line.
pub(super) fn bundle(ca_bundle: Option<&[u8]>) -> Result<Vec<CertificateDer<'static>>, Line> {
    const ID: &str = "webhook.caBundle";
    let fix = "the caBundle comes from cert-manager's CA injector (the cert-manager.io/inject-ca-from annotation and its Certificate), the chart (self-signed or provided certificates) or the static-certs overlay: check whichever fills it";
    match ca_bundle {
        None | Some([]) => Err(Line::fail(ID, "the entry has no caBundle: the API server cannot verify the webhook's certificate (x509: certificate signed by unknown authority)", fix)),
        Some(bytes) => certificates(bytes)
            .map_err(|e| Line::fail(ID, format!("the caBundle is not PEM certificates: {e}"), fix)),
    }
}

/// Why the caBundle does not verify the serving chain.
#[derive(Debug, thiserror::Error)]
pub(super) enum NotVerified {
    #[error("the Secret holds no certificate")]
    NoCertificate,
    #[error("a caBundle certificate is not a CA")]
    NotCa(#[source] rustls::Error),
    #[error("no verifier could be built from the caBundle")]
    Verifier(#[source] rustls::client::VerifierBuilderError),
    #[error(
        "it is not signed by a CA of the caBundle (x509: certificate signed by unknown authority)"
    )]
    UnknownIssuer,
    #[error("the caBundle's CA of the same name did not sign it, as when a CA is made again under its name (x509: certificate signed by unknown authority)")]
    BadSignature,
    #[error("it does not verify")]
    Other(#[source] rustls::Error),
}

/// Whether `bundle` verifies `chain` (leaf first), as a TLS client would.
/// `now` outside the leaf's validity is replaced by a moment inside it: the
/// lifetime has its own line.
pub(super) fn verifies(
    bundle: &[CertificateDer<'static>],
    chain: &[CertificateDer<'static>],
    host: &str,
    now: UnixTime,
) -> Result<(), NotVerified> {
    let (leaf, intermediates) = chain.split_first().ok_or(NotVerified::NoCertificate)?;
    let mut roots = RootCertStore::empty();
    for ca in bundle {
        roots.add(ca.clone()).map_err(NotVerified::NotCa)?;
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(NotVerified::Verifier)?;
    let at = match validity(leaf) {
        Some((from, to)) if !(from..=to).contains(&now.as_secs()) => UnixTime::since_unix_epoch(
            std::time::Duration::from_secs(from + (to.saturating_sub(from)) / 2),
        ),
        _ => now,
    };
    // Any name: a name that does not match is the names line's to report.
    let name = ServerName::try_from(host.to_string())
        .unwrap_or_else(|_| ServerName::try_from("kserve-injector.invalid").expect("a DNS name"));
    match verifier.verify_server_cert(leaf, intermediates, &name, &[], at) {
        Ok(_) => Ok(()),
        Err(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        )) => Ok(()),
        Err(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)) => {
            Err(NotVerified::UnknownIssuer)
        }
        Err(rustls::Error::InvalidCertificate(CertificateError::BadSignature)) => {
            Err(NotVerified::BadSignature)
        }
        Err(e) => Err(NotVerified::Other(e)),
    }
}

/// The caBundle line for the serving chain the Deployment mounts, read
/// from `secret` (`namespace/name`).
pub(super) fn ca_bundle_line(
    bundle: &[CertificateDer<'static>],
    chain: &[CertificateDer<'static>],
    secret: &str,
    host: &str,
    now: UnixTime,
) -> Line {
    const ID: &str = "webhook.caBundle";
    match verifies(bundle, chain, host, now) {
        Ok(()) => Line::pass(
            ID,
            format!("verifies the serving certificate of Secret {secret} ({} CA certificate{})", bundle.len(), if bundle.len() == 1 { "" } else { "s" }),
        ),
        Err(why) => Line::fail(
            ID,
            format!("does not verify the serving certificate of Secret {secret}: {}", crate::log_text::causes(&why)),
            "put the CA that signed the Secret's tls.crt into the caBundle (cert-manager: the CA Certificate named by cert-manager.io/inject-ca-from; static certificates: ca.crt of the same `kserve-injector certs` run)",
        ),
    }
}

/// Whether the leaf's subjectAltNames cover `host`, as Go's
/// crypto/x509 VerifyHostname matches (exact names, a wildcard for the
/// leftmost label, IP addresses only as IP SANs).
pub(super) fn names_line(chain: &[CertificateDer<'static>], host: &str, target: &str) -> Line {
    const ID: &str = "certificate.names";
    let names = san_names(chain.first());
    let covered = match host.parse::<IpAddr>() {
        Ok(ip) => names.iter().any(|n| n.parse::<IpAddr>().ok() == Some(ip)),
        Err(_) => names.iter().any(|n| dns_matches(n, host)),
    };
    if covered {
        Line::pass(
            ID,
            format!("cover {host}, which the API server dials for the {target}"),
        )
    } else {
        Line::fail(
            ID,
            format!("{names:?} do not cover {host}, which the API server dials for the {target} (x509: certificate is valid for …, not {host})"),
            format!("issue the serving certificate for {host} (kserve-injector certs --service/--namespace; cert-manager: the Certificate's dnsNames)"),
        )
    }
}

fn dns_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.trim_end_matches('.').to_ascii_lowercase();
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(rest) => host
            .split_once('.')
            .is_some_and(|(first, tail)| !first.is_empty() && tail == rest),
        None => pattern == host,
    }
}

/// The DNS names and IP addresses of the leaf's subjectAltName.
pub(super) fn san_names(leaf: Option<&CertificateDer<'static>>) -> Vec<String> {
    let Some(parsed) = leaf.and_then(|d| x509_parser::parse_x509_certificate(d).ok()) else {
        return Vec::new();
    };
    let Ok(Some(san)) = parsed.1.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some(d.to_string()),
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => Some(IpAddr::from(<[u8; 4]>::try_from(*bytes).ok()?).to_string()),
                16 => Some(IpAddr::from(<[u8; 16]>::try_from(*bytes).ok()?).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// notBefore and notAfter, Unix seconds (0 for a time before 1970).
fn validity(leaf: &CertificateDer<'_>) -> Option<(u64, u64)> {
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).ok()?;
    let secs = |t: i64| u64::try_from(t).unwrap_or(0);
    Some((
        secs(cert.validity().not_before.timestamp()),
        secs(cert.validity().not_after.timestamp()),
    ))
}

/// The serving certificate's remaining lifetime at `now`.
pub(super) fn lifetime_line(chain: &[CertificateDer<'static>], now: UnixTime) -> Line {
    const ID: &str = "certificate.lifetime";
    let Some((from, to)) = chain.first().and_then(validity) else {
        return Line::fail(
            ID,
            "the serving certificate does not parse",
            "replace the Secret's tls.crt",
        );
    };
    let now = now.as_secs();
    let date = |t: u64| {
        time::OffsetDateTime::from_unix_timestamp(i64::try_from(t).unwrap_or(i64::MAX))
            .map(|d| d.date().to_string())
            .unwrap_or_default()
    };
    let renew = "renew it: cert-manager renews by itself (kubectl describe certificate says why not), the chart's self-signed mode on `helm upgrade`, static certificates with `kserve-injector certs` again";
    if now < from {
        return Line::fail(ID, format!("not valid before {} (a clock ahead of the API server's, or a certificate dated ahead)", date(from)), "check the issuer's clock");
    }
    if now > to {
        return Line::fail(
            ID,
            format!(
                "expired on {}: serve refuses it and /readyz fails, so no replica is ready",
                date(to)
            ),
            renew,
        );
    }
    let days = i64::try_from((to - now) / 86_400).unwrap_or(i64::MAX);
    if days < WARNING_DAYS {
        Line::warn(ID, format!("expires in {days} days ({})", date(to)), renew)
    } else {
        Line::pass(ID, format!("expires in {days} days ({})", date(to)))
    }
}
