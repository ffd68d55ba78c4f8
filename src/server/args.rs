//! What `serve` runs with: one struct per group of flags (each a `--help`
//! heading), each deriving `clap::Args` itself, so the server owns its
//! flags and the CLI only flattens [`ServeArgs`] into its `serve`
//! subcommand (kubert's `ServerArgs` is the pattern). Every flag can also
//! come from an environment variable, so a Deployment can configure the
//! server without rewriting its command line: `KSERVE_INJECTOR_` and the
//! field's name in capitals (`--admin-addr`: `KSERVE_INJECTOR_ADMIN_ADDR`),
//! see `env_var`. An embedder may build the structs by hand instead.
//!
//! The values here are the flags as given; what a flag left out and is
//! derived from others or from the machine (the listeners' addresses, the
//! bounds sized to the memory limit) is worked out in one place each:
//! [`ServeArgs::addr`], [`ServeArgs::admin_addr`] and
//! `server::sizing`.

use crate::flag_values::{at_least_one, namespace_name, nonzero_duration, parse_duration};
use crate::input_flags::InputFlags;
use crate::limits::MAX_BODY_BYTES;
use crate::lookups::{
    Kind, LookupMode, LookupOptions, OutsideNamespaces, StreamingLists,
    DEFAULT_SECRET_CACHE_ENTRIES,
};
pub use crate::server::tls::policy::TlsMinVersion;
use clap::{ArgAction, Parser};
use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

/// controller-runtime's and cert-manager's conventional mount point, so the
/// same Secret volume works for KServe's controller and for us.
pub const DEFAULT_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogFormat {
    Json,
    Text,
}

impl LogFormat {
    /// The names `--log-format` accepts, in this order.
    pub(crate) const NAMES: [&str; 2] = ["json", "text"];
}

/// A `--log-format` that is neither `json` nor `text`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown log format {0:?} (json or text)")]
pub(crate) struct UnknownLogFormat(pub String);

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
pub enum InvalidFlags {
    #[error("--objects replaces the cluster lookups: leave out --cluster-lookups on")]
    ObjectsWithLookups,
    #[error("--max-buffered-bytes must be at least {MAX_BODY_BYTES} (one maximal request)")]
    BufferedBytes,
    #[error("--config {0}: no such file or directory")]
    NoConfig(PathBuf),
}

/// `serve --config`: read as `mutate --config` reads it, and reloaded.
const SERVE_CONFIG_HELP: &str =
    "inferenceservice-config: a ConfigMap manifest or the directory it is \
     mounted at; reloaded when it changes. Default: the values the --kserve-version release \
     shipped (`default-config` prints them).";

/// Everything `serve` runs with, in the groups of its `--help`; an
/// adapter takes only the group it needs.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_args = env_var, mut_arg("config", |a| a.help(SERVE_CONFIG_HELP)), after_help = "Examples:
  kserve-injector serve --self-signed                 # local try-out; prints the CA path
  kserve-injector serve --config /etc/kserve/config   # mounted inferenceservice-config
  kserve-injector serve --self-signed --kubeconfig ~/.kube/config   # lookups from a cluster
  curl --cacert \"$CA\" -H 'content-type: application/json' --data @review.json https://localhost:9443/mutate-pods

Durations take a unit: 500ms, 5s, 2m.")]
pub struct ServeArgs {
    #[command(flatten)]
    pub listen: ListenFlags,
    #[command(flatten)]
    pub inference_config: ConfigFlags,
    #[command(flatten)]
    pub lookups: LookupFlags,
    #[command(flatten)]
    pub tls: TlsFlags,
    #[command(flatten)]
    pub limits: LimitFlags,
    #[command(flatten)]
    pub shutdown: ShutdownFlags,
    #[command(flatten)]
    pub logging: LoggingFlags,
    #[command(flatten)]
    pub shadow: ShadowFlags,
}

/// Shadow mode: run beside another pod mutator and report, without
/// changing any pod, what this one would change.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Shadow mode")]
pub struct ShadowFlags {
    /// Allow every pod without a patch; log each pod this webhook would
    /// change (paths and injectors) and count it in
    /// kserve_injector_shadow_differences_total.
    #[arg(long)]
    pub shadow: bool,
    /// In shadow mode, also return the would-be changes as an AdmissionReview
    /// warning, which kubectl prints.
    #[arg(long, requires = "shadow")]
    pub shadow_warnings: bool,
}

