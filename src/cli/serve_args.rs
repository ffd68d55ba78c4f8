//! Flags of `kserve-injector serve`. Each one can also come from an
//! environment variable, so a Deployment can configure the server without
//! rewriting its command line: `KSERVE_INJECTOR_` and the field's name in
//! capitals (`--admin-addr`: `KSERVE_INJECTOR_ADMIN_ADDR`), see [`env_var`].

use crate::lookups::{Kind, LookupMode, OutsideNamespaces};
use crate::server::settings::{
    ConfigSettings, LimitSettings, ListenSettings, LogFormat, LoggingSettings, LookupSettings,
    ServeSettings, ShadowSettings, ShutdownSettings, TlsSettings,
};
use clap::{ArgAction, Parser};
use kserve_injector_core::inputs::{ModelcarMode, SecurityProfile};
use kserve_injector_core::release::Release;
use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// controller-runtime's and cert-manager's conventional mount point, so the
/// same Secret volume works for KServe's controller and for us.
pub const DEFAULT_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// Flags of `kserve-injector serve`, in groups (each a `--help` heading);
/// an adapter takes only the group it needs.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_args = env_var, after_help = "Examples:
  kserve-injector serve --self-signed                 # local try-out; prints the CA path
  kserve-injector serve --config /etc/kserve/config   # mounted inferenceservice-config
  kserve-injector serve --self-signed --kubeconfig ~/.kube/config   # lookups from a cluster
  curl --cacert \"$CA\" -H 'content-type: application/json' --data @review.json https://localhost:9443/mutate-pods

Durations take a unit: 500ms, 5s, 2m.")]
pub struct ServeArgs {
    #[command(flatten)]
    pub listen: ListenArgs,
    #[command(flatten)]
    pub inference_config: ConfigArgs,
    #[command(flatten)]
    pub lookups: LookupArgs,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub shutdown: ShutdownArgs,
    #[command(flatten)]
    pub logging: LoggingArgs,
    #[command(flatten)]
    pub shadow: ShadowArgs,
}

