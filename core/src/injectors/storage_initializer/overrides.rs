//! Per-pod storage-initializer requests and limits, from our own
//! `kserve-injector.io/storage-initializer-{cpu,memory}-{request,limit}`
//! annotations (KServe copies an InferenceService's annotations onto its
//! pods). They are applied last, over the ConfigMap's values and a
//! ClusterStorageContainer's, to whichever storage-initializer we build.

use crate::constants::{
    INIT_CPU_LIMIT_ANNOTATION, INIT_CPU_REQUEST_ANNOTATION, INIT_MEMORY_LIMIT_ANNOTATION,
    INIT_MEMORY_REQUEST_ANNOTATION,
};
use crate::injectors::InjectError;
use crate::pod::WorkingSet;
use crate::quantity;
use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::cmp::Ordering;

const ACCEPTED: &str = "a Kubernetes quantity such as 500m, 2, 512Mi or 4Gi";

/// One resource's pair of annotations.
struct Pair {
    resource: &'static str,
    request: &'static str,
    limit: &'static str,
}

const PAIRS: [Pair; 2] = [
    Pair {
        resource: "cpu",
        request: INIT_CPU_REQUEST_ANNOTATION,
        limit: INIT_CPU_LIMIT_ANNOTATION,
    },
    Pair {
        resource: "memory",
        request: INIT_MEMORY_REQUEST_ANNOTATION,
        limit: INIT_MEMORY_LIMIT_ANNOTATION,
    },
];

/// The pod's overrides, canonical quantities (as KServe writes the
/// ConfigMap's); `None` where the pod sets no annotation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct InitResources {
    /// Per [`PAIRS`] entry: (request, limit).
    values: [(Option<String>, Option<String>); 2],
}

impl InitResources {
    /// Reads and validates the annotations; a bad quantity is denied with
    /// the annotation's name and the accepted form.
    pub(crate) fn from_pod(
        pod: &WorkingSet<'_>,
        injector: &'static str,
    ) -> Result<Self, InjectError> {
        let read = |annotation: &str| -> Result<Option<String>, InjectError> {
            let Some(raw) = pod.annotation(annotation) else {
                return Ok(None);
            };
            quantity::canonicalize(raw).map(Some).map_err(|e| {
                InjectError::caused_by(
                    injector,
                    format!("annotation {annotation}: {raw:?} is not a quantity ({e}); expected {ACCEPTED}"),
                    e,
                )
            })
        };
        let mut values: [(Option<String>, Option<String>); 2] = Default::default();
        for (slot, pair) in values.iter_mut().zip(&PAIRS) {
            *slot = (read(pair.request)?, read(pair.limit)?);
        }
        Ok(Self { values })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.values.iter().all(|(r, l)| r.is_none() && l.is_none())
    }