/// The two listeners: the webhook's and the admin (probes, metrics) one.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Listeners")]
pub struct ListenFlags {
    /// HTTPS listener for the webhook (POST /mutate-pods, POST /mutate).
    /// Default: 0.0.0.0:9443 (every interface, as in a pod); with
    /// --self-signed, 127.0.0.1:9443 (a local try-out stays off the network).
    #[arg(long, value_name = "ADDR")]
    pub addr: Option<SocketAddr>,
    /// Plain-HTTP admin listener: /healthz, /readyz, /metrics. Default:
    /// 0.0.0.0:8081; with --self-signed, 127.0.0.1:8081.
    #[arg(long, value_name = "ADDR")]
    pub admin_addr: Option<SocketAddr>,
}

/// The inferenceservice-config and how it is reloaded.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Config")]
pub struct ConfigFlags {
    #[command(flatten)]
    pub inputs: InputFlags,
    /// Watch the config path for changes (in addition to polling).
    #[arg(long, default_value_t = true,
          action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub config_watch: bool,
    /// How often the config is re-read and compared.
    #[arg(long, default_value = "10s", value_parser = nonzero_duration)]
    pub config_poll_interval: Duration,
    /// Namespace KServe's controller runs in. Falls back to POD_NAMESPACE,
    /// then "kserve".
    #[arg(long)]
    pub controller_namespace: Option<String>,
}

/// Where the cluster objects an admission reads come from.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Cluster lookups")]
pub struct LookupFlags {
    /// Read ServiceAccounts, Secrets, ClusterStorageContainers and
    /// InferenceServices from the cluster (watch caches). auto: on when
    /// --kubeconfig, KUBECONFIG or an in-cluster service account is found.
    #[arg(long, value_enum, default_value = "auto")]
    pub cluster_lookups: LookupMode,
    /// Kubeconfig for the cluster lookups. Example: --kubeconfig ~/.kube/config
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context for the cluster lookups. Example: --context kind-kserve
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Bound on one admission's direct GETs together, for objects the watch
    /// caches do not hold; keep it below --request-timeout.
    #[arg(long, default_value = "2s", value_parser = nonzero_duration)]
    pub lookup_timeout: Duration,
    /// Kinds read through watch caches (comma-separated). Secrets are left
    /// out by default: each one a pod needs is read with one GET and kept for
    /// --secret-ttl, so the webhook needs only `get` on Secrets. Add
    /// `secrets` to watch them all instead (RBAC `list, watch`; see
    /// docs/security.md). Another kind left out is read with one GET per
    /// admission that needs it. Example: --watch-kinds serviceaccounts,secrets,clusterstoragecontainers,inferenceservices
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "serviceaccounts,clusterstoragecontainers,inferenceservices"
    )]
    pub watch_kinds: Vec<Kind>,
    /// How long a fetched Secret (or its absence) is used before the next
    /// admission that needs it reads it again: a Secret changed or deleted
    /// is seen at the latest after this. Unused when Secrets are watched.
    #[arg(long, default_value = "30s", value_parser = nonzero_duration)]
    pub secret_ttl: Duration,
    /// At most this many fetched Secrets are kept (least recently used out
    /// first). Unused when Secrets are watched.
    #[arg(long, value_name = "N", default_value = "1000", value_parser = at_least_one::<usize>)]
    pub secret_cache_entries: usize,
    /// The most one object may keep of what KServe's rules read of it
    /// (kept annotations, the Secret list, key names, copied values); a
    /// larger one is not held and the pods that need it are denied, naming
    /// it.
    #[arg(long, value_name = "BYTES", default_value_t = crate::lookups::DEFAULT_MAX_OBJECT_BYTES, value_parser = at_least_one::<usize>)]
    pub max_lookup_object_bytes: usize,
    /// A pod whose ServiceAccount lists more Secrets than this is denied
    /// before any of them is read.
    #[arg(long, value_name = "N", default_value_t = crate::lookups::DEFAULT_MAX_SA_SECRETS, value_parser = at_least_one::<usize>)]
    pub max_service_account_secrets: usize,
    /// The bytes all admissions' GETs may hold at once; one namespace may
    /// hold a quarter of them. Default: a quarter of the caches' share of
    /// the memory limit (4.9 MiB at 128 MiB), 8 MiB without a limit.
    #[arg(long, value_name = "BYTES", value_parser = at_least_one::<usize>)]
    pub max_lookup_bytes: Option<usize>,
    /// Admissions of one namespace that may read the API server at once;
    /// one more is answered 503 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = crate::lookups::DEFAULT_NAMESPACE_ADMISSIONS, value_parser = at_least_one::<usize>)]
    pub max_namespace_lookups: usize,
    /// How a watch cache reads its complete listing (at start and after a
    /// watch error): off, paged LISTs; auto, a streaming list (a WATCH that
    /// begins with every object, Kubernetes' WatchList) where the API server
    /// offers one, paged LISTs where it refuses.
    #[arg(long, value_enum, default_value = "off")]
    pub streaming_lists: StreamingLists,
    /// Serve only these namespaces (comma-separated): watches and GETs are
    /// limited to them, so namespaced Roles suffice (only
    /// ClusterStorageContainers, cluster-scoped, need a ClusterRole).
    /// Default: the whole cluster. Example: --namespaces models-a,models-b
    #[arg(long, value_delimiter = ',', value_name = "NAMESPACE", value_parser = namespace_name)]
    pub namespaces: Vec<String>,
    /// With --namespaces: a pod in another namespace that needs cluster
    /// lookups is denied, naming the namespaces served (deny), or admitted
    /// unchanged (allow).
    #[arg(long, value_enum, default_value = "deny")]
    pub outside_namespaces: OutsideNamespaces,
    /// Serve with a fixed set of cluster objects instead of a cluster (as
    /// `mutate --objects`; for trying the webhook out and for tests).
    /// Example: --objects fixtures/s14-credential-gcs/cluster.yaml
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "context"])]
    pub objects: Option<PathBuf>,
}

