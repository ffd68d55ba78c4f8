//! `kserve-injector audit`: the adapters around the core's audit. The
//! objects come from a dump ([`dump`]) or a cluster ([`cluster`]); the
//! comparison and the report are the core's ([`kserve_injector_core::audit`]).

pub(crate) use kserve_injector_core::audit::CredentialReport;
pub(crate) use kserve_injector_core::audit::*;

mod args;
pub(crate) mod cluster;
pub(crate) mod dump;
mod upgrade_to;

pub(crate) use upgrade_to::run_upgrade;

use crate::files;
use crate::lookups::{resolve_client, KubeEnvironment, LookupMode};
pub use args::AuditArgs;
use kserve_injector_core::config::Config;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

/// Why the audit could not run (exit code 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error("--objects {path}: {source}")]
    ObjectsOpen {
        path: String,
        source: std::io::Error,
    },
    #[error("--objects {path}: {source}")]
    Objects {
        path: String,
        source: Box<dump::DumpError>,
    },
    /// The runtime the cluster client needs could not start.
    #[error(transparent)]
    Runtime(std::io::Error),
    #[error("no cluster configuration: pass --kubeconfig or --objects")]
    NoCluster,
    #[error(transparent)]
    Client(crate::lookups::LookupModeError),
    #[error(transparent)]
    List(#[from] cluster::ListError),
    /// The settings file or `--config`.
    #[error(transparent)]
    Config(#[from] files::LoadError),
    #[error("{CONFIG_MAP_NAME}: {0}")]
    ClusterConfig(#[source] kserve_injector_core::config::ConfigError),
    #[error("no {CONFIG_MAP_NAME} ConfigMap in namespace {namespace:?} (see --controller-namespace, or pass --config)")]
    NoConfigMap { namespace: String },
    /// `--upgrade-to`: the current ConfigMap as the current release reads it.
    #[error("the current ConfigMap, as KServe {release} reads it: {source}")]
    AsRelease {
        release: kserve_injector_core::release::Release,
        source: kserve_injector_core::config::ConfigError,
    },
    /// `--upgrade-to` without a release named, and none told by the ConfigMap.
    #[error("which KServe release does the cluster run? {why}: pass --kserve-version (or kserveVersion in --config-file)")]
    UnknownRelease { why: UnknownRelease },
}

/// Why the ConfigMap does not tell the release the cluster runs.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UnknownRelease {
    #[error("its ConfigMap is unreadable ({0})")]
    Unreadable(#[source] kserve_injector_core::config::ConfigError),
    #[error(transparent)]
    Images(kserve_injector_core::config::ReleaseOfImagesError),
}

/// `audit --credentials`: reads the pods and gives what the scan found.
pub(crate) fn run_credentials(args: &AuditArgs) -> Result<CredentialReport, RunError> {
    let mut inventory = Inventory::default();
    inventory.credentials = Some(CredentialReport {
        only_namespace: args.namespace.clone().filter(|_| args.objects.is_some()),
        ..CredentialReport::default()
    });
    match (&args.objects, args.all_namespaces, &args.namespace) {
        (Some(path), ..) => read_dump(path, &mut inventory, args.budget.budget())?,
        (None, true, _) => read_cluster(args, cluster::Scope::All, &mut inventory)?,
        (None, false, ns) => {
            let scope = cluster::Scope::Namespace(ns.clone().unwrap_or_default());
            read_cluster(args, scope, &mut inventory)?
        }
    }
    let mut report = inventory.credentials.unwrap_or_default();
    report.finish();
    Ok(report)
}

/// Reads the objects, audits, and gives the report.
pub(crate) fn run(args: &AuditArgs) -> Result<Report, RunError> {
    let mut inventory = Inventory::default();
    read_objects(args, &mut inventory)?;
    let flags = &args.inputs;
    let settings = flags.settings()?;
    let config = match &flags.config {
        Some(path) => files::load_config(Some(path), &settings, flags.kserve_version())?,
        None => {
            let data = cluster_config(&inventory, &args.controller_namespace)?;
            Config::from_data_with(
                data,
                &settings.storage_initializer,
                flags.release(&settings),
            )
            .map_err(RunError::ClusterConfig)?
        }
    };
    let mut inputs = flags.inputs(config, &settings);
    inputs.controller_namespace = args.controller_namespace.clone();
    let mut rules = Rules::default();
    rules.sidecars.extend(args.ignore_container.iter().cloned());
    let mut report = inventory.audit(&inputs, &rules);
    if let Some(ns) = dump_namespace(args) {
        report = Report::new(
            report
                .pods
                .into_iter()
                .filter(|r| r.namespace == ns)
                .collect(),
        );
    }
    Ok(report)
}

/// The dump's or the cluster's `inferenceservice-config` data.
fn cluster_config<'i>(
    inventory: &'i Inventory,
    namespace: &str,
) -> Result<&'i kserve_injector_core::config::ConfigMapData, RunError> {
    inventory
        .config_data(namespace)
        .ok_or_else(|| RunError::NoConfigMap {
            namespace: namespace.to_string(),
        })
}

