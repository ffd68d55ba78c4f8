//! `audit --upgrade-to`'s result: per pod what changes and why, the
//! changes summed over the pods by kind, the ConfigMap keys read
//! differently, and how many pods each compatibility row reaches; as a
//! table or JSON.

use super::changes::{Causes, Change, ChangeKind};
use super::keys::KeyReading;
use super::PodChanges;
use crate::release::Release;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;

/// Whether the releases admit the pod, when either denies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Admission {
    /// The current release's denial; `None`: it admits the pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// The target release's denial, with KServe's message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Why the two differ (empty when both deny alike).
    pub causes: Causes,
}

impl Admission {
    pub(super) fn new(current: Option<&String>, target: Option<&String>, causes: Causes) -> Self {
        Self {
            current: current.cloned(),
            target: target.cloned(),
            causes,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum UpgradeStatus {
    Same,
    Changes,
    /// The target release denies the pod.
    Denied,
    /// The target release admits a pod the current one denies.
    Admitted,
    Skipped,
}

impl UpgradeStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            UpgradeStatus::Same => "same",
            UpgradeStatus::Changes => "changes",
            UpgradeStatus::Denied => "denied",
            UpgradeStatus::Admitted => "admitted",
            UpgradeStatus::Skipped => "skipped",
        }
    }
}

#[derive(Debug, Serialize)]
pub struct PodRow {
    pub namespace: String,
    pub(crate) pod: String,
    /// `Kind/name` of the workload the template came from.
    pub(crate) owner: String,
    pub(crate) status: UpgradeStatus,
    /// Why the pod was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) admission: Option<Admission>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) changes: Vec<Change>,
}

impl PodRow {
    /// A row for a compared pod, its status from what changed.
    pub fn compared(namespace: &str, pod: &str, owner: String, found: PodChanges) -> Self {
        let PodChanges { changes, admission } = found;
        let status = match &admission {
            Some(a) if a.target.is_some() => UpgradeStatus::Denied,
            Some(_) => UpgradeStatus::Admitted,
            None if changes.is_empty() => UpgradeStatus::Same,
            None => UpgradeStatus::Changes,
        };
        Self {
            namespace: namespace.to_string(),
            pod: pod.to_string(),
            owner,
            status,
            reason: None,
            admission,
            changes,
        }
    }

    pub fn skipped(namespace: &str, pod: &str, owner: String, reason: String) -> Self {
        Self {
            namespace: namespace.to_string(),
            pod: pod.to_string(),
            owner,
            status: UpgradeStatus::Skipped,
            reason: Some(reason),
            admission: None,
            changes: Vec::new(),
        }
    }

    /// Every row that explains something of this pod.
    pub(super) fn rows(&self) -> Vec<&'static str> {
        let admission = self.admission.iter().map(|a| &a.causes);
        let mut rows: Vec<&'static str> = (self.changes.iter().map(|c| &c.causes))
            .chain(admission)
            .flat_map(|c| c.rows.iter().copied())
            .collect();
        rows.sort_by_key(|r| super::attribute::row_number(r));
        rows.dedup();
        rows
    }

    fn unexplained(&self) -> usize {
        let admission = self.admission.iter().map(|a| &a.causes);
        (self.changes.iter().map(|c| &c.causes))
            .chain(admission)
            .filter(|c| c.unexplained)
            .count()
    }
}

/// One kind of change, and on how many pods.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ChangeCount {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub init: bool,
    pub field: String,
    pub kind: ChangeKind,
    pub causes: Causes,
    pub pods: usize,
}

/// A compatibility row, and how many pods it changes (or denies).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct RowCount {
    pub row: &'static str,
    pub pods: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub(crate) struct UpgradeTotals {
    pub pods: usize,
    pub same: usize,
    pub changes: usize,
    pub denied: usize,
    pub admitted: usize,
    pub skipped: usize,
    /// Changes (and denials) no row or ConfigMap key explains.
    pub unexplained: usize,
}

fn release_name<S: Serializer>(release: &Release, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(release.as_str())
}

#[derive(Debug, Serialize)]
pub struct UpgradeReport {
    #[serde(serialize_with = "release_name")]
    pub from: Release,
    #[serde(serialize_with = "release_name")]
    pub to: Release,
    pub(crate) totals: UpgradeTotals,
    pub config: Vec<KeyReading>,
    pub(crate) rows: Vec<RowCount>,
    pub(crate) changes: Vec<ChangeCount>,
    pub pods: Vec<PodRow>,
}

impl UpgradeReport {
    pub fn new(from: Release, to: Release, config: Vec<KeyReading>, pods: Vec<PodRow>) -> Self {
        let mut totals = UpgradeTotals {
            pods: pods.len(),
            ..UpgradeTotals::default()
        };
        let mut kinds: BTreeMap<(Option<&str>, bool, &str, ChangeKind, &Causes), usize> =
            BTreeMap::new();
        let mut rows: BTreeMap<(u32, u32), RowCount> = BTreeMap::new();
        for pod in &pods {
            *match pod.status {
                UpgradeStatus::Same => &mut totals.same,
                UpgradeStatus::Changes => &mut totals.changes,
                UpgradeStatus::Denied => &mut totals.denied,
                UpgradeStatus::Admitted => &mut totals.admitted,
                UpgradeStatus::Skipped => &mut totals.skipped,
            } += 1;
            totals.unexplained += pod.unexplained();
            for c in &pod.changes {
                let key = (
                    c.container.as_deref(),
                    c.init,
                    c.field.as_str(),
                    c.kind,
                    &c.causes,
                );
                *kinds.entry(key).or_default() += 1;
            }
            for row in pod.rows() {
                let count = rows.entry(super::attribute::row_number(row));
                count.or_insert(RowCount { row, pods: 0 }).pods += 1;
            }
        }
        let mut changes: Vec<ChangeCount> = (kinds.into_iter())
            .map(
                |((container, init, field, kind, causes), pods)| ChangeCount {
                    container: container.map(str::to_string),
                    init,
                    field: field.to_string(),
                    kind,
                    causes: causes.clone(),
                    pods,
                },
            )
            .collect();
        // Most widespread first; ties as sorted above.
        changes.sort_by_key(|c| std::cmp::Reverse(c.pods));
        Self {
            from,
            to,
            totals,
            config,
            rows: rows.into_values().collect(),
            changes,
            pods,
        }
    }

    /// Whether any pod changes, is denied or newly admitted (exit 1).
    pub fn flagged(&self) -> bool {
        let t = &self.totals;
        t.changes + t.denied + t.admitted > 0
    }
}
