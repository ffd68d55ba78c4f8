use std::net::SocketAddr;
use std::path::PathBuf;

/// Why `serve` could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("invalid flags: {0}")]
    Args(String),
    #[error(transparent)]
    Config(#[from] crate::config_file::LoadError),
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
    #[error("cannot set up logging: {0}")]
    Logging(String),
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    #[error("the server task failed: {0}")]
    Task(String),
}
