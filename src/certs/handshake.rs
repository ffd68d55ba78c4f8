//! The last check before a TLS configuration serves: real handshakes
//! against it, in memory, one per protocol version it offers, by a client
//! that parses every certificate the server sends and verifies the
//! server's handshake signature with the provider's algorithms. Whatever
//! the file checks missed (a key that signs in a way the certificate's key
//! cannot verify, a certificate a client cannot parse, a configuration
//! that cannot complete a handshake) fails here, before the swap, instead
//! of in every handshake after it. No name and no trust anchor are checked:
//! those are the API server's (`caBundle`), which this process cannot know.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, ClientConfig, ClientConnection, Connection};
use rustls::{DigitallySignedStruct, ServerConfig, ServerConnection, SignatureScheme};
use rustls::{Error as TlsError, SupportedProtocolVersion};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Why the new configuration cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("cannot set up the {version} probe client: {source}")]
    Client {
        version: &'static str,
        source: TlsError,
    },
    #[error("a {version} handshake against the new TLS configuration failed ({})", describe(.server, .client))]
    Failed {
        version: &'static str,
        server: Option<Box<TlsError>>,
        client: Option<Box<TlsError>>,
    },
}

fn describe(server: &Option<Box<TlsError>>, client: &Option<Box<TlsError>>) -> String {
    match (server, client) {
        (Some(s), Some(c)) => format!("server: {s}; client: {c}"),
        (Some(s), None) => format!("server: {s}"),
        (None, Some(c)) => format!("client: {c}"),
        (None, None) => "it stopped before completing".into(),
    }
}

/// Round trips a handshake needs, with room; a config that needs more is
/// stuck, not slow.
const MAX_FLIGHTS: usize = 16;

/// Proves `config` with a handshake in each of `versions`.
///
/// With `client_auth_required` the probe client has no certificate to
/// show: one the client CA signed needs that CA's key, which the server
/// never holds, and probing a copy of the configuration without client
/// auth would prove a configuration that is never served. So the probe
/// runs against the very configuration that will serve, and counts as
/// proven when the client has parsed the server's certificates and
/// verified its handshake signature, and the server's one objection is the
/// missing client certificate. Everything the server sends comes before
/// that objection, in both versions.
pub(crate) fn prove(
    config: &Arc<ServerConfig>,
    provider: &Arc<CryptoProvider>,
    versions: &[&'static SupportedProtocolVersion],
    client_auth_required: bool,
) -> Result<(), HandshakeError> {
    for version in versions {
        let name = match version.version {
            rustls::ProtocolVersion::TLSv1_2 => "TLS 1.2",
            _ => "TLS 1.3",
        };
        prove_version(config, provider, version, name, client_auth_required)?;
    }
    Ok(())
}

fn prove_version(
    config: &Arc<ServerConfig>,
    provider: &Arc<CryptoProvider>,
    version: &'static SupportedProtocolVersion,
    name: &'static str,
    client_auth_required: bool,
) -> Result<(), HandshakeError> {
    let setup = |source| HandshakeError::Client {
        version: name,
        source,
    };
    let verifier = Arc::new(Probe::new(provider.signature_verification_algorithms));
    let client_config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[version])
        .map_err(setup)?
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    let server_name = ServerName::try_from("kserve-injector.probe")
        .map_err(|e| setup(TlsError::General(e.to_string())))?;
    let client = ClientConnection::new(Arc::new(client_config), server_name).map_err(setup)?;
    let server = ServerConnection::new(config.clone()).map_err(setup)?;
    let (mut client, mut server) = (Connection::from(client), Connection::from(server));
    let (mut server_error, mut client_error) = (None, None);
    for _ in 0..MAX_FLIGHTS {
        let sent = transfer(&mut client, &mut server, &mut server_error);
        let answered = transfer(&mut server, &mut client, &mut client_error);
        if !sent && !answered {
            break;
        }
    }
    let server_saw =
        verifier.parsed.load(Ordering::Relaxed) && verifier.signed.load(Ordering::Relaxed);
    let completed = !client.is_handshaking() && !server.is_handshaking();
    let clean = server_error.is_none() && client_error.is_none();
    let only_missing_client_cert =
        client_auth_required && matches!(server_error, Some(TlsError::NoCertificatesPresented));
    let (server_error, client_error) = (server_error.map(Box::new), client_error.map(Box::new));
    if server_saw && ((clean && completed) || only_missing_client_cert) {
        return Ok(());
    }
    Err(HandshakeError::Failed {
        version: name,
        server: server_error,
        client: client_error,
    })
}

/// Moves what `from` has to send into `to`; false when it had nothing.
/// The first error `to` reports is kept in `to_error`; its alert still
/// goes back the other way.
fn transfer(from: &mut Connection, to: &mut Connection, to_error: &mut Option<TlsError>) -> bool {
    let mut bytes = Vec::new();
    while from.wants_write() {
        match from.write_tls(&mut bytes) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let mut rest = bytes.as_slice();
    while !rest.is_empty() && to_error.is_none() {
        match to.read_tls(&mut rest) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if let Err(e) = to.process_new_packets() {
            *to_error = Some(e);
        }
    }
    !bytes.is_empty()
}

/// The probe client's verifier: parses, and verifies signatures, and
/// records that it did.
#[derive(Debug)]
struct Probe {
    algorithms: WebPkiSupportedAlgorithms,
    parsed: AtomicBool,
    signed: AtomicBool,
}

impl Probe {
    fn new(algorithms: WebPkiSupportedAlgorithms) -> Self {
        Self {
            algorithms,
            parsed: AtomicBool::new(false),
            signed: AtomicBool::new(false),
        }
    }
}

impl ServerCertVerifier for Probe {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        // The leaf as rustls's (webpki's) clients parse it; every other
        // certificate as a whole X.509 structure, as any client may need it
        // to build its path (webpki alone would refuse a version 1 root
        // that other clients accept).
        ParsedCertificate::try_from(end_entity)?;
        for cert in std::iter::once(end_entity).chain(intermediates) {
            match x509_parser::parse_x509_certificate(cert) {
                Ok(([], _)) => {}
                _ => return Err(CertificateError::BadEncoding.into()),
            }
        }
        self.parsed.store(true, Ordering::Relaxed);
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        let valid = verify_tls12_signature(message, cert, dss, &self.algorithms)?;
        self.signed.store(true, Ordering::Relaxed);
        Ok(valid)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        let valid = verify_tls13_signature(message, cert, dss, &self.algorithms)?;
        self.signed.store(true, Ordering::Relaxed);
        Ok(valid)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests;
