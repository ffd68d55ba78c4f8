//! `audit --credentials`: which live pods carry, as a literal env value,
//! a variable KServe's credential builders fill from a Secret
//! ([`crate::cluster::secret_env_names`]). Such a value sits in the pod
//! spec (readable by anyone who can read the pod, kept in etcd unencrypted
//! by Secret encryption) instead of a Secret (kserve#4674). The report names
//! the pod, its owner, the container and the variable; it never holds the
//! value, so it cannot print it.

use crate::cluster::secret_env_names;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write;

/// One variable of one container carrying a literal value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub namespace: String,
    pub pod: String,
    /// `Kind/name` of the pod's controlling owner; empty without one.
    pub owner: String,
    pub container: String,
    pub env: String,
}

/// What the scan saw and found, in namespace, pod, container order.
#[derive(Debug, Default, Serialize)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
#[serde(rename_all = "camelCase")]
pub struct CredentialReport {
    pub pods_scanned: usize,
    pub findings: Vec<Finding>,
    /// Scan only this namespace's pods (a dump of several, `-n`).
    #[serde(skip)]
    pub only_namespace: Option<String>,
}

impl CredentialReport {
    /// Scans one object; anything but a live Pod (one that has not
    /// Succeeded or Failed) is passed over.
    pub fn add(&mut self, doc: &Value, owner: &str) {
        let text = |p: &str| doc.pointer(p).and_then(Value::as_str).unwrap_or_default();
        if (text("/apiVersion"), text("/kind")) != ("v1", "Pod")
            || matches!(text("/status/phase"), "Succeeded" | "Failed")
        {
            return;
        }
        if (self.only_namespace.as_deref()).is_some_and(|ns| ns != text("/metadata/namespace")) {
            return;
        }
        self.pods_scanned += 1;
        let names = secret_env_names();
        for list in ["initContainers", "containers", "ephemeralContainers"] {
            let containers = doc
                .pointer(&format!("/spec/{list}"))
                .and_then(Value::as_array);
            for c in containers.into_iter().flatten() {
                let env = c.get("env").and_then(Value::as_array);
                for var in env.into_iter().flatten() {
                    let name = var.get("name").and_then(Value::as_str).unwrap_or_default();
                    let literal = var
                        .get("value")
                        .and_then(Value::as_str)
                        .is_some_and(|v| !v.is_empty());
                    if literal && names.contains(&name) {
                        self.findings.push(Finding {
                            namespace: text("/metadata/namespace").to_string(),
                            pod: text("/metadata/name").to_string(),
                            owner: owner.to_string(),
                            container: c
                                .get("name")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_string(),
                            env: name.to_string(),
                        });
                    }
                }
            }
        }
    }

    /// Sorted for a stable report.
    pub fn finish(&mut self) {
        self.findings.sort_by(|a, b| {
            (&a.namespace, &a.pod, &a.container, &a.env).cmp(&(
                &b.namespace,
                &b.pod,
                &b.container,
                &b.env,
            ))
        });
    }

    pub fn found(&self) -> bool {
        !self.findings.is_empty()
    }

    /// The findings as a table, and a summary line.
    pub fn table(&self) -> String {
        let header = ["NAMESPACE", "POD", "OWNER", "CONTAINER", "ENV"];
        let rows: Vec<[&str; 5]> = (self.findings.iter())
            .map(|f| [&*f.namespace, &*f.pod, &*f.owner, &*f.container, &*f.env])
            .collect();
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.len());
            }
        }
        let mut out = String::new();
        if !rows.is_empty() {
            for row in std::iter::once(&header).chain(&rows) {
                let line: Vec<String> = (row.iter().zip(widths))
                    .map(|(cell, w)| format!("{cell:<w$}"))
                    .collect();
                let _ = writeln!(out, "{}", line.join("  ").trim_end());
            }
            out.push('\n');
        }
        let pods: std::collections::BTreeSet<(&str, &str)> = (self.findings.iter())
            .map(|f| (f.namespace.as_str(), f.pod.as_str()))
            .collect();
        let _ = writeln!(
            out,
            "{} pods scanned, {} carry a literal value in a credential env variable (values not shown; move them to a Secret)",
            self.pods_scanned,
            pods.len()
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MARKER: &str = "planted-marker-6f1d2c";

    fn pod(env: Value, phase: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "models", "name": "p"},
            "spec": {"containers": [{"name": "kserve-container", "env": env}],
                     "initContainers": [{"name": "storage-initializer", "env": [
                        {"name": "AWS_SECRET_ACCESS_KEY", "value": MARKER}]}]},
            "status": {"phase": phase}})
    }

    #[test]
    fn literal_values_are_found_and_never_kept() {
        let mut r = CredentialReport::default();
        let env = json!([
            {"name": "HF_TOKEN", "value": MARKER},
            {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "AZURE_CLIENT_SECRET", "value": ""},
            {"name": "MY_TOKEN", "value": MARKER},
        ]);
        r.add(&pod(env, "Running"), "ReplicaSet/p-1");
        r.finish();
        let found: Vec<(&str, &str)> = (r.findings.iter())
            .map(|f| (f.container.as_str(), f.env.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("kserve-container", "HF_TOKEN"),
                ("storage-initializer", "AWS_SECRET_ACCESS_KEY")
            ]
        );
        assert_eq!(r.findings[0].owner, "ReplicaSet/p-1");
        assert!(!r.table().contains(MARKER));
        assert!(!serde_json::to_string(&r).unwrap().contains(MARKER));
        assert!(
            r.table().contains("1 pods scanned, 1 carry"),
            "{}",
            r.table()
        );
    }

    #[test]
    fn finished_pods_and_other_kinds_are_passed_over() {
        let mut r = CredentialReport::default();
        r.add(&pod(json!([]), "Succeeded"), "");
        r.add(
            &json!({"apiVersion": "v1", "kind": "Secret", "data": {"HF_TOKEN": "x"}}),
            "",
        );
        assert_eq!(r, CredentialReport::default());
        assert!(!r.found());
        assert_eq!(r.table(), "0 pods scanned, 0 carry a literal value in a credential env variable (values not shown; move them to a Secret)\n");
    }
}
