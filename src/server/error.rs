use std::net::SocketAddr;
use std::path::PathBuf;

/// Why `serve` could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("invalid flags: {0}")]
    Args(#[from] super::args::InvalidFlags),
    /// The serving certificate is missing where it is looked for by
    /// default, which is most often a missing mount or flag.
    #[error("invalid flags: {source} (mount the serving certificate Secret at {cert_dir}, point --cert-dir at it, or try --self-signed)")]
    NoServingCert {
        cert_dir: PathBuf,
        source: Box<crate::certs::ServingCertError>,
    },
    #[error(transparent)]
    Config(#[from] crate::files::LoadError),
    #[error(transparent)]
    Cert(#[from] crate::certs::ServingCertError),
    #[error(transparent)]
    Tls(#[from] super::tls::TlsConfigError),
    #[error("cannot listen on {addr} ({what}): {source}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("invalid flags: {0}")]
    Files(#[from] super::sizing::TooFewFiles),
    #[error("invalid flags: {0}")]
    TlsPolicy(#[from] super::tls::policy::TlsPolicyError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Lookups(#[from] crate::lookups::SnapshotSourceError),
    #[error(transparent)]
    NativeSidecar(#[from] super::native_sidecar::Unsupported),
    #[error("cannot set up logging: invalid log filter {filter:?}: {source}")]
    LogFilter {
        filter: String,
        source: tracing_subscriber::filter::ParseError,
    },
    #[error("cannot set up logging: {0}")]
    Logging(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    #[error("the server task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
}
