//! The TLS policy users set on KServe's own webhook (controller-runtime's
//! `TLSOpts`) and on Kubernetes' servers (`--tls-min-version`,
//! `--tls-cipher-suites`): the lowest version served and the TLS 1.2 cipher
//! suites offered, by the IANA names Kubernetes takes. As in Go's TLS,
//! which Kubernetes and controller-runtime use, TLS 1.3's suites are not
//! configurable: a 1.3 name in the list is accepted and changes nothing.
//! A name that is unknown, or that the crypto provider (ring) does not
//! offer, is refused at start.

use rustls::crypto::CryptoProvider;
use rustls::{SupportedCipherSuite, SupportedProtocolVersion};
use std::sync::Arc;

/// `--tls-min-version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMinVersion {
    Tls12,
    Tls13,
}

impl TlsMinVersion {
    /// The names `--tls-min-version` accepts: ours, then Kubernetes'.
    pub(crate) const NAMES: [&str; 4] = ["1.2", "1.3", "VersionTLS12", "VersionTLS13"];
}

/// A `--tls-min-version` that is neither 1.2 nor 1.3.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown TLS version {0:?} (1.2 or 1.3; Kubernetes' VersionTLS12 and VersionTLS13 too)")]
pub struct UnknownTlsVersion(pub String);

impl std::str::FromStr for TlsMinVersion {
    type Err = UnknownTlsVersion;
    fn from_str(name: &str) -> Result<Self, UnknownTlsVersion> {
        match name {
            "1.2" | "VersionTLS12" => Ok(Self::Tls12),
            "1.3" | "VersionTLS13" => Ok(Self::Tls13),
            _ => Err(UnknownTlsVersion(name.to_string())),
        }
    }
}

/// Why the TLS policy flags cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsPolicyError {
    #[error("--tls-cipher-suites: unknown cipher suite {0:?} (Kubernetes' IANA names, such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)")]
    Unknown(String),
    #[error("--tls-cipher-suites: {name} is not offered by the crypto provider (ring), which offers for TLS 1.2: {offered}")]
    NotOffered { name: String, offered: String },
    #[error("--tls-cipher-suites names no TLS 1.2 suite, but --tls-min-version 1.2 serves TLS 1.2: name one, or set --tls-min-version 1.3")]
    NoTls12Suite,
}

/// Every name Kubernetes' `--tls-cipher-suites` takes (Go's secure and
/// insecure suites and Kubernetes' two aliases), with the IANA name of the
/// suite each stands for.
const KUBERNETES_NAMES: [(&str, &str); 27] = [
    ("TLS_AES_128_GCM_SHA256", "TLS13_AES_128_GCM_SHA256"),
    ("TLS_AES_256_GCM_SHA384", "TLS13_AES_256_GCM_SHA384"),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS13_CHACHA20_POLY1305_SHA256",
    ),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", ""),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", ""),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", ""),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", ""),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", ""),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", ""),
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", ""),
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", ""),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", ""),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", ""),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
    ("TLS_RSA_WITH_RC4_128_SHA", ""),
    ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", ""),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", ""),
    ("TLS_RSA_WITH_AES_256_CBC_SHA", ""),
    ("TLS_RSA_WITH_AES_128_CBC_SHA256", ""),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", ""),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", ""),
    ("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", ""),
    ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", ""),
    ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", ""),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", ""),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", ""),
];

/// What the server negotiates with: the provider holding the suites
/// offered, and the versions served.
#[derive(Debug, Clone)]
pub(crate) struct TlsPolicy {
    pub provider: Arc<CryptoProvider>,
    pub versions: Vec<&'static SupportedProtocolVersion>,
}

fn is_tls13(suite: &SupportedCipherSuite) -> bool {
    matches!(suite, SupportedCipherSuite::Tls13(_))
}

fn name(suite: &SupportedCipherSuite) -> &'static str {
    suite.suite().as_str().unwrap_or("unnamed")
}

/// The policy `min` and `suites` (empty: the provider's own) make of
/// `provider`'s suites.
pub(crate) fn policy(
    provider: &CryptoProvider,
    min: TlsMinVersion,
    suites: &[String],
) -> Result<TlsPolicy, TlsPolicyError> {
    let versions = match min {
        TlsMinVersion::Tls12 => vec![&rustls::version::TLS13, &rustls::version::TLS12],
        TlsMinVersion::Tls13 => vec![&rustls::version::TLS13],
    };
    let mut provider = provider.clone();
    if !suites.is_empty() {
        let offered: Vec<&str> = (provider.cipher_suites.iter())
            .filter(|s| !is_tls13(s))
            .map(name)
            .collect();
        let mut kept: Vec<SupportedCipherSuite> = Vec::new();
        for asked in suites {
            let asked = asked.trim();
            let (_, iana) = KUBERNETES_NAMES
                .iter()
                .find(|(k8s, _)| *k8s == asked)
                .ok_or_else(|| TlsPolicyError::Unknown(asked.to_string()))?;
            let iana = if iana.is_empty() { asked } else { iana };
            if iana.starts_with("TLS13_") {
                continue;
            }
            let suite = (provider.cipher_suites.iter())
                .find(|s| name(s) == iana)
                .ok_or_else(|| TlsPolicyError::NotOffered {
                    name: asked.to_string(),
                    offered: offered.join(", "),
                })?;
            if !kept.iter().any(|k| k.suite() == suite.suite()) {
                kept.push(*suite);
            }
        }
        if kept.is_empty() && min == TlsMinVersion::Tls12 {
            return Err(TlsPolicyError::NoTls12Suite);
        }
        // TLS 1.3's suites first, as the provider orders them.
        let tls13 = provider
            .cipher_suites
            .iter()
            .filter(|s| is_tls13(s))
            .copied();
        provider.cipher_suites = tls13.chain(kept).collect();
    }
    Ok(TlsPolicy {
        provider: Arc::new(provider),
        versions,
    })
}

#[cfg(test)]
mod tests;