/// Shadow mode: run beside another pod mutator and report, without
/// changing any pod, what this one would change.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Shadow mode")]
pub struct ShadowArgs {
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
pub struct ListenArgs {
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

impl ListenArgs {
    /// The listeners' addresses: those given, else every interface in a
    /// pod, or loopback for a `--self-signed` try-out, whose unauthenticated
    /// webhook and metrics no one else should reach.
    pub fn settings(&self, self_signed: bool) -> ListenSettings {
        let host = if self_signed {
            Ipv4Addr::LOCALHOST
        } else {
            Ipv4Addr::UNSPECIFIED
        };
        ListenSettings {
            addr: (self.addr).unwrap_or(SocketAddr::from((host, 9443))),
            admin_addr: (self.admin_addr).unwrap_or(SocketAddr::from((host, 8081))),
        }
    }
}

/// The inferenceservice-config and how it is reloaded.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Config")]
pub struct ConfigArgs {
    /// inferenceservice-config: a ConfigMap manifest or the directory it is
    /// mounted at; reloaded when it changes. Default: the values the
    /// --kserve-version release shipped (`default-config` prints them).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// kserve-injector's own settings (YAML or JSON): what KServe's ConfigMap
    /// has no key for. Read once at start. Example: --config-file /etc/kserve-injector/settings.yaml
    #[arg(long, value_name = "PATH")]
    pub config_file: Option<PathBuf>,
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
    /// The modelcar's shape: classic (KServe's regular container) or
    /// native-sidecar (an init container with restartPolicy Always, started
    /// before the model server; Kubernetes 1.29 or newer). A pod's
    /// kserve-injector.io/modelcar-mode annotation overrides it.
    #[arg(long, value_name = "MODE", default_value = "classic", value_parser = modelcar_mode())]
    pub modelcar_mode: ModelcarMode,
    /// The KServe release the cluster runs, whose pod mutator to reproduce:
    /// a tag from v0.15.0 to v0.20.0 (patch releases included: v0.15.1,
    /// v0.15.2, v0.17.1, v0.18.1) or head; a minor alone (v0.15) is the last
    /// patch release of that line (v0.15.2). Default: the --config-file's
    /// kserveVersion key, else head.
    #[arg(long, value_name = "VERSION", value_parser = kserve_version())]
    pub kserve_version: Option<Release>,
    /// The security profile of the containers the webhook adds: baseline
    /// (KServe's containers as they are) or restricted (each meets the
    /// restricted Pod Security Standard). A pod's
    /// kserve-injector.io/security-profile annotation overrides it.
    #[arg(long, value_name = "PROFILE", default_value = "baseline", value_parser = security_profile())]
    pub security_profile: SecurityProfile,
}

/// The server takes plain settings; the flags are one way to make them.
impl From<ServeArgs> for ServeSettings {
    fn from(args: ServeArgs) -> Self {
        Self {
            listen: args.listen.settings(args.tls.self_signed),
            inference_config: args.inference_config.into(),
            lookups: args.lookups.into(),
            tls: args.tls.into(),
            limits: args.limits.into(),
            shutdown: args.shutdown.into(),
            logging: args.logging.into(),
            shadow: args.shadow.into(),
        }
    }
}

impl From<ConfigArgs> for ConfigSettings {
    fn from(args: ConfigArgs) -> Self {
        Self {
            config: args.config,
            config_file: args.config_file,
            config_watch: args.config_watch,
            config_poll_interval: args.config_poll_interval,
            controller_namespace: args.controller_namespace,
            modelcar_mode: args.modelcar_mode,
            kserve_version: args.kserve_version,
            security_profile: args.security_profile,
        }
    }
}

impl From<LookupArgs> for LookupSettings {
    fn from(args: LookupArgs) -> Self {
        Self {
            cluster_lookups: args.cluster_lookups,
            kubeconfig: args.kubeconfig,
            context: args.context,
            lookup_timeout: args.lookup_timeout,
            watch_kinds: args.watch_kinds,
            secret_ttl: args.secret_ttl,
            secret_cache_entries: args.secret_cache_entries,
            namespaces: args.namespaces,
            outside_namespaces: args.outside_namespaces,
            objects: args.objects,
        }
    }
}

impl From<TlsArgs> for TlsSettings {
    fn from(args: TlsArgs) -> Self {
        Self {
            cert_dir: args.cert_dir,
            tls_cert_file: args.tls_cert_file,
            tls_key_file: args.tls_key_file,
            client_ca_file: args.client_ca_file,
            self_signed: args.self_signed,
            dns_names: args.dns_names,
            self_signed_ca_file: args.self_signed_ca_file,
            cert_watch: args.cert_watch,
            cert_poll_interval: args.cert_poll_interval,
        }
    }
}

impl From<LimitArgs> for LimitSettings {
    fn from(args: LimitArgs) -> Self {
        Self {
            request_timeout: args.request_timeout,
            body_timeout: args.body_timeout,
            min_body_rate: args.min_body_rate,
            header_read_timeout: args.header_read_timeout,
            handshake_timeout: args.handshake_timeout,
            http2_max_concurrent_streams: args.http2_max_concurrent_streams,
            first_request_timeout: args.first_request_timeout,
            idle_timeout: args.idle_timeout,
            max_connections: args.max_connections,
            max_concurrent_requests: args.max_concurrent_requests,
            max_buffered_bytes: args.max_buffered_bytes,
            max_connection_buffered_bytes: args.max_connection_buffered_bytes,
            write_timeout: args.write_timeout,
        }
    }
}

impl From<ShutdownArgs> for ShutdownSettings {
    fn from(args: ShutdownArgs) -> Self {
        Self {
            shutdown_delay: args.shutdown_delay,
            drain_timeout: args.drain_timeout,
        }
    }
}

impl From<LoggingArgs> for LoggingSettings {
    fn from(args: LoggingArgs) -> Self {
        Self {
            log_summary_interval: args.log_summary_interval,
            log_format: args.log_format,
            log_filter: args.log_filter,
        }
    }
}

impl From<ShadowArgs> for ShadowSettings {
    fn from(args: ShadowArgs) -> Self {
        Self {
            shadow: args.shadow,
            shadow_warnings: args.shadow_warnings,
        }
    }
}
/// `--log-format`'s parser, listing the formats in `--help`.
fn log_format() -> impl clap::builder::TypedValueParser<Value = LogFormat> {
    use clap::builder::TypedValueParser;
    // The possible values are exactly the names, so every one parses.
    clap::builder::PossibleValuesParser::new(LogFormat::NAMES)
        .map(|name| name.parse::<LogFormat>().unwrap_or(LogFormat::Json))
}

/// `--kserve-version`'s parser (`serve`, `mutate`, `audit`, `default-config`): a release whose
/// differences are all modelled, or an error naming the supported ones.
pub fn kserve_version() -> impl clap::builder::TypedValueParser<Value = Release> {
    |text: &str| text.parse::<Release>()
}

/// `--security-profile`'s parser (`serve`, `mutate`, `audit`), listing the profiles in `--help`.
pub fn security_profile() -> impl clap::builder::TypedValueParser<Value = SecurityProfile> {
    use clap::builder::TypedValueParser;
    // The possible values are exactly the names, so every one parses.
    clap::builder::PossibleValuesParser::new(SecurityProfile::NAMES)
        .map(|name| name.parse::<SecurityProfile>().unwrap_or_default())
}

/// `--modelcar-mode`'s parser (`serve` and `mutate`), listing the modes in `--help`.
pub fn modelcar_mode() -> impl clap::builder::TypedValueParser<Value = ModelcarMode> {
    use clap::builder::TypedValueParser;
    // The possible values are exactly the names, so every one parses.
    clap::builder::PossibleValuesParser::new(ModelcarMode::NAMES)
        .map(|name| name.parse::<ModelcarMode>().unwrap_or_default())
}

/// Where the cluster objects an admission reads come from.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Cluster lookups")]
pub struct LookupArgs {
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
    /// Bound on one direct GET for an object the watch cache does not hold
    /// yet; keep it below --request-timeout.
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
pub struct TlsArgs {
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
}

/// Timeouts and the bounds on connections, streams, requests and bytes.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Limits")]
pub struct LimitArgs {
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
    /// Connections that do not finish the TLS handshake within this time are closed.
    #[arg(long, default_value = "10s", value_parser = nonzero_duration)]
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
    /// Open webhook connections; at the cap a new one takes the slot of the
    /// connection that completed a review the longest ago (or never).
    /// Default: sized to the container's memory limit (read from its
    /// cgroup) and 3/4 of `ulimit -n`, at most 4096.
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
pub struct ShutdownArgs {
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
pub struct LoggingArgs {
    /// How often the info-level admission summary is logged (each review is
    /// logged at debug).
    #[arg(long, default_value = "10s", value_parser = nonzero_duration)]
    pub log_summary_interval: Duration,
    /// Log format.
    #[arg(long, default_value = "json", value_parser = log_format())]
    pub log_format: LogFormat,
    /// Log filter in RUST_LOG syntax, e.g. "info" or "kserve_injector=debug".
    /// Default: RUST_LOG, else "info".
    #[arg(long = "log", env = "KSERVE_INJECTOR_LOG", value_name = "FILTER")]
    pub log_filter: Option<String>,
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
    args: ServeArgs,
}

impl ServeArgs {
    /// Parses flags as `serve` would (without the subcommand name), for
    /// embedding the server and for tests.
    pub fn try_parse_from<I, T>(flags: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Standalone::try_parse_from(flags).map(|s| s.args)
    }
}

/// A flag's value that its parser refuses; clap prints it after the
/// flag's name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FlagValueError {
    #[error("{text:?} is not a duration ({source}; examples: 500ms, 5s, 2m)")]
    NotADuration {
        text: String,
        source: humantime::DurationError,
    },
    #[error("must be greater than zero")]
    Zero,
    #[error("{0:?} is not a namespace name (lower-case letters, digits and '-', at most 63)")]
    NotANamespace(String),
    /// The namespace pattern itself does not compile.
    #[error(transparent)]
    Pattern(regex::Error),
    #[error("must be a whole number, at least 1")]
    NotAtLeastOne,
}

/// humantime's durations (`500ms`, `5s`, `2m`, `1h 30m`); a bare number
/// means seconds, as it always has for these flags.
pub fn parse_duration(text: &str) -> Result<Duration, FlagValueError> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    humantime::parse_duration(text).map_err(|source| FlagValueError::NotADuration {
        text: text.to_string(),
        source,
    })
}

/// A namespace name as the API accepts it (a DNS label).
fn namespace_name(text: &str) -> Result<String, FlagValueError> {
    let text = text.trim();
    let label = regex::Regex::new("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
        .map_err(FlagValueError::Pattern)?;
    if label.is_match(text) {
        Ok(text.to_string())
    } else {
        Err(FlagValueError::NotANamespace(text.to_string()))
    }
}

/// A count that must be at least 1 (a limit of zero would refuse everything).
fn at_least_one<T: std::str::FromStr + PartialOrd + From<u8>>(
    text: &str,
) -> Result<T, FlagValueError> {
    match text.trim().parse::<T>() {
        Ok(n) if n >= T::from(1) => Ok(n),
        _ => Err(FlagValueError::NotAtLeastOne),
    }
}

/// [`parse_duration`], refusing zero: a zero timeout or interval would make
/// the server useless rather than merely slow.
fn nonzero_duration(text: &str) -> Result<Duration, FlagValueError> {
    match parse_duration(text)? {
        zero if zero.is_zero() => Err(FlagValueError::Zero),
        duration => Ok(duration),
    }
}
