//! `kserve-injector check`: proves an install against a live cluster, as
//! `linkerd check` and cert-manager's `cmctl check api` do. It reads our
//! MutatingWebhookConfiguration, Deployment, serving Secret, ConfigMaps,
//! PodDisruptionBudget and KServe's webhook configuration, asks the API
//! server what our ServiceAccount may do (SubjectAccessReviews), makes a
//! TLS handshake with the webhook, and sends a probe pod with `dryRun=All`
//! through the real admission chain. The reads are here; what each check
//! concludes is decided by pure functions in the submodules.

mod args;
mod certs;
mod cluster;
mod probe;
mod rbac;
mod report;
mod serving;
mod tls;
mod webhook;

#[cfg(test)]
mod tests;

pub(crate) use report::{Line, Report};
pub(crate) use webhook::WEBHOOK_NAME;

use crate::lookups::{resolve_client, KubeEnvironment, LookupMode, LookupModeError};
pub use args::CheckArgs;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kserve_injector_core::Settings;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client};
use rustls_pki_types::UnixTime;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Why no check could run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckError {
    /// The runtime the cluster client needs could not start.
    #[error(transparent)]
    Runtime(std::io::Error),
    #[error("no cluster configuration: pass --kubeconfig, set KUBECONFIG, or run in a pod with a service account")]
    NoCluster,
    #[error(transparent)]
    Client(LookupModeError),
}

/// Runs every check; the report says what passed and what failed.
pub(crate) fn run(args: &CheckArgs) -> Result<Report, CheckError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CheckError::Runtime)?;
    runtime.block_on(async {
        let mut environment = KubeEnvironment::from_process(args.kubeconfig.clone());
        if environment.kubeconfig_flag.is_none() && environment.kubeconfig_env.is_none() {
            // As kubectl: ~/.kube/config when nothing else says where.
            let home = std::env::var_os("HOME").map(PathBuf::from);
            let default = home.map(|h| h.join(".kube/config")).filter(|p| p.is_file());
            environment.kubeconfig_flag = default.or(environment.kubeconfig_flag);
        }
        let source = environment
            .detect()
            .map(|s| s.to_string())
            .unwrap_or_default();
        let client = match resolve_client(LookupMode::On, &environment, args.context.as_deref())
            .await
        {
            Ok(Some(client)) => client,
            Ok(None) | Err(LookupModeError::NoConfiguration) => return Err(CheckError::NoCluster),
            Err(e) => return Err(CheckError::Client(e)),
        };
        let version = match client.apiserver_version().await {
            Ok(v) => format!("Kubernetes {}", v.git_version),
            Err(e) => format!("version unknown: {e}"),
        };
        let checks = Checker { client, args }.all().await;
        Ok(Report {
            server: source,
            version,
            namespace: args.namespace.clone(),
            name: args.name.clone(),
            checks,
        })
    })
}

/// `Ok(None)` for a 404.
async fn get<K>(api: &Api<K>, name: &str) -> Result<Option<K>, kube::Error>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.get(name).await {
        Ok(found) => Ok(Some(found)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

fn api_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
        other => other.to_string(),
    }
}

struct Checker<'s> {
    client: Client,
    args: &'s CheckArgs,
}