/// The serving certificate, the client CA, and how they are reloaded.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "TLS")]
pub struct TlsFlags {
    /// Directory holding tls.crt and tls.key (a mounted Secret).
    #[arg(long, default_value = DEFAULT_CERT_DIR)]
    pub cert_dir: PathBuf,
    /// Serving certificate chain (PEM). Default: CERT_DIR/tls.crt.
    #[arg(long, value_name = "PATH")]
    pub tls_cert_file: Option<PathBuf>,
    /// Serving private key (PEM). Default: CERT_DIR/tls.key.
    #[arg(long, value_name = "PATH")]
    pub tls_key_file: Option<PathBuf>,
    /// CA bundle (PEM) that client certificates must chain to; when set, a
    /// client certificate is required. Reloaded like the serving certificate.
    #[arg(long, value_name = "PATH")]
    pub client_ca_file: Option<PathBuf>,
    /// Generate an in-memory CA and a serving certificate for localhost,
    /// 127.0.0.1, ::1 and every --dns-name, instead of reading files.
    #[arg(long)]
    pub self_signed: bool,
    /// Extra names for the --self-signed certificate (repeat or comma-separate).
    #[arg(long = "dns-name", value_delimiter = ',', value_name = "NAME")]
    pub dns_names: Vec<String>,
    /// Where --self-signed writes its CA certificate (PEM).
    /// Default: kserve-injector-ca.crt in the temporary directory.
    #[arg(long, value_name = "PATH")]
    pub self_signed_ca_file: Option<PathBuf>,
    /// Watch the certificate directories for changes (in addition to polling).
    #[arg(long, default_value_t = true,
          action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub cert_watch: bool,
    /// How often the certificate files are re-read and compared.
    #[arg(long, default_value = "10s", value_parser = nonzero_duration)]
    pub cert_poll_interval: Duration,
    /// The lowest TLS version served: 1.2 or 1.3 (Kubernetes'
    /// VersionTLS12 and VersionTLS13 are taken too).
    #[arg(long, value_name = "VERSION", default_value = "1.2", value_parser = tls_min_version())]
    pub tls_min_version: TlsMinVersion,
    /// TLS 1.2 cipher suites offered, by the IANA names Kubernetes'
    /// --tls-cipher-suites takes (comma-separated); refused at start when
    /// unknown or not offered by the crypto provider. TLS 1.3's suites are
    /// not configurable (as in Go). Default: every suite the provider (ring)
    /// offers. Example: --tls-cipher-suites TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub tls_cipher_suites: Vec<String>,
}

