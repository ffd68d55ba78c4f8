//! A real TLS handshake with the webhook, where `check` runs, trusting
//! only the caBundle and verifying the host the API server dials: what
//! the API server's own handshake would find. Where the webhook cannot be
//! reached from here (a Service name outside the cluster), the line says
//! so; the end-to-end line tests the API server's own path.

use super::report::Line;
use super::webhook::Target;
use crate::certs::provider;
use rustls::{CertificateError, ClientConfig, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

const ID: &str = "webhook.handshake";

/// Why a handshake did not complete.
enum Outcome {
    Done(String),
    Unreachable(String),
    Refused(String),
}

/// The handshake the API server makes (TLS 1.2 or 1.3, the newest both
/// offer), then, once it succeeded, one offering TLS 1.2 alone: what the
/// server negotiates with each (`--tls-min-version`, `--tls-cipher-suites`).
async fn handshake(
    bundle: &[CertificateDer<'static>],
    target: &Target,
    within: Duration,
) -> Outcome {
    let newest = handshake_with(bundle, target, within, rustls::DEFAULT_VERSIONS).await;
    let Outcome::Done(newest) = newest else {
        return newest;
    };
    let tls12 = handshake_with(bundle, target, within, &[&rustls::version::TLS12]).await;
    match tls12 {
        Outcome::Done(how) => Outcome::Done(format!("{newest}; offered TLS 1.2 alone: {how}")),
        Outcome::Refused(why) | Outcome::Unreachable(why) => {
            Outcome::Done(format!("{newest}; offered TLS 1.2 alone: refused ({why})"))
        }
    }
}

async fn handshake_with(
    bundle: &[CertificateDer<'static>],
    target: &Target,
    within: Duration,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Outcome {
    let mut roots = RootCertStore::empty();
    for ca in bundle {
        let _ = roots.add(ca.clone());
    }
    let config =
        match ClientConfig::builder_with_provider(provider()).with_protocol_versions(versions) {
            Ok(b) => b.with_root_certificates(roots).with_no_client_auth(),
            Err(e) => return Outcome::Refused(e.to_string()),
        };
    let mut config = config;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let host = target.host();
    let Ok(name) = ServerName::try_from(host.clone()) else {
        return Outcome::Refused(format!("{host:?} is not a host name"));
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let address = match target.host().parse::<std::net::IpAddr>() {
        Ok(ip) => std::net::SocketAddr::new(ip, target.port()).to_string(),
        Err(_) => format!("{host}:{}", target.port()),
    };
    let tcp = match tokio::time::timeout(within, TcpStream::connect(&address)).await {
        Err(_) => {
            return Outcome::Unreachable(format!("no connection to {address} within {within:?}"))
        }
        Ok(Err(e)) => return Outcome::Unreachable(format!("{address}: {e}")),
        Ok(Ok(tcp)) => tcp,
    };
    match tokio::time::timeout(within, connector.connect(name, tcp)).await {
        Err(_) => Outcome::Refused(format!("{address}: no TLS handshake within {within:?}")),
        Ok(Ok(stream)) => {
            let (_, session) = stream.get_ref();
            let version = session
                .protocol_version()
                .map(|v| format!("{v:?}"))
                .unwrap_or_default();
            let alpn = session
                .alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .unwrap_or_else(|| "no ALPN".into());
            let suite = (session.negotiated_cipher_suite())
                .map(|s| format!("{:?}", s.suite()))
                .unwrap_or_default();
            Outcome::Done(format!("{version}, {suite}, {alpn}"))
        }
        Ok(Err(e)) => Outcome::Refused(describe(&e)),
    }
}

/// The handshake error in the words the API server's log uses for it.
fn describe(e: &std::io::Error) -> String {
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match inner {
        Some(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer | CertificateError::BadSignature)) => {
            "the certificate it serves is not signed by a CA of the caBundle (x509: certificate signed by unknown authority)".into()
        }
        Some(rustls::Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) => {
            "the certificate it serves does not name the host (x509: certificate is valid for …)".into()
        }
        Some(rustls::Error::InvalidCertificate(CertificateError::Expired | CertificateError::ExpiredContext { .. })) => {
            "the certificate it serves has expired (x509: certificate has expired)".into()
        }
        Some(other) => other.to_string(),
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => "the server closed the connection during the handshake (EOF)".into(),
        None => e.to_string(),
    }
}

/// The handshake line for `target`.
pub(super) async fn handshake_line(
    bundle: &[CertificateDer<'static>],
    target: &Target,
    within: Duration,
) -> Line {
    match handshake(bundle, target, within).await {
        Outcome::Done(how) => Line::pass(
            ID,
            format!("a TLS handshake with the {target} verified its certificate against the caBundle for {} ({how})", target.host()),
        ),
        Outcome::Unreachable(why) => Line::warn(
            ID,
            format!("the {target} is not reachable from where check runs ({why}); the endToEnd line shows whether the API server reaches it"),
            "run check inside the cluster (helm test does) to test the handshake itself",
        ),
        Outcome::Refused(why) => Line::fail(
            ID,
            format!("the TLS handshake with the {target} failed: {why}"),
            "the caBundle must hold the CA that signed the certificate the pods serve, issued for the host above (kubectl -n <namespace> get secret of the Deployment's serving-cert volume)",
        ),
    }
}
