//! `kserve-injector audit`: for each running InferenceService pod, the pod
//! as it was before admission (its ReplicaSet's pod template) is mutated
//! again with today's config and cluster objects, and the result compared
//! with the running pod (`compare`). Pure: the adapters list the objects
//! (from a cluster or a file) into an [`Inventory`] and print the
//! [`Report`].
//!
//! The inventory keeps only what the audit reads, as compact JSON text: a
//! pod's labels, annotations and spec, a ReplicaSet's template. Ten
//! thousand pods then take tens of MiB, not the hundreds their parsed trees
//! would.

pub(crate) mod compare;
pub(crate) mod credentials;
pub(crate) mod report;
pub(crate) mod upgrade;

use crate::cluster::{LoadedSnapshot, ObjectsLoadError};
use crate::config::Config;
use crate::constants::ISVC_LABEL;
use crate::inputs::Inputs;
use crate::mutation::{mutate_template, MutationError};
use crate::pod_facts::PodFacts;
pub use compare::Rules;
pub(crate) use compare::{DiffKind, Difference};
pub use credentials::CredentialReport;
pub use report::{Report, Row, Status};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
pub use upgrade::{Form, PodRow, Side, Upgrade, UpgradeError, UpgradeReport};
// What one pod's comparison found, named only by tests/core's upgrade checks:
// outside the oracle feature a caller passes `Upgrade::pod`'s result to
// `PodRow::compared` whole.
#[cfg(feature = "oracle")]
pub use upgrade::{Causes, Change, ChangeKind};

/// The ConfigMap KServe's mutator reads, in the controller's namespace.
pub const CONFIG_MAP_NAME: &str = "inferenceservice-config";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnerRef {
    pub kind: String,
    pub name: String,
}

/// A pod the audit will check.
#[derive(Debug)]
pub(crate) struct AuditPod {
    pub namespace: String,
    pub name: String,
    pub owner: Option<OwnerRef>,
    /// `{"metadata":{"labels","annotations"},"spec"}` of the running pod.
    pub body: Box<RawValue>,
}

/// A ReplicaSet whose template has the InferenceService label.
#[derive(Debug)]
struct ReplicaSet {
    owner: Option<OwnerRef>,
    template: Box<RawValue>,
}

/// Everything the audit reads, added one object at a time.
#[derive(Debug, Default)]
pub struct Inventory {
    pods: Vec<AuditPod>,
    replica_sets: HashMap<(String, String), ReplicaSet>,
    deployments: HashSet<(String, String)>,
    /// `inferenceservice-config`'s data, per namespace it was found in.
    configs: BTreeMap<String, BTreeMap<String, String>>,
    /// The objects the injectors look up (ServiceAccounts, Secrets,
    /// ClusterStorageContainers, InferenceServices), and the kinds passed over.
    pub objects: LoadedSnapshot,
    /// `audit --credentials`: every live pod is scanned as it is added,
    /// whatever its labels (`credentials`).
    pub credentials: Option<credentials::CredentialReport>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// An object of the dump or the cluster that has no JSON form.
    #[error("{at}: {source}")]
    Object {
        at: String,
        source: crate::shared_error::SharedError<serde_json::Error>,
    },
    #[error("{at}: {CONFIG_MAP_NAME} data: {source}")]
    ConfigData {
        at: String,
        source: crate::shared_error::SharedError<serde_json::Error>,
    },
    #[error(transparent)]
    Lookup(#[from] ObjectsLoadError),
}

fn text<'v>(doc: &'v Value, pointer: &str) -> &'v str {
    doc.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The controlling owner, as `metadata.ownerReferences` names it.
fn controller(doc: &Value) -> Option<OwnerRef> {
    let refs = doc.pointer("/metadata/ownerReferences")?.as_array()?;
    let owner = (refs
        .iter()
        .find(|r| r.get("controller") == Some(&Value::Bool(true))))
    .or_else(|| refs.first())?;
    Some(OwnerRef {
        kind: text(owner, "/kind").to_string(),
        name: text(owner, "/name").to_string(),
    })
}

