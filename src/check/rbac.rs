//! The RBAC `serve`'s cluster lookups need, from its flags (the verbs of
//! docs/security.md: `get` on a kind read on a cache miss, `list` and
//! `watch` on a kind it watches, ClusterStorageContainers always listed
//! whole), and what `check` concludes from the SubjectAccessReviews asked
//! for the Deployment's ServiceAccount. Pure.

use super::report::Line;
use crate::lookups::{Kind, LookupMode};
use crate::server::args::LookupFlags;

/// One permission: a verb on a resource, in a namespace or cluster-wide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Access {
    pub verb: &'static str,
    pub group: &'static str,
    pub resource: &'static str,
    /// `None`: every namespace (or a cluster-scoped resource).
    pub namespace: Option<String>,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let resource = match self.group {
            "" => self.resource.to_string(),
            group => format!("{}.{group}", self.resource),
        };
        match &self.namespace {
            Some(ns) => write!(f, "{} {resource} in {ns}", self.verb),
            None => write!(f, "{} {resource} cluster-wide", self.verb),
        }
    }
}

fn group(kind: Kind) -> &'static str {
    match kind {
        Kind::ServiceAccounts | Kind::Secrets => "",
        Kind::StorageContainers | Kind::InferenceServices => "serving.kserve.io",
    }
}

/// What the lookups of `lookups` need; nothing when they are off.
/// `auto` counts as on: in a pod with a ServiceAccount token it is.
pub(super) fn needed(lookups: &LookupFlags) -> Vec<Access> {
    if lookups.cluster_lookups == LookupMode::Off || lookups.objects.is_some() {
        return Vec::new();
    }
    let scopes: Vec<Option<String>> = match lookups.namespaces.as_slice() {
        [] => vec![None],
        some => some.iter().cloned().map(Some).collect(),
    };
    let mut out = Vec::new();
    for kind in Kind::ALL {
        let watched = lookups.watch_kinds.contains(&kind);
        let verbs: &[&'static str] = match (kind, watched) {
            (Kind::StorageContainers, true) => &["list", "watch"],
            (Kind::StorageContainers, false) => &["list"],
            (_, true) => &["get", "list", "watch"],
            (_, false) => &["get"],
        };
        let kind_scopes = if kind == Kind::StorageContainers {
            vec![None]
        } else {
            scopes.clone()
        };
        for namespace in kind_scopes {
            for verb in verbs {
                out.push(Access {
                    verb,
                    group: group(kind),
                    resource: kind.label(),
                    namespace: namespace.clone(),
                });
            }
        }
    }
    out
}

/// What the API server said of one access (a SubjectAccessReview).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    Allowed,
    Denied,
    /// The review could not be asked; why, as the API server or the
    /// client said it.
    Unknown(String),
}

/// The RBAC line for `account` from each needed access and the API
/// server's verdict on it.
pub(super) fn rbac_line(account: &str, results: &[(Access, Verdict)]) -> Line {
    const ID: &str = "rbac.lookups";
    if results.is_empty() {
        return Line::pass(
            ID,
            format!("cluster lookups are off: {account} needs no RBAC"),
        );
    }
    let denied: Vec<String> = results
        .iter()
        .filter(|(_, v)| *v == Verdict::Denied)
        .map(|(a, _)| a.to_string())
        .collect();
    let unknown: Vec<String> = results
        .iter()
        .filter_map(|(a, v)| match v {
            Verdict::Unknown(why) => Some(format!("{a} ({why})")),
            _ => None,
        })
        .collect();
    if !denied.is_empty() {
        return Line::fail(
            ID,
            format!("{account} may not {}: serve's lookups fail (watch errors, or pods denied with 'cluster lookup of … failed')", denied.join(", ")),
            "apply the ClusterRole and binding of manifests/rbac (or the Roles of components/namespaced, the chart's clusterLookups) to this ServiceAccount",
        );
    }
    if !unknown.is_empty() {
        return Line::warn(
            ID,
            format!("could not ask the API server about {}", unknown.join(", ")),
            "run check as a user allowed to create subjectaccessreviews (authorization.k8s.io)",
        );
    }
    Line::pass(
        ID,
        format!("{account} may do all {} its lookups need", results.len()),
    )
}
