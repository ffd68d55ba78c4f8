//! What `check` reads from our Deployment (how it runs `serve`: its flags,
//! the Secret and ConfigMaps it mounts) and concludes about its replicas,
//! its PodDisruptionBudget, the KServe release it reproduces and the
//! ConfigMap it reads. Pure: the objects come from the caller.

use super::report::Line;
use crate::server::args::ServeArgs;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, PodSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kserve_injector_core::config::{image_mismatches, release_of_images, Config, ConfigMapData};
use kserve_injector_core::release::Release;
use kserve_injector_core::Settings;
use kube::core::{Selector, SelectorExt};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The container's name in the kustomize base and the chart.
pub(super) const CONTAINER: &str = "kserve-injector";

/// How the Deployment runs `serve`.
#[derive(Debug, Clone, Default)]
pub(super) struct Served {
    /// Its flags, or why they could not be read.
    pub serve_args: Option<ServeArgs>,
    pub unreadable: Option<String>,
    pub service_account: String,
    pub pod_labels: BTreeMap<String, String>,
    /// The Secret mounted where `serve` reads tls.crt, and the key.
    pub serving_secret: Option<(String, String)>,
    /// The ConfigMap mounted at `--config`.
    pub config_map: Option<String>,
    /// The ConfigMap and key mounted at `--config-file`.
    pub settings_file: Option<(String, String)>,
}

impl Served {
    pub(super) fn shadow(&self) -> bool {
        self.serve_args.as_ref().is_some_and(|s| s.shadow.shadow)
    }
}

/// The container's command line from `serve` on, with its
/// `KSERVE_INJECTOR_*` env values as flags where the command line does not
/// give them (as clap would read them in the pod).
fn serve_flags(container: &Container) -> Result<Vec<String>, String> {
    let words: Vec<&String> = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .collect();
    let at = words
        .iter()
        .position(|w| w.as_str() == "serve")
        .ok_or("the container does not run `serve`")?;
    let mut flags: Vec<String> = words[at + 1..].iter().map(|w| w.to_string()).collect();
    for var in container.env.iter().flatten() {
        let (Some(name), Some(value)) = (var.name.strip_prefix("KSERVE_INJECTOR_"), &var.value)
        else {
            continue;
        };
        let flag = format!("--{}", name.to_ascii_lowercase().replace('_', "-"));
        let given = flags
            .iter()
            .any(|f| f == &flag || f.starts_with(&format!("{flag}=")));
        if !given {
            flags.push(format!("{flag}={value}"));
        }
    }
    Ok(flags)
}

/// The volume mounted at or above `path` in `container` (the deepest mount
/// wins), with the path below the mount.
fn mounted<'s>(
    spec: &'s PodSpec,
    container: &Container,
    path: &Path,
) -> Option<(&'s Volume, PathBuf)> {
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| path.starts_with(&m.mount_path))
        .max_by_key(|m| m.mount_path.len())?;
    let rest = path
        .strip_prefix(&mount.mount_path)
        .unwrap_or(Path::new(""))
        .to_path_buf();
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)?;
    Some((volume, rest))
}

fn file_name(rest: &Path, default: &str) -> String {
    match rest.to_str() {
        Some("") | None => default.to_string(),
        Some(text) => text.to_string(),
    }
}

/// How `deployment` runs `serve`.
pub(super) fn served(deployment: &Deployment) -> Served {
    let template = deployment.spec.as_ref().map(|s| &s.template);
    let spec = template.and_then(|t| t.spec.clone()).unwrap_or_default();
    let labels = template
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let mut served = Served {
        service_account: spec
            .service_account_name
            .clone()
            .unwrap_or_else(|| "default".into()),
        pod_labels: labels,
        ..Served::default()
    };
    let container = spec
        .containers
        .iter()
        .find(|c| c.name == CONTAINER)
        .or(spec.containers.first());
    let Some(container) = container else {
        served.unreadable = Some("the Deployment has no container".into());
        return served;
    };
    let serve = match serve_flags(container)
        .and_then(|f| ServeArgs::try_parse_from(&f).map_err(|e| first_line(&e.to_string())))
    {
        Ok(serve) => serve,
        Err(e) => {
            served.unreadable = Some(e);
            return served;
        }
    };
    let cert = serve.tls.cert_file();
    served.serving_secret = mounted(&spec, container, &cert).and_then(|(v, rest)| {
        let name = v.secret.as_ref()?.secret_name.clone()?;
        Some((name, file_name(&rest, "tls.crt")))
    });
    if let Some(path) = &serve.inference_config.inputs.config {
        served.config_map = mounted(&spec, container, path)
            .and_then(|(v, _)| Some(v.config_map.as_ref()?.name.clone()));
    }
    if let Some(path) = &serve.inference_config.inputs.config_file {
        served.settings_file = mounted(&spec, container, path).and_then(|(v, rest)| {
            Some((
                v.config_map.as_ref()?.name.clone(),
                file_name(&rest, "settings.yaml"),
            ))
        });
    }
    served.serve_args = Some(serve);
    served
}

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .to_string()
}

