//! What the lookups run: the kinds, which of them are watched, the fallback
//! GET's bound, the fetched Secrets' TTL and the namespaces served.

use std::collections::BTreeSet;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::time::Duration;

/// Default bound on one fallback GET: admission must answer well within the
/// webhook's own timeout (KServe registers 10 s).
pub(crate) const DEFAULT_GET_TIMEOUT: Duration = Duration::from_secs(2);

/// The four kinds the lookups read (named as in RBAC on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Kind {
    #[value(name = "serviceaccounts")]
    ServiceAccounts,
    #[value(name = "secrets")]
    Secrets,
    #[value(name = "clusterstoragecontainers")]
    StorageContainers,
    #[value(name = "inferenceservices")]
    InferenceServices,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::ServiceAccounts,
        Kind::Secrets,
        Kind::StorageContainers,
        Kind::InferenceServices,
    ];

    /// The resource's plural name, as in RBAC and the metrics' `kind` label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::ServiceAccounts => "serviceaccounts",
            Kind::Secrets => "secrets",
            Kind::StorageContainers => "clusterstoragecontainers",
            Kind::InferenceServices => "inferenceservices",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// Default for `--secret-ttl`: how long a fetched Secret is used before the
/// next admission that needs it reads it again.
pub(crate) const DEFAULT_SECRET_TTL: Duration = Duration::from_secs(30);
/// Default for `--secret-cache-entries`.
pub(crate) const DEFAULT_SECRET_CACHE_ENTRIES: NonZeroUsize = NonZeroUsize::new(1000).unwrap();

/// Default for `--max-service-account-secrets`: KServe's users list a
/// handful; a ServiceAccount listing more gets its pods denied before any
/// of them is read.
pub(crate) const DEFAULT_MAX_SA_SECRETS: usize = 64;

/// The kinds watched by default: none of them holds a credential. Secrets
/// are fetched when a pod needs them and kept for [`DEFAULT_SECRET_TTL`].
pub(crate) const DEFAULT_WATCHED: [Kind; 3] = [
    Kind::ServiceAccounts,
    Kind::StorageContainers,
    Kind::InferenceServices,
];

/// `--outside-namespaces`: what happens to a pod that needs lookups in a
/// namespace `--namespaces` does not list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutsideNamespaces {
    /// Denied, naming the namespaces served: the pod would otherwise run
    /// without its injection, which fails later and less clearly.
    #[default]
    Deny,
    /// Admitted with no change at all.
    Allow,
}

/// `--streaming-lists`: how a watch cache reads its complete listing, at
/// start and after every watch error. Paged LISTs by default: measured on
/// kube-apiserver 1.36 with 20,000 ServiceAccounts, Secrets and
/// InferenceServices, streaming lists did not lower the webhook's peak
/// (docs/performance.md, "Streaming lists"), since a LIST page is already
/// parsed as it streams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum StreamingLists {
    /// A streaming list (a WATCH that begins with every object,
    /// `sendInitialEvents`) where the API server offers it, paged LISTs
    /// where it refuses one (its WatchList feature off, as by default in
    /// 1.31 and 1.33).
    Auto,
    /// Paged LISTs only.
    #[default]
    Off,
}

/// Which caches to run and how long a fallback GET may take.
#[derive(Debug, Clone)]
pub struct LookupOptions {
    /// Kinds with a watch cache. Secrets not watched are fetched into a
    /// bounded cache with a TTL; other kinds not watched are fetched for
    /// every admission that needs them.
    pub watched: Vec<Kind>,
    pub get_timeout: Duration,
    /// How long a fetched Secret (or its absence) is used.
    pub secret_ttl: Duration,
    /// At most this many fetched Secrets are kept.
    pub secret_cache_entries: NonZeroUsize,
    /// Empty: the whole cluster. Otherwise the only namespaces watched and
    /// read (ClusterStorageContainers, cluster-scoped, stay cluster-wide).
    pub namespaces: BTreeSet<String>,
    /// What a pod needing lookups in another namespace gets.
    pub outside: OutsideNamespaces,
    /// Bytes the watch caches may hold together (`None`: no limit); each
    /// watched kind gets a share, see `budget.rs`.
    pub cache_budget: Option<u64>,
    /// `--max-lookup-object-bytes`: what one object may keep of what
    /// KServe reads; a larger one is not held and its pods are denied.
    pub max_object_bytes: usize,
    /// `--max-service-account-secrets`.
    pub max_sa_secrets: usize,
    /// The bytes admissions' GETs may hold at once, all namespaces together
    /// (`shares.rs`).
    pub lookup_bytes: usize,
    /// Admissions of one namespace reading the API server at once.
    pub namespace_admissions: usize,
    /// How the watch caches list.
    pub streaming_lists: StreamingLists,
}

impl Default for LookupOptions {
    fn default() -> Self {
        Self {
            watched: DEFAULT_WATCHED.to_vec(),
            get_timeout: DEFAULT_GET_TIMEOUT,
            secret_ttl: DEFAULT_SECRET_TTL,
            secret_cache_entries: DEFAULT_SECRET_CACHE_ENTRIES,
            namespaces: BTreeSet::new(),
            outside: OutsideNamespaces::Deny,
            cache_budget: None,
            max_object_bytes: super::wire::DEFAULT_MAX_OBJECT_BYTES,
            max_sa_secrets: DEFAULT_MAX_SA_SECRETS,
            lookup_bytes: super::shares::DEFAULT_LOOKUP_BYTES,
            namespace_admissions: super::shares::DEFAULT_NAMESPACE_ADMISSIONS,
            streaming_lists: StreamingLists::default(),
        }
    }
}

impl LookupOptions {
    /// Every kind watched (the behaviour before Secrets were fetched).
    pub fn watch_all() -> Self {
        Self {
            watched: Kind::ALL.to_vec(),
            ..Self::default()
        }
    }

    /// One watch per scope: each namespace of `namespaces`, or (`None`)
    /// the whole cluster.
    pub(super) fn scopes(&self) -> Vec<Option<String>> {
        if self.namespaces.is_empty() {
            return vec![None];
        }
        self.namespaces.iter().cloned().map(Some).collect()
    }
}
