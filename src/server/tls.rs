//! The rustls `ServerConfig` in use, rebuilt whole when the serving pair or
//! the client CA is reloaded: a handshake takes the config current when it
//! starts, established connections keep what they negotiated. A config is
//! proven by in-process handshakes before it is used, at startup and on
//! every reload; one that fails leaves the previous one serving.

pub(crate) mod policy;

use crate::certs::{HandshakeError, ServingPair, Verifier};
use arc_swap::ArcSwap;
use policy::TlsPolicy;
use rustls::crypto::CryptoProvider;
use rustls::sign::SingleCertAndKey;
use rustls::{ServerConfig, SupportedProtocolVersion};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Why a TLS configuration was not put in use.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    #[error("cannot build the TLS configuration: {0}")]
    Build(#[from] rustls::Error),
    #[error("{0}; the certificate is not served")]
    Handshake(#[from] HandshakeError),
}

/// The current parts and the config built from them.
pub(crate) struct Tls {
    provider: Arc<CryptoProvider>,
    /// The versions served (`--tls-min-version`).
    versions: Vec<&'static SupportedProtocolVersion>,
    parts: Mutex<(ServingPair, Option<Verifier>)>,
    /// Shared with `/readyz` (see [`Tls::not_after_cell`]): the notAfter of
    /// the pair serving, which only a proven pair replaces.
    not_after: Arc<AtomicI64>,
    pub config: ArcSwap<ServerConfig>,
}

/// TLS 1.2 (unless `--tls-min-version 1.3`) and 1.3 only, with the
/// provider's suites `--tls-cipher-suites` left; ALPN offers h2 first
/// because the API server speaks HTTP/2 when it can. Returned only once
/// handshakes against it, in every version served, have succeeded.
fn build(
    provider: &Arc<CryptoProvider>,
    versions: &[&'static SupportedProtocolVersion],
    pair: &ServingPair,
    client_ca: Option<&Verifier>,
) -> Result<Arc<ServerConfig>, TlsConfigError> {
    let builder =
        ServerConfig::builder_with_provider(provider.clone()).with_protocol_versions(versions)?;
    let builder = match client_ca {
        Some(verifier) => builder.with_client_cert_verifier(verifier.clone()),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(SingleCertAndKey::from(pair.key.clone())));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let config = Arc::new(config);
    let client_auth_required = client_ca.is_some_and(|v| v.client_auth_mandatory());
    crate::certs::prove_handshake(&config, provider, versions, client_auth_required)?;
    Ok(config)
}

impl Tls {
    pub(crate) fn new(
        policy: TlsPolicy,
        pair: ServingPair,
        client_ca: Option<Verifier>,
    ) -> Result<Self, TlsConfigError> {
        let TlsPolicy { provider, versions } = policy;
        let config = build(&provider, &versions, &pair, client_ca.as_ref())?;
        Ok(Self {
            provider,
            versions,
            not_after: Arc::new(AtomicI64::new(pair.not_after)),
            parts: Mutex::new((pair, client_ca)),
            config: ArcSwap::new(config),
        })
    }

    /// Serving certificate's notAfter, Unix seconds, kept current across
    /// reloads: what `/readyz` reads.
    pub(crate) fn not_after_cell(&self) -> Arc<AtomicI64> {
        self.not_after.clone()
    }

    pub(crate) fn set_pair(&self, pair: ServingPair) -> Result<(), TlsConfigError> {
        self.update(|parts| parts.0 = pair)
    }

    pub(crate) fn set_client_ca(&self, verifier: Verifier) -> Result<(), TlsConfigError> {
        self.update(|parts| parts.1 = Some(verifier))
    }

    /// Builds and proves a config from the current parts changed by
    /// `change`, and puts both in use only if it is proven. The lock is
    /// held throughout, so the serving pair's and the client CA's reloads
    /// never build from each other's stale parts.
    fn update(
        &self,
        change: impl FnOnce(&mut (ServingPair, Option<Verifier>)),
    ) -> Result<(), TlsConfigError> {
        let mut parts = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = parts.clone();
        change(&mut next);
        let config = build(&self.provider, &self.versions, &next.0, next.1.as_ref())?;
        self.config.store(config);
        self.not_after.store(next.0.not_after, Ordering::Relaxed);
        *parts = next;
        Ok(())
    }
}