/// Timeouts and the bounds on connections, streams, requests and bytes.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Limits")]
pub struct LimitFlags {
    /// Budget for reading and answering one admission request (then 504).
    /// Keep it below the webhook's timeoutSeconds.
    #[arg(long, default_value = "5s", value_parser = nonzero_duration)]
    pub request_timeout: Duration,
    /// A request body must have arrived this long after its request's head,
    /// plus the time its size takes at --min-body-rate; one that falls
    /// behind gets 408 and frees its slot (a 1 KB review is due within
    /// about this time).
    #[arg(long, default_value = "1s", value_parser = nonzero_duration)]
    pub body_timeout: Duration,
    /// Bytes a second a request body must keep up after --body-timeout
    /// (1 MiB/s: a 7 MiB body is due 7 s after it, past the request timeout).
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20, value_parser = at_least_one::<u64>)]
    pub min_body_rate: u64,
    /// HTTP/1 connections that do not send a complete request head within
    /// this time are closed; this also bounds idle keep-alive connections.
    #[arg(long, default_value = "10s", value_parser = nonzero_duration)]
    pub header_read_timeout: Duration,
    /// Connections that do not finish the TLS handshake within this time
    /// are closed (the API server's takes milliseconds; a slot held in a
    /// handshake is held for nothing).
    #[arg(long, default_value = "1s", value_parser = nonzero_duration)]
    pub handshake_timeout: Duration,
    /// Concurrent streams one HTTP/2 connection may open: each
    /// connection's share of the requests in flight (more are refused with
    /// REFUSED_STREAM, which clients retry, the API server on another
    /// connection).
    #[arg(long, default_value_t = 8, value_parser = at_least_one::<u32>)]
    pub http2_max_concurrent_streams: u32,
    /// Connections that have not sent a complete first request (HTTP/1
    /// head, or HTTP/2 preface and HEADERS) this long after the handshake
    /// are closed.
    #[arg(long, default_value = "10s", value_parser = nonzero_duration)]
    pub first_request_timeout: Duration,
    /// Connections with no request in flight for this long are closed
    /// (HTTP/2 with GOAWAY).
    #[arg(long, default_value = "90s", value_parser = nonzero_duration)]
    pub idle_timeout: Duration,
    /// Open webhook connections, shared fairly between client addresses:
    /// at the cap a new one takes the slot of a connection of the address
    /// holding the most (of those, the one that completed a review the
    /// longest ago, or never), or is refused when its own address holds as
    /// many as any. Default: sized to the container's memory limit (read
    /// from its cgroup) and to the open-file limit (its soft limit raised
    /// to the hard one), at most 4096; refused at start when it cannot fit
    /// the open-file limit.
    #[arg(long, value_parser = at_least_one::<usize>)]
    pub max_connections: Option<usize>,
    /// Admission requests served at once; more get 503 with Retry-After.
    /// Default: --max-connections × --http2-max-concurrent-streams, so that
    /// a connection's requests are never refused for another's.
    #[arg(long, value_parser = at_least_one::<usize>)]
    pub max_concurrent_requests: Option<usize>,
    /// Request bodies and answers held in memory across all connections,
    /// in bytes; a request or an answer that would go above it gets 503 with
    /// Retry-After. Default: sized to the container's memory limit, at most
    /// 64 MiB.
    #[arg(long)]
    pub max_buffered_bytes: Option<usize>,
    /// Answer bytes one connection may have waiting for its client to read;
    /// while it has more, its new requests get 503.
    #[arg(long, default_value_t = 2 << 20, value_parser = at_least_one::<usize>)]
    pub max_connection_buffered_bytes: usize,
    /// A connection whose client has read nothing it was sent for this long
    /// is closed, and what it held is freed.
    #[arg(long, default_value = "10s", value_parser = nonzero_duration)]
    pub write_timeout: Duration,
}

/// The graceful shutdown after SIGTERM.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Shutdown")]
pub struct ShutdownFlags {
    /// After SIGTERM, keep serving (with /readyz at 503) this long so the
    /// endpoint is withdrawn before the listener closes.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub shutdown_delay: Duration,
    /// Then wait at most this long for in-flight requests.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
}

/// Log format, filter and the periodic admission summary.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Logging")]
pub struct LoggingFlags {
    /// How often the info-level admission summary is logged (each review is
    /// logged at debug).
    #[arg(long, default_value = "10s", value_parser = nonzero_duration)]
    pub log_summary_interval: Duration,
    /// Log format.
    #[arg(long, default_value = "json", value_parser = log_format())]
    pub(crate) log_format: LogFormat,
    /// Log filter in RUST_LOG syntax, e.g. "info" or "kserve_injector=debug".
    /// Default: RUST_LOG, else "info".
    #[arg(long = "log", env = "KSERVE_INJECTOR_LOG", value_name = "FILTER")]
    pub log_filter: Option<String>,
}