fn has_isvc_label(pod_or_template: &Value) -> bool {
    pod_or_template
        .pointer("/metadata/labels")
        .and_then(|l| l.get(ISVC_LABEL))
        .is_some()
}

fn raw(value: &Value, at: &str) -> Result<Box<RawValue>, AuditError> {
    serde_json::value::to_raw_value(value).map_err(|e| AuditError::Object {
        at: at.to_string(),
        source: e.into(),
    })
}

impl Inventory {
    /// Adds one object (not a List: the reader flattens Lists). Pods and
    /// ReplicaSets without the InferenceService label are passed over, so
    /// only the audited ones are kept; `at` names the object in errors.
    pub fn add(&mut self, doc: Value, at: &str) -> Result<(), AuditError> {
        let key = || {
            let namespace = text(&doc, "/metadata/namespace").to_string();
            (namespace, text(&doc, "/metadata/name").to_string())
        };
        if let Some(report) = &mut self.credentials {
            let owner = controller(&doc).map(|o| format!("{}/{}", o.kind, o.name));
            report.add(&doc, owner.as_deref().unwrap_or_default());
        }
        match (text(&doc, "/apiVersion"), text(&doc, "/kind")) {
            ("v1", "Pod") => {
                if has_isvc_label(&doc) {
                    let (namespace, name) = key();
                    let body = json!({
                        "metadata": {
                            "labels": doc.pointer("/metadata/labels"),
                            "annotations": doc.pointer("/metadata/annotations"),
                        },
                        "spec": doc.get("spec"),
                    });
                    let body = raw(&body, at)?;
                    let owner = controller(&doc);
                    self.pods.push(AuditPod {
                        namespace,
                        name,
                        owner,
                        body,
                    });
                }
            }
            ("apps/v1", "ReplicaSet") => {
                if let Some(template) = doc.pointer("/spec/template").filter(|t| has_isvc_label(t))
                {
                    let template = raw(template, at)?;
                    let owner = controller(&doc);
                    self.replica_sets
                        .insert(key(), ReplicaSet { owner, template });
                }
            }
            ("apps/v1", "Deployment") => {
                self.deployments.insert(key());
            }
            ("v1", "ConfigMap") if text(&doc, "/metadata/name") == CONFIG_MAP_NAME => {
                let data = doc.get("data").cloned().unwrap_or(Value::Null);
                let data: BTreeMap<String, String> =
                    serde_json::from_value(data).map_err(|e| AuditError::ConfigData {
                        at: at.to_string(),
                        source: e.into(),
                    })?;
                self.configs.insert(key().0, data);
            }
            _ => self.objects.add_document(&doc, at)?,
        }
        Ok(())
    }

    pub fn pods(&self) -> usize {
        self.pods.len()
    }

    /// `inferenceservice-config`'s data in `namespace`, when it was read.
    pub fn config_data(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.configs.get(namespace)
    }

    /// Audits every pod: `env` carries the config and the controller's
    /// namespace; the cluster objects each pod needs come from the inventory.
    pub fn audit(&self, inputs: &Inputs, rules: &Rules) -> Report {
        let mut order: Vec<&AuditPod> = self.pods.iter().collect();
        order.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let rows = order
            .into_iter()
            .map(|pod| self.audit_pod(pod, inputs, rules))
            .collect();
        Report::new(rows)
    }

