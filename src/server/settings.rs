//! What `serve` runs with: plain values, one struct per group of flags,
//! built from the command line at the edge (the CLI's `ServeArgs`) or by
//! an embedder. The server reads only these, never the flags' parser.

use crate::limits::MAX_BODY_BYTES;
use crate::lookups::{
    Kind, LookupMode, LookupOptions, OutsideNamespaces, DEFAULT_SECRET_CACHE_ENTRIES,
};
use kserve_injector_core::inputs::{ModelcarMode, SecurityProfile};
use kserve_injector_core::release::Release;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

impl LogFormat {
    /// The names `--log-format` accepts, in this order.
    pub const NAMES: [&str; 2] = ["json", "text"];
}

/// A `--log-format` that is neither `json` nor `text`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown log format {0:?} (json or text)")]
pub struct UnknownLogFormat(pub String);

impl std::str::FromStr for LogFormat {
    type Err = UnknownLogFormat;
    fn from_str(name: &str) -> Result<Self, UnknownLogFormat> {
        match name {
            "json" => Ok(Self::Json),
            "text" => Ok(Self::Text),
            _ => Err(UnknownLogFormat(name.to_string())),
        }
    }
}

/// Settings that cannot work together or at all, found before anything
/// starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSettings {
    #[error("--objects replaces the cluster lookups: leave out --cluster-lookups on")]
    ObjectsWithLookups,
    #[error("--max-buffered-bytes must be at least {MAX_BODY_BYTES} (one maximal request)")]
    BufferedBytes,
    #[error("--config {0}: no such file or directory")]
    NoConfig(PathBuf),
}

/// Everything `serve` runs with, in the groups of its `--help`.
#[derive(Debug, Clone)]
pub struct ServeSettings {
    pub listen: ListenSettings,
    pub inference_config: ConfigSettings,
    pub lookups: LookupSettings,
    pub tls: TlsSettings,
    pub limits: LimitSettings,
    pub shutdown: ShutdownSettings,
    pub logging: LoggingSettings,
    pub shadow: ShadowSettings,
}

/// The two listeners.
#[derive(Debug, Clone)]
pub struct ListenSettings {
    pub addr: SocketAddr,
    pub admin_addr: SocketAddr,
}

/// The inferenceservice-config, our settings file, and how they are reloaded.
#[derive(Debug, Clone)]
pub struct ConfigSettings {
    pub config: Option<PathBuf>,
    pub config_file: Option<PathBuf>,
    pub config_watch: bool,
    pub config_poll_interval: Duration,
    pub controller_namespace: Option<String>,
    pub modelcar_mode: ModelcarMode,
    pub kserve_version: Option<Release>,
    pub security_profile: SecurityProfile,
}

/// Where the cluster objects an admission reads come from.
#[derive(Debug, Clone)]
pub struct LookupSettings {
    pub cluster_lookups: LookupMode,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub lookup_timeout: Duration,
    pub watch_kinds: Vec<Kind>,
    pub secret_ttl: Duration,
    pub secret_cache_entries: usize,
    pub namespaces: Vec<String>,
    pub outside_namespaces: OutsideNamespaces,
    pub objects: Option<PathBuf>,
}

/// The serving certificate and the client CA.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    pub cert_dir: PathBuf,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    pub client_ca_file: Option<PathBuf>,
    pub self_signed: bool,
    pub dns_names: Vec<String>,
    pub self_signed_ca_file: Option<PathBuf>,
    pub cert_watch: bool,
    pub cert_poll_interval: Duration,
}

/// Timeouts and limits of the webhook listener.
#[derive(Debug, Clone)]
pub struct LimitSettings {
    pub request_timeout: Duration,
    pub body_timeout: Duration,
    /// Bytes a second.
    pub min_body_rate: u64,
    pub header_read_timeout: Duration,
    pub handshake_timeout: Duration,
    pub http2_max_concurrent_streams: u32,
    pub first_request_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: Option<usize>,
    /// `None`: every connection's streams (`server::sizing`).
    pub max_concurrent_requests: Option<usize>,
    /// `None`: sized to the memory limit (`server::sizing`).
    pub max_buffered_bytes: Option<usize>,
    pub max_connection_buffered_bytes: usize,
    pub write_timeout: Duration,
}

/// The drain on SIGTERM.
#[derive(Debug, Clone)]
pub struct ShutdownSettings {
    pub shutdown_delay: Duration,
    pub drain_timeout: Duration,
}

/// Log format and filter.
#[derive(Debug, Clone)]
pub struct LoggingSettings {
    pub log_summary_interval: Duration,
    pub log_format: LogFormat,
    pub log_filter: Option<String>,
}

/// Shadow mode.
#[derive(Debug, Clone)]
pub struct ShadowSettings {
    pub shadow: bool,
    pub shadow_warnings: bool,
}

impl ServeSettings {
    /// What the flags' parser cannot check alone (values that would make the
    /// server useless rather than merely slow are refused there).
    pub fn validate(&self) -> Result<(), InvalidSettings> {
        let lookups = &self.lookups;
        if lookups.objects.is_some() && lookups.cluster_lookups == LookupMode::On {
            return Err(InvalidSettings::ObjectsWithLookups);
        }
        if self
            .limits
            .max_buffered_bytes
            .is_some_and(|n| n < MAX_BODY_BYTES)
        {
            return Err(InvalidSettings::BufferedBytes);
        }
        match &self.inference_config.config {
            Some(path) if !path.exists() => Err(InvalidSettings::NoConfig(path.clone())),
            _ => Ok(()),
        }
    }
}

impl ShadowSettings {
    pub fn mode(&self) -> kserve_injector_core::admission::Mode {
        if self.shadow {
            kserve_injector_core::admission::Mode::Shadow {
                warnings: self.shadow_warnings,
            }
        } else {
            kserve_injector_core::admission::Mode::Mutate
        }
    }
}

impl TlsSettings {
    pub fn cert_file(&self) -> PathBuf {
        self.tls_cert_file
            .clone()
            .unwrap_or_else(|| self.cert_dir.join("tls.crt"))
    }

    pub fn key_file(&self) -> PathBuf {
        self.tls_key_file
            .clone()
            .unwrap_or_else(|| self.cert_dir.join("tls.key"))
    }

    pub fn ca_out_file(&self) -> PathBuf {
        self.self_signed_ca_file
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("kserve-injector-ca.crt"))
    }
}

impl ConfigSettings {
    /// Flag, then KServe's POD_NAMESPACE convention, then KServe's default.
    pub fn resolved_controller_namespace(&self) -> String {
        let pod_namespace = std::env::var("POD_NAMESPACE").ok();
        [self.controller_namespace.clone(), pod_namespace]
            .into_iter()
            .flatten()
            .find(|ns| !ns.is_empty())
            .unwrap_or_else(|| {
                kserve_injector_core::constants::DEFAULT_CONTROLLER_NAMESPACE.to_string()
            })
    }
}

impl LookupSettings {
    /// The options of the watch caches and the fallback GETs.
    pub fn options(&self) -> LookupOptions {
        LookupOptions {
            get_timeout: self.lookup_timeout,
            watched: self.watch_kinds.clone(),
            secret_ttl: self.secret_ttl,
            secret_cache_entries: NonZeroUsize::new(self.secret_cache_entries)
                .unwrap_or(DEFAULT_SECRET_CACHE_ENTRIES),
            namespaces: self.namespaces.iter().cloned().collect(),
            outside: self.outside_namespaces,
            cache_budget: None,
        }
    }
}