impl ServeArgs {
    /// What the flags' parser cannot check alone (values that would make the
    /// server useless rather than merely slow are refused there).
    pub(crate) fn validate(&self) -> Result<(), InvalidFlags> {
        let lookups = &self.lookups;
        if lookups.objects.is_some() && lookups.cluster_lookups == LookupMode::On {
            return Err(InvalidFlags::ObjectsWithLookups);
        }
        if self
            .limits
            .max_buffered_bytes
            .is_some_and(|n| n < MAX_BODY_BYTES)
        {
            return Err(InvalidFlags::BufferedBytes);
        }
        match &self.inference_config.inputs.config {
            Some(path) if !path.exists() => Err(InvalidFlags::NoConfig(path.clone())),
            _ => Ok(()),
        }
    }

    /// The webhook listener's address: `--addr`, else port 9443 on
    /// `default_host`.
    pub fn addr(&self) -> SocketAddr {
        (self.listen.addr).unwrap_or(SocketAddr::from((self.default_host(), 9443)))
    }

    /// The admin listener's address: `--admin-addr`, else port 8081 on
    /// `default_host`.
    pub fn admin_addr(&self) -> SocketAddr {
        (self.listen.admin_addr).unwrap_or(SocketAddr::from((self.default_host(), 8081)))
    }

    /// Where a listener not given listens: every interface in a pod, or
    /// loopback for a `--self-signed` try-out, whose unauthenticated
    /// webhook and metrics no one else should reach.
    fn default_host(&self) -> Ipv4Addr {
        if self.tls.self_signed {
            Ipv4Addr::LOCALHOST
        } else {
            Ipv4Addr::UNSPECIFIED
        }
    }
}

impl ShadowFlags {
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

impl TlsFlags {
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

    pub(crate) fn ca_out_file(&self) -> PathBuf {
        self.self_signed_ca_file
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("kserve-injector-ca.crt"))
    }
}

impl ConfigFlags {
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

impl LookupFlags {
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
            max_object_bytes: self.max_lookup_object_bytes,
            max_sa_secrets: self.max_service_account_secrets,
            lookup_bytes: (self.max_lookup_bytes).unwrap_or(crate::lookups::DEFAULT_LOOKUP_BYTES),
            namespace_admissions: self.max_namespace_lookups,
            streaming_lists: self.streaming_lists,
        }
    }
}

/// `--tls-min-version`'s parser, listing the versions in `--help`.
fn tls_min_version() -> impl clap::builder::TypedValueParser<Value = TlsMinVersion> {
    use clap::builder::TypedValueParser;
    // The possible values are exactly the names, so every one parses.
    clap::builder::PossibleValuesParser::new(TlsMinVersion::NAMES).map(|name| {
        name.parse::<TlsMinVersion>()
            .unwrap_or(TlsMinVersion::Tls12)
    })
}

/// `--log-format`'s parser, listing the formats in `--help`.
fn log_format() -> impl clap::builder::TypedValueParser<Value = LogFormat> {
    use clap::builder::TypedValueParser;
    // The possible values are exactly the names, so every one parses.
    clap::builder::PossibleValuesParser::new(LogFormat::NAMES)
        .map(|name| name.parse::<LogFormat>().unwrap_or(LogFormat::Json))
}

/// Gives a flag without an `env = ...` of its own its variable, named after
/// the field (clap's `string` feature lets the name be built at run time).
fn env_var(arg: clap::Arg) -> clap::Arg {
    if arg.get_env().is_some() {
        return arg;
    }
    let name = format!("KSERVE_INJECTOR_{}", arg.get_id().as_str().to_uppercase());
    arg.env(name)
}

#[derive(Parser)]
#[command(name = "serve", no_binary_name = true)]
struct Standalone {
    #[command(flatten)]
    serve: ServeArgs,
}

impl ServeArgs {
    /// Parses flags as `serve` would (without the subcommand name), for
    /// embedding the server, for `check` (a Deployment's flags) and for tests.
    pub fn try_parse_from<I, T>(flags: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Standalone::try_parse_from(flags).map(|s| s.serve)
    }
}
