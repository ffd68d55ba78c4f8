//! The rustls `ServerConfig` in use, rebuilt whole when the serving pair or
//! the client CA is reloaded: a handshake takes the config current when it
//! starts, established connections keep what they negotiated.

use crate::certs::{ServingPair, Verifier};
use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::sign::SingleCertAndKey;
use rustls::ServerConfig;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tracing::error;

/// The current parts and the config built from them.
pub(crate) struct Tls {
    provider: Arc<CryptoProvider>,
    parts: Mutex<(ServingPair, Option<Verifier>)>,
    /// Shared with `/readyz` (see [`Tls::not_after_cell`]).
    not_after: Arc<AtomicI64>,
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
            not_after: Arc::new(AtomicI64::new(pair.not_after)),
            parts: Mutex::new((pair, client_ca)),
            config: ArcSwap::from_pointee(config),
        })
    }

    /// Serving certificate's notAfter, Unix seconds, kept current across
    /// reloads: what `/readyz` reads.
    pub(crate) fn not_after_cell(&self) -> Arc<AtomicI64> {
        self.not_after.clone()
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