/// The namespace to keep of a dump (`-n` with `--objects`; a cluster is
/// listed in that namespace only).
fn dump_namespace(args: &AuditArgs) -> Option<&str> {
    args.namespace.as_deref().filter(|_| args.objects.is_some())
}

/// The dump, or the cluster in the namespaces of `-n`/`-A`, into `inventory`.
fn read_objects(args: &AuditArgs, inventory: &mut Inventory) -> Result<(), RunError> {
    let scope = match (&args.objects, args.all_namespaces, &args.namespace) {
        (Some(path), ..) => {
            read_dump(path, inventory, args.budget.budget())?;
            None
        }
        (None, true, _) => Some(cluster::Scope::All),
        (None, false, ns) => Some(cluster::Scope::Namespace(ns.clone().unwrap_or_default())),
    };
    if let Some(scope) = scope {
        read_cluster(args, scope, inventory)?;
    }
    for line in inventory.objects.ignored_lines() {
        tracing::debug!("{}", crate::log_text::bounded(line));
    }
    Ok(())
}

fn read_dump(
    path: &std::path::Path,
    inventory: &mut Inventory,
    budget: kserve_injector_core::reader::Budget,
) -> Result<(), RunError> {
    let failed = |source| RunError::Objects {
        path: path.display().to_string(),
        source: Box::new(source),
    };
    if path.as_os_str() == "-" {
        return dump::read_into(&mut std::io::stdin().lock(), inventory, budget).map_err(failed);
    }
    let file = File::open(path).map_err(|source| RunError::ObjectsOpen {
        path: path.display().to_string(),
        source,
    })?;
    dump::read_into(
        &mut BufReader::with_capacity(1 << 16, file),
        inventory,
        budget,
    )
    .map_err(failed)
}

fn read_cluster(
    args: &AuditArgs,
    scope: cluster::Scope,
    inventory: &mut Inventory,
) -> Result<(), RunError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    runtime.block_on(async {
        let mut environment = KubeEnvironment::from_process(args.kubeconfig.clone());
        if environment.kubeconfig_flag.is_none() && environment.kubeconfig_env.is_none() {
            // As kubectl: ~/.kube/config when nothing else says where.
            let home = std::env::var_os("HOME").map(PathBuf::from);
            let default = home.map(|h| h.join(".kube/config")).filter(|p| p.is_file());
            environment.kubeconfig_flag = default.or(environment.kubeconfig_flag);
        }
        let client =
            match resolve_client(LookupMode::On, &environment, args.context.as_deref()).await {
                Ok(Some(client)) => client,
                Ok(None) | Err(crate::lookups::LookupModeError::NoConfiguration) => {
                    return Err(RunError::NoCluster)
                }
                Err(e) => return Err(RunError::Client(e)),
            };
        let scope = match scope {
            cluster::Scope::Namespace(ns) if ns.is_empty() => {
                cluster::Scope::Namespace(client.default_namespace().to_string())
            }
            other => other,
        };
        if args.credentials {
            return Ok(cluster::list_pods_into(&client, &scope, inventory).await?);
        }
        Ok(cluster::list_into(&client, &scope, &args.controller_namespace, inventory).await?)
    })
}