/// The replicas line: none ready is an outage under failurePolicy Fail.
pub(super) fn replicas_line(deployment: &Deployment, name: &str) -> Line {
    const ID: &str = "deployment.replicas";
    let desired = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let status = deployment.status.clone().unwrap_or_default();
    let ready = status.ready_replicas.unwrap_or(0);
    let look = format!("kubectl describe deployment {name} and its pods' events and logs say why (a crash loop names its cause)");
    if ready == 0 {
        return Line::fail(
            ID,
            format!("0 of {desired} replicas ready: no pod answers the webhook, so every InferenceService pod creation fails (no endpoints available for service)"),
            look,
        );
    }
    if ready < desired {
        return Line::warn(ID, format!("{ready} of {desired} replicas ready"), look);
    }
    if desired < 2 {
        return Line::warn(
            ID,
            format!("{ready} of {desired} replica ready: while it restarts, no InferenceService pod can be created"),
            "run at least 2 replicas (Helm: replicas)",
        );
    }
    Line::pass(ID, format!("{ready} of {desired} replicas ready"))
}

/// A PodDisruptionBudget as the check needs it: its name, selector and budget.
#[derive(Debug, Clone)]
pub(super) struct Budget {
    pub name: String,
    pub selector: Option<LabelSelector>,
    pub budget: String,
}

/// Whether a budget covers the Deployment's pods; `None`: the API serves no
/// PodDisruptionBudgets (neither policy/v1 nor v1beta1).
pub(super) fn budget_line(
    budgets: Option<&[Budget]>,
    pod_labels: &BTreeMap<String, String>,
) -> Line {
    const ID: &str = "deployment.podDisruptionBudget";
    let Some(budgets) = budgets else {
        return Line::skip(ID, "the API server serves no PodDisruptionBudgets");
    };
    let covering = budgets.iter().find(|b| {
        let selector = b.selector.clone().and_then(|s| Selector::try_from(s).ok());
        selector.is_some_and(|s| !s.selects_all() && s.matches(pod_labels))
    });
    match covering {
        Some(b) => Line::pass(ID, format!("{} ({}) covers the pods", b.name, b.budget)),
        None => Line::warn(
            ID,
            "no PodDisruptionBudget covers the pods: a node drain may evict every replica at once",
            "add one with maxUnavailable: 1 (the kustomize base has it; Helm: podDisruptionBudget.enabled)",
        ),
    }
}

/// The release `serve` reproduces: its flag, else the settings file's key,
/// else HEAD; with where it came from.
pub(super) fn served_release(
    serve: &ServeArgs,
    file: Option<&Settings>,
) -> (Release, &'static str) {
    match (
        serve.inference_config.inputs.kserve_version(),
        file.and_then(|f| f.kserve_version),
    ) {
        (Some(r), _) => (r, "--kserve-version"),
        (None, Some(r)) => (r, "kserveVersion of --config-file"),
        (None, None) => (Release::Head, "the default"),
    }
}

/// The `--kserve-version` line: the release `serve` runs against the one
/// the cluster's ConfigMap images name (what `audit --upgrade-to` reads).
pub(super) fn release_line(served: (Release, &str), config: Option<&Config>) -> Line {
    const ID: &str = "deployment.kserveVersion";
    let (release, from) = served;
    let Some(config) = config else {
        return Line::skip(ID, format!("serve reproduces KServe {release} ({from}); the cluster's release is unknown while its ConfigMap does not parse"));
    };
    let images = format!(
        "{} and {}",
        config.agent.image, config.storage_initializer.image
    );
    let mismatches = image_mismatches(config, release);
    if !mismatches.is_empty() {
        let cluster = release_of_images(config)
            .map(|r| r.to_string())
            .unwrap_or_else(|_| "another release".into());
        return Line::fail(
            ID,
            format!("serve reproduces KServe {release}'s pod mutator ({from}), but the cluster's inferenceservice-config images ({images}) are KServe {cluster}'s: pods are made as another release makes them"),
            format!("set --kserve-version {cluster} (Helm: server.kserveVersion), the release KServe's controller runs"),
        );
    }
    match release_of_images(config) {
        Ok(_) => Line::pass(ID, format!("serve reproduces KServe {release} ({from}), the release the cluster's images ({images}) name")),
        Err(why) => Line::warn(
            ID,
            format!("serve reproduces KServe {release} ({from}); {why}, so it is not compared"),
            "make sure --kserve-version (Helm: server.kserveVersion) names the release KServe's controller runs",
        ),
    }
}

/// The ConfigMap line: parsed as `release` reads it, with the settings
/// file's storage-initializer defaults.
pub(super) fn config_line(
    name: &str,
    data: Option<&ConfigMapData>,
    release: Release,
    settings: Option<&Settings>,
) -> (Line, Option<Config>) {
    const ID: &str = "config.inferenceservice-config";
    let Some(data) = data else {
        return (
            Line::fail(ID, format!("ConfigMap {name} not found: serve cannot start without the --config it mounts"), "install KServe (its inferenceservice-config) in this namespace, or set the chart's inferenceServiceConfig"),
            None,
        );
    };
    let defaults = settings
        .map(|s| s.storage_initializer.clone())
        .unwrap_or_default();
    match Config::from_data_with(data, &defaults, release) {
        Ok(config) => (Line::pass(ID, format!("{name} parses as KServe {release} reads it")), Some(config)),
        Err(e) => (
            Line::fail(
                ID,
                format!("{name} does not parse as KServe {release} reads it: {e}"),
                "fix the key the message names (`kserve-injector mutate --config <the ConfigMap>` shows the same message); serve keeps its last good config and counts a reload error",
            ),
            Config::from_data(data).ok(),
        ),
    }
}