impl Checker<'_> {
    fn namespaced<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.args.namespace)
    }

    async fn all(&self) -> Vec<Line> {
        let s = self.args;
        let mut lines = Vec::new();
        let deployment = match get(&self.namespaced::<Deployment>(), &s.name).await {
            Ok(d) => d,
            Err(e) => {
                lines.push(Line::fail(
                    "deployment.replicas",
                    format!(
                        "cannot read Deployment {}/{}: {}",
                        s.namespace,
                        s.name,
                        api_error(&e)
                    ),
                    "run check as a user who may read it",
                ));
                None
            }
        };
        let served = deployment.as_ref().map(serving::served);
        let serve = served.as_ref().and_then(|s| s.serve_args.clone());
        let expected = webhook::Expected {
            shadow: served.as_ref().is_some_and(serving::Served::shadow),
            request_timeout: serve
                .as_ref()
                .map(|s| s.limits.request_timeout)
                .unwrap_or(Duration::from_secs(5)),
            request_timeout_from: if serve.is_some() {
                "the Deployment's"
            } else {
                "serve's default"
            }
            .into(),
        };

        let configs: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        let ours = match get(&configs, &s.name).await {
            Ok(found) => found,
            Err(e) => {
                lines.push(Line::fail(
                    "webhook.configuration",
                    format!(
                        "cannot read MutatingWebhookConfiguration {}: {}",
                        s.name,
                        api_error(&e)
                    ),
                    "run check as a user who may read it",
                ));
                None
            }
        };
        let hook = match webhook::our_entry(ours.as_ref(), &s.name) {
            Ok(hook) => {
                lines.push(Line::pass(
                    "webhook.configuration",
                    format!("MutatingWebhookConfiguration {} has {WEBHOOK_NAME}", s.name),
                ));
                let namespaces = self.namespace_labels().await;
                lines.extend(webhook::entry_lines(hook, &expected, &namespaces));
                Some(hook.clone())
            }
            Err(line) => {
                if !lines.iter().any(|l| l.id == "webhook.configuration") {
                    lines.push(line);
                }
                None
            }
        };

        if let Some(hook) = &hook {
            lines.extend(self.certificate_lines(hook, served.as_ref()).await);
        }

        match (&deployment, &served) {
            (Some(d), Some(served)) => lines.extend(self.deployment_lines(d, served).await),
            (None, _) if !lines.iter().any(|l| l.id == "deployment.replicas") => {
                lines.push(Line::fail(
                    "deployment.replicas",
                    format!(
                        "Deployment {}/{} not found: nothing serves the webhook",
                        s.namespace, s.name
                    ),
                    "install kserve-injector, or pass --namespace and --name of the install",
                ))
            }
            _ => {}
        }

        if let (Some(hook), Some(served)) = (&hook, &served) {
            lines.extend(self.pod_security_line(hook, served).await);
        }
        lines.push(self.image_volume_line(served.as_ref()).await);
        lines.push(self.kserve_mutator_line(expected.shadow).await);
        if let Some(served) = &served {
            lines.push(self.rbac_line(served).await);
        }
        lines.push(match &hook {
            Some(_) => self.dry_run(expected.shadow).await,
            None => Line::skip(
                "endToEnd.dryRun",
                "no webhook configuration to send a pod to",
            ),
        });
        lines
    }

    /// kube-system's and our namespace's labels, as the namespaceSelector sees them.
    async fn namespace_labels(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let mut out = BTreeMap::new();
        for name in ["kube-system", self.args.namespace.as_str()] {
            let read = get(&api, name)
                .await
                .ok()
                .flatten()
                .and_then(|n| n.metadata.labels);
            out.insert(name.to_string(), webhook::namespace_labels(name, read));
        }
        out
    }

    async fn certificate_lines(
        &self,
        hook: &k8s_openapi::api::admissionregistration::v1::MutatingWebhook,
        served: Option<&serving::Served>,
    ) -> Vec<Line> {
        let mut lines = Vec::new();
        let bundle = match certs::bundle(
            hook.client_config
                .ca_bundle
                .as_ref()
                .map(|b| b.0.as_slice()),
        ) {
            Ok(bundle) => bundle,
            Err(line) => return vec![line],
        };
        let Some(target) = webhook::target(hook) else {
            return vec![Line::fail(
                "webhook.caBundle",
                "the entry's clientConfig has neither a service nor an https URL",
                "give clientConfig a service (or an https:// url)",
            )];
        };
        let now = UnixTime::now();
        let secret = served.and_then(|s| s.serving_secret.clone());
        match secret {
            None => lines.push(Line::skip("webhook.caBundle", "the Deployment mounts no Secret where serve reads tls.crt; the handshake below checks the caBundle")),
            Some((name, key)) => {
                let shown = format!("{}/{name}", self.args.namespace);
                match get(&self.namespaced::<Secret>(), &name).await {
                    Ok(Some(secret)) => {
                        let pem = secret.data.as_ref().and_then(|d| d.get(&key)).map(|b| b.0.clone());
                        match pem.map(|p| crate::certs::certificates(&p)) {
                            Some(Ok(chain)) => {
                                lines.push(certs::ca_bundle_line(&bundle, &chain, &shown, &target.host(), now));
                                lines.push(certs::names_line(&chain, &target.host(), &target.to_string()));
                                lines.push(certs::lifetime_line(&chain, now));
                            }
                            Some(Err(e)) => lines.push(Line::fail("webhook.caBundle", format!("{key} of Secret {shown} is not a PEM certificate: {e}"), "write the serving certificate there (cert-manager, or kserve-injector certs)")),
                            None => lines.push(Line::fail("webhook.caBundle", format!("Secret {shown} has no {key}: serve has no certificate to serve"), "write the serving certificate there (cert-manager, or kserve-injector certs)")),
                        }
                    }
                    Ok(None) => lines.push(Line::fail("webhook.caBundle", format!("Secret {shown}, which the Deployment mounts, does not exist: its pods cannot start"), "cert-manager: kubectl describe certificate; static certificates: apply the overlay with its certs/")),
                    Err(e) => lines.push(Line::warn("webhook.caBundle", format!("cannot read Secret {shown}: {}; the handshake below checks the caBundle", api_error(&e)), "run check as a user who may get that Secret (helm test's role may)")),
                }
            }
        }
        lines.push(tls::handshake_line(&bundle, &target, self.args.timeout).await);
        lines
    }

    async fn deployment_lines(
        &self,
        deployment: &Deployment,
        served: &serving::Served,
    ) -> Vec<Line> {
        let s = self.args;
        let mut lines = vec![serving::replicas_line(deployment, &s.name)];
        lines.push(serving::budget_line(
            self.budgets().await.as_deref(),
            &served.pod_labels,
        ));
        let Some(serve) = &served.serve_args else {
            lines.push(Line::fail(
                "config.inferenceservice-config",
                format!("cannot read how the Deployment runs serve: {}", served.unreadable.clone().unwrap_or_default()),
                "the Deployment's container must run `serve` with flags this version of kserve-injector knows",
            ));
            return lines;
        };
        let file = self.settings_file(served).await;
        let release = serving::served_release(serve, file.as_ref());
        match &served.config_map {
            None if serve.inference_config.inputs.config.is_none() => {
                lines.push(Line::skip(
                    "config.inferenceservice-config",
                    format!(
                        "serve runs without --config, on KServe {}'s shipped defaults",
                        release.0
                    ),
                ));
                lines.push(serving::release_line(release, None));
            }
            None => lines.push(Line::fail(
                "config.inferenceservice-config",
                "no ConfigMap is mounted where serve's --config points",
                "mount KServe's inferenceservice-config at the --config path",
            )),
            Some(map) => {
                let data = match get(&self.namespaced::<ConfigMap>(), map).await {
                    Ok(found) => found.map(|cm| cm.data.unwrap_or_default()),
                    Err(e) => {
                        lines.push(Line::warn(
                            "config.inferenceservice-config",
                            format!(
                                "cannot read ConfigMap {}/{map}: {}",
                                s.namespace,
                                api_error(&e)
                            ),
                            "run check as a user who may read it",
                        ));
                        return lines;
                    }
                };
                let shown = format!("{}/{map}", s.namespace);
                let (line, config) =
                    serving::config_line(&shown, data.as_ref(), release.0, file.as_ref());
                lines.push(line);
                lines.push(serving::release_line(release, config.as_ref()));
            }
        }
        lines
    }

    /// serve's settings file (`--config-file`), from the ConfigMap mounted
    /// there; `None` without one or when it cannot be read.
    async fn settings_file(&self, served: &serving::Served) -> Option<Settings> {
        let (map, key) = served.settings_file.as_ref()?;
        let cm = get(&self.namespaced::<ConfigMap>(), map).await.ok()??;
        Settings::from_text(cm.data.as_ref()?.get(key)?).ok()
    }

    /// A dry-run PodTemplate with an image volume in our namespace (what
    /// serve asks at start), against what serve's settings file gives pods.
    async fn image_volume_line(&self, served: Option<&serving::Served>) -> Line {
        let file = match served {
            Some(served) => self.settings_file(served).await,
            None => None,
        };
        let model_volume = file.as_ref().and_then(|f| f.model_volume.as_ref());
        let asked = (model_volume.is_some_and(|v| v.image.is_some())).then_some(
            "serve's settings file gives the model volume an image source (modelVolume.image)",
        );
        let kept = crate::server::image_volumes::dry_run(&self.namespaced()).await;
        cluster::image_volume_line(&kept, asked)
    }

    /// The namespaces the webhook serves (its namespaceSelector, and
    /// serve's --namespaces) that enforce the restricted Pod Security
    /// Standard, against serve's --security-profile.
    async fn pod_security_line(
        &self,
        hook: &k8s_openapi::api::admissionregistration::v1::MutatingWebhook,
        served: &serving::Served,
    ) -> Option<Line> {
        let serve = served.serve_args.as_ref()?;
        let api: Api<Namespace> = Api::all(self.client.clone());
        let params = ListParams::default().labels("pod-security.kubernetes.io/enforce=restricted");
        let list = match api.list(&params).await {
            Ok(list) => list,
            Err(e) => {
                return Some(Line::warn(
                    cluster::POD_SECURITY,
                    format!("cannot list namespaces: {}", api_error(&e)),
                    "run check as a user who may list them",
                ))
            }
        };
        let only = &serve.lookups.namespaces;
        let restricted: Vec<String> = (list.items.into_iter())
            .filter_map(|n| {
                let name = n.metadata.name?;
                let labels = webhook::namespace_labels(&name, n.metadata.labels);
                let selected = webhook::selects(hook.namespace_selector.as_ref(), &labels);
                let served = only.is_empty() || only.contains(&name);
                (selected.unwrap_or(false) && served).then_some(name)
            })
            .collect();
        let profile = serve.inference_config.inputs.security_profile;
        Some(cluster::pod_security_line(profile, &restricted))
    }

    /// The PodDisruptionBudgets of our namespace (policy/v1, else
    /// v1beta1); `None` when neither is served.
    async fn budgets(&self) -> Option<Vec<serving::Budget>> {
        let budget = |max: Option<String>, min: Option<String>| match (min, max) {
            (Some(min), _) => format!("minAvailable {min}"),
            (None, Some(max)) => format!("maxUnavailable {max}"),
            (None, None) => "no budget".to_string(),
        };
        let text = |v: &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString| match v {
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(i) => i.to_string(),
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s) => s.clone(),
        };
        match self
            .namespaced::<PodDisruptionBudget>()
            .list(&ListParams::default())
            .await
        {
            Ok(list) => {
                return Some(
                    list.items
                        .into_iter()
                        .map(|p| {
                            let spec = p.spec.unwrap_or_default();
                            serving::Budget {
                                name: p.metadata.name.unwrap_or_default(),
                                selector: spec.selector,
                                budget: budget(
                                    spec.max_unavailable.as_ref().map(text),
                                    spec.min_available.as_ref().map(text),
                                ),
                            }
                        })
                        .collect(),
                )
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(_) => return None,
        }
        // Kubernetes before 1.21 serves policy/v1beta1 only.
        let gvk = GroupVersionKind::gvk("policy", "v1beta1", "PodDisruptionBudget");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "poddisruptionbudgets");
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &self.args.namespace, &resource);
        let list = api.list(&ListParams::default()).await.ok()?;
        Some(
            list.items
                .into_iter()
                .map(|p| {
                    let spec = &p.data["spec"];
                    let field = |k: &str| {
                        spec.get(k)
                            .filter(|v| !v.is_null())
                            .map(|v| v.to_string().trim_matches('"').to_string())
                    };
                    serving::Budget {
                        name: p.metadata.name.unwrap_or_default(),
                        selector: serde_json::from_value(spec["selector"].clone()).ok(),
                        budget: budget(field("maxUnavailable"), field("minAvailable")),
                    }
                })
                .collect(),
        )
    }

    async fn kserve_mutator_line(&self, shadow: bool) -> Line {
        let api: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                let others: Vec<MutatingWebhookConfiguration> = list
                    .items
                    .into_iter()
                    .filter(|c| c.metadata.name.as_deref() != Some(self.args.name.as_str()))
                    .collect();
                webhook::kserve_mutator_line(
                    &webhook::kserve_mutator_configurations(&others),
                    shadow,
                )
            }
            Err(e) => Line::warn(
                "kserve.podMutator",
                format!(
                    "cannot list MutatingWebhookConfigurations: {}",
                    api_error(&e)
                ),
                "run check as a user who may list them",
            ),
        }
    }

    async fn rbac_line(&self, served: &serving::Served) -> Line {
        let Some(serve) = &served.serve_args else {
            return Line::skip("rbac.lookups", "serve's flags could not be read");
        };
        let user = format!(
            "system:serviceaccount:{}:{}",
            self.args.namespace, served.service_account
        );
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let mut results = Vec::new();
        for access in rbac::needed(&serve.lookups) {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.clone()),
                    groups: Some(vec![
                        "system:serviceaccounts".into(),
                        format!("system:serviceaccounts:{}", self.args.namespace),
                        "system:authenticated".into(),
                    ]),
                    resource_attributes: Some(ResourceAttributes {
                        verb: Some(access.verb.into()),
                        group: Some(access.group.into()),
                        resource: Some(access.resource.into()),
                        namespace: access.namespace.clone(),
                        ..ResourceAttributes::default()
                    }),
                    ..SubjectAccessReviewSpec::default()
                },
                ..SubjectAccessReview::default()
            };
            let answer = api.create(&PostParams::default(), &review).await;
            let verdict = match answer {
                Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => rbac::Verdict::Allowed,
                Ok(_) => rbac::Verdict::Denied,
                Err(e) => rbac::Verdict::Unknown(api_error(&e)),
            };
            results.push((access, verdict));
        }
        rbac::rbac_line(
            &format!(
                "ServiceAccount {}/{}",
                self.args.namespace, served.service_account
            ),
            &results,
        )
    }

    async fn dry_run(&self, shadow: bool) -> Line {
        let namespace = &self.args.probe_namespace;
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let params = PostParams {
            dry_run: true,
            field_manager: Some("kserve-injector-check".into()),
        };
        let sent = tokio::time::timeout(
            self.args.timeout + Duration::from_secs(30),
            pods.create(&params, &probe::probe_pod(namespace)),
        )
        .await;
        let answer = match sent {
            Err(_) => probe::DryRun::Failed("no answer from the API server".into()),
            Ok(Ok(pod)) => probe::DryRun::Admitted(Box::new(pod)),
            Ok(Err(kube::Error::Api(status))) => probe::DryRun::Refused {
                code: status.code,
                message: status.message,
            },
            Ok(Err(e)) => probe::DryRun::Failed(e.to_string()),
        };
        probe::dry_run_line(&answer, namespace, shadow)
    }
}
