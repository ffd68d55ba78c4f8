//! `audit --kubeconfig`: the objects read from a cluster, one paginated
//! LIST per kind (no GET per pod), plus one GET of `inferenceservice-config`.

use crate::audit::{Inventory, CONFIG_MAP_NAME};
use crate::lookups::{inference_service_resource, storage_container_resource};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Debug;

/// Items per LIST page.
const PAGE: u32 = 500;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ListError {
    #[error("cannot list {what}: {source}")]
    List { what: String, source: kube::Error },
    #[error(transparent)]
    Object(#[from] crate::audit::AuditError),
    #[error("cannot read {CONFIG_MAP_NAME} in namespace {namespace}: {source}")]
    Config {
        namespace: String,
        source: kube::Error,
    },
}

/// Which namespaces the audit covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    All,
    Namespace(String),
}

impl Scope {
    fn api<K>(&self, client: &Client) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match self {
            Scope::All => Api::all(client.clone()),
            Scope::Namespace(ns) => Api::namespaced(client.clone(), ns),
        }
    }

    fn dynamic(&self, client: &Client, resource: &ApiResource) -> Api<DynamicObject> {
        match self {
            Scope::All => Api::all_with(client.clone(), resource),
            Scope::Namespace(ns) => Api::namespaced_with(client.clone(), ns, resource),
        }
    }
}

/// Lists every kind the audit reads into `inventory`; the config comes
/// from `controller_namespace`. A CRD that is not installed lists nothing.
pub(crate) async fn list_into(
    client: &Client,
    scope: &Scope,
    controller_namespace: &str,
    inventory: &mut Inventory,
) -> Result<(), ListError> {
    let typed = |kind: &str, api_version: &str| (kind.to_string(), api_version.to_string());
    list(scope.api::<Pod>(client), typed("Pod", "v1"), inventory).await?;
    list(
        scope.api::<ReplicaSet>(client),
        typed("ReplicaSet", "apps/v1"),
        inventory,
    )
    .await?;
    list(
        scope.api::<Deployment>(client),
        typed("Deployment", "apps/v1"),
        inventory,
    )
    .await?;
    list(
        scope.api::<ServiceAccount>(client),
        typed("ServiceAccount", "v1"),
        inventory,
    )
    .await?;
    list(
        scope.api::<Secret>(client),
        typed("Secret", "v1"),
        inventory,
    )
    .await?;
    let isvc = inference_service_resource();
    let csc = storage_container_resource();
    for (api, resource) in [
        (scope.dynamic(client, &isvc), &isvc),
        (Api::all_with(client.clone(), &csc), &csc),
    ] {
        let kind = typed(&resource.kind, &resource.api_version);
        match list(api, kind, inventory).await {
            Err(ListError::List { source, .. }) if not_installed(&source) => {}
            other => other?,
        }
    }
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), controller_namespace);
    let config = configs
        .get(CONFIG_MAP_NAME)
        .await
        .map_err(|source| ListError::Config {
            namespace: controller_namespace.to_string(),
            source,
        })?;
    add(inventory, &config, ("ConfigMap", "v1"), "ConfigMap")?;
    Ok(())
}

/// `audit --credentials`: the pods only (no config or lookups needed).
pub(crate) async fn list_pods_into(
    client: &Client,
    scope: &Scope,
    inventory: &mut Inventory,
) -> Result<(), ListError> {
    let kind = ("Pod".to_string(), "v1".to_string());
    list(scope.api::<Pod>(client), kind, inventory).await
}

fn not_installed(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 404)
}

/// Pages through one kind. List items carry no kind, so it is set here.
async fn list<K>(
    api: Api<K>,
    (kind, api_version): (String, String),
    inventory: &mut Inventory,
) -> Result<(), ListError>
where
    K: Clone + DeserializeOwned + Debug + Serialize,
{
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await.map_err(|source| ListError::List {
            what: format!("{kind}s"),
            source,
        })?;
        for item in &page.items {
            add(inventory, item, (&kind, &api_version), &kind)?;
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}

fn add(
    inventory: &mut Inventory,
    item: &impl Serialize,
    (kind, api_version): (&str, &str),
    label: &str,
) -> Result<(), ListError> {
    let mut value = serde_json::to_value(item).map_err(|e| crate::audit::AuditError::Object {
        at: label.to_string(),
        source: e.into(),
    })?;
    if let Value::Object(map) = &mut value {
        map.insert("kind".into(), Value::String(kind.to_string()));
        map.insert("apiVersion".into(), Value::String(api_version.to_string()));
    }
    let at = format!(
        "{label} {}",
        value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    );
    Ok(inventory.add(value, &at)?)
}