    /// The owner to name in the row, and the pod's template, or why there
    /// is none to follow.
    fn template_of(&self, pod: &AuditPod) -> (String, Result<Value, NoTemplate>) {
        let Some(owner) = &pod.owner else {
            return (String::new(), Err(NoTemplate::NoOwner));
        };
        let mut shown = format!("{}/{}", owner.kind, owner.name);
        if owner.kind != "ReplicaSet" {
            return (shown, Err(NoTemplate::NotFollowed(owner.kind.clone())));
        }
        let Some(rs) = self
            .replica_sets
            .get(&(pod.namespace.clone(), owner.name.clone()))
        else {
            return (
                shown,
                Err(NoTemplate::ReplicaSetNotFound(owner.name.clone())),
            );
        };
        if let Some(deploy) = rs.owner.as_ref().filter(|o| o.kind == "Deployment") {
            if self
                .deployments
                .contains(&(pod.namespace.clone(), deploy.name.clone()))
            {
                shown = format!("Deployment/{}", deploy.name);
            }
        }
        let template = parse(&rs.template).map_err(NoTemplate::Unreadable);
        (shown, template)
    }

    fn audit_pod(&self, pod: &AuditPod, inputs: &Inputs, rules: &Rules) -> Row {
        let mut row = Row::new(&pod.namespace, &pod.name);
        let skip = |mut row: Row, reason: String| {
            row.status = Status::Skipped;
            row.reason = Some(reason);
            row
        };
        let (owner, template) = self.template_of(pod);
        row.owner = owner;
        let (template, got) = match (template, parse(&pod.body)) {
            (Ok(t), Ok(g)) => (t, g),
            (Err(reason), _) => return skip(row, reason.to_string()),
            (_, Err(e)) => return skip(row, format!("unreadable: {e}")),
        };
        let facts = PodFacts::from_pod_value(&template, &pod.namespace, &inputs.config);
        let env = inputs.with_cluster(self.objects.data.restrict(&facts, &inputs.config));
        match mutate_template(&template, &pod.namespace, &env) {
            Ok(m) => row.differences = compare::compare(&m.pod, &got, rules),
            Err(MutationError::Inject(e)) => {
                row.reason = Some(format!("the mutator would deny the pod: {e}"));
                row.differences = vec![Difference {
                    path: "(admission)".into(),
                    kind: DiffKind::Changed,
                }];
            }
            Err(e) => return skip(row, format!("template: {e}")),
        }
        row.status = if row.differences.is_empty() {
            Status::Same
        } else {
            Status::Differs
        };
        row
    }

    /// `audit --upgrade-to`: every pod's template under both releases of
    /// `upgrade`, with the cluster objects of the inventory.
    pub fn upgrade(&self, upgrade: &Upgrade) -> UpgradeReport {
        let mut order: Vec<&AuditPod> = self.pods.iter().collect();
        order.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let rows = order
            .into_iter()
            .map(|pod| {
                let (owner, template) = self.template_of(pod);
                let (ns, name) = (&pod.namespace, &pod.name);
                let template = match template {
                    Ok(t) => t,
                    Err(reason) => return PodRow::skipped(ns, name, owner, reason.to_string()),
                };
                let lookup = |facts: &PodFacts, config: &Config| {
                    Ok::<_, std::convert::Infallible>(self.objects.data.restrict(facts, config))
                };
                match upgrade.pod(&template, Form::Template, ns, lookup) {
                    Ok(found) => PodRow::compared(ns, name, owner, found),
                    Err(e) => PodRow::skipped(ns, name, owner, format!("template: {e}")),
                }
            })
            .collect();
        UpgradeReport::new(
            upgrade.current(),
            upgrade.target(),
            upgrade.config_keys(),
            rows,
        )
    }
}

/// Why a pod's template, its form before admission, cannot be followed.
#[derive(Debug, thiserror::Error)]
enum NoTemplate {
    #[error("no owner: nothing records the pod before admission")]
    NoOwner,
    #[error("owned by a {0}: only ReplicaSets are followed")]
    NotFollowed(String),
    #[error("ReplicaSet {0} not found")]
    ReplicaSetNotFound(String),
    #[error("unreadable: {0}")]
    Unreadable(#[source] serde_json::Error),
}

fn parse(raw: &RawValue) -> Result<Value, serde_json::Error> {
    serde_json::from_str(raw.get())
}

#[cfg(test)]
mod tests;