    /// Writes the overrides into `container`'s resources, then checks each
    /// resource the pod set: its limit must not be below its request,
    /// wherever the other value came from.
    pub(crate) fn apply(
        &self,
        container: &mut Container,
        injector: &'static str,
    ) -> Result<(), InjectError> {
        if self.is_empty() {
            return Ok(());
        }
        let resources = container.resources.get_or_insert_with(Default::default);
        for ((request, limit), pair) in self.values.iter().zip(&PAIRS) {
            let key = pair.resource.to_string();
            if let Some(v) = request {
                (resources.requests.get_or_insert_with(Default::default))
                    .insert(key.clone(), Quantity(v.clone()));
            }
            if let Some(v) = limit {
                (resources.limits.get_or_insert_with(Default::default))
                    .insert(key.clone(), Quantity(v.clone()));
            }
            if request.is_none() && limit.is_none() {
                continue;
            }
            let get = |map: &Option<std::collections::BTreeMap<String, Quantity>>| {
                map.as_ref().and_then(|m| m.get(&key)).map(|q| q.0.clone())
            };
            let (Some(req), Some(lim)) = (get(&resources.requests), get(&resources.limits)) else {
                continue;
            };
            // A value we cannot order came from the ConfigMap or a
            // ClusterStorageContainer; the API server judges it.
            if quantity::compare(&lim, &req) != Ok(Ordering::Less) {
                continue;
            }
            let message = if limit.is_some() {
                format!(
                    "annotation {}: the {} limit {lim:?} is below its request {req:?}; expected {ACCEPTED}, no lower than the request",
                    pair.limit, pair.resource
                )
            } else {
                format!(
                    "annotation {}: the {} request {req:?} is above its limit {lim:?}; expected {ACCEPTED}, no higher than the limit (or set {} too)",
                    pair.request, pair.resource, pair.limit
                )
            };
            return Err(InjectError::new(injector, message));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::WorkingSet;
    use serde_json::{json, Map, Value};

    fn container(cpu: (&str, &str), memory: (&str, &str)) -> Container {
        let pair = |c: &str, m: &str| {
            Some(
                [("cpu", c), ("memory", m)]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect(),
            )
        };
        Container {
            resources: Some(k8s_openapi::api::core::v1::ResourceRequirements {
                requests: pair(cpu.0, memory.0),
                limits: pair(cpu.1, memory.1),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn read(annotations: &[(&str, &str)]) -> Result<InitResources, InjectError> {
        let map: Map<String, Value> = (annotations.iter())
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let pod = json!({"metadata": {"annotations": map}, "spec": {"containers": []}});
        let view = crate::view::pod_from_value(&pod).expect("a pod the view reads");
        InitResources::from_pod(&WorkingSet::new(view), "storage-initializer")
    }

    #[test]
    fn no_annotation_changes_nothing() {
        let o = read(&[]).unwrap();
        assert!(o.is_empty());
        let mut c = container(("100m", "1"), ("100Mi", "1Gi"));
        let before = c.clone();
        o.apply(&mut c, "storage-initializer").unwrap();
        assert_eq!(c, before);
    }

    #[test]
    fn annotations_override_in_canonical_form() {
        let o = read(&[
            (INIT_MEMORY_LIMIT_ANNOTATION, "16384Mi"),
            (INIT_CPU_REQUEST_ANNOTATION, "0.5"),
        ])
        .unwrap();
        let mut c = container(("100m", "1"), ("100Mi", "1Gi"));
        o.apply(&mut c, "storage-initializer").unwrap();
        assert_eq!(c, container(("500m", "1"), ("100Mi", "16Gi")));
    }

    #[test]
    fn bad_quantity_names_the_annotation_and_the_form() {
        let e = read(&[(INIT_CPU_LIMIT_ANNOTATION, "two")]).unwrap_err();
        assert!(
            e.message.starts_with(&format!(
                "annotation {INIT_CPU_LIMIT_ANNOTATION}: \"two\" is not a quantity"
            )),
            "{}",
            e.message
        );
        assert!(e.message.contains("500m, 2, 512Mi or 4Gi"), "{}", e.message);
    }

    #[test]
    fn limit_below_request_names_the_annotation_that_set_it() {
        let mut c = container(("100m", "1"), ("100Mi", "1Gi"));
        let e = read(&[(INIT_MEMORY_LIMIT_ANNOTATION, "50Mi")])
            .unwrap()
            .apply(&mut c, "storage-initializer")
            .unwrap_err();
        assert!(e.message.starts_with(&format!("annotation {INIT_MEMORY_LIMIT_ANNOTATION}: the memory limit \"50Mi\" is below its request \"100Mi\"")), "{}", e.message);
        let mut c = container(("100m", "1"), ("100Mi", "1Gi"));
        let e = read(&[(INIT_CPU_REQUEST_ANNOTATION, "2")])
            .unwrap()
            .apply(&mut c, "storage-initializer")
            .unwrap_err();
        assert!(e.message.starts_with(&format!("annotation {INIT_CPU_REQUEST_ANNOTATION}: the cpu request \"2\" is above its limit \"1\"")), "{}", e.message);
        // Equal is allowed, and so is a limit raised together with the request.
        let mut c = container(("100m", "1"), ("100Mi", "1Gi"));
        read(&[(INIT_CPU_REQUEST_ANNOTATION, "1000m")])
            .unwrap()
            .apply(&mut c, "storage-initializer")
            .unwrap();
        read(&[
            (INIT_CPU_REQUEST_ANNOTATION, "4"),
            (INIT_CPU_LIMIT_ANNOTATION, "4"),
        ])
        .unwrap()
        .apply(&mut c, "storage-initializer")
        .unwrap();
    }
}
